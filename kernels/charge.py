"""Charge balance over species channels (AMGenC-style amorphous-cell generation).

A cell has ``N`` atom slots (some of them padding, excluded by a boolean ``mask``) and
``K`` species, each an (element, oxidation state) pair with an integer charge ``q[k]``.
Charge balance is enforced at three points of sampling:

1. :func:`balanced_noise`: iid Gaussian noise conditioned on zero total charge, i.e. the
   orthogonal projection onto the hyperplane ``sum_i q . x_i = 0``.
2. :func:`project_soft` / :func:`relax`: the Euclidean projection of an ``(N, K)`` matrix
   of species probabilities onto {every unmasked row on the probability simplex, total
   charge zero} (semismooth Newton, with a bracketed root search as fallback), and the
   soft step ``p + eta (proj(p) - p)`` applied at each sampling step.
3. :func:`project_discrete`: the exact discrete projection, one species per atom with
   minimal total cost (e.g. ``-log p``) and total charge exactly zero: Lagrangian
   reduced-cost fixing with a small certified dynamic program (time linear in atoms),
   falling back to dynamic programming over the whole running charge;
   :func:`project_discrete_approx` is the Lagrangian route with a small repair DP and no
   certificate, and :func:`lagrangian_bound` exposes its dual bound (a lower bound on
   the exact optimum, for optimality-gap measurements).
4. :func:`project_composition`: the same exact projection with the number of atoms of
   each element prescribed (a design's composition); the balanced oxidation-state splits
   of multivalent elements (:func:`composition_splits`) are enumerated and each solved as
   a transportation problem by successive shortest paths.

Conventions. Masked-out rows are excluded from every constraint: :func:`balanced_noise`
returns zeros there, :func:`project_soft` and :func:`relax` return them unchanged, and the
discrete projections assign them ``-1``. All functions are pure, keep fixed shapes, and run
under ``jit`` and ``vmap`` over cells. The discrete projections need ``q`` as a concrete
array (NumPy or a Python list): its range sets the DP's static state-space size.

Feasibility is reported, never assumed: a result carries ``feasible=False`` when no
balanced answer exists (every charge of one strict sign, no unmasked atom, an atom with
no allowed species, or -- discretely -- no balanced assignment, e.g. Si4+/O2- with an atom
count not divisible by 3). Charges that can never balance (``min q > 0`` or ``max q < 0``)
raise ``ValueError`` when ``q`` is concrete. NaN inputs raise ``ValueError`` on concrete
arrays and an :func:`equinox.error_if` run-time error under ``jit``/``vmap``.

References: Duchi, Shalev-Shwartz, Singer & Chandra, "Efficient projections onto the
l1-ball for learning in high dimensions", ICML 2008 (sort-based simplex projection);
Qi & Sun, "A nonsmooth version of Newton's method", Math. Programming 1993 (semismooth
Newton, here on the piecewise-linear KKT system of the soft projection);
Michelot, "A finite algorithm for finding the projection of a point onto the canonical
simplex of R^n", JOTA 1986 (the sort-free simplex projection); Sinha & Zoltners, "The
multiple-choice knapsack problem", Oper. Res. 1979 (the LP relaxation / Lagrangian dual
of the multiple-choice knapsack); reduced-cost fixing as in Nemhauser & Wolsey,
"Integer and Combinatorial Optimization", 1988; successive shortest paths as in Ahuja,
Magnanti & Orlin, "Network Flows", 1993, ch. 9.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray

from .checks import fail, is_traced

__all__ = [
    "SoftProjection",
    "DiscreteProjection",
    "LagrangianBound",
    "balanced_noise",
    "simplex_rows",
    "project_soft",
    "relax",
    "dp_width",
    "project_discrete",
    "lagrangian_bound",
    "project_discrete_approx",
    "composition_splits",
    "project_composition",
]


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


class DiscreteProjection(NamedTuple):
    """Result of :func:`project_discrete` / :func:`project_discrete_approx`.

    ``assignment``: int32 species index per atom (``-1`` on masked atoms and on atoms with
    no allowed species); ``cost``: ``sum_i cost[i, assignment[i]]`` over unmasked atoms
    (``inf`` if some atom has no allowed species); ``feasible``: the assignment is
    charge-balanced. When ``feasible`` is False the assignment is the unconstrained
    per-atom argmin (over allowed species) and is *not* balanced."""

    assignment: Int[Array, " N"]
    cost: Float[Array, ""]
    feasible: Bool[Array, ""]


class LagrangianBound(NamedTuple):
    """Result of :func:`lagrangian_bound`: ``lam`` the multiplier found by bisection,
    ``bound = sum_i min_k (cost[i, k] + lam q[k])`` (a lower bound on the exact balanced
    optimum for any ``lam``), ``assignment`` the per-atom argmin at ``lam`` (``-1`` on
    masked atoms) and ``charge`` its total charge."""

    lam: Float[Array, ""]
    bound: Float[Array, ""]
    assignment: Int[Array, " N"]
    charge: Int[Array, ""]


# --------------------------------------------------------------------------- checks


def _check_matrix(x, name: str, k: int | None = None):
    x = jnp.asarray(x)
    if x.ndim != 2 or (k is not None and x.shape[1] != k):
        want = "(N, K)" if k is None else f"(N, {k}) with K = len(q)"
        raise ValueError(f"`{name}` must be a 2-D array of shape {want}; got shape {x.shape}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"`{name}` needs at least one atom row and one species column; "
                         f"got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _check_mask(mask, n: int) -> Bool[Array, " N"]:
    if mask is None:
        return jnp.ones(n, bool)
    mask = jnp.asarray(mask)
    if mask.shape != (n,):
        raise ValueError(f"`mask` must have shape (N,) = ({n},); got shape {mask.shape}")
    return mask.astype(bool)


def _check_allowed(allowed, n: int, k: int) -> Bool[Array, "N K"]:
    if allowed is None:
        return jnp.ones((n, k), bool)
    allowed = jnp.asarray(allowed)
    if allowed.shape != (n, k):
        raise ValueError(f"`allowed` must have shape (N, K) = ({n}, {k}); "
                         f"got shape {allowed.shape}")
    return allowed.astype(bool)


def _never_balances(qmin, qmax) -> str | None:
    if qmin > 0:
        return "all charges in `q` are > 0, so no assignment can ever be charge-balanced"
    if qmax < 0:
        return "all charges in `q` are < 0, so no assignment can ever be charge-balanced"
    return None


def _check_q_real(q, dtype) -> Float[Array, " K"]:
    """Charges for the continuous routines: any finite reals; may be traced."""
    q = jnp.asarray(q)
    if q.ndim != 1 or q.shape[0] < 1:
        raise ValueError(f"`q` must be a non-empty 1-D array of species charges; "
                         f"got shape {q.shape}")
    q = q.astype(dtype)
    if not is_traced(q):
        qn = np.asarray(q)
        if not np.all(np.isfinite(qn)):
            raise ValueError("`q` contains NaN or inf values")
    else:
        q = fail(q, ~jnp.all(jnp.isfinite(q)), "`q` contains NaN or inf values")
    return q


def _check_q_int(q) -> np.ndarray:
    """Charges for the discrete routines: a concrete 1-D array of integers."""
    if is_traced(q):
        raise ValueError("`q` must be concrete (a NumPy array or list, not a traced value): "
                         "its range sets the static size of the charge DP. Close over it "
                         "instead of passing it through jit/vmap")
    qn = np.asarray(q)
    if qn.ndim != 1 or qn.shape[0] < 1:
        raise ValueError(f"`q` must be a non-empty 1-D array of species charges; "
                         f"got shape {qn.shape}")
    if qn.dtype == bool or not np.issubdtype(qn.dtype, np.number):
        raise ValueError(f"`q` must hold integer charges; got dtype {qn.dtype}")
    if not np.all(np.isfinite(qn)):
        raise ValueError("`q` contains NaN or inf values")
    if not np.all(qn == np.round(qn)):
        raise ValueError(f"`q` must hold integer charges for the discrete projection; "
                         f"got {qn.tolist()}")
    qi = np.round(qn).astype(np.int64)
    if np.abs(qi).max() > 1000:
        raise ValueError(f"charges in `q` must be at most 1000 in magnitude; got {qi.tolist()}")
    if qi.shape[0] > 32767:
        raise ValueError(f"at most 32767 species are supported; got {qi.shape[0]}")
    msg = _never_balances(qi.min(), qi.max())
    if msg:
        raise ValueError(msg)
    return qi


# --------------------------------------------------------------------------- noise


def balanced_noise(key: PRNGKeyArray, shape: tuple[int, int], q: ArrayLike, *,
                   mask: ArrayLike | None = None, dtype=jnp.float32) -> Float[Array, "N K"]:
    """Gaussian noise conditioned on zero total charge.

    Draws ``x`` iid N(0, 1) of ``shape = (N, K)``, zeroes masked rows, and returns the
    orthogonal projection ``x - (<v, x> / |v|^2) v`` with ``v[i, k] = mask[i] q[k]``: the
    conditional law of ``x`` given ``sum_i q . x_i = 0`` (covariance ``I - v v^T/|v|^2``
    on the unmasked entries, zero on masked rows). With ``q = 0`` or no unmasked atom the
    constraint is vacuous and the (masked) noise is returned as drawn.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"`shape` must be (N, K); got {shape}")
    n, k = shape
    q = _check_q_real(q, dtype)
    if q.shape[0] != k:
        raise ValueError(f"`shape[1]` ({k}) must equal len(q) ({q.shape[0]})")
    m = _check_mask(mask, n)
    x = jnp.where(m[:, None], jax.random.normal(key, shape, dtype), 0)
    v = jnp.where(m[:, None], q[None, :], 0)
    vv = jnp.sum(v * v)
    coef = jnp.sum(v * x) / jnp.where(vv > 0, vv, 1)
    return x - coef * v


