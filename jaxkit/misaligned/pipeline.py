"""``jaxkit run misaligned``: models against their misaligned baselines on real molecules.

Claim under test (position paper "AI for drug discovery models often do not learn as
expected", ICML 2026 FM4LS): misaligned baselines (size, scrambled labels, perturbed or
random inputs, nearest neighbours) are competitive with the models, exposing what the
models do not learn (claims: :mod:`jaxkit.misaligned.report`). Per data set (stages
cached under ``out_dir/.stages``):

1. ``misaligned-data-<ds>``: load (:mod:`jaxkit.data.molecules`), subsample to
   ``cfg.max_molecules`` (``ctx.rng``), featurise; ``seeds`` random and ``seeds``
   scaffold splits, and a validation split of each training set
   (:func:`jaxkit.misaligned.features.validation_splits`).
2. ``misaligned-<ds>-baselines``: the whole baseline family over the ``2 seeds`` splits
   and again over their inner validation splits (the best baseline is chosen there)
   (split over ``ctx.mesh``'s ``"data"`` axis, one seed at a time per device) and
   vmapped over the perturbation strengths, one compiled call for both.
3. ``misaligned-<ds>-<model>``: the models of ``cfg.models`` (fingerprint MLP, atom-only
   MPNN, bond-aware D-MPNN of :mod:`jaxkit.misaligned.dmpnn`), all ``2 seeds`` trainings in one
   :func:`jaxkit.training.fit` with checkpoints under ``out_dir/checkpoints/``, the
   seeds split over ``ctx.mesh``'s ``"data"`` axis (the same models on any mesh).
4. :func:`jaxkit.misaligned.audit.evaluate` per split; report and claims in
   :mod:`jaxkit.misaligned.report`.
5. ``misaligned-<ds>-addcarbon``: Renz et al.'s generative AddCarbon baseline on the
   first random training set, scored beside that split's held-out molecules
   (:mod:`jaxkit.misaligned.addcarbon`).
6. With ``classification`` and the solubility set: its classes ((A) low vs the rest),
   the baseline family and the models of ``cfg.models`` on the 0/1 labels, AUROC / accuracy
   (:mod:`jaxkit.misaligned.classification`).
7. With ``branches``: drug-target interaction (Davis, cold splits) and virtual screening
   (DUD-E decoys), one stage each (:mod:`jaxkit.misaligned.branches`); they decide the
   multiple-branches paper row.
"""

from __future__ import annotations

import numpy as np

from jaxkit.data import molecules
from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import addcarbon as G
from . import branches as Br
from . import classification as C
from . import evaluation as A
from . import models as Mo
from . import report
from .baselines import FamilySettings
from .config import FULL, QUICK, Config
from .features import Splits, featurise, make_splits, validation_splits
from .results import ClassResult, GenerativeComparison, SplitSummary

TITLE = "Misaligned baselines for AI drug discovery"


def _data(ctx: RunContext, cfg: Config, name: str):
    smiles, y, info = molecules.load(name)
    if cfg.max_molecules is not None and len(smiles) > cfg.max_molecules:
        keep = np.sort(ctx.rng(f"misaligned-subsample-{name}").permutation(len(smiles))
                       [:cfg.max_molecules])
        smiles, y = [smiles[i] for i in keep], y[keep]
    else:
        keep = np.arange(len(smiles))
    extra = {"classes": [info["solubility_class"][i] for i in keep]} if name == "solubility" \
        else {}
    data = featurise(smiles, y, name=name, n_bits=cfg.n_bits, max_atoms=cfg.max_atoms,
                     skip_invalid=True, info={**{k: v for k, v in info.items()
                                                 if not isinstance(v, list)}, **extra})
    rng = ctx.rng(f"misaligned-splits-{name}")
    splits = {k: make_splits(data, k, rng, cfg.seeds, cfg.test_fraction)
              for k in ("random", "scaffold")}
    vrng = ctx.rng(f"misaligned-validation-{name}")
    val = {k: validation_splits(data, sp, vrng, cfg.val_fraction) for k, sp in splits.items()}
    return data, splits, val


def _generative(ctx: RunContext, cfg: Config, data, splits: dict) -> GenerativeComparison:
    """AddCarbon's samples from the first random training set and the held-out molecules
    of that split, both scored against the training set."""
    sp = splits["random"]
    train = [data.canonical[i] for i in np.flatnonzero(sp.train[0])]
    held = [data.canonical[i] for i in np.flatnonzero(sp.test[0])]
    gen = G.generate(train, cfg.addcarbon_samples, ctx.rng(f"misaligned-addcarbon-{data.name}"))
    n_bits = data.fp.shape[1]
    return GenerativeComparison(addcarbon=G.generative_scores(gen, train, n_bits=n_bits),
                                held_out=G.generative_scores(held, train, n_bits=n_bits))


