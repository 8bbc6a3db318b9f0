"""Language models built from layer strings (flax nnx), one block implementation shared
by the single model and the candidate-batched "supernet".

``build(arch, key)`` returns a :class:`ComposeLM`: byte embedding (tied with the output
projection) plus learned positions, then one pre-normalised residual block per letter,
``x <- x + f_l(LN(x))`` with ``f`` causal self-attention (``A``), an MLP (``M``), a
Mamba-1 mixer (``S``) or a Mamba-2 mixer (``D``, chunked SSD) from
:mod:`jaxkit.kernels.seq`, a final LayerNorm and the logits
``x E^T`` (nanoGPT's layout: LayerNorm without bias, no biases, tied embedding).

:class:`SuperLM` holds every block kind of ``letters`` (default all four) at every layer
and takes the layer kinds as an integer array of indices into ``letters``
(``lax.switch``; kind ``len(letters)`` is the identity, used to pad shorter strings), so
candidates with different strings of one depth have one parameter shape. (Under ``vmap``
a switch evaluates every branch and selects, ``len(letters)`` x the work of one string;
:mod:`jaxkit.compose.train` therefore trains candidates on the supernet's parameters
but routes each layer's candidates to their own block, :meth:`Block.residual`.)
:func:`extract` copies one candidate's blocks into a :class:`ComposeLM`; the two agree
exactly (tested).

Public: :func:`build`, :func:`extract`, :func:`lm_loss`, :func:`save_lm`,
:func:`load_lm` (TempBench on real activations reuses the trained byte LM through them;
:meth:`ComposeLM.hidden_states` returns every layer's residual stream).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxkit.io import atomic_write
from jaxkit.kernels import seq

from .arch import LETTERS, Arch

__all__ = ["Block", "ComposeLM", "Embed", "SuperLayer", "SuperLM", "build", "extract",
           "lm_loss", "save_lm", "load_lm", "supernet_from_params", "identity_kinds"]

_TYPES = {"A": seq.AttentionParams, "M": seq.MLPParams, "S": seq.MambaParams,
          "D": seq.Mamba2Params}
_FIELDS = {c: t._fields for c, t in _TYPES.items()}


def _init_block(letter: str, arch: Arch, key, n_layers: int):
    d = arch.width
    if letter == "A":
        return seq.init_attention(key, d, n_layers=n_layers)
    if letter == "M":
        return seq.init_mlp(key, d, arch.mlp_ratio * d, n_layers=n_layers)
    if letter == "D":
        return seq.init_mamba2(key, d, expand=arch.expand, d_state=arch.d_state,
                               head_dim=arch.ssd_head_dim, d_conv=arch.d_conv,
                               n_layers=n_layers)
    return seq.init_mamba(key, d, expand=arch.expand, d_state=arch.d_state,
                          d_conv=arch.d_conv, n_layers=n_layers)


class Block(nnx.Module):
    """One residual block ``x + f(LN(x))`` of kind ``letter`` (A, M, S or D).
    ``scan_mode`` is the Mamba-1 scan ("sequential" or "associative"), ``ssd_mode`` the
    Mamba-2 form ("chunked" or "sequential")."""

    def __init__(self, letter: str, arch: Arch, *, rngs: nnx.Rngs, n_layers: int = 1,
                 scan_mode: str = "sequential", attn_impl: str = "einsum",
                 ssd_mode: str = "chunked"):
        if letter not in LETTERS:
            raise ValueError(f"`letter` must be one of {LETTERS}; got {letter!r}")
        self.letter, self.heads = letter, arch.heads
        self.scan_mode, self.attn_impl = scan_mode, attn_impl
        self.ssd_mode, self.ssd_chunk = ssd_mode, arch.ssd_chunk
        self.norm = nnx.Param(jnp.ones((arch.width,), jnp.float32))
        p = _init_block(letter, arch, rngs.params(), n_layers)
        for f, v in zip(p._fields, p, strict=True):
            setattr(self, f, nnx.Param(v))

    def weights(self):
        """The block's weights as the kernel's NamedTuple."""
        return _TYPES[self.letter](*(getattr(self, f)[...] for f in _FIELDS[self.letter]))

    def residual(self, x):
        """The block's update ``f(LN(x))`` alone (``block(x) == x + block.residual(x)``)."""
        h = seq.layer_norm(x, self.norm[...].astype(x.dtype))
        p = self.weights()
        if self.letter == "A":
            return seq.self_attention(p, h, self.heads, impl=self.attn_impl)
        if self.letter == "M":
            return seq.mlp(p, h)
        if self.letter == "D":
            return seq.mamba2_mixer(p, h, mode=self.ssd_mode, chunk=self.ssd_chunk)
        return seq.mamba_mixer(p, h, mode=self.scan_mode)

    def __call__(self, x):
        return x + self.residual(x)


