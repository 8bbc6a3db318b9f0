"""Typed results of the ActFlow comparison: what the experiment modules hand to each other
and to :mod:`.report` (frozen dataclasses, picklable, so :meth:`RunContext.stage` caches
them; NumPy arrays and plain Python values only).

* :class:`Round`: one round of a continuous method's run (round 0 = the pre-trained
  model, no round counts), made by :func:`jaxkit.actflow.loop.history`;
  :func:`jaxkit.actflow.compare.compare_domain` adds ``valid_beyond_data_charge`` on the
  peptides. :class:`DiscreteRound`: the same for a discrete method
  (:func:`jaxkit.actflow.discrete.history`), with the restart time of ActFlow's
  re-masking. ``metrics`` holds the round's evaluation metrics by name (coverage,
  validity, #Circles, ...: they depend on the domain).
* :class:`MethodRun`: one method's rounds, made by
  :func:`jaxkit.actflow.loop.run_method` (``samples (R + 1, n_eval, d)``, ``valid
  (R + 1, n_eval)``: every round's evaluation sample) and
  :func:`jaxkit.actflow.discrete.run_method` (``samples (n_eval, L)`` tokens and ``valid
  (n_eval,)`` of the final evaluation draw, which
  :func:`~jaxkit.actflow.compare.compare_discrete` decodes into ``decoded``,
  ``decoded_valid`` and ``examples`` and drops).
* :class:`Pretraining`: the pre-training's final loss, seconds, data size and resumed
  chunk.
* :class:`DomainRun`: one domain and training seed, made by
  :func:`~jaxkit.actflow.compare.compare_domain` (``data (n, d)``: the pre-training data)
  and :func:`~jaxkit.actflow.compare.compare_discrete` (``description``); ``draws[method]
  [metric]`` is the ``(n_draws,)`` metric of the final model's evaluation draws (the
  paired units of the claim tests). Read by :mod:`.report` and
  :mod:`.pipeline`.

``as_dict`` / :meth:`DomainRun.histories` give the plain mappings ``metrics.json``
records (the per-round rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Round", "DiscreteRound", "MethodRun", "Pretraining", "DomainRun"]


@dataclass(frozen=True, kw_only=True)
class Round:
    """One round of a continuous method: the evaluation ``metrics`` of the round's model,
    the round's counts of valid, novel and kept samples (None in round 0), whether the
    model was ``updated``, the adaptation loss (None without an update), the size of the
    kept bank and, on the peptides, the share of valid samples above the pre-training
    charge range."""

    round: int
    method: str
    metrics: dict[str, float]
    n_valid_round: float | None
    n_novel_round: float | None
    n_kept_round: float | None
    updated: bool
    adapt_loss: float | None
    n_kept_total: int
    valid_beyond_data_charge: float | None = None

    def as_dict(self) -> dict:
        out = dict(round=self.round, method=self.method, **self.metrics,
                   n_valid_round=self.n_valid_round, n_novel_round=self.n_novel_round,
                   n_kept_round=self.n_kept_round, updated=self.updated,
                   adapt_loss=self.adapt_loss, n_kept_total=self.n_kept_total)
        if self.valid_beyond_data_charge is not None:
            out["valid_beyond_data_charge"] = self.valid_beyond_data_charge
        return out


@dataclass(frozen=True, kw_only=True)
class DiscreteRound:
    """One round of a discrete method: the evaluation ``metrics``, the round's counts
    (``n_valid_round`` and ``n_novel_round`` absent, None, in round 0), whether the model
    was ``updated`` and ActFlow's re-masking ``restart`` time (None for the others and in
    round 0)."""

    round: int
    method: str
    metrics: dict[str, float]
    n_kept_round: float | None
    updated: bool
    restart: float | None
    n_valid_round: float | None = None
    n_novel_round: float | None = None

    def as_dict(self) -> dict:
        out = dict(round=self.round, method=self.method, **self.metrics)
        if self.n_valid_round is not None:
            out.update(n_valid_round=self.n_valid_round, n_novel_round=self.n_novel_round)
        out.update(n_kept_round=self.n_kept_round, updated=self.updated, restart=self.restart)
        return out


@dataclass(frozen=True, kw_only=True)
class MethodRun:
    """One method's run (module docstring): the per-round ``history`` (round 0 =
    pre-trained), the seconds spent (summed over resumed runs), the round a checkpoint
    restored (0: a fresh run) and the samples."""

    history: list[Round] | list[DiscreteRound]
    seconds: float
    resumed_from: int = 0
    samples: np.ndarray | None = None
    valid: np.ndarray | None = None
    decoded: list[str] = field(default_factory=list)
    decoded_valid: list[bool] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    def rows(self) -> list[dict]:
        """The per-round rows as ``metrics.json`` records them."""
        return [h.as_dict() for h in self.history]


@dataclass(frozen=True, kw_only=True)
class Pretraining:
    """The pre-training: mean loss of the last chunk, seconds (summed over resumed
    runs), number of training points and the chunk a checkpoint restored."""

    loss: float
    seconds: float
    n_data: int
    resumed_from: int


@dataclass(frozen=True, kw_only=True)
class DomainRun:
    """One domain and training seed (module docstring): the domain's claim ``measure``,
    every method's :class:`MethodRun`, the final models' evaluation ``draws``, the
    pre-training, and the pre-training ``data`` (continuous) or the task's
    ``description`` (discrete)."""

    measure: str
    runs: dict[str, MethodRun]
    draws: dict[str, dict[str, np.ndarray]]
    pretrain: Pretraining
    data: np.ndarray | None = None
    description: str | None = None

    @property
    def discrete(self) -> bool:
        """A discrete domain (:func:`~jaxkit.actflow.compare.compare_discrete`)."""
        return self.description is not None

    def histories(self) -> dict[str, list[dict]]:
        """``{method: per-round rows}``, as ``metrics.json`` records them."""
        return {m: run.rows() for m, run in self.runs.items()}
