"""ICA-LiNGAM and DirectLiNGAM fits (Shimizu et al. 2006, 2011)."""

from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._batching import map_over_batch, resolve_sequential_vmap
from ..ica import fastica
from ._checks import _GAMMA_H, _K1, _K2, Criterion, _check_prune_args, _check_x
from .order import b_from_unmixing, causal_order_from_b
from .prior import (
    allowed_parents,
    check_prior_knowledge,
    partial_order,
    soft_candidates,
    strong_candidates,
)
from .prune import _prune


class LiNGAMResult(NamedTuple):
    """Result of :func:`ica_lingam` / :func:`direct_lingam`."""

    adjacency: Float[Array, "d d"]  # pruned; [i, j] = direct effect of j on i
    adjacency_unpruned: Float[Array, "d d"]  # OLS of each variable on all predecessors
    causal_order: Int[Array, " d"]  # causal_order[0] is a root
    converged: Bool[Array, ""]  # FastICA converged (DirectLiNGAM: True); False if rank_deficient
    n_iter: Int[Array, ""]  # FastICA iterations (0 for DirectLiNGAM)
    # traced data only (concrete data raise): collinear columns; the adjacencies are then
    # finite ridge-stabilised fits, not estimates
    rank_deficient: Bool[Array, ""] = False


def _check_fit(x, gamma, criterion, sequential_vmap):
    """The checks of a whole fit: the data, the pruning options and the vmap rule;
    returns ``(x, sequential)``."""
    x = _check_x(x)
    _check_prune_args(gamma, criterion)
    return x, resolve_sequential_vmap(sequential_vmap)


def ica_lingam(
    key: PRNGKeyArray | None,
    x: Float[Array, "n d"],
    *,
    prune: bool = True,
    max_iter: int = 1000,
    tol: float = 1e-4,
    fun: Literal["logcosh", "exp", "cube"] = "logcosh",
    w_init: Float[Array, "d d"] | None = None,
    whiten_solver: Literal["svd", "eigh"] = "svd",
    gamma: float = 1.0,
    criterion: Criterion = "bic",
    prior_knowledge=None,
    sequential_vmap: bool | None = None,
) -> LiNGAMResult:
    """ICA-LiNGAM (Shimizu et al. 2006) as lingam's ``ICALiNGAM.fit``.

    1. :func:`jaxkit.kernels.ica.fastica` (parallel, ``max_iter=1000`` as lingam);
       ``W = components``. ``w_init`` defaults to a standard normal draw from ``key``.
    2-3. :func:`b_from_unmixing`: assignment-permute rows, unit diagonal, ``B = I - W'``.
    4. :func:`causal_order_from_b`.
    5. :func:`adaptive_lasso_prune` with ``gamma`` and ``criterion`` (skipped with
       ``prune=False``; then ``adjacency`` is the unpruned OLS). The default
       ``criterion="bic"`` is the profile-likelihood BIC; ``"bic_sklearn"`` reproduces
       lingam's ``LassoLarsIC`` selection (see :func:`adaptive_lasso_prune`).

    With the same ``w_init``, steps 1-4 give lingam's causal order (tested against
    scikit-learn's FastICA + ``scipy.optimize.linear_sum_assignment``).

    ``prior_knowledge`` (a jaxkit extension: lingam's ``ICALiNGAM`` takes none; the
    semantics are those of its ``DirectLiNGAM``, see :mod:`jaxkit.kernels.lingam.prior`):
    entries of ``B`` forbidden by it are zeroed before step 4, the order search of step
    4 only peels a variable once every variable that must precede it is ordered, and
    step 5 never uses a forbidden parent.
    ``converged`` and ``n_iter`` report FastICA; non-convergence (e.g. Gaussian data,
    which runs to ``max_iter``) is a flag, not an error.

    Precision: the whitening sees the raw covariance, so in float32 data whose column
    variances span orders of magnitude (e.g. raw, var-sortable simulated SEMs) lose
    accuracy there. On 16 such datasets (the causal-audit pipeline's raw Reisach cell,
    d = 10, n = 1000) the F1 was about 0.48 in float32 and 0.68 in float64, where a float64
    scikit-learn reference scores 0.70-0.72. Use float64 (``jax.enable_x64``) for such data;
    standardising first changes the problem (ICA-LiNGAM is not scale-invariant).

    Differentiable: no: FastICA inside (see ica.fastica); the causal order is discrete.

    Args:
        key: PRNG key for FastICA's default ``w_init``; may be ``None`` with ``w_init``.
        x: data matrix ``(n, d)``: finite, no constant column, ``n >= d``.
        prune: prune the full order by adaptive lasso (static).
        max_iter: FastICA's maximum number of steps (static).
        tol: FastICA's tolerance.
        fun: FastICA's contrast (static).
        w_init: FastICA's initial unmixing ``(d, d)``.
        whiten_solver: ``"svd"`` or ``"eigh"`` (static).
        gamma: adaptive-lasso exponent, see :func:`adaptive_lasso_prune`.
        criterion: information criterion (static), see :func:`adaptive_lasso_prune`.
        prior_knowledge: optional ``(d, d)`` matrix, ``pk[i, j]`` = 1 (``x_j`` has a
            path to ``x_i``), 0 (it has none) or -1 (unknown); concrete, validated by
            :func:`jaxkit.kernels.lingam.prior.check_prior_knowledge`.
        sequential_vmap: how ``jax.vmap`` batches the fit (static), as in
            :func:`jaxkit.kernels.ica.fastica`; ``None`` picks the backend's default.

    Returns:
        A :class:`LiNGAMResult`; ``converged`` and ``n_iter`` are FastICA's.

    Raises:
        ValueError: bad data, options or prior knowledge.
    """
    x, sequential = _check_fit(x, gamma, criterion, sequential_vmap)
    d = x.shape[-1]
    pk = None if prior_knowledge is None else check_prior_knowledge(prior_knowledge, d)
    allowed = before = None
    if pk is not None:
        allowed = jnp.asarray(allowed_parents(pk))
        before = jnp.asarray(partial_order(pk))
    static = (max_iter, fun, whiten_solver, prune, criterion)
    if w_init is None:
        if key is None:
            raise ValueError("pass a PRNG `key` or an explicit `w_init`")
        w_init = jax.random.normal(key, (d, d), x.dtype)  # as fastica draws it
    w_init = jnp.asarray(w_init, x.dtype)
    if w_init.shape != (d, d):
        raise ValueError(f"`w_init` must have shape ({d}, {d}); got {w_init.shape}")
    if not any(isinstance(v, jax.core.Tracer) for v in (x, w_init, tol, gamma)):
        # concrete call: one compiled fit per static configuration and shape, reused
        return _compiled_ica(*static)(x, w_init, tol, gamma, before, allowed)
    return _ica_fit(x, w_init, tol, gamma, before, allowed, *static, sequential)


