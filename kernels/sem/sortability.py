"""Sortability of simulated SEM data and the sort-and-regress floor baselines.

Simulated additive-noise SEMs are often *sortable*: a simple per-variable score
(the marginal variance, or the R^2 of a variable regressed on all others) tends to grow
along the causal order, so a method that only sorts by the score and then regresses each
variable on its predecessors looks strong. Reisach et al. measure this by the fraction
of directed paths whose endpoints are ordered by the score.

* :func:`order_alignment` (sortability of any score), :func:`var_sortability`,
  :func:`r2_sortability`, :func:`r2_coefficients`;
* :func:`sort_regress` and the floors :func:`var_sort_regress`,
  :func:`r2_sort_regress`, :func:`random_sort_regress`.

Convention (LiNGAM's, as the rest of :mod:`jaxkit.kernels.sem`): ``b[i, j] != 0`` is
the edge ``j -> i`` (CausalDisco's ``W`` is the transpose).

References:
    A. G. Reisach, C. Seiler, S. Weichwald, "Beware of the simulated DAG! Causal
    discovery benchmarks may be easy to game", NeurIPS 2021 (var-sortability,
    Var-SortnRegress).
    A. G. Reisach, M. Tami, C. Seiler, S. Chambaz, S. Weichwald, "A scale-invariant
    sorting criterion to find a causal order in additive noise models", NeurIPS 2023
    (R^2-sortability, R^2-SortnRegress).

Every function is fixed-shape and runs eagerly, under ``jit`` and under ``vmap``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._batching import map_over_batch, resolve_sequential_vmap
from ..checks import check_finite, check_in_range, is_traced
from ..lingam._checks import Criterion, _check_prune_args, _check_x
from ..lingam.prune import _prune

__all__ = ["SortRegressResult", "order_alignment", "var_sortability", "r2_coefficients",
           "r2_sortability", "sort_regress", "var_sort_regress", "r2_sort_regress",
           "random_sort_regress"]


class SortRegressResult(NamedTuple):
    """Result of :func:`sort_regress` and the floors."""

    adjacency: Float[Array, "d d"]  # pruned; [i, j] = direct effect of j on i
    adjacency_unpruned: Float[Array, "d d"]  # OLS of each variable on all predecessors
    causal_order: Int[Array, " d"]  # ascending score; causal_order[0] is the root guess
    scores: Float[Array, " d"]  # the sorting score of each variable
    # traced data only (concrete data raise): collinear columns; the adjacencies are
    # then finite ridge-stabilised fits, not estimates
    rank_deficient: Bool[Array, ""] = False


def _check_square(b, d: int | None = None):
    if not hasattr(b, "ndim"):
        b = jnp.asarray(b)
    if b.ndim != 2 or b.shape[0] != b.shape[1] or (d is not None and b.shape[0] != d):
        want = "(d, d)" if d is None else f"({d}, {d})"
        raise ValueError(f"`b` must be a square {want} adjacency; got shape {b.shape}")
    return b


def _reach_counts(b: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """``sum_{k=1}^{d-1} [(A^k)[i, j] > 0]`` for ``A = (b != 0)``: the number of path
    lengths ``k`` at which ``i`` is reached from ``j`` (CausalDisco's boolean powers)."""
    d = b.shape[0]
    a = (b != 0).astype(jnp.float32)

    def body(_, carry):
        rk, total = carry
        rk = (rk @ a > 0).astype(jnp.float32)
        return rk, total + rk

    _, total = jax.lax.fori_loop(0, max(d - 2, 0), body, (a, a))
    return total


def order_alignment(scores: Float[Array, " d"], b: Float[Array, "d d"], *,
                    tol: float = 0.0) -> Float[Array, ""]:
    """Sortability of ``scores`` with respect to the DAG ``b``.

    .. math:: \\frac{\\sum_{k=1}^{d-1} \\sum_{i, j} [A^k]_{ij} \\big(
        \\mathbb 1[s_i - s_j > \\tau] + \\tfrac12 \\mathbb 1[|s_i - s_j| \\le \\tau]\\big)}
        {\\sum_{k=1}^{d-1} \\sum_{i, j} [A^k]_{ij}}

    with ``[A^k]_{ij}`` = 1 when a directed path of length ``k`` leads from ``j`` to
    ``i`` (boolean matrix powers, as ``CausalDisco.analytics.order_alignment``): the
    fraction of (cause, effect, length) triples whose effect has the larger score, ties
    within ``tol`` counting one half. 1 means the score sorts every path, 0.5 is chance,
    0 anti-sorted. A graph without edges has no paths: the value is then 0.5 (no order
    information) rather than 0/0.

    Differentiable: no: a fraction of sorted pairs (piecewise constant).

    Args:
        scores: one score per variable ``(d,)``.
        b: adjacency ``(d, d)`` in the LiNGAM convention (``b[i, j] != 0``: ``j -> i``).
        tol: tie tolerance (``>= 0``).

    Returns:
        The sortability, a scalar in ``[0, 1]``.
    """
    scores = jnp.asarray(scores)
    if scores.ndim != 1:
        raise ValueError(f"`scores` must be a vector (d,); got shape {scores.shape}")
    b = _check_square(b, scores.shape[0])
    check_in_range(tol, "tol", lo=0)
    scores = check_finite(scores, "scores")
    b = check_finite(b, "b")
    dtype = jnp.result_type(scores.dtype, jnp.float32)
    reach = _reach_counts(b).astype(dtype)
    diff = scores[:, None] - scores[None, :]  # [i, j] = s_i - s_j, i the effect
    good = jnp.where(diff > tol, 1.0, 0.0) + jnp.where(jnp.abs(diff) <= tol, 0.5, 0.0)
    n_paths = jnp.sum(reach)
    val = jnp.sum(reach * good.astype(dtype)) / jnp.maximum(n_paths, 1.0)
    return jnp.where(n_paths > 0, val, 0.5).astype(dtype)


def _data(x):
    if not hasattr(x, "ndim"):
        x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"`x` must be a 2-D array of shape (n_samples, n_features); got "
                         f"shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def var_sortability(x: Float[Array, "n d"], b: Float[Array, "d d"], *,
                    tol: float = 0.0) -> Float[Array, ""]:
    """Var-sortability (Reisach et al. 2021): :func:`order_alignment` of the marginal
    variances ``Var(x_j)`` (ddof 0).

    Differentiable: no: a fraction of sorted pairs (piecewise constant).

    Args:
        x: data ``(n, d)``.
        b: the true adjacency ``(d, d)`` (``b[i, j] != 0``: ``j -> i``).
        tol: tie tolerance.

    Returns:
        The var-sortability in ``[0, 1]``.
    """
    x = check_finite(_data(x), "x")
    return order_alignment(jnp.var(x, axis=0), b, tol=tol)


