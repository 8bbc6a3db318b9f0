"""The real-activation stages of ``jaxkit run tempbench``.

``tempbench-acts``: the pretrained model ``cfg.lm_model`` (:func:`jaxkit.lm.load`) run
over the corpus and its residual stream recorded into the store ``out_dir/acts``
(:func:`jaxkit.tempbench.lm_acts.record_corpus`) -- or, with ``cfg.acts_dir``, the
user's store instead; ``tempbench-real``: every method and baseline trained on the
store's training documents, probed on the tasks, spliced back into the model (loss
recovered) and scored on the backtracking traces (:mod:`jaxkit.tempbench.real`,
:mod:`jaxkit.tempbench.splice`, :mod:`jaxkit.tempbench.backtracking`);
``tempbench-store``: the temporal crosscoder streamed from the store with the dictionary
sharded over the mesh (:mod:`jaxkit.tempbench.stream`).

Backtracking needs the correction marker " Wait" to be one token of the model's
vocabulary (SmolLM2's is); otherwise it is skipped and the claims say "not tested".
The model is loaded when the store is ours, or when the user's ``acts.json`` names a
model jaxkit can load with the layer and scale it was recorded at; otherwise splicing and
backtracking are skipped (the report says so).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from jaxkit.io import DataError, user_data
from jaxkit.registry import RunContext

from . import lm_acts, real, stream
from .baselines import ALL_METHODS
from .config import Config
from .results import RealResult, StoreMeta, StoreRun
from .train import TrainConfig, Trainer

__all__ = ["run_real", "record_stage", "load_model"]


def load_model(name: str):
    """:func:`jaxkit.lm.load` of ``name`` (None when it cannot be loaded)."""
    from jaxkit.lm import LMError, load

    try:
        return load(name)
    except (LMError, ValueError, OSError):
        return None


def record_stage(ctx: RunContext, cfg: Config, lm) -> Path:
    """The store: ``cfg.acts_dir`` or ``out_dir/acts`` recorded once (stage
    ``tempbench-acts``), the recorded block first."""
    if cfg.acts_dir:
        return Path(cfg.acts_dir)
    acts = ctx.out_dir / "acts"
    layers = (cfg.act_layer, *(x for x in cfg.lm_layers if x != cfg.act_layer))
    ctx.stage("tempbench-acts", lambda: str(lm_acts.record_corpus(
        lm, acts, layers=layers, n_docs=cfg.real.docs, doc_len=cfg.doc_len,
        docs_per_shard=cfg.real.docs_per_shard, text=cfg.corpus)))
    return acts


def run_real(ctx: RunContext, cfg: Config, trainer: Trainer, tc: TrainConfig) -> RealResult:
    """The real-activation stages (module docstring): a
    :class:`~jaxkit.tempbench.results.RealResult` (the source, the store's metadata, the
    panel of stage ``tempbench-real`` and, with ``store_steps``, the streamed training of
    stage ``tempbench-store``). ``tc``: the training settings of the synthetic panel
    (latents, budget and steps are replaced by the ``real_*`` fields)."""
    from . import backtracking as BT

    lm = None
    if not cfg.acts_dir:
        lm = load_model(cfg.lm_model)
        if lm is None:
            raise DataError(f"lm_model: {cfg.lm_model!r} cannot be loaded by jaxkit.lm.load")
    acts = record_stage(ctx, cfg, lm)
    # the user's store: a bad shard (NaN, ids out of range) is one line naming it
    with user_data("acts_dir", acts, folder=True) if cfg.acts_dir else contextlib.nullcontext():
        docs = lm_acts.load_documents(acts, max_docs=cfg.real.docs,
                                      with_layers=not cfg.real.methods
                                      or "mlc" in cfg.real.methods)
    meta = docs.meta
    if lm is None and meta.get("model") and "scale" in meta and "layer" in meta:
        lm = load_model(str(meta["model"]))
    tc = tc._replace(n_latents=cfg.real.latents, k=cfg.real.k, steps=cfg.real.steps)
    lmc = None
    if lm is not None:
        lmc = real.LMContext(lm, int(meta["layer"]), float(meta["scale"]))

    def compare():
        traces = None
        if lmc is not None and cfg.bt_docs >= 4 and len(lm.tokenizer.encode(BT.WAIT)) == 1:
            tr = BT.make_traces(lm.tokenizer, ctx.seed, n_docs=cfg.bt_docs,
                                doc_len=cfg.doc_len)
            traces = (lm_acts.stream_of(lm, tr.docs, lmc.layer, lmc.scale), tr)
        return real.compare_real(
            ctx.key("tempbench-real"), docs, tc, windows=cfg.real.windows,
            methods=cfg.real.methods or ALL_METHODS, n_seeds=cfg.real.seeds, trainer=trainer,
            name="tempbench-real", k_probe=cfg.k_probe, lmc=lmc, splice_docs=cfg.splice_docs,
            traces=traces, fpr=cfg.bt_fpr,
            steer_norm=cfg.steer_scale * float(np.sqrt(docs.acts.shape[-1])),
            steer_sites=cfg.steer_sites, probe_docs=cfg.probe_docs)
    panel = ctx.stage("tempbench-real", compare)
    store_run = None
    if cfg.store_steps:
        T = cfg.real.windows[0]

        def store():
            r = stream.train_tc_on_store(
                ctx.key("tempbench-store"), acts, window=T, n_latents=cfg.real.latents,
                k=cfg.real.k, steps=cfg.store_steps, batch_size=cfg.batch_size, lr=cfg.lr,
                mesh=ctx.mesh, checkpoint_dir=ctx.out_dir / "checkpoints" / "store",
                resume=ctx.resume)
            held = real.held_out_windows(docs, T, probe_docs=cfg.probe_docs)
            return StoreRun(fvu=stream.window_fvu(r.params, held, cfg.real.k * T),
                            mesh=r.config["mesh"], steps=cfg.store_steps,
                            shards=len(list(acts.glob("*.safetensors"))))
        store_run = ctx.stage("tempbench-store", store)
    return RealResult(source=cfg.acts_dir or f"{cfg.lm_model} over {cfg.corpus}",
                      meta=StoreMeta.of(meta), tokens=int(docs.tokens.size), real=panel,
                      store=store_run)
