"""Typed results of the Ballad experiments: what the search modules hand to the reports.

Each experiment returns one frozen dataclass (picklable, so :meth:`RunContext.stage`
caches it as it cached the dicts before): :class:`RouterRuns` for a routing comparison
on one problem (:func:`jaxkit.ballad.compare.search_problem`, the HTTP pool of
:mod:`jaxkit.ballad.http_run`), :class:`RealRuns` for the real-proposer experiment
(:mod:`jaxkit.ballad.real_run`), :class:`PoolRuns` for the over-pools experiment
(:func:`jaxkit.ballad.compare.search_pools`) and :class:`ProgramRuns` for the
program-space check (:mod:`jaxkit.ballad.program_run`). The statistics the reports
compute from them are typed too: :class:`RouterSummary` (one router of a comparison),
:class:`PoolTable` / :class:`PoolRouter` (the over-pools table) and
:class:`StandardScores` (best heuristics on published instances).

Layout of the per-run arrays: runs are ordered routers outer, seeds inner (run ``r * S
+ s`` is router ``r``, seed ``s``); objectives are in the problem's own direction (lower
is better where ``lower_is_better``). :meth:`RouterSummary.as_dict` gives the plain
mapping that ``metrics.json`` has always recorded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RouterRuns", "RealRuns", "PoolRuns", "ProgramRuns", "RouterSummary",
           "PoolRouter", "PoolTable", "StandardScores"]


@dataclass(frozen=True, kw_only=True)
class RouterRuns:
    """Every router x seed of one routing comparison.

    Attributes:
        problem, objective: the problem's name and what its objective measures.
        lower_is_better: the objective's direction.
        routers: router names (``"only M"`` for each model alone, then the routers).
        models: the proposers' names; ``model_cost`` their price per call (in
            ``cost_unit``: dollars for simulated and HTTP models, thousands of tokens
            for the local language model).
        n_seeds: seeds per router.
        best: (runs, calls + 1) best training objective after each call.
        cost: (runs, calls + 1) cumulative cost; ``arms``: (runs, calls) the model
            called at each step; ``failures``: (runs,) failed calls.
        test, val: (runs,) test / validation objective of each run's best heuristic.
        baseline_test: the classic heuristic's test objective (the margins' unit).
        init_best: the best initial heuristic on the training instances.
        best_theta: (runs, p) best parametric heuristic per run, where the search is
            parametric; ``best_source``: the best program per run, where it edits source.
        optimum_test, optimum_source: the mean optimum (or best known value) of the
            test instances and where it comes from, where one is known
            (:func:`jaxkit.ballad.compare.with_optimum`).
        cache_hits, cache_misses: replies replayed from / missing in the reply cache
            (real and HTTP models).
    """

    problem: str
    objective: str
    lower_is_better: bool
    routers: list[str]
    models: list[str]
    model_cost: list[float]
    n_seeds: int
    best: np.ndarray
    cost: np.ndarray
    arms: np.ndarray
    failures: np.ndarray
    test: np.ndarray
    val: np.ndarray | None
    baseline_test: float
    init_best: float
    cost_unit: str = "$"
    best_theta: np.ndarray | None = None
    best_source: list[str] | None = None
    optimum_test: float | None = None
    optimum_source: str | None = None
    cache_hits: int | None = None
    cache_misses: int | None = None

    def replace(self, **changes: Any) -> RouterRuns:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class RealRuns(RouterRuns):
    """The real-proposer experiment (:func:`jaxkit.ballad.real_run.search_real`): a
    :class:`RouterRuns` plus what the real members did.

    Attributes:
        first_fit_test, first_fit_train: first fit's objective on the test / training
            instances (``baseline_test`` is best fit's).
        stats: per real member, its recorded statistics (calls, failure, improvement,
            beat and copy rates, novelty, tokens per call, failure reasons).
        calibration: per simulated member, the prior calibrated from ``stats``.
        n_calls: calls per run of phase 2; ``n_items`` / ``n_items_test``: items per
            training / test instance.
        improved: (runs, calls) whether each call's child beat its best parent.
        cache: the reply file new replies were appended to.
        l1_test: the L1 lower bound (bins) of each test instance.
    """

    first_fit_test: float
    first_fit_train: float
    stats: dict[str, dict[str, Any]]
    calibration: dict[str, dict[str, float]]
    n_calls: int
    n_items: int
    n_items_test: int
    improved: np.ndarray
    cache: str
    l1_test: list[int]


@dataclass(frozen=True, kw_only=True)
class PoolRuns:
    """The over-pools experiment: every router on random pools x seeds.

    Attributes:
        problem, objective, lower_is_better: as in :class:`RouterRuns`.
        routers: the singles (one per proposer slot) then :data:`POOL_ROUTERS`.
        scenarios: each pool's scenario name; ``prices``: (pools, K) price per call;
            ``pools``: each pool's proposers as plain mappings.
        test, val: (routers, pools, seeds) objective of each run's best heuristic
            (``val`` None: the best single proposer is chosen on ``test``, as results
            recorded before validation instances did).
        cost: (routers, pools, seeds) final cost; ``cost_curve``: the same after each
            call; ``best``: the best-so-far training objective after each call.
        baseline_test: the classic heuristic's test objective (None: the scale of the
            relative numbers is the best single proposer's test objective).
    """

    problem: str
    objective: str
    lower_is_better: bool
    routers: list[str]
    scenarios: list[str]
    prices: np.ndarray
    test: np.ndarray
    cost: np.ndarray
    best: np.ndarray
    cost_curve: np.ndarray
    val: np.ndarray | None = None
    baseline_test: float | None = None
    pools: list[list[dict[str, Any]]] = dataclasses.field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ProgramRuns:
    """The program-space check (:func:`jaxkit.ballad.program_run.search_programs`).

    Attributes:
        routers, models, n_seeds: as in :class:`RouterRuns`.
        isolation: the jail's isolation level.
        n_calls, n_items: calls per run, items per instance.
        train_best, test: per run, the best program's training and test objective
            (excess bins over L1, %); ``baseline_test``: best fit's test objective.
        edits_ok: per run, the children that ran; ``errors``: per run, the failed
            children's error messages.
        cost: per run, its final cost; ``arms``: per run, the model of each call.
        best_source: per run, its best program.
    """

    routers: list[str]
    models: list[str]
    n_seeds: int
    isolation: str
    n_calls: int
    n_items: int
    train_best: list[float]
    test: list[float]
    baseline_test: float
    edits_ok: list[int]
    errors: list[list[str]]
    cost: list[float]
    arms: list[list[int]]
    best_source: list[str]


@dataclass(frozen=True)
class RouterSummary:
    """One router's statistics over seeds (:func:`jaxkit.ballad.compare.summarise`).

    Attributes:
        router: its name.
        final, test, val: ``(mean, 95% t half-width)`` of the final training, test and
            validation objectives.
        cost: mean final cost; ``saving``: ``1 - cost / cost of the costliest alone``.
        reach: share of runs reaching the costliest model's mean final objective;
            ``cost_to_target``: the median cost at which they reach it.
        share: share of calls per model; ``failures``: mean failed calls.
        test_values, val_values, cost_values: per seed (for the paired claim tests).
    """

    router: str
    final: tuple[float, float]
    test: tuple[float, float]
    val: tuple[float, float]
    cost: float
    saving: float
    reach: float
    cost_to_target: float
    share: list[float]
    failures: float
    test_values: list[float]
    val_values: list[float]
    cost_values: list[float]

    def as_dict(self) -> dict[str, Any]:
        """The plain mapping ``metrics.json`` records (field name -> value)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class PoolRouter:
    """One router of the over-pools table: per pool its relative test improvement over
    the best single proposer (``rel``), the seed-level verdict (``verdicts``: "beats",
    "matches", "short" or "not shown"), the cost saving against the costliest alone
    (``saving``), and the relative cost at which it reaches each of ``levels`` of the way
    to that proposer's final objective (``reach``, inf: never)."""

    rel: list[float]
    verdicts: list[str]
    saving: list[float]
    reach: list[list[float]]
    levels: tuple[float, ...]


@dataclass(frozen=True)
class PoolTable:
    """The over-pools table (:func:`jaxkit.ballad.compare.pool_table`): per pool the
    best single proposer chosen on validation (``ref``) and the costliest (``top``),
    pools where every single ties (``ties``), and each router's :class:`PoolRouter`."""

    ref: list[int]
    top: list[int]
    ties: int
    routers: dict[str, PoolRouter]


@dataclass(frozen=True)
class StandardScores:
    """Each run's best heuristic on a published instance set
    (:func:`jaxkit.ballad.standard.standard_scores`).

    Attributes:
        set: the set's name; ``optimum``: its mean best known objective;
            ``n_instances``: how many instances.
        values: (routers, seeds) objectives in the problem's own direction.
        baseline: the classic heuristic's objective.
        problem, routers: as in :class:`RouterRuns`.
    """

    set: str
    optimum: float
    values: np.ndarray
    baseline: float
    n_instances: int
    problem: str
    routers: list[str]