def _both(splits: dict) -> Splits:
    return Splits("both", np.concatenate([splits["random"].train, splits["scaffold"].train]),
                  np.concatenate([splits["random"].test, splits["scaffold"].test]))


@register("misaligned", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Baseline family and both models on every data set and split; tables, figures,
    claims."""
    cfg: Config = ctx.config
    ts = Mo.TrainSettings(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr,
                          weight_decay=cfg.weight_decay, log_every=cfg.log_every,
                          checkpoint_every=cfg.checkpoint_every, mlp_width=cfg.mlp_width,
                          mpnn_width=cfg.mpnn_width, mpnn_rounds=cfg.mpnn_rounds,
                          dmpnn_width=cfg.dmpnn_width, dmpnn_steps=cfg.dmpnn_steps,
                          dmpnn_aggregation=cfg.dmpnn_aggregation)
    fam = FamilySettings(lam=cfg.ridge_lambda, fractions=tuple(cfg.fractions))
    results: dict[tuple[str, str], SplitSummary] = {}
    generative: dict[str, GenerativeComparison] = {}
    kept = ()
    for name in ctx.track(cfg.datasets, "misaligned data sets"):
        data, splits, val = ctx.stage(f"misaligned-data-{name}",
                                      lambda n=name: _data(ctx, cfg, n))
        both, both_val = _both(splits), _both(val)
        if name == "solubility":
            kept = (data, splits, both, both_val)
        (base, vbase), strengths = ctx.stage(
            f"misaligned-{name}-baselines", lambda d=data, b=both, bv=both_val:
            A.family_on_masks(ctx.key(f"misaligned-baselines-{d.name}"), d,
                              [b.train, bv.train], sigma=d.info["experimental_error"],
                              settings=fam, carbon_inserted_strengths=cfg.carbon_inserted_strengths,
                              carbon_inserted_variants=cfg.carbon_inserted_variants, mesh=ctx.mesh))
        if cfg.addcarbon_samples:
            generative[name] = ctx.stage(f"misaligned-{name}-addcarbon",
                                         lambda d=data, sp=splits: _generative(ctx, cfg, d, sp))
        preds = {}
        for kind in cfg.models:
            stage = f"misaligned-{name}-{kind}"
            preds[kind] = ctx.stage(stage, lambda k=kind, s=stage, d=data, b=both:
                                    Mo.train(ctx.key(f"misaligned-train-{d.name}-{k}"), k,
                                             Mo.model_arrays(k, d), d.y, b.train, ts,
                                             resume=ctx.resume,
                                             checkpoint_dir=ctx.out_dir / "checkpoints" / s,
                                             mesh=ctx.mesh)[0])
        S = cfg.seeds
        for j, kind in enumerate(("random", "scaffold")):
            sl = slice(j * S, (j + 1) * S)
            res = A.evaluate(ctx.key(f"misaligned-boot-{name}-{kind}"), data, splits[kind],
                             {m: p[sl] for m, p in preds.items()},
                             {b: p[sl] for b, p in base.items()}, strengths,
                             n_boot=cfg.n_boot, val_preds={b: p[sl] for b, p in vbase.items()},
                             val_splits=val[kind])
            results[(name, kind)] = res.summarise(
                label_std=float(np.std(data.y)),
                experimental_error=float(data.info["experimental_error"]), n=data.n)
    classes: dict[str, ClassResult] = (C.run_classes(ctx, cfg, ts, fam, *kept)
                                       if cfg.classification and kept else {})
    branch_res = Br.run_branches(ctx, cfg, ts)  # DTI and virtual screening
    figures = [report.forest_plot(cfg, results, ctx.out_dir),
               report.curve_plot(cfg, results, ctx.out_dir)]
    md = report.markdown(cfg, results, quick=ctx.quick, seed=ctx.seed) + \
        report.classes_markdown(classes) + report.generative_markdown(generative) + \
        Br.markdown(branch_res)
    claims = report.claims(cfg, results, classes, Br.claims(cfg, branch_res))
    metrics = dict(settings=cfg.to_dict(), total_seconds=ctx.elapsed(),
                   results={f"{d}/{s}": r.as_dict() for (d, s), r in results.items()},
                   classification={k: c.as_dict() for k, c in classes.items()},
                   generative={k: g.as_dict() for k, g in generative.items()},
                   branches=branch_res.as_dict())
    warnings = [f"{d} ({s}): {sum(r.duplicates)} test molecules duplicate a training "
                "molecule" for (d, s), r in results.items() if sum(r.duplicates)]
    return PipelineResult("misaligned", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
