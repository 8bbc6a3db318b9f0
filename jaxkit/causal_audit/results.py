"""Typed results of the causal audit: what the analysis modules hand to :mod:`.report`,
:mod:`.pipeline` and each other (frozen dataclasses, picklable, so
:meth:`RunContext.stage` caches them).

The grid's own result, one cell's per-dataset scores, stays :class:`.grid.CellResult`
(made by :func:`.grid.run_cell`, :func:`.grid.run_grid` and the runners of
:mod:`.audit`; ``f1`` / ``shd`` per method ``(B,)`` over the ``B`` datasets of the cell);
the types below are what is computed from cells. Who makes and who reads each (``M``
sizes of a consistency curve, ``K`` family members):

* :class:`RankComparison` (:func:`.analysis.rank_comparison`, through
  :func:`.report.rank_comparisons`): the Kendall tau between two benchmark choices'
  rankings (a :class:`jaxkit.stats.Verdict`) and the two rankings; read by the report's
  ranking table and the pipeline's ``metrics.json`` (``rankings``).
* :class:`FloorWin` (:func:`.analysis.floor_wins`): a cell where a sort-and-regress floor
  beats a method (paired F1 gain and its 95% interval); read by the report's table.
* :class:`Consistency` (:func:`.analysis.consistency`): error against sample size for
  one method: the sizes, mean SHD and mean F1 per size ``(M,)``, the per-dataset
  log-log slopes ``(B,)``, the pooled rate and the "falls with n" verdict; read by the
  report's claims, figure and table and the pipeline's ``metrics.json``
  (``consistency``, ``uniform_family``).
* :class:`ScopeFindings` (:func:`.analysis.scope_findings`): where a method fails inside
  its declared scope and succeeds outside it; read by the report's findings.
* :class:`Reversal` (:func:`.analysis.reversals`): one ordered pair's reversal
  hypothesis for one benchmark choice; read by :func:`.analysis.reversal_verdict`
  (the report passes them on).
* :class:`ChoiceInstability` (:func:`.falsify.instability_vs_null`, its rows): one
  benchmark choice's discordance excess over the null cell.
* :class:`FamilyCurves` (:func:`.falsify.family_curves`): the uniform-consistency
  family's SHD per member, size and dataset ``(K, M, B)``; read by
  :func:`.falsify.family_verdict` and the report's family figure.
* :class:`StandardisationCheck` (:func:`.reference.standardisation_check`, the
  pipeline's ``reference`` stage): per-dataset F1 ``(k,)`` of jaxkit's ICA-LiNGAM and
  the float64 reference, raw and standardised; read by :func:`.reference.claim`.
* :class:`MethodAudit` (:func:`.userdata.audit_table`, one per method): the user's-table
  path; read by the pipeline (the graphs for :mod:`.scope`, ``metrics.json``'s
  ``methods``) and :mod:`.userdata`'s claims and markdown.

``as_dict`` gives the plain mapping (Python numbers and lists) that ``metrics.json``
records for the type, in its key order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from jaxkit.stats import Verdict

    from .axes import CellSpec

__all__ = ["RankComparison", "FloorWin", "Consistency", "ScopeFindings", "Reversal",
           "ChoiceInstability", "FamilyCurves", "StandardisationCheck", "MethodAudit"]


@dataclass(frozen=True, kw_only=True)
class RankComparison:
    """Kendall tau between the mean-F1 rankings of two benchmark choices: ``tau`` (a
    :class:`~jaxkit.stats.Verdict` on "the ranking changes": estimate, 95% bootstrap
    interval), and the rankings ``rank_a`` / ``rank_b`` (best first)."""

    tau: Verdict
    rank_a: list[str]
    rank_b: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dict(tau=self.tau.estimate, lo=self.tau.lo, hi=self.tau.hi,
                    rank_a=list(self.rank_a), rank_b=list(self.rank_b))


@dataclass(frozen=True, kw_only=True)
class FloorWin:
    """A cell ``spec`` where the sort-and-regress ``floor`` beats ``method``: the mean
    per-dataset F1 gain ``diff`` (floor minus method) and its 95% interval
    ``[lo, hi]``."""

    spec: CellSpec
    method: str
    floor: str
    diff: float
    lo: float
    hi: float


@dataclass(frozen=True, kw_only=True)
class Consistency:
    """One method's error against sample size over cells that share their graphs: the
    sizes ``ns``, the mean SHD ``mean_shd`` and mean F1 ``mean_f1`` per size ``(M,)``,
    the per-dataset least-squares slopes of ``log(SHD + 1)`` on ``log n`` ``slopes``
    ``(B,)``, the slope of the mean SHD ``pooled_rate`` and ``falls``, the superiority
    verdict of ``-slopes`` ("the error falls with n")."""

    ns: list[int]
    mean_shd: np.ndarray
    mean_f1: np.ndarray
    slopes: np.ndarray
    pooled_rate: float
    falls: Verdict

    def as_dict(self) -> dict[str, Any]:
        return dict(ns=list(self.ns), mean_shd=np.asarray(self.mean_shd).tolist(),
                    mean_f1=np.asarray(self.mean_f1).tolist(), pooled_rate=self.pooled_rate)


@dataclass(frozen=True, kw_only=True)
class ScopeFindings:
    """Where a method fails inside its declared scope and succeeds outside it: cells
    scored ``n_cells``, of them in scope ``n_in`` (mean F1 ``in_mean``, nan with none),
    the bar an out-of-scope cell had to clear ``bar``, the in-scope failures
    ``fail_in`` (worst first) and out-of-scope successes ``win_out`` (best first) as
    ``(spec, mean F1)``, and how often each assumption is broken in those successes
    ``broken``."""

    n_cells: int
    n_in: int
    in_mean: float
    bar: float
    fail_in: list[tuple[CellSpec, float]]
    win_out: list[tuple[CellSpec, float]]
    broken: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class Reversal:
    """The hypothesis "``u`` beats ``v`` by more than the margin on cell a and ``v``
    beats ``u`` by more than it on cell b": the mean gaps ``gap_a`` / ``gap_b``, its
    intersection-union p-value ``p`` and the p-value of its absence ``p_not``."""

    u: str
    v: str
    gap_a: float
    gap_b: float
    p: float
    p_not: float


@dataclass(frozen=True, kw_only=True)
class ChoiceInstability:
    """One benchmark choice ``name`` against the null cell: the discordance excess
    ``est`` with its one-sided bootstrap bounds ``lo`` / ``hi``, the one-sided p-value
    ``p`` against the margin and the number of (even, odd) dataset ``pairs``."""

    name: str
    est: float
    lo: float
    hi: float
    p: float
    pairs: int


@dataclass(frozen=True, kw_only=True)
class FamilyCurves:
    """The uniform-consistency family for one method: the member sizes ``members``, the
    sample sizes ``ns`` and the SHD ``(members, sizes, datasets)``."""

    members: list[int]
    ns: list[int]
    shd: np.ndarray


@dataclass(frozen=True, kw_only=True)
class StandardisationCheck:
    """Per-dataset F1 ``(k,)`` (nan for invalid datasets) of jaxkit's ICA-LiNGAM
    (``jaxkit_*``) and the float64 reference (``reference_*``) on the same datasets, raw
    and standardised."""

    jaxkit_raw: np.ndarray
    jaxkit_std: np.ndarray
    reference_raw: np.ndarray
    reference_std: np.ndarray


@dataclass(frozen=True, kw_only=True)
class MethodAudit:
    """One method on the user's table: the graph on all rows ``full`` ``(d, d)``, its edge
    shares over the raw resamples ``frequency`` ``(d, d)``, the raw-vs-standardised SHD
    per resample ``shd`` ``(r,)`` (nan where a fit failed) and ``failed`` (what failed,
    or None)."""

    full: np.ndarray
    frequency: np.ndarray
    shd: np.ndarray
    failed: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(full=np.asarray(self.full).tolist(),
                    frequency=np.asarray(self.frequency).tolist(),
                    shd=np.asarray(self.shd).tolist(), failed=self.failed)
