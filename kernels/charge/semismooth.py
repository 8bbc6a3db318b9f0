"""Semismooth Newton on the KKT system of the charge-balanced simplex projection.

The projection of :func:`jaxkit.kernels.charge.project_soft` satisfies ``p_ik = max(y_ik
- mu q_k - tau_i, 0)``, ``sum_k p_ik = 1`` and ``sum_ik q_k p_ik = 0``: a piecewise-linear
system in the charge dual ``mu`` and the row thresholds ``tau``. This module solves it by
a semismooth (active-set) Newton iteration; :mod:`.soft` wraps it with the constraint
checks and the bracketed fallback.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..checks import fail
from ._checks import check_mask, check_matrix, check_q_real
from ._unroll import kmax, ksum

__all__ = ["SemismoothResult", "semismooth_newton"]


class SemismoothResult(NamedTuple):
    """Result of :func:`semismooth_newton`.

    ``mu``: the charge dual; ``tau``: the row thresholds (0 on masked rows);
    ``converged``: the support iteration reached a fixed point (or stopped moving) off a
    flat piece, so ``(mu, tau)`` solves the KKT system up to rounding; ``n_iter``:
    iterations used. Usable as the ``warm_start`` of the next solve."""

    mu: Float[Array, ""]
    tau: Float[Array, " N"]
    converged: Bool[Array, ""]
    n_iter: Int[Array, ""]


def semismooth_newton(p: Float[Array, "N K"], q: ArrayLike, *, mask: ArrayLike | None = None,
                      max_iter: int = 50, warm_start=None) -> SemismoothResult:
    """Semismooth Newton on the joint KKT system in ``(mu, tau_1..tau_N)``.

    ``p_ik = max(y_ik - mu q_k - tau_i, 0)``, ``sum_k p_ik = 1`` and ``sum_ik q_k p_ik =
    0``. With the supports ``S_i`` held fixed the system is linear: ``tau_i = (Y_i - 1 -
    mu Q_i) / n_i`` (``n_i``, ``Y_i``, ``Q_i`` the size, sum of ``y`` and sum of ``q``
    over ``S_i``) and the charge equation gives ``mu`` in closed form, ``mu = sum_i (QY_i
    - Q_i (Y_i - 1) / n_i) / sum_i (QQ_i - Q_i^2 / n_i)`` with ``QY_i``, ``QQ_i`` the sums
    of ``q_k y_ik`` and ``q_k^2`` over ``S_i``. Each iteration
    solves on the current supports and recomputes them from the solution; the support
    always holds each row's largest entry (it is in every simplex projection's support).
    When the recomputed supports equal those solved on, the iterate is a fixed point: its
    ``p`` is non-negative, zero off the supports, sums to 1 per row and has zero charge,
    i.e. it satisfies the KKT conditions and is the projection. The loop also stops when
    the iterate no longer moves (to rounding). Not globally convergent: it may cycle, or
    meet a flat piece where every row sits on one species (``converged`` False; use
    :func:`jaxkit.kernels.charge.project_soft`, which then falls back to a bracketed
    root search). The constraints are not checked here.

    Reference: Qi & Sun, "A nonsmooth version of Newton's method", Math. Programming
    1993 (semismooth Newton, here on a piecewise-linear system).

    Differentiable: no: Newton iterations in a while_loop (reverse mode fails; no custom VJP).

    Args:
        p: ``(N, K)`` matrix to project (masked rows ignored).
        q: ``(K,)`` species charges (finite reals; may be traced).
        mask: optional ``(N,)`` bool, False on padding atoms.
        max_iter: iteration cap (static).
        warm_start: ``None`` (start from full supports at ``mu = 0``), a ``(mu, tau)``
            pair, or any result with ``mu`` and ``tau`` fields (a
            :class:`~jaxkit.kernels.charge.SoftProjection` or :class:`SemismoothResult`
            of a nearby problem): start from ``mu`` and the supports ``y - mu q - tau``
            imply. Non-finite values start cold.

    Returns:
        A :class:`SemismoothResult`.

    Raises:
        ValueError: shapes that do not match, non-finite ``q`` or unmasked ``p``, a
            non-positive ``max_iter`` or a malformed ``warm_start``.
    """
    p = check_matrix(p, "p")
    n, k = p.shape
    q = check_q_real(q, p.dtype)
    if q.shape[0] != k:
        raise ValueError(f"`p` has {k} species columns but `q` has {q.shape[0]} charges")
    if int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"`max_iter` must be a positive integer; got {max_iter!r}")
    m = check_mask(mask, n)
    y = jnp.where(m[:, None], p, 0)
    y = fail(y, ~jnp.all(jnp.isfinite(y)), "`p` contains NaN or inf values on unmasked rows")
    mu, tau, converged, it = solve_semismooth(y, m, q, int(max_iter),
                                              check_warm(warm_start, n, p.dtype))
    return SemismoothResult(mu, jnp.where(m, tau, 0), converged, it)


def check_warm(warm, n: int, dtype):
    """``(mu0, tau0)`` from a ``warm_start`` argument (None stays None); non-finite values
    become the cold start ``(0, 0)``."""
    if warm is None:
        return None
    if hasattr(warm, "mu") and hasattr(warm, "tau"):
        mu0, tau0 = warm.mu, warm.tau
    else:
        try:
            mu0, tau0 = warm
        except (TypeError, ValueError):
            raise ValueError("`warm_start` must be a SoftProjection or a (mu, tau) pair; "
                             f"got {type(warm).__name__}") from None
    mu0, tau0 = jnp.asarray(mu0, dtype), jnp.asarray(tau0, dtype)
    if mu0.shape != () or tau0.shape != (n,):
        raise ValueError(f"`warm_start` must hold a scalar mu and tau of shape ({n},); got "
                         f"shapes {mu0.shape} and {tau0.shape}")
    ok = jnp.isfinite(mu0) & jnp.all(jnp.isfinite(tau0))
    return jnp.where(ok, mu0, 0), jnp.where(ok, tau0, 0)


def solve_semismooth(y, m, q, n_max: int, warm=None):
    """:func:`semismooth_newton` on checked inputs (``y`` zero on masked rows, ``q`` of
    ``y``'s dtype, ``warm`` from :func:`check_warm`): ``(mu, tau, converged, n_iter)``."""
    n, k = y.shape
    dtype = y.dtype
    eps = jnp.finfo(dtype).eps
    # (K, N): each species a contiguous row, so the K-term sums vectorise (XLA slices the
    # species out of the (N, K) input once, before the loop)
    yt = y.T
    ys = [yt[j] for j in range(k)]
    qs = [q[j] for j in range(k)]

    # the supports are kept as bit masks, 31 species per int32 word: one pass over the cell
    # computes them, and the support sums below read one integer per row instead of
    # recomputing the support (XLA:CPU fuses each sum separately, so without this every
    # sum re-derived the support from all K columns)
    words = [list(range(w, min(w + 31, k))) for w in range(0, k, 31)]

    def support_bits(mu, tau):
        d = [yj - mu * qj - tau for yj, qj in zip(ys, qs, strict=True)]
        dmax = kmax(d)  # a row's largest entry is in every simplex projection's support
        s = [((dj > 0) | (dj >= dmax)) & m for dj in d]
        return tuple(ksum([s[j].astype(jnp.int32) << (j - w[0]) for j in w]) for w in words)

    def solve(bits, mu_old):
        """The linear KKT system with the supports fixed, in closed form."""
        sf = [((bits[j // 31] >> (j % 31)) & 1).astype(dtype) for j in range(k)]
        cnt = jnp.maximum(ksum(sf), 1)
        # (s y) q, not s (q y): a loop-invariant q y would be hoisted into K extra arrays
        t = [sj * yj for sj, yj in zip(sf, ys, strict=True)]
        sy = ksum(t)
        sqy = ksum([tj * qj for tj, qj in zip(t, qs, strict=True)])
        sq = ksum([sj * qj for sj, qj in zip(sf, qs, strict=True)])
        sqq = ksum([sj * (qj * qj) for sj, qj in zip(sf, qs, strict=True)])
        # one stacked reduction, not two (each would re-derive the row terms)
        num, den = jnp.sum(jnp.where(m, jnp.stack([sqy - sq * (sy - 1) / cnt,
                                                   jnp.maximum(sqq - sq * sq / cnt, 0)]),
                                     0), axis=-1)
        flat = ~(den > 0)
        mu = jnp.where(flat, mu_old, num / jnp.where(flat, 1, den))
        tau = jnp.where(m, (sy - 1 - mu * sq) / cnt, 0)
        return mu, tau, flat

    def body(c):
        it, bits, mu_old, tau_old, _, _ = c
        mu, tau, flat = solve(bits, mu_old)
        new = lax.optimization_barrier(support_bits(mu, tau))  # computed once, not twice
        # the supports the iterate was solved on reproduce: a fixed point, the projection
        same = jnp.all(jnp.stack([(a == b) | ~m for a, b in zip(new, bits, strict=True)]))
        # or the iterate no longer moves: supports that differ only in entries at zero to
        # rounding (in float32 they can flip back and forth for ever)
        still = (it > 0) & (jnp.abs(mu - mu_old) <= 8 * eps * (1 + jnp.abs(mu))) & jnp.all(
            jnp.abs(tau - tau_old) <= 8 * eps * (1 + jnp.abs(tau)))
        return it + 1, new, mu, tau, same | still, flat

    def cond(c):
        it, _, _, _, same, flat = c
        return (it < n_max) & ~same & ~flat

    false = jnp.zeros((), bool)
    if warm is None:
        # every species in every support (the threshold of the full row at mu = 0)
        mu0, tau0 = jnp.zeros((), dtype), jnp.zeros(n, dtype)
        bits0 = tuple(jnp.where(m, (1 << len(w)) - 1, 0).astype(jnp.int32) for w in words)
    else:
        mu0, tau0 = warm
        bits0 = support_bits(mu0, tau0)
    it, _, mu, tau, same, flat = lax.while_loop(
        cond, body, (jnp.zeros((), jnp.int32), bits0, mu0, tau0, false, false))
    # on a flat piece the charge equation was not imposed: not a KKT point
    return mu, tau, same & ~flat, it
