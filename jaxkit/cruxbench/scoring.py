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
  when the outcome is unknown);
- **volatility-controlled realised VOI** (``realised_controlled``): the absolute move
  over the answer's window minus ``matched_abs``, the mean absolute move over every
  window of the same number of price steps elsewhere in the same path that does not
  overlap the answer's window (:func:`matched_moves`, from
  :func:`jaxkit.kernels.belief.realised_updates`): a market that moves a lot anyway does
  not credit the question with its background volatility (NaN where no matched window
  exists);
- **sign check** (``sign_agree``): 1 when the realised move goes the way the answer
  says (its sign that of ``p_s - p_ask``, ``p_s`` the projected conditional of the
  given answer), 0 when it goes the other way, NaN when the answer, the predicted
  direction or the move is unknown or zero.

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
from typing import NamedTuple

import jax
import numpy as np

from jaxkit.kernels import checks
from jaxkit.kernels.belief import cohere, realised_updates, update_between, voi

from .data import Dataset

__all__ = ["QUESTION_METRICS", "Scores", "question_scores", "matched_moves", "per_target_proposer",
           "agent_usefulness", "score"]

QUESTION_METRICS = ("ex_ante_abs", "ex_ante_sq", "ex_ante_mi", "realised_abs",
                    "realised_sq", "realised_logit", "realised_log_score",
                    "realised_controlled", "sign_agree")


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


def matched_moves(prices: np.ndarray, mask: np.ndarray, start: np.ndarray, stop: np.ndarray,
                  *, clip: tuple[float, float] = (0.01, 0.99)) -> tuple[np.ndarray, np.ndarray]:
    """The background volatility of each row's path at the scale of its answer window.

    For row ``i`` with window ``[start_i, stop_i]`` (``L = stop_i - start_i`` price
    steps), the mean of ``|p_{t+L} - p_t|`` (clipped prices,
    :func:`jaxkit.kernels.belief.realised_updates` with horizon L) over every start
    ``t`` whose window has both ends observed and does not overlap the answer's window
    (``t + L <= start_i`` or ``t >= stop_i``).

    Args:
        prices, mask: ``(Q, T)`` price paths and their observed entries.
        start, stop: ``(Q,)`` indices of the answer's window (``stop <= start``: none).
        clip: price clipping, as for the realised updates.

    Returns:
        ``(matched_abs, n_matched)``: ``(Q,)`` the mean (NaN where no window matches) and
        the number of matched windows.
    """
    prices, mask = np.asarray(prices, float), np.asarray(mask, bool)
    start, stop = np.asarray(start), np.asarray(stop)
    Q, T = prices.shape
    out, n = np.full(Q, np.nan), np.zeros(Q, int)
    L = stop - start
    for h in np.unique(L[(L >= 1) & (L < T)]):
        rows = np.flatnonzero(L == h)
        u = realised_updates(prices[rows], int(h), mask=mask[rows], clip=clip)
        a, ok = np.array(u.abs_change, float), np.array(u.valid, bool)
        t = np.arange(T)[None]
        ok &= (t + h <= start[rows, None]) | (t >= stop[rows, None])
        n[rows] = ok.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(n[rows] > 0, (a * ok).sum(1) / np.maximum(n[rows], 1),
                                 np.nan)
    return out, n


def question_scores(ds: Dataset, *, window: float = 0.0,
                    clip: tuple[float, float] = (0.01, 0.99)) -> dict[str, np.ndarray]:
    """Per-question ex-ante and realised VOI (``(Q,)`` arrays, NaN where unknown), the
    volatility-controlled realised VOI with its ``matched_abs`` and the sign check
    (module docstring), the projected ``(q, p1, p0)``, the price at asking and the
    incoherence ``gap``."""
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
    matched, _ = matched_moves(prices, mask, start, np.where(ok, stop, start), clip=clip)
    realised = np.where(ok, np.asarray(u.abs_change, float), nan)
    p_s = np.where(ds.answer > 0, np.asarray(co.p1, float), np.asarray(co.p0, float))
    predicted = np.sign(p_s - np.asarray(p_ask, float))
    moved = np.sign(np.asarray(u.logit_change, float))
    known = ok & ~np.isnan(ds.answer) & (predicted != 0) & (moved != 0)
    return dict(
        realised_controlled=realised - matched, matched_abs=matched,
        sign_agree=np.where(known, (predicted == moved).astype(float), nan),
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


class Scores(NamedTuple):
    """All scores of a dataset (:func:`score`).

    Attributes:
        questions: per question, every metric of :func:`question_scores` (``(Q,)``).
        per_target: ``(N, M)`` matrices (target x proposer) of every question metric
            and of the own-number agent's ``brier_gain`` / ``log_gain``.
        per_proposer: ``(M,)`` means of ``per_target`` over targets, NaN-ignoring.
        forecast: ``(N, M)`` the own-number agent's forecasts (NaN where unknown).
    """

    questions: dict[str, np.ndarray]
    per_target: dict[str, np.ndarray]
    per_proposer: dict[str, np.ndarray]
    forecast: np.ndarray


def score(ds: Dataset, *, window: float = 0.0,
          clip: tuple[float, float] = (0.01, 0.99)) -> Scores:
    """All scores of ``ds`` (:class:`Scores`): per question, per (target, proposer)
    and per proposer."""
    qs = question_scores(ds, window=window, clip=clip)
    per = {k: per_target_proposer(ds, qs[k]) for k in QUESTION_METRICS}
    agent = agent_usefulness(ds, qs)
    per["brier_gain"], per["log_gain"] = agent["brier_gain"], agent["log_gain"]
    with np.errstate(invalid="ignore"), _quiet():
        prop = {k: np.nanmean(v, 0) for k, v in per.items()}
    return Scores(questions=qs, per_target=per, per_proposer=prop, forecast=agent["forecast"])


class _quiet:
    """Silence NumPy's "mean of empty slice" warnings (an all-NaN column gives NaN)."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)
