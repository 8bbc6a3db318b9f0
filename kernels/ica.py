"""Whitening and FastICA (parallel fixed-point algorithm with symmetric decorrelation).

Reference: A. Hyvarinen, "Fast and robust fixed-point algorithms for independent
component analysis", IEEE TNN 10(3), 1999; conventions follow scikit-learn's
``FastICA`` (``whiten='unit-variance'``, sign-normalised singular vectors), so that with
the same ``w_init`` the float64 results agree with scikit-learn to ~1e-6.

Everything here is a pure function of arrays: it runs eagerly, under ``jit``, and under
``vmap`` over a batch of same-shaped datasets, where each dataset stops at its own
tolerance (by default on CPU ``vmap`` maps the members through the iteration one after
another, see ``sequential_vmap`` of :func:`fastica`) and non-convergence is a
per-dataset flag, never an exception.

ICA-LiNGAM and DirectLiNGAM, built on :func:`fastica`, live in
:mod:`jaxkit.kernels.lingam`.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._batching import map_over_batch, resolve_sequential_vmap
from .checks import check_data_matrix, check_finite, collinear_columns, is_traced

__all__ = [
    "WhitenResult",
    "FastICAResult",
    "whiten",
    "fastica",
    "sym_decorrelation",
    "fixed_point_update",
    "amari_distance",
]

Fun = Literal["logcosh", "exp", "cube"]


class WhitenResult(NamedTuple):
    """``z = (x - mean) @ whitening.T`` has identity covariance (population, 1/n).

    ``rank_deficient`` (traced inputs only; concrete ones raise): the data span fewer than
    ``k`` dimensions (collinear or duplicated columns), so the clamped whitening is
    finite but meaningless."""

    z: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    mean: Float[Array, " d"]
    rank_deficient: Bool[Array, ""]


class FastICAResult(NamedTuple):
    """Result of :func:`fastica`; ``sources = (x - mean) @ components.T``."""

    components: Float[Array, "k d"]  # unmixing, as scikit-learn's components_
    mixing: Float[Array, "d k"]  # pseudo-inverse of components
    mean: Float[Array, " d"]
    sources: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    unmixing: Float[Array, "k k"]  # rotation found in whitened space
    n_iter: Int[Array, ""]
    converged: Bool[Array, ""]  # False as well when rank_deficient
    rank_deficient: Bool[Array, ""]  # collinear columns: a finite, meaningless fit


def whiten(
    x: Float[Array, "n d"],
    n_components: int | None = None,
    *,
    solver: Literal["svd", "eigh"] = "svd",
) -> WhitenResult:
    """Centre and whiten (PCA-sphere) the data.

    With the centred data ``xc = x - mean`` and its thin SVD ``xc^T = U S V^T``, the
    whitening matrix is ``K = sqrt(n) S^{-1} U^T`` (first ``n_components`` rows), so
    ``z = xc K^T`` has identity population covariance ``z^T z / n = I`` (scikit-learn's
    ``FastICA`` whitening; Hyvarinen & Oja, "Independent component analysis: algorithms
    and applications", Neural Networks 13, 2000, sec. 5.2).

    ``solver="svd"`` takes the thin SVD of the centred data; ``"eigh"`` eigendecomposes
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

    Args:
        x: data matrix, one sample per row; finite, at least 2 rows.
        n_components: number of whitened components ``k <= d`` (static); ``None`` keeps
            all ``d``.
        solver: ``"svd"`` or ``"eigh"`` (static).

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
    mean = jnp.mean(x, axis=0)
    xc = x - mean
    whitening, deficient = _whitening_matrix(xc, k, solver)
    _raise_if_rank_deficient(x, deficient, k)
    return WhitenResult(z=xc @ whitening.T, whitening=whitening, mean=mean,
                        rank_deficient=deficient)


def _raise_if_rank_deficient(x, deficient, k: int) -> None:
    """Concrete collinear data: a ValueError naming ``x`` and the collinear columns."""
    if is_traced(deficient) or not bool(deficient):
        return
    rank, cols = collinear_columns(x)
    if rank >= k:
        return  # the solver's resolution, not the data: the flag says so
    raise ValueError(
        f"`x` is rank-deficient: its centred columns span about {rank} dimensions, fewer "
        f"than the {k} components asked for; columns {cols} are collinear (one is a "
        f"linear combination of the others, e.g. a duplicated column). Drop or combine "
        f"them, or ask for fewer components")


def _whitening_matrix(xc: Float[Array, "n d"], k: int, solver: str
                      ) -> tuple[Float[Array, "k d"], Bool[Array, ""]]:
    """The (k, d) PCA-sphering matrix of centred data ``xc`` (see :func:`whiten`) and
    whether the data are rank-deficient at ``k`` components."""
    n, d = xc.shape
    rtol = 10 * d * jnp.finfo(xc.dtype).eps
    if solver == "svd":
        u, s, _ = jnp.linalg.svd(xc.T, full_matrices=False)
        floor = jnp.maximum(rtol * s[0], jnp.finfo(s.dtype).tiny)
        deficient = s[k - 1] <= floor if k <= s.shape[0] else jnp.asarray(True)
        s = jnp.maximum(s, floor)  # finite whitening even when rank-deficient
    elif solver == "eigh":
        evals, u = jnp.linalg.eigh(xc.T @ xc)
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
    return (u / s).T[:k] * jnp.sqrt(jnp.asarray(n, xc.dtype)), deficient


def sym_decorrelation(w: Float[Array, "k k"]) -> Float[Array, "k k"]:
    """Symmetric decorrelation ``W <- (W W^T)^{-1/2} W`` (Hyvarinen 1999, eq. 23).

    The inverse square root comes from the eigendecomposition ``W W^T = U diag(s) U^T``,
    with the eigenvalues ``s`` clipped below at the dtype's ``tiny`` so a rank-deficient
    ``W`` stays finite.

    Args:
        w: square matrix whose rows are to be made orthonormal.

    Returns:
        The matrix ``(W W^T)^{-1/2} W``, whose rows are orthonormal.
    """
    s, u = jnp.linalg.eigh(w @ w.T)
    s = jnp.maximum(s, jnp.finfo(s.dtype).tiny)
    return (u * jax.lax.rsqrt(s)) @ u.T @ w


def _contrast(fun: Fun, y, alpha):
    """Return g(y) and the sample mean of g'(y) for the negentropy contrast ``fun``."""
    if fun == "logcosh":
        gy = jnp.tanh(alpha * y)
        return gy, alpha * (1 - jnp.mean(gy * gy, axis=-1))
    if fun == "exp":
        e = jnp.exp(-0.5 * y * y)
        return y * e, jnp.mean((1 - y * y) * e, axis=-1)
    if fun == "cube":
        return y**3, jnp.mean(3 * y * y, axis=-1)
    raise ValueError(f"`fun` must be one of 'logcosh', 'exp', 'cube'; got {fun!r}")


def fixed_point_update(
    w: Float[Array, "k k"], z: Float[Array, "n k"], *, fun: Fun = "logcosh", alpha: float = 1.0
) -> tuple[Float[Array, "k k"], Float[Array, ""]]:
    """One parallel FastICA fixed-point step (Hyvarinen 1999, eqs. 20 and 23).

    ``W+ = decorr(E[g(W z) z^T] - diag(E[g'(W z)]) W)`` with ``decorr`` the symmetric
    decorrelation :func:`sym_decorrelation` and ``g`` the derivative of the contrast:
    ``"logcosh"`` ``g(u) = tanh(alpha u)``, ``"exp"`` ``g(u) = u exp(-u^2 / 2)``,
    ``"cube"`` ``g(u) = u^3``.

    Args:
        w: current unmixing matrix in whitened space, shape ``(k, k)``.
        z: whitened data, one sample per row, shape ``(n, k)``.
        fun: the contrast (static): ``"logcosh"``, ``"exp"`` or ``"cube"``.
        alpha: the ``logcosh`` constant, in ``[1, 2]``.

    Returns:
        ``(w_new, change)``: the updated unmixing and the convergence measure
        ``max_i | |<w+_i, w_i>| - 1 |``.
    """
    return _step(w, z.T, z, fun, alpha)


def _step(w, zt, z, fun, alpha):
    """The fixed-point step on whitened data ``zt`` (k, n). With the row-major copy ``z``
    (n, k) both matrix products are plain GEMMs; with ``z=None`` the second contracts the
    sample axis of ``gy`` and ``zt`` directly (see :func:`_fastica_core` for which is
    used when)."""
    gy, dg = _contrast(fun, w @ zt, alpha)
    if z is None:
        gz = jax.lax.dot_general(gy, zt, (((1,), (1,)), ((), ())))
    else:
        gz = gy @ z
    w_new = sym_decorrelation(gz * (1.0 / zt.shape[1]) - dg[:, None] * w)
    lim = jnp.max(jnp.abs(jnp.abs(jnp.sum(w_new * w, axis=1)) - 1))
    return w_new, lim


def fastica(
    key: PRNGKeyArray | None,
    x: Float[Array, "n d"],
    *,
    n_components: int | None = None,
    fun: Fun = "logcosh",
    alpha: float = 1.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    w_init: Float[Array, "k k"] | None = None,
    whiten_solver: Literal["svd", "eigh"] = "svd",
    whiten_mode: Literal["unit-variance", "arbitrary-variance"] = "unit-variance",
    sequential_vmap: bool | None = None,
) -> FastICAResult:
    """Parallel FastICA (Hyvarinen 1999; scikit-learn's ``FastICA(algorithm="parallel")``).

    Whiten ``x`` (:func:`whiten`), then iterate :func:`fixed_point_update` from
    ``W_0 = sym_decorrelation(w_init)`` until ``max_i | |<w+_i, w_i>| - 1 | < tol`` or
    ``max_iter`` steps, in one ``lax.while_loop``. The unmixing in data space is
    ``components = W K`` (``K`` the whitening matrix), the sources
    ``(x - mean) @ components.T``. With ``whiten_mode="unit-variance"`` (scikit-learn's
    default) the sources have unit variance and ``components`` is rescaled accordingly;
    ``"arbitrary-variance"`` uses scikit-learn's scale without the ``sqrt(n)``.

    Args:
        key: PRNG key for the default ``w_init`` (a standard normal ``(k, k)`` draw);
            may be ``None`` when ``w_init`` is given.
        x: data matrix, one sample per row: finite, no constant column, ``n >= d``.
        n_components: number of components ``k <= d`` (static); ``None`` keeps all ``d``.
        fun: the contrast (static), see :func:`fixed_point_update`.
        alpha: the ``logcosh`` constant, in ``[1, 2]``.
        max_iter: maximum number of fixed-point steps (static, ``>= 1``).
        tol: convergence tolerance (``> 0``).
        w_init: initial unmixing ``(k, k)``; overrides ``key``.
        whiten_solver: ``"svd"`` or ``"eigh"`` (static), see :func:`whiten`.
        whiten_mode: ``"unit-variance"`` or ``"arbitrary-variance"`` (static).
        sequential_vmap: how ``jax.vmap`` batches the fit (static): ``True`` maps the
            datasets one after another (``lax.map``; each stops at its own tolerance),
            ``False`` runs one batched loop until the slowest has converged; the results
            are the same. ``None`` (default): ``True`` when the default backend is the
            CPU, ``False`` on GPU/TPU.

    Returns:
        A :class:`FastICAResult`; ``converged`` is a flag (non-convergence is not an
        error) and ``n_iter`` the number of steps taken. Traced rank-deficient data
        (collinear columns, see :func:`whiten`) give a finite result with
        ``rank_deficient=True`` and ``converged=False``.

    Raises:
        ValueError: bad shapes or hyperparameters; concrete ``x`` non-finite, with a
            constant column, or rank-deficient (naming the collinear columns).
    """
    if getattr(x, "ndim", None) != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        check_data_matrix(x, "x")  # raises the standard shape error
    n, d = x.shape
    k = _n_components(n_components, d)
    if n < d:
        raise ValueError(f"`x` has fewer samples ({n}) than variables ({d})")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"`max_iter` must be an integer >= 1; got {max_iter!r}")
    if not is_traced(tol) and not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be positive and finite; got {tol}")
    if not is_traced(alpha) and not 1.0 <= alpha <= 2.0:
        raise ValueError(f"`alpha` must lie in [1, 2]; got {alpha}")
    if whiten_solver not in ("svd", "eigh"):
        raise ValueError(f"`whiten_solver` must be 'svd' or 'eigh'; got {whiten_solver!r}")
    if whiten_mode not in ("unit-variance", "arbitrary-variance"):
        raise ValueError(f"`whiten_mode` must be 'unit-variance' or 'arbitrary-variance'; "
                         f"got {whiten_mode!r}")
    x = jnp.asarray(x)
    _contrast(fun, jnp.zeros((1, 1), x.dtype), alpha)  # validates `fun` eagerly
    if w_init is None:
        if key is None:
            raise ValueError("pass a PRNG `key` or an explicit `w_init`")
        w_init = jax.random.normal(key, (k, k), x.dtype)
    else:
        w_init = jnp.asarray(w_init, x.dtype)
        if w_init.shape != (k, k):
            raise ValueError(f"`w_init` must have shape ({k}, {k}); got {w_init.shape}")

    def core(x, w_init):
        return _fastica_core(x, w_init, k=k, fun=fun, alpha=alpha, max_iter=max_iter, tol=tol,
                             whiten_solver=whiten_solver, whiten_mode=whiten_mode)

    sequential = resolve_sequential_vmap(sequential_vmap)
    if not (is_traced(x) or is_traced(w_init)):
        res = core(x, w_init)  # eager: bad values raise ValueError right away
        _raise_if_rank_deficient(x, res.rank_deficient, k)
        return res
    return map_over_batch(core, sequential=sequential)(x, w_init)


