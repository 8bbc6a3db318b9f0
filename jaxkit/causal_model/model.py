"""The CausalTab network: alternating attention over variables and samples, max-pooling
over samples and a bilinear edge head, as pure functions of a parameter pytree.

Input per task: values ``x`` ``(n, d)``, the intervention-indicator channel ``ind``
``(n, d)``, and masks of the valid rows and variables. Each cell ``(r, v)`` is embedded,
``h = x W_x + ind W_i + b`` (``D`` features); then ``layers`` times: pre-LayerNorm
multi-head attention **across variables** (within each sample, padded variables masked
out), a ReLU feed-forward block, attention **across samples** (within each variable,
padded rows masked out), a feed-forward block, all residual (the AVICI encoder, Lorch et
al., NeurIPS 2022). A masked max over samples gives one vector per variable; the edge
head scores ``logit[i, j] = exp(t) <v_i, u_j> + c`` for the edge ``j -> i`` (LiNGAM
convention, ``u``, ``v`` L2-normalised linear maps after a LayerNorm, ``c`` initialised at
-3), with the diagonal and padding masked.

No positional information enters, so the network is equivariant to permutations of the
variables and invariant to permutations of the samples (tested). Parameters are a plain
dict pytree (:func:`init_params`), so optax, orbax and ``jax.tree`` handle them without a
module system; :class:`ModelConfig` carries the static sizes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxkit.kernels.sem.notears import expm_taylor

__all__ = ["ModelConfig", "init_params", "forward", "edge_logits", "acyclicity",
           "n_params", "standardize_input"]


class ModelConfig(NamedTuple):
    """Static sizes: ``dim`` features, ``heads`` attention heads, ``layers`` (each one
    variable-attention and one sample-attention block), feed-forward width
    ``ffn * dim``, ``max_vars`` the most variables the weights were trained for."""

    dim: int = 32
    heads: int = 4
    layers: int = 2
    ffn: int = 2
    max_vars: int = 20


def _dense(key, fan_in, fan_out):
    return {"w": jax.random.normal(key, (fan_in, fan_out), jnp.float32) / math.sqrt(fan_in),
            "b": jnp.zeros((fan_out,), jnp.float32)}


def _ln(dim):
    return {"g": jnp.ones((dim,), jnp.float32), "b": jnp.zeros((dim,), jnp.float32)}


def _block(key, cfg: ModelConfig):
    k = jax.random.split(key, 4)
    D = cfg.dim
    return {"ln1": _ln(D), "qkv": _dense(k[0], D, 3 * D), "out": _dense(k[1], D, D),
            "ln2": _ln(D), "ff1": _dense(k[2], D, cfg.ffn * D), "ff2": _dense(k[3], cfg.ffn * D, D)}


def init_params(key, cfg: ModelConfig = ModelConfig()) -> dict:
    """Random initial parameters (a dict pytree of float32 arrays)."""
    if cfg.dim % cfg.heads:
        raise ValueError(f"`dim` ({cfg.dim}) must be divisible by `heads` ({cfg.heads})")
    ks = jax.random.split(key, 2 * cfg.layers + 4)
    blocks = [{"var": _block(ks[2 * i], cfg), "smp": _block(ks[2 * i + 1], cfg)}
              for i in range(cfg.layers)]
    D = cfg.dim
    return {"embed": {"wx": jax.random.normal(ks[-4], (D,), jnp.float32),
                      "wi": jax.random.normal(ks[-3], (D,), jnp.float32),
                      "b": jnp.zeros((D,), jnp.float32)},
            "blocks": blocks, "ln_f": _ln(D),
            "u": _dense(ks[-2], D, D), "v": _dense(ks[-1], D, D),
            "temp": jnp.asarray(math.log(5.0), jnp.float32),
            "bias": jnp.asarray(-3.0, jnp.float32)}


def n_params(params) -> int:
    """Number of scalar parameters."""
    return int(sum(x.size for x in jax.tree.leaves(params)))


def _layer_norm(p, x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def _lin(p, x):
    return x @ p["w"] + p["b"]


def _attend(p, x, mask, heads):
    """Self-attention over axis -2 of ``x`` ``(..., L, D)``; ``mask`` ``(L,)`` marks the
    valid keys (invalid queries are computed and ignored downstream)."""
    *lead, L, D = x.shape
    hd = D // heads
    qkv = _lin(p["qkv"], _layer_norm(p["ln1"], x)).reshape(*lead, L, 3, heads, hd)
    q, k, v = qkv[..., 0, :, :], qkv[..., 1, :, :], qkv[..., 2, :, :]
    s = jnp.einsum("...qhe,...khe->...hqk", q, k) / math.sqrt(hd)
    s = jnp.where(mask[None, None, :], s, -1e9)
    a = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("...hqk,...khe->...qhe", a, v).reshape(*lead, L, D)
    x = x + _lin(p["out"], o)
    h = _lin(p["ff2"], jax.nn.relu(_lin(p["ff1"], _layer_norm(p["ln2"], x))))
    return x + h


def standardize_input(x: Float[Array, "n d"], sample_mask: Bool[Array, " n"]
                      ) -> Float[Array, "n d"]:
    """Columns standardised over the valid rows (sd floored at 1e-6); padding rows 0."""
    w = sample_mask.astype(x.dtype)[:, None]
    cnt = jnp.maximum(jnp.sum(w), 1.0)
    mu = jnp.sum(x * w, axis=0) / cnt
    sd = jnp.sqrt(jnp.sum(((x - mu) * w) ** 2, axis=0) / cnt)
    return jnp.where(sample_mask[:, None], (x - mu) / jnp.maximum(sd, 1e-6), 0.0)


def edge_logits(params, cfg: ModelConfig, x: Float[Array, "n d"], ind: Float[Array, "n d"],
                var_mask: Bool[Array, " d"], sample_mask: Bool[Array, " n"]
                ) -> Float[Array, "d d"]:
    """Edge logits ``(d, d)`` of one task: ``[i, j]`` scores ``j -> i``; the diagonal and
    padded pairs are ``-1e9`` (probability 0). The input is standardised per column
    (:func:`standardize_input`) first."""
    x = standardize_input(x.astype(jnp.float32), sample_mask)
    ind = ind.astype(jnp.float32) * sample_mask[:, None]
    e = params["embed"]
    h = x[..., None] * e["wx"] + ind[..., None] * e["wi"] + e["b"]  # (n, d, D)
    for blk in params["blocks"]:
        h = _attend(blk["var"], h, var_mask, cfg.heads)  # across variables, per sample
        ht = jnp.swapaxes(h, 0, 1)  # (d, n, D)
        ht = _attend(blk["smp"], ht, sample_mask, cfg.heads)  # across samples, per variable
        h = jnp.swapaxes(ht, 0, 1)
    pooled = jnp.max(jnp.where(sample_mask[:, None, None], h, -1e9), axis=0)  # (d, D)
    z = _layer_norm(params["ln_f"], pooled)
    u = _lin(params["u"], z)
    v = _lin(params["v"], z)
    u = u / (jnp.linalg.norm(u, axis=-1, keepdims=True) + 1e-6)
    v = v / (jnp.linalg.norm(v, axis=-1, keepdims=True) + 1e-6)
    logits = jnp.exp(params["temp"]) * (v @ u.T) + params["bias"]  # [i, j]: j -> i
    d = x.shape[1]
    ok = var_mask[:, None] & var_mask[None, :] & ~jnp.eye(d, dtype=bool)
    return jnp.where(ok, logits, -1e9)


def forward(params, cfg: ModelConfig, x, ind, var_mask, sample_mask) -> Float[Array, "d d"]:
    """Edge probabilities ``sigmoid(edge_logits)`` ``(d, d)``, ``[i, j]`` = P(``j -> i``)."""
    return jax.nn.sigmoid(edge_logits(params, cfg, x, ind, var_mask, sample_mask))


def acyclicity(probs: Float[Array, "d d"]) -> Float[Array, ""]:
    """NOTEARS's ``tr e^{P o P} - d`` of the edge probabilities (0 iff the support of
    ``P`` is acyclic), by :func:`jaxkit.kernels.sem.notears.expm_taylor`."""
    return jnp.trace(expm_taylor(probs * probs)) - probs.shape[-1]
