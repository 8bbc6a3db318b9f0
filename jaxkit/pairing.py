"""Host-side minibatch pairing for exact OT-CFM input pipelines.

Exact minibatch OT (Tong et al. 2024, OT-CFM) needs an assignment problem solved per
minibatch, a cost of the same order as a CFM training step on a CPU (figures in
``benchmarks/RESULTS.md``). Solved inside the step
(``flow_ot.exact_coupling(..., solver="auction")``, a ``pure_callback``) the device
waits for it. Here the pairing moves into the input pipeline instead:
:func:`paired_chunks` draws chunks of minibatches on the host and re-pairs each one
exactly, and :func:`ot_paired_chunks` prefetches them on background threads
(:func:`jaxkit.prefetch.prefetch`) while the device trains on the previous chunk, e.g.
with a ``lax.scan`` of plain CFM steps over the chunk. The pairs are the same as those of
in-step exact OT-CFM on the same minibatches; only the time they are computed moves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
from threadpoolctl import threadpool_limits

from .kernels import flow_ot
from .prefetch import prefetch

__all__ = ["paired_chunks", "ot_paired_chunks", "limit_blas"]


def paired_chunks(data: np.ndarray, batch: int, n_steps: int, *, seed: int = 0,
                  solver: str = "auction") -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """``make(i) -> (x0, x1)``, each ``(n_steps, batch, *data.shape[1:])`` in ``data``'s
    float dtype: chunk ``i`` of ``n_steps`` minibatches, ``x1`` rows drawn uniformly (with
    replacement) from ``data``, sources ``x0 ~ N(0, I)``, from a NumPy generator seeded by
    ``(seed, i)`` (so any thread makes the same chunk), and every minibatch re-paired by
    the exact squared-Euclidean OT assignment (:func:`flow_ot.host_assignment` with
    ``solver``: ``"auction"``, jaxkit's, ``"emd"``, POT's network simplex, or ``"host"``,
    SciPy's). ``"auction"`` releases the GIL, so ``workers`` threads pair in parallel."""
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

    # the solver itself, not host_assignment: its checks (square, finite) hold by
    # construction here and would cost a pass over every B x B cost matrix
    assign = flow_ot.HOST_SOLVERS[solver]

    def make(i: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([seed, i])
        x1 = data[rng.integers(0, len(data), (n_steps, batch))]
        x0 = _normal(rng, x1.shape, data.dtype)
        for s in range(n_steps):
            x1[s] = x1[s][assign(flow_ot.host_sq_cost(x0[s], x1[s], row_norms=False))]
        return x0, x1

    return make


def _normal(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    """Standard normal draws by the Box-Muller transform of uniforms. Why not
    ``Generator.standard_normal``: its ziggurat took 146 us for 16,384 float32 draws on
    the 2-core CI machine against 43 us here, and in 64-D that was a fifth of the host's
    work per paired minibatch (ad hoc)."""
    n = int(np.prod(shape))
    half = (n + 1) // 2
    u = rng.random(2 * half, dtype=np.float64 if dtype == np.float64 else np.float32)
    r = np.sqrt(-2.0 * np.log1p(-u[:half]))  # u < 1, so the log is finite
    theta = (2.0 * np.pi) * u[half:]
    z = np.concatenate([r * np.cos(theta), r * np.sin(theta)])[:n]
    return z.reshape(shape).astype(dtype, copy=False)


def limit_blas(n: int | None = 1) -> contextlib.AbstractContextManager:
    """``with limit_blas(n):`` the process's BLAS libraries (OpenBLAS, MKL, BLIS, through
    ``threadpoolctl``) use at most ``n`` threads (``None``: no change); the previous
    limits come back on exit.

    Host pipelines that run next to XLA want ``n = 1``. Their cost matrices are small
    GEMMs, and BLAS's own worker threads spin on the cores XLA trains on (the measured
    effect on ``benchmarks/bench_flow.py``'s prefetched pipeline is in
    ``benchmarks/RESULTS.md``). The limit is process-wide while it lasts."""
    _check_blas(n)
    if n is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=int(n), user_api="blas")


def _check_blas(n) -> None:
    if n is not None and (int(n) != n or n < 1):
        raise ValueError(f"`blas_threads` must be None or an integer >= 1; got {n!r}")


def ot_paired_chunks(data: np.ndarray, batch: int, n_steps: int, n_chunks: int | None = None,
                     *, seed: int = 0, solver: str = "auction", workers: int = 2,
                     depth: int | None = None, blas_threads: int | None = 1,
                     nice: int | None = 19) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The chunks of :func:`paired_chunks` in order (``n_chunks`` of them, or without end),
    made ``depth`` (default ``2 * workers``) ahead on ``workers`` background threads.
    From its first item until it ends or is closed, BLAS uses at most ``blas_threads``
    threads process-wide (:func:`limit_blas`; ``None`` leaves BLAS alone).

    ``nice``: the pairing threads' niceness (Linux; :func:`jaxkit.prefetch.prefetch`).
    The default, 19, makes them yield to XLA's threads, so that on a CPU the pairing fills
    the idle time of the training step instead of stalling its parallel loops
    (``benchmarks/RESULTS.md`` has the figures). Pass ``None`` where other busy processes
    share the CPU and could starve the threads."""
    _check_blas(blas_threads)
    make = paired_chunks(data, batch, n_steps, seed=seed, solver=solver)
    it = prefetch(make, n_chunks, depth=2 * workers if depth is None else depth,
                  workers=workers, nice=nice)  # checks its arguments; starts on first item
    return _limited(it, blas_threads)


def _limited(it: Iterator, threads: int | None) -> Iterator:
    # entered on the first item, before the threads start; closing this generator closes
    # ``it`` too (``yield from``), which stops its threads
    with limit_blas(threads):
        yield from it
