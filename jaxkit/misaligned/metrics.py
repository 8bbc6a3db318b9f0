"""Masked regression and classification metrics, and the two-level bootstrap of gaps.

Every metric takes ``(y, pred, w)`` with ``w`` non-negative weights over the molecules
(a 0/1 test mask, or bootstrap counts), so one fixed-shape function serves every split
and resample and vmaps over seeds:

* RMSE :math:`\\sqrt{\\sum_i w_i (p_i - y_i)^2 / \\sum_i w_i}`, MAE likewise;
* :math:`R^2 = 1 - \\sum w (p - y)^2 / \\sum w (y - \\bar y_w)^2` (``\\bar y_w`` the
  weighted test mean: the train-mean predictor scores slightly below 0);
* Spearman: Pearson correlation of the average ranks among the test molecules
  (``w > 0``; weights only select);
* AUROC (binary labels, scores ``pred``): the Mann-Whitney probability that a positive
  outranks a negative, ties counted 1/2. It is undefined (0/0) when the weighted rows
  hold one class: :func:`auroc` then returns NaN, and :func:`auroc_flagged` returns the
  flag ``defined`` beside it; every caller in this package refuses such a test set or
  reports how many validation sets or resamples were undefined, never a silent NaN.

Screening metrics (binary labels, higher score = predicted active; ties resolved by
their expectation over random orders):

* PR-AUC, average precision :math:`\\sum_{i \\in P} \\mathrm{prec}(s_i) / |P|`, the
  precision among the molecules scored at least :math:`s_i` (scikit-learn's
  ``average_precision_score``; tied molecules enter together);
* enrichment factor at a fraction :math:`x` (EF :math:`x`): the actives among the top
  :math:`\\lceil x N \\rceil` molecules over their expected number at random,
  :math:`(h / \\lceil x N\\rceil) / (n / N)`;
* BEDROC (Truchon & Bayly, J. Chem. Inf. Model. 47, 488 (2007), eq. 36) with
  :math:`\\alpha = 20` (80% of the score from the top 8%): from the RIE of the actives'
  ranks, rescaled to [0, 1].

:func:`bootstrap_gap` resamples seeds, then test molecules within each drawn seed
(Davison & Hinkley 1997, sec. 3.8, two-stage resampling), with the same draws for the
model and the baseline (paired), and returns the percentile interval of the mean gap.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["METRICS", "SCREENING", "HIGHER_IS_BETTER", "rmse", "mae", "r2", "spearman",
           "auroc", "auroc_flagged", "average_precision", "enrichment_factor", "bedroc",
           "screening_metrics", "metric_fn", "all_metrics", "BootGap", "bootstrap_gap", "boot_gaps"]

METRICS = ("rmse", "mae", "r2", "spearman")
#: the classification and screening metrics of :func:`screening_metrics`
SCREENING = ("auroc", "pr_auc", "ef1", "ef5", "bedroc")
HIGHER_IS_BETTER = {"rmse": False, "mae": False, "r2": True, "spearman": True, "auroc": True,
                    "pr_auc": True, "ef1": True, "ef5": True, "bedroc": True}


def _wsum(w, x):
    return jnp.sum(w * x, axis=-1)


def rmse(y, pred, w):
    """Weighted root-mean-square error (module docstring)."""
    return jnp.sqrt(_wsum(w, (pred - y) ** 2) / jnp.sum(w, axis=-1))


def mae(y, pred, w):
    """Weighted mean absolute error."""
    return _wsum(w, jnp.abs(pred - y)) / jnp.sum(w, axis=-1)


def r2(y, pred, w):
    """Weighted coefficient of determination about the weighted test mean."""
    ybar = _wsum(w, y) / jnp.sum(w, axis=-1)
    return 1.0 - _wsum(w, (pred - y) ** 2) / _wsum(w, (y - ybar[..., None]) ** 2)


def _ranks(x, sel):
    """Average ranks (1-based) of ``x`` among the selected entries (O(n^2), masked)."""
    xi, xj = x[:, None], x[None, :]
    less = jnp.sum(jnp.where(sel[None, :], xj < xi, False), axis=1)
    equal = jnp.sum(jnp.where(sel[None, :], xj == xi, False), axis=1)
    return less + (equal + 1) / 2.0


def spearman(y, pred, w):
    """Spearman rank correlation over the molecules with ``w > 0``."""
    sel = w > 0
    ry, rp = _ranks(y, sel), _ranks(pred, sel)
    n = jnp.sum(sel)
    my, mp = jnp.sum(jnp.where(sel, ry, 0)) / n, jnp.sum(jnp.where(sel, rp, 0)) / n
    dy, dp = jnp.where(sel, ry - my, 0.0), jnp.where(sel, rp - mp, 0.0)
    return jnp.sum(dy * dp) / jnp.sqrt(jnp.sum(dy ** 2) * jnp.sum(dp ** 2))


def auroc(y, score, w):
    """Weighted AUROC of scores ``score`` for binary labels ``y`` (1 = positive); NaN
    (0/0) when the weighted rows hold one class (use :func:`auroc_flagged` to know)."""
    return auroc_flagged(y, score, w)[0]


def auroc_flagged(y, score, w):
    """``(auroc, defined)``: :func:`auroc` and whether both classes have positive weight
    (where ``defined`` is False the value is NaN).

    Args:
        y: ``(n,)`` 0/1 labels.
        score: ``(n,)`` scores, higher = positive.
        w: ``(n,)`` non-negative weights (a test mask or bootstrap counts).

    Returns:
        The AUROC (a scalar) and a boolean scalar.
    """
    pos, neg = w * (y > 0.5), w * (y <= 0.5)
    gt = (score[:, None] > score[None, :]).astype(score.dtype)
    eq = (score[:, None] == score[None, :]).astype(score.dtype)
    num = pos @ (gt + 0.5 * eq) @ neg
    den = jnp.sum(pos) * jnp.sum(neg)
    defined = den > 0
    return jnp.where(defined, num / jnp.where(defined, den, 1.0), jnp.nan), defined


def _above(score, w):
    """Per molecule: the weight scored strictly above it and the weight tied with it
    (itself included when its weight is positive)."""
    gt = (score[None, :] > score[:, None]).astype(score.dtype)
    eq = (score[None, :] == score[:, None]).astype(score.dtype)
    return gt @ w, eq @ w


def average_precision(y, score, w):
    """Weighted average precision (PR-AUC) of ``score`` for 0/1 labels ``y`` (module
    docstring); NaN without a positive of positive weight.

    Args:
        y: ``(n,)`` 0/1 labels.
        score: ``(n,)`` scores, higher = active.
        w: ``(n,)`` non-negative weights.

    Returns:
        A scalar in [0, 1].
    """
    pos = w * (y > 0.5)
    ge = (score[None, :] >= score[:, None]).astype(score.dtype)  # [i, j]: s_j >= s_i
    prec = (ge @ pos) / jnp.maximum(ge @ w, 1e-30)
    return jnp.sum(pos * prec) / jnp.sum(pos)


def enrichment_factor(y, score, w, fraction: float):
    """Enrichment factor at ``fraction`` of the weighted molecules (module docstring).

    With :math:`N = \\sum w`, :math:`k = \\lceil x N \\rceil` and, per molecule, the
    weight :math:`g_i` scored above it and :math:`e_i` tied with it, molecule :math:`i`
    is in the top :math:`k` with probability :math:`\\mathrm{clip}((k - g_i) / e_i, 0,
    1)` over random orders of the ties; the expected actives there over :math:`k n / N`.

    Args:
        y: ``(n,)`` 0/1 labels.
        score: ``(n,)`` scores, higher = active.
        w: ``(n,)`` 0/1 weights (a test mask).
        fraction: the top fraction (``0.01`` for EF 1%).

    Returns:
        A scalar (1 = random; at most ``min(N / n, N / k)``); NaN without an active.
    """
    pos = w * (y > 0.5)
    N = jnp.sum(w)
    k = jnp.ceil(fraction * N - 1e-6)
    g, e = _above(score, w)
    share = jnp.clip((k - g) / jnp.maximum(e, 1e-30), 0.0, 1.0)
    hits = jnp.sum(pos * share)
    return (hits / k) / (jnp.sum(pos) / N)


def bedroc(y, score, w, alpha: float = 20.0):
    """BEDROC (Truchon & Bayly 2007, eq. 36; module docstring) of ``score`` for 0/1
    labels ``y`` over the molecules with weight 1.

    With :math:`N` molecules, :math:`n` actives at ranks :math:`r_i` (1 = best; for
    tied molecules :math:`e^{-\\alpha r_i / N}` is its mean over the ranks the tie group
    holds, the expectation over random orders) and :math:`R_a = n / N`:
    :math:`\\mathrm{RIE} = \\sum_i e^{-\\alpha r_i / N} / (R_a (1 - e^{-\\alpha}) /
    (e^{\\alpha / N} - 1))` and :math:`\\mathrm{BEDROC} = \\mathrm{RIE}\\, R_a
    \\sinh(\\alpha/2) / (\\cosh(\\alpha/2) - \\cosh(\\alpha/2 - \\alpha R_a)) + 1 / (1 -
    e^{\\alpha (1 - R_a)})`.

    Args:
        y: ``(n,)`` 0/1 labels.
        score: ``(n,)`` scores, higher = active.
        w: ``(n,)`` 0/1 weights (a test mask).
        alpha: the early-recognition parameter.

    Returns:
        A scalar in [0, 1]; NaN without an active.
    """
    pos = w * (y > 0.5)
    N, n = jnp.sum(w), jnp.sum(pos)
    g, e = _above(score, w)
    # each active's expected exp(-alpha r / N) over random orders of its tie group, which
    # holds ranks g + 1 ... g + e: q^(g+1) (1 - q^e) / (e (1 - q)), q = exp(-alpha / N)
    lq = -alpha / N
    e1 = jnp.maximum(e, 1.0)
    term = jnp.exp(lq * (g + 1.0)) * jnp.expm1(lq * e1) / (e1 * jnp.expm1(lq))
    ra = n / N
    rie = jnp.sum(pos * term) / (
        ra * (1.0 - jnp.exp(-alpha)) / jnp.expm1(alpha / N))
    return (rie * ra * jnp.sinh(alpha / 2) / (jnp.cosh(alpha / 2) - jnp.cosh(alpha / 2
                                                                           - alpha * ra))
            + 1.0 / (1.0 - jnp.exp(alpha * (1.0 - ra))))


def screening_metrics(y, score, w) -> dict:
    """``{auroc, pr_auc, ef1, ef5, bedroc}`` (:data:`SCREENING`, BEDROC at alpha 20) and
    ``auroc_defined``; vmaps over leading axes of ``score`` and ``w``."""
    a, ok = auroc_flagged(y, score, w)
    return {"auroc": a, "auroc_defined": ok, "pr_auc": average_precision(y, score, w),
            "ef1": enrichment_factor(y, score, w, 0.01),
            "ef5": enrichment_factor(y, score, w, 0.05), "bedroc": bedroc(y, score, w)}


_FNS = {"rmse": rmse, "mae": mae, "r2": r2, "spearman": spearman, "auroc": auroc}


def metric_fn(name: str):
    """The metric ``name`` (one of ``rmse, mae, r2, spearman, auroc``)."""
    if name not in _FNS:
        raise ValueError(f"`metric` must be one of {', '.join(_FNS)}; got {name!r}")
    return _FNS[name]


def all_metrics(y, pred, w, names=METRICS) -> dict:
    """``{name: metric(y, pred, w)}``; vmaps over leading axes of ``pred`` and ``w``."""
    return {m: _FNS[m](y, pred, w) for m in names}


class BootGap(NamedTuple):
    """A bootstrap gap: ``estimate`` (mean over seeds of the per-seed gap on the full
    test sets), ``lo`` / ``hi`` the percentile interval, ``p_le_0`` the fraction of
    resampled gaps at or below 0, ``significant`` whether the interval excludes 0,
    ``undefined`` the number of resamples where the metric was undefined (the AUROC of a
    resample holding one class; left out of the interval)."""

    estimate: float
    lo: float
    hi: float
    p_le_0: float
    significant: bool
    undefined: int = 0


def _resample_weights(key, test, n_boot):
    """``(n_boot, S)`` drawn seeds and ``(n_boot, S, n)`` weights: seeds drawn with
    replacement, then each drawn seed's test molecules drawn with replacement (counts)."""
    S, n = test.shape
    k1, k2 = jax.random.split(key)
    seeds = jax.random.randint(k1, (n_boot, S), 0, S)
    order = jnp.argsort(~test, axis=1, stable=True)  # each seed's test rows first
    n_test = jnp.sum(test, axis=1)[seeds]  # (B, S)
    u = jax.random.uniform(k2, (n_boot, S, n))
    slot = jnp.minimum((u * n_test[..., None]).astype(jnp.int32), n - 1)
    idx = jnp.take_along_axis(order[seeds], slot, axis=-1)
    keep = (jnp.arange(n)[None, None, :] < n_test[..., None]).astype(jnp.float32)
    counts = jax.vmap(jax.vmap(lambda i, k: jnp.zeros(n).at[i].add(k)))(idx, keep)
    return seeds, counts


