"""The causal order of ICA-LiNGAM: from the unmixing matrix to a strictly lower
triangular ``B`` and the order that makes it so (Shimizu et al. 2006)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int


def b_from_unmixing(w: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """Steps 2-3 of ICA-LiNGAM (Shimizu et al. 2006, sec. 4): ``B = I - W'``.

    Permute the rows of the unmixing ``w`` so that the diagonal has no small entries,
    scale each row to a unit diagonal (``W'``), and return ``I - W'``. The row
    permutation minimises ``sum_i 1 / |W_perm(i), i|``, the assignment problem on
    ``1 / |w|`` (as lingam's ``scipy.optimize.linear_sum_assignment``), solved with
    :func:`optax.assignment.hungarian_algorithm`; component (row) ``r`` assigned to
    variable ``c`` moves to row ``c``. Entries of ``|w|`` below ``eps * max|w|`` are
    floored there so the cost stays finite.

    Differentiable: yes, in w (almost everywhere: the row permutation is an assignment, held fixed).

    Args:
        w: square unmixing matrix ``(d, d)`` (e.g. FastICA's ``components``).

    Returns:
        The estimated ``B`` ``(d, d)``, zero on the diagonal.
    """
    w = jnp.asarray(w)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"`w` must be a square matrix; got shape {w.shape}")
    aw = jnp.abs(w)
    floor = jnp.maximum(jnp.finfo(w.dtype).eps * jnp.max(aw), jnp.finfo(w.dtype).tiny)
    rows, cols = optax.assignment.hungarian_algorithm(1.0 / jnp.maximum(aw, floor))
    pw = jnp.zeros_like(w).at[cols].set(w[rows])
    w_scaled = pw / jnp.diagonal(pw)[:, None]
    return jnp.eye(w.shape[0], dtype=w.dtype) - w_scaled


def _peel(active: Bool[Array, "d d"], before=None) -> tuple[Int[Array, " d"], Bool[Array, ""]]:
    """Repeatedly remove the lowest-index remaining row with no ``active`` entry in the
    remaining columns (and, with ``before``, no remaining row that must precede it).
    Returns the removal order and whether all rows were removed (i.e. whether the
    pattern is acyclic)."""
    d = active.shape[0]
    idx = jnp.arange(d)

    def body(s, carry):
        remaining, order, ok = carry
        blocked = jnp.any(active & remaining[None, :], axis=1)
        if before is not None:
            blocked = blocked | jnp.any(before & remaining[:, None], axis=0)
        free = remaining & ~blocked
        found = jnp.any(free)
        t = jnp.argmax(free)  # lowest index among free rows
        t = jnp.where(found, t, jnp.argmax(remaining)).astype(jnp.int32)
        order = order.at[s].set(t)
        remaining = remaining & (idx != t)
        return remaining, order, ok & found

    init = (jnp.ones(d, bool), jnp.zeros(d, jnp.int32), jnp.asarray(True))
    _, order, ok = jax.lax.fori_loop(0, d, body, init)
    return order, ok


def causal_order_from_b(b: Float[Array, "d d"], before=None) -> Int[Array, " d"]:
    """Step 4 of ICA-LiNGAM (Shimizu et al. 2006, sec. 4): a causal order making ``b``
    as close to strictly lower triangular as possible.

    lingam zeroes the ``d(d+1)/2`` smallest ``|b|`` entries, then alternates "find a
    strict order by repeatedly peeling the lowest-index all-zero row" with "zero the
    next-smallest entry" until the peel succeeds. Success is monotone in the number
    ``k`` of zeroed entries (zeroing more keeps a DAG a DAG), so here ``k`` is found by a
    fixed-length bisection over ``[d(d+1)/2, d^2]`` and the order is the peel at the
    minimal ``k`` - the same result, including lingam's lowest-index tie-break.
    ``k = d^2`` always succeeds, so a valid permutation is always returned. Ties in
    ``|b|`` are ranked by a stable sort (NumPy's default sort there is not stable).

    With ``before`` (prior knowledge, ``before[a, c]``: ``a`` must precede ``c``, an
    acyclic relation; see :func:`jaxkit.kernels.lingam.prior.partial_order`) a row is
    peeled only once every row that must precede it is gone; success stays monotone in
    ``k`` and ``k = d^2`` still always succeeds.

    Differentiable: no: integer output.

    Args:
        b: square weighted adjacency ``(d, d)``, ``b[i, j]`` the effect of ``j`` on ``i``.
        before: optional ``(d, d)`` boolean partial order.

    Returns:
        ``causal_order`` ``(d,)`` int32, a permutation of ``0..d-1`` with
        ``causal_order[0]`` a root.
    """
    b = jnp.asarray(b)
    if b.ndim != 2 or b.shape[0] != b.shape[1]:
        raise ValueError(f"`b` must be a square matrix; got shape {b.shape}")
    d = b.shape[0]
    ab = jnp.abs(b)
    flat_rank = jnp.zeros(d * d, jnp.int32).at[jnp.argsort(ab.reshape(-1))].set(
        jnp.arange(d * d, dtype=jnp.int32))
    rank = flat_rank.reshape(d, d)
    nonzero = ab > 0  # entries exactly zero already count as zeroed (as in lingam)

    def pattern(k):
        return nonzero & (rank >= k)

    k0 = d * (d + 1) // 2
    n_steps = max(1, math.ceil(math.log2(d * d - k0 + 1)))

    def bisect(_, carry):
        lo, hi = carry
        mid = (lo + hi) // 2
        _, ok = _peel(pattern(mid), before)
        active = lo < hi
        return jnp.where(active & ~ok, mid + 1, lo), jnp.where(active & ok, mid, hi)

    _, hi = jax.lax.fori_loop(0, n_steps, bisect,
                              (jnp.asarray(k0, jnp.int32), jnp.asarray(d * d, jnp.int32)))
    order, _ = _peel(pattern(hi), before)
    return order
