"""Small-sample statistics for the pipelines' claims: intervals and claim tests.

Every claim a pipeline reports is decided by one of two tests on per-seed paired
differences (method minus baseline, larger is better):

* :func:`superiority`: the two-sided ``level`` Student-t interval of the mean
  difference lies above ``margin`` ("yes"), below it ("no"), or straddles it
  ("not shown").
* :func:`equivalence`: two one-sided tests (TOST, Schuirmann 1987) at alpha = 0.05,
  i.e. the 90% t interval lies inside ``(-margin, margin)`` ("yes"), wholly outside it
  ("no"), or neither ("not shown").

A difference that is not significant is "not shown", never a match: only
:func:`equivalence` with a stated margin can say two methods agree.

A claim decided over several settings (domains, data sets, windows) is a *family* of
superiority tests: :func:`holm_superiority` applies Holm's (1979) step-down correction to
each direction's one-sided tests (:func:`one_sided_p`, :func:`holm_reject`), so the
family-wise error of a "yes" (and of a "no") stays at ``(1 - level) / 2``; with one test
it is exactly :func:`superiority`. :func:`all_of` combines the family into the claim's
verdict ("yes" only if every member is).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Verdict", "t_interval", "paired_difference", "bootstrap_interval",
           "fisher_z_interval", "superiority", "equivalence", "as_generator",
           "one_sided_p", "holm_reject", "holm_superiority", "all_of", "every_part_above"]


class Verdict(NamedTuple):
    """The outcome of a claim test.

    ``verdict`` is "yes", "no" or "not shown"; ``estimate`` the mean difference and
    ``[lo, hi]`` its interval (nan when undefined); ``n`` the number of finite values
    used; ``test`` a one-line description of the test (or why it could not be run).
    """

    verdict: str
    estimate: float
    lo: float
    hi: float
    n: int
    test: str


def _finite(x) -> np.ndarray:
    x = np.asarray(x, float).ravel()
    return x[np.isfinite(x)]


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1); got {level}")


def t_interval(x, level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the two-sided Student-t interval of the finite values.

    .. math:: \\bar x \\pm t_{(1+\\text{level})/2,\\,n-1}\\; s / \\sqrt{n}

    with ``s`` the sample standard deviation (ddof 1).

    Args:
        x: values (any shape; NaN and inf are dropped).
        level: coverage of the interval, in (0, 1).

    Returns:
        ``(mean, half_width)``; half-width nan for one finite value, both nan for none.
    """
    from scipy import stats

    _check_level(level)
    x = _finite(x)
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), math.nan
    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def paired_difference(a, b) -> np.ndarray:
    """Per-seed paired differences ``a - b`` (float64; non-finite pairs stay non-finite
    and are dropped by the tests).

    Args:
        a: values of the method, one per seed.
        b: values of the baseline on the same seeds, same shape as ``a``.

    Returns:
        ``a - b`` as a float64 array.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"`a` and `b` must be paired (same shape); got {a.shape} and "
                         f"{b.shape}")
    return a - b


def as_generator(key_or_rng: Any) -> np.random.Generator:
    """A NumPy Generator from a JAX PRNG key (seeded from its key data) or a Generator
    (returned as is)."""
    if isinstance(key_or_rng, np.random.Generator):
        return key_or_rng
    import jax

    try:
        data = np.asarray(jax.random.key_data(key_or_rng))
    except (TypeError, ValueError) as e:
        raise ValueError("`key_or_rng` must be a JAX PRNG key or a numpy.random.Generator; "
                         f"got {type(key_or_rng).__name__}") from e
    return np.random.default_rng(np.random.SeedSequence(data.astype(np.uint32).ravel()))


def bootstrap_interval(key_or_rng, x, stat: Callable = np.mean, n_boot: int = 2000,
                       level: float = 0.95) -> tuple[float, float, float]:
    """Percentile bootstrap interval of ``stat`` over the finite values of ``x``
    (Efron & Tibshirani 1993, ch. 13).

    Args:
        key_or_rng: a JAX PRNG key or a ``numpy.random.Generator``.
        x: values (1-D after dropping NaN/inf).
        stat: the statistic; called as ``stat(samples, axis=1)`` on an
            ``(n_boot, n)`` array when it takes ``axis``, otherwise once per resample.
        n_boot: number of resamples (>= 1).
        level: coverage, in (0, 1).

    Returns:
        ``(estimate, lo, hi)``: ``stat(x)`` and the ``(1 -+ level) / 2`` quantiles of
        the resampled statistic; all nan for no finite value.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"`n_boot` must be >= 1; got {n_boot}")
    x = _finite(x)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    rng = as_generator(key_or_rng)
    samples = x[rng.integers(0, x.size, size=(n_boot, x.size))]
    try:
        boot = np.asarray(stat(samples, axis=1), float)
    except TypeError:
        boot = np.array([stat(s) for s in samples], float)
    lo, hi = np.quantile(boot, [0.5 - level / 2, 0.5 + level / 2])
    return float(stat(x)), float(lo), float(hi)


