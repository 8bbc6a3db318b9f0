"""Argument checks and dtype defaults shared by the SEM simulator's modules."""

from __future__ import annotations

import jax.numpy as jnp


def float_dtype(dtype):
    """``dtype`` as a NumPy dtype, JAX's default float when ``None``."""
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def check_d(d) -> int:
    """``d`` must be a positive Python int (a static node count)."""
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ValueError(f"`d` must be a positive Python int; got {d!r}")
    return d
