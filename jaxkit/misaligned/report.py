"""Misaligned-baselines report: gap tables, metric tables, random vs scaffold, figures,
and the paper's claims (no computation of results here).

Results come in typed (:mod:`jaxkit.misaligned.results`): ``{(dataset, split):
SplitSummary}`` (:meth:`AuditResult.summarise`) plus the classification task's ``{split:
ClassResult}`` (:func:`~jaxkit.misaligned.classification.evaluate_classes`) and the
generative baseline's ``{dataset: GenerativeComparison}``. A *case* is a data set x
split x model (and the solubility-class task x split, MLP); its per-seed *advantage* is
the model's lead over its best misaligned baseline, chosen on validation sets (RMSE:
baseline - model; AUROC: model - baseline); the baseline is *competitive* when the
advantage lies below the case's margin (``competitive_fraction`` x the stated
experimental error; ``auroc_margin``). The seed (a new split and training) is the
replicate. "yes" always means the run supports the paper's sentence.

*Paper* rows (the abstract's result sentences):

* "deep learning models are not learning the meaningful biological or chemical
  features they were hypothesised to capture [...] Competitive performance of such
  baselines reveals when models are not learning [them]": yes if the best misaligned
  baseline is competitive in every case, no if some model leads by more than its margin;
  one-sided paired t tests over seeds in both directions with Holm's correction over the
  cases (:func:`jaxkit.stats.holm_superiority` on the negated advantages,
  :func:`jaxkit.stats.all_of`).
* "By examining case studies across multiple branches of AIDD, we demonstrate that
  misaligned baselines have consistently exposed such failure modes": with the other
  branches of ``cfg.branches`` (drug-target interaction, virtual screening), yes if every
  branch's competitive verdict is yes, no if any is no
  (:func:`jaxkit.misaligned.branches.branches_claim`); not tested with one branch.

*Extension* rows: each case's Holm-adjusted verdict; "random splits flatter the model"
per data set and model (scaffold - random RMSE; scaffold splits are harder for every
method, so this is not specific to a model failing to learn).

The last sentence of the abstract (adopting misaligned baselines as standard practice
will help) is a recommendation, not a result, and has no row.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.plotting import interval, label_axes, legend_outside
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import all_of, holm_superiority, superiority

from .baselines import ALIGNED, CURVES, MISALIGNED, PHYSICS
from .branches import branches_claim
from .config import Config
from .models import MODELS
from .results import ClassResult, GenerativeComparison, MeanCI, SplitSummary

__all__ = ["PAPER", "LABELS", "C_NOT_LEARNING", "C_BRANCHES", "fmt", "gap_rows", "physics_rows",
           "cases", "generative_markdown", "forest_plot", "curve_plot", "claims", "markdown",
           "classes_markdown"]

PAPER = "AI for drug discovery models often do not learn as expected (ICML 2026 FM4LS)"
LABELS = {"mlp": "MLP (fingerprints)", "mpnn": "MPNN (graph)",
          "dmpnn": "D-MPNN (bond-aware, directed)", "ridge_fp": "ridge (fingerprints)",
          "train_mean": "train mean", "size_only": "size only (MolWt, heavy atoms)",
          "descriptors": "4 descriptors: size, TPSA, logP (physics-aligned)",
          "descriptors_no_logp": "size + TPSA, no logP (physics-aligned)",
          "logp_only": "Crippen logP alone (physics-aligned)",
          "label_scramble": "label scrambling",
          "shuffled_inputs": "shuffled inputs (all)", "replaced_bits": "replaced bits",
          "random_features": "random features", "nn_tanimoto": "1-NN Tanimoto",
          "carbon_inserted": "carbons inserted into test inputs (max k)",
          "noise_ceiling": "noise ceiling"}
SPLITS = ("random", "scaffold")
C_NOT_LEARNING = ("Deep learning models for drug discovery are not learning the meaningful "
                  "chemical features they were hypothesised to capture: misaligned "
                  "baselines are competitive with them")
C_BRANCHES = ("Across case studies in multiple branches of AIDD, misaligned baselines have "
              "consistently exposed such failure modes and informed the evaluation and "
              "improvement of the models")


def fmt(s: MeanCI, digits: int = 3) -> str:
    """``mean ± half-width`` of a summary entry."""
    m, h = s.mean, s.ci95
    return f"{m:.{digits}f}" if not math.isfinite(h) else f"{m:.{digits}f} ± {h:.{digits}f}"


Results = dict[tuple[str, str], SplitSummary]


def gap_rows(results: Results) -> list[list]:
    """One row per data set, split and model: best baseline, RMSEs, gap with bootstrap
    interval, t-test verdict, flag."""
    rows = []
    for (ds, split), r in results.items():
        for m in (m for m in MODELS if m in r.gaps):
            g = r.gaps[m]
            b = g.boot
            rows.append([ds, split, LABELS[m], fmt(r.rmse(m)), LABELS[g.best],
                         fmt(r.rmse(g.best)),
                         f"{b.estimate:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}]", g.test.verdict,
                         "**not significant**" if g.flag else "model better"
                         if b.lo > 0 else "baseline better"])
    return rows


def physics_rows(results: Results) -> list[list]:
    """Test RMSE of the physics-aligned references (the descriptor ridge with and without
    Crippen logP, logP alone) beside the models', per data set and split."""
    return [[ds, split, *(fmt(r.rmse(m)) if m in r.metrics else "-"
                          for m in (*PHYSICS, *MODELS))]
            for (ds, split), r in results.items()]


