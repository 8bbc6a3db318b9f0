"""The position-wise MLP block: ``GELU(x W_in) W_out`` (Vaswani et al. 2017; exact GELU,
Hendrycks & Gimpel 2016, as nanoGPT), no biases.

The exact GELU is ``x Phi(x)`` with ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``, derivative
``Phi(x) + x phi(x)``. :func:`gelu` writes it with ``erf`` and a custom JVP that forms the
derivative from the same ``Phi`` and one ``exp``: ``jax.nn.gelu(approximate=False)`` goes
through ``erfc``, whose XLA:CPU expansion (two polynomial branches and a select) and
autodiff cost more than the matrix products of a small MLP (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .linear import linear

__all__ = ["MLPParams", "mlp", "init_mlp", "gelu"]

_RSQRT2 = 1 / math.sqrt(2)
_RSQRT2PI = 1 / math.sqrt(2 * math.pi)


@jax.custom_jvp
def gelu(x: Array) -> Array:
    """The exact GELU ``x Phi(x)`` (module docstring), computed in float32 and returned in
    ``x``'s dtype.

    Differentiable: yes, in x (its custom JVP, in float32).
    """
    xf = x.astype(jnp.float32)
    return (xf * (0.5 + 0.5 * jax.lax.erf(xf * _RSQRT2))).astype(x.dtype)


@gelu.defjvp
def _gelu_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    xf = x.astype(jnp.float32)
    cdf = 0.5 + 0.5 * jax.lax.erf(xf * _RSQRT2)
    slope = cdf + xf * jnp.exp(-0.5 * xf * xf) * _RSQRT2PI
    return (xf * cdf).astype(x.dtype), (slope * t.astype(jnp.float32)).astype(x.dtype)


class MLPParams(NamedTuple):
    """``w_in`` (D, F) and ``w_out`` (F, D)."""

    w_in: Array
    w_out: Array


def mlp(params: MLPParams, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
    """``GELU(x W_in) W_out`` in ``x``'s dtype.

    Differentiable: yes, in params and x.

    Args:
      params: the :class:`MLPParams`.
      x: inputs (..., D).

    Returns:
      (..., D).
    """
    if params.w_in.shape[0] != x.shape[-1]:
        raise ValueError(f"`x` width {x.shape[-1]} does not match `w_in` {params.w_in.shape}")
    h = gelu(linear(x, params.w_in))
    return linear(h, params.w_out)


def init_mlp(key: PRNGKeyArray, d: int, hidden: int, *, n_layers: int = 1,
             dtype=jnp.float32) -> MLPParams:
    """Normal(0, 0.02) weights, the output scaled by ``1 / sqrt(2 n_layers)``.

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
      key: PRNG key.
      d: model width ``D`` (static).
      hidden: hidden width ``H`` (static).
      n_layers: number of residual layers of the network (static), for the scaling.
      dtype: the parameters' dtype.

    Returns:
      :class:`MLPParams` with ``w_in (D, H)`` and ``w_out (H, D)``.
    """
    k1, k2 = jax.random.split(key)
    return MLPParams(0.02 * jax.random.normal(k1, (d, hidden), dtype),
                     0.02 / math.sqrt(2 * n_layers) * jax.random.normal(k2, (hidden, d), dtype))
