"""CruxBench scoring of a :class:`~jaxkit.cruxbench.data.Dataset` (simulated or read
from JSON Lines: the same code).

Per question:

- **ex-ante VOI**: the stated ``(q, p1, p0)`` projected onto the market price at
  ``asked_at`` (:func:`jaxkit.kernels.belief.cohere`, conditionals moved), then
  :func:`jaxkit.kernels.belief.voi`;
- **realised VOI**: the target price's move over the answer's announcement, from the
  last price before ``resolved_at`` to the last price at or before ``resolved_at +
  window`` (:func:`jaxkit.kernels.belief.update_between`, prices clipped to ``clip``):
  absolute change, logit change and log-score gain for the outcome (the last price
  when the outcome is unknown).

Per (target, proposer): the mean over the proposer's questions about that target, then
per proposer the mean over targets (each target weighs the same).

Downstream usefulness: a forecasting agent that starts from the market price at
``asked_at`` (the mean over the proposer's questions about the target when they were
asked at different times) and, for each answered question of a proposer, adds the question's update
in logit space (a naive-Bayes pool, ``logit f = logit p + sum_k (logit p_{s_k} -
logit p)``, with the projected conditionals), scored against the outcome by the Brier
and log scores (forecasts clipped to ``[1e-4, 1 - 1e-4]``) relative to the starting
price: ``Brier(p) - Brier(f)`` and ``log f(y) - log p(y)``, larger is better.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxkit.kernels import checks
from jaxkit.kernels.belief import cohere, update_between, voi

from .data import Dataset

__all__ = ["QUESTION_METRICS", "question_scores", "per_target_proposer", "agent_usefulness",
           "score"]

QUESTION_METRICS = ("ex_ante_abs", "ex_ante_sq", "ex_ante_mi", "realised_abs",
                    "realised_sq", "realised_logit", "realised_log_score")


def _price_index(times: np.ndarray, at: np.ndarray, *, strict: bool) -> np.ndarray:
    """Index of the last price before (``strict``) or at ``at`` per row; -1 if none."""
    t = np.where(np.isnan(times), np.inf, times)
    cmp = t < at[:, None] if strict else t <= at[:, None]
    return cmp.sum(1) - 1


@functools.partial(jax.jit, static_argnames="clip")
def _kernels(p_ask, q, p1, p0, prices, start, stop, mask, y, clip):
    """The kernels of :func:`question_scores` in one compiled call per shape."""
    co = cohere(p_ask, q, p1, p0)
    return co, voi(co.q, co.p1, co.p0), update_between(prices, start, stop, mask=mask,
                                                        outcome=y, clip=clip)


def question_scores(ds: Dataset, *, window: float = 0.0,
                    clip: tuple[float, float] = (0.01, 0.99)) -> dict[str, np.ndarray]:
    """Per-question ex-ante and realised VOI (``(Q,)`` arrays, NaN where unknown), the
    projected ``(q, p1, p0)``, the price at asking and the incoherence ``gap``."""
    times = ds.times[ds.question_market]
    prices = np.where(ds.mask, ds.prices, 0.5)[ds.question_market]
    mask = ds.mask[ds.question_market]
    asked = np.where(np.isnan(ds.asked_at), -np.inf, ds.asked_at)
    i_ask = np.maximum(_price_index(times, asked, strict=False), 0)
    p_ask = prices[np.arange(len(i_ask)), i_ask]
    resolved = ~np.isnan(ds.resolved_at)
    r_at = np.where(resolved, ds.resolved_at, 0.0)
    start = np.where(resolved, _price_index(times, r_at, strict=True), -1)
    stop = np.where(resolved, _price_index(times, r_at + window, strict=False), -1)
    outcome = ds.outcome[ds.question_target]
    last = prices[np.arange(len(i_ask)), mask.sum(1) - 1]
    y = np.where(np.isnan(outcome), last, outcome)
    with checks.clear_errors():
        co, v, u = jax.device_get(_kernels(p_ask, ds.q, ds.p1, ds.p0, prices, start, stop,
                                           mask, y, tuple(float(c) for c in clip)))
    ok = np.asarray(u.valid) & (stop > start)
    nan = np.full(len(ok), np.nan)
    return dict(
        ex_ante_abs=np.asarray(v.abs_shift, float), ex_ante_sq=np.asarray(v.sq_shift, float),
        ex_ante_mi=np.asarray(v.mutual_info, float),
        realised_abs=np.where(ok, np.asarray(u.abs_change, float), nan),
        realised_sq=np.where(ok, np.asarray(u.abs_change, float) ** 2, nan),
        realised_logit=np.where(ok, np.asarray(u.logit_change, float), nan),
        realised_log_score=np.where(ok, np.asarray(u.log_score_gain, float), nan),
        q=np.asarray(co.q, float), p1=np.asarray(co.p1, float), p0=np.asarray(co.p0, float),
        p_ask=np.asarray(p_ask, float), gap=np.asarray(co.gap, float))


def per_target_proposer(ds: Dataset, values: np.ndarray) -> np.ndarray:
    """``(N, M)`` mean of per-question ``values`` over each proposer's questions about
    each target, ignoring NaN (NaN where there is none)."""
    N, M = len(ds.target_ids), len(ds.proposers)
    flat = ds.question_target * M + ds.question_proposer
    ok = ~np.isnan(values)
    s = np.bincount(flat[ok], values[ok], N * M)
    n = np.bincount(flat[ok], minlength=N * M)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan).reshape(N, M)


def _logit(p):
    return np.log(p) - np.log1p(-p)


def agent_usefulness(ds: Dataset, qs: dict[str, np.ndarray], *,
                     eps: float = 1e-4) -> dict[str, np.ndarray]:
    """The forecasting agent's ``(N, M)`` Brier improvement and log-score gain over the
    starting price (NaN where the outcome is unknown or no question of the proposer
    about the target was answered), and its forecasts."""
    N, M = len(ds.target_ids), len(ds.proposers)
    p = np.clip(qs["p_ask"], eps, 1 - eps)
    answered = ~np.isnan(ds.answer)
    p_s = np.clip(np.where(ds.answer > 0, qs["p1"], qs["p0"]), eps, 1 - eps)
    step = np.where(answered, _logit(p_s) - _logit(p), 0.0)
    flat = ds.question_target * M + ds.question_proposer
    total = np.bincount(flat, step, N * M).reshape(N, M)
    n_ans = np.bincount(flat, answered.astype(float), N * M).reshape(N, M)
    start = per_target_proposer(ds, np.where(np.isnan(p), np.nan, p))
    start = np.clip(start, eps, 1 - eps)
    f = np.clip(1 / (1 + np.exp(-(_logit(start) + total))), eps, 1 - eps)
    y = ds.outcome[:, None]
    known = (n_ans > 0) & ~np.isnan(y) & ~np.isnan(start)
    brier = (start - y) ** 2 - (f - y) ** 2
    logs = np.where(y > 0, np.log(f) - np.log(start), np.log1p(-f) - np.log1p(-start))
    return dict(brier_gain=np.where(known, brier, np.nan), log_gain=np.where(known, logs, np.nan),
                forecast=np.where(known, f, np.nan), start=start)


def score(ds: Dataset, *, window: float = 0.0,
          clip: tuple[float, float] = (0.01, 0.99)) -> dict:
    """All scores of ``ds``: ``questions`` (per question), ``per_target`` (``(N, M)``
    matrices of every question metric and of the agent's ``brier_gain`` /
    ``log_gain``) and ``per_proposer`` (``(M,)`` means over targets, NaN-ignoring)."""
    qs = question_scores(ds, window=window, clip=clip)
    per = {k: per_target_proposer(ds, qs[k]) for k in QUESTION_METRICS}
    agent = agent_usefulness(ds, qs)
    per["brier_gain"], per["log_gain"] = agent["brier_gain"], agent["log_gain"]
    with np.errstate(invalid="ignore"), _quiet():
        prop = {k: np.nanmean(v, 0) for k, v in per.items()}
    return dict(questions=qs, per_target=per, per_proposer=prop, forecast=agent["forecast"])


class _quiet:
    """Silence NumPy's "mean of empty slice" warnings (an all-NaN column gives NaN)."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)
