"""The registered ``pooled-lingam`` run: pooled ICA-LiNGAM without environment labels.

Claim under test: in a linear Gaussian SEM, pooling observational data with atomic
noise interventions (each environment changes one node's noise) makes the sources
non-Gaussian (excess kurtosis ~ O(1/n), n = number of variables) while their dependence
decays faster (~ O(1/n^2)), so classical ICA-LiNGAM on the *pooled, unlabeled* rows
recovers the DAG, matching label-aware methods. Stages: F1 / SHD vs d, environments,
samples per environment and strength, ablations (:mod:`.sweeps`), the moments vs n
(:mod:`.theory`), the Sachs data (:mod:`.sachs`), each returning the typed results of
:mod:`.results`; claims and tables in :mod:`.report`.

Your own data: ``jaxkit run pooled-lingam --set data=FILE.csv --set env_column=NAME``
(CSV or Parquet, one column naming each row's environment) runs pooled ICA-LiNGAM on
the pooled rows instead (:mod:`.userdata`).
"""

from __future__ import annotations

import dataclasses

import jax

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report, userdata
from .config import FULL, QUICK, Config
from .data import INDEPENDENT, TrialConfig
from .report import TWO_TARGETS
from .sachs import sachs_eval
from .sachs_labels import sachs_compare
from .sweeps import run_ablations, run_sweep, sweep
from .theory import theory_check

__all__ = ["run"]

TITLE = "Pooled ICA-LiNGAM: causal discovery without environment labels"


