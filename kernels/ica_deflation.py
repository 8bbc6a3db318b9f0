"""Deflationary FastICA: one unit at a time with Gram-Schmidt decorrelation.

Reference: A. Hyvarinen, "Fast and robust fixed-point algorithms for independent
component analysis", IEEE TNN 10(3), 1999, eqs. 19 and 21 (one-unit fixed point and
deflationary orthogonalisation); the steps follow scikit-learn's ``_ica_def``. The public
entry point is :func:`jaxkit.kernels.ica.fastica` with ``algorithm="deflation"``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

__all__ = ["deflation_loop"]


def deflation_loop(
    zt: Float[Array, "k n"],
    w_init: Float[Array, "k k"],
    g: Callable,
    *,
    max_iter: int,
    tol: float,
) -> tuple[Float[Array, "k k"], Int[Array, ""], Bool[Array, ""]]:
    """Find the ``k`` rows of the whitened-space unmixing one after another.

    For component ``j``, from ``w = w_init[j] / |w_init[j]|``, repeat

    ``w+ = E[z g(w^T z)] - E[g'(w^T z)] w``, ``w+ <- w+ - W_{<j}^T W_{<j} w+``,
    ``w+ <- w+ / |w+|``, ``lim = | |<w+, w>| - 1 |``

    until ``lim < tol`` or ``max_iter`` steps (the rows ``W_{<j}`` are those found
    before; rows ``>= j`` are still zero, so the projection is a full ``W^T W`` product:
    fixed shapes, no slicing on the loop index). Components run in a ``fori_loop``, each
    with its own ``while_loop``.

    Differentiable: no: a while_loop per component (reverse mode fails).

    Args:
        zt: whitened data, sample-last ``(k, n)``.
        w_init: initial vectors, one per row ``(k, k)`` (scaled to unit norm here).
        g: ``u -> (g(u), mean of g'(u) over the last axis)``, called on ``u`` of shape
            ``(n,)`` (scikit-learn calls the contrast on the 1-D projection as well).
        max_iter: the step budget of each component (static).
        tol: the tolerance on ``lim`` (``0``: run every component to ``max_iter``).

    Returns:
        ``(W, n_iter, converged)``: the ``(k, k)`` unmixing with orthonormal rows, the
        largest step count over the components (scikit-learn's ``n_iter_``), and whether
        every component met ``tol``.
    """
    k, n = zt.shape
    dtype = zt.dtype
    inf = jnp.asarray(jnp.inf, dtype)

    def one_component(j, carry):
        w_all, n_iter, ok = carry
        w = w_init[j]
        w = w / jnp.sqrt(jnp.sum(w * w))

        def cond(c):
            _, it, lim = c
            return (lim >= tol) & (it < max_iter)

        def body(c):
            w, it, _ = c
            gu, dg = g(w @ zt)
            w1 = zt @ gu * (1.0 / n) - jnp.mean(dg) * w
            w1 = w1 - (w1 @ w_all.T) @ w_all  # Gram-Schmidt against the rows found
            w1 = w1 / jnp.sqrt(jnp.sum(w1 * w1))
            lim = jnp.abs(jnp.abs(jnp.sum(w1 * w)) - 1)
            return w1, it + 1, lim

        w, it, lim = jax.lax.while_loop(cond, body, (w, jnp.asarray(0, jnp.int32), inf))
        return w_all.at[j].set(w), jnp.maximum(n_iter, it), ok & (lim < tol)

    init = (jnp.zeros((k, k), dtype), jnp.asarray(0, jnp.int32), jnp.asarray(True))
    return jax.lax.fori_loop(0, k, one_component, init)
