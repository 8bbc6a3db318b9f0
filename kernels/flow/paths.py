"""Probability paths ``(x0, x1, t) -> (x_t, u_t)`` of flow matching and their uniform
dispatch :data:`PATHS`."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from ._tree import PyTree, axpy, broadcast_t, check_t, normal_like, tmap

__all__ = ["PATHS", "linear_path", "cond_ot_path", "vp_path", "sb_path", "sample_path"]


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
    check_t(t, x0)
    xt = tmap(lambda a, b: (1 - broadcast_t(t, a)) * a + broadcast_t(t, a) * b, x0, x1)
    ut = tmap(lambda a, b: b - a, x0, x1)
    if isinstance(sigma, (int, float)) and sigma == 0:
        return xt, ut
    if key is None:
        raise ValueError("`key` is required for linear_path with sigma != 0")
    xt = axpy(sigma, normal_like(key, x0), xt)
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
    check_t(t, x0)
    c = 1.0 - sigma_min
    xt = tmap(lambda a, b: (1 - c * broadcast_t(t, a)) * a + broadcast_t(t, a) * b, x0, x1)
    ut = tmap(lambda a, b: b - c * a, x0, x1)
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
    check_t(t, x0)
    h = math.pi / 2

    def xt_(a, b):
        tt = broadcast_t(t, a)
        return jnp.cos(h * tt) * a + jnp.sin(h * tt) * b

    def ut_(a, b):
        tt = broadcast_t(t, a)
        return h * (jnp.cos(h * tt) * b - jnp.sin(h * tt) * a)

    return tmap(xt_, x0, x1), tmap(ut_, x0, x1)


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
    check_t(t, x0)
    eps = normal_like(key, x0)

    def xt_(a, b, e):
        tt = broadcast_t(t, a)
        return (1 - tt) * a + tt * b + sigma * jnp.sqrt(tt * (1 - tt)) * e

    def ut_(a, b, e):
        tc = jnp.clip(broadcast_t(t, a), t_clamp, 1 - t_clamp)
        return sigma * (1 - 2 * tc) / (2 * jnp.sqrt(tc * (1 - tc))) * e + b - a

    return tmap(xt_, x0, x1, eps), tmap(ut_, x0, x1, eps)


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

