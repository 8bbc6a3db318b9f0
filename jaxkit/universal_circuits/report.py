"""Universal Circuits report: tables, figures and the paper's claims (no computation of
results: everything comes from :mod:`jaxkit.universal_circuits.experiment`, as the typed
results of :mod:`jaxkit.universal_circuits.results`).

Claims and their tests (independently trained transcoders, the seeds, are the
replicates of the circuit and surgery claims):

* paper rows (``kind="paper"``), one per result sentence of the abstract:
  - the intersection keeps 89-98% of the full circuit's accuracy in both models
    (:func:`intersection_claims`): per pair and model, superiority of the per-seed mean
    ratio over ``cfg.claim_low`` (0.89), Holm over every (pair, model) test of the run,
    "yes" iff both models of the pair say yes;
  - a complementary set of universal latents is kept by one model only
    (:func:`complement_claim`): universality calibrated against a shuffled null
    (:mod:`jaxkit.universal_circuits.universality`; the decoder share >= ``universal_tau``
    in both models is passed by every latent), the universal fraction above the null's
    rate by a margin and the one-model-only count above its null expectation;
  - surgery transfers a class with no gradient step (:func:`surgery_claim`): the class's
    recall above chance by ``cfg.surgery_margin`` and the other classes' accuracy
    equivalent within ``cfg.equivalence_margin``, both over the seeds, "yes" iff both;
* setup rows (``kind="setup"``): both models reach >= 95% test accuracy (superiority of
  per-image correctness over 0.95);
* jaxkit's own rows (``kind="extension"``): the intersection by F1, against random
  subsets of the model's circuit of the same size and against its top-``|I|`` attribution
  subset, the misaligned pair's universality (the negative control: must say no), and
  joint training against decoder-matched single-model CLTs.

Faithfulness, reported beside the claims (the measures of the circuit-tracing family,
:mod:`jaxkit.kernels.crosscoder.faithfulness`): per model, the replacement model's top-1
agreement with the model and its KL fidelity against a mean ablation; per circuit, its
accuracy as a fraction of the full replacement model's and its normalised logit
faithfulness ``(mu(C) - mu(0)) / (mu(1) - mu(0))``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.plotting import label_axes, legend_outside, reference_line
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import all_of, equivalence, holm_superiority, superiority

from .config import Config
from .experiment import held_out
from .results import (
    Faithfulness,
    ModelRun,
    PairAnalysis,
    SingleBaseline,
    SurgeryResult,
    TranscoderEval,
    Universality,
)

__all__ = ["PAPER", "claims", "intersection_claims", "complement_claim", "misaligned_claim",
           "surgery_claim",
           "markdown", "figures"]

PAPER = "Universal Circuits (cross-model CLTs between vision models)"
# tag -> (the pair's model names, its analysis)
Pairs = dict[str, tuple[list[str], PairAnalysis]]


def _n(pa: PairAnalysis) -> int:
    return pa.n_seeds


INTERSECTION = ("a compact cross-model intersection of pruned class circuits, typically a "
                "few hundred universal (shared) features per pair, produces 89-98% of "
                "full-circuit classification accuracy in both models")
COMPLEMENT = ("a complementary set of universal features (hundreds per pair) is kept by only "
              "one model's circuit, reflecting how each model weights shared concepts "
              "differently in its own representations")
SURGERY = ("a class is successfully transferred from one model to another with no gradient "
           "steps taken in the new model")


def intersection_claims(cfg: Config, pairs: Pairs) -> list[Claim]:
    """One paper row per pair: the intersection's accuracy ratio (per seed the mean over
    the classes) inside the paper's band in both models: above ``cfg.claim_low`` and
    below ``cfg.claim_high`` (both ends), Holm over every (pair, model, end) test of the
    run; "yes" iff every test of the pair says yes, "no" iff any says no. The note gives
    the two baselines of the same size (random subsets of the circuit, the top-``|I|``
    attribution subset)."""
    tests = [(tag, m, n, end, (pa.ratio[:, m].mean(-1) - cfg.claim_low) if end == "low"
              else (cfg.claim_high - pa.ratio[:, m].mean(-1)))
             for tag, (names, pa) in pairs.items() for m, n in enumerate(names)
             for end in ("low", "high")]
    vs = holm_superiority([d for *_, d in tests])
    out = []
    for tag, (names, pa) in pairs.items():
        mine = [(n, end, v) for (t, _, n, end, _), v in zip(tests, vs, strict=True)
                if t == tag]
        low = [(n, v) for n, end, v in mine if end == "low"]
        high = {n: v for n, end, v in mine if end == "high"}
        S = _n(pa)
        sizes = pa.circuits.sizes.mean((0, 2))
        base = "; ".join(f"{n}: random {pa.random_ratio[:, m].mean():.3f}, top-|I| "
                         f"{pa.top_ratio[:, m].mean():.3f}" for m, n in enumerate(names))
        out.append(Claim(
            PAPER, f"[{tag}] {INTERSECTION} (mean accuracy ratio intersection / circuit in "
            f"({cfg.claim_low}, {cfg.claim_high})).",
            "; ".join(f"{n} {v.estimate + cfg.claim_low:.3f} [{v.lo + cfg.claim_low:.3f}, "
                      f"{v.hi + cfg.claim_low:.3f}]" for n, v in low),
            all_of([v.verdict for *_, v in mine]),
            f"per model and end, paired t over {S} transcoder seeds (per seed the mean over "
            f"10 classes) of ratio - {cfg.claim_low} (cfg.claim_low) and {cfg.claim_high} - "
            "ratio (cfg.claim_high), the paper's two ends, Holm over the run's "
            f"{len(tests)} (pair, model, end) tests (one-sided 2.5% each way); yes iff every "
            "test of the pair says yes, no iff any says no",
            "per model (low end, high end): "
            + ", ".join(f"{n} {v.verdict}/{high[n].verdict}" for n, v in low)
            + f"; shared latents per class {pa.shared.mean():.1f} (paper: a few hundred) "
            f"against circuits of {', '.join(f'{z:.1f}' for z in sizes)}; "
            f"{int(pa.empty.sum())} empty (seed, class) intersections count as 0; "
            f"baselines of the intersection's size (ratio): {base or 'n/a'}"))
    return out


def _extension_pair(cfg: Config, tag: str, names, pa: PairAnalysis, out: list):
    """jaxkit's own rows of a pair (``kind="extension"``): the intersection by F1, against
    random subsets of the same size and against the top-``|I|`` attribution subset."""
    S = _n(pa)
    f = pa.f1.mean((1, 2))
    out.append(Claim.from_verdict(
        PAPER, f"[{tag}] Scored by F1 (precision over all test images, not recall alone), the "
        f"intersection still gives >= {cfg.claim_low} of the circuit's F1 (both models).",
        superiority(f - cfg.claim_low),
        note=f"measured: mean F1 ratio - {cfg.claim_low}; {S} seeds as replicates; "
             "intersection precision (mean) "
             + ", ".join(f"{n} {pa.precision[:, m].mean():.3f}" for m, n in enumerate(names)),
        kind="extension"))
    d = (pa.ratio - pa.random_ratio).mean((1, 2))
    out.append(Claim.from_verdict(
        PAPER, f"[{tag}] The intersection is special: it beats random subsets of the "
        "model's own circuit of the same size (ratio difference > 0).", superiority(d),
        note=f"{cfg.n_random} random subsets per (model, class); per seed the mean over "
             f"models and classes; {S} seeds as replicates", kind="extension"))
    d = (pa.ratio - pa.top_ratio).mean((1, 2))
    out.append(Claim.from_verdict(
        PAPER, f"[{tag}] The intersection beats the top-|I| attribution subset of the "
        "model's circuit (the same size, picked by attribution alone; ratio difference "
        "> 0).", superiority(d),
        note=f"per seed the mean over models and classes; {S} seeds as replicates; "
             "top-|I| ratio " + ", ".join(f"{n} {pa.top_ratio[:, m].mean():.3f}"
                                          for m, n in enumerate(names)),
        kind="extension"))


def complement_claim(cfg: Config, pairs: Pairs) -> Claim:
    """The abstract's one-model-only sentence, with universality calibrated against the
    shuffled null (:mod:`jaxkit.universal_circuits.universality`): per pair, (a) the
    universal fraction (over the latents of the depths both models read) exceeds the
    null's rate ``cfg.universal_alpha`` by ``cfg.universal_margin``, and (b) the count per
    class of universal latents kept by one model's circuit only exceeds its null
    expectation, ``universal_alpha`` times the circuits' symmetric difference at those
    depths (what a null universality would put there); both over the transcoder seeds,
    "yes" iff every test says yes, "no" iff any says no."""
    parts, notes, measured, tests = [], [], [], 0
    for tag, (_, pa) in pairs.items():
        frac = np.asarray(pa.univ.valid_universal_fraction, float)
        va = superiority(frac - cfg.universal_alpha, margin=cfg.universal_margin)
        xor_valid = pa.xor_valid.sum(1).mean(-1)
        cnt = pa.one_only.sum(1).mean(-1).astype(float)
        vb = superiority(cnt - cfg.universal_alpha * xor_valid)
        parts += [va.verdict, vb.verdict]
        tests += 2
        measured.append(f"{tag}: universal {frac.mean():.3f} of the latents both models read "
                        f"(null {np.mean(pa.univ.null_fraction):.3f}, decoder share "
                        f"{np.mean(pa.univ.decoder_fraction):.3f}); one model only "
                        f"{cnt.mean():.2f} per class (null "
                        f"{cfg.universal_alpha * xor_valid.mean():.2f})")
        notes.append(f"{tag}: universal above the null {va.verdict}, one-model-only above its "
                     f"null {vb.verdict}")
    if not parts:
        return Claim(PAPER, COMPLEMENT + ".", "n/a", "not tested", "",
                     "no calibrated universality in this run")
    S = _n(next(iter(pairs.values()))[1])
    return Claim(
        PAPER, COMPLEMENT + f" (universality calibrated against a shuffled null at rate "
        f"{cfg.universal_alpha:g}).", "; ".join(measured), all_of(parts),
        f"per pair over {S} transcoder seeds: superiority of the universal fraction - "
        f"{cfg.universal_alpha:g} (cfg.universal_alpha) with margin {cfg.universal_margin:g} "
        "(cfg.universal_margin), and superiority of the one-model-only count per class over "
        "universal_alpha x the circuits' symmetric difference; yes iff all "
        f"{tests} say yes, no iff any says no",
        "; ".join(notes) + ". Universal: both models' encoder readings of the latent "
        "correlate on the test images above the 1 - alpha quantile of latents paired with "
        "another latent (the shuffled transcoder); the decoder share >= "
        f"{cfg.universal_tau} is passed by (nearly) every latent and is not used")


def misaligned_claim(cfg: Config, mis: Universality, tag: str = "mlp-cnn") -> Claim:
    """The negative control of universality (``kind="extension"``): a transcoder trained on
    the misaligned pair (the second model's rows from other images) has universal latents
    beyond the null by ``cfg.universal_margin``; it must come out "no"."""
    frac = np.asarray(mis.valid_universal_fraction, float)
    v = superiority(frac - cfg.universal_alpha, margin=cfg.universal_margin)
    return Claim.from_verdict(
        PAPER, f"[{tag} misaligned] Negative control: a transcoder trained with the second "
        "model's rows from other images has universal latents above the shuffled null's "
        f"rate {cfg.universal_alpha:g} by more than {cfg.universal_margin:g} (must say no).", v,
        note=f"universal fraction per seed {', '.join(f'{x:.3f}' for x in frac)}; its "
             f"decoder-share universality (uncalibrated) "
             f"{np.mean(mis.decoder_fraction):.3f}; {len(frac)} seeds as replicates",
        kind="extension")


def surgery_claim(cfg: Config, surgs: dict[int, SurgeryResult]) -> Claim:
    """The surgery sentence over the held-out classes (``surgs[c]``: one receiver trained
    without class ``c`` each, :func:`jaxkit.universal_circuits.experiment.surgery`): the
    transferred class's recall above the random-gate control's (a gate of the circuit's
    size) by ``cfg.surgery_margin``, and the other classes' accuracy within
    ``cfg.equivalence_margin`` of the receiver's before; per transcoder seed the mean over
    the held-out classes (the seeds are the replicates); "yes" iff both hold, "no" iff
    either says no. Recall alone would call a head that answers the class for every image
    a success; the random gate asks whether the circuit, not the solve, carries the class."""
    cs = list(surgs)
    rec = np.mean([surgs[c].seed_recall - surgs[c].random_recall for c in cs], 0)
    oth = np.mean([surgs[c].seed_other - surgs[c].before.other for c in cs], 0)
    vr = superiority(rec, margin=cfg.surgery_margin)
    vo = equivalence(oth, margin=cfg.equivalence_margin)
    S = len(oth)

    def per_class(key):
        return ", ".join(f"{c}: {np.mean(getattr(surgs[c], key)):.2f}" for c in cs)

    return Claim(
        PAPER, f"{SURGERY} (held-out classes {', '.join(map(str, cs))}, each into a receiver "
        f"trained without it: recall above a random gate of the circuit's size by more than "
        f"{cfg.surgery_margin:g}, and the other classes' accuracy kept within "
        f"±{cfg.equivalence_margin:g}).",
        f"recall - random-gate recall {vr.estimate:.3g} [{vr.lo:.3g}, {vr.hi:.3g}]; other "
        f"classes after - before {vo.estimate:.3g} [{vo.lo:.3g}, {vo.hi:.3g}]",
        all_of([vr.verdict, vo.verdict]),
        f"both over {S} transcoder seeds, per seed the mean over the {len(cs)} held-out "
        f"classes (models trained once): {vr.test}, margin {cfg.surgery_margin:g} "
        f"(cfg.surgery_margin); {vo.test} (cfg.equivalence_margin); yes iff both say yes "
        "(intersection-union), no iff either says no",
        f"transfer above the random gate {vr.verdict}, other classes kept {vo.verdict}; "
        f"recall per class after {per_class('seed_recall')}; random gate "
        f"{per_class('random_recall')}; another class's circuit {per_class('wrong_recall')}; "
        "class-mean head (receiver only) "
        + ", ".join(f"{c}: {surgs[c].class_mean.recall:.2f}" for c in cs)
        + "; linear probe " + ", ".join(f"{c}: {surgs[c].probe.recall:.2f}" for c in cs)
        + "; other-class accuracy before "
        + ", ".join(f"{c}: {surgs[c].before.other:.3f}" for c in cs) + ", after "
        + per_class("seed_other"))


def _surgery_extensions(cfg: Config, surgs: dict[int, SurgeryResult]) -> list[Claim]:
    """The surgery against its other controls (``kind="extension"``): another class's
    circuit, and the receiver-only class-mean head (which sees the class's images in the
    receiver: the receiver's own features may already separate the class)."""
    cs = list(surgs)
    wrong = np.mean([surgs[c].seed_recall - surgs[c].wrong_recall for c in cs], 0)
    mean = np.mean([surgs[c].seed_recall - surgs[c].class_mean.recall for c in cs], 0)
    S = len(wrong)
    return [Claim.from_verdict(
        PAPER, "Surgery: the class's own circuit transfers it better than another class's "
        "circuit written in its place (recall difference > 0).", superiority(wrong),
        note=f"another class: c + 1; per seed the mean over {len(cs)} held-out classes; "
             f"{S} seeds as replicates", kind="extension"),
        Claim.from_verdict(
        PAPER, "Surgery beats a receiver-only class-mean head (the receiver's own features "
        "of the class's discovery images, no giver; recall difference > 0).",
        superiority(mean),
        note=f"per seed the mean over {len(cs)} held-out classes; the class-mean head is one "
             f"per class (no seed); {S} seeds as replicates", kind="extension")]


def claims(cfg: Config, models: dict[str, ModelRun], pairs: Pairs,
           single: SingleBaseline | None, surg: dict[int, SurgeryResult],
           misaligned: Universality | None = None) -> list:
    """The paper rows (intersection per pair, the one-model-only sentence, surgery), the
    models' accuracy (``kind="setup"``) and jaxkit's own rows (``kind="extension"``,
    with the misaligned pair's negative control when ``misaligned`` is given)."""
    out = intersection_claims(cfg, pairs)
    main = next(iter(pairs))
    fam = pairs[main][0][0]
    if f"{fam}-{fam}2" not in pairs:
        out.append(Claim(PAPER, f"[{fam}-{fam}2] {INTERSECTION} (a same-architecture pair, two "
                         "seeds).", "n/a", "not tested at this size", "same_arch_pair=False",
                         "the pair runs with --set same_arch_pair=true"))
    out += [complement_claim(cfg, pairs), surgery_claim(cfg, surg)]
    for n, m in models.items():
        cls = held_out(n)
        sel = slice(None) if cls is None else surg_mask(surg[cls].y_test, cls)
        what = "" if cls is None else f" on the 9 classes it learnt (all but {cls})"
        out.append(Claim.from_verdict(
            PAPER, f"Model {n} reaches >= 95% test accuracy{what} (the setup of the claims).",
            superiority(m.correct[sel] - 0.95), note="measured: accuracy - 0.95, per image",
            kind="setup"))
    for tag, (names, pa) in pairs.items():
        _extension_pair(cfg, tag, names, pa, out)
    if misaligned is not None:
        out.append(misaligned_claim(cfg, misaligned, main))
    out += _surgery_extensions(cfg, surg)
    if single is not None:
        d = (pairs[main][1].ratio - single.ratio).mean((1, 2))
        out.append(Claim.from_verdict(
            PAPER, f"[{main}] Training jointly adds: the UC intersection ratio beats that of "
            "two independently trained CLTs matched by decoder similarity.", superiority(d),
            note=f"match: logit-effect cosine >= {cfg.match_cos}; per seed the mean over "
                 f"models and classes, paired by seed; {len(d)} seeds as replicates",
            kind="extension"))
    return out


def surg_mask(y: np.ndarray, cls: int) -> np.ndarray:
    """The test images of the classes other than ``cls``."""
    return np.asarray(y) != cls


def figures(pairs: Pairs, surg: dict[int, SurgeryResult], image_size: int, out: Path
            ) -> list[Path]:
    figs = []
    tag, (names, pa) = next(iter(pairs.items()))
    fig, ax = new_figure(ncols=2, size=(5.0, 3.4))
    cls = np.arange(pa.ratio.shape[-1])
    S = _n(pa)
    for m, n in enumerate(names):
        r = np.clip(pa.ratio[:, m], 0, 1.1)
        sz = pa.circuits.sizes[:, m]
        ax[0, 0].bar(cls + (m - 0.5) * 0.4, r.mean(0), 0.4, label=f"{n} (mean of {S} seeds)")
        ax[0, 1].bar(cls + (m - 0.5) * 0.4, sz.mean(0), 0.4, label=n)
    sh = pa.shared.mean(0)
    ax[0, 0].plot(cls, sh / max(sh.max(), 1), "k.", label="shared latents (scaled to max 1)")
    reference_line(ax[0, 0], 0.89, "paper's lowest ratio (0.89)")
    label_axes(ax[0, 0], "class", "intersection / circuit accuracy",
               title=f"{tag}: intersection circuit")
    ax[0, 0].set_ylim(0, 1.1)
    label_axes(ax[0, 1], "class", "circuit size (latents)", title="circuit sizes")
    for a in ax[0]:
        a.set_xticks(cls)
    legend_outside(fig, where="below", ncol=4)
    figs.append(save_figure(fig, out / "uc_intersection.png"))
    fig, ax = new_figure(ncols=4, size=(3.4, 3.2))
    sg = next(iter(surg.values()))
    for i, (key, title) in enumerate((("before", "receiver before"), ("after", "after surgery"),
                                      ("class_mean", "class-mean head"),
                                      ("probe", "linear probe"))):
        ax[0, i].imshow(getattr(sg, key).confusion, cmap="Blues")
        ax[0, i].set(title=f"{title} (class {sg.cls})", xlabel="predicted", ylabel="true")
    figs.append(save_figure(fig, out / "uc_surgery_confusion.png"))
    imgs = pa.top_images  # (M, n, P): decoders mapped back to each model's input space
    fig, ax = new_figure(nrows=imgs.shape[0], ncols=imgs.shape[1], size=(1.3, 1.5))
    for m in range(imgs.shape[0]):
        for i, im in enumerate(imgs[m]):
            v = max(float(np.abs(im).max()), 1e-9)
            ax[m, i].imshow(im.reshape(image_size, image_size), cmap="RdBu_r", vmin=-v, vmax=v)
            ax[m, i].set_title(f"{names[m]}: latent {int(pa.top_latents[i])}", fontsize=5)
            ax[m, i].axis("off")
    figs.append(save_figure(fig, out / "uc_top_shared_latents.png"))
    return figs


def _fidelity_md(ev: TranscoderEval, names) -> list[str]:
    rows = [[n, float(np.mean(ev.agreement[:, m])), float(ev.baseline_agreement[m]),
             float(np.mean(ev.kl_replacement[:, m])), float(ev.baseline_kl[m]),
             float(np.mean(ev.kl_fidelity[:, m]))] for m, n in enumerate(names)]
    return ["Replacement model (every layer of both models replaced by the transcoder, no "
            "error terms), per model on the test images, mean of "
            f"{len(ev.kl)} seeds: top-1 agreement with the model (the circuit-tracing "
            "evaluation of CLTs) and KL fidelity 1 - KL(model || replacement) / KL(model || "
            "mean ablation), the mean ablation replacing the model's last site by its mean "
            "(1: the model's output distribution; 0: no closer than the ablation).", "",
            markdown_table(["model", "top-1 agreement", "mean-ablation agreement",
                            "KL to the replacement", "KL to the mean ablation",
                            "KL fidelity"], rows), ""]


def _faith_md(tag: str, names, f: Faithfulness) -> list[str]:
    sm = f.summary()
    rows = [[n, sm.circuit_acc[m], sm.circuit_logit[m], sm.inter_acc[m], sm.inter_logit[m],
             sm.n_undefined[m]] for m, n in enumerate(names)]
    return [f"Circuit faithfulness ({tag}, test images of each class, mean over classes and "
            f"{f.circuit_acc.shape[0]} seeds): accuracy as a fraction of the full "
            "replacement model's, mu(C) / mu(1), and normalised logit faithfulness "
            "(mu(C) - mu(0)) / (mu(1) - mu(0)) with mu the class's mean centred logit, 1 the "
            "full replacement and 0 the empty circuit (Wang et al. 2023; Marks et al. 2024).",
            "", markdown_table(["model", "circuit: accuracy / full", "circuit: logit "
                                "faithfulness", "intersection: accuracy / full",
                                "intersection: logit faithfulness",
                                "(seed, class) logit undefined"], rows), ""]


def _faith_bullet(tag: str, names, ev: TranscoderEval | None, f: Faithfulness | None
                  ) -> list[str]:
    out = []
    if ev is not None:
        out.append(f"- Faithfulness of the replacement model ({tag}): top-1 agreement with the "
                   "model " + ", ".join(f"{n} {np.mean(ev.agreement[:, m]):.3f}"
                                         for m, n in enumerate(names))
                   + "; KL fidelity against a mean ablation "
                   + ", ".join(f"{np.mean(ev.kl_fidelity[:, m]):.3f}"
                               for m in range(len(names))) + ".")
    if f is not None:
        sm = f.summary()
        out.append("- Circuit faithfulness (test images): each model's circuit keeps "
                   + ", ".join(f"{n} {sm.circuit_acc[m]:.3f}" for m, n in enumerate(names))
                   + " of the full replacement's class accuracy (logit faithfulness "
                   + ", ".join(f"{v:.3f}" for v in sm.circuit_logit) + "); the intersection "
                   + ", ".join(f"{v:.3f}" for v in sm.inter_acc) + " (logit faithfulness "
                   + ", ".join(f"{v:.3f}" for v in sm.inter_logit) + ").")
    return out


def _surgery_md(surg: dict[int, SurgeryResult]) -> list[str]:
    """The surgery tables: per held-out class, the recall of the class and the other
    classes' accuracy of the receiver before, after surgery and under each control."""
    md = ["### Surgery: each held-out class into a CNN trained without it", "",
          "Recall of the held-out class / accuracy on the other classes (test images); "
          "'after surgery', 'random gate' (a random gate of the circuit's size) and 'another "
          "class's circuit' (class c + 1 written as c) are means over the transcoder seeds; "
          "the class-mean head uses the receiver alone; the linear probe (trained with "
          "gradients on all classes) is the upper reference; no gradient of the receiver is "
          "taken otherwise (one ridge solve on transcoder weights).", ""]
    cols = ["class", "circuit size", "before", "after surgery", "random gate",
            "another class's circuit", "class-mean head", "linear probe"]
    for what, k in (("recall of the class", 0), ("other classes' accuracy", 1)):
        rows = []
        for c, sg in surg.items():
            pairs = [(sg.before.recall, sg.before.other),
                     (sg.seed_recall.mean(), sg.seed_other.mean()),
                     (sg.random_recall.mean(), sg.random_other.mean()),
                     (sg.wrong_recall.mean(), sg.wrong_other.mean()),
                     (sg.class_mean.recall, sg.class_mean.other),
                     (sg.probe.recall, sg.probe.other)]
            rows.append([c, float(np.mean(sg.circuit_sizes)),
                         *(float(p[k]) for p in pairs)])
        md += [f"{what.capitalize()}:", "", markdown_table(cols, rows), ""]
    return md


def _universality_md(cfg: Config, pairs: Pairs, mis: Universality | None) -> list[str]:
    rows = [[tag, float(np.mean(pa.univ.valid_universal_fraction)),
             float(np.mean(pa.univ.null_fraction)),
             float(np.mean(pa.univ.decoder_fraction))]
            for tag, (_, pa) in pairs.items()]
    if mis is not None:
        rows.append([f"{next(iter(pairs))} misaligned (negative control)",
                     float(np.mean(mis.valid_universal_fraction)),
                     float(np.mean(mis.null_fraction)), float(np.mean(mis.decoder_fraction))])
    if not rows:
        return []
    return ["### Universal latents, calibrated against a shuffled null", "",
            "A latent is universal when both models' encoder readings of it correlate on the "
            f"test images above the {1 - cfg.universal_alpha:g} quantile of latents paired with "
            "another latent of the same depth (the shuffled transcoder); fraction over the "
            "latents of the depths both models read, mean over seeds. The shuffled pairing's "
            f"own rate should be about {cfg.universal_alpha:g}; the decoder share >= "
            f"{cfg.universal_tau} in both models (uncalibrated) is passed by nearly every "
            "latent, also on the misaligned pair.", "",
            markdown_table(["transcoder", "universal fraction", "shuffled null's rate",
                            "decoder share >= tau (all latents)"], rows), ""]


def markdown(cfg: Config, models: dict[str, ModelRun], evals: dict[str, TranscoderEval],
             pairs: Pairs, single: SingleBaseline | None, surg: dict[int, SurgeryResult],
             faith: dict[str, Faithfulness] | None = None,
             misaligned: Universality | None = None) -> str:
    rows = [[n, f"{m.correct.mean():.3f}"] for n, m in models.items()]
    data = ("Real images: scikit-learn's 1,797 8x8 handwritten digits" if cfg.task == "digits"
            else "The second task: 1,800 procedurally drawn shapes of ten classes (bars, "
            "diagonals, crosses, squares, a ring, a triangle)")
    md = [f"{data} at {cfg.image_size}x{cfg.image_size}; every {cfg.test_every}th image (by "
          "index) held out (unaugmented); models trained on augmented images (shift, "
          "rotation, elastic noise).", "", "### Models (test accuracy)", "",
          markdown_table(["model", "accuracy"], rows), ""]
    for tag, ev in evals.items():
        md += [f"### Transcoder {tag}: reconstruction and fidelity (test images, mean of "
               f"{len(ev.kl)} seeds)", "",
               markdown_table(["(model, layer, depth)", "FVU"],
                              [[str(lay), float(f)] for lay, f in
                               zip(ev.layers, np.mean(ev.fvu, 0), strict=True)]), "",
               f"Fidelity KL (mean over spliced sites) {np.mean(ev.kl):.4f}; L0 "
               f"{np.mean(ev.l0):.1f} active latents per image; replacement accuracy "
               "(transcoder alone) "
               f"{', '.join(f'{a:.3f}' for a in np.mean(ev.replacement_acc, 0))}.", ""]
        if tag in pairs:
            md += _fidelity_md(ev, pairs[tag][0])
    for tag, (names, pa) in pairs.items():
        c = pa.circuits
        hdr = ["class", "shared", *(f"{n} circuit" for n in names),
               *(f"{n} ratio" for n in names), *(f"{n} F1 ratio" for n in names),
               *(f"{n} random" for n in names), *(f"{n} top-|I|" for n in names),
               *(f"{n} one-only univ." for n in names)]
        rows = [[k, float(pa.shared[:, k].mean()),
                 *(float(c.sizes[:, m, k].mean()) for m in range(2)),
                 *(float(pa.ratio[:, m, k].mean()) for m in range(2)),
                 *(float(pa.f1[:, m, k].mean()) for m in range(2)),
                 *(float(pa.random_ratio[:, m, k].mean()) for m in range(2)),
                 *(float(pa.top_ratio[:, m, k].mean()) for m in range(2)),
                 *(float(pa.one_only[:, m, k].mean()) for m in range(2))]
                for k in range(pa.ratio.shape[-1])]
        md += [f"### Class circuits and intersections ({tag}, mean of {_n(pa)} seeds)", "",
               f"Circuit: smallest attribution-ordered prefix keeping {cfg.keep_frac} of the "
               "full replacement's class accuracy (discovery images); ratio: accuracy (recall) "
               "with the intersection only / with the model's circuit (test images); F1 "
               "ratio: the same with F1 (precision over all test images).", "",
               markdown_table(hdr, rows), "",
               "Per seed (mean over classes): ratio "
               + "; ".join(f"{n} " + ", ".join(f"{v:.3f}" for v in pa.ratio[:, m].mean(-1))
                           for m, n in enumerate(names)), ""]
        if faith is not None and tag in faith:
            md += _faith_md(tag, names, faith[tag])
    md += _universality_md(cfg, pairs, misaligned)
    if single is not None:
        md += ["### Baseline: independently trained single-model CLTs", "",
               markdown_table(["model", "mean matched ratio", "mean matched latents"],
                              [[n, float(single.ratio[:, m].mean()),
                                float(single.shared[:, m].mean())]
                               for m, n in enumerate(next(iter(pairs.values()))[0])]), ""]
    tag, (names, pa) = next(iter(pairs.items()))
    md += ["### Do the paper's claims reproduce?", "",
           f"- Intersection / full-circuit accuracy ({tag}): mean "
           + ", ".join(f"{n} {pa.ratio[:, m].mean():.3f}" for m, n in enumerate(names))
           + " (paper: 0.89-0.98); by F1 "
           + ", ".join(f"{pa.f1[:, m].mean():.3f}" for m in range(2))
           + "; random subsets of the same size "
           + ", ".join(f"{pa.random_ratio[:, m].mean():.3f}" for m in range(2))
           + ("; independently trained CLTs matched by decoder similarity "
              + ", ".join(f"{single.ratio[:, m].mean():.3f}" for m in range(2))
              if single is not None else "") + ".",
           f"- Shared latents per class: mean {pa.shared.mean():.1f} of "
           f"{pa.universal.shape[-1]} (paper: a few hundred of tens of thousands); "
           f"universal latents kept by one model's circuit only: mean "
           f"{pa.one_only.sum(1).mean():.1f} per class.",
           *_faith_bullet(tag, names, evals.get(tag), (faith or {}).get(tag)),
           "- A circuit's accuracy is its recall on the class's images with only its latents "
           "active (the transcoder alone, no error terms); a tiny circuit that pushes every "
           "image towards its class scores high on it, so the F1 ratio (which charges the "
           "images of other classes it captures), the random-subset baseline and the "
           "single-CLT baseline are the comparisons to read.",
           f"- The verdicts are in the claims table; the {_n(pa)} independently trained "
           "transcoders (seeds) are the replicates of the circuit claims.",
           "- Figure uc_top_shared_latents.png: the decoders of seed 0's most shared latents "
           "mapped back to each model's input space (input gradient of the decoder's "
           "direction at the site it writes, averaged over the discovery images).", ""]
    md += _surgery_md(surg)
    return "\n".join(md)
