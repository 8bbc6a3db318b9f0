"""The models a ``jaxkit run causaltab`` trains: each described by a :class:`Recipe`
(key stream, architecture, training settings, priors), trained in one resumable stage
whose cache key carries the recipe; the main model (:func:`get_model`: the shipped
weights when ``train_steps = 0``) and the prior ablation's two arms
(:func:`train_ablation`), whose broad arm is the main model when the recipes coincide.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax

from jaxkit.causal_model.model import ModelConfig
from jaxkit.registry import RunContext

from .config import Config
from .results import AblationTraining, ArmTraining, TrainingInfo
from .train import TrainSettings, narrow_prior, shipped_weights, train_model, train_prior

__all__ = ["get_model", "train_ablation", "Recipe", "main_recipe", "ablation_recipe",
           "ABLATION_D_MAX"]

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
    ``ablation.steps`` x ``ablation.batch`` tasks of at most ``ablation.n`` rows, from the
    main training's key stream (both arms start from the same parameters)."""
    st = TrainSettings(steps=cfg.ablation.steps, batch=cfg.ablation.batch,
                       d_max=ABLATION_D_MAX, n_max=cfg.ablation.n)
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
    """``((params, model_cfg), info, trained)``: the shipped weights (``train_steps = 0``)
    or the main training (:func:`main_recipe`); ``info``: a
    :class:`.results.TrainingInfo`; ``trained``: ``(recipe, (params, history,
    throughput))`` of a training run here (for :func:`train_ablation`), else None."""
    if cfg.train_steps == 0:
        w = shipped_weights()
        if w is None:
            raise FileNotFoundError("no shipped CausalTab weights; set train_steps > 0")
        params, mcfg, meta = w
        return (params, mcfg), TrainingInfo(
            source="shipped weights (jaxkit/causal_model/weights)", config=mcfg._asdict(),
            extra=dict(meta)), None
    recipe = main_recipe(cfg)
    p, hist, thr = _train(ctx, "causaltab-train", recipe, "train")
    curr = f"curriculum from the {recipe.start} prior, " if recipe.start else ""
    return (p, recipe.model), TrainingInfo(
        source=f"trained here, {cfg.train_steps} steps x {cfg.train_batch} tasks "
               f"({curr}broad prior, d <= {cfg.train_d_max}, n <= {cfg.train_n_max})",
        config=recipe.model._asdict(), settings=dataclasses.asdict(recipe.settings),
        throughput=thr, curve_tail=hist[-3:]), (recipe, (p, hist, thr))


def train_ablation(ctx: RunContext, cfg: Config, trained=None
                   ) -> tuple[dict, AblationTraining]:
    """``({"broad": model, "narrow": model}, info)``: the arms of
    :func:`ablation_recipe`, one resumable stage each, except that the broad arm is the
    main training itself when ``trained`` (``(recipe, (params, history, throughput))``
    from :func:`get_model`) has the broad arm's recipe (same key, architecture,
    settings and priors: the same parameters; ``info.arms["broad"].shared_with_main``)."""
    models, arms = {}, {}
    for name in ("broad", "narrow"):
        recipe = ablation_recipe(cfg, name)
        shared = trained is not None and trained[0] == recipe
        if shared:
            p, hist, thr = trained[1]
        else:
            p, hist, thr = _train(ctx, f"causaltab-ablation-train-{name}", recipe, name)
        models[name] = (p, recipe.model)
        arms[name] = ArmTraining(final_bce=hist[-1]["bce"], final_loss=hist[-1]["loss"],
                                 tasks_per_s=thr["tasks_per_s"], shared_with_main=shared)
    return models, AblationTraining(
        config=ModelConfig(max_vars=ABLATION_D_MAX)._asdict(),
        settings=dataclasses.asdict(ablation_recipe(cfg, "broad").settings), arms=arms)
