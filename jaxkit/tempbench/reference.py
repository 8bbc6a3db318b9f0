"""The synthetic panel at a setup closer to the paper's reference, with every baseline.

Markov features in superposition (:func:`jaxkit.tempbench.tasks.markov_features`) with
*orthogonal* directions (``n_features <= d``, as the reference's orthogonal features),
persistence ``rho``, for several per-token budgets k and windows T; every method of
:data:`REF_METHODS` trained on the same data per seed, at the same latent count and the
same L0 per window (k T; ``sae_kT``: k T on its one token), through
:func:`jaxkit.tempbench.baselines.train_any`.

Metrics (same rule for every method):

* ``token_auc``: recovery AUC of the per-token directions against each method's
  per-token atoms (the crosscoders' per-position slices,
  :func:`jaxkit.tempbench.compare.window_slices`; the per-token dictionaries' atoms, TFA's
  dictionary ``D``): every method can reach it, so it is the like-for-like comparison;
* ``temporal_auc``: recovery AUC of the persisting window atoms against each method's
  ``(T, d)`` atoms (per-token atoms placed at each position): structural for every method
  whose atoms sit on one position (at most ``1/sqrt(T)``), so it is compared only between
  the window-atom methods (``tc``, ``acausal``);
* ``fvu`` (held-out windows, or the token for ``sae_kT``) and ``l0`` per window.

:data:`WINDOW_SPANNING` are the baselines that read more than one token (the acausal
crosscoder, the temporal SAE's contrastive pairs, TFA's attention over the window):
"temporal architectures" in the paper's sense.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxkit.kernels import crosscoder as cc

from . import baselines as B
from . import compare as C
from . import tasks
from .results import ReferencePanel, WindowScores, summarise
from .train import TrainConfig, Trainer

__all__ = ["REF_METHODS", "WINDOW_SPANNING", "RefSetting", "ref_atoms", "compare_reference"]

REF_METHODS = ("sae", "stacked", "acausal", "tc", "sae_kT", "matryoshka", "tsae", "tfa")
WINDOW_SPANNING = ("acausal", "tsae", "tfa")
_PER_TOKEN = ("sae_kT", "matryoshka", "tsae", "tfa")


class RefSetting(NamedTuple):
    d: int = 32
    n_features: int = 24
    pi: float = 0.05
    noise: float = 0.01
    length: int = 64
    n_train: int = 64
    n_test: int = 16


def ref_atoms(method: str, params, window: int) -> tuple[jax.Array, jax.Array]:
    """``(window atoms (M, T, d), per-token atoms (K, d))`` of one trained dictionary
    (module docstring)."""
    if method not in _PER_TOKEN:
        return C.window_atoms(method, params, window), C.window_slices(method, params, window)
    w = params.D if method == "tfa" else params.W_dec[:, 0]
    eye = jnp.eye(window, dtype=w.dtype)
    return jnp.einsum("nd,pq->pnqd", w, eye).reshape(-1, window, w.shape[-1]), w


@functools.partial(jax.jit, static_argnames=("s",))
def _data(seed_keys, rho, s: RefSetting):
    return jax.vmap(lambda kk: tasks.markov_features(
        C._data_key(kk), n_seq=s.n_train + s.n_test, length=s.length, d=s.d,
        n_features=s.n_features, pi=s.pi, rho=rho, noise=s.noise, orthogonal=True))(seed_keys)


@functools.partial(jax.jit, static_argnames=("method", "cfg"))
def _evaluate(method, params, x, directions, cfg):
    T = cfg.window
    z, xh = B.window_codes(method, params, x, cfg)
    if xh is None:  # sae_kT: the last token, k T latents
        target, xh = x[:, -1], cc.decode(params, z)[:, 0]
    else:
        target = x
    atoms, slices = ref_atoms(method, params, T)
    truth = tasks.persistent_atoms(directions, T)
    return dict(token_auc=cc.recovery_auc(slices, directions),
                temporal_auc=cc.recovery_auc(atoms, truth), fvu=cc.fvu(target, xh),
                l0=jnp.mean(jnp.sum(z != 0, -1).astype(jnp.float32)))


def compare_reference(key: PRNGKeyArray, rho: float, setting: RefSetting, cfg: TrainConfig,
                      *, windows=(2,), ks=(1,), n_seeds: int = 3, methods=REF_METHODS,
                      trainer: Trainer = Trainer(), name: str = "reference"
                      ) -> ReferencePanel:
    """Every method at every (T, k) on orthogonal Markov features (module docstring).

    Args:
      key: the run key (seed i's data from ``fold_in(key, i)``, its trainings from
        ``fold_in(fold_in(key, i), 1)``).
      rho: persistence.
      setting: the task's sizes.
      cfg: training settings (window and k are set per cell).
      windows, ks: the windows and per-token budgets.
      n_seeds: independent data sets and trainings.
      methods: a subset of :data:`REF_METHODS`.
      trainer: mesh, checkpoints and the cache of finished trainings.
      name: prefix of the trainings' cache names.

    Returns:
      A :class:`~jaxkit.tempbench.results.ReferencePanel`: ``cells[(T, k)].methods[method]
      [metric]``, a summary of the per-seed values.
    """
    bad = set(methods) - set(REF_METHODS)
    if bad:
        raise ValueError(f"`methods` must be among {REF_METHODS}; got {sorted(bad)}")
    s = setting
    if s.n_features > s.d:
        raise ValueError(f"orthogonal features need n_features <= d; got {s.n_features} > "
                         f"{s.d}")
    seed_keys = C._seed_keys(key, n_seeds)
    data = _data(seed_keys, jnp.float32(rho), s)
    out: dict[tuple[int, int], WindowScores] = {}
    for T in windows:
        for k in ks:
            c = cfg._replace(window=T, k=k)
            cell: dict = {}
            for m in methods:
                per = []
                for i in range(n_seeds):
                    params, _ = B.train_any(m, jax.random.fold_in(seed_keys[i], 1),
                                            data.x[i, :s.n_train], c, trainer,
                                            name=f"{name}-{m}-T{T}-k{k}-seed{i}")
                    win = tasks.sliding_windows(data.x[i, s.n_train:], T)
                    win = win.reshape(-1, T, s.d)
                    per.append({key_: float(v) for key_, v in _evaluate(
                        m, params, win, data.directions[i], c).items()})
                cell[m] = summarise({key_: np.asarray([p[key_] for p in per])
                                     for key_ in per[0]})
            out[(T, k)] = WindowScores(methods=cell)
    return ReferencePanel(cells=out)
