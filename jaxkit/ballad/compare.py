"""The routing comparison on one problem: every router x seed, then the test scores.

For a problem (:mod:`jaxkit.ballad.problems`) a population of parametric priority
heuristics is evolved by a pool of proposers (:func:`jaxkit.ballad.pools.default_pool`,
offline simulated LLMs of different capability, tails, drift and price), each run
routed by one router (:func:`jaxkit.ballad.search.standard_routers`): every single model
alone, uniform random routing, UCB1, Ballad (:func:`jaxkit.kernels.bandit.ballad`) and
Ballad without each of its three parts. All routers start from the same initial
population and see the same instances; runs differ in the proposers' and the parent
selection's randomness. The best heuristic of each run is scored on held-out test
instances.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from jaxkit.stats import Verdict, superiority, t_interval

from . import pools as pool_mod
from . import problems
from . import search as S_
from .config import Config
from .llm import Candidate
from .results import PoolRouter, PoolRuns, PoolTable, RouterRuns, RouterSummary

__all__ = ["initial_population", "search_problem", "search_pools", "summarise",
           "match_verdict", "pool_table", "POOL_ROUTERS"]

# routers of the over-pools experiment (the singles come first, one per proposer slot)
POOL_ROUTERS = ("uniform", "ucb1", "ballad", "ballad -credit", "ballad-cost", "ballad-budget")


def initial_population(problem, n: int, rng: np.random.Generator) -> list[Candidate]:
    """The problem's classic heuristic plus ``n - 1`` perturbations of it (scale 0.5)."""
    base = np.asarray(problem.baseline, np.float64)
    return [Candidate(theta=base.copy(), note="baseline")] + [
        Candidate(theta=base + 0.5 * rng.standard_normal(base.size), note="init")
        for _ in range(n - 1)]


def search_problem(cfg: Config, name: str, keys: dict[str, Any], rng: np.random.Generator,
                   *, track=None, mesh=None, test: dict | None = None,
                   pool: list | None = None, problem=None) -> RouterRuns:
    """Run every router x seed on problem ``name``.

    Args:
        cfg: the pipeline configuration.
        name: the problem.
        keys: JAX keys ``train``, ``val`` and ``test`` (instances) and ``search`` (the
            runs).
        rng: host generator of the initial population.
        track: ``track(iterable, text, total)`` progress wrapper.
        mesh: a mesh with a "data" axis (candidates sharded over it), or None.
        test: the test instances (the user's, :mod:`jaxkit.ballad.instances`) instead
            of generated ones.
        pool: the proposers (default: :func:`jaxkit.ballad.pools.default_pool`).
        problem: a :class:`jaxkit.ballad.problems.Problem` searched and scored instead
            of the registered problem ``name`` (``name`` then only labels the result and
            picks its margin; the negative control of the tests uses it).

    Returns:
        Arrays (picklable) for the report: per run (routers outer, seeds inner) the best
        objective and the cumulative cost after each call, the proposer of each call,
        the failures and the validation and test objectives of the run's best heuristic.
    """

    prob = problem or problems.get(name, quick=name not in cfg.train_full)
    test_prob = problem or problems.get(name, quick=not cfg.full_test)
    train = prob.generate(keys["train"], cfg.train_instances)
    if test is None:
        test = test_prob.generate(keys["test"], cfg.test_instances)
    val = test_prob.generate(keys["val"], cfg.val_instances)
    pool = pool_mod.default_pool() if pool is None else list(pool)
    init = initial_population(prob, cfg.n_init, rng)
    routers = S_.standard_routers(len(pool), len(init) + cfg.calls, [m.name for m in pool],
                                  cost_weight=cfg.cost_weight, budget=cfg.budget)
    seeds = list(range(cfg.seeds))
    evaluate = S_.theta_evaluator(prob.score, train, len(routers) * len(seeds), prob.baseline,
                                  mesh=mesh)
    bar = iter(track(range(cfg.calls), f"ballad {name}", total=cfg.calls)) if track else None
    logs = S_.search(evaluate, pool, routers, seeds, init=init, n_calls=cfg.calls,
                     key=keys["search"],
                     progress=(lambda t: next(bar, None)) if bar else None)
    if bar is not None:
        for _ in bar:  # drain so the progress task closes
            pass

    best_theta = np.stack([log.genealogy.best().candidate.theta for log in logs])
    scored = np.asarray(_test_scores(
        test_prob.score, np.vstack([best_theta, np.asarray(prob.baseline)[None]]), test))
    test_scores, base_test = scored[:-1], float(scored[-1])
    val_scores = np.asarray(_test_scores(test_prob.score, best_theta, val))
    sign = -1.0 if prob.lower_is_better_objective else 1.0
    return RouterRuns(
        problem=name, objective=prob.objective, lower_is_better=prob.lower_is_better_objective,
        routers=[r.name for r in routers], models=[m.name for m in pool],
        model_cost=[m.cost for m in pool], n_seeds=len(seeds),
        best=sign * np.stack([log.best for log in logs]),  # objective after each call
        cost=np.stack([log.cost for log in logs]),
        arms=np.stack([log.arms for log in logs]),
        failures=np.array([log.failures for log in logs]),
        test=sign * test_scores, val=sign * val_scores, baseline_test=sign * base_test,
        init_best=sign * max(logs[0].genealogy.nodes[i].score for i in range(len(init))),
        best_theta=best_theta)


