"""The reference setting's section of the TempBench report
(:mod:`jaxkit.tempbench.reference`): its table, and the comparisons the paper's
synthetic row (setting 1) adds from it.

Input: a :class:`~jaxkit.tempbench.results.ReferencePanel` (``cells[(T, k)].methods
[method][metric]``, a :class:`~jaxkit.tempbench.results.Summary`). The TC is compared
with every other method on token AUC (reachable by all) and with the acausal crosscoder
on temporal AUC (the only other method with window atoms); the temporal AUC of
per-token atoms against persisting features is structural (at most ``1/sqrt(T)``) and is
listed, never tallied.
"""

from __future__ import annotations

import numpy as np

from jaxkit.report import markdown_table

from .baselines import LABELS
from .config import Config
from .reference import WINDOW_SPANNING
from .results import ReferencePanel, Summary

__all__ = ["ref_comparisons", "ref_markdown"]

_METRICS = (("token_auc", "token AUC"), ("temporal_auc", "temporal AUC"), ("fvu", "FVU"),
            ("l0", "L0 / window"))


def _d(cell: dict[str, dict[str, Summary]], other: str, metric: str) -> np.ndarray:
    return (np.asarray(cell["tc"][metric].seeds, np.float64)
            - np.asarray(cell[other][metric].seeds, np.float64))


def ref_comparisons(ref: ReferencePanel | None) -> list[tuple[str, np.ndarray]]:
    """``(label, per-seed TC - other)`` for the paper's setting-1 row: token AUC against
    every other method in every (T, k) cell, temporal AUC against the acausal crosscoder."""
    out: list[tuple[str, np.ndarray]] = []
    cells = {} if ref is None else ref.cells
    for (T, k), w in cells.items():
        cell_name, cell = ReferencePanel.label(T, k), w.methods
        for m in cell:
            if m != "tc":
                out.append((f"reference {cell_name}: token AUC vs {m}", _d(cell, m, "token_auc")))
        if "acausal" in cell:
            out.append((f"reference {cell_name}: temporal AUC vs acausal",
                        _d(cell, "acausal", "temporal_auc")))
    return out


def _fmt(s: Summary) -> str:
    return f"{s.mean:.3f} ± {s.ci95:.3f}" if np.isfinite(s.mean) else "n/a"


def ref_markdown(cfg: Config, ref: ReferencePanel) -> str:
    """The section: one table per (T, k) cell and the window-spanning tally."""
    md = [f"### Reference setting: orthogonal Markov features, every baseline (d={cfg.ref.d}, "
          f"{cfg.ref.features} orthogonal features, pi={cfg.pi}, rho={cfg.ref.rho}, "
          f"{cfg.ref.latents} latents, {cfg.steps} steps, {cfg.seeds} seeds)", "",
          "The paper's reference: d 100, 50 orthogonal features, k 2/5/10, 30k steps; this "
          "CPU setting keeps the orthogonality and the sweep over k and T at a smaller size. "
          "Window-spanning baselines (read more than one token): "
          f"{', '.join(LABELS.get(m, m) for m in WINDOW_SPANNING)}. Temporal AUC of per-token "
          "atoms is structural (at most 1/sqrt(T)) and compared only with the acausal "
          "crosscoder.", ""]
    lines = []
    for (T, k), w in ref.cells.items():
        cell_name, cell = ReferencePanel.label(T, k), w.methods
        md += [f"#### {cell_name}", "", markdown_table(
            ["method", *(n for _, n in _METRICS)],
            [[LABELS.get(m, m), *(_fmt(cell[m][k]) for k, _ in _METRICS)] for m in cell]), ""]
        ahead = [m for m in cell if m != "tc" and cell["tc"]["token_auc"].mean
                 > cell[m]["token_auc"].mean]
        span = [m for m in WINDOW_SPANNING if m in cell]
        lines.append(f"- {cell_name}: the TC's mean token AUC is above {len(ahead)} of "
                     f"{len(cell) - 1} other methods ({', '.join(ahead) or 'none'}); of the "
                     f"window-spanning baselines {', '.join(span) or 'none'}, above "
                     f"{sum(m in ahead for m in span)}.")
    md += ["Means only (the tested comparisons are in the setting-1 claim row):", "", *lines]
    return "\n".join(md)
