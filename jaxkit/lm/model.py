"""The Llama architecture as a flax ``nnx`` module whose layers are stacked and scanned.

For a token sequence ``t_1..t_S`` with embeddings ``E`` (shape ``(V, d)``), each of the
``L`` blocks computes (pre-norm, Touvron et al. 2023, "LLaMA"):

    h = x + W_o Attn(RoPE(W_q n(x)), RoPE(W_k n(x)), W_v n(x))       n = RMSNorm
    x' = h + W_down (silu(W_gate n(h)) * W_up n(h))

with grouped-query attention (``H`` query heads share ``K`` key/value heads, ``H / K`` per
group), causal masking, RMSNorm ``x / sqrt(mean(x^2) + eps) * w`` in float32, and RoPE on
*adjacent* pairs: ``(x_{2i}, x_{2i+1})`` of each head rotated by ``p * base^(-2i / hd)`` at
position ``p`` (the layout of GGUF files; see :mod:`jaxkit.lm.gguf_file`). The logits are
``RMSNorm(x_L) @ U`` with ``U = E^T`` when the embeddings are tied.

Whole sequences run the blocks in one ``lax.scan`` over the layers' weights stacked on a
leading axis (30 blocks compile as one); a decode step, memory-bound, runs them unrolled on
each layer's own arrays and cache. Three entry points share the block:
:func:`forward` (a whole sequence: logits, captured activations, spliced layers),
:func:`prefill` (a left-padded prompt batch, returning the key/value cache) and
:func:`decode_step` (one token per row against the cache, written in place).

Differentiable in the weights and in the embeddings (``jax.grad`` through :func:`forward`
is tested); not in the token ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["LlamaConfig", "Llama", "KVCache", "forward", "prefill", "decode_step",
           "SITES", "LAYER_WEIGHTS"]

SITES = ("resid", "attn", "mlp")
LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")
_NEG = -1e30  # finite: a row with every key masked (a pad query) gives uniform weights, no NaN


@dataclass(frozen=True)
class LlamaConfig:
    """Hyperparameters of a Llama model.

    ``n_layers`` blocks of width ``d_model``; ``n_heads`` query heads and ``n_kv_heads``
    key/value heads of ``head_dim``; SwiGLU width ``d_ff``; ``vocab_size`` tokens; RoPE
    base ``rope_base``; RMSNorm ``norm_eps``; ``context_length`` positions;
    ``tied``: the output projection is the embedding matrix.
    """

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    context_length: int = 2048
    tied: bool = True

    def __post_init__(self):
        for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                     "vocab_size", "context_length"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"LlamaConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"LlamaConfig: n_heads {self.n_heads} is not a multiple of "
                             f"n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig.head_dim must be even for RoPE, got {self.head_dim}")

    @classmethod
    def from_hparams(cls, hp: Mapping[str, Any], *, tied: bool) -> LlamaConfig:
        keys = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                "vocab_size", "rope_base", "norm_eps", "context_length")
        return cls(**{k: hp[k] for k in keys}, tied=tied)

    @property
    def n_params(self) -> int:
        d, L, hd = self.d_model, self.n_layers, self.head_dim
        per = (2 * d + d * self.n_heads * hd * 2 + d * self.n_kv_heads * hd * 2
               + 3 * d * self.d_ff)
        return self.vocab_size * d * (1 if self.tied else 2) + d + L * per


class Block(nnx.Module):
    """One block's weights (:data:`LAYER_WEIGHTS`), each an ``nnx.Param``."""

    def __init__(self, weights: Mapping[str, Any], dtype: Any):
        for name in LAYER_WEIGHTS:
            norm = name.endswith("norm")
            setattr(self, name, nnx.Param(jnp.asarray(weights[name],
                                                      jnp.float32 if norm else dtype)))


