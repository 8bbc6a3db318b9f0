"""Typed results of the misaligned-baselines pipeline: what the experiment modules hand to
the pipeline, to :mod:`.report` and to each other (frozen dataclasses, picklable, so
:meth:`RunContext.stage` caches them).

Who makes and who reads each type (``S`` seeds; per-seed values are lists or ``(S,)``
arrays as noted):

* :class:`MeanCI`: a per-seed metric's mean, 95% t half-width and the seeds' values;
  inside :class:`SplitSummary` and :class:`ClassResult`, formatted by
  :func:`.report.fmt`.
* :class:`RegressionGap` (:func:`.evaluation.evaluate`, in
  :attr:`.evaluation.AuditResult.gaps`): a model against its best misaligned baseline
  (per-seed RMSE gap ``(S,)``, bootstrap, paired t test, flag).
* :class:`SplitSummary` (:meth:`.evaluation.AuditResult.summarise`): one data set x split,
  read by the pipeline (``metrics.json``'s ``results``), the report's tables, figures and
  claims, and the ``audit`` command.
* :class:`ClassGap` / :class:`ClassResult` (:func:`.classification.evaluate_classes`,
  :func:`.classification.audit_classes`): the solubility-class task per split (AUROC gaps),
  read by the report and the ``audit`` command.
* :class:`GenerativeScores` (:func:`.addcarbon.generative_scores`) and
  :class:`GenerativeComparison` (AddCarbon's samples beside the held-out molecules, the
  pipeline's ``misaligned-<ds>-addcarbon`` stage), read by the report.
* :class:`SeedMean`, :class:`DTISplit` (:func:`.dti.run_dti`), :class:`ScreenTarget`
  (:func:`.screening.run_screening`) and :class:`Branches`
  (:func:`.branches.run_branches`): the other branches of drug discovery, read by
  :mod:`.branches` (their markdown and claims) and the pipeline's metrics.

``as_dict`` gives the plain mapping that ``metrics.json`` (and the ``audit`` command's
``audit.json``) records for the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from jaxkit.stats import Verdict

    from .metrics import BootGap

__all__ = ["MeanCI", "RegressionGap", "SplitSummary", "ClassGap", "ClassResult",
           "GenerativeScores", "GenerativeComparison", "SeedMean", "DTISplit", "ScreenTarget",
           "Branches"]


@dataclass(frozen=True, kw_only=True)
class MeanCI:
    """A per-seed metric: ``mean`` over seeds, ``ci95`` the half-width of its 95% t
    interval (nan with one seed) and the per-seed values ``seeds``."""

    mean: float
    ci95: float
    seeds: list[float]

    @classmethod
    def of(cls, v) -> MeanCI:
        """The summary of the per-seed values ``v``."""
        from jaxkit import stats

        m, h = stats.t_interval(v)
        return cls(mean=m, ci95=h, seeds=np.asarray(v, float).tolist())

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci95": self.ci95, "seeds": self.seeds}


def _metrics_dict(metrics: dict[str, dict[str, MeanCI]]) -> dict:
    return {k: {m: s.as_dict() for m, s in d.items()} for k, d in metrics.items()}


@dataclass(frozen=True, kw_only=True)
class RegressionGap:
    """A model against its best misaligned baseline (:func:`.evaluation.evaluate`):
    ``best`` the baseline, ``per_seed`` ``(S,)`` baseline RMSE - model RMSE, ``boot`` the
    two-level bootstrap (:class:`.metrics.BootGap`), ``test`` the paired t test over seeds
    (:class:`jaxkit.stats.Verdict`), ``flag`` whether the bootstrap interval holds 0,
    ``selected_on`` where the baseline was chosen ("validation" or "test") and
    ``selection_rmse`` each candidate's mean RMSE there."""

    best: str
    per_seed: np.ndarray
    boot: BootGap
    test: Verdict
    flag: bool
    selected_on: str = "test"
    selection_rmse: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"best": self.best, "per_seed": np.asarray(self.per_seed).tolist(),
                "boot": self.boot._asdict(), "test": self.test._asdict(), "flag": self.flag,
                "selected_on": self.selected_on, "selection_rmse": self.selection_rmse}