def _r2_one(x):
    d = x.shape[1]
    xc = x - jnp.mean(x, axis=0)
    cov = xc.T @ xc / x.shape[0]
    sd = jnp.sqrt(jnp.maximum(jnp.diagonal(cov), jnp.finfo(x.dtype).tiny))
    corr = cov / (sd[:, None] * sd[None, :])
    ridge = 10 * d * jnp.finfo(x.dtype).eps
    prec_diag = jnp.diagonal(jnp.linalg.solve(corr + ridge * jnp.eye(d, dtype=x.dtype),
                                              jnp.eye(d, dtype=x.dtype)))
    return jnp.clip(1.0 - 1.0 / prec_diag, 0.0, 1.0)


def r2_coefficients(x: Float[Array, "n d"], *,
                    sequential_vmap: bool | None = None) -> Float[Array, " d"]:
    """The coefficient of determination of each variable regressed on all others,
    ``R^2_j = 1 - 1 / (C^{-1})_{jj}`` with ``C`` the correlation matrix (the partial-
    correlation identity CausalDisco's ``r2coeff`` uses). Scale-invariant.

    ``C`` gets a ``10 d eps`` ridge and the result is clipped to ``[0, 1]``, so
    collinear columns give ``R^2 ~ 1`` instead of inf/NaN.

    Differentiable: no: reverse mode fails ('Linearization failed'): its solves run under
    map_over_batch's custom vmap rule (kernels/_batching.py), which JAX can only
    forward-differentiate (jax.jvp works).

    Args:
        x: data ``(n, d)``, finite.
        sequential_vmap: under ``vmap``, solve one dataset at a time (static; ``None``:
            the backend's default, see :func:`jaxkit.kernels.ica.fastica`).

    Returns:
        ``(d,)`` values in ``[0, 1]``.
    """
    x = check_finite(_data(x), "x")
    seq = resolve_sequential_vmap(sequential_vmap)
    return map_over_batch(_r2_one, sequential=seq)(x)


def r2_sortability(x: Float[Array, "n d"], b: Float[Array, "d d"], *, tol: float = 0.0,
                   sequential_vmap: bool | None = None) -> Float[Array, ""]:
    """R^2-sortability (Reisach et al. 2023): :func:`order_alignment` of
    :func:`r2_coefficients`. Unchanged by rescaling the variables, unlike
    :func:`var_sortability`.

    Differentiable: no: a fraction of sorted pairs (piecewise constant).

    Args:
        x: data ``(n, d)``.
        b: the true adjacency ``(d, d)`` (``b[i, j] != 0``: ``j -> i``).
        tol: tie tolerance.
        sequential_vmap: see :func:`r2_coefficients`.

    Returns:
        The R^2-sortability in ``[0, 1]``.
    """
    return order_alignment(r2_coefficients(x, sequential_vmap=sequential_vmap), b, tol=tol)


