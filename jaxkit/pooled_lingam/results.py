"""Typed results of the pooled-LiNGAM pipeline: what the experiment modules hand to
:mod:`.pipeline`, :mod:`.report` and :mod:`.report_sachs` (frozen dataclasses, picklable,
so :meth:`RunContext.stage` caches them).

Who makes and who reads each type (``R`` datasets of a cell, ``S`` strengths, ``D``
numbers of variables, ``n`` seeds, ``B`` bootstrap resamples, ``d`` variables):

* :class:`SweepRow` (:func:`.sweeps.summarise`, through :func:`.sweeps.sweep`,
  :func:`.sweeps.run_sweep` and :func:`.sweeps.run_ablations`): one method on one
  simulated setting: the swept :class:`~.data.TrialConfig` field (``param``) and its
  ``value`` (for an ablation ``param == "setting"`` and the value its name), the mean and
  sd over the ``R`` datasets of F1, SHD, precision, recall and AUPRC, the per-dataset F1
  and SHD ``(R,)`` (GIES: its first datasets only) for the paired claim tests. Read by
  the pipeline (the independent and two-targets rows, ``metrics.json``'s sweeps) and the
  report's claims, figures and tables.
* :class:`Spread` and :class:`SachsRow` (:func:`.sachs.sachs_eval`): one method and
  transform on the Sachs data, each metric over the FastICA restarts (mean, sd, the
  per-restart values ``(restarts,)``); read by the report's extension claim and table.
* :class:`Moment` and :class:`Theory` (:func:`.theory.theory_check`): the pooled-source
  excess kurtosis and dependence against the number of variables (per strength and d
  ``(S, D)``, per seed ``(S, D, n)``, closed forms ``(S, D)``, log-log slopes ``(S,)``,
  per-seed slopes ``(S, n)``); read by the report's claims, figure and tables.
* :class:`SachsComparison` (:func:`.sachs_labels.sachs_compare`): pooled ICA-LiNGAM
  against the label-aware methods on the Sachs data and ``B`` resamples within its
  conditions (per method ``(1 + B,)``, index 0 the full data); read by
  :mod:`.report_sachs` (the real-data claim, its control and table).
* :class:`KurtosisDiagnostic` (:func:`.userdata.kurtosis_diagnostic`) and
  :class:`UserFit` (:func:`.userdata.fit_pooled`): the user's-table path (graphs
  ``(d, d)``, orders ``(d,)``, per-restart convergence, the kurtosis premise per
  variable ``(d,)``); read by the pipeline and :mod:`.userdata`'s claims and markdown.

``as_dict`` gives the plain mapping (Python numbers and lists) that ``metrics.json``
records for the type, in its key order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SweepRow", "Spread", "SachsRow", "Moment", "Theory", "SachsComparison",
           "KurtosisDiagnostic", "UserFit"]


def _plain(v) -> Any:
    """NumPy arrays and scalars as Python lists and numbers."""
    return np.asarray(v).tolist() if isinstance(v, np.ndarray | np.generic) else v


@dataclass(frozen=True, kw_only=True)
class SweepRow:
    """One (setting, method) row of a sweep (module docstring).

    Attributes:
        param, value: the swept :class:`~.data.TrialConfig` field and its value
            (``"setting"`` and the ablation's name for :func:`.sweeps.run_ablations`).
        n_samples: pooled rows per dataset.
        method: a name of :data:`.methods.METHODS`.
        n_reps: datasets scored (GIES: its first ones).
        f1 .. auprc_sd: mean and sd over the datasets (nan where no value is finite;
            AUPRC is nan for GIES).
        f1_seeds, shd_seeds: per-dataset F1 and SHD ``(n_reps,)``.
        converged: the share of converged FastICA fits (None for GIES).
        seconds: wall time of the method on the setting.
        setting: the named setting the row stands for when it is not its ``param`` (the
            two-targets scope row); recorded last.
    """

    param: str
    value: Any
    n_samples: int
    method: str
    n_reps: int
    f1: float
    f1_sd: float
    shd: float
    shd_sd: float
    precision: float
    precision_sd: float
    recall: float
    recall_sd: float
    auprc: float
    auprc_sd: float
    f1_seeds: np.ndarray
    shd_seeds: np.ndarray
    converged: float | None = None
    seconds: float
    setting: str | None = None

    @property
    def label(self) -> Any:
        """The row's name in a table of its kind: ``setting`` when set, else ``value``."""
        return self.value if self.setting is None else self.setting

    def named(self, setting: str) -> SweepRow:
        """The same row standing for the named ``setting``."""
        return dataclasses.replace(self, setting=setting)

    def as_dict(self) -> dict[str, Any]:
        out = {self.param: _plain(self.value), "n_samples": self.n_samples,
               "method": self.method, "n_reps": self.n_reps, "f1": self.f1,
               "f1_sd": self.f1_sd, "shd": self.shd, "shd_sd": self.shd_sd,
               "precision": self.precision, "precision_sd": self.precision_sd,
               "recall": self.recall, "recall_sd": self.recall_sd, "auprc": self.auprc,
               "auprc_sd": self.auprc_sd, "f1_seeds": _plain(self.f1_seeds),
               "shd_seeds": _plain(self.shd_seeds)}
        if self.converged is not None:
            out["converged"] = self.converged
        out["seconds"] = self.seconds
        if self.setting is not None and self.param != "setting":
            out["setting"] = self.setting
        return out


@dataclass(frozen=True, kw_only=True)
class Spread:
    """One metric over FastICA restarts: ``mean``, ``sd`` (population) and the
    per-restart values ``reps`` ``(restarts,)``."""

    mean: float
    sd: float
    reps: np.ndarray

    @classmethod
    def of(cls, values) -> Spread:
        v = np.asarray(values, np.float64)
        return cls(mean=float(v.mean()), sd=float(v.std()), reps=v)


@dataclass(frozen=True, kw_only=True)
class SachsRow:
    """One method and transform on the Sachs data (:func:`.sachs.sachs_eval`): the
    BIC-pruned graph's edge metrics, the AUPRC / AUROC of ``|adjacency_unpruned|``, the
    top-k graph's F1 / SHD (k = the consensus's edges) and the convergence, each a
    :class:`Spread` over the ``n_reps`` restarts; ``chance_auprc`` the AUPRC of a random
    ranking."""

    method: str
    transform: str
    n_reps: int
    seconds: float
    chance_auprc: float
    f1: Spread
    n_edges_est: Spread
    n_edges_true: Spread
    precision: Spread
    recall: Spread
    shd: Spread
    auprc: Spread
    auroc: Spread
    topk_f1: Spread
    topk_shd: Spread
    converged: Spread

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Spread):
                out.update({f.name: v.mean, f.name + "_sd": v.sd,
                            f.name + "_reps": _plain(v.reps)})
            else:
                out[f.name] = v
        return out


