"""``jaxkit run amgenc [--quick]``: charge-balanced generation of amorphous oxide cells,
with its ablation, on one dataset (``kind``) and then on each of ``other_kinds``.

Stages per dataset: **data** (relaxed, charge-balanced glass cells with a held-out split
and a twin of every held-out cell, :mod:`jaxkit.amgenc.data`); **train** (the periodic
graph denoiser, :mod:`jaxkit.amgenc.train`; checkpoints in
``OUT/checkpoints/train/<config>``, so a killed run resumes to the same parameters; with
``baseline_model`` a second one, the AMDEN-style unconstrained baseline trained with
plain element noise, in ``OUT/checkpoints/baseline/<config>``);
**samples** (every held-out target with the three AMGenC mechanisms on or off,
:mod:`jaxkit.amgenc.sample`); **relaxed** (FIRE post-relaxation of the AMGenC cells);
then the metrics (:mod:`jaxkit.amgenc.evaluate`: charge, plausibility, design accuracy
at the recipe's pressure) and the report with the claims (:mod:`jaxkit.amgenc.report`).
The stages of a further dataset carry its kind in their names (``amgenc-data-silica``),
its claims and files too.
"""

from __future__ import annotations

import dataclasses

from jaxkit.claims import Claim
from jaxkit.io import user_data
from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report, report_more
from .baselines import existing_methods
from .config import FULL, QUICK, Config
from .data import make_data
from .evaluate import RELAXED, evaluate, relax_cells
from .judging import judge_evaluation
from .sample import AMGENC_ARM, sample_all
from .scale import sample_large
from .train import fit_denoiser
from .userdata import read_cells

TITLE = "AMGenC: charge-balanced amorphous cell generation"


