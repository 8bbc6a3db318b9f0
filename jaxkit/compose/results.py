"""Typed results of the AIRA-Compose search: what :mod:`.search` and
:mod:`.experiments` hand to the report (frozen dataclasses, picklable, so
:meth:`RunContext.stage` caches them).

:class:`SearchRun` is one policy's search over one seed: every evaluated string with its
loss in order, the best loss after each evaluation, the best string, and, where the policy
keeps them, its operator pulls (the bandits) and its proposal counts (the agent).
:meth:`SearchRun.summary` gives the plain mapping ``metrics.json`` records per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SearchRun"]


@dataclass(frozen=True, kw_only=True)
class SearchRun:
    """One search run.

    Attributes:
        strings, losses: the evaluated strings and their validation losses, in order.
        best_curve: the best loss after each evaluation (non-increasing).
        best, best_loss: the best string and its loss (the first of equal losses).
        pulls: the operator pulls of a bandit policy (empty for the others).
        agent: the agent's ``proposed``, ``fallbacks``, ``invalid`` and ``failed_calls``
            counts (None for the other policies).
    """

    strings: list[str]
    losses: list[float]
    best_curve: list[float]
    best: str
    best_loss: float
    pulls: list[int] = field(default_factory=list)
    agent: dict[str, int] | None = None

    @classmethod
    def from_history(cls, strings, losses, *, pulls=(), agent=None) -> SearchRun:
        """The run of the evaluated ``strings`` and ``losses`` (in order)."""
        v = np.asarray(losses, float)
        if len(strings) != len(v) or not len(v):
            raise ValueError(f"strings ({len(strings)}) and losses ({len(v)}) must have the "
                             "same, non-zero length")
        i = int(np.argmin(v))
        return cls(strings=list(strings), losses=v.tolist(),
                   best_curve=np.minimum.accumulate(v).tolist(), best=strings[i],
                   best_loss=float(v[i]), pulls=[int(p) for p in np.asarray(pulls).ravel()],
                   agent=None if agent is None else dict(agent))

    def summary(self) -> dict:
        """``best``, ``best_loss``, ``best_curve``, ``pulls`` and (the agent's) ``agent``."""
        out = dict(best=self.best, best_loss=self.best_loss, best_curve=self.best_curve,
                   pulls=self.pulls)
        return out if self.agent is None else dict(out, agent=self.agent)
