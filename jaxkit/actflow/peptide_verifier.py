"""Physicochemical verifiers of peptides and proteins: acceptance windows on the
descriptors of :mod:`jaxkit.actflow.seqprops`.

* :func:`check_amp` (:class:`AMPWindows`): antimicrobial-peptide-like. Cationic (net
  charge at pH 7 in a window; AMPs are mostly +2 to +9, Hancock & Sahl 2006), amphipathic
  (mean helical hydrophobic moment on the Eisenberg scale at least ``min_moment``),
  GRAVY in a window (neither fully hydrophilic nor a transmembrane-like stretch),
  instability index at most ``max_instability`` (Guruprasad et al. 1990: < 40 stable),
  aggregation hot-spot share at most ``max_aggregation`` (simplified AGGRESCAN), length in
  a window, no acid-labile Asp-Pro or deamidation-prone Asn-Gly bond.
* :func:`check_soluble` (:class:`SolubleWindows`): soluble-protein-like. Instability
  index below ``max_instability`` (40: Guruprasad's stable class), GRAVY in a window
  (below 0: hydrophilic on average, Kyte & Doolittle 1982), net charge in a window,
  aggregation hot-spot share at most ``max_aggregation``, no residue above ``max_share``
  of the sequence (low complexity), length in a window, no ``DP``, ``NG``, ``CCC``.

Each ``check_*`` returns the list of broken windows (empty: accepted). :func:`amp_like`
and :func:`soluble_like` are ``list of strings -> list of bools`` with the default
windows, usable as your own data's verifier: ``--set user_verifier=jaxkit.actflow.
peptide_verifier:amp_like`` (a FASTA file of peptides, for instance).
The windows of ``jaxkit run actflow`` are fields of its configuration
(``amp_*``, ``soluble_*``; :meth:`jaxkit.actflow.config.Config.amp_windows`), fixed
before the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import seqprops as S

__all__ = ["AMPWindows", "SolubleWindows", "check_amp", "check_soluble", "amp_like",
           "soluble_like"]


def _window(name: str, lo_hi: tuple[float, float]) -> None:
    lo, hi = lo_hi
    if not lo <= hi:
        raise ValueError(f"`{name}` must be a window (low, high) with low <= high; got "
                         f"{lo_hi}")


@dataclass(frozen=True)
class AMPWindows:
    """Antimicrobial-peptide-like acceptance windows (inclusive)."""

    length: tuple[int, int] = (8, 20)
    charge: tuple[float, float] = (1.0, 10.0)
    min_moment: float = 0.15
    gravy: tuple[float, float] = (-1.0, 1.6)
    max_instability: float = 40.0
    max_aggregation: float = 0.8
    forbidden: tuple[str, ...] = ("DP", "NG")
    pka: str = "EMBOSS"

    def __post_init__(self):
        for f in ("length", "charge", "gravy"):
            _window(f, getattr(self, f))
        if self.pka not in S.PKA_SETS:
            raise ValueError(f"`pka` must be one of {sorted(S.PKA_SETS)}; got {self.pka!r}")


@dataclass(frozen=True)
class SolubleWindows:
    """Soluble-protein-like acceptance windows (inclusive, except the instability
    index: strictly below ``max_instability``)."""

    length: tuple[int, int] = (24, 48)
    max_instability: float = 40.0
    gravy: tuple[float, float] = (-2.0, 0.0)
    charge: tuple[float, float] = (-10.0, 10.0)
    max_aggregation: float = 0.5
    max_share: float = 0.25
    forbidden: tuple[str, ...] = ("DP", "NG", "CCC")
    pka: str = "EMBOSS"

    def __post_init__(self):
        for f in ("length", "charge", "gravy"):
            _window(f, getattr(self, f))
        if self.pka not in S.PKA_SETS:
            raise ValueError(f"`pka` must be one of {sorted(S.PKA_SETS)}; got {self.pka!r}")


def _basics(seq: str, length: tuple[int, int]) -> list[str]:
    bad = sorted(set(seq) - set(S.CANONICAL))
    if bad:
        return [f"non-canonical residues {''.join(bad)}"]
    if not length[0] <= len(seq) <= length[1]:
        return [f"length {len(seq)} outside [{length[0]}, {length[1]}]"]
    return []


def _inside(what: str, v: float, lo_hi: tuple[float, float]) -> list[str]:
    lo, hi = lo_hi
    return [] if lo <= v <= hi else [f"{what} {v:+.2f} outside [{lo:g}, {hi:g}]"]


def check_amp(seq: str, w: AMPWindows = AMPWindows()) -> list[str]:
    """The windows of ``w`` that ``seq`` breaks (empty: antimicrobial-peptide-like).

    Args:
        seq: one-letter residues.
        w: the acceptance windows.

    Returns:
        One string per broken window (a non-canonical or out-of-length sequence:
        that reason alone).
    """
    out = _basics(seq, w.length)
    if out:
        return out
    out += _inside("net charge at pH 7", S.net_charge(seq, 7.0, w.pka), w.charge)
    mu = S.hydrophobic_moment(seq)
    if mu < w.min_moment:
        out.append(f"hydrophobic moment {mu:.2f} < {w.min_moment:g}")
    out += _inside("GRAVY", S.gravy(seq), w.gravy)
    ii = S.instability_index(seq)
    if ii > w.max_instability:
        out.append(f"instability index {ii:.1f} > {w.max_instability:g}")
    ag = S.aggregation_share(seq)
    if ag > w.max_aggregation:
        out.append(f"aggregation hot-spot share {ag:.2f} > {w.max_aggregation:g}")
    return out + [f"forbidden motif {m}" for m in w.forbidden if m in seq]


def check_soluble(seq: str, w: SolubleWindows = SolubleWindows()) -> list[str]:
    """The windows of ``w`` that ``seq`` breaks (empty: soluble-protein-like).

    Args:
        seq: one-letter residues.
        w: the acceptance windows.

    Returns:
        One string per broken window (a non-canonical or out-of-length sequence:
        that reason alone).
    """
    out = _basics(seq, w.length)
    if out:
        return out
    ii = S.instability_index(seq)
    if not ii < w.max_instability:
        out.append(f"instability index {ii:.1f} >= {w.max_instability:g}")
    out += _inside("GRAVY", S.gravy(seq), w.gravy)
    out += _inside("net charge at pH 7", S.net_charge(seq, 7.0, w.pka), w.charge)
    ag = S.aggregation_share(seq)
    if ag > w.max_aggregation:
        out.append(f"aggregation hot-spot share {ag:.2f} > {w.max_aggregation:g}")
    top = max(seq.count(c) for c in set(seq)) / len(seq)
    if top > w.max_share:
        out.append(f"one residue is {top:.0%} of the sequence (> {w.max_share:.0%})")
    return out + [f"forbidden motif {m}" for m in w.forbidden if m in seq]


def amp_like(seqs) -> list[bool]:
    """``[not check_amp(s) for s in seqs]`` with the default :class:`AMPWindows`."""
    return [not check_amp(str(s)) for s in seqs]


def soluble_like(seqs) -> list[bool]:
    """``[not check_soluble(s) for s in seqs]`` with the default :class:`SolubleWindows`."""
    return [not check_soluble(str(s)) for s in seqs]
