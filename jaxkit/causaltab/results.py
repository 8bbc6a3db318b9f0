"""Typed results of CausalTab: what the experiment modules hand to :mod:`.report` and
:mod:`.pipeline` (frozen dataclasses, picklable, so :meth:`RunContext.stage` caches them).

Who makes and who reads each type (``B`` datasets of a cell; per-dataset values are
float64 NumPy arrays of shape ``(B,)``):

* :class:`MethodScores` (:meth:`MethodScores.from_arrays` of
  :func:`.evaluate.evaluate`'s per-method mapping, in :mod:`.experiments`): one method's
  ``(B,)`` metrics on one cell, read by every report table and claim (``auroc``) and the
  figures. The rows below hold them in ``methods``, a dict keyed by method name (or, in
  the ablation, by model name).
* :class:`SyntheticCell` (:func:`.experiments.synthetic`, one ``causaltab-...`` stage per
  cell; ``chunked`` set by the pipeline): read by :func:`.report.claims`,
  :func:`.report.extension_claims`, :func:`.report.figures` and
  :func:`.report.markdown`.
* :class:`SemanticRow` (:func:`.experiments.semantic_envs`): one expert network at one
  interventional fraction, read by :func:`.report.claims` and :func:`.report.markdown`.
* :class:`SachsResult` (:func:`.experiments.sachs_real`): the real Sachs data, read by
  :func:`.report.markdown`.
* :class:`AblationCell` (:func:`.experiments.prior_ablation`): one cell of the prior
  ablation, ``methods`` keyed by model name (``broad``, ``narrow``), read by
  :func:`.report.ablation_claim` and :func:`.report.markdown`.
* :class:`AuditRow` (:func:`.audit.audit_network`, :func:`.audit.audit`): one network x
  prompt template of the LLM audit, read by :func:`.report.audit_claims` and
  :func:`.report.audit_table`.
* :class:`TrainingInfo` with :class:`SmokeTraining` (:func:`.recipes.get_model`; the
  smoke training attached by the pipeline) and :class:`AblationTraining` with
  :class:`ArmTraining` (:func:`.recipes.train_ablation`): what the model and the
  ablation's arms are, read by :func:`.report.markdown` (printed as the mapping) and the
  pipeline.

``as_dict`` gives the plain mapping ``metrics.json`` records for the type, in its key
order (arrays as lists).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["MethodScores", "SyntheticCell", "SemanticRow", "SachsResult", "AblationCell",
           "AuditRow", "SmokeTraining", "TrainingInfo", "ArmTraining", "AblationTraining",
           "methods_dict"]


@dataclass(frozen=True, kw_only=True, eq=False)
class MethodScores:
    """One method's ``(B,)`` metrics over the datasets of a cell (NaN where it does not
    apply): ``shd``, ``f1``, ``auroc``, ``auprc``, ``sid`` (fraction), ``seconds`` per
    dataset (the first one NaN when ``B > 1``: it includes compilation), and
    ``compile_seconds`` ``(1,)`` (None for a method skipped at this size)."""

    shd: np.ndarray
    f1: np.ndarray
    auroc: np.ndarray
    auprc: np.ndarray
    sid: np.ndarray
    seconds: np.ndarray
    compile_seconds: np.ndarray | None = None

    @classmethod
    def from_arrays(cls, rec: Mapping[str, Any]) -> MethodScores:
        """From :func:`.evaluate.evaluate`'s ``{metric: array}`` of one method."""
        return cls(**{k: np.asarray(v, np.float64) for k, v in rec.items()})

    def metric(self, name: str) -> np.ndarray:
        """The ``(B,)`` values of metric ``name`` (a field name)."""
        return getattr(self, name)

    def as_dict(self) -> dict[str, list[float]]:
        out = {k: getattr(self, k).tolist()
               for k in ("shd", "f1", "auroc", "auprc", "sid", "seconds")}
        if self.compile_seconds is not None:
            out["compile_seconds"] = self.compile_seconds.tolist()
        return out


def methods_dict(methods: Mapping[str, MethodScores]) -> dict[str, dict[str, list[float]]]:
    """``{name: scores.as_dict()}``."""
    return {m: s.as_dict() for m, s in methods.items()}


