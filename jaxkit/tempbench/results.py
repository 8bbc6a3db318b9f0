"""Typed results of TempBench: what the experiment modules hand to :mod:`.pipeline` and the
report modules (:mod:`.report`, :mod:`.report_ref`, :mod:`.report_real`); frozen
dataclasses, picklable, so :meth:`RunContext.stage` caches them.

* :class:`Summary`: one metric of one method over the seeds, ``mean`` and 95% t
  half-width ``ci95`` (nan with one value) of the per-seed values ``seeds`` (a list of
  ``n_seeds`` floats, in seed order: the paired units of the claim tests).
* :class:`WindowScores`: one setting at one window T: ``methods[method][metric]`` a
  :class:`Summary` (metric names as :func:`jaxkit.tempbench.compare.evaluate` and
  :func:`jaxkit.tempbench.real.compare_real` name them), and for the HMM the raw-data
  references (:class:`HMMReferences`). On the real panel the rows ``raw_token`` and
  ``raw_window`` (the raw-activation references) come first among ``methods``.
* :class:`Panel`: one synthetic setting over its windows, ``windows[T]``, made by
  :func:`~jaxkit.tempbench.compare.compare_markov`, ``compare_hmm`` and
  ``compare_chains``. :class:`MarkovSweep`: the Markov panels per (k, rho), assembled by
  :mod:`.pipeline`. :class:`ReferencePanel`: the reference setting's cells ``cells[(T,
  k)]``, made by :func:`jaxkit.tempbench.reference.compare_reference`.
* :class:`RealPanel`: the real-activation panel, made by
  :func:`jaxkit.tempbench.real.compare_real` (:func:`~jaxkit.tempbench.real.
  summarise_real`): per task the share of positives and the labelled tokens
  (:class:`TaskLabels`), per window the language model's clean and zero-ablated loss
  (:class:`LMLoss`), the backtracking traces (:class:`TraceInfo`) and the scores per
  window. :class:`RealResult`: what :func:`jaxkit.tempbench.panel.run_real` returns: the
  source, the store's metadata (:class:`StoreMeta`), the panel and the streamed
  training (:class:`StoreRun`).

* The measures of one trained dictionary on the real panel, which
  :func:`~jaxkit.tempbench.real.compare_real` files under their metric names:
  :class:`ProbeScores` (:func:`jaxkit.tempbench.probes.probe_scores`, per task),
  :class:`SpliceLoss` (:func:`jaxkit.tempbench.splice.splice_losses`) and
  :class:`Backtracking` (:func:`jaxkit.tempbench.backtracking.detect_and_steer`).

``as_dict`` gives the plain mapping ``metrics.json`` records (windows as ``"T=.."``,
Markov cells as ``markov["T=.."]["k=.."]["rho=.."]``, reference cells as ``"T=.. k=.."``);
``from_dict`` reads it back.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxkit.stats import t_interval

__all__ = ["Summary", "HMMReferences", "WindowScores", "Panel", "MarkovSweep",
           "ReferencePanel", "TaskLabels", "LMLoss", "TraceInfo", "RealPanel", "StoreMeta",
           "StoreRun", "RealResult", "ProbeScores", "SpliceLoss", "Backtracking", "summarise"]


def _t(label: str) -> int:
    """``"T=3"`` -> 3."""
    return int(label.split("=")[1])


@dataclass(frozen=True, kw_only=True)
class Summary:
    """``mean`` and 95% t half-width ``ci95`` of the per-seed values ``seeds``."""

    mean: float
    ci95: float
    seeds: list[float]

    @classmethod
    def of(cls, values) -> Summary:
        """The summary of per-seed ``values`` (any shape, flattened)."""
        v = np.asarray(values, float).ravel()
        mean, half = t_interval(v)
        return cls(mean=mean, ci95=half, seeds=[float(a) for a in v])

    def as_dict(self) -> dict:
        return dict(mean=self.mean, ci95=self.ci95, seeds=self.seeds)

    @classmethod
    def from_dict(cls, d: dict) -> Summary:
        return cls(mean=d["mean"], ci95=d.get("ci95", math.nan), seeds=list(d.get("seeds", [])))


def summarise(per_seed: dict[str, Any]) -> dict[str, Summary]:
    """``{metric: per-seed values}`` -> ``{metric: Summary}``."""
    return {m: Summary.of(v) for m, v in per_seed.items()}


def _plain(scores: dict[str, dict[str, Summary]]) -> dict:
    return {m: {k: s.as_dict() for k, s in met.items()} for m, met in scores.items()}


@dataclass(frozen=True, kw_only=True)
class HMMReferences:
    """The HMM's raw-data references at one window: the state accuracy of the causal
    Bayes filter, of forward-backward, of the raw token (``single_token``) and of the raw
    window mean (:func:`jaxkit.tempbench.compare.hmm_references`), and the latent probe on
    the raw window (``window_probe``); ``as_dict`` in this order."""

    bayes_filter: Summary
    forward_backward: Summary
    single_token: Summary
    window_mean: Summary
    window_probe: Summary

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name).as_dict() for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class WindowScores:
    """One setting at one window (module docstring)."""

    methods: dict[str, dict[str, Summary]]
    references: HMMReferences | None = None

    def as_dict(self) -> dict:
        out = _plain(self.methods)
        if self.references is not None:
            out["references"] = self.references.as_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> WindowScores:
        refs = d.get("references")
        return cls(methods={m: {k: Summary.from_dict(s) for k, s in met.items()}
                            for m, met in d.items() if m != "references"},
                   references=None if refs is None else HMMReferences(
                       **{r: Summary.from_dict(s) for r, s in refs.items()}))


@dataclass(frozen=True, kw_only=True)
class Panel:
    """One synthetic setting, ``windows[T]`` (module docstring)."""

    windows: dict[int, WindowScores]

    def as_dict(self) -> dict:
        return {f"T={T}": w.as_dict() for T, w in self.windows.items()}

    @classmethod
    def from_dict(cls, d: dict) -> Panel:
        return cls(windows={_t(T): WindowScores.from_dict(w) for T, w in d.items()})


@dataclass(frozen=True, kw_only=True)
class MarkovSweep:
    """The Markov panels per per-token budget and persistence, ``panels[(k, rho)]``,
    each over the windows ``windows`` (module docstring)."""

    windows: tuple[int, ...]
    ks: tuple[int, ...]
    panels: dict[tuple[int, float], Panel] = field(default_factory=dict)

    def cell(self, T: int, k: int, rho: float) -> WindowScores:
        """The scores at window ``T``, budget ``k`` and persistence ``rho``."""
        return self.panels[(k, rho)].windows[T]

    def as_dict(self) -> dict:
        return {f"T={T}": {f"k={k}": {f"rho={rho}": p.windows[T].as_dict()
                                      for (kk, rho), p in self.panels.items() if kk == k}
                           for k in self.ks}
                for T in self.windows}

    @classmethod
    def from_dict(cls, d: dict) -> MarkovSweep:
        panels: dict = {}
        for T, per_k in d.items():
            for k, per_rho in per_k.items():
                for rho, w in per_rho.items():
                    panels.setdefault((_t(k), float(rho.split("=")[1])), {})[_t(T)] = \
                        WindowScores.from_dict(w)
        ks = tuple(_t(k) for k in next(iter(d.values()), {}))
        return cls(windows=tuple(_t(T) for T in d), ks=ks,
                   panels={key: Panel(windows=w) for key, w in panels.items()})


@dataclass(frozen=True, kw_only=True)
class ReferencePanel:
    """The reference setting's cells, ``cells[(T, k)]`` (module docstring)."""

    cells: dict[tuple[int, int], WindowScores]

    @staticmethod
    def label(T: int, k: int) -> str:
        return f"T={T} k={k}"

    def as_dict(self) -> dict:
        return {self.label(T, k): w.as_dict() for (T, k), w in self.cells.items()}

    @classmethod
    def from_dict(cls, d: dict) -> ReferencePanel:
        def key(name):
            t, k = name.split()
            return _t(t), _t(k)

        return cls(cells={key(n): WindowScores.from_dict(w) for n, w in d.items()})


