"""Causal multi-head self-attention (Vaswani et al. 2017), the one implementation the
composed models and the GPT benchmark share.

.. math::

    \\mathrm{Attn}(Q, K, V)_t = \\sum_{s \\le t}
    \\mathrm{softmax}_s\\!\\Big(\\frac{q_t \\cdot k_s}{\\sqrt{d_h}}\\Big) v_s

per head. Logits and softmax are float32 whatever the input dtype. ``impl="einsum"``
writes the product out (XLA fuses the mask and softmax); ``impl="xla"`` calls
``jax.nn.dot_product_attention(..., is_causal=True)``, which on GPU can pick a fused
(cuDNN flash) kernel.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

__all__ = ["AttentionParams", "causal_attention", "self_attention", "init_attention"]

F32 = jnp.float32
Impl = Literal["einsum", "xla"]


class AttentionParams(NamedTuple):
    """Fused query/key/value projection (D, 3D) and output projection (D, D); no biases
    (nanoGPT's ``bias=False``)."""

    w_qkv: Array
    w_o: Array


def causal_attention(q: Float[Array, "B T H E"], k: Float[Array, "B T H E"],
                     v: Float[Array, "B T H E"], *, impl: Impl = "einsum"
                     ) -> Float[Array, "B T H E"]:
    """Causal softmax attention (module docstring).

    Args:
      q, k, v: queries, keys and values (batch, time, heads, head dim).
      impl: "einsum" or "xla" (static).

    Returns:
      The attended values, in ``v``'s dtype.
    """
    if not (q.shape == k.shape == v.shape and q.ndim == 4):
        raise ValueError(f"`q`, `k`, `v` must share one (batch, time, heads, head_dim) "
                         f"shape; got {q.shape}, {k.shape}, {v.shape}")
    if impl == "xla":
        return jax.nn.dot_product_attention(q, k, v, is_causal=True).astype(v.dtype)
    if impl != "einsum":
        raise ValueError(f"`impl` must be 'einsum' or 'xla'; got {impl!r}")
    t, e = q.shape[1], q.shape[3]
    logits = jnp.einsum("bthe,bshe->bhts", q, k, preferred_element_type=F32) / math.sqrt(e)
    mask = jnp.tril(jnp.ones((t, t), bool))
    logits = jnp.where(mask, logits, -jnp.inf)
    w = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhts,bshe->bthe", w, v)


def self_attention(params: AttentionParams, x: Float[Array, "B T D"], n_heads: int, *,
                   impl: Impl = "einsum") -> Float[Array, "B T D"]:
    """``W_o · Attn(x W_q, x W_k, x W_v)`` with ``n_heads`` heads (static).

    Args:
      params: the :class:`AttentionParams`.
      x: inputs (batch, time, width); width divisible by ``n_heads``.
      n_heads: number of heads.
      impl: see :func:`causal_attention`.

    Returns:
      (batch, time, width) in ``x``'s dtype.
    """
    b, t, d = x.shape
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"width {d} must be divisible by `n_heads` ({n_heads})")
    qkv = (x @ params.w_qkv.astype(x.dtype)).reshape(b, t, 3, n_heads, d // n_heads)
    o = causal_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], impl=impl)
    return o.reshape(b, t, d) @ params.w_o.astype(x.dtype)


def init_attention(key: PRNGKeyArray, d: int, *, n_layers: int = 1,
                   dtype=jnp.float32) -> AttentionParams:
    """Normal(0, 0.02) projections; the output projection scaled by
    ``1 / sqrt(2 n_layers)`` (GPT-2's residual scaling)."""
    k1, k2 = jax.random.split(key)
    std = 0.02
    return AttentionParams(std * jax.random.normal(k1, (d, 3 * d), dtype),
                           std / math.sqrt(2 * n_layers) * jax.random.normal(k2, (d, d), dtype))
