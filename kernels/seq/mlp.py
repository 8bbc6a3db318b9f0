"""The position-wise MLP block: ``GELU(x W_in) W_out`` (Vaswani et al. 2017; exact GELU,
Hendrycks & Gimpel 2016, as nanoGPT), no biases."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

__all__ = ["MLPParams", "mlp", "init_mlp"]


class MLPParams(NamedTuple):
    """``w_in`` (D, F) and ``w_out`` (F, D)."""

    w_in: Array
    w_out: Array


def mlp(params: MLPParams, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
    """``GELU(x W_in) W_out`` in ``x``'s dtype.

    Args:
      params: the :class:`MLPParams`.
      x: inputs (..., D).

    Returns:
      (..., D).
    """
    if params.w_in.shape[0] != x.shape[-1]:
        raise ValueError(f"`x` width {x.shape[-1]} does not match `w_in` {params.w_in.shape}")
    h = jax.nn.gelu(x @ params.w_in.astype(x.dtype), approximate=False)
    return h @ params.w_out.astype(x.dtype)


def init_mlp(key: PRNGKeyArray, d: int, hidden: int, *, n_layers: int = 1,
             dtype=jnp.float32) -> MLPParams:
    """Normal(0, 0.02) weights, the output scaled by ``1 / sqrt(2 n_layers)``."""
    k1, k2 = jax.random.split(key)
    return MLPParams(0.02 * jax.random.normal(k1, (d, hidden), dtype),
                     0.02 / math.sqrt(2 * n_layers) * jax.random.normal(k2, (hidden, d), dtype))