@dataclass(frozen=True, kw_only=True)
class TaskLabels:
    """A real task's share of positive tokens (nan without labels) and its count of
    labelled tokens."""

    positives: float
    valid: int


@dataclass(frozen=True, kw_only=True)
class LMLoss:
    """The language model's cross-entropy, clean and with the stream zero-ablated."""

    ce_clean: float
    ce_zero: float


@dataclass(frozen=True, kw_only=True)
class TraceInfo:
    """The backtracking traces: positive positions, steering sites, documents and one
    example's text."""

    positives: int
    sites: int
    docs: int
    example: str


@dataclass(frozen=True, kw_only=True)
class RealPanel:
    """The real-activation panel (module docstring): ``tasks[task]``, ``lm[T]`` (with
    the recorded model), ``backtracking`` (None without traces), ``windows[T]``."""

    tasks: dict[str, TaskLabels]
    windows: dict[int, WindowScores]
    lm: dict[int, LMLoss] = field(default_factory=dict)
    backtracking: TraceInfo | None = None

    def as_dict(self) -> dict:
        out: dict[str, Any] = {
            "tasks": {t: dataclasses.asdict(v) for t, v in self.tasks.items()},
            "lm": {f"T={T}": dataclasses.asdict(v) for T, v in self.lm.items()}}
        if self.backtracking is not None:
            out["backtracking"] = dataclasses.asdict(self.backtracking)
        out.update({f"T={T}": w.as_dict() for T, w in self.windows.items()})
        return out