def _dataset(ctx: RunContext, cfg: Config, tag: str
             ) -> tuple[str, list, dict, list, list, tuple]:
    """One dataset: (markdown, its setup and extension rows, metrics, figures, warnings,
    (kind, evaluation, samples) for the paper rows decided over every dataset); ``tag``
    is "" for the first dataset and ``-<kind>`` for the others (stage, key, file and
    claim names)."""
    data = ctx.stage(f"amgenc-data{tag}", lambda: make_data(cfg, ctx.rng(f"data{tag}")))
    # one checkpoint folder per configuration and seed
    ckpt = ctx.out_dir / "checkpoints" / "train" / f"{cfg.digest()[:16]}-seed{ctx.seed}"
    trained = fit_denoiser(cfg, data, ctx.key(f"train{tag}"), mesh=ctx.mesh,
                           checkpoint_dir=ckpt, resume=ctx.resume, track=ctx.track)
    baseline = None
    if cfg.baseline_model:  # AMDEN-style: the same denoiser, plain element noise
        base_cfg = dataclasses.replace(cfg, balanced_share=0.0)
        baseline = fit_denoiser(
            base_cfg, data, ctx.key(f"train-baseline{tag}"), mesh=ctx.mesh,
            checkpoint_dir=ctx.out_dir / "checkpoints" / "baseline"
            / f"{base_cfg.digest()[:16]}-seed{ctx.seed}", resume=ctx.resume, track=ctx.track)
    samples = ctx.stage(f"amgenc-samples{tag}", lambda: sample_all(
        cfg, data, trained, ctx.key(f"sample{tag}"), mesh=ctx.mesh, baseline=baseline))
    relaxed = ctx.stage(f"amgenc-relaxed{tag}",
                        lambda: relax_cells(cfg, samples, AMGENC_ARM))
    ev = evaluate(cfg, data, samples, trained.norm, ctx.rng(f"baseline{tag}"),
                  {AMGENC_ARM: relaxed})
    methods = existing_methods(samples, data, mesh=ctx.mesh)
    judged = ctx.stage(f"amgenc-judge{tag}", lambda: judge_evaluation(
        cfg, data, samples, ev, methods, ctx.rng(f"judge{tag}")))
    ev = dataclasses.replace(ev, judge=judged, methods=methods)
    prefix = f"amgenc{tag.replace('-', '_')}"
    files = report.cell_files(ctx.out_dir, samples, ev, prefix)
    figures = [report.figure(ev, trained, ctx.out_dir, prefix)]
    claims = report.claims(cfg, ev, samples, data)
    if tag:
        claims = [dataclasses.replace(c, claim=f"[{cfg.kind}] {c.claim}") for c in claims]
    balanced = report.exact_balance(ev).verdict == "yes"
    warnings = []
    if not balanced:
        warnings.append(f"{cfg.kind}: a cell with the final discrete projection on is not "
                        "charge balanced")
    md = report.markdown(cfg, quick=ctx.quick, seed=ctx.seed, data=data, trained=trained,
                         samples=samples, ev=ev, files=files)
    md += "\n\n" + report_more.markdown(cfg, ev, samples, data)
    scale = None
    if cfg.scale.cells and not tag:
        scale = ctx.stage("amgenc-scale", lambda: sample_large(
            cfg, data, trained, ctx.key("scale"), mesh=ctx.mesh))
        md += "\n\n" + report.scale_text(scale)
    metrics = {"kind": cfg.kind, "arms": _plain(ev.rows), "baselines": ev.baselines.as_dict(),
               "overhead": ev.overhead.as_dict(), "conditioning": _plain(ev.conditioning),
               "plausibility": _plain(ev.plausibility), "design": _plain(ev.design),
               "train_seconds": trained.seconds, "train_resumed_from": trained.resumed_from,
               "final_loss": float(trained.losses[-20:].mean()),
               "baseline_train_seconds": None if baseline is None else baseline.seconds,
               "baseline_final_loss": None if baseline is None
               else float(baseline.losses[-20:].mean()),
               "relax_seconds": relaxed[1], "claim_ok": balanced,
               "n_test": len(data.test), "judge": judged.as_dict(),
               "methods": _plain(methods), "relaxed_row": RELAXED,
               "scale": None if scale is None else scale.as_dict()}
    return md, claims, metrics, figures, warnings, (cfg.kind, ev, samples)


def _plain(results: dict) -> dict:
    """``{name: result.as_dict()}`` (:mod:`jaxkit.amgenc.results`)."""
    return {k: r.as_dict() for k, r in results.items()}


@register("amgenc", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Every dataset's data, training, sampling, evaluation and report."""
    cfg: Config = ctx.config
    for setting in ("user_train", "user_test"):  # the user's files first: one line each
        if getattr(cfg, setting):                # for a bad one, before any work
            path = getattr(cfg, setting)
            with user_data(setting, path, text=not str(path).endswith(".npz")) as path:
                read_cells(path)
    md, claims, metrics, figures, warnings, first = _dataset(ctx, cfg, "")
    metrics["datasets"] = {}
    evidence = [first]
    for kind in cfg.other_kinds:
        sub = dataclasses.replace(cfg, kind=kind, other_kinds=())
        md2, c2, m2, f2, w2, ev2 = _dataset(ctx, sub, f"-{kind}")
        evidence.append(ev2)
        md += f"\n\n### Dataset `{kind}`\n\n" + md2
        claims: list[Claim] = claims + c2
        figures += f2
        warnings += w2
        metrics["datasets"][kind] = m2
        metrics["claim_ok"] = metrics["claim_ok"] and m2["claim_ok"]
    metrics["total_seconds"] = ctx.elapsed()
    # the paper rows, decided over every dataset (Holm), then each dataset's own rows
    claims = report.paper_claims(cfg, evidence) + claims
    n_test = min([metrics["n_test"]] + [m["n_test"] for m in metrics["datasets"].values()])
    claims = report_more.withhold(claims, n_test, cfg.min_cells)
    return PipelineResult("amgenc", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
