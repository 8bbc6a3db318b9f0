"""``jaxkit run cruxbench``: value of information of proposed subquestions, measured
against prediction-market price moves, its correlation with model quality and its use
to a forecasting agent.

Stages: the simulated benchmark (``cruxbench-sim``: targets, proposers, questions, one
market per question; :mod:`jaxkit.cruxbench.simulate`), then the scoring shared with
real data (:mod:`jaxkit.cruxbench.scoring`), the statistics
(:mod:`jaxkit.cruxbench.analysis`) and the report with the paper's claims
(:mod:`jaxkit.cruxbench.report`). ``--set data=FILE.jsonl`` also scores the user's
markets (format: :mod:`jaxkit.cruxbench.data`). Nothing is trained, so there is no
checkpoint; a killed run reloads the simulated stage.
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report
from .analysis import evaluate, simulator_check
from .config import FULL, QUICK, Config
from .data import read_jsonl
from .scoring import question_scores, score
from .simulate import simulate

TITLE = "CruxBench: value of information of subquestions against market prices"


@register("cruxbench", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Simulate, score, test the claims; optionally score the user's JSON Lines file."""
    cfg: Config = ctx.config
    clip = (cfg.clip_lo, cfg.clip_hi)
    sim = ctx.stage("cruxbench-sim", lambda: simulate(ctx.key("cruxbench-sim"),
                                                      cfg.sim_settings()))
    scores = score(sim.data, window=cfg.window, clip=clip)
    stats = evaluate(ctx.key("cruxbench-stats"), scores, sim.data.quality,
                     n_boot=cfg.n_boot, n_perm=cfg.n_perm)
    tight = question_scores(sim.data, clip=(1e-6, 1 - 1e-6))
    check = simulator_check(tight, dict(abs=sim.known_abs, sq=sim.known_sq, mi=sim.known_mi))
    claims = report.claims(cfg, stats)
    md = [report.markdown(scores, stats, sim.data.proposers, sim.data.quality,
                          traits=sim.traits, check=check)]
    figures = [report.plot(scores, sim.data.quality, ctx.out_dir)]
    metrics = dict(settings=cfg.to_dict(), per_proposer={k: v.tolist() for k, v in
                                                         scores["per_proposer"].items()},
                   quality=sim.data.quality.tolist(), simulator_check=check,
                   correlations={k: stats[k] for k in ("quality", "usefulness")})
    if cfg.data:
        ds = read_jsonl(cfg.data)
        sc = score(ds, window=cfg.window, clip=clip)
        st = evaluate(ctx.key("cruxbench-data"), sc, ds.quality, n_boot=cfg.n_boot,
                      n_perm=cfg.n_perm)
        claims += report.claims(cfg, st, source=cfg.data)
        md.append(report.markdown(sc, st, ds.proposers, ds.quality, title=f"Data: {cfg.data}"))
        figures.append(report.plot(sc, ds.quality, ctx.out_dir, "cruxbench_data"))
        metrics["data"] = dict(per_proposer={k: v.tolist() for k, v in
                                             sc["per_proposer"].items()},
                               correlations={k: st[k] for k in ("quality", "usefulness")})
    warnings = [] if cfg.n_proposers >= 8 else [
        f"{cfg.n_proposers} proposers: the correlation intervals are very wide"]
    metrics["total_seconds"] = ctx.elapsed()
    return PipelineResult("cruxbench", TITLE, "\n".join(md), figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
