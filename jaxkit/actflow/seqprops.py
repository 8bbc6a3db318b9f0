"""Physicochemical descriptors of peptide and protein sequences (pure functions).

Each function takes a string of the 20 canonical one-letter residues (upper case) and
returns a float; a string with any other character is a ``ValueError`` naming ``seq``.
The verifiers of :mod:`jaxkit.actflow.peptide_verifier` combine them.

* :func:`net_charge`: net charge at a pH from side-chain and terminal pKa values
  (Henderson-Hasselbalch), :data:`PKA_SETS` ``"EMBOSS"`` (default; EMBOSS ``iep``'s
  ``Epk.dat``) or ``"Lehninger"`` (Lehninger, Principles of Biochemistry).
* :func:`hydrophobic_moment`: the mean helical hydrophobic moment (Eisenberg, Weiss &
  Terwilliger 1982) on the Eisenberg consensus scale (:data:`EISENBERG`, Eisenberg,
  Schwarz, Komaromy & Wall 1984), 100 degrees per residue.
* :func:`instability_index`: Guruprasad, Reddy & Pandit (1990), the dipeptide
  instability weight values :data:`DIWV` typed from the paper's table.
* :func:`gravy`: the grand average of hydropathy on the Kyte & Doolittle (1982) scale
  :data:`KYTE_DOOLITTLE`.
* :func:`aggregation_share`: a simplified AGGRESCAN (Conchillo-Sole et al. 2007, the a3v
  scale :data:`AGGRESCAN_A3V` of Sanchez de Groot et al. 2005): the share of residues in
  aggregation hot spots of the windowed a3v profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CANONICAL", "PKa", "PKA_SETS", "EISENBERG", "KYTE_DOOLITTLE", "AGGRESCAN_A3V",
           "DIWV", "net_charge", "charge_terms", "hydrophobic_moment", "instability_index", "gravy",
           "aggrescan_profile", "aggregation_share", "describe"]

CANONICAL = "ACDEFGHIKLMNPQRSTVWY"


@dataclass(frozen=True)
class PKa:
    """A pKa set: the free N-terminal amine, the free C-terminal carboxyl, the basic
    side chains (``positive``: protonated = +1) and the acidic ones (``negative``:
    deprotonated = -1)."""

    name: str
    nterm: float
    cterm: float
    positive: dict
    negative: dict


#: pKa sets: EMBOSS ``iep`` (``Epk.dat``) and Lehninger (Principles of Biochemistry)
PKA_SETS = {
    "EMBOSS": PKa("EMBOSS", 8.6, 3.6, dict(K=10.8, R=12.5, H=6.5),
                  dict(D=3.9, E=4.1, C=8.5, Y=10.1)),
    "Lehninger": PKa("Lehninger", 9.69, 2.34, dict(K=10.5, R=12.4, H=6.0),
                     dict(D=3.86, E=4.25, C=8.33, Y=10.07)),
}

#: Eisenberg et al. (1984) normalised consensus hydrophobicity scale
EISENBERG = dict(A=0.62, R=-2.53, N=-0.78, D=-0.90, C=0.29, Q=-0.85, E=-0.74, G=0.48,
                 H=-0.40, I=1.38, L=1.06, K=-1.50, M=0.64, F=1.19, P=0.12, S=-0.18,
                 T=-0.05, W=0.81, Y=0.26, V=1.08)

#: Kyte & Doolittle (1982) hydropathy scale
KYTE_DOOLITTLE = dict(A=1.8, R=-4.5, N=-3.5, D=-3.5, C=2.5, Q=-3.5, E=-3.5, G=-0.4, H=-3.2,
                      I=4.5, L=3.8, K=-3.9, M=1.9, F=2.8, P=-1.6, S=-0.8, T=-0.7, W=-0.9,
                      Y=-1.3, V=4.2)

#: AGGRESCAN a3v aggregation-propensity scale (Sanchez de Groot et al. 2005, BMC Struct.
#: Biol. 5:18; used by Conchillo-Sole et al. 2007)
AGGRESCAN_A3V = dict(I=1.822, F=1.754, V=1.594, L=1.380, Y=1.159, W=1.037, M=0.910,
                     C=0.604, A=-0.036, T=-0.159, S=-0.294, P=-0.334, G=-0.535, K=-0.931,
                     H=-1.033, Q=-1.231, R=-1.240, N=-1.302, E=-1.412, D=-1.836)

#: AGGRESCAN hot-spot threshold on the a4v profile
HOT_SPOT_THRESHOLD = -0.02

# Guruprasad et al. (1990) Table: DIWV(x, y) of the dipeptide x-y, 1.0 unless listed.
_DIWV_OFF = {
    "A": dict(C=44.94, D=-7.49, H=-7.49, P=20.26),
    "C": dict(D=20.26, H=33.60, L=20.26, M=33.60, P=20.26, Q=-6.54, T=33.60, V=-6.54,
              W=24.68),
    "D": dict(F=-6.54, K=-7.49, R=-6.54, S=20.26, T=-14.03),
    "E": dict(C=44.94, D=20.26, E=33.60, H=-6.54, I=20.26, P=20.26, Q=20.26, S=20.26,
              W=-14.03),
    "F": dict(D=13.34, K=-14.03, P=20.26, Y=33.60),
    "G": dict(A=-7.49, E=-6.54, G=13.34, I=-7.49, K=-7.49, N=-7.49, T=-7.49, W=13.34,
              Y=-7.49),
    "H": dict(F=-9.37, G=-9.37, I=44.94, K=24.68, N=24.68, P=-1.88, T=-6.54, W=-1.88,
              Y=44.94),
    "I": dict(E=44.94, H=13.34, K=-7.49, L=20.26, P=-1.88, V=-7.49),
    "K": dict(G=-7.49, I=-7.49, L=-7.49, M=33.60, P=-6.54, Q=24.64, R=33.60, V=-7.49),
    "L": dict(K=-7.49, P=20.26, Q=33.60, R=20.26, W=24.68),
    "M": dict(A=13.34, H=58.28, M=-1.88, P=44.94, Q=-6.54, R=-6.54, S=44.94, T=-1.88,
              Y=24.68),
    "N": dict(C=-1.88, F=-14.03, G=-14.03, I=44.94, K=24.68, P=-1.88, Q=-6.54, T=-7.49,
              W=-9.37),
    "P": dict(A=20.26, C=-6.54, D=-6.54, E=18.38, F=20.26, M=-6.54, P=20.26, Q=20.26,
              R=-6.54, S=20.26, V=20.26, W=-1.88),
    "Q": dict(C=-6.54, D=20.26, E=20.26, F=-6.54, P=20.26, Q=20.26, S=44.94, V=-6.54,
              Y=-6.54),
    "R": dict(G=-7.49, H=20.26, N=13.34, P=20.26, Q=20.26, R=58.28, S=44.94, W=58.28,
              Y=-6.54),
    "S": dict(C=33.60, E=20.26, P=44.94, Q=20.26, R=20.26, S=20.26),
    "T": dict(E=20.26, F=13.34, G=-7.49, N=-14.03, Q=-6.54, W=-14.03),
    "V": dict(D=-14.03, G=-7.49, K=-1.88, P=20.26, T=-7.49, Y=-6.54),
    "W": dict(A=-14.03, G=-9.37, H=24.68, L=13.34, M=24.68, N=13.34, T=-14.03, V=-7.49),
    "Y": dict(A=24.68, D=24.68, E=-6.54, G=-7.49, H=13.34, M=44.94, P=13.34, R=-15.91,
              T=-7.49, W=-9.37, Y=13.34),
}
#: the 400 dipeptide instability weight values, ``DIWV[x][y]`` for the dipeptide x-y
DIWV = {a: {b: _DIWV_OFF[a].get(b, 1.0) for b in CANONICAL} for a in CANONICAL}


def _checked(seq: str) -> str:
    if not isinstance(seq, str) or not seq:
        raise ValueError(f"`seq` must be a non-empty string of residues; got {seq!r}")
    bad = sorted(set(seq) - set(CANONICAL))
    if bad:
        raise ValueError(f"`seq` {seq!r} has non-canonical residues {''.join(bad)!r}")
    return seq


def net_charge(seq: str, ph: float = 7.0, pka: str = "EMBOSS", *,
               amidated: bool = False) -> float:
    """Net charge at ``ph`` by Henderson-Hasselbalch:
    ``Q = sum_pos n_i / (1 + 10^(pH - pKa_i)) - sum_neg n_j / (1 + 10^(pKa_j - pH))``
    over the basic side chains (K, R, H) and the free N-terminus (positive) and the
    acidic side chains (D, E, C, Y) and the free C-terminus (negative).

    Args:
        seq: one-letter residues.
        ph: the pH.
        pka: the pKa set, a key of :data:`PKA_SETS` (``"EMBOSS"``, ``"Lehninger"``).
        amidated: C-terminal amide (no C-terminal charge), as in melittin.

    Returns:
        The net charge (elementary charges).
    """
    seq = _checked(seq)
    if pka not in PKA_SETS:
        raise ValueError(f"`pka` must be one of {sorted(PKA_SETS)}; got {pka!r}")
    p = PKA_SETS[pka]
    q = 1.0 / (1.0 + 10.0 ** (ph - p.nterm))
    q += sum(seq.count(c) / (1.0 + 10.0 ** (ph - k)) for c, k in p.positive.items())
    q -= sum(seq.count(c) / (1.0 + 10.0 ** (k - ph)) for c, k in p.negative.items())
    if not amidated:
        q -= 1.0 / (1.0 + 10.0 ** (p.cterm - ph))
    return float(q)


def charge_terms(ph: float = 7.0, pka: str = "EMBOSS") -> tuple[dict[str, float], float]:
    """:func:`net_charge` as a sum: at a fixed pH the Henderson-Hasselbalch charge is
    linear in the residue counts, ``Q = c + sum_i w(x_i)``.

    Args:
        ph: the pH.
        pka: the pKa set, a key of :data:`PKA_SETS`.

    Returns:
        ``(w, c)``: ``w`` the charge of each canonical residue's side chain (0 for the
        uncharged ones) and ``c`` that of the free termini (N-terminus minus C-terminus).
    """
    if pka not in PKA_SETS:
        raise ValueError(f"`pka` must be one of {sorted(PKA_SETS)}; got {pka!r}")
    p = PKA_SETS[pka]
    w = {c: 0.0 for c in CANONICAL}
    for c, k in p.positive.items():
        w[c] = 1.0 / (1.0 + 10.0 ** (ph - k))
    for c, k in p.negative.items():
        w[c] = -1.0 / (1.0 + 10.0 ** (k - ph))
    return w, 1.0 / (1.0 + 10.0 ** (ph - p.nterm)) - 1.0 / (1.0 + 10.0 ** (p.cterm - ph))


def hydrophobic_moment(seq: str, angle: float = 100.0, window: int | None = None) -> float:
    """The mean hydrophobic moment ``<mu_H> = |sum_n h_n exp(i n delta)| / N``
    (Eisenberg, Weiss & Terwilliger 1982, Nature 299:371) with ``h`` the Eisenberg
    consensus scale and ``delta = angle`` degrees (100: the alpha helix).

    Args:
        seq: one-letter residues.
        angle: degrees per residue.
        window: None: the whole sequence; an integer: the largest ``<mu_H>`` over the
            windows of that length (the whole sequence when it is shorter).

    Returns:
        ``<mu_H>`` (scale units per residue).
    """
    h = np.array([EISENBERG[c] for c in _checked(seq)])
    ph = np.exp(1j * np.deg2rad(angle) * np.arange(len(h)))
    if window is None or window >= len(h):
        return float(np.abs(np.sum(h * ph)) / len(h))
    if window < 1:
        raise ValueError(f"`window` must be >= 1 or None; got {window}")
    terms = h * ph
    return float(max(np.abs(np.sum(terms[i:i + window])) / window
                     for i in range(len(h) - window + 1)))


def instability_index(seq: str) -> float:
    """Guruprasad, Reddy & Pandit (1990, Protein Eng. 4:155-161) instability index
    ``II = (10 / L) sum_{i=1}^{L-1} DIWV(x_i, x_{i+1})``; a protein with II < 40 is
    predicted stable in vivo.

    Args:
        seq: one-letter residues.

    Returns:
        The instability index.
    """
    seq = _checked(seq)
    return float(10.0 / len(seq) * sum(DIWV[seq[i]][seq[i + 1]] for i in range(len(seq) - 1)))


def gravy(seq: str) -> float:
    """Grand average of hydropathy: the mean Kyte & Doolittle (1982, J. Mol. Biol.
    157:105-132) hydropathy of the residues.

    Args:
        seq: one-letter residues.

    Returns:
        GRAVY (negative: hydrophilic on average).
    """
    return float(np.mean([KYTE_DOOLITTLE[c] for c in _checked(seq)]))


def _aggrescan_window(n: int) -> int:
    """AGGRESCAN's window length by sequence length (Conchillo-Sole et al. 2007)."""
    return 5 if n <= 75 else 7 if n <= 175 else 9 if n <= 300 else 11


