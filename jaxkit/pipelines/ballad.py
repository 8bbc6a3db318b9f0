"""Ballad: bandit routing of a pool of LLMs in automated heuristic discovery.

``jaxkit run ballad [--quick]``. For each combinatorial problem
(:mod:`jaxkit.ballad.problems`) a population of parametric priority heuristics is
evolved by a pool of proposers (:func:`jaxkit.ballad.pool.default_pool`, offline
simulated LLMs of different capability, tails, drift and price), each run routed by
one router: every single model alone, uniform random routing, UCB1, Ballad
(:func:`jaxkit.kernels.bandit.ballad`: extreme-value + discounted index with DAG
credit) and Ballad without each of its three parts. All routers start from the same
initial population and see the same instances; seeds differ in the proposers' and
the parent selection's randomness. Heuristics are searched on training instances and
the best of each run is scored on held-out test instances (full-size in the full run).

Reported: best objective versus calls and versus cost, the final test objective with
95% t-intervals over seeds, the share of calls per model, and the cost saving against
always calling the most expensive model (total, and cost to reach that model's final
mean score).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..report import t_interval
from . import PipelineResult, RunContext, register

QUICK: dict[str, Any] = dict(problems=("binpacking_weibull", "tsp", "cvrp"), seeds=3,
                             calls=40, train_instances=4, test_instances=4, full_test=False,
                             train_full=(), n_init=6)
FULL: dict[str, Any] = dict(problems=("binpacking_or", "binpacking_weibull", "tsp", "knapsack",
                                      "cvrp"),
                            seeds=10, calls=150, train_instances=4, test_instances=5,
                            full_test=True, n_init=6,
                            # searched at full size; Weibull (5000 items) on 1000-item cells
                            train_full=("binpacking_or", "tsp", "knapsack", "cvrp"))


def initial_population(problem, n: int, seed: int):
    """The problem's classic heuristic plus ``n - 1`` perturbations of it (scale 0.5)."""
    from jaxkit.ballad.llm import Candidate

    rng = np.random.default_rng([seed, 11])
    base = np.asarray(problem.baseline, np.float64)
    return [Candidate(theta=base.copy(), note="baseline")] + [
        Candidate(theta=base + 0.5 * rng.standard_normal(base.size), note="init")
        for _ in range(n - 1)]


def search_problem(name: str, S: dict, seed: int, track=None, mesh=None) -> dict:
    """Run every router x seed on one problem; returns arrays (picklable) for the report."""
    import jax
    import jax.numpy as jnp

    from jaxkit.ballad import pool as pool_mod
    from jaxkit.ballad import problems
    from jaxkit.ballad import search as S_

    prob = problems.get(name, quick=name not in S.get("train_full", ()))
    test_prob = problems.get(name, quick=not S["full_test"])
    key = jax.random.key(seed)
    train = prob.generate(jax.random.fold_in(key, 1), S["train_instances"])
    test = test_prob.generate(jax.random.fold_in(key, 2), S["test_instances"])
    pool = pool_mod.default_pool()
    init = initial_population(prob, S["n_init"], seed)
    routers = S_.standard_routers(len(pool), len(init) + S["calls"], [m.name for m in pool])
    seeds = [seed * 1000 + i for i in range(S["seeds"])]
    n_runs = len(routers) * len(seeds)
    evaluate = S_.theta_evaluator(prob.score, train, n_runs, prob.baseline, mesh=mesh)
    steps = range(S["calls"])
    bar = iter(track(steps, f"ballad {name}", total=S["calls"])) if track else None
    logs = S_.search(evaluate, pool, routers, seeds, init=init, n_calls=S["calls"],
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
    """Per-router statistics over seeds (objective in the problem's own direction)."""
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
            test_values=test[r].tolist()))
    return rows


def _plot(results: list[dict], out: Path) -> Path:
    from jaxkit.report import new_figure, save_figure

    fig, axes = new_figure(ncols=2, nrows=len(results), size=(5.0, 3.2))
    for row, res in enumerate(results):
        n_r, n_s = len(res["routers"]), res["n_seeds"]
        best = res["best"].reshape(n_r, n_s, -1).mean(1)
        cost = res["cost"].reshape(n_r, n_s, -1).mean(1)
        for r, name in enumerate(res["routers"]):
            style = dict(lw=2.2, color="k") if name == "ballad" else (
                dict(lw=1, ls="--") if name.startswith("only") else dict(lw=1, alpha=0.8))
            calls = np.arange(1, best.shape[1] + 1)
            axes[row, 0].plot(calls, best[r], label=name, **style)
            axes[row, 1].plot(np.maximum(cost[r], 1e-3), best[r], label=name, **style)
        for ax, xl in zip(axes[row], ("LLM calls", "cumulative cost ($, log)"), strict=True):
            ax.set_xlabel(xl)
            ax.set_ylabel(res["objective"])
            ax.set_title(res["problem"], fontsize=9)
        axes[row, 1].set_xscale("log")
    axes[0, 0].legend(fontsize=6, ncol=2)
    return save_figure(fig, out / "ballad_best_vs_budget.png")