def _ica_fit(x, w_init, tol, gamma, before, allowed, max_iter, fun, whiten_solver, prune,
             criterion, sequential):
    ica = fastica(None, x, max_iter=max_iter, tol=tol, fun=fun, w_init=w_init,
                  whiten_solver=whiten_solver, sequential_vmap=sequential)
    b = b_from_unmixing(ica.components)
    if allowed is not None:
        b = jnp.where(allowed, b, 0.0)
    order = causal_order_from_b(b, before=before)
    adjacency, unpruned, deficient = _prune(x, order, gamma, criterion, prune, sequential,
                                            allowed=allowed)
    deficient = deficient | ica.rank_deficient
    return LiNGAMResult(adjacency, unpruned, order, ica.converged & ~deficient, ica.n_iter,
                        deficient)


@functools.lru_cache(maxsize=64)
def _compiled_ica(max_iter, fun, whiten_solver, prune, criterion):
    """The jitted ICA-LiNGAM fit of one static configuration (concrete calls)."""
    return jax.jit(lambda x, w, tol, gamma, before, allowed: _ica_fit(
        x, w, tol, gamma, before, allowed, max_iter, fun, whiten_solver, prune, criterion,
        True))


def _log_cosh(u):
    a = jnp.abs(u)
    return a + jnp.log1p(jnp.exp(-2.0 * a)) - math.log(2.0)


def _entropy_terms(u, axis=0):
    """Hyvarinen's maximum-entropy approximation of the differential entropy of the
    unit-variance ``u`` (means over ``axis``)."""
    m1 = jnp.mean(_log_cosh(u), axis=axis)
    m2 = jnp.mean(u * jnp.exp(-0.5 * u * u), axis=axis)
    return (1.0 + math.log(2.0 * math.pi)) / 2.0 - _K1 * (m1 - _GAMMA_H) ** 2 - _K2 * m2**2


