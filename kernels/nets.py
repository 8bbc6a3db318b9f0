"""Small velocity / denoiser networks for flow matching (equinox Modules).

* :class:`MLP`: ``v(t, x[, y])`` for vector (or any fixed-shape) data, with a sinusoidal
  time embedding and an optional class embedding that includes a learned null class for
  classifier-free guidance (negative labels select it).
* :class:`SeqTransformer`: ``logits(t, x)`` for token sequences (discrete flow
  matching): token + learned position embedding, time embedding added to every position,
  pre-LN attention blocks (Vaswani et al. 2017; Xiong et al. 2020), logits over ``V``.

Both act on one sample, as is usual in equinox; :func:`apply_batch` is the plain-function
batched form ``(model, t, x, *extra) -> out`` that plugs into the losses of
:mod:`jaxkit.kernels.flow` and :mod:`jaxkit.kernels.flow_discrete` as
``velocity_fn(params, t, x[, y])`` with ``params = model``. The losses only need some
callable ``velocity_fn(params, t, x)``: these nets are a convenience, not a requirement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

__all__ = ["sinusoidal_embedding", "MLP", "AttentionBlock", "SeqTransformer", "apply_batch"]


def sinusoidal_embedding(t: Float[Array, ""], dim: int, *, max_period: float = 10_000.0,
                         scale: float = 1000.0) -> Float[Array, " dim"]:
    """Transformer / DDPM time features ``[sin(s t w_k), cos(s t w_k)]`` with
    ``w_k = max_period^(-k / (dim/2))`` and ``s = scale`` (``t in [0, 1]`` mapped to
    ``[0, 1000]``) (Vaswani et al., "Attention is all you need", NeurIPS 2017; Ho et al.,
    "Denoising diffusion probabilistic models", NeurIPS 2020).

    Differentiable: yes, in t (computed in float32).

    Args:
        t: a scalar time.
        dim: the embedding size, even (static).
        max_period: the longest period (static).
        scale: the factor on ``t`` (static).

    Returns:
        float32 features ``(dim,)``.
    """
    if dim % 2:
        raise ValueError(f"dim must be even; got {dim}")
    half = dim // 2
    w = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
    arg = scale * jnp.asarray(t, jnp.float32) * w
    return jnp.concatenate([jnp.sin(arg), jnp.cos(arg)])


class MLP(eqx.Module):
    """Velocity MLP ``v(t, x[, y])``: ``[x, t, emb(t), emb(y)] -> width -> ... -> x.shape``.

    ``data_shape``: shape of one sample (an int for vectors). ``depth`` hidden layers of
    ``width`` units with ``activation``. ``num_classes``: enables a class embedding with
    ``num_classes + 1`` rows, the last one the null class used for labels ``< 0`` or
    ``y=None`` (classifier-free guidance, Ho & Salimans 2022). Weights are ``dtype``
    (float32 by default, also under x64); the output has ``x``'s dtype.

    ``time_scale``: the embedding's ``scale`` (:func:`sinusoidal_embedding`); the DDPM
    default 1000 puts features up to ``sin(1000 t)`` into the field, which makes it
    oscillate in ``t`` and costs adaptive solvers many more evaluations (a test checks
    more than 5x for a random net against ``time_scale=1``); use a small scale (or
    ``time_dim=0``: t as a plain input) when sampling adaptively.

    Args:
        data_shape: shape of one sample, or an int for vectors.
        width: hidden width.
        depth: number of hidden layers.
        time_dim: size of the sinusoidal time embedding (even; 0 for none).
        time_scale: the embedding's ``scale``.
        activation: hidden activation.
        num_classes: number of classes for a class embedding, or ``None``.
        class_dim: size of the class embedding.
        dtype: weight dtype.
        key: PRNG key for the initialisation.

    Calling ``model(t, x, y=None)`` on one sample (scalar ``t``, ``x`` of
    ``data_shape``, optional integer label ``y``) returns the velocity, of ``x``'s shape
    and dtype.
    """

    layers: tuple[eqx.nn.Linear, ...]
    class_embed: eqx.nn.Embedding | None
    data_shape: tuple[int, ...] = eqx.field(static=True)
    time_dim: int = eqx.field(static=True)
    time_scale: float = eqx.field(static=True)
    num_classes: int | None = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)

    def __init__(self, data_shape: int | Sequence[int], *, width: int = 128, depth: int = 3,
                 time_dim: int = 32, time_scale: float = 1000.0,
                 activation: Callable = jax.nn.silu,
                 num_classes: int | None = None, class_dim: int = 32,
                 dtype=jnp.float32, key: PRNGKeyArray):
        shape = (int(data_shape),) if isinstance(data_shape, int) else tuple(data_shape)
        if depth < 1 or width < 1:
            raise ValueError(f"depth and width must be >= 1; got depth={depth}, width={width}")
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"num_classes must be >= 1 or None; got {num_classes}")
        self.data_shape = shape
        self.time_dim = time_dim
        self.time_scale = float(time_scale)
        self.num_classes = num_classes
        self.activation = activation
        d = math.prod(shape)
        kc, *ks = jax.random.split(key, depth + 2)
        if num_classes is not None:
            self.class_embed = eqx.nn.Embedding(num_classes + 1, class_dim, dtype=dtype, key=kc)
            cdim = class_dim
        else:
            self.class_embed = None
            cdim = 0
        sizes = [d + 1 + time_dim + cdim] + [width] * depth + [d]
        self.layers = tuple(eqx.nn.Linear(a, b, dtype=dtype, key=k)
                            for a, b, k in zip(sizes[:-1], sizes[1:], ks, strict=False))

    def __call__(self, t: Float[Array, ""], x: Float[Array, "..."],
                 y: Int[Array, ""] | None = None) -> Float[Array, "..."]:
        if x.shape != self.data_shape:
            raise ValueError(f"`x` must have shape {self.data_shape} (one sample); "
                             f"got {x.shape}")
        t = jnp.asarray(t, jnp.float32)
        wdtype = self.layers[0].weight.dtype
        feats = [x.reshape(-1).astype(wdtype), t[None].astype(wdtype),
                 sinusoidal_embedding(t, self.time_dim, scale=self.time_scale).astype(wdtype)]
        if self.class_embed is not None:
            null = self.num_classes
            idx = null if y is None else jnp.where(jnp.asarray(y) < 0, null, y)
            feats.append(self.class_embed(jnp.asarray(idx, jnp.int32)))
        h = jnp.concatenate(feats)
        for layer in self.layers[:-1]:
            h = self.activation(layer(h))
        return self.layers[-1](h).reshape(self.data_shape).astype(x.dtype)


class AttentionBlock(eqx.Module):
    """Pre-LN transformer block: ``h + MHA(LN(h))`` then ``h + MLP(LN(h))`` (GELU)
    (Xiong et al., "On layer normalization in the transformer architecture", ICML 2020).

    Args:
        dim: model width.
        heads: number of attention heads (dividing ``dim``).
        mlp_ratio: the MLP's hidden width over ``dim``.
        dtype: weight dtype.
        key: PRNG key for the initialisation.

    Calling ``block(h, mask=None)`` on one sequence ``h`` ``(L, dim)``, with an optional
    ``(L, L)`` attention mask, returns ``(L, dim)``.
    """

    ln1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    ln2: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, dim: int, heads: int, *, mlp_ratio: int = 4, dtype=jnp.float32,
                 key: PRNGKeyArray):
        k1, k2, k3 = jax.random.split(key, 3)
        self.ln1 = eqx.nn.LayerNorm(dim, dtype=dtype)
        self.attn = eqx.nn.MultiheadAttention(heads, dim, dtype=dtype, key=k1)
        self.ln2 = eqx.nn.LayerNorm(dim, dtype=dtype)
        self.fc1 = eqx.nn.Linear(dim, mlp_ratio * dim, dtype=dtype, key=k2)
        self.fc2 = eqx.nn.Linear(mlp_ratio * dim, dim, dtype=dtype, key=k3)

    def __call__(self, h: Float[Array, "L dim"],
                 mask: Bool[Array, "L L"] | None = None) -> Float[Array, "L dim"]:
        z = jax.vmap(self.ln1)(h)
        h = h + self.attn(z, z, z, mask=mask)
        z = jax.vmap(self.ln2)(h)
        return h + jax.vmap(lambda u: self.fc2(jax.nn.gelu(self.fc1(u))))(z)


class SeqTransformer(eqx.Module):
    """Token-sequence denoiser ``logits(t, x[, mask])`` for discrete flow matching.

    ``vocab_size`` input tokens (include the mask token if the masking source is used),
    sequences up to ``max_len``, ``depth`` pre-LN blocks of width ``dim`` with ``heads``
    heads, time embedding added to every position, and ``out_size`` logits per position
    (default ``vocab_size``; pass ``V`` to predict only the real tokens). ``mask``:
    optional ``(L,)`` validity mask (padding positions are not attended to). Weights are
    ``dtype`` (float32 by default).

    Args:
        vocab_size: number of input tokens.
        max_len: longest sequence.
        dim: model width.
        depth: number of blocks.
        heads: attention heads per block.
        time_dim: size of the sinusoidal time embedding (even).
        out_size: logits per position (default ``vocab_size``).
        dtype: weight dtype.
        key: PRNG key for the initialisation.

    Calling ``model(t, x, mask=None)`` on one sequence (scalar ``t``, int tokens ``x``
    ``(L,)``, optional validity mask ``(L,)``) returns logits ``(L, out_size)``.
    """

    tok_embed: eqx.nn.Embedding
    pos_embed: Float[Array, "max_len dim"]
    time_proj: eqx.nn.Linear
    blocks: tuple[AttentionBlock, ...]
    ln_f: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    time_dim: int = eqx.field(static=True)

    def __init__(self, vocab_size: int, max_len: int, *, dim: int = 64, depth: int = 2,
                 heads: int = 4, time_dim: int = 32, out_size: int | None = None,
                 dtype=jnp.float32, key: PRNGKeyArray):
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        kt, kp, kx, kh, *kb = jax.random.split(key, depth + 4)
        self.tok_embed = eqx.nn.Embedding(vocab_size, dim, dtype=dtype, key=kt)
        self.pos_embed = 0.02 * jax.random.normal(kp, (max_len, dim), dtype)
        self.time_proj = eqx.nn.Linear(time_dim, dim, dtype=dtype, key=kx)
        self.blocks = tuple(AttentionBlock(dim, heads, dtype=dtype, key=k) for k in kb)
        self.ln_f = eqx.nn.LayerNorm(dim, dtype=dtype)
        self.head = eqx.nn.Linear(dim, vocab_size if out_size is None else out_size,
                                  dtype=dtype, key=kh)
        self.time_dim = time_dim

    def __call__(self, t: Float[Array, ""], x: Int[Array, " L"],
                 mask: Bool[Array, " L"] | None = None) -> Float[Array, "L out"]:
        n = x.shape[0]
        if x.ndim != 1 or n > self.pos_embed.shape[0]:
            raise ValueError(f"`x` must be a 1-D token sequence of length <= "
                             f"{self.pos_embed.shape[0]}; got shape {x.shape}")
        h = jax.vmap(self.tok_embed)(x) + self.pos_embed[:n]
        h = h + self.time_proj(sinusoidal_embedding(t, self.time_dim).astype(h.dtype))
        attn_mask = None
        if mask is not None:
            attn_mask = jnp.broadcast_to(mask[None, :], (n, n))
        for block in self.blocks:
            h = block(h, attn_mask)
        return jax.vmap(lambda u: self.head(self.ln_f(u)))(h)


def apply_batch(model: Callable, t, x: Array, *extra) -> Array:
    """Batched call ``vmap(model)(t, x, *extra)``; a scalar ``t`` is broadcast to ``(B,)``.
    Use as ``velocity_fn(params, t, x[, y])`` with ``params = model``, e.g.
    ``flow.cfm_batch_loss(nets.apply_batch, model, key, x0, x1)``, and as
    ``lambda t, x: apply_batch(model, t, x)`` for :func:`jaxkit.kernels.flow.integrate`.

    Differentiable: yes, in t, x and extra (as model is).

    Args:
        model: a per-sample callable ``model(t, x, *extra)``.
        t: a scalar or ``(B,)`` times.
        x: batch ``(B, ...)``.
        *extra: further per-sample arguments with a leading batch axis (e.g. labels).

    Returns:
        ``(B, ...)``, the model's outputs stacked.
    """
    b = x.shape[0]
    t = jnp.broadcast_to(jnp.asarray(t), (b,))
    return jax.vmap(model)(t, x, *extra)
