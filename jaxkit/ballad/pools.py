"""The offline pools of simulated LLMs for parametric heuristics (no network): the
proposer :class:`SimulatedLLM`, the hand-made pool :func:`default_pool`, and pools drawn
from stated priors (:func:`draw_pools`).

**The proposer.** A :class:`SimulatedLLM` edits the parameter vector ``theta`` of a
parametric priority function the way an LLM edits a program it is shown: it starts from a
parent (or a crossover of two parents), moves toward what the in-context examples suggest (the
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

**Pools drawn from priors** (instead of one hand-made pool). Each proposer is a
:class:`SimulatedLLM`: a mutation operator on the heuristic it is given (its parents'
parameter vector), with its own step size, tail, insight (how well it uses the in-context
examples), systematic bias, failure rate, drift schedule and price. A pool's quality
ordering is not set by hand: which proposer is best in hindsight is measured, per pool, by
running it alone.

Priors (:class:`PoolPrior`, every draw independent unless a scenario says otherwise):

* price per call: log-uniform on ``price`` ($0.005 to $2);
* step: log-uniform on ``step`` (0.1 to 1.0, relative to ``|theta_i| + 1``);
* tail: Gaussian edits with probability ``1 - heavy_tail``, else Student-t with
  ``tail_df`` ~ U(1.5, 8) degrees of freedom;
* insight: U(``insight``) (0 to 0.7); bias: U(``bias``) (0 to 0.3) along the proposer's
  own random direction;
* failure probability: U(``fail_prob``) (0 to 0.3);
* drift: with probability ``drift_prob`` (0.3) one change at a fraction U(0.3, 0.7) of the
  run, multiplying insight by log-U(0.2, 2) and the step by log-U(0.5, 2).

Scenarios (``SCENARIOS``; pool ``i`` gets scenario ``i mod 5``, so every scenario is
equally represented however few pools are run):

* ``independent``: the draws as they are (price says nothing about quality);
* ``price-quality``: insight rises and failure rate and step fall with price (the
  hand-made pool's story, with drawn values);
* ``cheap-best``: the cheapest proposer gets the highest insight (max + 0.15) and the
  lowest failure rate, the others half their insight;
* ``switch``: the most insightful proposer drops to 0.1x insight at a fraction
  U(0.3, 0.6) of the run while another one rises to insight 0.7 at the same moment;
* ``dominated``: one proposer is replaced by a worse, pricier copy of another (insight
  x0.3, failure rate +0.2, price x U(1.5, 3)): it is strictly dominated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .llm import Candidate, LLMError

__all__ = ["SimulatedLLM", "default_pool", "SCENARIOS", "PoolPrior", "draw_pool", "draw_pools"]


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


SCENARIOS = ("independent", "price-quality", "cheap-best", "switch", "dominated")


@dataclass(frozen=True)
class PoolPrior:
    """The priors of :func:`draw_pool` (see the module docstring)."""

    n_models: int = 4
    price: tuple[float, float] = (0.005, 2.0)
    step: tuple[float, float] = (0.1, 1.0)
    heavy_tail: float = 0.5
    tail_df: tuple[float, float] = (1.5, 8.0)
    insight: tuple[float, float] = (0.0, 0.7)
    bias: tuple[float, float] = (0.0, 0.3)
    fail_prob: tuple[float, float] = (0.0, 0.3)
    drift_prob: float = 0.3

    def __post_init__(self):
        if self.n_models < 2:
            raise ValueError(f"`n_models` must be >= 2; got {self.n_models}")
        for name in ("price", "step", "tail_df", "insight", "bias", "fail_prob"):
            lo, hi = getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
                raise ValueError(f"`{name}` must be a range 0 <= low <= high; got {(lo, hi)}")
        if self.price[0] <= 0 or self.step[0] <= 0:
            raise ValueError("`price` and `step` ranges must be > 0 (log-uniform)")
        if self.fail_prob[1] > 0.8:
            raise ValueError(f"`fail_prob` must stay <= 0.8; got {self.fail_prob}")


def _loguniform(rng: np.random.Generator, lo: float, hi: float, size=None):
    return np.exp(rng.uniform(math.log(lo), math.log(hi), size))


def draw_pool(rng: np.random.Generator, scenario: str = "independent",
              prior: PoolPrior = PoolPrior(), *, prefix: str = "m") -> list[SimulatedLLM]:
    """One pool of ``prior.n_models`` proposers named ``prefix0, prefix1, ...``.

    Args:
        rng: the NumPy generator every draw comes from.
        scenario: one of :data:`SCENARIOS`.
        prior: the priors.
        prefix: name prefix of the proposers.

    Returns:
        The pool (a list of :class:`SimulatedLLM`).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"`scenario` must be one of {SCENARIOS}; got {scenario!r}")
    k = prior.n_models
    price = _loguniform(rng, *prior.price, k)
    step = _loguniform(rng, *prior.step, k)
    heavy = rng.random(k) < prior.heavy_tail
    df = np.where(heavy, rng.uniform(*prior.tail_df, k), math.inf)
    insight = rng.uniform(*prior.insight, k)
    bias = rng.uniform(*prior.bias, k)
    fail = rng.uniform(*prior.fail_prob, k)
    seeds = rng.integers(0, 2**31 - 1, k)
    drift: list[tuple] = []
    for _ in range(k):
        if rng.random() < prior.drift_prob:
            drift.append(((float(rng.uniform(0.3, 0.7)), float(_loguniform(rng, 0.2, 2.0)),
                           float(_loguniform(rng, 0.5, 2.0))),))
        else:
            drift.append(())

    if scenario == "price-quality":
        by_price = np.argsort(price)
        insight[by_price] = np.sort(insight)
        fail[by_price] = np.sort(fail)[::-1]
        step[by_price] = np.sort(step)[::-1]
    elif scenario == "cheap-best":
        c = int(np.argmin(price))
        top = min(float(insight.max()) + 0.15, 0.9)
        insight = 0.5 * insight
        insight[c] = top
        fail[c] = 0.5 * float(fail.min())
        df[c], drift[c] = math.inf, ()
    elif scenario == "switch":
        best = int(np.argmax(insight))
        other = int(rng.choice([j for j in range(k) if j != best]))
        at = float(rng.uniform(0.3, 0.6))
        drift[best] = ((at, 0.1, 1.0),)
        insight[other] = float(np.clip(insight[other], 0.05, 0.1))
        drift[other] = ((at, 0.7 / float(insight[other]), 1.0),)
    models = [SimulatedLLM(f"{prefix}{j}", cost=float(price[j]), step=float(step[j]),
                           tail_df=float(df[j]), insight=float(insight[j]),
                           fail_prob=float(fail[j]), drift=drift[j], bias=float(bias[j]),
                           bias_seed=int(seeds[j])) for j in range(k)]
    if scenario == "dominated":
        src = int(rng.integers(k))
        dst = int(rng.choice([j for j in range(k) if j != src]))
        m = models[src]
        models[dst] = replace(m, name=f"{prefix}{dst}", insight=0.3 * m.insight,
                              fail_prob=min(m.fail_prob + 0.2, 0.95),
                              cost=m.cost * float(rng.uniform(1.5, 3.0)))
    return models


def draw_pools(rng: np.random.Generator, n: int, prior: PoolPrior = PoolPrior()
               ) -> list[tuple[str, list[SimulatedLLM]]]:
    """``n`` pools, pool ``i`` of scenario ``SCENARIOS[i % 5]``: ``(scenario, pool)``."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    return [(SCENARIOS[i % len(SCENARIOS)], draw_pool(rng, SCENARIOS[i % len(SCENARIOS)],
                                                       prior)) for i in range(n)]