def fisher_z_interval(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Interval of a Pearson correlation by Fisher's z transform (Fisher 1921).

    .. math:: \\tanh\\big(\\operatorname{artanh} r \\pm z_{(1+\\text{level})/2} / \\sqrt{n-3}\\big)

    Args:
        r: sample correlation, in [-1, 1].
        n: sample size.
        level: coverage, in (0, 1).

    Returns:
        ``(lo, hi)``; nan for ``n <= 3`` or a nan ``r``.
    """
    from scipy import stats

    _check_level(level)
    r = float(r)
    if math.isnan(r) or n <= 3:
        return math.nan, math.nan
    if not -1.0 <= r <= 1.0:
        raise ValueError(f"`r` must be in [-1, 1]; got {r}")
    if abs(r) == 1.0:
        return r, r
    z, half = math.atanh(r), stats.norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)


def _too_few(x: np.ndarray, name: str) -> Verdict | None:
    if x.size >= 2:
        return None
    est = float(x[0]) if x.size == 1 else math.nan
    return Verdict("not shown", est, math.nan, math.nan, int(x.size),
                   f"{name}: fewer than 2 finite values (n={x.size})")


def _t_test(diffs, level: float, name: str, decide: Callable[[float, float], str]) -> Verdict:
    """The ``level`` t interval ``[lo, hi]`` of the mean of the finite ``diffs``, with
    the verdict ``decide(lo, hi)``; "not shown" with fewer than two finite values."""
    x = _finite(diffs)
    if (v := _too_few(x, name)) is not None:
        return v
    mean, half = t_interval(x, level)
    lo, hi = mean - half, mean + half
    return Verdict(decide(lo, hi), mean, lo, hi, int(x.size), f"{name}, n={x.size}")


def superiority(diffs, *, margin: float = 0.0, level: float = 0.95) -> Verdict:
    """Is the mean paired difference (larger is better) above ``margin``?

    Two-sided ``level`` Student-t interval ``[lo, hi]`` of the mean of the finite
    differences: "yes" if ``lo > margin``, "no" if ``hi < margin``, else "not shown".

    Args:
        diffs: per-seed paired differences, method minus baseline.
        margin: the smallest improvement that counts.
        level: coverage of the interval.

    Returns:
        A :class:`Verdict`.
    """
    return _t_test(diffs, level, f"superiority (paired t, {level:.0%} CI vs margin {margin:g})",
                   lambda lo, hi: "yes" if lo > margin else "no" if hi < margin
                   else "not shown")


def equivalence(diffs, *, margin: float, level: float = 0.90) -> Verdict:
    """Are the paired differences within ``±margin`` of zero (TOST)?

    Two one-sided t tests at alpha ``(1 - level) / 2`` (0.05 for the default 90%
    interval): "yes" if the ``level`` t interval lies inside ``(-margin, margin)``,
    "no" if it lies wholly outside it, else "not shown".

    Args:
        diffs: per-seed paired differences.
        margin: the equivalence margin (> 0), in the units of ``diffs``.
        level: coverage of the interval (0.90 is TOST at alpha 0.05).

    Returns:
        A :class:`Verdict`.
    """
    if not margin > 0:
        raise ValueError(f"`margin` must be > 0; got {margin}")
    def decide(lo: float, hi: float) -> str:
        if -margin < lo and hi < margin:
            return "yes"
        if hi <= -margin or lo >= margin:
            return "no"
        return "not shown"

    return _t_test(diffs, level, f"equivalence (TOST, {level:.0%} t CI within ±{margin:g})",
                   decide)


def one_sided_p(diffs, margin: float = 0.0) -> tuple[float, float]:
    """One-sided paired t p-values ``(p_above, p_below)`` of ``mean > margin`` and of
    ``mean < margin`` over the finite ``diffs``.

    Args:
        diffs: per-seed paired differences.
        margin: the value the mean is compared with.

    Returns:
        Two p-values; ``(1.0, 1.0)`` with fewer than two finite values; a sample without
        spread gives 0 or 1 by the side of ``margin`` its mean lies on.
    """
    from scipy import stats as sps

    x = _finite(diffs)
    if x.size < 2:
        return 1.0, 1.0
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd == 0.0:
        return (0.0 if mean > margin else 1.0), (0.0 if mean < margin else 1.0)
    t = (mean - margin) / (sd / math.sqrt(x.size))
    return float(sps.t.sf(t, x.size - 1)), float(sps.t.cdf(t, x.size - 1))


def holm_reject(p, alpha: float) -> np.ndarray:
    """Holm's step-down: which hypotheses with p-values ``p`` are rejected at family-wise
    level ``alpha`` (the i-th smallest of ``m`` against ``alpha / (m - i)``, stopping at
    the first that is not; a nan p-value is never rejected).

    Args:
        p: the p-values, one per hypothesis.
        alpha: the family-wise level, in (0, 1).

    Returns:
        A boolean array in the order of ``p``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha}")
    p = np.asarray(p, np.float64).ravel()
    p = np.where(np.isnan(p), np.inf, p)
    out = np.zeros(p.shape, bool)
    for i, j in enumerate(np.argsort(p, kind="stable")):
        if not p[j] <= alpha / (p.size - i):
            break
        out[j] = True
    return out


