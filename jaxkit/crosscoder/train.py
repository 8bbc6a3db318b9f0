"""Crosscoder training at scale: sharded steps, an on-disk activation store, orbax
checkpoints with exact resume, one code path from one CPU to a TPU pod.

``train(key, store, n_latents=..., k=..., window=..., steps=...)`` streams batches from
an :class:`~jaxkit.crosscoder.store.ActivationStore`, runs the kernel's train step
(:func:`jaxkit.kernels.crosscoder.make_train_step`; with a mesh, the variant of
:mod:`jaxkit.crosscoder.sharding` whose top-k is a shard-local top-k plus a merge of
candidates) under ``jax.jit`` with explicit shardings: batch over mesh axis ``data``,
dictionary (latent axis of ``W_enc``, ``b_enc``, ``W_dec``, ``log_threshold``, and the
optimizer moments) over ``model``.

Checkpoints (``orbax.checkpoint.CheckpointManager``, atomic: written to a temporary
folder and renamed) hold the full :class:`~jaxkit.kernels.crosscoder.TrainState`
(params, optimizer state, step, steps_since_fired, BatchTopK threshold, PRNG key as key
data), the store position ``(epoch, cursor)`` and the config. ``resume=True`` continues
from the latest one, onto any mesh (arrays are restored with the current run's target
shardings); the resumed run equals the uninterrupted one. A checkpoint whose config
differs in ``d``, ``n_latents``, ``k``, ``window``, ``activation``, ``batch_size``,
``stride`` or the store seed is refused with a ``ValueError`` naming what differs.

Divergence: every step folds ``isfinite(loss)``, ``isfinite(grad_norm)`` and the
finiteness of the updated params into an on-device flag (the first bad step number);
the flag is read at every logging and checkpoint boundary, and a bad flag raises
:class:`TrainingDiverged` naming the step *before* anything is saved, so the last
checkpoint on disk is always a finite state.

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
import time
from collections.abc import Callable
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
from jaxkit.kernels import crosscoder as cc

from . import sharding as sh
from .store import ActivationStore, StorePosition

__all__ = [
    "COMPAT_KEYS",
    "TrainResult",
    "TrainingDiverged",
    "train",
    "restore",
    "read_checkpoint_meta",
    "local_rows",
]

# Config entries a checkpoint must share with the run that resumes it.
COMPAT_KEYS = ("d", "n_latents", "k", "window", "activation", "batch_size", "stride",
               "store_seed")


class TrainingDiverged(FloatingPointError):
    """The loss or gradient norm became NaN/inf; the message names the step."""


class TrainResult(NamedTuple):
    """``params`` (host NumPy :class:`~jaxkit.kernels.crosscoder.Params`, gathered from
    every process), ``state`` (the final device :class:`TrainState`, sharded),
    ``history`` (one dict per logged step: step, epoch, cursor and the ``Info`` fields),
    ``position`` (store position after the last step), ``config`` and ``resumed_from``
    (checkpoint step the run continued from, or None)."""

    params: cc.Params
    state: cc.TrainState
    history: list[dict[str, float]]
    position: StorePosition
    config: dict[str, Any]
    resumed_from: int | None


# --------------------------------------------------------------------------- helpers


def local_rows(sharding: NamedSharding, global_shape: tuple[int, ...]) -> slice:
    """Rows of the global batch held by this process's devices under ``sharding``
    (a contiguous range; multi-process meshes from :func:`jaxkit.distributed.make_mesh`
    give each process a contiguous block of the ``data`` axis)."""
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


def _key_data(key):
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


def _wrap_key(data, like):
    if jnp.issubdtype(like.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(like))
    return data


def _manager(directory: Path, keep: int, *, writer: bool = True):
    import orbax.checkpoint as ocp

    if not writer and not directory.is_dir():
        raise ValueError(f"`checkpoint_dir` {str(directory)!r} does not exist")
    # synchronous saves: a save has finished (renamed into place) before training goes on;
    # the writer removes temporary folders of a save interrupted by a kill (a reader never
    # does: it may look at a folder a live run is writing)
    opts = ocp.CheckpointManagerOptions(max_to_keep=keep, create=writer,
                                        enable_async_checkpointing=False,
                                        cleanup_tmp_directories=writer, read_only=not writer)
    return ocp.CheckpointManager(directory.absolute(), options=opts,
                                 item_names=("state", "meta"))


def _read_meta(mngr, step: int | None, where) -> dict:
    import orbax.checkpoint as ocp

    step = mngr.latest_step() if step is None else step
    if step is None:
        raise ValueError(f"`checkpoint_dir` {str(where)!r} holds no checkpoint")
    return dict(mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta)


def read_checkpoint_meta(checkpoint_dir: str | os.PathLike, step: int | None = None) -> dict:
    """The JSON part of a checkpoint (``config``, ``position``, ``step``); latest step by
    default. ``ValueError`` when the folder holds no checkpoint."""
    mngr = _manager(Path(checkpoint_dir), keep=1 << 30, writer=False)
    try:
        return _read_meta(mngr, step, checkpoint_dir)
    finally:
        mngr.close()


def _check_compatible(saved: dict, config: dict, where) -> None:
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, this run {config[k]!r}"
             for k in COMPAT_KEYS if saved.get(k) != config[k]]
    if diffs:
        raise ValueError(f"`checkpoint_dir` {str(where)!r} holds a checkpoint of an "
                         f"incompatible run ({'; '.join(diffs)}); use another directory or "
                         f"the original settings")


def _abstract_state(init_params, init_state, key, mesh):
    """Shape/dtype/sharding of the TrainState (key as key data) without computing it."""
    shape = jax.eval_shape(lambda kk: init_state(kk, init_params(kk)), key)
    shardings = sh.state_shardings(shape, mesh)
    saved = shape._replace(key=jax.eval_shape(_key_data, shape.key))
    return jax.tree.map(lambda s, n: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=n),
                        saved, shardings), shardings


def _restore_state(mngr, step, abstract, key_like):
    import orbax.checkpoint as ocp

    out = mngr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    state = out.state
    if not isinstance(state, cc.TrainState):  # orbax may hand back plain containers
        state = jax.tree.unflatten(jax.tree.structure(abstract), jax.tree.leaves(state))
    return state._replace(key=_wrap_key(state.key, key_like)), dict(out.meta)


def _make_optimizer(lr: float, optimizer):
    if optimizer is not None:
        return optimizer
    if not lr > 0:
        raise ValueError(f"`lr` must be > 0; got {lr}")
    return optax.adam(lr)


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
) -> TrainResult:
    """Train a (temporal) crosscoder on an activation store, sharded over ``mesh``.

    Args:
      key: PRNG key (or int seed) for the initialisation and the state's key.
      store: an :class:`ActivationStore` or a path (then ``batch_size`` and ``seed``
        build one with ``window``); windows ``(B, window, d)``, site ``(window,)``
        (``window=1``: an SAE with ``W_dec (F, 1, d)``, as :func:`jaxkit.crosscoder.fit`).
      n_latents, k, activation, sparsity_coef, sparsity, k_aux, dead_steps, clip_norm:
        the dictionary and the step (:func:`jaxkit.kernels.crosscoder.make_train_step`).
      steps: total number of steps (a resumed run stops at the same total).
      lr / optimizer: Adam(lr) unless an optax ``optimizer`` is given.
      mesh: mesh with a ``data`` axis and optionally ``model``
        (:func:`jaxkit.distributed.make_mesh`); default all devices on ``data``.
      checkpoint_dir, checkpoint_every, keep: orbax checkpoints every N steps and at
        the end, keeping the latest ``keep``.
      resume: continue from the latest checkpoint in ``checkpoint_dir`` (a fresh start
        if there is none).
      log_every: host sync period: metrics are read (and the NaN flag checked) every
        ``log_every`` steps and at the end; ``on_step(step, metrics)`` is called then.
      init_from_data: initialise ``b_dec`` at the geometric median of the first global
        batch (Gao et al. 2024).

    Returns a :class:`TrainResult`. Raises ``ValueError`` for bad arguments, bad data
    (naming the shard) or an incompatible checkpoint, and :class:`TrainingDiverged`
    when the loss turns NaN/inf (no NaN state is ever saved).
    """
    if isinstance(key, int):
        key = jax.random.key(key)
    for name, v in (("n_latents", n_latents), ("steps", steps), ("window", window),
                    ("checkpoint_every", checkpoint_every), ("log_every", log_every),
                    ("keep", keep)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {v!r}")
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
    site = (window,)
    opt_name = "adam" if optimizer is None else "custom"
    optimizer = _make_optimizer(lr, optimizer)
    config = {"d": d, "n_latents": int(n_latents), "k": None if k is None else int(k),
              "window": int(window),
              "activation": activation, "batch_size": B, "stride": store.stride,
              "store_seed": store.seed, "lr": float(lr), "steps": int(steps),
              "sparsity_coef": sparsity_coef, "sparsity": sparsity, "k_aux": k_aux,
              "dead_steps": int(dead_steps), "clip_norm": clip_norm,
              "optimizer": opt_name,
              "store": str(store.path), "mesh": {a: int(s) for a, s in mesh.shape.items()}}
    init_state, step_fn = sh.make_train_step(
        mesh, activation=activation, k=k, optimizer=optimizer, sparsity_coef=sparsity_coef,
        sparsity=sparsity, k_aux=k_aux, dead_steps=dead_steps, clip_norm=clip_norm)

    k_init, k_state = jax.random.split(key)
    sample = store.batch(StorePosition(0, 0), rows=slice(None))[0] if init_from_data else None
    # with a sample, b_dec starts at its geometric median (cc.init)
    init_params = (lambda kk: cc.init(kk, d, n_latents, site=site, activation=activation,
                                      sample=None if sample is None else jnp.asarray(sample)))
    abstract, shardings = _abstract_state(lambda _: init_params(k_init), init_state, k_state,
                                          mesh)
    bsh = sh.batch_sharding(mesh, 3)
    gshape = (B, window, d)
    rows = local_rows(bsh, gshape)
    rep = NamedSharding(mesh, P())

    mngr = None
    state, position, start, resumed_from = None, StorePosition(0, 0), 0, None
    if checkpoint_dir is not None:
        checkpoint_dir = Path(checkpoint_dir)
        mngr = _manager(checkpoint_dir, keep)
        latest = mngr.latest_step()
        if latest is not None and not resume:
            raise ValueError(f"`checkpoint_dir` {str(checkpoint_dir)!r} already holds "
                             f"checkpoints (latest step {latest}); pass resume=True to "
                             f"continue, or use an empty directory")
        if latest is not None:
            meta = _read_meta(mngr, latest, checkpoint_dir)
            _check_compatible(meta["config"], config, checkpoint_dir)
            state, meta = _restore_state(mngr, latest, abstract, k_state)
            position = StorePosition(*meta["position"])
            start = resumed_from = int(meta["step"])
    elif resume:
        raise ValueError("`resume=True` needs a `checkpoint_dir`")
    if state is None:
        params = jax.jit(init_params, out_shardings=shardings.params)(k_init)
        state = jax.jit(init_state, out_shardings=shardings)(k_state, params)

    def guarded(state, x, bad):
        new, info = step_fn(state, x)
        ok = jnp.isfinite(info.loss) & jnp.isfinite(info.grad_norm)
        for leaf in jax.tree.leaves(new.params):  # an update may turn params NaN first
            ok = ok & jnp.all(jnp.isfinite(leaf))
        bad = jnp.where((bad < 0) & ~ok, new.step, bad)
        return new, info, bad

    jstep = jax.jit(guarded, in_shardings=(shardings, bsh, rep),
                    out_shardings=(shardings, rep, rep), donate_argnums=(0,))
    bad = jax.device_put(jnp.asarray(-1, jnp.int32), rep)

    def save(i: int, st: cc.TrainState, pos: StorePosition) -> None:
        import orbax.checkpoint as ocp

        meta = {"config": config, "position": [int(pos.epoch), int(pos.cursor)], "step": i,
                "time": time.time()}
        mngr.save(i, args=ocp.args.Composite(
            state=ocp.args.StandardSave(st._replace(key=_key_data(st.key))),
            meta=ocp.args.JsonSave(meta)))
        mngr.wait_until_finished()

    def check(i: int) -> None:
        b = int(jax.device_get(bad))
        if b >= 0:
            last = None if mngr is None else mngr.latest_step()
            raise TrainingDiverged(
                f"loss became NaN or inf at step {b} (checked at step {i}); nothing after "
                f"the last good checkpoint was saved"
                + ("" if last is None else f" (latest checkpoint: step {last})")
                + "; lower `lr`, set `clip_norm`, or check the activations")

    def read(pos):
        try:
            return store.batch(pos, rows=rows)
        except ValueError as e:
            raise ValueError(f"{e} (at store position epoch {pos[0]}, batch {pos[1]})") from e

    history: list[dict[str, float]] = []
    i = start
    with ThreadPoolExecutor(1) as pool:  # reads the next batch while the device computes
        fut = pool.submit(read, position) if i < steps else None
        while i < steps:
            x, nxt = fut.result()
            if i + 1 < steps:
                fut = pool.submit(read, nxt)
            gx = jax.make_array_from_process_local_data(bsh, x, gshape)
            state, info, bad = jstep(state, gx, bad)
            i, position = i + 1, nxt
            log = i % log_every == 0 or i == steps
            ckpt = mngr is not None and (i % checkpoint_every == 0 or i == steps)
            if log or ckpt:
                check(i)
            if log:
                m = {f: float(v) for f, v in zip(info._fields, jax.device_get(tuple(info)),
                                                 strict=True)}
                m.update(step=i, epoch=position.epoch, cursor=position.cursor)
                history.append(m)
                if on_step is not None:
                    on_step(i, m)
            if ckpt and (mngr.latest_step() or -1) < i:
                save(i, state, position)
    if mngr is not None:
        mngr.close()
    params = sh.to_host(state.params)
    return TrainResult(params, state, history, position, config, resumed_from)


def restore(
    checkpoint_dir: str | os.PathLike,
    *,
    mesh: Mesh | None = None,
    step: int | None = None,
    optimizer: optax.GradientTransformation | None = None,
) -> tuple[cc.TrainState, StorePosition, dict]:
    """Load a checkpoint onto ``mesh`` (default: all devices on ``data``), whatever mesh
    wrote it: ``(state, store position, config)``. Pass the run's ``optimizer`` when it
    was not the default Adam (its state structure must match)."""
    meta = read_checkpoint_meta(checkpoint_dir, step)
    cfg = meta["config"]
    mesh = jd.make_mesh({sh.DATA: -1}) if mesh is None else mesh
    opt = optimizer if optimizer is not None else optax.adam(cfg["lr"])
    init_state, _ = sh.make_train_step(
        mesh, activation=cfg["activation"], k=cfg["k"], optimizer=opt,
        sparsity_coef=cfg["sparsity_coef"], sparsity=cfg["sparsity"], k_aux=cfg["k_aux"],
        dead_steps=cfg["dead_steps"], clip_norm=cfg["clip_norm"])
    key = jax.random.key(0)
    init_params = lambda kk: cc.init(kk, cfg["d"], cfg["n_latents"], site=(cfg["window"],),
                                     activation=cfg["activation"])
    abstract, _ = _abstract_state(init_params, init_state, key, mesh)
    mngr = _manager(Path(checkpoint_dir), keep=1 << 30, writer=False)
    try:
        state, meta = _restore_state(mngr, int(meta["step"]), abstract, key)
    finally:
        mngr.close()
    return state, StorePosition(*meta["position"]), cfg