def _fmt_ci(ci: tuple[float, float]) -> str:
    m, h = ci
    return f"{m:.4g}" if not math.isfinite(h) else f"{m:.4g} ± {h:.2g}"


@register("ballad")
def run(ctx: RunContext, settings: dict[str, Any] | None = None) -> PipelineResult:
    """Ballad and its baselines on every problem; see the module docstring."""
    from jaxkit.report import markdown_table

    S = {**(QUICK if ctx.quick else FULL), **(settings or {})}
    out = Path(ctx.out_dir)
    results = []
    for name in S["problems"]:
        cfg = {k: S[k] for k in ("seeds", "calls", "train_instances", "test_instances",
                                 "full_test", "n_init", "train_full")}
        results.append(ctx.stage(f"ballad-{name}",
                                 lambda name=name: search_problem(name, S, ctx.seed, ctx.track,
                                                                 ctx.mesh),
                                 config=(name, cfg)))
    figures = [_plot(results, out)]

    train_sizes = ("full-size for " + ", ".join(S["train_full"]) + ", small for the rest"
                   if S["train_full"] else "small sizes")
    md = [f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}; {S['seeds']} seeds x "
          f"{S['calls']} LLM calls per router; offline pool of simulated models "
          f"(`jaxkit.ballad.pool.default_pool`). Search on {S['train_instances']} training "
          f"instances ({train_sizes}); the best heuristic of each run "
          f"is scored on {S['test_instances']} held-out "
          f"{'full-size ' if S['full_test'] else ''}test instances. Intervals: 95% "
          f"t-intervals over seeds. Saving: 1 - cost / cost of always calling the most "
          f"expensive model (same number of calls).", ""]
    metrics: dict[str, Any] = {}
    for res in results:
        rows = summarise(res)
        metrics[res["problem"]] = rows
        arrow = "lower is better" if res["lower_is_better"] else "higher is better"
        md += [f"### {res['problem']} ({res['objective']}, {arrow})", "",
               f"Classic heuristic on the test set: {res['baseline_test']:.4g}; best initial "
               f"heuristic on the training set: {res['init_best']:.4g}.", ""]
        header = (["router", "train best", "test", "cost $", "saving", "reached target",
                   "cost to target"] + [f"% {m}" for m in res["models"]] + ["failures"])
        body = [[r["router"], _fmt_ci(r["final"]), _fmt_ci(r["test"]), r["cost"],
                 f"{100 * r['saving']:.1f}%", f"{100 * r['reach']:.0f}%", r["cost_to_target"]]
                + [f"{100 * s:.0f}" for s in r["share"]] + [r["failures"]] for r in rows]
        md += [markdown_table(header, body), ""]
        md.append(_verdict(res, rows))
        md.append("")
    if ctx.reloaded:
        md.append(f"\nStages reloaded from an earlier run: {', '.join(ctx.reloaded)}.")
    return PipelineResult(name="ballad", title="Ballad: bandit routing of an LLM pool",
                          markdown="\n".join(md), figures=figures, metrics=metrics)


def _verdict(res: dict, rows: list[dict]) -> str:
    """One honest sentence per problem: does Ballad match the best single model?"""
    lower = res["lower_is_better"]
    singles = [r for r in rows if r["router"].startswith("only ")]
    ballad = next(r for r in rows if r["router"] == "ballad")
    pick = min if lower else max
    best_single = pick(singles, key=lambda r: r["test"][0])
    diff, half = _welch(ballad["test_values"], best_single["test_values"])
    better = diff < 0 if lower else diff > 0
    within = not math.isfinite(half) or abs(diff) <= half
    status = ("beats" if better and not within else
              "is statistically indistinguishable from" if within else "falls short of")
    saving = ballad["saving"]
    cost = (f"{100 * saving:.0f}% lower cost than" if saving >= 0
            else f"{-100 * saving:.0f}% higher cost than")
    uni = next(r for r in rows if r["router"] == "uniform")
    d_u, h_u = _welch(ballad["test_values"], uni["test_values"])
    return (f"On the test set Ballad {status} the best single model in hindsight "
            f"({best_single['router']}: {best_single['test'][0]:.4g}; Ballad "
            f"{ballad['test'][0]:.4g}; difference {diff:+.3g} ± {half:.2g}, 95% Welch "
            f"interval), at {cost} always calling the most expensive model. Against uniform "
            f"random routing ({uni['test'][0]:.4g}, {100 * uni['saving']:.0f}% saving) the "
            f"difference is {d_u:+.3g} ± {h_u:.2g}.")


def _welch(a, b) -> tuple[float, float]:
    """Difference of means ``mean(a) - mean(b)`` and the half-width of its 95% Welch
    t-interval (nan with fewer than two values on a side)."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return diff, math.nan
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, 0.0
    dof = se**4 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return diff, float(stats.t.ppf(0.975, dof) * se)
