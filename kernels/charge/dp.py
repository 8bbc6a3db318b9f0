"""Dynamic programming over the running charge: the exact discrete charge projection.

One species per atom, total charge exactly zero, minimal total cost: a ``lax.scan`` over
atoms carries the minimal cost of every reachable running charge in a sliding window of
static width (:func:`dp_width`), and a reverse scan backtracks the assignment. The same
kernel (:func:`window_dp`) runs the repair DPs of the Lagrangian and reduced-cost-fixing
routes over a window of charge changes.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import ArrayLike

from ._assign import DiscreteProjection, score, with_fallback
from ._checks import check_q_int

__all__ = ["dp_width"]


def dp_width(n_atoms: int, q: ArrayLike) -> int:
    """Static number of charge states the exact DP keeps per atom.

    After ``a`` of ``n`` atoms the running charge must lie in ``[a qmin, a qmax]`` (reached
    from the front) and in ``[-(n-a) qmax, -(n-a) qmin]`` (able to reach 0 with the rest);
    the DP keeps a sliding window of the widest such intersection, ``max_a min(a qmax,
    -(n-a) qmin) - max(a qmin, -(n-a) qmax) + 1``, instead of all ``n (qmax - qmin) + 1``
    charges.

    Reference: the dynamic program of the multiple-choice knapsack, e.g. Kellerer,
    Pferschy & Pisinger, "Knapsack Problems", 2004, ch. 11.

    Differentiable: no: a static Python int.

    Args:
        n_atoms: number of atoms ``n``.
        q: ``(K,)`` concrete integer species charges.

    Returns:
        The window width (at least 1).

    Raises:
        ValueError: ``q`` is traced, not integer, or can never balance.
    """
    qi = check_q_int(q)
    qmin, qmax = int(qi.min()), int(qi.max())
    a = np.arange(int(n_atoms) + 1)
    r = int(n_atoms) - a
    width = np.minimum(a * qmax, -r * qmin) - np.maximum(a * qmin, -r * qmax) + 1
    return int(max(width.max(), 1))


def window_dp(costs, offsets, active, q: np.ndarray, width: int, start, target):
    """Min-cost paths over a sliding charge window; one ``lax.scan`` step per atom.

    ``costs`` (N, K): cost of each species per atom (inf = forbidden); ``offsets`` (N,):
    the window index of the predecessor of state ``j`` through species ``k`` is
    ``j + offsets[i] - q[k]``; ``active`` (N,): inactive atoms pass states through
    unchanged; ``start`` / ``target``: the window index of the empty path and of the end
    state. Ties go to the lowest species index. Stores an int8 (int16 above 127 species)
    back-pointer per (atom, state). Returns ``(value at target, assignment)`` with ``-1``
    on inactive atoms."""
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


def exact_dp(c, m, qi: np.ndarray) -> DiscreteProjection:
    """``method="dp"`` of :func:`~jaxkit.kernels.charge.project_discrete` on prepared
    inputs (:func:`~._assign.prepare_discrete`): the window of state ``j`` after atom
    ``i`` is offset by the lowest running charge still able to return to 0."""
    n, _ = c.shape
    qmin, qmax = int(qi.min()), int(qi.max())
    width = dp_width(n, qi)
    a = jnp.cumsum(m.astype(jnp.int32))
    n_act = a[-1]
    lo = jnp.maximum(a * qmin, -(n_act - a) * qmax)
    lo_prev = jnp.concatenate([jnp.zeros(1, lo.dtype), lo[:-1]])  # lo before any atom is 0
    offsets = (lo - lo_prev).astype(jnp.int32)
    value, assign = window_dp(jnp.where(m[:, None], c, 0), offsets, m, qi, width, 0, 0)
    total, charge, complete = score(c, assign, m, qi)
    feasible = jnp.isfinite(value) & jnp.isfinite(total) & (n_act > 0) & (charge == 0) \
        & complete
    return with_fallback(c, m, qi, assign, total, feasible)
