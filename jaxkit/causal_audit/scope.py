"""Scope conditions on a user's table: where each method fails, and what the data show.

The position paper (Paper 6) asks that identifiability and consistency assumptions be
reported with their failure modes and scope conditions. For a user's table this module
measures the data properties the registered assumptions (:mod:`.methods`) speak about
and prints, per method and assumption, the property checked, its value on the data, a
status and the symptom of a failure:

* Gaussianity per variable: skewness ``g1``, excess kurtosis ``g2`` and the
  Jarque-Bera statistic ``JB = n (g1^2 / 6 + g2^2 / 24)`` (asymptotically chi^2 with 2
  degrees of freedom; Jarque & Bera 1980); a variable is "Gaussian-looking" when its
  JB p-value is at least ``alpha``;
* the variance spread ``max Var / min Var`` (near 1: the columns look standardised, the
  variance order carries nothing; Reisach et al. 2021);
* var- and R^2-sortability (Reisach et al. 2021, 2023) of each method's graph on all
  rows (there is no true graph: a graph that is almost perfectly var-sortable on raw
  data is what a scale-reading method returns);
* nonlinearity: per variable, the gain in R^2 from adding the squares of the other
  variables to its linear regression on them (the largest gain is reported);
* row dependence: the largest lag-1 autocorrelation over the variables (rows in file
  order);
* the environments given by the intervention column, and ``n / d``.

A second table, one row per *scope condition* (:func:`condition_rows`), says where each
method fails and whether your data are there: Gaussian-looking variables (LiNGAM-type
methods unidentifiable), a method's graph following the variance or R^2 order
(sortability >= ``SORT_BAR``: NOTEARS-type and sort-and-regress results may be artefacts
of the scale; Reisach et al. 2021, 2023), few rows per environment, more than one target
per environment and fewer interventional environments than variables (pooled ICA-LiNGAM
leaves the atomic setting it needs: F1 0.67 vs 0.99 with two targets in the recorded
pooled-lingam ablations), and few rows per variable.

Assumptions that data cannot check (causal sufficiency, faithfulness, no measurement
error, perfect interventions) are listed as "not checkable from data": the table makes
the untestable part explicit instead of dropping it.
"""

from __future__ import annotations

import math

import numpy as np

from .methods import get_method

__all__ = ["SYMPTOMS", "data_properties", "graph_sortability", "scope_rows", "markdown",
           "condition_rows", "SORT_BAR", "FEW_PER_ENV"]

#: sortability of a method's graph from which its result may be an artefact of the scale
SORT_BAR = 0.9
#: rows per environment below which pooled / interventional fits are unreliable (the
#: pooled-lingam samples sweep: F1 falls below 0.9 under 100 rows per environment at d=20)
FEW_PER_ENV = 100

#: what a failure of each assumption looks like (from the grid's cells and the papers)
SYMPTOMS = {
    "linear": "nonlinear mechanisms: linear fits mis-orient or miss edges (grid: "
              "mechanism=nonlinear)",
    "non-Gaussian": "Gaussian noise: ICA / DirectLiNGAM orientations are arbitrary, F1 "
                    "near chance (grid: noise=gaussian)",
    "non-Gaussian sources": "Gaussian noise and no pooled interventions: as LiNGAM, "
                            "orientations arbitrary",
    "sufficiency": "hidden confounders: spurious edges between their children (grid: "
                   "confounders>0)",
    "no measurement error": "noisy measurements: orientations reverse along chains "
                            "(grid: meas_error>0)",
    "i.i.d.": "time-dependent rows: spurious edges, invalid tests (grid: ar>0)",
    "faithfulness": "path cancellation: edges missed by independence tests (grid: "
                    "faithfulness=near/exact)",
    "raw scale": "rescaled data: the variance order carries nothing, Var-SortnRegress "
                 "falls to chance (Reisach et al. 2021)",
    "equal noise variances": "unequal noise variances: least-squares scores (NOTEARS, "
                             "Var-SortnRegress) follow the variances, not the graph",
    "one distribution": "pooled environments: the rows are a mixture; tests and fits "
                        "see dependence that no single distribution has",
    "known targets": "targets unknown: the method cannot use the interventions",
    "perfect interventions": "soft interventions: the essential graph is over-oriented "
                             "(grid: intervention=scale/shift)",
    "R2-sortable": "no R^2 order (iSCM-like data): R2-SortnRegress falls to chance "
                   "(Ormaniec et al. 2025)",
    "none": "a chance-level floor: fails everywhere by design",
}
UNCHECKABLE = ("sufficiency", "faithfulness", "no measurement error", "perfect interventions",
               "equal noise variances")


