"""The exact charge projection at a fixed composition: balanced oxidation-state splits
enumerated on the host, each solved as a transportation problem by successive shortest
paths."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Float

from ..checks import check_in_range, is_traced
from ._assign import DiscreteProjection, prepare_discrete, score, with_fallback
from ._checks import check_q_int

__all__ = ["composition_splits", "project_composition", "project_splits"]


def composition_splits(q: ArrayLike, element: ArrayLike, counts: ArrayLike, *,
                       max_splits: int = 4096) -> np.ndarray:
    """Every charge-balanced species-count vector of a fixed composition.

    Species of one element (e.g. Fe2+ and Fe3+) share its element index. Returns the
    species counts ``n`` with ``sum_{k: element[k] = e} n_k = counts[e]`` for every
    element and ``sum_k n_k q_k = 0``. Single-valent elements have one split each; with
    one multivalent element of two oxidation states the balance fixes its split, and
    each further multivalent element adds more (Fe2+/3+ with Mn2+/3+/4+ can leave
    several). Host-side enumeration, element by element, of the partial splits grouped
    by their charge (a dynamic program over the running charge, as for the discrete
    projection, keeping every vector).

    Reference: the charge-neutrality screening of oxidation-state combinations, as in
    Davies et al., "SMACT: Semiconducting Materials by Analogy and Chemical Theory",
    J. Open Source Softw. 2019.

    Differentiable: no: NumPy on the host (integer counts).

    Args:
        q: ``(K,)`` concrete integer species charges.
        element: ``(K,)`` concrete non-negative element index per species.
        counts: ``(E,)`` concrete number of atoms of each element ``0..E-1``.
        max_splits: the most balanced splits accepted.

    Returns:
        An int32 NumPy array ``(S, K)`` of species counts (``S = 0`` when the composition
        cannot balance).

    Raises:
        ValueError: malformed or traced ``q``, ``element`` or ``counts``, a count for an
            element no species has, or more than ``max_splits`` splits.
    """
    check_in_range(max_splits, "max_splits", lo=1, integer=True)
    qi = check_q_int(q)
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
                                 f"enumerate (`max_splits` = {max_splits}); raise it, or list "
                                 f"fewer oxidation states per element")
        partial = nxt
    out = partial.get(0, [])
    if len(out) > max_splits:
        raise ValueError(f"the composition has {len(out)} balanced oxidation-state splits "
                         f"(> `max_splits` = {max_splits}); raise it, or list fewer "
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
    """Exact charge-balanced assignment at a fixed composition:
    :func:`~jaxkit.kernels.charge.project_discrete` with the number of atoms of each
    element prescribed.

    ``argmin sum_i cost[i, a_i]`` over one species per unmasked atom subject to
    ``#{i: element[a_i] = e} = counts[e]`` for every element and ``sum_i q[a_i] = 0``.
    With every element's count fixed, the charge depends only on how multivalent
    elements split over their oxidation states, so the balanced splits are enumerated on
    the host (:func:`composition_splits`) and each one is a transportation problem
    (atoms to species with fixed species counts), solved exactly by successive shortest
    paths: atoms are added one at a time, each along the cheapest chain of reassignments
    ``atom -> species b -> (an atom of b moves to) species c -> ...`` ending at a species
    with room, found by Bellman-Ford on the ``K``-node reassignment graph. Adding along a
    shortest path keeps the partial assignment optimal, so the result is the optimum of
    the best split. Time ``O(S N (N K + K^3))`` for ``S`` splits.

    References: Ford & Fulkerson, "Flows in Networks", 1962; Ahuja, Magnanti & Orlin,
    "Network Flows", 1993, ch. 9 (successive shortest paths).

    Differentiable: yes, in cost: the returned cost (the assignment is an integer, piecewise
    constant).

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden), e.g. ``-log p``.
        q: ``(K,)`` concrete integer species charges.
        element: ``(K,)`` concrete element index per species (sets the static splits).
        counts: ``(E,)`` concrete atoms per element; must sum to the number of unmasked
            atoms (checked when ``mask`` is concrete, else reported as infeasible).
        mask: optional ``(N,)`` bool, False on padding atoms (assigned ``-1``).
        allowed: optional ``(N, K)`` bool restricting each atom's species, as in
            :func:`~jaxkit.kernels.charge.project_discrete`.
        max_splits: the most balanced splits accepted (each one is a solve).

    Returns:
        A :class:`~jaxkit.kernels.charge.DiscreteProjection`; ``feasible`` is False when
        no balanced split exists or the allowed species cannot meet the counts, and the
        assignment is then the unconstrained per-atom argmin.

    Raises:
        ValueError: as :func:`composition_splits` and
            :func:`~jaxkit.kernels.charge.project_discrete`, or ``counts`` that do not sum
            to the unmasked atoms of a concrete ``mask``.
    """
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    splits = composition_splits(qi, element, counts, max_splits=max_splits)
    total_count = int(np.asarray(counts).sum())
    if not is_traced(m) and int(np.asarray(m).sum()) != total_count:
        raise ValueError(f"`counts` sum to {total_count} atoms but the cell has "
                         f"{int(np.asarray(m).sum())} unmasked atoms")
    if splits.shape[0] == 0:
        none = jnp.full(c.shape[0], -1, jnp.int32)
        return with_fallback(c, m, qi, none, jnp.inf, jnp.zeros((), bool))
    return _solve_splits(c, m, qi, jnp.asarray(splits))


def project_splits(cost: Float[Array, "N K"], q: ArrayLike, splits: ArrayLike, *,
                   mask: ArrayLike | None = None,
                   allowed: ArrayLike | None = None) -> DiscreteProjection:
    """Exact charge-balanced assignment with the number of atoms of each *species*
    prescribed by one of several candidate rows, the best row chosen:
    :func:`project_composition` with its splits given, so that they may be traced.

    ``min_s argmin_a sum_i cost[i, a_i]`` subject to ``#{i: a_i = k} = splits[s, k]``
    for every species ``k``; rows are meant to be charge balanced (``splits[s] @ q = 0``,
    e.g. rows of :func:`composition_splits`) and are checked for it, an unbalanced row
    or one that does not sum to the unmasked atoms is infeasible. Each row is the
    transportation problem of :func:`project_composition` (successive shortest paths).
    Rows may repeat (padding a batch of targets with different split counts to one
    ``S``): a repeated row changes nothing, so one compiled program serves targets of
    any composition.

    Differentiable: yes, in cost: the returned cost (the assignment is an integer, piecewise
    constant).

    Args:
        cost: ``(N, K)`` finite costs or ``+inf`` (forbidden), e.g. ``-log p``.
        q: ``(K,)`` concrete integer species charges.
        splits: ``(S, K)`` non-negative integer species counts, ``S >= 1``; may be traced.
        mask: optional ``(N,)`` bool, False on padding atoms (assigned ``-1``).
        allowed: optional ``(N, K)`` bool restricting each atom's species.

    Returns:
        A :class:`~jaxkit.kernels.charge.DiscreteProjection`; ``feasible`` is False when
        no row is balanced and met, and the assignment is then the unconstrained
        per-atom argmin.

    Raises:
        ValueError: ``splits`` not ``(S, K)`` with ``S >= 1``, or as
            :func:`~jaxkit.kernels.charge.project_discrete`.
    """
    sp = jnp.asarray(splits)
    k = np.shape(cost)[-1]
    if sp.ndim != 2 or sp.shape[0] < 1 or sp.shape[1] != k:
        raise ValueError(f"`splits` must be (S, {k}) with S >= 1; got shape {sp.shape}")
    if not jnp.issubdtype(sp.dtype, jnp.integer):
        raise ValueError(f"`splits` must hold integers; got {sp.dtype}")
    qi, c, m = prepare_discrete(cost, q, mask, allowed)
    return _solve_splits(c, m, qi, sp.astype(jnp.int32))


def _solve_splits(c, m, qi, caps):
    """Every row of ``caps`` (S, K) solved by :func:`_transport`; the cheapest feasible
    balanced row wins."""
    # forbidden entries get a big finite cost: an assignment that needs one costs more
    # than any allowed assignment (the spread of allowed costs over all atoms, plus 1)
    fin = jnp.isfinite(c) & m[:, None]
    lo = jnp.min(jnp.where(fin, c, jnp.inf), axis=1)
    hi = jnp.max(jnp.where(fin, c, -jnp.inf), axis=1)
    spread = jnp.sum(jnp.where(m & jnp.isfinite(lo), hi - lo, 0))
    big = jnp.where(jnp.isfinite(lo), lo, 0) + spread + 1
    cb = jnp.where(m[:, None], jnp.where(fin, c, big[:, None]), 0)
    caps = jnp.maximum(caps, 0)
    n_act = jnp.sum(m)
    balanced = (caps @ jnp.asarray(qi, caps.dtype) == 0) & (jnp.sum(caps, axis=1) == n_act)
    assign, ok = lax.map(lambda cap: _transport(cb, m, cap), caps)
    totals = jax.vmap(lambda a: score(c, a, m, qi)[0])(assign)
    totals = jnp.where(ok & balanced, totals, jnp.inf)
    best = jnp.argmin(totals)
    a, total = assign[best], totals[best]
    feasible = jnp.isfinite(total) & (n_act > 0)
    return with_fallback(c, m, qi, a, total, feasible)

def _transport(c, m, cap):
    """Successive shortest paths for atoms -> species with species capacities ``cap``
    (summing to the unmasked atom count); ``c`` finite. Returns ``(assignment, ok)``;
    ``ok`` is False if some atom found no species with room or a path failed to trace
    (a rounding-level negative cycle; never seen).

    Start: every atom at its cheapest species, in atom order while that species has
    room. Atoms that all sit at their own minimum admit no improving exchange, so this
    partial assignment is optimal for its atoms; only the atoms left over are added by
    shortest paths (few when the costs already favour the target composition)."""
    k = c.shape[1]
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
