"""Benchmarks, methods and metrics: every method on the same datasets, one dataset at a
time (so the seconds per dataset exclude compilation: the first dataset of each shape
warms the compiled function up and is timed apart).

Methods (``METHODS``): CausalTab (edge probabilities, all rows in one pass; above the
model's ``max_vars`` variables, the mean over subsets of ``max_vars`` variables that
cover every pair, :func:`jaxkit.causal_model.predict.edge_probabilities`; the binary graph
is the greedy DAG projection of the ``round(sum p)`` most probable edges: edges added by
decreasing probability unless they close a cycle), NOTEARS (:func:`jaxkit.kernels.sem.notears`),
DirectLiNGAM, ICA-LiNGAM (:func:`jaxkit.kernels.lingam.ica_lingam`, FastICA started from a
draw of the run's generator), the var- and R2-sort-regress floors
(:mod:`jaxkit.kernels.sem.sortability`),
GIES (``gies.fit_bic`` given the per-row targets; observational data as one environment:
GES), PC (Fisher-z, alpha 0.05) and GES (BIC) from causal-learn on all rows pooled
(:func:`causallearn_scores`: a CPDAG, an undirected edge counted in both directions in
the binary graph and scored 0.5 each way), and random
(uniform scores, edges where the score exceeds ``1 - 2 / (d - 1)``: about ``d`` edges).
Metrics per dataset: SHD, F1 (directed edges), AUROC and AUPRC of the scores
(:mod:`jaxkit.kernels.graph`), SID (gadjid, normalised by ``d (d - 1)``: a fraction).
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.causal_model.model import forward
from jaxkit.causal_model.predict import dag_projection, edge_probabilities
from jaxkit.kernels import graph as gm
from jaxkit.kernels import lingam, sem
from jaxkit.kernels.sem import sortability as srt

__all__ = ["METHODS", "Bench", "make_bench", "run_method", "evaluate", "dag_projection",
           "sid", "gies_fit", "causallearn_scores"]

METHODS = ("causaltab", "notears", "direct-lingam", "ica-lingam", "var-sort-regress",
           "r2-sort-regress", "gies", "pc", "ges", "random")


class Bench(NamedTuple):
    """Datasets of one benchmark cell (numpy): ``x`` ``(B, n, d)``, the indicator channel
    ``ind`` (known targets), the true per-row ``targets``, the truth ``adj`` ``(B, d, d)``
    (``[i, j]``: ``j -> i``) and the sampled specs."""

    x: np.ndarray
    ind: np.ndarray
    targets: np.ndarray
    adj: np.ndarray
    spec: dict


def _sampler(batch: int, d: int, n: int):
    return sem.jit_sample_tasks(batch, d_max=d, n_max=n)


def make_bench(key, prior: sem.Prior, n_datasets: int, d: int, n: int) -> Bench:
    """``n_datasets`` tasks of exactly ``d`` variables and ``n`` rows from ``prior``."""
    p = prior._replace(d_range=jnp.asarray([d, d], jnp.int32),
                       n_range=jnp.asarray([n, n], jnp.int32))
    t = jax.device_get(_sampler(n_datasets, d, n)(key, p))
    return Bench(np.asarray(t.x, np.float64), np.asarray(t.indicator, np.float64),
                 np.asarray(t.targets), np.asarray(t.adj), {k: np.asarray(v) for k, v in
                                                            t.spec._asdict().items()})


def _is_dag(a: np.ndarray) -> bool:
    a = np.asarray(a != 0)
    np.fill_diagonal(a, False)
    left = np.ones(a.shape[0], bool)
    while left.any():  # peel nodes without remaining parents
        roots = left & ~(a[:, left].any(axis=1))
        if not roots.any():
            return False
        left &= ~roots
    return True


def sid(true: np.ndarray, est: np.ndarray) -> float:
    """Structural intervention distance (gadjid) of a DAG estimate; NaN when ``est`` is
    not a DAG (a cyclic graph, or GIES's CPDAG with undirected edges)."""
    import gadjid

    if not _is_dag(est):
        return float("nan")
    try:
        s, _ = gadjid.sid(np.asarray(true != 0, np.int8), np.asarray(est != 0, np.int8),
                          edge_direction="from column to row")
        return float(s)
    except BaseException:  # noqa: BLE001 - gadjid raises on cyclic or malformed guesses
        return float("nan")


def gies_fit(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """GIES (``gies.fit_bic``) with the rows grouped by their target set; returns the
    I-essential graph in the LiNGAM convention (an undirected edge is both directions)."""
    import gies

    keys = [tuple(np.flatnonzero(r)) for r in np.asarray(targets, bool)]
    groups: dict[tuple, list[int]] = {}
    for r, k in enumerate(keys):
        groups.setdefault(k, []).append(r)
    data = [np.asarray(x[rows], np.float64) for rows in groups.values()]
    ivs = [list(map(int, k)) for k in groups]
    est, _ = gies.fit_bic(data, ivs)
    return (np.asarray(est) != 0).T.astype(np.float64)


def _cpdag_scores(g: np.ndarray) -> np.ndarray:
    """causal-learn's graph matrix (``g[a, b] = -1, g[b, a] = 1``: ``a -> b``; both -1:
    undirected) as scores ``s[child, parent]``: 1 directed, 0.5 each way undirected."""
    g = np.asarray(g)
    directed = (g == -1) & (g.T == 1)  # [a, b]: a -> b
    undirected = (g == -1) & (g.T == -1)
    s = directed.T.astype(np.float64) + 0.5 * undirected.T
    np.fill_diagonal(s, 0.0)
    return s


def causallearn_scores(method: str, x: np.ndarray) -> np.ndarray:
    """PC (Fisher-z, alpha 0.05; Spirtes et al. 2000) or GES (BIC; Chickering 2002) from
    causal-learn on ``x`` ``(n, d)``: edge scores ``[i, j]`` for ``j -> i`` (1 a directed
    edge of the CPDAG, 0.5 each way an undirected one).

    Raises:
        ValueError: ``method`` is not ``"pc"`` or ``"ges"``.
    """
    if method == "pc":
        from causallearn.search.ConstraintBased.PC import pc

        cg = pc(np.asarray(x, np.float64), 0.05, "fisherz", show_progress=False)
        return _cpdag_scores(cg.G.graph)
    if method == "ges":
        from causallearn.search.ScoreBased.GES import ges

        rec = ges(np.asarray(x, np.float64), score_func="local_score_BIC")
        return _cpdag_scores(rec["G"].graph)
    raise ValueError(f"`method` must be 'pc' or 'ges'; got {method!r}")


@functools.lru_cache(maxsize=16)
def _compiled(method: str, cfg=None):
    if method == "causaltab":
        return jax.jit(lambda p, x, i: forward(p, cfg, x, i, jnp.ones(x.shape[1], bool),
                                               jnp.ones(x.shape[0], bool)))
    if method == "notears":
        return jax.jit(lambda x: sem.notears(x))
    if method == "direct-lingam":
        return jax.jit(lambda x: lingam.direct_lingam(x))
    if method == "ica-lingam":
        return jax.jit(lambda k, x: lingam.ica_lingam(k, x))
    if method == "var-sort-regress":
        return jax.jit(lambda x: srt.var_sort_regress(x))
    if method == "r2-sort-regress":
        return jax.jit(lambda x: srt.r2_sort_regress(x))
    raise ValueError(method)


def run_method(method: str, x: np.ndarray, ind: np.ndarray, targets: np.ndarray, *,
               model=None, rng: np.random.Generator | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(est, scores)`` of ``method`` on one dataset (``[i, j]``: ``j -> i``)."""
    d = x.shape[1]
    if method == "causaltab":
        params, cfg = model
        if d > cfg.max_vars:  # subsets of max_vars variables covering every pair
            p = edge_probabilities(params, cfg, x, ind, n_chunk=x.shape[0],
                                   var_chunk=cfg.max_vars)
            return dag_projection(p).astype(np.float64), p
        p = np.asarray(_compiled("causaltab", cfg)(params, jnp.asarray(x, jnp.float32),
                                                   jnp.asarray(ind, jnp.float32)), np.float64)
        return dag_projection(p).astype(np.float64), p
    if method == "notears":
        r = _compiled("notears")(jnp.asarray(x, jnp.float32))
        return np.asarray(r.b, np.float64), np.abs(np.asarray(r.b_raw, np.float64))
    if method in ("direct-lingam", "ica-lingam", "var-sort-regress", "r2-sort-regress"):
        xj = jnp.asarray(x, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
        if method == "ica-lingam":
            rng = rng if rng is not None else np.random.default_rng(0)
            r = _compiled(method)(jax.random.key(int(rng.integers(2**31))), xj)
        else:
            r = _compiled(method)(xj)
        a = np.asarray(r.adjacency, np.float64)
        # scores: pruned weights first, unpruned OLS weights break the ties below them
        u = np.abs(np.asarray(r.adjacency_unpruned, np.float64))
        return a, np.abs(a) + 1e-3 * u / (1.0 + u.max())
    if method == "gies":
        try:
            est = gies_fit(x, targets)
        except np.linalg.LinAlgError:  # singular covariance, e.g. a do-clamped column
            est = np.full((d, d), np.nan)
        return est, est
    if method in ("pc", "ges"):
        try:
            sc = causallearn_scores(method, x)
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError):  # singular data
            sc = np.full((d, d), np.nan)
        return (sc > 0).astype(np.float64), sc
    if method == "random":
        rng = rng if rng is not None else np.random.default_rng(0)
        s = rng.random((d, d))
        np.fill_diagonal(s, 0.0)
        return (s > 1.0 - 2.0 / max(d - 1, 1)).astype(np.float64), s
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")


@functools.lru_cache(maxsize=4)
def _metrics_fn():
    def f(true, est, scores):
        m = gm.edge_metrics(true, est)
        return {"shd": m["shd"], "f1": m["f1"], "auroc": gm.auroc(true, scores),
                "auprc": gm.auprc(true, scores)}
    return jax.jit(f)


def evaluate(bench: Bench, methods, *, model=None, gies_max_d: int = 20,
             seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Every method on every dataset of ``bench``: ``{method: {metric: (B,) array,
    "seconds": (B,) array}}`` (NaN where a method does not apply, e.g. GIES above
    ``gies_max_d`` variables (GES too), or a GIES fit that hit a singular covariance). The first
    dataset's time includes compilation and is reported as ``compile_seconds``
    instead."""
    rng = np.random.default_rng(seed)
    B = bench.x.shape[0]
    out: dict[str, dict[str, np.ndarray]] = {}
    mf = _metrics_fn()
    for m in methods:
        rec = {k: np.full(B, np.nan) for k in ("shd", "f1", "auroc", "auprc", "sid", "seconds")}
        if m in ("gies", "ges") and bench.x.shape[2] > gies_max_d:
            out[m] = rec
            continue
        for b in range(B):
            t0 = time.perf_counter()
            est, sc = run_method(m, bench.x[b], bench.ind[b], bench.targets[b], model=model,
                                 rng=rng)
            rec["seconds"][b] = time.perf_counter() - t0
            true = bench.adj[b].astype(np.float64)
            if not (np.all(np.isfinite(est)) and np.all(np.isfinite(sc))):
                continue
            r = jax.device_get(mf(true, est, sc))
            for k in ("shd", "f1", "auroc", "auprc"):
                rec[k][b] = float(r[k])
            rec["sid"][b] = sid(true, est)
        rec["compile_seconds"] = np.asarray([rec["seconds"][0]])
        if B > 1:
            rec["seconds"][0] = np.nan
        out[m] = rec
    return out
