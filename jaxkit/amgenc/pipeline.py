"""``jaxkit run amgenc [--quick]``: charge-balanced generation of amorphous oxide cells,
with its ablation.

Stages: **data** (relaxed, charge-balanced glass cells, :mod:`jaxkit.amgenc.data`);
**train** (the periodic graph flow model by conditional flow matching,
:mod:`jaxkit.amgenc.train`; checkpoints in ``OUT/checkpoints/train/<config>``, so a
killed run resumes to the same parameters); **samples** (every held-out target with the
three AMGenC mechanisms on or off, :mod:`jaxkit.amgenc.sample`); **relaxed** (FIRE
post-relaxation of the AMGenC cells); then the metrics (:mod:`jaxkit.amgenc.evaluate`)
and the report with the claims (:mod:`jaxkit.amgenc.report`).
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report
from .config import FULL, QUICK, Config
from .data import make_data
from .evaluate import RELAXED, evaluate, relax_cells
from .sample import AMGENC_ARM, sample_all
from .train import fit_denoiser

TITLE = "AMGenC: charge-balanced amorphous cell generation"


@register("amgenc", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Data, training, sampling of the AMGenC ablation, evaluation and the report."""
    cfg: Config = ctx.config
    data = ctx.stage("amgenc-data", lambda: make_data(cfg, ctx.rng("data")))
    # one checkpoint folder per configuration and seed
    ckpt = ctx.out_dir / "checkpoints" / "train" / f"{cfg.digest()[:16]}-seed{ctx.seed}"
    trained = fit_denoiser(cfg, data, ctx.key("train"), mesh=ctx.mesh, checkpoint_dir=ckpt,
                           resume=ctx.resume, track=ctx.track)
    samples = ctx.stage("amgenc-samples", lambda: sample_all(
        cfg, data, trained, ctx.key("sample"), mesh=ctx.mesh))
    relaxed = ctx.stage("amgenc-relaxed", lambda: relax_cells(cfg, samples, AMGENC_ARM))
    ev = evaluate(cfg, data, samples, trained.norm, ctx.rng("baseline"),
                  {AMGENC_ARM: relaxed})

    files = report.cell_files(ctx.out_dir, samples, ev)
    figures = [report.figure(ev, trained, ctx.out_dir)]
    claims = report.claims(cfg, ev, samples)
    warnings = []
    if claims[0].verdict != "yes":
        warnings.append("a cell with the final discrete projection on is not charge balanced")
    md = report.markdown(cfg, quick=ctx.quick, seed=ctx.seed, data=data, trained=trained,
                         samples=samples, ev=ev, files=files)
    base = {k: v for k, v in ev.baselines.items() if k != "random_rdf_l1"}
    metrics = {"arms": ev.rows, "baselines": base, "overhead": ev.overhead,
               "conditioning": ev.conditioning, "train_seconds": trained.seconds,
               "train_resumed_from": trained.resumed_from,
               "final_loss": float(trained.losses[-20:].mean()),
               "relax_seconds": relaxed[1], "total_seconds": ctx.elapsed(),
               "claim_ok": claims[0].verdict == "yes", "relaxed_row": RELAXED}
    return PipelineResult("amgenc", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