class Llama(nnx.Module):
    """Llama weights as ``nnx.Param`` arrays: ``embed``, ``final_norm``, ``unembed`` (None
    when tied) and ``blocks``, one :class:`Block` per layer.

    Each layer keeps arrays of its own (not slices of stacked ones): a decode step's
    products then read the weights where they lie, while a slice of a stacked array is
    copied first on the CPU (three times the memory traffic of a memory-bound step).
    :func:`forward` and :func:`prefill` stack them inside the compiled program to scan.

    Args:
      config: :class:`LlamaConfig`.
      weights: float arrays named as :class:`jaxkit.lm.gguf_file.RawModel` names them
        (``embed``, ``final_norm``, optional ``unembed``, and the :data:`LAYER_WEIGHTS`
        stacked on a leading layer axis); ``None`` draws random weights from ``rngs``
        (scaled normal, norms near one), for tests and for training from scratch.
      dtype: the matrices' dtype (float32, or bfloat16 to halve memory; norms, softmax
        and logits always compute in float32).
      rngs: ``nnx.Rngs`` for random weights.
    """

    def __init__(self, config: LlamaConfig, weights: Mapping[str, Any] | None = None, *,
                 dtype: Any = jnp.float32, rngs: nnx.Rngs | None = None):
        self.config = config
        c = config
        if weights is None:
            if rngs is None:
                raise ValueError("Llama: pass `weights` or `rngs` (for random weights)")
            weights = _random_weights(c, rngs)
        shapes = {
            "embed": (c.vocab_size, c.d_model), "final_norm": (c.d_model,),
            "attn_norm": (c.n_layers, c.d_model), "mlp_norm": (c.n_layers, c.d_model),
            "wq": (c.n_layers, c.d_model, c.n_heads * c.head_dim),
            "wk": (c.n_layers, c.d_model, c.n_kv_heads * c.head_dim),
            "wv": (c.n_layers, c.d_model, c.n_kv_heads * c.head_dim),
            "wo": (c.n_layers, c.n_heads * c.head_dim, c.d_model),
            "w_gate": (c.n_layers, c.d_model, c.d_ff), "w_up": (c.n_layers, c.d_model, c.d_ff),
            "w_down": (c.n_layers, c.d_ff, c.d_model),
        }
        if not c.tied:
            shapes["unembed"] = (c.d_model, c.vocab_size)
        for name, shape in shapes.items():
            if name not in weights:
                raise ValueError(f"Llama: weight {name!r} is missing")
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"Llama: weight {name!r} has shape "
                                 f"{tuple(weights[name].shape)}, expected {shape}")
        self.embed = nnx.Param(jnp.asarray(weights["embed"], dtype))
        self.final_norm = nnx.Param(jnp.asarray(weights["final_norm"], jnp.float32))
        self.unembed = None if c.tied else nnx.Param(jnp.asarray(weights["unembed"], dtype))
        self.blocks = nnx.List([Block({n: weights[n][i] for n in LAYER_WEIGHTS}, dtype)
                                for i in range(c.n_layers)])

    @property
    def dtype(self):
        return self.embed[...].dtype

    def weights(self) -> dict[str, jax.Array]:
        """The weights in :class:`jaxkit.lm.gguf_file.RawModel`'s layout (layers stacked)."""
        out = {"embed": self.embed[...], "final_norm": self.final_norm[...],
               **_layer_weights(self)}
        if self.unembed is not None:
            out["unembed"] = self.unembed[...]
        return out


def _random_weights(c: LlamaConfig, rngs: nnx.Rngs) -> dict[str, jax.Array]:
    def normal(shape, fan_in):
        return jax.random.normal(rngs.params(), shape, jnp.float32) / np.sqrt(fan_in)

    L, d, F = c.n_layers, c.d_model, c.d_ff
    w = {
        "embed": normal((c.vocab_size, d), 1.0) * 0.5,
        "final_norm": 1.0 + 0.1 * normal((d,), 1.0),
        "attn_norm": 1.0 + 0.1 * normal((L, d), 1.0),
        "mlp_norm": 1.0 + 0.1 * normal((L, d), 1.0),
        "wq": normal((L, d, c.n_heads * c.head_dim), d),
        "wk": normal((L, d, c.n_kv_heads * c.head_dim), d),
        "wv": normal((L, d, c.n_kv_heads * c.head_dim), d),
        "wo": normal((L, c.n_heads * c.head_dim, d), c.n_heads * c.head_dim),
        "w_gate": normal((L, d, F), d), "w_up": normal((L, d, F), d),
        "w_down": normal((L, F, d), F),
    }
    if not c.tied:
        w["unembed"] = normal((d, c.vocab_size), d)
    return w


