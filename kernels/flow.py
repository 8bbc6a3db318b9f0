"""Flow matching: probability paths, conditional flow-matching losses, ODE samplers and
exact / stochastic log-likelihoods.

Paths ``(x0, x1, t) -> (x_t, u_t)`` with ``u_t = d x_t / dt`` (conditional on the pair):

* :func:`linear_path`: ``x_t = (1 - t) x0 + t x1 (+ sigma eps)``, ``u_t = x1 - x0``
  (rectified flow: Liu et al., ICLR 2023; I-CFM: Tong et al., TMLR 2024).
* :func:`cond_ot_path`: ``x_t = (1 - (1 - s) t) x0 + t x1``, ``u_t = x1 - (1 - s) x0``
  (Lipman et al., "Flow matching for generative modeling", ICLR 2023).
* :func:`vp_path`: ``x_t = cos(pi t / 2) x0 + sin(pi t / 2) x1`` (trigonometric / VP).
* :func:`sb_path`: Schrodinger-bridge CFM (Tong et al., AISTATS 2024): Brownian bridge
  ``x_t ~ N((1 - t) x0 + t x1, sigma^2 t (1 - t))`` with
  ``u_t = (1 - 2t) / (2 t (1 - t)) (x_t - mu_t) + x1 - x0``.

Losses: :func:`cfm_loss` (one sample, linear path) and :func:`cfm_batch_loss` (a batch,
any path, optional labels with classifier-free-guidance label dropout);
:func:`cfg_velocity` combines conditional and unconditional velocities
(Ho & Salimans 2022). Minibatch-OT couplings live in :mod:`jaxkit.kernels.flow_ot`.

Samplers: :func:`integrate` (fixed-step Euler / midpoint / Heun / RK4 in one
``lax.scan``, or adaptive Tsit5 / Dopri5 / Dopri8 through diffrax) and
:func:`integrate_with_stats` (also returns the number of velocity evaluations).
:func:`log_likelihood`: instantaneous change of variables (Chen et al., NeurIPS 2018;
Grathwohl et al., FFJORD, ICLR 2019) with exact or Hutchinson divergence.

Conventions: the leading axis of every leaf is the batch axis for the batched losses;
``t`` of shape ``(B,)`` is broadcast against each leaf. All functions are pure and
``jit``/``vmap``/``grad``-able (method names, step counts and flags are static).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .checks import check_finite, is_traced

__all__ = [
    "METHODS", "FIXED_METHODS", "ADAPTIVE_METHODS", "PATHS",
    "linear_path", "cond_ot_path", "vp_path", "sb_path", "sample_path",
    "cfm_loss", "cfm_batch_loss", "drop_labels", "cfg_velocity",
    "integrate", "integrate_with_stats", "log_likelihood", "gaussian_logp",
]

FIXED_METHODS = ("euler", "midpoint", "heun", "rk4")
ADAPTIVE_METHODS = ("tsit5", "dopri5", "dopri8")
# The fixed-step methods under their first name (tests parametrize over it).
METHODS = FIXED_METHODS
_EVALS_PER_STEP = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}
PyTree = Any

_tmap = jax.tree_util.tree_map
_leaves = jax.tree_util.tree_leaves


def _axpy(a, x: PyTree, y: PyTree) -> PyTree:
    """``y + a x`` leaf-wise."""
    return _tmap(lambda xi, yi: yi + a * xi, x, y)


def _broadcast_t(t, leaf):
    """Broadcast ``t`` (scalar, ``(B,)`` or already broadcastable) against ``leaf``."""
    t = jnp.asarray(t)
    if t.ndim == 1 and jnp.ndim(leaf) > 1:
        return t.reshape((-1,) + (1,) * (jnp.ndim(leaf) - 1))
    return t


def _check_t(t, x: PyTree, name: str = "t"):
    """``t`` must be a scalar, ``(B,)`` with ``B`` the leading size of every leaf, or
    broadcastable to every leaf with the same rank."""
    shape = jnp.shape(t)
    for leaf in _leaves(x):
        ls = jnp.shape(leaf)
        ok = (len(shape) == 0
              or (len(shape) == 1 and len(ls) >= 1 and shape[0] in (1, ls[0]))
              or (len(shape) == len(ls)
                  and all(a in (1, b) for a, b in zip(shape, ls, strict=True))))
        if not ok:
            raise ValueError(f"`{name}` must be a scalar, shape (B,) with B the batch size, "
                             f"or broadcastable to the data; got shape {shape} for data "
                             f"of shape {ls}")


def _check_pair(x0: PyTree, x1: PyTree, names=("x0", "x1")):
    s0 = jax.tree_util.tree_structure(x0)
    s1 = jax.tree_util.tree_structure(x1)
    if s0 != s1:
        raise ValueError(f"`{names[0]}` and `{names[1]}` must have the same pytree structure; "
                         f"got {s0} and {s1}")
    for a, b in zip(_leaves(x0), _leaves(x1), strict=True):
        if jnp.shape(a) != jnp.shape(b):
            raise ValueError(f"`{names[0]}` and `{names[1]}` must have the same shapes; got "
                             f"{jnp.shape(a)} and {jnp.shape(b)}")


def _normal_like(key, x: PyTree) -> PyTree:
    leaves, treedef = jax.tree_util.tree_flatten(x)
    keys = jax.random.split(key, max(len(leaves), 1))
    def dt(a):
        d = jnp.asarray(a).dtype
        return d if jnp.issubdtype(d, jnp.floating) else jnp.float32

    noise = [jax.random.normal(k, jnp.shape(a), dt(a))
             for k, a in zip(keys, leaves, strict=False)]
    return jax.tree_util.tree_unflatten(treedef, noise)


# ----------------------------------------------------------------------------- paths


def linear_path(x0: PyTree, x1: PyTree, t, *, sigma: float = 0.0,
                key: PRNGKeyArray | None = None) -> tuple[PyTree, PyTree]:
    """Rectified-flow path ``x_t = (1 - t) x0 + t x1 + sigma eps``, ``u_t = x1 - x0``
    (Liu et al., "Flow straight and fast", ICLR 2023; with ``sigma > 0`` the I-CFM path
    of Tong et al., TMLR 2024).

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma: noise level (static); ``eps ~ N(0, I)`` is drawn only when non-zero.
        key: PRNG key for ``eps``, required when ``sigma != 0``.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    _check_t(t, x0)
    xt = _tmap(lambda a, b: (1 - _broadcast_t(t, a)) * a + _broadcast_t(t, a) * b, x0, x1)
    ut = _tmap(lambda a, b: b - a, x0, x1)
    if isinstance(sigma, (int, float)) and sigma == 0:
        return xt, ut
    if key is None:
        raise ValueError("`key` is required for linear_path with sigma != 0")
    xt = _axpy(sigma, _normal_like(key, x0), xt)
    return xt, ut


