"""Markdown reports with PNG figures, written by ``jaxkit run``.

``report.md`` opens with the pipelines that failed (each with the last line of its
error), then one summary line per pipeline (its claims counted by verdict), then one table
of every claim the pipelines that ran tested (:func:`jaxkit.claims.claims_table`), then one
section per pipeline; ``metrics.json`` holds each pipeline's metrics and, under
``"claims"``, the claims. Both are written atomically.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .claims import TALLIED, Claim, claims_table, paper_claims, tally
from .io import atomic_open, atomic_write
from .stats import t_interval

__all__ = ["PipelineResult", "markdown_table", "write_report", "new_figure", "save_figure",
           "t_interval", "FigureWarning", "last_line", "verdict_counts"]


@dataclass
class PipelineResult:
    """What a pipeline returns: its report section, figures, metrics and claims."""

    name: str
    title: str
    markdown: str  # the report section (without the title heading)
    figures: list[Path] = field(default_factory=list)  # PNGs inside out_dir
    metrics: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable numbers
    warnings: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"
    return str(v)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A GitHub-flavoured Markdown table; floats to 3 significant digits."""
    lines = ["| " + " | ".join(map(str, header)) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def new_figure(ncols: int = 1, nrows: int = 1, size=(4.5, 3.5)):
    """A matplotlib figure on the non-interactive Agg backend, in jaxkit's shared style
    (:mod:`jaxkit.plotting`: draw intervals, bars, reference lines and legends with its
    helpers). Returns ``(fig, axes)`` with ``axes`` a 2-D array ``[row, col]``."""
    from .plotting import apply_style

    apply_style()
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows),
                             squeeze=False)
    return fig, axes


class FigureWarning(UserWarning):
    """A saved figure lacks an axis label, names no reference line, or hides data under
    its legend (:func:`jaxkit.plotting.figure_problems`)."""


def save_figure(fig, path: Path, *, check: bool = True) -> Path:
    """Write ``fig`` as a PNG at ``path`` (atomically) and close it; returns ``path``.

    The saved area is the drawn content's bounding box, so a legend placed outside the
    axes (:func:`jaxkit.plotting.legend_outside`) is kept whole. With ``check``, what
    :func:`jaxkit.plotting.figure_problems` finds is reported as one
    :class:`FigureWarning` naming the file."""
    import warnings

    import matplotlib.pyplot as plt

    fig.tight_layout()
    if check:
        from .plotting import figure_problems

        problems = figure_problems(fig)
        if problems:
            warnings.warn(f"figure {Path(path).name}: {'; '.join(problems)}", FigureWarning,
                          stacklevel=2)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, dpi=120, format="png", bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return Path(path)


#: the multiple-comparison policy stated under every claims table
MULTIPLICITY = (
    "Multiple comparisons: each row is its own test at the level its *test* column gives; "
    "a claim decided over several domains or data sets carries a family-wise (Holm) "
    "correction and says so; rows are not corrected against each other, so across the "
    "table some verdicts at the 5% level are expected to be wrong by chance.")