# --------------------------------------------------------------------------- soft

#: up to this many species the projections unroll the species axis (see simplex_rows)
_UNROLL_K = 32


def simplex_rows(z: Float[Array, "... K"]) -> tuple[Float[Array, "... K"], Float[Array, "..."]]:
    """Euclidean projection of every row of ``z`` onto the probability simplex.

    ``p = max(z - tau, 0)`` with the row threshold ``tau`` solving ``sum_k p_k = 1``.
    Returns ``(p, tau)``. For up to :data:`_UNROLL_K` species, Michelot's finite algorithm
    (Michelot 1986): from the full support, ``tau <- (sum_{z > tau} z - 1) / #{z > tau}``
    increases monotonically and reaches the exact threshold once the support stops
    shrinking (at most ``K`` passes, usually 2-4), computed sort-free with the species
    unrolled so that the passes vectorise over rows; for more species the sort-based
    rule of Duchi et al. (2008). Either way the support is found without gradient and
    ``tau`` is then recomputed from it, so ``jax.grad`` sees the exact (almost everywhere)
    derivative. Written here rather than taken from
    :func:`optax.projections.projection_simplex`, which projects a whole pytree onto one
    simplex (rows would need a ``vmap``), sorts, and does not return ``tau``."""
    k = z.shape[-1]
    if k > _UNROLL_K:
        return _simplex_sort(z)
    zs = [z[..., j] for j in range(k)]
    zc = [lax.stop_gradient(c) for c in zs]

    def body(c):
        _, s, tau = c
        # supports only shrink (as in exact arithmetic), so rounding at z ~ tau cannot
        # make the loop cycle: it ends after at most K passes
        s_new = [sj & (c > tau) for sj, c in zip(s, zc, strict=True)]
        sf = [sj.astype(z.dtype) for sj in s_new]
        tau_new = (_ksum([sj * c for sj, c in zip(sf, zc, strict=True)]) - 1) / _ksum(sf)
        same = jnp.all(jnp.stack([a == b for a, b in zip(s_new, s, strict=True)]))
        return same, s_new, tau_new

    tau0 = (_ksum(zc) - 1) / k
    full = [jnp.ones(tau0.shape, bool)] * k
    _, s, _ = lax.while_loop(lambda c: ~c[0], body, (jnp.zeros((), bool), full, tau0))
    # tau recomputed on the final support, differentiably
    sf = [lax.stop_gradient(sj.astype(z.dtype)) for sj in s]
    tau = (_ksum([sj * c for sj, c in zip(sf, zs, strict=True)]) - 1) / _ksum(sf)
    return jnp.maximum(z - tau[..., None], 0), tau


def _simplex_sort(z):
    """Sort-based simplex projection of rows (Duchi et al. 2008): ``(p, tau)``."""
    k = z.shape[-1]
    u = -jnp.sort(-z, axis=-1)
    css = jnp.cumsum(u, axis=-1) - 1
    idx = jnp.arange(1, k + 1, dtype=z.dtype)
    rho = jnp.sum(u - css / idx > 0, axis=-1)  # >= 1: the largest entry always passes
    tau = jnp.take_along_axis(css, jnp.maximum(rho, 1)[..., None] - 1, axis=-1)[..., 0]
    tau = tau / jnp.maximum(rho, 1).astype(z.dtype)
    return jnp.maximum(z - tau[..., None], 0), tau