def cond_ot_path(x0: PyTree, x1: PyTree, t, sigma_min: float = 0.0) -> tuple[PyTree, PyTree]:
    """Conditional OT path (Lipman et al., "Flow matching for generative modeling", ICLR
    2023, eq. 20) from ``x0 ~ N(0, I)``: ``x_t = (1 - (1 - sigma_min) t) x0 + t x1``,
    ``u_t = x1 - (1 - sigma_min) x0``.

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma_min: the path's terminal standard deviation.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    _check_t(t, x0)
    c = 1.0 - sigma_min
    xt = _tmap(lambda a, b: (1 - c * _broadcast_t(t, a)) * a + _broadcast_t(t, a) * b, x0, x1)
    ut = _tmap(lambda a, b: b - c * a, x0, x1)
    return xt, ut


def vp_path(x0: PyTree, x1: PyTree, t) -> tuple[PyTree, PyTree]:
    """Trigonometric / variance-preserving path ``x_t = cos(pi t/2) x0 + sin(pi t/2) x1``,
    ``u_t = pi/2 (cos(pi t/2) x1 - sin(pi t/2) x0)`` (Albergo & Vanden-Eijnden, "Building
    normalizing flows with stochastic interpolants", ICLR 2023).

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    _check_t(t, x0)
    h = math.pi / 2

    def xt_(a, b):
        tt = _broadcast_t(t, a)
        return jnp.cos(h * tt) * a + jnp.sin(h * tt) * b

    def ut_(a, b):
        tt = _broadcast_t(t, a)
        return h * (jnp.cos(h * tt) * b - jnp.sin(h * tt) * a)

    return _tmap(xt_, x0, x1), _tmap(ut_, x0, x1)


def sb_path(key: PRNGKeyArray, x0: PyTree, x1: PyTree, t, sigma: float = 1.0, *,
            t_clamp: float = 1e-5) -> tuple[PyTree, PyTree]:
    """Schrodinger-bridge CFM path (Tong et al., AISTATS 2024): the Brownian bridge
    ``x_t = mu_t + sigma sqrt(t (1 - t)) eps`` with ``mu_t = (1 - t) x0 + t x1`` and
    ``u_t = (1 - 2t) / (2 t (1 - t)) (x_t - mu_t) + x1 - x0``.

    The noise part of ``u_t`` is computed as ``sigma (1 - 2t) / (2 sqrt(t (1 - t))) eps``
    with ``t`` clamped to ``[t_clamp, 1 - t_clamp]`` in that coefficient only (finite at
    the endpoints).

    Args:
        key: PRNG key for ``eps ~ N(0, I)``.
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma: the bridge's noise level.
        t_clamp: the clamp of ``t`` in the noise coefficient of ``u_t``.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    _check_t(t, x0)
    eps = _normal_like(key, x0)

    def xt_(a, b, e):
        tt = _broadcast_t(t, a)
        return (1 - tt) * a + tt * b + sigma * jnp.sqrt(tt * (1 - tt)) * e

    def ut_(a, b, e):
        tc = jnp.clip(_broadcast_t(t, a), t_clamp, 1 - t_clamp)
        return sigma * (1 - 2 * tc) / (2 * jnp.sqrt(tc * (1 - tc))) * e + b - a

    return _tmap(xt_, x0, x1, eps), _tmap(ut_, x0, x1, eps)


PATHS: dict[str, Callable] = {
    "linear": lambda key, x0, x1, t, sigma=0.0: linear_path(x0, x1, t, sigma=sigma, key=key),
    "cond_ot": lambda key, x0, x1, t, sigma_min=0.0: cond_ot_path(x0, x1, t, sigma_min),
    "vp": lambda key, x0, x1, t: vp_path(x0, x1, t),
    "sb": lambda key, x0, x1, t, sigma=1.0: sb_path(key, x0, x1, t, sigma),
}
"""Uniform dispatch ``PATHS[name](key, x0, x1, t, **kwargs) -> (x_t, u_t)``."""


def sample_path(path: str, key: PRNGKeyArray, x0: PyTree, x1: PyTree, t,
                **kwargs) -> tuple[PyTree, PyTree]:
    """Sample the path named ``path``: ``PATHS[path](key, x0, x1, t, **kwargs)``.

    Args:
        path: ``"linear"``, ``"cond_ot"``, ``"vp"`` or ``"sb"`` (static).
        key: PRNG key (used by the stochastic paths).
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        **kwargs: the path's options (``sigma``, ``sigma_min``).

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {tuple(PATHS)}; got {path!r}")
    return PATHS[path](key, x0, x1, t, **kwargs)


# ---------------------------------------------------------------------------- losses


def cfm_loss(velocity_fn: Callable, params: PyTree, key: PRNGKeyArray, x1: PyTree,
             x0: PyTree) -> Float[Array, ""]:
    """Conditional flow-matching loss on the linear path for one sample.

    Draws ``t ~ U(0, 1)`` from ``key`` and returns the mean over all leaves' entries of
    ``(velocity_fn(params, t, x_t) - u_t)^2``. ``vmap`` it over a batch (with split keys)
    and average for a minibatch loss, or use :func:`cfm_batch_loss`.

    Args:
        velocity_fn: ``velocity_fn(params, t, x) -> v`` on one sample, ``t`` a scalar.
        params: the model's parameters (any pytree).
        key: PRNG key for ``t``.
        x1: a target sample (any pytree).
        x0: a source sample, the same pytree and shapes.

    Returns:
        The scalar loss.
    """
    dtype = jnp.result_type(*_leaves(x1))
    dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32
    t = jax.random.uniform(key, (), dtype)  # the data's precision (no x64 upcast)
    xt, ut = linear_path(x0, x1, t)
    v = velocity_fn(params, t, xt)
    sq = _tmap(lambda a, b: jnp.sum(jnp.square(a - b)), v, ut)
    n = sum(jnp.size(u) for u in _leaves(ut))
    return sum(_leaves(sq)) / n


def drop_labels(key: PRNGKeyArray, y: Int[Array, " B"], p_uncond: float,
                null_label: int = -1) -> Int[Array, " B"]:
    """Classifier-free-guidance label dropout: each label becomes ``null_label`` with
    probability ``p_uncond`` (Ho & Salimans 2022). jaxkit nets map negative labels to
    their learned null-class embedding.

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


def _check_batch(x0: PyTree, x1: PyTree, y=None):
    _check_pair(x0, x1)
    leaves = _leaves(x1)
    if not leaves:
        raise ValueError("`x1` has no array leaves")
    if any(jnp.ndim(a) < 1 for a in leaves):
        raise ValueError("`x1` leaves need a leading batch axis (B, ...)")
    b = jnp.shape(leaves[0])[0]
    if any(jnp.shape(a)[0] != b for a in leaves):
        raise ValueError("all leaves of `x1` must share the batch size (leading axis)")
    if y is not None and jnp.shape(y)[:1] != (b,):
        raise ValueError(f"`y` must have leading shape ({b},) (one label per sample); "
                         f"got {jnp.shape(y)}")
    x0 = _tmap(lambda a: check_finite(a, "x0"), x0)
    x1 = _tmap(lambda a: check_finite(a, "x1"), x1)
    return x0, x1, b


def _batch_mse(v: PyTree, ut: PyTree, weights=None) -> Float[Array, ""]:
    """Per-sample mean squared error over all entries, averaged over the batch."""
    if jax.tree_util.tree_structure(v) != jax.tree_util.tree_structure(ut) or any(
            jnp.shape(a) != jnp.shape(b) for a, b in zip(_leaves(v), _leaves(ut), strict=True)):
        raise ValueError("velocity_fn must return the same shapes as the data; got "
                         f"{[jnp.shape(a) for a in _leaves(v)]} vs "
                         f"{[jnp.shape(a) for a in _leaves(ut)]}")
    per = sum(jnp.sum(jnp.square(a - b).reshape(a.shape[0], -1), axis=1)
              for a, b in zip(_leaves(v), _leaves(ut), strict=True))
    n = sum(math.prod(jnp.shape(a)[1:]) for a in _leaves(ut))
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
    x0, x1, b = _check_batch(x0, x1, y)
    kt, kp, kd = jax.random.split(key, 3)
    leaf = _leaves(x1)[0]
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
    return _tmap(lambda c, u: (1 + guidance) * c - guidance * u, vc, vu)


# ---------------------------------------------------------------------------- solvers


def _step(method: str, velocity: Callable, t, x: PyTree, dt) -> PyTree:
    if method == "euler":
        return _axpy(dt, velocity(t, x), x)
    if method == "midpoint":
        k1 = velocity(t, x)
        return _axpy(dt, velocity(t + dt / 2, _axpy(dt / 2, k1, x)), x)
    if method == "heun":
        k1 = velocity(t, x)
        k2 = velocity(t + dt, _axpy(dt, k1, x))
        return _axpy(dt / 2, _tmap(jnp.add, k1, k2), x)
    # rk4
    k1 = velocity(t, x)
    k2 = velocity(t + dt / 2, _axpy(dt / 2, k1, x))
    k3 = velocity(t + dt / 2, _axpy(dt / 2, k2, x))
    k4 = velocity(t + dt, _axpy(dt, k3, x))
    ks = _tmap(lambda a, b, c, d: a + 2 * b + 2 * c + d, k1, k2, k3, k4)
    return _axpy(dt / 6, ks, x)


def _state_dtype(x0: PyTree):
    leaves = _leaves(x0)
    dtype = jnp.result_type(*leaves) if leaves else jnp.float32
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return dtype


def _validate(velocity, x0, method, steps, t0, t1, reverse, post):
    if method not in FIXED_METHODS + ADAPTIVE_METHODS:
        raise ValueError(f"method must be one of {FIXED_METHODS + ADAPTIVE_METHODS}; "
                         f"got {method!r}")
    if method in FIXED_METHODS:
        if steps is None or int(steps) != steps or steps < 1:
            raise ValueError(f"steps must be a positive integer for method {method!r}; "
                             f"got {steps!r}")
    elif steps is not None and (int(steps) != steps or steps < 1):
        raise ValueError(f"steps (the dt0 hint) must be None or a positive integer; "
                         f"got {steps!r}")
    if method in ADAPTIVE_METHODS and post is not None:
        raise ValueError("post is only supported by the fixed-step methods "
                         f"{FIXED_METHODS}; got method {method!r}")
    if not (is_traced(t0) or is_traced(t1)):
        a, b = float(np.asarray(t0)), float(np.asarray(t1))
        if not (np.isfinite(a) and np.isfinite(b)):
            raise ValueError(f"t0 and t1 must be finite; got t0={a}, t1={b}")
        if not reverse and a >= b:
            raise ValueError(f"t0 must be < t1 (pass reverse=True to integrate backwards); "
                             f"got t0={a}, t1={b}")
        if reverse and a <= b:
            raise ValueError(f"with reverse=True, t0 must be > t1; got t0={a}, t1={b}")
    dtype = _state_dtype(x0)
    out = jax.eval_shape(velocity, jax.ShapeDtypeStruct((), dtype), x0)
    want = jax.tree_util.tree_map(lambda a: jnp.shape(a), x0)
    got = jax.tree_util.tree_map(lambda a: tuple(a.shape), out)
    if jax.tree_util.tree_structure(out) != jax.tree_util.tree_structure(x0) or any(
            tuple(jnp.shape(a)) != tuple(b.shape)
            for a, b in zip(_leaves(x0), _leaves(out), strict=True)):
        raise ValueError(f"velocity(t, x) must return the shapes of x0 {want}; got {got}")


_SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}


def integrate_with_stats(velocity: Callable, x0: PyTree, *, method: str = "euler",
                         steps: int | None = 50, t0=0.0, t1=1.0,
                         post: Callable | None = None, rtol: float = 1e-5,
                         atol: float = 1e-5, max_steps: int = 4096,
                         reverse: bool = False) -> tuple[PyTree, dict]:
    """:func:`integrate` that also returns ``stats``: ``nfe`` (velocity evaluations),
    ``num_steps`` (attempted steps), ``num_accepted_steps``, ``num_rejected_steps``.

    For the adaptive methods ``nfe`` is computed from diffrax's step counts and the
    solver's Butcher tableau (FSAL: ``stages - 1`` per attempted step plus one initial
    evaluation, shared with the automatic initial-step selection); the tests check it
    against a counting callback.

    Args:
        velocity: ``velocity(t, x) -> dx/dt``, ``x`` of ``x0``'s shapes.
        x0: initial state (any pytree).
        method: the solver (static), see :func:`integrate`.
        steps: number of steps (static; for the adaptive methods the ``dt0`` hint).
        t0: initial time.
        t1: final time.
        post: optional ``post(t, x) -> x`` after every fixed step.
        rtol: adaptive methods' relative tolerance.
        atol: adaptive methods' absolute tolerance.
        max_steps: adaptive methods' step cap (static).
        reverse: integrate backwards, ``t0 > t1`` (static).

    Returns:
        ``(x(t1), stats)`` with ``stats`` a dict of int32 scalars.
    """
    _validate(velocity, x0, method, steps, t0, t1, reverse, post)
    dtype = _state_dtype(x0)
    user_velocity = velocity

    def velocity(t, x):  # the state keeps x0's dtypes (e.g. float32 under x64 closures)
        return _tmap(lambda v, a: jnp.asarray(v).astype(jnp.asarray(a).dtype),
                     user_velocity(t, x), x)

    t0 = jnp.asarray(t0, dtype)
    t1 = jnp.asarray(t1, dtype)
    if method in FIXED_METHODS:
        steps = int(steps)
        dt = (t1 - t0) / steps

        def body(x, i):
            t = t0 + i.astype(dtype) * dt
            x = _step(method, velocity, t, x, dt)
            if post is not None:
                x = post(t + dt, x)
            return x, None

        x, _ = lax.scan(body, x0, jnp.arange(steps))
        n = jnp.asarray(steps, jnp.int32)
        stats = {"nfe": n * _EVALS_PER_STEP[method], "num_steps": n,
                 "num_accepted_steps": n, "num_rejected_steps": jnp.zeros((), jnp.int32)}
        return x, stats
    solver = _SOLVERS[method]()
    term = diffrax.ODETerm(lambda t, y, args: velocity(t, y))
    dt0 = None if steps is None else (t1 - t0) / int(steps)
    sol = diffrax.diffeqsolve(
        term, solver, t0, t1, dt0, x0,
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps, saveat=diffrax.SaveAt(t1=True))
    x = _tmap(lambda a: a[-1], sol.ys)
    tab = solver.tableau
    per = tab.num_stages - 1 if tab.fsal else tab.num_stages
    nsteps = jnp.asarray(sol.stats["num_steps"], jnp.int32)
    init = 1
    stats = {"nfe": per * nsteps + init, "num_steps": nsteps,
             "num_accepted_steps": jnp.asarray(sol.stats["num_accepted_steps"], jnp.int32),
             "num_rejected_steps": jnp.asarray(sol.stats["num_rejected_steps"], jnp.int32)}
    return x, stats


def integrate(velocity: Callable, x0: PyTree, *, method: str = "euler",
              steps: int | None = 50, t0=0.0, t1=1.0, post: Callable | None = None,
              rtol: float = 1e-5, atol: float = 1e-5, max_steps: int = 4096,
              reverse: bool = False) -> PyTree:
    """Integrate ``dx/dt = velocity(t, x)`` from ``t0`` to ``t1``; returns the state at ``t1``.

    Fixed-step ``method``: ``"euler"`` (order 1, 1 evaluation per step), ``"midpoint"`` /
    ``"heun"`` (order 2, 2 evaluations), ``"rk4"`` (order 4, 4 evaluations): ``steps``
    equal steps in one ``lax.scan`` (fixed cost; ``jit``/``vmap``/``grad`` through it);
    ``post(t, x) -> x`` is applied after every step at the step's end time (e.g. wrapping
    periodic coordinates). Adaptive ``method``: ``"tsit5"``, ``"dopri5"``, ``"dopri8"``
    through :func:`diffrax.diffeqsolve` with ``PIDController(rtol, atol)``; ``steps`` is the
    initial-step hint ``dt0 = (t1 - t0) / steps`` (``None``: automatic), ``max_steps`` caps
    the attempted steps (diffrax raises when exceeded). ``t0 < t1`` is required unless
    ``reverse=True`` (then ``t0 > t1``). ``x0`` is any pytree; ``t0``/``t1`` may be traced;
    ``velocity`` must return ``x0``'s shapes (checked with :func:`jax.eval_shape`).

    References: J. C. Butcher, "Numerical methods for ordinary differential equations",
    2016 (the explicit Runge-Kutta methods); C. Tsitouras, Comput. Math. Appl. 62, 2011
    (Tsit5); J. R. Dormand, P. J. Prince, J. Comput. Appl. Math. 6, 1980 (Dopri5).

    Args:
        velocity: ``velocity(t, x) -> dx/dt``, ``x`` of ``x0``'s shapes.
        x0: initial state (any pytree).
        method: ``"euler"``, ``"midpoint"``, ``"heun"``, ``"rk4"``, ``"tsit5"``,
            ``"dopri5"`` or ``"dopri8"`` (static).
        steps: number of steps (static; for the adaptive methods the ``dt0`` hint).
        t0: initial time.
        t1: final time.
        post: optional ``post(t, x) -> x`` after every fixed step.
        rtol: adaptive methods' relative tolerance.
        atol: adaptive methods' absolute tolerance.
        max_steps: adaptive methods' step cap (static).
        reverse: integrate backwards, ``t0 > t1`` (static).

    Returns:
        The state at ``t1``, of ``x0``'s shapes.
    """
    x, _ = integrate_with_stats(velocity, x0, method=method, steps=steps, t0=t0, t1=t1,
                                post=post, rtol=rtol, atol=atol, max_steps=max_steps,
                                reverse=reverse)
    return x


# ------------------------------------------------------------------------ likelihood


def gaussian_logp(x: Float[Array, "..."]) -> Float[Array, ""]:
    """Standard normal log-density of one sample,
    ``-|x|^2 / 2 - (d / 2) log(2 pi)`` with ``d`` the number of entries.

    Args:
        x: one sample (any shape).

    Returns:
        The scalar log-density.
    """
    return -0.5 * jnp.sum(jnp.square(x)) - 0.5 * x.size * math.log(2 * math.pi)


def log_likelihood(velocity: Callable, x1: Float[Array, "..."], *,
                   base_logp: Callable = gaussian_logp, method: str = "rk4",
                   steps: int | None = 50, divergence: str = "exact",
                   key: PRNGKeyArray | None = None, n_probes: int = 1,
                   probe: str = "rademacher", rtol: float = 1e-5, atol: float = 1e-5,
                   max_steps: int = 4096) -> Float[Array, ""]:
    """``log p_1(x1)`` of one sample under the flow ``dx/dt = velocity(t, x)`` pushing
    ``p_0`` (log-density ``base_logp``) from ``t = 0`` to ``t = 1``.

    Solves the augmented ODE ``(x, l)`` backwards from ``t = 1`` (``x = x1``, ``l = 0``)
    to ``t = 0`` with ``dl/dt = div v(t, x)`` and returns
    ``base_logp(x(0)) + l(0) = log p_0(x0) - int_0^1 div v dt`` (instantaneous change of
    variables; Chen et al. 2018). ``divergence="exact"``: trace of the Jacobian by
    ``jax.jacfwd`` (``d`` forward passes; fine for small ``d``). ``"hutchinson"``:
    ``mean_k eps_k^T J eps_k`` over ``n_probes`` Rademacher (``probe="rademacher"``) or
    Gaussian probes drawn once from ``key`` and held fixed through the solve (FFJORD),
    an unbiased estimate of ``log p`` up to the solver error. ``velocity(t, x)`` acts on
    one sample; ``vmap`` over a batch (with split keys). Differentiable wrt parameters
    closed over by ``velocity``. ``method``/``steps``/``rtol``/``atol`` as in
    :func:`integrate`.

    References: R. T. Q. Chen et al., "Neural ordinary differential equations", NeurIPS
    2018; W. Grathwohl et al., "FFJORD", ICLR 2019; M. F. Hutchinson, Commun. Stat.
    Simul. Comput. 19, 1990.

    Args:
        velocity: ``velocity(t, x) -> dx/dt`` on one sample.
        x1: the sample whose log-density is wanted.
        base_logp: log-density of ``p_0`` on one sample.
        method: the solver (static), see :func:`integrate`.
        steps: number of steps (static).
        divergence: ``"exact"`` or ``"hutchinson"`` (static).
        key: PRNG key for the probes, required for ``"hutchinson"``.
        n_probes: number of Hutchinson probes (static).
        probe: ``"rademacher"`` or ``"gaussian"`` (static).
        rtol: adaptive methods' relative tolerance.
        atol: adaptive methods' absolute tolerance.
        max_steps: adaptive methods' step cap (static).

    Returns:
        The scalar ``log p_1(x1)``.
    """
    if divergence not in ("exact", "hutchinson"):
        raise ValueError(f"divergence must be 'exact' or 'hutchinson'; got {divergence!r}")
    if probe not in ("rademacher", "gaussian"):
        raise ValueError(f"probe must be 'rademacher' or 'gaussian'; got {probe!r}")
    x1 = jnp.asarray(x1)
    if not jnp.issubdtype(x1.dtype, jnp.floating):
        x1 = x1.astype(jnp.float32)
    x1 = check_finite(x1, "x1")
    shape, d = x1.shape, x1.size
    if divergence == "hutchinson":
        if key is None:
            raise ValueError("`key` is required for divergence='hutchinson'")
        if int(n_probes) != n_probes or n_probes < 1:
            raise ValueError(f"n_probes must be a positive integer; got {n_probes!r}")
        pshape = (int(n_probes),) + shape
        if probe == "rademacher":
            eps = jax.random.rademacher(key, pshape, x1.dtype)
        else:
            eps = jax.random.normal(key, pshape, x1.dtype)

    def aug(t, state):
        x, _ = state
        f = lambda z: velocity(t, z)  # noqa: E731
        if divergence == "exact":
            v = f(x)
            jac = jax.jacfwd(lambda z: f(z.reshape(shape)).reshape(-1))(x.reshape(-1))
            div = jnp.trace(jac.reshape(d, d))
        else:
            v, f_jvp = jax.linearize(f, x)
            jeps = jax.vmap(f_jvp)(eps)
            div = jnp.mean(jnp.sum((jeps * eps).reshape(eps.shape[0], -1), axis=1))
        return v, div.astype(x.dtype)

    zero = jnp.zeros((), x1.dtype)
    x0, l0 = integrate(aug, (x1, zero), method=method, steps=steps, t0=1.0, t1=0.0,
                       reverse=True, rtol=rtol, atol=atol, max_steps=max_steps)
    return base_logp(x0) + l0
