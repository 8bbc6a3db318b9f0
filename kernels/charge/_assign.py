"""The result type and shared plumbing of the discrete (one species per atom) projections:
input preparation, scoring and the unconstrained fallback."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ..checks import fail
from ._checks import check_allowed, check_mask, check_matrix, check_q_int

__all__ = ["DiscreteProjection", "argmin_fallback", "prepare_discrete", "score",
           "with_fallback"]


class DiscreteProjection(NamedTuple):
    """Result of :func:`~jaxkit.kernels.charge.project_discrete`,
    :func:`~jaxkit.kernels.charge.project_discrete_approx` and
    :func:`~jaxkit.kernels.charge.project_composition`.

    ``assignment``: int32 species index per atom (``-1`` on masked atoms and on atoms with
    no allowed species); ``cost``: ``sum_i cost[i, assignment[i]]`` over unmasked atoms
    (``inf`` if some atom has no allowed species); ``feasible``: the assignment is
    charge-balanced. When ``feasible`` is False the assignment is the unconstrained
    per-atom argmin (over allowed species) and is *not* balanced."""

    assignment: Int[Array, " N"]
    cost: Float[Array, ""]
    feasible: Bool[Array, ""]


def prepare_discrete(cost, q, mask, allowed):
    """Checked inputs ``(qi, c, m)``: integer charges (NumPy), the cost with ``+inf`` on
    masked-out or forbidden entries, and the atom mask. NaN or ``-inf`` on allowed
    unmasked entries raise (a run-time error under jit)."""
    qi = check_q_int(q)
    cost = check_matrix(cost, "cost", qi.shape[0])
    n, k = cost.shape
    m = check_mask(mask, n)
    ok = check_allowed(allowed, n, k) & m[:, None]
    bad = ok & (jnp.isnan(cost) | (cost == -jnp.inf))
    cost = fail(cost, jnp.any(bad), "`cost` contains NaN or -inf values on unmasked, "
                 "allowed entries (use +inf to forbid a species)")
    c = jnp.where(ok, cost, jnp.inf)
    return qi, c, m


def argmin_fallback(c, m) -> Int[Array, " N"]:
    """Unconstrained per-atom argmin (``-1`` on masked atoms / atoms with nothing allowed)."""
    arg = jnp.argmin(c, axis=1).astype(jnp.int32)
    has = jnp.any(jnp.isfinite(c), axis=1)
    return jnp.where(m & has, arg, -1)


def score(c, assign, m, qi: np.ndarray):
    """``(total cost, total charge, every unmasked atom assigned)`` of an assignment, with
    ``c`` the prepared cost."""
    got = assign >= 0
    a = jnp.maximum(assign, 0)
    ci = jnp.take_along_axis(c, a[:, None], axis=1)[:, 0]
    total = jnp.sum(jnp.where(m, jnp.where(got, ci, jnp.inf), 0))
    charge = jnp.sum(jnp.where(m & got, jnp.asarray(qi, jnp.int32)[a], 0))
    return total, charge, jnp.all(got | ~m)


def with_fallback(c, m, qi: np.ndarray, assign, total, feasible) -> DiscreteProjection:
    """The result: ``(assign, total)`` where ``feasible``, else the per-atom argmin and its
    cost."""
    fb = argmin_fallback(c, m)
    fb_total, _, _ = score(c, fb, m, qi)
    return DiscreteProjection(jnp.where(feasible, assign, fb),
                              jnp.where(feasible, total, fb_total), feasible)
