"""Ballad's claims protocol (issue 57): the margins fixed in the configuration, the kinds
of the rows, and the negative control: a pool where one member dominates, where no paper
claim may say "yes"."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.ballad import report
from jaxkit.ballad.compare import search_problem
from jaxkit.ballad.config import FULL, MARGINS, QUICK, Config
from jaxkit.ballad.pools import SimulatedLLM
from jaxkit.ballad.problems import Problem


def test_margins_are_configuration_fields_that_can_fail():
    for cfg in (QUICK, FULL):
        assert {f"margin_{p}" for p in cfg.problems} <= set(MARGINS)
        assert 0 < cfg.margin_knapsack < 0.005  # inside knapsack's 1.3% heuristic gap
        assert cfg.saving_margin > 0 and cfg.several >= 2
    assert QUICK.margin("binpacking_weibull (HTTP models)") == QUICK.margin_binpacking_weibull
    with pytest.raises(ValueError, match="`margin_tsp`"):
        Config(margin_tsp=0.0)
    with pytest.raises(ValueError, match="`saving_margin`"):
        Config(saving_margin=1.0)
    with pytest.raises(ValueError, match="`val_instances`"):
        Config(val_instances=0)


def test_match_verdict_is_non_inferiority():
    # a small shortfall inside the margin matches; one beyond it is a "no"
    assert report.match_verdict(np.array([-0.05, -0.04, -0.06, -0.05]), 0.1)[0] == "yes"
    assert report.match_verdict(np.array([-0.3, -0.31, -0.29, -0.3]), 0.1)[0] == "no"


# ---------------------------------------------------------- the negative control

_D = 5


def _bowl() -> Problem:
    """A problem where search progress is real and carries over to new instances: the
    heuristic is a point, an instance a centre near (1, ..., 1), the objective the mean
    squared distance (lower is better); the classic heuristic is the origin."""

    def generate(key, n):
        return {"c": 1.0 + 0.05 * jax.random.normal(key, (n, _D))}

    def score(theta, inst):
        return -jnp.sum((theta[None, :] - inst["c"]) ** 2, axis=-1)

    return Problem("bowl", tuple(f"x{i}" for i in range(_D)), np.zeros(_D), generate,
                   jax.jit(score), "squared distance", True)


@pytest.fixture(scope="module")
def dominated():
    """Every router on two problems (labelled tsp and cvrp for their margins) with a pool
    where one member dominates: the others never return a usable heuristic and cost
    nearly as much. Routing can only lose calls here, and save almost nothing."""
    cfg = QUICK.override(["seeds=4", "calls=8", "train_instances=2", "test_instances=2",
                          "val_instances=2", "n_init=3", "pool_problems=", "program.calls=0"])
    pool = [SimulatedLLM("dominant", cost=1.0, step=0.1, insight=0.7)] + [
        SimulatedLLM(f"dud{j}", cost=0.9, step=0.1, fail_prob=1.0) for j in (1, 2, 3)]
    results, bowl = [], _bowl()
    for i, name in enumerate(("tsp", "cvrp")):
        keys = {k: jax.random.key(10 * i + j)
                for j, k in enumerate(("train", "test", "search", "val"))}
        results.append(search_problem(cfg, name, keys, np.random.default_rng(i), pool=pool,
                                      problem=bowl))
    return cfg, results


def test_negative_control_no_paper_claim_says_yes_when_one_member_dominates(dominated):
    cfg, results = dominated
    for simulated in (True, False):  # offline rows, and the rows of real models
        claims = report.claims(results, cfg, simulated=simulated)
        paper = [c for c in claims if c.kind == "paper"]
        assert len(paper) == 5
        assert not [c.claim for c in paper if c.verdict == "yes"]
        decided = {c.claim.split(" (")[0]: c.verdict for c in paper}
        # the claims are tested here, not skipped: matching, surpassing, saving
        assert decided["Ballad matches the best individual LLM in hindsight"] in (
            "no", "not shown")
        assert decided["Ballad reduces API cost relative to always using the strongest "
                       "model"] == "no"
    # the search did make progress (the setup row), so a match was possible in principle
    setup = [c for c in claims if c.kind == "setup"]
    assert setup and all(c.verdict == "yes" for c in setup)
    # the best single model is the dominant one, chosen on validation instances
    assert "only dominant" in next(c.note for c in claims if "matches" in c.claim)


def test_claim_kinds_and_not_tested_reasons(dominated):
    cfg, results = dominated
    claims = report.claims(results[:1], cfg)
    kinds = [c.kind for c in claims]
    assert kinds[:5] == ["paper"] * 5 and set(kinds[5:]) <= {"setup", "extension"}
    by = {c.claim.split(" (")[0]: c for c in claims}
    assert by["In several cases Ballad surpasses every individual model"].verdict == \
        "not tested at this size"  # one problem
    costly = by["Across problems there is no consistent advantage for larger, costlier "
                "models"]
    assert costly.verdict == "not tested" and "simulated" in costly.note
    assert sum("ablation" in c.claim for c in claims) == 3  # each component an extension
    assert all(c.kind == "extension" for c in claims if "ablation" in c.claim)
    assert "Holm over 1 problem" in by["Ballad matches the best individual LLM in "
                                       "hindsight"].test