def _fastica_core(x, w_init, *, k, fun, alpha, max_iter, tol, whiten_solver, whiten_mode):
    """Array part of :func:`fastica` for one dataset (arguments already validated).

    Works in the transposed, sample-last layout ``zt = K (x - mean)^T`` (k, n); the
    sources are formed once, after the loop. In float64 it keeps a row-major copy
    ``z = zt^T`` (n, k) as well, so that both matrix products of a step, ``W zt`` and
    ``g(W zt) z``, are plain (non-transposed) GEMMs. In float32 the second product
    contracts the sample axis of ``g(W zt)`` and ``zt`` directly, which XLA:CPU runs
    faster in float32 (and saves the copy); in float64 it is the other way round. See
    benchmarks/RESULTS.md.
    """
    x = check_data_matrix(x, "x")
    w_init = check_finite(w_init, "w_init")
    n = x.shape[0]
    mean = jnp.mean(x, axis=0)
    xc = x - mean
    whitening, deficient = _whitening_matrix(xc, k, whiten_solver)
    zt = whitening @ xc.T  # (k, n) whitened data, sample-last
    # (n, k) copy for the second product of each step; the barrier keeps XLA from
    # folding it back into a transposed operand of that product
    z = jax.lax.optimization_barrier(zt.T) if x.dtype == jnp.float64 else None
    w0 = sym_decorrelation(w_init)
    inf = jnp.asarray(jnp.inf, x.dtype)

    def cond(carry):
        _, it, lim = carry
        return (lim >= tol) & (it < max_iter)

    def body(carry):
        w, it, _ = carry
        w_new, lim = _step(w, zt, z, fun, alpha)
        return w_new, it + 1, lim

    w, n_iter, lim = jax.lax.while_loop(cond, body, (w0, jnp.asarray(0, jnp.int32), inf))

    st = w @ zt  # (k, n) sources in whitened units: unit variance already
    comps = w @ whitening
    if whiten_mode == "unit-variance":
        std = jnp.maximum(jnp.std(st, axis=1), jnp.finfo(st.dtype).tiny)
        st = st / std[:, None]
        comps = comps / std[:, None]
    else:  # scikit-learn's 'arbitrary-variance' scale (no sqrt(n) in the whitening)
        root_n = jnp.sqrt(jnp.asarray(n, x.dtype))
        st = st / root_n
        comps = comps / root_n
    return FastICAResult(
        components=comps,
        mixing=_mixing(comps),
        mean=mean,
        sources=st.T,
        whitening=whitening,
        unmixing=w,
        n_iter=n_iter,
        converged=(lim < tol) & ~deficient,
        rank_deficient=deficient,
    )