def aggrescan_profile(seq: str, window: int | None = None) -> np.ndarray:
    """The a4v profile: per residue, the mean a3v (:data:`AGGRESCAN_A3V`) over the
    ``window`` centred on it (5 residues up to length 75, 7 to 175, 9 to 300, else 11),
    the window cut at the ends (a simplification of Conchillo-Sole et al. 2007, BMC
    Bioinformatics 8:65, whose web tool treats the ends differently).

    Args:
        seq: one-letter residues.
        window: odd window length (None: by sequence length).

    Returns:
        ``(L,)`` a4v values.
    """
    a = np.array([AGGRESCAN_A3V[c] for c in _checked(seq)])
    w = _aggrescan_window(len(a)) if window is None else window
    if w < 1 or w % 2 == 0:
        raise ValueError(f"`window` must be an odd integer >= 1; got {w}")
    c = np.concatenate([[0.0], np.cumsum(a)])
    lo = np.maximum(np.arange(len(a)) - w // 2, 0)
    hi = np.minimum(np.arange(len(a)) + w // 2 + 1, len(a))
    return (c[hi] - c[lo]) / (hi - lo)


def aggregation_share(seq: str, min_run: int = 5) -> float:
    """Share of residues in AGGRESCAN hot spots: runs of at least ``min_run``
    consecutive residues whose a4v (:func:`aggrescan_profile`) exceeds the hot-spot
    threshold -0.02, prolines breaking a run (Conchillo-Sole et al. 2007).

    Args:
        seq: one-letter residues.
        min_run: the shortest hot spot.

    Returns:
        A share in [0, 1] (0: no aggregation hot spot).
    """
    prof = aggrescan_profile(seq)
    hot = (prof > HOT_SPOT_THRESHOLD) & (np.array(list(seq)) != "P")
    total, run = 0, 0
    for h in [*hot, False]:
        if h:
            run += 1
            continue
        total += run if run >= min_run else 0
        run = 0
    return total / len(seq)


def describe(seq: str, pka: str = "EMBOSS") -> dict[str, float]:
    """Every descriptor of ``seq`` at pH 7: ``charge``, ``moment``, ``instability``,
    ``gravy``, ``aggregation`` and ``length``."""
    return dict(length=float(len(_checked(seq))), charge=net_charge(seq, 7.0, pka),
                moment=hydrophobic_moment(seq), instability=instability_index(seq),
                gravy=gravy(seq), aggregation=aggregation_share(seq))
