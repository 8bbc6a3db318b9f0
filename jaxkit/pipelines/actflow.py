"""ActFlow: verifier-guided expansion of a flow model's generable set, with baselines.

``jaxkit run actflow [--quick]``. Per domain (:mod:`jaxkit.actflow.domains`, and the
peptide domain of :mod:`jaxkit.actflow.peptides`):

1. **Pre-training** (stage ``actflow-pretrain-DOMAIN``): a flow-matching MLP on data
   that covers a quarter of the valid set (peptides: the valid AMPs of net charge <= +3).
2. **Rounds** (:func:`jaxkit.actflow.loop.run_method`, orbax checkpoint per round under
   ``out_dir/.actflow/``, so a killed run resumes at its first unfinished round): the
   pre-trained model (no update), recursive retraining on its own samples (no filter),
   retraining on verifier-filtered samples, and ActFlow (exploration in noise space,
   verification, novelty filter, replay adaptation). Same per-round budget of samples
   and Adam steps for every method; same random keys.
3. **Report**: per-round metrics of the current model's generable set (``n_eval``
   samples from N(0, I)): validity, uniqueness, novelty (w.r.t. the pre-training data),
   greedy #Circles, Vendi score, k-NN coverage and, where the valid set is known, the
   exact coverage (weighted share of the valid manifold within the coverage radius of a
   valid sample); scatter plots per round and coverage-versus-round curves.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from . import PipelineResult, RunContext, register

QUICK: dict[str, Any] = dict(
    domains=("rings", "peptides"),
    continuous=dict(hidden=64, depth=3, n_data=512, pretrain_steps=1500, batch=128,
                    rounds=3, budget=128, adapt_steps=100, n_eval=256, sample_steps=12,
                    steer_steps=1),
    peptides=dict(hidden=128, depth=2, n_data=512, pretrain_steps=600, batch=64, rounds=2,
                  budget=64, adapt_steps=50, n_eval=128, sample_steps=8, steer_steps=0))
FULL: dict[str, Any] = dict(
    domains=("rings", "torus", "sphere", "peptides"),
    continuous=dict(hidden=128, depth=3, n_data=1024, pretrain_steps=4000, batch=256,
                    rounds=6, budget=256, adapt_steps=300, n_eval=768, sample_steps=16,
                    steer_steps=1),
    peptides=dict(hidden=256, depth=3, n_data=1024, pretrain_steps=3000, batch=128,
                  rounds=5, budget=256, adapt_steps=200, n_eval=512, sample_steps=12,
                  steer_steps=0))
PEPTIDE_DATA_MAX_CHARGE = 3.0


def _domain(name: str):
    from jaxkit.actflow import domains, peptides

    if name == "peptides":
        return peptides.peptide_domain(max_charge_data=PEPTIDE_DATA_MAX_CHARGE)
    return domains.CONTINUOUS[name]()


def _pretrain(dom, cfg, seed: int, mesh) -> dict:
    import equinox as eqx
    import jax

    from jaxkit.actflow import loop

    t0 = time.perf_counter()
    model, loss, data = loop.pretrain(dom, cfg, jax.random.key(seed), mesh=mesh)
    leaves = [np.asarray(v) for v in jax.tree.leaves(eqx.filter(model, eqx.is_array))]
    return dict(leaves=leaves, loss=float(loss), data=np.asarray(data),
                seconds=time.perf_counter() - t0)


def _rebuild(dom, cfg, seed: int, leaves):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from jaxkit.actflow import loop

    params, static = eqx.partition(loop.make_model(dom.dim, cfg, jax.random.key(seed)),
                                   eqx.is_array)
    params = jax.tree.unflatten(jax.tree.structure(params), [jnp.asarray(v) for v in leaves])
    return eqx.combine(params, static)


def _plot_scatter(name: str, dom, runs: dict, data: np.ndarray, out: Path) -> Path:
    from jaxkit.report import new_figure, save_figure

    methods = list(runs)
    n_rounds = runs[methods[0]]["samples"].shape[0]
    cols = sorted({0, n_rounds // 2, n_rounds - 1})
    fig, axes = new_figure(ncols=len(cols), nrows=len(methods), size=(2.6, 2.4))
    dv = dom.view(data)
    ref = None if dom.reference is None else dom.view(dom.reference)
    for i, m in enumerate(methods):
        for j, r in enumerate(cols):
            ax = axes[i, j]
            x, v = runs[m]["samples"][r], runs[m]["valid"][r]
            p = dom.view(x)
            if ref is not None:
                ax.scatter(ref[:, 0], ref[:, 1], s=0.3, c="0.85")
            ax.scatter(dv[:, 0], dv[:, 1], s=1, c="tab:orange", alpha=0.3)
            ax.scatter(p[~v, 0], p[~v, 1], s=1.5, c="0.5", alpha=0.5)
            ax.scatter(p[v, 0], p[v, 1], s=1.5, c="tab:blue")
            ax.set_title(f"{m}, round {r}", fontsize=7)
            ax.tick_params(labelsize=6)
            if name == "peptides":
                ax.set_xlabel("net charge", fontsize=6)
                ax.set_ylabel("mean Eisenberg H", fontsize=6)
    return save_figure(fig, out / f"actflow_{name}_scatter.png")


def _plot_curves(results: dict, out: Path) -> Path:
    from jaxkit.report import new_figure, save_figure

    fig, axes = new_figure(ncols=len(results), size=(3.4, 2.8))
    for ax, (name, runs) in zip(axes[0], results.items(), strict=True):
        key = "coverage" if "coverage" in runs["actflow"]["history"][0] else "circles"
        for m, run in runs.items():
            ax.plot([h["round"] for h in run["history"]], [h[key] for h in run["history"]],
                    marker="o", ms=3, label=m)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("round")
        ax.set_ylabel("exact valid coverage" if key == "coverage" else "#Circles (valid)")
        ax.legend(fontsize=6)
    return save_figure(fig, out / "actflow_coverage.png")


def _fmt(v, pct=False):
    if v is None:
        return ""
    return f"{100 * v:.1f}%" if pct else v


@register("actflow")
def run(ctx: RunContext, settings: dict[str, Any] | None = None) -> PipelineResult:
    """Pre-train, run the four methods per domain, tabulate and plot."""
    import jax

    from jaxkit.actflow import loop, peptides
    from jaxkit.report import markdown_table

    S = {**(QUICK if ctx.quick else FULL), **(settings or {})}
    out = Path(ctx.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    results: dict[str, dict] = {}
    pre: dict[str, dict] = {}
    doms: dict[str, Any] = {}
    for name in S["domains"]:
        cfg = loop.ActFlowConfig(**S["peptides" if name == "peptides" else "continuous"])
        dom = doms[name] = _domain(name)
        pcfg = (name, asdict(cfg))
        pre[name] = ctx.stage(f"actflow-pretrain-{name}",
                              lambda dom=dom, cfg=cfg: _pretrain(dom, cfg, ctx.seed, ctx.mesh),
                              config=pcfg)
        model = _rebuild(dom, cfg, ctx.seed, pre[name]["leaves"])
        data = pre[name]["data"]
        runs = {}
        digest = hashlib.sha256(repr((pcfg, ctx.seed, ctx.quick)).encode()).hexdigest()[:12]
        for method in loop.METHODS:
            ck = out / ".actflow" / f"{name}-{method.replace('+', '_')}-{digest}"
            if not ctx.resume and ck.exists():
                shutil.rmtree(ck)
            t0 = time.perf_counter()
            res = loop.run_method(dom, model, data, method, cfg,
                                  jax.random.key(ctx.seed + 1), mesh=ctx.mesh,
                                  checkpoint_dir=ck, track=ctx.track)
            res["seconds"] = time.perf_counter() - t0
            if name == "peptides":  # expansion beyond the pre-training charge range
                for h, x, v in zip(res["history"], res["samples"], res["valid"], strict=True):
                    beyond = dom.view(x)[:, 0] > PEPTIDE_DATA_MAX_CHARGE
                    h["valid_beyond_data_charge"] = float(np.mean(v & beyond))
            runs[method] = res
        results[name] = runs

    figures = [_plot_curves(results, out)]
    figures += [_plot_scatter(n, doms[n], results[n], pre[n]["data"], out) for n in results]

    md = [f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}. Continuous "
          f"settings: {S['continuous']}; peptide settings: {S['peptides']}. Every method "
          "starts from the same pre-trained model and gets the same per-round budget "
          "(samples, Adam steps) and random keys. Metrics are measured on the *current "
          "model's* samples from N(0, I) each round (round 0 = pre-trained). Coverage: "
          "weighted share of the known valid manifold within the coverage radius of a "
          "valid sample (exact up to the reference grid); k-NN cov.: Naeem et al. 2020 "
          "coverage of that grid (k = 5); #Circles: greedy packing of valid samples at the "
          "coverage radius (Xie et al. 2023); Vendi: RBF kernel, bandwidth = radius; "
          "novelty: valid samples farther than the novelty threshold from the pre-training "
          "data. ActFlow exploration: tempered noise, perturbed ODE-inverted latents of "
          "training and accepted samples, and a normalised gradient step in noise space "
          "toward novel outputs (see `jaxkit.actflow.loop`).", ""]
    metrics: dict[str, Any] = {}
    warnings: list[str] = []
    summary_rows = []
    for name, runs in results.items():
        has_cov = "coverage" in runs["actflow"]["history"][0]
        hdr = ["method", "round"] + (["coverage", "k-NN cov."] if has_cov else []) + [
            "validity", "uniqueness", "novelty", "#Circles", "Vendi"] + (
            ["valid, charge > +3"] if name == "peptides" else []) + [
            "kept (round)", "updated"]
        rows = []
        for m, run in runs.items():
            for h in run["history"]:
                rows.append([m, h["round"]] + ([_fmt(h["coverage"], True),
                                                _fmt(h["knn_coverage"], True)]
                                               if has_cov else [])
                            + [_fmt(h["validity"], True), _fmt(h["uniqueness"], True),
                               _fmt(h["novelty"], True), int(h["circles"]), h["vendi"]]
                            + ([_fmt(h["valid_beyond_data_charge"], True)]
                               if name == "peptides" else [])
                            + ["" if h["n_kept_round"] is None else int(h["n_kept_round"]),
                               "yes" if h["updated"] else "no"])
        key = "coverage" if has_cov else "circles"
        final = {m: run["history"][-1][key] for m, run in runs.items()}
        best_base = max((m for m in final if m != "actflow"), key=lambda m: final[m])
        beats = final["actflow"] > final[best_base]
        fmtv = (lambda v: f"{100 * v:.1f}%") if has_cov else (lambda v: f"{v:.0f}")
        verdict = (f"ActFlow {'beats' if beats else 'does NOT beat'} the best baseline "
                   f"({best_base}) on final {key}: {fmtv(final['actflow'])} vs "
                   f"{fmtv(final[best_base])} (pre-trained model at round 0: "
                   f"{fmtv(runs['actflow']['history'][0][key])}).")
        if not beats:
            warnings.append(f"actflow/{name}: {verdict}")
        summary_rows.append([name, key] + [fmtv(final[m]) for m in loop.METHODS])
        secs = {m: round(run["seconds"], 1) for m, run in runs.items()}
        md += [f"### {name}", "",
               f"Pre-training: {len(pre[name]['data'])} points, final loss "
               f"{pre[name]['loss']:.3f}, {pre[name]['seconds']:.1f} s. Seconds per method "
               f"(all rounds incl. evaluation): {secs}. "
               + (f"Rules: {peptides.Rules()}; pre-training data: valid AMPs with net charge "
                  f"<= +{PEPTIDE_DATA_MAX_CHARGE:.0f}; no exact coverage (the valid set is "
                  "not enumerable), so #Circles at Hamming distance > 2 is the coverage "
                  "measure and 'valid, charge > +3' the share of samples that are valid "
                  "and outside the pre-training charge range." if name == "peptides" else ""),
               "", markdown_table(hdr, rows), "", verdict, ""]
        metrics[name] = {m: run["history"] for m, run in runs.items()}
    md[2:2] = ["Final round, per method:", "",
               markdown_table(["domain", "measure", *loop.METHODS], summary_rows), ""]
    md += ["Figures: `actflow_coverage.png` (coverage or #Circles versus round), "
           "`actflow_DOMAIN_scatter.png` (samples per method at the first, middle and last "
           "round; blue valid, grey invalid, orange pre-training data, light grey the valid "
           "manifold)."]
    metrics["total_seconds"] = time.perf_counter() - t_start
    return PipelineResult("actflow", "ActFlow: verifier-guided expansion of a flow's "
                          "generable set", "\n".join(md), figures=figures, metrics=metrics,
                          warnings=warnings)
