"""The exact discrete charge projection by Lagrangian reduced-cost fixing, with the full
charge DP as its fallback.

Every balanced assignment costs the Lagrangian bound plus its reduced costs, so species
whose reduced cost exceeds the gap between a known balanced assignment and the bound
cannot appear in an optimum; what remains is usually a handful of free atoms, solved
exactly by a narrow repair DP whose window is certified to cover them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..checks import check_in_range
from ._assign import DiscreteProjection, prepare_discrete, score, with_fallback
from .dp import exact_dp, window_dp
from .lagrangian import approx_prepared

__all__ = ["FixingResult", "project_discrete", "reduced_cost_fixing"]


class FixingResult(NamedTuple):
    """Result of :func:`reduced_cost_fixing`: ``assignment`` the repair DP's species per
    atom (``-1`` on masked atoms; balanced and optimal when ``certified``, otherwise not
    to be used) and ``certified``, the proof that it is an optimum."""

    assignment: Int[Array, " N"]
    certified: Bool[Array, ""]


def project_discrete(cost: Float[Array, "N K"], q: ArrayLike, *,
                     mask: ArrayLike | None = None,
                     allowed: ArrayLike | None = None, method: str = "fixing",
                     window: int | None = None) -> DiscreteProjection:
    """Exact charge-balanced assignment: ``argmin sum_i cost[i, a_i]`` over one species per
    unmasked atom subject to ``sum_i q[a_i] = 0`` (a multiple-choice knapsack with an
    equality constraint).

    ``method="dp"``: dynamic programming over the running charge: a ``lax.scan`` over
    atoms, vectorised over a sliding window of
    :func:`~jaxkit.kernels.charge.dp_width` charge states (the charges both reachable
    from the front and able to return to 0; at most ``N (qmax - qmin) + 1``), storing an
    int8 back-pointer per (atom, state) and backtracking with a reverse scan. Time ``O(N
    K W)`` with ``W = O(N)``, memory ``O(N W)`` bytes.

    ``method="fixing"`` (default; the same optimum, time linear in ``N`` when it
    applies): Lagrangian reduced-cost fixing (:func:`reduced_cost_fixing`). When its
    certificate fails (many near-ties), the cell goes to ``method="dp"`` (under ``vmap``
    only when some cell of the batch needs it). Ties between equally good assignments may
    be broken differently from ``"dp"``.

    Ties go to the lowest species index at each DP state; costs are summed in ``cost``'s
    dtype (use float64 when near-ties matter).

    References: Sinha & Zoltners, "The multiple-choice knapsack problem", Oper. Res. 1979;
    reduced-cost fixing as in Nemhauser & Wolsey, "Integer and Combinatorial
    Optimization", 1988.

    Differentiable: yes, in cost: the returned cost sum_i cost[i, a_i] (the assignment is an
    integer, piecewise constant).

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden), e.g. ``-log p``.
        q: ``(K,)`` concrete integer species charges (the DP's shape depends on their
            range).
        mask: optional ``(N,)`` bool, False on padding atoms (assigned ``-1``).
        allowed: optional ``(N, K)`` bool restricting each atom's species (e.g. fix each
            atom's element and let the projection pick its oxidation state).
        method: ``"fixing"`` or ``"dp"``.
        window: half-width of the fixing route's repair DP (static; default ``8 (qmax -
            qmin)``).

    Returns:
        A :class:`~jaxkit.kernels.charge.DiscreteProjection`. If no balanced assignment
        exists ``feasible`` is False and the assignment is the unconstrained per-atom
        argmin.

    Raises:
        ValueError: bad shapes or ``method``, ``q`` not concrete integers or unable to
            balance, a negative ``window``, or NaN / ``-inf`` on allowed entries of
            ``cost`` (a run-time error under jit).
    """
    if method not in ("fixing", "dp"):
        raise ValueError(f"`method` must be 'fixing' or 'dp'; got {method!r}")
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    if method == "dp":
        return exact_dp(c, m, qi)
    assign, certified = _fix(c, m, qi, _check_window(window, qi))

    # the full DP as a loop that runs at most once: under vmap only when some cell of the
    # batch has no certificate; the barrier keeps XLA from hoisting it out of the loop
    def full(carry):
        done, _ = carry
        cb, _ = lax.optimization_barrier((c, done))
        return jnp.ones((), bool), exact_dp(cb, m, qi).assignment

    _, assign = lax.while_loop(lambda carry: ~carry[0], full, (certified, assign))
    total, charge, complete = score(c, assign, m, qi)
    feasible = jnp.isfinite(total) & (jnp.sum(m) > 0) & (charge == 0) & complete
    return with_fallback(c, m, qi, assign, total, feasible)


def reduced_cost_fixing(cost: Float[Array, "N K"], q: ArrayLike, *,
                        mask: ArrayLike | None = None, allowed: ArrayLike | None = None,
                        window: int | None = None, iters: int = 60) -> FixingResult:
    """The certified fast path of :func:`project_discrete` (``method="fixing"``) alone.

    With ``L`` the Lagrangian bound at the multiplier ``lam`` of
    :func:`~jaxkit.kernels.charge.lagrangian_bound` and ``UB`` the cost of the balanced
    assignment of :func:`~jaxkit.kernels.charge.project_discrete_approx`, every balanced
    assignment costs ``L + sum_i r[i, a_i]`` with reduced costs ``r[i, k] = cost[i, k] +
    lam q[k] - min_k' (cost[i, k'] + lam q[k']) >= 0``, so an optimal one only uses
    species with ``r <= UB - L``. Atoms left with one such species are fixed; a repair DP
    over the change of charge from the approximate assignment, restricted to those
    species, is exact when its window covers the largest running change the free atoms
    can make (checked: ``certified``). :func:`project_discrete` runs the full DP on cells
    without a certificate; this function tells how often that happens.

    Reference: Nemhauser & Wolsey, "Integer and Combinatorial Optimization", 1988
    (reduced-cost fixing).

    Differentiable: no: an integer assignment and a boolean certificate.

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden).
        q: ``(K,)`` concrete integer species charges.
        mask: optional ``(N,)`` bool, False on padding atoms.
        allowed: optional ``(N, K)`` bool, the species each atom may take.
        window: half-width of the repair DP (static; default ``8 (qmax - qmin)``).
        iters: bisection halvings for ``lam`` (static).

    Returns:
        A :class:`FixingResult`.

    Raises:
        ValueError: as :func:`project_discrete`, or a non-positive ``iters``.
    """
    if int(iters) != iters or iters < 1:
        raise ValueError(f"`iters` must be a positive integer; got {iters!r}")
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    return FixingResult(*_fix(c, m, qi, _check_window(window, qi), int(iters)))


def _check_window(window, qi: np.ndarray) -> int:
    """The fixing route's repair window (default ``8 (qmax - qmin)``)."""
    window = 8 * int(qi.max() - qi.min()) if window is None else window
    check_in_range(window, "window", lo=0, integer=True)
    return int(window)


