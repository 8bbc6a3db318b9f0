"""``jaxkit run causal-audit``: the assumption stress-test grid over jaxkit's causal
methods (causal benchmarks as epistemic standards, Paper 6).

Stages: the grid (every axis pair's cells plus the Reisach cells and the
identifiability-assumption cells, every method, one vmapped batch per cell;
:mod:`.audit`, :mod:`.grid`), the consistency curves (the base cell at each sample size),
the uniform-consistency family (the same datasets with edge weights shrunk as
1/sqrt(n); every member at every size: the family stage) and the negative control (the
null cell's datasets in another unit: the placebo stage), then ICA-LiNGAM raw and
standardised against a float64 reference (the reference stage). Analyses in :mod:`.analysis`
and :mod:`.falsify` (typed results: :mod:`.results`), claims, figures and the written
findings in :mod:`.report`. Nothing
is trained, so there is no checkpoint: a killed run resumes at its first unfinished
stage.

Your own data: ``jaxkit run causal-audit --set data=FILE.csv
--set intervention_column=NAME`` (the column optional) runs the methods on bootstrap
resamples of your table instead, raw and standardised (:mod:`.userdata`).
"""

from __future__ import annotations

import numpy as np

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import reference, report, scope, userdata
from .analysis import consistency
from .audit import reisach_cells, run_family, run_main_grid, run_placebo, run_sizes, run_uniform
from .config import FULL, QUICK, Config

__all__ = ["run", "TITLE"]

TITLE = "Causal audit: an assumption stress-test grid over jaxkit's causal methods"


@register("causal-audit", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """The grid, the consistency curves, the claims and the report."""
    cfg: Config = ctx.config if ctx.config is not None else (QUICK if ctx.quick else FULL)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.data:
        return _run_user(ctx, cfg)
    results = ctx.stage("grid", lambda: run_main_grid(ctx.key("grid"), cfg, mesh=ctx.mesh,
                                                      track=ctx.track))
    sizes = ctx.stage("sizes", lambda: run_sizes(ctx.key("sizes"), cfg, mesh=ctx.mesh,
                                                 track=ctx.track))
    # the same key as the sizes: the same graphs and noise, the weights shrunk
    uniform = ctx.stage("uniform", lambda: run_uniform(ctx.key("sizes"), cfg, mesh=ctx.mesh,
                                                       track=ctx.track))
    family = ctx.stage("family", lambda: run_family(ctx.key("sizes"), cfg, mesh=ctx.mesh,
                                                    track=ctx.track))
    # the grid's key: the null cell's datasets, rescaled (the negative control)
    placebo = ctx.stage("placebo", lambda: run_placebo(
        ctx.key("grid"), cfg, report.placebo_methods(cfg), mesh=ctx.mesh))
    k = min(cfg.reference_datasets, cfg.batch)
    ref = ctx.stage("reference", lambda: reference.standardisation_check(
        ctx.key("grid"), reisach_cells(cfg)["raw"], k) if k >= 2 else None)
    comps = report.rank_comparisons(ctx.key("bootstrap"), cfg, results, sizes)
    tested = report.claims(cfg, results, sizes, comps, uniform, family, placebo,
                           key=ctx.key("claims"))
    tested.append(reference.claim(ref, cfg.reference_margin, report.REFERENCE))
    figures = report.figures(cfg, results, sizes, ctx.out_dir, uniform, family)
    seconds = ctx.elapsed()
    md = report.markdown(cfg, results, sizes, comps, tested, quick=ctx.quick, seed=ctx.seed,
                         seconds=seconds, uniform=uniform)
    failures = {f"{spec}": r.failures for spec, r in results.items() if r.failures}
    warnings = [f"{len(failures)} cell(s) with failures (invalid SCMs, non-finite outputs or "
                "exceptions); see the table of all cells"] if failures else []
    if cfg.batch < 8:
        warnings.append(f"{cfg.batch} datasets per cell: most claims cannot be decided")
    metrics = dict(
        settings=cfg.to_dict(), seconds=seconds,
        cells=[dict(spec=s.to_dict(), mean_f1={m: r.mean_f1(m) for m in r.f1},
                    var_sortability=float(r.var_sort[r.valid].mean()) if r.valid.any()
                    else None,
                    r2_sortability=float(r.r2_sort[r.valid].mean()) if r.valid.any()
                    else None, failures=r.failures) for s, r in results.items()],
        rankings={n: c.as_dict() for n, c in comps},
        consistency={m: consistency(sizes, m).as_dict() for m in cfg.consistency_methods},
        uniform_family={m: consistency(uniform, m).as_dict()
                        for m in cfg.consistency_methods},
        family={f"{k}@{n}": float(np.nanmean(r.shd[cfg.family_method]))
                for (k, n), r in family.items()})
    return PipelineResult("causal-audit", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=tested)


def _run_user(ctx: RunContext, cfg: Config) -> PipelineResult:
    """The audit of the user's table ``cfg.data`` (:mod:`.userdata`)."""
    data = userdata.read_audit_table(cfg.data, cfg.intervention_column)
    res = ctx.stage("user-data", lambda: userdata.audit_table(
        ctx.key("user-data"), data, cfg.methods, resamples=cfg.user_resamples,
        host_resamples=cfg.host_datasets))
    props = scope.data_properties(data.x, data.env, targets=data.targets
                                  if cfg.intervention_column else None)
    graphs = {m: r.full for m, r in res.items()}
    table = scope.markdown(props, data.names, cfg.methods, graphs, data.x,
                           targets_given=bool(cfg.intervention_column))
    metrics = dict(data=str(data.path), variables=data.names,
                   scope=scope.scope_rows(props, cfg.methods,
                                          targets_given=bool(cfg.intervention_column)),
                   conditions=scope.condition_rows(props, cfg.methods, {
                       m: scope.graph_sortability(data.x, g) for m, g in graphs.items()}),
                   methods={m: r.as_dict() for m, r in res.items()})
    md = userdata.markdown(data, res, cfg.user_resamples) + "\n\n" + table
    return PipelineResult("causal-audit", TITLE, md,
                          metrics=metrics, claims=userdata.claims(res, cfg.user_shd_margin))
