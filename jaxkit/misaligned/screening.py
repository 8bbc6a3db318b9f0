"""Virtual-screening branch: actives against property-matched decoys (DUD-E), where simple
molecular properties should carry no signal and do.

Data: :func:`jaxkit.data.drug_discovery.load_dude` for each target of ``targets``
(every active, 10 decoys per active; DUD-E, Mysinger et al., J. Med. Chem. 55:6582
(2012)). DUD-E matched each decoy to an active on six properties (molecular weight,
logP, rotatable bonds, H-bond acceptors and donors, net charge) and kept the decoys
topologically least like any active, so a screening model is meant to learn binding,
not properties. The classic finding (Chen et al., PLoS ONE 14:e0220113 (2019); Sieg et
al., J. Chem. Inf. Model. 59:947 (2019)) is that simple properties still separate
actives from decoys; this branch measures that on the shipped targets.

Features (RDKit): the six matched properties as RDKit computes them
(:data:`MATCHED`), eleven unmatched counts and fractions (:data:`OTHER`), Morgan bits.

Splits: per target, ``seeds`` random splits stratified by activity (``test_fraction``
of the actives and of the decoys in test), a validation split made the same way inside
each training set; the best misaligned baseline is chosen there.

The misaligned family (ridge on 0/1 labels, :func:`jaxkit.misaligned.branch_eval.
ridge_scores`): ``all_properties`` (the 17 properties), ``matched_properties`` (the six
DUD-E matched), ``size_only`` (molecular weight, heavy atoms), ``label_scramble`` (the
17 properties, permuted training labels), ``train_mean``. ``ridge_fp`` (ridge on the
bits) is the aligned reference, never chosen; ``properties_permuted`` (the 17
properties permuted across the target's molecules, so they carry nothing) is the
negative control. The model under audit is the fingerprint MLP of
:mod:`jaxkit.misaligned.models` on the 0/1 labels (squared loss), every target and seed
in one training. Metrics: :func:`jaxkit.misaligned.metrics.screening_metrics` (AUROC,
PR-AUC, EF 1% and 5%, BEDROC) on each test set.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from jaxkit.claims import Claim
from jaxkit.stats import every_part_above

from . import branch_eval as E
from . import metrics as Me
from . import models as Mo
from .features import Splits, fingerprints
from .results import ScreenTarget

__all__ = ["MATCHED", "OTHER", "MISALIGNED", "ScreenData", "properties", "load_screening",
           "stratified_splits", "baseline_scores", "run_screening", "claims", "markdown"]

MATCHED = ("MolWt", "MolLogP", "NumRotatableBonds", "NumHBA", "NumHBD", "FormalCharge")
OTHER = ("HeavyAtoms", "Rings", "AromaticRings", "FractionCSP3", "TPSA", "nC", "nN", "nO",
         "nS", "nHalogen", "StereoCenters")
MISALIGNED = ("all_properties", "matched_properties", "size_only", "label_scramble",
              "train_mean")
LABELS = {"mlp": "MLP (fingerprints)", "all_properties": "17 simple properties (ridge)",
          "matched_properties": "the 6 DUD-E-matched properties (ridge)",
          "size_only": "size only (MolWt, heavy atoms)", "label_scramble": "label scrambling",
          "train_mean": "train mean", "ridge_fp": "ridge on fingerprints (aligned reference)",
          "properties_permuted": "properties permuted across molecules (negative control)"}
PAPER = "AI for drug discovery models often do not learn as expected (ICML 2026 FM4LS)"
C_SCREEN = ("Virtual screening (DUD-E): a misaligned baseline on simple properties is "
            "competitive with the fingerprint model")
C_BIAS = ("Simple properties alone separate DUD-E actives from their property-matched "
          "decoys (the decoy bias)")


class ScreenData(NamedTuple):
    """Molecules of several targets: ``target[i]`` indexes ``targets``; ``props``
    ``(n, 17)`` (:data:`MATCHED` then :data:`OTHER`), ``fp`` ``(n, bits)``."""

    targets: tuple[str, ...]
    target: np.ndarray
    y: np.ndarray
    props: np.ndarray
    fp: np.ndarray


def properties(mols) -> np.ndarray:
    """``(n, 17)`` :data:`MATCHED` and :data:`OTHER` of RDKit molecules."""
    from rdkit import Chem
    from rdkit.Chem import Crippen, Descriptors
    from rdkit.Chem import rdMolDescriptors as R

    out = np.zeros((len(mols), len(MATCHED) + len(OTHER)))
    for k, m in enumerate(mols):
        sym = [a.GetSymbol() for a in m.GetAtoms()]
        out[k] = [Descriptors.MolWt(m), Crippen.MolLogP(m), R.CalcNumRotatableBonds(m),
                  R.CalcNumHBA(m), R.CalcNumHBD(m), Chem.GetFormalCharge(m),
                  m.GetNumHeavyAtoms(), R.CalcNumRings(m), R.CalcNumAromaticRings(m),
                  R.CalcFractionCSP3(m), R.CalcTPSA(m), sym.count("C"), sym.count("N"),
                  sym.count("O"), sym.count("S"),
                  sum(s in ("F", "Cl", "Br", "I") for s in sym),
                  R.CalcNumAtomStereoCenters(m)]
    return out


def load_screening(targets, n_bits: int = 512) -> ScreenData:
    """The shipped DUD-E subsets of ``targets``, featurised (module docstring).

    Raises:
        ValueError: empty, repeated or unknown ``targets`` (before any work), or an
            unparseable SMILES.
    """
    from rdkit import Chem, RDLogger

    from jaxkit.data.drug_discovery import DUDE_TARGETS, load_dude

    if isinstance(targets, str) or not targets or len(set(targets)) != len(targets):
        raise ValueError(f"`targets` must be a non-empty sequence of distinct DUD-E targets; "
                         f"got {targets!r}")
    unknown = [t for t in targets if t not in DUDE_TARGETS]
    if unknown:
        raise ValueError(f"`targets`: {unknown} not shipped; choose from "
                         f"{', '.join(DUDE_TARGETS)}")
    ys, tg, mols = [], [], []
    RDLogger.DisableLog("rdApp.*")
    try:
        for t, name in enumerate(targets):
            smi, y, _ = load_dude(name)
            ms = [Chem.MolFromSmiles(s) for s in smi]
            bad = [i for i, m in enumerate(ms) if m is None]
            if bad:
                raise ValueError(f"DUD-E {name}: rows {bad[:5]} do not parse")
            mols += ms
            ys.append(y)
            tg.append(np.full(y.size, t))
    finally:
        RDLogger.EnableLog("rdApp.*")
    return ScreenData(tuple(targets), np.concatenate(tg), np.concatenate(ys),
                      properties(mols), fingerprints(mols, n_bits))


def stratified_splits(data: ScreenData, rng: np.random.Generator, seeds: int,
                      test_fraction: float, within=None) -> Splits:
    """``len(targets) x seeds`` masks (target-major): per target and seed, ``test_fraction``
    of its actives and of its decoys (at least one each) in test; with ``within``
    (masks of that shape) the split is made inside each row's training set."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"`test_fraction` must lie in (0, 1); got {test_fraction}")
    n_rows = len(data.targets) * seeds
    train, test = np.zeros((n_rows, data.y.size), bool), np.zeros((n_rows, data.y.size), bool)
    for t in range(len(data.targets)):
        for s in range(seeds):
            r = t * seeds + s
            pool = (data.target == t) if within is None else within[r]
            for label in (0.0, 1.0):
                rows = np.flatnonzero(pool & (data.y == label))
                if rows.size < 2:
                    raise ValueError(f"target {data.targets[t]!r}: {rows.size} molecules "
                                     f"of class {label:g}; a split needs at least 2")
                k = min(max(1, round(test_fraction * rows.size)), rows.size - 1)
                held = rng.permutation(rows)[:k]
                test[r, held] = True
                train[r, np.setdiff1d(rows, held)] = True
    return Splits("stratified" if within is None else "stratified-validation", train, test)


