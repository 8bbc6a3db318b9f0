"""``jaxkit run universal-circuits``: cross-model cross-layer transcoders between two
vision models, shared class circuits and gradient-free model surgery.

Stages (each cached with ``ctx.stage``; every training checkpointed under
``out_dir/checkpoints/`` so a killed run resumes to the same parameters):

1. the models (flax nnx) on augmented real digits: the ``family`` model (a ViT, or an
   MLP) and a CNN, with ``second_seed`` a second seed of both (their own pair), with
   ``same_arch_pair`` a second seed of the family model (same-architecture pair), and one
   CNN trained without each surgery class;
2. per pair: activations recorded into one multi-model store, the universal-circuit
   transcoder (UC) trained on it (data-parallel on ``ctx.mesh``), its reconstruction and
   fidelity (``uc-eval``: FVU, spliced KL, and the replacement model's top-1 agreement
   and KL fidelity against a mean ablation), the class circuits of both models, their
   intersection and baselines, and the circuits' faithfulness (``uc-faithful``, a cheap
   stage on the saved circuits);
3. the misaligned pair: the main pair's transcoder trained with the second model's rows
   from other images, whose calibrated universality is the negative control
   (:mod:`.universality`);
   two single-model CLTs (the baseline of joint training), each trained in the pair's
   shapes with the other model masked out (one compiled step for every transcoder);
4. per held-out class: the surgery pair (the family model giving, the CNN trained without
   that class receiving), the transfer and its controls (random gate, another class's circuit,
   receiver-only class-mean head).

Your own activations: ``--set activations=DIR`` (:mod:`.userdata`).
"""

from __future__ import annotations

import gc

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiment as E
from . import report
from .config import FULL, QUICK, Config
from .mnist import load_task

TITLE = "Universal Circuits: cross-model transcoders, shared class circuits, surgery"
# extra cache key of the evaluation stages: 2 adds the replacement model's output
# fidelity (top-1 agreement, KL fidelity), so a resumed run recomputes only them
EVAL_VERSION = 2


