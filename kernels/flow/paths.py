"""Probability paths ``(x0, x1, t) -> (x_t, u_t)`` of flow matching and their uniform
dispatch :data:`PATHS`."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from ._tree import PyTree, axpy, broadcast_t, check_t, normal_like, tmap

__all__ = ["PATHS", "linear_path", "cond_ot_path", "vp_path", "sb_path", "sample_path"]


def _noise(key, noise, x0, what: str):
    """The path's ``eps``: ``noise`` when given (torchcfm's ``sample_xt(x0, x1, t,
    epsilon)``), else drawn from ``key``."""
    if noise is not None:
        return noise
    if key is None:
        raise ValueError(f"`key` (or `noise`) is required for {what}")
    return normal_like(key, x0)


def linear_path(x0: PyTree, x1: PyTree, t, *, sigma: float = 0.0,
                key: PRNGKeyArray | None = None,
                noise: PyTree | None = None) -> tuple[PyTree, PyTree]:
    """Rectified-flow path ``x_t = (1 - t) x0 + t x1 + sigma eps``, ``u_t = x1 - x0``
    (Liu et al., "Flow straight and fast", ICLR 2023; with ``sigma > 0`` the I-CFM path
    of Tong et al., TMLR 2024).

    Differentiable: yes, in x0, x1, t and sigma (the noise fixed by key or noise).

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma: noise level (static); ``eps ~ N(0, I)`` is drawn only when non-zero.
        key: PRNG key for ``eps``, required when ``sigma != 0`` (and no ``noise``).
        noise: optional given ``eps`` (``x0``'s shapes) instead of drawing it.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    check_t(t, x0)
    xt = tmap(lambda a, b: (1 - broadcast_t(t, a)) * a + broadcast_t(t, a) * b, x0, x1)
    ut = tmap(lambda a, b: b - a, x0, x1)
    if isinstance(sigma, (int, float)) and sigma == 0:
        return xt, ut
    xt = axpy(sigma, _noise(key, noise, x0, "linear_path with sigma != 0"), xt)
    return xt, ut


def cond_ot_path(x0: PyTree, x1: PyTree, t, sigma_min: float = 0.0) -> tuple[PyTree, PyTree]:
    """Conditional OT path (Lipman et al., "Flow matching for generative modeling", ICLR
    2023, eq. 20) from ``x0 ~ N(0, I)``: ``x_t = (1 - (1 - sigma_min) t) x0 + t x1``,
    ``u_t = x1 - (1 - sigma_min) x0``.

    Differentiable: yes, in x0, x1 and t.

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma_min: the path's terminal standard deviation.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    check_t(t, x0)
    c = 1.0 - sigma_min
    xt = tmap(lambda a, b: (1 - c * broadcast_t(t, a)) * a + broadcast_t(t, a) * b, x0, x1)
    ut = tmap(lambda a, b: b - c * a, x0, x1)
    return xt, ut


def vp_path(x0: PyTree, x1: PyTree, t, *, sigma: float = 0.0,
            key: PRNGKeyArray | None = None,
            noise: PyTree | None = None) -> tuple[PyTree, PyTree]:
    """Trigonometric / variance-preserving path ``x_t = cos(pi t/2) x0 + sin(pi t/2) x1
    + sigma eps``, ``u_t = pi/2 (cos(pi t/2) x1 - sin(pi t/2) x0)`` (Albergo &
    Vanden-Eijnden, "Building normalizing flows with stochastic interpolants", ICLR 2023).
    With ``sigma > 0`` this is torchcfm's ``VariancePreservingConditionalFlowMatcher(sigma)``:
    constant Gaussian noise around the mean path, ``u_t`` unchanged (as its
    ``sample_xt`` / ``compute_conditional_flow``).

    Differentiable: yes, in x0, x1 and t.

    Args:
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        sigma: noise level (static); ``eps ~ N(0, I)`` is drawn only when non-zero.
        key: PRNG key for ``eps``, required when ``sigma != 0`` (and no ``noise``).
        noise: optional given ``eps`` (``x0``'s shapes) instead of drawing it.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    check_t(t, x0)
    h = math.pi / 2

    def xt_(a, b):
        tt = broadcast_t(t, a)
        return jnp.cos(h * tt) * a + jnp.sin(h * tt) * b

    def ut_(a, b):
        tt = broadcast_t(t, a)
        return h * (jnp.cos(h * tt) * b - jnp.sin(h * tt) * a)

    xt, ut = tmap(xt_, x0, x1), tmap(ut_, x0, x1)
    if isinstance(sigma, (int, float)) and sigma == 0:
        return xt, ut
    return axpy(sigma, _noise(key, noise, x0, "vp_path with sigma != 0"), xt), ut


def sb_path(key: PRNGKeyArray | None, x0: PyTree, x1: PyTree, t, sigma: float = 1.0, *,
            offset: float = 1e-8, noise: PyTree | None = None) -> tuple[PyTree, PyTree]:
    """Schrodinger-bridge CFM path (Tong et al., AISTATS 2024): the Brownian bridge
    ``x_t = mu_t + sigma sqrt(t (1 - t)) eps`` with ``mu_t = (1 - t) x0 + t x1`` and
    ``u_t = (1 - 2t) / (2 t (1 - t) + offset) (x_t - mu_t) + x1 - x0``.

    This is torchcfm's ``SchrodingerBridgeConditionalFlowMatcher.compute_conditional_flow``
    term for term, ``offset = 1e-8`` its regulariser: at ``t = 0`` and ``t = 1`` the
    bridge has no noise (``x_t - mu_t = 0``), so ``u_t = x1 - x0`` exactly there, and
    between the endpoints the noise term is ``sigma (1 - 2t) sqrt(t (1 - t)) / (2 t (1 - t)
    + offset) eps``, computed in that form (no ``0 / 0``). It is large only very near the
    endpoints (at most ``sigma / (2 sqrt(2 offset))`` ~ ``3.5e3 sigma``, at
    ``t (1 - t) = offset / 2``), as in torchcfm. ``offset = 0`` gives the exact bridge
    velocity in the interior, still ``x1 - x0`` at the endpoints themselves.

    Differentiable: yes, in x0, x1, t and sigma (the noise fixed by key or noise).

    Args:
        key: PRNG key for ``eps ~ N(0, I)`` (may be None when ``noise`` is given).
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf, in ``[0, 1]``.
        sigma: the bridge's noise level.
        offset: the regulariser of ``2 t (1 - t)`` in ``u_t`` (static, ``>= 0``;
            torchcfm's 1e-8).
        noise: optional given ``eps`` (``x0``'s shapes) instead of drawing it.

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    check_t(t, x0)
    if not offset >= 0:
        raise ValueError(f"`offset` must be >= 0; got {offset}")
    eps = _noise(key, noise, x0, "sb_path")

    def std_(tt):
        return jnp.sqrt(jnp.maximum(tt * (1 - tt), 0))

    def xt_(a, b, e):
        tt = broadcast_t(t, a)
        return (1 - tt) * a + tt * b + sigma * std_(tt) * e

    def ut_(a, b, e):
        tt = broadcast_t(t, a)
        s = tt * (1 - tt)
        den = 2 * s + offset
        coef = jnp.where(s > 0, (1 - 2 * tt) * std_(tt) / jnp.where(den > 0, den, 1), 0)
        return sigma * coef * e + b - a

    return tmap(xt_, x0, x1, eps), tmap(ut_, x0, x1, eps)


PATHS: dict[str, Callable] = {
    "linear": lambda key, x0, x1, t, sigma=0.0: linear_path(x0, x1, t, sigma=sigma, key=key),
    "cond_ot": lambda key, x0, x1, t, sigma_min=0.0: cond_ot_path(x0, x1, t, sigma_min),
    "vp": lambda key, x0, x1, t, sigma=0.0: vp_path(x0, x1, t, sigma=sigma, key=key),
    "sb": lambda key, x0, x1, t, sigma=1.0, offset=1e-8: sb_path(key, x0, x1, t, sigma,
                                                                 offset=offset),
}
"""Uniform dispatch ``PATHS[name](key, x0, x1, t, **kwargs) -> (x_t, u_t)``."""


def sample_path(path: str, key: PRNGKeyArray, x0: PyTree, x1: PyTree, t,
                **kwargs) -> tuple[PyTree, PyTree]:
    """Sample the path named ``path``: ``PATHS[path](key, x0, x1, t, **kwargs)``.

    Differentiable: yes, in x0, x1 and t (as the named path).

    Args:
        path: ``"linear"``, ``"cond_ot"``, ``"vp"`` or ``"sb"`` (static).
        key: PRNG key (used by the stochastic paths).
        x0: source sample(s), any pytree.
        x1: target sample(s), the same pytree and shapes.
        t: time: a scalar, ``(B,)`` or broadcastable against every leaf.
        **kwargs: the path's options (``sigma``, ``sigma_min``, ``offset``).

    Returns:
        ``(x_t, u_t)``, pytrees of ``x0``'s shapes.
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {tuple(PATHS)}; got {path!r}")
    return PATHS[path](key, x0, x1, t, **kwargs)