def last_line(error: str) -> str:
    """The last non-empty line of an error message (``""`` for none)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


#: the summary's columns: a paper claim's verdict, short ("not tested at this size": not
#: tested)
_COUNTED = TALLIED


def verdict_counts(claims: Sequence[Claim]) -> dict[str, int]:
    """How many of the *paper* ``claims`` have each verdict: ``{"yes": .., "no": ..,
    "not shown": .., "not tested": ..}`` (every key present; setup and extension rows are
    not counted, :func:`jaxkit.claims.tally`)."""
    return tally(claims)


def _summary(results: Sequence[PipelineResult], failed: Mapping[str, str],
             order: Sequence[str] | None) -> str:
    """One row per pipeline: ran or failed, its wall time, its paper claims by verdict,
    and how many setup / extension rows it reported beside them."""
    rows = {r.name: [r.name, "ran", _seconds(r.metrics.get("wall_s")),
                     len(paper_claims(r.claims)), *verdict_counts(r.claims).values(),
                     len(r.claims) - len(paper_claims(r.claims))] for r in results}
    rows.update({n: [n, "**failed**", "", "", "", "", "", "", ""] for n in failed})
    names = [n for n in (order or []) if n in rows]
    names += [n for n in rows if n not in names]
    return markdown_table(("pipeline", "status", "wall s", "paper claims", *_COUNTED,
                           "setup / extension rows"), [rows[n] for n in names])


def _seconds(v) -> str:
    try:
        return f"{float(v):.1f}"
    except (TypeError, ValueError):
        return ""


def write_report(out_dir: Path, results: Sequence[PipelineResult], *, quick: bool,
                 seed: int | None = None, failed: Mapping[str, str] | None = None,
                 logs: Mapping[str, Path] | None = None,
                 order: Sequence[str] | None = None) -> Path:
    """Assemble ``report.md`` and ``metrics.json`` in ``out_dir``, both atomically.

    ``report.md`` opens with the failed pipelines (the last line of each error, and its
    log when given), then a summary table (one row per pipeline: ran or failed, wall time,
    its claims counted by verdict), then the claims table, then each pipeline's section.

    Args:
        out_dir: the run's folder; figures must lie inside it.
        results: the results of the pipelines that ran, in order.
        quick: the run used the quick configurations.
        seed: the base seed, stated in the header when given.
        failed: the pipelines that failed, each with its error message.
        logs: where a failed pipeline's output is (a file, linked relative to
            ``out_dir`` when inside it).
        order: the order of the summary's rows (default: ``results``, then ``failed``).

    Returns:
        The path of ``report.md``.
    """
    import jax

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    devs = jax.devices()
    parts = [
        "# jaxkit report",
        "",
        f"- generated: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- mode: {'quick' if quick else 'full'}"
        + ("" if seed is None else f"; seed {seed}"),
        f"- jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{len(devs)} x {devs[0].device_kind}, {jax.process_count()} process(es)",
        "",
    ]
    failed = dict(failed or {})
    if failed:
        parts += ["## Failed pipelines", "",
                  f"{len(failed)} of {len(failed) + len(results)} pipelines failed; their "
                  "claims are not in this report.", ""]
        for n, err in failed.items():
            msg = (last_line(err) or "no error message").replace("`", "'")
            line = f"- **{n}**: `{msg}`"
            if logs and n in logs and str(logs[n]) not in err:
                log = Path(logs[n])
                try:
                    rel = log.resolve().relative_to(out_dir.resolve()).as_posix()
                    line += f" (output: [{rel}]({rel}))"
                except ValueError:
                    line += f" (output: {log})"
            parts.append(line)
        parts.append("")
    parts += ["## Summary", "", _summary(results, failed, order), "",
              "## Claims", ""]
    claims = [(r.name, c) for r in results for c in r.claims]
    paper = [(n, c) for n, c in claims if c.kind == "paper"]
    other = [(n, c) for n, c in claims if c.kind != "paper"]
    if paper:
        parts += [claims_table([c for _, c in paper], [n for n, _ in paper]), "",
                  "Verdicts: *yes* the run supports the claim, *no* it contradicts it, "
                  "*not shown* it can tell neither (a difference that is not significant "
                  "is not a match), *not tested at this size* the run was too small, "
                  "*not tested* the run has no test of it (the note says why).", "",
                  MULTIPLICITY, ""]
    else:
        parts += ["No pipeline that ran tested a paper claim.", ""]
    if other:
        parts += ["### Setup checks and extensions (not tallied)", "",
                  claims_table([c for _, c in other], [n for n, _ in other]), ""]
    for r in results:
        parts += [f"## {r.title}", "", r.markdown.strip(), ""]
        for w in r.warnings:
            parts.append(f"> warning: {w}")
        for fig in r.figures:
            rel = Path(fig).resolve().relative_to(out_dir.resolve())
            parts += [f"![{rel.stem}]({rel.as_posix()})", ""]
    report = atomic_write(out_dir / "report.md", "\n".join(parts) + "\n")
    metrics: dict[str, Any] = {r.name: r.metrics for r in results}
    metrics["claims"] = [dict(pipeline=n, **c.to_dict()) for n, c in claims]
    atomic_write(out_dir / "metrics.json", json.dumps(metrics, indent=2, default=_json) + "\n")
    return report


def _json(v):
    """numpy / jax scalars and arrays in metrics.json."""
    try:
        import numpy as np

        a = np.asarray(v)
        return a.item() if a.ndim == 0 else a.tolist()
    except Exception:
        return float(v)