def bootstrap_gap(key, y, pred_model, pred_base, test, *, metric: str = "rmse",
                  n_boot: int = 1000, level: float = 0.95) -> BootGap:
    """Two-level paired bootstrap of the gap between a model and a baseline.

    The gap is oriented so that positive means the model is better: ``metric(base) -
    metric(model)`` for errors (RMSE, MAE), ``metric(model) - metric(base)`` for scores.

    Args:
        key: JAX PRNG key.
        y: ``(n,)`` labels.
        pred_model: ``(S, n)`` model predictions per seed.
        pred_base: ``(S, n)`` baseline predictions per seed.
        test: ``(S, n)`` boolean test masks.
        metric: one of ``rmse, mae, r2, auroc`` (weighted metrics).
        n_boot: resamples.
        level: interval coverage.

    Returns:
        A :class:`BootGap`.

    Raises:
        ValueError: ``metric`` unknown or ``"spearman"``; with ``"auroc"``, a test set
            without both classes (the AUROC is undefined) or every resample undefined.
    """
    if metric == "spearman":
        raise ValueError("`metric` 'spearman' has no weighted form; bootstrap rmse, mae, "
                         "r2 or auroc")
    metric_fn(metric)
    if metric == "auroc":
        t = np.asarray(test, bool)
        lab = np.asarray(y) > 0.5
        one = [s for s in range(t.shape[0]) if lab[t[s]].all() or not lab[t[s]].any()]
        if one:
            raise ValueError(f"`test`: the test sets of seeds {one} hold one class; the "
                             "AUROC is undefined there")
    est, gaps = boot_gaps(key, jnp.asarray(y, jnp.float32), jnp.asarray(pred_model, jnp.float32),
                          jnp.asarray(pred_base, jnp.float32), jnp.asarray(test, bool),
                          metric=metric, n_boot=int(n_boot))
    gaps = np.asarray(gaps, np.float64)
    ok = np.isfinite(gaps)
    if not ok.any():
        raise ValueError(f"every bootstrap resample left the {metric} undefined")
    gaps = gaps[ok]
    lo, hi = np.quantile(gaps, [0.5 - level / 2, 0.5 + level / 2])
    return BootGap(float(est), float(lo), float(hi), float(np.mean(gaps <= 0)),
                   bool(lo > 0 or hi < 0), int((~ok).sum()))


@functools.partial(jax.jit, static_argnames=("metric", "n_boot"))
def boot_gaps(key, y, pred_model, pred_base, test, *, metric: str = "rmse",
              n_boot: int = 1000):
    """The jitted core of :func:`bootstrap_gap`: ``(estimate, (n_boot,) resampled gaps)``
    (vmappable over replications, e.g. for a coverage study)."""
    fn = _FNS[metric]
    sign = 1.0 if HIGHER_IS_BETTER[metric] else -1.0
    per_seed = jax.vmap(fn, (None, 0, 0))
    w = test.astype(jnp.float32)
    est = jnp.mean(sign * (per_seed(y, pred_model, w) - per_seed(y, pred_base, w)))
    seeds, counts = _resample_weights(key, test, n_boot)

    def one(s, c):
        return jnp.mean(sign * (per_seed(y, pred_model[s], c) - per_seed(y, pred_base[s], c)))

    return est, jax.vmap(one)(seeds, counts)
