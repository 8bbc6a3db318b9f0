"""The crosscoder trainer: sharded steps, checkpoints with exact resume, one code path
from one CPU to a TPU pod, for in-memory data (:func:`jaxkit.crosscoder.fit`) and for an
on-disk activation store (:func:`train`).

Both run :func:`run`: the kernel's train step
(:func:`jaxkit.kernels.crosscoder.make_train_step`; with a mesh, the variant of
:mod:`jaxkit.crosscoder.sharding` whose top-k is a shard-local top-k plus a merge of
candidates) under ``jax.jit`` with explicit shardings (batch over mesh axis ``data``,
dictionary and optimizer moments over ``model``), inside the one training loop
:func:`jaxkit.training.fit` (step keys ``fold_in(key, i)``, the divergence guard, exact
resume) with :class:`jaxkit.checkpoint.Checkpointer` checkpoints (atomic; an unreadable
newest checkpoint falls back to the previous one).

A checkpoint holds the :class:`~jaxkit.kernels.crosscoder.TrainState` (params, optimizer
state, step, dead-latent counters and BatchTopK threshold), the data position and the
config. ``resume=True`` continues from the newest one, onto any mesh; the resumed run
equals the uninterrupted one. A checkpoint whose config differs from the run's in
anything but ``steps``, the mesh and the store path (the dictionary, the optimizer and
its learning rate, the dead-latent rule, the data) is refused with a ``ValueError``
naming what differs; ``steps`` may grow (a run is continued to a larger total) but not
fall below the checkpoint's step.

Divergence: a step whose loss, gradient norm or (here) updated parameters are not finite
raises :class:`TrainingDiverged` at the next logging or checkpoint boundary, *before*
anything is saved, so the newest checkpoint on disk is always a finite state.

Multi-host / TPU pod slice. The same command runs on every host, one process per host::

    # every host of the slice (TPU VMs: jax.distributed.initialize() needs no arguments)
    JAXKIT_DISTRIBUTED=auto jaxkit --distributed crosscoder train \\
        --activations gs-fuse-mount/acts --n-latents 65536 --k 64 --window 4 \\
        --steps 100000 --batch-size 4096 --mesh data=-1,model=4 --out /shared/run1

``jaxkit --distributed`` calls :func:`jaxkit.distributed.initialize` (that is
``jax.distributed.initialize()``: TPU pods, Slurm and OpenMPI are auto-detected; on CPU
clusters set ``JAXKIT_COORDINATOR=host:port``, ``JAXKIT_NUM_PROCESSES``,
``JAXKIT_PROCESS_ID``). The mesh spans all devices of all hosts; each process reads only
the rows of every global batch that its own devices hold (disjoint parts of the store)
and :func:`jax.make_array_from_process_local_data` assembles the global batch. The
checkpoint folder must be shared storage (GCS path or NFS) visible to every host; orbax
coordinates the save. Choose ``model`` so that ``n_latents / model`` latents fit a
chip's memory, and ``data`` = devices / model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import PRNGKeyArray

from jaxkit import distributed as jd
from jaxkit import optim, training
from jaxkit.checkpoint import Checkpointer, abstract_like
from jaxkit.kernels import crosscoder as cc
from jaxkit.training import TrainingDiverged

from . import sharding as sh
from .store import ActivationStore, StorePosition

__all__ = [
    "COMPAT_KEYS",
    "FREE_KEYS",
    "TrainResult",
    "TrainingDiverged",
    "train",
    "run",
    "restore",
    "read_checkpoint_meta",
    "check_resumable",
    "local_rows",
]

# Config entries that define the data stream: a checkpoint must share them (and every
# other entry but FREE_KEYS) with the run that resumes it.
COMPAT_KEYS = ("d", "n_latents", "k", "window", "activation", "batch_size", "stride",
               "store_seed")
# Config entries a resumed run may change: the total step count (upwards), the mesh
# (checkpoints restore onto any mesh) and where the store lives.
FREE_KEYS = ("steps", "mesh", "store")


class TrainResult(NamedTuple):
    """What :func:`train` returns.

    Attributes:
      params: host NumPy :class:`~jaxkit.kernels.crosscoder.Params` (gathered from every
        process).
      state: the final device :class:`~jaxkit.kernels.crosscoder.TrainState`, sharded.
      history: one dict per logged step: ``step``, ``epoch``, ``cursor`` and the
        :class:`~jaxkit.kernels.crosscoder.Info` fields.
      position: the store position after the last step.
      config: the run's settings.
      resumed_from: the checkpoint step the run continued from, or ``None``.
    """

    params: cc.Params
    state: cc.TrainState
    history: list[dict[str, float]]
    position: StorePosition
    config: dict[str, Any]
    resumed_from: int | None


# --------------------------------------------------------------------------- helpers


def local_rows(sharding: NamedSharding, global_shape: tuple[int, ...]) -> slice:
    """Rows of the global batch held by this process's devices under ``sharding``.

    Args:
      sharding: the batch sharding.
      global_shape: the global batch shape.

    Returns:
      A contiguous range (multi-process meshes from :func:`jaxkit.distributed.make_mesh`
      give each process a contiguous block of the ``data`` axis).
    """
    B = global_shape[0]
    spans = sorted({(s[0].start or 0, B if s[0].stop is None else s[0].stop)
                    for s in sharding.addressable_devices_indices_map(global_shape).values()})
    lo, hi, end = spans[0][0], max(e for _, e in spans), spans[0][0]
    for a, b in spans:
        if a > end:
            raise ValueError("`mesh` gives this process a non-contiguous set of batch rows; "
                             "order the mesh devices by process (jaxkit.distributed.make_mesh)")
        end = max(end, b)
    return slice(lo, hi)


def _readable_meta(ck: Checkpointer) -> tuple[int | None, dict]:
    """The newest step whose JSON part can be read, and that JSON."""
    for s in ck.steps()[::-1]:
        try:
            return s, ck.read_meta(s)
        except Exception:  # noqa: BLE001 - a partial checkpoint; restore skips it too
            continue
    return None, {}


def read_checkpoint_meta(checkpoint_dir: str | os.PathLike, step: int | None = None) -> dict:
    """The JSON part of a checkpoint (``config``, ``position``, ``step``).

    Args:
      checkpoint_dir: the checkpoint folder.
      step: the step (default: the newest readable one).

    Returns:
      The JSON dictionary.

    Raises:
      ValueError: the folder does not exist or holds no (readable) checkpoint.
    """
    try:
        ck = Checkpointer(checkpoint_dir, writer=False)
    except ValueError as e:
        raise ValueError(f"`checkpoint_dir` {str(checkpoint_dir)!r} does not exist") from e
    with ck:
        if step is not None:
            return ck.read_meta(step)
        s, meta = _readable_meta(ck)
    if s is None:
        raise ValueError(f"`checkpoint_dir` {str(checkpoint_dir)!r} holds no checkpoint")
    return meta


def check_resumable(saved: dict, config: dict, where, step: int,
                    free: Sequence[str] = FREE_KEYS) -> None:
    """Refuse to resume a checkpoint of a different run.

    Args:
      saved: the checkpoint's config.
      config: this run's config.
      where: the checkpoint folder (for the message).
      step: the checkpoint's step.
      free: config entries that may differ.

    Raises:
      ValueError: naming every entry that differs (``steps`` only when below ``step``).
    """
    keys = [k for k in dict.fromkeys([*saved, *config]) if k not in free]
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, this run {config.get(k)!r}"
             for k in keys if saved.get(k) != config.get(k)]
    if diffs:
        raise ValueError(f"`checkpoint_dir` {str(where)!r} holds a checkpoint of an "
                         f"incompatible run ({'; '.join(diffs)}); use another directory or "
                         f"the original settings")
    if "steps" in config and int(config["steps"]) < step:
        raise ValueError(f"`steps` {config['steps']} is below the step of the checkpoint in "
                         f"{str(where)!r} ({step}); pass steps >= {step} or another directory")


def run(
    key: PRNGKeyArray,
    init_state: Callable[[], Any],
    step: Callable[[Any, Any, Any], tuple[Any, Any]],
    batch_fn: Callable[[int], Any],
    *,
    steps: int,
    config: dict,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    keep: int = 2,
    resume: bool = False,
    log_every: int = 10,
    on_log: Callable[[int, dict], Any] | None = None,
    on_resume: Callable[[int], Any] | None = None,
    position: Callable[[int], Any] | None = None,
    target: Any = None,
    free: Sequence[str] = FREE_KEYS,
) -> training.FitResult:
    """The one crosscoder training loop: :func:`jaxkit.training.fit` with the crosscoder's
    checkpoint policy.

    Args:
      key: the run's base key (step ``i`` gets ``fold_in(key, i)``).
      init_state: builds the initial state (not called when a checkpoint is restored).
      step: ``step(key, state, batch) -> (state, info)`` (jitted, ``info.finite``).
      batch_fn: ``batch_fn(i)``, the batch of step ``i``.
      steps: the total number of steps.
      config: the run's settings, saved with each checkpoint and compared on resume.
      checkpoint_dir: the checkpoint folder, ``None`` for none.
      checkpoint_every: steps between checkpoints (and one at the end).
      keep: checkpoints kept.
      resume: continue from the newest checkpoint (a folder holding checkpoints without
        ``resume`` is refused).
      log_every: logging period (and one at the end).
      on_log: ``on_log(step, scalars)`` at each logged step (``scalars`` is the history
        entry; it may be updated in place).
      on_resume: ``on_resume(step)`` after a checkpoint is restored.
      position: ``position(step) -> JSON`` data position saved with the checkpoints.
      target: the restore target (abstract state with shardings; default: the shape of
        ``init_state()``).
      free: config entries a resumed run may change (see :func:`check_resumable`).

    Returns:
      The :class:`jaxkit.training.FitResult`.

    Raises:
      ValueError: bad arguments or an incompatible checkpoint.
      TrainingDiverged: a step was not finite (nothing after it is saved).
    """
    restoring = False
    if checkpoint_dir is not None:
        checkpoint_dir = Path(checkpoint_dir)
        if checkpoint_dir.is_dir():
            with Checkpointer(checkpoint_dir, writer=False) as ck:
                latest = ck.latest_step()
                if latest is not None and not resume:
                    raise ValueError(f"`checkpoint_dir` {str(checkpoint_dir)!r} already holds "
                                     f"checkpoints (latest step {latest}); pass resume=True "
                                     f"to continue, or use an empty directory")
                if latest is not None:
                    s, meta = _readable_meta(ck)
                    if s is None:
                        raise ValueError(f"no readable checkpoint in "
                                         f"{str(checkpoint_dir)!r}")
                    check_resumable(meta.get("config", {}), config, checkpoint_dir, s, free)
                    restoring = True
    elif resume:
        raise ValueError("`resume=True` needs a `checkpoint_dir`")
    if restoring:  # built only if no checkpoint is restored after all (stale ones)
        state = target if target is not None else jax.eval_shape(init_state)
    else:
        state = init_state()
    if target is None:
        target = abstract_like(state)

    def meta_fn(done: int) -> dict:
        out = {"config": config, "step": int(done)}
        if position is not None:
            out["position"] = position(done)
        return out

    def restored(meta: dict) -> None:
        if on_resume is not None:
            on_resume(int(meta["step"]))

    try:
        return training.fit(key, state, step, batch_fn, steps=steps,
                            checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                            keep=keep, resume=True, log_every=log_every, on_log=on_log,
                            meta_fn=meta_fn, on_restore=restored, target=target,
                            init=init_state if restoring else None)
    except TrainingDiverged as e:
        if checkpoint_dir is not None:
            with Checkpointer(checkpoint_dir, writer=False) as ck:
                last = ck.latest_step()
            e.args = (f"{e.args[0]}; nothing after it was saved"
                      + ("" if last is None else f" (latest checkpoint: step {last})"),)
        raise


def _check_positive(**values) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {v!r}")


def _make_optimizer(lr: float, optimizer):
    if optimizer is not None:
        return optimizer
    if not lr > 0:
        raise ValueError(f"`lr` must be > 0; got {lr}")
    return optim.optimizer(lr)


def _abstract_state(init_state, params_shape, mesh: Mesh):
    """Shape/dtype/sharding of the TrainState without computing it, and its shardings."""
    shape = jax.eval_shape(init_state, params_shape)
    shardings = sh.state_shardings(shape, mesh)
    return abstract_like(shape, shardings), shardings


class _StoreBatches:
    """``batch_fn`` of a store-backed run: the global batch of step ``i`` (position
    ``(0, i)`` normalised to epochs), the host read of step ``i + 1`` already under way
    in a background thread while the device computes step ``i``."""

    def __init__(self, store: ActivationStore, rows: slice, bsh, gshape, steps: int):
        self.store, self.rows, self.bsh, self.gshape, self.steps = store, rows, bsh, gshape, steps
        self.pool = ThreadPoolExecutor(1)
        self.pending: dict[int, Any] = {}

    def position(self, i: int) -> StorePosition:
        bpe = self.store.batches_per_epoch
        return StorePosition(i // bpe, i % bpe)

    def _read(self, i: int):
        pos = self.position(i)
        try:
            return self.store.batch(pos, rows=self.rows)[0]
        except ValueError as e:
            raise ValueError(f"{e} (at store position epoch {pos[0]}, batch {pos[1]})") from e

    def __call__(self, i: int):
        fut = self.pending.pop(i, None)
        x = fut.result() if fut is not None else self._read(i)
        if i + 1 < self.steps:
            self.pending[i + 1] = self.pool.submit(self._read, i + 1)
        return jax.make_array_from_process_local_data(self.bsh, x, self.gshape)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- train


def train(
    key: PRNGKeyArray | int,
    store: ActivationStore | str | os.PathLike,
    *,
    n_latents: int,
    k: int | None,
    steps: int,
    window: int = 1,
    activation: str = "topk",
    lr: float = 1e-3,
    batch_size: int | None = None,
    seed: int = 0,
    optimizer: optax.GradientTransformation | None = None,
    mesh: Mesh | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    keep: int = 2,
    resume: bool = False,
    log_every: int = 10,
    on_step: Callable[[int, dict], Any] | None = None,
    sparsity_coef: float = 0.0,
    sparsity: str = "l1",
    k_aux: int | None = None,
    dead_steps: int = 1000,
    clip_norm: float | None = None,
    init_from_data: bool = True,
    on_resume: Callable[[int], Any] | None = None,
) -> TrainResult:
    """Train a (temporal) crosscoder on an activation store, sharded over ``mesh``.

    Args:
      key: PRNG key (or int seed) of the initialisation and the run.
      store: an :class:`ActivationStore` or a path (then ``batch_size`` and ``seed``
        build one with ``window``); windows ``(B, window, d)``, site ``(window,)``
        (``window=1``: an SAE with ``W_dec (F, 1, d)``, as :func:`jaxkit.crosscoder.fit`).
      n_latents: dictionary size.
      k: kept latents (TopK / BatchTopK; ``1 <= k <= n_latents``).
      steps: total number of steps (a resumed run stops at the same total).
      window: tokens per window.
      activation: see :func:`jaxkit.kernels.crosscoder.make_train_step`.
      lr: Adam learning rate (unless ``optimizer`` is given).
      batch_size: global batch size when ``store`` is a path (else must match it).
      seed: the store's shuffle seed when ``store`` is a path.
      optimizer: an optax optimizer instead of Adam(lr).
      mesh: mesh with a ``data`` axis and optionally ``model``
        (:func:`jaxkit.distributed.make_mesh`); default all devices on ``data``.
      checkpoint_dir: checkpoint folder (``None``: no checkpoints).
      checkpoint_every: steps between checkpoints (and one at the end).
      keep: checkpoints kept.
      resume: continue from the newest checkpoint in ``checkpoint_dir`` (a fresh start
        if there is none).
      log_every: host sync period: metrics are read (and the divergence flag checked)
        every ``log_every`` steps and at the end; ``on_step(step, metrics)`` then.
      on_step: logging callback.
      sparsity_coef: sparsity penalty weight.
      sparsity: ``"l1"``, ``"l0"`` or ``"tanh"``.
      k_aux: AuxK latents (``<= n_latents``), ``None`` for no AuxK.
      dead_steps: steps without firing after which a latent is dead.
      clip_norm: global gradient-norm clip.
      init_from_data: initialise ``b_dec`` at the geometric median of the first global
        batch (Gao et al. 2024).
      on_resume: ``on_resume(step)`` once a checkpoint is restored.

    Returns:
      A :class:`TrainResult`.

    Raises:
      ValueError: bad arguments, bad data (naming the shard) or an incompatible
        checkpoint.
      TrainingDiverged: a step was not finite (no non-finite state is ever saved).
    """
    if isinstance(key, int):
        key = jax.random.key(key)
    _check_positive(n_latents=n_latents, steps=steps, window=window,
                    checkpoint_every=checkpoint_every, log_every=log_every, keep=keep)
    if not isinstance(store, ActivationStore):
        if batch_size is None:
            raise ValueError("`batch_size` is required when `store` is a path")
        store = ActivationStore(store, batch_size=batch_size, window=window, seed=seed)
    elif store.window != window:
        raise ValueError(f"`window` {window} differs from the store's window {store.window}")
    if batch_size is not None and batch_size != store.batch_size:
        raise ValueError(f"`batch_size` {batch_size} differs from the store's "
                         f"{store.batch_size}")
    mesh = jd.make_mesh({sh.DATA: -1}) if mesh is None else mesh
    if sh.DATA not in mesh.axis_names:
        raise ValueError(f"`mesh` needs a 'data' axis; got axes {mesh.axis_names}")
    n_data = mesh.shape[sh.DATA]
    n_model = mesh.shape[sh.MODEL] if sh.MODEL in mesh.axis_names else 1
    B, d = store.batch_size, store.d
    if B % n_data:
        raise ValueError(f"`batch_size` {B} must be a multiple of the mesh's data axis "
                         f"({n_data})")
    if n_latents % n_model:
        raise ValueError(f"`n_latents` {n_latents} must be a multiple of the mesh's model "
                         f"axis ({n_model})")
    cc.check_activation(activation)
    if activation in ("topk", "batch_topk"):
        k = cc.check_k(k, int(n_latents))
    if k_aux is not None:
        k_aux = cc.check_k(k_aux, int(n_latents), "k_aux")
    optimizer_name = "adam" if optimizer is None else "custom"
    optimizer = _make_optimizer(lr, optimizer)
    config = {"d": d, "n_latents": int(n_latents), "k": None if k is None else int(k),
              "window": int(window), "activation": activation, "batch_size": B,
              "stride": store.stride, "store_seed": store.seed,
              "n_windows": store.n_windows, "lr": float(lr), "steps": int(steps),
              "sparsity_coef": float(sparsity_coef), "sparsity": sparsity, "k_aux": k_aux,
              "dead_steps": int(dead_steps), "clip_norm": clip_norm,
              "optimizer": optimizer_name, "init_from_data": bool(init_from_data),
              "store": str(store.path), "mesh": {a: int(s) for a, s in mesh.shape.items()}}
    init_state, step_fn = sh.make_train_step(
        mesh, activation=activation, k=k, optimizer=optimizer, sparsity_coef=sparsity_coef,
        sparsity=sparsity, k_aux=k_aux, dead_steps=dead_steps, clip_norm=clip_norm,
        check_params=True)

    k_init, k_run = jax.random.split(key)
    site = (window,)

    def init_params():
        sample = store.batch(StorePosition(0, 0), rows=slice(None))[0] if init_from_data \
            else None  # with a sample, b_dec starts at its geometric median
        return cc.init(k_init, d, n_latents, site=site, activation=activation,
                       sample=None if sample is None else jnp.asarray(sample))

    params_shape = jax.eval_shape(lambda: cc.init(k_init, d, n_latents, site=site,
                                                  activation=activation))
    target, shardings = _abstract_state(init_state, params_shape, mesh)

    def make_state():
        params = jax.jit(lambda p: p, out_shardings=shardings.params)(init_params())
        return jax.jit(init_state, out_shardings=shardings)(params)

    bsh = sh.batch_sharding(mesh, 3)
    gshape = (B, window, d)
    rep = NamedSharding(mesh, P())
    typed = jnp.issubdtype(k_run.dtype, jax.dtypes.prng_key)
    impl = jax.random.key_impl(k_run) if typed else None

    def keyed_step(kd, state, x):
        return step_fn(jax.random.wrap_key_data(kd, impl=impl) if typed else kd, state, x)

    jstep = jax.jit(keyed_step, in_shardings=(rep, shardings, bsh),
                    out_shardings=(shardings, rep), donate_argnums=(1,))

    def step(kk, state, x):  # the key as key data: device_put of a typed key array onto
        kd = jax.random.key_data(kk) if typed else kk  # other processes' devices fails
        return jstep(jax.device_put(kd, rep), state, x)

    batches = _StoreBatches(store, local_rows(bsh, gshape), bsh, gshape, int(steps))
    resumed: list[int] = []

    def restored(s: int) -> None:
        resumed.append(s)
        if on_resume is not None:
            on_resume(s)

    def logged(i: int, m: dict) -> None:
        pos = batches.position(i)
        m.update(epoch=pos.epoch, cursor=pos.cursor)
        if on_step is not None:
            on_step(i, m)

    try:
        out = run(k_run, make_state, step, batches, steps=int(steps), config=config,
                  checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                  keep=keep, resume=resume, log_every=log_every, on_log=logged,
                  on_resume=restored, position=lambda i: list(batches.position(i)),
                  target=target)
    finally:
        batches.close()
    state = out.state
    done = int(jax.device_get(state.step))
    return TrainResult(sh.to_host(state.params), state, out.history, batches.position(done),
                       config, resumed[0] if resumed else None)


def restore(
    checkpoint_dir: str | os.PathLike,
    *,
    mesh: Mesh | None = None,
    step: int | None = None,
    optimizer: optax.GradientTransformation | None = None,
) -> tuple[cc.TrainState, StorePosition, dict]:
    """Load a checkpoint of :func:`train` onto ``mesh``, whatever mesh wrote it.

    Args:
      checkpoint_dir: the checkpoint folder.
      mesh: the target mesh (default: all devices on ``data``).
      step: the step (default: the newest readable one).
      optimizer: the run's optimizer when it was not the default Adam (its state
        structure must match).

    Returns:
      ``(state, store position, config)``.
    """
    meta = read_checkpoint_meta(checkpoint_dir, step)
    cfg = meta["config"]
    mesh = jd.make_mesh({sh.DATA: -1}) if mesh is None else mesh
    opt = optimizer if optimizer is not None else optim.optimizer(cfg["lr"])
    init_state, _ = sh.make_train_step(
        mesh, activation=cfg["activation"], k=cfg["k"], optimizer=opt,
        sparsity_coef=cfg["sparsity_coef"], sparsity=cfg["sparsity"], k_aux=cfg["k_aux"],
        dead_steps=cfg["dead_steps"], clip_norm=cfg["clip_norm"])
    params_shape = jax.eval_shape(lambda: cc.init(jax.random.key(0), cfg["d"],
                                                  cfg["n_latents"], site=(cfg["window"],),
                                                  activation=cfg["activation"]))
    target, _ = _abstract_state(init_state, params_shape, mesh)
    with Checkpointer(checkpoint_dir, writer=False) as ck:
        state, meta, _ = ck.restore(target, int(meta["step"]))
    return state, StorePosition(*meta["position"]), cfg
