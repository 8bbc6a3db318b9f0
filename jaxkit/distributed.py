"""One code path from one CPU to a pod: meshes, multi-host start-up, global batches.

Sharding is data, not code paths: a pipeline takes a :class:`jax.sharding.Mesh` and puts
its batch axis on the mesh's ``"data"`` axis; the same jitted function then runs on one
CPU, on 8 local devices, or on many hosts (``jax.distributed``), with XLA inserting the
collectives.
"""

from __future__ import annotations

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
    "data_sharding",
    "replicated",
    "global_batch",
    "pad_batch",
    "shard_batch",
    "sharded_vmap",
    "sharded_runs",
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
    """
    env = os.environ
    if coordinator_address is None and "JAXKIT_COORDINATOR" in env:
        coordinator_address = env["JAXKIT_COORDINATOR"]
        num_processes = num_processes or int(env["JAXKIT_NUM_PROCESSES"])
        if process_id is None:
            process_id = int(env["JAXKIT_PROCESS_ID"])
    auto = env.get("JAXKIT_DISTRIBUTED", "").lower() == "auto"
    if coordinator_address is None and not auto:
        return False
    if coordinator_address is not None and (num_processes is None or process_id is None):
        raise ValueError("`num_processes` and `process_id` are required with "
                         "`coordinator_address`")
    if cpu_collectives:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        local_device_ids=local_device_ids,
    )
    return True


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


def pad_batch(tree, multiple: int):
    """Pad the leading axis of every leaf to a multiple of ``multiple`` by repeating the
    last entry (real data, so input checks and solvers behave); returns (padded, n)."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError("`tree` has no arrays to pad")
    n = leaves[0].shape[0]
    pad = (-n) % multiple

    def one(x):
        if pad == 0:
            return x
        return jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)], axis=0)

    return jax.tree.map(one, tree), n


def shard_batch(tree, mesh: Mesh, axis: str = DATA):
    """Pad a batch (leading axis) to the ``axis`` size and place it on the mesh.
    Returns (sharded tree, number of real entries)."""
    padded, n = pad_batch(tree, mesh.shape[axis])
    placed = jax.tree.map(lambda x: jax.device_put(x, data_sharding(mesh, x.ndim, axis)), padded)
    return placed, n


def sharded_vmap(fn: Callable, mesh: Mesh | None = None, axis: str = DATA) -> Callable:
    """``vmap(fn)`` over a batch whose leading axis is split over the mesh's ``axis``.

    Each device runs ``vmap(fn)`` on the datasets it holds (``jax.shard_map``), so no
    collective is needed and a kernel whose batching rule loops over its members (as
    FastICA's does on CPU) stays local to each device. The returned callable takes
    batched arguments (leading axis = datasets), pads them to a multiple of the axis
    size, and returns the outputs for the real datasets only. Multi-process: pass global
    arrays built with :func:`global_batch` (leading axis already a multiple of the axis
    size); they are used as they are. ``mesh=None`` uses all devices on one data axis.
    """
    mesh = make_mesh() if mesh is None else mesh
    spec = PartitionSpec(axis)
    # check_vma=False: kernels carry per-dataset while_loops and error checks whose
    # carries start replicated; every output here is per-device by construction.
    inner = jax.jit(jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=spec, out_specs=spec,
                                  check_vma=False))

    def call(*args):
        leaves = jax.tree.leaves(args)
        if any(isinstance(a, jax.Array) and not a.is_fully_addressable for a in leaves):
            return inner(*args)
        placed, n = shard_batch(args, mesh, axis)
        return jax.tree.map(lambda x: x[:n], inner(*placed))

    call.global_fn = inner  # the jitted function on already-placed global arrays
    return call


def _runs_axis(ax, ndim: int):
    """The runs axis of a leaf, or None for a replicated one (0-d leaves, ``ax=None``)."""
    if ax is None or ndim == 0:
        return None
    if not -ndim <= ax < ndim:
        raise ValueError(f"runs axis {ax} is out of range for an array with {ndim} dims")
    return ax % ndim


def _runs_spec(ax, axis: str) -> PartitionSpec:
    return PartitionSpec() if ax is None else PartitionSpec(*([None] * ax), axis)


def sharded_runs(fn: Callable, mesh: Mesh | None = None, axis: str = DATA, *,
                 in_axes: int | None | Sequence[int | None] = -1,
                 out_axes: int = -1) -> Callable:
    """``fn`` on many runs laid along one axis of its arguments, split over the mesh's
    ``axis``: each device calls ``fn`` on its own slice of the runs (``jax.shard_map``,
    no collectives).

    :func:`sharded_vmap` is for functions of one run batched with ``vmap`` (runs on the
    leading axis); this is for kernels that take many runs natively, e.g.
    ``bandit.simulate_runs``, whose states are (K, R) with the runs last.

    ``in_axes``: the runs axis of every argument (one int for all, or one per positional
    argument; ``None`` = the same on every device). 0-d leaves, such as PRNG keys, are
    always passed whole. ``out_axes``: the runs axis of every output with at least one
    dimension; 0-d outputs (a step counter) must agree across devices and are taken from
    the first. All devices get the same key: fold ``jax.lax.axis_index(axis)`` into it
    inside ``fn`` for independent random numbers per device. Runs are padded to a
    multiple of the axis size by repeating the last run, and the outputs cut back.
    ``call.global_fn`` is the jitted function on arguments already placed (runs a
    multiple of the axis size); multi-process, pass global arrays sharded this way to
    either."""
    mesh = make_mesh() if mesh is None else mesh
    size = mesh.shape[axis]

    def leaf_axes(args):
        axes = (tuple(in_axes) if isinstance(in_axes, Sequence) else (in_axes,) * len(args))
        if len(axes) != len(args):
            raise ValueError(f"`in_axes` has {len(axes)} entries for {len(args)} arguments")
        return [_runs_axis(a, jnp.ndim(x)) for a, arg in zip(axes, args, strict=True)
                for x in jax.tree.leaves(arg)]

    @jax.jit
    def global_fn(*args):
        leaves, treedef = jax.tree.flatten(args)
        in_specs = tuple(_runs_spec(a, axis) for a in leaf_axes(args))

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
        sizes = {jnp.shape(x)[a] for x, a in zip(leaves, axes, strict=True) if a is not None}
        if len(sizes) != 1:
            raise ValueError("the arguments must hold the same number of runs (at least one "
                             f"split argument); got run counts {sorted(sizes)}")
        n = sizes.pop()
        if any(isinstance(x, jax.Array) and not x.is_fully_addressable for x in leaves):
            return global_fn(*args)
        pad = (-n) % size
        leaves = [x if a is None or pad == 0 else jnp.concatenate(
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
