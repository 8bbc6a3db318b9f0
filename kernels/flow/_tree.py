"""Pytree helpers and argument checks shared by the flow-matching modules."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..checks import check_finite

PyTree = Any

tmap = jax.tree_util.tree_map
tleaves = jax.tree_util.tree_leaves


def axpy(a, x: PyTree, y: PyTree) -> PyTree:
    """``y + a x`` leaf-wise."""
    return tmap(lambda xi, yi: yi + a * xi, x, y)


def broadcast_t(t, leaf):
    """Broadcast ``t`` (scalar, ``(B,)`` or already broadcastable) against ``leaf``."""
    t = jnp.asarray(t)
    if t.ndim == 1 and jnp.ndim(leaf) > 1:
        return t.reshape((-1,) + (1,) * (jnp.ndim(leaf) - 1))
    return t


def check_t(t, x: PyTree, name: str = "t"):
    """``t`` must be a scalar, ``(B,)`` with ``B`` the leading size of every leaf, or
    broadcastable to every leaf with the same rank."""
    shape = jnp.shape(t)
    for leaf in tleaves(x):
        ls = jnp.shape(leaf)
        ok = (len(shape) == 0
              or (len(shape) == 1 and len(ls) >= 1 and shape[0] in (1, ls[0]))
              or (len(shape) == len(ls)
                  and all(a in (1, b) for a, b in zip(shape, ls, strict=True))))
        if not ok:
            raise ValueError(f"`{name}` must be a scalar, shape (B,) with B the batch size, "
                             f"or broadcastable to the data; got shape {shape} for data "
                             f"of shape {ls}")


def check_pair(x0: PyTree, x1: PyTree, names=("x0", "x1")):
    s0 = jax.tree_util.tree_structure(x0)
    s1 = jax.tree_util.tree_structure(x1)
    if s0 != s1:
        raise ValueError(f"`{names[0]}` and `{names[1]}` must have the same pytree structure; "
                         f"got {s0} and {s1}")
    for a, b in zip(tleaves(x0), tleaves(x1), strict=True):
        if jnp.shape(a) != jnp.shape(b):
            raise ValueError(f"`{names[0]}` and `{names[1]}` must have the same shapes; got "
                             f"{jnp.shape(a)} and {jnp.shape(b)}")


def normal_like(key, x: PyTree) -> PyTree:
    leaves, treedef = jax.tree_util.tree_flatten(x)
    keys = jax.random.split(key, max(len(leaves), 1))
    def dt(a):
        d = jnp.asarray(a).dtype
        return d if jnp.issubdtype(d, jnp.floating) else jnp.float32

    noise = [jax.random.normal(k, jnp.shape(a), dt(a))
             for k, a in zip(keys, leaves, strict=False)]
    return jax.tree_util.tree_unflatten(treedef, noise)



def check_batch(x0: PyTree, x1: PyTree, y=None):
    """Checks a batch pair for the batched losses and couplings.

    ``x0`` and ``x1`` must have the same pytree structure and shapes, every leaf a
    leading batch axis of one common size ``B``, ``y`` (when given) leading shape
    ``(B,)``, ``B >= 1``, and every value finite (an eager ``ValueError``; an
    ``equinox.error_if`` check under ``jit``).

    Args:
        x0: source batch, leaves ``(B, ...)``.
        x1: target batch, the same pytree and shapes.
        y: optional labels, leading shape ``(B,)``.

    Returns:
        ``(x0, x1, B)``, the batches wrapped in their finiteness checks.
    """
    check_pair(x0, x1)
    leaves = tleaves(x1)
    if not leaves:
        raise ValueError("`x1` has no array leaves")
    if any(jnp.ndim(a) < 1 for a in leaves):
        raise ValueError("`x1` leaves need a leading batch axis (B, ...)")
    b = jnp.shape(leaves[0])[0]
    if any(jnp.shape(a)[0] != b for a in leaves):
        raise ValueError("all leaves of `x1` must share the batch size (leading axis)")
    if b < 1:
        raise ValueError("`x0` and `x1` are empty batches (B = 0); need at least one sample")
    if y is not None and jnp.shape(y)[:1] != (b,):
        raise ValueError(f"`y` must have leading shape ({b},) (one label per sample); "
                         f"got {jnp.shape(y)}")
    x0 = tmap(lambda a: check_finite(a, "x0"), x0)
    x1 = tmap(lambda a: check_finite(a, "x1"), x1)
    return x0, x1, b



def state_dtype(x0: PyTree):
    """The inexact dtype of an ODE state: the leaves' common dtype, JAX's default float
    for integer or empty states."""
    leaves = tleaves(x0)
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return dtype

