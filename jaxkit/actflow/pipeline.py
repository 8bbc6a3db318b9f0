"""``jaxkit run actflow``: verifier-guided expansion of a flow model's generable set.

Per domain (:mod:`jaxkit.actflow.domains`, and the peptide domain of
:mod:`jaxkit.actflow.peptides`), one stage (:func:`jaxkit.actflow.compare.compare_domain`):

1. **Pre-training**: a flow-matching MLP on data that covers a quarter of the valid set
   (peptides: the valid AMPs of net charge <= ``peptide_max_charge``).
2. **Rounds** (:func:`jaxkit.actflow.loop.run_method`): the pre-trained model (no
   update), recursive retraining on its own samples (no filter), retraining on
   verifier-filtered samples, and ActFlow (exploration in noise space, verification,
   novelty filter, replay adaptation). Same per-round budget and keys for every method.
   Checkpoints under ``out_dir/checkpoints/``: a killed run resumes mid-training.
3. **Report** (:mod:`jaxkit.actflow.report`): per-round metrics of the current model's
   generable set, scatter plots and coverage curves, and the claims, tested over
   ``n_draws`` evaluation draws of the final models.
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report
from .compare import compare_domain
from .config import FULL, QUICK, Config

TITLE = "ActFlow: verifier-guided expansion of a flow's generable set"


@register("actflow", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Pre-train, run the four methods per domain, tabulate, plot and test the claims."""
    cfg: Config = ctx.config
    results = {}
    for name in cfg.domains:
        keys = {k: ctx.key(f"{k}-{name}") for k in ("pretrain", "rounds", "draws")}
        results[name] = ctx.stage(
            f"actflow-{name}",
            lambda name=name, keys=keys: compare_domain(
                cfg, name, keys, checkpoint_root=ctx.out_dir / "checkpoints", resume=ctx.resume,
                mesh=ctx.mesh, track=ctx.track))
    figures = [report.plot_curves(results, ctx.out_dir)]
    figures += [report.plot_scatter(cfg, n, results[n], ctx.out_dir) for n in results]
    body, warnings = report.tables(cfg, results)
    md = [f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}. Settings: "
          + ", ".join(f"{n}: {cfg.loop(n).to_dict()}" for n in cfg.domains) + ". "
          + report.METHOD_NOTE, "", *body,
          "Figures: `actflow_coverage.png` (coverage or #Circles versus round), "
          "`actflow_DOMAIN_scatter.png` (samples per method at the first, middle and last "
          "round; blue valid, grey invalid, orange pre-training data, light grey the valid "
          "manifold)."]
    if ctx.reloaded:
        md.append(f"\nStages reloaded from an earlier run: {', '.join(ctx.reloaded)}.")
    metrics = {name: {m: run["history"] for m, run in res["runs"].items()}
               for name, res in results.items()}
    metrics["total_seconds"] = ctx.elapsed()
    return PipelineResult("actflow", TITLE, "\n".join(md), figures=figures, metrics=metrics,
                          warnings=warnings, claims=report.claims(results))
