"""Misaligned-baselines report: gap tables, metric tables, random vs scaffold, figures,
and the paper's claims (no computation of results here).

Results come in as ``{(dataset, split): AuditResult.summary()}``. Claims:

* per data set, split and model: "the model beats its best misaligned baseline" --
  :func:`jaxkit.stats.superiority` on the per-seed RMSE gaps (baseline - model); "no"
  means the baseline is significantly better;
* per data set and model: "random splits flatter the model" -- superiority of the
  per-seed RMSE differences scaffold - random (seeds of the two split kinds paired by
  index; the splits are independent, so the pairing only sets the order);
* per data set (scaffold split, the better model): "a misaligned baseline is
  competitive" -- :func:`jaxkit.stats.equivalence` of the gap within
  ``competitive_margin`` x the label standard deviation.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.plotting import interval, label_axes, legend_outside
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import equivalence, superiority

from .baselines import CURVES, MISALIGNED
from .config import Config
from .models import MODELS

__all__ = ["PAPER", "LABELS", "fmt", "gap_rows", "forest_plot", "curve_plot", "claims",
           "markdown", "classes_markdown", "classes_claims"]

PAPER = "AI for drug discovery models often do not learn as expected (ICML 2026 FM4LS)"
LABELS = {"mlp": "MLP (fingerprints)", "mpnn": "MPNN (graph)", "ridge_fp": "ridge (fingerprints)",
          "train_mean": "train mean", "size_only": "size only (MolWt, heavy atoms)",
          "descriptors": "4 descriptors (size, TPSA, logP)", "label_scramble": "label scrambling",
          "shuffled_inputs": "shuffled inputs (all)", "replaced_bits": "replaced bits",
          "random_features": "random features", "nn_tanimoto": "1-NN Tanimoto",
          "add_carbon": "AddCarbon test inputs (max k)", "noise_ceiling": "noise ceiling"}
SPLITS = ("random", "scaffold")


def fmt(s: dict, digits: int = 3) -> str:
    """``mean ± half-width`` of a summary entry."""
    m, h = s["mean"], s["ci95"]
    return f"{m:.{digits}f}" if not math.isfinite(h) else f"{m:.{digits}f} ± {h:.{digits}f}"


def _rmse(r: dict, method: str) -> float:
    return r["metrics"][method]["rmse"]["mean"]


def gap_rows(results: dict) -> list[list]:
    """One row per data set, split and model: best baseline, RMSEs, gap with bootstrap
    interval, t-test verdict, flag."""
    rows = []
    for (ds, split), r in results.items():
        for m in MODELS:
            g = r["gaps"][m]
            b = g["boot"]
            rows.append([ds, split, LABELS[m], fmt(r["metrics"][m]["rmse"]),
                         LABELS[g["best"]], fmt(r["metrics"][g["best"]]["rmse"]),
                         f"{b['estimate']:+.3f} [{b['lo']:+.3f}, {b['hi']:+.3f}]",
                         g["test"]["verdict"],
                         "**not significant**" if g["flag"] else "model better"
                         if b["lo"] > 0 else "baseline better"])
    return rows


def forest_plot(cfg: Config, results: dict, out: Path) -> Path:
    """Per data set (columns) and split (rows): test RMSE (mean ± 95% t-interval over
    seeds) of the models, the aligned ridge, every baseline and the noise ceiling."""
    methods = [*MODELS, "ridge_fp", *MISALIGNED, "replaced_bits", "noise_ceiling"]
    fig, axes = new_figure(ncols=len(cfg.datasets), nrows=2, size=(4.6, 3.8))
    for j, ds in enumerate(cfg.datasets):
        for i, split in enumerate(SPLITS):
            ax, r = axes[i, j], results[(ds, split)]
            ms = [m for m in methods if m in r["metrics"]]
            means = [r["metrics"][m]["rmse"]["mean"] for m in ms]
            half = [r["metrics"][m]["rmse"]["ci95"] for m in ms]
            half = [h if math.isfinite(h) else 0.0 for h in half]
            colours = ["tab:blue" if m in MODELS else "tab:green" if m == "ridge_fp"
                       else "grey" if m == "noise_ceiling" else "tab:red" for m in ms]
            yy = np.arange(len(ms))[::-1]
            kinds = ["model" if m in MODELS else "aligned ridge" if m == "ridge_fp"
                     else "noise ceiling" if m == "noise_ceiling" else "misaligned baseline"
                     for m in ms]
            for x, yv, h, c, k in zip(means, yy, half, colours, kinds, strict=True):
                interval(ax, [yv], [x], half=[h], bounds=(0, None), horizontal=True,
                         color=c, markersize=3, label=k)  # RMSE >= 0
            ax.set_yticks(yy, [LABELS[m] for m in ms], fontsize=6)
            label_axes(ax, "test RMSE (mean, 95% t interval over seeds)", "method",
                       title=f"{ds}, {split} split")
    legend_outside(fig, where="below", ncol=4)
    return save_figure(fig, out / "misaligned_forest.png")


def curve_plot(cfg: Config, results: dict, out: Path) -> Path:
    """RMSE against perturbation strength (shuffled fraction, replaced-bit fraction,
    AddCarbon insertions) per data set, both splits, with the models' RMSE as lines."""
    fig, axes = new_figure(ncols=len(CURVES), nrows=len(cfg.datasets), size=(3.6, 2.8))
    for i, ds in enumerate(cfg.datasets):
        for j, c in enumerate(CURVES):
            ax = axes[i, j]
            for split, ls in zip(SPLITS, ("-", "--"), strict=True):
                r = results[(ds, split)]
                v = np.asarray(r["curves"][c]["rmse"])
                x = r["strengths"][c]
                ax.plot(x, v.mean(0), ls=ls, marker="o", ms=3, color="tab:red",
                        label=f"ridge, {split}")
                for m, col in zip(MODELS, ("tab:blue", "tab:purple"), strict=True):
                    ax.axhline(_rmse(r, m), ls=ls, color=col, lw=0.8,
                               label=f"{LABELS[m]}, {split}")
            label_axes(ax, {"shuffled_inputs": "fraction of molecules shuffled",
                            "replaced_bits": "fraction of bits replaced",
                            "add_carbon": "carbons inserted (test inputs)"}[c], "test RMSE",
                       title=f"{ds}: {c}")
    legend_outside(fig, where="below", ncol=3)
    return save_figure(fig, out / "misaligned_curves.png")


