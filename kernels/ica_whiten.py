"""Whitening (PCA sphering) of a data matrix, the first stage of FastICA
(:mod:`jaxkit.kernels.ica`, which re-exports everything public here).

Reference: A. Hyvarinen & E. Oja, "Independent component analysis: algorithms and
applications", Neural Networks 13, 2000, sec. 5.2; conventions follow scikit-learn's
``FastICA`` (``whiten_solver``, sign-normalised singular vectors).
"""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._batching import map_over_batch, resolve_sequential_vmap
from ._gram_svd import gram_svd
from ._rowmeans import mean_first as _mean_first
from .checks import check_data_matrix, collinear_columns, is_traced

__all__ = ["RankDeficientWarning", "WhitenResult", "whiten"]


class RankDeficientWarning(UserWarning):
    """The whitening clamped singular values it could not resolve (scikit-learn warns
    "There are some small singular values" in the same case); the fit is finite but the
    clamped components are not meaningful."""


class WhitenResult(NamedTuple):
    """``z = (x - mean) @ whitening.T`` has identity covariance (population, 1/n).

    ``rank_deficient`` (traced inputs only; concrete ones raise): the data span fewer than
    ``k`` dimensions (collinear or duplicated columns), so the clamped whitening is
    finite but meaningless."""

    z: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    mean: Float[Array, " d"]
    rank_deficient: Bool[Array, ""]


def whiten(
    x: Float[Array, "n d"],
    n_components: int | None = None,
    *,
    solver: Literal["svd", "eigh"] = "svd",
    sequential_vmap: bool | None = None,
) -> WhitenResult:
    """Centre and whiten (PCA-sphere) the data.

    With the centred data ``xc = x - mean`` and its thin SVD ``xc^T = U S V^T``, the
    whitening matrix is ``K = sqrt(n) S^{-1} U^T`` (first ``n_components`` rows), so
    ``z = xc K^T`` has identity population covariance ``z^T z / n = I`` (scikit-learn's
    ``FastICA`` whitening; Hyvarinen & Oja, "Independent component analysis: algorithms
    and applications", Neural Networks 13, 2000, sec. 5.2).

    ``solver="svd"`` takes the thin SVD of the centred data: from two passes of Gram
    matrices in XLA products and the SVD of the d x d factor they give
    (:func:`jaxkit.kernels._gram_svd.gram_svd`: as accurate as LAPACK's SVD of ``xc``
    where its own check says so, condition numbers up to about 1e4 in float32 and 1e8 in
    float64), else LAPACK's SVD of ``xc`` itself. ``"eigh"`` eigendecomposes
    the d x d scatter matrix ``xc^T xc`` (fewer flops for n >> d; eigenvalues below 10
    eps times the largest are clamped, where scikit-learn clamps below an absolute 10
    eps). Singular vectors are sign-normalised so their first entry is positive
    (scikit-learn >= 1.9).

    Rank deficiency: ``rank_deficient`` is set when the solver cannot resolve ``k``
    components, i.e. the ``k``-th singular value is at most ``10 d eps`` times the
    largest (``"eigh"``: the ``k``-th eigenvalue at most ``10 d eps`` times the largest,
    the resolution of an eigendecomposition of the scatter matrix); the spectrum is
    clamped there, so the output stays finite. Concrete data whose centred columns are
    collinear at that precision (singular values of a float64 SVD, see
    :func:`jaxkit.kernels.checks.collinear_columns`) raise ``ValueError`` naming the
    columns; ill-conditioned data that only ``"eigh"`` in float32 cannot resolve are
    returned with the flag set.

    Differentiable: yes, in x (z, whitening and mean; needs distinct singular values).

    Args:
        x: data matrix, one sample per row; finite, at least 2 rows.
        n_components: number of whitened components ``k <= d`` (static); ``None`` keeps
            all ``d``.
        solver: ``"svd"`` or ``"eigh"`` (static).
        sequential_vmap: how ``jax.vmap`` batches the whitening (static), as in
            :func:`fastica`: ``True`` maps the datasets one after another, so each takes
            the ``"svd"`` branch its own data need (the Gram passes, or LAPACK's SVD only
            where those are not accurate) and no LAPACK call is batched; ``False``
            batches them, where a ``vmap``-ed branch runs LAPACK's SVD of every
            dataset. ``None`` (default): ``True`` on the CPU, ``False`` on GPU/TPU.

    Returns:
        A :class:`WhitenResult` ``(z, whitening, mean, rank_deficient)`` with ``z = (x -
        mean) @ whitening.T`` of shape ``(n, k)``.

    Raises:
        ValueError: bad shapes or options; concrete ``x`` non-finite or rank-deficient.
    """
    x = check_data_matrix(x, "x", constant=False)
    n, d = x.shape
    k = _n_components(n_components, d)
    if solver not in ("svd", "eigh"):
        raise ValueError(f"`solver` must be 'svd' or 'eigh'; got {solver!r}")
    sequential = resolve_sequential_vmap(sequential_vmap)

    def core(x, branch):
        mean, xct, gram = _centred_t(x)
        whitening, deficient = _whitening_matrix(x, mean, xct, gram, k, solver, branch)
        return WhitenResult(z=(whitening @ xct).T, whitening=whitening, mean=mean,
                            rank_deficient=deficient)

    # derivatives of the same whitening through LAPACK's SVD (see _whitening_matrix)
    res = map_over_batch(lambda x: core(x, "cond"), sequential=sequential,
                         differentiate=lambda x: core(x, "lapack"))(x)
    _raise_if_rank_deficient(x, res.rank_deficient, k)
    return res


