"""Real data: Sachs et al. (2005) protein signalling, pooled without labels, against
the 18-edge consensus graph."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm

from .methods import fit_direct, fit_ica
from .results import SachsRow, Spread

__all__ = ["sachs_eval", "topk_metrics"]


def topk_metrics(truth, scores, k: int) -> dict[str, float]:
    """Edge metrics of the graph of the ``k`` largest ``|scores|`` off the diagonal."""
    s = np.abs(np.asarray(scores, np.float64))
    np.fill_diagonal(s, 0.0)
    kth = np.sort(s.ravel())[-k]
    est = (s >= kth).astype(np.float64)
    np.fill_diagonal(est, 0.0)
    m = jax.device_get(gm.edge_metrics(truth, est))
    return {name: float(v) for name, v in m.items()}


def _fit(fn, args, mesh):
    """``fn`` on a batch of datasets, padded once and split over the mesh (one dataset
    at a time on CPU: the same fits on one device and on a mesh, see
    :func:`.sweeps.evaluate`)."""
    mesh = jd.data_mesh(mesh)
    placed, n = jd.shard_batch(args, mesh)
    out = fn(*placed, mesh, sequential=jax.default_backend() == "cpu")
    return jax.tree.map(lambda a: np.asarray(a)[:n], jax.device_get(out))


def sachs_eval(key, *, n_restarts: int = 4, mesh=None,
               direct: bool = True) -> list[SachsRow]:
    """Pooled ICA-LiNGAM (``n_restarts`` FastICA initialisations) and DirectLiNGAM on the
    Sachs data, raw and ``log``-transformed, scored against the consensus graph.

    Args:
        key: PRNG key of the FastICA initialisations (the same restarts for both
            transforms).
        n_restarts: FastICA restarts (>= 1).
        mesh: a mesh whose ``"data"`` axis splits the fits, or None.
        direct: also fit DirectLiNGAM (False: its rows are left out).

    Returns:
        One :class:`~.results.SachsRow` per (method, transform): ``n_reps``,
        ``seconds`` and, over the restarts (a :class:`~.results.Spread`: mean, sd and
        the per-restart values), the BIC-pruned graph's ``f1, shd, precision, recall,
        n_edges_est, n_edges_true``, the AUPRC and AUROC of ``|adjacency_unpruned|``,
        the top-k graph's ``topk_f1`` / ``topk_shd`` (k = the consensus's 18 edges) and
        ``converged``; plus ``chance_auprc``.
    """
    from jaxkit.data.sachs import load_sachs

    if n_restarts < 1:
        raise ValueError(f"`n_restarts` must be >= 1; got {n_restarts}")
    x_raw, _, truth = load_sachs()
    n_true = int(truth.sum())
    d = truth.shape[0]
    chance = n_true / (d * (d - 1))
    dtype = jnp.result_type(float)
    xs = {"raw": jnp.asarray(x_raw, dtype), "log": jnp.asarray(np.log(x_raw), dtype)}
    keys = jax.random.split(key, n_restarts)
    stacked = jnp.stack([xs["raw"]] * n_restarts + [xs["log"]] * n_restarts)
    t0 = time.perf_counter()
    ica = _fit(fit_ica, (jnp.concatenate([keys, keys]), stacked), mesh)
    t_ica = time.perf_counter() - t0
    fits = [("pooled-ica", ica, {"raw": range(n_restarts),
                                 "log": range(n_restarts, 2 * n_restarts)}, t_ica)]
    if direct:
        t0 = time.perf_counter()
        res = _fit(fit_direct, (jnp.stack([xs["raw"], xs["log"]]),), mesh)
        fits.append(("pooled-direct", res, {"raw": [0], "log": [1]},
                     time.perf_counter() - t0))
    rows = []
    for method, res, idx, secs in fits:
        for tf, ii in idx.items():
            recs = []
            for i in ii:
                m = {k: float(v) for k, v in
                     jax.device_get(gm.edge_metrics(truth, res.adjacency[i])).items()}
                sc = np.abs(res.adjacency_unpruned[i])
                m["auprc"] = float(gm.auprc(truth, sc))
                m["auroc"] = float(gm.auroc(truth, sc))
                top = topk_metrics(truth, sc, n_true)
                m["topk_f1"], m["topk_shd"] = top["f1"], top["shd"]
                m["converged"] = float(res.converged[i])
                recs.append(m)
            rows.append(SachsRow(method=method, transform=tf, n_reps=len(recs),
                                 seconds=secs, chance_auprc=chance,
                                 **{name: Spread.of([r[name] for r in recs])
                                    for name in recs[0]}))
    return rows
