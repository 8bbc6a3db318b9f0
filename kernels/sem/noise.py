"""Zero-mean, unit-variance noise laws of the SEM simulator."""

from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._checks import float_dtype as _float_dtype

__all__ = ["NoiseKind", "NOISES", "sample_noise"]

NoiseKind = Literal["gaussian", "laplace", "uniform"]
NOISES = ("gaussian", "laplace", "uniform")


def sample_noise(key: PRNGKeyArray, shape: tuple[int, ...], kind: NoiseKind = "gaussian",
                 dtype=None) -> Float[Array, "..."]:
    """Zero-mean, unit-variance noise.

    ``"gaussian"``: ``N(0, 1)``; ``"laplace"``: ``Laplace(0, 1/sqrt 2)`` (excess
    kurtosis 3); ``"uniform"``: ``U[-sqrt 3, sqrt 3]`` (excess kurtosis -1.2).

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
        key: PRNG key.
        shape: output shape (static).
        kind: ``"gaussian"``, ``"laplace"`` or ``"uniform"`` (static).
        dtype: float dtype (default: JAX's default float).

    Returns:
        The noise, of shape ``shape``.
    """
    dtype = _float_dtype(dtype)
    if kind == "gaussian":
        return jax.random.normal(key, shape, dtype)
    if kind == "laplace":
        return jax.random.laplace(key, shape, dtype) / jnp.sqrt(jnp.asarray(2.0, dtype))
    if kind == "uniform":
        r3 = math.sqrt(3.0)
        return jax.random.uniform(key, shape, dtype, minval=-r3, maxval=r3)
    raise ValueError(f"noise `kind` must be one of {NOISES}; got {kind!r}")

