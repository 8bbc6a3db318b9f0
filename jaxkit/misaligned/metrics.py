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
  outranks a negative, ties counted 1/2.

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

__all__ = ["METRICS", "HIGHER_IS_BETTER", "rmse", "mae", "r2", "spearman", "auroc",
           "metric_fn", "all_metrics", "BootGap", "bootstrap_gap", "boot_gaps"]

METRICS = ("rmse", "mae", "r2", "spearman")
HIGHER_IS_BETTER = {"rmse": False, "mae": False, "r2": True, "spearman": True, "auroc": True}


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
    """Weighted AUROC of scores ``score`` for binary labels ``y`` (1 = positive)."""
    pos, neg = w * (y > 0.5), w * (y <= 0.5)
    gt = (score[:, None] > score[None, :]).astype(score.dtype)
    eq = (score[:, None] == score[None, :]).astype(score.dtype)
    num = pos @ (gt + 0.5 * eq) @ neg
    return num / (jnp.sum(pos) * jnp.sum(neg))


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
    resampled gaps at or below 0, ``significant`` whether the interval excludes 0."""

    estimate: float
    lo: float
    hi: float
    p_le_0: float
    significant: bool


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
    """
    if metric == "spearman":
        raise ValueError("`metric` 'spearman' has no weighted form; bootstrap rmse, mae, "
                         "r2 or auroc")
    metric_fn(metric)
    est, gaps = boot_gaps(key, jnp.asarray(y, jnp.float32), jnp.asarray(pred_model, jnp.float32),
                          jnp.asarray(pred_base, jnp.float32), jnp.asarray(test, bool),
                          metric=metric, n_boot=int(n_boot))
    gaps = np.asarray(gaps, np.float64)
    lo, hi = np.quantile(gaps, [0.5 - level / 2, 0.5 + level / 2])
    return BootGap(float(est), float(lo), float(hi), float(np.mean(gaps <= 0)),
                   bool(lo > 0 or hi < 0))


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
