"""Normalisation layers, computed in float32 and returned in the input dtype.

* LayerNorm (Ba et al. 2016): ``(x - mean) / sqrt(var + eps) * w (+ b)``;
* RMSNorm (Zhang & Sennrich 2019): ``x / sqrt(mean(x^2) + eps) * w``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["layer_norm", "rms_norm"]

F32 = jnp.float32


def layer_norm(x: Float[Array, "... D"], w: Float[Array, " D"],
               b: Float[Array, " D"] | None = None, *, eps: float = 1e-5) -> Array:
    """LayerNorm over the last axis.

    Differentiable: yes, in x, w and b.

    Args:
      x: inputs (..., D).
      w: scale (D,).
      b: shift (D,), or None (nanoGPT's ``bias=False``).
      eps: variance floor.

    Returns:
      Normalised ``x`` in its dtype.
    """
    xf = x.astype(F32)
    mu = jnp.mean(xf, -1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mu), -1, keepdims=True)
    y = (xf - mu) * jax.lax.rsqrt(var + eps) * w.astype(F32)
    if b is not None:
        y = y + b.astype(F32)
    return y.astype(x.dtype)


def rms_norm(x: Float[Array, "... D"], w: Float[Array, " D"], *, eps: float = 1e-5) -> Array:
    """RMSNorm over the last axis (as :func:`layer_norm`, no shift).

    Differentiable: yes, in x and w.

    Args:
      x: inputs (..., D).
      w: scale (D,).
      eps: floor of the mean square.

    Returns:
      Normalised ``x`` in its dtype (computed in float32).
    """
    xf = x.astype(F32)
    y = xf * jax.lax.rsqrt(jnp.mean(jnp.square(xf), -1, keepdims=True) + eps)
    return (y * w.astype(F32)).astype(x.dtype)
