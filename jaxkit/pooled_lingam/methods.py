"""The compared methods and their scores.

Label-free: ICA-LiNGAM and DirectLiNGAM on the pooled rows, and ICA-LiNGAM on the
observational-only twin; batched over datasets (``vmap`` of the kernels) and, with a
mesh, split over its ``"data"`` axis by :func:`jaxkit.distributed.batched`. On CPU the
sweeps pass ``sequential=True`` (one dataset at a time, ``lax.map``: each ICA fit stops
at its own convergence, and every fit is the same on one device and on a mesh); on
accelerators they batch under ``vmap``, where a mesh may change the last bits of a
dataset's numbers and so, rarely, a FastICA causal order. Label-aware baseline: GIES (pure Python),
which receives the environment labels and targets.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm
from jaxkit.kernels import lingam

__all__ = ["METHODS", "LABELS", "METRICS", "fit_ica", "fit_direct", "score", "gies_fit"]

METHODS = ("pooled-ica", "pooled-direct", "obs-ica", "gies")
LABELS = {
    "pooled-ica": "pooled ICA-LiNGAM (no labels)",
    "pooled-direct": "pooled DirectLiNGAM (no labels)",
    "obs-ica": "observational-only ICA-LiNGAM",
    "gies": "GIES (labels + targets)",
}
METRICS = ("f1", "shd", "precision", "recall", "auprc")


def _ica(key, x):
    return lingam.ica_lingam(key, x)


def _direct(x):
    return lingam.direct_lingam(x)


def _score_one(true, est, scores):
    m = gm.edge_metrics(true, est)
    m["auprc"] = gm.auprc(true, jnp.abs(scores))
    return m


def fit_ica(keys, x, mesh=None, *, sequential: bool = False) -> lingam.LiNGAMResult:
    """ICA-LiNGAM on each dataset of ``x`` ``(B, n, d)`` with FastICA keys ``keys``
    ``(B,)``: padded and placed already (:func:`jaxkit.distributed.shard_batch` with the
    same ``mesh``) when a mesh is given. Compiled once per shape and mesh.
    ``sequential``: one dataset at a time, so that one device and any mesh give
    bit-identical fits (:func:`jaxkit.distributed.batched`)."""
    return jd.batched(_ica, mesh, sequential=sequential)(keys, x)


def fit_direct(x, mesh=None, *, sequential: bool = False) -> lingam.LiNGAMResult:
    """DirectLiNGAM on each dataset of ``x`` ``(B, n, d)``; see :func:`fit_ica`."""
    return jd.batched(_direct, mesh, sequential=sequential)(x)


def score(b, adjacency, unpruned, mesh=None, *, sequential: bool = False
          ) -> dict[str, jax.Array]:
    """Edge metrics (``f1, shd, precision, recall``) of each estimated graph against
    the truth ``b`` ``(B, d, d)`` and the AUPRC of ``|unpruned|``, per dataset."""
    return jd.batched(_score_one, mesh, sequential=sequential)(b, adjacency, unpruned)


def gies_fit(x: np.ndarray, env: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """GIES (``gies.fit_bic``) given environment labels and targets; returns the
    estimated I-essential graph in the LiNGAM convention (``[i, j] != 0``: j -> i).

    GIES's own convention is ``A[i, j] != 0`` => ``i -> j`` and an undirected edge
    ``i - j`` has both entries; the transpose keeps undirected edges as both directions.
    The sweeps score it against the true DAG's interventional essential graph
    (:func:`jaxkit.kernels.sem.dag_to_cpdag` with the targets), where an edge no target
    set orients is undirected too; with one atomic intervention per node that graph is
    the DAG itself.

    Args:
        x: pooled rows ``(n, d)``.
        env: environment of each row ``(n,)``.
        targets: intervened nodes per environment ``(K, d)``.

    Returns:
        The estimated adjacency ``(d, d)`` as 0/1 floats.
    """
    import gies

    x = np.asarray(x, np.float64)
    env = np.asarray(env)
    targets = np.asarray(targets, bool)
    data, interventions = [], []
    for k in range(targets.shape[0]):
        rows = x[env == k]
        if rows.shape[0] == 0:
            continue
        data.append(rows)
        interventions.append([int(j) for j in np.nonzero(targets[k])[0]])
    est, _ = gies.fit_bic(data, interventions)
    return (np.asarray(est) != 0).T.astype(np.float64)
