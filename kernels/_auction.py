"""Exact dense linear assignment on the host: an integer auction for the prices, then
Jonker-Volgenant shortest augmenting paths in float64 for exactness.

Why hand-written (with numba): OT-CFM pairs every minibatch by an exact assignment, and on a
CPU the libraries we have (POT's network simplex, SciPy's ``linear_sum_assignment``,
``lap.lapjv``) take several times a CFM training step's time on squared Euclidean costs
(see benchmarks/RESULTS.md). None of them takes starting prices, and from zero prices the
shortest-augmenting-path methods do O(B) long searches on these near-degenerate geometric
costs. Here:

1. **Prices by auction** (Bertsekas 1988; epsilon-scaling, Bertsekas & Castanon 1992),
   Gauss-Seidel bidding on costs quantised to integers, with the bid's value and column
   packed into one int64 key so that finding a row's best and second-best columns is two
   integer min-reductions (which the compiler vectorises; float minima with NaN semantics
   it does not). The auction's assignment is only epsilon-optimal; what it gives is prices
   close to optimal duals.
2. **Exact finish in float64.** The prices become column duals ``v``; every row whose
   assigned column is not its exact minimum of ``C[i, j] - v[j]`` is freed, and each free
   row is assigned by Dijkstra on the reduced costs with the dual update of Jonker &
   Volgenant (1987). Any feasible duals with tight matched rows give an optimal result,
   so exactness does not depend on the quantisation; good prices only make the paths
   short. This is the same optimality certificate as SciPy's solver.

Timings against POT and SciPy are in benchmarks/RESULTS.md (``benchmarks/bench_flow.py
--only assign``). The functions release the GIL, so pairing threads run alongside the
device's training step.
"""
from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["auction_assignment"]

_SPAN = 2.0 ** 32  # integer units of the cost range in the auction
_BIG = np.int64(2 ** 62)
# Epsilon schedule of the auction, as fractions of the cost range. Measured on 2D and 64D
# minibatches of 256 (ad hoc): coarser schedules leave longer augmenting paths, finer ones
# spend more bids than the paths they save.
_EPS = np.array([1e-1, 1.5e-2, 2e-3, 3e-4])
_MAX_N = 2 ** 14  # keys hold (value << bits) | column in an int64, with headroom


@nb.njit(inline="always")
def _best_key(cq, v, i, bits, skip):
    """min over j != skip of ``((cq[i, j] - v[j]) << bits) | j``: value and column in one."""
    m = _BIG
    for j in range(cq.shape[1]):
        k = ((cq[i, j] - v[j]) << bits) | j
        m = min(m, k) if j != skip else m
    return m


@nb.njit(nogil=True, cache=True)
def _auction_phase(cq, v, rowof, colof, eps, bits):
    """One epsilon phase of the forward auction (minimisation form: column ``j`` costs row
    ``i`` ``cq[i, j] - v[j]``; a bid lowers ``v[j]``). Rows whose assignment is still
    epsilon-complementary-slack are kept; the rest bid until every row is assigned."""
    n = cq.shape[0]
    stack = np.empty(n, np.int64)
    top = 0
    for i in range(n):
        j0 = colof[i]
        if j0 >= 0 and cq[i, j0] - v[j0] > (_best_key(cq, v, i, bits, -1) >> bits) + eps:
            colof[i] = -1
            rowof[j0] = -1
        if colof[i] < 0:
            stack[top] = i
            top += 1
    mask = (np.int64(1) << bits) - 1
    while top > 0:
        top -= 1
        i = stack[top]
        k1 = _best_key(cq, v, i, bits, -1)
        j1 = k1 & mask
        w2 = _best_key(cq, v, i, bits, j1) >> bits
        v[j1] -= (w2 - (k1 >> bits)) + eps
        old = rowof[j1]
        rowof[j1] = i
        colof[i] = j1
        if old >= 0:
            colof[old] = -1
            stack[top] = old
            top += 1


@nb.njit(inline="always")
def _fkey(bits):
    """Order-preserving map of a finite float64's bits (as int64) to int64: integer
    min/max reductions vectorise where float ones (NaN semantics) do not."""
    return bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


@nb.njit(inline="always")
def _argmin(w, wi):
    """(min, first argmin) of the finite float64 vector ``w`` (``wi``: its int64 view)."""
    m = _fkey(wi[0])
    for j in range(1, w.shape[0]):
        m = min(m, _fkey(wi[j]))
    j = 0
    while _fkey(wi[j]) != m:
        j += 1
    return w[j], j


@nb.njit(nogil=True, cache=True)
def _free_loose_rows(c, v, rowof, colof):
    """Unassign every row whose column is not its exact minimum of ``c[i, j] - v[j]``, so
    that the assigned rows are tight, as the augmentation requires."""
    n = c.shape[0]
    w = np.empty(n)
    wi = w.view(np.int64)
    for i in range(n):
        for j in range(n):
            w[j] = c[i, j] - v[j]
        m = _argmin(w, wi)[0]
        j0 = colof[i]
        if j0 >= 0 and w[j0] > m:
            colof[i] = -1
            rowof[j0] = -1


