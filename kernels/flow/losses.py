"""Conditional flow-matching losses, classifier-free-guidance label dropout and
guided velocities."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._tree import PyTree, check_batch, tleaves, tmap
from .paths import linear_path, sample_path

__all__ = ["cfm_loss", "cfm_batch_loss", "drop_labels", "cfg_velocity"]


def cfm_loss(velocity_fn: Callable, params: PyTree, key: PRNGKeyArray, x1: PyTree,
             x0: PyTree) -> Float[Array, ""]:
    """Conditional flow-matching loss on the linear path for one sample.

    Draws ``t ~ U(0, 1)`` from ``key`` and returns the mean over all leaves' entries of
    ``(velocity_fn(params, t, x_t) - u_t)^2``. ``vmap`` it over a batch (with split keys)
    and average for a minibatch loss, or use :func:`cfm_batch_loss`.

    Differentiable: yes, in params, x1 and x0 (as velocity_fn is).

    Args:
        velocity_fn: ``velocity_fn(params, t, x) -> v`` on one sample, ``t`` a scalar.
        params: the model's parameters (any pytree).
        key: PRNG key for ``t``.
        x1: a target sample (any pytree).
        x0: a source sample, the same pytree and shapes.

    Returns:
        The scalar loss.
    """
    dtype = jnp.result_type(*tleaves(x1))
    dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32
    t = jax.random.uniform(key, (), dtype)  # the data's precision (no x64 upcast)
    xt, ut = linear_path(x0, x1, t)
    v = velocity_fn(params, t, xt)
    sq = tmap(lambda a, b: jnp.sum(jnp.square(a - b)), v, ut)
    n = sum(jnp.size(u) for u in tleaves(ut))
    return sum(tleaves(sq)) / n


def drop_labels(key: PRNGKeyArray, y: Int[Array, " B"], p_uncond: float,
                null_label: int = -1) -> Int[Array, " B"]:
    """Classifier-free-guidance label dropout: each label becomes ``null_label`` with
    probability ``p_uncond`` (Ho & Salimans 2022). jaxkit nets map negative labels to
    their learned null-class embedding.

    Differentiable: no: integer labels.

    Args:
        key: PRNG key.
        y: integer labels.
        p_uncond: drop probability.
        null_label: the label that replaces a dropped one.

    Returns:
        The labels, of ``y``'s shape and dtype.
    """
    drop = jax.random.bernoulli(key, p_uncond, jnp.shape(y))
    return jnp.where(drop, jnp.asarray(null_label, jnp.asarray(y).dtype), y)



def _batch_mse(v: PyTree, ut: PyTree, weights=None) -> Float[Array, ""]:
    """Per-sample mean squared error over all entries, averaged over the batch."""
    if jax.tree_util.tree_structure(v) != jax.tree_util.tree_structure(ut) or any(
            jnp.shape(a) != jnp.shape(b) for a, b in zip(tleaves(v), tleaves(ut), strict=True)):
        raise ValueError("velocity_fn must return the same shapes as the data; got "
                         f"{[jnp.shape(a) for a in tleaves(v)]} vs "
                         f"{[jnp.shape(a) for a in tleaves(ut)]}")
    per = sum(jnp.sum(jnp.square(a - b).reshape(a.shape[0], -1), axis=1)
              for a, b in zip(tleaves(v), tleaves(ut), strict=True))
    n = sum(math.prod(jnp.shape(a)[1:]) for a in tleaves(ut))
    per = per / n
    if weights is None:
        return jnp.mean(per)
    w = jnp.asarray(weights, per.dtype)
    return jnp.sum(w * per) / jnp.maximum(jnp.sum(w), 1e-12)


def cfm_batch_loss(velocity_fn: Callable, params: PyTree, key: PRNGKeyArray, x0: PyTree,
                   x1: PyTree, *, path: str = "linear", y: Int[Array, " B"] | None = None,
                   p_uncond: float = 0.0, null_label: int = -1,
                   weights: Float[Array, " B"] | None = None,
                   **path_kwargs) -> Float[Array, ""]:
    """Minibatch conditional flow-matching loss
    ``E_t || v_theta(t, x_t[, y]) - u_t(x_t | x0, x1) ||^2`` with ``t ~ U(0, 1)`` per
    sample and ``(x_t, u_t)`` from ``PATHS[path]`` (``path_kwargs`` e.g. ``sigma=0.1``).

    ``velocity_fn(params, t, x)`` (or ``velocity_fn(params, t, x, y)`` when ``y`` is
    given) works on the whole batch: ``t`` has shape ``(B,)``, ``x`` the data's shapes
    (see :func:`jaxkit.kernels.nets.apply_batch`). ``y``: integer labels; with
    ``p_uncond > 0`` each is replaced by ``null_label`` with that probability
    (classifier-free guidance training). ``weights``: optional ``(B,)`` sample weights or
    a validity mask.

    References: Lipman et al., ICLR 2023; Tong et al., TMLR 2024; Ho & Salimans,
    "Classifier-free diffusion guidance", 2022.

    Differentiable: yes, in params, x0, x1 and weights (as velocity_fn is).

    Args:
        velocity_fn: batched ``velocity_fn(params, t, x[, y]) -> v``.
        params: the model's parameters (any pytree).
        key: PRNG key (``t``, the path's noise, the label dropout).
        x0: source batch, leaves ``(B, ...)``.
        x1: target batch, the same pytree and shapes.
        path: the path's name (static), see :data:`PATHS`.
        y: optional integer labels ``(B,)``.
        p_uncond: label-dropout probability (static).
        null_label: the dropped label.
        weights: optional sample weights ``(B,)``.
        **path_kwargs: the path's options.

    Returns:
        The scalar (weighted) mean over samples of the per-sample MSE.
    """
    x0, x1, b = check_batch(x0, x1, y)
    kt, kp, kd = jax.random.split(key, 3)
    leaf = tleaves(x1)[0]
    dtype = leaf.dtype if jnp.issubdtype(leaf.dtype, jnp.floating) else jnp.float32
    t = jax.random.uniform(kt, (b,), dtype)
    xt, ut = sample_path(path, kp, x0, x1, t, **path_kwargs)
    if y is None:
        v = velocity_fn(params, t, xt)
    else:
        if p_uncond > 0:
            y = drop_labels(kd, y, p_uncond, null_label)
        v = velocity_fn(params, t, xt, y)
    return _batch_mse(v, ut, weights)


def cfg_velocity(velocity: Callable, params: PyTree, t, x: PyTree, y, guidance: float, *,
                 null_label: int = -1) -> PyTree:
    """Classifier-free guidance: ``(1 + w) v(t, x | y) - w v(t, x | null)`` with
    ``w = guidance`` (Ho & Salimans 2022). ``velocity(params, t, x, y)``; the null label
    is ``null_label`` broadcast to ``y``'s shape. ``w = 0`` is the conditional field.

    Differentiable: yes, in params, t and x (as velocity is).

    Args:
        velocity: ``velocity(params, t, x, y) -> v``.
        params: the model's parameters.
        t: time, as ``velocity`` takes it.
        x: state (any pytree).
        y: integer labels.
        guidance: the guidance weight ``w``.
        null_label: the unconditional label.

    Returns:
        The guided velocity, of ``x``'s shapes.
    """
    vc = velocity(params, t, x, y)
    vu = velocity(params, t, x, jnp.full_like(jnp.asarray(y), null_label))
    return tmap(lambda c, u: (1 + guidance) * c - guidance * u, vc, vu)

