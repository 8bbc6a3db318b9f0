"""Causal multi-head self-attention (Vaswani et al. 2017), the one implementation the
composed models and the GPT benchmark share.

.. math::

    \\mathrm{Attn}(Q, K, V)_t = \\sum_{s \\le t}
    \\mathrm{softmax}_s\\!\\Big(\\frac{q_t \\cdot k_s}{\\sqrt{d_h}}\\Big) v_s

per head. Logits and softmax are float32 whatever the input dtype. ``impl="einsum"``
writes the products out in the heads-major layout (batch, heads, time, head dim), where
both products are plain batched matrix products: the scale ``1/sqrt(d_h)`` is folded
into the queries, the causal mask is an iota comparison (no materialised mask), the
softmax is normalised after the second product (``T x d_h`` divisions instead of
``T x T``), and the queries go in row blocks of ``block`` steps, each against only the
keys it can see (``s < block end``), which skips the upper triangle above the diagonal
blocks (about half the work at ``T >> block``; each block's softmax is exact, no online
rescaling). ``impl="xla"`` calls ``jax.nn.dot_product_attention(..., is_causal=True)``,
which on GPU can pick a fused (cuDNN flash) kernel.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .linear import linear

__all__ = ["AttentionParams", "causal_attention", "causal_attention_heads", "self_attention",
           "init_attention"]

F32 = jnp.float32
Impl = Literal["einsum", "xla"]
BLOCK = 64  # query rows per block on CPU (benchmarks/RESULTS.md)


class AttentionParams(NamedTuple):
    """Fused query/key/value projection (D, 3D) and output projection (D, D); no biases
    (nanoGPT's ``bias=False``)."""

    w_qkv: Array
    w_o: Array


def causal_attention_heads(q: Float[Array, "B H T E"], k: Float[Array, "B H T E"],
                           v: Float[Array, "B H T E"], *, block: int = BLOCK
                           ) -> Float[Array, "B H T E"]:
    """Causal softmax attention in the heads-major layout, query rows in blocks of
    ``block`` (module docstring).

    Differentiable: yes, in q, k and v (computed in float32).

    Args:
      q, k, v: queries, keys and values (batch, heads, time, head dim).
      block: query rows per block (static, >= 1); ``block >= T`` is one block.

    Returns:
      The attended values (batch, heads, time, head dim), in ``v``'s dtype.
    """
    if not (q.shape == k.shape == v.shape and q.ndim == 4):
        raise ValueError(f"`q`, `k`, `v` must share one (batch, heads, time, head_dim) "
                         f"shape; got {q.shape}, {k.shape}, {v.shape}")
    if not (isinstance(block, int) and block >= 1):
        raise ValueError(f"`block` must be an int >= 1; got {block!r}")
    t, e = q.shape[2], q.shape[3]
    q = q * jnp.asarray(1 / math.sqrt(e), q.dtype)
    outs = []
    for s0 in range(0, t, block):
        s1 = min(s0 + block, t)
        kb, vb = k[:, :, :s1], v[:, :, :s1]
        s = jnp.einsum("bhte,bhse->bhts", q[:, :, s0:s1], kb, preferred_element_type=F32)
        row = jax.lax.broadcasted_iota(jnp.int32, (s1 - s0, s1), 0) + s0
        col = jax.lax.broadcasted_iota(jnp.int32, (s1 - s0, s1), 1)
        s = jnp.where(row >= col, s, -jnp.inf)
        p = jnp.exp(s - jax.lax.stop_gradient(s.max(-1, keepdims=True)))
        o = jnp.einsum("bhts,bhse->bhte", p.astype(v.dtype), vb, preferred_element_type=F32)
        outs.append(o / p.sum(-1, keepdims=True))
    o = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=2)
    return o.astype(v.dtype)


def causal_attention(q: Float[Array, "B T H E"], k: Float[Array, "B T H E"],
                     v: Float[Array, "B T H E"], *, impl: Impl = "einsum",
                     block: int = BLOCK) -> Float[Array, "B T H E"]:
    """Causal softmax attention (module docstring) on (batch, time, heads, head dim).

    Differentiable: yes, in q, k and v (computed in float32).

    Args:
      q, k, v: queries, keys and values (batch, time, heads, head dim).
      impl: "einsum" or "xla" (static).
      block: query rows per block of the "einsum" path (static).

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
    q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))
    return jnp.swapaxes(causal_attention_heads(q, k, v, block=block), 1, 2)


def self_attention(params: AttentionParams, x: Float[Array, "B T D"], n_heads: int, *,
                   impl: Impl = "einsum", block: int = BLOCK) -> Float[Array, "B T D"]:
    """``W_o · Attn(x W_q, x W_k, x W_v)`` with ``n_heads`` heads (static).

    Differentiable: yes, in params and x.

    Args:
      params: the :class:`AttentionParams`.
      x: inputs (batch, time, width); width divisible by ``n_heads``.
      n_heads: number of heads.
      impl, block: see :func:`causal_attention`.

    Returns:
      (batch, time, width) in ``x``'s dtype.
    """
    b, t, d = x.shape
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"width {d} must be divisible by `n_heads` ({n_heads})")
    qkv = linear(x, params.w_qkv).reshape(b, t, 3, n_heads, d // n_heads)
    if impl == "einsum":  # one transpose into the heads-major layout and one out of it
        q, k, v = jnp.transpose(qkv, (2, 0, 3, 1, 4))
        o = jnp.swapaxes(causal_attention_heads(q, k, v, block=block), 1, 2)
    else:
        o = causal_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], impl=impl)
    return linear(o.reshape(b, t, d), params.w_o)


def init_attention(key: PRNGKeyArray, d: int, *, n_layers: int = 1,
                   dtype=jnp.float32) -> AttentionParams:
    """Normal(0, 0.02) projections; the output projection scaled by
    ``1 / sqrt(2 n_layers)`` (GPT-2's residual scaling).

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
      key: PRNG key.
      d: model width ``D`` (static).
      n_layers: number of residual layers of the network (static), for the scaling.
      dtype: the parameters' dtype.

    Returns:
      :class:`AttentionParams` with ``w_qkv (D, 3 D)`` and ``w_o (D, D)``.
    """
    k1, k2 = jax.random.split(key)
    std = 0.02
    return AttentionParams(std * jax.random.normal(k1, (d, 3 * d), dtype),
                           std / math.sqrt(2 * n_layers) * jax.random.normal(k2, (d, d), dtype))
