"""Typed results of CruxBench: what :mod:`.text` and :mod:`.analysis` hand to
:mod:`.report`, :mod:`.pipeline` and :mod:`.cli` (frozen dataclasses, picklable, so
:meth:`RunContext.stage` caches them). The scores themselves are
:class:`jaxkit.cruxbench.scoring.Scores`.

Who makes and who reads each type (``N`` targets, ``M`` proposers):

* :class:`ProposerText` (:func:`.text.propose_all`): one language-model "proposer" (one
  temperature) over the ``N`` plain-language targets: ``per_target`` and ``baseline``
  float ``(N,)`` arrays, ``questions`` one record (a dict) per parsed subquestion,
  ``how`` and ``replies`` one entry per reply, ``counts`` replies by how they parsed and
  questions by validity. Read by :func:`.report.text_claims`, :func:`.report.
  text_markdown` and the pipeline (``metrics.json``).
* :class:`TextRun` (:func:`.text.run_text`, the ``cruxbench-text`` stage): the text
  block, ``proposers`` a :class:`ProposerText` per label (``"MODEL T=0.7"``); read by the
  same readers.
* :class:`Evaluation` (:func:`.analysis.evaluate`): the statistics of one scored
  benchmark; ``quality`` and ``usefulness`` map a VOI metric name (``ex_ante_abs``,
  ``ex_ante_mi``, ``realised_abs``, ``realised_sq``, ``realised_log_score``) to its
  :func:`.analysis.correlation_summary` (a dict: ``r``, ``fisher_lo``, ``fisher_hi``,
  ``boot_lo``, ``boot_hi``, ``spearman``, ``perm_p``, ``n``), empty when not computable;
  ``heldout`` and ``heldout_diffs`` map an agent score (``brier_gain``, ``log_gain``) to
  its cross-fitted :class:`jaxkit.stats.Verdict` and its per-target differences
  (``(N,)``). Read by :func:`.report.markdown`, :func:`.report.data_claims`, the
  pipeline and ``jaxkit cruxbench score`` (:mod:`.cli`).

Data names (metric names, agent scores, proposer labels, reply kinds and rejection
reasons) stay dict keys. So do :func:`.analysis.seed_stats`'s per-seed numbers (keyed by
:data:`.analysis.SEED_STATS`, stacked over seeds by the pipeline into ``{name: (S,)}``),
read by name by :func:`.report.claims` and the report's seed tables.

``as_dict`` gives the plain mapping ``metrics.json`` records for the type, in its key
order (arrays as lists).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxkit.stats import Verdict

__all__ = ["ProposerText", "TextRun", "Evaluation"]


@dataclass(frozen=True, kw_only=True, eq=False)
class ProposerText:
    """One proposer of the text block (module docstring): ``counts``
    (``{"replies": {"json" | "lines" | "none": n}, "questions": {"valid" | reason: n}}``),
    ``per_target`` ``(N,)`` mean content VOI of the valid questions (NaN if none),
    ``baseline`` ``(N,)`` random-factor VOI, ``questions`` (dicts: ``target`` index,
    ``text``, ``reason`` (``""`` when valid), ``factors``, ``content_voi``,
    ``stated_voi``), ``how`` per reply and the ``replies``' text."""

    counts: dict[str, dict[str, int]]
    per_target: np.ndarray
    baseline: np.ndarray
    questions: list[dict[str, Any]]
    how: list[str]
    replies: list[str] = field(default_factory=list)

    @property
    def n_valid(self) -> int:
        """Valid subquestions."""
        return self.counts["questions"].get("valid", 0)

    def as_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "per_target": self.per_target.tolist(),
                "baseline": self.baseline.tolist(), "questions": self.questions}


@dataclass(frozen=True, kw_only=True, eq=False)
class TextRun:
    """The text block: the ``model``, ``error`` (``""`` or the one line saying why no
    reply came), replies from the cache (``hits``) and generated (``misses``), and
    ``proposers``: a :class:`ProposerText` per label (empty after an error at the first
    temperature)."""

    model: str
    error: str = ""
    hits: int = 0
    misses: int = 0
    proposers: dict[str, ProposerText] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "error": self.error,
                "proposers": {k: p.as_dict() for k, p in self.proposers.items()}}


@dataclass(frozen=True, kw_only=True, eq=False)
class Evaluation:
    """The statistics of one scored benchmark (module docstring); ``n_quality``: the
    proposers with a finite quality measure (the correlations with quality need 3)."""

    quality: dict[str, dict[str, float]]
    usefulness: dict[str, dict[str, float]]
    heldout: dict[str, Verdict]
    heldout_diffs: dict[str, np.ndarray]
    n_quality: int

    def as_dict(self) -> dict[str, Any]:
        """The correlations ``metrics.json`` records (``quality``, ``usefulness``)."""
        return {"quality": self.quality, "usefulness": self.usefulness}
