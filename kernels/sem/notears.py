"""NOTEARS: linear structure learning by continuous optimisation with a smooth
acyclicity constraint, as one fixed-shape jitted kernel.

Reference: X. Zheng, B. Aragam, P. Ravikumar, E. P. Xing, "DAGs with NO TEARS: continuous
optimization for structure learning", NeurIPS 2018 (``xunzheng/notears``,
``notears/linear.py``).

Problem (NOTEARS's convention ``W[i, j]``: ``i -> j``; the result is returned transposed,
in jaxkit's LiNGAM convention ``b[i, j]``: ``j -> i``):

.. math::
    \\min_W \\frac{1}{2n}\\|X - XW\\|_F^2 + \\lambda \\|W\\|_1
    \\quad \\text{s.t.} \\quad h(W) = \\operatorname{tr} e^{W \\circ W} - d = 0,

solved by the augmented Lagrangian ``L = F + rho/2 h^2 + alpha h`` as in the reference:
``W = W+ - W-`` with ``W+- >= 0`` so the L1 term is smooth, the diagonal fixed at 0; an
outer iteration minimises ``L`` from the current ``W`` (here ``inner_steps`` iterations of
optax's L-BFGS with zoom line search on ``W+- = |p|``, instead of SciPy's L-BFGS-B with
bounds), multiplies ``rho`` by 10 when ``h`` fell by less than a
factor 4, and updates ``alpha += rho h``. A fixed number of outer iterations replaces the
reference's ``while h > h_tol and rho < rho_max`` (the last iterations are no-ops once
``rho`` saturates at ``rho_max``). Finally ``|W| < w_threshold`` is zeroed.

``e^{A}`` is computed by scaling and squaring with a degree-12 Taylor polynomial (matrix
products only, so it runs batched under ``vmap`` without LAPACK); :func:`notears_h` also
gives the closed-form gradient ``(e^{W o W})^T o 2 W`` (tests compare it to autodiff).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float

from ..checks import check_data_matrix, check_in_range

__all__ = ["NotearsResult", "notears", "expm_taylor", "notears_h"]

_MAX_SQUARINGS = 24


class NotearsResult(NamedTuple):
    """What :func:`notears` returns.

    Attributes:
        b: the thresholded weighted adjacency in the LiNGAM convention (``b[i, j]``:
            ``j -> i``), ``(d, d)``.
        b_raw: the same before thresholding (scores for AUROC).
        h: the acyclicity value ``h(W)`` at the end (before thresholding).
        converged: ``h <= h_tol`` and everything finite.
        finite: all outputs finite (False means ``b`` must not be used).
    """

    b: Float[Array, "d d"]
    b_raw: Float[Array, "d d"]
    h: Float[Array, ""]
    converged: Bool[Array, ""]
    finite: Bool[Array, ""]


def expm_taylor(a: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """``e^{a}`` by scaling and squaring: ``a / 2^s`` with ``s = ceil(log2 ||a||_1)``
    (at most 24), a degree-12 Taylor polynomial by Horner's rule, then ``s`` squarings
    (a fixed loop of 24 masked squarings, so the shape of the computation is static).

    Differentiable: yes, in a (almost everywhere: the number of squarings follows the norm).
    """
    d = a.shape[-1]
    eye = jnp.eye(d, dtype=a.dtype)
    nrm = jnp.max(jnp.sum(jnp.abs(a), axis=0))
    s = jnp.clip(jnp.ceil(jnp.log2(jnp.maximum(nrm, 1e-30))), 0, _MAX_SQUARINGS)
    b = a / (2.0 ** s)
    e = eye
    for k in range(12, 0, -1):
        e = eye + (b @ e) / k

    def sq(i, e):
        return jnp.where(i < s, e @ e, e)

    return jax.lax.fori_loop(0, _MAX_SQUARINGS, sq, e)


def notears_h(w: Float[Array, "d d"]) -> tuple[Float[Array, ""], Float[Array, "d d"]]:
    """``h(W) = tr e^{W o W} - d`` and its gradient ``(e^{W o W})^T o 2W``.

    Differentiable: yes, in w.
    """
    e = expm_taylor(w * w)
    return jnp.trace(e) - w.shape[-1], e.T * 2.0 * w


def notears(x: Float[Array, "n d"], *, lambda1: float = 0.1, w_threshold: float = 0.3,
            outer_iters: int = 12, inner_steps: int = 100, h_tol: float | None = None,
            rho_max: float = 1e16) -> NotearsResult:
    """Linear NOTEARS with the least-squares score (module docstring).

    Differentiable: no: its L-BFGS steps run optax's line search, a while_loop (reverse mode fails);
    notears_h is differentiable.

    Args:
        x: data ``(n, d)`` (centred inside): finite, ``n >= 2``, no constant column.
        lambda1: L1 weight ``lambda >= 0``.
        w_threshold: final threshold on ``|W|`` (``>= 0``).
        outer_iters: augmented-Lagrangian iterations (static).
        inner_steps: L-BFGS iterations per outer iteration (static).
        h_tol: ``converged`` when ``h <= h_tol`` (default: the reference's 1e-8 in float64,
            1e-4 in float32, where ``tr e^A - d`` cannot resolve less).
        rho_max: the largest penalty ``rho``.

    Returns:
        A :class:`NotearsResult`.

    Raises:
        ValueError: a bad data matrix or hyperparameter (naming it; as run-time checks
            under ``jit``).
    """
    x = check_data_matrix(x, "x")
    if h_tol is None:
        h_tol = 1e-8 if x.dtype == jnp.float64 else 1e-4
    for name, v in (("lambda1", lambda1), ("w_threshold", w_threshold), ("h_tol", h_tol)):
        check_in_range(v, name, lo=0)
    check_in_range(rho_max, "rho_max", lo=0, lo_open=True)
    for name, v in (("outer_iters", outer_iters), ("inner_steps", inner_steps)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"`{name}` must be a positive Python int; got {v!r}")
    n, d = x.shape
    dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
    x = jnp.asarray(x, dtype)
    x = x - jnp.mean(x, axis=0, keepdims=True)
    cov = x.T @ x / n
    eye = jnp.eye(d, dtype=dtype)
    off = 1.0 - eye

    def h_of(w):
        return jnp.trace(expm_taylor(w * w)) - d

    def lagrangian(wp, rho, alpha):
        w = (wp[0] - wp[1]) * off
        r = eye - w
        ls = 0.5 * jnp.trace(r.T @ cov @ r)  # = 1/(2n) ||X - XW||^2
        h = h_of(w)
        return ls + 0.5 * rho * h * h + alpha * h + lambda1 * jnp.sum(wp)

    def inner(wp, rho, alpha):
        opt = optax.lbfgs()

        def f(p):  # W+- = |p| >= 0 (the reference's bounds)
            return lagrangian(jnp.abs(p), rho, alpha)

        vg = optax.value_and_grad_from_state(f)

        def step(c, _):
            p, st = c
            v, g = vg(p, state=st)
            upd, st = opt.update(g, st, p, value=v, grad=g, value_fn=f)
            return (optax.apply_updates(p, upd), st), None

        (p, _), _ = jax.lax.scan(step, (wp, opt.init(wp)), None, length=inner_steps)
        return jnp.abs(p)

    def outer(carry, _):
        wp, rho, alpha, h = carry
        wp_new = inner(wp, rho, alpha)
        h_new = h_of((wp_new[0] - wp_new[1]) * off)
        rho = jnp.where(h_new > 0.25 * h, jnp.minimum(rho * 10.0, rho_max), rho)
        alpha = alpha + rho * h_new
        return (wp_new, rho, alpha, h_new), None

    wp0 = jnp.full((2, d, d), 1e-3, dtype)  # |p| has no gradient at exactly 0
    one = jnp.ones((), dtype)
    (wp, _, _, _), _ = jax.lax.scan(outer, (wp0, one, 0.0 * one, jnp.inf * one), None,
                                    length=outer_iters)
    w = (wp[0] - wp[1]) * off
    h = h_of(w)
    finite = jnp.all(jnp.isfinite(w)) & jnp.isfinite(h)
    b_raw = w.T
    b = jnp.where(jnp.abs(b_raw) >= w_threshold, b_raw, 0.0)
    return NotearsResult(b=b, b_raw=b_raw, h=h, converged=finite & (h <= h_tol), finite=finite)