def with_optimum(res: RouterRuns, cfg: Config, keys: dict[str, Any], test=None,
                 optimum: float | None = None) -> RouterRuns:
    """``res`` of :func:`search_problem` with ``optimum_test``, the mean best objective of
    its test instances, and ``optimum_source``: ``optimum`` where given (the best known
    values a standard or user instance file records,
    :func:`jaxkit.ballad.instances.instance_optimum`), else the exact optimum where the
    problem has an exact solver (knapsack: :func:`jaxkit.ballad.reference.knapsack_optimum`
    on ``test``, or on the test instances regenerated from ``keys["test"]`` as the search
    made them); ``res`` unchanged otherwise."""
    from .reference import knapsack_optimum

    if optimum is not None:
        return res.replace(optimum_test=float(optimum),
                    optimum_source="best known values of the instance file")
    if res.problem != "knapsack":
        return res
    if test is None:
        test = problems.get("knapsack", quick=not cfg.full_test).generate(
            keys["test"], cfg.test_instances)
    opt = [knapsack_optimum(w, v, problems.KNAPSACK_CAPACITY)
           for w, v in zip(np.asarray(test["weights"]), np.asarray(test["values"]), strict=True)]
    return res.replace(optimum_test=float(np.mean(opt)),
                optimum_source="exact optimum by dynamic programming")


def _test_scores(score, thetas, instances):
    """Mean test score of each row of ``thetas`` (instances passed as an argument)."""
    import jax.numpy as jnp

    return _scorer(score)(jnp.asarray(thetas), instances)


@functools.lru_cache(maxsize=32)
def _scorer(score):
    """One jitted batch scorer per score function, so that the test and the validation
    instances (same shapes) share its compiled code."""
    import jax
    import jax.numpy as jnp

    return jax.jit(jax.vmap(lambda th, inst: jnp.mean(score(th, inst)), in_axes=(0, None)))


def match_verdict(gain, margin: float) -> tuple[str, str, Verdict, Verdict]:
    """Does Ballad match or beat a reference, from per-seed improvements ``gain``?

    "Matches or beats" is non-inferiority: "yes" when the 90% t interval of the mean
    improvement lies above ``-margin`` (one-sided, 5%), "no" when it lies below it,
    else "not shown" (a wide interval around zero is not a match).

    Returns:
        ``(verdict, status, superiority, non_inferiority)``: verdict "yes" / "no" /
        "not shown" and the status words "beats" (also shown better at 95%),
        "matches (within ±margin)", "falls short of" or "is not shown to match".
    """
    sup = superiority(gain)
    ni = superiority(gain, margin=-margin, level=0.90)
    if ni.verdict == "yes":
        return "yes", ("beats" if sup.verdict == "yes"
                       else f"matches (within ±{margin:.3g})"), sup, ni
    if ni.verdict == "no":
        return "no", "falls short of", sup, ni
    return "not shown", "is neither shown to beat nor to match", sup, ni


