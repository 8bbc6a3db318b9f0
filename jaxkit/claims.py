"""A paper's claims as the pipelines test them, and the one table that lists them.

A :class:`Claim` is one sentence of a paper (``claim``), what this run measured
(``measured``), and the verdict: "yes" (the run supports it), "no" (the run
contradicts it), "not shown" (the run can tell neither: a difference that is not
significant is *not* a match), or "not tested at this size" (e.g. a quick run too small
for the test). :func:`jaxkit.report.write_report` opens ``report.md`` with
:func:`claims_table` over every pipeline that ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .stats import Verdict

__all__ = ["Claim", "VERDICTS", "claims_table"]

VERDICTS = ("yes", "no", "not shown", "not tested at this size")


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
    """

    paper: str
    claim: str
    measured: str
    verdict: str
    test: str = ""
    note: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"`verdict` must be one of {', '.join(map(repr, VERDICTS))}; "
                             f"got {self.verdict!r}")

    @classmethod
    def from_verdict(cls, paper: str, claim: str, v: Verdict, *, fmt: str = "{:.3g}",
                     note: str = "") -> Claim:
        """A claim decided by a :class:`jaxkit.stats.Verdict`; ``measured`` is
        ``"EST [LO, HI]"`` formatted with ``fmt`` ("n/a" for nan)."""

        def f(x: float) -> str:
            return "n/a" if x is None or math.isnan(x) else fmt.format(x)

        measured = f(v.estimate)
        if not (math.isnan(v.lo) and math.isnan(v.hi)):
            measured += f" [{f(v.lo)}, {f(v.hi)}]"
        return cls(paper, claim, measured, v.verdict, v.test, note)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


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
        measured, verdict, test, note.
    """
    if isinstance(pipeline_names, str):
        pipeline_names = [pipeline_names] * len(claims)
    if len(pipeline_names) != len(claims):
        raise ValueError(f"`pipeline_names` must name the pipeline of each claim; got "
                         f"{len(pipeline_names)} names for {len(claims)} claims")
    header = ("pipeline", "paper", "claim", "measured", "verdict", "test", "note")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, c in zip(pipeline_names, claims, strict=True):
        row = (name, c.paper, c.claim, c.measured, f"**{c.verdict}**", c.test, c.note)
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)
