"""Drug-like domain: MOSES molecules as SELFIES, the strict verifier, a logP split.

Data (:mod:`jaxkit.actflow.moses`, provenance ``jaxkit/data/MOSES.md``): ``n_read``
molecules drawn (seed ``seed``) from the MOSES ``train`` split, written as kekulised
SELFIES (Krenn et al. 2020) of at most ``max_len`` tokens, kept when they pass the
strict verifier (:func:`jaxkit.actflow.verify_mol.check_strict`). The **split is fixed
before the run by the configuration**: pre-training data are the first ``n_data`` of
them with Crippen logP <= ``max_logp_data``; the held-out valid region is logP above it,
and its reference set (the k-NN coverage of :mod:`jaxkit.actflow.discrete`) is up to
``n_ref`` molecules of the MOSES ``test`` split (never seen in pre-training) that are
valid, at most ``max_len`` SELFIES tokens and above the cut, in the same alphabet.

Distances: Tanimoto on Morgan fingerprints (radius 2, 1024 bits); a sample is novel
beyond Tanimoto distance ``novelty``. ``decode`` gives RDKit canonical SMILES.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .molecules import (
    fingerprints,
    internal_diversity,
    scaffold_count,
    selfies_to_smiles,
    selfies_tokens,
)
from .verify_mol import StrictRules, check_strict, describe

__all__ = ["druglike_domain", "load_split", "strict_valid"]


@lru_cache(maxsize=200_000)
def strict_valid(smiles: str, rules: StrictRules = StrictRules()) -> bool:
    """Cached ``not check_strict(smiles, rules)`` (samples repeat across rounds)."""
    return not check_strict(smiles, rules)


def _logp(smiles: str) -> float:
    from rdkit import Chem
    from rdkit.Chem import Crippen

    return float(Crippen.MolLogP(Chem.MolFromSmiles(smiles)))


def _encode(smiles: list[str], max_len: int, rules: StrictRules):
    """``[(tokens, canonical SMILES, logP)]`` of the strict-valid molecules whose SELFIES
    has at most ``max_len`` tokens (duplicates removed)."""
    seen, out = set(), []
    for smi in smiles:
        enc = selfies_tokens(smi)
        if enc is None or enc[0] in seen:
            continue
        k, toks = enc
        if not 0 < len(toks) <= max_len:
            continue
        can = selfies_to_smiles(["".join(toks)])[0]
        if can and strict_valid(can, rules):
            seen.add(k)
            out.append((toks, can, _logp(can)))
    return out


def load_split(n_data: int, n_ref: int, *, max_len: int = 40, max_logp_data: float = 2.5,
               n_read: int | None = None, seed: int = 0, rules: StrictRules = StrictRules()):
    """The pre-training rows (logP <= ``max_logp_data``, MOSES train) and the held-out
    reference rows (logP above it, MOSES test), as token tuples; None without molsets.

    Returns:
        ``(data, reference)``: lists of SELFIES token tuples (``len(data) <= n_data``,
        ``len(reference) <= n_ref``).
    """
    from . import moses

    if not moses.available():
        return None
    train = moses.read_smiles("train", n_read or 4 * n_data, seed=seed)
    test = moses.read_smiles("test", 6 * n_ref, seed=seed)
    data = [t for t, _, lp in _encode(train, max_len, rules) if lp <= max_logp_data][:n_data]
    ref = [t for t, _, lp in _encode(test, max_len, rules) if lp > max_logp_data][:n_ref]
    return data, ref


def druglike_domain(*, n_data: int = 4000, n_ref: int = 512, max_len: int = 40,
                    max_logp_data: float = 2.5, novelty: float = 0.6, seed: int = 0,
                    rules: StrictRules = StrictRules()):
    """The drug-like :class:`~jaxkit.actflow.discrete.TokenDomain` (see the module), or
    None when the molsets wheel is not installed.

    Args:
        n_data: pre-training molecules (MOSES train, logP <= ``max_logp_data``).
        n_ref: held-out reference molecules (MOSES test, logP above the cut).
        max_len: SELFIES tokens at most.
        max_logp_data: the split, fixed before the run.
        novelty: Tanimoto distance beyond which a sample is novel.
        seed: the subsample's seed.
        rules: the strict verifier's rules.
    """
    from .discrete import TokenDomain

    for name, v in (("n_data", n_data), ("n_ref", n_ref), ("max_len", max_len)):
        if v < 6:
            raise ValueError(f"`{name}` must be >= 6; got {v}")
    split = load_split(n_data, n_ref, max_len=max_len, max_logp_data=max_logp_data,
                       seed=seed, rules=rules)
    if split is None:
        return None
    data, ref = split
    if len(data) < 6 or len(ref) < 6:
        raise ValueError(f"drug-like split too small: {len(data)} pre-training and "
                         f"{len(ref)} reference molecules; raise druglike_n_data / n_ref "
                         "or move druglike_max_logp")
    alphabet = tuple(sorted({t for s in data for t in s}))
    index = {t: i for i, t in enumerate(alphabet)}
    ref = [r for r in ref if all(t in index for t in r)]  # the same alphabet
    pad = len(alphabet)

    def enc(rows):
        m = np.full((len(rows), max_len), pad, np.int32)
        for i, r in enumerate(rows):
            m[i, :len(r)] = [index[t] for t in r]
        return m

    def to_smiles(tokens) -> list[str]:
        return selfies_to_smiles(["".join(alphabet[t] for t in row if t < pad)
                                  for row in np.asarray(tokens)])

    def verify(tokens):
        return np.array([bool(s) and strict_valid(s, rules) for s in to_smiles(tokens)], bool)

    def out_region(tokens):
        return np.array([bool(s) and _logp(s) > max_logp_data for s in to_smiles(tokens)],
                        bool)

    def extra(tokens, valid):
        uniq = sorted({s for s, v in zip(to_smiles(tokens), valid, strict=True) if v})
        return dict(scaffolds=float(scaffold_count(uniq)),
                    int_div=internal_diversity(fingerprints(uniq)) if len(uniq) > 1
                    else float("nan"))

    return TokenDomain(
        "druglike", max_len, pad + 1, enc(data), verify, to_smiles, novelty,
        features=lambda t: fingerprints(to_smiles(t)), metric="tanimoto",
        reference=enc(ref), extra=extra, outside=out_region,
        description=f"{len(data)} MOSES train molecules with logP <= {max_logp_data:g} "
        f"(pre-training), {len(ref)} MOSES test molecules above it (held-out reference); "
        f"SELFIES <= {max_len} tokens, alphabet {pad}; {describe(rules)}; novel: Tanimoto "
        f"distance > {novelty:g} (Morgan r=2)")
