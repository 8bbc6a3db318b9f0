"""``jaxkit run ballad``: bandit routing of a pool of LLMs in automated heuristic
discovery.

For each problem (:mod:`jaxkit.ballad.problems`) one stage runs every router x seed
(:func:`jaxkit.ballad.compare.search_problem`): every single model alone, uniform
random routing, UCB1, Ballad (:func:`jaxkit.kernels.bandit.ballad`: extreme-value +
discounted index with DAG credit), Ballad without each of its three parts and the two
cost-aware Ballads (:func:`jaxkit.kernels.bandit.ballad_cost`), over the hand-made
offline pool of simulated LLMs (the named case). Then, for each of ``pool_problems``,
one stage runs the routers on ``pools`` random pools drawn from stated priors
(:mod:`jaxkit.ballad.pools`; :func:`jaxkit.ballad.compare.search_pools`), and the
claims are tested over pools (:mod:`jaxkit.ballad.report_pools`). Last, the
program-space experiment (:mod:`jaxkit.ballad.program_run`): source-editing proposers
whose every child runs in the sandbox. Reported
(:mod:`jaxkit.ballad.report`): best objective versus calls and versus cost, the final
test objective with 95% t intervals over seeds, the share of calls per model, the cost
saving against always calling the most expensive model, and the claims (paired tests
over seeds, an equivalence margin for "matches").

Your own instances: ``--set instances=FILE --set instances_problem=tsp`` (JSON, .npy or
.npz; :mod:`jaxkit.ballad.instances`) replace the generated test instances of that
problem.
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report, report_pools
from .compare import search_pools, search_problem, with_optimum
from .config import FULL, QUICK, Config
from .http_run import search_http
from .instances import instance_optimum, load_instances
from .program_run import program_section, search_programs
from .real_run import real_section, run_claims, search_real
from .standard import standard_section

TITLE = "Ballad: bandit routing of an LLM pool"


@register("ballad", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Ballad and its baselines on every problem; see the module docstring."""
    cfg: Config = ctx.config
    if cfg.pool == "http":
        return _run_http(ctx, cfg)
    user = load_instances(cfg.instances, cfg.instances_problem) if cfg.instances else None
    user_opt = instance_optimum(cfg.instances) if user else None
    results = []
    for name in cfg.problems:
        keys = {k: ctx.key(f"{k}-{name}") for k in ("train", "test", "search", "val")}
        test = user[1] if user and user[0] == name else None
        results.append(with_optimum(ctx.stage(
            f"ballad-{name}",
            lambda name=name, keys=keys, test=test: search_problem(
                cfg, name, keys, ctx.rng(f"init-{name}"), track=ctx.track, mesh=ctx.mesh,
                test=test)), cfg, keys, test, user_opt if test is not None else None))
    pooled = []
    for name in cfg.pool_problems:
        keys = {k: ctx.key(f"pools-{k}-{name}") for k in ("train", "test", "search", "val")}
        pooled.append(ctx.stage(
            f"pools-{name}",
            lambda name=name, keys=keys: search_pools(
                cfg, name, keys, ctx.rng(f"pools-{name}"), ctx.rng(f"pools-init-{name}"),
                track=ctx.track, mesh=ctx.mesh)))
    prog = ctx.stage("ballad-program", lambda: search_programs(
        cfg, {k: ctx.key(f"program-{k}") for k in ("train", "test", "search")})) \
        if cfg.program.calls else None
    real = ctx.stage("ballad-real", lambda: search_real(
        cfg, {k: ctx.key(f"real-{k}") for k in ("train", "val", "test", "search")},
        out_dir=ctx.out_dir)) \
        if cfg.real.calls else None
    figures = [report.plot(results, ctx.out_dir)]

    train_sizes = ("full-size for " + ", ".join(cfg.train_full) + ", small for the rest"
                   if cfg.train_full else "small sizes")
    md = ([f"Test instances of {user[0]}: yours, `{cfg.instances}` "
           f"({len(next(iter(user[1].values())))} instances).", ""] if user else []) + [
        f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}; {cfg.seeds} seeds x "
          f"{cfg.calls} LLM calls per router. Named case: the hand-made offline pool of "
          f"simulated models (`jaxkit.ballad.pools.default_pool`); the claim over random "
          f"pools follows it. Search on {cfg.train_instances} training "
          f"instances ({train_sizes}); the best heuristic of each run is scored on "
          f"{cfg.test_instances} held-out {'full-size ' if cfg.full_test else ''}test "
          f"instances; the best single model in hindsight is chosen on {cfg.val_instances} "
          "validation instances of the same size. Intervals: 95% t intervals over seeds. "
          "Saving: 1 - cost / cost of always calling the most expensive model (same number "
          "of calls). Claims: paired tests over seeds, one-sided at 5% with Holm over the "
          "problems for the paper's claims; 'matches' is non-inferiority with margin "
          + ", ".join(f"{cfg.margin(p):g} ({p})" for p in cfg.problems)
          + " of the classic heuristic's mean test objective (fixed in the configuration).",
          ""]
    metrics = {}
    for res in results:
        lines, rows = report.section(res, cfg)
        md += lines
        metrics[res.problem] = rows
        if res.optimum_test is not None:
            metrics[f"{res.problem}-optimum"] = res.optimum_test
    if cfg.standard_test:
        lines, metrics["standard"] = standard_section(results, cfg)
        md += lines
    if pooled:
        md += ["## The claim over random pools", "",
               f"Each run searches on {cfg.pool_train_instances} training instances of the "
               "quick size and is scored on the test instances above.", ""]
    for res in pooled:
        lines, rows = report_pools.pool_section(res, cfg)
        md += lines
        metrics[f"pools-{res.problem}"] = rows
    if prog is not None:
        lines, metrics["program"] = program_section(prog)
        md += lines
    if real is not None:
        lines, metrics["real"] = real_section(real)
        md += lines
        lines, metrics[real.problem] = report.section(real, cfg)
        md += lines
    if ctx.reloaded:
        md.append(f"\nStages reloaded from an earlier run: {', '.join(ctx.reloaded)}.")
    return PipelineResult(name="ballad", title=TITLE, markdown="\n".join(md), figures=figures,
                          metrics=metrics,
                          claims=run_claims(results, pooled, real, cfg))


def _run_http(ctx: RunContext, cfg: Config) -> PipelineResult:
    """The same comparison over real models (:mod:`jaxkit.ballad.http_run`)."""
    keys = {k: ctx.key(f"http-{k}") for k in ("train", "test", "search", "val")}
    res = ctx.stage("ballad-http", lambda: search_http(cfg, keys, ctx.out_dir, track=ctx.track))
    lines, rows = report.section(res, cfg)
    md = [f"Mode: HTTP models ({', '.join(res.models)}); {cfg.http.seeds} seeds x "
          f"{cfg.http.calls} calls per router; programs run in the sandbox on "
          f"{cfg.train_instances} Weibull instances of {cfg.http.items} items, scored on "
          f"{cfg.test_instances} held-out ones; cost from the tokens each server reports. "
          f"Responses cached ({res.cache_hits} replayed, {res.cache_misses} fetched).",
          ""] + lines
    return PipelineResult(name="ballad", title=TITLE, markdown="\n".join(md), figures=[],
                          metrics={res.problem: rows},
                          claims=report.claims([res], cfg, simulated=False))
