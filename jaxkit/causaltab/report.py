"""CausalTab report: per-benchmark, per-method tables, the figures (AUROC / SHD versus d
and versus the interventional fraction), the inference-time table and the claims.

Claims (CausalTab, arXiv 2605.31156) and how each is tested (paired over datasets, t
intervals from :mod:`jaxkit.stats`; the baseline is the **best** classical method of the
group by mean AUROC, chosen on the same data, which favours the baseline):

1. in-distribution synthetic: CausalTab's AUROC minus the best baseline's > 0;
2. out-of-distribution synthetic (held-out graphs, mechanisms, noise): the same;
3. interventional evidence helps: CausalTab's AUROC with the largest interventional
   fraction minus observational, on the same graphs and mechanisms, > 0;
4. semantic environments (expert networks): CausalTab minus the best baseline > 0;
5. the prior ablation (the paper's point that pretraining-task construction is the
   bottleneck): the same architecture trained for the same steps from the same seed on
   the broad prior and on the narrow one (:func:`jaxkit.causaltab.train.narrow_prior`),
   AUROC of broad minus narrow on the same out-of-distribution datasets > 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxkit import stats
from jaxkit.claims import Claim
from jaxkit.plotting import interval, label_axes, legend_outside, reference_line
from jaxkit.report import markdown_table, new_figure, save_figure

__all__ = ["claims", "markdown", "figures", "best_baseline", "method_table",
           "ablation_claim"]

PAPER = "CausalTab (arXiv 2605.31156)"
METRICS = ("auroc", "auprc", "shd", "f1", "sid")
NOT_BASELINES = ("causaltab", "random")


def _mean(v) -> float:
    a = np.asarray(v, np.float64)
    return float(np.nanmean(a)) if np.isfinite(a).any() else float("nan")


def best_baseline(rows: list[dict]) -> str | None:
    """The classical method with the highest mean AUROC over ``rows``."""
    scores: dict[str, list[float]] = {}
    for r in rows:
        for m, rec in r["methods"].items():
            if m not in NOT_BASELINES:
                scores.setdefault(m, []).extend(rec["auroc"])
    means = {m: _mean(v) for m, v in scores.items() if np.isfinite(_mean(v))}
    return max(means, key=means.get) if means else None


def _paired(rows: list[dict], a: str, b: str) -> np.ndarray:
    out = []
    for r in rows:
        if a in r["methods"] and b in r["methods"]:
            out.extend(np.asarray(r["methods"][a]["auroc"]) - np.asarray(r["methods"][b]["auroc"]))
    return np.asarray(out, np.float64)


def _versus_best(rows, claim: str, what: str, min_n: int) -> Claim:
    rows = [r for r in rows if "methods" in r]
    best = best_baseline(rows)
    if best is None:
        return Claim(PAPER, claim, "n/a", "not tested at this size",
                     note=f"no baseline ran ({what})")
    diffs = _paired(rows, "causaltab", best)
    v = stats.superiority(diffs)
    note = f"best baseline: {best}; {what}"
    if np.isfinite(diffs).sum() < min_n:
        return Claim(PAPER, claim, f"{np.nanmean(diffs):.3g} (n={np.isfinite(diffs).sum()})",
                     "not tested at this size", v.test, note)
    return Claim.from_verdict(PAPER, claim, v, note=note)


ABLATION_CLAIM = ("A broad pretraining prior beats a narrow one out of distribution (same "
                  "architecture, training steps and seed)")


def ablation_claim(rows: list[dict] | None, *, min_n: int = 5) -> Claim:
    """Claim 5: paired AUROC differences broad minus narrow over the out-of-distribution
    datasets of every fraction of the ablation (``rows`` from
    :func:`jaxkit.causaltab.experiments.prior_ablation`; None: not run)."""
    ood = [r for r in rows or () if r["which"] == "ood"]
    if not ood:
        return Claim(PAPER, ABLATION_CLAIM, "n/a", "not tested at this size",
                     note="the ablation did not run (ablation_steps = 0)")
    diffs = _paired(ood, "broad", "narrow")
    v = stats.superiority(diffs)
    idd = _paired([r for r in rows if r["which"] == "id"], "broad", "narrow")
    fracs = ", ".join(f"{r['int_frac']:g}" for r in ood)
    note = (f"AUROC broad minus narrow, out-of-distribution cells (d={ood[0]['d']}, "
            f"interventional fractions {fracs}, paired on the same datasets)")
    if np.isfinite(idd).any():
        note += f"; in distribution: mean {np.nanmean(idd):.3g} (n={np.isfinite(idd).sum()})"
    if np.isfinite(diffs).sum() < min_n:
        return Claim(PAPER, ABLATION_CLAIM, f"{np.nanmean(diffs):.3g} "
                     f"(n={np.isfinite(diffs).sum()})", "not tested at this size", v.test, note)
    return Claim.from_verdict(PAPER, ABLATION_CLAIM, v, note=note)


def claims(synth: list[dict], sem_rows: list[dict], ablation: list[dict] | None = None, *,
           min_n: int = 5) -> list[Claim]:
    """The five claims of the module docstring (the fifth "not tested at this size"
    without ``ablation`` rows)."""
    idr = [r for r in synth if r["which"] == "id"]
    ood = [r for r in synth if r["which"] == "ood"]
    out = [
        _versus_best(idr, "On synthetic benchmarks CausalTab recovers structure better "
                     "than classical baselines (in-distribution)",
                     "AUROC difference, all in-distribution cells", min_n),
        _versus_best(ood, "CausalTab stays better than classical baselines out of "
                     "distribution (held-out graph families, mechanisms, noise)",
                     "AUROC difference, all out-of-distribution cells", min_n),
    ]
    diffs = []
    fr = sorted({r["int_frac"] for r in synth})
    if len(fr) >= 2:
        lo, hi = fr[0], fr[-1]
        for which in ("id", "ood"):
            for d in sorted({r["d"] for r in synth}):
                a = [r for r in synth if (r["which"], r["d"], r["int_frac"]) == (which, d, hi)]
                b = [r for r in synth if (r["which"], r["d"], r["int_frac"]) == (which, d, lo)]
                if a and b:
                    diffs.extend(np.asarray(a[0]["methods"]["causaltab"]["auroc"])
                                 - np.asarray(b[0]["methods"]["causaltab"]["auroc"]))
        v = stats.superiority(np.asarray(diffs))
        out.append(Claim.from_verdict(
            PAPER, "CausalTab recovers structure better with interventional evidence",
            v, note=f"AUROC at interventional fraction {hi:g} minus {lo:g}, same graphs, "
                    "mechanisms and noise (paired)"))
    else:
        out.append(Claim(PAPER, "CausalTab recovers structure better with interventional "
                         "evidence", "n/a", "not tested at this size",
                         note="needs two interventional fractions"))
    out.append(_versus_best(sem_rows, "On semantic (expert-network) environments CausalTab "
                            "beats classical baselines", "AUROC difference, all networks "
                            "and fractions", min_n))
    out.append(ablation_claim(ablation, min_n=min_n))
    return out


def method_table(rows: list[dict]) -> str:
    """Mean of each metric per method over ``rows`` (and seconds per dataset)."""
    methods = []
    for r in rows:
        for m in r.get("methods", {}):
            if m not in methods:
                methods.append(m)
    body = []
    for m in methods:
        vals = {k: [] for k in (*METRICS, "seconds")}
        for r in rows:
            rec = r.get("methods", {}).get(m)
            if rec:
                for k in vals:
                    vals[k].extend(rec[k])
        body.append([m, *[_mean(vals[k]) for k in METRICS], _mean(vals["seconds"])])
    return markdown_table(["method", "AUROC", "AUPRC", "SHD", "F1", "SID (fraction)",
                           "s / dataset"], body)


def _cell_name(r: dict) -> str:
    return f"{r['which']} d={r['d']} int={r['int_frac']:g}"


BOUNDS = {"auroc": (0, 1), "shd": (0, None)}  # where the metrics' intervals are clipped


def _ci(v) -> tuple[float, float]:
    """Mean and 95% t half-width over the datasets of one cell (half nan for one)."""
    from jaxkit.stats import t_interval

    a = np.asarray(v, np.float64)
    return t_interval(a) if np.isfinite(a).any() else (float("nan"), float("nan"))


def figures(synth: list[dict], out_dir: Path) -> list[Path]:
    """AUROC and SHD versus d (observational and the largest fraction), and versus the
    interventional fraction (at the smallest d); means with 95% t intervals over the
    datasets of each cell, clipped to the metric's range."""
    paths = []
    ds = sorted({r["d"] for r in synth})
    fr = sorted({r["int_frac"] for r in synth})

    def cell(which, d, f, m, metric):
        return _ci(next(r for r in synth if (r["which"], r["d"], r["int_frac"])
                        == (which, d, f))["methods"][m][metric])

    for metric in ("auroc", "shd"):
        fig, ax = new_figure(2, 1)
        for k, which in enumerate(("id", "ood")):
            for m in synth[0]["methods"]:
                for f, ls in ((fr[0], "-"), (fr[-1], "--")):
                    mh = np.array([cell(which, d, f, m, metric) for d in ds])
                    interval(ax[0, k], ds, mh[:, 0], half=mh[:, 1], bounds=BOUNDS[metric],
                             label=f"{m}, interventional fraction {f:g}", linestyle=ls)
            if metric == "auroc":
                reference_line(ax[0, k], 0.5, "chance (AUROC 0.5)")
            label_axes(ax[0, k], "number of variables d", metric.upper(),
                       title=f"{which}: {metric.upper()} vs d", bounds=BOUNDS[metric])
        legend_outside(fig, where="below", ncol=3)
        paths.append(save_figure(fig, out_dir / f"causaltab_{metric}_vs_d.png"))
    fig, ax = new_figure(2, 1)
    d0 = ds[0]
    for k, which in enumerate(("id", "ood")):
        for m in synth[0]["methods"]:
            mh = np.array([cell(which, d0, f, m, "auroc") for f in fr])
            interval(ax[0, k], fr, mh[:, 0], half=mh[:, 1], bounds=BOUNDS["auroc"], label=m)
        reference_line(ax[0, k], 0.5, "chance (AUROC 0.5)")
        label_axes(ax[0, k], "interventional fraction", "AUROC",
                   title=f"{which}, d={d0}: AUROC vs interventional fraction",
                   bounds=BOUNDS["auroc"])
    legend_outside(fig, where="below", ncol=4)
    paths.append(save_figure(fig, out_dir / "causaltab_auroc_vs_int_frac.png"))
    return paths