class Embed(nnx.Module):
    """Token and learned position embeddings (float32 master weights) and the tied
    output head after a final layer norm: ``embed(tokens, dtype)``, ``logits(x)``."""

    def __init__(self, arch: Arch, rngs: nnx.Rngs):
        f32 = jnp.float32  # float32 master weights (also with jax_enable_x64)
        self.tok = nnx.Param(0.02 * jax.random.normal(rngs.params(), (arch.vocab, arch.width),
                                                      f32))
        self.pos = nnx.Param(0.01 * jax.random.normal(rngs.params(), (arch.context,
                                                                        arch.width), f32))
        self.norm_f = nnx.Param(jnp.ones((arch.width,), jnp.float32))
        self.context = arch.context

    def embed(self, tokens, dtype):
        t = tokens.shape[-1]
        if t > self.context:
            raise ValueError(f"`tokens` has sequence length {t}, longer than the model's "
                             f"context ({self.context})")
        return (self.tok[...][tokens] + self.pos[...][:t]).astype(dtype)

    def logits(self, x):
        x = seq.layer_norm(x, self.norm_f[...].astype(x.dtype))
        return jnp.einsum("btd,vd->btv", x, self.tok[...].astype(x.dtype),
                          preferred_element_type=jnp.float32)


class ComposeLM(nnx.Module):
    """The byte-level language model of one :class:`~jaxkit.compose.arch.Arch`.

    ``model(tokens)`` maps int tokens (batch, time <= context) to float32 logits
    (batch, time, vocab). ``dtype`` (e.g. ``jnp.bfloat16``) is the activation dtype;
    parameters, norms, scan states and logits stay float32."""

    def __init__(self, arch: Arch, *, rngs: nnx.Rngs, dtype=jnp.float32,
                 scan_mode: str = "sequential", attn_impl: str = "einsum",
                 ssd_mode: str = "chunked"):
        self.arch, self.dtype = arch, dtype
        self.embed = Embed(arch, rngs)
        self.blocks = nnx.List([Block(c, arch, rngs=rngs, n_layers=arch.depth,
                                      scan_mode=scan_mode, attn_impl=attn_impl,
                                      ssd_mode=ssd_mode)
                                for c in arch.layers])

    def hidden_states(self, tokens) -> list:
        """The residual stream after the embedding and after each block (depth + 1
        arrays of (batch, time, width))."""
        x = self.embed.embed(tokens, self.dtype)
        out = [x]
        for b in self.blocks:
            x = b(x)
            out.append(x)
        return out

    def __call__(self, tokens):
        return self.embed.logits(self.hidden_states(tokens)[-1])


def _check_letters(letters: str) -> str:
    if not letters or any(c not in LETTERS for c in letters) or len(set(letters)) < len(
            letters):
        raise ValueError(f"`letters` must be distinct letters of {LETTERS}; got {letters!r}")
    return letters


class SuperLayer(nnx.Module):
    """One layer of a :class:`SuperLM`: a block of every kind of ``letters``;
    ``layer(x, kind)`` runs block ``kind`` (``len(letters)``: the identity) under
    ``lax.switch``."""

    def __init__(self, arch: Arch, rngs: nnx.Rngs, n_layers: int, scan_mode: str,
                 letters: str = LETTERS):
        self.blocks = nnx.List([Block(c, arch, rngs=rngs, n_layers=n_layers,
                                      scan_mode=scan_mode) for c in letters])

    def __call__(self, x, kind):
        branches = [lambda x, b=b: b(x) for b in self.blocks] + [lambda x: x]
        return jax.lax.switch(kind, branches, x)


class SuperLM(nnx.Module):
    """Every block kind of ``letters`` at each of ``depth`` layers; ``model(tokens,
    kinds)`` runs the string ``kinds`` (int array (depth,) of indices into ``letters``,
    ``len(letters)`` the identity; :func:`identity_kinds`). ``arch`` gives the width,
    heads, state size and context (its ``layers`` only the depth)."""

    def __init__(self, arch: Arch, *, rngs: nnx.Rngs, dtype=jnp.float32,
                 scan_mode: str = "sequential", letters: str = LETTERS):
        self.arch, self.dtype, self.letters = arch, dtype, _check_letters(letters)
        self.embed = Embed(arch, rngs)
        self.layers = nnx.List([SuperLayer(arch, rngs, arch.depth, scan_mode, letters)
                                for _ in range(arch.depth)])

    def __call__(self, tokens, kinds):
        x = self.embed.embed(tokens, self.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, kinds[i])
        return self.embed.logits(x)


