"""What the grid shows: heatmaps with scopes, ranking instability, sort-and-regress
floors beating methods, consistency rates, and per-method findings.

All functions take :class:`~.grid.CellResult` values and return arrays,
:class:`jaxkit.stats.Verdict` values and the typed results of :mod:`.results` (no
plotting or text layout: that is :mod:`.report`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jaxkit.stats import Verdict, bootstrap_interval, holm_reject, paired_difference, superiority

from .axes import CellSpec
from .grid import CellResult, Pair, pair_cells
from .methods import get_method, in_scope
from .results import Consistency, FloorWin, RankComparison, Reversal, ScopeFindings

__all__ = ["heatmap", "kendall_tau", "ranking", "rank_comparison", "floor_wins",
           "consistency", "scope_findings", "mean_sd", "p_above", "p_below",
           "distinct", "reversals", "reversal_verdict"]


def heatmap(results: dict[CellSpec, CellResult], base: CellSpec, pair: Pair,
            method: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mean F1, in scope)`` of ``method`` over the cells of ``pair``, each
    ``(len(row_values), len(col_values))``; NaN where the method did not run."""
    specs = pair_cells(base, pair)
    m = get_method(method)
    val = np.array([[results[s].mean_f1(method) for s in row] for row in specs])
    scope = np.array([[in_scope(m, s) for s in row] for row in specs])
    return val, scope


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b between two score vectors (rankings by score); NaN when one is
    constant or has fewer than 2 finite shared entries.

    .. math:: \\tau_b = (C - D) / \\sqrt{(C + D + T_a)(C + D + T_b)}

    with ``C`` / ``D`` the concordant / discordant pairs and ``T_a``, ``T_b`` the pairs
    tied in only one of the two.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 2:
        return math.nan
    sa = np.sign(a[:, None] - a[None, :])
    sb = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(a.size, 1)
    sa, sb = sa[iu], sb[iu]
    c = np.sum(sa * sb > 0)
    d = np.sum(sa * sb < 0)
    ta = np.sum((sa == 0) & (sb != 0))
    tb = np.sum((sb == 0) & (sa != 0))
    den = math.sqrt((c + d + ta) * (c + d + tb))
    return math.nan if den == 0 else float((c - d) / den)


def ranking(result: CellResult, methods: Sequence[str]) -> list[str]:
    """``methods`` sorted by mean F1 on the cell, best first (NaN last)."""
    def key(m):
        v = result.mean_f1(m)
        return (math.isnan(v), -v if not math.isnan(v) else 0.0)

    return sorted(methods, key=key)


def rank_comparison(key, a: CellResult, b: CellResult, methods: Sequence[str], *,
                    n_boot: int = 500, margin: float = 0.9) -> RankComparison:
    """Kendall tau between the method rankings (by mean F1) of two benchmark choices,
    with a percentile bootstrap interval over datasets (resampled jointly: the cells
    share their datasets' graphs and noise draws), and whether the rankings are stable.

    Verdict on "the ranking changes with the benchmark choice" (the
    :class:`~.results.RankComparison`'s ``tau``): "yes" when the 95% interval lies below
    ``margin``, "no" when it lies above it, else "not shown".
    """
    fa = np.stack([a.f1[m] for m in methods], 1)
    fb = np.stack([b.f1[m] for m in methods], 1)
    rows = np.nonzero(np.isfinite(fa).all(1) & np.isfinite(fb).all(1))[0]

    def tau(idx):
        idx = np.asarray(idx, int)
        return kendall_tau(fa[idx].mean(0), fb[idx].mean(0))

    if rows.size < 2:
        v = Verdict("not shown", math.nan, math.nan, math.nan, int(rows.size),
                    "Kendall tau: fewer than 2 datasets scored by every method")
    else:
        est, lo, hi = bootstrap_interval(key, rows, stat=tau, n_boot=n_boot)
        lo, hi = (lo, hi) if np.isfinite(lo) else (est, est)
        verdict = "yes" if hi < margin else "no" if lo > margin else "not shown"
        v = Verdict(verdict, est, lo, hi, int(rows.size),
                    f"Kendall tau of mean-F1 rankings, 95% bootstrap CI over {rows.size} "
                    f"datasets vs {margin:g}")
    return RankComparison(tau=v, rank_a=ranking(a, methods), rank_b=ranking(b, methods))


