"""The Lagrangian relaxation of the discrete charge projection: the dual bound and the
approximate projection (Lagrangian argmin plus a small repair DP).

Relaxing ``sum_i q[a_i] = 0`` with a multiplier ``lam`` separates the atoms: ``L(lam) =
sum_i min_k (cost[i, k] + lam q[k])`` is a lower bound on the balanced optimum for every
``lam``, and the argmin's total charge is non-increasing in ``lam``, so bisection finds
the multiplier where it crosses zero (the LP relaxation of the multiple-choice knapsack,
which has at most one fractional atom).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Float, Int

from ..checks import check_in_range
from ._assign import DiscreteProjection, prepare_discrete, score, with_fallback
from .dp import window_dp

__all__ = ["LagrangianBound", "lagrangian_bound", "project_discrete_approx"]


class LagrangianBound(NamedTuple):
    """Result of :func:`lagrangian_bound`: ``lam`` the multiplier found by bisection,
    ``bound = sum_i min_k (cost[i, k] + lam q[k])`` (a lower bound on the exact balanced
    optimum for any ``lam``), ``assignment`` the per-atom argmin at ``lam`` (``-1`` on
    masked atoms) and ``charge`` its total charge."""

    lam: Float[Array, ""]
    bound: Float[Array, ""]
    assignment: Int[Array, " N"]
    charge: Int[Array, ""]


def bisect_multiplier(c, m, qi: np.ndarray, iters: int):
    """Bisection on ``lam`` for the total charge of ``argmin_k c[i, k] + lam q[k]``, on
    prepared inputs (``c`` zero on masked rows).

    Starts from ``[-B, B]`` with ``B`` the largest per-atom cost spread plus 1 (beyond it
    every atom sits on an extreme charge). Returns ``(lam, arg_lo, arg_hi)``: the bracket
    midpoint and the per-atom argmins at the bracket ends, whose total charges are ``>=
    0`` (``lo``) and ``<= 0`` (``hi``) when attainable."""
    dtype = c.dtype
    qf = jnp.asarray(qi, dtype)
    qj = jnp.asarray(qi, jnp.int32)
    fin = jnp.isfinite(c)
    spread = jnp.where(fin, c, -jnp.inf).max(1) - jnp.where(fin, c, jnp.inf).min(1)
    spread = jnp.max(jnp.where(m & jnp.any(fin, axis=1), spread, 0))
    big = spread + 1  # integer charges: distinct values differ by >= 1

    def argmin_at(lam):
        return jnp.argmin(c + lam * qf, axis=1).astype(jnp.int32)

    def charge(arg):
        return jnp.sum(jnp.where(m, qj[arg], 0))

    def body(_, b):
        lo, hi = b
        mid = 0.5 * (lo + hi)
        g = charge(argmin_at(mid))
        return jnp.where(g >= 0, mid, lo), jnp.where(g <= 0, mid, hi)

    lo, hi = lax.fori_loop(0, iters, body, (-big.astype(dtype), big.astype(dtype)))
    return 0.5 * (lo + hi), argmin_at(lo), argmin_at(hi)


def lagrangian_bound(cost: Float[Array, "N K"], q: ArrayLike, *,
                     mask: ArrayLike | None = None, allowed: ArrayLike | None = None,
                     iters: int = 60) -> LagrangianBound:
    """Lagrangian relaxation of :func:`~jaxkit.kernels.charge.project_discrete`'s charge
    constraint.

    ``L(lam) = sum_i min_k (cost[i, k] + lam q[k]) <= min {sum_i cost[i, a_i] : sum_i
    q[a_i] = 0}`` for every ``lam`` (weak duality). Bisects ``lam`` (``iters`` halvings of
    a bracket built from the cost spread) so that the total charge of ``argmin_k cost[i,
    k] + lam q[k]`` crosses zero, which maximises the concave ``L``. For optimality-gap
    measurements: ``approx.cost - exact.cost >= 0`` and ``exact.cost - bound >= 0``.

    Reference: Sinha & Zoltners, "The multiple-choice knapsack problem", Oper. Res. 1979
    (the LP relaxation / Lagrangian dual of the multiple-choice knapsack).

    Differentiable: no: the multiplier comes from a bisection, whose derivative by autodiff
    follows the bracket, not the optimum (the bound's gradient is then wrong wherever the final
    argmin's charge is not 0).

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden), e.g. ``-log p``.
        q: ``(K,)`` concrete integer species charges.
        mask: optional ``(N,)`` bool, False on padding atoms.
        allowed: optional ``(N, K)`` bool, the species each atom may take.
        iters: number of bisection halvings (static).

    Returns:
        A :class:`LagrangianBound`; ``bound`` is ``inf`` if an unmasked atom has no
        allowed species.

    Raises:
        ValueError: bad shapes, ``q`` not concrete integers or unable to balance, a
            non-positive ``iters``, or NaN / ``-inf`` on allowed entries of ``cost``.
    """
    check_in_range(iters, "iters", lo=1, integer=True)
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    c = jnp.where(m[:, None], c, 0)
    lam, _, _ = bisect_multiplier(c, m, qi, int(iters))
    red = c + lam * jnp.asarray(qi, c.dtype)
    bound = jnp.sum(jnp.where(m, jnp.min(red, axis=1), 0))
    arg = jnp.argmin(red, axis=1).astype(jnp.int32)
    charge = jnp.sum(jnp.where(m, jnp.asarray(qi, jnp.int32)[arg], 0))
    return LagrangianBound(lam, bound, jnp.where(m, arg, -1), charge)


def project_discrete_approx(cost: Float[Array, "N K"], q: ArrayLike, *,
                            mask: ArrayLike | None = None, allowed: ArrayLike | None = None,
                            iters: int = 60, window: int | None = None) -> DiscreteProjection:
    """Approximate :func:`~jaxkit.kernels.charge.project_discrete`: Lagrangian argmin, then
    a small repair DP.

    1. Bisection on ``lam`` (see :func:`lagrangian_bound`) gives per-atom argmins at the
       bracket ends, with total charges ``>= 0`` (``lo``) and ``<= 0`` (``hi``). Atoms that
       differ between the two (the ones tied at the optimal multiplier) are switched from
       the ``lo`` to the ``hi`` choice in order while the total stays ``>= 0``, leaving a
       residual charge ``R`` in ``[0, qmax - qmin)`` in the usual case.
    2. A repair DP over the *change* in charge, restricted to ``|running change| <=
       window``, picks per-atom switches with minimal reduced cost ``cost[i, k] + lam q[k]
       - (cost[i, a_i] + lam q[a_i])`` whose changes sum to ``-R``; every atom may switch,
       so cheap switches are found wherever they are.

    Time ``O(iters N K + N K window)``. The result is balanced whenever ``feasible`` is
    True, and its cost is never below the exact optimum; ``feasible`` can be False where
    the exact DP succeeds (a repair needing a larger ``window``).

    Reference: Sinha & Zoltners, Oper. Res. 1979 (the LP relaxation has at most one
    fractional atom, so the Lagrangian argmin is nearly balanced).

    Differentiable: yes, in cost: the returned cost (the assignment is an integer, piecewise
    constant).

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden), e.g. ``-log p``.
        q: ``(K,)`` concrete integer species charges.
        mask: optional ``(N,)`` bool, False on padding atoms (assigned ``-1``).
        allowed: optional ``(N, K)`` bool, the species each atom may take.
        iters: number of bisection halvings (static).
        window: half-width of the repair DP's window (static; default ``2 (qmax -
            qmin)``).

    Returns:
        A :class:`~jaxkit.kernels.charge.DiscreteProjection`; on failure the assignment is
        the unconstrained per-atom argmin.

    Raises:
        ValueError: as :func:`lagrangian_bound`, or a negative ``window``.
    """
    check_in_range(iters, "iters", lo=1, integer=True)
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    span = int(qi.max() - qi.min())
    if window is None:
        window = 2 * span
    check_in_range(window, "window", lo=0, integer=True)
    return approx_prepared(c, m, qi, int(iters), int(window))[0]


def approx_prepared(c, m, qi: np.ndarray, iters: int, window: int):
    """:func:`project_discrete_approx` on prepared inputs: ``(result, lam)``, with the
    Lagrange multiplier for reduced-cost fixing."""
    qj = jnp.asarray(qi, jnp.int32)
    cz = jnp.where(m[:, None], c, 0)
    lam, arg_lo, arg_hi = bisect_multiplier(cz, m, qi, iters)

    # base: the lo argmin, switched to the hi argmin atom by atom while the charge stays >= 0
    q_lo = jnp.where(m, qj[arg_lo], 0)
    delta = jnp.where(m, qj[arg_hi], 0) - q_lo  # <= 0: charge is non-increasing in lam
    total_lo = jnp.sum(q_lo)
    switch = (total_lo + jnp.cumsum(delta)) >= 0
    switch = switch & (jnp.cumsum(~switch) == 0)  # a prefix only
    base = jnp.where(switch, arg_hi, arg_lo)
    resid = jnp.sum(jnp.where(m, qj[base], 0))

    red = cz + lam * jnp.asarray(qi, c.dtype)
    red = red - jnp.take_along_axis(red, base[:, None], axis=1)
    red = jnp.where(jnp.arange(qi.shape[0])[None, :] == base[:, None], 0, red)
    width = 2 * window + 1
    target = jnp.clip(window - resid, 0, width - 1)
    offsets = jnp.where(m, qj[base], 0).astype(jnp.int32)
    value, assign = window_dp(red, offsets, m, qi, width, window, target)
    total, charge, complete = score(c, assign, m, qi)
    n_act = jnp.sum(m)
    feasible = (jnp.abs(resid) <= window) & jnp.isfinite(value) & jnp.isfinite(total) \
        & (n_act > 0) & (charge == 0) & complete
    return with_fallback(c, m, qi, assign, total, feasible), lam
