"""CausalTab report: per-benchmark, per-method tables, the figures (AUROC / SHD versus d
and versus the interventional fraction), the inference-time table and the claims.

Claims (CausalTab, arXiv 2605.31156) and how each is tested (paired over datasets, t
intervals from :mod:`jaxkit.stats`; the baseline is the **best** classical method of the
group by mean AUROC, chosen on the same data, which favours the baseline):

1. in-distribution synthetic: CausalTab's AUROC minus the best baseline's > 0;
2. out-of-distribution synthetic (held-out graphs, mechanisms, noise): the same;
3. interventional evidence helps: CausalTab's AUROC with the largest interventional
   fraction minus observational, on the same graphs and mechanisms, > 0;
4. semantic environments (expert networks): CausalTab minus the best baseline > 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxkit import stats
from jaxkit.claims import Claim
from jaxkit.report import markdown_table, new_figure, save_figure

__all__ = ["claims", "markdown", "figures", "best_baseline", "method_table"]

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


def claims(synth: list[dict], sem_rows: list[dict], *, min_n: int = 5) -> list[Claim]:
    """The four claims of the module docstring."""
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


def figures(synth: list[dict], out_dir: Path) -> list[Path]:
    """AUROC and SHD versus d (observational and the largest fraction), and versus the
    interventional fraction (at the smallest d)."""
    paths = []
    ds = sorted({r["d"] for r in synth})
    fr = sorted({r["int_frac"] for r in synth})
    for metric in ("auroc", "shd"):
        fig, ax = new_figure(2, 1)
        for k, which in enumerate(("id", "ood")):
            for m in synth[0]["methods"]:
                for f, ls in ((fr[0], "-"), (fr[-1], "--")):
                    ys = [_mean(next(r for r in synth if (r["which"], r["d"], r["int_frac"])
                                     == (which, d, f))["methods"][m][metric]) for d in ds]
                    ax[0, k].plot(ds, ys, ls, marker="o", label=f"{m} int={f:g}")
            ax[0, k].set(title=f"{which}: {metric.upper()} vs d", xlabel="d", ylabel=metric)
        ax[0, 1].legend(fontsize=5)
        paths.append(save_figure(fig, out_dir / f"causaltab_{metric}_vs_d.png"))
    fig, ax = new_figure(2, 1)
    d0 = ds[0]
    for k, which in enumerate(("id", "ood")):
        for m in synth[0]["methods"]:
            ys = [_mean(next(r for r in synth if (r["which"], r["d"], r["int_frac"])
                             == (which, d0, f))["methods"][m]["auroc"]) for f in fr]
            ax[0, k].plot(fr, ys, marker="o", label=m)
        ax[0, k].set(title=f"{which}, d={d0}: AUROC vs interventional fraction",
                     xlabel="interventional fraction", ylabel="AUROC")
    ax[0, 1].legend(fontsize=6)
    paths.append(save_figure(fig, out_dir / "causaltab_auroc_vs_int_frac.png"))
    return paths


def markdown(cfg, *, synth, sem_rows, sachs, tested: list[Claim], training: dict,
             quick: bool) -> str:
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
            parts += [f"#### {_cell_name(r)} (var-sortability {r['var_sortability']:.2f}, "
                      f"R2-sortability {r['r2_sortability']:.2f})", "", method_table([r]), ""]
    parts += ["## Semantic environments (expert networks)", ""]
    for r in sem_rows:
        if "skipped" in r:
            parts += [f"- {r['network']}: skipped ({r['skipped']})"]
            continue
        parts += [f"### {r['network']} ({r['kind']}, d={r['d']}, interventional fraction "
                  f"{r['int_frac']:g}; variables: {', '.join(r['variables'])})", "",
                  method_table([r]), ""]
    parts += ["## Real Sachs data (pooled, log, no intervention labels; 18-edge consensus)",
              "", f"{sachs['rows']} rows drawn at random. SID is undefined here: the "
              "consensus graph has a cycle.", "", method_table([sachs]), ""]
    parts += ["## Inference time (all synthetic cells)", "", method_table(synth)]
    return "\n".join(parts)
