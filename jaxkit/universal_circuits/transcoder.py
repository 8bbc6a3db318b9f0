"""Recording the models' activations and training universal-circuit transcoders on them.

* :func:`record` runs every model on the same images and writes each (model, site)
  activation and the labels into one multi-model activation store
  (:func:`jaxkit.crosscoder.store.write_sites`).
* :func:`train_uc` trains a cross-model cross-layer transcoder
  (:mod:`jaxkit.kernels.crosscoder`, ``uc_loss``: per-site normalised reconstruction +
  output fidelity through the rest of each model) on batches read from that store, by
  the one step (:func:`jaxkit.kernels.train.make_train_step`, clipped Adam) and the one
  loop (:func:`jaxkit.training.fit`): chunks of ``chunk`` steps in one compiled scan,
  checkpoints under ``checkpoint_dir``; chunk ``i`` reads store batches
  ``i * chunk .. (i + 1) * chunk - 1``, so a killed training resumes to the same
  parameters. With a mesh, every batch is split over its ``data`` axis (data
  parallelism; the transcoder and the frozen models are replicated). A single-model
  CLT is the same transcoder over one model (``models=[name]``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed, optim, training
from jaxkit.crosscoder.store import SiteStore, write_sites
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels import train as ktrain

from .models import Classifier

__all__ = ["model_sites", "record", "train_uc", "default_depth_map", "single_masks"]


@functools.lru_cache(maxsize=16)
def _sites_jit(clf: Classifier):
    return jax.jit(clf.sites)


ROW_BLOCK = 512  # images per compiled call of a model's sites (one shape per model)


def model_sites(clfs: Sequence[Classifier], mparams: Sequence[Any], x) -> tuple:
    """``sites[m][t]`` of every model on images ``x`` (host NumPy arrays), computed in
    zero-padded blocks of ``ROW_BLOCK`` images (one compiled shape per model)."""
    x = np.asarray(x, np.float32)
    n = len(x)
    xp = np.pad(x, [(0, -(-n // ROW_BLOCK) * ROW_BLOCK - n), (0, 0)])
    out = []
    for c, p in zip(clfs, mparams, strict=True):
        parts = [_sites_jit(c)(p, jnp.asarray(xp[i:i + ROW_BLOCK]))
                 for i in range(0, len(xp), ROW_BLOCK)]
        out.append(tuple(np.concatenate([np.asarray(b[t]) for b in parts])[:n]
                         for t in range(c.n_layers + 1)))
    return tuple(out)


def record(directory: Path, names: Sequence[str], clfs: Sequence[Classifier],
           mparams: Sequence[Any], x, y, *, chunk: int = 4096, misalign=None) -> Path:
    """Write every model's sites on images ``x`` (labels ``y``, model 0's) as one store.

    ``misalign``: a permutation of the rows; every model after the first then sees image
    ``misalign[i]`` in row ``i`` (the misaligned pair, the negative control of
    universality: no row shows the two models the same image)."""
    parts = [model_sites(clfs, mparams, x[i:i + chunk]) for i in range(0, len(x), chunk)]
    sites = {n: [np.concatenate([p[m][t] for p in parts]) for t in range(clfs[m].n_layers + 1)]
             for m, n in enumerate(names)}
    if misalign is not None:
        misalign = np.asarray(misalign)
        for n in list(names)[1:]:
            sites[n] = [a[misalign] for a in sites[n]]
    return write_sites(directory, sites, np.asarray(y, np.int32))


def single_masks(spec: cc.UCSpec, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(read, live)`` of a single-model CLT of model ``m`` in the shapes of ``spec``."""
    read = np.eye(spec.n_models, dtype=np.float32)[m]
    live = np.zeros((spec.n_depths, spec.n_latents), np.float32)
    live[list(spec.depth_map[m])] = 1.0
    return read, live


