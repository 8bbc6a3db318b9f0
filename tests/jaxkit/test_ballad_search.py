"""Ballad's population, offline pool, discovery loop and pipeline."""

import math

import jax
import numpy as np
import pytest
from jaxkit.kernels import bandit

from jaxkit.ballad import search as S
from jaxkit.ballad.llm import Candidate, LLMError
from jaxkit.ballad.pools import SimulatedLLM, default_pool
from jaxkit.ballad.population import Genealogy, Population

TARGET = np.array([1.0, -2.0, 0.5])


def quad_evaluate(cands):
    """score = -||theta - TARGET||^2 in NumPy; a theta with a NaN fails."""
    out = []
    for c in cands:
        if c is None:
            out.append(None)
        elif not np.all(np.isfinite(c.theta)):
            out.append(S.EvalOutcome(False, -math.inf, "theta has NaN"))
        else:
            out.append(S.EvalOutcome(True, -float(np.sum((c.theta - TARGET) ** 2))))
    return out


def init_pop(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return [Candidate(theta=rng.standard_normal(3)) for _ in range(n)]


# ----------------------------------------------------------------- genealogy, population


def test_genealogy_order_and_failures():
    g = Genealogy()
    a = g.add(Candidate(theta=np.zeros(1)), 1.0)
    b = g.add(None, float("nan"), ok=False, parents=[a.id], model=2, error="boom")
    assert b.score == -math.inf and b.error == "boom" and b.parents == (0,)
    with pytest.raises(ValueError, match="not an earlier node"):
        g.add(None, 0.0, parents=[5])
    with pytest.raises(ValueError, match="not an earlier node"):
        g.add(None, 0.0, parents=[2])  # itself: a cycle
    with pytest.raises(ValueError, match="finite score"):
        g.add(None, float("nan"))
    np.testing.assert_array_equal(g.parent_matrix(2), [[-1, -1], [0, -1]])
    assert g.best().id == 0


def test_population_survival_and_selection():
    g = Genealogy()
    ids = [g.add(Candidate(theta=np.zeros(1)), s).id for s in [1.0, 5.0, 3.0, 3.0]]
    pop = Population(g, n_islands=1, island_size=2)
    pop.seed(ids)
    assert pop.islands[0] == [1, 2]  # best two, duplicate score 3.0 rejected
    worse = g.add(None, 0.5, parents=[1]).id
    assert not pop.add(worse)
    fail = g.add(None, 0.0, ok=False, parents=[1]).id
    assert not pop.add(fail)
    better = g.add(None, 9.0, parents=[1]).id
    assert pop.add(better) and pop.islands[0] == [better, 1]
    # EoH rank weights 1/(r + n): with n = 2, P(best) = (1/2) / (1/2 + 1/3) = 0.6
    rng = np.random.default_rng(0)
    picks = [pop.select_parents(rng, 1)[1][0] for _ in range(4000)]
    assert abs(np.mean(np.array(picks) == better) - 0.6) < 0.03


def test_population_islands_reset():
    g = Genealogy()
    ids = [g.add(None, s).id for s in [1.0, 10.0, 2.0, 20.0]]
    pop = Population(g, n_islands=2, island_size=3, reset_every=1)
    pop.seed(ids)  # island 0: scores 1, 2; island 1: 10, 20
    child = g.add(None, 3.0, parents=[0]).id
    pop.add(child, 0)
    # after the reset the worse island restarts from the better island's best node
    assert pop.islands[0] == [3] and pop.islands[1] == [3, 1]


# ----------------------------------------------------------------- simulated pool


def test_simulated_llm_is_reproducible_and_fails_with_cost():
    m = SimulatedLLM("m", cost=0.3, step=0.5, tail_df=2.0, insight=0.5)
    parents = [Candidate(theta=np.ones(3))]
    ctx = dict(step=0, budget=10, examples=[(np.zeros(3), 1.0), (np.ones(3), 0.0)])
    a, cost = m.propose(parents, dict(ctx, rng=np.random.default_rng(1)))
    b, _ = m.propose(parents, dict(ctx, rng=np.random.default_rng(1)))
    np.testing.assert_array_equal(a[0].theta, b[0].theta)
    assert cost == 0.3 and not np.allclose(a[0].theta, 1.0)
    broken = SimulatedLLM("broken", cost=2.0, step=0.1, fail_prob=1.0)
    with pytest.raises(LLMError, match="no parsable code") as err:
        broken.propose(parents, dict(ctx, rng=np.random.default_rng(0)))
    assert err.value.cost == 2.0
    with pytest.raises(LLMError, match="theta"):
        m.propose([Candidate(source="def priority(i, b): return b")],
                  dict(ctx, rng=np.random.default_rng(0)))


def test_simulated_llm_drift_and_insight():
    m = SimulatedLLM("m", cost=1.0, step=0.0, insight=1.0, drift=((0.5, 0.0, 1.0),))
    parents = [Candidate(theta=np.zeros(2))]
    ex = [(np.array([2.0, 2.0]), 1.0), (np.array([1.0, 1.0]), 0.5)]
    early, _ = m.propose(parents, dict(rng=np.random.default_rng(0), step=1, budget=10,
                                       examples=ex))
    late, _ = m.propose(parents, dict(rng=np.random.default_rng(0), step=6, budget=10,
                                      examples=ex))
    assert np.all(early[0].theta > 0)  # moved toward the better examples
    np.testing.assert_array_equal(late[0].theta, 0.0)  # insight switched off after drift


# ----------------------------------------------------------------- the loop


POOL = [SimulatedLLM("careful", cost=1.0, step=0.1, insight=0.5),
        SimulatedLLM("wild", cost=0.1, step=1.0, tail_df=1.5),
        SimulatedLLM("broken", cost=0.5, step=0.1, fail_prob=1.0)]


@pytest.fixture(scope="module")
def loop_logs():
    init = init_pop()
    routers = S.standard_routers(len(POOL), len(init) + 30, [m.name for m in POOL])
    logs = S.search(quad_evaluate, POOL, routers, [0, 1], init=init, n_calls=30)
    return routers, logs


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_search_records_every_call(loop_logs):
    routers, logs = loop_logs
    assert len(logs) == len(routers) * 2
    for log in logs:
        g = log.genealogy
        assert len(g) == 4 + 30  # every call is a node, failures included
        calls = g.nodes[4:]
        assert [n.model for n in calls] == list(log.arms)
        assert all(0 <= p < n.id for n in calls for p in n.parents)
        fails = [n for n in calls if not n.ok]
        assert len(fails) == log.failures
        assert all(n.model == 2 and "no parsable code" in n.error for n in fails)
        cost = np.cumsum([POOL[n.model].cost for n in calls])
        np.testing.assert_allclose(log.cost, cost)
        assert np.all(np.diff(log.best) >= 0)
        assert log.best[-1] == max(n.score for n in g.nodes if n.ok)


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_search_routers(loop_logs):
    routers, logs = loop_logs
    by = {}
    for log in logs:
        by.setdefault(log.router, []).append(log)
    for k, m in enumerate(POOL):
        assert all(np.all(lg.arms == k) for lg in by[f"only {m.name}"])
    assert all(lg.failures == 30 for lg in by["only broken"])
    assert all(lg.best[-1] == lg.best[0] for lg in by["only broken"])
    uni = np.concatenate([lg.arms for lg in by["uniform"]])
    assert set(uni.tolist()) == {0, 1, 2}
    # a bandit learns to avoid the proposer that always fails
    for name in ("ballad", "ucb1"):
        arms = np.concatenate([lg.arms for lg in by[name]])
        assert np.mean(arms == 2) < 0.25, name
    # and the search makes progress
    assert np.mean([lg.best[-1] for lg in by["ballad"]]) > logs[0].best[0] - 1e-9


def test_search_ballad_state_mirrors_genealogy():
    init = init_pop()
    pol = bandit.ballad(len(POOL), capacity=len(init) + 8)
    logs = S.search(quad_evaluate, POOL, [S.Router("b", policy=pol)], [3, 4], init=init,
                    n_calls=8)
    for log in logs:
        g, st = log.genealogy, log.policy_state
        assert int(st.n_nodes) == len(g) == 12 and int(st.t) == 8
        np.testing.assert_array_equal(st.arm[4:], log.arms)
        np.testing.assert_array_equal(st.arm[:4], -1)
        np.testing.assert_array_equal(st.parents, g.parent_matrix(2))
        np.testing.assert_array_equal(np.asarray(st.pulls), np.bincount(log.arms, minlength=3))
        # rewards are ranks in [0, 1]; failures score 0
        fails = np.array([not n.ok for n in g.nodes[4:]])
        assert np.all(np.asarray(st.score)[4:][fails] == 0)
        assert np.all((np.asarray(st.score) >= 0) & (np.asarray(st.score) <= 1))


def test_search_bad_input():
    init = init_pop()
    with pytest.raises(ValueError, match="arm 5 out of range"):
        S.search(quad_evaluate, POOL, [S.Router("x", "fixed", arm=5)], [0], init=init,
                 n_calls=1)
    with pytest.raises(ValueError, match="policy has 2 arms"):
        S.search(quad_evaluate, POOL, [S.Router("x", policy=bandit.ucb1(2))], [0],
                 init=init, n_calls=1)
    with pytest.raises(ValueError, match="initial candidate 0 failed to evaluate: theta has NaN"):
        S.search(quad_evaluate, POOL, [S.Router("u", "uniform")], [0],
                 init=[Candidate(theta=np.full(3, np.nan))], n_calls=1)
    with pytest.raises(ValueError, match="needs a `policy`"):
        S.Router("x", "policy")
    with pytest.raises(ValueError, match="`kind`"):
        S.Router("x", "greedy")


def test_theta_evaluator_failures():
    score = jax.jit(lambda th, inst: -((inst - th.sum()) ** 2))
    ev = S.theta_evaluator(score, np.arange(3.0), 4, np.zeros(2))
    out = ev([Candidate(theta=np.array([1.0, 0.0])), None,
              Candidate(theta=np.array([np.nan, 0.0])), Candidate(theta=np.zeros(3))])
    assert out[0].ok and out[0].score == pytest.approx(-np.mean((np.arange(3.0) - 1) ** 2))
    assert out[1] is None
    assert not out[2].ok and "NaN" in out[2].error
    assert not out[3].ok and "shape" in out[3].error
    many = ev([Candidate(theta=np.array([float(k), 0.0])) for k in range(9)])  # 3 chunks
    assert [o.score for o in many] == pytest.approx(
        [-np.mean((np.arange(3.0) - k) ** 2) for k in range(9)])


@pytest.mark.slow  # test-time budget: ~2 s CPU; kept in the slow set
def test_theta_evaluator_8_devices_equal_one():
    from jaxkit.ballad import problems
    from jaxkit.distributed import make_mesh

    assert jax.device_count() == 8
    prob = problems.make("tsp", 8)
    inst = prob.generate(jax.random.key(0), 2)
    rng = np.random.default_rng(0)
    cands = [Candidate(theta=prob.baseline + rng.standard_normal(prob.baseline.size))
             for _ in range(5)] + [None]
    one = S.theta_evaluator(prob.score, inst, 6, prob.baseline)(cands)
    many = S.theta_evaluator(prob.score, inst, 6, prob.baseline, mesh=make_mesh())(cands)
    assert one[-1] is None and many[-1] is None
    np.testing.assert_allclose([o.score for o in many[:5]], [o.score for o in one[:5]],
                               rtol=1e-12)


def test_default_pool_prices_and_names():
    pool = default_pool()
    assert len({m.name for m in pool}) == 4
    costs = [m.cost for m in pool]
    assert costs == sorted(costs, reverse=True)  # the strongest is the most expensive


# ----------------------------------------------------------------- pipeline


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_pipeline_quick_and_resume(tmp_path):
    from jaxkit.ballad import pipeline
    from jaxkit.ballad.config import Config, ProgramSettings, RealSettings
    from jaxkit.registry import RunContext

    # the real-proposer stage is off (its default, 12 calls on 5000-item instances, loads
    # SmolLM2 and took 27 min here; test_ballad_real covers it)
    cfg = Config(problems=("tsp",), seeds=2, calls=6, train_instances=2, test_instances=2,
                 n_init=3, full_test=False, train_full=(), pool_problems=("tsp",), pools=2,
                 pool_seeds=1, pool_calls=6,  # 2 x 1 runs per router, like the 2 seeds
                 program=ProgramSettings(calls=2, seeds=1, items=20, timeout=5.0),
                 real=RealSettings(calls=0))
    ctx = RunContext(out_dir=tmp_path, config=cfg, quick=True)
    res = pipeline.run(ctx)
    rows = res.metrics["tsp"]
    assert [r["router"] for r in rows][:4] == [f"only {m.name}" for m in default_pool()]
    ref = next(r for r in rows if r["router"] == "only frontier")
    assert ref["saving"] == 0.0 and ref["cost"] == pytest.approx(6.0)
    assert next(r for r in rows if r["router"] == "only open-weight")["saving"] == \
        pytest.approx(0.99)
    for r in rows:
        assert abs(sum(r["share"]) - 1) < 1e-9
        assert r["test"][0] > 0  # a tour length
    assert "| ballad |" in res.markdown and "best single model" in res.markdown
    assert "indistinguishable" not in res.markdown
    assert (tmp_path / "ballad_best_vs_budget.png").stat().st_size > 1000
    # five paper rows, then per problem a setup row, uniform routing and three ablations,
    # the simulated costlier-models row, then six extension rows over pools
    assert len(res.claims) == 5 + 5 + 1 + 6
    assert [c.kind for c in res.claims].count("paper") == 5
    assert {c.verdict for c in res.claims} <= {"yes", "no", "not shown", "not tested",
                                               "not tested at this size"}
    assert sum("over random pools" in c.claim for c in res.claims) == 6
    assert "Over 2 random pools: tsp" in res.markdown
    pooled = res.metrics["pools-tsp"]
    assert set(pooled) == {"only m0", "only m1", "only m2", "only m3", "uniform", "ucb1",
                           "ballad", "ballad -credit", "ballad-cost", "ballad-budget"}
    for row in pooled.values():  # each pool's verdict is one of the four
        assert sum(row[w] for w in ("beats", "matches", "short", "not shown")) == \
            pytest.approx(1.0)
    ctx2 = RunContext(out_dir=tmp_path, config=cfg, quick=True)
    res2 = pipeline.run(ctx2)
    assert "## Program space" in res.markdown and set(res.metrics["program"]["rows"]) == \
        {"only frontier", "uniform", "ballad", "ballad-cost"}
    assert ctx2.reloaded == ["ballad-tsp", "pools-tsp", "ballad-program"]
    assert res2.metrics == res.metrics and res2.claims == res.claims
    other = pipeline.run(RunContext(out_dir=tmp_path, config=cfg, quick=True, seed=1))
    assert other.metrics != res.metrics  # keys come from the run seed


def test_config_validation_and_override():
    from jaxkit.ballad.config import FULL, QUICK, Config

    assert QUICK.problems == ("tsp",) and QUICK.seeds == 3 and QUICK.pools == 5
    assert FULL.seeds == 10 and FULL.full_test and FULL.pools >= 50
    assert len(FULL.problems) == 5 and FULL.pool_problems == ("binpacking_weibull", "tsp",
                                                              "cvrp")
    assert Config(pool_problems=()).pool_problems == ()  # skips the over-pools stage
    assert QUICK.override(["seeds=5", "problems=tsp,knapsack"]).problems == ("tsp", "knapsack")
    with pytest.raises(ValueError, match="`problems`"):
        Config(problems=("sat",))
    with pytest.raises(ValueError, match="`seeds`"):
        Config(seeds=0)
    with pytest.raises(ValueError, match="`margin_knapsack`"):
        Config(margin_knapsack=0.0)
    with pytest.raises(ValueError, match="`pools`"):
        Config(pools=0)
    # the runs over pools search on their own instance count (FULL's 16 are for knapsack)
    assert FULL.train_instances == 16 and FULL.pool_train_instances == 4
    with pytest.raises(ValueError, match="`pool_train_instances`"):
        Config(pool_train_instances=0)
    with pytest.raises(ValueError, match="`cost_weight`"):
        Config(cost_weight=-1.0)
    with pytest.raises(ValueError, match="`pool_problems`"):
        Config(pool_problems=("tsp", "tsp"))


def test_match_verdict_needs_equivalence_not_a_wide_interval():
    from jaxkit.ballad.report import match_verdict

    # a wide interval around zero used to read "statistically indistinguishable"
    assert match_verdict(np.array([-2.0, 2.5, -1.5, 1.0]), 0.1)[0] == "not shown"
    v, status, _, eq = match_verdict(np.array([0.01, -0.01, 0.02, 0.0, -0.02]), 0.1)
    assert v == "yes" and status.startswith("matches") and eq.verdict == "yes"
    assert match_verdict(np.array([1.0, 1.2, 0.9, 1.1]), 0.1)[1] == "beats"
    assert match_verdict(np.array([-1.0, -1.2, -0.9, -1.1]), 0.1)[:2] == ("no",
                                                                         "falls short of")


def test_search_with_key_is_reproducible_and_seeds_are_labels():
    init = init_pop()
    routers = [S.Router("u", "uniform"), S.Router("b", policy=bandit.ballad(3, capacity=16))]
    a = S.search(quad_evaluate, POOL, routers, [0, 1], init=init, n_calls=8,
                 key=jax.random.key(3))
    b = S.search(quad_evaluate, POOL, routers, [5, 9], init=init, n_calls=8,
                 key=jax.random.key(3))
    c = S.search(quad_evaluate, POOL, routers, [0, 1], init=init, n_calls=8,
                 key=jax.random.key(4))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.arms, y.arms)
        np.testing.assert_array_equal(x.best, y.best)
    assert any(not np.array_equal(x.best, y.best) or not np.array_equal(x.arms, y.arms)
               for x, y in zip(a, c, strict=True))


class _Raises:
    name = "raises"

    def propose(self, parents, context):
        raise ZeroDivisionError("bug")


class _Empty:
    name = "empty"

    def propose(self, parents, context):
        return [], 0.5


def test_search_survives_proposer_bugs_and_reports_each_step():
    seen = []

    def on_step(t, logs):
        seen.append((t, len(logs[0].genealogy)))

    logs = S.search(quad_evaluate, [_Raises(), _Empty()], [S.Router("u", "uniform")], [0],
                    init=init_pop(2), n_calls=6, on_step=on_step)
    assert seen == [(-1, 2)] + [(t, 3 + t) for t in range(6)]
    g = logs[0].genealogy
    errors = {g.nodes[i].model: g.nodes[i].error for i in range(2, 8)}
    assert errors[0] == "ZeroDivisionError: bug"
    assert "proposer returned no candidate" in errors[1]
    np.testing.assert_allclose(logs[0].cost[-1], 0.5 * sum(n.model == 1 for n in g.nodes))
    assert logs[0].failures == 6