def _raise_if_rank_deficient(x, deficient, k: int) -> None:
    """Concrete collinear data: a ValueError naming ``x`` and the collinear columns. Data
    whose columns are resolvable (a float64 SVD finds rank ``>= k``) but that the chosen
    solver and dtype could not resolve get a :class:`RankDeficientWarning` instead: the
    clamped whitening is finite and the result carries ``rank_deficient=True``."""
    if is_traced(deficient) or not bool(deficient):
        return
    rank, cols = collinear_columns(x)
    if rank >= k:
        warnings.warn(
            f"There are some small singular values: the whitening of `x` ({x.dtype}) "
            f"cannot resolve {k} components and clamps the spectrum, so the fit is finite "
            f"but flagged rank_deficient; whiten_solver='svd', float64 or fewer "
            f"components might lead to more accurate results", RankDeficientWarning,
            stacklevel=3)
        return
    raise ValueError(
        f"`x` is rank-deficient: its centred columns span about {rank} dimensions, fewer "
        f"than the {k} components asked for; columns {cols} are collinear (one is a "
        f"linear combination of the others, e.g. a duplicated column). Drop or combine "
        f"them, or ask for fewer components")


def _centred_t(x: Float[Array, "n d"]) -> tuple[Float[Array, " d"], Float[Array, "d n"],
                                               Float[Array, "d d"]]:
    """The column means of ``x``, the centred data in the sample-last layout ``xct = (x -
    mean)^T`` (d, n) and its Gram matrix ``xct xct^T``.

    ``xct`` is one copy of the data, made by the centring itself and kept by an
    optimisation barrier: without it XLA:CPU folds the transpose back into every product
    that reads the data, each of which then transposes its operand (the products of the
    whitening ran 4-6x slower that way, benchmarks/RESULTS.md)."""
    mean = _mean_first(x)
    xct = jax.lax.optimization_barrier((x - mean).T)
    return mean, xct, xct @ xct.T


def _whitening_matrix(x: Float[Array, "n d"], mean: Float[Array, " d"],
                      xct: Float[Array, "d n"], gram: Float[Array, "d d"], k: int,
                      solver: str, branch: str = "cond"
                      ) -> tuple[Float[Array, "k d"], Bool[Array, ""]]:
    """The (k, d) PCA-sphering matrix of the centred data ``x - mean``, given sample-last,
    ``xct`` (d, n), with its Gram matrix ``gram = xct xct^T`` (see :func:`whiten`), and
    whether the data are rank-deficient at ``k`` components. The result is barred from
    XLA's layout folding (a transposed operand made the product ``K xct`` about 4x slower).
    ``branch`` (``svd`` solver): ``"cond"``, the Gram passes and LAPACK's SVD only where
    those are not accurate; ``"lapack"``, LAPACK's SVD always (the derivatives of
    :func:`whiten`: the same function, with no ``cond`` for JAX to transpose and no
    derivative through the second Gram pass, whose eigenvalues all lie near 1)."""
    d, n = xct.shape
    rtol = 10 * d * jnp.finfo(xct.dtype).eps
    if solver == "svd":
        # XLA products and (d, d) LAPACK calls where as accurate as LAPACK's SVD of xct,
        # that SVD otherwise (a branch per dataset under the sequential vmap rule)
        def lapack():
            # centred again inside the branch: LAPACK wants its own (column-major) copy,
            # which an operand of the branch would make on every call
            return jnp.linalg.svd((x - mean).T, full_matrices=False)[:2]

        if n >= d and branch == "cond":
            u, s, accurate = gram_svd(xct, gram)
            u, s = jax.lax.cond(accurate, lambda: (u, s), lapack)
        else:
            u, s = lapack()
        floor = jnp.maximum(rtol * s[0], jnp.finfo(s.dtype).tiny)
        deficient = s[k - 1] <= floor if k <= s.shape[0] else jnp.asarray(True)
        s = jnp.maximum(s, floor)  # finite whitening even when rank-deficient
    elif solver == "eigh":
        evals, u = jnp.linalg.eigh(gram)
        # scikit-learn clamps eigenvalues below 10 eps (absolute); we clamp relative to
        # the largest one, so an ill-conditioned scatter matrix in float32 (whose small
        # eigenvalues are rounding noise, even negative) cannot blow one whitened
        # component up by orders of magnitude. Identical whenever the spectrum is
        # resolved (the float64 parity tests).
        floor = 10 * jnp.finfo(evals.dtype).eps * jnp.maximum(evals[-1], 1.0)
        deficient = evals[d - k] <= jnp.maximum(rtol * evals[-1], jnp.finfo(evals.dtype).tiny)
        s = jnp.sqrt(jnp.maximum(evals, floor))[::-1]
        u = u[:, ::-1]
    else:
        raise ValueError(f"`solver` must be 'svd' or 'eigh'; got {solver!r}")
    sign = jnp.where(u[0] < 0, -1.0, 1.0).astype(u.dtype)
    u = u * sign
    whitening = (u / s).T[:k] * jnp.sqrt(jnp.asarray(n, xct.dtype))
    return jax.lax.optimization_barrier(whitening), deficient


def _n_components(n_components: int | None, d: int) -> int:
    if n_components is None:
        return d
    if not isinstance(n_components, int) or n_components < 1:
        raise ValueError(f"`n_components` must be a positive integer; got {n_components!r}")
    if n_components > d:
        raise ValueError(f"`n_components` ({n_components}) is larger than the number of "
                         f"variables d={d}")
    return n_components

