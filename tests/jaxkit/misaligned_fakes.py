"""Typed misaligned-baselines results built by hand, for the report's tests: a
:class:`~jaxkit.misaligned.results.SplitSummary` with only the fields a test sets, and its
gaps and metric summaries."""

import numpy as np

from jaxkit.misaligned.metrics import BootGap
from jaxkit.misaligned.results import MeanCI, RegressionGap, SplitSummary
from jaxkit.stats import superiority


def mean_ci(mean: float, ci95: float = 0.1, seeds=None) -> MeanCI:
    """A metric summary (``seeds``: three copies of ``mean`` unless given)."""
    return MeanCI(mean=mean, ci95=ci95, seeds=[mean] * 3 if seeds is None else list(seeds))


def fake_gap(per_seed, best: str = "size_only", selected_on: str = "validation"
             ) -> RegressionGap:
    """A model's gap to ``best``: the per-seed gaps, their t test and a bootstrap over
    their range."""
    d = np.asarray(per_seed, float)
    return RegressionGap(best=best, per_seed=d, boot=BootGap(d.mean(), d.min(), d.max(), 0.0,
                                                             True),
                         test=superiority(d), flag=False, selected_on=selected_on)


def fake_split(metrics, gaps=None, *, dataset: str = "toy", split: str = "random",
               **fields) -> SplitSummary:
    """A :class:`SplitSummary` of ``metrics`` ``{method: {metric: MeanCI}}`` and ``gaps``
    ``{model: RegressionGap}`` (3 seeds, no curves, no duplicates), ``fields`` over
    these."""
    return SplitSummary(**{**dict(dataset=dataset, split=split, seeds=3, metrics=metrics,
                                  curves={}, strengths={}, gaps=gaps or {},
                                  duplicates=[0, 0, 0]), **fields})