def _fix(c, m, qi: np.ndarray, window: int, iters: int = 60):
    """:func:`reduced_cost_fixing` on prepared inputs: ``(assignment, certified)``."""
    dtype = c.dtype
    qj = jnp.asarray(qi, jnp.int32)
    qf = jnp.asarray(qi, dtype)
    cz = jnp.where(m[:, None], c, 0)
    approx, lam = approx_prepared(c, m, qi, iters, 2 * int(qi.max() - qi.min()))
    base = jnp.maximum(approx.assignment, 0)
    lagr = cz + lam * qf
    best = jnp.min(lagr, axis=1)
    red = lagr - best[:, None]  # reduced costs >= 0, inf where forbidden
    bound_gap = approx.cost - jnp.sum(jnp.where(m, best, 0))  # UB - L
    # float slack: the identity cost = L + sum r holds to rounding of sums over N atoms
    scale = jnp.sum(jnp.where(m, jnp.abs(jnp.take_along_axis(cz, base[:, None], 1)[:, 0])
                              + jnp.abs(lam) * jnp.abs(qf[base]), 0))
    gap = bound_gap + 64 * jnp.finfo(dtype).eps * (scale + 1)
    keep = (red <= gap) & m[:, None]
    keep = keep | (jnp.arange(qi.shape[0])[None, :] == base[:, None])
    # how far the running change of charge can stray from 0 along the scan: at most the
    # largest rise the atoms so far can make, and at most the largest fall the atoms
    # after it can make (the total change is 0); the same for the other sign
    dq = jnp.where(keep, qj[None, :] - qj[base][:, None], 0)
    up = jnp.where(m, jnp.max(dq, axis=1), 0)
    down = jnp.where(m, -jnp.min(dq, axis=1), 0)
    pre_up, pre_down = jnp.cumsum(up), jnp.cumsum(down)
    suf_up, suf_down = jnp.sum(up) - pre_up, jnp.sum(down) - pre_down
    reach = jnp.max(jnp.maximum(jnp.minimum(pre_up, suf_down), jnp.minimum(pre_down, suf_up)))
    # repair DP over the change of charge from ``base`` over the kept species only
    rel = jnp.where(keep, cz - jnp.take_along_axis(cz, base[:, None], 1), jnp.inf)
    width = 2 * window + 1
    offsets = jnp.where(m, qj[base], 0).astype(jnp.int32)
    value, assign = window_dp(rel, offsets, m, qi, width, window, window)
    total, charge, complete = score(c, assign, m, qi)
    certified = approx.feasible & (reach <= window) & jnp.isfinite(value) & (charge == 0) \
        & complete
    return jnp.where(m, assign, -1), certified
