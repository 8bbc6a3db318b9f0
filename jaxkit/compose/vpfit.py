"""A bounded variable-projection fit of the Chinchilla loss law, with its degeneracy
flags and bootstrap intervals over seeds.

.. math:: L(N, D) = E + A N^{-a} + B D^{-b}, \\qquad E, A, B \\ge 0,\\; a, b \\in [lo, hi]

For fixed exponents the law is linear in ``(E, A, B)``: they are the non-negative
least-squares solution of the relative residuals ``(pred - L) / L`` (the exact NNLS of
three unknowns: every active set solved by least squares, the best feasible one kept).
The exponents minimise the projected residual over a bounded grid (``grid`` points per
axis, log-spaced over ``bounds``), refined by zooming around the best point
(Golub & Pereyra 1973's variable projection; Hoffmann et al. 2022, approach 3, fit the
same law by L-BFGS on all five parameters, which leaves the exponents unbounded and
their floor ``E`` traded against them).

A fit is **degenerate** (:attr:`VPFit.degenerate`) when an exponent sits at its bound
(within one grid step: the bound, not the data, chose it) or when the ``A`` or ``B``
term changes by less than :data:`FLAT` of the mean loss over the data (it vanished; its
exponent is not identified), or when the floor ``E`` is below that share of the loss
(at its bound 0: the data do not show where the loss levels off). Degenerate fits are reported and
never decide a claim.

:func:`bootstrap_seeds` resamples the seeds of every (N, D) cell with replacement and
refits the seed means: percentile intervals of ``E, a, b`` and the frontier slope
``gamma = a b / (a + b)`` (:func:`jaxkit.compose.scaling.frontier_slope`).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

__all__ = ["VPFit", "vp_fit", "bootstrap_seeds", "synthetic_check"]


class VPFit(NamedTuple):
    """The fitted law, its relative RMS residual and its degeneracy.

    Attributes:
      E, A, a, B, b: the parameters (``N`` and ``D`` in their own units).
      rms: root mean square relative residual.
      degenerate: an exponent at its bound or a vanished term.
      reasons: why, in words (empty when not degenerate).
    """

    E: float
    A: float
    a: float
    B: float
    b: float
    rms: float
    degenerate: bool
    reasons: tuple[str, ...] = ()

    @property
    def gamma(self) -> float:
        """The compute-optimal frontier slope ``a b / (a + b)``."""
        return self.a * self.b / (self.a + self.b)


FLAT = 1e-3  # a term changing less than this share of the mean loss has vanished
_SUBSETS = [s for r in (3, 2, 1) for s in itertools.combinations(range(3), r)]


def _nnls3(X, y):
    """Exact non-negative least squares of ``X (G, n, 3) c = y (n,)`` per grid point:
    ``(coef (G, 3), sse (G,))``."""
    G = X.shape[0]
    best_c = np.zeros((G, 3))
    best_r = np.full(G, np.inf)
    for s in _SUBSETS:
        Xs = X[:, :, s]
        XtX = np.einsum("gni,gnj->gij", Xs, Xs)
        Xty = np.einsum("gni,n->gi", Xs, y)
        with np.errstate(all="ignore"):
            c = np.linalg.solve(XtX + 1e-300 * np.eye(len(s)), Xty[..., None])[..., 0]
        ok = np.all(c >= 0, axis=1) & np.all(np.isfinite(c), axis=1)
        r = np.sum((np.einsum("gni,gi->gn", Xs, np.where(np.isfinite(c), c, 0)) - y) ** 2,
                   axis=1)
        better = ok & (r < best_r)
        full = np.zeros((G, 3))
        full[:, s] = np.where(np.isfinite(c), c, 0)
        best_c[better] = full[better]
        best_r[better] = r[better]
    return best_c, best_r


def _project(N, D, L, ab):
    """NNLS of the relative residuals at exponent pairs ``ab (G, 2)``, with ``N`` and
    ``D`` scaled by their smallest values: ``(coef (G, 3), sse (G,))``."""
    w = 1.0 / L
    X = np.stack([np.broadcast_to(w, (len(ab), len(L))),
                  (N[None] ** -ab[:, :1]) * w, (D[None] ** -ab[:, 1:]) * w], axis=-1)
    return _nnls3(X, np.ones_like(L))


def vp_fit(N, D, L, *, bounds=(0.02, 2.0), grid: int = 32, zooms: int = 5) -> VPFit:
    """Fit ``L = E + A N^-a + B D^-b`` (module docstring).

    Args:
      N: model sizes, one per observation (> 0).
      D: tokens, one per observation (> 0).
      L: losses, one per observation (> 0).
      bounds: ``(lo, hi)`` of both exponents, ``0 < lo < hi``.
      grid: grid points per exponent axis (log-spaced).
      zooms: refinements, each a ``grid x grid`` grid over two steps either side of the
        best point so far (kept inside the bounds).

    Returns:
      The :class:`VPFit`.

    Raises:
      ValueError: fewer than 4 observations, non-positive or non-finite values, or bad
        ``bounds`` (the message names the argument).
    """
    N, D, L = (np.asarray(v, np.float64).ravel() for v in (N, D, L))
    if not (N.size == D.size == L.size) or N.size < 4:
        raise ValueError(f"`N`, `D`, `L` must have one equal length >= 4; got {N.size}, "
                         f"{D.size}, {L.size}")
    if not all(np.all(np.isfinite(v)) and np.all(v > 0) for v in (N, D, L)):
        raise ValueError("`N`, `D` and `L` must be finite and > 0")
    lo, hi = (float(x) for x in bounds)
    if not 0 < lo < hi:
        raise ValueError(f"`bounds` must be (lo, hi) with 0 < lo < hi; got {bounds}")
    if len(np.unique(N)) < 2 or len(np.unique(D)) < 2:
        raise ValueError("`N` and `D` must each take at least two values")
    n0, d0 = N.min(), D.min()
    n, d = N / n0, D / d0
    la, lb = np.log(lo), np.log(hi)
    ca, cb = (la, lb), (la, lb)  # current log ranges of a and b
    for _ in range(zooms + 1):
        ga, gb = np.linspace(*ca, grid), np.linspace(*cb, grid)
        ab = np.exp(np.stack(np.meshgrid(ga, gb, indexing="ij"), -1).reshape(-1, 2))
        coef, sse = _project(n, d, L, ab)
        i = int(np.argmin(sse))
        step_a, step_b = ga[1] - ga[0], gb[1] - gb[0]
        la_i, lb_i = np.log(ab[i])
        ca = (max(la, la_i - 2 * step_a), min(lb, la_i + 2 * step_a))
        cb = (max(la, lb_i - 2 * step_b), min(lb, lb_i + 2 * step_b))
    a, b = (float(x) for x in ab[i])
    E, A, B = (float(x) for x in coef[i])
    A, B = float(A * n0 ** a), float(B * d0 ** b)
    first_step = (lb - la) / (grid - 1)
    reasons = []
    for name, v in (("a", a), ("b", b)):
        if np.log(v) <= la + first_step:
            reasons.append(f"{name} = {v:.3g} at its lower bound {lo:g}")
        elif np.log(v) >= lb - first_step:
            reasons.append(f"{name} = {v:.3g} at its upper bound {hi:g}")
    # a term whose change over the data is under FLAT of the mean loss has vanished:
    # its exponent is not identified
    for name, c, v, x in (("A", A, a, N), ("B", B, b, D)):
        if c * (x.min() ** -v - x.max() ** -v) < FLAT * L.mean():
            reasons.append(f"{name} = {c:.3g}: the {'N' if name == 'A' else 'D'} term "
                           f"vanished (changes under {FLAT:.0e} of the loss)")
    if E < FLAT * L.mean():
        reasons.append(f"E = {E:.3g}: the floor at its bound 0")
    rms = float(np.sqrt(sse[i] / L.size))
    return VPFit(E, A, a, B, b, rms, bool(reasons), tuple(reasons))


def bootstrap_seeds(rng: np.random.Generator, N, D, L_seeds, *, n_boot: int = 200,
                    level: float = 0.90, **fit_kw) -> dict:
    """Percentile intervals over seeds.

    Args:
      rng: a NumPy generator.
      N, D: one value per (N, D) cell.
      L_seeds: losses (cells, seeds).
      n_boot: resamples (each: ``seeds`` seeds drawn with replacement, their mean per
        cell refitted).
      level: interval coverage.
      **fit_kw: passed to :func:`vp_fit`.

    Returns:
      ``{"E"|"a"|"b"|"gamma": (lo, hi)}`` and ``"degenerate"``: the share of resampled
      fits that were degenerate.
    """
    L_seeds = np.asarray(L_seeds, np.float64)
    if L_seeds.ndim != 2 or L_seeds.shape[0] != np.size(N):
        raise ValueError(f"`L_seeds` must be (cells, seeds) with {np.size(N)} cells; got "
                         f"shape {L_seeds.shape}")
    k = L_seeds.shape[1]
    fits = [vp_fit(N, D, L_seeds[:, rng.integers(0, k, k)].mean(1), **fit_kw)
            for _ in range(n_boot)]
    q = (100 * (1 - level) / 2, 100 * (1 + level) / 2)
    out = {f: tuple(float(x) for x in np.percentile([getattr(g, f) for g in fits], q))
           for f in ("E", "a", "b", "gamma")}
    out["degenerate"] = float(np.mean([g.degenerate for g in fits]))
    return out


def synthetic_check(rng: np.random.Generator, N, D, *, true: dict, noise: float,
                    tolerance: float, **fit_kw) -> dict:
    """Losses from known ``true`` = ``{E, A, a, B, b}`` on the grid ``N x D`` times
    ``exp(noise * standard normal)``, refitted; ``ok`` when every parameter is within
    ``tolerance`` (relative) of its true value and the fit is not degenerate.

    Returns:
      ``dict(true, fit, errors, ok, tolerance, noise)``.
    """
    n, d = (v.ravel() for v in np.meshgrid(np.asarray(N, float), np.asarray(D, float),
                                           indexing="ij"))
    L = true["E"] + true["A"] * n ** -true["a"] + true["B"] * d ** -true["b"]
    L = L * np.exp(noise * rng.standard_normal(L.shape))
    f = vp_fit(n, d, L, **fit_kw)
    err = {k: abs(getattr(f, k) / true[k] - 1) for k in ("E", "A", "a", "B", "b")}
    return dict(true=dict(true), fit=f._asdict(), errors=err, tolerance=tolerance,
                noise=noise, ok=bool(not f.degenerate and max(err.values()) <= tolerance))
