"""ActFlow report: per-round tables, figures and the paper's claims as tested here.

Claims (per domain, measure = exact valid coverage where the valid set is known,
otherwise #Circles): ActFlow's final model covers more than the pre-trained model
(expansion), and more than the best baseline's final model. Both are paired
superiority tests (:func:`jaxkit.stats.superiority`, margin 0) over ``n_draws``
evaluation draws of the final models with the same keys: they include the sampling
noise of the measure, not the variance over training seeds (one training run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from jaxkit.claims import Claim
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import paired_difference, superiority

from . import loop, peptides
from .compare import make_domain
from .config import Config

__all__ = ["PAPER", "claims", "tables", "plot_scatter", "plot_curves", "METHOD_NOTE"]

PAPER = "De Santi et al. 2026 (ActFlow)"
METHOD_NOTE = (
    "Every method starts from the same pre-trained model and gets the same per-round "
    "budget (samples, Adam steps) and random keys. Metrics are measured on the *current "
    "model's* samples from N(0, I) each round (round 0 = pre-trained). Coverage: weighted "
    "share of the known valid manifold within the coverage radius of a valid sample "
    "(exact up to the reference grid); k-NN cov.: Naeem et al. 2020 coverage of that grid "
    "(k = 5); #Circles: greedy packing of valid samples at the coverage radius (Xie et al. "
    "2023); Vendi: RBF kernel, bandwidth = radius; novelty: valid samples farther than the "
    "novelty threshold from the pre-training data. ActFlow exploration: tempered noise, "
    "perturbed ODE-inverted latents of training and accepted samples, and a normalised "
    "gradient step in noise space toward novel outputs (see `jaxkit.actflow.loop`).")


def _pct(v, pct=True):
    if v is None:
        return ""
    return f"{100 * v:.1f}%" if pct else v


def _fmtv(measure: str):
    return (lambda v: f"{100 * v:.1f}%") if measure == "coverage" else (lambda v: f"{v:.0f}")


def best_baseline(res: dict) -> str:
    """The method other than ActFlow with the highest mean measure over the draws of
    the final models (the strictest opponent)."""
    m = res["measure"]
    return max((k for k in res["draws"] if k != "actflow"),
               key=lambda k: float(np.mean(res["draws"][k][m])))


def claims(results: dict[str, dict]) -> list[Claim]:
    """Two claims per domain, each a paired superiority test over the draws."""
    out = []
    for name, res in results.items():
        m = res["measure"]
        d = res["draws"]
        unit = "exact coverage" if m == "coverage" else "#Circles"
        fmt = "{:.3f}" if m == "coverage" else "{:.1f}"
        note = (f"{len(d['actflow'][m])} evaluation draws of the final models (same keys), "
                "one training run: training-seed variance not included")
        v = superiority(paired_difference(d["actflow"][m], d["pretrained"][m]))
        out.append(Claim.from_verdict(
            PAPER, f"{name}: ActFlow expands the generable set beyond the pre-trained "
            f"model ({unit}, ActFlow minus pre-trained)", v, fmt=fmt, note=note))
        base = best_baseline(res)
        v = superiority(paired_difference(d["actflow"][m], d[base][m]))
        out.append(Claim.from_verdict(
            PAPER, f"{name}: ActFlow covers more than the best baseline ({base}; {unit}, "
            "ActFlow minus baseline)", v, fmt=fmt, note=note))
    return out


def tables(cfg: Config, results: dict[str, dict]) -> tuple[list[str], list[str]]:
    """The report's Markdown lines (summary table, then one section per domain) and
    its warnings."""
    md: list[str] = []
    warnings: list[str] = []
    summary = []
    for name, res in results.items():
        runs, m = res["runs"], res["measure"]
        has_cov = m == "coverage"
        hdr = ["method", "round"] + (["coverage", "k-NN cov."] if has_cov else []) + [
            "validity", "uniqueness", "novelty", "#Circles", "Vendi"] + (
            [f"valid, charge > +{cfg.peptide_max_charge:g}"] if name == "peptides" else []) + [
            "kept (round)", "updated"]
        rows = []
        for meth, run in runs.items():
            for h in run["history"]:
                rows.append([meth, h["round"]]
                            + ([_pct(h["coverage"]), _pct(h["knn_coverage"])] if has_cov
                               else [])
                            + [_pct(h["validity"]), _pct(h["uniqueness"]), _pct(h["novelty"]),
                               int(h["circles"]), h["vendi"]]
                            + ([_pct(h["valid_beyond_data_charge"])] if name == "peptides"
                               else [])
                            + ["" if h["n_kept_round"] is None else int(h["n_kept_round"]),
                               "yes" if h["updated"] else "no"])
        final = {k: run["history"][-1][m] for k, run in runs.items()}
        fmtv = _fmtv(m)
        base = best_baseline(res)
        means = {k: float(np.mean(v[m])) for k, v in res["draws"].items()}
        line = (f"Final models over {len(res['draws']['actflow'][m])} evaluation draws: "
                f"ActFlow {fmtv(means['actflow'])}, best baseline {base} {fmtv(means[base])}, "
                f"pre-trained {fmtv(means['pretrained'])} (claims above).")
        if means["actflow"] <= means[base]:
            warnings.append(f"actflow/{name}: ActFlow does not beat the best baseline ({base}) "
                            f"on {m}: {fmtv(means['actflow'])} vs {fmtv(means[base])}")
        summary.append([name, m] + [fmtv(final[k]) for k in loop.METHODS])
        secs = {k: round(run["seconds"], 1) for k, run in runs.items()}
        pre = res["pretrain"]
        md += [f"### {name}", "",
               f"Pre-training: {pre['n_data']} points, final loss {pre['loss']:.3f}, "
               f"{pre['seconds']:.1f} s. Seconds per method (all rounds incl. evaluation): "
               f"{secs}. "
               + (f"Rules: {peptides.Rules()}; pre-training data: valid AMPs with net charge "
                  f"<= +{cfg.peptide_max_charge:g}; no exact coverage (the valid set is not "
                  "enumerable), so #Circles at Hamming distance > 2 is the coverage measure "
                  "and 'valid, charge > ...' the share of samples that are valid and outside "
                  "the pre-training charge range." if name == "peptides" else ""),
               "", markdown_table(hdr, rows), "", line, ""]
    head = ["Final round (one evaluation batch), per method:", "",
            markdown_table(["domain", "measure", *loop.METHODS], summary), ""]
    return head + md, warnings


def plot_scatter(cfg: Config, name: str, res: dict, out: Path) -> Path:
    """Samples per method at the first, middle and last round."""
    dom = make_domain(name, cfg)
    runs = res["runs"]
    methods = list(runs)
    n_rounds = runs[methods[0]]["samples"].shape[0]
    cols = sorted({0, n_rounds // 2, n_rounds - 1})
    fig, axes = new_figure(ncols=len(cols), nrows=len(methods), size=(2.6, 2.4))
    dv = dom.view(res["data"])
    ref = None if dom.reference is None else dom.view(dom.reference)
    for i, meth in enumerate(methods):
        for j, r in enumerate(cols):
            ax = axes[i, j]
            x, v = runs[meth]["samples"][r], runs[meth]["valid"][r]
            p = dom.view(x)
            if ref is not None:
                ax.scatter(ref[:, 0], ref[:, 1], s=0.3, c="0.85")
            ax.scatter(dv[:, 0], dv[:, 1], s=1, c="tab:orange", alpha=0.3)
            ax.scatter(p[~v, 0], p[~v, 1], s=1.5, c="0.5", alpha=0.5)
            ax.scatter(p[v, 0], p[v, 1], s=1.5, c="tab:blue")
            ax.set_title(f"{meth}, round {r}", fontsize=7)
            ax.tick_params(labelsize=6)
            if name == "peptides":
                ax.set_xlabel("net charge", fontsize=6)
                ax.set_ylabel("mean Eisenberg H", fontsize=6)
    return save_figure(fig, out / f"actflow_{name}_scatter.png")


def plot_curves(results: dict[str, dict[str, Any]], out: Path) -> Path:
    """Coverage (or #Circles) versus round, per domain and method."""
    fig, axes = new_figure(ncols=len(results), size=(3.4, 2.8))
    for ax, (name, res) in zip(axes[0], results.items(), strict=True):
        key = res["measure"]
        for meth, run in res["runs"].items():
            ax.plot([h["round"] for h in run["history"]], [h[key] for h in run["history"]],
                    marker="o", ms=3, label=meth)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("round")
        ax.set_ylabel("exact valid coverage" if key == "coverage" else "#Circles (valid)")
        ax.legend(fontsize=6)
    return save_figure(fig, out / "actflow_coverage.png")