def _direct_order(x: Float[Array, "n d"], before, pk_soft, measure: str) -> Int[Array, " d"]:
    """DirectLiNGAM's causal order (see :func:`direct_lingam`); ``before`` (strong prior
    knowledge: ``before[a, b]``, ``a`` precedes ``b``) and ``pk_soft`` (the matrix, soft
    use) restrict the candidates, at most one of them given."""
    n, d = x.shape
    idx = jnp.arange(d)
    tiny = jnp.finfo(x.dtype).tiny
    if measure == "kernel":
        from .kernel_measure import kernel_scores, standardise

        x = standardise(x)

    def step(s, carry):
        xr, remaining, order = carry
        vj = jnp.zeros(d, bool)
        if before is not None:
            cand = strong_candidates(before, remaining)
        elif pk_soft is not None:
            cand, vj = soft_candidates(pk_soft, remaining)
        else:
            cand = remaining
        if measure == "kernel":
            score = kernel_scores(xr, remaining)
        else:
            score = _pwling_scores(xr, remaining, vj)
        score = jnp.where(cand, score, jnp.inf)
        # lingam: the single candidate, else argmax of -score (first index on ties)
        m = jnp.where(jnp.sum(cand) == 1, jnp.argmax(cand), jnp.argmin(score)).astype(jnp.int32)
        # regress x_m out of the other remaining variables (raw scale, lingam's coefficient)
        xc = xr - jnp.mean(xr, axis=0)
        xm = xc[:, m]
        b = (xc.T @ xm / n) / jnp.maximum(jnp.mean(xm * xm), tiny)
        upd = remaining & (idx != m)
        xr = xr - jnp.where(upd, b, 0.0)[None, :] * xr[:, m][:, None]
        return xr, remaining & (idx != m), order.at[s].set(m)

    init = (x, jnp.ones(d, bool), jnp.zeros(d, jnp.int32))
    _, remaining, order = jax.lax.fori_loop(0, d - 1, step, init)
    return order.at[d - 1].set(jnp.argmax(remaining).astype(jnp.int32))


def _pwling_scores(xr, remaining, vj):
    """``M_i`` of the pairwise likelihood-ratio measure for every ``i`` (see
    :func:`direct_lingam`); for ``j`` in ``vj`` (soft prior knowledge) the residual
    ``r_j|i`` is replaced by ``z_j``, as lingam."""
    n, d = xr.shape
    tiny = jnp.finfo(xr.dtype).tiny
    xc = xr - jnp.mean(xr, axis=0)
    sd = jnp.sqrt(jnp.mean(xc * xc, axis=0))
    z = xc / jnp.where(sd > 0, sd, 1.0)
    var0 = jnp.mean(z * z, axis=0)  # 1 up to rounding (ddof=0)
    cov0 = z.T @ z / n
    # lingam 1.13's residual coefficient: np.cov(bias=True) / np.var (both ddof=0)
    coef = cov0 / jnp.where(var0 > 0, var0, 1.0)[None, :]
    # r[:, i, j]: residual of z_i regressed on z_j, normalised to unit variance
    rvar = var0[:, None] - 2.0 * coef * cov0 + coef**2 * var0[None, :]
    rsd = jnp.sqrt(jnp.maximum(rvar, tiny))
    r = (z[:, :, None] - coef[None] * z[:, None, :]) / rsd[None]
    h_r = _entropy_terms(r)  # (i, j)
    h_z = _entropy_terms(z)  # (i,)
    h_rji = jnp.where(vj[None, :], h_z[None, :], h_r.T)  # [i, j]: H(r_j|i) or H(z_j)
    diff = (h_z[None, :] + h_r) - (h_z[:, None] + h_rji)
    pair = remaining[:, None] & remaining[None, :] & ~jnp.eye(d, dtype=bool)
    return jnp.sum(jnp.where(pair, jnp.minimum(0.0, diff) ** 2, 0.0), axis=1)


