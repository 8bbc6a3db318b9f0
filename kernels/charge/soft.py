"""The Euclidean projection onto charge-balanced simplex rows, and the soft sampling step.

The constraint set is {every unmasked row of an ``(N, K)`` matrix on the probability
simplex, total charge ``sum_i q . p_i = 0``}. Its KKT conditions ``p_i = max(y_i - mu q -
tau_i, 0)`` leave one scalar dual ``mu``; :func:`project_soft` finds it by semismooth
Newton (:mod:`.semismooth`) with a bracketed root search on the non-increasing total
charge ``g(mu)`` as fallback.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..checks import check_in_range, fail, is_traced
from ._checks import check_mask, check_matrix, check_q_real, never_balances
from .semismooth import check_warm, solve_semismooth
from .simplex import _project_rows

__all__ = ["SoftProjection", "project_soft", "relax"]


class SoftProjection(NamedTuple):
    """Result of :func:`project_soft`.

    ``p``: the projection (masked rows unchanged); ``mu``: the scalar dual of the charge
    constraint (``p_i = proj_simplex(y_i - mu q)``); ``feasible``: the constraint set is
    non-empty *and* ``|residual| <= tol``; ``residual``: the total charge
    ``sum_i q . p_i`` of the returned rows; ``n_iter``: root-finding iterations used;
    ``tau``: the row thresholds (``p_i = max(p_i - mu q - tau_i, 0)``; 0 on masked rows).
    Pass the result as ``warm_start`` to the next projection of a nearby matrix (the next
    sampling step)."""

    p: Float[Array, "N K"]
    mu: Float[Array, ""]
    feasible: Bool[Array, ""]
    residual: Float[Array, ""]
    n_iter: Int[Array, ""]
    tau: Float[Array, " N"]


def project_soft(p: Float[Array, "N K"], q: ArrayLike, *, mask: ArrayLike | None = None,
                 tol: float | None = None, max_iter: int = 100,
                 method: str = "semismooth",
                 warm_start: SoftProjection | tuple | None = None) -> SoftProjection:
    """Euclidean projection onto {unmasked rows on the simplex, ``sum_i q . p_i = 0``}.

    ``argmin_x sum_i |x_i - p_i|^2`` over unmasked rows with ``x_i >= 0``, ``sum_k x_ik =
    1`` and ``sum_i q . x_i = 0``. KKT: ``x_i = proj_simplex(p_i - mu q) = max(p_i - mu q
    - tau_i, 0)`` for one scalar ``mu`` and one row threshold ``tau_i`` per atom. Two
    solvers:

    * ``method="semismooth"`` (default): semismooth Newton on the joint KKT system in
      ``(mu, tau)`` (:func:`~jaxkit.kernels.charge.semismooth_newton`): with the current
      supports fixed the system is linear and solved in closed form, one sort-free
      elementwise pass per iteration; on glass-like cells it takes 4-8 iterations. It is
      not globally convergent, so a cell it does not solve within ``min(max_iter, 50)``
      iterations (a cycle, or a flat piece where every row sits on one species) is handed
      to the bracketed search. Under ``vmap`` that search runs only when some cell of the
      batch needs it.
    * ``method="bracketed"``: the total charge ``g(mu)`` is continuous, piecewise linear
      and non-increasing; ``mu`` is found by a safeguarded Newton iteration inside a
      bracket ``[-M, M]`` computed from the data (at ``|mu| = M`` every row sits on its
      extreme-charge species, so ``g(-M) >= 0 >= g(M)``), each evaluation a sort-based
      simplex projection of every row: a Newton step on the current linear piece when it
      lands inside the bracket and shrinks fast enough, bisection otherwise. It stops once
      ``|g(mu)|`` is within tolerance or after ``max_iter`` iterations, keeps the best
      ``mu`` seen, and takes one more Newton step from it (kept if it helps; not counted
      in ``n_iter``).

    References: Qi & Sun, "A nonsmooth version of Newton's method", Math. Programming
    1993 (semismooth Newton); Duchi, Shalev-Shwartz, Singer & Chandra, ICML 2008 (the
    sort-based simplex projection of each evaluation).

    Differentiable: no: its root finding is a while_loop (reverse mode fails; no custom VJP).

    Args:
        p: ``(N, K)`` matrix of species probabilities (any finite reals on unmasked rows).
        q: ``(K,)`` species charges (finite reals; may be traced).
        mask: optional ``(N,)`` bool, False on padding atoms (returned unchanged).
        tol: relative tolerance, scaled by ``n_active * max|q| * max(1, max|p|)`` for the
            charge (default ``64 * eps`` of the dtype: for float32 probabilities, N = 800
            and ``max|q| = 5`` a total charge of at most 0.03, about 100x the rounding
            floor seen in practice) and by ``K * max(1, max|p|)`` for the semismooth
            solver's row sums.
        max_iter: iteration cap of the bracketed search (the semismooth solver stops at
            ``min(max_iter, 50)``); ``n_iter`` counts the iterations of both.
        method: ``"semismooth"`` or ``"bracketed"``.
        warm_start: the result of projecting a nearby matrix (a :class:`SoftProjection`,
            or a ``(mu, tau)`` pair), e.g. the previous sampling step's. The semismooth
            solver then starts from its duals and the supports they imply instead of from
            full supports at ``mu = 0``; the answer is the same projection, usually in
            fewer iterations (carry it through the sampler loop). Non-finite entries start
            cold. Ignored by ``"bracketed"``.

    Returns:
        A :class:`SoftProjection`. ``feasible`` is False when the set is empty (every
        charge of one strict sign, or no unmasked atom) or the tolerance was not met; an
        empty set returns the plain row-wise simplex projection (``mu = 0``).

    Raises:
        ValueError: bad shapes or arguments, concrete ``q`` that can never balance, or
            NaN/inf in ``q`` or in unmasked rows of ``p`` (a run-time error under jit).
    """
    if method not in ("semismooth", "bracketed"):
        raise ValueError(f"`method` must be 'semismooth' or 'bracketed'; got {method!r}")
    p = check_matrix(p, "p")
    n, k = p.shape
    dtype = p.dtype
    q = check_q_real(q, dtype)
    if q.shape[0] != k:
        raise ValueError(f"`p` has {k} species columns but `q` has {q.shape[0]} charges")
    if not is_traced(q):
        msg = never_balances(float(jnp.min(q)), float(jnp.max(q)))
        if msg:
            raise ValueError(msg)
    check_in_range(max_iter, "max_iter", lo=1, integer=True)
    eps = float(jnp.finfo(dtype).eps)
    tol = 64 * eps if tol is None else float(tol)
    if not tol >= 0:
        raise ValueError(f"`tol` must be >= 0; got {tol}")
    m = check_mask(mask, n)
    y = jnp.where(m[:, None], p, 0)
    # max |y| (needed for the tolerance) is finite iff every unmasked entry is: one pass
    # over the cell serves both
    yabs = jnp.max(jnp.abs(y))
    y = fail(y, ~jnp.isfinite(yabs), "`p` contains NaN or inf values on unmasked rows")

    n_act = jnp.sum(m)
    qmin, qmax = jnp.min(q), jnp.max(q)
    possible = (qmin <= 0) & (qmax >= 0) & (n_act > 0)
    # rounding in p grows with |p|, so the tolerance does too
    ymax = jnp.maximum(yabs, 1)
    tol_abs = tol * n_act.astype(dtype) * jnp.max(jnp.abs(q)) * ymax

    def rows_at(mu, tau):
        x = jnp.where(m[:, None], jnp.maximum(y - mu * q - tau[:, None], 0), 0)
        return x, jnp.sum(x @ q)

    if method == "semismooth":
        mu, tau, done, it = solve_semismooth(y, m, q, min(max_iter, 50),
                                             check_warm(warm_start, n, dtype))
        # the constraints are checked too, so an iterate that stalled short of them still
        # goes to the bracketed search
        x, g = rows_at(mu, tau)
        row_err = jnp.max(jnp.where(m, jnp.abs(x @ jnp.ones_like(q) - 1), 0))
        done = done & possible & (jnp.abs(g) <= tol_abs) & (row_err <= tol * k * ymax)
    else:
        mu, tau, done = jnp.zeros((), dtype), jnp.zeros(n, dtype), jnp.zeros((), bool)
        it = jnp.zeros((), jnp.int32)

    # the bracketed search as a loop that runs at most once: under vmap it then runs only
    # when some cell of the batch was not solved above (a cond would run it for all). The
    # optimisation barrier ties the inputs to the loop state; without it XLA hoists the
    # whole loop-invariant search out of the loop and runs it every time.
    def fallback(c):
        done, _, _, it = c
        yb, _ = lax.optimization_barrier((y, done))
        mu, tau, it_b = _bracketed(yb, m, q, possible, tol_abs, eps, max_iter)
        return jnp.ones((), bool), mu, tau, it + it_b

    _, mu, tau, it = lax.while_loop(lambda c: ~c[0], fallback, (done, mu, tau, it))
    x, g = rows_at(mu, tau)
    out = jnp.where(m[:, None], x, p)
    feasible = possible & (jnp.abs(g) <= tol_abs)
    return SoftProjection(out, mu, feasible, g, it, jnp.where(m, tau, 0))


def _bracketed(y, m, q, possible, tol_abs, eps: float, max_iter: int):
    """Safeguarded Newton / bisection on the scalar dual ``mu`` (``method="bracketed"`` of
    :func:`project_soft`). Returns ``(mu, tau, n_iter)`` with ``tau`` the rows' simplex
    thresholds at ``mu`` (``mu = 0`` when the set is empty)."""
    k = y.shape[1]
    dtype = y.dtype
    # bracket: at |mu| >= (row range + 1) / (smallest gap between distinct charges) every
    # non-extreme species is more than 1 below the extreme one, hence out of the support
    qs = jnp.sort(q)
    gaps = jnp.diff(qs) if k > 1 else jnp.zeros(0, dtype)
    gap = jnp.min(jnp.where(gaps > 0, gaps, jnp.inf), initial=jnp.inf)
    gap = jnp.where(jnp.isfinite(gap), gap, 1)
    spread = jnp.max(jnp.where(m, jnp.max(y, axis=1) - jnp.min(y, axis=1), 0))
    big = (spread + 1) / gap + 1

    # sort-based rows: inside the fallback loop of the semismooth route the unrolled
    # Michelot passes compile to a slower projection on XLA:CPU, even when it never runs
    def evaluate(mu):
        x, _ = _project_rows(y - mu * q, method="sort")
        x = jnp.where(m[:, None], x, 0)
        g = jnp.sum(x @ q)
        s = (x > 0).astype(dtype)
        cnt = jnp.sum(s, axis=1)
        sq = s @ q
        slope = jnp.sum(s @ (q * q) - sq * sq / jnp.maximum(cnt, 1))  # = -g'(mu) >= 0
        return g, jnp.maximum(slope, 0)

    def cond(c):
        it, mu, lo, hi, g, slope, dx, best, best_g, best_s = c
        width_ok = hi - lo > 4 * eps * jnp.maximum(jnp.abs(lo) + jnp.abs(hi), 1)
        return possible & (it < max_iter) & (jnp.abs(g) > tol_abs) & width_ok

    def body(c):
        it, mu, lo, hi, g, slope, dx, best, best_g, best_s = c
        lo = jnp.where(g > 0, mu, lo)
        hi = jnp.where(g < 0, mu, hi)
        step = g / jnp.where(slope > 0, slope, 1)
        newton = mu + step
        use = (slope > 0) & (newton > lo) & (newton < hi) & (2 * jnp.abs(step) <= dx)
        new = jnp.where(use, newton, 0.5 * (lo + hi))
        g_new, slope_new = evaluate(new)
        better = jnp.abs(g_new) < jnp.abs(best_g)
        return (it + 1, new, lo, hi, g_new, slope_new, jnp.abs(new - mu),
                jnp.where(better, new, best), jnp.where(better, g_new, best_g),
                jnp.where(better, slope_new, best_s))

    zero = jnp.zeros((), dtype)
    g0, s0 = evaluate(zero)
    init = (jnp.zeros((), jnp.int32), zero, -big, big, g0, s0, 4 * big, zero, g0, s0)
    it, _, _, _, _, _, _, best, best_g, best_slope = lax.while_loop(cond, body, init)
    # polish: the loop stops as soon as |g| <= tol; one more Newton step on the root's
    # linear piece usually takes the residual down to rounding level
    polish = best + best_g / jnp.where(best_slope > 0, best_slope, 1)
    g_pol, _ = evaluate(polish)
    mu = jnp.where((best_slope > 0) & (jnp.abs(g_pol) < jnp.abs(best_g)), polish, best)
    mu = jnp.where(possible, mu, 0)
    _, tau = _project_rows(y - mu * q, method="sort")
    return mu, tau, it


def relax(p: Float[Array, "N K"], q: ArrayLike, eta: float | Float[Array, ""], *,
          mask: ArrayLike | None = None, tol: float | None = None,
          max_iter: int = 100, method: str = "semismooth") -> Float[Array, "N K"]:
    """The per-sampling-step soft move towards the charge-balanced simplex projection.

    ``p + eta (proj(p) - p)`` with ``proj`` the projection of :func:`project_soft`
    (``eta = 1`` is the projection, ``eta = 0`` the identity); the move is a convex
    combination, so rows of ``p`` on the simplex stay there and, when the projection is
    feasible, the total charge is scaled by ``1 - eta``. Feasibility is not reported
    here: call :func:`project_soft` for it (an empty constraint set moves towards the
    plain simplex projection).

    Reference: Duchi et al., ICML 2008 (simplex rows); the projection as in
    :func:`project_soft`.

    Differentiable: no: as project_soft, which it calls.

    Args:
        p: ``(N, K)`` matrix of species probabilities.
        q: ``(K,)`` species charges.
        eta: scalar step in ``[0, 1]`` (checked when concrete; may be traced).
        mask: optional ``(N,)`` bool, False on padding atoms (returned unchanged).
        tol: as in :func:`project_soft`.
        max_iter: as in :func:`project_soft`.
        method: as in :func:`project_soft`.

    Returns:
        The moved ``(N, K)`` matrix.

    Raises:
        ValueError: ``eta`` not a scalar or outside ``[0, 1]``, or as :func:`project_soft`.
    """
    eta = jnp.asarray(eta)
    if eta.shape != ():
        raise ValueError(f"`eta` must be a scalar; got shape {eta.shape}")
    if not is_traced(eta) and not (0 <= float(eta) <= 1):
        raise ValueError(f"`eta` must be in [0, 1]; got {float(eta)}")
    p = check_matrix(p, "p")
    proj = project_soft(p, q, mask=mask, tol=tol, max_iter=max_iter, method=method)
    return p + eta.astype(p.dtype) * (proj.p - p)
