"""Applying a FastICA fit to new data: scikit-learn's ``FastICA.transform`` and
``inverse_transform`` as pure functions of a :class:`jaxkit.kernels.ica.FastICAResult`
(re-exported from :mod:`jaxkit.kernels.ica`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["transform", "inverse_transform"]


def transform(result, x: Float[Array, "m d"]) -> Float[Array, "m k"]:
    """Sources of new data under a fit: ``(x - mean) @ components.T`` (scikit-learn's
    ``FastICA.transform``; with ``whiten=False`` the mean is zero, so no centring).

    Differentiable: yes, in result (its mean and components) and x.

    Args:
        result: a :class:`FastICAResult` (e.g. from :func:`fastica`).
        x: data ``(m, d)`` with the fit's ``d`` variables.

    Returns:
        The sources ``(m, k)``.
    """
    x = jnp.asarray(x)
    d = result.components.shape[-1]
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"`x` must have shape (m, {d}); got {x.shape}")
    return (x - result.mean) @ result.components.T


def inverse_transform(result, s: Float[Array, "m k"]) -> Float[Array, "m d"]:
    """Data from sources: ``s @ mixing.T + mean`` (scikit-learn's
    ``FastICA.inverse_transform``; exact when ``k = d``, the projection onto the fitted
    subspace when ``k < d``).

    Differentiable: yes, in result (its mean and mixing) and s.

    Args:
        result: a :class:`FastICAResult`.
        s: sources ``(m, k)``.

    Returns:
        The data ``(m, d)``.
    """
    s = jnp.asarray(s)
    k = result.mixing.shape[-1]
    if s.ndim != 2 or s.shape[1] != k:
        raise ValueError(f"`s` must have shape (m, {k}); got {s.shape}")
    return s @ result.mixing.T + result.mean


def _mixing(comps: Float[Array, "k d"]) -> Float[Array, "d k"]:
    """The mixing matrix ``pinv(components)`` (as scikit-learn): for a square, invertible
    unmixing an LU inverse (the same matrix, cheaper than the SVD behind ``pinv``), with
    ``pinv`` where that inverse is not finite or k < d."""
    if comps.shape[0] != comps.shape[1]:
        return jnp.linalg.pinv(comps)
    inv = jnp.linalg.inv(comps)
    return jax.lax.cond(jnp.all(jnp.isfinite(inv)), lambda: inv,
                        lambda: jnp.linalg.pinv(comps))