# ---------------------------------------------------------------------------- pieces


def rms_norm(x: jax.Array, w: jax.Array, eps: float) -> jax.Array:
    """``x / sqrt(mean(x^2, -1) + eps) * w`` computed in float32, returned in x's dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * w.astype(jnp.float32)).astype(x.dtype)


def rope(x: jax.Array, pos: jax.Array, base: float) -> jax.Array:
    """Rotate adjacent pairs of the last axis of ``x (B, S, heads, hd)`` by
    ``pos (B, S) * base^(-2i / hd)``; computed in float32."""
    hd = x.shape[-1]
    inv = base ** (-jnp.arange(0, hd, 2, dtype=jnp.float32) / hd)          # (hd/2,)
    ang = pos.astype(jnp.float32)[..., None, None] * inv                    # (B, S, 1, hd/2)
    cos, sin = jnp.cos(ang), jnp.sin(ang)
    xr = x.astype(jnp.float32).reshape(*x.shape[:-1], hd // 2, 2)
    a, b = xr[..., 0], xr[..., 1]
    out = jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1)
    return out.reshape(x.shape).astype(x.dtype)


def _attend(q, k, v, bias, n_kv):
    """q (B, S, H, hd), k / v (B, T, K, hd), bias (B, S, T) additive -> (B, S, H*hd)."""
    B, S, H, hd = q.shape
    g = H // n_kv
    qg = q.reshape(B, S, n_kv, g, hd)
    s = jnp.einsum("bskgh,btkh->bkgst", qg, k, preferred_element_type=jnp.float32)
    s = s * (1.0 / np.sqrt(hd)) + bias[:, None, None]
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    o = jnp.einsum("bkgst,btkh->bskgh", p, v, preferred_element_type=jnp.float32)
    return o.reshape(B, S, H * hd).astype(q.dtype)


def _mm(x, w):
    return jnp.matmul(x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def _qkv(c: LlamaConfig, lw, x, pos):
    B, S, _ = x.shape
    n = rms_norm(x, lw["attn_norm"], c.norm_eps)
    q = _mm(n, lw["wq"]).reshape(B, S, c.n_heads, c.head_dim)
    k = _mm(n, lw["wk"]).reshape(B, S, c.n_kv_heads, c.head_dim)
    v = _mm(n, lw["wv"]).reshape(B, S, c.n_kv_heads, c.head_dim)
    return rope(q, pos, c.rope_base), rope(k, pos, c.rope_base), v


def _mlp(c: LlamaConfig, lw, h):
    n = rms_norm(h, lw["mlp_norm"], c.norm_eps)
    gate = jnp.matmul(n, lw["w_gate"], preferred_element_type=jnp.float32)
    up = jnp.matmul(n, lw["w_up"], preferred_element_type=jnp.float32)
    return _mm((jax.nn.silu(gate) * up).astype(h.dtype), lw["w_down"])


def _layer_weights(model: Llama) -> dict[str, jax.Array]:
    """The per-layer weights stacked on a leading axis (a copy, made inside the program)."""
    return {name: jnp.stack([getattr(b, name)[...] for b in model.blocks])
            for name in LAYER_WEIGHTS}


def _slice_layers(lw, start: int, stop: int):
    return {k: v[start:stop] for k, v in lw.items()}


def embed(model: Llama, tokens: jax.Array) -> jax.Array:
    """Token embeddings ``(B, S, d)`` in the weights' dtype."""
    return jnp.take(model.embed[...], tokens, axis=0)