def baseline_scores(data: ScreenData, train, rng: np.random.Generator, lam: float) -> dict:
    """``{name: (S, n)}`` scores of the misaligned family, the reference and the
    control, one fit per row of ``train``."""
    y = data.y
    perm_y = np.stack([_permute_within(rng, y, t) for t in train])
    shuffled = data.props.copy()
    for t in range(len(data.targets)):
        rows = np.flatnonzero(data.target == t)
        shuffled[rows] = data.props[rng.permutation(rows)]
    scr = np.stack([E.ridge_scores(data.props, perm_y[s], train[s:s + 1], lam)[0]
                    for s in range(train.shape[0])])
    return {"all_properties": E.ridge_scores(data.props, y, train, lam),
            "matched_properties": E.ridge_scores(data.props[:, :len(MATCHED)], y, train, lam),
            "size_only": E.ridge_scores(data.props[:, [0, len(MATCHED)]], y, train, lam),
            "label_scramble": scr, "train_mean": np.zeros(train.shape),
            "ridge_fp": E.ridge_scores(data.fp, y, train, lam),
            "properties_permuted": E.ridge_scores(shuffled, y, train, lam)}


def _permute_within(rng, y, t):
    z = y.copy()
    z[t] = rng.permutation(y[t])
    return z


@jax.jit
def _metrics(y, score, w):
    return jax.vmap(Me.screening_metrics)(y, score, w)