def direct_lingam(
    x: Float[Array, "n d"],
    *,
    prune: bool = True,
    gamma: float = 1.0,
    criterion: Criterion = "bic",
    prior_knowledge=None,
    apply_prior_knowledge_softly: bool = False,
    measure: Literal["pwling", "kernel"] = "pwling",
    sequential_vmap: bool | None = None,
) -> LiNGAMResult:
    """DirectLiNGAM (Shimizu et al. 2011) as lingam's ``DirectLiNGAM.fit``, with the
    pairwise likelihood-ratio measure of Hyvarinen & Smith (2013) (``measure="pwling"``)
    or the kernel-based one of Shimizu et al. (2011) (``measure="kernel"``).

    At each of ``d - 1`` steps, over the remaining variables (a mask; shapes fixed):
    standardise each (ddof=0); for every ordered pair form the residual
    ``r_i|j = z_i - c_ij z_j`` with lingam 1.13's coefficient ``c_ij = cov(z_i, z_j) /
    var(z_j)`` (``np.cov(bias=True)``, both ddof=0); with the entropy approximation
    ``H(u) = (1 + log 2 pi)/2 - k1 (E log cosh u - g)^2 - k2 (E u exp(-u^2/2))^2``
    (k1 = 79.047, k2 = 7.4129, g = 0.37457) on unit-variance arguments, score
    ``M_i = sum_j min(0, H(z_j) + H(r_i|j) - H(z_i) - H(r_j|i))^2``; the next variable in
    the order is the candidate with the smallest ``M_i`` (lowest index on ties; a single
    candidate is taken as is); regress it out of the other remaining variables on the
    raw scale (same coefficient). The last remaining variable closes the order. Then
    :func:`adaptive_lasso_prune`. ``measure="kernel"``: the data are standardised once
    and the next variable minimises the summed kernel mutual information of
    :func:`jaxkit.kernels.lingam.kernel_measure.kernel_scores` (``O(d^2 n^3)`` per step:
    small ``n`` only).

    Prior knowledge (``pk[i, j]`` = 1: ``x_j`` has a path to ``x_i``; 0: it has none;
    -1: unknown; see :mod:`jaxkit.kernels.lingam.prior`): by default (strong) only
    variables whose required predecessors are all ordered are candidates; with
    ``apply_prior_knowledge_softly=True`` the candidates and the residual substitution
    of lingam's soft rule (:func:`jaxkit.kernels.lingam.prior.soft_candidates`). Either
    way the pruning never uses a forbidden parent.

    All pairs are evaluated at once: each step materialises an ``n x d x d`` tensor
    (memory ``~ 3 n d^2`` floats per dataset under ``vmap``). ``converged`` is always
    True and ``n_iter`` 0.

    Differentiable: no: a discrete order search; reverse mode fails ('Linearization failed':
    map_over_batch's custom vmap rule).

    Args:
        x: data matrix ``(n, d)``: finite, no constant column, ``n >= d``.
        prune: prune the order by adaptive lasso (static).
        gamma: adaptive-lasso exponent, see :func:`adaptive_lasso_prune`.
        criterion: information criterion (static), see :func:`adaptive_lasso_prune`.
        prior_knowledge: optional ``(d, d)`` matrix (concrete), validated by
            :func:`jaxkit.kernels.lingam.prior.check_prior_knowledge`.
        apply_prior_knowledge_softly: lingam's soft use of ``prior_knowledge`` (static).
        measure: ``"pwling"`` or ``"kernel"`` (static).
        sequential_vmap: how ``jax.vmap`` batches the fit (static), as in
            :func:`jaxkit.kernels.ica.fastica`; ``None`` picks the backend's default.

    Returns:
        A :class:`LiNGAMResult` (``n_iter`` 0: no ICA).

    Raises:
        ValueError: bad data, options or prior knowledge.
    """
    x, sequential = _check_fit(x, gamma, criterion, sequential_vmap)
    if measure not in ("pwling", "kernel"):
        raise ValueError(f"`measure` must be 'pwling' or 'kernel'; got {measure!r} "
                         f"('pwling_fast' needs lingam's CUDA extension: use 'pwling')")
    if not isinstance(apply_prior_knowledge_softly, bool):
        raise ValueError("`apply_prior_knowledge_softly` must be True or False; got "
                         f"{apply_prior_knowledge_softly!r}")
    allowed = before = soft = None
    if prior_knowledge is not None:
        pk = check_prior_knowledge(prior_knowledge, x.shape[-1])
        allowed = jnp.asarray(allowed_parents(pk))
        if apply_prior_knowledge_softly:
            soft = jnp.asarray(pk)
        else:
            before = jnp.asarray(partial_order(pk))
    if not any(isinstance(v, jax.core.Tracer) for v in (x, gamma)):
        # concrete call: one compiled fit per static configuration and shape, reused
        fit = _compiled_direct(before is not None, soft is not None, measure, prune, criterion)
        return fit(x, before, soft, allowed, gamma)
    return _direct_fit(x, before, soft, allowed, gamma, measure, prune, criterion, sequential)


def _direct_fit(x, before, soft, allowed, gamma, measure, prune, criterion, sequential):
    order = map_over_batch(lambda x: _direct_order(x, before, soft, measure),
                           sequential=sequential)(x)
    adjacency, unpruned, deficient = _prune(x, order, gamma, criterion, prune, sequential,
                                            allowed=allowed)
    return LiNGAMResult(adjacency, unpruned, order, ~deficient, jnp.asarray(0, jnp.int32),
                        deficient)


@functools.lru_cache(maxsize=64)
def _compiled_direct(has_before, has_soft, measure, prune, criterion):
    """The jitted DirectLiNGAM fit of one static configuration (concrete calls)."""
    return jax.jit(lambda x, before, soft, allowed, gamma: _direct_fit(
        x, before, soft, allowed, gamma, measure, prune, criterion, True))