def summarise(res: RouterRuns) -> list[RouterSummary]:
    """Per-router statistics over seeds (objective in the problem's own direction):
    95% t intervals of the final training, validation and test objectives (results
    without validation scores, recorded before they existed, use the test ones), mean
    cost, saving against always calling the most expensive model, share of runs reaching
    that model's mean final objective and the median cost to reach it, share of calls per
    model, and the per-seed validation and test objectives and costs (for the paired
    claim tests)."""
    n_r, n_s = len(res.routers), res.n_seeds
    lower = res.lower_is_better
    best = res.best.reshape(n_r, n_s, -1)
    cost = res.cost.reshape(n_r, n_s, -1)
    arms = res.arms.reshape(n_r, n_s, -1)
    test = res.test.reshape(n_r, n_s)
    val = np.asarray(res.test if res.val is None else res.val).reshape(n_r, n_s)
    fails = res.failures.reshape(n_r, n_s)
    costs = np.asarray(res.model_cost)
    strongest = int(np.argmax(costs))
    ref = res.routers.index(f"only {res.models[strongest]}")
    target = best[ref, :, -1].mean()
    ref_cost = cost[ref, :, -1].mean()
    rows = []
    for r, name in enumerate(res.routers):
        final = best[r, :, -1]
        reached = (best[r] <= target) if lower else (best[r] >= target)
        first = np.where(reached.any(1), reached.argmax(1), -1)
        cost_to = np.array([cost[r, s, f] if f >= 0 else np.nan for s, f in enumerate(first)])
        share = np.bincount(arms[r].ravel(), minlength=len(costs)) / arms[r].size
        rows.append(RouterSummary(
            router=name, final=t_interval(final), test=t_interval(test[r]),
            val=t_interval(val[r]),
            cost=float(cost[r, :, -1].mean()),
            saving=float(1 - cost[r, :, -1].mean() / ref_cost),
            reach=float(np.mean(first >= 0)),
            cost_to_target=float(np.nanmedian(cost_to)) if np.any(first >= 0) else math.nan,
            share=share.tolist(), failures=float(fails[r].mean()),
            test_values=test[r].tolist(), val_values=val[r].tolist(),
            cost_values=cost[r, :, -1].tolist()))
    return rows


def search_pools(cfg: Config, name: str, keys: dict[str, Any], rng_pools: np.random.Generator,
                 rng_init: np.random.Generator, *, track=None, mesh=None) -> PoolRuns:
    """Every router of :data:`POOL_ROUTERS` (and every proposer alone) on ``cfg.pools``
    random pools (:func:`jaxkit.ballad.pools.draw_pools`) x ``cfg.pool_seeds`` seeds of
    problem ``name`` with ``cfg.pool_calls`` calls each, all runs in one lockstep loop
    (seed ``j`` of pool ``p`` is run ``p * pool_seeds + j`` of each router). The search
    runs on ``cfg.pool_train_instances`` training instances of the quick size (there are
    many runs); the test
    instances are full-size with ``cfg.full_test``.

    Returns:
        Picklable arrays: per pool the scenario, the prices, and per (router, pool,
        seed) the validation and test objectives of the run's best heuristic, its final
        cost and the best-so-far objective and cumulative cost after each call; the
        classic heuristic's test objective.
    """

    from .pools import draw_pools

    prob = problems.get(name, quick=True)
    test_prob = problems.get(name, quick=not cfg.full_test)
    train = prob.generate(keys["train"], cfg.pool_train_instances)
    test = test_prob.generate(keys["test"], cfg.test_instances)
    val = test_prob.generate(keys["val"], cfg.val_instances)
    drawn = draw_pools(rng_pools, cfg.pools)
    k = len(drawn[0][1])
    init = initial_population(prob, cfg.n_init, rng_init)
    every = S_.standard_routers(k, len(init) + cfg.pool_calls, [f"m{j}" for j in range(k)],
                                ablations=("credit",), cost_weight=cfg.cost_weight,
                                budget=cfg.budget)
    routers = [r for r in every if r.kind == "fixed" or r.name in POOL_ROUTERS]
    run_pools = [p for _, p in drawn for _ in range(cfg.pool_seeds)]
    seeds = list(range(len(run_pools)))
    evaluate = S_.theta_evaluator(prob.score, train, len(routers) * len(seeds), prob.baseline,
                                  mesh=mesh)
    n_calls = cfg.pool_calls
    bar = iter(track(range(n_calls), f"pools {name}", total=n_calls)) if track else None
    logs = S_.search(evaluate, run_pools[0], routers, seeds, init=init, n_calls=n_calls,
                     key=keys["search"], run_pools=run_pools,
                     progress=(lambda t: next(bar, None)) if bar else None)
    if bar is not None:
        for _ in bar:
            pass
    best_theta = np.stack([log.genealogy.best().candidate.theta for log in logs])
    scored = np.asarray(_test_scores(
        test_prob.score, np.vstack([best_theta, np.asarray(prob.baseline)[None]]), test))
    test_scores, base_test = scored[:-1], float(scored[-1])
    val_scores = np.asarray(_test_scores(test_prob.score, best_theta, val))
    sign = -1.0 if prob.lower_is_better_objective else 1.0
    shape = (len(routers), cfg.pools, cfg.pool_seeds)
    return PoolRuns(
        problem=name, objective=prob.objective, lower_is_better=prob.lower_is_better_objective,
        routers=[r.name for r in routers], scenarios=[s for s, _ in drawn],
        prices=np.array([[m.cost for m in p] for _, p in drawn]),
        test=(sign * test_scores).reshape(shape), val=(sign * val_scores).reshape(shape),
        baseline_test=sign * base_test,
        cost=np.stack([log.cost[-1] for log in logs]).reshape(shape),
        best=(sign * np.stack([log.best for log in logs])).reshape(shape + (-1,)),
        cost_curve=np.stack([log.cost for log in logs]).reshape(shape + (-1,)),
        pools=[[vars(m) for m in p] for _, p in drawn])


