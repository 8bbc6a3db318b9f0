"""FastICA (parallel fixed-point algorithm with symmetric decorrelation), and the
whitening of :mod:`jaxkit.kernels.ica_whiten` re-exported.

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

import functools
import warnings
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._batching import map_over_batch, resolve_sequential_vmap
from ._ica_checks import screened_flags
from ._rowmeans import mean_last as _mean_last
from ._rowmeans import std_last as _std_last
from .checks import check_data_matrix, check_finite, is_traced
from .ica_metrics import amari_distance
from .ica_transform import _mixing, inverse_transform, transform
from .ica_whiten import (
    RankDeficientWarning,
    WhitenResult,
    _centred_t,
    _n_components,
    _raise_if_rank_deficient,
    _whitening_matrix,
    whiten,
)

__all__ = [
    "WhitenResult",
    "FastICAResult",
    "RankDeficientWarning",
    "whiten",
    "fastica",
    "fit_transform",
    "transform",
    "inverse_transform",
    "sym_decorrelation",
    "fixed_point_update",
    "amari_distance",
]

Fun = Literal["logcosh", "exp", "cube"] | Callable
Whiten = Literal["unit-variance", "arbitrary-variance"] | bool


class FastICAResult(NamedTuple):
    """Result of :func:`fastica`; ``sources = (x - mean) @ components.T``."""

    components: Float[Array, "k d"]  # unmixing, as scikit-learn's components_
    mixing: Float[Array, "d k"]  # pseudo-inverse of components
    mean: Float[Array, " d"]
    sources: Float[Array, "n k"]
    whitening: Float[Array, "k d"]
    unmixing: Float[Array, "k k"]  # rotation found in whitened space
    n_iter: Int[Array, ""]
    converged: Bool[Array, ""]  # False as well when rank_deficient or not finite
    rank_deficient: Bool[Array, ""]  # collinear or constant columns: a meaningless fit
    finite: Bool[Array, ""] = True  # False: traced x held NaN or inf (the fit is NaN)


def sym_decorrelation(w: Float[Array, "k k"]) -> Float[Array, "k k"]:
    """Symmetric decorrelation ``W <- (W W^T)^{-1/2} W`` (Hyvarinen 1999, eq. 23).

    The inverse square root comes from the eigendecomposition ``W W^T = U diag(s) U^T``,
    with the eigenvalues ``s`` clipped below at the dtype's ``tiny`` so a rank-deficient
    ``W`` stays finite.

    Differentiable: yes, in w.

    Args:
        w: square matrix whose rows are to be made orthonormal.

    Returns:
        The matrix ``(W W^T)^{-1/2} W``, whose rows are orthonormal.
    """
    s, u = jnp.linalg.eigh(w @ w.T)
    s = jnp.maximum(s, jnp.finfo(s.dtype).tiny)
    return (u * jax.lax.rsqrt(s)) @ u.T @ w


def _contrast(fun: Fun, y, alpha, fun_args=None):
    """Return g(y) and the sample mean (last axis) of g'(y) for the negentropy contrast
    ``fun``; a callable ``fun(y, **fun_args)`` returns that pair itself (scikit-learn's
    convention)."""
    if callable(fun):
        out = fun(y, **(fun_args or {}))
        if not (isinstance(out, tuple | list) and len(out) == 2):
            raise ValueError("a callable `fun` must return a pair (g(u), mean of g'(u) over "
                             f"the last axis); got {type(out).__name__}")
        gy, dg = (jnp.asarray(o, y.dtype) for o in out)
        if gy.shape != y.shape or dg.shape != y.shape[:-1]:
            raise ValueError(f"a callable `fun` must return g(u) of the shape of u "
                             f"{y.shape} and the mean of g'(u) over the last axis (shape "
                             f"{y.shape[:-1]}); got shapes {gy.shape} and {dg.shape}")
        return gy, dg
    if fun == "logcosh":
        gy = jnp.tanh(alpha * y)
        return gy, alpha * (1 - _mean_last(gy * gy))
    if fun == "exp":
        e = jnp.exp(-0.5 * y * y)
        return y * e, _mean_last((1 - y * y) * e)
    if fun == "cube":
        return y**3, _mean_last(3 * y * y)
    raise ValueError(f"`fun` must be one of 'logcosh', 'exp', 'cube' or a callable; "
                     f"got {fun!r}")


def fixed_point_update(
    w: Float[Array, "k k"], z: Float[Array, "n k"], *, fun: Fun = "logcosh", alpha: float = 1.0,
    fun_args: dict | None = None,
) -> tuple[Float[Array, "k k"], Float[Array, ""]]:
    """One parallel FastICA fixed-point step (Hyvarinen 1999, eqs. 20 and 23).

    ``W+ = decorr(E[g(W z) z^T] - diag(E[g'(W z)]) W)`` with ``decorr`` the symmetric
    decorrelation :func:`sym_decorrelation` and ``g`` the derivative of the contrast:
    ``"logcosh"`` ``g(u) = tanh(alpha u)``, ``"exp"`` ``g(u) = u exp(-u^2 / 2)``,
    ``"cube"`` ``g(u) = u^3``, or a callable ``fun(u, **fun_args) -> (g(u), mean of
    g'(u) over the last axis)`` (scikit-learn's convention for a user contrast).

    Differentiable: yes, in w and z.

    Args:
        w: current unmixing matrix in whitened space, shape ``(k, k)``.
        z: whitened data, one sample per row, shape ``(n, k)``.
        fun: the contrast (static): ``"logcosh"``, ``"exp"``, ``"cube"`` or a callable.
        alpha: the ``logcosh`` constant, in ``[1, 2]``.
        fun_args: keyword arguments of a callable ``fun``.

    Returns:
        ``(w_new, change)``: the updated unmixing and the convergence measure
        ``max_i | |<w+_i, w_i>| - 1 |``.
    """
    return _step(w, z.T, z, _g(fun, alpha, fun_args))


def _g(fun, alpha, fun_args):
    """The contrast as one function ``u -> (g(u), mean g'(u))`` (see :func:`_contrast`)."""
    return lambda u: _contrast(fun, u, alpha, fun_args)


def _step(w, zt, z, g):
    """The fixed-point step on whitened data ``zt`` (k, n). With the row-major copy ``z``
    (n, k) both matrix products are plain GEMMs; with ``z=None`` the second contracts the
    sample axis of ``gy`` and ``zt`` directly (see :func:`_fastica_core` for which is
    used when)."""
    gy, dg = g(w @ zt)
    if z is None:
        gz = jax.lax.dot_general(gy, zt, (((1,), (1,)), ((), ())))
    else:
        gz = gy @ z
    w_new = sym_decorrelation(gz * (1.0 / zt.shape[1]) - dg[:, None] * w)
    lim = jnp.max(jnp.abs(jnp.abs(jnp.sum(w_new * w, axis=1)) - 1))
    return w_new, lim


def _resolve_whiten(whiten, whiten_mode):
    """scikit-learn's ``whiten`` (``"unit-variance"``, ``"arbitrary-variance"`` or
    ``False``), with the older ``whiten_mode`` name accepted."""
    modes = ("unit-variance", "arbitrary-variance")
    if whiten_mode is not None:
        if whiten_mode not in modes:
            raise ValueError(f"`whiten_mode` must be 'unit-variance' or 'arbitrary-variance'; "
                             f"got {whiten_mode!r}")
        if whiten is not None and whiten != whiten_mode:
            raise ValueError(f"`whiten` ({whiten!r}) and `whiten_mode` ({whiten_mode!r}) "
                             f"disagree; pass only `whiten`")
        return whiten_mode
    if whiten is None:
        return "unit-variance"
    if whiten is False or whiten in modes:
        return whiten
    raise ValueError(f"`whiten` must be 'unit-variance', 'arbitrary-variance' or False (as "
                     f"scikit-learn >= 1.3); got {whiten!r}")


def fastica(
    key: PRNGKeyArray | None,
    x: Float[Array, "n d"],
    *,
    n_components: int | None = None,
    algorithm: Literal["parallel", "deflation"] = "parallel",
    whiten: Whiten | None = None,
    fun: Fun = "logcosh",
    fun_args: dict | None = None,
    alpha: float = 1.0,
    max_iter: int = 200,
    tol: float = 1e-4,
    w_init: Float[Array, "k k"] | None = None,
    whiten_solver: Literal["svd", "eigh"] = "svd",
    whiten_mode: Literal["unit-variance", "arbitrary-variance"] | None = None,
    sequential_vmap: bool | None = None,
) -> FastICAResult:
    """FastICA (Hyvarinen 1999) with scikit-learn's ``FastICA`` options and semantics.

    Whiten ``x`` (:func:`whiten`) to ``z``, then find the rotation ``W`` in whitened
    space, in one ``lax.while_loop``:

    * ``algorithm="parallel"``: iterate :func:`fixed_point_update` from
      ``W_0 = sym_decorrelation(w_init)`` until ``max_i | |<w+_i, w_i>| - 1 | < tol`` or
      ``max_iter`` steps.
    * ``algorithm="deflation"``: one component after another (Hyvarinen 1999, eq. 19):
      ``w+ = E[z g(w^T z)] - E[g'(w^T z)] w``, Gram-Schmidt against the components
      already found, normalise, until ``| |<w+, w>| - 1 | < tol`` or ``max_iter``
      steps (:mod:`jaxkit.kernels.ica_deflation`); ``n_iter`` is the largest count over
      the components, as scikit-learn's.

    The unmixing in data space is ``components = W K`` (``K`` the whitening matrix), the
    sources ``(x - mean) @ components.T`` (:func:`transform`). ``whiten`` as
    scikit-learn: ``"unit-variance"`` (default) rescales ``components`` so that the
    sources have unit variance; ``"arbitrary-variance"`` keeps scikit-learn's scale
    ``W K`` (no ``sqrt(n)``); ``False`` takes ``x`` as already white: no centring
    (``mean`` is zero), no whitening (``whitening`` is the identity), ``components = W``
    and ``n_components`` is ignored with a warning (scikit-learn's
    "Ignoring n_components with whiten=False").

    Differentiable: no: jax.grad raises a ValueError saying so (the fit runs under
    map_over_batch's custom vmap rule, kernels/_batching.py, which JAX can only
    forward-differentiate, and iterates in a while_loop); jax.jvp works.

    Args:
        key: PRNG key for the default ``w_init`` (a standard normal ``(k, k)`` draw);
            may be ``None`` when ``w_init`` is given.
        x: data matrix, one sample per row: finite, no constant column, ``n >= d``.
        n_components: number of components ``k <= d`` (static); ``None`` keeps all ``d``.
        algorithm: ``"parallel"`` or ``"deflation"`` (static).
        whiten: ``"unit-variance"``, ``"arbitrary-variance"`` or ``False`` (static);
            ``None`` means ``whiten_mode`` or else ``"unit-variance"``.
        fun: the contrast (static), see :func:`fixed_point_update`; a callable
            ``fun(u, **fun_args)`` returns ``(g(u), mean of g'(u) over the last axis)``.
        fun_args: keyword arguments of a callable ``fun``.
        alpha: the ``logcosh`` constant, in ``[1, 2]``.
        max_iter: maximum number of fixed-point steps (static, ``>= 1``).
        tol: convergence tolerance (``>= 0``; ``0`` runs to ``max_iter`` and reports
            ``converged=False``, as scikit-learn's ConvergenceWarning).
        w_init: initial unmixing ``(k, k)``; overrides ``key``.
        whiten_solver: ``"svd"`` or ``"eigh"`` (static), see :func:`whiten`.
        whiten_mode: the older name of ``whiten`` (string modes only).
        sequential_vmap: how ``jax.vmap`` batches the fit (static): ``True`` maps the
            datasets one after another (``lax.map``; each stops at its own tolerance),
            ``False`` runs one batched loop until the slowest has converged; the results
            are the same. ``None`` (default): ``True`` when the default backend is the
            CPU, ``False`` on GPU/TPU.

    Returns:
        A :class:`FastICAResult`; ``converged`` is a flag (non-convergence is not an
        error) and ``n_iter`` the number of steps taken. Rank-deficient data (see
        :func:`whiten`): traced, a finite result with ``rank_deficient=True`` and
        ``converged=False`` (constant columns too); concrete, a
        :class:`RankDeficientWarning` when only the solver could not resolve the
        spectrum. Traced ``x`` with NaN or inf: a NaN result with ``finite=False`` and
        ``converged=False`` (per dataset under ``vmap``; no error).

    Raises:
        ValueError: bad shapes or hyperparameters; concrete ``x`` non-finite, with a
            constant column, or rank-deficient (naming the collinear columns).
    """
    if getattr(x, "ndim", None) != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        check_data_matrix(x, "x")  # raises the standard shape error
    n, d = x.shape
    whiten = _resolve_whiten(whiten, whiten_mode)
    if whiten is False and n_components is not None:
        warnings.warn("Ignoring n_components with whiten=False.", UserWarning, stacklevel=2)
        n_components = None
    k = _n_components(n_components, d)
    if n < d:
        raise ValueError(f"`x` has fewer samples ({n}) than variables ({d})")
    if algorithm not in ("parallel", "deflation"):
        raise ValueError(f"`algorithm` must be 'parallel' or 'deflation'; got {algorithm!r}")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"`max_iter` must be an integer >= 1; got {max_iter!r}")
    if not is_traced(tol) and not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"`tol` must be non-negative and finite; got {tol}")
    if not is_traced(alpha) and not 1.0 <= alpha <= 2.0:
        raise ValueError(f"`alpha` must lie in [1, 2]; got {alpha}")
    if whiten_solver not in ("svd", "eigh"):
        raise ValueError(f"`whiten_solver` must be 'svd' or 'eigh'; got {whiten_solver!r}")
    if fun_args is not None and not isinstance(fun_args, dict):
        raise ValueError(f"`fun_args` must be a dict or None; got {type(fun_args).__name__}")
    x = jnp.asarray(x)
    _contrast(fun, jnp.zeros((1, 2), x.dtype), alpha, fun_args)  # validates `fun` eagerly
    if w_init is None:
        if key is None:
            raise ValueError("pass a PRNG `key` or an explicit `w_init`")
        w_init = jax.random.normal(key, (k, k), x.dtype)
    else:
        w_init = jnp.asarray(w_init, x.dtype)
        if w_init.shape != (k, k):
            raise ValueError(f"`w_init` must have shape ({k}, {k}); got {w_init.shape}")

    static = (k, fun, _hashable_args(fun_args), max_iter, whiten_solver, whiten, algorithm)
    sequential = resolve_sequential_vmap(sequential_vmap)
    if not any(is_traced(v) for v in (x, w_init, alpha, tol)):
        # concrete call: bad values raise ValueError right away, then one compiled core
        # per static configuration and shape (reused across calls, as a jitted function)
        check_data_matrix(x, "x")
        check_finite(w_init, "w_init")
        if static[2] is not None or fun_args is None:
            res = _compiled_core(*static)(x, w_init, jnp.asarray(alpha, x.dtype),
                                          jnp.asarray(tol, x.dtype))
        else:  # unhashable fun_args: no cache
            res = _fastica_core(x, w_init, alpha, tol, *static[:2], fun_args, *static[3:])
        _raise_if_rank_deficient(x, res.rank_deficient, k)
        return res

    def core(x, w_init):
        return _fastica_core(x, w_init, alpha, tol, k, fun, fun_args, *static[3:])

    return map_over_batch(core, sequential=sequential)(x, w_init)


def _hashable_args(fun_args):
    """``fun_args`` as a hashable key for the compile cache, or None if it is not."""
    if not fun_args:
        return None
    key = tuple(sorted(fun_args.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


@functools.lru_cache(maxsize=128)
def _compiled_core(k, fun, fun_args_key, max_iter, whiten_solver, whiten, algorithm):
    """The jitted :func:`_fastica_core` of one static configuration (concrete calls)."""
    fun_args = dict(fun_args_key) if fun_args_key is not None else None
    return jax.jit(lambda x, w, alpha, tol: _fastica_core(
        x, w, alpha, tol, k, fun, fun_args, max_iter, whiten_solver, whiten, algorithm))


def _fastica_core(x, w_init, alpha, tol, k, fun, fun_args, max_iter, whiten_solver, whiten,
                  algorithm):
    """Array part of :func:`fastica` for one dataset (arguments already validated).

    Works in the transposed, sample-last layout ``zt = K (x - mean)^T`` (k, n); the
    sources are formed once, after the loop. In float64 it keeps a row-major copy
    ``z = zt^T`` (n, k) as well, so that both matrix products of a step, ``W zt`` and
    ``g(W zt) z``, are plain (non-transposed) GEMMs. In float32 the second product
    contracts the sample axis of ``g(W zt)`` and ``zt`` directly, which XLA:CPU runs
    faster in float32 (and saves the copy); in float64 it is the other way round. See
    benchmarks/RESULTS.md.
    """
    w_init = check_finite(w_init, "w_init")
    g = _g(fun, alpha, fun_args)
    n, d = x.shape
    # bad values of a traced x are flags (per dataset under vmap), not errors: concrete
    # x was checked eagerly by fastica
    if whiten is False:  # the data are taken as white already (scikit-learn's whiten=False)
        mean = jnp.zeros(d, x.dtype)
        whitening = jnp.eye(d, dtype=x.dtype)
        deficient = jnp.asarray(False)
        nonfinite = ~jnp.all(jnp.isfinite(x))
        zt = x.T
    else:
        mean, xct, gram = _centred_t(x)
        nonfinite, const = screened_flags(x, mean, jnp.diagonal(gram))
        whitening, deficient = _whitening_matrix(x, mean, xct, gram, k, whiten_solver)
        deficient = (deficient | const) & ~nonfinite
        zt = whitening @ xct  # (k, n) whitened data, sample-last
    if algorithm == "deflation":
        from .ica_deflation import deflation_loop

        w, n_iter, ok = deflation_loop(zt, w_init, g, max_iter=max_iter, tol=tol)
    else:
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
            w_new, lim = _step(w, zt, z, g)
            return w_new, it + 1, lim

        w, n_iter, lim = jax.lax.while_loop(cond, body,
                                            (w0, jnp.asarray(0, jnp.int32), inf))
        ok = lim < tol

    st = w @ zt  # (k, n) sources in whitened units: unit variance already
    comps = w @ whitening
    if whiten == "unit-variance":
        std = jnp.maximum(_std_last(st), jnp.finfo(st.dtype).tiny)
        st = st / std[:, None]
        comps = comps / std[:, None]
    elif whiten == "arbitrary-variance":  # scikit-learn's scale (no sqrt(n) in K)
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
        converged=ok & ~deficient & ~nonfinite,
        rank_deficient=deficient,
        finite=~nonfinite,
    )


def fit_transform(key: PRNGKeyArray | None, x: Float[Array, "n d"], **kwargs
                  ) -> tuple[FastICAResult, Float[Array, "n k"]]:
    """:func:`fastica` and the sources of ``x`` in one call (scikit-learn's
    ``FastICA.fit_transform``; the sources equal ``transform(result, x)``).

    Differentiable: no: as fastica.

    Args:
        key: as :func:`fastica`.
        x: as :func:`fastica`.
        **kwargs: the options of :func:`fastica`.

    Returns:
        ``(result, sources)``.
    """
    res = fastica(key, x, **kwargs)
    return res, res.sources