def holm_superiority(diff_sets, *, margin=0.0, level: float = 0.95) -> list[Verdict]:
    """:func:`superiority` of each member of a family, with Holm's correction over it.

    "yes" where Holm rejects ``mean <= margin``, "no" where it rejects ``mean >= margin``
    (each direction at family-wise ``(1 - level) / 2``), else "not shown". Estimates and
    intervals are the unadjusted ``level`` t intervals; ``test`` names the correction.

    Args:
        diff_sets: one array of per-seed paired differences per member.
        margin: one margin, or one per member.
        level: as in :func:`superiority`.

    Returns:
        One :class:`Verdict` per member.
    """
    _check_level(level)
    m = len(diff_sets)
    margins = np.broadcast_to(np.asarray(margin, np.float64), (m,))
    alpha = (1 - level) / 2
    ps = [one_sided_p(d, float(g)) for d, g in zip(diff_sets, margins, strict=True)]
    yes = holm_reject([p[0] for p in ps], alpha) if m else np.zeros(0, bool)
    no = holm_reject([p[1] for p in ps], alpha) if m else np.zeros(0, bool)
    out = []
    for d, g, y, n in zip(diff_sets, margins, yes, no, strict=True):
        v = superiority(d, margin=float(g), level=level)
        verdict = "yes" if y else "no" if n else "not shown"
        out.append(v._replace(verdict=verdict, test=f"{v.test}, Holm over {m} test(s)"))
    return out


def all_of(verdicts) -> str:
    """The verdict of "every member holds": "yes" if all are "yes", "no" if any is "no",
    else "not shown" (also for an empty family)."""
    verdicts = list(verdicts)
    if verdicts and all(v == "yes" for v in verdicts):
        return "yes"
    return "no" if any(v == "no" for v in verdicts) else "not shown"


def every_part_above(diff_sets, margins, *, level: float = 0.95
                     ) -> tuple[str, list[Verdict], str]:
    """A claim that must hold in every part: each part's :func:`superiority` over its
    margin; "yes" if every part says yes (intersection-union: no correction needed), "no"
    if some part's one-sided test of falling *below* its margin survives Holm's
    correction over the parts (at ``(1 - level) / 2``), else "not shown".

    Args:
        diff_sets: one array of per-seed paired differences per part.
        margins: one margin per part.
        level: as in :func:`superiority`.

    Returns:
        ``(verdict, the parts' own verdicts, a sentence for the claim's test column)``.
    """
    margins = list(margins)
    vs = [superiority(d, margin=m, level=level) for d, m in zip(diff_sets, margins,
                                                                strict=True)]
    alpha = (1 - level) / 2
    below = holm_reject([one_sided_p(d, m)[1] for d, m in zip(diff_sets, margins,
                                                               strict=True)], alpha)
    verdict = ("yes" if vs and all(v.verdict == "yes" for v in vs)
               else "no" if below.any() else "not shown")
    test = ""
    if len(vs) > 1:
        test = (f"must hold at each of {len(vs)} (intersection-union); 'no' when a part's "
                f"one-sided test of falling below its margin survives Holm over the "
                f"{len(vs)} (alpha {alpha:g})")
    return verdict, vs, test
