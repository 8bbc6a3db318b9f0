"""Gaussian noise conditioned on zero total charge (the sampler's balanced start)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ._checks import check_mask, check_q_real

__all__ = ["balanced_noise"]


def balanced_noise(key: PRNGKeyArray, shape: tuple[int, int], q: ArrayLike, *,
                   mask: ArrayLike | None = None, dtype=jnp.float32) -> Float[Array, "N K"]:
    """Gaussian noise conditioned on zero total charge.

    Draws ``x`` iid N(0, 1) of ``shape = (N, K)``, zeroes masked rows, and returns the
    orthogonal projection ``x - (<v, x> / |v|^2) v`` with ``v[i, k] = mask[i] q[k]``: the
    conditional law of ``x`` given ``sum_i q . x_i = 0`` (covariance ``I - v v^T/|v|^2``
    on the unmasked entries, zero on masked rows). With ``q = 0`` or no unmasked atom the
    constraint is vacuous and the (masked) noise is returned as drawn.

    Reference: conditioning a Gaussian on a linear constraint ("conditioning by
    kriging"), Rue & Held, "Gaussian Markov Random Fields", 2005, sec. 2.3.3.

    Differentiable: yes, in q (the key fixes the Gaussian draw).

    Args:
        key: PRNG key.
        shape: ``(N, K)``, atoms by species; ``K`` must equal ``len(q)``.
        q: ``(K,)`` species charges (any finite reals; may be traced).
        mask: optional ``(N,)`` bool, False on padding atoms (zero rows in the output).
        dtype: floating dtype of the noise.

    Returns:
        ``(N, K)`` noise with ``sum_i q . x_i = 0`` up to rounding.

    Raises:
        ValueError: ``shape`` is not 2-D or does not match ``q``, ``mask`` has the wrong
            shape, or ``q`` holds NaN or inf.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"`shape` must be (N, K); got {shape}")
    n, k = shape
    q = check_q_real(q, dtype)
    if q.shape[0] != k:
        raise ValueError(f"`shape[1]` ({k}) must equal len(q) ({q.shape[0]})")
    m = check_mask(mask, n)
    x = jnp.where(m[:, None], jax.random.normal(key, shape, dtype), 0)
    v = jnp.where(m[:, None], q[None, :], 0)
    vv = jnp.sum(v * v)
    coef = jnp.sum(v * x) / jnp.where(vv > 0, vv, 1)
    return x - coef * v
