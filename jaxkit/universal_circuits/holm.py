"""Holm's step-down correction for a claim decided over several settings.

:mod:`jaxkit.stats` has no family-wise correction yet, so this pipeline carries its own
(a candidate for ``jaxkit.stats``; the same code as :mod:`jaxkit.tempbench.holm`, since a
paper package imports no other paper's internals). Each test is the paired t test of
:func:`jaxkit.stats.superiority` written as two one-sided tests at ``(1 - level) / 2``
each ("yes": the mean difference is above ``margin``; "no": below it); Holm (1979)
step-down over the ``m`` tests of a family keeps the family-wise error of each direction
at ``(1 - level) / 2``. With ``m = 1`` the verdict is exactly that of
:func:`~jaxkit.stats.superiority`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jaxkit.stats import Verdict, superiority

__all__ = ["one_sided_p", "holm_reject", "holm_superiority", "all_of"]


def one_sided_p(diffs, margin: float = 0.0) -> tuple[float, float]:
    """``(p_above, p_below)``: one-sided paired t p-values of ``mean > margin`` and
    ``mean < margin`` over the finite ``diffs`` (1.0 with fewer than two values; a
    zero-variance sample gives 0 or 1 by the sign of ``mean - margin``)."""
    from scipy import stats

    x = np.asarray(diffs, np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        return 1.0, 1.0
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd == 0.0:
        return (0.0 if mean > margin else 1.0), (0.0 if mean < margin else 1.0)
    t = (mean - margin) / (sd / math.sqrt(x.size))
    return float(stats.t.sf(t, x.size - 1)), float(stats.t.cdf(t, x.size - 1))


def holm_reject(p: Sequence[float], alpha: float) -> np.ndarray:
    """Holm's step-down: which of the hypotheses with p-values ``p`` are rejected at
    family-wise level ``alpha`` (the i-th smallest against ``alpha / (m - i)``, stopping
    at the first that is not)."""
    p = np.asarray(p, np.float64)
    out = np.zeros(p.shape, bool)
    for i, j in enumerate(np.argsort(p, kind="stable")):
        if not p[j] <= alpha / (p.size - i):
            break
        out[j] = True
    return out


def holm_superiority(diff_sets: Sequence, *, margin: float = 0.0,
                     level: float = 0.95) -> list[Verdict]:
    """:func:`jaxkit.stats.superiority` of each of ``diff_sets`` with Holm's correction
    over all of them (each direction at ``(1 - level) / 2``). Estimates and intervals
    are the unadjusted ``level`` t intervals; ``test`` names the correction."""
    alpha = (1 - level) / 2
    ps = [one_sided_p(d, margin) for d in diff_sets]
    yes = holm_reject([p[0] for p in ps], alpha)
    no = holm_reject([p[1] for p in ps], alpha)
    m = len(ps)
    out = []
    for d, y, n in zip(diff_sets, yes, no, strict=True):
        v = superiority(d, margin=margin, level=level)
        verdict = "yes" if y else "no" if n else "not shown"
        out.append(v._replace(verdict=verdict, test=f"{v.test}, Holm over {m} test(s)"))
    return out


def all_of(verdicts: Sequence[str]) -> str:
    """The verdict of "every one holds": "yes" if all are "yes", "no" if any is "no",
    else "not shown"."""
    if verdicts and all(v == "yes" for v in verdicts):
        return "yes"
    return "no" if any(v == "no" for v in verdicts) else "not shown"
