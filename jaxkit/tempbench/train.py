"""Training of the four TempBench dictionaries, one seed at a time.

* TopK dictionaries (the per-token SAE, the stacked per-position SAEs, the temporal
  crosscoder) are trained by the one crosscoder trainer, :func:`jaxkit.crosscoder.fit`
  (Adam, AuxK on dead latents, unit-norm atoms, data divided by their RMS and the scale
  folded back; checkpointed). SAE p of the stacked SAEs sees position p of the T-windows, i.e. the
  tokens ``p .. L - T + p`` of every sequence, with window 1.
* The acausal crosscoder (ReLU latents, L1 penalty weighted by the sum of per-position
  decoder norms, Lindsey et al. 2024, with the coefficient steered to the matched L0 by
  ``log lam += eta clip((L0 - kT) / kT, -1, 1)``) is not a ``fit`` objective: it is
  trained by the one step :func:`jaxkit.kernels.train.make_train_step` (the coefficient
  is its carried state) and the one loop :func:`jaxkit.training.fit`, with checkpoints,
  so a killed training resumes to the same parameters.

With a ``mesh`` every training batch is sharded over its ``"data"`` axis
(:mod:`jaxkit.distributed`); the parameters stay replicated. :class:`Trainer` carries
the mesh, the checkpoint folder and a cache of finished trainings (the pipeline passes
``ctx.stage``), so a killed run reloads finished trainings and resumes the one it was
in from its newest checkpoint.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxkit import crosscoder, distributed, optim, training
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels import train as ktrain

__all__ = ["METHODS", "TrainConfig", "Trainer", "view_norm_penalty", "train_topk",
           "train_acausal", "train_method", "chunk_program", "sample_chunk", "check_chunks",
           "fit_chunks"]

METHODS = ("sae", "stacked", "acausal", "tc")


class TrainConfig(NamedTuple):
    """Hashable training settings (static under ``jit``); ``k`` is per token."""

    window: int
    n_latents: int
    k: int
    steps: int = 1000
    batch_size: int = 128
    lr: float = 3e-3
    acausal_lam: float = 1e-3  # initial L1 coefficient of the acausal crosscoder
    acausal_eta: float = 0.05  # controller gain (log-coefficient per step, clipped)
    log_every: int = 100  # steps per compiled chunk
    checkpoint_every: int = 2  # chunks between checkpoints (acausal)


@dataclass(frozen=True)
class Trainer:
    """Where trainings run and what survives a kill.

    Attributes:
      mesh: a mesh with a ``"data"`` axis (batches are split over it), or None.
      checkpoint_dir: folder of the trainings' checkpoints (one subfolder per
        training), or None for no checkpoints.
      resume: restore the newest checkpoint of a training when there is one.
      cache: ``cache(name, fn) -> fn()`` or its saved result (``ctx.stage``); None runs
        ``fn``.
    """

    mesh: Any = None
    checkpoint_dir: Path | None = None
    resume: bool = True
    cache: Callable[[str, Callable[[], Any]], Any] | None = None

    def job(self, name: str, fn: Callable[[], Any]) -> Any:
        return fn() if self.cache is None else self.cache(name, fn)

    def folder(self, name: str) -> Path | None:
        return None if self.checkpoint_dir is None else Path(self.checkpoint_dir) / name


def view_norm_penalty(z: Float[Array, "B F"], W_dec: Float[Array, "F T d"]) -> Float[Array, ""]:
    """Acausal-crosscoder sparsity ``mean_b sum_f z_bf sum_t ||W_dec[f, t]||`` (Lindsey et
    al. 2024). The kernel's :func:`~jaxkit.kernels.crosscoder.l1_penalty` weights by the
    joint norm instead, so this one is written here."""
    return jnp.mean(z @ jnp.sum(jnp.linalg.norm(W_dec, axis=-1), axis=-1))


def _windows(key, seqs, window, batch):
    idx = jax.random.randint(key, (batch,), 0, seqs.shape[0] * (seqs.shape[1] - window + 1))
    return crosscoder.make_windows(seqs, idx, window)


def train_topk(key: PRNGKeyArray, seqs: Float[Array, "n L d"], *, window: int,
               position: int | None, k: int, cfg: TrainConfig, mesh=None,
               checkpoint_dir: Path | None = None,
               resume: bool = True) -> tuple[cc.Params, np.ndarray]:
    """A TopK dictionary by :func:`jaxkit.crosscoder.fit`: on windows of ``window``
    tokens (``position`` None), or the per-position SAE on position ``position`` of the
    ``window``-windows; a checkpoint every ``cfg.checkpoint_every`` chunks of
    ``cfg.log_every`` steps under ``checkpoint_dir``. Returns the parameters (data
    units) and the training FVU per chunk."""
    if position is None:
        data, w = seqs, window
    else:
        data, w = seqs[:, position:seqs.shape[1] - window + 1 + position], 1
    r = crosscoder.fit(key, data, n_latents=cfg.n_latents, k=k, window=w, steps=cfg.steps,
                       batch_size=cfg.batch_size, lr=cfg.lr,
                       k_aux=min(2 * k, cfg.n_latents - 1), dead_steps=max(cfg.steps // 10, 1),
                       log_every=cfg.log_every, mesh=distributed.data_mesh(mesh),
                       checkpoint_dir=checkpoint_dir,
                       checkpoint_every=cfg.checkpoint_every * cfg.log_every,
                       resume=resume and checkpoint_dir is not None)
    return jax.device_get(r.params), np.asarray(r.history["fvu"], np.float64)


class _AcausalOut(NamedTuple):
    fvu: Float[Array, ""]
    l0: Float[Array, ""]


@functools.lru_cache(maxsize=8)
def _acausal_chunk(target_l0: float, lr: float, eta: float, mesh):
    """The jitted chunk ``(key, state, batches) -> (state, info)``: the steps of
    :func:`jaxkit.kernels.train.make_train_step` in one scan, chunk means in ``out``."""

    def loss(p, key, x, log_lam):
        del key
        if mesh is not None:
            x = jax.lax.with_sharding_constraint(x, distributed.data_sharding(mesh, x.ndim))
        _, z, x_hat = cc.forward(p, x, activation="relu")
        rec = cc.fvu(x, x_hat)
        return rec + jnp.exp(log_lam) * view_norm_penalty(z, p.W_dec), _AcausalOut(rec, cc.l0(z))

    def update_aux(log_lam, out, state):
        return log_lam + eta * jnp.clip((out.l0 - target_l0) / target_l0, -1.0, 1.0)

    return chunk_program(ktrain.make_train_step(loss, optim.optimizer(lr), update_aux=update_aux))


def chunk_program(step) -> Callable:
    """The jitted chunk ``(key, state, batches) -> (state, info)`` of a step from
    :func:`jaxkit.kernels.train.make_train_step`: the steps in one ``lax.scan``
    (:func:`jaxkit.kernels.train.scan_steps`), chunk means of the step outputs in
    ``info.out``, the state donated. Every custom-objective training of TempBench (the
    acausal crosscoder, Matryoshka, T-SAE, TFA) runs through it."""
    scan = ktrain.scan_steps(step)

    def chunk(key, state, batches):
        state, info = scan(key, state, batches)
        return state, info._replace(out=jax.tree.map(jnp.mean, info.out))

    return jax.jit(chunk, donate_argnums=1)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def sample_chunk(key, seqs, window, n, batch):
    """``n`` batches of ``batch`` random ``window``-windows of ``seqs (N, L, d)``:
    ``(n, batch, window, d)``."""
    return jax.vmap(lambda kk: _windows(kk, seqs, window, batch))(jax.random.split(key, n))


def check_chunks(cfg: TrainConfig, mesh) -> None:
    """``cfg.steps`` a multiple of ``cfg.log_every`` and ``cfg.batch_size`` of the mesh's
    ``data`` size, or a ValueError naming the field."""
    if cfg.steps % cfg.log_every:
        raise ValueError(f"`cfg.steps` ({cfg.steps}) must be a multiple of `cfg.log_every` "
                         f"({cfg.log_every})")
    if cfg.batch_size % distributed.mesh_size(mesh):
        raise ValueError(f"`cfg.batch_size` ({cfg.batch_size}) must be divisible by the mesh "
                         f"'data' size ({distributed.mesh_size(mesh)})")


def fit_chunks(keys: tuple[PRNGKeyArray, PRNGKeyArray], state, chunk, x, window: int,
               cfg: TrainConfig, *, mesh=None, checkpoint_dir: Path | None = None,
               resume: bool = True) -> tuple[Any, np.ndarray]:
    """The one loop of the custom-objective trainings: ``state`` (replicated over
    ``mesh``) trained by ``chunk`` (:func:`chunk_program`) through
    :func:`jaxkit.training.fit`, ``cfg.steps // cfg.log_every`` chunks, a checkpoint every
    ``cfg.checkpoint_every`` chunks; the batches of chunk i are drawn from
    ``fold_in(k_data, i)`` (``keys = (k_data, k_run)``), so a resumed training ends with
    the parameters of an uninterrupted one. Returns the parameters (host) and the chunk
    means of ``info.out.fvu``."""
    k_data, k_run = keys
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))

    def batch_fn(i):
        return sample_chunk(jax.random.fold_in(k_data, i), x, window, cfg.log_every,
                            cfg.batch_size)

    res = training.fit(k_run, state, chunk, batch_fn, steps=cfg.steps // cfg.log_every,
                       checkpoint_dir=checkpoint_dir, checkpoint_every=cfg.checkpoint_every,
                       resume=resume, log_every=1)
    return (jax.device_get(res.state.params),
            np.asarray([h["fvu"] for h in res.full_history], np.float64))


def train_acausal(key: PRNGKeyArray, seqs: Float[Array, "n L d"], *, window: int,
                  target_l0: float, cfg: TrainConfig, mesh=None,
                  checkpoint_dir: Path | None = None,
                  resume: bool = True) -> tuple[cc.Params, np.ndarray]:
    """The acausal crosscoder (module docstring) by :func:`jaxkit.training.fit`: chunks of
    ``cfg.log_every`` steps, a checkpoint every ``cfg.checkpoint_every`` chunks under
    ``checkpoint_dir``; the batches of chunk i are drawn from ``fold_in(key, i)``, so a
    resumed training ends with the parameters of an uninterrupted one. Returns the
    parameters (data units) and the training FVU per chunk."""
    mesh = distributed.data_mesh(mesh)
    check_chunks(cfg, mesh)
    seqs = jnp.asarray(seqs, jnp.float32)
    scale = float(jnp.sqrt(jnp.mean(seqs ** 2)))
    scale = scale if scale > 0 else 1.0
    x = seqs / scale
    k_init, k_sample, k_data, k_run = jax.random.split(key, 4)
    params = cc.init(k_init, seqs.shape[-1], cfg.n_latents, site=(window,), activation="relu",
                     sample=_windows(k_sample, x, window, 512))
    opt = optim.optimizer(cfg.lr)
    state = ktrain.init(params, opt, jnp.log(jnp.asarray(cfg.acausal_lam, jnp.float32)))
    chunk = _acausal_chunk(float(target_l0), float(cfg.lr), float(cfg.acausal_eta), mesh)
    p, curve = fit_chunks((k_data, k_run), state, chunk, x, window, cfg, mesh=mesh,
                          checkpoint_dir=checkpoint_dir, resume=resume)
    p = p._replace(b_enc=p.b_enc * scale, b_dec=p.b_dec * scale,
                   log_threshold=p.log_threshold + math.log(scale))
    return p, curve


def _stack(trees):
    return jax.tree.map(lambda *a: np.stack([np.asarray(v) for v in a]), *trees)


def train_method(method: str, key: PRNGKeyArray, seqs: Float[Array, "n L d"],
                 cfg: TrainConfig, trainer: Trainer = Trainer(), *,
                 name: str = "train") -> tuple[Any, np.ndarray]:
    """Train ``method`` (one of :data:`METHODS`) on one seed's sequences with the
    per-token budget ``cfg.k`` (``k T`` active latents per window of ``cfg.window``).
    ``name`` names the training for the cache and the checkpoints. Returns the
    parameters (``stacked``: a leading position axis) and the training FVU per chunk
    (``stacked``: the mean over positions)."""
    T, k = cfg.window, cfg.k
    def topk(name, key, window, position, k):
        return trainer.job(name, lambda: train_topk(
            key, seqs, window=window, position=position, k=k, cfg=cfg, mesh=trainer.mesh,
            checkpoint_dir=trainer.folder(name), resume=trainer.resume))

    if method == "sae":
        return topk(name, key, 1, None, k)
    if method == "tc":
        return topk(name, key, T, None, k * T)
    if method == "stacked":
        per = [topk(f"{name}-pos{p}", jax.random.fold_in(key, p), T, p, k) for p in range(T)]
        return _stack([p for p, _ in per]), np.mean([c for _, c in per], axis=0)
    if method == "acausal":
        return trainer.job(name, lambda: train_acausal(
            key, seqs, window=T, target_l0=float(k * T), cfg=cfg, mesh=trainer.mesh,
            checkpoint_dir=trainer.folder(name), resume=trainer.resume))
    raise ValueError(f"`method` must be one of {METHODS}; got {method!r}")