def floor_wins(results: dict[CellSpec, CellResult], methods: Sequence[str],
               floors: Sequence[str]) -> list[FloorWin]:
    """Cells where a sort-and-regress floor beats a method: paired superiority test of
    the per-dataset F1 difference (floor minus method) says "yes"."""
    out = []
    for spec, r in results.items():
        for m in methods:
            for f in floors:
                if m == f or m not in r.f1 or f not in r.f1:
                    continue
                v = superiority(paired_difference(r.f1[f], r.f1[m]))
                if v.verdict == "yes":
                    out.append(FloorWin(spec=spec, method=m, floor=f, diff=v.estimate,
                                        lo=v.lo, hi=v.hi))
    return out


def consistency(results: Sequence[CellResult], method: str) -> Consistency:
    """Error versus sample size: per dataset (the same graph at every ``n``), the
    least-squares slope of ``log(SHD + 1)`` on ``log n``; its mean is the fitted rate
    with a 95% t interval, and ``superiority(-slope)`` decides "the error falls with
    n". Also the pooled rate: the slope of ``log(mean SHD + 1)`` on ``log n``."""
    ns = np.array([r.spec.n for r in results], float)
    shd = np.stack([r.shd[method] for r in results], 0)  # (n_sizes, batch)
    ln = np.log(ns)
    y = np.log(shd + 1.0)
    lc = ln - ln.mean()
    slopes = (lc[:, None] * (y - y.mean(0))).sum(0) / (lc * lc).sum()
    mean_shd = np.nanmean(shd, 1)
    pooled = float(np.polyfit(ln, np.log(mean_shd + 1.0), 1)[0]) if np.isfinite(
        mean_shd).all() else math.nan
    return Consistency(ns=ns.astype(int).tolist(), mean_shd=mean_shd,
                       mean_f1=np.array([float(np.nanmean(r.f1[method])) for r in results]),
                       slopes=slopes, pooled_rate=pooled, falls=superiority(-slopes))


