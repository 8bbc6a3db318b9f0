"""Training of the AMGenC denoiser by conditional flow matching.

One step is :func:`jaxkit.kernels.train.make_train_step` on the loss of
:func:`jaxkit.amgenc.model.loss` (optax Adam), the loop is :func:`jaxkit.training.fit`:
step ``i`` uses the key ``fold_in(key, i)`` and the cells ``indices[i]``, a fixed function
of the key and ``i``, so a run killed at any point and started again on the same
checkpoint folder ends with the same parameters as an uninterrupted one. The loss curve
and the training time travel in each checkpoint's JSON.

On a mesh the cells of a step are split over its ``"data"`` axis (padded with cells whose
mask is all False, which add nothing to the loss) and the parameters are replicated.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed, optim, training
from jaxkit.kernels import train as ktrain

from . import model as M
from .config import Config
from .data import Data, Norm, conditioning, n_pad, pad_cells
from .potential import padded_size

__all__ = ["Trained", "skeleton", "batch_indices", "bucket_indices", "make_batch_fn",
           "fit_denoiser"]


@dataclass(frozen=True, eq=False)
class Trained:
    """A trained denoiser and what its training reports.

    Attributes:
        model: the :class:`jaxkit.amgenc.model.Denoiser`.
        losses: the loss of every step, (train_steps,).
        seconds: wall time of the training (all runs of a resumed training together).
        norm: the condition normalisation of the training cells.
        n_pad: the padded atom count of every cell.
        resumed_from: the step the last run restored (0: trained from scratch;
            ``train_steps``: reloaded whole from the final checkpoint).
    """

    model: M.Denoiser
    losses: np.ndarray
    seconds: float
    norm: Norm
    n_pad: int
    resumed_from: int


def skeleton(cfg: Config, n_cond: int, key) -> M.Denoiser:
    """The untrained denoiser of ``cfg`` for ``n_cond`` condition features (initialised
    in one jitted call: eagerly, every layer's random init compiles apart)."""
    return _init(cfg.hidden, cfg.layers, cfg.k_nbr, int(n_cond), key)


@eqx.filter_jit
def _init(hidden: int, layers: int, k_nbr: int, n_cond: int, key) -> M.Denoiser:
    _, q = M.species_charges()
    return M.Denoiser(q.size, n_cond, key=key, hidden=hidden, layers=layers, k_nbr=k_nbr)


def batch_indices(key, steps: int, n_cells: int, batch: int) -> np.ndarray:
    """(steps, min(batch, n_cells)) training-cell indices, distinct within a step: row
    ``i`` is a random permutation of ``fold_in(key, i)``, cut to the batch."""
    b = min(int(batch), int(n_cells))
    rows = jax.vmap(lambda i: jax.random.permutation(jax.random.fold_in(key, i), n_cells)[:b])
    return np.asarray(rows(jnp.arange(int(steps))))


def bucket_indices(key, steps: int, n_atoms, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The cells of every step drawn within one size bucket
    (:func:`jaxkit.amgenc.potential.padded_size` of the atom counts ``n_atoms``).

    Step ``i`` picks bucket ``g`` with probability proportional to the atoms of its
    cells (so that in expectation a step's per-atom loss is that of the whole training
    set, as for a batch of mixed sizes) from ``fold_in(fold_in(key, i), 1)``, then the
    first ``min(batch, |g|)`` of a random permutation of ``fold_in(key, i)`` over the
    bucket's cells: a fixed function of the key and ``i``, and with a single bucket
    exactly :func:`batch_indices`. Returns (bucket size (steps,), indices (steps, b),
    -1 beyond the step's batch)."""
    n_atoms = np.asarray(n_atoms)
    sizes = np.array([padded_size(n) for n in n_atoms])
    buckets = np.unique(sizes)
    members = [np.flatnonzero(sizes == z) for z in buckets]
    weight = np.array([n_atoms[m].sum() for m in members], np.float64)
    cum = np.cumsum(weight) / weight.sum()
    i = jnp.arange(int(steps))
    u = np.asarray(jax.vmap(lambda j: jax.random.uniform(
        jax.random.fold_in(jax.random.fold_in(key, j), 1)))(i))
    g = np.minimum(np.searchsorted(cum, u, side="right"), len(buckets) - 1)
    b = min(int(batch), max(len(m) for m in members))
    out = np.full((int(steps), b), -1, np.int64)
    for j, m in enumerate(members):
        rows = np.flatnonzero(g == j)
        if not rows.size:
            continue
        bg = min(b, len(m))
        # every step's permutation of this bucket (one shape per bucket size, so one
        # compilation however many steps fall in it), then the steps that drew it
        perm = batch_indices(key, steps, len(m), bg)[rows]
        out[rows, :bg] = m[perm]
    return buckets[g], out


def make_batch_fn(cells: M.Batch | dict, indices: np.ndarray, mesh,
                  buckets: np.ndarray | None = None) -> Callable[[int], M.Batch]:
    """``batch_fn(i)``: the cells ``indices[i]`` of the padded host arrays ``cells``; on a
    mesh, padded to a multiple of its data axis (masks of the extra cells all False) and
    split over it. With ``buckets`` (steps,), ``cells`` maps each bucket size to the
    cells of that bucket padded to it, ``indices`` index into them, and step ``i`` takes
    its cells from ``cells[buckets[i]]``, dropping the -1 indices."""

    def batch_fn(i: int) -> M.Batch:
        if buckets is None:
            b = M.Batch(*(a[indices[i]] for a in cells))
        else:
            idx = indices[i][indices[i] >= 0]
            b = M.Batch(*(a[idx] for a in cells[int(buckets[i])]))
        if mesh is None:
            return jax.tree.map(jnp.asarray, b)
        padded, n = distributed.pad_batch(b, mesh.shape[distributed.DATA])
        real = jnp.arange(padded.mask.shape[0]) < n
        padded = padded._replace(mask=padded.mask & real[:, None])
        return jax.tree.map(
            lambda x: jax.device_put(x, distributed.data_sharding(mesh, x.ndim)), padded)

    return batch_fn


_STEPS: dict = {}


def _train_step(cfg: Config, n_cond: int, static):
    """The jitted training step and optimiser of ``cfg``'s architecture and loss, made
    once per process (a resumed or repeated training compiles nothing new)."""
    key = (cfg.hidden, cfg.layers, cfg.k_nbr, int(n_cond), cfg.lr, cfg.balanced_share,
           cfg.augment, cfg.focus_share)
    if key not in _STEPS:
        _, q = M.species_charges()

        def loss_fn(params, key, batch, aux):
            model = eqx.combine(params, static)
            return M.loss(model, batch, key, q, balanced_share=cfg.balanced_share,
                          augment_cells=cfg.augment, focus_share=cfg.focus_share), ()

        opt = optim.optimizer(cfg.lr)
        _STEPS[key] = (jax.jit(ktrain.make_train_step(loss_fn, opt)), opt)
    return _STEPS[key]


def fit_denoiser(cfg: Config, data: Data, key, *, mesh=None,
                 checkpoint_dir: str | Path | None = None, resume: bool = True,
                 track: Callable | None = None) -> Trained:
    """Train the denoiser on ``data.train`` for ``cfg.train_steps`` Adam steps.

    Args:
        cfg: the settings (model size, steps, batch, learning rate, balanced share).
        data: the cells.
        key: the PRNG key of the training (initialisation, batches, step keys).
        mesh: a mesh with a ``"data"`` axis, or None (default device).
        checkpoint_dir: folder of the checkpoints (None: no checkpoints).
        resume: continue from the newest checkpoint there; False starts afresh (the
            folder is emptied).
        track: ``track(iterable, description)`` progress wrapper, e.g. ``RunContext.track``.

    Returns:
        A :class:`Trained`.
    """
    _, q = M.species_charges()
    norm = conditioning(data.train, q.size, cn=cfg.condition_cn)
    size = n_pad(data)
    k_init, k_batch, k_step = jax.random.split(key, 3)
    buckets, indices = bucket_indices(k_batch, cfg.train_steps,
                                      [c.n_atoms for c in data.train], cfg.batch)
    # the cells of each bucket padded to it; the indices into them
    cells, local = {}, np.zeros(len(data.train), np.int64)
    for z in np.unique(buckets):
        members = [j for j, c in enumerate(data.train) if padded_size(c.n_atoms) == z]
        cells[int(z)] = pad_cells([data.train[j] for j in members], int(z), q.size, norm)
        local[members] = np.arange(len(members))
    indices = np.where(indices >= 0, local[np.maximum(indices, 0)], -1)
    n_cond = next(iter(cells.values())).cond.shape[1]
    net = skeleton(cfg, n_cond, k_init)
    params, static = eqx.partition(net, eqx.is_array)
    step, opt = _train_step(cfg, n_cond, static)
    state = ktrain.init(params, opt)
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))
    batch_fn = make_batch_fn(cells, indices, mesh, buckets)

    losses: list = []  # host floats of the steps before this run, then device scalars
    before = {"seconds": 0.0}
    progress = iter(track(range(cfg.train_steps), "amgenc train")) if track else None

    def recording_step(k, st, batch):
        st, info = step(k, st, batch)
        losses.append(info.loss)
        if progress is not None:
            next(progress, None)
        return st, info

    def on_restore(meta: dict) -> None:
        if meta.get("config") not in (None, cfg.digest()):
            raise ValueError(f"{checkpoint_dir}: the checkpoints belong to another "
                             "configuration")
        losses[:] = [float(v) for v in meta.get("losses", [])]
        before["seconds"] = float(meta.get("seconds", 0.0))
        for _ in range(len(losses) if progress is not None else 0):
            next(progress, None)

    t0 = time.perf_counter()

    def meta_fn(done: int) -> dict:
        losses[:] = [float(v) for v in jax.device_get(losses)]
        return {"losses": losses[:done], "config": cfg.digest(),
                "seconds": before["seconds"] + time.perf_counter() - t0}

    if checkpoint_dir is not None and not resume:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    res = training.fit(k_step, state, recording_step, batch_fn, steps=cfg.train_steps,
                       checkpoint_dir=checkpoint_dir, checkpoint_every=cfg.checkpoint_every,
                       resume=resume, meta_fn=meta_fn, on_restore=on_restore)
    for _ in progress or ():
        pass
    curve = np.array([float(v) for v in jax.device_get(losses)])
    return Trained(model=eqx.combine(res.state.params, static), losses=curve,
                   seconds=before["seconds"] + time.perf_counter() - t0, norm=norm,
                   n_pad=size, resumed_from=res.resumed_from)