def _jarque_bera(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column: skewness, excess kurtosis and the Jarque-Bera p-value."""
    from scipy import stats as st

    n = x.shape[0]
    z = x - x.mean(0)
    m2 = (z ** 2).mean(0)
    g1 = (z ** 3).mean(0) / m2 ** 1.5
    g2 = (z ** 4).mean(0) / m2 ** 2 - 3.0
    jb = n * (g1 ** 2 / 6.0 + g2 ** 2 / 24.0)
    return g1, g2, st.chi2.sf(jb, 2)


def _r2(y: np.ndarray, a: np.ndarray) -> float:
    a = np.column_stack([np.ones(len(y)), a])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    r = y - a @ coef
    return 1.0 - float(r.var() / y.var())


def data_properties(x, env=None, *, alpha: float = 0.05, targets=None) -> dict:
    """The measured properties of a table (module docstring).

    Args:
        x: rows ``(n, d)``, finite, no constant column.
        env: environment of each row ``(n,)`` (0 = observational; None: one).
        alpha: level of the per-variable Jarque-Bera test.
        targets: ``(k, d)`` bool, the intervened variables of each environment (None:
            unknown).

    Returns:
        ``dict(n, d, n_over_d, skew, excess_kurtosis, jb_p, gaussian (d,) bool,
        n_non_gaussian, variance (d,), variance_ratio, nonlinear_gain, lag1, n_envs,
        min_env_rows, max_targets (None without targets), n_targeted (None without
        targets))``.
    """
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[0] < 3 or x.shape[1] < 2:
        raise ValueError(f"`x` must be a table of >= 3 rows and >= 2 columns; got shape "
                         f"{x.shape}")
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha}")
    n, d = x.shape
    if env is not None and np.shape(env) != (n,):
        raise ValueError(f"`env` must have one entry per row ({n}); got shape "
                         f"{np.shape(env)}")
    if targets is not None and (np.ndim(targets) != 2 or np.shape(targets)[1] != d):
        raise ValueError(f"`targets` must be (environments, {d}); got shape "
                         f"{np.shape(targets)}")
    g1, g2, p = _jarque_bera(x)
    var = x.var(0)
    z = (x - x.mean(0)) / x.std(0)
    gains = []
    for j in range(d):
        others = np.delete(z, j, axis=1)
        lin = _r2(z[:, j], others)
        gains.append(max(0.0, _r2(z[:, j], np.column_stack([others, others ** 2])) - lin)
                     if n > 2 * (d - 1) + 2 else math.nan)
    lag1 = np.array([np.corrcoef(z[:-1, j], z[1:, j])[0, 1] for j in range(d)])
    gauss = p >= alpha
    return dict(n=n, d=d, n_over_d=n / d, skew=g1, excess_kurtosis=g2, jb_p=p,
                gaussian=gauss, n_non_gaussian=int((~gauss).sum()), variance=var,
                variance_ratio=float(var.max() / var.min()),
                nonlinear_gain=float(np.nanmax(gains)) if np.isfinite(gains).any()
                else math.nan, lag1=float(np.nanmax(np.abs(lag1))),
                n_envs=1 if env is None else int(np.unique(np.asarray(env)).size),
                min_env_rows=n if env is None else
                int(np.unique(np.asarray(env), return_counts=True)[1].min()),
                max_targets=None if targets is None else
                int(np.asarray(targets, bool).sum(axis=1).max()),
                n_targeted=None if targets is None else
                int(np.asarray(targets, bool).any(axis=0).sum()),
                alpha=alpha)


def graph_sortability(x, graph) -> tuple[float, float]:
    """``(var-sortability, R^2-sortability)`` of the directed edges of ``graph``
    (``graph[i, j] != 0``: ``j -> i``; edges given both ways are dropped) on ``x``;
    NaN when no directed edge is left."""
    from jaxkit.kernels.sem import sortability as srt

    g = np.asarray(graph) != 0
    g = g & ~g.T
    if not g.any():
        return math.nan, math.nan
    x = np.asarray(x, float)
    b = g.astype(float)
    return (float(srt.var_sortability(x, b)), float(srt.r2_sortability(x, b)))


def _status(name: str, props: dict, *, targets_given: bool) -> tuple[str, str, str]:
    """``(property, measured, status)`` of one assumption on the data."""
    d, n = props["d"], props["n"]
    if name in ("non-Gaussian", "non-Gaussian sources"):
        k = props["n_non_gaussian"]
        meas = f"{k} of {d} variables non-Gaussian (Jarque-Bera p < {props['alpha']:g})"
        pooled = name == "non-Gaussian sources" and props["n_envs"] > 1
        st = ("holds (pooled environments)" if pooled else
              "violated" if k == 0 else "doubtful" if k < d - 1 else "consistent")
        return "Gaussianity per variable", meas, st
    if name == "linear":
        g = props["nonlinear_gain"]
        st = "not checked (too few rows)" if not np.isfinite(g) else \
            "doubtful" if g > 0.05 else "consistent"
        return "R^2 gain from squared regressors (largest)", f"{g:.3g}", st
    if name == "i.i.d.":
        r, bar = props["lag1"], max(0.1, 3.0 / math.sqrt(n))
        return ("lag-1 autocorrelation (largest)", f"{r:.3g} (bar {bar:.2g})",
                "violated" if r > bar else "consistent")
    if name == "raw scale":
        v = props["variance_ratio"]
        return ("variance spread max/min", f"{v:.3g}",
                "violated (columns look standardised)" if v < 1.1 else "consistent")
    if name == "one distribution":
        k = props["n_envs"]
        return "environments", str(k), "consistent" if k == 1 else "violated"
    if name == "known targets":
        k = props["n_envs"]
        return ("intervention column", "given" if targets_given else "none",
                "consistent" if targets_given or k == 1 else "violated")
    if name == "R2-sortable":
        return ("R^2-sortability of the method's graph", "see the graph table",
                "not checkable without the true graph")
    if name == "none":
        return "-", "-", "a floor (never identifies)"
    return "-", "-", "not checkable from data (assumed)"


def scope_rows(props: dict, methods, *, targets_given: bool = False) -> list[list[str]]:
    """One row per (method, assumption): method, assumption, property checked, measured
    value, status, failure symptom; then one row on ``n / d`` for every method."""
    rows = []
    for name in methods:
        rec = get_method(name).record
        for a in rec.assumptions if rec is not None else ():
            prop, meas, st = _status(a.name, props, targets_given=targets_given)
            rows.append([name, a.name, prop, meas, st, SYMPTOMS.get(a.name, a.text)])
    r = props["n_over_d"]
    rows.append(["(all)", "enough rows", "n / d", f"{r:.3g}",
                 "small (< 10)" if r < 10 else "consistent",
                 "few rows per variable: unstable graphs (see the edge frequencies)"])
    return rows


#: the methods each scope condition breaks (names of :mod:`.methods`)
_LINGAM = ("ica-lingam", "direct-lingam", "pooled-ica-lingam")
_SCALE = ("notears", "var-sort-regress")
_R2 = ("r2-sort-regress",)
_ENVS = ("pooled-ica-lingam", "gies")
_POOLED = ("pooled-ica-lingam",)


def _affects(family, methods) -> str:
    hit = [m for m in family if m in methods]
    return ", ".join(hit) if hit else f"none run here ({', '.join(family)})"


def _sort_row(label, family, methods, sort: dict, i: int, failure: str) -> list[str]:
    vals = {m: v[i] for m, v in sort.items() if np.isfinite(v[i])}
    if not vals:
        return [label, _affects(family, methods), "no method graph with directed edges",
                "not measurable", failure]
    high = [m for m, v in vals.items() if v >= SORT_BAR]
    meas = "; ".join(f"{m} {v:.2f}" for m, v in vals.items())
    return [label, _affects(family, methods), meas,
            f"present (graphs of {', '.join(high)})" if high else "absent", failure]


def condition_rows(props: dict, methods, sort: dict | None = None) -> list[list[str]]:
    """The scope conditions measured on the data (module docstring): one row per
    condition with the methods it breaks (those of ``methods`` first), the measured
    value, a status ("present": expect those methods to fail here; "absent"; "partly";
    "not measurable") and the failure.

    Args:
        props: :func:`data_properties` of the table (with ``targets`` for the
            intervention rows).
        methods: the method names run on the table.
        sort: ``{method: (var-sortability, R^2-sortability)}`` of each method's graph
            (:func:`graph_sortability`); None: not measured.

    Returns:
        Rows ``[condition, affected methods, measured, status, failure]``.
    """
    methods = tuple(methods)
    d, k = props["d"], props["n_non_gaussian"]
    gauss = d - k
    rows = [["Gaussian noise (variables Gaussian-looking, Jarque-Bera p >= "
             f"{props['alpha']:g})", _affects(_LINGAM, methods),
             f"{gauss} of {d} variables Gaussian-looking",
             "present" if k == 0 else "partly" if gauss else "absent",
             "LiNGAM is not identifiable with Gaussian noise: orientations arbitrary "
             "(pooled ICA-LiNGAM needs the environments to make sources non-Gaussian)"]]
    sort = sort or {}
    rows.append(_sort_row(f"graph follows the variance order (var-sortability >= "
                          f"{SORT_BAR:g})", _SCALE, methods, sort, 0,
                          "the scale-reading methods (NOTEARS, Var-SortnRegress) return "
                          "such graphs on raw data whatever the mechanism: their results may "
                          "be artefacts that vanish after standardising (the scale check)"))
    rows.append(_sort_row(f"graph follows the R^2 order (R^2-sortability >= {SORT_BAR:g})",
                          _R2, methods, sort, 1,
                          "R^2-SortnRegress succeeds only where R^2 rises along the order; "
                          "its graph may mirror that order, not the mechanisms"))
    n_envs, few = props["n_envs"], props["min_env_rows"]
    rows.append([f"few rows per environment (< {FEW_PER_ENV})", _affects(_ENVS, methods),
                 f"{few} rows in the smallest of {n_envs} environment(s)",
                 "not measurable (one environment)" if n_envs == 1 else
                 "present" if few < FEW_PER_ENV else "absent",
                 "environment-wise statistics too noisy: pooled sources near-Gaussian, "
                 "GIES's interventional scores unstable"])
    mt, cov = props.get("max_targets"), props.get("n_targeted")
    rows.append(["more than one target per environment", _affects(_POOLED, methods),
                 "no intervention column" if mt is None else f"up to {mt} per environment",
                 "not measurable" if mt is None else "present" if mt > 1 else "absent",
                 "outside the atomic setting pooled ICA-LiNGAM's sources are dependent: "
                 "F1 0.67 vs 0.99 (recorded pooled-lingam ablation, d = 20)"])
    rows.append(["fewer intervened variables than variables", _affects(_POOLED, methods),
                 "no intervention column" if cov is None else f"{cov} of {d} intervened",
                 "not measurable" if cov is None else "present" if cov < d else "absent",
                 "untargeted variables keep Gaussian sources: pooled ICA-LiNGAM cannot "
                 "orient them"])
    r = props["n_over_d"]
    rows.append(["few rows per variable (n / d < 10)", "all", f"{r:.3g}",
                 "present" if r < 10 else "absent",
                 "unstable graphs (see the edge frequencies)"])
    return rows


def markdown(props: dict, names, methods, graphs: dict, x, *,
             targets_given: bool = False) -> str:
    """The scope section of the user-data report: the per-variable Gaussianity table,
    the sortability of each method's graph (``graphs``: ``{method: (d, d)}``) and the
    scope table."""
    from jaxkit.report import markdown_table

    per_var = [[v, float(props["variance"][j]), float(props["skew"][j]),
                float(props["excess_kurtosis"][j]), float(props["jb_p"][j]),
                "yes" if props["gaussian"][j] else "no"] for j, v in enumerate(names)]
    sort = {m: graph_sortability(x, g) for m, g in graphs.items()}
    srt = [[m, *v] for m, v in sort.items()]
    return "\n".join([
        "## Scope conditions on your data", "",
        f"{props['n']} rows, {props['d']} variables (n/d = {props['n_over_d']:.3g}), "
        f"{props['n_envs']} environment(s); variance spread max/min "
        f"{props['variance_ratio']:.3g}; largest lag-1 autocorrelation {props['lag1']:.3g}; "
        f"largest R^2 gain from squared regressors {props['nonlinear_gain']:.3g}.", "",
        markdown_table(["variable", "variance", "skewness", "excess kurtosis",
                        "Jarque-Bera p", "Gaussian-looking"], per_var), "",
        "Sortability of each method's graph on all rows (no true graph: near 1 on raw "
        "data is what a scale-reading method returns; NaN: no directed edge):", "",
        markdown_table(["method", "var-sortability", "R^2-sortability"], srt), "",
        "Scope conditions: where each method fails, and whether your data are there "
        "('present': expect the listed methods to fail on these data).", "",
        markdown_table(["condition", "methods it breaks", "measured on your data",
                        "status", "failure"], condition_rows(props, methods, sort)), "",
        "Where each method fails: its declared assumptions, the property of your data "
        "that speaks to each, and the symptom of a failure.", "",
        markdown_table(["method", "assumption", "property", "measured", "status",
                        "failure symptom"],
                       scope_rows(props, methods, targets_given=targets_given))])