def mean_sd(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else math.nan


def scope_findings(results: dict[CellSpec, CellResult], method: str, *,
                   fail_below: float = 0.5,
                   succeed_above: float | None = None) -> ScopeFindings:
    """Where ``method`` fails inside its declared scope and succeeds outside it.

    ``fail_below``: a cell in scope with mean F1 below this is a failure in scope;
    ``succeed_above`` (default: the median mean F1 over the in-scope cells) is the bar
    an out-of-scope cell must clear to count as a success outside the scope.
    """
    m = get_method(method)
    rows = []
    for spec, r in results.items():
        v = r.mean_f1(method)
        if math.isnan(v):
            continue
        rows.append((spec, v, in_scope(m, spec)))
    ins = [v for _, v, s in rows if s]
    bar = succeed_above if succeed_above is not None else (
        float(np.median(ins)) if ins else math.inf)
    fail_in = sorted([(s, v) for s, v, sc in rows if sc and v < fail_below], key=lambda t: t[1])
    win_out = sorted([(s, v) for s, v, sc in rows if not sc and v >= bar],
                     key=lambda t: -t[1])
    broken = {}
    for s, _ in win_out:
        for a in m.record.assumptions:
            if not a.holds(s):
                broken[a.name] = broken.get(a.name, 0) + 1
    return ScopeFindings(n_cells=len(rows), n_in=len(ins),
                         in_mean=float(np.mean(ins)) if ins else math.nan, bar=bar,
                         fail_in=fail_in, win_out=win_out, broken=broken)


# ------------------------------------------------------------- tests that can fail


def _t_cdf(x, margin: float) -> float:
    """The t statistic's CDF of "mean of the finite ``x`` minus ``margin``" (nan with
    fewer than two values; a zero spread decides by the sign)."""
    from scipy import stats as st

    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return math.nan
    m, se = float(x.mean()) - margin, float(x.std(ddof=1)) / math.sqrt(x.size)
    if se == 0:
        return 1.0 if m > 0 else 0.0 if m < 0 else 0.5
    return float(st.t.cdf(m / se, x.size - 1))


def p_above(x, margin: float) -> float:
    """One-sided paired-t p-value of "the mean of ``x`` exceeds ``margin``" (null: mean
    <= margin); nan with fewer than two finite values."""
    c = _t_cdf(x, margin)
    return math.nan if math.isnan(c) else 1.0 - c


def p_below(x, margin: float) -> float:
    """One-sided paired-t p-value of "the mean of ``x`` lies below ``margin``"."""
    return _t_cdf(x, margin)


def distinct(methods: Sequence[str], cells: Sequence[CellResult]) -> list[str]:
    """``methods`` scored (>= 2 finite datasets) in every cell, each counted once: a
    method whose per-dataset F1 equals an earlier one's in every cell (the same fit, e.g.
    pooled ICA-LiNGAM without environments, or GIES without targets) is dropped."""
    keep: list[str] = []
    for m in methods:
        if not all(m in c.f1 and np.isfinite(c.f1[m]).sum() >= 2 for c in cells):
            continue
        if any(all(np.array_equal(c.f1[m], c.f1[k], equal_nan=True) for c in cells)
               for k in keep):
            continue
        keep.append(m)
    return keep


def reversals(a: CellResult, b: CellResult, methods: Sequence[str],
              margin: float) -> list[Reversal]:
    """Does the benchmark choice ``a`` -> ``b`` reverse a comparison? For every ordered
    pair ``(u, v)`` of ``methods`` the hypothesis "u beats v by more than ``margin`` F1 on
    ``a`` and v beats u by more than ``margin`` on ``b``": ``p`` is its intersection-union
    p-value (the larger of the two one-sided paired-t p-values: the null is "no such
    reversal"), ``p_not`` the p-value of "no such reversal" (one of the two gaps below
    the margin; Bonferroni over the two). Per-dataset differences on the datasets both
    methods scored."""
    out = []
    for u in methods:
        for v in methods:
            if u == v:
                continue
            da, db = a.f1[u] - a.f1[v], b.f1[v] - b.f1[u]
            pa, pb = p_above(da, margin), p_above(db, margin)
            qa, qb = p_below(da, margin), p_below(db, margin)
            p_not = min(1.0, 2 * np.nanmin([qa, qb])) if np.isfinite([qa, qb]).any() \
                else math.nan
            out.append(Reversal(
                u=u, v=v, gap_a=float(np.nanmean(da)) if np.isfinite(da).any() else math.nan,
                gap_b=float(np.nanmean(db)) if np.isfinite(db).any() else math.nan,
                p=max(pa, pb) if np.isfinite([pa, pb]).all() else math.nan, p_not=p_not))
    return out


def reversal_verdict(choices: Sequence[tuple[str, list[Reversal]]],
                     alpha: float = 0.025) -> tuple[str, str, str]:
    """``(verdict, measured, test)`` of "some benchmark choice reverses some comparison"
    over every hypothesis of every choice (``(name, reversals(...))``): "yes" when a
    reversal survives Holm's correction over all of them at one-sided ``alpha``; "no"
    when every hypothesis's absence is shown at ``alpha`` (intersection-union: no
    correction); else "not shown"."""
    hyps = [(name, h) for name, hs in choices for h in hs]
    if not hyps:
        return "not tested at this size", "-", ""
    rej = holm_reject([h.p for _, h in hyps], alpha)
    absent = all(np.isfinite(h.p_not) and h.p_not < alpha for _, h in hyps)
    verdict = "yes" if rej.any() else "no" if absent else "not shown"
    best_i = int(np.nanargmin([h.p if np.isfinite(h.p) else np.inf for _, h in hyps]))
    name, h = hyps[best_i]
    measured = (f"{int(rej.sum())} of {len(hyps)} reversals significant; strongest: "
                f"{name}: {h.u} over {h.v} by {h.gap_a:.3g}, then {h.v} over "
                f"{h.u} by {h.gap_b:.3g} (p={h.p:.2g})")
    test = (f"each ordered pair of methods, per choice: both gaps above the margin (two "
            f"one-sided paired t tests, intersection-union p); 'yes' if one survives Holm "
            f"over the {len(hyps)} at one-sided alpha {alpha:g}; 'no' if every reversal's "
            f"absence is shown at {alpha:g}")
    return verdict, measured, test
