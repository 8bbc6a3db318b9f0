"""``audit``: a model against its whole misaligned baseline family, with honest statistics.

:func:`audit` runs a user's ``fit_predict`` on every seed of a split, the baseline
family (:mod:`jaxkit.misaligned.baselines`) on the same splits and on inner validation
splits of their training sets, and :func:`evaluate`; the pipeline calls
:func:`family_on_masks` and :func:`evaluate` directly with its own vmapped models.
:func:`evaluate` computes, per method and seed, RMSE, MAE, R^2 and Spearman on the test
molecules; for each model the *best misaligned baseline*: the lowest mean RMSE over
seeds among :data:`~jaxkit.misaligned.baselines.MISALIGNED` (curves at their strongest
setting) on the *validation* sets (the family fitted on the inner training sets,
:func:`jaxkit.misaligned.features.validation_splits`), never on the test sets (without
validation predictions it falls back to the test sets and records ``selected_on:
"test"``); the gap (baseline RMSE - model RMSE, positive = the model is better) with a
two-level paired bootstrap interval over seeds and test molecules
(:func:`jaxkit.misaligned.metrics.bootstrap_gap`) and the paired t test over seeds
(:func:`jaxkit.stats.superiority`); ``flag`` marks a gap whose bootstrap interval
contains 0 (the model is not shown to beat its baseline).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit import stats

from . import baselines as B
from . import metrics as Me
from .features import (
    MolDataset,
    Splits,
    add_carbon,
    check_splits,
    fingerprints,
    validation_splits,
)
from .results import MeanCI, RegressionGap, SplitSummary

__all__ = ["AuditResult", "add_carbon_fingerprints", "baseline_predictions", "family_on_masks",
           "evaluate", "audit"]


@dataclass
class AuditResult:
    """What :func:`evaluate` returns.

    Attributes:
        dataset, split: names; ``seeds`` the number of seeds.
        metrics: ``{method: {metric: (S,) per-seed values}}`` (models, baselines,
            ``ridge_fp`` and ``noise_ceiling``).
        curves: ``{curve: {metric: (S, strengths)}}`` with ``strengths[curve]``.
        gaps: ``{model: RegressionGap}`` (:class:`jaxkit.misaligned.results.RegressionGap`:
            best baseline, per-seed gap, bootstrap, t test, flag).
        duplicates: train/test duplicate molecules per seed.
        models: the names of the models under audit.
    """

    dataset: str
    split: str
    seeds: int
    metrics: dict
    curves: dict
    strengths: dict
    gaps: dict[str, RegressionGap]
    duplicates: list
    models: list
    notes: list = field(default_factory=list)

    def summarise(self, **extra) -> SplitSummary:
        """Means and t-intervals per method and metric, the curves and the gaps
        (:class:`jaxkit.misaligned.results.SplitSummary`; ``extra``: its ``label_std``,
        ``experimental_error`` and ``n``)."""
        return SplitSummary(
            dataset=self.dataset, split=self.split, seeds=self.seeds,
            metrics={k: {m: MeanCI.of(v) for m, v in d.items()}
                     for k, d in self.metrics.items()},
            curves={k: {m: np.asarray(v).tolist() for m, v in d.items()}
                    for k, d in self.curves.items()},
            strengths={k: list(v) for k, v in self.strengths.items()},
            gaps=dict(self.gaps), duplicates=self.duplicates, notes=self.notes, **extra)

    def summary(self) -> dict:
        """JSON-able means and t-intervals per method and metric, and the gaps
        (:meth:`summarise` as a plain mapping)."""
        return self.summarise().as_dict()


def add_carbon_fingerprints(data: MolDataset, rng: np.random.Generator,
                            strengths: Sequence[int], variants: int) -> np.ndarray:
    """``(K, V, n, d)`` fingerprints of every molecule after ``k`` carbon insertions
    (``k`` in ``strengths``), ``variants`` random variants each; a molecule where an
    insertion failed keeps its own fingerprint."""
    from rdkit import Chem

    n_bits, radius = data.fp.shape[1], data.info.get("radius", 2)
    out = np.zeros((len(strengths), variants, data.n, n_bits), np.uint8)
    for a, k in enumerate(strengths):
        for v in range(variants):
            smi = [add_carbon(s, rng, int(k)) or s for s in data.canonical]
            out[a, v] = fingerprints([Chem.MolFromSmiles(s) for s in smi], n_bits, radius)
    return out


def baseline_predictions(key, data: MolDataset, splits: Splits, *, sigma: float,
                         settings: B.FamilySettings = B.FamilySettings(),
                         carbon_inserted_strengths: Sequence[int] = (1, 2, 3),
                         carbon_inserted_variants: int = 2, mesh=None) -> tuple[dict, dict]:
    """The baseline family on every seed of ``splits``: ``({name: (S, n) or (S, K, n)},
    strengths)``. ``sigma`` is the experimental error of the noise ceiling. With a
    ``mesh`` of several devices the seeds are split over its ``"data"`` axis
    (:func:`jaxkit.distributed.sharded_runs`; seed ``s`` draws from ``fold_in(key, s)``
    on any number of devices, so the predictions do not depend on the mesh)."""
    preds, strengths = family_on_masks(key, data, [splits.train], sigma=sigma,
                                       settings=settings,
                                       carbon_inserted_strengths=carbon_inserted_strengths,
                                       carbon_inserted_variants=carbon_inserted_variants, mesh=mesh)
    return preds[0], strengths


def family_on_masks(key, data: MolDataset, masks: Sequence[np.ndarray], *, sigma: float,
                    settings: B.FamilySettings = B.FamilySettings(),
                    carbon_inserted_strengths: Sequence[int] = (1, 2, 3),
                    carbon_inserted_variants: int = 2, mesh=None) -> tuple[list[dict], dict]:
    """:func:`baseline_predictions` for several sets of training masks (e.g. the splits'
    and their inner validation splits'), sharing the carbon-inserted fingerprints and Gram
    matrices: ``([{name: predictions} per set], strengths)``. The first set draws what
    :func:`baseline_predictions` draws; set ``i >= 1`` draws from ``fold_in`` of that
    key with ``i``. Sets of one shape compile once."""
    k_addc, k_fam = jax.random.split(key)
    rng = stats.as_generator(k_addc)
    addc = add_carbon_fingerprints(data, rng, carbon_inserted_strengths, carbon_inserted_variants)
    fd = B.family_data(data.y, data.desc, data.fp, addc, sigma)
    mesh = jd.data_mesh(mesh)
    # jaxlib's CPU Cholesky / triangular solves run in scipy's OpenBLAS, whose idle
    # worker threads spin next to XLA's: one BLAS thread cut the family's CPU time 5x
    # (2.75 -> 0.5 s per seed at 642 molecules, 2048 bits, under load; the bench's note)
    from jaxkit.pairing import limit_blas  # here: jaxkit.pairing imports the OT stack (ott)

    outs = []
    with limit_blas(1):
        for i, m in enumerate(masks):
            k = k_fam if i == 0 else jax.random.fold_in(k_fam, i)
            train = jnp.asarray(np.asarray(m, bool))
            if mesh is None:
                out = _family_jit(settings)(k, fd, train)
            else:
                out = _family_sharded(settings, mesh)(k, fd, train)
            out = jax.block_until_ready(out)
            outs.append({n: np.asarray(v, np.float64) for n, v in out.items()})
    strengths = {"shuffled_inputs": tuple(settings.fractions),
                 "replaced_bits": tuple(settings.fractions),
                 "carbon_inserted": tuple(int(k) for k in carbon_inserted_strengths)}
    return outs, strengths


_FAMILY_CACHE: dict = {}


def _family_jit(settings: B.FamilySettings):
    # One seed per lax.map step: with seeds vmapped 4 at a time, the family's independent
    # batched LAPACK solves (Cholesky of each kernel ridge) ran concurrently on XLA:CPU's
    # intra-op pool, and each batched call waits inside jaxlib's ParallelBatchMap for
    # sub-tasks queued to that same pool: on 2 cores both pool threads waited and the run
    # hung (gdb: two lapack_spotrf_ffi frames in BlockingCounter::Wait; 4 of 4 quick runs
    # hung, 3 of 3 finished with seed_batch=1).
    if settings not in _FAMILY_CACHE:
        _FAMILY_CACHE[settings] = jax.jit(lambda k, d, t: B.run_family(k, d, t, settings,
                                                                         seed_batch=1))
    return _FAMILY_CACHE[settings]


def _family_runs(keys, data: B.FamilyData, train, settings: B.FamilySettings):
    """The family on the runs a device holds (``keys`` (R,), ``train`` (R, n)), one seed
    per ``lax.map`` step (see :func:`_family_jit`)."""
    return jax.lax.map(lambda kt: B.baseline_family(kt[0], data, kt[1], settings),
                       (keys, train))


def _family_sharded(settings: B.FamilySettings, mesh):
    ck = (settings, mesh)
    if ck not in _FAMILY_CACHE:
        _FAMILY_CACHE[ck] = jd.sharded_runs(
            functools.partial(_family_runs, settings=settings), mesh,
            in_axes=(0, None, 0), out_axes=0)
    return _FAMILY_CACHE[ck]


@jax.jit
def _metrics_per_seed(y, p, w):
    return jax.vmap(lambda pp, ww: Me.all_metrics(y, pp, ww))(p, w)


def _per_seed(y, pred, test) -> dict:
    # one compiled call per shape (eagerly, every method cost dozens of dispatches)
    vals = _metrics_per_seed(jnp.asarray(y, jnp.float32), jnp.asarray(pred, jnp.float32),
                             jnp.asarray(test, jnp.float32))
    return {m: np.asarray(v, np.float64) for m, v in vals.items()}


def evaluate(key, data: MolDataset, splits: Splits, model_preds: dict, base_preds: dict,
             strengths: dict, *, n_boot: int = 1000, baselines: Sequence[str] | None = None,
             val_preds: dict | None = None, val_splits: Splits | None = None
             ) -> AuditResult:
    """Metrics, best misaligned baseline, gaps and flags (module docstring).

    Args:
        key: PRNG key of the bootstrap.
        data: the molecules.
        splits: the ``(S, n)`` masks the predictions were made on.
        model_preds: ``{model: (S, n)}`` predictions of the models under audit.
        base_preds: :func:`baseline_predictions`' first output.
        strengths: its second output.
        n_boot: bootstrap resamples.
        baselines: the misaligned baselines to compare with (default: all of
            :data:`~jaxkit.misaligned.baselines.MISALIGNED`).
        val_preds: the family fitted on the inner training sets ``val_splits.train``
            (:func:`family_on_masks`), and ``val_splits`` those inner splits: the best
            baseline is the one with the lowest mean RMSE on ``val_splits.test`` (both
            or neither; without them it is chosen on the test sets).

    Returns:
        An :class:`AuditResult`.
    """
    chosen = tuple(B.MISALIGNED if baselines is None else baselines)
    bad = [b for b in chosen if b not in B.MISALIGNED]
    if bad:
        raise ValueError(f"`baselines` must name baselines out of {', '.join(B.MISALIGNED)}; "
                         f"got {bad}")
    test = np.asarray(splits.test, bool)
    S = test.shape[0]
    metrics, curves, flat = {}, {}, {}
    for name, p in model_preds.items():
        p = np.asarray(p, np.float64)
        if p.shape != test.shape:
            raise ValueError(f"predictions of {name!r} must have shape {test.shape} (seeds, "
                             f"molecules); got {p.shape}")
        if not np.all(np.isfinite(p[test])):
            raise ValueError(f"predictions of {name!r} contain NaN or inf on test molecules")
        flat[name] = p
    for name, p in base_preds.items():
        if name in B.CURVES:
            per = [_per_seed(data.y, p[:, j], test) for j in range(p.shape[1])]
            curves[name] = {m: np.stack([q[m] for q in per], axis=1) for m in per[0]}
            flat[name] = p[:, -1]
        else:
            flat[name] = p
    for name, p in flat.items():
        metrics[name] = _per_seed(data.y, p, test)
    candidates = [b for b in chosen if b in metrics]
    if (val_preds is None) != (val_splits is None):
        raise ValueError("`val_preds` and `val_splits` go together")
    if val_preds is not None:
        vt = np.asarray(val_splits.test, bool)
        if vt.shape != test.shape:
            raise ValueError(f"`val_splits` masks must have shape {test.shape}; got {vt.shape}")
        score = {b: float(np.mean(_per_seed(data.y, val_preds[b][:, -1] if b in B.CURVES
                                            else val_preds[b], vt)["rmse"]))
                 for b in candidates}
        selected_on = "validation"
    else:
        score = {b: float(np.mean(metrics[b]["rmse"])) for b in candidates}
        selected_on = "test"
    best = min(candidates, key=lambda b: score[b])
    gaps = {}
    keys = jax.random.split(key, max(1, len(model_preds)))
    for k, name in zip(keys, model_preds, strict=False):
        d = metrics[best]["rmse"] - metrics[name]["rmse"]
        boot = Me.bootstrap_gap(k, data.y, flat[name], flat[best], test, metric="rmse",
                                n_boot=n_boot)
        gaps[name] = RegressionGap(best=best, per_seed=d, boot=boot, selected_on=selected_on,
                                   selection_rmse=score, test=stats.superiority(d),
                                   flag=not boot.significant)
    dups = [int(x) for x in check_splits(data, splits, warn=False)]
    return AuditResult(data.name, splits.kind, S, metrics, curves, dict(strengths), gaps,
                       dups, list(model_preds))


def audit(fit_predict: Callable, dataset: MolDataset, splits: Splits,
          baselines: Sequence[str] | None = None, *, key=None, sigma: float | None = None,
          name: str = "model", n_boot: int = 1000,
          settings: B.FamilySettings = B.FamilySettings(),
          carbon_inserted_strengths: Sequence[int] = (1, 2, 3),
          carbon_inserted_variants: int = 2, val_fraction: float = 0.2) -> AuditResult:
    """Audit a user's model against the misaligned baseline family.

    Args:
        fit_predict: ``fit_predict(dataset, train_idx, test_idx) -> predictions`` for
            the molecules ``test_idx`` (a 1-D array of ``len(test_idx)`` finite
            numbers), having fitted on ``train_idx`` (index arrays into ``dataset``).
            Called once per seed.
        dataset: a :class:`~jaxkit.misaligned.features.MolDataset`
            (:func:`~jaxkit.misaligned.features.featurise`).
        splits: a :class:`~jaxkit.misaligned.features.Splits`
            (:func:`~jaxkit.misaligned.features.make_splits`).
        baselines: the misaligned baselines to compare with (default all).
        key: PRNG key (default ``jax.random.key(0)``).
        sigma: experimental error for the noise ceiling (default
            ``dataset.info["experimental_error"]``, else 10% of the label deviation).
        name: the model's name in the result.
        n_boot: bootstrap resamples.
        settings, carbon_inserted_strengths, carbon_inserted_variants: the baseline family's
            settings (:func:`baseline_predictions`).
        val_fraction: the share of each training set held out to choose the best
            baseline (:func:`jaxkit.misaligned.features.validation_splits`).

    Returns:
        An :class:`AuditResult` (with a warning in ``notes`` for train/test duplicates).

    Raises:
        ValueError: empty or overlapping split sets, a ``fit_predict`` returning the
            wrong shape or non-finite values (naming the seed), unknown baselines.
    """
    dups = check_splits(dataset, splits)
    bad = [b for b in (baselines or ()) if b not in B.MISALIGNED]
    if bad:  # before any model is fitted
        raise ValueError(f"`baselines` must name baselines out of {', '.join(B.MISALIGNED)}; "
                         f"got {bad}")
    key = jax.random.key(0) if key is None else key
    if sigma is None:
        sigma = float(dataset.info.get("experimental_error", 0.1 * np.std(dataset.y)))
    preds = np.zeros(splits.train.shape)
    for s in range(splits.seeds):
        tr, te = np.flatnonzero(splits.train[s]), np.flatnonzero(splits.test[s])
        p = np.asarray(fit_predict(dataset, tr, te), dtype=np.float64)
        if p.shape != (te.size,):
            raise ValueError(f"`fit_predict` must return one prediction per test molecule, "
                             f"shape ({te.size},); got shape {p.shape} on seed {s}")
        if not np.all(np.isfinite(p)):
            raise ValueError(f"`fit_predict` returned NaN or inf predictions on seed {s}")
        preds[s, te] = p
    k_base, k_eval = jax.random.split(key)
    val = validation_splits(dataset, splits, stats.as_generator(jax.random.fold_in(key, 7)),
                            val_fraction)
    (base, vbase), strengths = family_on_masks(
        k_base, dataset, [splits.train, val.train], sigma=sigma, settings=settings,
        carbon_inserted_strengths=carbon_inserted_strengths,
        carbon_inserted_variants=carbon_inserted_variants)
    res = evaluate(k_eval, dataset, splits, {name: preds}, base, strengths, n_boot=n_boot,
                   baselines=baselines, val_preds=vbase, val_splits=val)
    if any(dups):
        res.notes.append(f"{sum(dups)} test molecules duplicate a training molecule "
                         f"(per seed {dups})")
    return res
