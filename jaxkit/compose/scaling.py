"""Scaling-law fits: Chinchilla approach 3 and the compute-optimal frontier.

Model (Hoffmann et al. 2022, approach 3):

.. math:: L(N, D) = E + A N^{-\\alpha} + B D^{-\\beta}

fitted as ``log L = LSE(a - alpha log N, b - beta log D, e)`` (``A = e^a``, ``B = e^b``,
``E = e^e``) by minimising the Huber loss (``delta = 1e-3``) of the log residuals with
L-BFGS (SciPy's L-BFGS-B, analytic gradient, float64) from the best points of a grid of
starts. With training compute ``C = 6 N D`` the compute-optimal allocation is
``N* = G (C/6)^{beta/(alpha+beta)}``, ``G = (alpha A / (beta B))^{1/(alpha+beta)}``, and
the frontier is

.. math:: L^*(C) = E + K C^{-\\gamma}, \\qquad \\gamma = \\frac{\\alpha\\beta}{\\alpha+\\beta}

so ``gamma`` is the (negative) log-log slope of the reducible loss along the frontier.
"Scales X% faster" is reported as ``X = 100 (gamma_new / gamma_ref - 1)``: the ratio of
the frontier slopes (the reading of AIRA-Compose's figures in the shared notes; the
paper gives no formula).
"""

from __future__ import annotations

import contextlib
import itertools
from typing import NamedTuple

import numpy as np

__all__ = ["ScalingFit", "fit_chinchilla", "predict", "frontier_slope", "frontier",
           "scales_faster", "synthetic_losses"]


class ScalingFit(NamedTuple):
    """Fitted ``E, A, B, alpha, beta``, the objective at the optimum and whether
    L-BFGS converged."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    objective: float
    converged: bool

    @property
    def gamma(self) -> float:
        return frontier_slope(self)


def _huber(r, delta):
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r ** 2, delta * (a - 0.5 * delta))


def _objective(theta, logN, logD, logL, delta):
    a, b, e, al, be = theta
    z = np.stack([a - al * logN, b - be * logD, np.full_like(logN, e)])
    m = z.max(0)
    w = np.exp(z - m)
    s = w.sum(0)
    r = m + np.log(s) - logL
    w = w / s
    h = _huber(r, delta)
    dh = np.clip(r, -delta, delta)
    grad = np.array([np.sum(dh * w[0]), np.sum(dh * w[1]), np.sum(dh * w[2]),
                     np.sum(dh * w[0] * -logN), np.sum(dh * w[1] * -logD)])
    return float(h.sum()), grad


def _one_blas_thread():
    """L-BFGS-B's 5 x 5 linear algebra on one BLAS thread: OpenBLAS's thread pool spun
    ~2 ms per iteration on a loaded 2-core machine (1.7 s of CPU per fit, 0.07 s on one
    thread)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def fit_chinchilla(N, D, L, *, delta: float = 1e-3, n_starts: int = 8,
                   maxiter: int = 5000) -> ScalingFit:
    """Fit ``L(N, D)`` (module docstring) to measured losses.

    Args:
      N: model sizes (parameters), one per observation.
      D: training tokens, one per observation.
      L: losses (> 0), one per observation.
      delta: the Huber threshold on log residuals.
      n_starts: L-BFGS runs, from the best points of the start grid
        (``alpha, beta in {0.1, 0.3, 0.6, 1.0}``, ``e in {-1, -0.5, 0, 0.5, 1}``,
        ``a, b in {0, 2.5, 5, 10, 15}``).
      maxiter: the L-BFGS iteration budget of each run.

    Returns:
      The best :class:`ScalingFit` over the starts.
    """
    from scipy.optimize import minimize

    N, D, L = (np.asarray(v, np.float64).ravel() for v in (N, D, L))
    if not (N.size == D.size == L.size) or N.size < 5:
        raise ValueError(f"`N`, `D`, `L` must have one equal length >= 5 (five parameters); "
                         f"got {N.size}, {D.size}, {L.size}")
    if not (np.all(N > 0) and np.all(D > 0) and np.all(L > 0)
            and np.all(np.isfinite(np.concatenate([N, D, L])))):
        raise ValueError("`N`, `D` and `L` must be finite and > 0")
    logN, logD, logL = np.log(N), np.log(D), np.log(L)
    grid = np.array(list(itertools.product([0, 2.5, 5, 10, 15], [0, 2.5, 5, 10, 15],
                                           [-1, -0.5, 0, 0.5, 1], [0.1, 0.3, 0.6, 1.0],
                                           [0.1, 0.3, 0.6, 1.0])), np.float64)
    z = np.stack([grid[:, :1] - grid[:, 3:4] * logN, grid[:, 1:2] - grid[:, 4:5] * logD,
                  np.broadcast_to(grid[:, 2:3], (len(grid), logN.size))])
    m = z.max(0)
    vals = _huber(m + np.log(np.exp(z - m).sum(0)) - logL, delta).sum(1)
    best = None
    bounds = [(-20, 40), (-20, 40), (-10, 5), (1e-3, 3.0), (1e-3, 3.0)]
    with _one_blas_thread():
        for g in grid[np.argsort(vals)[:n_starts]]:
            r = minimize(_objective, g, args=(logN, logD, logL, delta), jac=True,
                         method="L-BFGS-B", bounds=bounds,
                         options=dict(maxiter=int(maxiter), gtol=1e-14, ftol=1e-16))
            if best is None or r.fun < best.fun:
                best = r
    a, b, e, al, be = best.x
    return ScalingFit(float(np.exp(e)), float(np.exp(a)), float(np.exp(b)), float(al),
                      float(be), float(best.fun), bool(best.success))


def predict(fit: ScalingFit, N, D):
    """``E + A N^-alpha + B D^-beta``."""
    N, D = np.asarray(N, np.float64), np.asarray(D, np.float64)
    with np.errstate(divide="ignore", over="ignore"):  # a degenerate fit gives inf
        return fit.E + fit.A * N ** -fit.alpha + fit.B * D ** -fit.beta


def frontier_slope(fit: ScalingFit) -> float:
    """``gamma = alpha beta / (alpha + beta)``."""
    return fit.alpha * fit.beta / (fit.alpha + fit.beta)


def frontier(fit: ScalingFit, C):
    """Compute-optimal ``(N*, D*, L*)`` at compute ``C`` (FLOPs, ``C = 6 N D``)."""
    C = np.asarray(C, np.float64)
    s = fit.alpha + fit.beta
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        G = (fit.alpha * fit.A / (fit.beta * fit.B)) ** (1 / s)
        n = G * (C / 6) ** (fit.beta / s)
        d = (C / 6) / n
    return n, d, predict(fit, n, d)


def scales_faster(new: ScalingFit, ref: ScalingFit) -> float:
    """``100 (gamma_new / gamma_ref - 1)``: how much steeper (in %) ``new``'s frontier
    is than ``ref``'s."""
    return 100.0 * (frontier_slope(new) / frontier_slope(ref) - 1.0)


def synthetic_losses(rng: np.random.Generator, N, D, *, E=1.69, A=406.4, B=410.7,
                     alpha=0.34, beta=0.28, noise=0.0):
    """Losses from known parameters (Chinchilla's by default) on the grid ``N x D``
    (flattened), times ``exp(noise * standard normal)``: ``(N, D, L)``."""
    n, d = np.meshgrid(np.asarray(N, float), np.asarray(D, float), indexing="ij")
    n, d = n.ravel(), d.ravel()
    L = E + A * n ** -alpha + B * d ** -beta
    return n, d, L * np.exp(noise * rng.standard_normal(L.shape))
