"""Renz et al.'s AddCarbon: a *generative* misaligned baseline, and the distribution-
learning scores it games.

Renz, Van Rompaey, Wegner, Hochreiter & Klambauer, "On failure modes in molecule
generation and optimization", Drug Discov. Today: Technol. 32-33:55-63 (2019). The
AddCarbon "model" learns nothing: it draws a training molecule at random, inserts a
carbon (``C``) at a random position of its SMILES, and emits the result when it parses
and is not a training molecule. Its output is valid, unique and novel almost by
construction and keeps the training set's property distributions, so scores built on
those quantities (GuacaMol's and MOSES's validity, uniqueness, novelty, KL divergence of
descriptor distributions) call it an excellent generator; only a look at how close each
"novel" molecule is to its nearest training molecule exposes the copying.

This is a baseline for *generative* models, not the family's ``carbon_inserted``
perturbation of a predictive model's test inputs (:mod:`jaxkit.misaligned.baselines`);
both use the same insertion (:func:`jaxkit.misaligned.features.add_carbon`).

:func:`generate` samples AddCarbon molecules; :func:`generative_scores` computes
validity, uniqueness, novelty, a GuacaMol-style KL score over descriptor histograms and
the nearest-neighbour Tanimoto similarity to the training set, for any generator's
output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .features import add_carbon, fingerprints
from .results import GenerativeScores

__all__ = ["generate", "generative_scores", "kl_score"]


def _canonical(smiles: Sequence[str]) -> list[str | None]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        out = []
        for s in smiles:
            m = Chem.MolFromSmiles(s) if s else None
            out.append(None if m is None else Chem.MolToSmiles(m))
        return out
    finally:
        RDLogger.EnableLog("rdApp.*")


def generate(train_smiles: Sequence[str], n: int, rng: np.random.Generator,
             max_tries: int | None = None) -> list[str]:
    """``n`` molecules from the AddCarbon generator (module docstring).

    Each try draws a training molecule uniformly, inserts one carbon at a random SMILES
    position (:func:`~jaxkit.misaligned.features.add_carbon`: kept when it parses to a
    different molecule) and keeps the canonical result unless it is a training molecule.
    Repeats among the outputs are allowed (uniqueness is a score, not a rule).

    Args:
        train_smiles: the training molecules (SMILES; unparseable ones are skipped).
        n: how many molecules to return (>= 1).
        rng: NumPy generator of the draws.
        max_tries: give up after this many tries (default ``50 n``).

    Returns:
        ``n`` canonical SMILES, or fewer when ``max_tries`` ran out.

    Raises:
        ValueError: ``n < 1`` or no parseable training molecule.
    """
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    train = [s for s in _canonical(train_smiles) if s is not None]
    if not train:
        raise ValueError("`train_smiles` holds no parseable molecule")
    seen = set(train)
    out: list[str] = []
    for _ in range(50 * n if max_tries is None else int(max_tries)):
        if len(out) == n:
            break
        new = add_carbon(train[int(rng.integers(len(train)))], rng, 1)
        if new is not None and new not in seen:
            out.append(new)
    return out


def kl_score(train_desc: np.ndarray, gen_desc: np.ndarray, bins: int = 20) -> float:
    """GuacaMol-style distribution score :math:`\\frac1D \\sum_d \\exp(-KL(P_d \\| Q_d))`
    of descriptor ``d``'s training histogram :math:`P_d` against the generated one
    :math:`Q_d` (``bins`` equal bins over the pooled range, a count of 1e-3 added to
    every bin of both). 1 means identical histograms.

    (GuacaMol smooths with Gaussian kernels; histograms keep this dependency-free and
    read the same way.)

    Args:
        train_desc: ``(n, D)`` descriptors of the training molecules.
        gen_desc: ``(m, D)`` descriptors of the generated molecules.
        bins: histogram bins per descriptor.

    Returns:
        The score in ``(0, 1]``.
    """
    scores = []
    for d in range(train_desc.shape[1]):
        lo = min(train_desc[:, d].min(), gen_desc[:, d].min())
        hi = max(train_desc[:, d].max(), gen_desc[:, d].max())
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
        p = np.histogram(train_desc[:, d], edges)[0] + 1e-3
        q = np.histogram(gen_desc[:, d], edges)[0] + 1e-3
        p, q = p / p.sum(), q / q.sum()
        scores.append(float(np.exp(-np.sum(p * np.log(p / q)))))
    return float(np.mean(scores))


def _descriptors(mols) -> np.ndarray:
    from rdkit.Chem import Descriptors

    return np.array([[Descriptors.MolWt(m), m.GetNumHeavyAtoms(), Descriptors.TPSA(m),
                      Descriptors.MolLogP(m)] for m in mols])


def generative_scores(generated: Sequence[str], train_smiles: Sequence[str], *,
                      n_bits: int = 2048) -> GenerativeScores:
    """Distribution-learning scores of a generator's output against its training set.

    Args:
        generated: the generated SMILES (any generator's; unparseable ones count against
            validity).
        train_smiles: the training molecules.
        n_bits: Morgan fingerprint bits (radius 2) of the similarity.

    Returns:
        A :class:`jaxkit.misaligned.results.GenerativeScores`: ``n``, ``validity``,
        ``uniqueness`` (unique / valid), ``novelty`` (unique valid molecules not in
        training / unique valid), ``kl_score`` (:func:`kl_score` over the descriptors
        ``MolWt, HeavyAtomCount, TPSA, MolLogP``), ``nn_similarity`` (mean over unique
        valid molecules of the Tanimoto similarity to the nearest training molecule),
        ``nn_similarity_ge_07`` (the share at or above 0.7).

    Raises:
        ValueError: no generated or no parseable training molecule.
    """
    from rdkit import Chem

    if len(generated) == 0:
        raise ValueError("`generated` is empty")
    train = sorted({s for s in _canonical(train_smiles) if s is not None})
    if not train:
        raise ValueError("`train_smiles` holds no parseable molecule")
    can = _canonical(generated)
    valid = [s for s in can if s is not None]
    uniq = sorted(set(valid))
    out = dict(n=len(generated), validity=len(valid) / len(generated),
               uniqueness=len(uniq) / max(1, len(valid)))
    if not uniq:
        nan = float("nan")
        return GenerativeScores(**out, novelty=nan, kl_score=nan, nn_similarity=nan,
                                nn_similarity_ge_07=nan)
    seen = set(train)
    novelty = sum(s not in seen for s in uniq) / len(uniq)
    tm = [Chem.MolFromSmiles(s) for s in train]
    gm = [Chem.MolFromSmiles(s) for s in uniq]
    kl = kl_score(_descriptors(tm), _descriptors(gm))
    a = fingerprints(gm, n_bits).astype(np.float64)
    b = fingerprints(tm, n_bits).astype(np.float64)
    inter = a @ b.T
    union = a.sum(1)[:, None] + b.sum(1)[None, :] - inter
    nn = np.max(np.where(union > 0, inter / np.where(union > 0, union, 1.0), 1.0), axis=1)
    return GenerativeScores(**out, novelty=novelty, kl_score=kl,
                            nn_similarity=float(nn.mean()),
                            nn_similarity_ge_07=float(np.mean(nn >= 0.7)))
