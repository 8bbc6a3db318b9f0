"""Peptide domain: real antimicrobial / anticancer peptide sequences, the
antimicrobial-peptide-like verifier and a continuous relaxation for flow matching.

Data: ``jaxkit/data/peptides.csv.gz`` (6110 sequences from the modlAMP 4.3.3 wheel's
data folder, BSD-3-Clause; provenance in ``jaxkit/data/PEPTIDES.md``), read by
:func:`load_peptides`.

Verifier: :func:`jaxkit.actflow.peptide_verifier.check_amp` with the windows of
:class:`~jaxkit.actflow.peptide_verifier.AMPWindows` (net charge at pH 7 from EMBOSS
pKa values, Eisenberg hydrophobic moment, GRAVY, Guruprasad instability index,
AGGRESCAN hot-spot share, length, forbidden motifs). Held-out region: the valid AMPs
with net charge at pH 7 above ``max_charge_data``; pre-training data: the valid AMPs at
or below it.

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
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np

from . import seqprops as S
from .domains import Domain
from .peptide_verifier import AMPWindows, check_amp
from .verifiers import Verifier

__all__ = ["AMINO", "load_peptides", "net_charge", "mean_hydrophobicity", "encode", "decode",
           "novelty_radius", "peptide_domain", "peptide_token_domain"]

AMINO = "ACDEFGHIKLMNPQRSTVWY"
PAD = len(AMINO)  # token index of the padding symbol
VOCAB = PAD + 1


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


def net_charge(seq: str, pka: str = "EMBOSS") -> float:
    """Net charge at pH 7 (:func:`jaxkit.actflow.seqprops.net_charge`, free termini);
    NaN for an empty or non-canonical sequence."""
    if not seq or set(seq) - set(AMINO):
        return float("nan")
    return S.net_charge(seq, 7.0, pka)


def mean_hydrophobicity(seq: str) -> float:
    """Mean Eisenberg consensus hydrophobicity (0 for an empty sequence; for plots)."""
    vals = [S.EISENBERG[c] for c in seq if c in S.EISENBERG]
    return float(np.mean(vals)) if vals else 0.0


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


def novelty_radius(share: float, length: int) -> int:
    """The Hamming novelty radius scaled to the padded sequence length:
    ``max(1, round(share * length))`` substitutions.

    Args:
        share: the share of positions that must differ, in (0, 1).
        length: the padded length.

    Returns:
        The radius (novel: Hamming distance above it).
    """
    if not 0.0 < share < 1.0:
        raise ValueError(f"`share` must lie in (0, 1); got {share}")
    return max(1, int(round(share * length)))


def _valid_amps(windows: AMPWindows) -> list[str]:
    """The distinct shipped AMP sequences that ``windows`` accepts, sorted."""
    return sorted({s for s in load_peptides(("AMP",))["sequence"]
                   if not check_amp(s, windows)})


def peptide_domain(windows: AMPWindows = AMPWindows(), *, max_charge_data: float = 3.0,
                   novelty_hamming: int = 2) -> Domain:
    """Relaxed peptide domain: pre-training data are the AMP sequences that ``windows``
    accepts *and* that have net charge at pH 7 <= ``max_charge_data`` (part of the valid
    set); the verifier decodes and applies :func:`check_amp` on the host (a NumPy
    verifier through ``jax.pure_callback``); novel = more than ``novelty_hamming``
    substitutions away; ``outside``: the decoded sequence's net charge (traceable: at a
    fixed pH the charge is linear in the residue counts,
    :func:`jaxkit.actflow.seqprops.charge_terms`) above ``max_charge_data``."""
    L = windows.length[1]
    seqs = [s for s in _valid_amps(windows) if net_charge(s, windows.pka) <= max_charge_data]
    onehot = jnp.asarray(np.eye(VOCAB, dtype=np.float32)[encode(seqs, L)].reshape(len(seqs), -1))

    def data(key, n):
        return onehot[jax.random.randint(key, (n,), 0, len(seqs))]

    def host_verify(x):
        toks = np.argmax(np.asarray(x).reshape(x.shape[0], L, VOCAB), -1)
        return np.array([not check_amp(s, windows) for s in decode(toks)], bool)

    def embed(x):
        return jax.nn.one_hot(_tokens(x, L), VOCAB).reshape(x.shape[0], -1)

    def view(x):
        s = decode(np.asarray(_tokens(jnp.asarray(x), L)))
        return np.array([[net_charge(q, windows.pka) if q else 0.0, mean_hydrophobicity(q)]
                         for q in s])

    w, const = S.charge_terms(7.0, windows.pka)
    weight = np.array([w[c] for c in AMINO] + [0.0], np.float32)  # padding 0

    def outside(x):  # net charge of the decoded sequence beyond the pre-training range
        return jnp.sum(jnp.asarray(weight)[_tokens(x, L)], axis=1) + const \
            > max_charge_data + 1e-6

    thr = float(np.sqrt(2 * novelty_hamming + 1))  # Hamming > novelty_hamming
    return Domain("peptides", L * VOCAB, Verifier(host_verify, "amp-like", host=True),
                  data, None, None, radius=thr, novelty=thr, embed=embed, view=view,
                  outside=outside)


def peptide_token_domain(windows: AMPWindows = AMPWindows(), *, max_charge_data: float = 3.0,
                         novelty_share: float = 0.4):
    """Discrete peptide domain (:class:`jaxkit.actflow.discrete.TokenDomain`): tokens of
    :data:`AMINO` plus padding (length ``windows.length[1]``); pre-training data are the
    AMPs :func:`check_amp` accepts with net charge at pH 7 <= ``max_charge_data``; the
    reference (k-NN coverage), the held-out region fixed before the run, is the valid
    AMPs above it; novel = Hamming distance on the padded tokens above
    :func:`novelty_radius` (``novelty_share`` of the padded length)."""
    from .discrete import TokenDomain

    L = windows.length[1]
    radius = novelty_radius(novelty_share, L)
    valid = _valid_amps(windows)
    inside = [s for s in valid if net_charge(s, windows.pka) <= max_charge_data]
    outside = [s for s in valid if net_charge(s, windows.pka) > max_charge_data]

    def verify(tokens):
        return np.array([not check_amp(s, windows) for s in decode(tokens)], bool)

    return TokenDomain("peptides-discrete", L, VOCAB, encode(inside, L), verify, decode,
                       float(radius), reference=encode(outside, L),
                       outside=lambda t: np.array([net_charge(q, windows.pka) > max_charge_data
                                                   for q in decode(t)], bool),
                       description=f"{len(inside)} antimicrobial-peptide-like AMPs with net "
                       f"charge at pH 7 <= +{max_charge_data:g} (pre-training), "
                       f"{len(outside)} above it (held-out reference); verifier {windows}; "
                       f"novel: Hamming > {radius} ({novelty_share:g} of length {L})")