def _ksum(terms):
    """Sum of a Python list of equal-shape arrays, written out so XLA fuses it into one
    elementwise loop over atoms (a reduction over a short minor axis of size K is several
    times slower on XLA:CPU than K fused adds over the atom axis)."""
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _kmax(terms):
    out = terms[0]
    for t in terms[1:]:
        out = jnp.maximum(out, t)
    return out


def _semismooth(y, m, q, n_max: int, warm=None):
    """Semismooth Newton on the joint KKT system in ``(mu, tau_1..tau_N)``.

    ``p_ik = max(y_ik - mu q_k - tau_i, 0)``, ``sum_k p_ik = 1`` and ``sum_ik q_k p_ik = 0``.
    With the supports ``S_i`` held fixed the system is linear: ``tau_i = (Y_i - 1 - mu Q_i)
    / n_i`` (``n_i``, ``Y_i``, ``Q_i`` the size, sum of ``y`` and sum of ``q`` over
    ``S_i``) and the charge equation then gives ``mu`` in closed form. Each iteration
    solves on the current supports and recomputes them from the solution; the support
    always holds each row's largest entry (it is in every simplex projection's support).
    When the recomputed supports equal those solved on, the iterate is a fixed point: its
    ``p`` is non-negative, zero off the supports, sums to 1 per row and has zero charge,
    i.e. it satisfies the KKT conditions and is the projection. The loop also stops when
    the iterate no longer moves (to rounding); the caller checks the constraints. Starts
    from full supports at ``mu = 0``, or, given ``warm = (mu0, tau0)`` (the duals of a
    nearby problem), from ``mu0`` and the supports ``y - mu0 q - tau0`` imply. Returns
    ``(mu, tau, converged, n_iter)``. Not globally convergent (it may cycle, or meet a
    flat piece where every row sits on one species): the caller falls back to the
    bracketed root search when ``converged`` is False."""
    n, k = y.shape
    dtype = y.dtype
    eps = jnp.finfo(dtype).eps
    # (K, N): each species a contiguous row, so the K-term sums vectorise (XLA slices the
    # species out of the (N, K) input once, before the loop)
    yt = y.T
    ys = [yt[j] for j in range(k)]
    qs = [q[j] for j in range(k)]

    # the supports are kept as bit masks, 31 species per int32 word: one pass over the cell
    # computes them, and the support sums below read one integer per row instead of
    # recomputing the support (XLA:CPU fuses each sum separately, so without this every
    # sum re-derived the support from all K columns)
    words = [list(range(w, min(w + 31, k))) for w in range(0, k, 31)]

    def support_bits(mu, tau):
        d = [yj - mu * qj - tau for yj, qj in zip(ys, qs, strict=True)]
        dmax = _kmax(d)  # a row's largest entry is in every simplex projection's support
        s = [((dj > 0) | (dj >= dmax)) & m for dj in d]
        return tuple(_ksum([s[j].astype(jnp.int32) << (j - w[0]) for j in w]) for w in words)

    def solve(bits, mu_old):
        """The linear KKT system with the supports fixed, in closed form."""
        sf = [((bits[j // 31] >> (j % 31)) & 1).astype(dtype) for j in range(k)]
        cnt = jnp.maximum(_ksum(sf), 1)
        # (s y) q, not s (q y): a loop-invariant q y would be hoisted into K extra arrays
        t = [sj * yj for sj, yj in zip(sf, ys, strict=True)]
        sy = _ksum(t)
        sqy = _ksum([tj * qj for tj, qj in zip(t, qs, strict=True)])
        sq = _ksum([sj * qj for sj, qj in zip(sf, qs, strict=True)])
        sqq = _ksum([sj * (qj * qj) for sj, qj in zip(sf, qs, strict=True)])
        # one stacked reduction, not two (each would re-derive the row terms)
        num, den = jnp.sum(jnp.where(m, jnp.stack([sqy - sq * (sy - 1) / cnt,
                                                   jnp.maximum(sqq - sq * sq / cnt, 0)]),
                                     0), axis=-1)
        flat = ~(den > 0)
        mu = jnp.where(flat, mu_old, num / jnp.where(flat, 1, den))
        tau = jnp.where(m, (sy - 1 - mu * sq) / cnt, 0)
        return mu, tau, flat

    def body(c):
        it, bits, mu_old, tau_old, _, _ = c
        mu, tau, flat = solve(bits, mu_old)
        new = lax.optimization_barrier(support_bits(mu, tau))  # computed once, not twice
        # the supports the iterate was solved on reproduce: a fixed point, the projection
        same = jnp.all(jnp.stack([(a == b) | ~m for a, b in zip(new, bits, strict=True)]))
        # or the iterate no longer moves: supports that differ only in entries at zero to
        # rounding (in float32 they can flip back and forth for ever)
        still = (it > 0) & (jnp.abs(mu - mu_old) <= 8 * eps * (1 + jnp.abs(mu))) & jnp.all(
            jnp.abs(tau - tau_old) <= 8 * eps * (1 + jnp.abs(tau)))
        return it + 1, new, mu, tau, same | still, flat

    def cond(c):
        it, _, _, _, same, flat = c
        return (it < n_max) & ~same & ~flat

    false = jnp.zeros((), bool)
    if warm is None:
        # every species in every support (the threshold of the full row at mu = 0)
        mu0, tau0 = jnp.zeros((), dtype), jnp.zeros(n, dtype)
        bits0 = tuple(jnp.where(m, (1 << len(w)) - 1, 0).astype(jnp.int32) for w in words)
    else:
        mu0, tau0 = warm
        bits0 = support_bits(mu0, tau0)
    it, _, mu, tau, same, flat = lax.while_loop(
        cond, body, (jnp.zeros((), jnp.int32), bits0, mu0, tau0, false, false))
    # on a flat piece the charge equation was not imposed: not a KKT point
    return mu, tau, same & ~flat, it


def project_soft(p: Float[Array, "N K"], q: ArrayLike, *, mask: ArrayLike | None = None,
                 tol: float | None = None, max_iter: int = 100,
                 method: str = "semismooth",
                 warm_start: SoftProjection | tuple | None = None) -> SoftProjection:
    """Euclidean projection onto {unmasked rows on the simplex, ``sum_i q . p_i = 0``}.

    KKT: ``p_i = proj_simplex(p_i - mu q) = max(p_i - mu q - tau_i, 0)`` for one scalar
    ``mu`` and one row threshold ``tau_i`` per atom. Two solvers:

    * ``method="semismooth"`` (default): semismooth Newton on the joint KKT system in
      ``(mu, tau)`` (see :func:`_semismooth`): with the current supports fixed the system
      is linear and solved in closed form, one sort-free elementwise pass per iteration;
      on glass-like cells it converges in 4-8 iterations. It is not globally convergent,
      so a cell it does not solve within ``min(max_iter, 50)`` iterations (a cycle, or a
      flat piece where every row sits on one species) is handed to the bracketed search.
      Under ``vmap`` that search runs only when some cell of the batch needs it.
    * ``method="bracketed"``: the total charge ``g(mu)`` is continuous, piecewise linear
      and non-increasing; ``mu`` is found by a safeguarded Newton iteration inside a
      bracket ``[-M, M]`` computed from the data (at ``|mu| = M`` every row sits on its
      extreme-charge species, so ``g(-M) >= 0 >= g(M)``), each evaluation a sort-based
      simplex projection of every row: a Newton step on the current linear piece when it
      lands inside the bracket and shrinks fast enough, bisection otherwise. It stops once
      ``|g(mu)|`` is within tolerance or after ``max_iter`` iterations, keeps the best
      ``mu`` seen, and takes one more Newton step from it (kept if it helps; not counted
      in ``n_iter``).

    ``warm_start``: the result of projecting a nearby matrix (a :class:`SoftProjection`,
    or a ``(mu, tau)`` pair), e.g. the previous sampling step's. The semismooth solver then
    starts from its duals and the supports they imply instead of from full supports at
    ``mu = 0``; the answer is the same projection, usually in fewer iterations (carry it
    through the sampler loop). Non-finite entries start cold. Ignored by ``"bracketed"``.

    ``tol`` is relative to ``n_active * max|q| * max(1, max|p|)`` for the charge (default
    ``64 * eps`` of the dtype: for float32 probabilities, N = 800 and ``max|q| = 5`` a total
    charge of at most 0.03, about 100x the rounding floor seen in practice) and to
    ``K * max(1, max|p|)`` for the semismooth solver's row sums. ``n_iter`` counts the
    iterations of both solvers. ``feasible`` is False when the set is empty (every charge of
    one strict sign, or no unmasked atom) or the tolerance was not met; an empty set
    returns the plain row-wise simplex projection (``mu = 0``). Raises ``ValueError`` for
    concrete ``q`` that can never balance. Masked rows are returned unchanged.
    """
    if method not in ("semismooth", "bracketed"):
        raise ValueError(f"`method` must be 'semismooth' or 'bracketed'; got {method!r}")
    p = _check_matrix(p, "p")
    n, k = p.shape
    dtype = p.dtype
    q = _check_q_real(q, dtype)
    if q.shape[0] != k:
        raise ValueError(f"`p` has {k} species columns but `q` has {q.shape[0]} charges")
    if not is_traced(q):
        msg = _never_balances(float(jnp.min(q)), float(jnp.max(q)))
        if msg:
            raise ValueError(msg)
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"`max_iter` must be a positive integer; got {max_iter!r}")
    eps = float(jnp.finfo(dtype).eps)
    tol = 64 * eps if tol is None else float(tol)
    if not tol >= 0:
        raise ValueError(f"`tol` must be >= 0; got {tol}")
    m = _check_mask(mask, n)
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

    zero = jnp.zeros((), dtype)
    def rows_at(mu, tau):
        x = jnp.where(m[:, None], jnp.maximum(y - mu * q - tau[:, None], 0), 0)
        return x, jnp.sum(x @ q)

    if method == "semismooth":
        mu, tau, done, it = _semismooth(y, m, q, min(max_iter, 50),
                                        _check_warm(warm_start, n, dtype))
        # the constraints are checked too, so an iterate that stalled short of them still
        # goes to the bracketed search
        x, g = rows_at(mu, tau)
        row_err = jnp.max(jnp.where(m, jnp.abs(x @ jnp.ones_like(q) - 1), 0))
        done = done & possible & (jnp.abs(g) <= tol_abs) & (row_err <= tol * k * ymax)
    else:
        mu, tau, done = zero, jnp.zeros(n, dtype), jnp.zeros((), bool)
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


def _check_warm(warm, n: int, dtype):
    """``(mu0, tau0)`` from a ``warm_start`` argument (None stays None)."""
    if warm is None:
        return None
    if isinstance(warm, SoftProjection):
        mu0, tau0 = warm.mu, warm.tau
    else:
        try:
            mu0, tau0 = warm
        except (TypeError, ValueError):
            raise ValueError("`warm_start` must be a SoftProjection or a (mu, tau) pair; "
                             f"got {type(warm).__name__}") from None
    mu0, tau0 = jnp.asarray(mu0, dtype), jnp.asarray(tau0, dtype)
    if mu0.shape != () or tau0.shape != (n,):
        raise ValueError(f"`warm_start` must hold a scalar mu and tau of shape ({n},); got "
                         f"shapes {mu0.shape} and {tau0.shape}")
    ok = jnp.isfinite(mu0) & jnp.all(jnp.isfinite(tau0))
    return jnp.where(ok, mu0, 0), jnp.where(ok, tau0, 0)


def _bracketed(y, m, q, possible, tol_abs, eps: float, max_iter: int):
    """Safeguarded Newton / bisection on the scalar dual ``mu`` (``method="bracketed"`` of
    :func:`project_soft`), with sort-based simplex rows (inside the fallback loop of the
    semismooth route the unrolled :func:`simplex_rows` made XLA:CPU compile a slower
    projection, even when the fallback never runs). Returns ``(mu, tau,
    n_iter)`` with ``tau`` the rows' simplex thresholds at ``mu`` (``mu = 0`` when the set
    is empty)."""
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

    def evaluate(mu):
        x, _ = _simplex_sort(y - mu * q)
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
    _, tau = _simplex_sort(y - mu * q)
    return mu, tau, it


def relax(p: Float[Array, "N K"], q: ArrayLike, eta: float | Float[Array, ""], *,
          mask: ArrayLike | None = None, tol: float | None = None,
          max_iter: int = 100, method: str = "semismooth") -> Float[Array, "N K"]:
    """The per-sampling-step soft move ``p + eta (proj(p) - p)`` towards the charge-balanced
    simplex projection of :func:`project_soft` (``eta`` in [0, 1]; ``eta = 1`` is the
    projection). Masked rows are returned unchanged. Feasibility is not reported here:
    call :func:`project_soft` for it (an empty constraint set moves towards the plain
    simplex projection)."""
    eta = jnp.asarray(eta)
    if eta.shape != ():
        raise ValueError(f"`eta` must be a scalar; got shape {eta.shape}")
    if not is_traced(eta) and not (0 <= float(eta) <= 1):
        raise ValueError(f"`eta` must be in [0, 1]; got {float(eta)}")
    p = _check_matrix(p, "p")
    proj = project_soft(p, q, mask=mask, tol=tol, max_iter=max_iter, method=method)
    return p + eta.astype(p.dtype) * (proj.p - p)


# --------------------------------------------------------------------------- discrete DP


def dp_width(n_atoms: int, q: ArrayLike) -> int:
    """Static number of charge states the exact DP keeps per atom.

    After ``a`` of ``n`` atoms the running charge must lie in ``[a qmin, a qmax]`` (reached
    from the front) and in ``[-(n-a) qmax, -(n-a) qmin]`` (able to reach 0 with the rest);
    the DP keeps a sliding window of the widest such intersection instead of all
    ``n (qmax - qmin) + 1`` charges."""
    qi = _check_q_int(q)
    qmin, qmax = int(qi.min()), int(qi.max())
    a = np.arange(int(n_atoms) + 1)
    r = int(n_atoms) - a
    width = np.minimum(a * qmax, -r * qmin) - np.maximum(a * qmin, -r * qmax) + 1
    return int(max(width.max(), 1))


def _dp(costs, offsets, active, q: np.ndarray, width: int, start, target):
    """Min-cost paths over a sliding charge window; one ``lax.scan`` step per atom.

    ``costs`` (N, K): cost of each species per atom (inf = forbidden); ``offsets`` (N,):
    the window index of the predecessor of state ``j`` through species ``k`` is
    ``j + offsets[i] - q[k]``; ``active`` (N,): inactive atoms pass states through
    unchanged. Returns ``(value at target, assignment)`` with ``-1`` on inactive atoms."""
    k = q.shape[0]
    qmin, qmax = int(q.min()), int(q.max())
    pad = qmax - qmin
    bp_dtype = jnp.int8 if k <= 127 else jnp.int16
    dtype = costs.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    init = jnp.full(width, inf).at[start].set(0)

    def forward(v, xs):
        c, o, act = xs
        vp = jnp.pad(v, (pad, pad), constant_values=jnp.inf)
        win = lax.dynamic_slice(vp, (pad + o - qmax,), (width + pad,))
        best = win[qmax - int(q[0]):qmax - int(q[0]) + width] + c[0]
        arg = jnp.zeros(width, bp_dtype)
        for s in range(1, k):
            lo = qmax - int(q[s])
            cand = win[lo:lo + width] + c[s]
            better = cand < best
            best = jnp.where(better, cand, best)
            arg = jnp.where(better, jnp.asarray(s, bp_dtype), arg)
        return jnp.where(act, best, v), jnp.where(act, arg, jnp.asarray(-1, bp_dtype))

    final, bp = lax.scan(forward, init, (costs, offsets, active))
    qj = jnp.asarray(q, jnp.int32)

    def backward(j, xs):
        row, o = xs
        s = row[j].astype(jnp.int32)
        j_prev = j + o - jnp.where(s >= 0, qj[jnp.maximum(s, 0)], 0)
        return j_prev, s

    _, assign = lax.scan(backward, jnp.asarray(target, jnp.int32), (bp, offsets),
                         reverse=True)
    return final[target], assign


def _prepare_discrete(cost, q, mask, allowed):
    qi = _check_q_int(q)
    cost = _check_matrix(cost, "cost", qi.shape[0])
    n, k = cost.shape
    m = _check_mask(mask, n)
    ok = _check_allowed(allowed, n, k) & m[:, None]
    bad = ok & (jnp.isnan(cost) | (cost == -jnp.inf))
    cost = fail(cost, jnp.any(bad), "`cost` contains NaN or -inf values on unmasked, "
                 "allowed entries (use +inf to forbid a species)")
    c = jnp.where(ok, cost, jnp.inf)
    return qi, c, m


def _fallback(c, m, qi):
    """Unconstrained per-atom argmin (``-1`` on masked atoms / atoms with nothing allowed)."""
    arg = jnp.argmin(c, axis=1).astype(jnp.int32)
    has = jnp.any(jnp.isfinite(c), axis=1)
    return jnp.where(m & has, arg, -1)


def _score(cost_masked, assign, m, qi):
    """(total cost, total charge, every unmasked atom assigned) of an assignment."""
    got = assign >= 0
    a = jnp.maximum(assign, 0)
    ci = jnp.take_along_axis(cost_masked, a[:, None], axis=1)[:, 0]
    total = jnp.sum(jnp.where(m, jnp.where(got, ci, jnp.inf), 0))
    charge = jnp.sum(jnp.where(m & got, jnp.asarray(qi, jnp.int32)[a], 0))
    return total, charge, jnp.all(got | ~m)


def project_discrete(cost: Float[Array, "N K"], q: ArrayLike, *,
                     mask: ArrayLike | None = None,
                     allowed: ArrayLike | None = None, method: str = "fixing",
                     window: int | None = None) -> DiscreteProjection:
    """Exact charge-balanced assignment: ``argmin sum_i cost[i, a_i]`` over one species per
    unmasked atom subject to ``sum_i q[a_i] = 0`` (a multiple-choice knapsack with an
    equality constraint).

    ``method="dp"``: dynamic programming over the running charge: a ``lax.scan`` over
    atoms, vectorised over a sliding window of :func:`dp_width` charge states (the charges
    both reachable from the front and able to return to 0; at most ``N (qmax - qmin) +
    1``), storing an int8 back-pointer per (atom, state) and backtracking with a reverse
    scan. Time ``O(N K W)`` with ``W = O(N)``, memory ``O(N W)`` bytes.

    ``method="fixing"`` (default; the same optimum, time linear in ``N`` when it
    applies): Lagrangian reduced-cost fixing. With ``L`` the Lagrangian bound at the
    multiplier ``lam`` of :func:`lagrangian_bound` and ``UB`` the cost of the balanced
    assignment of :func:`project_discrete_approx`, every balanced assignment costs ``L +
    sum_i r[i, a_i]`` with reduced costs ``r[i, k] = cost[i, k] + lam q[k] - min_k'(...)
    >= 0``, so an optimal one only uses species with ``r <= UB - L``. Atoms left with one
    such species are fixed; a repair DP over the change of charge from the approximate
    assignment, restricted to those species, is exact when its window (``window``,
    default ``8 (qmax - qmin)``) covers the largest running change the free atoms can
    make. When
    it does not (many near-ties), the cell goes to ``method="dp"`` (under ``vmap`` only
    when some cell of the batch needs it). Ties between equally good assignments may be
    broken differently from ``"dp"``.

    ``cost`` holds finite values or ``+inf`` (forbidden); ``q`` must be a concrete integer
    array (the DP's shape depends on its range); ``allowed`` (N, K) bool restricts each
    atom's species (e.g. fix each atom's element and let the DP pick its oxidation state).
    Ties go to the lowest species index at each DP state; costs are summed in ``cost``'s
    dtype (use float64 when near-ties matter). If no balanced assignment exists
    ``feasible`` is False and the assignment is the unconstrained per-atom argmin.
    """
    if method not in ("fixing", "dp"):
        raise ValueError(f"`method` must be 'fixing' or 'dp'; got {method!r}")
    qi, c, m = _prepare_discrete(cost, q, mask, allowed)
    if method == "dp":
        return _exact_dp(c, m, qi)
    span = int(qi.max() - qi.min())
    window = 8 * span if window is None else window
    if int(window) != window or window < 0:
        raise ValueError(f"`window` must be a non-negative integer; got {window!r}")
    assign, certified = _fixing(c, m, qi, int(window))

    # the full DP as a loop that runs at most once: under vmap only when some cell of the
    # batch has no certificate; the barrier keeps XLA from hoisting it out of the loop
    def full(carry):
        done, _ = carry
        cb, _ = lax.optimization_barrier((c, done))
        return jnp.ones((), bool), _exact_dp(cb, m, qi).assignment

    _, assign = lax.while_loop(lambda carry: ~carry[0], full, (certified, assign))
    total, charge, complete = _score(c, assign, m, qi)
    feasible = jnp.isfinite(total) & (jnp.sum(m) > 0) & (charge == 0) & complete
    fb = _fallback(c, m, qi)
    fb_total, _, _ = _score(c, fb, m, qi)
    return DiscreteProjection(jnp.where(feasible, assign, fb),
                              jnp.where(feasible, total, fb_total), feasible)


def _exact_dp(c, m, qi) -> DiscreteProjection:
    """``method="dp"`` of :func:`project_discrete` on prepared inputs."""
    n, _ = c.shape
    qmin, qmax = int(qi.min()), int(qi.max())
    width = dp_width(n, qi)
    a = jnp.cumsum(m.astype(jnp.int32))
    n_act = a[-1]
    lo = jnp.maximum(a * qmin, -(n_act - a) * qmax)
    lo_prev = jnp.concatenate([jnp.zeros(1, lo.dtype), lo[:-1]])  # lo before any atom is 0
    value, assign = _dp(jnp.where(m[:, None], c, 0), (lo - lo_prev).astype(jnp.int32), m,
                        qi, width, 0, 0)
    total, charge, complete = _score(c, assign, m, qi)
    feasible = jnp.isfinite(value) & jnp.isfinite(total) & (n_act > 0) & (charge == 0) \
        & complete
    fb = _fallback(c, m, qi)
    fb_total, _, _ = _score(c, fb, m, qi)
    return DiscreteProjection(jnp.where(feasible, assign, fb),
                              jnp.where(feasible, total, fb_total), feasible)


def _fixing(c, m, qi, window: int, iters: int = 60):
    """Reduced-cost fixing (see :func:`project_discrete`): ``(assignment, certified)``;
    ``certified`` means the assignment is a proven optimum."""
    dtype = c.dtype
    qj = jnp.asarray(qi, jnp.int32)
    qf = jnp.asarray(qi, dtype)
    cz = jnp.where(m[:, None], c, 0)
    approx, lam = _approx(c, m, qi, iters, 2 * int(qi.max() - qi.min()))
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
    value, assign = _dp(rel, offsets, m, qi, width, window, window)
    total, charge, complete = _score(c, assign, m, qi)
    certified = approx.feasible & (reach <= window) & jnp.isfinite(value) & (charge == 0) \
        & complete
    return jnp.where(m, assign, -1), certified


# --------------------------------------------------------------------------- Lagrangian


def _lagrangian(c, m, qi, iters: int):
    """Bisection on ``lam`` for the total charge of ``argmin_k c[i, k] + lam q[k]``.

    Returns ``(lam, lo, hi, arg_lo, arg_hi)``: the bracket ends with charge ``>= 0`` at
    ``lo`` and ``<= 0`` at ``hi`` (when attainable) and their per-atom argmins."""
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
    """Lagrangian relaxation of :func:`project_discrete`'s charge constraint.

    Bisects ``lam`` (``iters`` halvings of a bracket built from the cost spread) so that
    the total charge of ``argmin_k cost[i, k] + lam q[k]`` crosses zero; returns ``lam``,
    the dual value ``sum_i min_k (cost[i, k] + lam q[k])`` -- a lower bound on the exact
    optimum whenever a balanced assignment exists (``inf`` if an unmasked atom has no
    allowed species) -- and the argmin at ``lam`` with its charge. For optimality-gap
    measurements: ``approx.cost - exact.cost >= 0`` and ``exact.cost - bound >= 0``."""
    if int(iters) != iters or iters < 1:
        raise ValueError(f"`iters` must be a positive integer; got {iters!r}")
    qi, c, m = _prepare_discrete(cost, q, mask, allowed)
    c = jnp.where(m[:, None], c, 0)
    lam, _, _ = _lagrangian(c, m, qi, int(iters))
    red = c + lam * jnp.asarray(qi, c.dtype)
    bound = jnp.sum(jnp.where(m, jnp.min(red, axis=1), 0))
    arg = jnp.argmin(red, axis=1).astype(jnp.int32)
    charge = jnp.sum(jnp.where(m, jnp.asarray(qi, jnp.int32)[arg], 0))
    return LagrangianBound(lam, bound, jnp.where(m, arg, -1), charge)


def project_discrete_approx(cost: Float[Array, "N K"], q: ArrayLike, *,
                            mask: ArrayLike | None = None, allowed: ArrayLike | None = None,
                            iters: int = 60, window: int | None = None) -> DiscreteProjection:
    """Approximate :func:`project_discrete`: Lagrangian argmin, then a small repair DP.

    1. Bisection on ``lam`` (see :func:`lagrangian_bound`) gives per-atom argmins at the
       bracket ends, with total charges ``>= 0`` (``lo``) and ``<= 0`` (``hi``). Atoms that
       differ between the two (the ones tied at the optimal multiplier) are switched from
       the ``lo`` to the ``hi`` choice in order while the total stays ``>= 0``, leaving a
       residual charge ``R`` in ``[0, qmax - qmin)`` in the usual case.
    2. A repair DP over the *change* in charge, restricted to ``|running change| <=
       window`` (default ``2 (qmax - qmin)``), picks per-atom switches with minimal reduced
       cost ``cost[i, k] + lam q[k] - (cost[i, a_i] + lam q[a_i])`` whose changes sum to
       ``-R``; every atom may switch, so cheap switches are found wherever they are.

    Time ``O(iters N K + N K window)``. The result is balanced whenever ``feasible`` is
    True, and its cost is never below the exact optimum; ``feasible`` can be False where
    the exact DP succeeds (a repair needing a larger ``window``). On failure the
    assignment is the unconstrained per-atom argmin, as in :func:`project_discrete`.
    """
    if int(iters) != iters or iters < 1:
        raise ValueError(f"`iters` must be a positive integer; got {iters!r}")
    qi, c, m = _prepare_discrete(cost, q, mask, allowed)
    span = int(qi.max() - qi.min())
    if window is None:
        window = 2 * span
    if int(window) != window or window < 0:
        raise ValueError(f"`window` must be a non-negative integer; got {window!r}")
    return _approx(c, m, qi, int(iters), int(window))[0]


def _approx(c, m, qi, iters: int, window: int):
    """:func:`project_discrete_approx` on prepared inputs: ``(result, lam)``, with the
    Lagrange multiplier for :func:`_fixing`."""
    qj = jnp.asarray(qi, jnp.int32)
    cz = jnp.where(m[:, None], c, 0)
    lam, arg_lo, arg_hi = _lagrangian(cz, m, qi, iters)

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
    value, assign = _dp(red, offsets, m, qi, width, window, target)
    total, charge, complete = _score(c, assign, m, qi)
    n_act = jnp.sum(m)
    feasible = (jnp.abs(resid) <= window) & jnp.isfinite(value) & jnp.isfinite(total) \
        & (n_act > 0) & (charge == 0) & complete
    fb = _fallback(c, m, qi)
    fb_total, _, _ = _score(c, fb, m, qi)
    return DiscreteProjection(jnp.where(feasible, assign, fb),
                              jnp.where(feasible, total, fb_total), feasible), lam


# --------------------------------------------------------------------------- composition


def composition_splits(q: ArrayLike, element: ArrayLike, counts: ArrayLike, *,
                       max_splits: int = 4096) -> np.ndarray:
    """Every charge-balanced species-count vector of a fixed composition.

    ``element`` (K,) gives each species' element index (species of one element, e.g.
    Fe2+ and Fe3+, share it) and ``counts`` (E,) the number of atoms of each element.
    Returns an int array ``(S, K)`` of species counts ``n`` with ``sum_{k in e} n_k =
    counts[e]`` and ``sum_k n_k q_k = 0`` (``S = 0`` when the composition cannot
    balance). Single-valent elements have one split each; with one multivalent element
    of two oxidation states the balance fixes its split, and each further multivalent
    element adds more (Fe2+/3+ with Mn2+/3+/4+ can leave several). Host-side enumeration,
    element by element, of the partial splits grouped by their charge; raises
    ``ValueError`` above ``max_splits``."""
    qi = _check_q_int(q)
    k = qi.shape[0]
    for name, v in (("element", element), ("counts", counts)):
        if is_traced(v):
            raise ValueError(f"`{name}` must be concrete (a NumPy array or list, not a traced "
                             f"value): the balanced splits are enumerated on the host")
    el = np.asarray(element)
    if el.shape != (k,) or not np.issubdtype(el.dtype, np.integer) or el.min() < 0:
        raise ValueError(f"`element` must be ({k},) non-negative integers (one element index "
                         f"per species); got {el.tolist() if el.size < 50 else el.shape}")
    cn = np.asarray(counts)
    n_el = int(el.max()) + 1
    if cn.shape != (n_el,) or not np.issubdtype(cn.dtype, np.integer) or cn.min() < 0:
        raise ValueError(f"`counts` must be ({n_el},) non-negative integers (atoms of each "
                         f"element 0..{n_el - 1}); got {cn.tolist() if cn.size < 50 else cn.shape}")
    # partial[charge] = list of species-count vectors over the elements so far
    partial: dict[int, list[np.ndarray]] = {0: [np.zeros(k, np.int64)]}
    for e in range(n_el):
        sp = np.flatnonzero(el == e)
        if sp.size == 0:
            if cn[e]:
                raise ValueError(f"`counts[{e}]` = {int(cn[e])} but no species has element {e}")
            continue
        nxt: dict[int, list[np.ndarray]] = {}
        for parts in _compositions(int(cn[e]), sp.size):
            dq = int(np.dot(parts, qi[sp]))
            for ch, vecs in partial.items():
                for v in vecs:
                    w = v.copy()
                    w[sp] = parts
                    nxt.setdefault(ch + dq, []).append(w)
            if sum(len(v) for v in nxt.values()) > 50 * max_splits:
                raise ValueError(f"the composition has too many oxidation-state splits to "
                                 f"enumerate (max_splits = {max_splits}); raise it, or list "
                                 f"fewer oxidation states per element")
        partial = nxt
    out = partial.get(0, [])
    if len(out) > max_splits:
        raise ValueError(f"the composition has {len(out)} balanced oxidation-state splits "
                         f"(> max_splits = {max_splits}); raise it, or list fewer "
                         f"oxidation states per element")
    return np.asarray(out, np.int32).reshape(len(out), k)


def _compositions(total: int, parts: int):
    """All non-negative integer vectors of length ``parts`` summing to ``total``."""
    if parts == 1:
        yield np.array([total])
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield np.concatenate([[first], rest])


def project_composition(cost: Float[Array, "N K"], q: ArrayLike, element: ArrayLike,
                        counts: ArrayLike, *, mask: ArrayLike | None = None,
                        allowed: ArrayLike | None = None,
                        max_splits: int = 64) -> DiscreteProjection:
    """Exact charge-balanced assignment at a fixed composition: :func:`project_discrete`
    with the number of atoms of each element prescribed.

    ``argmin sum_i cost[i, a_i]`` over one species per unmasked atom subject to
    ``#{i: element[a_i] = e} = counts[e]`` for every element and ``sum_i q[a_i] = 0``.
    With every element's count fixed, the charge depends only on how multivalent
    elements split over their oxidation states, so the balanced splits are enumerated on
    the host (:func:`composition_splits`) and each one is a transportation problem
    (atoms to species with fixed species counts), solved exactly by successive shortest
    paths: atoms are added one at a time, each along the cheapest chain of reassignments
    ``atom -> species b -> (an atom of b moves to) species c -> ...`` ending at a species
    with room, found by Bellman-Ford on the ``K``-node reassignment graph (Ford &
    Fulkerson 1962; Ahuja, Magnanti & Orlin, "Network Flows", 1993, ch. 9). Adding along a
    shortest path keeps the partial assignment optimal, so the result is the optimum of
    the best split. Time ``O(S N (N K + K^3))`` for ``S`` splits.

    ``element`` (K,) and ``counts`` (E,) are concrete integer arrays (they set the static
    splits); ``counts`` must sum to the number of unmasked atoms (checked when ``mask``
    is concrete, else reported as infeasible). ``allowed`` restricts species per atom as
    in :func:`project_discrete`. ``feasible`` is False when no balanced split exists or
    the allowed species cannot meet the counts; the assignment is then the unconstrained
    per-atom argmin. Raises ``ValueError`` when more than ``max_splits`` balanced splits
    exist (each one is a solve).
    """
    qi, c, m = _prepare_discrete(cost, q, mask, allowed)
    n, k = c.shape
    splits = composition_splits(qi, element, counts, max_splits=max_splits)
    total_count = int(np.asarray(counts).sum())
    if not is_traced(m) and int(np.asarray(m).sum()) != total_count:
        raise ValueError(f"`counts` sum to {total_count} atoms but the cell has "
                         f"{int(np.asarray(m).sum())} unmasked atoms")
    fb = _fallback(c, m, qi)
    fb_total, _, _ = _score(c, fb, m, qi)
    if splits.shape[0] == 0:
        return DiscreteProjection(fb, fb_total, jnp.zeros((), bool))
    # forbidden entries get a big finite cost: an assignment that needs one costs more
    # than any allowed assignment (the spread of allowed costs over all atoms, plus 1)
    fin = jnp.isfinite(c) & m[:, None]
    lo = jnp.min(jnp.where(fin, c, jnp.inf), axis=1)
    hi = jnp.max(jnp.where(fin, c, -jnp.inf), axis=1)
    spread = jnp.sum(jnp.where(m & jnp.isfinite(lo), hi - lo, 0))
    big = jnp.where(jnp.isfinite(lo), lo, 0) + spread + 1
    cb = jnp.where(m[:, None], jnp.where(fin, c, big[:, None]), 0)
    caps = jnp.asarray(splits)
    assign, ok = lax.map(lambda cap: _transport(cb, m, cap), caps)
    totals = jax.vmap(lambda a: _score(c, a, m, qi)[0])(assign)
    totals = jnp.where(ok, totals, jnp.inf)
    best = jnp.argmin(totals)
    a, total = assign[best], totals[best]
    n_act = jnp.sum(m)
    feasible = jnp.isfinite(total) & (n_act == total_count) & (n_act > 0)
    return DiscreteProjection(jnp.where(feasible, a, fb), jnp.where(feasible, total, fb_total),
                              feasible)


def _transport(c, m, cap):
    """Successive shortest paths for atoms -> species with species capacities ``cap``
    (summing to the unmasked atom count); ``c`` finite. Returns ``(assignment, ok)``;
    ``ok`` is False if some atom found no species with room or a path failed to trace
    (a rounding-level negative cycle; never seen).

    Start: every atom at its cheapest species, in atom order while that species has
    room. Atoms that all sit at their own minimum admit no improving exchange, so this
    partial assignment is optimal for its atoms; only the atoms left over are added by
    shortest paths (few when the costs already favour the target composition)."""
    n, k = c.shape
    dtype = c.dtype
    eps = jnp.finfo(dtype).eps
    tol = 64 * eps * (jnp.max(jnp.abs(c)) + 1)
    species = jnp.arange(k)

    a0 = jnp.argmin(c, axis=1).astype(jnp.int32)
    first = (a0[:, None] == species[None, :]) & m[:, None]
    rank = jnp.take_along_axis(jnp.cumsum(first, axis=0) - 1, a0[:, None], 1)[:, 0]
    placed = m & (rank < cap[a0])
    assign0 = jnp.where(placed, a0, -1)
    load0 = jnp.sum((assign0[:, None] == species[None, :]), axis=0).astype(jnp.int32)
    todo = m & ~placed
    order = jnp.argsort(~todo, stable=True).astype(jnp.int32)  # atoms to add first
    n_todo = jnp.sum(todo)

    def add(carry):
        idx, assign, load, ok = carry
        i = order[idx]
        cur = jnp.take_along_axis(c, jnp.maximum(assign, 0)[:, None], 1)[:, 0]
        dc = c - cur[:, None]  # cost of moving atom j to species b
        inside = assign[:, None] == species[None, :]  # (N, K): atom j sits in species a
        # w[a, b]: cheapest move of an atom of species a to species b
        w = jnp.min(jnp.where(inside[:, :, None], dc[:, None, :], jnp.inf), axis=0)
        w = jnp.where(jnp.eye(k, dtype=bool), jnp.inf, w)
        d = c[i]
        pred = jnp.full(k, -1, jnp.int32)
        for _ in range(k - 1):  # Bellman-Ford, Jacobi sweeps
            cand = d[:, None] + w
            nb = jnp.min(cand, axis=0)
            arg = jnp.argmin(cand, axis=0).astype(jnp.int32)
            upd = nb < d - tol
            d = jnp.where(upd, nb, d)
            pred = jnp.where(upd, arg, pred)
        room = load < cap
        t = jnp.argmin(jnp.where(room, d, jnp.inf)).astype(jnp.int32)
        found = jnp.any(room)

        def trace(_, tc):
            t, assign, done = tc
            p = pred[t]
            move = ~done & (p >= 0)
            j = jnp.argmin(jnp.where(assign == p, dc[:, t], jnp.inf))
            assign = jnp.where(move, assign.at[j].set(t), assign)
            return jnp.where(move, p, t), assign, done | (p < 0)

        t0, assign, traced = lax.fori_loop(0, k, trace, (t, assign, jnp.zeros((), bool)))
        return idx + 1, assign.at[i].set(t0), load.at[t].add(1), ok & found & traced

    init = (jnp.zeros((), jnp.int32), assign0, load0, jnp.ones((), bool))
    _, assign, load, ok = lax.while_loop(lambda cr: cr[0] < n_todo, add, init)
    return assign, ok & jnp.all(load == cap)
