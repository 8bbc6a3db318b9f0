"""Peptide domain: real antimicrobial / anticancer peptide sequences, a rule-based
verifier and a continuous relaxation for flow matching.

Data: ``jaxkit/data/peptides.csv.gz`` (6110 sequences from the modlAMP 4.3.3 wheel's
data folder, BSD-3-Clause; provenance in ``jaxkit/data/PEPTIDES.md``), read by
:func:`load_peptides`.

Verifier (:func:`check_rules`, :class:`Rules`): only the 20 canonical residues; length
in a window; net charge at pH 7 from residue counts (+1 per K and R, -1 per D and E,
+0.1 per H: Henderson-Hasselbalch with pKa(His) = 6.0 gives 0.09; termini ignored) in a
window; mean hydrophobicity on the Eisenberg consensus scale (Eisenberg, Schwarz,
Komaromy & Wall 1984, "Analysis of membrane and surface protein sequences with the
hydrophobic moment plot", J. Mol. Biol. 179:125-142) in a window; no forbidden motif
(default: ``DP``, acid-labile Asp-Pro bond; ``NG``, deamidation-prone Asn-Gly).

Relaxation: the ActFlow loop explores in the flow's noise space (it inverts the ODE,
perturbs and steers the latent, and integrates forward), which needs a continuous,
invertible flow. So a sequence of length <= ``max_len`` is a ``max_len x 21`` one-hot
matrix (20 residues + a padding symbol), flattened; the flow runs in that continuous
space and a sample is decoded by argmax per position, padding symbols dropped. The
discrete flow kernels (``jaxkit.kernels.flow_discrete``: mixture / masking paths, the
CTMC Euler sampler, ``nets.SeqTransformer``) model such sequences directly, but a CTMC
has no invertible noise space to steer, so this loop does not use them. Distances for
novelty / coverage are Euclidean between decoded one-hot vectors, so ``d^2 = 2 x``
(Hamming distance of the decoded padded sequences).
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np

from .domains import Domain
from .verifiers import Verifier

__all__ = ["AMINO", "EISENBERG", "Rules", "load_peptides", "net_charge", "hydrophobicity",
           "check_rules", "encode", "decode", "peptide_domain"]

AMINO = "ACDEFGHIKLMNPQRSTVWY"
PAD = len(AMINO)  # token index of the padding symbol
VOCAB = PAD + 1
#: Eisenberg et al. (1984) normalised consensus hydrophobicity scale.
EISENBERG = dict(A=0.62, R=-2.53, N=-0.78, D=-0.90, C=0.29, Q=-0.85, E=-0.74, G=0.48,
                 H=-0.40, I=1.38, L=1.06, K=-1.50, M=0.64, F=1.19, P=0.12, S=-0.18,
                 T=-0.05, W=0.81, Y=0.26, V=1.08)


@dataclass(frozen=True)
class Rules:
    """Validity windows (inclusive) of the rule-based peptide verifier."""

    min_len: int = 8
    max_len: int = 20
    min_charge: float = 1.0
    max_charge: float = 10.0
    min_hydro: float = -0.6
    max_hydro: float = 0.8
    forbidden: tuple[str, ...] = ("DP", "NG")


def load_peptides(classes: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The shipped sequences: ``dict(sequence, cls, source)`` of equal-length string
    arrays. ``cls`` is AMP, ACP (the positives of modlAMP's sets) or UniProt, TM, Random
    (their negatives); ``classes`` keeps only those."""
    path = resources.files("jaxkit.data").joinpath("peptides.csv.gz")
    with path.open("rb") as fh, gzip.open(fh, "rt") as gz:
        rows = list(csv.DictReader(gz))
    if classes is not None:
        rows = [r for r in rows if r["class"] in classes]
    return dict(sequence=np.array([r["sequence"] for r in rows]),
                cls=np.array([r["class"] for r in rows]),
                source=np.array([r["source"] for r in rows]))


def net_charge(seq: str) -> float:
    """Net charge at pH 7 from residue counts (K, R: +1; D, E: -1; H: +0.1)."""
    return (seq.count("K") + seq.count("R") - seq.count("D") - seq.count("E")
            + 0.1 * seq.count("H"))


def hydrophobicity(seq: str) -> float:
    """Mean Eisenberg consensus hydrophobicity (NaN for an empty sequence)."""
    vals = [EISENBERG[c] for c in seq if c in EISENBERG]
    return float(np.mean(vals)) if vals else float("nan")


def check_rules(seq: str, rules: Rules = Rules()) -> list[str]:
    """The rules ``seq`` breaks (an empty list means valid)."""
    bad = sorted(set(seq) - set(AMINO))
    if bad:
        return [f"non-canonical residues {''.join(bad)}"]
    out = []
    if not rules.min_len <= len(seq) <= rules.max_len:
        out.append(f"length {len(seq)} outside [{rules.min_len}, {rules.max_len}]")
    q = net_charge(seq)
    if not rules.min_charge <= q <= rules.max_charge:
        out.append(f"net charge {q:+.1f} outside [{rules.min_charge}, {rules.max_charge}]")
    h = hydrophobicity(seq)
    if not rules.min_hydro <= h <= rules.max_hydro:
        out.append(f"hydrophobicity {h:.2f} outside [{rules.min_hydro}, {rules.max_hydro}]")
    out += [f"forbidden motif {m}" for m in rules.forbidden if m in seq]
    return out