def claims(cfg: Config, results: dict) -> list[Claim]:
    """The claims (module docstring), each from a test that can say no."""
    out: list[Claim] = []
    for ds in cfg.datasets:
        for split in SPLITS:
            r = results[(ds, split)]
            for m in MODELS:
                g = r["gaps"][m]
                b = g["boot"]
                out.append(Claim.from_verdict(
                    PAPER, f"{ds}, {split} split: the {LABELS[m]} beats its best misaligned "
                    f"baseline ({LABELS[g['best']]}) on test RMSE (gap = baseline - model > 0).",
                    superiority(g["per_seed"]),
                    note=f"bootstrap (seeds x molecules) gap {b['estimate']:+.3f} "
                         f"[{b['lo']:+.3f}, {b['hi']:+.3f}]"
                         + ("; not significant" if g["flag"] else "")))
        for m in MODELS:
            d = (np.asarray(results[(ds, "scaffold")]["metrics"][m]["rmse"]["seeds"])
                 - np.asarray(results[(ds, "random")]["metrics"][m]["rmse"]["seeds"]))
            out.append(Claim.from_verdict(
                PAPER, f"{ds}: random splits flatter the {LABELS[m]} (test RMSE scaffold - "
                "random > 0).", superiority(d),
                note="different splits per seed; pairing by seed index only orders them"))
        r = results[(ds, "scaffold")]
        best_model = min(MODELS, key=lambda m: _rmse(r, m))
        g = r["gaps"][best_model]
        margin = cfg.competitive_margin * r["label_std"]
        out.append(Claim.from_verdict(
            PAPER, f"{ds}, scaffold split: the best misaligned baseline ({LABELS[g['best']]}) "
            f"is competitive with the better model ({LABELS[best_model]}): RMSE gap within "
            f"±{margin:.3g} ({cfg.competitive_margin:g} x label s.d.).",
            equivalence(g["per_seed"], margin=margin)))
    return out


