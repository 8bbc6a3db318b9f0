"""``jaxkit run causaltab``: an amortised causal-discovery model trained on broad priors,
against classical baselines, on synthetic and semantic environments.

Stages: the model (``train_steps = 0``: the shipped weights, unchanged; otherwise trained
from scratch on the broad prior, :func:`.recipes.main_recipe`, checkpointed under
``out_dir/checkpoints/train`` so a killed run resumes; the stage's cache key carries the
:class:`.recipes.Recipe`), one stage per synthetic cell (in/out of distribution x d x
interventional fraction, plus the per-axis out-of-distribution cells of ``ood_axes``,
:mod:`.experiments`; d above the model's ``max_vars`` scored
over covering variable subsets), the semantic environments and the real Sachs data, the
LLM audit of the expert networks (:mod:`.audit`; ``audit.model`` empty skips it), the
prior ablation (``ablation.steps > 0``: one model trained on the broad prior and one on
the narrow prior, same architecture, steps and seed, each checkpointed under
``out_dir/checkpoints/NAME``, the broad one being the main model when the recipes
coincide, :func:`.recipes.train_ablation`; then scored on the same datasets); the report and the
claims in :mod:`.report`.
"""

from __future__ import annotations

import dataclasses
import json

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiments as E
from . import report
from .config import FULL, QUICK, Config
from .recipes import get_model, train_ablation
from .results import SmokeTraining

__all__ = ["run"]

TITLE = "CausalTab: amortised causal discovery from broad causal priors"

#: The training smoke run's recipe (``Config.smoke_steps`` sets its steps).
SMOKE = dict(dim=8, heads=2, layers=1, ffn=2, batch=4, warmup=5, d_max=6, n_max=16,
             small_d=4, small_n=8, small_frac=0.5, chunk=25)


def _smoke(ctx: RunContext, steps: int) -> SmokeTraining:
    """A tiny training through :func:`jaxkit.causaltab.longtrain.train_long` (no
    baselines): its curve (step, loss, validation AUROC on 4 tasks of d = 5, n = 16)."""
    from .longtrain import LongRecipe, train_long

    r = LongRecipe(steps=steps, seed=ctx.seed, **SMOKE)
    out = ctx.out_dir / "smoke-train"
    train_long(r, out, eval_every=max(1, steps // 25 // 2), val_tasks=4, baselines=False,
               val_cells=((5, 16),), log=lambda s: None)
    curve = json.loads((out / "curve.json").read_text())
    return SmokeTraining(recipe=SMOKE | {"steps": steps},
                         curve=[{k: c[k] for k in ("step", "loss", "val_auroc")}
                                for c in curve])


@register("causaltab", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Model, synthetic cells, semantic environments, real Sachs; tables, figures, claims."""
    cfg: Config = ctx.config
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    model, info, trained = get_model(ctx, cfg)
    mcfg = model[1]
    ds = list(cfg.ds)  # d > max_vars: CausalTab over variable subsets (``chunked``)
    common = dict(methods=cfg.methods, model=model, gies_max_d=cfg.gies_max_d)
    synth = []
    cells = [(w, d, f) for w in ("id", "ood") for d in ds for f in cfg.int_fracs]
    cells += [(f"ood-{a}", cfg.ood_axes_d, f) for a in cfg.ood_axes
              for f in (cfg.int_fracs[0], cfg.int_fracs[-1])]
    for which, d, f in ctx.track(cells, "causaltab synthetic"):
        key = ctx.key(f"causaltab-{which}-d{d}")  # the same for every fraction: paired
        cell = ctx.stage(f"causaltab-{which}-d{d}-int{f:g}", lambda w=which, d=d, f=f,
                         k=key: E.synthetic(k, which=w, d=d, n=cfg.n,
                                            n_datasets=cfg.n_datasets, int_frac=f, **common))
        synth.append(dataclasses.replace(cell, chunked=d > mcfg.max_vars))
    sem_rows = ctx.stage("causaltab-semantic", lambda: E.semantic_envs(
        ctx.key("causaltab-semantic"), networks=cfg.networks, seeds=cfg.semantic_seeds,
        n=cfg.semantic_n, max_vars=mcfg.max_vars, **common))
    sachs = ctx.stage("causaltab-sachs", lambda: E.sachs_real(
        ctx.key("causaltab-sachs"), rows=cfg.sachs_rows, **common))

    audit_rows, warnings = None, []
    if cfg.audit.model:
        from jaxkit.lm import LMError

        from .audit import audit
        try:
            audit_rows = ctx.stage("causaltab-audit", lambda: audit(
                cfg.audit.networks, model=cfg.audit.model, templates=cfg.audit.templates,
                seed=ctx.seed))
        except LMError as e:  # the model is not installed: the rows say "not tested"
            warnings.append(f"LLM audit skipped: {e}")

    ablation = abl_info = None
    if cfg.ablation.steps > 0:
        models, abl_info = train_ablation(ctx, cfg, trained)
        ablation = ctx.stage("causaltab-ablation", lambda: E.prior_ablation(
            ctx.key("causaltab-ablation"), models=models, d=cfg.ablation.d, n=cfg.ablation.n,
            n_datasets=cfg.ablation.datasets,
            int_fracs=(cfg.int_fracs[0], cfg.int_fracs[-1])),
            config=(abl_info.arms["broad"].shared_with_main,))

    if cfg.smoke_steps > 0:
        info = dataclasses.replace(info, smoke_training=ctx.stage(
            "causaltab-smoke-train", lambda: _smoke(ctx, cfg.smoke_steps)))
    tested = report.claims(synth, sem_rows, ablation, cfg=cfg, audit_rows=audit_rows)
    figures = report.figures(synth, ctx.out_dir)
    md = report.markdown(cfg, synth=synth, sem_rows=sem_rows, sachs=sachs, tested=tested,
                         training=info, quick=ctx.quick, ablation=ablation,
                         ablation_training=abl_info, audit_rows=audit_rows)
    if any(d > mcfg.max_vars for d in ds):
        warnings.append(f"d > max_vars={mcfg.max_vars}: CausalTab scored over covering "
                        f"subsets of {mcfg.max_vars} variables at d = "
                        f"{[d for d in ds if d > mcfg.max_vars]}")
    if cfg.n_datasets < 5:
        warnings.append(f"{cfg.n_datasets} datasets per cell: intervals are wide")
    metrics = dict(settings=cfg.to_dict(), model=info.as_dict(),
                   synthetic=[c.as_dict() for c in synth],
                   semantic=[r.as_dict() for r in sem_rows], sachs=sachs.as_dict(),
                   audit=None if audit_rows is None else [r.as_dict() for r in audit_rows],
                   ablation=None if ablation is None else [r.as_dict() for r in ablation],
                   ablation_training=abl_info and abl_info.as_dict(),
                   total_seconds=ctx.elapsed())
    return PipelineResult("causaltab", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=tested)
