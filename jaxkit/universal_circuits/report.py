"""Universal Circuits report: tables, figures and the paper's claims (no computation of
results: everything comes from :mod:`jaxkit.universal_circuits.experiment`).

Claims and their tests (classes are the replicates of the circuit claims; images of
the surgery claims):

* both models reach >= 95% test accuracy: superiority of per-image correctness over
  0.95;
* the intersection keeps 89-98% of the full circuit's accuracy: per model, superiority
  of the per-class ratio over ``claim_low`` (0.89) ("no" if its interval lies below);
* the intersection beats a random subset of the model's circuit of the same size, and
  beats the decoder-matched intersection of independently trained CLTs: paired
  superiority over classes (both models pooled);
* universal latents kept by one model's circuit only exist: superiority of the
  per-class count over 0;
* surgery: the transferred class's recall beats chance (superiority of per-image hits
  over 1/10) and the other classes' accuracy is unchanged (equivalence of paired
  per-image differences within ``equivalence_margin``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.plotting import label_axes, legend_outside, reference_line
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import equivalence, superiority

from .config import Config

__all__ = ["PAPER", "claims", "markdown", "figures"]

PAPER = "Universal Circuits (cross-model CLTs between vision models)"


def _pair_claims(cfg: Config, tag: str, names, pa: dict, out: list):
    for m, n in enumerate(names):
        r = pa["ratio"][m]
        out.append(Claim.from_verdict(
            PAPER, f"[{tag}] The cross-model intersection of pruned class circuits gives "
            f"89-98% of the full circuit's accuracy in {n} (per-class ratio > "
            f"{cfg.claim_low}).", superiority(r - cfg.claim_low, margin=0.0),
            note=f"measured: mean ratio - {cfg.claim_low}; classes as replicates; "
                 f"{int(pa['empty'].sum())} empty intersections count as 0; "
                 f"shared latents per class {pa['shared'].tolist()}"))
    d = (pa["ratio"] - pa["random_ratio"]).ravel()
    out.append(Claim.from_verdict(
        PAPER, f"[{tag}] The intersection is special: it beats random subsets of the "
        "model's own circuit of the same size (ratio difference > 0).", superiority(d),
        note=f"{cfg.n_random} random subsets per (model, class); both models pooled"))
    cnt = pa["one_only"].sum(0).astype(float)
    out.append(Claim.from_verdict(
        PAPER, f"[{tag}] A complementary set of universal latents is kept by one model's "
        "circuit only (count per class > 0).", superiority(cnt), fmt="{:.2f}",
        note=f"universal: decoder share >= {cfg.universal_tau} in both models "
             f"({int(pa['universal'].sum())} latents)"))


def claims(cfg: Config, models: dict, pairs: dict, single: dict | None, surg: dict) -> list:
    out = []
    for n, m in models.items():
        sel = slice(None) if n != "cnn-minus" else _mask(surg, False)
        what = "" if n != "cnn-minus" else f" on the 9 classes it learnt (all but {surg['cls']})"
        out.append(Claim.from_verdict(
            PAPER, f"Model {n} reaches >= 95% test accuracy{what} (the setup of the claims).",
            superiority(m["correct"][sel] - 0.95), note="measured: accuracy - 0.95, per image"))
    for tag, (names, pa) in pairs.items():
        _pair_claims(cfg, tag, names, pa, out)
    if "mlp-mlp2" not in pairs:
        out.append(Claim(PAPER, "[mlp-mlp2] The intersection gives 89-98% of the full circuit's "
                         "accuracy in both models of a same-architecture pair (two seeds).",
                         "n/a", "not tested at this size", "same_arch_pair=False",
                         "the pair runs with same_arch_pair=True (FULL)"))
    main = next(iter(pairs))
    if single is not None:
        d = (pairs[main][1]["ratio"] - single["ratio"]).ravel()
        out.append(Claim.from_verdict(
            PAPER, f"[{main}] Training jointly adds: the UC intersection ratio beats that of "
            "two independently trained CLTs matched by decoder similarity.", superiority(d),
            note=f"match: logit-effect cosine >= {cfg.match_cos}; paired over classes, both "
                 "models pooled"))
    b, a, c = surg["before"], surg["after"], surg["cls"]
    hits = a["correct"][_mask(surg, True)]
    out.append(Claim.from_verdict(
        PAPER, f"Surgery transfers class {c} into the receiving model with no gradient step "
        "in it (recall above chance).", superiority(hits - surg["chance"]),
        note=f"recall before {b['recall']:.3f}, after {a['recall']:.3f}, linear probe "
             f"{surg['probe']['recall']:.3f}; measured: recall - chance"))
    sel = _mask(surg, False)
    out.append(Claim.from_verdict(
        PAPER, "Surgery leaves the other classes' accuracy unchanged (within "
        f"±{cfg.equivalence_margin}).",
        equivalence(a["correct"][sel] - b["correct"][sel], margin=cfg.equivalence_margin),
        note=f"other-class accuracy before {b['other']:.3f}, after {a['other']:.3f}"))
    return out


def _mask(surg: dict, cls: bool) -> np.ndarray:
    y = surg["y_test"]
    return (y == surg["cls"]) if cls else (y != surg["cls"])


def figures(pairs: dict, surg: dict, image_size: int, out: Path) -> list[Path]:
    figs = []
    tag, (names, pa) = next(iter(pairs.items()))
    fig, ax = new_figure(ncols=2, size=(5.0, 3.4))
    cls = np.arange(pa["ratio"].shape[1])
    for m, n in enumerate(names):
        ax[0, 0].bar(cls + (m - 0.5) * 0.4, np.clip(pa["ratio"][m], 0, 1.1), 0.4, label=n)
        ax[0, 1].bar(cls + (m - 0.5) * 0.4, pa["circuits"]["sizes"][m], 0.4, label=n)
    ax[0, 0].plot(cls, pa["shared"] / max(pa["shared"].max(), 1), "k.",
                  label="shared latents (scaled to max 1)")
    reference_line(ax[0, 0], 0.89, "paper's lowest ratio (0.89)")
    label_axes(ax[0, 0], "class", "intersection / circuit accuracy",
               title=f"{tag}: intersection circuit")
    ax[0, 0].set_ylim(0, 1.1)
    label_axes(ax[0, 1], "class", "circuit size (latents)", title="circuit sizes")
    for a in ax[0]:
        a.set_xticks(cls)
    legend_outside(fig, where="below", ncol=4)
    figs.append(save_figure(fig, out / "uc_intersection.png"))
    fig, ax = new_figure(ncols=3, size=(3.4, 3.2))
    for i, (key, title) in enumerate((("before", "receiver before"), ("after", "after surgery"),
                                      ("probe", "linear probe"))):
        ax[0, i].imshow(surg[key]["confusion"], cmap="Blues")
        ax[0, i].set(title=f"{title} (class {surg['cls']})", xlabel="predicted", ylabel="true")
    figs.append(save_figure(fig, out / "uc_surgery_confusion.png"))
    imgs = pa["top_images"]
    fig, ax = new_figure(ncols=len(imgs), size=(1.3, 1.5))
    for i, im in enumerate(imgs):
        ax[0, i].imshow(im.reshape(image_size, image_size), cmap="gray")
        ax[0, i].set_title(f"latent {int(pa['top_latents'][i])}", fontsize=6)
        ax[0, i].axis("off")
    figs.append(save_figure(fig, out / "uc_top_shared_latents.png"))
    return figs


def markdown(cfg: Config, models: dict, evals: dict, pairs: dict, single: dict | None,
             surg: dict) -> str:
    rows = [[n, f"{m['correct'].mean():.3f}"] for n, m in models.items()]
    md = ["Real images: scikit-learn's 1,797 8x8 handwritten digits at "
          f"{cfg.image_size}x{cfg.image_size}; every {cfg.test_every}th image (by index) "
          "held out (real, unaugmented); models trained on augmented images (shift, "
          "rotation, elastic noise).", "", "### Models (test accuracy)", "",
          markdown_table(["model", "accuracy"], rows), ""]
    for tag, ev in evals.items():
        md += [f"### Transcoder {tag}: reconstruction and fidelity (test images)", "",
               markdown_table(["(model, layer, depth)", "FVU"],
                              [[str(lay), float(f)] for lay, f in zip(ev["layers"], ev["fvu"],
                                                                       strict=True)]), "",
               f"Fidelity KL (mean over spliced sites) {ev['kl']:.4f}; L0 {ev['l0']:.1f} "
               f"active latents per image; replacement accuracy (transcoder alone) "
               f"{', '.join(f'{a:.3f}' for a in ev['replacement_acc'])}.", ""]
    for tag, (names, pa) in pairs.items():
        c = pa["circuits"]
        hdr = ["class", "shared", *(f"{n} circuit" for n in names),
               *(f"{n} ratio" for n in names), *(f"{n} random" for n in names),
               *(f"{n} one-only univ." for n in names)]
        rows = [[k, int(pa["shared"][k]), *(int(c["sizes"][m][k]) for m in range(2)),
                 *(float(pa["ratio"][m][k]) for m in range(2)),
                 *(float(pa["random_ratio"][m][k]) for m in range(2)),
                 *(int(pa["one_only"][m][k]) for m in range(2))]
                for k in range(pa["ratio"].shape[1])]
        md += [f"### Class circuits and intersections ({tag})", "",
               f"Circuit: smallest attribution-ordered prefix keeping {cfg.keep_frac} of the "
               "full replacement's class accuracy (discovery images); ratio: accuracy with "
               "the intersection only / with the model's circuit (test images).", "",
               markdown_table(hdr, rows), ""]
    if single is not None:
        md += ["### Baseline: independently trained single-model CLTs", "",
               markdown_table(["model", "mean matched ratio", "mean matched latents"],
                              [[n, float(single["ratio"][m].mean()),
                                float(single["shared"][m].mean())]
                               for m, n in enumerate(next(iter(pairs.values()))[0])]), ""]
    tag, (names, pa) = next(iter(pairs.items()))
    md += ["### Do the paper's claims reproduce?", "",
           f"- Intersection / full-circuit accuracy ({tag}): mean "
           + ", ".join(f"{n} {pa['ratio'][m].mean():.3f}" for m, n in enumerate(names))
           + " (paper: 0.89-0.98); random subsets of the same size "
           + ", ".join(f"{pa['random_ratio'][m].mean():.3f}" for m in range(2))
           + ("; independently trained CLTs matched by decoder similarity "
              + ", ".join(f"{single['ratio'][m].mean():.3f}" for m in range(2))
              if single is not None else "") + ".",
           f"- Shared latents per class: mean {pa['shared'].mean():.1f} of "
           f"{pa['universal'].size} (paper: a few hundred of tens of thousands); universal "
           f"latents kept by one model's circuit only: mean "
           f"{pa['one_only'].sum(0).mean():.1f} per class.",
           "- A circuit's accuracy is its recall on the class's images with only its latents "
           "active (the transcoder alone, no error terms); a tiny circuit that pushes every "
           "image towards its class scores high on it, so the random-subset baseline and "
           "the single-CLT baseline are the comparisons to read.",
           "- The verdicts are in the claims table; with one transcoder per pair the 10 "
           "classes are the replicates, so the intervals do not cover transcoder seeds.", ""]
    b, a, p = surg["before"], surg["after"], surg["probe"]
    md += [f"### Surgery: class {surg['cls']} into the CNN trained without it", "",
           markdown_table(["receiver", f"recall of {surg['cls']}", "other classes"],
                          [["before", b["recall"], b["other"]], ["after surgery", a["recall"],
                                                                 a["other"]],
                           ["linear probe (gradients)", p["recall"], p["other"]],
                           ["chance", surg["chance"], "-"]]), "",
           f"Giver's circuit: {surg['circuit_size']} latents; no gradient of the receiver "
           "is taken (one ridge solve on transcoder weights)."]
    return "\n".join(md)