def _mixing(comps: Float[Array, "k d"]) -> Float[Array, "d k"]:
    """The mixing matrix ``pinv(components)`` (as scikit-learn): for a square, invertible
    unmixing an LU inverse (the same matrix, cheaper than the SVD behind ``pinv``), with
    ``pinv`` where that inverse is not finite or k < d."""
    if comps.shape[0] != comps.shape[1]:
        return jnp.linalg.pinv(comps)
    inv = jnp.linalg.inv(comps)
    return jax.lax.cond(jnp.all(jnp.isfinite(inv)), lambda: inv,
                        lambda: jnp.linalg.pinv(comps))


def amari_distance(w: Float[Array, "k k"], a: Float[Array, "k k"]) -> Float[Array, ""]:
    """Normalised Amari distance between an unmixing ``w`` and the true mixing ``a``.

    With ``p = |w a|`` (k x k),
    ``d = [sum_i (sum_j p_ij / max_j p_ij - 1) + sum_j (sum_i p_ij / max_i p_ij - 1)]
    / (2 k (k - 1))`` (Amari, Cichocki & Yang, "A new learning algorithm for blind signal
    separation", NeurIPS 1996), which lies in ``[0, 1]`` and is 0 iff ``w a`` is a scaled
    permutation (perfect separation up to order and scale).

    Args:
        w: estimated unmixing matrix, shape ``(k, k)`` (e.g. ``components``).
        a: true mixing matrix, shape ``(k, k)``.

    Returns:
        The scalar distance.
    """
    p = jnp.abs(w @ a)
    k = p.shape[0]
    rows = jnp.sum(p / jnp.max(p, axis=1, keepdims=True), axis=1) - 1
    cols = jnp.sum(p / jnp.max(p, axis=0, keepdims=True), axis=0) - 1
    return (jnp.sum(rows) + jnp.sum(cols)) / (2 * k * (k - 1))


def _n_components(n_components: int | None, d: int) -> int:
    if n_components is None:
        return d
    if not isinstance(n_components, int) or n_components < 1:
        raise ValueError(f"`n_components` must be a positive integer; got {n_components!r}")
    if n_components > d:
        raise ValueError(f"`n_components` ({n_components}) is larger than the number of "
                         f"variables d={d}")
    return n_components

