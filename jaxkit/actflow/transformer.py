"""A small transformer denoiser for discrete flow matching on token sequences.

``logits(t, x)``: tokens ``x`` ((L,) in ``[0, V]``, ``V`` the mask token) are embedded
(learned token and position embeddings, plus a linear map of a sinusoidal embedding of
``t`` added to every position), passed through ``depth`` pre-norm encoder blocks
(bidirectional multi-head self-attention, then a GELU MLP of width ``4 * hidden``, each
with a residual connection; Vaswani et al. 2017, "Attention is all you need", with the
pre-norm placement of Xiong et al. 2020), a final layer norm and a linear read-out to
``(L, V)`` logits over the clean tokens. The same interface as
:class:`jaxkit.actflow.discrete.Denoiser` (an MLP over the flattened one-hot), so the
loss, sampler and training step of :mod:`jaxkit.actflow.discrete` use either; attention
lets every position see every other one, which the long SELFIES strings of the drug-like
domain need (ring and branch tokens refer to positions further on).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxkit.kernels.nets import sinusoidal_embedding

__all__ = ["TransformerDenoiser"]


class _Block(eqx.Module):
    norm1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, hidden: int, heads: int, *, key):
        k1, k2 = jax.random.split(key)
        self.norm1, self.norm2 = eqx.nn.LayerNorm(hidden), eqx.nn.LayerNorm(hidden)
        self.attn = eqx.nn.MultiheadAttention(heads, hidden, key=k1)
        self.mlp = eqx.nn.MLP(hidden, hidden, 4 * hidden, 1, activation=jax.nn.gelu, key=k2)

    def __call__(self, h):
        a = jax.vmap(self.norm1)(h)
        h = h + self.attn(a, a, a)
        return h + jax.vmap(self.mlp)(jax.vmap(self.norm2)(h))


class TransformerDenoiser(eqx.Module):
    """``TransformerDenoiser(length, vocab, hidden, depth, heads=4, key=...)``: (L,) tokens
    in ``[0, vocab]`` and a time ``t`` -> (L, vocab) logits (see the module).

    Args:
        length: sequence length L.
        vocab: number of clean tokens V (the mask token is V).
        hidden: model width (a multiple of ``heads``).
        depth: encoder blocks.
        heads: attention heads.
        key: the initialisation key.
    """

    embed: eqx.nn.Embedding
    pos: jax.Array
    time: eqx.nn.Linear
    blocks: list
    norm: eqx.nn.LayerNorm
    out: eqx.nn.Linear
    length: int = eqx.field(static=True)
    vocab: int = eqx.field(static=True)

    def __init__(self, length: int, vocab: int, hidden: int, depth: int, heads: int = 4, *,
                 key):
        if hidden % heads:
            raise ValueError(f"`hidden` ({hidden}) must be a multiple of `heads` ({heads})")
        ke, kp, kt, ko, *kb = jax.random.split(key, 4 + depth)
        self.length, self.vocab = length, vocab
        self.embed = eqx.nn.Embedding(vocab + 1, hidden, key=ke)
        self.pos = 0.02 * jax.random.normal(kp, (length, hidden))
        self.time = eqx.nn.Linear(16, hidden, key=kt)
        self.blocks = [_Block(hidden, heads, key=k) for k in kb]
        self.norm = eqx.nn.LayerNorm(hidden)
        self.out = eqx.nn.Linear(hidden, vocab, key=ko)

    def __call__(self, t, x):
        e = sinusoidal_embedding(jnp.asarray(t, jnp.float32), 16, max_period=100.0)
        h = jax.vmap(self.embed)(x) + self.pos + self.time(e)
        for b in self.blocks:
            h = b(h)
        return jax.vmap(self.out)(jax.vmap(self.norm)(h))