def unembed(model: Llama, x: jax.Array) -> jax.Array:
    """Float32 logits of final hidden states ``x (..., d)``: ``RMSNorm(x) @ U``."""
    c = model.config
    n = rms_norm(x, model.final_norm[...], c.norm_eps)
    if model.unembed is None:
        return jnp.einsum("...d,vd->...v", n, model.embed[...],
                          preferred_element_type=jnp.float32)
    return jnp.matmul(n, model.unembed[...], preferred_element_type=jnp.float32)


def causal_bias(pad: jax.Array, S: int) -> jax.Array:
    """Additive mask ``(B, S, S)``: query i sees key j iff ``pad[b] <= j <= i``."""
    i = jnp.arange(S)
    ok = (i[None, :] <= i[:, None])[None] & (i[None, None, :] >= pad[:, None, None])
    return jnp.where(ok, 0.0, _NEG).astype(jnp.float32)


# ---------------------------------------------------------------------------- forward


def forward(
    model: Llama,
    tokens: jax.Array,
    *,
    pad: jax.Array | None = None,
    capture: Mapping[str, Sequence[int]] | None = None,
    replace: Mapping[int, Callable[[jax.Array], jax.Array]] | None = None,
    stop_layer: int | None = None,
    logits: bool = True,
) -> tuple[jax.Array | None, dict[str, jax.Array]]:
    """Run the blocks over whole sequences.

    Args:
      model: the :class:`Llama`.
      tokens: int ``(B, S)``.
      pad: int ``(B,)``, left padding per row (positions start after it and its slots are
        never attended to); ``None`` for none.
      capture: ``{site: layers}`` with site in :data:`SITES` (``"resid"``: the residual
        stream after block i, ``"attn"`` / ``"mlp"``: the attention / MLP output block i
        adds), static.
      replace: ``{layer: fn}``: the residual stream after block ``layer`` becomes
        ``fn(resid)`` before the next block reads it (captures at that layer see the
        replaced value), static.
      stop_layer: run blocks ``0 .. stop_layer - 1`` only (and no logits).
      logits: compute the float32 logits ``(B, S, V)``.

    Returns:
      ``(logits or None, {"site.layer": (B, S, d)})``.
    """
    c = model.config
    B, S = tokens.shape
    pad = jnp.zeros((B,), jnp.int32) if pad is None else pad.astype(jnp.int32)
    capture = {k: tuple(sorted(set(int(i) for i in v))) for k, v in (capture or {}).items()}
    for site in capture:
        if site not in SITES:
            raise ValueError(f"capture: unknown site {site!r} (choose from {SITES})")
    replace = dict(replace or {})
    n_layers = c.n_layers if stop_layer is None else int(stop_layer)
    for i in [*(j for v in capture.values() for j in v), *replace]:
        if not 0 <= int(i) < n_layers:
            raise ValueError(f"layer {i} is outside [0, {n_layers})")
    pos = jnp.maximum(jnp.arange(S)[None, :] - pad[:, None], 0)
    bias = causal_bias(pad, S)
    want = tuple(s for s in SITES if s in capture)
    lw_all = _layer_weights(model)

    def block(x, lw):
        q, k, v = _qkv(c, lw, x, pos)
        a = _mm(_attend(q, k, v, bias, c.n_kv_heads), lw["wo"])
        h = x + a
        m = _mlp(c, lw, h)
        out = h + m
        sites = {"resid": out, "attn": a, "mlp": m}
        return out, tuple(sites[s] for s in want)

    # segments end where a replacement applies
    cuts = sorted({int(i) + 1 for i in replace} | {n_layers})
    x = embed(model, tokens)
    start = 0
    ys_parts: list[tuple] = []
    for stop in cuts:
        x, ys = jax.lax.scan(block, x, _slice_layers(lw_all, start, stop))
        ys = list(ys)
        if stop - 1 in replace:
            x = replace[stop - 1](x).astype(x.dtype)
            if "resid" in want:
                r = want.index("resid")
                ys[r] = ys[r].at[-1].set(x)
        ys_parts.append(tuple(ys))
        start = stop
    acts: dict[str, jax.Array] = {}
    for j, site in enumerate(want):
        stacked = jnp.concatenate([p[j] for p in ys_parts], axis=0)
        for i in capture[site]:
            acts[f"{site}.{i}"] = stacked[i]
    out = unembed(model, x) if (logits and stop_layer is None) else None
    return out, acts


