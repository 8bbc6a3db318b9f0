"""Exact Wasserstein distance between two empirical measures (point clouds with uniform
weights), as torchcfm's ``optimal_transport.wasserstein(x0, x1, method="exact", power)``
and POT's ``ot.emd2`` compute it, inside ``jit``.

For ``n`` points ``x0`` and ``m`` points ``x1`` with masses ``1/n`` and ``1/m``:

    ``W_p = ( min_{P in U(1/n, 1/m)} sum_ij P_ij ||x0_i - x1_j||^p )^(1/p)``

(Villani, "Optimal Transport: Old and New", 2009, def. 6.1). With ``n = m`` the optimal
``P`` is a permutation matrix divided by ``n`` (Birkhoff-von Neumann), so ``W_p^p`` is a
linear assignment: the mean of ``||x0_i - x1_{perm(i)}||^p``. With ``n != m`` each
``x0_i`` is repeated ``L / n`` times and each ``x1_j`` ``L / m`` times, ``L = lcm(n, m)``:
the repeated measures are the same measures, so the ``L x L`` assignment gives the same
exact value (kept to ``L <= 4096``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from .checks import check_finite, check_in_range
from .flow_ot import HOST_SOLVERS, _resolve_solver

__all__ = ["wasserstein", "MAX_LCM"]

MAX_LCM = 4096  # the largest replicated assignment size for n != m


def _flat(x, name: str) -> Array:
    x = jnp.asarray(x)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"`{name}` must be a non-empty batch (n, ...); got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float32)
    return check_finite(x.reshape(x.shape[0], -1), name)


def wasserstein(x0: Float[Array, "n ..."], x1: Float[Array, "m ..."], p: float = 2.0, *,
                solver: str | None = None) -> Float[Array, ""]:
    """Exact ``W_p`` between the uniform empirical measures of ``x0`` and ``x1`` with the
    Euclidean ground distance (samples flattened), see the module docstring.

    torchcfm's ``wasserstein(x0, x1, "exact", power=p)`` for ``p`` in {1, 2}; POT's
    ``ot.emd2(unif(n), unif(m), cdist(x0, x1) ** p) ** (1 / p)`` for any ``p >= 1``.
    The distances are formed from differences (``O(n m d)`` memory), not the expanded
    ``|a|^2 + |b|^2 - 2ab``, so ``p = 1`` keeps its accuracy for nearby points. The
    samples are first divided by a power of two (exact; ``W_p`` is 1-homogeneous and
    multiplied back), so large or tiny coordinates do not overflow or underflow.

    Differentiable: yes, in x0 and x1 (almost everywhere: through the optimal assignment, held
    fixed).

    Args:
        x0: ``(n, ...)`` points.
        x1: ``(m, ...)`` points, the same sample size (the product of the trailing dims).
        p: the order, ``>= 1`` (static).
        solver: the assignment solver, as :func:`jaxkit.kernels.flow_ot.exact_coupling`
            (``None``: :func:`~jaxkit.kernels.flow_ot.default_exact_solver`, the exact
            host auction on a CPU and ``"hungarian"`` on an accelerator; ``"hungarian"`` on
            the device, or ``"host"``, ``"emd"``, ``"auction"`` through a host callback;
            static).

    Returns:
        The scalar ``W_p`` in the inputs' float dtype.

    Raises:
        ValueError: empty or non-finite inputs, different sample sizes, ``p < 1``, an
            unknown ``solver``, or ``lcm(n, m) > MAX_LCM``.
    """
    solver = _resolve_solver(solver)
    check_in_range(p, "p", lo=1.0)
    a, b = _flat(x0, "x0"), _flat(x1, "x1")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"`x0` and `x1` must have the same sample size; got {a.shape[1]} "
                         f"and {b.shape[1]}")
    dtype = jnp.result_type(a.dtype, b.dtype)
    a, b = a.astype(dtype), b.astype(dtype)
    n, m = a.shape[0], b.shape[0]
    size = math.lcm(n, m)
    if size > MAX_LCM:
        raise ValueError(f"lcm(n, m) = {size} > {MAX_LCM}: the exact replicated assignment "
                         f"is too large for n = {n}, m = {m}")
    big = jnp.maximum(jnp.max(jnp.abs(a)), jnp.max(jnp.abs(b)))
    _, e = jnp.frexp(jnp.where(big > 0, big, 1.0))
    a, b = jnp.ldexp(a, -e), jnp.ldexp(b, -e)
    if size != n:
        a = jnp.repeat(a, size // n, axis=0)
    if size != m:
        b = jnp.repeat(b, size // m, axis=0)
    diff = a[:, None, :] - b[None, :, :]
    sq = jnp.sum(diff * diff, axis=-1)
    cost = sq if p == 2 else jnp.sqrt(sq) ** p
    if solver in HOST_SOLVERS:
        perm = jax.pure_callback(HOST_SOLVERS[solver],
                                 jax.ShapeDtypeStruct((size,), jnp.int32),
                                 jax.lax.stop_gradient(cost),  # indices: no tangent
                                 vmap_method="sequential")
        rows = jnp.arange(size)
    else:
        rows, perm = optax.assignment.hungarian_algorithm(cost)
    value = jnp.mean(cost[rows, perm]) ** (1.0 / p)
    return jnp.ldexp(value, e)
