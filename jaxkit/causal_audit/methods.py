"""Causal-discovery methods with their declared assumptions, and the method registry.

Every method is a :class:`Method`: a fit function and a :class:`MethodRecord` listing
the assumptions under which the method is identifiable and consistent (each an
:class:`Assumption` with a predicate on a :class:`~.axes.CellSpec`), with the citation.
A cell is *in scope* for a method when all its assumptions hold there; the report
outlines those cells, so a failure inside the scope and a success outside it are both
visible.

Two kinds of fit:

* ``"jax"``: ``fit(key, x, env, targets) -> adjacency`` for one dataset (pure, fixed
  shape); the grid runs it under ``jit(vmap(...))`` over the whole cell at once;
* ``"host"``: ``fit(x, env, targets) -> adjacency`` on NumPy arrays, one dataset at a
  time (the CPU peers), on the first ``host_datasets`` datasets of a cell.

``adjacency[i, j] != 0`` is an estimated edge ``j -> i`` (LiNGAM convention); an
undirected edge of a CPDAG has both entries. A method's ``output`` says what it returns
and so what it is scored against: ``"dag"`` (the true DAG), ``"cpdag"`` (the CPDAG of
the true DAG, its Markov equivalence class; PC, GES) or ``"essential"`` (the
interventional essential graph of the true DAG and the targets the method was given,
Hauser & Buhlmann 2012; GIES), all from ``jaxkit.kernels.sem.dag_to_cpdag``. A perfect
CPDAG thus scores F1 = 1 and SHD = 0, and its undirected edges are not counted as
errors against one orientation. Methods with ``uses_targets`` receive the environment
labels and targets (withheld under ``targets="unknown"``).

A user adds a method with one call::

    register_method(Method("mine", my_fit, MethodRecord("my method", "Me et al. 2026",
                                                        (LINEAR, SUFFICIENCY))))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import lingam
from jaxkit.kernels.sem import sortability as srt
from jaxkit.kernels.sem.notears import notears as _notears
from jaxkit.kernels.sem.pc import pc as _pc

from .axes import CellSpec

__all__ = ["Assumption", "MethodRecord", "Method", "METHODS", "register_method", "get_method",
           "in_scope", "LINEAR", "NON_GAUSSIAN", "SUFFICIENCY", "NO_MEAS_ERROR", "IID",
           "FAITHFUL", "RAW_SCALE", "EQUAL_VARIANCE", "OBSERVATIONAL", "KNOWN_TARGETS",
           "NON_GAUSSIAN_OR_POOLED", "NOT_ISCM", "NEVER", "HARD_INTERVENTIONS",
           "DEFAULT_METHODS", "PC_ALPHA", "OUTPUTS"]


@dataclass(frozen=True)
class Assumption:
    """One declared assumption: a short name, its meaning, and whether a cell meets it."""

    name: str
    text: str
    holds: Callable[[CellSpec], bool] = field(compare=False)


LINEAR = Assumption("linear", "linear mechanisms", lambda s: s.mechanism == "linear")
NON_GAUSSIAN = Assumption("non-Gaussian", "non-Gaussian noise (at most one Gaussian source)",
                          lambda s: s.noise != "gaussian")
SUFFICIENCY = Assumption("sufficiency", "causal sufficiency: no hidden confounders",
                         lambda s: s.confounders == 0)
NO_MEAS_ERROR = Assumption("no measurement error", "variables observed without error",
                           lambda s: s.meas_error == 0)
IID = Assumption("i.i.d.", "rows i.i.d. (no time structure)", lambda s: s.ar == 0)
FAITHFUL = Assumption("faithfulness", "no independence beyond the graph's d-separations "
                      "(no path cancellation)", lambda s: s.faithfulness == "faithful")
RAW_SCALE = Assumption("raw scale", "data on the simulator's own scale (the variance "
                       "order carries the causal order)", lambda s: s.scale == "raw")
EQUAL_VARIANCE = Assumption("equal noise variances", "equal noise variances on the data's "
                            "scale (Peters & Buhlmann 2014; rescaling breaks it)",
                            lambda s: s.noise_hetero == 0 and s.scale == "raw")
OBSERVATIONAL = Assumption("one distribution", "rows from one (observational) distribution",
                           lambda s: s.n_envs == 0)
KNOWN_TARGETS = Assumption("known targets", "environment labels and intervention targets "
                           "known", lambda s: s.n_envs == 0 or s.targets == "known")
NON_GAUSSIAN_OR_POOLED = Assumption(
    "non-Gaussian sources", "non-Gaussian noise, or Gaussian noise made non-Gaussian by "
    "pooled noise interventions", lambda s: s.noise != "gaussian" or s.n_envs > 0)
HARD_INTERVENTIONS = Assumption(
    "perfect interventions", "every intervention is perfect (hard, do()): the target is "
    "cut from its parents", lambda s: s.n_envs == 0 or s.intervention == "hard")
NOT_ISCM = Assumption("R2-sortable", "R^2 grows along the causal order (raw or rescaled "
                      "linear SEMs; iSCMs remove it)", lambda s: s.scale != "iscm")
NEVER = Assumption("none", "a chance-level floor: no regime identifies the graph",
                   lambda s: False)


@dataclass(frozen=True)
class MethodRecord:
    """What a method claims: ``label``, ``citation`` and the ``assumptions`` under which
    it is identifiable and consistent; ``identifies`` says what it recovers there (e.g.
    the DAG, or only the Markov equivalence class)."""

    label: str
    citation: str
    assumptions: tuple[Assumption, ...]
    identifies: str = "the DAG"


@dataclass(frozen=True)
class Method:
    """A registered method: ``name``, ``fit``, its ``record``, the ``kind`` of fit
    (``"jax"`` or ``"host"``), whether it takes environment labels, and whether it is
    a sort-and-regress floor (a benchmark-artefact detector, not a contender), an
    optional ``shared`` joint fit, and the ``output`` graph it returns (the truth it is
    scored against: ``"dag"``, ``"cpdag"`` or ``"essential"``; module docstring)."""

    name: str
    fit: Callable
    record: MethodRecord | None
    kind: str = "jax"
    uses_targets: bool = False
    floor: bool = False
    # (joint fit, index): a "jax" method whose adjacency is entry ``index`` of a joint
    # fit ``(key, x, env, targets) -> (k, d, d)`` that several methods share (the grid
    # computes it once per cell, one compiled program: the three floors differ only by
    # their score); ``fit`` gives the same adjacency alone
    shared: tuple[Callable, int] | None = None
    output: str = "dag"


OUTPUTS = ("dag", "cpdag", "essential")  # the graphs a method may return (Method.output)


METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add ``method`` to :data:`METHODS` (replacing one of the same name).

    Raises:
        ValueError: no record (every method must declare its assumptions), a record
            that is not a :class:`MethodRecord`, an unknown kind or a non-callable fit.
    """
    if not isinstance(method, Method):
        raise ValueError(f"`method` must be a Method; got {type(method).__name__}")
    if method.record is None:
        raise ValueError(f"method {method.name!r} has no assumption record: pass a "
                         f"MethodRecord listing the assumptions under which it is "
                         f"identifiable and consistent")
    if not isinstance(method.record, MethodRecord):
        raise ValueError(f"method {method.name!r}: `record` must be a MethodRecord; got "
                         f"{type(method.record).__name__}")
    if not all(isinstance(a, Assumption) for a in method.record.assumptions):
        raise ValueError(f"method {method.name!r}: every assumption must be an Assumption")
    if method.kind not in ("jax", "host"):
        raise ValueError(f"method {method.name!r}: `kind` must be 'jax' or 'host'; got "
                         f"{method.kind!r}")
    if method.output not in OUTPUTS:
        raise ValueError(f"method {method.name!r}: `output` must be one of "
                         f"{', '.join(OUTPUTS)}; got {method.output!r}")
    if not callable(method.fit):
        raise ValueError(f"method {method.name!r}: `fit` must be callable")
    if method.shared is not None and (method.kind != "jax" or not callable(method.shared[0])
                                      or not isinstance(method.shared[1], int)):
        raise ValueError(f"method {method.name!r}: `shared` must be (a jax joint fit, an "
                         f"int index) on a 'jax' method; got {method.shared!r}")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    """The registered method ``name``; a ValueError listing the known names otherwise."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; registered: {', '.join(METHODS)}")
    return METHODS[name]


def in_scope(method: Method, spec: CellSpec) -> bool:
    """Whether every declared assumption of ``method`` holds in the cell ``spec``."""
    return all(bool(a.holds(spec)) for a in method.record.assumptions)


# --------------------------------------------------------------------------- built-ins
# module-level fits: the grid caches one compiled program per fit and shape


def fit_var_sort(key, x, env, targets):
    return srt.var_sort_regress(x).adjacency


def fit_r2_sort(key, x, env, targets):
    return srt.r2_sort_regress(x).adjacency


def fit_random_sort(key, x, env, targets):
    return srt.random_sort_regress(key, x).adjacency


def fit_floors(key, x, env, targets):
    """The three sort-and-regress floors at once, ``(3, d, d)``: var-, R^2- and random
    sorting (the scores of :func:`fit_var_sort`, :func:`fit_r2_sort`,
    :func:`fit_random_sort`) through one ``sort_regress`` vmapped over the scores."""
    scores = jnp.stack([jnp.var(x, axis=0), srt.r2_coefficients(x),
                        jax.random.uniform(key, (x.shape[1],), x.dtype)])
    return jax.vmap(lambda s: srt.sort_regress(x, s).adjacency)(scores)


def fit_ica_lingam(key, x, env, targets):
    return lingam.ica_lingam(key, x).adjacency


def fit_direct_lingam(key, x, env, targets):
    return lingam.direct_lingam(x).adjacency


def fit_notears(key, x, env, targets):
    r = _notears(x)
    return jnp.where(r.finite, r.b, jnp.nan)


PC_ALPHA = 0.01  # level of PC's Fisher-z tests in the grid


def fit_pc(key, x, env, targets):
    """PC-stable with Fisher-z tests at level :data:`PC_ALPHA`, unrestricted depth
    (``jaxkit.kernels.sem.pc``); returns the CPDAG."""
    return _pc(x, alpha=PC_ALPHA).cpdag


def _gies_bic(data: list[np.ndarray], ivs: list[list[int]]) -> np.ndarray:
    """``gies.fit_bic(data, ivs)`` as an adjacency in the grid's encoding, memoised on
    the inputs: GIES on one observational environment (an observational cell, or
    withheld targets) is GES on the same data, so the grid fits it once."""
    import hashlib

    import gies

    h = hashlib.sha1()
    for x, iv in zip(data, ivs, strict=True):
        h.update(np.ascontiguousarray(x).tobytes())
        h.update(repr((x.shape, iv)).encode())
    key = h.hexdigest()
    if key not in _GIES_CACHE:
        if len(_GIES_CACHE) >= 64:
            _GIES_CACHE.pop(next(iter(_GIES_CACHE)))
        est, _ = gies.fit_bic(data, ivs)
        _GIES_CACHE[key] = (np.asarray(est) != 0).T.astype(np.float64)
    return _GIES_CACHE[key].copy()


_GIES_CACHE: dict[str, np.ndarray] = {}


def fit_ges(x, env, targets):
    """GES (Chickering 2002) as GIES on one observational environment (``gies.fit_bic``
    with no targets is GES with the same BIC score); returns the CPDAG."""
    return _gies_bic([np.asarray(x, np.float64)], [[]])


def fit_causaltab(x, env, targets):
    """CausalTab (Paper 5) through its model's public entry point
    ``jaxkit.causal_model.predict`` with the shipped weights: edge probabilities from the
    data and the known-target intervention mask, projected to a DAG by its own rule (the
    ``round(sum p)`` most probable edges, ``jaxkit.causal_model.dag_projection``)."""
    from jaxkit.causal_model.predict import dag_projection, predict

    mask = np.asarray(targets, bool)[np.asarray(env)].astype(np.float64)
    p = predict(np.asarray(x, np.float64), mask if mask.any() else None)
    return np.asarray(dag_projection(p), np.float64)


def fit_gies(x, env, targets):
    """GIES (Hauser & Buhlmann 2012, ``gies.fit_bic``) given environments and targets;
    returns the I-essential graph. Empty environments are skipped."""
    x = np.asarray(x, np.float64)
    data, ivs = [], []
    for k in range(targets.shape[0]):
        rows = x[env == k]
        if rows.shape[0] == 0:
            continue
        data.append(rows)
        ivs.append([int(j) for j in np.nonzero(targets[k])[0]])
    return _gies_bic(data, ivs)


_LINGAM = (LINEAR, NON_GAUSSIAN, SUFFICIENCY, NO_MEAS_ERROR, IID, OBSERVATIONAL)
_BUILTIN = (
    Method("var-sort-regress", fit_var_sort, MethodRecord(
        "Var-SortnRegress (floor)", "Reisach et al. 2021; Peters & Buhlmann 2014",
        (LINEAR, RAW_SCALE, EQUAL_VARIANCE, SUFFICIENCY, NO_MEAS_ERROR),
        "the causal order when variance grows along it (guaranteed for equal noise "
        "variances only in expectation)"), floor=True, shared=(fit_floors, 0)),
    Method("r2-sort-regress", fit_r2_sort, MethodRecord(
        "R2-SortnRegress (floor)", "Reisach et al. 2023",
        (LINEAR, NOT_ISCM, SUFFICIENCY, NO_MEAS_ERROR),
        "the causal order when R^2 grows along it (a heuristic, no guarantee)"), floor=True,
        shared=(fit_floors, 1)),
    Method("random-sort-regress", fit_random_sort, MethodRecord(
        "Random-SortnRegress (chance)", "Reisach et al. 2021", (NEVER,), "nothing"),
        floor=True, shared=(fit_floors, 2)),
    Method("ica-lingam", fit_ica_lingam, MethodRecord(
        "ICA-LiNGAM", "Shimizu et al. 2006", _LINGAM)),
    Method("direct-lingam", fit_direct_lingam, MethodRecord(
        "DirectLiNGAM", "Shimizu et al. 2011", _LINGAM)),
    Method("pooled-ica-lingam", fit_ica_lingam, MethodRecord(
        "pooled ICA-LiNGAM (no labels)", "ICA-LiNGAM on pooled interventional data "
        "(Paper 7, 2026)", (LINEAR, NON_GAUSSIAN_OR_POOLED, SUFFICIENCY, NO_MEAS_ERROR, IID),
        "the DAG; with Gaussian noise only approximately (atomic pooling leaves "
        "O(1/d^2) source dependence)")),
    Method("notears", fit_notears, MethodRecord(
        "NOTEARS (least squares)", "Zheng et al. 2018; Loh & Buhlmann 2014",
        (LINEAR, EQUAL_VARIANCE, SUFFICIENCY, NO_MEAS_ERROR, IID, OBSERVATIONAL),
        "the DAG when the least-squares score is identifying (equal noise variances); "
        "a local optimum otherwise")),
    Method("pc", fit_pc, MethodRecord(
        "PC-stable (Fisher z, alpha 0.01)", "Spirtes & Glymour 1991; Colombo & Maathuis "
        "2014; Kalisch & Buhlmann 2007 (consistency)",
        (LINEAR, FAITHFUL, SUFFICIENCY, NO_MEAS_ERROR, IID, OBSERVATIONAL),
        "the Markov equivalence class (CPDAG, scored against the true DAG's CPDAG); "
        "partial correlations capture conditional independence in linear SEMs, and the "
        "Fisher-z level is exact for Gaussian noise"), output="cpdag"),
    Method("ges", fit_ges, MethodRecord(
        "GES (BIC)", "Chickering 2002", (LINEAR, FAITHFUL, SUFFICIENCY, NO_MEAS_ERROR, IID,
                                        OBSERVATIONAL),
        "the Markov equivalence class (CPDAG, scored against the true DAG's CPDAG)"),
        kind="host", output="cpdag"),
    Method("causaltab", fit_causaltab, MethodRecord(
        "CausalTab (shipped weights)", "CausalTab, Paper 5 (arXiv 2605.31156)",
        (SUFFICIENCY, NO_MEAS_ERROR, IID),
        "an amortised estimate; in scope where its training prior (graph families, "
        "mechanisms, noise laws, interventions, iSCM) covers the cell"),
        kind="host", uses_targets=True),
    Method("gies", fit_gies, MethodRecord(
        "GIES (BIC)", "Hauser & Buhlmann 2012", (LINEAR, FAITHFUL, SUFFICIENCY, NO_MEAS_ERROR,
                                                IID, KNOWN_TARGETS, HARD_INTERVENTIONS),
        "the interventional Markov equivalence class (I-essential graph, scored against "
        "the true DAG's I-essential graph for the targets it is given; the CPDAG when "
        "they are withheld)"), kind="host", uses_targets=True, output="essential"),
)
for _m in _BUILTIN:
    register_method(_m)

# NOTEARS (~4 s a dataset on this CPU) runs on the Reisach cells only (Config.reisach_methods)
DEFAULT_METHODS = tuple(m.name for m in _BUILTIN if m.name != "notears")


_BATCH_FITS: dict = {}


def batch_fit(method: Method, *, joint: bool = False):
    """The per-dataset jax fit of ``method`` with its finiteness flag,
    ``(key, x, env, targets) -> (adjacency, finite)``; one function object per fit
    (methods sharing a fit share it, so compiled programs are cached across cells).
    With ``joint`` and a ``shared`` method: the joint fit, ``(k, d, d)`` adjacencies
    and ``(k,)`` flags."""
    fit = method.shared[0] if joint and method.shared is not None else method.fit
    one = _BATCH_FITS.get(fit)
    if one is None:
        def one(key, x, env, targets):
            adj = jnp.asarray(fit(key, x, env, targets))
            return adj, jnp.all(jnp.isfinite(adj), axis=(-2, -1))

        _BATCH_FITS[fit] = one
    return one
