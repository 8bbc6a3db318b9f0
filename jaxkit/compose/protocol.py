"""One-sided paired t tests with p-values and Holm's step-down correction: the tests of
AIRA-Compose's paper claims (issue 57); a claim against several baselines is decided
with Holm over them.

:mod:`jaxkit.stats` gives intervals and three-way verdicts but no p-values and no
family-wise correction; these live here, in the pipeline, until it does.

* :func:`one_sided`: the p-value of the one-sided Student t test of the mean of the
  finite paired differences against ``null`` (``greater``: H1 mean > null; otherwise H1
  mean < null), with the two-sided ``1 - 2 ALPHA`` interval (the one-sided test's).
* :func:`holm`: Holm's (1979) adjusted p-values,
  ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` over the sorted p-values.
* :func:`decide_all`: a claim that must hold for every member of a family (every
  baseline): "yes" when every Holm-adjusted p-value for it is at most alpha, "no" when
  some Holm-adjusted p-value against it is, else "not shown".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["ALPHA", "OneSided", "one_sided", "holm", "decide_all"]

#: the level of every paper claim's test (one-sided, after Holm)
ALPHA = 0.05


class OneSided(NamedTuple):
    """``p`` (1.0 with fewer than two finite values), the mean, its two-sided
    ``1 - 2 ALPHA`` t interval ``[lo, hi]`` and ``n``."""

    p: float
    mean: float
    lo: float
    hi: float
    n: int


def one_sided(diffs, null: float = 0.0, *, greater: bool = True) -> OneSided:
    """One-sided t test of the mean of the finite ``diffs`` against ``null`` (module
    docstring); a zero spread decides by the mean alone (p 0 or 1)."""
    from scipy import stats

    x = np.asarray(diffs, float).ravel()
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n < 2:
        m = float(x[0]) if n else math.nan
        return OneSided(1.0, m, math.nan, math.nan, n)
    m = float(x.mean())
    se = float(x.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(1 - ALPHA, n - 1)) * se
    if se == 0.0:
        p = 0.0 if (m > null if greater else m < null) else 1.0
    else:
        t = (m - null) / se
        p = float(stats.t.sf(t, n - 1) if greater else stats.t.cdf(t, n - 1))
    return OneSided(p, m, m - half, m + half, n)


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values of ``p`` (same order)."""
    p = np.asarray(p, float).ravel()
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def decide_all(p_yes, p_no, alpha: float = ALPHA) -> tuple[str, np.ndarray, np.ndarray]:
    """"Holds for every member": ``(verdict, holm(p_yes), holm(p_no))``."""
    ay, an = holm(p_yes), holm(p_no)
    if ay.size and np.all(ay <= alpha):
        return "yes", ay, an
    if np.any(an <= alpha):
        return "no", ay, an
    return "not shown", ay, an
