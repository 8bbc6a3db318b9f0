"""Scale: the temporal crosscoder trained straight from the on-disk activation store.

:func:`train_tc_on_store` streams windows of ``T`` tokens from a directory of
safetensors shards (:class:`jaxkit.crosscoder.store.ActivationStore`: the shards are read
slice by slice, never loaded whole, in a shuffled order fixed by the seed) and trains the
TopK temporal crosscoder with :func:`jaxkit.crosscoder.train`: the batch split over the
mesh's ``data`` axis and the dictionary (encoder columns, decoder atoms, Adam moments)
over its ``model`` axis (:func:`dictionary_mesh` makes one from the run's devices),
checkpoints with the store position, so a killed training resumes to the same parameters
on any mesh.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh

from jaxkit import crosscoder
from jaxkit.crosscoder.store import ActivationStore
from jaxkit.kernels import crosscoder as cc

__all__ = ["dictionary_mesh", "train_tc_on_store", "window_fvu"]


def dictionary_mesh(mesh: Mesh | None = None, n_latents: int | None = None) -> Mesh:
    """A ``("data", "model")`` mesh over ``mesh``'s devices (default: all devices) with
    ``model = 2`` when the device count is even and ``n_latents`` divides, else 1."""
    devices = np.asarray(jax.devices() if mesh is None else mesh.devices).ravel()
    n = len(devices)
    m = 2 if n % 2 == 0 and n > 1 and (n_latents is None or n_latents % 2 == 0) else 1
    return Mesh(devices.reshape(n // m, m), ("data", "model"))


def train_tc_on_store(key, directory, *, window: int, n_latents: int, k: int, steps: int,
                      batch_size: int, lr: float = 3e-3, mesh: Mesh | None = None,
                      checkpoint_dir=None, resume: bool = True, log_every: int = 10,
                      on_step=None, seed: int = 0) -> crosscoder.TrainResult:
    """Temporal crosscoder (TopK ``k * window`` per window, AuxK on dead latents) on the
    store at ``directory`` (module docstring).

    Args:
      key: PRNG key of the initialisation and the run.
      directory: a directory of safetensors shards with ``activations (n, L, d)``.
      window: tokens per window.
      n_latents: dictionary size (a multiple of the mesh's ``model`` size).
      k: active latents per token.
      steps: total steps (a resumed run stops at the same total).
      batch_size: windows per step (a multiple of the mesh's ``data`` size).
      lr: Adam learning rate.
      mesh: the run's mesh (its devices are re-arranged by :func:`dictionary_mesh`).
      checkpoint_dir: checkpoint folder (None: none).
      resume: continue from the newest checkpoint.
      log_every: steps between host syncs (and history points).
      on_step: ``on_step(step, metrics)`` at each of them.
      seed: the store's shuffle seed.

    Returns:
      :class:`jaxkit.crosscoder.TrainResult`.
    """
    store = ActivationStore(Path(directory), batch_size=batch_size, window=window,
                            tensor="activations", seed=seed)
    kk = k * window
    return crosscoder.train(key, store, n_latents=n_latents, k=kk, steps=steps, window=window,
                            lr=lr, mesh=dictionary_mesh(mesh, n_latents),
                            checkpoint_dir=checkpoint_dir,
                            checkpoint_every=max(steps // 2, 1), resume=resume,
                            log_every=log_every, on_step=on_step,
                            k_aux=min(2 * kk, n_latents - 1),
                            dead_steps=max(steps // 10, 1))


def window_fvu(params: cc.Params, windows: np.ndarray, k: int) -> float:
    """FVU of a window dictionary with ``k`` active latents on held-out windows."""
    _, _, xh = jax.jit(lambda p, x: cc.forward(p, x, k=k))(params, windows)
    return float(cc.fvu(windows, xh))
