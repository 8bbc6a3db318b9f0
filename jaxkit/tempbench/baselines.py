"""Training of the paper's baselines beside the four TempBench dictionaries, and every
method's representation of a window (what the probes and the tallies read).

Baselines (kernels in :mod:`jaxkit.kernels.crosscoder.temporal_baselines`):

* ``sae_kT`` -- a per-token TopK SAE with ``k T`` active latents on its one token (the
  L0 of a temporal crosscoder's window code, on a single token);
* ``mlc`` -- multi-layer crosscoder over every block's residual stream at the token,
  ``k T`` active latents (its input holds the other layers: a structural difference);
* ``matryoshka`` -- per-token Matryoshka TopK SAE (prefixes F/4, F/2, F), ``k`` per token;
* ``tsae`` -- temporal SAE: per-token TopK, ``k`` per token, contrastive term on the
  first F/2 latents of adjacent tokens;
* ``tfa`` -- temporal feature analysis over the window, ``k`` novel latents per token.

TopK SAEs and the MLC are trained by :func:`jaxkit.crosscoder.fit` (through
:func:`jaxkit.tempbench.train.train_topk`); Matryoshka, T-SAE and TFA by the one step
:func:`jaxkit.kernels.train.make_train_step` in the one loop :func:`jaxkit.training.fit`
with checkpoints, like the acausal crosscoder. Every method gets ``n_latents`` latents,
the same steps, batch and learning rate, and the same per-window budget ``k T``
(``sae_kT`` and ``mlc``: ``k T`` on the single token they read).

Representation of the window ending at token t (:func:`window_codes`): window
dictionaries (``tc``, ``acausal``) their code (F); per-token dictionaries (``sae``,
``matryoshka``, ``tsae``) and ``stacked`` / ``tfa`` the concatenation of their T per-token
codes (T F columns, k T active); ``sae_kT`` / ``mlc`` the code of token t (F, k T active).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxkit import distributed, optim
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels import train as ktrain
from jaxkit.kernels.crosscoder import temporal_baselines as tb

from . import compare as C
from .train import (
    METHODS,
    TrainConfig,
    Trainer,
    check_chunks,
    chunk_program,
    fit_chunks,
    sample_chunk,
    train_method,
    train_topk,
)

__all__ = ["BASELINES", "ALL_METHODS", "LABELS", "train_any", "window_codes",
           "train_custom"]

BASELINES = ("sae_kT", "mlc", "matryoshka", "tsae", "tfa")
ALL_METHODS = METHODS + BASELINES
LABELS = {**C.LABELS, "sae_kT": "per-token SAE, k·T on the token",
          "mlc": "multi-layer crosscoder (all blocks, k·T)",
          "matryoshka": "Matryoshka SAE (prefixes F/4, F/2, F)",
          "tsae": "temporal SAE (contrastive, Bhalla et al.)",
          "tfa": "TFA (predicted + novel codes, Lubana et al.)"}
PER_TOKEN = ("sae", "matryoshka", "tsae")


def _prefixes(F: int) -> tuple[int, ...]:
    return tuple(sorted({max(F // 4, 1), max(F // 2, 1), F}))


class _Spec(NamedTuple):
    name: str
    k: int
    window: int
    n_latents: int


def _loss(spec: _Spec):
    F = spec.n_latents
    if spec.name == "matryoshka":
        return lambda p, x: tb.matryoshka_loss(p, x, k=spec.k, prefixes=_prefixes(F))
    if spec.name == "tsae":
        return lambda p, x: tb.tsae_loss(p, x, k=spec.k, n_high=max(F // 2, 1), alpha=0.1,
                                         tau=0.1)
    return lambda p, x: tb.tfa_loss(p, x, k=spec.k)


@functools.lru_cache(maxsize=8)
def _chunk(spec: _Spec, lr: float, mesh):
    loss = _loss(spec)

    def loss_fn(p, key, x, aux):
        del key, aux
        if mesh is not None:
            x = jax.lax.with_sharding_constraint(x, distributed.data_sharding(mesh, x.ndim))
        return loss(p, x)

    post = tb.tfa_normalize if spec.name == "tfa" else cc.normalize_decoder
    return chunk_program(ktrain.make_train_step(loss_fn, optim.optimizer(lr), post_update=post))


def train_custom(key: PRNGKeyArray, seqs: Float[Array, "n L d"], method: str,
                 cfg: TrainConfig, *, mesh=None, checkpoint_dir=None,
                 resume: bool = True) -> tuple[Any, np.ndarray]:
    """Train ``matryoshka``, ``tsae`` or ``tfa`` on the sequences ``seqs`` (unit-RMS
    data assumed: no rescaling) by :func:`jaxkit.training.fit`, chunks of
    ``cfg.log_every`` steps, a checkpoint every ``cfg.checkpoint_every`` chunks; the
    batches of chunk i come from ``fold_in(key, i)``, so a resumed training ends with the
    parameters of an uninterrupted one. Returns the parameters and the FVU per chunk."""
    if method not in ("matryoshka", "tsae", "tfa"):
        raise ValueError(f"`method` must be 'matryoshka', 'tsae' or 'tfa'; got {method!r}")
    mesh = distributed.data_mesh(mesh)
    check_chunks(cfg, mesh)
    x = jnp.asarray(seqs, jnp.float32)
    d = x.shape[-1]
    window = {"matryoshka": 1, "tsae": 2, "tfa": cfg.window}[method]
    spec = _Spec(method, cfg.k, window, cfg.n_latents)
    k_init, k_sample, k_data, k_run = jax.random.split(key, 4)
    sample = sample_chunk(k_sample, x, 1, 1, 512)[0]  # (512, 1, d)
    if method == "tfa":
        params = tb.tfa_init(k_init, d, cfg.n_latents, b=cc.geometric_median(sample[:, 0]))
    else:
        params = cc.init(k_init, d, cfg.n_latents, site=(1,), sample=sample)
    state = ktrain.init(params, optim.optimizer(cfg.lr))
    return fit_chunks((k_data, k_run), state, _chunk(spec, float(cfg.lr), mesh), x, window,
                      cfg, mesh=mesh, checkpoint_dir=checkpoint_dir, resume=resume)


def train_any(method: str, key: PRNGKeyArray, seqs: Float[Array, "n L d"], cfg: TrainConfig,
              trainer: Trainer = Trainer(), *, name: str = "train",
              layers: Float[Array, "n L nl d"] | None = None) -> tuple[Any, np.ndarray]:
    """Train any of :data:`ALL_METHODS` with window ``cfg.window`` and per-token budget
    ``cfg.k`` (``mlc`` needs ``layers``, every block's stream). Cached and checkpointed
    under ``name`` through ``trainer``. Returns the parameters and the FVU curve."""
    T, k = cfg.window, cfg.k
    if method in METHODS:
        c = cfg._replace(window=1) if method == "sae" else cfg
        return train_method(method, key, seqs, c, trainer, name=name)
    if method == "sae_kT":
        return trainer.job(name, lambda: train_topk(
            key, seqs, window=1, position=None, k=min(k * T, cfg.n_latents - 1), cfg=cfg,
            mesh=trainer.mesh, checkpoint_dir=trainer.folder(name), resume=trainer.resume))
    if method == "mlc":
        if layers is None:
            raise ValueError("`layers` (every block's residual stream) is required for 'mlc'")
        lay = jnp.asarray(layers)
        views = lay.reshape(-1, *lay.shape[-2:])  # (n L, nl, d): one window per token
        return trainer.job(name, lambda: train_topk(
            key, views, window=views.shape[1], position=None,
            k=min(k * T, cfg.n_latents - 1), cfg=cfg, mesh=trainer.mesh,
            checkpoint_dir=trainer.folder(name), resume=trainer.resume))
    if method in ("matryoshka", "tsae", "tfa"):
        return trainer.job(name, lambda: train_custom(
            key, seqs, method, cfg, mesh=trainer.mesh, checkpoint_dir=trainer.folder(name),
            resume=trainer.resume))
    raise ValueError(f"`method` must be one of {ALL_METHODS}; got {method!r}")


def window_codes(method: str, params, x: Float[Array, "B T d"], cfg: TrainConfig, *,
                 layers_last: Float[Array, "B nl d"] | None = None
                 ) -> tuple[Float[Array, "B M"], Float[Array, "B T d"] | None]:
    """The representation of each window (module docstring) and, where the method
    reconstructs the window, its reconstruction (None for ``sae_kT`` / ``mlc``, which
    read one token). ``layers_last``: every block's stream at the window's last token
    (``mlc``)."""
    B, T, d = x.shape
    k = cfg.k
    if method in ("stacked", "acausal", "tc"):
        return C.window_forward(method, params, x, cfg)
    if method in PER_TOKEN:
        z = cc.encode(params, x.reshape(B * T, 1, d), k=k)
        return z.reshape(B, -1), cc.decode(params, z).reshape(B, T, d)
    if method == "sae_kT":
        z = cc.encode(params, x[:, -1:], k=min(k * T, params.W_dec.shape[0] - 1))
        return z, None
    if method == "mlc":
        if layers_last is None:
            raise ValueError("`layers_last` is required for 'mlc'")
        z = cc.encode(params, layers_last, k=min(k * T, params.W_dec.shape[0] - 1))
        return z, None
    if method == "tfa":
        o = tb.tfa_forward(params, x, k=k)
        return o.z_novel.reshape(B, -1), o.x_hat
    raise ValueError(f"`method` must be one of {ALL_METHODS}; got {method!r}")
