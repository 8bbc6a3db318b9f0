"""Settings of ``jaxkit run ballad`` (QUICK: the hand-made pool on TSP and 5 random pools
on TSP, small; FULL: the hand-made pool on all five problems and 50 random pools x 4
seeds on each of Weibull bin packing, TSP and CVRP)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from jaxkit.config import (
    PipelineConfig,
    require,
    require_at_least,
    require_distinct,
    require_positive,
)

__all__ = ["HttpSettings", "ProgramSettings", "RealSettings", "Config", "QUICK", "FULL",
           "PROBLEMS", "MARGINS"]

PROBLEMS = ("binpacking_or", "binpacking_weibull", "tsp", "knapsack", "cvrp")
#: the fields of the "matches" margins, one per problem
MARGINS = tuple(f"margin_{p}" for p in PROBLEMS)
_Problem = Literal["binpacking_or", "binpacking_weibull", "tsp", "knapsack", "cvrp"]


@dataclass(frozen=True)
class HttpSettings(PipelineConfig):
    """The comparison over real models (:mod:`jaxkit.ballad.http_run`), the section
    ``http`` of :class:`Config` (``--set pool=http --set http.models=...``), used with
    ``pool=http``. (:class:`Config` checks that ``models`` and ``base_url`` are given
    then.)

    Attributes:
        models: the HTTP pool, ``"model:price_in:price_out,..."`` (empty: env
            ``JAXKIT_LLM_POOL``).
        base_url: the endpoint (empty: env ``JAXKIT_LLM_BASE_URL``).
        cache: response cache folder (empty: ``<out>/llm-cache``).
        offline: replay from the cache only (a miss is a failed call).
        calls, seeds, items, timeout: calls per run, seeds per router, items per Weibull
            instance, seconds per request.
    """

    models: str = ""
    base_url: str = ""
    cache: str = ""
    offline: bool = False
    calls: int = 20
    seeds: int = 2
    items: int = 200
    timeout: float = 60.0

    def validate(self) -> None:
        require_at_least(self, ("calls", "seeds"))
        require_at_least(self, ("items",), 2)
        require_positive(self, ("timeout",))


@dataclass(frozen=True)
class ProgramSettings(PipelineConfig):
    """The program-space experiment (:mod:`jaxkit.ballad.program_run`: source-editing
    proposers, every child run in the sandbox), the section ``program`` of :class:`Config`
    (``--set program.calls=0`` skips it).

    Attributes:
        calls: proposer calls per run; 0 skips the experiment.
        seeds: seeds per router.
        items: items per Weibull instance.
        bug_prob: probability that a source edit carries a bug.
        timeout: seconds per sandboxed evaluation (the real-proposer experiment's
            evaluations too).
    """

    calls: int = 40
    seeds: int = 3
    items: int = 500
    bug_prob: float = 0.1
    timeout: float = 10.0

    def validate(self) -> None:
        require_at_least(self, ("calls",), 0)
        require_at_least(self, ("seeds",))
        require_at_least(self, ("items",), 2)
        require_positive(self, ("timeout",))
        require(0 <= self.bug_prob <= 1, "bug_prob",
                f"must be in [0, 1]; got {self.bug_prob}")


@dataclass(frozen=True)
class RealSettings(PipelineConfig):
    """The real-proposer experiment (:mod:`jaxkit.ballad.real_run`: SmolLM2-135M writing
    heuristics), the section ``real`` of :class:`Config` (``--set real.offline=true``).

    Attributes:
        problem: ``binpacking_weibull`` (FunSearch's Weibull set) or ``binpacking_or``
            (OR-Library u classes).
        calls: calls per run (0 skips the experiment); seeds: seeds per router;
            items: items per instance (with ``binpacking_or`` a u class: 120, 250, 500 or
            1000).
        cache: the JSON-lines file new replies are appended to (empty:
            ``<out>/replies.jsonl``); the committed
            ``jaxkit/ballad/replies/smollm2-135m.jsonl`` is read first and never written
            (name it here to record into it, as a maintainer does).
        offline: replay only (a reply not in the cache is a failed call; the model
            is never loaded).
        plugin: your own problem, a Python file (:mod:`jaxkit.ballad.plugin`:
            CAPACITY, TRAIN, TEST, optional VAL and DESCRIPTION): its instances drive the
            search and the test of the experiment, its description is the prompt's task;
            checked (one-line errors) before anything runs. Its replies go to
            ``<out>/replies.jsonl`` unless ``cache`` names a file.
    """

    problem: Literal["binpacking_weibull", "binpacking_or"] = "binpacking_weibull"
    calls: int = 12
    seeds: int = 3
    items: int = 5000
    cache: str = ""
    offline: bool = False
    plugin: str = ""

    def validate(self) -> None:
        require_at_least(self, ("calls",), 0)
        require_at_least(self, ("seeds",))
        require_at_least(self, ("items",), 2)
        require(self.problem != "binpacking_or" or self.items in (120, 250, 500, 1000),
                "items", "must be an OR-Library u class (120, 250, 500 or 1000) with "
                f"problem=binpacking_or; got {self.items}")
        if self.plugin:
            from .plugin import load_plugin

            try:
                load_plugin(self.plugin)
            except ValueError as e:
                raise ValueError(f"`plugin`: {e}") from None


@dataclass(frozen=True)
class Config(PipelineConfig):
    """The routing comparison of :mod:`jaxkit.ballad.compare`.

    Attributes:
        problems: the problem suites (:data:`jaxkit.ballad.problems.NAMES`).
        seeds: independent runs per router.
        calls: proposer (LLM) calls per run.
        train_instances: instances the heuristics are searched on.
        test_instances: held-out instances the best heuristic of each run is scored on.
        val_instances: validation instances (generated, disjoint from both) on which
            the best single model in hindsight is chosen; the claims compare on the test
            instances only.
        full_test: test at full size (otherwise the quick size).
        train_full: problems searched at full size (the rest at the quick size).
        n_init: size of the initial population (the classic heuristic plus
            perturbations of it).
        margin_binpacking_or, margin_binpacking_weibull, margin_tsp, margin_knapsack,
            margin_cvrp: the non-inferiority margin of "Ballad matches the best single
            model" on that problem, as a fraction of the classic heuristic's mean test
            objective (a property of the test instances that no router changes, so the
            margin is fixed before the run and scales with your own instances); see the
            comment at the fields for the values.
        margin_plugin: the same for the user's plug-in problem (``real.plugin``).
        surpass_margin: the improvement over a single model (same units) that
            "surpasses every individual model" needs.
        several: how many problems "in several cases" needs.
        saving_margin: the relative cost saving against always calling the most
            expensive model that "reduces API cost" needs.
        pool_problems: problems of the over-pools experiment (random pools from
            :mod:`jaxkit.ballad.pools`); empty to skip it.
        pools: random pools per problem (scenarios in turn).
        pool_seeds: seeds per pool and router.
        pool_calls: proposer calls per run over pools (searched at the quick size).
        pool_train_instances: training instances of the runs over pools (4 in QUICK and
            FULL: 16 x 2000 runs per call step made FULL's pools stage take about 3 h per
            problem on 2 cores; knapsack, where more instances matter, is not a pool
            problem).
        cost_weight: price exponent of the "ballad-cost" router
            (:func:`jaxkit.kernels.bandit.ballad_cost`).
        budget: budget of the "ballad-budget" router, as a fraction of the cost of
            always calling the most expensive proposer.
        pool: "offline" (simulated proposers) or "http" (real models through
            :mod:`jaxkit.ballad.http_run`; the offline stages are then skipped).
        http: the comparison over real models (:class:`HttpSettings`: ``http.models``,
            ``http.base_url``, ``http.cache``, ``http.offline``, ``http.calls``,
            ``http.seeds``, ``http.items``, ``http.timeout``), used with ``pool=http``.
        program: the program-space experiment (:class:`ProgramSettings`:
            ``program.calls``, ``program.seeds``, ``program.items``, ``program.bug_prob``,
            ``program.timeout``; ``program.calls=0`` skips it).
        instances: your own test instances (``.json`` / ``.npy`` / ``.npz``, see
            :mod:`jaxkit.ballad.instances`): the best heuristic of each run on
            ``instances_problem`` is scored on them instead of generated test instances
            ("": generated).
        instances_problem: the problem the instances are for (one of ``problems``;
            empty: the ``problem`` a JSON file names).
        standard_test: also score every run's best heuristic on the published instances
            that ship with jaxkit (OR-Library u-class bin packing, TSPLIB; see
            :mod:`jaxkit.ballad.standard`), a table beside the claims.
        real: the real-proposer experiment (:class:`RealSettings`: ``real.problem``,
            ``real.calls``, ``real.seeds``, ``real.items``, ``real.cache``,
            ``real.offline``, ``real.plugin``; ``real.calls=0`` skips it).
    """

    problems: tuple[_Problem, ...] = PROBLEMS
    seeds: int = 10
    calls: int = 150
    train_instances: int = 4
    test_instances: int = 5
    val_instances: int = 5
    full_test: bool = True
    train_full: tuple[_Problem, ...] = ("binpacking_or", "tsp", "knapsack", "cvrp")
    n_init: int = 6
    # The paper claims' margins, fixed here before any run (issue 57). "Matches" is a
    # non-inferiority test: Ballad may lose at most this fraction of the classic
    # heuristic's test objective to the best single model. Each is well inside the
    # headroom the search has on its problem (2026-12-02 full record, test set): knapsack's
    # classic heuristic is 1.3% below the DP optimum (451.4 of 457.2), so 0.25% (1.13, a
    # fifth of that gap) -- the 2% of the best single's mean used before (9.03) exceeded
    # the whole gap and could not fail; TSP's routers end 13-15% below the classic tour
    # and CVRP's 4-8% below, so 1% is a fraction of what routing can win or lose there;
    # bin packing's classic heuristic leaves 4.1-4.8 points of excess bins over L1, and
    # 2% of that (about 0.1 point, 2 bins of a 5000-item Weibull instance) is the margin.
    margin_binpacking_or: float = 0.02
    margin_binpacking_weibull: float = 0.02
    margin_tsp: float = 0.01
    margin_knapsack: float = 0.0025
    margin_cvrp: float = 0.01
    # the user's plug-in problem (`real.plugin`) is bin packing scored as excess over L1,
    # so it gets the bin-packing margin: 2% of the classic heuristic's excess
    margin_plugin: float = 0.02
    # "surpasses every individual model": any improvement over each single model shown
    # at 5% (the paper gives no size); "in several cases": on at least 2 problems
    surpass_margin: float = 0.0
    several: int = 2
    # "reduces API cost ... relative to always using the strongest model": a saving of at
    # least a quarter of that bill (the paper reports up to 65.6%); with margin 0 the claim
    # failed only for a router that always called the dearest model
    saving_margin: float = 0.25
    # searched at the quick size; knapsack and binpacking_or are left out: there every
    # proposer alone ends at the same test value in most pools (20 of 20 and 24 of 30 in
    # trials of 20 / 30 pools), so they cannot tell routers apart (Weibull: 0 of 30)
    pool_problems: tuple[_Problem, ...] = ("binpacking_weibull", "tsp", "cvrp")
    pools: int = 50
    pool_seeds: int = 4
    pool_calls: int = 80
    pool_train_instances: int = 4
    cost_weight: float = 0.5
    budget: float = 0.3
    pool: Literal["offline", "http"] = "offline"
    http: HttpSettings = HttpSettings()
    program: ProgramSettings = ProgramSettings()
    instances: str = ""
    instances_problem: str = ""
    standard_test: bool = True
    real: RealSettings = RealSettings()

    def validate(self) -> None:
        require_distinct("problems", self.problems, "problem")
        if self.pool_problems:
            require_distinct("pool_problems", self.pool_problems, "problem")
        require_at_least(self, ("seeds", "calls", "train_instances", "test_instances",
                                "val_instances", "several", "n_init",
                                "pools", "pool_seeds", "pool_calls", "pool_train_instances"))
        require_positive(self, ("budget", "margin_plugin") + MARGINS)
        require(0 <= self.surpass_margin, "surpass_margin",
                f"must be >= 0; got {self.surpass_margin}")
        require(0 <= self.saving_margin < 1, "saving_margin",
                f"must be in [0, 1); got {self.saving_margin}")
        if self.pool == "http":  # checked here so that the run stops before any stage
            http = self.http
            require(bool(http.models or os.environ.get("JAXKIT_LLM_POOL")), "http.models",
                    "must name the HTTP models ('model:price_in:price_out,...') with "
                    "pool=http (or set JAXKIT_LLM_POOL)")
            require(bool(http.offline or http.base_url
                         or os.environ.get("JAXKIT_LLM_BASE_URL")
                         or os.environ.get("OPENAI_BASE_URL")), "http.base_url",
                    "must give the endpoint with pool=http (or set JAXKIT_LLM_BASE_URL)")
        if self.instances:
            from .instances import file_problem

            prob = self.instances_problem or file_problem(self.instances) or ""
            require(prob in self.problems, "instances_problem",
                    f"must name the problem of `instances` among `problems` "
                    f"({', '.join(self.problems)}); got {prob!r}")
        if not self.cost_weight >= 0:
            raise ValueError(f"`cost_weight` must be >= 0; got {self.cost_weight}")

    def margin(self, problem: str) -> float:
        """The "matches" margin of ``problem`` (a fraction of the classic heuristic's
        mean test objective; ``problem`` may carry a suffix, e.g. "binpacking_weibull
        (HTTP models)"); a problem without a ``margin_*`` field (the user's plug-in) gets
        ``margin_plugin``."""
        name = f"margin_{problem.split(' ')[0]}"
        return float(getattr(self, name) if name in MARGINS else self.margin_plugin)


QUICK = Config(problems=("tsp",), seeds=3, calls=30, test_instances=4, val_instances=4,
               full_test=False,
               train_full=(), pool_problems=("tsp",), pools=5, pool_seeds=2, pool_calls=30,
               program=ProgramSettings(calls=6, seeds=1, items=200, timeout=5.0),
               real=RealSettings(calls=3, seeds=1, items=200))
# searched at full size; Weibull (5000 items) on 1000-item cells. 16 training instances:
# with 4, knapsack heuristics overfit (+2.5% on the training set, -0.2% on the test set
# against greedy value/weight; with 32 the test gap is +0.0 +- 0.2%). The shortfall is a
# full-size effect: at the quick size (`--quick --set problems=knapsack --set
# pool_problems=`, seed 0, 3 seeds x 30 calls, 2026-12-01) every router ends at or above
# the classic heuristic's 319 on the test set, with 4 training instances (all routers
# 323, +1.3%) and with 16 (319-320.3; training best 347-348 against 345.6 at the start):
# more training instances do not help there, and every router reaches the same value,
# so knapsack cannot tell routers apart at that size (why it is not in pool_problems).
FULL = Config(train_instances=16)