@register("universal-circuits", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Models, transcoders, circuits, baselines and surgery; tables, figures, claims.

    The objects alive when it starts (the imported libraries) are exempt from Python's
    cyclic garbage collector while it runs (``gc.freeze``): every full collection walked
    them all, ~8% of the quick run's CPU time, and none of them is garbage."""
    gc.freeze()
    try:
        return _run(ctx)
    finally:
        gc.unfreeze()


def _run(ctx: RunContext) -> PipelineResult:
    cfg: Config = ctx.config
    if cfg.activations:
        return _run_user(ctx, cfg)
    digits = load_task(cfg.task, cfg.image_size, cfg.test_every, cfg.mnist_train,
                       cfg.mnist_test)
    out, common = ctx.out_dir, dict(resume=ctx.resume, mesh=ctx.mesh)
    names, pair_names = E.model_names(cfg)
    models = {n: ctx.stage(f"uc-model-{n}", lambda n=n: E.train_model(
        ctx.key(f"model-{n}"), ctx.key("model-stream"), cfg, n, digits, out, **common))
        for n in ctx.track(names, "models")}
    pairs, evals, faith = {}, {}, {}
    for tag, pn in ctx.track(list(pair_names.items()), "pairs"):
        uc = ctx.stage(f"uc-train-{tag}", lambda tag=tag, pn=pn: E.train_pair(
            ctx.key(f"uc-{tag}"), ctx.key("model-stream"), cfg, pn, models, digits, out, tag,
            **common, n_seeds=cfg.uc.seeds))
        evals[tag] = ctx.stage(f"uc-eval-{tag}", lambda pn=pn, uc=uc: E.uc_eval(
            cfg, pn, models, uc, digits), config=EVAL_VERSION)
        pa = ctx.stage(f"uc-circuits-{tag}", lambda tag=tag, pn=pn, uc=uc: E.pair_analysis(
            ctx.key(f"random-{tag}"), cfg, pn, models, uc, digits))
        faith[tag] = ctx.stage(f"uc-faithful-{tag}", lambda pn=pn, uc=uc, pa=pa:
                               E.circuit_faithfulness(cfg, pn, models, uc, pa, digits))
        pairs[tag] = (pn, pa)
    fam = cfg.family
    main_names = pair_names[f"{fam}-cnn"]
    mis = ctx.stage("uc-train-misaligned", lambda: E.train_pair(
        ctx.key("uc-misaligned"), ctx.key("model-stream"), cfg, main_names, models, digits,
        out, "misaligned", **common, n_seeds=cfg.uc.seeds, misaligned=True))
    mis_univ = ctx.stage("uc-universal-misaligned", lambda: E.universality(
        ctx.key("universal-misaligned"), cfg, main_names, models, mis, digits))
    singles = [ctx.stage(f"uc-single-{n}", lambda m=m, n=n: E.train_pair(
        ctx.key(f"single-{n}"), ctx.key("model-stream"), cfg, main_names, models, digits,
        out, f"single-{n}", **common, n_seeds=cfg.uc.seeds, single=m))
        for m, n in enumerate(main_names)]
    single = ctx.stage("uc-single-matched", lambda: E.single_baseline(
        cfg, main_names, models, singles, digits))
    surg = {}
    for c in ctx.track(list(cfg.surgery_classes), "surgery classes"):
        rn = [fam, E.receiver(c)]
        suc = ctx.stage(f"uc-train-surgery{c}", lambda c=c, rn=rn: E.train_pair(
            ctx.key(f"uc-surgery{c}"), ctx.key("model-stream"), cfg, rn, models, digits, out,
            f"surgery{c}", **common, n_seeds=cfg.uc.seeds))
        surg[c] = ctx.stage(f"uc-surgery{c}", lambda c=c, rn=rn, suc=suc: E.surgery(
            ctx.key(f"surgery-random{c}"), cfg, rn, models, suc, digits, c))
    figures = report.figures(pairs, surg, cfg.image_size, out)
    claims = report.claims(cfg, models, pairs, single, surg, misaligned=mis_univ)
    md = report.markdown(cfg, models, evals, pairs, single, surg, faith, misaligned=mis_univ)
    warnings = [] if not ctx.quick else [
        f"quick run: tiny models and transcoders (see the settings); {cfg.uc.seeds} "
        "transcoder seeds are the replicates of the circuit claims"]
    metrics = dict(settings=cfg.to_dict(),
                   model_accuracy={n: m.accuracy for n, m in models.items()},
                   transcoders={t: e.as_dict() for t, e in evals.items()},
                   faithfulness={t: f.as_dict() for t, f in faith.items()},
                   pairs={t: p.as_dict() for t, (_, p) in pairs.items()},
                   misaligned=mis_univ.control_dict(), single_matched=single.as_dict(),
                   surgery={str(c): sg.as_dict() for c, sg in surg.items()},
                   total_seconds=ctx.elapsed())
    return PipelineResult("universal-circuits", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)


def _run_user(ctx: RunContext, cfg: Config) -> PipelineResult:
    """The transcoder on the user's activation folder (:mod:`.userdata`)."""
    from . import userdata

    # the user's folder first: a bad one is one line, before any work
    userdata.check_user(cfg.activations, ctx.out_dir, models=cfg.activation_models,
                        batch=cfg.uc.batch)
    res = ctx.stage("uc-user", lambda: userdata.fit_user(
        ctx.key("uc-user"), cfg.activations, ctx.out_dir, models=cfg.activation_models,
        n_latents=cfg.uc.latents, k=cfg.uc.k, steps=cfg.uc.steps, batch=cfg.uc.batch,
        lr=cfg.uc.lr, chunk=cfg.log_every, tau=cfg.universal_tau,
        eval_rows=cfg.user_eval_rows, resume=ctx.resume, mesh=ctx.mesh))
    md = userdata.markdown(res, cfg.activations)
    metrics = res.as_dict()
    from . import usercircuits

    if usercircuits.has_labels(ctx.out_dir):
        uc = ctx.stage("uc-user-circuits", lambda: usercircuits.circuits_of_store(
            ctx.key("uc-user-circuits"), cfg, res, ctx.out_dir))
        md += "\n\n" + usercircuits.markdown(uc, res.models)
        metrics["circuits"] = uc.as_dict()
    return PipelineResult("universal-circuits", TITLE, md, metrics=metrics,
                          claims=userdata.claims(res, cfg.universal_tau))
