"""Drug-target interaction branch: a pair model against baselines that see one side of the
pair only, or only how connected each node is in the training interaction graph.

Data: the Davis kinase panel as binary interactions (:func:`jaxkit.data.drug_discovery.
load_davis`: 4,477 labelled pairs, 68 drugs, 379 kinases, 18.5% positive).

Features: drugs as Morgan bits (:func:`jaxkit.misaligned.features.fingerprints`);
kinases as amino-acid composition (20 fractions) and dipeptide composition (400
fractions of overlapping residue pairs), the classical sequence descriptors of
protein-ligand models (e.g. Cao et al., Bioinformatics 29:960 (2013)); a pair is the
concatenation.

Splits (``seeds`` each; Pahikkala et al., Brief. Bioinform. 16:325 (2015) on why pair
splits flatter): ``random`` (pairs at random), ``cold_drug`` (``test_fraction`` of the
drugs and every pair they are in are held out), ``cold_target`` (the same for kinases).
A validation split of each training set is made the same way inside it; the best
misaligned baseline is chosen there.

The misaligned family (signals that should not decide an interaction):

* ``node_degree``: the drug's and the kinase's training positive rates, each shrunk to
  the global rate with one pseudo-pair, summed: :math:`\\hat r_d + \\hat r_t` with
  :math:`\\hat r_d = (k^+_d + \\bar y)/(k_d + 1)` (:math:`k_d` training pairs of ``d``,
  :math:`k^+_d` positive); a node unseen in training gets :math:`\\bar y`. How many
  interactions a node has, not which (the degree shortcut: e.g. Chatterjee et al., Nat.
  Commun. 14:1989 (2023)).
* ``ligand_only`` / ``protein_only``: ridge on the drug's or the kinase's features alone.
* ``label_scramble``: ridge on the pair features fitted to permuted training labels.
* ``train_mean``: a constant (AUROC 1/2).

``ridge_pair`` (ridge on the concatenation) is an aligned reference, never chosen;
``degree_scrambled`` (node degree from permuted training labels, a baseline with no
signal) is the negative control. The model under audit is the MLP of
:mod:`jaxkit.misaligned.models` on the pair features, trained on the 0/1 labels with the
squared loss, every split and seed in one training.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxkit.claims import Claim

from . import branch_eval as E
from . import models as Mo
from .features import Splits, fingerprints
from .results import DTISplit

__all__ = ["SPLITS", "MISALIGNED", "AMINO_ACIDS", "DTIData", "protein_features",
           "load_dti", "pair_splits", "baseline_scores", "run_dti", "claims", "markdown"]

SPLITS = ("random", "cold_drug", "cold_target")
MISALIGNED = ("node_degree", "ligand_only", "protein_only", "label_scramble", "train_mean")
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
LABELS = {"mlp": "MLP (drug bits + kinase composition)", "node_degree": "node degree",
          "ligand_only": "ligand only (ridge, drug bits)",
          "protein_only": "protein only (ridge, kinase composition)",
          "label_scramble": "label scrambling", "train_mean": "train mean",
          "ridge_pair": "ridge on the pair (aligned reference)",
          "degree_scrambled": "node degree, permuted labels (negative control)"}
PAPER = "AI for drug discovery models often do not learn as expected (ICML 2026 FM4LS)"
C_DTI = ("Drug-target interaction: misaligned baselines (node degree, one side of the pair "
         "only) are competitive with the pair model")


class DTIData(NamedTuple):
    """Pairs ``(drug[k], target[k])`` with 0/1 labels ``y[k]``; ``drug_x`` ``(D, bits)``
    and ``target_x`` ``(T, 420)`` the node features."""

    drug: np.ndarray
    target: np.ndarray
    y: np.ndarray
    drug_x: np.ndarray
    target_x: np.ndarray

    @property
    def pairs(self) -> np.ndarray:
        """``(m, bits + 420)`` float32 pair features."""
        return np.concatenate([self.drug_x[self.drug], self.target_x[self.target]],
                              axis=1).astype(np.float32)


def protein_features(sequences) -> np.ndarray:
    """``(T, 420)`` amino-acid (20) and dipeptide (400) composition of each sequence;
    residues outside the 20 standard ones are skipped.

    Raises:
        ValueError: a sequence with fewer than two standard residues (naming it).
    """
    idx = {a: i for i, a in enumerate(AMINO_ACIDS)}
    out = np.zeros((len(sequences), 420))
    for k, seq in enumerate(sequences):
        codes = np.array([idx[c] for c in str(seq).upper() if c in idx], int)
        if codes.size < 2:
            raise ValueError(f"`sequences`: sequence {k} has {codes.size} standard "
                             "residue(s); need at least 2")
        out[k, :20] = np.bincount(codes, minlength=20) / codes.size
        out[k, 20:] = np.bincount(codes[:-1] * 20 + codes[1:], minlength=400) / (codes.size - 1)
    return out


def load_dti(n_bits: int = 512) -> DTIData:
    """The shipped Davis pairs featurised (module docstring)."""
    from rdkit import Chem

    from jaxkit.data.drug_discovery import load_davis

    d = load_davis()
    mols = [Chem.MolFromSmiles(s) for s in d["smiles"]]
    bad = [i for i, m in enumerate(mols) if m is None]
    if bad:
        raise ValueError(f"Davis drugs {bad} do not parse")
    return DTIData(d["drug"], d["target"], d["label"],
                   fingerprints(mols, n_bits).astype(np.float64),
                   protein_features(d["sequences"]))


def _held_out(rng, ids, rows, fraction):
    """A boolean mask over ``rows`` (indices) holding out ``fraction`` of the distinct
    ``ids[rows]``, or of the rows themselves when ``ids`` is None."""
    if ids is None:
        k = min(max(1, round(fraction * rows.size)), rows.size - 1)
        return np.isin(np.arange(rows.size), rng.permutation(rows.size)[:k])
    nodes = np.unique(ids[rows])
    if nodes.size < 2:
        raise ValueError(f"a cold split needs at least 2 distinct nodes; got {nodes.size}")
    k = min(max(1, round(fraction * nodes.size)), nodes.size - 1)
    return np.isin(ids[rows], rng.permutation(nodes)[:k])


def pair_splits(data: DTIData, kind: str, rng: np.random.Generator, seeds: int,
                test_fraction: float, within=None) -> Splits:
    """``seeds`` splits of the pairs (module docstring); with ``within`` (``(seeds, m)``
    training masks) each seed's split is made inside its own training pairs (the
    validation split), its ``test`` the validation set.

    Raises:
        ValueError: an unknown ``kind`` or a fraction outside (0, 1).
    """
    if kind not in SPLITS:
        raise ValueError(f"`kind` must be one of {', '.join(SPLITS)}; got {kind!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"`test_fraction` must lie in (0, 1); got {test_fraction}")
    m = data.y.size
    ids = {"random": None, "cold_drug": data.drug, "cold_target": data.target}[kind]
    train, test = np.zeros((seeds, m), bool), np.zeros((seeds, m), bool)
    for s in range(seeds):
        rows = np.arange(m) if within is None else np.flatnonzero(within[s])
        held = _held_out(rng, ids, rows, test_fraction)
        test[s, rows[held]] = True
        train[s, rows[~held]] = True
    return Splits(kind if within is None else f"{kind}-validation", train, test)


def _degree(data: DTIData, y, train) -> np.ndarray:
    out = np.empty(train.shape)
    for s, t in enumerate(train):
        p = y[t].mean()
        rate = []
        for ids, n in ((data.drug, data.drug_x.shape[0]), (data.target, data.target_x.shape[0])):
            k = np.bincount(ids[t], minlength=n)
            kp = np.bincount(ids[t], weights=y[t], minlength=n)
            rate.append((kp + p) / (k + 1.0))
        out[s] = rate[0][data.drug] + rate[1][data.target]
    return out


def baseline_scores(data: DTIData, train, rng: np.random.Generator, lam: float) -> dict:
    """``{name: (S, m)}`` scores of the misaligned family, the aligned reference and the
    negative control, fitted on each row of ``train``."""
    y = data.y
    perm = np.stack([_permuted(rng, y, t) for t in train])
    lig, pro = (data.drug_x, data.drug), (data.target_x, data.target)
    out = {"node_degree": _degree(data, y, train),
           "ligand_only": E.grouped_ridge_scores([lig], y, train, lam),
           "protein_only": E.grouped_ridge_scores([pro], y, train, lam),
           "train_mean": np.zeros(train.shape)}
    both = np.stack([np.broadcast_to(y, train.shape), perm])
    out["ridge_pair"], out["label_scramble"] = E.grouped_ridge_scores([lig, pro], both,
                                                                      train, lam)
    out["degree_scrambled"] = np.stack([_degree(data, perm[s], train[s:s + 1])[0]
                                        for s in range(train.shape[0])])
    return out


def _permuted(rng, y, t):
    z = y.copy()
    z[t] = rng.permutation(y[t])
    return z


def run_dti(key, rng: np.random.Generator, data: DTIData, *, seeds: int,
            test_fraction: float, val_fraction: float, lam: float, ts: Mo.TrainSettings,
            checkpoint_dir: Path | None = None, resume: bool = False, mesh=None
            ) -> dict[str, DTISplit]:
    """Every split kind x seed: the family, the reference, the control and the MLP.

    Args:
        key: the MLP's training key.
        rng: splits and label permutations.
        data: from :func:`load_dti`.
        seeds: splits per kind.
        test_fraction: held-out fraction (of pairs or of nodes).
        val_fraction: the validation fraction inside each training set.
        lam: ridge penalty.
        ts: the MLP's :class:`~jaxkit.misaligned.models.TrainSettings`.
        checkpoint_dir, resume, mesh: passed to :func:`jaxkit.misaligned.models.train`.

    Raises:
        ValueError: a bad ``seeds``, fraction or ``lam``
            (:func:`~jaxkit.misaligned.branch_eval.check_run_args`), before any work.

    Returns:
        ``{split: DTISplit}`` (:class:`jaxkit.misaligned.results.DTISplit`: test and
        validation AUROC, the best baseline, the per-seed advantage of the model over it
        and over the control, the mean test pairs).
    """
    E.check_run_args(seeds, test_fraction, val_fraction, lam)
    sp = {k: pair_splits(data, k, rng, seeds, test_fraction) for k in SPLITS}
    va = {k: pair_splits(data, k, rng, seeds, val_fraction, within=sp[k].train)
          for k in SPLITS}
    outer = np.concatenate([sp[k].train for k in SPLITS])
    inner = np.concatenate([va[k].train for k in SPLITS])
    base = baseline_scores(data, np.concatenate([outer, inner]), rng, lam)
    pred, _ = Mo.train(key, "mlp", {"fp": data.pairs}, data.y, outer, ts,
                       checkpoint_dir=checkpoint_dir, resume=resume, mesh=mesh)
    out = {}
    n = len(SPLITS) * seeds
    for j, k in enumerate(SPLITS):
        sl = slice(j * seeds, (j + 1) * seeds)
        vsl = slice(n + j * seeds, n + (j + 1) * seeds)
        test = {b: E.per_seed(E.auroc, data.y, p[sl], sp[k].test) for b, p in base.items()}
        test["mlp"] = E.per_seed(E.auroc, data.y, pred[sl], sp[k].test)
        val = {b: E.per_seed(E.auroc, data.y, p[vsl], va[k].test) for b, p in base.items()
               if b in MISALIGNED}
        best = E.best_on_validation(val, MISALIGNED)
        out[k] = DTISplit(test={m: E.summary(v) for m, v in test.items()},
                          val={b: E.summary(v) for b, v in val.items()}, best=best,
                          advantage=(test["mlp"] - test[best]).tolist(),
                          control=(test["mlp"] - test["degree_scrambled"]).tolist(),
                          n_test=float(sp[k].test.sum(1).mean()))
    return out


def claims(results: dict[str, DTISplit], margin: float) -> list[Claim]:
    """The branch's row (an extension: it decides this branch's part of the paper's
    multiple-branches row, :mod:`jaxkit.misaligned.branches`), one row per split, and its
    negative control (must say "no")."""
    cases = [dict(label=f"Davis DTI, {k.replace('_', '-')} split", best=LABELS[r.best],
                  advantage=r.advantage) for k, r in results.items()]
    rows = E.competitive_claims(
        PAPER, C_DTI, cases, margin, kind="extension",
        note="best misaligned baseline chosen on validation splits made inside each "
             f"training set among {', '.join(MISALIGNED)}; the pair ridge is an aligned "
             "reference, never chosen; binary Davis labels as MolTrans ships them")
    ctrl = [dict(label=f"negative control, {k.replace('_', '-')} split",
                 best=LABELS["degree_scrambled"], advantage=r.control)
            for k, r in results.items()]
    c = E.competitive_claims(PAPER, "Negative control (DTI): node degree fitted to permuted "
                             "training labels is competitive with the pair model",
                             ctrl, margin, kind="extension", per_case=False,
                             note="a baseline without signal: must come out 'no'")
    return rows + c


def markdown(results: dict[str, DTISplit]) -> str:
    """Test AUROC per split and method (mean over seeds), the chosen baseline."""
    methods = ["mlp", *MISALIGNED, "ridge_pair", "degree_scrambled"]
    head = "| method | " + " | ".join(k.replace("_", "-") for k in results) + " |\n"
    head += "|---|" + "---|" * len(results) + "\n"
    body = "".join(f"| {LABELS[m]} | " + " | ".join(
        f"{results[k].test[m].mean:.3f}" for k in results) + " |\n" for m in methods)
    best = "| best misaligned (validation) | " + " | ".join(
        LABELS[r.best] for r in results.values()) + " |\n"
    return ("\n## Drug-target interaction (Davis, binary): test AUROC\n\n"
            + head + body + best)

