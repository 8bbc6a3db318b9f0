"""The fair Transformer baseline: a Llama-style byte-level language model built from
:mod:`jaxkit.lm`'s own layers (a thin adapter; nothing of the layers is rewritten here).

Each block is Llama 3's (Grattafiori et al. 2024), exactly as :func:`jaxkit.lm.model.forward`
computes it:

.. math::

    h = x + W_o\\,\\mathrm{GQA}(\\mathrm{RoPE}(W_q n), \\mathrm{RoPE}(W_k n), W_v n),
    \\quad n = \\mathrm{RMSNorm}(x)

    y = h + W_{down}(\\mathrm{silu}(W_{gate} m) \\odot W_{up} m), \\quad m = \\mathrm{RMSNorm}(h)

with grouped-query attention (``n_kv_heads`` key/value heads shared by the query heads),
rotary positions (no learned positions), SwiGLU and a tied byte embedding. The adapter
supplies what a pretrained checkpoint would: a configuration for a 256-byte vocabulary
(:func:`llama_config`), a GPT-2-style random initialisation for training from scratch
(:func:`init_weights`), the logits as a pure function of a parameter dict
(:func:`llama_apply`) and the parameter count in the convention of
:meth:`jaxkit.compose.arch.Arch.n_params` (non-embedding: the blocks and the final norm).

:func:`match_d_ff` chooses the SwiGLU width that makes the model's non-embedding
parameter count closest to a target (the parameter-matched baseline).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.lm.model import Llama, LlamaConfig, forward

__all__ = ["llama_config", "init_weights", "build_llama", "llama_apply",
           "llama_n_params", "match_d_ff"]


def llama_config(width: int, n_blocks: int, heads: int, d_ff: int, *,
                 kv_heads: int | None = None, vocab: int = 256,
                 context: int = 2048) -> LlamaConfig:
    """A :class:`jaxkit.lm.LlamaConfig` for a byte model.

    Args:
      width: ``d_model`` (divisible by ``heads``; ``width / heads`` even for RoPE).
      n_blocks: Llama blocks (each one attention and one SwiGLU sub-block).
      heads: query heads.
      d_ff: SwiGLU hidden width.
      kv_heads: key/value heads (default ``heads // 2`` when ``heads`` is even, else
        ``heads``: grouped-query attention with two queries per key).
      vocab: vocabulary (256 bytes).
      context: the positions the RoPE model is used at (informative only).

    Returns:
      The config (tied embedding).
    """
    if width % heads or (width // heads) % 2:
        raise ValueError(f"`width` ({width}) must be divisible by `heads` ({heads}) with an "
                         f"even head dimension (RoPE)")
    if kv_heads is None:
        kv_heads = heads // 2 if heads % 2 == 0 else heads
    return LlamaConfig(n_layers=int(n_blocks), d_model=int(width), n_heads=int(heads),
                       n_kv_heads=int(kv_heads), head_dim=width // heads, d_ff=int(d_ff),
                       vocab_size=int(vocab), context_length=int(context), tied=True)


def init_weights(c: LlamaConfig, key) -> dict[str, jax.Array]:
    """Random float32 weights for training from scratch: embedding ``N(0, 0.02^2)``,
    matrices ``N(0, 1 / fan_in)`` with the residual outputs (``wo``, ``w_down``) scaled
    by ``1 / sqrt(2 n_layers)`` (GPT-2's rule), norms one; stacked on a layer axis as
    :class:`jaxkit.lm.Llama` takes them."""
    L, d, F, hd = c.n_layers, c.d_model, c.d_ff, c.head_dim
    ks = iter(jax.random.split(key, 8))

    def normal(shape, fan_in, scale=1.0):
        return (scale / np.sqrt(fan_in)) * jax.random.normal(next(ks), shape, jnp.float32)

    res = 1.0 / np.sqrt(2 * L)
    return {"embed": 0.02 * jax.random.normal(next(ks), (c.vocab_size, d), jnp.float32),
            "final_norm": jnp.ones((d,), jnp.float32),
            "attn_norm": jnp.ones((L, d), jnp.float32),
            "mlp_norm": jnp.ones((L, d), jnp.float32),
            "wq": normal((L, d, c.n_heads * hd), d),
            "wk": normal((L, d, c.n_kv_heads * hd), d),
            "wv": normal((L, d, c.n_kv_heads * hd), d),
            "wo": normal((L, c.n_heads * hd, d), c.n_heads * hd, res),
            "w_gate": normal((L, d, F), d), "w_up": normal((L, d, F), d),
            "w_down": normal((L, F, d), F, res)}


def build_llama(c: LlamaConfig, key) -> Llama:
    """The :class:`jaxkit.lm.Llama` of ``c`` with :func:`init_weights` ``(c, key)``."""
    return Llama(c, init_weights(c, key))


def llama_apply(model: Llama, tokens):
    """Float32 logits ``(B, T, 256)`` of int ``tokens (B, T)``: jaxkit.lm's own
    :func:`jaxkit.lm.model.forward` (RMSNorm, RoPE, grouped-query attention, SwiGLU)."""
    return forward(model, tokens)[0]


def llama_n_params(c: LlamaConfig) -> int:
    """Non-embedding parameters: per block two norms, ``W_q, W_k, W_v, W_o`` and the
    three SwiGLU matrices; plus the final norm (:attr:`LlamaConfig.n_params` less the
    tied embedding)."""
    return c.n_params - c.vocab_size * c.d_model


def match_d_ff(target: int, width: int, n_blocks: int, heads: int, *, multiple: int = 4,
               kv_heads: int | None = None) -> int:
    """The SwiGLU width (a positive multiple of ``multiple``) whose model's
    :func:`llama_n_params` is closest to ``target``."""
    c0 = llama_config(width, n_blocks, heads, multiple, kv_heads=kv_heads)
    per_ff = 3 * width * n_blocks  # parameters per unit of d_ff
    base = llama_n_params(c0) - per_ff * multiple
    f = max(1, round((target - base) / (per_ff * multiple)))
    return int(f * multiple)
