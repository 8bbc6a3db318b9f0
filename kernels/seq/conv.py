"""Causal depthwise 1-D convolution (the short convolution of Mamba blocks).

``y_{t,c} = b_c + sum_{j=0}^{K-1} w_{j,c} x_{t-K+1+j, c}`` with ``x`` zero before the
start, i.e. PyTorch's ``Conv1d(C, C, K, groups=C, padding=K-1)`` cut to the first ``L``
outputs (its weight ``(C, 1, K)`` is ``w.T[:, None, :]`` here)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["causal_conv1d"]


def causal_conv1d(x: Float[Array, "B L C"], w: Float[Array, "K C"],
                  b: Float[Array, " C"] | None = None) -> Float[Array, "B L C"]:
    """Causal depthwise convolution as a sum of ``K`` shifted products.

    Differentiable: yes, in x, w and b.

    Args:
      x: inputs (batch, length, channels).
      w: kernel (width K, channels).
      b: bias (channels,), or None.

    Returns:
      (batch, length, channels) in ``x``'s dtype.
    """
    if w.ndim != 2 or w.shape[1] != x.shape[-1]:
        raise ValueError(f"`w` must be (width, channels={x.shape[-1]}); got {w.shape}")
    k, length = w.shape[0], x.shape[1]
    xp = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))
    w = w.astype(x.dtype)
    y = sum(xp[:, j:j + length] * w[j] for j in range(k))
    return y if b is None else y + b.astype(x.dtype)
