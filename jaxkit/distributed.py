"""One code path from one CPU to a pod: meshes, multi-host start-up, global batches.

Sharding is data, not code paths: a pipeline takes a :class:`jax.sharding.Mesh` and puts
its batch axis on the mesh's ``"data"`` axis; the same jitted function then runs on one
CPU, on 8 local devices, or on many hosts (``jax.distributed``), with XLA inserting the
collectives.

This module is the one home of the padding and sharding helpers: :func:`data_mesh`
(the mesh a batch is split over, or None for nothing to split), :func:`pad_batch`
(pad the batch axis by repeating the last entry), :func:`shard_batch` (pad once and
place), :func:`place_batch` (place a partly batched tree: batched leaves split, the rest
replicated), :func:`chunk_size` (batches that fit a memory budget and the mesh) and
:func:`batched` / :func:`sharded_vmap` (``vmap(fn)`` over a placed batch, compiled once
per function, mesh and shapes however often it is called).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = [
    "initialize",
    "make_mesh",
    "parse_mesh",
    "data_sharding",
    "replicated",
    "global_batch",
    "data_mesh",
    "mesh_size",
    "chunk_size",
    "pad_batch",
    "shard_batch",
    "place_batch",
    "batched",
    "sharded_vmap",
    "sharded_runs",
    "run_keys",
]

DATA = "data"


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: Sequence[int] | None = None,
    cpu_collectives: str | None = "gloo",
) -> bool:
    """Start multi-host JAX (``jax.distributed.initialize``) when asked.

    Asked means: a ``coordinator_address`` is given, or the environment names one
    (``JAXKIT_COORDINATOR``, with ``JAXKIT_NUM_PROCESSES`` and ``JAXKIT_PROCESS_ID``), or
    a cluster JAX auto-detects (TPU pod, Slurm, OpenMPI) is signalled by
    ``JAXKIT_DISTRIBUTED=auto``. Otherwise this is a no-op and the run is single-process.
    Must be called before any other JAX operation. On CPU, ``cpu_collectives`` selects
    the cross-process collective implementation (gloo). Returns True when multi-host
    JAX was initialised.

    Raises:
      ValueError: ``JAXKIT_DISTRIBUTED=auto`` on a machine where JAX detects no cluster,
        a non-integer ``JAXKIT_NUM_PROCESSES`` / ``JAXKIT_PROCESS_ID``, or a coordinator
        without the process count and id.
      RuntimeError: JAX has already started its backends (from JAX).
    """
    env = os.environ
    if coordinator_address is None and "JAXKIT_COORDINATOR" in env:
        coordinator_address = env["JAXKIT_COORDINATOR"]
        num_processes = num_processes or _env_int("JAXKIT_NUM_PROCESSES")
        if process_id is None:
            process_id = _env_int("JAXKIT_PROCESS_ID")
    auto = env.get("JAXKIT_DISTRIBUTED", "").lower() == "auto"
    if coordinator_address is None and not auto:
        return False
    if coordinator_address is not None and (num_processes is None or process_id is None):
        raise ValueError("`num_processes` and `process_id` are required with "
                         "`coordinator_address`")
    if cpu_collectives:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
        )
    except ValueError as e:
        if coordinator_address is not None:
            raise
        # auto-detection found no cluster: JAX asks for the address it could not detect
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            "JAXKIT_DISTRIBUTED=auto, but JAX detected no cluster here (TPU pod, Slurm, "
            "OpenMPI, ...): set JAXKIT_COORDINATOR, JAXKIT_NUM_PROCESSES and "
            "JAXKIT_PROCESS_ID, or unset JAXKIT_DISTRIBUTED for a single-process run "
            f"(jax: {reason})") from None
    return True


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"JAXKIT_COORDINATOR is set, so {name} must be set too")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer; got {value!r}") from None


def parse_mesh(spec: str) -> dict[str, int]:
    """Axis sizes from a command-line spec such as ``"data=-1"`` or ``"data=4,model=2"``.

    Args:
      spec: comma-separated ``axis=size`` pairs; axes ``data`` (required) and ``model``.

    Returns:
      The axis sizes for :func:`make_mesh`.

    Raises:
      ValueError: the spec is malformed or names other axes.
    """
    try:
        axes = {k.strip(): int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
    except ValueError:
        raise ValueError(f"--mesh must look like 'data=-1' or 'data=4,model=2'; "
                         f"got {spec!r}") from None
    if set(axes) - {"data", "model"} or "data" not in axes:
        raise ValueError(f"--mesh axes must be 'data' and optionally 'model'; got {spec!r}")
    return axes


def make_mesh(
    axes: Mapping[str, int] | None = None, *, devices: Sequence[Any] | None = None
) -> Mesh:
    """A device mesh from named axis sizes, e.g. ``{"data": -1}`` (all devices on one
    data axis, the default) or ``{"data": 4, "model": 2}``. One axis may be ``-1`` and
    is filled with the remaining devices; the product must equal the device count.
    Works the same on one CPU, 8 simulated devices, and every device of a pod."""
    axes = dict(axes or {DATA: -1})
    devices = list(jax.devices() if devices is None else devices)
    n = len(devices)
    names = tuple(axes)
    sizes = [int(v) for v in axes.values()]
    if sum(s == -1 for s in sizes) > 1:
        raise ValueError(f"`axes` may contain at most one -1; got {axes}")
    if any(s == 0 or s < -1 for s in sizes):
        raise ValueError(f"`axes` sizes must be positive or -1; got {axes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if n % known:
            raise ValueError(f"{n} devices cannot be split into axes {axes}")
        sizes[sizes.index(-1)] = n // known
    if math.prod(sizes) != n:
        raise ValueError(f"mesh axes {dict(zip(names, sizes, strict=True))} need "
                         f"{math.prod(sizes)} devices, but {n} are available")
    arr = np.asarray(devices, dtype=object).reshape(sizes)
    return Mesh(arr, names)


def data_sharding(mesh: Mesh, ndim: int = 1, axis: str = DATA) -> NamedSharding:
    """Leading dimension split over ``axis``, the rest replicated."""
    return NamedSharding(mesh, PartitionSpec(axis, *([None] * (ndim - 1))))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def global_batch(local_data, mesh: Mesh, axis: str = DATA):
    """Assemble a global array (a pytree of them) from each process's local rows.

    Every process passes its own slice (leading dimension = its share of the batch);
    the result is one global ``jax.Array`` sharded along ``axis``
    (``jax.make_array_from_process_local_data``). Single-process, this is
    ``jax.device_put`` with the data sharding.
    """

    def one(x):
        x = np.asarray(x)
        return jax.make_array_from_process_local_data(data_sharding(mesh, x.ndim, axis), x)

    return jax.tree.map(one, local_data)


def data_mesh(mesh: Mesh | None, axis: str = DATA) -> Mesh | None:
    """The mesh to split a batch over, or None when there is nothing to split.

    ``None`` and a one-device mesh give None (the default placement). Otherwise the mesh
    must have the ``axis`` axis, and comes back with every axis of type ``Auto``: pure
    data parallelism needs no explicit sharding types, and ``jax.make_mesh``'s
    ``Explicit`` axes would make ``vmap`` of a kernel see sharded types.

    Raises:
        ValueError: the mesh has no ``axis`` axis.
    """
    if mesh is None:
        return None
    if axis not in mesh.axis_names:
        raise ValueError(f"`mesh` needs a {axis!r} axis; got axes {mesh.axis_names}")
    if mesh.devices.size == 1:
        return None
    auto = (jax.sharding.AxisType.Auto,) * len(mesh.axis_names)
    if tuple(getattr(mesh, "axis_types", auto)) == auto:
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=auto)


def mesh_size(mesh: Mesh | None, axis: str = DATA) -> int:
    """The number of shards along ``axis`` (1 for ``None``)."""
    return 1 if mesh is None else int(mesh.shape[axis])


def chunk_size(n_items: int, item_bytes: float, mesh: Mesh | None = None, *,
               budget_bytes: float = 1.5e9, axis: str = DATA) -> int:
    """Items per batch: as many of the ``n_items`` as fit ``budget_bytes`` at
    ``item_bytes`` each (at least one), rounded up to a multiple of the mesh's ``axis``
    size so every device gets the same share.

    Args:
        n_items: items to process in all (>= 1).
        item_bytes: memory per item.
        mesh: the mesh the batch is split over (None: one device).
        budget_bytes: memory budget of one batch.
        axis: the mesh axis.

    Returns:
        The chunk size, a multiple of :func:`mesh_size`.
    """
    if n_items < 1:
        raise ValueError(f"`n_items` must be >= 1; got {n_items}")
    if not item_bytes > 0:
        raise ValueError(f"`item_bytes` must be > 0; got {item_bytes}")
    c = int(max(1, min(n_items, budget_bytes // item_bytes)))
    m = mesh_size(mesh, axis)
    return int(math.ceil(c / m) * m)


def pad_batch(tree, multiple: int = 1, *, size: int | None = None, batch_axis: int = 0):
    """Pad the batch axis of every leaf by repeating the last entry (real data, so
    input checks and solvers behave): to a multiple of ``multiple``, or to exactly
    ``size`` when given. Returns ``(padded, n)`` with ``n`` the real entries.

    ``batch_axis`` is the axis padded (0: the leading one; 1 for per-step index arrays
    of shape ``(steps, batch, ...)``). Leaves with no such axis (scalar step counters of
    an optimizer state) are returned unchanged.

    Raises:
        ValueError: a tree with no leaf that has ``batch_axis``, or ``size`` smaller than
            the batch.
    """
    leaves = [x for x in jax.tree.leaves(tree) if np.ndim(x) > batch_axis]
    if not leaves:
        raise ValueError(f"`tree` has no arrays with a batch axis {batch_axis} to pad")
    n = leaves[0].shape[batch_axis]
    if size is None:
        pad = (-n) % multiple
    else:
        if size < n:
            raise ValueError(f"`size` {size} is smaller than the batch ({n} entries)")
        pad = size - n

    def one(x):
        if pad == 0 or np.ndim(x) <= batch_axis:
            return x
        last = jax.lax.slice_in_dim(jnp.asarray(x), n - 1, n, axis=batch_axis)
        return jnp.concatenate([x, jnp.repeat(last, pad, axis=batch_axis)], axis=batch_axis)

    return jax.tree.map(one, tree), n


def place_batch(tree, mesh: Mesh | None, size: int, *, batch_axis: int = 0,
                axis: str = DATA):
    """Place a padded batch on the mesh: every leaf with ``size`` entries on
    ``batch_axis`` split over the mesh's ``axis`` there, every other leaf (a step
    counter, shared inputs) replicated. With ``mesh=None`` the tree is returned as it is.

    This is the placement of a partly batched tree, such as an optimizer state whose
    parameters carry a seed axis beside a scalar step count; :func:`shard_batch` is the
    one-call form for a tree whose every leaf is batched on the leading axis.
    """
    if mesh is None:
        return tree

    def one(x):
        if np.ndim(x) > batch_axis and x.shape[batch_axis] == size:
            spec = [None] * np.ndim(x)
            spec[batch_axis] = axis
            return jax.device_put(x, NamedSharding(mesh, PartitionSpec(*spec)))
        return jax.device_put(x, replicated(mesh))

    return jax.tree.map(one, tree)


def shard_batch(tree, mesh: Mesh | None, axis: str = DATA, *, size: int | None = None):
    """Pad a batch (leading axis) once and place it on the mesh.

    Pads to ``size`` when given (it must be a multiple of the ``axis`` size), else to a
    multiple of the ``axis`` size, then splits the leading axis over ``axis``. With
    ``mesh=None`` the batch is only padded (default placement). Returns
    ``(placed tree, number of real entries)``; pass the placed tree to
    :func:`batched` or ``sharded_vmap(...).global_fn``, which do not pad again.
    """
    m = mesh_size(mesh, axis)
    if size is not None and size % m:
        raise ValueError(f"`size` {size} must be a multiple of the mesh's {axis!r} size {m}")
    padded, n = pad_batch(tree, m, size=size)
    if mesh is None:
        return padded, n
    placed = jax.tree.map(lambda x: jax.device_put(x, data_sharding(mesh, x.ndim, axis)), padded)
    return placed, n


@functools.partial(jax.jit, static_argnums=(0,))
def _vmap_jit(fn, *args):
    return jax.vmap(fn)(*args)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _sharded_vmap_jit(fn, mesh, axis, *args):
    spec = PartitionSpec(axis)
    # check_vma=False: kernels carry per-dataset while_loops and error checks whose
    # carries start replicated; every output here is per-device by construction.
    return jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=spec, out_specs=spec,
                         check_vma=False)(*args)


def _map(fn):
    """``fn`` over the leading axis of its arguments, one member at a time."""
    return lambda *args: jax.lax.map(lambda a: fn(*a), args)


@functools.partial(jax.jit, static_argnums=(0,))
def _map_jit(fn, *args):
    return _map(fn)(*args)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _sharded_map_jit(fn, mesh, axis, *args):
    spec = PartitionSpec(axis)
    return jax.shard_map(_map(fn), mesh=mesh, in_specs=spec, out_specs=spec,
                         check_vma=False)(*args)


class _Bound:
    """A module-level jitted function with its static leading arguments bound:
    callable, and ``.lower(*args)`` as a jitted function (shared compile cache)."""

    def __init__(self, jitted, *static):
        self._jitted, self._static = jitted, static

    def __call__(self, *args):
        return self._jitted(*self._static, *args)

    def lower(self, *args):
        return self._jitted.lower(*self._static, *args)


def batched(fn: Callable, mesh: Mesh | None = None, axis: str = DATA, *,
            sequential: bool = False) -> Callable:
    """``jit(vmap(fn))`` on a batch already padded and placed by :func:`shard_batch`:
    split over the mesh's ``axis`` (``sharded_vmap(fn, mesh).global_fn``) when
    :func:`data_mesh` gives a mesh, else on the default device.

    ``sequential=True`` runs ``fn`` on one member at a time (``lax.map``, on each device
    over the members it holds) instead of ``vmap``: every member is then computed by the
    same single-member program whatever the batch size, so its numbers do not depend
    on how many members share a device (XLA may still fuse a loop of one trip
    differently from a longer one and change a continuous result in its last bit: on
    pooled-lingam, graphs and metrics agree exactly between one device and a mesh, the
    theory check's moments to the last bit). Under ``vmap``, XLA:CPU compiles a batch of
    8 and a batch of 1 into products that round differently in the last bits; a
    discrete decision fed by them (a causal order, a threshold) can then differ between
    one device and a mesh. On CPU, kernels whose batching rule loops anyway (FastICA) do
    the same work either way; on accelerators ``vmap`` batches the members and
    ``sequential`` does not.

    The compiled program is cached on ``fn`` (by identity: pass a module-level
    function, not a fresh lambda), the mesh (by value) and the argument shapes, so
    calling this again for the next batch or sweep point compiles nothing.
    """
    mesh = data_mesh(mesh, axis)
    if mesh is None:
        return _Bound(_map_jit if sequential else _vmap_jit, fn)
    return _Bound(_sharded_map_jit if sequential else _sharded_vmap_jit, fn, mesh, axis)


def sharded_vmap(fn: Callable, mesh: Mesh | None = None, axis: str = DATA) -> Callable:
    """``vmap(fn)`` over a batch whose leading axis is split over the mesh's ``axis``.

    Each device runs ``vmap(fn)`` on the datasets it holds (``jax.shard_map``), so no
    collective is needed and a kernel whose batching rule loops over its members (as
    FastICA's does on CPU) stays local to each device. The returned callable takes
    batched arguments (leading axis = datasets), pads them to a multiple of the axis
    size, and returns the outputs for the real datasets only. Multi-process: pass global
    arrays built with :func:`global_batch` (leading axis already a multiple of the axis
    size); they are used as they are. ``mesh=None`` uses all devices on one data axis.
    ``call.global_fn`` takes arguments already padded and placed (:func:`shard_batch`)
    and does not pad again. The compiled program is shared by every ``sharded_vmap`` of
    the same ``fn`` and mesh (see :func:`batched`).
    """
    mesh = make_mesh() if mesh is None else mesh
    inner = _Bound(_sharded_vmap_jit, fn, mesh, axis)

    def call(*args):
        leaves = jax.tree.leaves(args)
        if any(isinstance(a, jax.Array) and not a.is_fully_addressable for a in leaves):
            return inner(*args)
        placed, n = shard_batch(args, mesh, axis)
        return jax.tree.map(lambda x: x[:n], inner(*placed))

    call.global_fn = inner  # the jitted function on already-placed global arrays
    return call


class _SplitKey:
    """The runs axis marker of a 0-d PRNG key that becomes one key per run."""

    def __repr__(self) -> str:
        return "key"


_KEY = _SplitKey()


def _is_key(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _runs_axis(ax, ndim: int):
    """The runs axis of a leaf, or None for a replicated one (0-d leaves, ``ax=None``)."""
    if ax is None or ndim == 0:
        return None
    if not -ndim <= ax < ndim:
        raise ValueError(f"runs axis {ax} is out of range for an array with {ndim} dims")
    return ax % ndim


def _runs_spec(ax, axis: str) -> PartitionSpec:
    return PartitionSpec() if ax is None or ax is _KEY else PartitionSpec(*([None] * ax), axis)


def _run_count(leaves, axes) -> int:
    """The number of runs the split leaves hold (they must agree)."""
    sizes = {jnp.shape(x)[a] for x, a in zip(leaves, axes, strict=True)
             if a is not None and a is not _KEY}
    if len(sizes) != 1:
        raise ValueError("the arguments must hold the same number of runs (at least one "
                         "split argument that is not a lone PRNG key); got run counts "
                         f"{sorted(sizes)}")
    return sizes.pop()


def run_keys(key, n_runs: int):
    """The keys :func:`sharded_runs` gives runs ``0 .. n_runs - 1`` from one key:
    ``fold_in(key, r)`` for run ``r``, whatever the mesh and the run count.

    Args:
      key: a typed PRNG key (0-d).
      n_runs: the number of runs.

    Returns:
      A ``(n_runs,)`` key array.
    """
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
        key, jnp.arange(n_runs, dtype=jnp.uint32))


def sharded_runs(fn: Callable, mesh: Mesh | None = None, axis: str = DATA, *,
                 in_axes: int | None | Sequence[int | None] = -1,
                 out_axes: int = -1) -> Callable:
    """``fn`` on many runs laid along one axis of its arguments, split over the mesh's
    ``axis``: each device calls ``fn`` on its own slice of the runs (``jax.shard_map``,
    no collectives).

    :func:`sharded_vmap` is for functions of one run batched with ``vmap`` (runs on the
    leading axis); this is for kernels that take many runs natively, e.g.
    ``bandit.simulate_runs``, whose states are (K, R) with the runs last.

    Random numbers: a single (0-d, typed) PRNG key in an argument whose ``in_axes``
    entry is not ``None`` is turned into one key per run, ``fold_in(key, r)`` for run
    ``r`` (:func:`run_keys`), and ``fn`` receives its runs' keys as a ``(R_local,)`` key
    array. Run ``r`` then draws the same numbers on one device or on many, so the result
    does not depend on the mesh and no two runs share a stream; ``fn`` must draw each
    run's numbers from that run's key (e.g. ``vmap`` over the keys). A key whose entry is
    ``None`` is passed whole, the same on every device (for ``fn`` that draws nothing
    per run; a ``fn`` that draws R_local numbers from it would repeat the same runs on
    every device).

    Args:
      fn: the function of many runs.
      mesh: the mesh (default all devices on one ``data`` axis).
      axis: the mesh axis the runs are split over.
      in_axes: the runs axis of every argument (one int for all, or one per positional
        argument; ``None`` = the same on every device). Other 0-d leaves are always
        passed whole.
      out_axes: the runs axis of every output with at least one dimension; 0-d outputs
        (a step counter) must agree across devices and are taken from the first.

    Returns:
      The sharded function. Runs are padded to a multiple of the axis size by repeating
      the last run, and the outputs cut back. ``call.global_fn`` is the jitted function
      on arguments already placed (runs a multiple of the axis size, keys still 0-d);
      multi-process, pass global arrays sharded this way to either.
    """
    mesh = make_mesh() if mesh is None else mesh
    size = mesh.shape[axis]

    def leaf_axes(args):
        axes = (tuple(in_axes) if isinstance(in_axes, Sequence) else (in_axes,) * len(args))
        if len(axes) != len(args):
            raise ValueError(f"`in_axes` has {len(axes)} entries for {len(args)} arguments")
        return [_KEY if a is not None and jnp.ndim(x) == 0 and _is_key(x)
                else _runs_axis(a, jnp.ndim(x))
                for a, arg in zip(axes, args, strict=True) for x in jax.tree.leaves(arg)]

    @jax.jit
    def global_fn(*args):
        leaves, treedef = jax.tree.flatten(args)
        axes = leaf_axes(args)
        if any(a is _KEY for a in axes):  # one key per run, from the run's global index
            n = _run_count(leaves, axes)
            leaves = [run_keys(x, n) if a is _KEY else x for x, a in zip(leaves, axes,
                                                                           strict=True)]
            axes = [0 if a is _KEY else a for a in axes]
        in_specs = tuple(_runs_spec(a, axis) for a in axes)

        def local(*flat):
            return fn(*jax.tree.unflatten(treedef, flat))

        # check_vma=False: loop carries start replicated and become per-device. The
        # outputs' ranks fix their specs: trace once with every output replicated.
        shapes = jax.eval_shape(jax.shard_map(local, mesh=mesh, in_specs=in_specs,
                                              out_specs=PartitionSpec(), check_vma=False),
                                *leaves)
        out_specs = jax.tree.map(lambda o: _runs_spec(_runs_axis(out_axes, o.ndim), axis),
                                 shapes)
        return jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)(*leaves)

    def call(*args):
        leaves, treedef = jax.tree.flatten(args)
        axes = leaf_axes(args)
        n = _run_count(leaves, axes)
        if any(isinstance(x, jax.Array) and not x.is_fully_addressable for x in leaves):
            return global_fn(*args)
        pad = (-n) % size
        leaves = [x if a is None or a is _KEY or pad == 0 else jnp.concatenate(
            [x, jnp.repeat(jax.lax.slice_in_dim(x, n - 1, n, axis=a), pad, axis=a)], axis=a)
            for x, a in zip(leaves, axes, strict=True)]
        leaves = [jax.device_put(x, NamedSharding(mesh, _runs_spec(a, axis)))
                  for x, a in zip(leaves, axes, strict=True)]
        out = global_fn(*jax.tree.unflatten(treedef, leaves))
        if pad == 0:
            return out
        return jax.tree.map(lambda x: x if x.ndim == 0 else
                            jax.lax.slice_in_dim(x, 0, n, axis=out_axes % x.ndim), out)

    call.global_fn = global_fn
    return call
