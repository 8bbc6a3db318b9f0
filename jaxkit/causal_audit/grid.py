"""The grid runner: every method on every cell, one vmapped batch per cell.

:func:`run_cell` simulates a cell's ``batch`` datasets in one call
(:func:`~.scm.simulate`), measures var- and R^2-sortability per dataset, runs every
``"jax"`` method on the whole batch at once (``jit(vmap(fit))``, split over the mesh's
``"data"`` axis when there is one) and the ``"host"`` peers on the first
``host_datasets`` datasets, and scores each estimate against the truth (directed F1,
SHD): the true DAG, or for a method whose ``output`` is a CPDAG the true DAG's CPDAG,
and for an interventional essential graph (GIES) the true DAG's I-essential graph for
the targets the method was given (of the environments holding rows), both from
``jaxkit.kernels.sem.dag_to_cpdag``. Nothing is dropped silently: invalid SCMs (a cyclic
graph, non-finite or constant data), non-finite method outputs and method exceptions are
counted in :attr:`CellResult.failures` and their scores are NaN, which the report prints.

:func:`run_grid` runs the cells of several axis pairs, computing a cell shared by two
pairs once; all cells use the same key, so they share graphs and noise draws (paired
comparisons across cells).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm
from jaxkit.kernels.sem import sortability as srt
from jaxkit.kernels.sem.pc import dag_to_cpdag

from .axes import AXES, CellSpec, cell
from .methods import Method, batch_fit, get_method
from .scm import SCMData, simulate

__all__ = ["CellResult", "Pair", "run_cell", "run_grid", "pair_cells"]


@dataclass
class CellResult:
    """The scores of every method on one cell (per dataset; NaN = not run or failed)."""

    spec: CellSpec
    f1: dict[str, np.ndarray]
    shd: dict[str, np.ndarray]
    var_sort: np.ndarray
    r2_sort: np.ndarray
    valid: np.ndarray
    failures: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def n_invalid(self) -> int:
        return int((~self.valid).sum())

    def mean_f1(self, method: str) -> float:
        v = self.f1.get(method)
        if v is None or not np.isfinite(v).any():
            return float("nan")
        return float(np.nanmean(v))


@dataclass(frozen=True)
class Pair:
    """Two axes and their values: a heatmap's rows and columns."""

    row: str
    row_values: tuple
    col: str
    col_values: tuple

    def __post_init__(self):
        for a in (self.row, self.col):
            if a not in AXES:
                raise ValueError(f"unknown axis {a!r}; known axes: {', '.join(AXES)}")
        if self.row == self.col:
            raise ValueError(f"a pair needs two different axes; got {self.row!r} twice")
        if not self.row_values or not self.col_values:
            raise ValueError(f"pair ({self.row}, {self.col}) needs values on both axes")

    @property
    def name(self) -> str:
        return f"{self.row} x {self.col}"


def pair_cells(base: CellSpec, pair: Pair) -> list[list[CellSpec]]:
    """The cells of ``pair`` on ``base``: ``[row][col]`` specs (validated)."""
    return [[cell(base, **{pair.row: r, pair.col: c}) for c in pair.col_values]
            for r in pair.row_values]


def _sortabilities(x, b):
    return srt.var_sortability(x, b), srt.r2_sortability(x, b)


def _score(b, adj):
    m = gm.edge_metrics(b, adj)
    return m["f1"], m["shd"]


def _essential(b, env, tg):
    """The true interventional essential graph for targets ``tg`` (``(k, d)``), counting
    only environments that hold rows (all-false ``tg``: the CPDAG)."""
    present = jnp.any(env[:, None] == jnp.arange(tg.shape[0])[None, :], axis=0)
    return dag_to_cpdag(b, tg & present[:, None])


def _truths(b, env, tg):
    """The truth for each ``Method.output``: ``(dag, cpdag, essential)``."""
    return b, dag_to_cpdag(b), _essential(b, env, tg)


_TRUTH = {"dag": 0, "cpdag": 1, "essential": 2}


def _batched(fn, mesh):
    return jd.batched(fn, None) if jd.data_mesh(mesh) is None else jd.sharded_vmap(fn, mesh)


@jax.jit
def _stand_in(key, valid, x, b):
    noise = jax.random.normal(key, x.shape, x.dtype)
    return (jnp.where(valid[:, None, None], x, noise),
            jnp.where(valid[:, None, None], b, 0.0))


_score_one = jax.jit(_score)  # the host peers' scores: one compiled program, not op by op