@dataclass(frozen=True, kw_only=True)
class Moment:
    """One pooled-source moment (excess kurtosis, or dependence: minus the mean
    off-diagonal correlation of the squared sources) per strength and d: the seed mean
    ``mean`` ``(S, D)``, per seed ``seeds`` ``(S, D, n)``, the closed form ``theory``
    ``(S, D)``; the log-log slopes over every d (``slope``, ``slope_theory``) and over
    ``d >= tail_from`` (``tail_slope``, ``tail_slope_theory``), each ``(S,)``, and per
    seed (``seed_slope``, ``seed_tail_slope``, ``(S, n)``, nan where a value is not
    positive)."""

    mean: np.ndarray
    seeds: np.ndarray
    theory: np.ndarray
    slope: np.ndarray
    slope_theory: np.ndarray
    tail_slope: np.ndarray
    tail_slope_theory: np.ndarray
    seed_slope: np.ndarray
    seed_tail_slope: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Theory:
    """The theory check (:func:`.theory.theory_check`): the numbers of variables ``ds``,
    the ``strengths``, the two :class:`Moment` values, and the settings (rows per
    environment, seeds, first d of the tail slopes)."""

    ds: list[int]
    strengths: list[float]
    kurtosis: Moment
    dependence: Moment
    n_per_env: int
    n_seeds: int
    tail_from: int

    def moments(self) -> tuple[tuple[str, Moment], ...]:
        """``(("kurtosis", ...), ("dependence", ...))``."""
        return ("kurtosis", self.kurtosis), ("dependence", self.dependence)

    def as_dict(self) -> dict[str, Any]:
        k, d = self.kurtosis, self.dependence
        out: dict[str, Any] = dict(
            ds=list(self.ds), strengths=list(self.strengths), kurtosis=_plain(k.mean),
            dependence=_plain(d.mean), kurtosis_seeds=_plain(k.seeds),
            dependence_seeds=_plain(d.seeds), kurtosis_theory=_plain(k.theory),
            dependence_theory=_plain(d.theory), n_per_env=self.n_per_env,
            n_seeds=self.n_seeds, tail_from=self.tail_from)
        for name, m in self.moments():
            out[f"slope_{name}"] = _plain(m.slope)
            out[f"slope_{name}_theory"] = _plain(m.slope_theory)
            out[f"tail_slope_{name}"] = _plain(m.tail_slope)
            out[f"tail_slope_{name}_theory"] = _plain(m.tail_slope_theory)
            out[f"seed_slope_{name}"] = _plain(m.seed_slope)
            out[f"seed_tail_slope_{name}"] = _plain(m.seed_tail_slope)
        return out


