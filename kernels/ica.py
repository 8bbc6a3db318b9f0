"""Whitening and FastICA (parallel fixed-point algorithm with symmetric decorrelation).

Reference: A. Hyvarinen, "Fast and robust fixed-point algorithms for independent
component analysis", IEEE TNN 10(3), 1999; conventions follow scikit-learn's
``FastICA`` (``whiten='unit-variance'``, sign-normalised singular vectors), so that with
the same ``w_init`` the float64 results agree with scikit-learn to ~1e-6.

Everything here is a pure function of arrays: it runs eagerly, under ``jit``, and under
``vmap`` over a batch of same-shaped datasets, where each dataset stops at its own
tolerance (on CPU ``vmap`` maps the members through the iteration one after another, see
:func:`jaxkit.kernels._batching.map_over_batch`) and non-convergence is a per-dataset
flag, never an exception.

ICA-LiNGAM and DirectLiNGAM live in :mod:`jaxkit.kernels.lingam`; they are re-exported
here so ``jaxkit.kernels.ica`` is the family's single entry point.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._batching import map_over_batch
from .checks import check_data_matrix, check_finite, is_traced

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
    """``z = (x - mean) @ whitening.T`` has identity covariance (population, 1/n)."""

    z: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    mean: Float[Array, " d"]


class FastICAResult(NamedTuple):
    """Result of :func:`fastica`; ``sources = (x - mean) @ components.T``."""

    components: Float[Array, "k d"]  # unmixing, as scikit-learn's components_
    mixing: Float[Array, "d k"]  # pseudo-inverse of components
    mean: Float[Array, " d"]
    sources: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    unmixing: Float[Array, "k k"]  # rotation found in whitened space
    n_iter: Int[Array, ""]
    converged: Bool[Array, ""]


def whiten(
    x: Float[Array, "n d"],
    n_components: int | None = None,
    *,
    solver: Literal["svd", "eigh"] = "svd",
) -> WhitenResult:
    """Centre and whiten (PCA-sphere) the data.

    ``solver="svd"`` takes the thin SVD of the centred data; ``"eigh"`` eigendecomposes
    the d x d scatter matrix (cheaper for n >> d; eigenvalues below 10 eps times the
    largest are clamped, where scikit-learn clamps below an absolute 10 eps). Singular
    vectors are sign-normalised so their first entry is positive (scikit-learn >= 1.9).
    """
    x = check_data_matrix(x, "x", constant=False)
    n, d = x.shape
    k = _n_components(n_components, d)
    mean = jnp.mean(x, axis=0)
    xc = x - mean
    whitening = _whitening_matrix(xc, k, solver)
    return WhitenResult(z=xc @ whitening.T, whitening=whitening, mean=mean)


def _whitening_matrix(xc: Float[Array, "n d"], k: int, solver: str) -> Float[Array, "k d"]:
    """The (k, d) PCA-sphering matrix of centred data ``xc`` (see :func:`whiten`)."""
    n = xc.shape[0]
    if solver == "svd":
        u, s, _ = jnp.linalg.svd(xc.T, full_matrices=False)
    elif solver == "eigh":
        evals, u = jnp.linalg.eigh(xc.T @ xc)
        # scikit-learn clamps eigenvalues below 10 eps (absolute); we clamp relative to
        # the largest one, so an ill-conditioned scatter matrix in float32 (whose small
        # eigenvalues are rounding noise, even negative) cannot blow one whitened
        # component up by orders of magnitude. Identical whenever the spectrum is
        # resolved (the float64 parity tests).
        floor = 10 * jnp.finfo(evals.dtype).eps * jnp.maximum(evals[-1], 1.0)
        s = jnp.sqrt(jnp.maximum(evals, floor))[::-1]
        u = u[:, ::-1]
    else:
        raise ValueError(f"`solver` must be 'svd' or 'eigh'; got {solver!r}")
    sign = jnp.where(u[0] < 0, -1.0, 1.0).astype(u.dtype)
    u = u * sign
    return (u / s).T[:k] * jnp.sqrt(jnp.asarray(n, xc.dtype))


def sym_decorrelation(w: Float[Array, "k k"]) -> Float[Array, "k k"]:
    """Symmetric decorrelation ``(W W^T)^{-1/2} W`` (eigenvalues clipped at ``tiny``)."""
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
    """One parallel FastICA step: ``W+ = decorr(E[g(Wz) z^T] - E[g'(Wz)] W)``.

    Returns the new unmixing and the convergence measure ``max_i | |<w+_i, w_i>| - 1 |``.
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
) -> FastICAResult:
    """Parallel FastICA: whiten, then iterate :func:`fixed_point_update` from
    ``sym_decorrelation(w_init)`` until the change is below ``tol`` or ``max_iter``.

    ``w_init`` defaults to a standard normal (k, k) matrix drawn from ``key``.
    With ``whiten_mode="unit-variance"`` the sources have unit variance and
    ``components`` is rescaled accordingly (scikit-learn's default).
    """
    if getattr(x, "ndim", None) != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        check_data_matrix(x, "x")  # raises the standard shape error
    n, d = x.shape
    k = _n_components(n_components, d)
    if n < d:
        raise ValueError(f"`x` has fewer samples ({n}) than variables ({d})")
    if max_iter < 1:
        raise ValueError(f"`max_iter` must be >= 1; got {max_iter}")
    if not tol > 0:
        raise ValueError(f"`tol` must be positive; got {tol}")
    if not 1.0 <= alpha <= 2.0:
        raise ValueError(f"`alpha` must lie in [1, 2]; got {alpha}")
    if whiten_solver not in ("svd", "eigh"):
        raise ValueError(f"`solver` must be 'svd' or 'eigh'; got {whiten_solver!r}")
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

    if not (is_traced(x) or is_traced(w_init)):
        return core(x, w_init)  # eager: bad values raise ValueError right away
    return map_over_batch(core)(x, w_init)


def _fastica_core(x, w_init, *, k, fun, alpha, max_iter, tol, whiten_solver, whiten_mode):
    """Array part of :func:`fastica` for one dataset (arguments already validated).

    Works in the transposed, sample-last layout ``zt = K (x - mean)^T`` (k, n); the
    sources are formed once, after the loop. In float64 it keeps a row-major copy
    ``z = zt^T`` (n, k) as well, so that both matrix products of a step, ``W zt`` and
    ``g(W zt) z``, are plain (non-transposed) GEMMs. In float32 the second product
    contracts the sample axis of ``g(W zt)`` and ``zt`` directly: XLA:CPU runs that
    (k, n) x (k, n)^T product faster than the (k, n) x (n, k) GEMM, and the copy is
    saved (about 10% of a batched float32 fit; in float64 it is the other way round).
    See benchmarks/RESULTS.md.
    """
    x = check_data_matrix(x, "x")
    w_init = check_finite(w_init, "w_init")
    n = x.shape[0]
    mean = jnp.mean(x, axis=0)
    xc = x - mean
    whitening = _whitening_matrix(xc, k, whiten_solver)
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
        std = jnp.std(st, axis=1)
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
        converged=lim < tol,
    )


def _mixing(comps: Float[Array, "k d"]) -> Float[Array, "d k"]:
    """The mixing matrix ``pinv(components)`` (as scikit-learn): for a square, invertible
    unmixing an LU inverse (the same matrix, about 5% of a batched fit cheaper than the
    SVD behind ``pinv``), with ``pinv`` where that inverse is not finite or k < d."""
    if comps.shape[0] != comps.shape[1]:
        return jnp.linalg.pinv(comps)
    inv = jnp.linalg.inv(comps)
    return jax.lax.cond(jnp.all(jnp.isfinite(inv)), lambda: inv,
                        lambda: jnp.linalg.pinv(comps))


def amari_distance(w: Float[Array, "k k"], a: Float[Array, "k k"]) -> Float[Array, ""]:
    """Amari distance between an unmixing ``w`` and the true mixing ``a``, in [0, 1];
    0 iff ``w @ a`` is a scaled permutation (Amari, Cichocki & Yang 1996, normalised)."""
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


def __getattr__(name):  # lazy re-export, avoids a circular import with lingam
    if name in ("ica_lingam", "direct_lingam"):
        from . import lingam

        return getattr(lingam, name)
    raise AttributeError(name)
