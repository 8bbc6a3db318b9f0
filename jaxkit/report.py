"""Markdown reports with PNG figures, written by ``jaxkit run``."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import jax

from .pipelines import PipelineResult

__all__ = ["markdown_table", "write_report", "new_figure", "save_figure", "t_interval"]


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"
    return str(v)


def t_interval(x) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t interval of the finite values of ``x``
    (half-width nan for one value; both nan for none)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(x, float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), math.nan
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A GitHub-flavoured Markdown table; floats to 3 significant digits."""
    lines = ["| " + " | ".join(map(str, header)) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def new_figure(ncols: int = 1, nrows: int = 1, size=(4.5, 3.5)):
    """A matplotlib figure on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows),
                             squeeze=False)
    return fig, axes


def save_figure(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(out_dir: Path, results: Sequence[PipelineResult], *, quick: bool) -> Path:
    """Assemble ``report.md`` (and ``metrics.json``) in ``out_dir``; written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    devs = jax.devices()
    parts = [
        "# jaxkit report",
        "",
        f"- generated: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- mode: {'quick' if quick else 'full'}",
        f"- jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{len(devs)} x {devs[0].device_kind}, {jax.process_count()} process(es)",
        "",
    ]
    for r in results:
        parts += [f"## {r.title}", "", r.markdown.strip(), ""]
        for w in r.warnings:
            parts.append(f"> warning: {w}")
        for fig in r.figures:
            rel = Path(fig).resolve().relative_to(out_dir.resolve())
            parts += [f"![{rel.stem}]({rel.as_posix()})", ""]
    report = out_dir / "report.md"
    tmp = report.with_suffix(".md.tmp")
    tmp.write_text("\n".join(parts) + "\n")
    tmp.replace(report)
    metrics = {r.name: r.metrics for r in results}
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, default=float) + "\n")
    return report
