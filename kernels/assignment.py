"""Linear sum assignment with SciPy's conventions: rectangular costs, ``+inf`` as a
forbidden pair, ``maximize``, the empty problem; infeasibility as a flag.

:func:`linear_sum_assignment` solves on the host (NumPy in, NumPy out) with jaxkit's exact
auction-then-Jonker-Volgenant solver (:func:`jaxkit.kernels._auction.auction_assignment`);
:func:`assignment` is the same solve from inside ``jit`` (``jax.pure_callback``, fixed
shapes).

Reductions to the square, finite problem the solver takes (the standard ones, e.g.
Burkard, Dell'Amico & Martello, "Assignment Problems", SIAM 2009, sections 4.1 and 5.4):

* **rectangular** ``(n, m)``: with ``n > m`` the transpose is solved; with ``n < m`` the
  shortest-augmenting-path phase runs on the rectangle from zero column duals (Crouse,
  "On implementing 2D rectangular assignment algorithms", IEEE TAES 2016, SciPy's
  method). Every row of the smaller side is assigned, each column at most once,
  minimising the total (SciPy's definition).
* **forbidden pairs** (``+inf``; ``-inf`` when maximising): with the finite entries
  mapped to ``[0, 1]`` (shifted by their minimum, divided by their range ``R``; the same
  argmin), a forbidden entry becomes ``M = k + 1``, ``k = min(n, m)``. Any assignment
  avoiding them costs at most ``k < M``, so the
  optimum uses a forbidden entry only when no feasible assignment exists: that is the
  infeasibility certificate, reported as ``feasible=False`` (SciPy raises
  ``ValueError("cost matrix is infeasible")``).
* **maximize**: the negated cost is minimised.

Exactness: optimal up to float64 rounding at the scale of the (shifted) cost range, as
the underlying solver; with forbidden pairs the range is that of ``M``, ``k + 1`` times
the finite range ``R``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ._auction import auction_assignment
from .checks import fail

__all__ = ["Assignment", "linear_sum_assignment", "assignment"]


class Assignment(NamedTuple):
    """The result of :func:`linear_sum_assignment`.

    ``rows``/``cols``: int64 index arrays of length ``min(n, m)`` (``rows`` increasing),
    the pairs ``(rows[k], cols[k])``; empty when the problem is empty or infeasible.
    ``feasible``: False when every complete assignment uses a forbidden (infinite) entry.
    ``cost``: ``sum(cost[rows, cols])`` in the caller's sense (the maximum when
    ``maximize``), ``inf`` (``-inf`` when maximising) when infeasible, 0 when empty.

    Unlike SciPy's ``(row_ind, col_ind)`` pair this record has four fields; take
    ``res.rows, res.cols`` (or ``res[:2]``)."""

    rows: np.ndarray
    cols: np.ndarray
    feasible: bool
    cost: float


def _invalid_message(maximize: bool) -> str:
    return (f"`cost` contains invalid numeric entries: NaN or {'+' if maximize else '-'}inf "
            f"(forbidden pairs are {'-' if maximize else '+'}inf)")


def _validate(cost, maximize: bool) -> np.ndarray:
    c = np.asarray(cost)
    if c.ndim != 2:
        raise ValueError(f"`cost` must be a matrix (2-D); got shape {c.shape}")
    if c.dtype.kind not in "biuf":
        raise TypeError(f"`cost` must be numeric (bool, int or float); got dtype {c.dtype}")
    c = c.astype(np.float64)
    bad = -np.inf if not maximize else np.inf  # the sign that can never be chosen
    if np.isnan(c).any() or (c == bad).any():
        raise ValueError(_invalid_message(maximize))
    return -c if maximize else c


def _solve_min(c: np.ndarray) -> tuple[np.ndarray, bool]:
    """``cols`` for the rows of the ``(n, m)`` minimisation ``c`` with ``n <= m``, finite
    or ``+inf``; and feasibility."""
    n, m = c.shape
    finite = np.isfinite(c)
    if not finite.any(axis=1).all():
        return np.zeros(0, np.int64), False  # a row with no allowed column
    cap = np.inf
    if finite.all():
        work = c
    else:
        vals = c[finite]
        lo, rng = vals.min(), vals.max() - vals.min()
        scale = rng if rng > 0 else 1.0  # [0, 1] after scaling: M = n + 1 cannot overflow
        work = np.where(finite, (c - lo) / scale, float(n + 1))
        cap = 2.0  # the auction's prices see M as twice the finite range
    cols = auction_assignment(work, cap=cap).astype(np.int64)
    if not finite[np.arange(n), cols].all():
        return np.zeros(0, np.int64), False
    return cols, True


def linear_sum_assignment(cost, maximize: bool = False) -> Assignment:
    """Minimum- (or maximum-) weight assignment of the rows of ``cost`` to distinct columns,
    SciPy's :func:`scipy.optimize.linear_sum_assignment` semantics (``+inf`` = forbidden
    pair; ``-inf`` when maximising), infeasibility reported in the result. The problem:
    ``min sum_k cost[r_k, c_k]`` over injective maps from the smaller side into the
    larger (Kuhn 1955; Jonker & Volgenant 1987; the reductions are in the module
    docstring).

    A host function (NumPy), not traceable; inside ``jit`` use :func:`assignment`.

    Differentiable: no: integer indices, solved in NumPy on the host.

    Args:
        cost: ``(n, m)`` array-like of numbers (bool/int/float); any ``n, m >= 0``.
        maximize: maximise the total instead.

    Returns:
        An :class:`Assignment` ``(rows, cols, feasible, cost)``.

    Raises:
        ValueError: ``cost`` not 2-D, or with NaN / ``-inf`` (``+inf`` when maximising).
        TypeError: a non-numeric ``cost``.
    """
    c = _validate(cost, maximize)
    n, m = c.shape
    sign = -1.0 if maximize else 1.0
    if n == 0 or m == 0:
        empty = np.zeros(0, np.int64)
        return Assignment(empty, empty.copy(), True, 0.0)
    if n <= m:
        cols, ok = _solve_min(c)
        rows = np.arange(n, dtype=np.int64)
    else:
        r, ok = _solve_min(c.T)
        order = np.argsort(r, kind="stable")
        rows, cols = r[order], np.arange(m, dtype=np.int64)[order]
    if not ok:
        empty = np.zeros(0, np.int64)
        return Assignment(empty, empty.copy(), False, sign * np.inf)
    return Assignment(rows, cols, True, float(sign * c[rows, cols].sum()))


def _callback(maximize: bool):
    def solve(c):
        c = np.asarray(c, np.float64)
        k = min(c.shape)
        res = linear_sum_assignment(c, maximize)
        if not res.feasible:
            return np.zeros(k, np.int32), np.zeros(k, np.int32), np.bool_(False)
        return res.rows.astype(np.int32), res.cols.astype(np.int32), np.bool_(True)
    return solve


def assignment(cost: Float[Array, "n m"], *, maximize: bool = False
               ) -> tuple[Int[Array, " k"], Int[Array, " k"], Bool[Array, ""]]:
    """:func:`linear_sum_assignment` usable under ``jit``/``vmap`` (a host callback with
    fixed output shapes, ``k = min(n, m)``; batched sequentially under ``vmap``).

    Differentiable: no: integer indices from a host callback (jax.pure_callback).

    Args:
        cost: ``(n, m)`` float cost matrix (``+inf`` = forbidden pair; ``-inf`` when
            maximising); NaN and the wrong-signed infinity raise a ``ValueError`` naming
            ``cost`` (eagerly; under ``jit``/``vmap`` a run-time check ahead of the host
            solve, which :func:`jaxkit.kernels.checks.clear_errors` re-raises as one).
        maximize: maximise instead (static).

    Returns:
        ``(rows, cols, feasible)``: int32 ``(k,)`` pairs, rows increasing, and a boolean
        scalar. When ``feasible`` is False the indices are all 0 and must not be used.
    """
    cost = jnp.asarray(cost)
    if cost.ndim != 2:
        raise ValueError(f"`cost` must be a matrix (2-D); got shape {cost.shape}")
    if not jnp.issubdtype(cost.dtype, jnp.number) and cost.dtype != jnp.bool_:
        raise TypeError(f"`cost` must be numeric (bool, int or float); got dtype {cost.dtype}")
    bad = -jnp.inf if not maximize else jnp.inf
    if jnp.issubdtype(cost.dtype, jnp.inexact):  # checked here, not inside the callback
        cost = fail(cost, jnp.isnan(cost) | (cost == bad), _invalid_message(bool(maximize)))
    k = min(cost.shape)
    out = (jax.ShapeDtypeStruct((k,), jnp.int32), jax.ShapeDtypeStruct((k,), jnp.int32),
           jax.ShapeDtypeStruct((), jnp.bool_))
    return jax.pure_callback(_callback(bool(maximize)), out, cost, vmap_method="sequential")