_META = ("model", "layers", "layer", "scale", "doc_len", "n_docs", "tokens", "provenance",
         "vocab_size")


@dataclass(frozen=True, kw_only=True)
class StoreMeta:
    """The activation store's metadata (``acts.json``; None where it does not say)."""

    model: str | None = None
    layers: list[int] | None = None
    layer: int | None = None
    scale: float | None = None
    doc_len: int | None = None
    n_docs: int | None = None
    tokens: int | None = None
    provenance: str | None = None
    vocab_size: int | None = None

    @classmethod
    def of(cls, meta: dict) -> StoreMeta:
        """The fields of a store's ``meta`` mapping (absent ones None)."""
        return cls(**{k: meta.get(k) for k in _META})


@dataclass(frozen=True, kw_only=True)
class StoreRun:
    """The temporal crosscoder streamed from the store: held-out ``fvu``, the ``mesh``
    it was sharded over, its ``steps`` and the store's ``shards``."""

    fvu: float
    mesh: Any
    steps: int
    shards: int


@dataclass(frozen=True, kw_only=True)
class RealResult:
    """What :func:`jaxkit.tempbench.panel.run_real` returns (module docstring)."""

    source: str
    tokens: int
    real: RealPanel
    meta: StoreMeta = field(default_factory=StoreMeta)
    store: StoreRun | None = None

    def as_dict(self) -> dict:
        out = {"source": self.source, "meta": dataclasses.asdict(self.meta),
               "tokens": self.tokens, "real": self.real.as_dict()}
        if self.store is not None:
            out["store"] = dataclasses.asdict(self.store)
        return out


@dataclass(frozen=True, kw_only=True)
class ProbeScores:
    """One representation on one task: the held-out AUROC of the best latent chosen on
    the fit half (``auroc_best``) and of the k-sparse probe (``probe_k``); nan when a
    half has one class only."""

    auroc_best: float
    probe_k: float

    def as_dict(self) -> dict[str, float]:
        return dict(auroc_best=self.auroc_best, probe_k=self.probe_k)


@dataclass(frozen=True, kw_only=True)
class SpliceLoss:
    """The language model's mean cross-entropy on the predictions, clean and with the
    dictionary's reconstruction spliced in (or the stream zero-ablated), and the mean
    KL(clean || spliced)."""

    ce_clean: float
    ce_spliced: float
    kl: float


@dataclass(frozen=True, kw_only=True)
class Backtracking:
    """One dictionary's backtracking measures: detection rate at the fixed false-positive
    rate (``detect``), the test false-positive rate (``detect_fpr``), the rate among
    step ends only (``detect_hard``) and, with a model to steer, the change of
    log p(' Wait') with the selected latent, a random one and their difference (None
    without a model)."""

    detect: float
    detect_fpr: float
    detect_hard: float
    steer_sel: float | None = None
    steer_rand: float | None = None
    steer: float | None = None

    def as_dict(self) -> dict[str, float]:
        """The measures (the steering ones only with a model)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}
