"""Holm's family-wise correction for a claim decided over several comparisons.

``jaxkit.stats`` has no multiple-comparison helper yet, so this pipeline carries its
own (the same code as ``jaxkit.contrastive.holm``: a paper package does not import
another's internals; a candidate to move into ``jaxkit.stats``).

A claim decided over a family of ``m`` cases (data sets x splits x models) takes, per
case, a set of per-seed values ``d_i`` against that case's ``margin_i``:

* ``p_above[i]``: the one-sided paired t-test p-value of ``H0: mean d_i <= margin``;
* ``p_below[i]``: that of ``H0: mean d_i >= margin``.

Holm's step-down procedure (Holm 1979) at family-wise level ``alpha`` rejects the
hypotheses with the smallest p-values while ``p_(j) <= alpha / (m - j)`` (``j = 0, 1,
...``). :func:`decide_all` says "yes" when Holm rejects every ``mean d_i <= margin``
(every case lies above its margin), "no" when Holm rejects some ``mean d_i >= margin``
(one case is shown below its margin), else "not shown"; :func:`decide_all_below` is the
mirror image (every case below its margin). ``alpha`` is
one-sided: 0.025 matches the two-sided 95% intervals of :func:`jaxkit.stats.superiority`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

__all__ = ["one_sided_p", "holm", "decide_all", "decide_all_below"]


def one_sided_p(diffs, margin: float, *, above: bool = True) -> float:
    """One-sided paired t-test p-value of ``H0: mean <= margin`` (``above``) or ``H0: mean
    >= margin`` over the finite ``diffs``; 1.0 with fewer than two values; a constant
    sample gives 0 or 1 by which side of the margin it lies."""
    x = np.asarray(diffs, float).ravel()
    x = x[np.isfinite(x)]
    if x.size < 2:
        return 1.0
    sign = 1.0 if above else -1.0
    gap = sign * (float(np.mean(x)) - margin)
    se = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    if se == 0.0:
        return 0.0 if gap > 0 else 1.0
    return float(sps.t.sf(gap / se, x.size - 1))


def holm(pvalues: Sequence[float], alpha: float) -> np.ndarray:
    """Holm's step-down rejections (bool, in the input order) at family-wise ``alpha``."""
    p = np.asarray(pvalues, float)
    m = p.size
    out = np.zeros(m, bool)
    for j, i in enumerate(np.argsort(p, kind="stable")):
        if not p[i] <= alpha / (m - j):
            break
        out[i] = True
    return out


def _margins(margin, m: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(margin, float), (m,))


def decide_all(diffs: Sequence, margin, *, alpha: float = 0.025
               ) -> tuple[str, np.ndarray, np.ndarray]:
    """The verdict of "every case lies above its margin" over the family ``diffs`` (one
    array of per-seed values each; ``margin`` one number or one per case), with Holm's
    correction (module docstring).

    Returns:
        ``(verdict, above, below)``: "yes" / "no" / "not shown", and the Holm rejections
        of ``mean <= margin`` and of ``mean >= margin`` per case.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1); got {alpha}")
    mg = _margins(margin, len(diffs))
    above = holm([one_sided_p(d, g) for d, g in zip(diffs, mg, strict=True)], alpha)
    below = holm([one_sided_p(d, g, above=False) for d, g in zip(diffs, mg, strict=True)],
                 alpha)
    verdict = "no" if below.any() else "yes" if above.size and above.all() else "not shown"
    return verdict, above, below


def decide_all_below(diffs: Sequence, margin, *, alpha: float = 0.025
                     ) -> tuple[str, np.ndarray, np.ndarray]:
    """The verdict of "every case lies below its margin": "yes" when Holm rejects every
    ``mean >= margin``, "no" when it rejects some ``mean <= margin``; returns
    ``(verdict, below, above)`` (the rejections that support, then those that refute)."""
    neg = [-np.asarray(d, float) for d in diffs]
    return decide_all(neg, -_margins(margin, len(diffs)), alpha=alpha)
