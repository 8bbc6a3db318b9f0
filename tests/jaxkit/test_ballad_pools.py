"""Ballad's random pools: the priors (marginals against their stated distributions), each
scenario's defining property, the proposers' bias, the lockstep search over many pools
(each run calls its own pool, cost-aware routers get each run's prices), and the
over-pools statistics and claims on hand-made results with known answers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from jaxkit.ballad import pools as PL
from jaxkit.ballad import search as S
from jaxkit.ballad.compare import pool_table
from jaxkit.ballad.config import QUICK
from jaxkit.ballad.llm import Candidate
from jaxkit.ballad.pools import SimulatedLLM
from jaxkit.ballad.report_pools import pool_claims, pool_section
from jaxkit.ballad.results import PoolRuns

PRIOR = PL.PoolPrior()
CFG = QUICK.override(["margin_tsp=0.02"])  # the fake results below are labelled tsp


@pytest.fixture(scope="module")
def independent():
    rng = np.random.default_rng(0)
    return [m for _ in range(300) for m in PL.draw_pool(rng, "independent")]


def test_independent_marginals_follow_the_stated_priors(independent):
    n = len(independent)
    price = np.array([m.cost for m in independent])
    lo, hi = PRIOR.price
    assert price.min() >= lo and price.max() <= hi
    # log-uniform price, log-uniform step, uniform insight / failure rate / bias
    u = (np.log(price) - math.log(lo)) / (math.log(hi) - math.log(lo))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    st = np.array([m.step for m in independent])
    assert stats.kstest((np.log(st) - math.log(0.1)) / math.log(10), "uniform").pvalue > 1e-3
    for field, (a, b) in (("insight", PRIOR.insight), ("fail_prob", PRIOR.fail_prob),
                          ("bias", PRIOR.bias)):
        x = np.array([getattr(m, field) for m in independent])
        assert stats.kstest((x - a) / (b - a), "uniform").pvalue > 1e-3, field
    heavy = np.array([math.isfinite(m.tail_df) for m in independent])
    drift = np.array([bool(m.drift) for m in independent])
    for frac, p in ((heavy.mean(), PRIOR.heavy_tail), (drift.mean(), PRIOR.drift_prob)):
        assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / n)
    df = np.array([m.tail_df for m in independent if math.isfinite(m.tail_df)])
    assert df.min() >= 1.5 and df.max() <= 8.0
    # independent means independent: price says nothing about insight
    ins = np.array([m.insight for m in independent])
    assert abs(stats.spearmanr(price, ins).statistic) < 0.1


def _many(scenario, n=60, seed=1):
    rng = np.random.default_rng(seed)
    return [PL.draw_pool(rng, scenario) for _ in range(n)]


def test_price_quality_orders_insight_failures_and_steps_by_price():
    for pool in _many("price-quality"):
        by = sorted(pool, key=lambda m: m.cost)
        assert [m.insight for m in by] == sorted(m.insight for m in by)
        assert [m.fail_prob for m in by] == sorted((m.fail_prob for m in by), reverse=True)
        assert [m.step for m in by] == sorted((m.step for m in by), reverse=True)


def test_cheap_best_gives_the_cheapest_the_most_insight_and_fewest_failures():
    for pool in _many("cheap-best"):
        c = min(pool, key=lambda m: m.cost)
        others = [m for m in pool if m is not c]
        assert all(c.insight > m.insight and c.fail_prob <= m.fail_prob for m in others)
        assert c.drift == () and c.tail_df == math.inf


def test_switch_best_model_changes_mid_run():
    for pool in _many("switch"):
        down = [m for m in pool if m.drift and m.drift[0][1] == 0.1]
        assert len(down) == 1
        best = down[0]
        assert best.insight == max(m.insight for m in pool)
        at = best.drift[0][0]
        assert 0.3 <= at <= 0.6
        up = [m for m in pool if m.drift and m.drift[0][0] == at and m is not best]
        assert len(up) == 1
        assert up[0].insight * up[0].drift[0][1] == pytest.approx(0.7)
        # before the switch the riser is weak, after it the strongest
        assert up[0].insight <= 0.1 < 0.7 > best.insight * 0.1


def test_dominated_pool_holds_a_strictly_worse_pricier_copy():
    for pool in _many("dominated"):
        pairs = [(a, b) for a in pool for b in pool if a is not b and b.step == a.step
                 and b.tail_df == a.tail_df and b.bias_seed == a.bias_seed]
        assert pairs
        assert any(b.cost > a.cost and b.insight <= a.insight and b.fail_prob > a.fail_prob
                   for a, b in pairs)


def test_draw_pools_cycles_scenarios_reproducibly_and_checks_input():
    a = PL.draw_pools(np.random.default_rng(5), 7)
    b = PL.draw_pools(np.random.default_rng(5), 7)
    assert [s for s, _ in a] == list(PL.SCENARIOS) + list(PL.SCENARIOS[:2])
    assert a == b
    assert a != PL.draw_pools(np.random.default_rng(6), 7)
    assert [m.name for m in a[0][1]] == ["m0", "m1", "m2", "m3"]
    with pytest.raises(ValueError, match="`scenario`"):
        PL.draw_pool(np.random.default_rng(0), "rigged")
    with pytest.raises(ValueError, match="`n`"):
        PL.draw_pools(np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="`price`"):
        PL.PoolPrior(price=(1.0, 0.5))
    with pytest.raises(ValueError, match="`n_models`"):
        PL.PoolPrior(n_models=1)


def test_bias_moves_every_edit_along_the_models_own_direction():
    theta = np.array([0.5, -1.0, 2.0])
    m = SimulatedLLM("b", cost=1.0, step=1e-12, bias=0.2, bias_seed=3)
    ctx = dict(step=0, budget=10)
    moves = [m.propose([Candidate(theta=theta)], dict(ctx, rng=np.random.default_rng(s)))[0][0]
             .theta - theta for s in range(3)]
    d = np.random.default_rng(3).standard_normal(3)
    want = 0.2 * (np.abs(theta) + 1) * d / np.linalg.norm(d)
    for mv in moves:
        np.testing.assert_allclose(mv, want, atol=1e-9)
    other = SimulatedLLM("c", cost=1.0, step=1e-12, bias=0.2, bias_seed=4)
    mv = other.propose([Candidate(theta=theta)], dict(ctx, rng=np.random.default_rng(0)))[0]
    assert not np.allclose(mv[0].theta - theta, want)


def _quad_eval(cands):
    out = []
    for c in cands:
        out.append(None if c is None else S.EvalOutcome(
            True, -float(np.sum((np.asarray(c.theta) - 1.0) ** 2))))
    return out


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_search_over_many_pools_calls_each_runs_own_pool_and_prices():
    drawn = PL.draw_pools(np.random.default_rng(2), 3)
    run_pools = [p for _, p in drawn for _ in range(2)]
    init = [Candidate(theta=np.zeros(3)), Candidate(theta=np.full(3, 0.3))]
    routers = [r for r in S.standard_routers(4, 2 + 6, ablations=())
               if r.name in ("only arm1", "uniform", "ballad-cost", "ballad-budget")]
    logs = S.search(_quad_eval, run_pools[0], routers, list(range(6)), init=init, n_calls=6,
                    key=__import__("jax").random.key(0), run_pools=run_pools)
    for i, log in enumerate(logs):
        pool = run_pools[i % 6]
        for node in log.genealogy.nodes[2:]:
            if node.ok:
                assert node.candidate.note == pool[node.model].name
        np.testing.assert_allclose(log.cost, np.cumsum([pool[a].cost for a in log.arms]))
        if log.router.startswith("ballad-"):
            np.testing.assert_allclose(np.asarray(log.policy_state.costs),
                                       [m.cost for m in pool], rtol=1e-6)
        if log.router == "ballad-budget":  # under 30% of always calling the dearest
            assert log.cost[-1] <= 0.3 * 6 * max(m.cost for m in pool) * (1 + 1e-5)
    with pytest.raises(ValueError, match="one pool per seed"):
        S.search(_quad_eval, run_pools[0], routers, [0], init=init, n_calls=2,
                 run_pools=run_pools)


def _fake_pools(gains, n_pools=8, n_seeds=4, seed=0):
    """Over-pools results where router r's test objective is the best single's plus
    ``gains[r]`` (relative, higher is better) with small seed noise."""
    rng = np.random.default_rng(seed)
    names = ["only m0", "only m1"] + list(gains)
    k = 2
    test = np.empty((len(names), n_pools, n_seeds))
    test[0] = 10.0 + rng.normal(0, 0.01, (n_pools, n_seeds))
    test[1] = 8.0 + rng.normal(0, 0.01, (n_pools, n_seeds))
    for r, g in enumerate(gains.values()):
        test[k + r] = 10.0 * (1 + g) + rng.normal(0, 0.02, (n_pools, n_seeds))
    cost = np.ones((len(names), n_pools, n_seeds))
    cost[0] = 5.0  # m0 is the dearest (price 1 x 5 calls), m1 the cheap one
    cost[1] = 0.5
    curve = np.repeat(test[..., None], 5, axis=3)
    curve[..., 0] = 7.0
    cost_curve = np.cumsum(np.repeat((cost / 5)[..., None], 5, axis=3), axis=3)
    return PoolRuns(problem="tsp", objective="score", lower_is_better=False, routers=names,
                scenarios=list(PL.SCENARIOS) + list(PL.SCENARIOS[:3]),
                prices=np.tile([1.0, 0.1], (n_pools, 1)), test=test, cost=cost, best=curve,
                cost_curve=cost_curve)


def test_pool_table_and_claims_on_known_answers():
    res = _fake_pools({"uniform": -0.2, "ucb1": 0.0, "ballad": 0.1, "ballad -credit": 0.1,
                       "ballad-cost": 0.1, "ballad-budget": -0.001})
    tab = pool_table(res, 0.02)
    assert tab.ref == [0] * 8 and tab.top == [0] * 8 and tab.ties == 0
    r = tab.routers
    assert r["ballad"].verdicts == ["beats"] * 8
    assert r["ucb1"].verdicts == ["matches"] * 8
    assert r["uniform"].verdicts == ["short"] * 8
    np.testing.assert_allclose(r["ballad"].rel, 0.1, atol=0.01)
    np.testing.assert_allclose(r["ballad"].saving, 0.8)
    # ballad reaches the single model's final value on its 2nd call (cost 0.4 of 5)
    assert r["ballad"].reach[0][2] == pytest.approx(0.4 / 5)
    assert r["only m1"].reach[0][0] == math.inf  # it never gets half way
    rows = pool_claims([res], CFG)
    assert {c.kind for c in rows} == {"extension"}  # the paper's claims: the named pool
    claims = {c.claim.split(": ", 1)[1]: c.verdict for c in rows}
    assert claims["Ballad matches or beats the best single proposer in hindsight (chosen on "
                  "validation)"] == "yes"
    assert claims["Ballad beats uniform routing"] == "yes"
    assert claims["Ballad saves more than 25% of the cost of always calling the most "
                  "expensive proposer"] == "yes"
    assert claims["the genealogy credit improves Ballad (ablation)"] == "not shown"
    assert claims["cost-aware Ballad (index per unit cost) matches or beats Ballad's test "
                  "objective"] == "yes"
    md, metrics = pool_section(res, CFG)
    assert "| ballad |" in "\n".join(md) and metrics["ballad"]["beats"] == 1.0
    assert "same test value in 0 of 8 pools" in "\n".join(md)
    # the best single proposer is chosen on validation, not on the test values
    val = res.test.copy()
    val[1] += 5.0  # m1 is the better one on the validation instances
    assert pool_table(replace(res, val=val), 0.02).ref == [1] * 8
    # the unit of the relative numbers: the classic heuristic's test objective
    np.testing.assert_allclose(pool_table(replace(res, baseline_test=20.0), 0.02).routers[
        "ballad"].rel, 0.05, atol=0.005)
    tied = replace(res, test=res.test.copy())
    tied.test[1] = tied.test[0]  # both proposers alone end at the same value
    assert pool_table(tied, 0.02).ties == 8

    worse = _fake_pools({"uniform": 0.0, "ucb1": 0.0, "ballad": -0.1, "ballad -credit": 0.0,
                         "ballad-cost": -0.3, "ballad-budget": 0.0}, seed=1)
    claims = {c.claim.split(": ", 1)[1]: c.verdict for c in pool_claims([worse], CFG)}
    assert claims["Ballad matches or beats the best single proposer in hindsight (chosen on "
                  "validation)"] == "no"
    assert claims["Ballad beats uniform routing"] == "no"
    assert claims["the genealogy credit improves Ballad (ablation)"] == "no"

    # pools that disagree: neither a match nor a difference can be shown
    mixed = _fake_pools({"uniform": 0.0, "ucb1": 0.0, "ballad": 0.0, "ballad -credit": 0.0,
                         "ballad-cost": 0.0, "ballad-budget": 0.0}, n_pools=4, seed=2)
    mixed.test[4] += np.array([3.0, -3.0, 2.0, -2.5])[:, None]
    claims = {c.claim.split(": ", 1)[1]: c.verdict for c in pool_claims([mixed], CFG)}
    assert claims["Ballad matches or beats the best single proposer in hindsight (chosen on "
                  "validation)"] == "not shown"
