"""Typed results of AMGenC: what the experiment modules hand to :mod:`.report`,
:mod:`.report_more`, :mod:`.pipeline` and to each other (frozen dataclasses, picklable,
so :meth:`RunContext.stage` caches them).

Who makes and who reads each type (``B`` sampled cells of an arm, ``T`` held-out
targets; per-cell values are NumPy arrays, means are floats):

* :class:`Evaluation` (:func:`.evaluate.evaluate`; ``judge`` and ``methods`` attached by
  the pipeline): read by the pipeline (``metrics.json``), :mod:`.report` (files, figure,
  tables, claims), :mod:`.report_more` and :func:`.judging.judge_evaluation`. It holds
  per arm an :class:`ArmRow` (the ablation table's means), :class:`ArmCells` (their
  ``(B,)`` per-cell values), :class:`Conditioning`, :class:`Plausibility` and
  :class:`DesignAccuracy`, the RDF and O-T-O angle :class:`Curves`, the
  uniform-random :class:`Baselines` and the sampling :class:`Overhead`.
* :class:`CellProperties` (:func:`.design.properties`): one relaxed cell's density and
  network-former coordination, read by :func:`.evaluate.evaluate`.
* :class:`Plausibility` (:func:`.plausibility.plausibility`): a cell set against its
  targets with the twins as yardstick; quantity-keyed mappings (``T-O``, ``O-T-O``, ...:
  :data:`.plausibility.PARTIALS` and :data:`.plausibility.ANGLES`); read by
  :mod:`.report` (plausibility table), :mod:`.report_more` (judge table, random-positions
  row) and the pipeline.
* :class:`DesignAccuracy` with :class:`DesignCells` (:func:`.evaluate.evaluate` and
  :func:`.judging.judge_evaluation`): design errors of the cells relaxed at their
  target's pressure, read by :func:`.report.design_claim`, the design tables and the
  property-steering rows.
* :class:`MethodDraws` (:func:`.baselines.existing_methods`): an existing method's
  ``(B,)`` per-draw results, read by :mod:`.report_more`, :mod:`.judging` (the repaired
  cells) and the pipeline.
* :class:`JudgeScores` with :class:`JudgedRow` and :class:`JudgeRelaxation`
  (:func:`.judging.judge_evaluation`, the ``amgenc-judge`` stage): the independent
  judge's scores per cell set, read by :mod:`.report` (design row), :mod:`.report_more`
  and the pipeline.
* :class:`Scale` (:func:`.scale.sample_large`, the ``amgenc-scale`` stage): the
  large-cell throughput, read by :func:`.report.scale_text` and the pipeline.

``as_dict`` gives the plain mapping ``metrics.json`` records for the type (the
per-cell arrays left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CellProperties", "ArmRow", "ArmCells", "Curves", "Baselines", "Overhead",
           "Conditioning", "Plausibility", "DesignCells", "DesignAccuracy", "MethodDraws",
           "JudgeRelaxation", "JudgedRow", "JudgeScores", "Evaluation", "Scale"]


def _nanmean(v) -> float:
    v = np.asarray(v, float)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


@dataclass(frozen=True, kw_only=True)
class CellProperties:
    """``density`` (g/cm^3) and ``former_cn`` (mean O coordination of the network
    formers, NaN without formers) of one cell."""

    density: float
    former_cn: float


@dataclass(frozen=True, kw_only=True)
class ArmRow:
    """One arm's means over its ``n_cells`` cells (the ablation table; metrics in the
    module docstring of :mod:`.evaluate`): shares ``balanced``, ``valid``,
    ``min_dist_violation``; ``abs_charge``, ``soft_charge`` (e); relative
    ``density_error``; ``composition_l1``; ``rdf_l1`` (A), ``oto_l1`` / ``tot_l1`` (angle
    L1); ``close_pairs`` per cell; ``ms_per_cell``."""

    balanced: float
    abs_charge: float
    soft_charge: float
    density_error: float
    composition_l1: float
    valid: float
    rdf_l1: float
    oto_l1: float
    tot_l1: float
    min_dist_violation: float
    close_pairs: float
    ms_per_cell: float
    n_cells: int

    def as_dict(self) -> dict[str, Any]:
        return {"balanced": self.balanced, "abs_charge": self.abs_charge,
                "soft_charge": self.soft_charge, "density_error": self.density_error,
                "composition_l1": self.composition_l1, "valid": self.valid,
                "rdf_l1": self.rdf_l1, "oto_l1": self.oto_l1, "tot_l1": self.tot_l1,
                "min_dist_violation": self.min_dist_violation,
                "close_pairs": self.close_pairs, "ms_per_cell": self.ms_per_cell,
                "n_cells": self.n_cells}


@dataclass(frozen=True, kw_only=True, eq=False)
class ArmCells:
    """One arm's ``(B,)`` per-cell values: ``balanced`` and ``valid`` (0/1),
    ``soft_charge``, ``composition_l1`` (to the own target), ``composition_other`` (the
    mean to the other held-out targets) and ``rdf_l1`` (the cell's g(r) against the
    held-out reference)."""

    balanced: np.ndarray
    soft_charge: np.ndarray
    composition_l1: np.ndarray
    composition_other: np.ndarray
    valid: np.ndarray
    rdf_l1: np.ndarray


@dataclass(frozen=True, kw_only=True, eq=False)
class Curves:
    """Mean distributions on the grid ``x`` (``(bins,)``: r in A for the total g(r),
    degrees for the O-T-O angle density): the held-out ``reference``, uniformly
    ``random`` positions and one curve per arm (``arms``, ``(bins,)`` each)."""

    x: np.ndarray
    reference: np.ndarray
    random: np.ndarray
    arms: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, eq=False)
class Baselines:
    """Uniformly random positions with the targets' species, raw (``*_random``) and
    after the FIRE post-relaxation (``*_random_relaxed``): RDF and angle L1 to the
    reference, share of cells with a pair under 1 A and such pairs per cell; the
    reference's own share (``min_dist_violation_reference``); ``random_rdf_l1`` ``(T,)``
    per held-out target; ``r_max`` (A) of the RDFs and ``outside_targets`` (the targets
    outside the training range)."""

    rdf_l1_random: float
    random_rdf_l1: np.ndarray
    oto_l1_random: float
    tot_l1_random: float
    rdf_l1_random_relaxed: float
    oto_l1_random_relaxed: float
    tot_l1_random_relaxed: float
    min_dist_violation_random_relaxed: float
    close_pairs_random_relaxed: float
    min_dist_violation_random: float
    close_pairs_random: float
    min_dist_violation_reference: float
    r_max: float
    outside_targets: list[int]

    def as_dict(self) -> dict[str, Any]:
        """Everything but the per-target ``random_rdf_l1``."""
        return {"rdf_l1_random": self.rdf_l1_random, "oto_l1_random": self.oto_l1_random,
                "tot_l1_random": self.tot_l1_random,
                "rdf_l1_random_relaxed": self.rdf_l1_random_relaxed,
                "oto_l1_random_relaxed": self.oto_l1_random_relaxed,
                "tot_l1_random_relaxed": self.tot_l1_random_relaxed,
                "min_dist_violation_random_relaxed": self.min_dist_violation_random_relaxed,
                "close_pairs_random_relaxed": self.close_pairs_random_relaxed,
                "min_dist_violation_random": self.min_dist_violation_random,
                "close_pairs_random": self.close_pairs_random,
                "min_dist_violation_reference": self.min_dist_violation_reference,
                "r_max": self.r_max, "outside_targets": self.outside_targets}


@dataclass(frozen=True, kw_only=True)
class Overhead:
    """Sampling overheads relative to unconstrained sampling: ``soft`` (soft projection)
    and ``soft_all`` (all three mechanisms) of the median ODE time, ``discrete`` (the
    final projection over the unprojected time); per timing round ``soft_runs`` /
    ``soft_all_runs`` and the 95% t intervals of their means ``soft_ci`` /
    ``soft_all_ci`` ((lo, hi), NaN with fewer than 2 rounds)."""

    soft: float
    soft_all: float
    discrete: float
    soft_runs: list[float]
    soft_ci: tuple[float, float]
    soft_all_runs: list[float]
    soft_all_ci: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        return {"soft": self.soft, "soft_all": self.soft_all, "discrete": self.discrete,
                "soft_runs": self.soft_runs, "soft_ci": self.soft_ci,
                "soft_all_runs": self.soft_all_runs, "soft_all_ci": self.soft_all_ci}


@dataclass(frozen=True, kw_only=True)
class Conditioning:
    """One arm's mean composition L1 to the ``own`` target and to the ``other`` held-out
    targets; ``in_range`` / ``out_of_range``: the own L1 over the targets inside / outside
    the training range (None when there are none)."""

    own: float
    other: float
    in_range: float | None
    out_of_range: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"own": self.own, "other": self.other, "in_range": self.in_range,
                "out_of_range": self.out_of_range}


@dataclass(frozen=True, kw_only=True, eq=False)
class Plausibility:
    """Plausibility of a cell set (:func:`.plausibility.plausibility`).

    Attributes:
        no_close_pair: share of cells with no pair under 1 A.
        per_cell: quantity -> ``(B,)`` distance of each cell to its own target (and
            ``no_close_pair`` 0/1).
        gen, twin: quantity -> mean distance to the target of the cells / of the
            targets' twins (over the cells' targets).
        ratio: quantity -> gen / twin; ``meets``: quantity -> gen <= TWIN_FACTOR x twin.
        all_met: every quantity met and >= 90 % of the cells without a close pair.
    """

    no_close_pair: float
    per_cell: dict[str, np.ndarray]
    gen: dict[str, float]
    twin: dict[str, float]
    ratio: dict[str, float]
    meets: dict[str, bool]
    all_met: bool

    def as_dict(self) -> dict[str, Any]:
        """Everything but the per-cell distances."""
        return {"no_close_pair": self.no_close_pair, "gen": self.gen, "twin": self.twin,
                "ratio": self.ratio, "meets": self.meets, "all_met": self.all_met}

    def brief(self) -> dict[str, Any]:
        """``no_close_pair``, ``ratio`` and ``all_met`` (the judge's rows in metrics)."""
        return {"no_close_pair": self.no_close_pair, "ratio": self.ratio,
                "all_met": self.all_met}


@dataclass(frozen=True, kw_only=True, eq=False)
class DesignCells:
    """``(B,)`` per-cell design errors: relative ``density_error``, ``composition_l1`` and
    ``former_cn_error`` (absolute; NaN where not scored); from :func:`.evaluate.evaluate`
    also ``density_other`` / ``former_cn_other``, the same errors against the other
    held-out targets (averaged; None from the judge)."""

    density_error: np.ndarray
    composition_l1: np.ndarray
    former_cn_error: np.ndarray
    density_other: np.ndarray | None = None
    former_cn_other: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class DesignAccuracy:
    """A cell set's mean design errors (``density_error``, ``composition_l1``,
    ``former_cn_error``) and their :class:`DesignCells` (``per_cell``)."""

    density_error: float
    composition_l1: float
    former_cn_error: float
    per_cell: DesignCells

    @classmethod
    def from_cells(cls, cells: DesignCells) -> DesignAccuracy:
        """The NaN-ignoring means of ``cells`` (NaN where no cell was scored)."""
        return cls(density_error=_nanmean(cells.density_error),
                   composition_l1=_nanmean(cells.composition_l1),
                   former_cn_error=_nanmean(cells.former_cn_error), per_cell=cells)

    def as_dict(self) -> dict[str, float]:
        """The means."""
        return {"density_error": self.density_error, "composition_l1": self.composition_l1,
                "former_cn_error": self.former_cn_error}


@dataclass(frozen=True, kw_only=True, eq=False)
class MethodDraws:
    """One existing method on the unconstrained draws (:mod:`.baselines`): ``delivered``
    ``(B,)`` 0/1 (a balanced cell came out of the draw), ``species`` ``(B, N)`` (-1 where
    nothing was delivered or on padding), ``seconds`` (the method's own time),
    ``composition_l1`` ``(B,)`` to the own target (NaN where nothing was delivered),
    ``balanced`` ``(B,)`` 0/1 (delivered and balanced under the vocabulary's formal
    states) and ``changed`` ``(B,)`` atoms whose species changed."""

    delivered: np.ndarray
    species: np.ndarray
    seconds: float
    composition_l1: np.ndarray
    balanced: np.ndarray
    changed: np.ndarray

    def as_dict(self) -> dict[str, float]:
        """The means of ``delivered``, ``balanced``, ``composition_l1`` (NaN-ignoring) and
        ``seconds``."""
        return {"delivered": float(np.mean(self.delivered)),
                "balanced": float(np.mean(self.balanced)),
                "composition_l1": _nanmean(self.composition_l1), "seconds": self.seconds}


@dataclass(frozen=True, kw_only=True)
class JudgeRelaxation:
    """The relaxation each judged quantity used, in words."""

    plausibility: str
    design: str

    def as_dict(self) -> dict[str, str]:
        return {"plausibility": self.plausibility, "design": self.design}


@dataclass(frozen=True, kw_only=True, eq=False)
class JudgedRow:
    """One cell set as the judge scores it (:func:`.judging.judge_evaluation`).

    Attributes:
        judged: share of the ``n`` cells the judge has parameters for.
        energy_before, energy_after: median energy excess over the judge-relaxed twin
            (eV/atom) before and after the judge's relaxation; per cell
            ``energy_before_cells`` / ``energy_after_cells`` ``(n,)``.
        plausibility_before, plausibility_after: the judged cells' :class:`Plausibility`
            (None when none was judged).
        design: :class:`DesignAccuracy` at the target's judged pressure.
        target_index: ``(n,)`` each cell's target; ``judged_target_index`` those of the
            judged cells (the cells of ``plausibility_*``).
    """

    judged: float
    n: int
    energy_before: float
    energy_after: float
    energy_before_cells: np.ndarray
    energy_after_cells: np.ndarray
    plausibility_before: Plausibility | None
    plausibility_after: Plausibility | None
    design: DesignAccuracy
    target_index: np.ndarray
    judged_target_index: np.ndarray

    def as_dict(self) -> dict[str, Any]:
        """The scores without the per-cell arrays."""
        def plaus(p):
            return None if p is None else p.brief()

        return {"judged": self.judged, "n": self.n, "energy_before": self.energy_before,
                "energy_after": self.energy_after,
                "plausibility_before": plaus(self.plausibility_before),
                "plausibility_after": plaus(self.plausibility_after),
                "design": self.design.as_dict()}


@dataclass(frozen=True, kw_only=True, eq=False)
class JudgeScores:
    """The independent judge's scores: its ``name`` and description (``about``), the
    potential that made the data (``made_by``), the ``relaxation`` used, per cell set a
    :class:`JudgedRow` (``rows``: the twins, the judged arms, the post-hoc repair and
    uniformly random positions) and the share of targets it could judge."""

    name: str
    about: str
    made_by: str
    relaxation: JudgeRelaxation
    rows: dict[str, JudgedRow]
    targets_judged: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "made_by": self.made_by,
                "relaxation": self.relaxation.as_dict(),
                "rows": {k: r.as_dict() for k, r in self.rows.items()}}


