"""A paper's claims as the pipelines test them, and the one table that lists them.

A :class:`Claim` is one sentence of a paper (``claim``), what this run measured
(``measured``), and the verdict: "yes" (the run supports it), "no" (the run
contradicts it), "not shown" (the run can tell neither: a difference that is not
significant is *not* a match), "not tested at this size" (e.g. a quick run too small
for the test) or "not tested" (the run has no test of it; the note says why).
:func:`jaxkit.report.write_report` opens ``report.md`` with :func:`claims_table` over every
pipeline that ran.

The claims protocol. Every row has a ``kind``:

* ``"paper"``: a result sentence of the paper's abstract, quoted or closely paraphrased.
  Every result sentence has one; only these rows enter tallies (:func:`tally`). Its null
  and margin are fixed in the configuration before the run (never derived from the
  measured data), its measure is independent of what the method optimises, its baselines
  get the same filters and budget, and a "best" baseline is chosen on validation data.
* ``"setup"``: a precondition of the experiment (a model's accuracy, a simulator's
  calibration); reported, never tallied.
* ``"extension"``: jaxkit's own question beside the paper's, or a structural property
  (one that holds by construction); reported, never tallied.

Each pipeline also runs a *negative control* in its tests: a setup in which its paper
claims must come out "no" or "not shown".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .stats import Verdict

__all__ = ["Claim", "VERDICTS", "KINDS", "claims_table", "paper_claims", "tally"]

VERDICTS = ("yes", "no", "not shown", "not tested at this size", "not tested")
KINDS = ("paper", "setup", "extension")
#: the columns of a tally: "not tested at this size" and "not tested" count together
TALLIED = ("yes", "no", "not shown", "not tested")


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and what this run says about it.

    Attributes:
        paper: short citation, e.g. "Shimizu et al. 2006".
        claim: the claim, one sentence.
        measured: the measured quantity with its interval, e.g. "0.12 [0.05, 0.19]".
        verdict: one of :data:`VERDICTS`.
        test: how the verdict was decided (test, level, margin, n).
        note: anything a reader must know to read the verdict.
        kind: one of :data:`KINDS` (module docstring): only ``"paper"`` rows are tallied.
    """

    paper: str
    claim: str
    measured: str
    verdict: str
    test: str = ""
    note: str = ""
    kind: str = "paper"

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"`verdict` must be one of {', '.join(map(repr, VERDICTS))}; "
                             f"got {self.verdict!r}")
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {', '.join(map(repr, KINDS))}; "
                             f"got {self.kind!r}")

    @classmethod
    def from_verdict(cls, paper: str, claim: str, v: Verdict, *, fmt: str = "{:.3g}",
                     note: str = "", kind: str = "paper") -> Claim:
        """A claim decided by a :class:`jaxkit.stats.Verdict`; ``measured`` is
        ``"EST [LO, HI]"`` formatted with ``fmt`` ("n/a" for nan)."""

        def f(x: float) -> str:
            return "n/a" if x is None or math.isnan(x) else fmt.format(x)

        measured = f(v.estimate)
        if not (math.isnan(v.lo) and math.isnan(v.hi)):
            measured += f" [{f(v.lo)}, {f(v.hi)}]"
        return cls(paper, claim, measured, v.verdict, v.test, note, kind)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Claim:
        """The claim a :meth:`to_dict` record describes (records made before claim kinds
        existed read as ``"paper"``; unknown keys such as ``pipeline`` are ignored)."""
        keys = ("paper", "claim", "measured", "verdict", "test", "note", "kind")
        return cls(**{k: d[k] for k in keys if k in d})


def paper_claims(claims: Sequence[Claim]) -> list[Claim]:
    """The ``"paper"`` rows of ``claims``, in order."""
    return [c for c in claims if c.kind == "paper"]


def tally(claims: Sequence[Claim]) -> dict[str, int]:
    """How many ``"paper"`` claims have each verdict: ``{"yes", "no", "not shown",
    "not tested"}`` (every key present; both "not tested" verdicts count as one)."""
    out = dict.fromkeys(TALLIED, 0)
    for c in paper_claims(claims):
        out["not tested" if c.verdict.startswith("not tested") else c.verdict] += 1
    return out


def _cell(s) -> str:
    return " ".join(str(s).split()).replace("|", "\\|")


def claims_table(claims: Sequence[Claim], pipeline_names: Sequence[str] | str) -> str:
    """The Markdown table of claims, one row each.

    Args:
        claims: the claims, in order.
        pipeline_names: the pipeline of each claim (same length as ``claims``), or one
            name for all of them.

    Returns:
        A GitHub-flavoured Markdown table with columns pipeline, paper, claim,
        measured, verdict, test, note (and kind, when any row is not a paper claim).
    """
    if isinstance(pipeline_names, str):
        pipeline_names = [pipeline_names] * len(claims)
    if len(pipeline_names) != len(claims):
        raise ValueError(f"`pipeline_names` must name the pipeline of each claim; got "
                         f"{len(pipeline_names)} names for {len(claims)} claims")
    kinds = any(c.kind != "paper" for c in claims)
    header = ("pipeline", "paper", "claim", "measured", "verdict", "test", "note")
    header += ("kind",) if kinds else ()
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, c in zip(pipeline_names, claims, strict=True):
        row = (name, c.paper, c.claim, c.measured, f"**{c.verdict}**", c.test, c.note)
        row += (c.kind,) if kinds else ()
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)