def encode(seqs, max_len: int) -> np.ndarray:
    """Token matrix (n, max_len): residue indices into :data:`AMINO`, then padding."""
    out = np.full((len(seqs), max_len), PAD, np.int32)
    for i, s in enumerate(seqs):
        if len(s) > max_len or set(s) - set(AMINO):
            raise ValueError(f"`seqs[{i}]` ({s!r}) is longer than max_len={max_len} or has "
                             "non-canonical residues")
        out[i, :len(s)] = [AMINO.index(c) for c in s]
    return out


def decode(tokens) -> list[str]:
    """Sequences from a token matrix; padding symbols are dropped wherever they are."""
    return ["".join(AMINO[t] for t in row if t < PAD) for row in np.asarray(tokens)]


def _tokens(x, max_len: int):
    return jnp.argmax(jnp.reshape(x, (x.shape[0], max_len, VOCAB)), axis=-1)


def peptide_domain(rules: Rules = Rules(), *, max_charge_data: float = 3.0,
                   novelty_hamming: int = 2) -> Domain:
    """Relaxed peptide domain: pre-training data are the AMP sequences that satisfy
    ``rules`` *and* have net charge <= ``max_charge_data`` (part of the valid set); the
    verifier decodes and applies ``rules`` on the host (a NumPy verifier through
    ``jax.pure_callback``); novel = more than ``novelty_hamming`` substitutions away."""
    L = rules.max_len
    seqs = [s for s in load_peptides(("AMP",))["sequence"]
            if not check_rules(s, rules) and net_charge(s) <= max_charge_data]
    seqs = sorted(set(seqs))
    onehot = jnp.asarray(np.eye(VOCAB, dtype=np.float32)[encode(seqs, L)].reshape(len(seqs), -1))

    def data(key, n):
        return onehot[jax.random.randint(key, (n,), 0, len(seqs))]

    def host_verify(x):
        toks = np.argmax(np.asarray(x).reshape(x.shape[0], L, VOCAB), -1)
        return np.array([not check_rules(s, rules) for s in decode(toks)], bool)

    def embed(x):
        return jax.nn.one_hot(_tokens(x, L), VOCAB).reshape(x.shape[0], -1)

    def view(x):
        s = decode(np.asarray(_tokens(jnp.asarray(x), L)))
        return np.array([[net_charge(q), hydrophobicity(q) if q else 0.0] for q in s])

    weight = np.zeros(VOCAB, np.float32)  # net charge per residue (padding 0)
    for c, q in (("K", 1.0), ("R", 1.0), ("D", -1.0), ("E", -1.0), ("H", 0.1)):
        weight[AMINO.index(c)] = q

    def outside(x):  # net charge of the decoded sequence beyond the pre-training range
        return jnp.sum(jnp.asarray(weight)[_tokens(x, L)], axis=1) > max_charge_data + 1e-6

    thr = float(np.sqrt(2 * novelty_hamming + 1))  # Hamming > novelty_hamming
    return Domain("peptides", L * VOCAB, Verifier(host_verify, "peptide-rules", host=True),
                  data, None, None, radius=thr, novelty=thr, embed=embed, view=view,
                  outside=outside)


def peptide_token_domain(rules: Rules = Rules(), *, max_charge_data: float = 3.0,
                         novelty_hamming: int = 8):
    """Discrete peptide domain (:class:`jaxkit.actflow.discrete.TokenDomain`): tokens of
    :data:`AMINO` plus padding (length ``rules.max_len``); pre-training data are the
    valid AMPs with net charge <= ``max_charge_data``; the reference (k-NN coverage) is
    the valid AMPs above it (valid region outside the pre-training region); novel =
    Hamming distance > ``novelty_hamming`` on the padded tokens."""
    from .discrete import TokenDomain

    L = rules.max_len
    valid = sorted({s for s in load_peptides(("AMP",))["sequence"] if not check_rules(s, rules)})
    inside = [s for s in valid if net_charge(s) <= max_charge_data]
    outside = [s for s in valid if net_charge(s) > max_charge_data]

    def verify(tokens):
        return np.array([not check_rules(s, rules) for s in decode(tokens)], bool)

    return TokenDomain("peptides-discrete", L, VOCAB, encode(inside, L), verify, decode,
                       float(novelty_hamming), reference=encode(outside, L),
                       outside=lambda t: np.array([net_charge(q) > max_charge_data
                                                   for q in decode(t)], bool),
                       description=f"{len(inside)} valid AMPs with net charge <= "
                       f"+{max_charge_data:g} (pre-training), {len(outside)} above it "
                       f"(reference); rules {rules}; novel: Hamming > {novelty_hamming}")