def markdown(cfg, *, synth, sem_rows, sachs, tested: list[Claim], training: dict,
             quick: bool, ablation: list[dict] | None = None,
             ablation_training: dict | None = None) -> str:
    """The report section."""
    parts = [f"Paper: {PAPER}. Quick run: {quick}. Edge probabilities are scored as "
             "``[i, j]`` = P(j -> i); CausalTab's binary graph is the greedy DAG projection "
             "of its round(sum p) most probable edges. Timings are per dataset after "
             "compilation (each method's first dataset warms it up), on this machine "
             "under whatever load it had.", "",
             "## Claims", "", markdown_table(
                 ["claim", "measured", "verdict", "test", "note"],
                 [[c.claim, c.measured, f"**{c.verdict}**", c.test, c.note] for c in tested]),
             "", "## Model and training", "", "```", str(training), "```", ""]
    parts += ["## Synthetic benchmarks", ""]
    for which in ("id", "ood"):
        rows = [r for r in synth if r["which"] == which]
        parts += [f"### {'in-distribution' if which == 'id' else 'out-of-distribution'} "
                  "(all cells)", "", method_table(rows), ""]
        for r in rows:
            chunk = "; CausalTab over variable subsets of max_vars" if r.get("chunked") else ""
            parts += [f"#### {_cell_name(r)} (var-sortability {r['var_sortability']:.2f}, "
                      f"R2-sortability {r['r2_sortability']:.2f}{chunk})", "",
                      method_table([r]), ""]
    parts += ["## Semantic environments (expert networks)", ""]
    for r in sem_rows:
        chunk = "; CausalTab over variable subsets of max_vars" if r.get("chunked") else ""
        parts += [f"### {r['network']} ({r['kind']}, d={r['d']}, interventional fraction "
                  f"{r['int_frac']:g}{chunk}; variables: {', '.join(r['variables'])})", "",
                  method_table([r]), ""]
    parts += ["## Real Sachs data (pooled, log, no intervention labels; 18-edge consensus)",
              "", f"{sachs['rows']} rows drawn at random. SID is undefined here: the "
              "consensus graph has a cycle.", "", method_table([sachs]), ""]
    parts += ["## Prior ablation: broad versus narrow pretraining prior", ""]
    if ablation:
        parts += ["The same architecture, steps, batch and seed trained on the broad prior "
                  "(`train_prior`) and on the narrow one (`narrow_prior`: linear "
                  "mechanisms on Erdos-Renyi graphs, d <= d_max / 2, mostly observational), "
                  "each scored on the same datasets (rows: the two models); "
                  + ("the broad model is the main model above (the same recipe, trained "
                     "once). " if (ablation_training or {}).get("broad", {}).get(
                         "shared_with_main") else "") + "Training:", "",
                  "```", str(ablation_training), "```", ""]
        for r in ablation:
            parts += [f"### {_cell_name(r)}", "", method_table([r]), ""]
    else:
        parts += ["Not run (`ablation_steps = 0`; the full run trains both models).", ""]
    parts += ["## Inference time (all synthetic cells)", "", method_table(synth)]
    return "\n".join(parts)
