"""Sharding of crosscoder training: batch over ``data``, dictionary over ``model``.

Layout (``P`` = :class:`jax.sharding.PartitionSpec`)::

    x              (B, *site, d)   P("data")
    W_enc          (*site, d, F)   P(..., "model")     latent axis split
    b_enc, log_thr (F,)            P("model")
    W_dec          (F, *site, d)   P("model")
    b_dec          (*site, d)      replicated
    optimizer state                like the params it mirrors (every ``Params`` subtree)
    aux.steps_since_fired (F,)     P("model");  step, aux.threshold: replicated

Top-k over a latent axis split across devices. What XLA does by itself (checked in the
compiled HLO on jax 0.10.2, CPU, Shardy and GSPMD alike; see
``tests/jaxkit/test_crosscoder_train.py::test_xla_topk_gathers_everything``): the
``TopK`` custom call has no partitioning rule, so XLA *all-gathers the full (B, F)
pre-activations over both mesh axes* and every device computes the top-k of the whole
global batch. Hence :func:`topk_mask` and :func:`batch_topk_threshold` below, written
with :func:`jax.shard_map`: each device takes the top-k of its own ``(B/data, F/model)``
block, the ``k`` candidates per row (values and global indices) are all-gathered over
``model`` only, and a second top-k over the ``model * k`` candidates gives the global
choice (ties go to the lower latent index, as in ``lax.top_k``). The dense sparse code
is then ``where(mask, relu(pre), 0)``, computed locally. BatchTopK needs the ``k * B``-th
largest value of the whole batch: local top-``k*B`` values, all-gathered over both axes,
one more top-k, then a threshold.

Because the kernel's step calls ``lax.top_k`` directly, :func:`make_train_step` here
re-assembles the kernel's step (same loss, AuxK, decoder-parallel gradient removal,
clipping, renormalisation, dead-latent and threshold bookkeeping; every piece is the
kernel's public function) with the sparsifier swapped for the sharded one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Bool, Float

from jaxkit.kernels import crosscoder as cc

__all__ = [
    "DATA",
    "MODEL",
    "params_specs",
    "state_shardings",
    "batch_sharding",
    "topk_mask",
    "selector",
    "batch_topk_threshold",
    "make_train_step",
    "to_host",
]

DATA, MODEL = "data", "model"


def _axis_size(mesh: Mesh, axis: str) -> int:
    return int(mesh.shape[axis]) if axis in mesh.axis_names else 1


def _model(mesh: Mesh, axis: str = MODEL):
    return axis if axis in mesh.axis_names else None


def params_specs(params: cc.Params, mesh: Mesh, model_axis: str = MODEL) -> cc.Params:
    """PartitionSpecs of :class:`~jaxkit.kernels.crosscoder.Params`: latents over
    ``model_axis`` (replicated when the mesh has no such axis)."""
    m = _model(mesh, model_axis)
    return cc.Params(
        W_enc=P(*([None] * (params.W_enc.ndim - 1)), m),
        b_enc=P(m),
        W_dec=P(m, *([None] * (params.W_dec.ndim - 1))),
        b_dec=P(),
        log_threshold=P(m),
    )


def state_shardings(state: cc.TrainState, mesh: Mesh, model_axis: str = MODEL) -> cc.TrainState:
    """NamedShardings of a :class:`~jaxkit.kernels.crosscoder.TrainState` (concrete or
    abstract): every ``Params`` subtree (the params and the optimizer moments) is split
    like the params, ``aux.steps_since_fired`` over ``model``, the rest replicated."""
    pspec = params_specs(state.params, mesh, model_axis)
    named = jax.tree.map(lambda s: NamedSharding(mesh, s), pspec)
    rep = NamedSharding(mesh, P())

    def sub(tree):
        return jax.tree.map(lambda t: named if isinstance(t, cc.Params) else rep, tree,
                            is_leaf=lambda t: isinstance(t, cc.Params))

    return cc.TrainState(
        params=named,
        opt_state=sub(state.opt_state),
        step=rep,
        aux=cc.Carry(steps_since_fired=NamedSharding(mesh, P(_model(mesh, model_axis))),
                     threshold=rep),
    )


def batch_sharding(mesh: Mesh, ndim: int, data_axis: str = DATA) -> NamedSharding:
    """Leading (batch) axis over ``data_axis``; replicated over every other mesh axis."""
    return NamedSharding(mesh, P(data_axis, *([None] * (ndim - 1))))


# --------------------------------------------------------------------------- top-k


def topk_mask(pre: Float[Array, "B F"], k: int, mesh: Mesh, *, data_axis: str = DATA,
              model_axis: str = MODEL) -> Bool[Array, "B F"]:
    """Boolean mask of the ``k`` largest entries of each row of ``pre`` (ties to the
    lower index), for ``pre`` sharded ``P(data, model)``: local top-k per device, then a
    merge of the ``model_size * k`` candidates per row (all-gather over ``model`` only)."""
    d_ax = data_axis if data_axis in mesh.axis_names else None
    m_ax = _model(mesh, model_axis)
    n_model = _axis_size(mesh, model_axis)

    def local(p):  # (B_l, F_l)
        b, f = p.shape
        kk = min(k, f)
        v, i = jax.lax.top_k(p, kk)
        if n_model > 1:
            off = jax.lax.axis_index(m_ax) * f
            i = i + off
            v = jax.lax.all_gather(v, m_ax, axis=1, tiled=True)  # (B_l, n_model * kk)
            i = jax.lax.all_gather(i, m_ax, axis=1, tiled=True)
            v, j = jax.lax.top_k(v, k)
            i = jnp.take_along_axis(i, j, axis=1)
            loc = i - off
        else:
            loc = i
        loc = jnp.where((loc >= 0) & (loc < f), loc, f)  # out of this shard: dropped
        rows = jnp.arange(b)[:, None]
        return jnp.zeros((b, f), bool).at[rows, loc].set(True, mode="drop")

    spec = P(d_ax, m_ax)
    return jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec)(
        jax.lax.stop_gradient(pre))


def batch_topk_threshold(pre: Float[Array, "B F"], n: int, mesh: Mesh, *,
                         data_axis: str = DATA, model_axis: str = MODEL):
    """``(t, min_kept)``: the ``n``-th largest entry of the whole ``pre`` and the
    smallest positive one among the top ``n`` (``inf`` if none), for ``pre`` sharded
    ``P(data, model)``: local top-``n`` values, all-gathered over every mesh axis, one
    more top-``n``. Keeping ``pre >= t`` equals BatchTopK's selection up to exact ties."""
    d_ax = data_axis if data_axis in mesh.axis_names else None
    m_ax = _model(mesh, model_axis)
    axes = tuple(a for a in (d_ax, m_ax) if a is not None)

    def local(p):
        flat = p.reshape(-1)
        v, _ = jax.lax.top_k(flat, min(n, flat.shape[0]))
        if axes:
            v = jax.lax.all_gather(v, axes, axis=0, tiled=True)
        v, _ = jax.lax.top_k(v, n)
        return v[-1], jnp.min(jnp.where(v > 0, v, jnp.inf))

    # check_vma=False: after the all-gather over every axis the outputs are replicated,
    # which the varying-axes check cannot infer through a size-1 axis.
    return jax.shard_map(local, mesh=mesh, in_specs=P(d_ax, m_ax), out_specs=(P(), P()),
                         check_vma=False)(jax.lax.stop_gradient(pre))


