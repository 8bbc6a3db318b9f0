"""Markdown reports with PNG figures, written by ``jaxkit run``.

``report.md`` opens with one table of every claim the pipelines that ran tested
(:func:`jaxkit.claims.claims_table`), then one section per pipeline; ``metrics.json``
holds each pipeline's metrics and, under ``"claims"``, the claims. Both are written
atomically.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .claims import Claim, claims_table
from .io import atomic_open, atomic_write
from .stats import t_interval

__all__ = ["PipelineResult", "markdown_table", "write_report", "new_figure", "save_figure",
           "t_interval", "FigureWarning"]


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


def write_report(out_dir: Path, results: Sequence[PipelineResult], *, quick: bool,
                 seed: int | None = None) -> Path:
    """Assemble ``report.md`` and ``metrics.json`` in ``out_dir``, both atomically.

    Args:
        out_dir: the run's folder; figures must lie inside it.
        results: the results of the pipelines that ran, in order.
        quick: the run used the quick configurations.
        seed: the base seed, stated in the header when given.

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
        "## Claims",
        "",
    ]
    claims = [(r.name, c) for r in results for c in r.claims]
    if claims:
        parts += [claims_table([c for _, c in claims], [n for n, _ in claims]), "",
                  "Verdicts: *yes* the run supports the claim, *no* it contradicts it, "
                  "*not shown* it can tell neither (a difference that is not significant "
                  "is not a match), *not tested at this size* the run was too small.", ""]
    else:
        parts += ["No pipeline that ran tested a claim.", ""]
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