@dataclass(frozen=True, kw_only=True, eq=False)
class Evaluation:
    """What :func:`.evaluate.evaluate` returns.

    Attributes:
        rows: per arm (and the relaxed AMGenC row), its :class:`ArmRow`.
        per_cell: per sampled arm, its :class:`ArmCells`.
        curves: the total g(r) :class:`Curves` (every arm and the relaxed row).
        angle_curves: the O-T-O angle :class:`Curves` (the same arms).
        baselines: the uniform-random :class:`Baselines`.
        overhead: the sampling :class:`Overhead`.
        conditioning: per arm, its :class:`Conditioning`.
        plausibility: per arm (and ``uniform random``, ``twin``), its
            :class:`Plausibility`.
        design: per sampled arm (and ``twin``), its :class:`DesignAccuracy` on the cells
            relaxed at the recipe's pressure.
        judge: the independent judge's :class:`JudgeScores`, None until attached.
        methods: the existing methods' :class:`MethodDraws`, None until attached.
    """

    rows: dict[str, ArmRow]
    per_cell: dict[str, ArmCells]
    curves: Curves
    angle_curves: Curves
    baselines: Baselines
    overhead: Overhead
    conditioning: dict[str, Conditioning]
    plausibility: dict[str, Plausibility]
    design: dict[str, DesignAccuracy]
    judge: JudgeScores | None = None
    methods: dict[str, MethodDraws] | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class Scale:
    """What :func:`.scale.sample_large` measured: ``n_cells`` cells of ``n_atoms`` atoms,
    ``steps`` noise levels on ``devices`` devices, the median of the timed calls
    ``seconds`` (every call in ``times``), the shares of cells with ``no_close_pair``
    and ``balanced``."""

    n_cells: int
    n_atoms: int
    steps: int
    devices: int
    seconds: float
    times: tuple
    no_close_pair: float
    balanced: float

    @property
    def cells_per_second(self) -> float:
        return self.n_cells / self.seconds

    def as_dict(self) -> dict[str, Any]:
        return {"cells": self.n_cells, "atoms": self.n_atoms, "steps": self.steps,
                "devices": self.devices, "seconds": self.seconds,
                "cells_per_second": self.cells_per_second,
                "no_close_pair": self.no_close_pair, "balanced": self.balanced}