# --------------------------------------------------------------------------- train step


def make_train_step(
    mesh: Mesh | None,
    *,
    data_axis: str = DATA,
    model_axis: str = MODEL,
    **kernel_kwargs,
) -> tuple[Callable[..., cc.TrainState], Callable[..., tuple[cc.TrainState, Any]]]:
    """``(init_state, step)`` of :func:`jaxkit.kernels.crosscoder.make_train_step`
    (``kernel_kwargs`` are its arguments), with the top-k selections (TopK, BatchTopK,
    AuxK) done shard-locally on ``mesh`` by :func:`topk_mask` /
    :func:`batch_topk_threshold` through the kernel's ``select`` hook, so the step takes
    the kernel's dense formulation (its sparse TopK step, ``decoder="sparse"``, gathers
    and scatters whole atoms and has no shard-local form here). Without a mesh the
    kernel's own selections (and, for TopK, its sparse step) are used, and so on a
    one-device mesh, where shard-local selections are the global ones."""
    if mesh is None or mesh.size == 1:  # one device: the kernel's own (sparse) step
        return cc.make_train_step(**kernel_kwargs)
    return cc.make_train_step(**kernel_kwargs,
                              select=selector(mesh, data_axis=data_axis, model_axis=model_axis))


def selector(mesh: Mesh, *, data_axis: str = DATA, model_axis: str = MODEL) -> cc.Selector:
    """The kernel's ``select`` hook with the shard-local selections of this module."""
    sh = dict(mesh=mesh, data_axis=data_axis, model_axis=model_axis)
    return cc.Selector(topk_mask=functools.partial(topk_mask, **sh),
                       batch_threshold=functools.partial(batch_topk_threshold, **sh))


def to_host(tree):
    """NumPy copy of a pytree of (possibly multi-process) global arrays, on every
    process (``process_allgather`` when some shards live on other hosts)."""
    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(jax.device_get(x))

    return jax.tree.map(one, tree)