def per_seed_metrics(y, preds, masks) -> dict:
    """``{metric: (S,)}`` :func:`jaxkit.misaligned.metrics.screening_metrics` of each row
    of ``preds`` on its test mask (test molecules gathered and padded with weight 0 to a
    multiple of 256, so one compiled program serves most test-set sizes)."""
    masks = np.asarray(masks, bool)
    L = 256 * -(-int(masks.sum(1).max()) // 256)  # a few sizes, a few compiles
    idx = np.zeros(masks.shape[:1] + (L,), int)
    w = np.zeros(idx.shape, np.float32)
    for s, m in enumerate(masks):
        rows = np.flatnonzero(m)
        idx[s, :rows.size], w[s, :rows.size] = rows, 1.0
    yy = np.asarray(y, np.float32)[idx]
    sc = np.take_along_axis(np.asarray(preds, np.float32), idx, axis=1)
    out = _metrics(yy, sc, w)
    return {k: np.asarray(v, np.float64) for k, v in out.items() if k != "auroc_defined"}


def run_screening(key, rng: np.random.Generator, data: ScreenData, *, seeds: int,
                  test_fraction: float, val_fraction: float, lam: float,
                  ts: Mo.TrainSettings, checkpoint_dir: Path | None = None,
                  resume: bool = False, mesh=None) -> dict[str, ScreenTarget]:
    """Every target x seed: the family, the reference, the control and the MLP.

    Args:
        key: the MLP's training key.
        rng: splits and permutations.
        data: from :func:`load_screening`.
        seeds: splits per target.
        test_fraction: held-out fraction of each class.
        val_fraction: the validation fraction inside each training set.
        lam: ridge penalty.
        ts: the MLP's :class:`~jaxkit.misaligned.models.TrainSettings`.
        checkpoint_dir, resume, mesh: passed to :func:`jaxkit.misaligned.models.train`.

    Raises:
        ValueError: a bad ``seeds``, fraction or ``lam``
            (:func:`~jaxkit.misaligned.branch_eval.check_run_args`), before any work.

    Returns:
        ``{target: ScreenTarget}`` (:class:`jaxkit.misaligned.results.ScreenTarget`: test
        metrics, validation AUROC, the best baseline, the per-seed AUROC of the MLP minus
        the best baseline's / the control's, the mean test molecules and actives).
    """
    E.check_run_args(seeds, test_fraction, val_fraction, lam)
    sp = stratified_splits(data, rng, seeds, test_fraction)
    va = stratified_splits(data, rng, seeds, val_fraction, within=sp.train)
    base = baseline_scores(data, np.concatenate([sp.train, va.train]), rng, lam)
    pred, _ = Mo.train(key, "mlp", {"fp": data.fp}, data.y, sp.train, ts,
                       checkpoint_dir=checkpoint_dir, resume=resume, mesh=mesh)
    n = sp.train.shape[0]
    test = {b: per_seed_metrics(data.y, p[:n], sp.test) for b, p in base.items()}
    test["mlp"] = per_seed_metrics(data.y, pred, sp.test)
    val = {b: E.per_seed(E.auroc, data.y, p[n:], va.test) for b, p in base.items()
           if b in MISALIGNED}
    out = {}
    for t, name in enumerate(data.targets):
        sl = slice(t * seeds, (t + 1) * seeds)
        best = E.best_on_validation({b: v[sl] for b, v in val.items()}, MISALIGNED)
        a = {m: r["auroc"][sl] for m, r in test.items()}
        out[name] = ScreenTarget(
            test={m: {k: E.summary(v[sl]) for k, v in r.items()} for m, r in test.items()},
            val={b: E.summary(v[sl]) for b, v in val.items()}, best=best,
            advantage=(a["mlp"] - a[best]).tolist(),
            control=(a["mlp"] - a["properties_permuted"]).tolist(),
            n_test=float(sp.test[sl].sum(1).mean()),
            n_actives_test=float((sp.test[sl] & (data.y > 0.5)).sum(1).mean()))
    return out


def claims(results: dict[str, ScreenTarget], margin: float, chance_margin: float
           ) -> list[Claim]:
    """The branch's row (an extension: it decides this branch's part of the paper's
    multiple-branches row, :mod:`jaxkit.misaligned.branches`), one row per target, the
    decoy-bias row and the negative control (must say "no"); all extensions."""
    cases = [dict(label=f"DUD-E {t}", best=LABELS[r.best], advantage=r.advantage)
             for t, r in results.items()]
    rows = E.competitive_claims(
        PAPER, C_SCREEN, cases, margin, kind="extension",
        note="best misaligned baseline chosen on validation splits inside each training "
             f"set among {', '.join(MISALIGNED)}; the fingerprint ridge is an aligned "
             "reference, never chosen; 10 decoys per active (a subset of DUD-E's 50)")
    above = [np.asarray(r.test["all_properties"]["auroc"].per_seed) - 0.5
             for r in results.values()]
    verdict, vs, test = every_part_above(above, [chance_margin] * len(above))
    rows.append(Claim(
        PAPER, C_BIAS,
        "; ".join(f"{t} AUROC {v.estimate + 0.5:.3f} [{v.lo + 0.5:.3f}, {v.hi + 0.5:.3f}]"
                  for t, v in zip(results, vs, strict=True)), verdict,
        f"per target: the 17-property ridge's test AUROC minus 1/2 above {chance_margin:g} "
        f"(fixed in the configuration), 95% t interval over seeds; {test}".rstrip("; "),
        "the baseline is fixed before the run (not chosen); the six matched properties "
        "alone are in the table", kind="extension"))
    ctrl = [dict(label=f"negative control, {t}", best=LABELS["properties_permuted"],
                 advantage=r.control) for t, r in results.items()]
    rows += E.competitive_claims(
        PAPER, "Negative control (screening): properties permuted across molecules are "
        "competitive with the fingerprint model", ctrl, margin, kind="extension",
        per_case=False, note="a baseline without signal: must come out 'no'")
    return rows


def markdown(results: dict[str, ScreenTarget]) -> str:
    """Test AUROC / EF 1% / BEDROC per target and method (means over seeds)."""
    methods = ["mlp", *MISALIGNED, "ridge_fp", "properties_permuted"]
    head = ("| method | " + " | ".join(f"{t} AUROC | {t} EF1% | {t} BEDROC" for t in results)
            + " |\n|---|" + "---|" * (3 * len(results)) + "\n")
    body = "".join(
        f"| {LABELS[m]} | " + " | ".join(
            " | ".join(f"{r.test[m][k].mean:.3f}" for k in ("auroc", "ef1", "bedroc"))
            for r in results.values()) + " |\n" for m in methods)
    best = "| best misaligned (validation) |" + "".join(
        f" {LABELS[r.best]} | | |" for r in results.values()) + "\n"
    sizes = ", ".join(f"{t}: {r.n_test:.0f} test molecules ({r.n_actives_test:.0f} "
                      "actives)" for t, r in results.items())
    return ("\n## Virtual screening (DUD-E actives vs property-matched decoys)\n\n"
            + head + body + best + f"\nPer seed: {sizes}.\n")
