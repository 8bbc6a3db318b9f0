"""``jaxkit run causaltab``: an amortised causal-discovery model trained on broad priors,
against classical baselines, on synthetic and semantic environments.

Stages: the model (``train_steps = 0``: the shipped weights, unchanged; otherwise trained
from scratch on the broad prior, :func:`main_recipe`, checkpointed under
``out_dir/checkpoints/train`` so a killed run resumes; the stage's cache key carries the
:class:`Recipe`), one stage per synthetic cell (in/out of distribution x d x
interventional fraction, :mod:`.experiments`; d above the model's ``max_vars`` scored
over covering variable subsets), the semantic environments and the real Sachs data, the
prior ablation (``ablation_steps > 0``: one model trained on the broad prior and one on
the narrow prior, same architecture, steps and seed, each checkpointed under
``out_dir/checkpoints/NAME``, the broad one being the main model when the recipes
coincide, :func:`train_ablation`; then scored on the same datasets); the report and the
claims in :mod:`.report`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiments as E
from . import report
from .config import FULL, QUICK, Config
from .model import ModelConfig
from .train import TrainSettings, narrow_prior, shipped_weights, train_model, train_prior

__all__ = ["run", "get_model", "train_ablation", "Recipe", "main_recipe",
           "ablation_recipe"]

TITLE = "CausalTab: amortised causal discovery from broad causal priors"
ABLATION_D_MAX = 20  # the ablation models' max_vars and training d_max (narrow: d <= 10)


class Recipe(NamedTuple):
    """Everything that determines a trained model's parameters: the key stream
    (:meth:`RunContext.key` name), the architecture, the training settings and the
    priors (names in :data:`PRIORS`; ``start`` None: no curriculum, the ``end`` prior
    from the first step). Two trainings with equal recipes give equal parameters, so the
    ablation's broad arm reuses the main training when its recipe is the main's."""

    key: str
    model: ModelConfig
    settings: TrainSettings
    start: str | None
    end: str


PRIORS = {"broad": train_prior, "narrow": narrow_prior}
TRAIN_KEY = "causaltab-train"  # one stream for the main training and both ablation arms


def main_recipe(cfg: Config) -> Recipe:
    """The main training (``train_steps > 0``): ``max_vars = train_d_max``, the broad
    prior, from the narrow one through a curriculum when ``train_curriculum``."""
    st = TrainSettings(steps=cfg.train_steps, batch=cfg.train_batch, d_max=cfg.train_d_max,
                       n_max=cfg.train_n_max)
    return Recipe(TRAIN_KEY, ModelConfig(max_vars=cfg.train_d_max), st,
                  "narrow" if cfg.train_curriculum else None, "broad")


def ablation_recipe(cfg: Config, arm: str) -> Recipe:
    """One arm of the prior ablation (``arm`` in :data:`PRIORS`): the shipped
    architecture (``max_vars = ABLATION_D_MAX``) on that prior alone, no curriculum,
    ``ablation_steps`` x ``ablation_batch`` tasks of at most ``ablation_n`` rows, from the
    main training's key stream (both arms start from the same parameters)."""
    st = TrainSettings(steps=cfg.ablation_steps, batch=cfg.ablation_batch,
                       d_max=ABLATION_D_MAX, n_max=cfg.ablation_n)
    return Recipe(TRAIN_KEY, ModelConfig(max_vars=ABLATION_D_MAX), st, None, arm)


def _train(ctx: RunContext, stage: str, recipe: Recipe, checkpoints: str):
    """``(params, history, throughput)`` of ``recipe``: one resumable stage whose cache
    key carries the recipe, checkpointed under ``out_dir/checkpoints/NAME``."""
    st = recipe.settings

    def prior(name):
        return PRIORS[name](st.d_max, st.n_max)

    def fit():
        p, hist, thr = train_model(ctx.key(recipe.key), recipe.model, st,
                                   start=None if recipe.start is None else prior(recipe.start),
                                   end=prior(recipe.end), mesh=ctx.mesh,
                                   checkpoint_dir=ctx.out_dir / "checkpoints" / checkpoints,
                                   resume=ctx.resume)
        return jax.device_get(p), hist, thr

    return ctx.stage(stage, fit, config=repr(recipe))


def get_model(ctx: RunContext, cfg: Config):
    """``((params, model_cfg), info)``: the shipped weights (``train_steps = 0``) or the
    main training (:func:`main_recipe`); ``info["trained"]``: ``(recipe, (params,
    history, throughput))`` of a training run here (for :func:`train_ablation`), else
    absent."""
    if cfg.train_steps == 0:
        w = shipped_weights()
        if w is None:
            raise FileNotFoundError("no shipped CausalTab weights; set train_steps > 0")
        params, mcfg, meta = w
        return (params, mcfg), {"source": "shipped weights (jaxkit/causaltab/weights)",
                                "config": mcfg._asdict(), **meta}
    recipe = main_recipe(cfg)
    p, hist, thr = _train(ctx, "causaltab-train", recipe, "train")
    curr = f"curriculum from the {recipe.start} prior, " if recipe.start else ""
    return (p, recipe.model), {
        "source": f"trained here, {cfg.train_steps} steps x {cfg.train_batch} tasks "
                  f"({curr}broad prior, d <= {cfg.train_d_max}, n <= {cfg.train_n_max})",
        "config": recipe.model._asdict(), "settings": dataclasses.asdict(recipe.settings),
        "throughput": thr, "curve_tail": hist[-3:], "trained": (recipe, (p, hist, thr))}


