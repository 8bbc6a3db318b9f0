"""Means over one axis of a 2-D array written as matrix-vector products.

``mean_last(a) = a @ 1 / n`` equals ``jnp.mean(a, axis=-1)`` up to rounding. XLA:CPU (jax
0.10) hands a plain float64 row reduction to a YNNPACK fusion that can run on the intra-op
thread pool; with single-threaded XLA (``--xla_cpu_multi_thread_eigen=false``) each such call
in FastICA's loop waited ~30 us for the hand-off, and the batched float64 fit took 25% more
CPU time than with the product, which XLA emits inline. With one CPU device per core (the
benchmarks' default) the two read the same (benchmarks/RESULTS.md, profiling notes of
2026-12-02).

In float32 the products cost instead: the batched float32 fit (256 x (2000, 10)) took
61-65 ms on one device and 34-35 ms on two with them, 52-56 and 28 ms with the plain
reductions (2-core AVX-512, 2026-12-04; benchmarks/RESULTS.md). So only float64 arrays
take the product form; other dtypes get ``jnp.mean``.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["mean_last", "mean_first", "std_last"]


def mean_last(a):
    """Mean over the last axis (``jnp.mean(a, axis=-1)``), as ``a @ 1 / n`` for 2-D float64
    ``a``."""
    if a.ndim != 2 or a.dtype != jnp.float64:
        return jnp.mean(a, axis=-1)
    n = a.shape[-1]
    return (a @ jnp.ones((n,), a.dtype)) * (1.0 / n)


def mean_first(a):
    """Mean over the first axis of a 2-D array, as ``1^T a / n`` in float64."""
    if a.dtype != jnp.float64:
        return jnp.mean(a, axis=0)
    n = a.shape[0]
    return (jnp.ones((n,), a.dtype) @ a) * (1.0 / n)


def std_last(a):
    """Population standard deviation over the last axis of a 2-D array
    (``jnp.std(a, axis=-1)``), both reductions as products."""
    c = a - mean_last(a)[:, None]
    return jnp.sqrt(mean_last(c * c))
