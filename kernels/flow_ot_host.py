"""Exact minibatch OT on the host (NumPy / SciPy / POT / jaxkit's auction): the squared
cost and the assignment solvers that :func:`jaxkit.kernels.flow_ot.exact_coupling` calls
back into for ``solver="host" | "emd" | "auction"`` and that host-side pipelines
(:mod:`jaxkit.pairing`) call directly; re-exported by :mod:`jaxkit.kernels.flow_ot`."""

from __future__ import annotations

import numpy as np

__all__ = ["HOST_SOLVERS", "host_sq_cost", "host_assignment"]


def _host_assignment(cost: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(np.asarray(cost, np.float64))
    perm = np.empty(cost.shape[0], np.int32)
    perm[rows] = cols
    return perm


def _emd_assignment(cost: np.ndarray) -> np.ndarray:
    """POT's network simplex (``ot.emd``) on uniform weights. Its solution is a vertex of
    the Birkhoff polytope, i.e. a permutation matrix / B; should the solver stop early
    (iteration cap) with anything else, SciPy's assignment is used instead."""
    import ot

    cost = np.asarray(cost, np.float64)
    n = cost.shape[0]
    w = np.full(n, 1.0 / n)
    plan = ot.emd(w, w, cost)
    perm = np.argmax(plan, axis=1).astype(np.int32)
    if not np.allclose(plan[np.arange(n), perm], 1.0 / n) or \
            np.unique(perm).size != n:
        return _host_assignment(cost)
    return perm


def _auction_assignment(cost: np.ndarray) -> np.ndarray:
    """jaxkit's host solver: integer auction for the prices, exact Jonker-Volgenant
    augmentation in float64 (:mod:`jaxkit.kernels._auction`, numba; imported on first
    use)."""
    from ._auction import auction_assignment

    return auction_assignment(cost)


HOST_SOLVERS = {"host": _host_assignment, "emd": _emd_assignment,
                "auction": _auction_assignment}


def host_sq_cost(x0: np.ndarray, x1: np.ndarray, *, row_norms: bool = True) -> np.ndarray:
    """NumPy float64 squared Euclidean cost ``||x0_i - x1_j||^2`` of two ``(B, ...)`` batches
    (samples flattened), for host-side pipelines: ``|a|^2 + |b|^2 - 2 a b^T`` (one GEMM
    instead of a ``(B, B, d)`` difference tensor), clipped at 0. ``row_norms=False``
    leaves out the row constants ``|a_i|^2`` (and the clip): every assignment pays each
    once, so the optimal assignments are the same, for one pass fewer over the matrix.

    Differentiable: no: NumPy on the host.

    Args:
        x0: first batch ``(B, ...)``.
        x1: second batch ``(B', ...)`` with the same sample size.
        row_norms: include the row constants ``|a_i|^2`` (and clip at 0).

    Returns:
        The float64 cost matrix ``(B, B')``.
    """
    a = np.asarray(x0, np.float64).reshape(len(x0), -1)
    b = np.asarray(x1, np.float64).reshape(len(x1), -1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"x0 and x1 must have the same sample size; got {a.shape[1]} and "
                         f"{b.shape[1]}")
    c = a @ b.T
    c *= -2.0
    c += np.einsum("ij,ij->i", b, b)[None, :]
    if row_norms:
        c += np.einsum("ij,ij->i", a, a)[:, None]
        np.maximum(c, 0.0, out=c)
    return c


def host_assignment(cost: np.ndarray, solver: str = "auction") -> np.ndarray:
    """The optimal assignment of a square NumPy ``cost`` matrix on the host: ``perm`` with
    ``sum_i cost[i, perm[i]]`` minimal (int32). ``solver``: ``"auction"`` (jaxkit's
    auction-then-augmentation solver, :mod:`jaxkit.kernels._auction`; the fastest here,
    see benchmarks/RESULTS.md), ``"emd"`` (POT's network simplex, the solver torchcfm
    calls) or ``"host"`` (SciPy's ``linear_sum_assignment``). For input pipelines that
    pair minibatches off the device (e.g. in background threads, overlapping the device's
    training step); inside ``jit`` use :func:`exact_coupling`.

    Differentiable: no: NumPy on the host.

    Args:
        cost: a square, finite NumPy cost matrix ``(B, B)``.
        solver: ``"auction"``, ``"emd"`` or ``"host"``.

    Returns:
        The int32 permutation ``perm`` ``(B,)``.
    """
    if solver not in HOST_SOLVERS:
        raise ValueError(f"solver must be one of {tuple(HOST_SOLVERS)}; got {solver!r}")
    cost = np.asarray(cost)
    if cost.ndim != 2 or cost.shape[0] != cost.shape[1]:
        raise ValueError(f"cost must be a square matrix; got shape {cost.shape}")
    if not np.all(np.isfinite(cost)):
        raise ValueError("cost has NaN or inf entries")
    return HOST_SOLVERS[solver](cost)
