"""``jaxkit run causaltab``: an amortised causal-discovery model trained on broad priors,
against classical baselines, on synthetic and semantic environments.

Stages: the model (``train_steps = 0``: the shipped weights, unchanged; otherwise trained
from scratch on the broad prior with a curriculum, checkpointed under
``out_dir/checkpoints`` so a killed run resumes; FULL retrains with ``max_vars =
max(ds)``), one stage per synthetic cell (in/out of distribution x d x interventional
fraction, :mod:`.experiments`), the semantic environments and the real Sachs data; the
report and the claims in :mod:`.report`.
"""

from __future__ import annotations

import jax

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiments as E
from . import report
from .config import FULL, QUICK, Config
from .model import ModelConfig
from .train import TrainSettings, narrow_prior, shipped_weights, train_model, train_prior

__all__ = ["run", "get_model"]

TITLE = "CausalTab: amortised causal discovery from broad causal priors"


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
                                   checkpoint_dir=ctx.out_dir / "checkpoints",
                                   resume=ctx.resume)
        return jax.device_get(p), hist, thr

    p, hist, thr = ctx.stage("causaltab-train", fit)
    return (p, mcfg), {"source": f"trained here, {cfg.train_steps} steps",
                       "config": mcfg._asdict(), "throughput": thr, "curve_tail": hist[-3:]}


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

    tested = report.claims(synth, sem_rows)
    figures = report.figures(synth, ctx.out_dir)
    md = report.markdown(cfg, synth=synth, sem_rows=sem_rows, sachs=sachs, tested=tested,
                         training=info, quick=ctx.quick)
    warnings = []
    if len(ds) < len(cfg.ds):
        warnings.append(f"d > max_vars={mcfg.max_vars} skipped: {sorted(set(cfg.ds) - set(ds))}")
    if cfg.n_datasets < 5:
        warnings.append(f"{cfg.n_datasets} datasets per cell: intervals are wide")
    metrics = dict(settings=cfg.to_dict(), model=info, synthetic=synth, semantic=sem_rows,
                   sachs=sachs, total_seconds=ctx.elapsed())
    return PipelineResult("causaltab", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=tested)
