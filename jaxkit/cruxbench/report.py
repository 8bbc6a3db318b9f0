"""CruxBench report: tables, figures and the paper's claims (no computation of results).

Claims of CruxBench (abstract, paper 1 of the seed), tested on ``n_sim_seeds``
simulated benchmarks (the simulator seed is the replicate; each seed gives one number
per claim, :func:`jaxkit.cruxbench.analysis.seed_stats`):

1. *paper*: "VOI correlates highly with independent measures of model quality
   (r = 0.87)": per seed, Pearson r of the proposers' mean realised VOI (absolute price
   move at the answer's announcement) with the quality measure; "yes" if the t interval
   of the seeds' mean Fisher z lies above ``atanh(r_high)``
   (:func:`jaxkit.cruxbench.analysis.seed_correlation`).
2. *paper*: "VOI predicts downstream usefulness when the generated questions are passed
   to a separate forecasting agent": per seed, the cross-fitted difference in the
   separate forecaster's Brier improvement (top-VOI half of the proposers minus the
   bottom half, ranked on the other half of the targets); superiority over seeds
   against ``usefulness_margin``. The forecaster
   (:func:`jaxkit.cruxbench.proposers.separate_forecaster`) never reads the proposers'
   probabilities.
3. *setup*: the simulated price jumps match the closed-form VOI (seed 0).
4. *extension*: the seeds' r within ``r_margin`` of the paper's 0.87 (the simulator's r is
   set by its trait spreads, so the value says nothing about LLMs); the agent that pools
   the proposer's own probabilities tracks VOI (structural: its expected Brier gain is
   the squared-shift VOI), shown for comparison; claim 1 with volatility-controlled
   realised VOI (the move at the answer minus the same market's moves over matched
   windows, :func:`jaxkit.cruxbench.scoring.matched_moves`).
5. *setup*: the sign check: the share of answered questions whose price moved the way
   the answer says, over seeds, against chance (0.5).

With ``--set data=FILE`` the same sentences are tested on the user's markets (one draw,
the agent pooling the proposers' own numbers) as *extension* rows, so that no paper
sentence is counted twice.

The simulator sets how quality, VOI and usefulness relate (one shared trait, the
proposers' knowledge, two VOI-only traits): a "yes" says the measurement recovers such
a relation at this size, not that it holds for real LLMs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import fisher_z_interval, superiority

from .analysis import (
    correlation_equivalence,
    correlation_verdict,
    seed_correlation,
    seed_correlation_equivalence,
)
from .config import Config
from .results import Evaluation, TextRun
from .scoring import Scores

__all__ = ["PAPER", "C_QUALITY", "C_USEFUL", "C_TEXT", "claims", "data_claims",
           "seeds_markdown", "links_markdown", "markdown", "plot", "text_claims",
           "text_markdown"]

PAPER = "CruxBench (VOI of LLM subquestions vs prediction markets)"
C_QUALITY = ("VOI correlates highly with independent measures of model quality "
             "(r = 0.87)")
C_USEFUL = ("VOI predicts downstream usefulness when the generated questions are passed "
            "to a separate forecasting agent")
C_TEXT = ("Subquestions written by the language model carry more content VOI than "
          "questions about random factors")
_METRIC_NAMES = {"ex_ante_abs": "ex-ante E abs(dp)", "ex_ante_mi": "ex-ante MI (nats)",
                 "realised_abs": "realised abs(dp)", "realised_sq": "realised dp^2",
                 "realised_log_score": "realised log-score gain"}
_SIM = ("simulated proposers and markets: quality (forecasting skill) and VOI share the "
        "proposers' knowledge trait by the simulator's design, so a yes says the VOI "
        "measurement recovers such a relation at this size, not that it holds for LLMs")


def _f(x, fmt="{:.3f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _range(x) -> str:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return "n/a" if not x.size else f"{x.min():.2f} to {x.max():.2f}"


def _check_verdict(check: list[list]) -> str:
    vs = [row[-1] for row in check]
    return "yes" if all(v == "yes" for v in vs) else "no" if "no" in vs else "not shown"


def claims(cfg: Config, seeds: dict, check: list[list] | None = None) -> list[Claim]:
    """The claims (module docstring) from the per-seed numbers ``seeds`` (``{name: (S,)}``,
    :data:`jaxkit.cruxbench.analysis.SEED_STATS`) and seed 0's simulator ``check``
    (:func:`jaxkit.cruxbench.analysis.simulator_check`)."""
    S = len(np.asarray(seeds["r_quality"]))
    M = cfg.n_proposers
    out = []
    rq = np.asarray(seeds["r_quality"], float)
    v = seed_correlation(rq, null=cfg.r_high)
    out.append(Claim.from_verdict(
        PAPER, C_QUALITY, v._replace(test=v.test + f" ('highly': r_high = {cfg.r_high:g}, "
                                                   f"fixed in the configuration), "
                                                   f"r over {M} proposers per seed"),
        note=f"{_SIM}; per-seed r {_range(rq)}"))
    d = np.asarray(seeds["heldout_forecaster"], float)
    v = superiority(d, margin=cfg.usefulness_margin)
    out.append(Claim.from_verdict(
        PAPER, C_USEFUL, v._replace(test=f"superiority over {v.n} simulator seeds of the "
                                         f"per-seed mean held-out Brier difference (paired "
                                         f"t, 95% CI) vs margin {cfg.usefulness_margin:g}"),
        fmt="{:.4f}",
        note=(f"{_SIM}; usefulness is the Brier improvement of a separate forecaster that "
              f"reads each question's content and answer with its own noisy loadings "
              f"(noise {cfg.forecaster_noise:g}) and never the proposer's probabilities; "
              f"per seed: top-VOI half of the proposers minus the bottom half, ranked on "
              f"the other half of the targets; per-seed r(VOI, forecaster gain) "
              f"{_range(seeds['r_forecaster'])}")))
    if check:
        out.append(Claim(PAPER, "The simulated markets' price jumps at the answers match "
                                "the closed-form VOI", "; ".join(f"{r[0]}: {r[2]} vs {r[1]}"
                                                                 for r in check),
                         _check_verdict(check), "TOST of measured - known per question "
                                                "within 5% of the known mean, 90% t CI, "
                                                "every quantity", "simulator seed 0",
                         kind="setup"))
    v = seed_correlation_equivalence(rq, target=cfg.r_paper, margin=cfg.r_margin)
    lo, hi = fisher_z_interval(cfg.r_paper, M, 0.90)
    out.append(Claim.from_verdict(
        PAPER, f"The simulator's VOI-quality correlation is the paper's r = {cfg.r_paper:g}",
        v, kind="extension",
        note=(f"the simulator's r is set by its trait spreads, so its value says nothing "
              f"about LLMs; what {M} proposers can decide: one draw's 90% Fisher interval "
              f"at r = {cfg.r_paper:g} is [{lo:.2f}, {hi:.2f}], wider than the margin "
              f"±{cfg.r_margin:g}, so a single r over {M} models cannot be told from "
              f"r = {cfg.r_paper - cfg.r_margin:.2f}; over {S} seeds the mean is tested")))
    v = seed_correlation(seeds["r_own_agent"], null=cfg.r_high)
    out.append(Claim.from_verdict(
        PAPER, "An agent that pools the proposer's own probabilities gains in proportion "
               "to VOI", v, kind="extension",
        note="structural, not evidence: the simulated proposers state the exact "
             "conditionals, so that agent's expected Brier gain is the squared-shift VOI "
             "itself; shown to compare with the separate forecaster's row"))
    if "r_quality_controlled" in seeds:
        rc = np.asarray(seeds["r_quality_controlled"], float)
        v = seed_correlation(rc, null=cfg.r_high)
        out.append(Claim.from_verdict(
            PAPER, "VOI measured with volatility control (the move at the answer minus the "
                   "market's moves at matched times) correlates highly with model quality",
            v._replace(test=v.test + f" ('highly': r_high = {cfg.r_high:g})"),
            kind="extension",
            note=f"{_SIM}; per-seed r {_range(rc)}; the raw move credits the market's "
                 f"background volatility to the question"))
        sg = np.asarray(seeds["sign_agree"], float)
        v = superiority(sg, margin=0.5)
        out.append(Claim.from_verdict(
            PAPER, "Realised price moves at the answers go the way the answers say (sign "
                   "check)", v._replace(test=f"share of answered questions whose price "
                                              f"moved in the predicted direction, mean over "
                                              f"{v.n} seeds (t, 95% CI) vs 0.5 (chance)"),
            kind="setup",
            note="structural in the simulator (its proposers state the exact conditionals "
                 "and the price jumps to them); informative on real markets"))
    return out


def data_claims(cfg: Config, stats: Evaluation, *, source: str) -> list[Claim]:
    """The same sentences on the user's markets ``source`` (one draw) from
    :func:`jaxkit.cruxbench.analysis.evaluate`'s ``stats``: *extension* rows (the
    simulated rows are the paper rows; a sentence is tallied once)."""
    note = (f"measured on {source}; a second test of the paper's sentence beside the "
            "simulated one, not tallied")
    out = []
    s = stats.quality.get("realised_abs")
    c1 = f"On {source}: {C_QUALITY}"
    c2 = f"On {source}: the correlation of VOI with model quality is r = {cfg.r_paper:g}"
    if s is None or s["n"] < 4:
        # too few for a correlation: say how many the data have (not 0 when there are 2)
        n = stats.n_quality if s is None else s["n"]
        for c in (c1, c2):
            out.append(Claim(PAPER, c, "n/a", "not tested at this size",
                             note=f"{n} proposers with a quality measure (need >= 4)",
                             kind="extension"))
    else:
        extra = (f"; nested bootstrap [{_f(s['boot_lo'])}, {_f(s['boot_hi'])}], Spearman "
                 f"{_f(s['spearman'])}, permutation p {_f(s['perm_p'], '{:.3g}')}")
        out.append(Claim.from_verdict(PAPER, c1, correlation_verdict(s["r"], s["n"],
                                                                     null=cfg.r_high),
                                      note=note + extra, kind="extension"))
        out.append(Claim.from_verdict(
            PAPER, c2, correlation_equivalence(s["r"], s["n"], target=cfg.r_paper,
                                               margin=cfg.r_margin),
            note=note + f"; margin {cfg.r_margin:g} in r", kind="extension"))
    c3 = f"On {source}: {C_USEFUL}"
    v = stats.heldout.get("brier_gain")
    if v is None:
        out.append(Claim(PAPER, c3, "n/a", "not tested at this size",
                         note="no outcomes or answers to score the agent", kind="extension"))
    else:
        u = stats.usefulness.get("realised_abs", {})
        out.append(Claim.from_verdict(
            PAPER, c3, v, fmt="{:.4f}", kind="extension",
            note=(f"{note}; the agent pools the proposers' own stated probabilities (the "
                  f"data hold no separate forecaster); Brier improvement of the top-VOI "
                  f"half of the proposers minus the bottom half (ranked on the other half "
                  f"of the targets); across proposers r(VOI, Brier gain) = "
                  f"{_f(u.get('r', math.nan))}")))
    return out


def seeds_markdown(cfg: Config, seeds: dict) -> str:
    """The per-seed table and the distribution of each number over the seeds."""
    names = {"r_quality": "r(VOI, quality)", "r_forecaster": "r(VOI, separate forecaster's "
             "gain)", "r_own_agent": "r(VOI, own-number agent's gain)",
             "heldout_forecaster": "held-out forecaster difference",
             "r_quality_controlled": "r(volatility-controlled VOI, quality)",
             "sign_agree": "moves in the answer's direction"}
    names = {k: v for k, v in names.items() if k in seeds}
    S = len(seeds["r_quality"])
    rows = [[s, *(_f(float(seeds[k][s]), "{:.3f}" if k != "heldout_forecaster" else "{:.4f}")
                  for k in names)] for s in range(S)]
    dist = []
    for k, lab in names.items():
        x = np.asarray(seeds[k], float)
        x = x[np.isfinite(x)]
        if x.size:
            dist.append([lab, f"{np.mean(x):.3f}", f"{np.median(x):.3f}", f"{x.min():.3f}",
                         f"{x.max():.3f}", x.size])
    return "\n".join([
        f"### {S} simulator seeds ({cfg.n_targets} targets x {cfg.n_proposers} proposers "
        "each)", "",
        "Each seed draws new targets, proposers, questions and markets; the claims are "
        "decided over the seeds. VOI: the proposer's mean realised abs(dp) at the "
        "answers.", "",
        markdown_table(["seed", *names.values()], rows), "",
        markdown_table(["quantity", "mean", "median", "min", "max", "seeds"], dist), ""])


def links_markdown(cfg: Config, seeds: dict, links: dict) -> str:
    """How the VOI-quality correlation over the seeds depends on the simulator's link
    between quality and VOI (``quality_link``; ``links``: ``{link: (S,) r}``)."""
    if not links:
        return ""
    rows = []
    for link, rs in sorted({float(cfg.quality_link): np.asarray(seeds["r_quality"], float),
                            **links}.items()):
        x = rs[np.isfinite(rs)]
        v = seed_correlation(x, null=cfg.r_high)
        rows.append([f"{link:g}" + (" (this run)" if link == cfg.quality_link else ""),
                     f"{np.mean(x):.3f}", f"{np.median(x):.3f}", f"{x.min():.3f}",
                     f"{x.max():.3f}", f"{v.estimate:.3f} [{v.lo:.3f}, {v.hi:.3f}]",
                     v.verdict])
    return "\n".join([
        "### How much of the correlation is the simulator's assumption", "",
        "quality_link: 1 = the proposers' quality is forecasting skill with the same "
        "knowledge trait that steers their questions; 0 = an independent draw of that "
        f"trait (no relation by construction). r(VOI, quality) over the same "
        f"{len(seeds['r_quality'])} seeds; the verdict is the paper row's test "
        f"(mean Fisher z vs r_high = {cfg.r_high:g}).", "",
        markdown_table(["quality link", "mean r", "median", "min", "max",
                        "seeds' mean r [95% CI]", "verdict vs r_high"], rows), ""])


def _corr_rows(block: dict) -> list[list]:
    return [[_METRIC_NAMES[m], _f(s["r"]), f"[{_f(s['fisher_lo'])}, {_f(s['fisher_hi'])}]",
             f"[{_f(s['boot_lo'])}, {_f(s['boot_hi'])}]", _f(s["spearman"]),
             _f(s["perm_p"], "{:.3g}"), s["n"]] for m, s in block.items()]


def markdown(scores: Scores, stats: Evaluation, names: list[str], quality: np.ndarray, *,
             traits: dict | None = None, check: list[list] | None = None,
             forecaster: np.ndarray | None = None,
             title: str = "Simulated benchmark") -> str:
    """The report section of one scored benchmark (``forecaster``: the separate
    forecaster's per-proposer Brier gain, a column when given)."""
    prop = scores.per_proposer
    header = ["proposer", *(["knowledge noise", "vagueness", "threshold spread"]
                            if traits else []), "quality", "ex-ante E abs(dp)", "realised abs(dp)",
              "realised log-score", "own-number agent Brier gain", "own-number agent log gain",
              *(["separate forecaster Brier gain"] if forecaster is not None else [])]
    rows = []
    for m, name in enumerate(names):
        t = [traits[k][m] for k in ("knowledge_noise", "vagueness", "threshold_spread")] \
            if traits else []
        rows.append([name, *t, quality[m], prop["ex_ante_abs"][m], prop["realised_abs"][m],
                     prop["realised_log_score"][m], prop["brier_gain"][m],
                     prop["log_gain"][m], *([forecaster[m]] if forecaster is not None
                                            else [])])
    parts = [f"### {title}", "", markdown_table(header, rows), ""]
    ch = ["VOI metric", "r", "Fisher z 95%", "nested bootstrap 95%", "Spearman",
          "permutation p", "proposers"]
    if stats.quality:
        parts += ["Correlation of per-proposer VOI with the independent quality measure:", "",
                  markdown_table(ch, _corr_rows(stats.quality)), ""]
    if stats.usefulness:
        parts += ["Correlation of per-proposer VOI with the Brier improvement of the agent "
                  "that pools the proposer's own probabilities:", "",
                  markdown_table(ch, _corr_rows(stats.usefulness)), ""]
        rows = [[k, _f(v.estimate, "{:.4f}"), f"[{_f(v.lo, '{:.4f}')}, {_f(v.hi, '{:.4f}')}]",
                 v.verdict, v.n] for k, v in stats.heldout.items()]
        parts += ["Cross-fitted test (top-VOI half minus bottom half of the proposers, per "
                  "target):", "", markdown_table(["agent score", "mean difference",
                                                  "95% t CI", "superiority", "targets"],
                                                 rows), ""]
    if check:
        parts += ["Simulator check: the known VOI at each announcement (closed form) "
                  "against the price moves measured from the simulated paths "
                  "(prices clipped to [1e-6, 1 - 1e-6] here):", "",
                  markdown_table(["quantity", "known (mean)", "measured (mean)",
                                  "90% CI of the difference", "within 5% (TOST)"], check), ""]
    return "\n".join(parts)


def plot(scores: Scores, quality: np.ndarray, out: Path, name: str = "cruxbench", *,
         usefulness: np.ndarray | None = None,
         usefulness_label: str = "agent Brier improvement") -> Path:
    """Per-proposer realised VOI against quality and against the usefulness measure
    (default: the agent's Brier gain)."""
    prop = scores.per_proposer
    use = prop["brier_gain"] if usefulness is None else usefulness
    fig, axes = new_figure(ncols=2, size=(4.0, 3.4))
    for ax, y, lab in ((axes[0, 0], quality, "quality measure"),
                       (axes[0, 1], use, usefulness_label)):
        ax.scatter(prop["realised_abs"], y, s=14)
        ax.set_xlabel("mean realised |dp| at the announcement")
        ax.set_ylabel(lab)
    axes[0, 0].set_title("VOI vs quality", fontsize=8)
    axes[0, 1].set_title("VOI vs downstream usefulness", fontsize=8)
    return save_figure(fig, out / f"{name}_voi.png")


def _text_diffs(lm: TextRun) -> np.ndarray:
    """Per (proposer, target): the mean content VOI of the valid questions (0 where the
    reply gave none: a fallback adds nothing) minus the random-factor baseline."""
    d = [np.nan_to_num(r.per_target, nan=0.0) - r.baseline for r in lm.proposers.values()]
    return np.concatenate(d) if d else np.zeros(0)


def text_claims(cfg: Config, lm: TextRun | None) -> list[Claim]:
    """The text block's row (an extension: the paper's proposers are frontier models, not
    this one): per (temperature, target) the content VOI of the model's valid
    subquestions minus that of questions about uniformly random factors, superiority vs 0
    over those pairs."""
    if lm is None:
        return []
    if lm.error or not lm.proposers:
        return [Claim(PAPER, C_TEXT, "n/a", "not tested", "no replies",
                      f"language model {lm.model!r}: {lm.error or 'no proposer'}",
                      kind="extension")]
    d = _text_diffs(lm)
    v = superiority(d, margin=0.0)
    n_q = sum(len(r.questions) for r in lm.proposers.values())
    n_ok = sum(r.n_valid for r in lm.proposers.values())
    return [Claim.from_verdict(
        PAPER, C_TEXT, v._replace(test=f"per (temperature, target): mean content VOI of the "
                                       f"valid subquestions (0 if none) minus the random-"
                                       f"factor baseline; paired t, 95% CI vs 0, n={v.n}"),
        kind="extension",
        note=(f"model {lm.model}; {n_ok} of {n_q} parsed subquestions valid; content "
              f"VOI: the simulator conditioned on the factors a question names, never the "
              f"model's own probabilities; {cfg.lm.targets} targets; replies from the "
              f"cache: {lm.hits}, generated: {lm.misses}"))]


def text_markdown(lm: TextRun | None) -> str:
    """The text block's tables: replies by how they parsed, questions by validity, the
    content VOI against the random-factor baseline, and example questions."""
    if lm is None:
        return ""
    if lm.error or not lm.proposers:
        return (f"### Subquestions written by a language model\n\nNot run: "
                f"{lm.error or 'no proposer'}\n")
    rows, ex = [], []
    for label, r in lm.proposers.items():
        c = r.counts
        q = c["questions"]
        stated = np.array([x["stated_voi"] for x in r.questions], float)
        rows.append([label, len(r.how), c["replies"]["json"], c["replies"]["lines"],
                     c["replies"]["none"], len(r.questions), r.n_valid,
                     ", ".join(f"{k} {v}" for k, v in sorted(q.items()) if k != "valid")
                     or "-",
                     _f(float(np.nanmean(np.nan_to_num(r.per_target, nan=0.0)))),
                     _f(float(np.mean(r.baseline))),
                     _f(float(np.nanmean(stated))) if np.isfinite(stated).any() else "n/a"])
        ex += [[label, x["target"], x["text"][:100], x["reason"] or "valid",
                _f(x["content_voi"])] for x in r.questions[:4]]
    return "\n".join([
        "### Subquestions written by a language model", "",
        f"Model {lm.model} (replies from the cache: {lm.hits}, generated: "
        f"{lm.misses}). A reply is parsed as a JSON list with probabilities, else line "
        f"by line; 'none' is the fallback (no question). Content VOI: E|dp| of the "
        f"question read as the factors it names (the simulator conditioned on the text), "
        f"0 for a target without a valid question; baseline: a question about a random "
        f"factor.", "",
        markdown_table(["proposer", "replies", "JSON", "lines", "none (fallback)",
                        "questions", "valid", "rejected", "content VOI",
                        "random-factor VOI", "stated VOI"], rows), "",
        markdown_table(["proposer", "target", "question", "validity", "content VOI"], ex),
        ""])