# ---------------------------------------------------------------------------- cache


class KVCache(NamedTuple):
    """Keys and values, one ``(B, T, K, hd)`` array per layer, written in place."""

    k: tuple[jax.Array, ...]
    v: tuple[jax.Array, ...]


def prefill(model: Llama, tokens: jax.Array, pad: jax.Array, cache_len: int
            ) -> tuple[jax.Array, KVCache]:
    """Forward a left-padded prompt batch and keep its keys and values.

    Args:
      model: the :class:`Llama`.
      tokens: int ``(B, P)``, each row's prompt right-aligned after ``pad[b]`` pad slots.
      pad: int ``(B,)``.
      cache_len: ``T >= P``, static: the cache's length (prompt plus new tokens).

    Returns:
      ``(logits of the last position (B, V) float32, KVCache with slots [0, P) filled)``.
    """
    c = model.config
    B, P = tokens.shape
    pos = jnp.maximum(jnp.arange(P)[None, :] - pad[:, None], 0)
    bias = causal_bias(pad, P)

    def block(x, lw):
        q, k, v = _qkv(c, lw, x, pos)
        h = x + _mm(_attend(q, k, v, bias, c.n_kv_heads), lw["wo"])
        return h + _mlp(c, lw, h), (k, v)

    x, (ks, vs) = jax.lax.scan(block, embed(model, tokens[:, :]), _layer_weights(model))
    widths = ((0, 0), (0, cache_len - P), (0, 0), (0, 0))
    cache = KVCache(tuple(jnp.pad(a, widths) for a in ks),
                    tuple(jnp.pad(a, widths) for a in vs))
    return unembed(model, x[:, -1]), cache


def decode_step(model: Llama, cache: KVCache, token: jax.Array, index: jax.Array,
                pad: jax.Array) -> tuple[jax.Array, KVCache]:
    """One new token per row: write its key and value at cache slot ``index`` and return
    the next-token logits.

    Args:
      model: the :class:`Llama`.
      cache: :class:`KVCache` (a ``(B, T, K, hd)`` pair per layer).
      token: int ``(B,)``, the token at slot ``index``.
      index: int scalar, the slot (the same for every row: rows are left-padded).
      pad: int ``(B,)``; the token's position is ``index - pad[b]``.

    Returns:
      ``(logits (B, V) float32, the updated cache)``.
    """
    c = model.config
    T = cache.k[0].shape[1]
    pos = (index - pad)[:, None]                                             # (B, 1)
    slots = jnp.arange(T)
    ok = (slots[None, :] <= index) & (slots[None, :] >= pad[:, None])        # (B, T)
    bias = jnp.where(ok, 0.0, _NEG).astype(jnp.float32)[:, None, :]          # (B, 1, T)
    zero = jnp.zeros((), jnp.int32)
    at = (zero, index.astype(jnp.int32), zero, zero)
    x = embed(model, token[:, None])
    ks, vs = [], []
    for blk, ck, cv in zip(model.blocks, cache.k, cache.v, strict=True):
        lw = {name: getattr(blk, name)[...] for name in LAYER_WEIGHTS}
        q, k, v = _qkv(c, lw, x, pos)
        ck = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), at)
        cv = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), at)
        h = x + _mm(_attend(q, ck, cv, bias, c.n_kv_heads), lw["wo"])
        x = h + _mlp(c, lw, h)
        ks.append(ck)
        vs.append(cv)
    return unembed(model, x[:, 0]), KVCache(tuple(ks), tuple(vs))
