"""An offline pool of simulated LLMs for parametric heuristics (no network).

A :class:`SimulatedLLM` edits the parameter vector ``theta`` of a parametric priority
function the way an LLM edits a program it is shown: it starts from a parent (or a
crossover of two parents), moves toward what the in-context examples suggest (the
mean of the best examples and a difference between a better and a worse example, as in
differential evolution) with weight ``insight``, and adds an edit of scale ``step`` whose
size is Student-t with ``tail_df`` degrees of freedom (small ``tail_df`` = rare, very
large edits; the scale is relative, ``step * (|theta_i| + 1)``). It fails (no parsable
code) with probability ``fail_prob`` and costs ``cost`` dollars per call, failed or
not. ``drift`` makes its behaviour change during a run:
``((fraction_of_budget, insight_multiplier, step_multiplier), ...)``, e.g. a provider
silently swapping the model behind an endpoint. ``bias`` is a systematic preference:
every edit also moves ``bias * (|theta_i| + 1)`` along a fixed unit direction of the
model's own (drawn from ``bias_seed``), whether that direction helps or not.

The models of :func:`default_pool` were designed from the paper's qualitative picture,
before any routing experiment: a strong, costly model with careful, well-informed edits;
two mid-priced ones (one degrades half way); a cheap open-weight model with wild,
heavy-tailed edits. The overall step scale was calibrated once, on the first trial run,
where 3-4x smaller steps never moved a bin-packing heuristic off best fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .llm import Candidate, LLMError

__all__ = ["SimulatedLLM", "default_pool"]


@dataclass(frozen=True)
class SimulatedLLM:
    name: str
    cost: float
    step: float
    tail_df: float = math.inf
    insight: float = 0.0
    fail_prob: float = 0.0
    drift: tuple[tuple[float, float, float], ...] = ()
    bias: float = 0.0
    bias_seed: int = 0

    def _multipliers(self, frac: float) -> tuple[float, float]:
        ins, stp = 1.0, 1.0
        for at, mi, ms in self.drift:
            if frac >= at:
                ins, stp = mi, ms
        return ins, stp

    def propose(self, parents: Sequence[Candidate], context: Mapping[str, Any]
                ) -> tuple[list[Candidate], float]:
        """``context``: ``rng`` (numpy Generator), ``step`` and ``budget`` (for drift),
        ``examples``: (theta, score) pairs shown in the prompt."""
        rng: np.random.Generator = context["rng"]
        if not parents or any(p.theta is None for p in parents):
            raise LLMError(self.name, "offline", "parents need a parameter vector theta")
        if rng.random() < self.fail_prob:
            raise LLMError(self.name, "offline", "no parsable code in response",
                           cost=self.cost)
        frac = float(context.get("step", 0)) / max(float(context.get("budget", 1)), 1.0)
        m_ins, m_step = self._multipliers(frac)
        base = np.asarray(parents[0].theta, np.float64)
        if len(parents) > 1:
            w = rng.random()
            base = w * base + (1 - w) * np.asarray(parents[1].theta, np.float64)
        child = base.copy()
        examples = sorted(context.get("examples", ()), key=lambda e: -e[1])
        if self.insight > 0 and len(examples) >= 2:
            thetas = np.stack([np.asarray(t, np.float64) for t, _ in examples])
            top = thetas[: max(2, len(thetas) // 3)].mean(0)
            i, j = sorted(rng.choice(len(thetas), size=2, replace=False))
            direction = (top - base) + 0.5 * (thetas[i] - thetas[j])
            child += self.insight * m_ins * rng.uniform(0.5, 1.5) * direction
        mask = rng.random(base.shape) < 0.5
        mask[rng.integers(base.size)] = True
        size = (rng.standard_t(self.tail_df, base.shape) if math.isfinite(self.tail_df)
                else rng.standard_normal(base.shape))
        child += mask * self.step * m_step * (np.abs(base) + 1.0) * size
        if self.bias:
            d = np.random.default_rng(self.bias_seed).standard_normal(base.shape)
            child += self.bias * (np.abs(base) + 1.0) * d / max(np.linalg.norm(d), 1e-12)
        return [Candidate(theta=child, note=self.name)], self.cost


def default_pool() -> list[SimulatedLLM]:
    """Four models of different capability, tails, drift and price (dollars per call)."""
    return [
        SimulatedLLM("frontier", cost=1.00, step=0.15, tail_df=math.inf, insight=0.6,
                     fail_prob=0.02),
        SimulatedLLM("mid", cost=0.25, step=0.3, tail_df=6.0, insight=0.35, fail_prob=0.05,
                     drift=((0.5, 0.3, 1.5),)),
        SimulatedLLM("mini", cost=0.05, step=0.6, tail_df=3.0, insight=0.15, fail_prob=0.10),
        SimulatedLLM("open-weight", cost=0.01, step=1.0, tail_df=1.5, insight=0.0,
                     fail_prob=0.20),
    ]