@dataclass(frozen=True, kw_only=True)
class SachsComparison:
    """The Sachs comparison with label-aware methods (:func:`.sachs_labels.
    sachs_compare`): per method of ``methods`` (``pooled-ica``, the label-aware ones,
    ``chance``) its F1 ``(1 + B,)`` and (all but ``chance``) SHD, index 0 the full data;
    wall ``seconds`` per method; the resamples ``n_boot``, the ``transform``, the
    ``conditions`` and their ``n_rows``."""

    methods: list[str]
    f1: dict[str, np.ndarray]
    shd: dict[str, np.ndarray]
    seconds: dict[str, float]
    n_boot: int
    transform: str
    conditions: list[str]
    n_rows: list[int]

    def as_dict(self) -> dict[str, Any]:
        return dict(methods=list(self.methods),
                    f1={m: _plain(v) for m, v in self.f1.items()},
                    shd={m: _plain(v) for m, v in self.shd.items()},
                    seconds=dict(self.seconds), n_boot=self.n_boot, transform=self.transform,
                    conditions=list(self.conditions), n_rows=list(self.n_rows))


@dataclass(frozen=True, kw_only=True)
class KurtosisDiagnostic:
    """The premise of pooling on the user's table (:func:`.userdata.kurtosis_diagnostic`):
    per variable ``(d,)`` the |excess kurtosis| of the pooled rows and its mean over the
    environments with enough rows (nan with none), and the rows per environment."""

    kurtosis_pooled: np.ndarray
    kurtosis_within: np.ndarray
    env_rows: list[int]


@dataclass(frozen=True, kw_only=True)
class UserFit:
    """Pooled ICA-LiNGAM and DirectLiNGAM on the user's table (:func:`.userdata.
    fit_pooled`): the first FastICA start's ``adjacency`` ``(d, d)`` (``[i, j] != 0``:
    ``j -> i``), each edge's share of starts ``edge_frequency`` ``(d, d)``, its
    ``causal_order`` ``(d,)``, ``converged`` per start ``(restarts,)``, DirectLiNGAM's
    ``direct_adjacency`` and ``direct_order``, and the kurtosis ``diagnostic``."""

    adjacency: np.ndarray
    edge_frequency: np.ndarray
    causal_order: np.ndarray
    converged: np.ndarray
    direct_adjacency: np.ndarray
    direct_order: np.ndarray
    diagnostic: KurtosisDiagnostic

    def as_dict(self) -> dict[str, Any]:
        g = self.diagnostic
        return {k: np.asarray(v).tolist() for k, v in (
            ("adjacency", self.adjacency), ("edge_frequency", self.edge_frequency),
            ("causal_order", self.causal_order), ("converged", self.converged),
            ("direct_adjacency", self.direct_adjacency), ("direct_order", self.direct_order),
            ("kurtosis_pooled", g.kurtosis_pooled), ("kurtosis_within", g.kurtosis_within),
            ("env_rows", g.env_rows))}
