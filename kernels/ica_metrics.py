"""How well an unmixing separates: the Amari distance (used by the tests, benchmarks and
pipelines that score FastICA; re-exported as ``jaxkit.kernels.ica.amari_distance``)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["amari_distance"]


def amari_distance(w: Float[Array, "k k"], a: Float[Array, "k k"]) -> Float[Array, ""]:
    """Normalised Amari distance between an unmixing ``w`` and the true mixing ``a``.

    With ``p = |w a|`` (k x k),
    ``d = [sum_i (sum_j p_ij / max_j p_ij - 1) + sum_j (sum_i p_ij / max_i p_ij - 1)]
    / (2 k (k - 1))`` (Amari, Cichocki & Yang, "A new learning algorithm for blind signal
    separation", NeurIPS 1996), which lies in ``[0, 1]`` and is 0 iff ``w a`` is a scaled
    permutation (perfect separation up to order and scale).

    Differentiable: yes, in w and a (almost everywhere: row and column maxima).

    Args:
        w: estimated unmixing matrix, shape ``(k, k)`` (e.g. ``components``).
        a: true mixing matrix, shape ``(k, k)``.

    Returns:
        The scalar distance.
    """
    p = jnp.abs(w @ a)
    k = p.shape[0]
    rows = jnp.sum(p / jnp.max(p, axis=1, keepdims=True), axis=1) - 1
    cols = jnp.sum(p / jnp.max(p, axis=0, keepdims=True), axis=0) - 1
    return (jnp.sum(rows) + jnp.sum(cols)) / (2 * k * (k - 1))
