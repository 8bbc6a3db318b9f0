"""Host-side minibatch pairing for exact OT-CFM input pipelines.

Exact minibatch OT (Tong et al. 2024, OT-CFM) needs an assignment problem solved per
minibatch; on a CPU the best solvers (POT's network simplex, SciPy's shortest augmenting
path) take milliseconds at B = 256, more than a CFM training step. Solved inside the
step (``flow_ot.exact_coupling(..., solver="emd")``, a ``pure_callback``) the device waits
for it. Here the pairing moves into the input pipeline instead: :func:`paired_chunks`
draws chunks of minibatches on the host and re-pairs each one exactly, and
:func:`ot_paired_chunks` prefetches them on background threads
(:func:`jaxkit.prefetch.prefetch`) while the device trains on the previous chunk, e.g.
with a ``lax.scan`` of plain CFM steps over the chunk. The pairs are the same as those of
in-step exact OT-CFM on the same minibatches; only the time they are computed moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from .kernels import flow_ot
from .prefetch import prefetch

__all__ = ["paired_chunks", "ot_paired_chunks"]


def paired_chunks(data: np.ndarray, batch: int, n_steps: int, *, seed: int = 0,
                  solver: str = "emd") -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """``make(i) -> (x0, x1)``, each ``(n_steps, batch, *data.shape[1:])`` in ``data``'s
    float dtype: chunk ``i`` of ``n_steps`` minibatches, ``x1`` rows drawn uniformly (with
    replacement) from ``data``, sources ``x0 ~ N(0, I)``, from a NumPy generator seeded by
    ``(seed, i)`` (so any thread makes the same chunk), and every minibatch re-paired by
    the exact squared-Euclidean OT assignment (:func:`flow_ot.host_assignment` with
    ``solver``: ``"emd"``, POT's network simplex, or ``"host"``, SciPy's)."""
    data = np.asarray(data)
    if data.ndim < 2 or len(data) < 1:
        raise ValueError(f"`data` must be a non-empty (N, ...) array; got shape {data.shape}")
    if not np.issubdtype(data.dtype, np.floating):
        raise ValueError(f"`data` must be floating point; got {data.dtype}")
    if not np.all(np.isfinite(data)):
        raise ValueError("`data` has NaN or inf entries")
    for name, v in (("batch", batch), ("n_steps", n_steps)):
        if int(v) != v or v < 1:
            raise ValueError(f"`{name}` must be an integer >= 1; got {v!r}")
    if solver not in flow_ot.HOST_SOLVERS:
        raise ValueError(f"`solver` must be one of {tuple(flow_ot.HOST_SOLVERS)}; "
                         f"got {solver!r}")
    batch, n_steps = int(batch), int(n_steps)

    def make(i: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([seed, i])
        x1 = data[rng.integers(0, len(data), (n_steps, batch))]
        x0 = rng.standard_normal(x1.shape, dtype=np.float64).astype(data.dtype)
        for s in range(n_steps):
            cost = flow_ot.host_sq_cost(x0[s], x1[s])
            x1[s] = x1[s][flow_ot.host_assignment(cost, solver)]
        return x0, x1

    return make


def ot_paired_chunks(data: np.ndarray, batch: int, n_steps: int, n_chunks: int | None = None,
                     *, seed: int = 0, solver: str = "emd", workers: int = 2,
                     depth: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The chunks of :func:`paired_chunks` in order (``n_chunks`` of them, or without end),
    made ``depth`` (default ``2 * workers``) ahead on ``workers`` background threads."""
    make = paired_chunks(data, batch, n_steps, seed=seed, solver=solver)
    return prefetch(make, n_chunks, depth=2 * workers if depth is None else depth,
                    workers=workers)
