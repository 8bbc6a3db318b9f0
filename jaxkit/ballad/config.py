"""Settings of ``jaxkit run ballad`` (QUICK: three small problems, three seeds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jaxkit.config import PipelineConfig, require_at_least, require_distinct, require_positive

__all__ = ["Config", "QUICK", "FULL", "PROBLEMS"]

PROBLEMS = ("binpacking_or", "binpacking_weibull", "tsp", "knapsack", "cvrp")
_Problem = Literal["binpacking_or", "binpacking_weibull", "tsp", "knapsack", "cvrp"]


@dataclass(frozen=True)
class Config(PipelineConfig):
    """The routing comparison of :mod:`jaxkit.ballad.compare`.

    Attributes:
        problems: the problem suites (:data:`jaxkit.ballad.problems.NAMES`).
        seeds: independent runs per router.
        calls: proposer (LLM) calls per run.
        train_instances: instances the heuristics are searched on.
        test_instances: held-out instances the best heuristic of each run is scored on.
        full_test: test at full size (otherwise the quick size).
        train_full: problems searched at full size (the rest at the quick size).
        n_init: size of the initial population (the classic heuristic plus
            perturbations of it).
        match_margin: equivalence margin of "Ballad matches the best single model",
            relative to the best single model's mean test objective (0.02: within 2%).
    """

    problems: tuple[_Problem, ...] = PROBLEMS
    seeds: int = 10
    calls: int = 150
    train_instances: int = 4
    test_instances: int = 5
    full_test: bool = True
    train_full: tuple[_Problem, ...] = ("binpacking_or", "tsp", "knapsack", "cvrp")
    n_init: int = 6
    match_margin: float = 0.02

    def validate(self) -> None:
        require_distinct("problems", self.problems, "problem")
        require_at_least(self, ("seeds", "calls", "train_instances", "test_instances", "n_init"))
        require_positive(self, ("match_margin",))


QUICK = Config(problems=("binpacking_weibull", "tsp", "cvrp"), seeds=3, calls=40,
               test_instances=4, full_test=False, train_full=())
# searched at full size; Weibull (5000 items) on 1000-item cells
FULL = Config()
