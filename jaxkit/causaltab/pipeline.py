"""``jaxkit run causaltab``: an amortised causal-discovery model trained on broad priors,
against classical baselines, on synthetic and semantic environments.

Stages: the model (``train_steps = 0``: the shipped weights, unchanged; otherwise trained
from scratch on the broad prior with a curriculum, checkpointed under
``out_dir/checkpoints/train`` so a killed run resumes; FULL retrains with ``max_vars =
max(ds)``), one stage per synthetic cell (in/out of distribution x d x interventional
fraction, :mod:`.experiments`), the semantic environments and the real Sachs data, the
prior ablation (``ablation_steps > 0``: one model trained on the broad prior and one on
the narrow prior, same architecture, steps and seed, each checkpointed under
``out_dir/checkpoints/NAME``, then scored on the same datasets); the report and
the claims in :mod:`.report`.
"""

from __future__ import annotations

import dataclasses

import jax

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiments as E
from . import report
from .config import FULL, QUICK, Config
from .model import ModelConfig
from .train import TrainSettings, narrow_prior, shipped_weights, train_model, train_prior

__all__ = ["run", "get_model", "train_ablation"]

TITLE = "CausalTab: amortised causal discovery from broad causal priors"
ABLATION_D_MAX = 20  # the ablation models' max_vars and training d_max (narrow: d <= 10)


def get_model(ctx: RunContext, cfg: Config):
    """``((params, model_cfg), info)``: shipped weights or a training run."""
    if cfg.train_steps == 0:
        w = shipped_weights()
        if w is None:
            raise FileNotFoundError("no shipped CausalTab weights; set train_steps > 0")
        params, mcfg, meta = w
        return (params, mcfg), {"source": "shipped weights (jaxkit/causaltab/weights)",
                                "config": mcfg._asdict(), **meta}
    d_max = max(max(cfg.ds), 20)
    mcfg = ModelConfig(max_vars=d_max)
    st = TrainSettings(steps=cfg.train_steps, batch=cfg.train_batch, d_max=d_max,
                       n_max=cfg.train_n_max)

    def fit():
        p, hist, thr = train_model(ctx.key("causaltab-train"), mcfg, st,
                                   start=narrow_prior(d_max, cfg.train_n_max),
                                   end=train_prior(d_max, cfg.train_n_max), mesh=ctx.mesh,
                                   checkpoint_dir=ctx.out_dir / "checkpoints" / "train",
                                   resume=ctx.resume)
        return jax.device_get(p), hist, thr

    p, hist, thr = ctx.stage("causaltab-train", fit)
    return (p, mcfg), {"source": f"trained here, {cfg.train_steps} steps",
                       "config": mcfg._asdict(), "throughput": thr, "curve_tail": hist[-3:]}


def train_ablation(ctx: RunContext, cfg: Config) -> tuple[dict, dict]:
    """``({"broad": model, "narrow": model}, info)``: the shipped architecture trained
    for ``ablation_steps`` steps from the same key (same initial parameters and step
    keys) on :func:`.train.train_prior` and on :func:`.train.narrow_prior`, no
    curriculum; one resumable stage per model."""
    mcfg = ModelConfig(max_vars=ABLATION_D_MAX)
    st = TrainSettings(steps=cfg.ablation_steps, batch=cfg.ablation_batch,
                       d_max=ABLATION_D_MAX, n_max=cfg.ablation_n)
    models, info = {}, {"config": mcfg._asdict(), "settings": dataclasses.asdict(st)}
    for name, make in (("broad", train_prior), ("narrow", narrow_prior)):
        def fit(name=name, make=make):
            p, hist, thr = train_model(ctx.key("causaltab-ablation-train"), mcfg, st,
                                       end=make(ABLATION_D_MAX, cfg.ablation_n), mesh=ctx.mesh,
                                       checkpoint_dir=ctx.out_dir / "checkpoints" / name,
                                       resume=ctx.resume)
            return jax.device_get(p), hist, thr

        p, hist, thr = ctx.stage(f"causaltab-ablation-train-{name}", fit)
        models[name] = (p, mcfg)
        info[name] = {"final_bce": hist[-1]["bce"], "final_loss": hist[-1]["loss"],
                      "tasks_per_s": thr["tasks_per_s"]}
    return models, info


@register("causaltab", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Model, synthetic cells, semantic environments, real Sachs; tables, figures, claims."""
    cfg: Config = ctx.config
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    model, info = get_model(ctx, cfg)
    mcfg = model[1]
    ds = [d for d in cfg.ds if d <= mcfg.max_vars]
    common = dict(methods=cfg.methods, model=model, gies_max_d=cfg.gies_max_d)
    synth = []
    cells = [(w, d, f) for w in ("id", "ood") for d in ds for f in cfg.int_fracs]
    for which, d, f in ctx.track(cells, "causaltab synthetic"):
        key = ctx.key(f"causaltab-{which}-d{d}")  # the same for every fraction: paired
        synth.append(ctx.stage(f"causaltab-{which}-d{d}-int{f:g}", lambda w=which, d=d, f=f,
                               k=key: E.synthetic(k, which=w, d=d, n=cfg.n,
                                                  n_datasets=cfg.n_datasets, int_frac=f,
                                                  **common)))
    sem_rows = ctx.stage("causaltab-semantic", lambda: E.semantic_envs(
        ctx.key("causaltab-semantic"), networks=cfg.networks, seeds=cfg.semantic_seeds,
        n=cfg.semantic_n, max_vars=mcfg.max_vars, **common))
    sachs = ctx.stage("causaltab-sachs", lambda: E.sachs_real(
        ctx.key("causaltab-sachs"), rows=cfg.sachs_rows, **common))

    ablation = abl_info = None
    if cfg.ablation_steps > 0:
        models, abl_info = train_ablation(ctx, cfg)
        ablation = ctx.stage("causaltab-ablation", lambda: E.prior_ablation(
            ctx.key("causaltab-ablation"), models=models, d=cfg.ablation_d, n=cfg.ablation_n,
            n_datasets=cfg.n_datasets, int_fracs=(cfg.int_fracs[0], cfg.int_fracs[-1])))

    tested = report.claims(synth, sem_rows, ablation)
    figures = report.figures(synth, ctx.out_dir)
    md = report.markdown(cfg, synth=synth, sem_rows=sem_rows, sachs=sachs, tested=tested,
                         training=info, quick=ctx.quick, ablation=ablation,
                         ablation_training=abl_info)
    warnings = []
    if len(ds) < len(cfg.ds):
        warnings.append(f"d > max_vars={mcfg.max_vars} skipped: {sorted(set(cfg.ds) - set(ds))}")
    if cfg.n_datasets < 5:
        warnings.append(f"{cfg.n_datasets} datasets per cell: intervals are wide")
    metrics = dict(settings=cfg.to_dict(), model=info, synthetic=synth, semantic=sem_rows,
                   sachs=sachs, ablation=ablation, ablation_training=abl_info,
                   total_seconds=ctx.elapsed())
    return PipelineResult("causaltab", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=tested)
