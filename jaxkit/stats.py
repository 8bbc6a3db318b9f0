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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Verdict", "t_interval", "paired_difference", "bootstrap_interval",
           "fisher_z_interval", "superiority", "equivalence", "as_generator"]


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