@nb.njit(nogil=True, cache=True)
def _augment(c, v, rowof, colof):
    """Jonker-Volgenant augmentation: for each free row, Dijkstra over columns on the
    reduced costs (row duals implicit: ``u_i = c[i, colof[i]] - v[colof[i]]``) to the
    nearest free column, the dual update ``v[k] += d[k] - mu`` on the scanned columns,
    then the path is flipped. Scanned columns sit at +inf in ``d`` (their distance kept
    in ``dist``) and are masked out of the relaxation, so that the searches and
    relaxations are branch-free vector loops.

    Rectangular ``(n, m)``, ``n < m``, from ``v = 0``: only scanned (matched) columns'
    duals decrease and a matched column stays matched, so every column with ``v_j < 0``
    is matched at the end: the complementary slackness of the rectangular problem, as in
    SciPy's solver (Crouse, IEEE TAES 2016)."""
    n, m = c.shape  # n <= m: every row is assigned (rectangular: Crouse 2016)
    d = np.empty(m)
    di = d.view(np.int64)
    dist = np.empty(m)
    pred = np.empty(m, np.int64)
    open_ = np.empty(m, np.bool_)
    scanned = np.empty(m, np.int64)
    for f in range(n):
        if colof[f] >= 0:
            continue
        for j in range(m):
            d[j] = c[f, j] - v[j]
            pred[j] = f
            open_[j] = True
        ns = 0
        while True:
            mu, jm = _argmin(d, di)
            if rowof[jm] < 0:
                break
            dist[jm] = mu
            d[jm] = np.inf
            open_[jm] = False
            scanned[ns] = jm
            ns += 1
            i = rowof[jm]
            base = mu - (c[i, jm] - v[jm])
            for k in range(m):
                h = base + c[i, k] - v[k]
                better = (h < d[k]) & open_[k]
                d[k] = h if better else d[k]
                pred[k] = i if better else pred[k]
        for s in range(ns):
            k = scanned[s]
            v[k] += dist[k] - mu
        j = jm
        while True:
            i = pred[j]
            rowof[j] = i
            jn = colof[i]
            colof[i] = j
            if i == f:
                break
            j = jn


@nb.njit(nogil=True, cache=True)
def _solve_rect(c):
    """Rectangular ``(n, m)``, ``n < m``: shortest augmenting paths from zero duals."""
    n, m = c.shape
    v = np.zeros(m)
    rowof = np.full(m, -1, np.int64)
    colof = np.full(n, -1, np.int64)
    _augment(c, v, rowof, colof)
    return colof


@nb.njit(nogil=True, cache=True)
def _solve(c, eps_fractions, cap):
    n = c.shape[0]
    bits = 1
    while (1 << bits) < n:
        bits += 1
    flat = c.ravel()
    fi = flat.view(np.int64)
    lo_k = _fkey(fi[0])
    hi_k = lo_k
    for k in range(1, flat.shape[0]):  # min and max as vectorised integer reductions
        lo_k = min(lo_k, _fkey(fi[k]))
        hi_k = max(hi_k, _fkey(fi[k]))
    lo = np.array([_fkey(lo_k)]).view(np.float64)[0]  # the map is its own inverse
    hi = min(np.array([_fkey(hi_k)]).view(np.float64)[0], cap)
    scale = _SPAN / max(hi - lo, 1e-300)
    cq = np.empty((n, n), np.int64)
    cqf = cq.ravel()
    for k in range(flat.shape[0]):  # entries above ``cap`` bid as if at ``cap``
        cqf[k] = np.int64(min(flat[k] - lo, hi - lo) * scale)
    vq = np.zeros(n, np.int64)
    rowof = np.full(n, -1, np.int64)
    colof = np.full(n, -1, np.int64)
    for e in eps_fractions:
        _auction_phase(cq, vq, rowof, colof, max(np.int64(e * _SPAN), np.int64(1)), bits)
    v = vq / scale
    _free_loose_rows(c, v, rowof, colof)
    _augment(c, v, rowof, colof)
    return colof


def auction_assignment(cost: np.ndarray, *, cap: float = np.inf) -> np.ndarray:
    """Optimal assignment of a square, finite cost matrix: ``perm`` minimising
    ``sum_i cost[i, perm[i]]``.

    Auction prices (Bertsekas 1988; epsilon-scaling, Bertsekas & Castanon 1992), then
    Jonker-Volgenant shortest augmenting paths in float64 (Jonker & Volgenant 1987), see
    the module docstring. Exact up to float64 rounding at the scale of the cost range
    (the duals live there; entries many decades below it can round away, as in any dual
    method). Falls back to SciPy's ``linear_sum_assignment`` above 16,384 rows (the
    auction's integer keys). A NumPy function for the host, not traceable.

    A rectangular ``(n, m)`` cost with ``n < m`` is solved by the augmentation alone
    from zero duals (no auction: its prices need a square problem), every row assigned.

    Args:
        cost: finite cost matrix ``(B, B)``, or ``(n, m)`` with ``n < m``.
        cap: entries above ``cap`` enter the auction (the prices only) as ``cap``; the
            exact finish uses them as they are. For big-M stand-ins of forbidden pairs,
            whose size would otherwise coarsen the auction's epsilon schedule.

    Returns:
        The int32 column of each row, ``(n,)`` (a permutation when square).
    """
    c = np.ascontiguousarray(cost, np.float64)
    n, m = c.shape
    if n == 0:
        return np.zeros(0, np.int32)
    if n < m:
        return _solve_rect(c).astype(np.int32)
    if n > _MAX_N:
        from scipy.optimize import linear_sum_assignment

        return linear_sum_assignment(c)[1].astype(np.int32)
    return _solve(c, _EPS, float(cap)).astype(np.int32)
