"""Minibatch optimal-transport couplings for OT-CFM (Tong et al., "Improving and
generalizing flow-based generative models with minibatch optimal transport", TMLR 2024;
Pooladian et al., "Multisample flow matching", ICML 2023), computed on device inside
``jit`` (no host round trip).

* :func:`exact_coupling`: the optimal permutation for the squared Euclidean cost,
  solved by :func:`optax.assignment.hungarian_algorithm` (``O(B^3)``, jit-able) or, through
  ``jax.pure_callback``, by a host solver (:data:`HOST_SOLVERS`; :func:`host_assignment`
  for host-side input pipelines).
* :func:`sinkhorn_plan`: the entropic plan from ott-jax's :class:`~ott.solvers.linear.
  sinkhorn.Sinkhorn` (log domain, run to convergence).
* :func:`scaling_sinkhorn_plan`: the same entropic plan from Sinkhorn's scaling
  iterations (fast on CPU, for moderate ``epsilon``).
* :func:`sinkhorn_coupling`: ``B`` pairs drawn from either plan with a choice of sampling
  scheme (``"permutation"``, ``"rows"``, ``"no_duplicates"``, ``"replace"``).
* :func:`ot_cfm_loss`: re-pair the minibatch and apply
  :func:`jaxkit.kernels.flow.cfm_batch_loss`.

Couplings return index arrays ``(i, j)`` of shape ``(B,)``: the pairs are
``(x0[i], x1[j])``. Samples may be pytrees (all leaves share the leading batch axis);
the cost flattens each sample.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray
from ott.geometry import pointcloud
from ott.problems.linear import linear_problem
from ott.solvers.linear import sinkhorn

from . import flow
from .checks import check_finite, check_in_range, fail, is_traced
from .flow_ot_host import (  # noqa: F401 (tests reach them)
    HOST_SOLVERS,
    _emd_assignment,
    _host_assignment,
    host_assignment,
    host_sq_cost,
)

__all__ = ["EXACT_SOLVERS", "default_exact_solver", "SAMPLINGS", "SINKHORN_SOLVERS", "sq_cost",
           "exact_coupling",
           "sinkhorn_plan", "scaling_sinkhorn_plan", "sinkhorn_coupling", "sample_plan",
           "apply_coupling", "ot_cfm_loss", "HOST_SOLVERS", "host_sq_cost", "host_assignment"]

SAMPLINGS = ("permutation", "rows", "no_duplicates", "replace")
SINKHORN_SOLVERS = ("ott", "scaling")
_MOMENTUM_START = 8  # plain scaling iterations before over-relaxation is tuned
PyTree = Any


def _flat(x: PyTree) -> Array:
    leaves = jax.tree_util.tree_leaves(x)
    b = leaves[0].shape[0]
    return jnp.concatenate([jnp.reshape(a, (b, -1)) for a in leaves], axis=1)


def _prep(x0: PyTree, x1: PyTree, *, rescale: bool = True) -> tuple[Array, Array]:
    """Same shapes, finite values; returns the flattened ``(B, d)`` matrices.

    With ``rescale`` both are divided by the power of two ``2^e`` with ``max(|x0|, |x1|)
    = m 2^e``, ``m`` in ``[0.5, 1)``: exact in floating point (the cost matrix is scaled
    by exactly ``4^-e``), so every scale-invariant use of the cost (assignments,
    mean-scaled plans) is unchanged, while the squared distances can no longer overflow
    (``|x| ~ 1e20`` in float32) or underflow to zero (``|x| ~ 1e-25``).
    """
    x0, x1, _ = flow.check_batch(x0, x1)
    a, b = _flat(x0), _flat(x1)
    if not rescale or not jnp.issubdtype(a.dtype, jnp.floating):
        return a, b
    big = jnp.maximum(jnp.max(jnp.abs(a)), jnp.max(jnp.abs(b)))
    _, e = jnp.frexp(jnp.where(big > 0, big, 1.0))
    return jnp.ldexp(a, -e), jnp.ldexp(b, -e)


def _check_sinkhorn_args(epsilon, threshold, max_iterations) -> None:
    check_in_range(epsilon, "epsilon", lo=0, lo_open=True)
    check_in_range(threshold, "threshold", lo=0, lo_open=True)
    check_in_range(max_iterations, "max_iterations", lo=1, integer=True)


def _check_plan_marginals(plan, msg: str):
    """A plan whose rows miss their ``1/B`` marginals by more than 0.5 in total (L1; the
    masses sum to 1) or that is not finite is a failed solve, not a coupling."""
    n = plan.shape[0]
    err = jnp.sum(jnp.abs(jnp.sum(plan, axis=1) - 1.0 / n))
    return fail(plan, ~(jnp.all(jnp.isfinite(plan)) & (err <= 0.5)), msg)


def sq_cost(x0: Float[Array, "B d"], x1: Float[Array, "B d"]) -> Float[Array, "B B"]:
    """Squared Euclidean cost matrix ``C_ij = ||x0_i - x1_j||^2`` (flattened samples).

    Computed as ``|a_i|^2 + |b_j|^2 - 2 a_i . b_j`` clipped at 0: one matrix product
    instead of a ``(B, B, d)`` difference tensor.

    Differentiable: yes, in x0 and x1.

    Args:
        x0: first batch, leaves ``(B, ...)`` (any pytree; each sample is flattened).
        x1: second batch, leaves ``(B', ...)`` with the same sample size.

    Returns:
        The cost matrix ``(B, B')``.
    """
    a, b = _flat(x0), _flat(x1)
    return jnp.maximum(jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :]
                       - 2 * a @ b.T, 0)


EXACT_SOLVERS = ("hungarian", "host", "emd", "auction")


def default_exact_solver() -> str:
    """The exact solver a call that names none uses, chosen for the default backend:
    ``"auction"`` (exact, on the host) on a CPU, where it is several times faster than
    POT and 10-70x faster than the device Hungarian (benchmarks/RESULTS.md, exact W_2);
    ``"hungarian"`` on an accelerator, where the host round trip costs more than it
    saves. Every solver returns an optimal assignment (ties may be broken differently).

    Differentiable: no: a name.

    Returns:
        A name in :data:`EXACT_SOLVERS`.
    """
    return "auction" if jax.default_backend() == "cpu" else "hungarian"


def _resolve_solver(solver: str | None) -> str:
    if solver is None:
        return default_exact_solver()
    if solver not in EXACT_SOLVERS:
        raise ValueError(f"solver must be one of {EXACT_SOLVERS}; got {solver!r}")
    return solver


def exact_coupling(x0: PyTree, x1: PyTree, *, solver: str | None = None,
                   sampling: str = "permutation", key: PRNGKeyArray | None = None
                   ) -> tuple[Int[Array, " B"], Int[Array, " B"]]:
    """Exact minibatch OT: the permutation ``j`` minimising ``sum_i ||x0_i - x1_{j_i}||^2``.

    ``sampling="permutation"`` (default): ``(arange(B), j)``, every sample used once.
    ``"replace"``: torchcfm's ``OTPlanSampler.sample_plan`` (what its
    ``ExactOptimalTransportConditionalFlowMatcher`` trains on), ``B`` pairs i.i.d. from the
    plan ``Perm(j) / B``: ``i_k ~ U{0..B-1}`` with replacement, pairs ``(i_k, j[i_k])``
    (duplicates; about ``B / e`` samples left out); needs ``key``. ``"rows"`` and
    ``"no_duplicates"`` are the permutation itself on a permutation plan.

    ``solver``: ``None`` (default: :func:`default_exact_solver`, ``"auction"`` on a CPU,
    ``"hungarian"`` on an accelerator), ``"hungarian"``
    (:func:`optax.assignment.hungarian_algorithm`, on the device), or on the host through
    ``jax.pure_callback`` (sequential under ``vmap``)
    ``"host"`` (SciPy), ``"emd"`` (POT's ``ot.emd``, torchcfm's solver) or ``"auction"``
    (:mod:`jaxkit.kernels._auction`, the fastest on CPU, see benchmarks/RESULTS.md; on an
    accelerator the host round trip usually costs more than it saves). All are optimal
    (equal total cost; the permutation may differ on ties).

    References: H. W. Kuhn, "The Hungarian method for the assignment problem", Naval
    Research Logistics Quarterly 2, 1955; Tong et al., TMLR 2024 (minibatch OT-CFM).

    Differentiable: no: integer indices.

    Args:
        x0: source batch, leaves ``(B, ...)`` (any pytree).
        x1: target batch, the same pytree and shapes.
        solver: ``None`` (the backend's default), ``"hungarian"``, ``"host"``, ``"emd"`` or
            ``"auction"`` (static).
        sampling: ``"permutation"`` or ``"replace"`` (static; see above).
        key: PRNG key, required for ``sampling="replace"``.

    Returns:
        ``(i, j)``: int32 ``(B,)`` indices: ``(arange(B), perm)``, or the resampled pairs.
    """
    solver = _resolve_solver(solver)
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}; got {sampling!r}")
    if sampling == "replace" and key is None:
        raise ValueError("`key` is required for exact_coupling with sampling='replace'")
    a, b = _prep(x0, x1)  # rescaled by a power of two: the same assignment, no overflow
    cost = sq_cost(a, b)
    n = a.shape[0]
    if solver in HOST_SOLVERS:
        perm = jax.pure_callback(HOST_SOLVERS[solver], jax.ShapeDtypeStruct((n,), jnp.int32),
                                 jax.lax.stop_gradient(cost),  # indices: no tangent
                                 vmap_method="sequential")
    else:
        rows, cols = optax.assignment.hungarian_algorithm(cost)
        perm = jnp.zeros((n,), jnp.int32).at[rows].set(cols.astype(jnp.int32))
    if sampling == "replace":
        i = jax.random.randint(key, (n,), 0, n, jnp.int32)
        return i, perm[i]
    return jnp.arange(n, dtype=jnp.int32), perm


def sinkhorn_plan(x0: PyTree, x1: PyTree, *, epsilon: float = 0.05,
                  scale_cost: str | float = "mean", threshold: float = 1e-3,
                  max_iterations: int = 2000) -> Float[Array, "B B"]:
    """Entropic OT plan between the uniform empirical measures of ``x0`` and ``x1`` for the
    squared Euclidean cost (ott-jax Sinkhorn, log domain). ``epsilon`` is relative to the
    cost scaled by ``scale_cost`` (``"mean"``: divided by the mean cost, as torchcfm
    normalises). Rows sum to ``1/B``, columns to ``1/B`` (to ``threshold``).

    The plan is ``argmin_{P in U(a, b)} <P, C / s> - epsilon H(P)`` (M. Cuturi, "Sinkhorn
    distances", NeurIPS 2013), ``a = b = 1/B``, ``C_ij = ||x0_i - x1_j||^2`` and ``s`` the
    ``scale_cost`` (the mean of ``C`` for ``"mean"``, its maximum for ``"max_cost"``, the
    number itself for a float).

    **Relation to torchcfm / POT.** torchcfm's ``OTPlanSampler("sinkhorn", reg=r)`` calls
    ``ot.sinkhorn(a, b, C, reg=r)`` on the raw ``C``: ``argmin <P, C> + r sum P log P``.
    On ``U(a, b)`` POT's, ott-jax's (``KL(P | a b^T)``) and Cuturi's (``-H(P)``) entropy
    terms differ by constants, so: ``epsilon = r, scale_cost = 1.0`` is torchcfm's ``reg``
    exactly (absolute; SB-CFM's coupling is ``epsilon = 2 sigma^2, scale_cost = 1.0``);
    with ``scale_cost="mean"`` (the default) ``epsilon = r / mean(C)``, a different ``r``
    on every minibatch; torchcfm's ``normalize_cost=True`` is ``scale_cost="max_cost"``.

    With a string ``scale_cost`` (scale-invariant) the samples are first divided by a
    power of two (exact), so that huge or tiny coordinates cannot overflow or underflow
    the cost; a float ``scale_cost`` uses the raw cost, which must then be finite.

    Differentiable: yes, in x0 and x1 (ott-jax's implicit differentiation, accurate to threshold).

    Args:
        x0: source batch, leaves ``(B, ...)`` (any pytree).
        x1: target batch, the same pytree and shapes.
        epsilon: entropic regularisation, relative to the scaled cost (``> 0``).
        scale_cost: ott-jax's cost scaling (``"mean"``, ``"max_cost"``, a float, ...).
        threshold: ott-jax's stopping tolerance on the marginals (``> 0``).
        max_iterations: iteration cap (static, ``>= 1``).

    Returns:
        The plan ``(B, B)``.

    Raises:
        ValueError: non-positive ``epsilon``/``threshold``/``scale_cost``, non-finite
            samples or cost, or a failed solve (rows off their marginals by more than
            0.5 in L1 or a non-finite plan, e.g. ``epsilon`` far too small); traced
            values as run-time checks.
    """
    _check_sinkhorn_args(epsilon, threshold, max_iterations)
    if not isinstance(scale_cost, str):
        check_in_range(scale_cost, "scale_cost", lo=0, lo_open=True)
    a, b = _prep(x0, x1, rescale=isinstance(scale_cost, str))
    if not isinstance(scale_cost, str):
        a = fail(a, ~jnp.all(jnp.isfinite(sq_cost(a, b))),
                 "`x0`/`x1`: the squared distances overflow their dtype; rescale the "
                 "samples or use a string `scale_cost` such as 'mean'")
    geom = pointcloud.PointCloud(a, b, epsilon=epsilon, scale_cost=scale_cost)
    out = sinkhorn.Sinkhorn(threshold=threshold, max_iterations=max_iterations)(
        linear_problem.LinearProblem(geom))
    return _check_plan_marginals(
        out.matrix, "Sinkhorn failed: the plan is not finite or misses its marginals by "
        "more than 0.5; `epsilon` is too small for the samples (or `max_iterations` too "
        "few)")


def scaling_sinkhorn_plan(x0: PyTree, x1: PyTree, *, epsilon: float = 0.05,
                          threshold: float = 1e-3,
                          max_iterations: int = 1000) -> Float[Array, "B B"]:
    """Entropic OT plan between the uniform empirical measures of ``x0`` and ``x1`` by
    Sinkhorn's scaling iterations (Cuturi, NeurIPS 2013): with the squared Euclidean
    cost divided by its mean (as :func:`sinkhorn_plan`'s ``scale_cost="mean"``) and
    ``K = exp(-C / epsilon)``, repeat ``u <- a / (K v)``, ``v <- b / (K^T u)`` (``a = b =
    1/B``) until the plan ``diag(u) K diag(v)`` has row sums within ``threshold`` of
    ``a`` in L1 (its column sums are exact), or ``max_iterations``; ott-jax's stopping
    rule.

    Why beside ott-jax: on CPU its log-domain iteration (a log-sum-exp over all B^2
    entries) costs more than a CFM step at B = 256; a scaling iteration is two
    multiply-add passes over ``K`` (see benchmarks/RESULTS.md).
    Each row of ``K`` is stabilised by its smallest cost, but the scaling form still
    underflows for small ``epsilon``: an ``x1`` whose cost to every ``x0`` exceeds that
    ``x0``'s smallest cost by more than ~87 ``epsilon`` in float32 (~708 in float64;
    relative to the mean cost) gets no mass. Use :func:`sinkhorn_plan` (log domain) for
    ``epsilon`` below ~0.02.

    Differentiable: no: its scaling iterations are a while_loop (reverse mode fails); sinkhorn_plan
    is differentiable.

    Args:
        x0: source batch, leaves ``(B, ...)`` (any pytree).
        x1: target batch, the same pytree and shapes.
        epsilon: entropic regularisation, relative to the mean cost (static, ``> 0``).
        threshold: L1 tolerance on the row sums (static, ``> 0``).
        max_iterations: iteration cap (static).

    Returns:
        The plan ``(B, B)``, columns summing to ``1/B`` exactly.

    Raises:
        ValueError: non-positive ``epsilon``/``threshold``, non-finite samples, or a
            failed solve (rows off their marginals by more than 0.5 in L1, the
            underflow above at a far too small ``epsilon``); traced, a run-time check.
    """
    if is_traced(epsilon) or is_traced(threshold):
        raise ValueError("`epsilon` and `threshold` of scaling_sinkhorn_plan are static: "
                         "pass Python floats, not traced values")
    _check_sinkhorn_args(epsilon, threshold, max_iterations)
    a, b = _prep(x0, x1)
    n = a.shape[0]
    cost = sq_cost(a, b)
    cost = cost / jnp.maximum(jnp.mean(cost), jnp.finfo(cost.dtype).tiny)
    kern = jnp.exp(-(cost - jnp.min(cost, axis=1, keepdims=True)) / epsilon)
    tiny = jnp.finfo(kern.dtype).tiny
    w = 1.0 / n

    # K v and K^T u as multiply-and-reduce passes: on XLA:CPU each fuses into one loop
    # (faster there than matrix-vector products). Over-relaxation (Thibault et al. 2017,
    # "Overrelaxed Sinkhorn-Knopp"): after _MOMENTUM_START plain iterations,
    # u <- u (a / K v / u)^w with w = 2 / (1 + sqrt(1 - k)) from the observed error
    # contraction k per iteration (capped at 1.8), like ott-jax's adaptive momentum; it cut
    # the iterations to 1e-3 on the flow benchmark's 2D minibatches (float32, B = 256) from
    # 20-35 to 16-18 and left 64D (6-7) unchanged.
    hi = w / tiny

    def relax(old, target, omega):
        return jnp.clip(old * (target / old) ** omega, tiny, hi)

    def body(carry):
        it, u, v, kv, err, err1, omega = carry
        u = relax(u, w / jnp.maximum(kv, tiny), omega)
        v = relax(v, w / jnp.maximum(jnp.sum(kern * u[:, None], axis=0), tiny), omega)
        kv = jnp.sum(kern * v[None, :], axis=1)
        new = jnp.sum(jnp.abs(u * kv - w))  # row-sum L1 error
        kappa = jnp.sqrt(new / jnp.maximum(err1, tiny))  # contraction per iteration:
        # err1 is the error two iterations before ``new``
        tuned = jnp.minimum(2 / (1 + jnp.sqrt(jnp.maximum(1 - kappa, 0))), 1.8)
        omega = jnp.where((it + 1 == _MOMENTUM_START) & (kappa < 1), tuned, omega)
        return it + 1, u, v, kv, new, err, omega

    def cond(carry):
        return (carry[0] < max_iterations) & (carry[4] > threshold)

    ones = jnp.ones((n,), kern.dtype)
    inf = jnp.asarray(jnp.inf, kern.dtype)
    _, u, _, _, _, _, _ = jax.lax.while_loop(
        cond, body, (jnp.int32(0), ones, ones, jnp.sum(kern, axis=1), inf, inf,
                     jnp.asarray(1.0, kern.dtype)))
    v = w / jnp.maximum(jnp.sum(kern * u[:, None], axis=0), tiny)  # exact column sums
    return _check_plan_marginals(
        u[:, None] * kern * v[None, :],
        "scaling Sinkhorn failed: the plan misses its row marginals by more than 0.5 (the "
        "kernel exp(-C / epsilon) underflows): `epsilon` is too small for this solver; "
        "use sinkhorn_plan (log domain) or a larger `epsilon`")


def _sample_rows(key: PRNGKeyArray, w: Float[Array, "n m"], block: int = 16
                 ) -> Int[Array, " n"]:
    """One column per row of the nonnegative weights ``w``, drawn in proportion to the
    row: inverse-CDF sampling with one uniform per row, in two levels (the block of
    ``block`` columns from the block sums, then the column inside it): less work than a
    cumulative sum over all B^2 entries or ``jax.random.categorical`` (B^2 Gumbel
    variates)."""
    n, m = w.shape
    w = jnp.pad(w, ((0, 0), (0, (-m) % block)))
    wb = w.reshape(n, -1, block)
    sums = wb.sum(-1)                                   # (n, blocks)
    cdf = jnp.cumsum(sums, axis=1)
    r = jax.random.uniform(key, (n,), w.dtype) * cdf[:, -1]
    # the first block (then column) whose cumulative weight exceeds r: zero-weight
    # entries are never drawn (up to rounding at the very end of a row)
    blk = jnp.minimum(jnp.sum(cdf <= r[:, None], axis=1), sums.shape[1] - 1)
    base = jnp.take_along_axis(cdf - sums, blk[:, None], axis=1)[:, 0]
    inner = jnp.cumsum(jnp.take_along_axis(wb, blk[:, None, None], axis=1)[:, 0], axis=1)
    col = jnp.minimum(jnp.sum(inner <= (r - base)[:, None], axis=1), block - 1)
    return jnp.minimum(blk * block + col, m - 1).astype(jnp.int32)


def sample_plan(key: PRNGKeyArray, plan: Float[Array, "B B"], *,
                sampling: str = "permutation") -> tuple[Int[Array, " B"], Int[Array, " B"]]:
    """Draw ``B`` index pairs ``(i, j)`` from a ``(B, B)`` coupling ``plan``.

    ``sampling``:

    * ``"permutation"`` (default): perturb-and-MAP (Papandreou & Yuille 2011): the
      assignment maximising ``sum_i log P_{i j_i} + G_{i j_i}`` with i.i.d. Gumbel ``G``.
      A random permutation (each ``x0`` and each ``x1`` exactly once, no duplicate pairs)
      concentrated on the plan's support; it is not an exact sample of the plan.
    * ``"rows"``: ``i = arange(B)``, ``j_i ~ P[i, :] / sum_j P[i, j]``: each ``x0`` once,
      ``x1`` may repeat; exact conditional sampling.
    * ``"no_duplicates"``: Gumbel-top-``B`` over the ``B^2`` entries: ``B`` distinct
      pairs drawn without replacement proportionally to ``P`` (rows/columns may repeat).
    * ``"replace"``: ``B`` i.i.d. draws of pairs from ``P`` (with replacement; torchcfm's
      ``OTPlanSampler`` behaviour: duplicate pairs are possible).

    Differentiable: no: integer indices.

    Args:
        key: PRNG key.
        plan: a nonnegative coupling ``(B, B)`` (e.g. from :func:`sinkhorn_plan`).
        sampling: ``"permutation"``, ``"rows"``, ``"no_duplicates"`` or ``"replace"``
            (static).

    Returns:
        ``(i, j)``: int32 ``(B,)`` index arrays.
    """
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}; got {sampling!r}")
    plan = jnp.asarray(plan)
    if plan.ndim != 2 or plan.shape[0] != plan.shape[1] or plan.shape[0] < 1:
        raise ValueError(f"`plan` must be a square (B, B) matrix; got shape {plan.shape}")
    plan = check_finite(plan, "plan")
    plan = fail(plan, jnp.any(plan < 0) | ~(jnp.sum(plan) > 0),
                "`plan` must be nonnegative with positive total mass")
    n = plan.shape[0]
    dtype = plan.dtype if jnp.issubdtype(plan.dtype, jnp.floating) else jnp.float32
    logp = jnp.log(jnp.maximum(plan, 0).astype(dtype))
    if sampling == "permutation":
        score = logp + jax.random.gumbel(key, (n, n), dtype)
        # optax solves a minimisation; -inf log-probabilities become a large finite cost
        cost = -jnp.where(jnp.isfinite(score), score, -1e30)
        rows, cols = optax.assignment.hungarian_algorithm(cost)
        perm = jnp.zeros((n,), jnp.int32).at[rows].set(cols.astype(jnp.int32))
        return jnp.arange(n, dtype=jnp.int32), perm
    if sampling == "rows":
        j = _sample_rows(key, jnp.maximum(plan, 0).astype(dtype))
        return jnp.arange(n, dtype=jnp.int32), j
    flat = logp.reshape(-1)
    if sampling == "no_duplicates":
        _, idx = jax.lax.top_k(flat + jax.random.gumbel(key, flat.shape, dtype), n)
    else:
        # inverse-CDF sampling: O(B^2) memory (jax.random.categorical with shape=(B,)
        # would draw B x B^2 Gumbel variates: 4 GB at B = 1024)
        w = jnp.exp(flat - jnp.max(flat))
        cdf = jnp.cumsum(w)
        u = jax.random.uniform(key, (n,), dtype) * cdf[-1]
        idx = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), flat.shape[0] - 1)
    idx = idx.astype(jnp.int32)
    return idx // n, idx % n


def sinkhorn_coupling(key: PRNGKeyArray, x0: PyTree, x1: PyTree, *, epsilon: float = 0.05,
                      sampling: str = "permutation", scale_cost: str | float = "mean",
                      threshold: float = 1e-3, max_iterations: int = 2000,
                      solver: str = "ott") -> tuple[Int[Array, " B"], Int[Array, " B"]]:
    """Entropic minibatch OT coupling: the plan, then :func:`sample_plan` (see there for
    ``sampling``; default ``"permutation"``, no duplicate pairs and every sample used
    once). ``solver="ott"``: :func:`sinkhorn_plan`; ``"scaling"``:
    :func:`scaling_sinkhorn_plan` (faster on CPU; the cost is scaled by its mean). Both
    stop at ``threshold`` or ``max_iterations``.

    Differentiable: no: integer indices.

    Args:
        key: PRNG key for :func:`sample_plan`.
        x0: source batch, leaves ``(B, ...)`` (any pytree).
        x1: target batch, the same pytree and shapes.
        epsilon: entropic regularisation, relative to the scaled cost.
        sampling: see :func:`sample_plan` (static).
        scale_cost: the cost scaling (``"mean"`` only for ``solver="scaling"``).
        threshold: stopping tolerance.
        max_iterations: iteration cap (static).
        solver: ``"ott"`` or ``"scaling"`` (static).

    Returns:
        ``(i, j)``: int32 ``(B,)`` index arrays.
    """
    if solver not in SINKHORN_SOLVERS:
        raise ValueError(f"solver must be one of {SINKHORN_SOLVERS}; got {solver!r}")
    if solver == "ott":
        plan = sinkhorn_plan(x0, x1, epsilon=epsilon, scale_cost=scale_cost,
                             threshold=threshold, max_iterations=max_iterations)
    else:
        if scale_cost != "mean":
            raise ValueError("solver='scaling' scales the cost by its mean; got "
                             f"scale_cost={scale_cost!r}")
        plan = scaling_sinkhorn_plan(x0, x1, epsilon=epsilon, threshold=threshold,
                                     max_iterations=max_iterations)
    return sample_plan(key, plan, sampling=sampling)


def apply_coupling(x0: PyTree, x1: PyTree, i: Int[Array, " B"],
                   j: Int[Array, " B"]) -> tuple[PyTree, PyTree]:
    """The paired minibatch ``(x0[i], x1[j])`` (leaf-wise along the batch axis).

    Differentiable: yes, in x0 and x1.

    Args:
        x0: source batch, leaves ``(B, ...)``.
        x1: target batch, leaves ``(B, ...)``.
        i: indices into ``x0``.
        j: indices into ``x1``.

    Returns:
        ``(x0[i], x1[j])``.
    """
    take = lambda x, k: jax.tree_util.tree_map(lambda a: a[k], x)  # noqa: E731
    return take(x0, i), take(x1, j)


def ot_cfm_loss(velocity_fn: Callable, params: PyTree, key: PRNGKeyArray, x0: PyTree,
                x1: PyTree, *, coupling: str = "exact", epsilon: float = 0.05,
                sampling: str = "permutation", path: str = "linear",
                y: Int[Array, " B"] | None = None, p_uncond: float = 0.0,
                null_label: int = -1, exact_solver: str | None = None,
                sinkhorn_solver: str = "ott", scale_cost: str | float = "mean",
                **path_kwargs) -> Float[Array, ""]:
    """OT-CFM loss (Tong et al. 2024): pair the minibatch with ``coupling="exact"``
    (:func:`exact_coupling` with ``solver=exact_solver`` and ``sampling``: the exact
    permutation, or torchcfm's resampling with replacement for ``"replace"``) or
    ``"sinkhorn"`` (:func:`sinkhorn_coupling` with ``epsilon``, ``scale_cost``,
    ``sampling`` and ``solver=sinkhorn_solver``), then
    :func:`jaxkit.kernels.flow.cfm_batch_loss` on the pairs. Labels ``y`` belong to
    ``x1`` and follow its re-indexing. The coupling is computed on the stopped-gradient
    data (indices carry no gradient).

    torchcfm equivalents: ``ExactOptimalTransportConditionalFlowMatcher(sigma)`` is
    ``coupling="exact", sampling="replace", path="linear", sigma=sigma``;
    ``SchrodingerBridgeConditionalFlowMatcher(sigma, ot_method="sinkhorn")`` is
    ``coupling="sinkhorn", epsilon=2 * sigma**2, scale_cost=1.0, sampling="replace",
    path="sb", sigma=sigma`` (see :func:`sinkhorn_plan` for the epsilon relation).

    Differentiable: yes, in params, x0 and x1 (the coupling held fixed: piecewise constant).

    Args:
        velocity_fn: batched ``velocity_fn(params, t, x[, y]) -> v``.
        params: the model's parameters (any pytree).
        key: PRNG key (coupling and loss).
        x0: source batch, leaves ``(B, ...)``.
        x1: target batch, the same pytree and shapes.
        coupling: ``"exact"`` or ``"sinkhorn"`` (static).
        epsilon: Sinkhorn's regularisation, relative to the cost scaled by
            ``scale_cost``.
        sampling: pair sampling (static), see :func:`sample_plan` (Sinkhorn) and
            :func:`exact_coupling` (exact: ``"replace"`` resamples, else the permutation).
        path: the probability path (static), see :data:`jaxkit.kernels.flow.PATHS`.
        y: optional integer labels of ``x1`` ``(B,)``.
        p_uncond: label-dropout probability (static).
        null_label: the dropped label.
        exact_solver: :func:`exact_coupling`'s ``solver`` (static; ``None``: the
            backend's default).
        sinkhorn_solver: :func:`sinkhorn_coupling`'s ``solver`` (static).
        scale_cost: the Sinkhorn cost scaling (``"mean"``, ``"max_cost"``, or a float:
            ``1.0`` makes ``epsilon`` absolute, torchcfm's ``reg``).
        **path_kwargs: the path's options.

    Returns:
        The scalar loss.
    """
    if coupling not in ("exact", "sinkhorn"):
        raise ValueError(f"coupling must be 'exact' or 'sinkhorn'; got {coupling!r}")
    kc, kl = jax.random.split(key)
    sg = jax.lax.stop_gradient
    if coupling == "exact":
        i, j = exact_coupling(sg(x0), sg(x1), solver=exact_solver, sampling=sampling,
                              key=kc)
    else:
        i, j = sinkhorn_coupling(kc, sg(x0), sg(x1), epsilon=epsilon, sampling=sampling,
                                 scale_cost=scale_cost, solver=sinkhorn_solver)
    x0p, x1p = apply_coupling(x0, x1, i, j)
    yp = None if y is None else jnp.asarray(y)[j]
    return flow.cfm_batch_loss(velocity_fn, params, kl, x0p, x1p, path=path, y=yp,
                               p_uncond=p_uncond, null_label=null_label, **path_kwargs)