def default_depth_map(n_layers: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Align models of different depth: the deepest model's layers take depths
    ``0..D-1``; a shallower model's first layer is at depth 0, its last at ``D - 1``, the
    others spread evenly in between (rounded, strictly increasing)."""
    D = max(n_layers)
    out = []
    for L in n_layers:
        if L == 1:
            out.append((D - 1,))
            continue
        dm = [round(j * (D - 1) / (L - 1)) for j in range(L)]
        out.append(tuple(dm))
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _uc_chunk(spec: cc.UCSpec, clfs: tuple, lr: float, k: int, fidelity: float, mesh,
              n_seeds: int):
    """One compiled chunk of steps for ``n_seeds`` independent transcoders at once
    (vmapped over their states and step keys; the batches are shared)."""
    rest = tuple(c.rest for c in clfs)

    def one(key, state, batches, mparams, masks):
        read, write, live = masks

        def loss(p, key, sites, aux):
            if mesh is not None:
                sites = jax.tree.map(lambda a: jax.lax.with_sharding_constraint(
                    a, distributed.data_sharding(mesh, 2)), sites)
            return cc.uc_loss(p, sites, spec, rest_fns=rest, model_params=mparams, k=k,
                              fidelity_coef=fidelity, read=read, write=write, live=live)

        step = ktrain.make_train_step(loss, optim.optimizer(lr), clip_norm=1.0)
        state, info = ktrain.scan_steps(step)(key, state, batches)
        out = info.out
        return state, info._replace(out={"recon": jnp.mean(out.recon), "kl": jnp.mean(out.kl),
                                         "l0": jnp.mean(out.l0)})

    def chunk(key, state, batches, mparams, masks):
        keys = jax.random.split(key, n_seeds)
        state, info = jax.vmap(one, in_axes=(0, 0, None, None, None))(keys, state, batches,
                                                                       mparams, masks)
        return state, info._replace(finite=jnp.all(info.finite, axis=0),
                                    out=jax.tree.map(lambda a: jnp.mean(a, 0), info.out))

    return jax.jit(chunk, donate_argnums=1)


@functools.lru_cache(maxsize=16)
def _uc_init(spec: cc.UCSpec, n_seeds: int, lr: float):
    """Training states of ``n_seeds`` fresh transcoders whose decoder biases start at
    ``b_dec`` (one compiled call)."""
    def init(key, b_dec):
        return jax.vmap(lambda kk: ktrain.init(cc.uc_init(kk, spec)._replace(b_dec=b_dec),
                                               optim.optimizer(lr)))(jax.random.split(key, n_seeds))

    return jax.jit(init)


def train_uc(key, store: SiteStore, clfs: Sequence[Classifier], mparams: Sequence[Any], *,
             depth_map=None, n_latents: int, k: int, steps: int, lr: float,
             fidelity_coef: float, chunk: int, checkpoint_dir: Path | None = None,
             checkpoint_every: int = 2, resume: bool = True, mesh=None,
             n_seeds: int | None = None, single: int | None = None
             ) -> tuple[cc.UCSpec, cc.UCParams, list[dict]]:
    """Train a transcoder over the store's models (module docstring).

    Args:
      key: the training key.
      store: the aligned activations (its models in the order of ``clfs``).
      clfs, mparams: the frozen models and their parameters (for the fidelity term).
      depth_map: per model, the depth of each layer (default
        :func:`default_depth_map`).
      n_latents, k: latents per depth and TopK per depth.
      steps, lr, chunk: Adam steps (a multiple of ``chunk``), learning rate, steps per
        compiled call.
      fidelity_coef: weight of the output-fidelity KL.
      checkpoint_dir, checkpoint_every, resume: see :func:`jaxkit.training.fit`.
      mesh: split batches over its ``data`` axis.
      n_seeds: train this many independent transcoders (initialisations and step keys
        from ``key``, the same batches) in one vmapped step; their parameters come back
        stacked on a leading axis. ``None``: one transcoder, unstacked.
      single: train a single-model CLT of model ``single`` in the cross-model shapes
        (it reads and writes that model only, the depths it has no layer at are off:
        :func:`jaxkit.universal_circuits.circuits.single_masks`), so it shares the
        cross-model transcoder's compiled step.

    Returns:
      ``(spec, params, history)`` (history: means over the seeds).
    """
    if steps % chunk:
        raise ValueError(f"`steps` ({steps}) must be a multiple of `chunk` ({chunk})")
    mesh = distributed.data_mesh(mesh)
    if store.batch_size % distributed.mesh_size(mesh):
        raise ValueError(f"the store's batch size ({store.batch_size}) must be divisible by "
                         f"the mesh 'data' size ({distributed.mesh_size(mesh)})")
    if len(clfs) != len(store.models):
        raise ValueError(f"`clfs` must give the store's {len(store.models)} models")
    dm = default_depth_map([c.n_layers for c in clfs]) if depth_map is None else depth_map
    spec = cc.uc_spec(store.d_sites, dm, n_latents)
    k_init, k_run = jax.random.split(key)
    S = 1 if n_seeds is None else int(n_seeds)
    if S < 1:
        raise ValueError(f"`n_seeds` must be >= 1; got {n_seeds}")
    first, _, _ = store.batch((0, 0), rows=slice(None))
    b_dec = tuple(tuple(np.asarray(first[m][j + 1].mean(0), np.float32) for j in range(len(d)))
                  for m, d in enumerate(spec.depth_map))
    state = _uc_init(spec, S, float(lr))(k_init, b_dec)
    mp = tuple(mparams)
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))
        mp = jax.device_put(mp, distributed.replicated(mesh))
    else:  # committed to its device, as a restored checkpoint's arrays are: without this a
        # resumed training compiles the chunk a second time (jit keys on commitment)
        state = jax.device_put(state, jax.tree.leaves(state)[0].sharding)
    fn = _uc_chunk(spec, tuple(clfs), float(lr), int(k), float(fidelity_coef), mesh, S)
    read, live = (np.ones(spec.n_models, np.float32),
                  np.ones((spec.n_depths, spec.n_latents), np.float32))
    if single is not None:
        read, live = single_masks(spec, single)
    masks = (jnp.asarray(read), jnp.asarray(read), jnp.asarray(live))
    if mesh is not None:
        masks = jax.device_put(masks, distributed.replicated(mesh))

    def batch_fn(i):
        bs = [store.batch((0, i * chunk + j), rows=slice(None))[0] for j in range(chunk)]
        stacked = jax.tree.map(lambda *a: np.stack(a), *bs)
        if mesh is not None:
            sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "data"))
            return jax.device_put(stacked, sh)
        return stacked

    res = training.fit(k_run, state, lambda kk, st, b: fn(kk, st, b, mp, masks), batch_fn,
                       steps=steps // chunk, checkpoint_dir=checkpoint_dir,
                       checkpoint_every=checkpoint_every, resume=resume, log_every=1)
    params = jax.device_get(res.state.params)
    if n_seeds is None:
        params = jax.tree.map(lambda a: a[0], params)
    return spec, params, res.full_history