def train_ablation(ctx: RunContext, cfg: Config, trained=None) -> tuple[dict, dict]:
    """``({"broad": model, "narrow": model}, info)``: the arms of
    :func:`ablation_recipe`, one resumable stage each, except that the broad arm is the
    main training itself when ``trained`` (``(recipe, (params, history, throughput))``
    from :func:`get_model`) has the broad arm's recipe (same key, architecture,
    settings and priors: the same parameters; ``info["broad"]["shared_with_main"]``)."""
    models = {}
    info = {"config": ModelConfig(max_vars=ABLATION_D_MAX)._asdict(),
            "settings": dataclasses.asdict(ablation_recipe(cfg, "broad").settings)}
    for name in ("broad", "narrow"):
        recipe = ablation_recipe(cfg, name)
        shared = trained is not None and trained[0] == recipe
        if shared:
            p, hist, thr = trained[1]
        else:
            p, hist, thr = _train(ctx, f"causaltab-ablation-train-{name}", recipe, name)
        models[name] = (p, recipe.model)
        info[name] = {"final_bce": hist[-1]["bce"], "final_loss": hist[-1]["loss"],
                      "tasks_per_s": thr["tasks_per_s"], "shared_with_main": shared}
    return models, info


@register("causaltab", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Model, synthetic cells, semantic environments, real Sachs; tables, figures, claims."""
    cfg: Config = ctx.config
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    model, info = get_model(ctx, cfg)
    trained = info.pop("trained", None)
    mcfg = model[1]
    ds = list(cfg.ds)  # d > max_vars: CausalTab over variable subsets (``chunked``)
    common = dict(methods=cfg.methods, model=model, gies_max_d=cfg.gies_max_d)
    synth = []
    cells = [(w, d, f) for w in ("id", "ood") for d in ds for f in cfg.int_fracs]
    for which, d, f in ctx.track(cells, "causaltab synthetic"):
        key = ctx.key(f"causaltab-{which}-d{d}")  # the same for every fraction: paired
        synth.append(ctx.stage(f"causaltab-{which}-d{d}-int{f:g}", lambda w=which, d=d, f=f,
                               k=key: E.synthetic(k, which=w, d=d, n=cfg.n,
                                                  n_datasets=cfg.n_datasets, int_frac=f,
                                                  **common)))
        synth[-1]["chunked"] = d > mcfg.max_vars
    sem_rows = ctx.stage("causaltab-semantic", lambda: E.semantic_envs(
        ctx.key("causaltab-semantic"), networks=cfg.networks, seeds=cfg.semantic_seeds,
        n=cfg.semantic_n, max_vars=mcfg.max_vars, **common))
    sachs = ctx.stage("causaltab-sachs", lambda: E.sachs_real(
        ctx.key("causaltab-sachs"), rows=cfg.sachs_rows, **common))

    ablation = abl_info = None
    if cfg.ablation_steps > 0:
        models, abl_info = train_ablation(ctx, cfg, trained)
        ablation = ctx.stage("causaltab-ablation", lambda: E.prior_ablation(
            ctx.key("causaltab-ablation"), models=models, d=cfg.ablation_d, n=cfg.ablation_n,
            n_datasets=cfg.ablation_datasets,
            int_fracs=(cfg.int_fracs[0], cfg.int_fracs[-1])),
            config=(abl_info["broad"]["shared_with_main"],))

    tested = report.claims(synth, sem_rows, ablation)
    figures = report.figures(synth, ctx.out_dir)
    md = report.markdown(cfg, synth=synth, sem_rows=sem_rows, sachs=sachs, tested=tested,
                         training=info, quick=ctx.quick, ablation=ablation,
                         ablation_training=abl_info)
    warnings = []
    if any(d > mcfg.max_vars for d in ds):
        warnings.append(f"d > max_vars={mcfg.max_vars}: CausalTab scored over covering "
                        f"subsets of {mcfg.max_vars} variables at d = "
                        f"{[d for d in ds if d > mcfg.max_vars]}")
    if cfg.n_datasets < 5:
        warnings.append(f"{cfg.n_datasets} datasets per cell: intervals are wide")
    metrics = dict(settings=cfg.to_dict(), model=info, synthetic=synth, semantic=sem_rows,
                   sachs=sachs, ablation=ablation, ablation_training=abl_info,
                   total_seconds=ctx.elapsed())
    return PipelineResult("causaltab", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=tested)