def _oriented(res: PoolRuns, x):
    return -np.asarray(x) if res.lower_is_better else np.asarray(x)


def pool_table(res: PoolRuns, margin: float) -> PoolTable:
    """Per-pool statistics of the over-pools experiment.

    For each pool ``p`` the best single proposer in hindsight is the one with the best
    mean *validation* objective over seeds (``ref``; chosen on validation instances, the
    comparisons are on the test instances), the most expensive proposer ``top``. The
    scale of every relative number is the classic heuristic's test objective
    (``|baseline_test|``, which no router changes; results recorded before it existed
    use ``|ref|``'s mean test objective). For each router: its per-pool relative
    improvement over ``ref`` (mean over seeds of ``(router - ref) / scale`` with the sign
    of the objective, positive = better), the per-pool verdict of the seed-level tests
    (:func:`match_verdict` with margin ``margin * scale``: "beats"
    / "matches" / "short" / "not shown"), the relative cost saving
    ``1 - cost / cost(top alone)``, and the cost at which the router's mean best-so-far
    curve first reaches ``q`` of the way from the initial best to ``ref``'s final value
    (q = 0.5, 0.9, 1.0), relative to the cost of ``top`` alone (inf: never).
    """
    names = res.routers
    n_models = res.prices.shape[1]
    test = _oriented(res, res.test)  # larger is better from here on
    val = _oriented(res, res.test if res.val is None else res.val)
    best = _oriented(res, res.best)
    n_pools = test.shape[1]
    single = test[:n_models].mean(2)  # (K, P)
    ref = val[:n_models].mean(2).argmax(0)  # ties go to the lowest proposer index
    top = res.prices.argmax(1)
    ties = np.ptp(single, axis=0) <= 1e-9 * np.maximum(np.abs(single).max(0), 1e-12)
    per_router = {}
    levels = (0.5, 0.9, 1.0)
    for r, name in enumerate(names):
        rel, verdicts, saving, reach = [], [], [], []
        for p in range(n_pools):
            scale = max(abs(float(res.baseline_test)) if res.baseline_test is not None
                        else abs(single[ref[p], p]), 1e-12)
            gain = test[r, p] - test[ref[p], p]
            rel.append(float(np.mean(gain) / scale))
            verdict, status, _, _ = match_verdict(gain, margin * scale)
            verdicts.append("beats" if status == "beats" else "matches"
                            if status.startswith("matches") else "short"
                            if verdict == "no" else "not shown")
            top_cost = res.cost[top[p], p].mean()
            saving.append(float(1 - res.cost[r, p].mean() / top_cost))
            curve = best[r, p].mean(0)
            start, goal = best[ref[p], p, :, 0].mean(), best[ref[p], p, :, -1].mean()
            cc = res.cost_curve[r, p].mean(0)
            row = []
            for q in levels:
                hit = np.nonzero(curve >= start + q * (goal - start) - 1e-12)[0]
                row.append(float(cc[hit[0]] / res.cost_curve[top[p], p, :, -1].mean())
                           if hit.size else math.inf)
            reach.append(row)
        per_router[name] = PoolRouter(rel=rel, verdicts=verdicts, saving=saving,
                                      reach=reach, levels=levels)
    return PoolTable(ref=ref.tolist(), top=top.tolist(), ties=int(ties.sum()),
                     routers=per_router)
