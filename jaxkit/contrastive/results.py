"""Typed results of the contrastive comparison: what :mod:`.experiment` hands to
:mod:`.report` (frozen dataclasses, picklable, so :meth:`RunContext.stage` caches them).

:class:`DomainResult` is one domain's comparison (:func:`jaxkit.contrastive.experiment.
compare`): per method its :class:`Rates`, per pointwise rule its :class:`Candidates`, per
method its :class:`Trajectory`, and, from :func:`~jaxkit.contrastive.experiment.
run_domain`, the misspecified arms as further :class:`DomainResult` values. Per-seed
arrays have shape ``(seeds,)``. ``as_dict`` gives the plain mappings ``metrics.json``
records.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Rates", "Candidates", "Trajectory", "DomainResult"]


def _plain(obj):
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)
            if getattr(obj, f.name) is not None}


@dataclass(frozen=True, kw_only=True)
class Rates:
    """Per-seed fractions of questions ``correct`` (resolved to the true explanation),
    ``wrong`` (resolved to another) and ``unresolved``, the mean budget ``spent`` and
    ``steps`` (experiments run); for the pointwise agents also ``contrastive_correct``
    / ``contrastive_wrong``, their data evaluated contrastively (else ``None``)."""

    correct: np.ndarray
    wrong: np.ndarray
    unresolved: np.ndarray
    spent: np.ndarray
    steps: np.ndarray
    contrastive_correct: np.ndarray | None = None
    contrastive_wrong: np.ndarray | None = None

    def as_dict(self) -> dict[str, np.ndarray]:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class Candidates:
    """Per-seed counts of a pointwise rule's candidates: ``high`` (the focal belief moved
    by at least ``surprise_width``), ``high_rejections`` (of those, moves down),
    ``alt_resolved`` (rejections whose data resolve an alternative contrastively) and
    ``alt_correct`` (that alternative is the truth)."""

    high: np.ndarray
    high_rejections: np.ndarray
    alt_resolved: np.ndarray
    alt_correct: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class Trajectory:
    """Posterior probability of the true explanation before and after each step:
    ``mean`` ``(T + 1,)`` and ``per_seed`` ``(seeds, T + 1)``."""

    mean: np.ndarray
    per_seed: np.ndarray


@dataclass(frozen=True, kw_only=True)
class DomainResult:
    """One domain's comparison (module docstring); ``trajectory`` is empty when the truth
    is not in the questions' sets (the ``missing`` arm), ``arms`` empty for an arm
    itself."""

    domain: str
    rates: dict[str, Rates]
    candidates: dict[str, Candidates]
    trajectory: dict[str, Trajectory]
    n_questions: int
    n_seeds: int
    truth_counts: np.ndarray
    arms: dict[str, DomainResult] = field(default_factory=dict)

    def with_arms(self, arms: dict[str, DomainResult]) -> DomainResult:
        return dataclasses.replace(self, arms=dict(arms))

    def rates_dict(self) -> dict[str, dict[str, np.ndarray]]:
        """``{method: {rate: per-seed array}}``."""
        return {m: r.as_dict() for m, r in self.rates.items()}