def markdown(cfg: Config, results: dict, *, quick: bool, seed: int) -> str:
    """The report section: setup, gap table, random vs scaffold, per-split tables."""
    rows = gap_rows(results)
    flagged = sum(1 for r in rows if r[-1] == "**not significant**")
    beaten = sum(1 for r in rows if r[-1] == "baseline better")
    rs_rows = []
    for ds in cfg.datasets:
        for m in MODELS:
            ra, rb = results[(ds, "random")], results[(ds, "scaffold")]
            ga, gb = ra["gaps"][m]["boot"]["estimate"], rb["gaps"][m]["boot"]["estimate"]
            rs_rows.append([ds, LABELS[m], fmt(ra["metrics"][m]["rmse"]),
                            fmt(rb["metrics"][m]["rmse"]), f"{ga:+.3f}", f"{gb:+.3f}",
                            f"{gb - ga:+.3f}"])
    md = [
        f"Mode: {'quick' if quick else 'full'}; seed {seed}; data sets "
        f"{', '.join(cfg.datasets)}"
        + (f" (each subsampled to {cfg.max_molecules} molecules)" if cfg.max_molecules else "")
        + f"; {cfg.seeds} random and {cfg.seeds} scaffold splits "
        f"({cfg.test_fraction:.0%} test) per data set. Models: MLP on {cfg.n_bits}-bit "
        f"Morgan fingerprints (radius 2, width {cfg.mlp_width}) and an MPNN "
        f"({cfg.mpnn_rounds} rounds, width {cfg.mpnn_width}) on the graph padded to "
        f"{cfg.max_atoms} atoms, {cfg.steps} AdamW steps (batch {cfg.batch_size}, lr "
        f"{cfg.lr}), all seeds trained in one compiled step. Misaligned baselines (one "
        f"vmapped call over seeds and strengths): train mean, size only, 4 descriptors, "
        f"label scrambling, shuffled inputs, random features, 1-NN Tanimoto, AddCarbon "
        f"test inputs; references: ridge on the true fingerprints (lambda "
        f"{cfg.ridge_lambda}) and the noise ceiling (labels + the stated experimental "
        f"error: solubility 0.6 log units, FreeSolv 0.6 kcal/mol, ChEMBL 0.5 pIC50; "
        f"literature values).", "",
        "Gap = RMSE of the best misaligned baseline (lowest mean test RMSE among the "
        "eight) minus the model's RMSE; positive means the model is better. Interval: "
        f"two-level paired bootstrap over seeds and test molecules ({cfg.n_boot} "
        "resamples); *t test*: paired superiority over seeds; *not significant* where "
        "the bootstrap interval contains 0.", "",
        "### Gap to the best misaligned baseline", "",
        markdown_table(["data set", "split", "model", "model RMSE", "best misaligned "
                        "baseline", "baseline RMSE", "gap [95% bootstrap]", "t test",
                        "flag"], rows), "",
        f"Of {len(rows)} model x data set x split cases, {flagged} have a gap that is not "
        f"significant and {beaten} are beaten by a misaligned baseline.", "",
        "### Random versus scaffold split", "",
        markdown_table(["data set", "model", "RMSE random", "RMSE scaffold", "gap random",
                        "gap scaffold", "change"], rs_rows), "",
    ]
    for (ds, split), r in results.items():
        ms = [*MODELS, "ridge_fp", *MISALIGNED, "replaced_bits", "noise_ceiling"]
        table = markdown_table(
            ["method", "RMSE", "MAE", "R2", "Spearman"],
            [[LABELS[m], *(fmt(r["metrics"][m][k]) for k in ("rmse", "mae", "r2",
                                                             "spearman"))]
             for m in ms if m in r["metrics"]])
        md += [f"### {ds}, {split} split (n = {r['n']}, label s.d. {r['label_std']:.3f}; "
               f"train/test duplicates per seed {r['duplicates']})", "", table, ""]
    md += ["Where models do and do not beat their misaligned baselines: see the gap table; "
           "the per-split tables give every baseline (mean ± 95% t-interval over seeds). "
           "Curves (`misaligned_curves.png`) show the fingerprint ridge as inputs are "
           "shuffled, bits replaced, or carbons inserted into the test molecules."]
    return "\n".join(md)


def classes_markdown(classes: dict) -> str:
    """The classification section: AUROC / accuracy per method and split, the gaps."""
    if not classes:
        return ""
    methods = ["mlp", "ridge_fp", *[b for b in MISALIGNED if b in classes["random"]["metrics"]]]
    rows = [[LABELS.get(m, m), *[fmt(classes[s]["metrics"][m][k]) for s in SPLITS
                                  for k in ("auroc", "accuracy")]] for m in methods]
    gaps = []
    for s in SPLITS:
        g = classes[s]["gaps"]["mlp"]
        t = g["test"]
        gaps.append([s, LABELS[g["best"]], f"{np.mean(g['per_seed']):+.3f}",
                     f"[{t['lo']:+.3f}, {t['hi']:+.3f}]", t["verdict"]])
    return "\n".join([
        "", "## Classification: solubility classes ((A) low vs the rest)", "",
        f"Positive rate {classes['random']['positive_rate']:.2f}; the MLP and the baseline "
        "family fitted to the 0/1 labels, their predictions used as scores (train mean: "
        "AUROC 0.5 by construction). Mean ± 95% t-interval over seeds.", "",
        markdown_table(["method", "AUROC (random)", "accuracy (random)",
                        "AUROC (scaffold)", "accuracy (scaffold)"], rows), "",
        "MLP AUROC minus its best misaligned baseline's (per seed, paired t):", "",
        markdown_table(["split", "best baseline", "gap", "95% CI", "verdict"], gaps), ""])


def classes_claims(classes: dict) -> list[Claim]:
    """Per split: the MLP beats its best misaligned baseline on test AUROC."""
    out = []
    for s in SPLITS if classes else ():
        g = classes[s]["gaps"]["mlp"]
        out.append(Claim.from_verdict(
            PAPER, f"solubility classes, {s} split: the {LABELS['mlp']} beats its best "
            f"misaligned baseline ({LABELS[g['best']]}) on test AUROC.",
            superiority(np.asarray(g["per_seed"]))))
    return out