@dataclass(frozen=True, kw_only=True)
class SplitSummary:
    """One data set x split (:meth:`.evaluation.AuditResult.summarise`).

    Attributes:
        dataset, split: names; ``seeds`` the number of seeds.
        metrics: ``{method: {metric: MeanCI}}`` (RMSE, MAE, R2, Spearman).
        curves: ``{curve: {metric: (S, strengths) nested lists}}`` with ``strengths``
            ``{curve: its strengths}``.
        gaps: ``{model: RegressionGap}``.
        duplicates: train/test duplicate molecules per seed; ``notes``: remarks.
        label_std, experimental_error, n: the labels' s.d., the stated experimental
            error and the molecules (added by the pipeline; None elsewhere).
    """

    dataset: str
    split: str
    seeds: int
    metrics: dict[str, dict[str, MeanCI]]
    curves: dict[str, dict[str, list]]
    strengths: dict[str, list]
    gaps: dict[str, RegressionGap]
    duplicates: list[int]
    notes: list = field(default_factory=list)
    label_std: float | None = None
    experimental_error: float | None = None
    n: int | None = None

    def rmse(self, method: str) -> MeanCI:
        """The test RMSE of ``method``."""
        return self.metrics[method]["rmse"]

    def as_dict(self) -> dict[str, Any]:
        out = {"dataset": self.dataset, "split": self.split, "seeds": self.seeds,
               "metrics": _metrics_dict(self.metrics), "curves": self.curves,
               "strengths": self.strengths,
               "gaps": {k: g.as_dict() for k, g in self.gaps.items()},
               "duplicates": self.duplicates, "notes": self.notes}
        for k in ("label_std", "experimental_error", "n"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


@dataclass(frozen=True, kw_only=True)
class ClassGap:
    """A model's AUROC against its best misaligned baseline on 0/1 labels
    (:func:`.classification.evaluate_classes`): ``best``, ``per_seed`` model - baseline
    AUROC, ``selected_on``, ``test`` the paired t test (:class:`jaxkit.stats.Verdict`) and,
    from :func:`.classification.audit_classes`, ``boot`` the bootstrap
    (:class:`.metrics.BootGap`)."""

    best: str
    per_seed: list[float]
    selected_on: str
    test: Verdict
    boot: BootGap | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"best": self.best, "per_seed": self.per_seed, "selected_on": self.selected_on,
               "test": self.test._asdict()}
        return out if self.boot is None else dict(out, boot=self.boot._asdict())


@dataclass(frozen=True, kw_only=True)
class ClassResult:
    """The classification task on one split (:func:`.classification.evaluate_classes`):
    ``metrics`` ``{method: {"auroc"|"accuracy"|"pr_auc"|"ef1"|"ef5"|"bedroc": MeanCI}}``,
    ``gaps`` ``{model: ClassGap}``, ``positive_rate`` and ``validation_undefined`` (the
    validation sets holding one class)."""

    metrics: dict[str, dict[str, MeanCI]]
    gaps: dict[str, ClassGap]
    positive_rate: float
    validation_undefined: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"metrics": _metrics_dict(self.metrics),
                "gaps": {k: g.as_dict() for k, g in self.gaps.items()},
                "positive_rate": self.positive_rate,
                "validation_undefined": self.validation_undefined}