@register("pooled-lingam", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Every stage of the pipeline on ``ctx.config`` (:class:`.config.Config`; default
    :data:`QUICK` / :data:`FULL` by ``ctx.quick``), in float64 (``jax.enable_x64`` for
    the duration of the run) whatever the global setting."""
    cfg: Config = ctx.config if ctx.config is not None else (QUICK if ctx.quick else FULL)
    with jax.enable_x64(True):
        return _run_user(ctx, cfg) if cfg.data else _run(ctx, cfg)


def _run_user(ctx: RunContext, cfg: Config) -> PipelineResult:
    """Pooled ICA-LiNGAM on the user's table ``cfg.data`` (:mod:`.userdata`)."""
    data = userdata.read_pooled(cfg.data, cfg.env_column)
    fit = ctx.stage("user-data", lambda: userdata.fit_pooled(
        ctx.key("user-data"), data, restarts=cfg.data_restarts))
    tested = userdata.claims(data, fit.diagnostic)
    metrics = {"data": str(data.path), "variables": data.names,
               "environments": data.env_names, **fit.as_dict()}
    return PipelineResult(name="pooled-lingam", title=TITLE, claims=tested, metrics=metrics,
                          markdown=userdata.markdown(data, fit, cfg.data_restarts))


def _run(ctx: RunContext, cfg: Config) -> PipelineResult:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    d0 = cfg.sweep_d
    base = TrialConfig(d=d0, n_per_env=cfg.n_per_env, strength=cfg.strength,
                       edges_per_node=cfg.edges_per_node)
    gies = dict(n_seeds=cfg.n_seeds, mesh=ctx.mesh, gies_seeds=cfg.gies_seeds,
                gies_max_d=cfg.gies_max_d, track=ctx.track)
    common = dict(gies, methods=cfg.sweep_methods)

    d_rows = ctx.stage("d", lambda: run_sweep(
        ctx.key("d"), ds=cfg.ds, n_per_env=cfg.n_per_env, strength=cfg.strength,
        edges_per_node=cfg.edges_per_node, methods=cfg.d_methods,
        **dict(gies, gies_seeds=cfg.gies_d_seeds)))
    env_rows = ctx.stage("n_envs", lambda: sweep(
        ctx.key("n_envs"), "n_envs", cfg.env_values,
        base=dataclasses.replace(base, n_total=(d0 + 1) * cfg.n_per_env), **common))
    npe_rows = ctx.stage("n_per_env", lambda: sweep(
        ctx.key("n_per_env"), "n_per_env", cfg.samples_values, base=base, **common))
    str_rows = ctx.stage("strength", lambda: sweep(
        ctx.key("strength"), "strength", cfg.strengths, base=base, **common))
    abl_rows = ctx.stage("ablations", lambda: run_ablations(
        ctx.key("ablations"), base, **common) if cfg.ablations else [])
    ind_rows = [r for r in abl_rows if r.setting == INDEPENDENT]
    if not ind_rows and cfg.independent:
        # the every-node-perturbed setting alone (its paper claim), on the ablations' key
        ind_rows = ctx.stage("independent", lambda: sweep(
            ctx.key("ablations"), "perturb_all", (True,), base=base, **dict(
                common, methods=("pooled-ica",))))
    if cfg.two_targets and not any(r.setting == TWO_TARGETS for r in abl_rows):
        # the scope condition of the synthetic match (2 targets per environment), on the
        # ablations' key so that it is the ablation's row when both run
        abl_rows = abl_rows + ctx.stage("two_targets", lambda: [
            r.named(TWO_TARGETS) for r in sweep(
                ctx.key("ablations"), "targets_per_env", (2,), base=base,
                **dict(common, methods=("pooled-ica", "gies")))])
    th = ctx.stage("theory", lambda: theory_check(
        ctx.key("theory"), ds=cfg.theory.ds, strengths=cfg.theory.strengths,
        n_per_env=cfg.theory.npe, n_seeds=cfg.theory.seeds, tail_from=cfg.theory.tail_from,
        mesh=ctx.mesh, track=ctx.track))
    sachs_rows = ctx.stage("sachs", lambda: sachs_eval(
        ctx.key("sachs"), n_restarts=cfg.sachs.restarts, mesh=ctx.mesh,
        direct=cfg.sachs.direct))
    labels = ctx.stage("sachs-labels", lambda: sachs_compare(
        ctx.key("sachs-labels"), n_boot=cfg.sachs.boot, transform=cfg.sachs.transform,
        chunk=2 * cfg.sachs.restarts, chance_graphs=cfg.sachs.chance_graphs, mesh=ctx.mesh))

    figures = report.figures(ctx.out_dir, cfg, d_rows, env_rows, npe_rows, str_rows, th)
    tested = report.claims(cfg, d_rows, env_rows, str_rows, th, sachs_rows,
                           independent_rows=ind_rows, abl_rows=abl_rows, sachs_labels=labels)
    synthetic = [c for c in tested if c.kind == "paper" and c.verdict != "not tested"]
    holds = all(c.verdict == "yes" for c in synthetic)
    seconds = ctx.elapsed()
    md = report.markdown(cfg, quick=ctx.quick, seed=ctx.seed, tested=tested, d_rows=d_rows,
                         env_rows=env_rows, npe_rows=npe_rows, str_rows=str_rows,
                         abl_rows=abl_rows, th=th, sachs_rows=sachs_rows, seconds=seconds,
                         reloaded=ctx.reloaded, ind_rows=ind_rows, sachs_labels=labels)
    warnings = [] if holds else [
        "pooled ICA-LiNGAM did not meet every tested paper claim (independent "
        "perturbations, moments, rates, recovery, match with GIES); see the verdicts"]
    metrics = {
        "claim_holds": bool(holds),
        "d_sweep": [r.as_dict() for r in d_rows],
        "env_sweep": [r.as_dict() for r in env_rows],
        "samples_sweep": [r.as_dict() for r in npe_rows],
        "strength_sweep": [r.as_dict() for r in str_rows],
        "ablations": [r.as_dict() for r in abl_rows],
        "independent": [r.as_dict() for r in ind_rows],
        "theory": th.as_dict(),
        "sachs": [r.as_dict() for r in sachs_rows],
        "sachs_labels": labels.as_dict(),
        "seconds": seconds,
    }
    return PipelineResult(name="pooled-lingam", title=TITLE, markdown=md, figures=figures,
                          metrics=metrics, warnings=warnings, claims=tested)
