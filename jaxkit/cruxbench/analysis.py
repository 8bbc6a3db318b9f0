"""Statistics of CruxBench: does VOI track model quality, and does it predict usefulness?

- :func:`correlation_summary`: Pearson ``r`` between per-proposer VOI and a quality
  measure, with a Fisher-z interval (:func:`jaxkit.stats.fisher_z_interval`), a nested
  bootstrap interval (resample targets, recompute each proposer's mean; then resample
  proposers; Field & Welsh 2007 for two-level resampling), Spearman's rho and a
  permutation p-value (exact over all ``M!`` orders for ``M <= 8``, else ``n_perm``
  random ones; Phipson & Smyth 2010 ``(b + 1) / (m + 1)``).
- :func:`correlation_verdict` (positive correlation, Fisher-z interval vs 0) and
  :func:`correlation_equivalence` (``|r - r_paper| < margin``: the Fisher-z interval
  inside ``(r_paper - margin, r_paper + margin)``) as :class:`jaxkit.stats.Verdict`.
- :func:`heldout_usefulness`: cross-fitted prediction test. Targets are split in two
  halves; proposers are ranked by mean VOI on one half, and on each target of the other
  half the mean usefulness of the top-ranked half of the proposers minus that of the
  bottom half is one paired difference; :func:`jaxkit.stats.superiority` over all
  targets says whether VOI predicts usefulness out of sample.

Replicates. The unit a user would redo is the simulator seed (a new draw of targets,
proposers, questions and markets), not a target within one draw: :func:`seed_stats`
reduces one simulated benchmark to one number per claim (``r`` of VOI with quality
over its proposers; the mean held-out usefulness difference, measured with the
separate forecaster of :func:`jaxkit.cruxbench.proposers.separate_forecaster`), and
:func:`seed_correlation` / :func:`seed_correlation_equivalence` decide over the seeds
(the Student-t interval of the seeds' mean Fisher z, back-transformed to r).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
from scipy import stats as sps

from jaxkit.stats import Verdict, as_generator, fisher_z_interval, superiority, t_interval

from .results import Evaluation
from .scoring import Scores, agent_usefulness, score

__all__ = ["pearson", "correlation_summary", "nested_bootstrap_r", "permutation_p",
           "correlation_verdict", "correlation_equivalence", "heldout_usefulness",
           "forecaster_usefulness", "seed_stats", "SEED_STATS", "seed_correlation",
           "seed_correlation_equivalence"]


def pearson(x, y) -> float:
    """Pearson correlation of the pairs where both are finite (nan: < 3 pairs or a
    constant side)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def _rows_r(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of ``(B, M)`` arrays (nan rows where constant)."""
    xc = x - x.mean(1, keepdims=True)
    yc = y - y.mean(1, keepdims=True)
    den = np.sqrt((xc**2).sum(1) * (yc**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(1) / den, np.nan)


def nested_bootstrap_r(key_or_rng, per_target: np.ndarray, quality: np.ndarray,
                       n_boot: int = 2000, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``r(mean_i per_target[i], quality)`` under resampling of
    targets (rows) and then of proposers (columns).

    Args:
        key_or_rng: JAX key or NumPy generator.
        per_target: ``(N, M)`` per-(target, proposer) VOI (NaN ignored).
        quality: ``(M,)`` quality measure, or ``(N, M)`` per-target values (e.g. the
            agent's usefulness) resampled with the same targets.
        n_boot: resamples.
        level: coverage.

    Returns:
        ``(lo, hi)`` (nan when fewer than half the resamples give a finite r).
    """
    rng = as_generator(key_or_rng)
    v = np.asarray(per_target, float)
    N, M = v.shape
    ti = rng.integers(0, N, (n_boot, N))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(v[ti], axis=1)                      # (B, M)
        qual = np.asarray(quality, float)
        qual = (np.nanmean(qual[ti], axis=1) if qual.ndim == 2
                else np.broadcast_to(qual, means.shape))
    pi = rng.integers(0, M, (n_boot, M))
    r = _rows_r(np.take_along_axis(means, pi, 1), np.take_along_axis(qual, pi, 1))
    r = r[np.isfinite(r)]
    if r.size < n_boot / 2:
        return math.nan, math.nan
    lo, hi = np.quantile(r, [0.5 - level / 2, 0.5 + level / 2])
    return float(lo), float(hi)


def permutation_p(key_or_rng, x, y, n_perm: int = 10000) -> float:
    """Two-sided permutation p-value of Pearson ``|r|`` (exact for ``len(x) <= 8``)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        return math.nan
    r0 = abs(pearson(x, y))
    if math.isnan(r0):
        return math.nan
    if x.size <= 8:
        perms = np.array(list(itertools.permutations(range(x.size))))
        r = np.abs(_rows_r(np.broadcast_to(x, perms.shape), y[perms]))
        return float(np.mean(r >= r0 - 1e-12))
    rng = as_generator(key_or_rng)
    perms = np.argsort(rng.random((n_perm, x.size)), 1)
    r = np.abs(_rows_r(np.broadcast_to(x, perms.shape), y[perms]))
    return float((np.sum(r >= r0 - 1e-12) + 1) / (n_perm + 1))


def correlation_summary(key_or_rng, per_target: np.ndarray, quality: np.ndarray, *,
                        n_boot: int = 2000, n_perm: int = 10000,
                        level: float = 0.95) -> dict[str, float]:
    """Pearson r (per-proposer mean over targets vs ``quality``, ``(M,)`` or per target
    ``(N, M)``) with Fisher-z and nested-bootstrap intervals, Spearman rho and the
    permutation p; ``n`` proposers."""
    rng = as_generator(key_or_rng)
    qual = np.asarray(quality, float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = np.nanmean(np.asarray(per_target, float), 0)
        q = np.nanmean(qual, 0) if qual.ndim == 2 else qual
    ok = np.isfinite(x) & np.isfinite(q)
    n = int(ok.sum())
    r = pearson(x, q)
    lo, hi = fisher_z_interval(r, n, level) if not math.isnan(r) else (math.nan, math.nan)
    blo, bhi = nested_bootstrap_r(rng, np.asarray(per_target)[:, ok],
                                  qual[:, ok] if qual.ndim == 2 else q[ok], n_boot, level)
    rho = float(sps.spearmanr(x[ok], q[ok]).statistic) if n >= 3 else math.nan
    return dict(r=r, fisher_lo=lo, fisher_hi=hi, boot_lo=blo, boot_hi=bhi, spearman=rho,
                perm_p=permutation_p(rng, x, q, n_perm), n=n)


def correlation_verdict(r: float, n: int, *, null: float = 0.0,
                        level: float = 0.95) -> Verdict:
    """Is the correlation above ``null``? "yes" if the Fisher-z interval lies above it,
    "no" if below, else "not shown"."""
    lo, hi = fisher_z_interval(r, n, level) if not math.isnan(r) else (math.nan, math.nan)
    test = f"Pearson r > {null:g} (Fisher z {level:.0%} CI), n={n}"
    if math.isnan(lo):
        return Verdict("not shown", r, lo, hi, n, test + ": too few proposers")
    v = "yes" if lo > null else "no" if hi < null else "not shown"
    return Verdict(v, r, lo, hi, n, test)


def correlation_equivalence(r: float, n: int, *, target: float, margin: float,
                            level: float = 0.90) -> Verdict:
    """Is the correlation within ``margin`` of ``target``? "yes" if the Fisher-z
    ``level`` interval lies inside ``(target - margin, target + margin)``, "no" if it
    lies wholly outside, else "not shown"."""
    if not margin > 0:
        raise ValueError(f"`margin` must be > 0; got {margin}")
    lo, hi = fisher_z_interval(r, n, level) if not math.isnan(r) else (math.nan, math.nan)
    test = (f"equivalence |r - {target:g}| < {margin:g} (Fisher z {level:.0%} CI), n={n}")
    if math.isnan(lo):
        return Verdict("not shown", r, lo, hi, n, test + ": too few proposers")
    a, b = target - margin, target + margin
    v = "yes" if a < lo and hi < b else "no" if hi <= a or lo >= b else "not shown"
    return Verdict(v, r, lo, hi, n, test)


def heldout_usefulness(per_target_voi: np.ndarray, per_target_use: np.ndarray, *,
                       level: float = 0.95) -> tuple[Verdict, np.ndarray]:
    """Cross-fitted test that VOI predicts usefulness (see the module docstring).

    Args:
        per_target_voi: ``(N, M)`` VOI per (target, proposer).
        per_target_use: ``(N, M)`` usefulness per (target, proposer) (larger is better).
        level: coverage of the t interval.

    Returns:
        ``(verdict, diffs)``: :func:`jaxkit.stats.superiority` of the per-target
        differences (top-VOI half minus bottom-VOI half of the proposers), and them.
    """
    v, u = np.asarray(per_target_voi, float), np.asarray(per_target_use, float)
    N, M = v.shape
    halves = [np.arange(0, N, 2), np.arange(1, N, 2)]
    diffs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for fit, ev in (halves, halves[::-1]):
            mean = np.nanmean(v[fit], 0)
            order = np.argsort(-np.where(np.isfinite(mean), mean, -np.inf), kind="stable")
            top, bottom = order[: M // 2], order[M - M // 2:]
            diffs.append(np.nanmean(u[ev][:, top], 1) - np.nanmean(u[ev][:, bottom], 1))
    d = np.concatenate(diffs)
    return superiority(d, level=level), d


def evaluate(key_or_rng, scores: Scores, quality: np.ndarray, *, n_boot: int = 2000,
             n_perm: int = 10000) -> Evaluation:
    """The statistics of one scored benchmark (:func:`jaxkit.cruxbench.scoring.score`):
    for each VOI metric its correlation with ``quality`` and with the agent's Brier
    gain across proposers, and the cross-fitted usefulness tests of realised VOI.

    Returns:
        :class:`~jaxkit.cruxbench.results.Evaluation`: ``quality`` and ``usefulness``
        (``{metric: summary}``, summaries as :func:`correlation_summary`; empty when not
        computable, which needs 3 proposers with a finite quality measure, resp. a
        finite Brier gain), ``heldout`` (``{"brier_gain" | "log_gain": Verdict}``),
        ``heldout_diffs`` (the same keys: per-target differences) and ``n_quality``
        (the proposers with a finite quality measure).
    """
    rng = as_generator(key_or_rng)
    per, prop = scores.per_target, scores.per_proposer
    metrics = ("ex_ante_abs", "ex_ante_mi", "realised_abs", "realised_sq",
               "realised_log_score")
    q = np.asarray(quality, float)
    n_quality = int(np.isfinite(q).sum())
    qual: dict = {}
    use: dict = {}
    held: dict = {}
    diffs: dict = {}
    if n_quality >= 3:
        qual = {m: correlation_summary(rng, per[m], q, n_boot=n_boot, n_perm=n_perm)
                for m in metrics}
    if np.isfinite(prop["brier_gain"]).sum() >= 3:
        use = {m: correlation_summary(rng, per[m], per["brier_gain"], n_boot=n_boot,
                                      n_perm=n_perm) for m in metrics}
        for u in ("brier_gain", "log_gain"):
            held[u], diffs[u] = heldout_usefulness(per["realised_abs"], per[u])
    return Evaluation(quality=qual, usefulness=use, heldout=held, heldout_diffs=diffs,
                      n_quality=n_quality)


def simulator_check(measured: dict[str, np.ndarray], known: dict[str, np.ndarray], *,
                    rel_margin: float = 0.05) -> list[list]:
    """Rows ``[quantity, known mean, measured mean, 90% CI of the difference, verdict]``:
    :func:`jaxkit.stats.equivalence` of the per-question differences measured - known
    with margin ``rel_margin`` times the known mean (``measured[k]`` NaN-free rows)."""
    from jaxkit.stats import equivalence

    rows = []
    for name, (m, k) in {"E abs(dp) (abs shift)": ("realised_abs", "abs"),
                         "E dp^2 (Brier improvement)": ("realised_sq", "sq"),
                         "E log-score gain (mutual information)":
                             ("realised_log_score", "mi")}.items():
        x, y = np.asarray(measured[m], float), np.asarray(known[k], float)
        ok = np.isfinite(x)
        v = equivalence(x[ok] - y[ok], margin=rel_margin * max(float(np.mean(y[ok])), 1e-12))
        rows.append([name, f"{np.mean(y[ok]):.5f}", f"{np.mean(x[ok]):.5f}",
                     f"[{v.lo:.5f}, {v.hi:.5f}]", v.verdict])
    return rows


def forecaster_usefulness(ds, questions: dict, p1, p0) -> np.ndarray:
    """``(N, M)`` Brier improvement of the separate forecaster over the price at asking:
    :func:`jaxkit.cruxbench.scoring.agent_usefulness` with the forecaster's own ``p1`` /
    ``p0`` (``(Q,)``) in place of the proposer's (``questions``:
    :func:`jaxkit.cruxbench.scoring.question_scores` of ``ds``)."""
    return agent_usefulness(ds, {**questions, "p1": np.asarray(p1, float),
                                 "p0": np.asarray(p0, float)})["brier_gain"]


#: the per-seed numbers :func:`seed_stats` returns
SEED_STATS = ("r_quality", "r_forecaster", "r_own_agent", "heldout_forecaster", "n_quality",
              "r_quality_controlled", "sign_agree")


def seed_stats(ds, forecast_p1, forecast_p0, *, window: float = 0.0,
               clip: tuple[float, float] = (0.01, 0.99)) -> dict[str, float]:
    """One simulated benchmark reduced to the numbers its seed contributes.

    Args:
        ds: the benchmark's :class:`~jaxkit.cruxbench.data.Dataset`.
        forecast_p1, forecast_p0: ``(Q,)`` the separate forecaster's probabilities.
        window, clip: as :func:`jaxkit.cruxbench.scoring.score`.

    Returns:
        ``r_quality``: Pearson r of the proposers' mean realised VOI (abs price move at
        the announcement) with the quality measure; ``r_forecaster``: with the separate
        forecaster's mean Brier gain; ``r_own_agent``: with the gain of the agent that
        pools the proposer's own numbers (structural, for comparison);
        ``heldout_forecaster``: the mean over targets of the cross-fitted top-VOI-half
        minus bottom-half difference in the separate forecaster's Brier gain
        (:func:`heldout_usefulness`); ``n_quality``: proposers with a quality measure;
        ``r_quality_controlled``: ``r_quality`` with the volatility-controlled realised
        VOI (the move at the answer minus the path's moves at matched times,
        :func:`jaxkit.cruxbench.scoring.matched_moves`); ``sign_agree``: the share of
        answered questions whose price moved the way the answer says.
    """
    sc = score(ds, window=window, clip=clip)
    voi = sc.per_target["realised_abs"]
    use = forecaster_usefulness(ds, sc.questions, forecast_p1, forecast_p0)
    _, d = heldout_usefulness(voi, use)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v = np.nanmean(voi, 0)
        u = np.nanmean(use, 0)
        held = float(np.nanmean(d)) if np.isfinite(d).any() else math.nan
    q = np.asarray(ds.quality, float)
    sign = sc.questions["sign_agree"]
    return dict(r_quality=pearson(v, q), r_forecaster=pearson(v, u),
                r_own_agent=pearson(v, sc.per_proposer["brier_gain"]),
                heldout_forecaster=held, n_quality=float(np.isfinite(q).sum()),
                r_quality_controlled=pearson(sc.per_proposer["realised_controlled"], q),
                sign_agree=float(np.nanmean(sign)) if np.isfinite(sign).any() else math.nan)


def _z(rs) -> np.ndarray:
    r = np.asarray(rs, float)
    return np.arctanh(np.clip(r[np.isfinite(r)], -1 + 1e-12, 1 - 1e-12))


def seed_correlation(rs, *, null: float, level: float = 0.95) -> Verdict:
    """Is the correlation above ``null``, over simulator seeds? The ``level`` Student-t
    interval of the seeds' mean Fisher z (``atanh r``, one per seed) against
    ``atanh(null)``: "yes" above, "no" below, else "not shown"; estimate and interval
    back-transformed to r."""
    if not -1 < null < 1:
        raise ValueError(f"`null` must be in (-1, 1); got {null}")
    z = _z(rs)
    v = superiority(z, margin=math.atanh(null), level=level)
    test = (f"mean Fisher z of r over {z.size} simulator seeds ({level:.0%} t CI) vs "
            f"r = {null:g}")
    return Verdict(v.verdict, math.tanh(v.estimate) if z.size else math.nan,
                   math.tanh(v.lo), math.tanh(v.hi), v.n,
                   test if z.size >= 2 else test + ": fewer than 2 seeds with an r")


def seed_correlation_equivalence(rs, *, target: float, margin: float,
                                 level: float = 0.90) -> Verdict:
    """Is the correlation within ``margin`` of ``target``, over simulator seeds? The
    ``level`` t interval of the seeds' mean Fisher z, back-transformed to r, inside
    ``(target - margin, target + margin)``: "yes"; wholly outside: "no"; else "not
    shown"."""
    if not margin > 0:
        raise ValueError(f"`margin` must be > 0; got {margin}")
    z = _z(rs)
    test = (f"equivalence |r - {target:g}| < {margin:g} (mean Fisher z over {z.size} "
            f"simulator seeds, {level:.0%} t CI)")
    if z.size < 2:
        return Verdict("not shown", math.nan, math.nan, math.nan, int(z.size),
                       test + ": fewer than 2 seeds with an r")
    m, h = t_interval(z, level)
    est, lo, hi = math.tanh(m), math.tanh(m - h), math.tanh(m + h)
    a, b = target - margin, target + margin
    v = "yes" if a < lo and hi < b else "no" if hi <= a or lo >= b else "not shown"
    return Verdict(v, est, lo, hi, int(z.size), test)
