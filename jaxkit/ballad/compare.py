"""The routing comparison on one problem: every router x seed, then the test scores.

For a problem (:mod:`jaxkit.ballad.problems`) a population of parametric priority
heuristics is evolved by a pool of proposers (:func:`jaxkit.ballad.pool.default_pool`,
offline simulated LLMs of different capability, tails, drift and price), each run
routed by one router (:func:`jaxkit.ballad.search.standard_routers`): every single model
alone, uniform random routing, UCB1, Ballad (:func:`jaxkit.kernels.bandit.ballad`) and
Ballad without each of its three parts. All routers start from the same initial
population and see the same instances; runs differ in the proposers' and the parent
selection's randomness. The best heuristic of each run is scored on held-out test
instances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jaxkit.stats import t_interval

from . import pool as pool_mod
from . import problems
from . import search as S_
from .config import Config
from .llm import Candidate

__all__ = ["initial_population", "search_problem", "summarise"]


def initial_population(problem, n: int, rng: np.random.Generator) -> list[Candidate]:
    """The problem's classic heuristic plus ``n - 1`` perturbations of it (scale 0.5)."""
    base = np.asarray(problem.baseline, np.float64)
    return [Candidate(theta=base.copy(), note="baseline")] + [
        Candidate(theta=base + 0.5 * rng.standard_normal(base.size), note="init")
        for _ in range(n - 1)]


def search_problem(cfg: Config, name: str, keys: dict[str, Any], rng: np.random.Generator,
                   *, track=None, mesh=None) -> dict:
    """Run every router x seed on problem ``name``.

    Args:
        cfg: the pipeline configuration.
        name: the problem.
        keys: JAX keys ``train`` and ``test`` (instances) and ``search`` (the runs).
        rng: host generator of the initial population.
        track: ``track(iterable, text, total)`` progress wrapper.
        mesh: a mesh with a "data" axis (candidates sharded over it), or None.

    Returns:
        Arrays (picklable) for the report: per run (routers outer, seeds inner) the best
        objective and the cumulative cost after each call, the proposer of each call,
        the failures and the test objective of the run's best heuristic.
    """
    import jax
    import jax.numpy as jnp

    prob = problems.get(name, quick=name not in cfg.train_full)
    test_prob = problems.get(name, quick=not cfg.full_test)
    train = prob.generate(keys["train"], cfg.train_instances)
    test = test_prob.generate(keys["test"], cfg.test_instances)
    pool = pool_mod.default_pool()
    init = initial_population(prob, cfg.n_init, rng)
    routers = S_.standard_routers(len(pool), len(init) + cfg.calls, [m.name for m in pool])
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
    test_score = jax.jit(jax.vmap(lambda th: jnp.mean(test_prob.score(th, test))))
    test_scores = np.asarray(test_score(jnp.asarray(best_theta)))
    base_test = float(np.asarray(test_score(jnp.asarray(prob.baseline)[None]))[0])
    sign = -1.0 if prob.lower_is_better_objective else 1.0
    return dict(
        problem=name, objective=prob.objective, lower_is_better=prob.lower_is_better_objective,
        routers=[r.name for r in routers], models=[m.name for m in pool],
        model_cost=[m.cost for m in pool], n_seeds=len(seeds),
        best=sign * np.stack([log.best for log in logs]),  # objective after each call
        cost=np.stack([log.cost for log in logs]),
        arms=np.stack([log.arms for log in logs]),
        failures=np.array([log.failures for log in logs]),
        test=sign * test_scores, baseline_test=sign * base_test,
        init_best=sign * max(logs[0].genealogy.nodes[i].score for i in range(len(init))),
        best_theta=best_theta)


def summarise(res: dict) -> list[dict]:
    """Per-router statistics over seeds (objective in the problem's own direction):
    95% t intervals of the final training and test objectives, mean cost, saving against
    always calling the most expensive model, share of runs reaching that model's mean
    final objective and the median cost to reach it, share of calls per model, and the
    per-seed test objectives and costs (for the paired claim tests)."""
    n_r, n_s = len(res["routers"]), res["n_seeds"]
    lower = res["lower_is_better"]
    best = res["best"].reshape(n_r, n_s, -1)
    cost = res["cost"].reshape(n_r, n_s, -1)
    arms = res["arms"].reshape(n_r, n_s, -1)
    test = res["test"].reshape(n_r, n_s)
    fails = res["failures"].reshape(n_r, n_s)
    costs = np.asarray(res["model_cost"])
    strongest = int(np.argmax(costs))
    ref = res["routers"].index(f"only {res['models'][strongest]}")
    target = best[ref, :, -1].mean()
    ref_cost = cost[ref, :, -1].mean()
    rows = []
    for r, name in enumerate(res["routers"]):
        final = best[r, :, -1]
        reached = (best[r] <= target) if lower else (best[r] >= target)
        first = np.where(reached.any(1), reached.argmax(1), -1)
        cost_to = np.array([cost[r, s, f] if f >= 0 else np.nan for s, f in enumerate(first)])
        share = np.bincount(arms[r].ravel(), minlength=len(costs)) / arms[r].size
        rows.append(dict(
            router=name, final=t_interval(final), test=t_interval(test[r]),
            cost=float(cost[r, :, -1].mean()),
            saving=float(1 - cost[r, :, -1].mean() / ref_cost),
            reach=float(np.mean(first >= 0)),
            cost_to_target=float(np.nanmedian(cost_to)) if np.any(first >= 0) else math.nan,
            share=share.tolist(), failures=float(fails[r].mean()),
            test_values=test[r].tolist(), cost_values=cost[r, :, -1].tolist()))
    return rows
