"""Batched sampling with a key/value cache: one compiled prefill, one compiled decode loop.

Rows are left-padded to a common prompt length ``P`` so that every row writes the same
cache slot at each step (``index``) while its RoPE position is ``index - pad[b]``. The
state (:class:`DecodeState`) carries the cache, each row's last token, how many tokens it
has produced and whether it is done. :func:`decode` runs a ``lax.while_loop`` of
:func:`step` until every row is done or ``n_steps`` have run, so the host can look between
calls (stop strings) without recompiling.

Sampling (:func:`sample`): greedy when ``temperature == 0``; otherwise
``softmax(logits / temperature)`` restricted to the smallest set of tokens whose
probability reaches ``top_p`` (nucleus sampling, Holtzman et al. 2020). The key for the
token drawn from slot ``i``'s logits is ``fold_in(key, i)``, so a draw does not depend on how
the host splits the loop into calls. ``temperature`` and ``top_p`` are traced: new values
compile nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxkit.lm.model import KVCache, Llama, decode_step, prefill

__all__ = ["DecodeState", "sample", "start", "step", "decode"]


class DecodeState(NamedTuple):
    """Where a batch of generations stands.

    ``cache``: :class:`jaxkit.lm.model.KVCache`; ``token (B,)``: each row's newest token
    (not yet in the cache); ``index``: the cache slot that token goes to; ``pad (B,)``;
    ``n_new (B,)``: tokens produced; ``limit (B,)``: the most each row may produce;
    ``done (B,)``; ``out (B, N)``: the produced tokens (``N`` the largest limit),
    ``finite``: every logit so far was finite.
    """

    cache: KVCache
    token: jax.Array
    index: jax.Array
    pad: jax.Array
    n_new: jax.Array
    limit: jax.Array
    done: jax.Array
    out: jax.Array
    finite: jax.Array


def sample(key: jax.Array, logits: jax.Array, temperature: jax.Array,
           top_p: jax.Array) -> jax.Array:
    """Draw one token per row of ``logits (B, V)``.

    Args:
      key: PRNG key.
      logits: float32 ``(B, V)``.
      temperature: scalar; 0 gives the argmax.
      top_p: scalar in (0, 1]; 1 keeps every token.

    Returns:
      int32 ``(B,)``.
    """
    greedy = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    scaled = logits / jnp.maximum(temperature, 1e-6)

    def nucleus(z):
        srt = jnp.sort(z, axis=-1)[:, ::-1]
        p = jax.nn.softmax(srt, axis=-1)
        before = jnp.cumsum(p, axis=-1) - p          # mass of the tokens ranked above
        kept = before < top_p                         # the first token always stays
        cutoff = jnp.min(jnp.where(kept, srt, jnp.inf), axis=-1, keepdims=True)
        return jnp.where(z >= cutoff, z, -jnp.inf)

    scaled = jax.lax.cond(top_p < 1.0, nucleus, lambda z: z, scaled)
    drawn = jax.random.categorical(key, scaled, axis=-1).astype(jnp.int32)
    return jnp.where(temperature > 0, drawn, greedy)


def start(model: Llama, key: jax.Array, tokens: jax.Array, pad: jax.Array,
          limit: jax.Array, temperature: jax.Array, top_p: jax.Array, eos: jax.Array,
          *, cache_len: int, max_new: int) -> DecodeState:
    """Prefill the prompts and draw each row's first token.

    Args:
      model: the :class:`jaxkit.lm.model.Llama`.
      key: PRNG key.
      tokens: int ``(B, P)`` left-padded prompts; pad: int ``(B,)``.
      limit: int ``(B,)``, new tokens allowed per row (at least 1).
      temperature, top_p: sampling scalars (see :func:`sample`).
      eos: int scalar, the token that ends a row (-1 for none).
      cache_len: static ``T >= P + max_new``; max_new: static, the output buffer's length.

    Returns:
      :class:`DecodeState`.
    """
    B, P = tokens.shape
    logits, cache = prefill(model, tokens, pad, cache_len)
    first = sample(jax.random.fold_in(key, P - 1), logits, temperature, top_p)
    out = jnp.zeros((B, max_new), jnp.int32).at[:, 0].set(first)
    done = (first == eos) | (limit <= 1)
    return DecodeState(cache, first, jnp.asarray(P, jnp.int32), pad.astype(jnp.int32),
                       jnp.ones((B,), jnp.int32), limit.astype(jnp.int32), done, out,
                       jnp.all(jnp.isfinite(logits)))


def step(model: Llama, key: jax.Array, state: DecodeState, temperature: jax.Array,
         top_p: jax.Array, eos: jax.Array) -> DecodeState:
    """Feed each row's newest token, draw the next; rows already done record nothing."""
    logits, cache = decode_step(model, state.cache, state.token, state.index, state.pad)
    nxt = sample(jax.random.fold_in(key, state.index), logits, temperature, top_p)
    live = ~state.done
    B = nxt.shape[0]
    col = jnp.minimum(state.n_new, state.out.shape[1] - 1)
    out = state.out.at[jnp.arange(B), col].set(jnp.where(live, nxt, state.out[jnp.arange(B),
                                                                                col]))
    n_new = state.n_new + live.astype(jnp.int32)
    done = state.done | (live & (nxt == eos)) | (n_new >= state.limit)
    finite = state.finite & jnp.all(jnp.isfinite(logits) | state.done[:, None])
    return DecodeState(cache, jnp.where(live, nxt, state.token), state.index + 1, state.pad,
                       n_new, state.limit, done, out, finite)


def decode(model: Llama, key: jax.Array, state: DecodeState, temperature: jax.Array,
           top_p: jax.Array, eos: jax.Array, n_steps: jax.Array) -> DecodeState:
    """Run :func:`step` until every row is done, the cache is full, or ``n_steps`` steps
    have run (``n_steps`` is traced)."""
    T = state.cache.k[0].shape[1]
    stop_at = state.index + n_steps

    def cond(s):
        return (~jnp.all(s.done)) & (s.index < stop_at) & (s.index < T)

    return jax.lax.while_loop(
        cond, lambda s: step(model, key, s, temperature, top_p, eos), state)
