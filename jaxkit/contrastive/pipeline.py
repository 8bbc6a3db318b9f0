"""``jaxkit run contrastive``: contrastive discovery against pointwise baselines.

Claims under test (Contrastive discovery, NeurIPS 2026): scoring experiments by how they
redistribute belief across a MECE set of explanations resolves more questions under the
same budget than pointwise scoring of one hypothesis at a time; high-surprisal pointwise
candidates are mostly rejections, many of which resolve as alternatives contrastively.

One stage per domain (``contrastive-<domain>``, :func:`jaxkit.contrastive.experiment.
run_domain`): its questions for every seed, the likelihood tables of the candidate
experiments from the domain's numpyro models, and all four methods on the same outcomes.
Nothing is trained; a killed run resumes at its first unfinished domain. Report,
figures and claims: :mod:`jaxkit.contrastive.report`. Your own hypotheses:
``--set data=FILE.json`` (:mod:`jaxkit.contrastive.userfile`).
"""

from __future__ import annotations

from jaxkit.io import user_data
from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import real, report, userfile
from .config import FULL, QUICK, Config
from .experiment import max_steps, run_domain

TITLE = "Contrastive discovery: EIG over MECE explanations vs pointwise surprisal"


@register("contrastive", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Every domain's comparison; tables, figures, claims."""
    cfg: Config = ctx.config
    if cfg.data:
        with user_data("data", cfg.data, text=True):  # one line naming the file
            h = userfile.read_hypotheses(cfg.data)
        r = userfile.rank_file(h)
        return PipelineResult("contrastive", TITLE, userfile.markdown(h, r), metrics=dict(
            data=cfg.data, hypotheses=h.hypotheses, posterior=r["posterior"].tolist(),
            ranking=[h.experiments[i] for i in r["order"]], impossible=r["impossible"]))
    results = [ctx.stage(f"contrastive-{name}",
                         lambda name=name: run_domain(ctx.key(f"contrastive-{name}"), name, cfg))
               for name in ctx.track(list(cfg.domains), "contrastive domains")]
    figures = [report.plot_resolved(results, ctx.out_dir),
               report.plot_trajectories(results, ctx.out_dir)]
    md, summary = report.markdown(cfg, results)
    claims = report.claims(cfg, results)
    if cfg.real_lm:
        rr = ctx.stage("contrastive-real", lambda: real.run_with_model(
            cfg.real_lm, cache=cfg.lm_cache or str(ctx.out_dir / "llm-cache"),
            offline=cfg.lm_offline, k=cfg.real_k, budget=cfg.real_budget))
        claims.append(report.real_claim(cfg, rr))
        md += "\n\n" + report.real_markdown(rr)
    warnings = [] if cfg.seeds >= 5 else [
        f"{cfg.seeds} seeds: the t intervals have {cfg.seeds - 1} degrees of freedom, so small "
        "differences cannot be decided at this size"]
    metrics = dict(settings=cfg.to_dict(), max_steps=max_steps(cfg), **summary,
                   per_domain={r.domain: {m: {k: v.tolist() for k, v in s.items()}
                                          for m, s in r.rates_dict().items()}
                               for r in results},
                   total_seconds=ctx.elapsed())
    if cfg.real_lm:
        metrics["real"] = {k: v for k, v in rr.items() if k != "questions"}
    return PipelineResult("contrastive", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