def run_cell(key, spec: CellSpec, methods: Sequence[str | Method], *, batch: int,
             host_datasets: int = 0, mesh=None, data: SCMData | None = None) -> CellResult:
    """Every method on ``batch`` datasets of ``spec``; see the module docstring.

    Args:
        key: PRNG key (the data from ``fold_in(key, 0)``, the methods' keys from
            ``fold_in(key, 1)``).
        spec: the cell.
        methods: method names (or :class:`~.methods.Method` objects).
        batch: datasets per cell.
        host_datasets: how many of them the host peers fit (0: none).
        mesh: optional mesh with a ``"data"`` axis.
        data: the cell's datasets when already simulated (``batch`` datasets of
            ``spec.n`` rows, e.g. the first rows of a larger sample); default: simulated
            here.

    Returns:
        A :class:`CellResult`.
    """
    ms = [m if isinstance(m, Method) else get_method(m) for m in methods]
    if data is None:
        data = simulate(jax.random.fold_in(key, 0), spec, batch)
    elif data.x.shape[:2] != (batch, spec.n):
        raise ValueError(f"`data` must hold {batch} datasets of {spec.n} rows; got x of "
                         f"shape {data.x.shape}")
    valid = np.asarray(data.valid)
    x, b = data.x, data.b
    if not valid.all():
        # invalid datasets get stand-in noise so a batch still runs; their scores are NaN
        x, b = _stand_in(jax.random.fold_in(key, 2), data.valid, x, b)
    vs, r2 = _batched(_sortabilities, mesh)(x, b)
    nan = np.full(batch, np.nan)
    out = CellResult(spec, {}, {}, np.where(valid, np.asarray(vs), np.nan),
                     np.where(valid, np.asarray(r2), np.nan), valid)
    if not valid.all():
        out.failures["(simulator)"] = (f"{int((~valid).sum())} of {batch} datasets are "
                                       f"invalid SCMs (cyclic graph or non-finite/constant "
                                       f"data): not scored")
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.fold_in(key, 1), i))(
        jnp.arange(batch))
    blind = spec.targets == "unknown"
    fitted: dict = {}  # one computation per jax fit and inputs (shared and repeated fits)
    truths: dict = {}  # the true graphs per target labelling (given or withheld)
    for m in ms:
        env = data.env if m.uses_targets and not blind else jnp.zeros_like(data.env)
        tg = data.targets if m.uses_targets and not blind else jnp.zeros_like(data.targets)
        t0 = time.perf_counter()
        f1, shd = nan.copy(), nan.copy()
        try:
            if m.output == "dag":
                truth = b
            else:
                lab = m.uses_targets and not blind
                if lab not in truths:
                    truths[lab] = _batched(_truths, mesh)(b, env, tg)
                truth = truths[lab][_TRUTH[m.output]]
            if m.kind == "jax":
                fn = batch_fit(m, joint=True)
                labels = m.uses_targets and not blind
                if (fn, labels) not in fitted:
                    fitted[fn, labels] = _batched(fn, mesh)(keys, x, env, tg)
                adj, finite = fitted[fn, labels]
                if m.shared is not None:
                    adj, finite = adj[:, m.shared[1]], finite[:, m.shared[1]]
                finite = np.asarray(finite)
                safe = jnp.where(jnp.asarray(finite)[:, None, None], adj, 0.0)
                f, s = _batched(_score, mesh)(truth, safe)
                ok = finite & valid
                f1 = np.where(ok, np.asarray(f), np.nan)
                shd = np.where(ok, np.asarray(s, float), np.nan)
                if (~finite & valid).any():
                    out.failures[m.name] = (f"{int((~finite & valid).sum())} of "
                                            f"{int(valid.sum())} outputs non-finite")
            else:
                _host(m, data, truth, env, tg, valid, host_datasets, f1, shd, out)
        except Exception as e:  # a method that raises is a reported failure
            out.failures[m.name] = f"raised {type(e).__name__}: {e}"
        out.f1[m.name], out.shd[m.name] = f1, shd
        out.seconds[m.name] = time.perf_counter() - t0
    return out


def _host(m: Method, data, truth, env, tg, valid, k: int, f1, shd, out: CellResult) -> None:
    xs, bs = np.asarray(data.x), np.asarray(truth)
    envs, tgs = np.asarray(env), np.asarray(tg)
    bad = 0
    for i in range(min(k, len(valid))):
        if not valid[i]:
            continue
        try:
            adj = np.asarray(m.fit(xs[i], envs[i], tgs[i]), float)
        except Exception as e:
            out.failures[m.name] = f"raised {type(e).__name__}: {e}"
            continue
        if adj.shape != bs[i].shape or not np.isfinite(adj).all():
            bad += 1
            continue
        f, s = _score_one(jnp.asarray(bs[i]), jnp.asarray(adj, bs.dtype))
        f1[i], shd[i] = float(f), float(s)
    if bad:
        out.failures[m.name] = f"{bad} outputs non-finite or of the wrong shape"


def run_grid(key, base: CellSpec, pairs: Sequence[Pair], methods: Sequence[str], *,
             batch: int, host_datasets: int = 0, mesh=None,
             track: Callable[[Iterable, str], Iterable] | None = None,
             extra: Sequence[CellSpec] = ()) -> dict[CellSpec, CellResult]:
    """The cells of every pair (plus ``extra`` cells), each computed once.

    Returns:
        ``{spec: CellResult}`` in first-seen order.
    """
    for m in methods:
        get_method(m)
    specs: list[CellSpec] = []
    for p in pairs:
        specs += list(itertools.chain.from_iterable(pair_cells(base, p)))
    specs += list(extra)
    specs = list(dict.fromkeys(specs))
    it = specs if track is None else track(specs, "causal-audit grid")
    return {s: run_cell(key, s, methods, batch=batch, host_datasets=host_datasets, mesh=mesh)
            for s in it}