@dataclass(frozen=True, kw_only=True)
class GenerativeScores:
    """Distribution-learning scores of generated molecules against a training set
    (:func:`.addcarbon.generative_scores`): ``n`` generated, ``validity``,
    ``uniqueness``, ``novelty``, ``kl_score``, ``nn_similarity`` (mean Tanimoto to the
    nearest training molecule) and ``nn_similarity_ge_07`` (the share at or above 0.7;
    ``"nn_similarity_ge_0.7"`` in :meth:`as_dict`); nan without a valid molecule."""

    n: int
    validity: float
    uniqueness: float
    novelty: float
    kl_score: float
    nn_similarity: float
    nn_similarity_ge_07: float

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "validity": self.validity, "uniqueness": self.uniqueness,
                "novelty": self.novelty, "kl_score": self.kl_score,
                "nn_similarity": self.nn_similarity,
                "nn_similarity_ge_0.7": self.nn_similarity_ge_07}


@dataclass(frozen=True, kw_only=True)
class GenerativeComparison:
    """AddCarbon's samples from the first random training set (``addcarbon``) beside that
    split's held-out molecules (``held_out``), both scored against the training set."""

    addcarbon: GenerativeScores
    held_out: GenerativeScores

    def as_dict(self) -> dict[str, Any]:
        return {"addcarbon": self.addcarbon.as_dict(), "held_out": self.held_out.as_dict()}


@dataclass(frozen=True, kw_only=True)
class SeedMean:
    """A per-seed metric of the branches (:func:`.branch_eval.summary`): the nan-ignoring
    ``mean`` and the values ``per_seed``."""

    mean: float
    per_seed: list[float]

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "per_seed": self.per_seed}


@dataclass(frozen=True, kw_only=True)
class DTISplit:
    """Drug-target interaction on one split kind (:func:`.dti.run_dti`): test AUROC
    ``test`` ``{method: SeedMean}``, validation AUROC ``val`` ``{baseline: SeedMean}``,
    ``best`` (chosen on validation), per-seed AUROC of the MLP minus the best baseline's
    (``advantage``) and minus the control's (``control``), ``n_test`` mean test pairs."""

    test: dict[str, SeedMean]
    val: dict[str, SeedMean]
    best: str
    advantage: list[float]
    control: list[float]
    n_test: float

    def as_dict(self) -> dict[str, Any]:
        return {"test": {m: s.as_dict() for m, s in self.test.items()},
                "val": {b: s.as_dict() for b, s in self.val.items()}, "best": self.best,
                "advantage": self.advantage, "control": self.control, "n_test": self.n_test}


@dataclass(frozen=True, kw_only=True)
class ScreenTarget:
    """Virtual screening of one DUD-E target (:func:`.screening.run_screening`): ``test``
    ``{method: {metric: SeedMean}}`` (AUROC, PR-AUC, EF 1% / 5%, BEDROC), validation
    AUROC ``val`` ``{baseline: SeedMean}``, ``best``, ``advantage`` / ``control`` as in
    :class:`DTISplit`, ``n_test`` / ``n_actives_test`` mean test molecules / actives."""

    test: dict[str, dict[str, SeedMean]]
    val: dict[str, SeedMean]
    best: str
    advantage: list[float]
    control: list[float]
    n_test: float
    n_actives_test: float

    def as_dict(self) -> dict[str, Any]:
        return {"test": {m: {k: s.as_dict() for k, s in r.items()}
                         for m, r in self.test.items()},
                "val": {b: s.as_dict() for b, s in self.val.items()}, "best": self.best,
                "advantage": self.advantage, "control": self.control, "n_test": self.n_test,
                "n_actives_test": self.n_actives_test}


@dataclass(frozen=True, kw_only=True)
class Branches:
    """The other branches that ran (:func:`.branches.run_branches`): ``dti`` ``{split
    kind: DTISplit}`` and ``screening`` ``{target: ScreenTarget}``, None when off."""

    dti: dict[str, DTISplit] | None = None
    screening: dict[str, ScreenTarget] | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{branch: {case: plain mapping}}`` of the branches that ran."""
        out = {}
        if self.dti is not None:
            out["dti"] = {k: r.as_dict() for k, r in self.dti.items()}
        if self.screening is not None:
            out["screening"] = {k: r.as_dict() for k, r in self.screening.items()}
        return out