def build(arch: Arch | str, key=None, *, dtype=jnp.float32, scan_mode: str = "sequential",
          attn_impl: str = "einsum", ssd_mode: str = "chunked", **arch_kw) -> ComposeLM:
    """The model of ``arch`` (an :class:`Arch`, or a layer string plus ``Arch`` keyword
    arguments), initialised from ``key`` (default ``key(0)``).

    Args:
      arch: the architecture.
      key: PRNG key of the initialisation.
      dtype: activation dtype.
      scan_mode: the Mamba-1 scan form ("sequential" or "associative").
      attn_impl: the attention path ("einsum" or "xla").
      ssd_mode: the Mamba-2 form ("chunked" SSD or the "sequential" recurrence).
      **arch_kw: ``Arch`` fields when ``arch`` is a string.

    Returns:
      A :class:`ComposeLM`.
    """
    if isinstance(arch, str):
        arch = Arch(arch.strip().upper(), **arch_kw)
    key = jax.random.key(0) if key is None else key
    return ComposeLM(arch, rngs=nnx.Rngs(params=key), dtype=dtype, scan_mode=scan_mode,
                     attn_impl=attn_impl, ssd_mode=ssd_mode)


def extract(sup: SuperLM, layers: str) -> ComposeLM:
    """The :class:`ComposeLM` of string ``layers`` with ``sup``'s weights (identity
    layers of a padded string are left out: pass the string without them)."""
    arch = dataclasses.replace(sup.arch, layers=layers)
    missing = sorted(set(layers) - set(sup.letters))
    if missing:
        raise ValueError(f"`layers` {layers!r} uses {missing}, which the supernet (letters "
                         f"{sup.letters!r}) lacks")
    if len(layers) > len(sup.layers):
        raise ValueError(f"`layers` ({len(layers)}) is deeper than the supernet "
                         f"({len(sup.layers)})")
    model = nnx.eval_shape(lambda: build(arch))
    model.embed = sup.embed
    model.blocks = nnx.List([sup.layers[i].blocks[sup.letters.index(c)]
                             for i, c in enumerate(layers)])
    model.dtype = sup.dtype
    return model


def lm_loss(logits, targets, mask=None):
    """Mean next-byte cross-entropy in nats (float32); bits per byte = nats / ln 2.

    Args:
      logits: (..., vocab).
      targets: int (...,).
      mask: optional (...,) weights.
    """
    lp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    nll = -jnp.take_along_axis(lp, targets[..., None], axis=-1)[..., 0]
    if mask is None:
        return jnp.mean(nll)
    return jnp.sum(nll * mask) / jnp.maximum(jnp.sum(mask), 1)


BITS = 1.0 / math.log(2.0)


def save_lm(path: str | Path, model: ComposeLM, meta: dict | None = None) -> Path:
    """Write ``model`` to ``path`` (a folder): ``arch.json`` (the Arch, ``meta``) and
    ``params.npz`` (the flattened weights), both atomically."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = nnx.state(model, nnx.Param)
    flat = {"/".join(map(str, k)): np.asarray(v[...]) for k, v in nnx.to_flat_state(state)}
    buf = io.BytesIO()
    np.savez(buf, **flat)
    atomic_write(path / "params.npz", buf.getvalue())
    atomic_write(path / "arch.json", json.dumps(
        {"arch": dataclasses.asdict(model.arch), "meta": meta or {}}, indent=2) + "\n")
    return path


def load_lm(path: str | Path) -> tuple[ComposeLM, dict]:
    """Read a model written by :func:`save_lm`: ``(model, meta)``. A missing or
    mismatching file is a ValueError naming it."""
    path = Path(path)
    try:
        spec = json.loads((path / "arch.json").read_text())
        arrays = dict(np.load(path / "params.npz"))
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"`path` {path}: not a saved model ({e})") from e
    model = build(Arch(**spec["arch"]))
    state = nnx.state(model, nnx.Param)
    for k, v in nnx.to_flat_state(state):
        name = "/".join(map(str, k))
        if name not in arrays or arrays[name].shape != v[...].shape:
            raise ValueError(f"`path` {path}: params.npz lacks or misshapes {name}")
        v[...] = jnp.asarray(arrays[name])
    nnx.update(model, state)
    return model, spec.get("meta", {})


def supernet_from_params(arch: Arch, params, *, dtype=jnp.float32,
                         letters: str = LETTERS) -> SuperLM:
    """The :class:`SuperLM` of ``arch`` over ``letters`` holding ``params`` (one
    candidate's pure dict, as :func:`jaxkit.compose.train.train_candidates` returns them
    with their ``letters``, candidate axis removed)."""
    graphdef, state = nnx.split(nnx.eval_shape(lambda: SuperLM(
        arch, rngs=nnx.Rngs(0), dtype=dtype, letters=letters)))
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, params))
    return nnx.merge(graphdef, state)


def identity_kinds(layers: str, depth: int, letters: str = LETTERS) -> np.ndarray:
    """The kinds of ``layers`` (indices into ``letters``) padded with identity layers
    (kind ``len(letters)``) to ``depth``."""
    missing = sorted(set(layers) - set(letters))
    if missing:
        raise ValueError(f"`layers` {layers!r} uses {missing}, not in `letters` {letters!r}")
    k = [letters.index(c) for c in layers]
    if len(k) > depth:
        raise ValueError(f"`layers` ({len(k)}) is deeper than {depth}")
    return np.asarray(k + [len(letters)] * (depth - len(k)), np.int32)