def forest_plot(cfg: Config, results: Results, out: Path) -> Path:
    """Per data set (columns) and split (rows): test RMSE (mean ± 95% t-interval over
    seeds) of the models, the aligned ridge, every baseline and the noise ceiling."""
    methods = [*MODELS, *ALIGNED, *MISALIGNED, "replaced_bits", "noise_ceiling"]
    fig, axes = new_figure(ncols=len(cfg.datasets), nrows=2, size=(4.6, 3.8))
    for j, ds in enumerate(cfg.datasets):
        for i, split in enumerate(SPLITS):
            ax, r = axes[i, j], results[(ds, split)]
            ms = [m for m in methods if m in r.metrics]
            means = [r.rmse(m).mean for m in ms]
            half = [r.rmse(m).ci95 for m in ms]
            half = [h if math.isfinite(h) else 0.0 for h in half]
            colours = ["tab:blue" if m in MODELS else "tab:green" if m in ALIGNED
                       else "grey" if m == "noise_ceiling" else "tab:red" for m in ms]
            yy = np.arange(len(ms))[::-1]
            kinds = ["model" if m in MODELS else "aligned reference" if m in ALIGNED
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


def curve_plot(cfg: Config, results: Results, out: Path) -> Path:
    """RMSE against perturbation strength (shuffled fraction, replaced-bit fraction,
    carbons inserted into the test inputs) per data set, both splits, with the models'
    RMSE as lines."""
    fig, axes = new_figure(ncols=len(CURVES), nrows=len(cfg.datasets), size=(3.6, 2.8))
    for i, ds in enumerate(cfg.datasets):
        for j, c in enumerate(CURVES):
            ax = axes[i, j]
            for split, ls in zip(SPLITS, ("-", "--"), strict=True):
                r = results[(ds, split)]
                v = np.asarray(r.curves[c]["rmse"])
                x = r.strengths[c]
                ax.plot(x, v.mean(0), ls=ls, marker="o", ms=3, color="tab:red",
                        label=f"ridge, {split}")
                for m, col in zip(MODELS, ("tab:blue", "tab:purple", "tab:olive"), strict=True):
                    if m not in r.metrics:
                        continue
                    ax.axhline(r.rmse(m).mean, ls=ls, color=col, lw=0.8,
                               label=f"{LABELS[m]}, {split}")
            label_axes(ax, {"shuffled_inputs": "fraction of molecules shuffled",
                            "replaced_bits": "fraction of bits replaced",
                            "carbon_inserted": "carbons inserted (test inputs)"}[c], "test RMSE",
                       title=f"{ds}: {c}")
    legend_outside(fig, where="below", ncol=3)
    return save_figure(fig, out / "misaligned_curves.png")


def cases(cfg: Config, results: Results, classes: dict[str, ClassResult] | None = None
          ) -> list[dict]:
    """Every case of the module docstring: ``{"label", "advantage" (per seed), "margin",
    "metric", "best", "selected_on"}``, regression cases first."""
    out = []
    for (ds, split), r in results.items():
        margin = cfg.competitive_fraction * float(r.experimental_error)
        for m, g in r.gaps.items():
            out.append(dict(label=f"{ds}, {split} split, {LABELS.get(m, m)}",
                            advantage=np.asarray(g.per_seed, float), margin=margin,
                            metric="RMSE", best=g.best, selected_on=g.selected_on))
    for split, c in (classes or {}).items():
        for m, g in c.gaps.items():
            out.append(dict(label=f"solubility classes, {split} split, {LABELS.get(m, m)}",
                            advantage=np.asarray(g.per_seed, float),
                            margin=cfg.auroc_margin, metric="AUROC", best=g.best,
                            selected_on=g.selected_on))
    return out


def claims(cfg: Config, results: Results, classes: dict[str, ClassResult] | None = None,
           branch_rows: list[Claim] | None = None) -> list[Claim]:
    """The claims of the module docstring, each from a test that can say no;
    ``branch_rows`` (:func:`jaxkit.misaligned.branches.claims`) decide the
    multiple-branches row and follow the other rows."""
    cs = cases(cfg, results, classes)
    out: list[Claim] = []
    verdict = None
    if cs:
        # "competitive": the advantage below the margin, i.e. -advantage above -margin
        vs = holm_superiority([-c["advantage"] for c in cs], margin=[-c["margin"] for c in cs])
        verdict = all_of(v.verdict for v in vs)
        comp = np.array([v.verdict == "yes" for v in vs])
        ahead = np.array([v.verdict == "no" for v in vs])
        margins = sorted({f"{c['metric']} {c['margin']:.3g}" for c in cs})
        test_sel = {c["selected_on"] for c in cs}
        # the protocol: a "best" baseline is chosen on validation data, never on the test
        # sets; a case chosen on its test sets cannot decide the claim
        on_test = np.array([c["selected_on"] != "validation" for c in cs])
        if on_test.any():
            verdict = "not tested"
        out.append(Claim(
            PAPER, C_NOT_LEARNING,
            f"competitive in {int(comp.sum())} of {len(cs)} cases; a model ahead by more "
            f"than the margin in {int(ahead.sum())}", verdict,
            f"per case (data set x split x model, and the solubility-class task): the "
            f"model's per-seed advantage over its best misaligned baseline (RMSE: baseline "
            f"- model; AUROC: model - baseline) against the margin (RMSE: "
            f"{cfg.competitive_fraction:g} x the stated experimental error; AUROC: "
            f"{cfg.auroc_margin:g}; here {', '.join(margins)}; fixed in the "
            f"configuration), one-sided paired t over {cfg.seeds} seeds in both "
            f"directions, Holm over the {len(cs)} cases at family-wise 2.5% one-sided; "
            f"yes if the baseline is competitive in every case, no if a model leads by "
            f"more than the margin in any",
            f"best baseline chosen on {' and '.join(sorted(test_sel))} sets among "
            f"{', '.join(MISALIGNED)} (the physics-aligned references: the descriptor ridge "
            f"with and without Crippen logP and logP alone, and the fingerprint ridge, are "
            f"a separate family, never chosen); one branch of "
            f"AIDD (molecular property prediction)"
            + (f"; not tested: {int(on_test.sum())} case(s) chose the best baseline on "
               f"their test sets, not on validation sets" if on_test.any() else "")))
        for c, ok, bad, bad_sel in zip(cs, comp, ahead, on_test, strict=True):
            v = superiority(c["advantage"], margin=c["margin"])
            best = LABELS.get(c["best"], c["best"])
            out.append(Claim(
                PAPER, f"{c['label']}: the best misaligned baseline ({best}) "
                       f"is competitive with the model ({c['metric']} advantage below "
                       f"{c['margin']:.3g})",
                f"{v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]",
                "not tested" if bad_sel else "yes" if ok else "no" if bad else "not shown",
                f"the paper row's Holm-adjusted decision for this case (one-sided paired t "
                f"both ways, {len(cs)} cases); interval: 95% t CI of the mean advantage, "
                f"n={v.n}", f"best baseline chosen on the {c['selected_on']} sets",
                kind="extension"))
    if branch_rows:
        out.append(branches_claim(PAPER, C_BRANCHES, verdict, branch_rows))
    else:
        out.append(Claim(PAPER, C_BRANCHES, "n/a", "not tested",
                         note="one branch ran (molecular property prediction); the "
                              "drug-target-interaction and virtual-screening branches are "
                              "off (`branches` in the configuration), and the literature's "
                              "use of the baselines is a historical claim"))
    for ds in dict.fromkeys(d for d, _ in results):
        if (ds, "random") not in results or (ds, "scaffold") not in results:
            continue
        for m in results[(ds, "scaffold")].gaps:
            d = (np.asarray(results[(ds, "scaffold")].rmse(m).seeds)
                 - np.asarray(results[(ds, "random")].rmse(m).seeds))
            out.append(Claim.from_verdict(
                PAPER, f"{ds}: random splits flatter the {LABELS.get(m, m)} (test RMSE "
                "scaffold - random > 0).", superiority(d), kind="extension",
                note="jaxkit's question: scaffold splits are harder for every method, so "
                     "this does not single out a model that failed to learn; different "
                     "splits per seed, pairing by seed index only orders them"))
    return out + list(branch_rows or [])


def _model_text(cfg: Config) -> dict:
    return {"mlp": f"MLP on {cfg.n_bits}-bit Morgan fingerprints (radius 2, width "
                   f"{cfg.mlp_width})",
            "mpnn": f"an atom-only MPNN ({cfg.mpnn_rounds} rounds, width {cfg.mpnn_width}) "
                    f"on the graph padded to {cfg.max_atoms} atoms",
            "dmpnn": f"chemprop's bond-aware directed MPNN (D-MPNN, Yang et al. 2019: "
                     f"{cfg.dmpnn_steps} message steps on directed bonds with bond type, "
                     f"conjugation, ring and stereo features, width {cfg.dmpnn_width}, "
                     f"{cfg.dmpnn_aggregation} over atoms)"}


def markdown(cfg: Config, results: Results, *, quick: bool, seed: int) -> str:
    """The report section: setup, gap table, random vs scaffold, per-split tables."""
    rows = gap_rows(results)
    flagged = sum(1 for r in rows if r[-1] == "**not significant**")
    beaten = sum(1 for r in rows if r[-1] == "baseline better")
    rs_rows = []
    for ds in cfg.datasets:
        for m in cfg.models:
            ra, rb = results[(ds, "random")], results[(ds, "scaffold")]
            ga, gb = ra.gaps[m].boot.estimate, rb.gaps[m].boot.estimate
            rs_rows.append([ds, LABELS[m], fmt(ra.rmse(m)), fmt(rb.rmse(m)), f"{ga:+.3f}",
                            f"{gb:+.3f}",
                            f"{gb - ga:+.3f}"])
    md = [
        f"Mode: {'quick' if quick else 'full'}; seed {seed}; data sets "
        f"{', '.join(cfg.datasets)}"
        + (f" (each subsampled to {cfg.max_molecules} molecules)" if cfg.max_molecules else "")
        + f"; {cfg.seeds} random and {cfg.seeds} scaffold splits "
        f"({cfg.test_fraction:.0%} test) per data set. Models: "
        + ", ".join(_model_text(cfg)[m] for m in cfg.models)
        + f", {cfg.steps} AdamW steps (batch {cfg.batch_size}, lr "
        f"{cfg.lr}), all seeds trained in one compiled step. Misaligned baselines (one "
        f"vmapped call over seeds and strengths): train mean, size only, label "
        f"scrambling, shuffled inputs, random features, 1-NN Tanimoto, test inputs with "
        f"carbons inserted; aligned references (a separate family, never the best "
        f"misaligned baseline): ridge on the true fingerprints (lambda "
        f"{cfg.ridge_lambda}) and the physics-aligned references, the descriptor ridge "
        f"on size, TPSA and Crippen logP, on size and TPSA without logP, and on logP "
        f"alone (logP is the physics of solubility, not a misaligned signal); the noise "
        f"ceiling (labels "
        f"+ the stated experimental error: solubility 0.6 log units, FreeSolv 0.6 "
        f"kcal/mol, ChEMBL 0.5 pIC50; "
        f"literature values).", "",
        f"Gap = RMSE of the best misaligned baseline (lowest mean RMSE among the "
        f"{len(MISALIGNED)} on validation sets: {cfg.val_fraction:.0%} of each training "
        f"set split off as the outer split was made, the family refitted on the rest; "
        f"never chosen on the test sets) minus the model's RMSE; positive means the "
        f"model is better. Interval: "
        f"two-level paired bootstrap over seeds and test molecules ({cfg.n_boot} "
        "resamples); *t test*: paired superiority over seeds; *not significant* where "
        "the bootstrap interval contains 0.", "",
        "### Gap to the best misaligned baseline", "",
        markdown_table(["data set", "split", "model", "model RMSE", "best misaligned "
                        "baseline", "baseline RMSE", "gap [95% bootstrap]", "t test",
                        "flag"], rows), "",
        f"Of {len(rows)} model x data set x split cases, {flagged} have a gap that is not "
        f"significant and {beaten} are beaten by a misaligned baseline.", "",
        "### Physics-aligned references (not misaligned baselines)", "",
        markdown_table(["data set", "split", *(LABELS[m] for m in PHYSICS),
                        *(LABELS[m] for m in MODELS)], physics_rows(results)), "",
        "### Random versus scaffold split", "",
        markdown_table(["data set", "model", "RMSE random", "RMSE scaffold", "gap random",
                        "gap scaffold", "change"], rs_rows), "",
    ]
    for (ds, split), r in results.items():
        ms = [*MODELS, *ALIGNED, *MISALIGNED, "replaced_bits", "noise_ceiling"]
        table = markdown_table(
            ["method", "RMSE", "MAE", "R2", "Spearman"],
            [[LABELS[m], *(fmt(r.metrics[m][k]) for k in ("rmse", "mae", "r2", "spearman"))]
             for m in ms if m in r.metrics])
        md += [f"### {ds}, {split} split (n = {r.n}, label s.d. {r.label_std:.3f}; "
               f"train/test duplicates per seed {r.duplicates})", "", table, ""]
    md += ["Where models do and do not beat their misaligned baselines: see the gap table; "
           "the per-split tables give every baseline (mean ± 95% t-interval over seeds). "
           "Curves (`misaligned_curves.png`) show the fingerprint ridge as inputs are "
           "shuffled, bits replaced, or carbons inserted into the test molecules."]
    return "\n".join(md)


def generative_markdown(generative: dict[str, GenerativeComparison]) -> str:
    """The generative AddCarbon section: Renz et al.'s baseline beside the held-out
    molecules of the same split, by the distribution-learning scores."""
    if not generative:
        return ""
    keys = ("validity", "uniqueness", "novelty", "kl_score", "nn_similarity",
            "nn_similarity_ge_07")
    rows = [[ds, what, s.n, *(f"{getattr(s, k):.3f}" for k in keys)]
            for ds, g in generative.items()
            for what, s in (("AddCarbon (generative baseline)", g.addcarbon),
                            ("held-out real molecules", g.held_out))]
    return "\n".join([
        "", "## Renz et al.'s AddCarbon, a generative baseline", "",
        "Renz et al. (Drug Discov. Today: Technol. 2019): draw a training molecule, insert "
        "a carbon at a random SMILES position, emit it when it parses and is not a "
        "training molecule. It learns nothing, yet distribution-learning scores rate it "
        "like real unseen molecules: below, its samples from the first random training "
        "set beside that split's held-out molecules, scored against the training set "
        "(KL score: GuacaMol-style exp(-KL) over MolWt, heavy atoms, TPSA and logP "
        "histograms; NN similarity: Tanimoto to the nearest training molecule). Reported, "
        "no claim row: no generative model runs here.", "",
        markdown_table(["data set", "molecules", "n", "validity", "uniqueness", "novelty",
                        "KL score", "NN similarity", "share NN >= 0.7"], rows), ""])


def classes_markdown(classes: dict[str, ClassResult]) -> str:
    """The classification section: AUROC / accuracy per method and split, the gaps."""
    if not classes:
        return ""
    models = [m for m in MODELS if m in classes["random"].gaps]
    methods = [*models,
               *[b for b in (*ALIGNED, *MISALIGNED) if b in classes["random"].metrics]]
    rows = [[LABELS.get(m, m), *[fmt(classes[s].metrics[m][k]) for s in SPLITS
                                  for k in ("auroc", "accuracy")]] for m in methods]
    gaps = []
    for m in models:
        for s in SPLITS:
            g = classes[s].gaps[m]
            t = g.test
            gaps.append([LABELS[m], s, LABELS[g.best], f"{np.mean(g.per_seed):+.3f}",
                         f"[{t.lo:+.3f}, {t.hi:+.3f}]", t.verdict])
    return "\n".join([
        "", "## Classification: solubility classes ((A) low vs the rest)", "",
        f"Positive rate {classes['random'].positive_rate:.2f}; the models "
        f"({', '.join(LABELS[m] for m in models)}) and the baseline "
        "family fitted to the 0/1 labels, their predictions used as scores (train mean: "
        "AUROC 0.5 by construction). Mean ± 95% t-interval over seeds.", "",
        markdown_table(["method", "AUROC (random)", "accuracy (random)",
                        "AUROC (scaffold)", "accuracy (scaffold)"], rows), "",
        "Each model's AUROC minus its best misaligned baseline's (chosen on validation "
        "sets; per seed, paired t):", "",
        markdown_table(["model", "split", "best baseline", "gap", "95% CI", "verdict"], gaps),
        ""])
