"""A tiny registered pipeline that trains through :func:`jaxkit.training.fit` inside a
stage (``test_kill_resume_cli.py`` runs it with ``jaxkit run`` in a subprocess, kills it
with ``SIGKILL`` and resumes it). Importing this module registers ``toy-train``."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxkit.kernels import train

from jaxkit import training
from jaxkit.claims import Claim
from jaxkit.config import PipelineConfig, require
from jaxkit.registry import register
from jaxkit.report import PipelineResult
from jaxkit.stats import superiority


@dataclass(frozen=True)
class ToyTrainConfig(PipelineConfig):
    """Steps of SGD on a noisy linear regression, a checkpoint every ``every`` steps."""

    steps: int = 6
    every: int = 2

    def validate(self):
        require(self.steps >= 1, "steps", f"must be >= 1; got {self.steps}")
        require(self.every >= 1, "every", f"must be >= 1; got {self.every}")


def _loss(params, key, batch, aux):
    x, y = batch
    r = x @ params["w"] - (y + 0.01 * jax.random.normal(key, y.shape))
    return jnp.mean(r**2), {"mse": jnp.mean(r**2)}


def _batch(i):
    rng = np.random.default_rng(i)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    return x, x @ np.array([1.0, -2.0, 0.5], np.float32)


STEP = jax.jit(train.make_train_step(_loss, optax.sgd(0.05)))


def trained(key, cfg: ToyTrainConfig, folder):
    """The training stage: final weights and every logged mse (restored ones first)."""
    state = train.init({"w": jnp.zeros(3)}, optax.sgd(0.05))
    res = training.fit(key, state, STEP, _batch, steps=cfg.steps, checkpoint_dir=folder,
                       checkpoint_every=cfg.every, log_every=1)
    return {"w": np.asarray(res.state.params["w"]),
            "mse": [h["mse"] for h in res.full_history]}


@register("toy-train", quick=ToyTrainConfig(), full=ToyTrainConfig(steps=12),
          title="Toy training")
def run(ctx):
    cfg = ctx.config
    out = ctx.stage("train", lambda: trained(ctx.key("train"), cfg,
                                             ctx.out_dir / "checkpoints"))
    v = superiority(np.asarray(out["mse"][:1]) - np.asarray(out["mse"][-3:]))
    return PipelineResult("toy-train", "toy training", f"steps {cfg.steps}",
                          metrics={"w": out["w"].tolist(), "mse": out["mse"]},
                          claims=[Claim.from_verdict("Toy 2026", "it trains", v)])