@dataclass(frozen=True, kw_only=True, eq=False)
class SyntheticCell:
    """One synthetic cell: prior ``which`` (``id``, ``ood``, ``ood-AXIS``), ``d``
    variables, ``n`` rows, interventional fraction ``int_frac``; the mean var- and
    R2-sortability of its observational rows; ``methods``: :class:`MethodScores` per
    method; ``chunked``: CausalTab scored over variable subsets (``d > max_vars``)."""

    which: str
    d: int
    n: int
    int_frac: float
    var_sortability: float
    r2_sortability: float
    methods: dict[str, MethodScores]
    chunked: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"which": self.which, "d": self.d, "n": self.n, "int_frac": self.int_frac,
                "var_sortability": self.var_sortability,
                "r2_sortability": self.r2_sortability,
                "methods": methods_dict(self.methods), "chunked": self.chunked}


@dataclass(frozen=True, kw_only=True, eq=False)
class SemanticRow:
    """One expert network (``kind`` ``bif`` or ``dagitty``; ``d`` nodes named
    ``variables``) at interventional fraction ``int_frac``; as :class:`SyntheticCell`
    otherwise."""

    network: str
    d: int
    int_frac: float
    kind: str
    variables: list[str]
    chunked: bool
    var_sortability: float
    r2_sortability: float
    methods: dict[str, MethodScores]

    def as_dict(self) -> dict[str, Any]:
        return {"network": self.network, "d": self.d, "int_frac": self.int_frac,
                "kind": self.kind, "variables": list(self.variables),
                "chunked": self.chunked, "var_sortability": self.var_sortability,
                "r2_sortability": self.r2_sortability,
                "methods": methods_dict(self.methods)}


@dataclass(frozen=True, kw_only=True, eq=False)
class SachsResult:
    """The real Sachs data: its ``variables``, the ``rows`` drawn, one dataset
    (``B = 1``) per method in ``methods``."""

    variables: list[str]
    rows: int
    methods: dict[str, MethodScores]

    def as_dict(self) -> dict[str, Any]:
        return {"variables": self.variables, "rows": self.rows,
                "methods": methods_dict(self.methods)}


@dataclass(frozen=True, kw_only=True, eq=False)
class AblationCell:
    """One cell of the prior ablation (as :class:`SyntheticCell`, without sortabilities);
    ``methods`` keyed by model name."""

    which: str
    d: int
    n: int
    int_frac: float
    methods: dict[str, MethodScores]

    def as_dict(self) -> dict[str, Any]:
        return {"which": self.which, "d": self.d, "n": self.n, "int_frac": self.int_frac,
                "methods": methods_dict(self.methods)}


@dataclass(frozen=True, kw_only=True)
class AuditRow:
    """One network x template of the LLM audit (:mod:`.audit`'s docstring): the
    network's ``n_vars`` variables and ``n_edges`` expert edges; ``auroc``,
    ``orientation``, ``yes_rate``, ``edges_affirmed`` against the expert graph and the
    shuffled-name control's ``shuffled_auroc``, ``shuffled_orientation``."""

    network: str
    template: int
    n_vars: int
    n_edges: int
    auroc: float
    orientation: float
    yes_rate: float
    edges_affirmed: float
    shuffled_auroc: float
    shuffled_orientation: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class SmokeTraining:
    """The training smoke run: its ``recipe`` (the :class:`.longtrain.LongRecipe`
    fields) and ``curve`` (``{"step", "loss", "val_auroc"}`` per evaluation)."""

    recipe: dict[str, Any]
    curve: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "curve": self.curve}


@dataclass(frozen=True, kw_only=True)
class TrainingInfo:
    """The main model: where it comes from (``source``), its ``config`` (the
    ``ModelConfig`` fields); shipped weights: their metadata (``extra``); trained here:
    the ``settings``, ``throughput`` and the last three history records
    (``curve_tail``); the smoke training when it ran."""

    source: str
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] | None = None
    throughput: dict[str, Any] | None = None
    curve_tail: list[dict[str, Any]] | None = None
    smoke_training: SmokeTraining | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"source": self.source, "config": self.config, **self.extra}
        for k in ("settings", "throughput", "curve_tail"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.smoke_training is not None:
            out["smoke_training"] = self.smoke_training.as_dict()
        return out


@dataclass(frozen=True, kw_only=True)
class ArmTraining:
    """One arm of the prior ablation: its final BCE and loss, ``tasks_per_s``, and
    whether it is the main training itself (``shared_with_main``)."""

    final_bce: float
    final_loss: float
    tasks_per_s: float
    shared_with_main: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class AblationTraining:
    """The ablation models' shared ``config`` and ``settings``, and ``arms``: an
    :class:`ArmTraining` per prior name (``broad``, ``narrow``)."""

    config: dict[str, Any]
    settings: dict[str, Any]
    arms: dict[str, ArmTraining]

    def as_dict(self) -> dict[str, Any]:
        return {"config": self.config, "settings": self.settings,
                **{k: a.as_dict() for k, a in self.arms.items()}}