def sort_regress(x: Float[Array, "n d"], scores: Float[Array, " d"], *, gamma: float = 1.0,
                 criterion: Criterion = "bic",
                 sequential_vmap: bool | None = None) -> SortRegressResult:
    """Sort-and-regress: order the variables by ascending ``scores`` (stable: the lower
    index first on ties) and prune the order into a DAG by adaptive lasso.

    The pruning is :func:`jaxkit.kernels.lingam.adaptive_lasso_prune` (lingam's
    standardised adaptive lasso with an exact LARS path and BIC), the step ICA-LiNGAM
    prunes with, so floor and method differ only in the order. CausalDisco's
    ``sort_regress`` runs scikit-learn's ``LassoLarsIC`` on the raw scale instead: the
    order is identical, the selected parents can differ near the criterion's boundary.

    Differentiable: no: the order is piecewise constant in scores, and the adaptive-lasso pruning
    fails in reverse mode (see adaptive_lasso_prune).

    Args:
        x: data ``(n, d)``: finite, no constant column, ``n >= d``.
        scores: the sorting score of each variable ``(d,)``, finite.
        gamma: adaptive-lasso exponent (``>= 0``).
        criterion: information criterion (static), see ``adaptive_lasso_prune``.
        sequential_vmap: how ``vmap`` batches the pruning (static; ``None``: backend).

    Returns:
        A :class:`SortRegressResult`.

    Raises:
        ValueError: bad shapes or options; concrete ``x`` non-finite, constant or
            collinear (traced: run-time checks for the first two, ``rank_deficient``
            for collinearity).
    """
    x = _check_x(_data(x))
    _check_prune_args(gamma, criterion)
    scores = jnp.asarray(scores)
    if scores.shape != (x.shape[1],):
        raise ValueError(f"`scores` must have shape ({x.shape[1]},); got {scores.shape}")
    scores = check_finite(scores, "scores")
    order = jnp.argsort(scores, stable=True).astype(jnp.int32)
    seq = resolve_sequential_vmap(sequential_vmap)
    adjacency, unpruned, deficient = _prune(x, order, gamma, criterion, True, seq)
    return SortRegressResult(adjacency, unpruned, order, scores, deficient)


def var_sort_regress(x: Float[Array, "n d"], *, gamma: float = 1.0,
                     criterion: Criterion = "bic",
                     sequential_vmap: bool | None = None) -> SortRegressResult:
    """Var-SortnRegress (Reisach et al. 2021): :func:`sort_regress` by the marginal
    variances. On raw simulated linear SEMs it is often competitive with real methods;
    after standardising the data it orders at chance.

    Differentiable: no: as sort_regress.

    Args:
        x: data ``(n, d)``.
        gamma: see :func:`sort_regress`.
        criterion: see :func:`sort_regress`.
        sequential_vmap: see :func:`sort_regress`.

    Returns:
        A :class:`SortRegressResult` (``scores`` = variances).
    """
    x = _data(x)
    return sort_regress(x, jnp.var(x, axis=0), gamma=gamma, criterion=criterion,
                        sequential_vmap=sequential_vmap)


def r2_sort_regress(x: Float[Array, "n d"], *, gamma: float = 1.0,
                    criterion: Criterion = "bic",
                    sequential_vmap: bool | None = None) -> SortRegressResult:
    """R^2-SortnRegress (Reisach et al. 2023): :func:`sort_regress` by
    :func:`r2_coefficients`; scale-invariant, so standardising does not defeat it.

    Differentiable: no: as sort_regress.

    Args:
        x: data ``(n, d)``.
        gamma: see :func:`sort_regress`.
        criterion: see :func:`sort_regress`.
        sequential_vmap: see :func:`sort_regress`.

    Returns:
        A :class:`SortRegressResult` (``scores`` = R^2 values).
    """
    x = _data(x)
    return sort_regress(x, r2_coefficients(x, sequential_vmap=sequential_vmap), gamma=gamma,
                        criterion=criterion, sequential_vmap=sequential_vmap)


def random_sort_regress(key: PRNGKeyArray, x: Float[Array, "n d"], *, gamma: float = 1.0,
                        criterion: Criterion = "bic",
                        sequential_vmap: bool | None = None) -> SortRegressResult:
    """Random-SortnRegress: :func:`sort_regress` by i.i.d. uniform scores, i.e. a
    uniformly random order -- the chance level of every sort-and-regress method.

    Differentiable: no: as sort_regress.

    Args:
        key: PRNG key for the scores.
        x: data ``(n, d)``.
        gamma: see :func:`sort_regress`.
        criterion: see :func:`sort_regress`.
        sequential_vmap: see :func:`sort_regress`.

    Returns:
        A :class:`SortRegressResult` (``scores`` = the uniform draws).
    """
    x = _data(x)
    if is_traced(key) is False and not hasattr(key, "dtype"):
        raise ValueError("`key` must be a JAX PRNG key")
    scores = jax.random.uniform(key, (x.shape[1],), x.dtype)
    return sort_regress(x, scores, gamma=gamma, criterion=criterion,
                        sequential_vmap=sequential_vmap)
