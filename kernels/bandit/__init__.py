"""Multi-armed bandits as pure functions: stationary, non-stationary, extreme-value and
cost-aware policies, genealogy (DAG) credit, and a jitted simulator.

A policy is a :class:`Policy` of pure functions (optax style: a factory closes over the
hyperparameters)::

    pol = discounted_ucb(10, gamma=0.99)
    state = pol.init()                      # a NamedTuple pytree
    arm = pol.select(key, state)            # int32 scalar: argmax of pol.index(key, state)
    state = pol.update(state, arm, reward)  # pure; every array keeps its shape

Indices are +inf for an arm that has no data, and ties go to the lowest arm index
(``jnp.argmax``), so deterministic policies replay exactly. States have fixed shapes, so
``jax.vmap`` batches thousands of independent runs and :func:`simulate` runs a whole
horizon in one ``lax.scan``.

The count-based policies (:func:`ucb1`, :func:`discounted_ucb`, :func:`thompson_gaussian`,
:func:`thompson_beta`; ``policy.runs_last``) also take many runs natively, with the runs
on the last axis: ``init(n_runs)`` gives (K, R) arrays, ``select`` returns (R,) arms and
``update`` takes (R,) arms and rewards. :func:`simulate_runs` steps R runs in lockstep
this way. It exists for speed on CPU: ``vmap`` puts the runs first, which leaves the
argmax over the K arms on the minor (vector) axis, a short reduction that XLA:CPU does
not vectorise; with the runs minor every operation of a step is a vector loop over the
runs (``benchmarks/bench_bandit.py`` compares the two; see benchmarks/RESULTS.md).

References: UCB1 (Auer, Cesa-Bianchi & Fischer 2002); discounted and sliding-window UCB
(Garivier & Moulines, ALT 2011); discounted Thompson sampling (Raj & Kalyani 2017);
QoMax (Baudry, Russac & Kaufmann, AISTATS 2022); Threshold Ascent (Streeter & Smith,
CP 2006); Ballad (bandit routing of LLMs in heuristic discovery) for :func:`ballad`.

:func:`dynamic_arms` wraps a policy sized for a maximum number of arms so that arms can
be added and removed while it runs (``policy.add_arm`` / ``policy.remove_arm``; an
active-arm mask, MABWiser's semantics).

Bad input (an arm out of range, a non-finite reward, a genealogy whose parent is not
earlier in the order) raises ``ValueError`` on concrete values and an
:func:`equinox.error_if` run-time error under ``jit``/``vmap``.

Modules: ``counts`` (UCB1, discounted UCB, Thompson sampling), ``history`` (sliding
window, QoMax, Threshold Ascent), ``arms`` (adding and removing arms), ``cost``,
``genealogy`` (credit, Ballad), ``ballad_cost`` (Ballad's index per unit cost under a budget),
``simulation``; every public name is re-exported here.
"""

from ._core import Policy
from .arms import ArmSetState, dynamic_arms
from .ballad_cost import BalladCostState, ballad_cost
from .cost import CostState, cost_aware
from .counts import BetaState, CountState, discounted_ucb, thompson_beta, thompson_gaussian, ucb1
from .genealogy import BalladState, ballad, ballad_add_roots, credit_per_arm, propagate_credit
from .history import (
    BufferState,
    HistoryState,
    WindowState,
    qomax,
    sliding_window_ucb,
    threshold_ascent,
)
from .simulation import SimTrace, simulate, simulate_runs

__all__ = [
    "Policy",
    "ArmSetState",
    "dynamic_arms",
    "CountState",
    "WindowState",
    "BetaState",
    "BufferState",
    "HistoryState",
    "BalladState",
    "BalladCostState",
    "CostState",
    "SimTrace",
    "ucb1",
    "discounted_ucb",
    "sliding_window_ucb",
    "thompson_beta",
    "thompson_gaussian",
    "qomax",
    "threshold_ascent",
    "cost_aware",
    "ballad",
    "ballad_cost",
    "ballad_add_roots",
    "propagate_credit",
    "credit_per_arm",
    "simulate",
    "simulate_runs",
]
