"""CruxBench report: tables, figures and the paper's claims (no computation of results).

Claims of CruxBench (abstract, paper 1 of the seed), tested on the simulated benchmark
(and, with ``--set data=FILE``, on the user's markets):

1. VOI correlates with independent measures of model quality: Pearson r of the
   proposers' mean realised VOI (absolute price move at the answer's announcement) with
   the quality measure, "yes" if its Fisher-z 95% interval lies above 0.
2. ... with r = 0.87: equivalence, the Fisher-z 90% interval inside
   ``0.87 +- r_margin``.
3. VOI predicts downstream usefulness when the questions are passed to a forecasting
   agent: the cross-fitted paired test of :func:`jaxkit.cruxbench.analysis.heldout_usefulness`
   on the agent's Brier improvement.

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

from .analysis import correlation_equivalence, correlation_verdict
from .config import Config

__all__ = ["PAPER", "claims", "markdown", "plot"]

PAPER = "CruxBench (VOI of LLM subquestions vs prediction markets)"
_METRIC_NAMES = {"ex_ante_abs": "ex-ante E abs(dp)", "ex_ante_mi": "ex-ante MI (nats)",
                 "realised_abs": "realised abs(dp)", "realised_sq": "realised dp^2",
                 "realised_log_score": "realised log-score gain"}


def _f(x, fmt="{:.3f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def claims(cfg: Config, stats: dict, *, source: str = "simulated") -> list[Claim]:
    """The three claims (module docstring) from :func:`jaxkit.cruxbench.analysis.evaluate`
    output ``stats``; ``source`` names the data in the notes."""
    note = ("simulated proposers and markets; the simulator fixes the true relation"
            if source == "simulated" else f"measured on {source}")
    out = []
    s = stats["quality"].get("realised_abs")
    c1 = "VOI correlates with independent measures of model quality"
    c2 = "The correlation of VOI with model quality is r = 0.87"
    if s is None or s["n"] < 4:
        # too few for a correlation: say how many the data have (not 0 when there are 2)
        n = stats.get("n_quality", 0) if s is None else s["n"]
        for c in (c1, c2):
            out.append(Claim(PAPER, c, "n/a", "not tested at this size",
                             note=f"{n} proposers with a quality measure (need >= 4)"))
    else:
        extra = (f"; nested bootstrap [{_f(s['boot_lo'])}, {_f(s['boot_hi'])}], Spearman "
                 f"{_f(s['spearman'])}, permutation p {_f(s['perm_p'], '{:.3g}')}")
        out.append(Claim.from_verdict(PAPER, c1, correlation_verdict(s["r"], s["n"]),
                                      note=note + extra))
        out.append(Claim.from_verdict(
            PAPER, c2, correlation_equivalence(s["r"], s["n"], target=cfg.r_paper,
                                               margin=cfg.r_margin),
            note=note + f"; margin {cfg.r_margin:g} in r"))
    c3 = ("VOI predicts downstream usefulness when the questions are passed to a "
          "forecasting agent")
    v = stats["heldout"].get("brier_gain")
    if v is None:
        out.append(Claim(PAPER, c3, "n/a", "not tested at this size",
                         note="no outcomes or answers to score the agent"))
    else:
        u = stats["usefulness"].get("realised_abs", {})
        out.append(Claim.from_verdict(
            PAPER, c3, v, fmt="{:.4f}",
            note=(f"{note}; Brier improvement of the top-VOI half of the proposers minus "
                  f"the bottom half (ranked on the other half of the targets); across "
                  f"proposers r(VOI, Brier gain) = {_f(u.get('r', math.nan))}")))
    return out


def _corr_rows(block: dict) -> list[list]:
    return [[_METRIC_NAMES[m], _f(s["r"]), f"[{_f(s['fisher_lo'])}, {_f(s['fisher_hi'])}]",
             f"[{_f(s['boot_lo'])}, {_f(s['boot_hi'])}]", _f(s["spearman"]),
             _f(s["perm_p"], "{:.3g}"), s["n"]] for m, s in block.items()]


def markdown(scores: dict, stats: dict, names: list[str], quality: np.ndarray, *,
             traits: dict | None = None, check: list[list] | None = None,
             title: str = "Simulated benchmark") -> str:
    """The report section of one scored benchmark."""
    prop = scores["per_proposer"]
    header = ["proposer", *(["knowledge noise", "vagueness", "threshold spread"]
                            if traits else []), "quality", "ex-ante E abs(dp)", "realised abs(dp)",
              "realised log-score", "agent Brier gain", "agent log gain"]
    rows = []
    for m, name in enumerate(names):
        t = [traits[k][m] for k in ("knowledge_noise", "vagueness", "threshold_spread")] \
            if traits else []
        rows.append([name, *t, quality[m], prop["ex_ante_abs"][m], prop["realised_abs"][m],
                     prop["realised_log_score"][m], prop["brier_gain"][m],
                     prop["log_gain"][m]])
    parts = [f"### {title}", "", markdown_table(header, rows), ""]
    ch = ["VOI metric", "r", "Fisher z 95%", "nested bootstrap 95%", "Spearman",
          "permutation p", "proposers"]
    if stats["quality"]:
        parts += ["Correlation of per-proposer VOI with the independent quality measure:", "",
                  markdown_table(ch, _corr_rows(stats["quality"])), ""]
    if stats["usefulness"]:
        parts += ["Correlation of per-proposer VOI with the agent's Brier improvement:", "",
                  markdown_table(ch, _corr_rows(stats["usefulness"])), ""]
        rows = [[k, _f(v.estimate, "{:.4f}"), f"[{_f(v.lo, '{:.4f}')}, {_f(v.hi, '{:.4f}')}]",
                 v.verdict, v.n] for k, v in stats["heldout"].items()]
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


def plot(scores: dict, quality: np.ndarray, out: Path, name: str = "cruxbench") -> Path:
    """Per-proposer realised VOI against quality and against the agent's Brier gain."""
    prop = scores["per_proposer"]
    fig, axes = new_figure(ncols=2, size=(4.0, 3.4))
    for ax, y, lab in ((axes[0, 0], quality, "quality measure"),
                       (axes[0, 1], prop["brier_gain"], "agent Brier improvement")):
        ax.scatter(prop["realised_abs"], y, s=14)
        ax.set_xlabel("mean realised |dp| at the announcement")
        ax.set_ylabel(lab)
    axes[0, 0].set_title("VOI vs quality", fontsize=8)
    axes[0, 1].set_title("VOI vs downstream usefulness", fontsize=8)
    return save_figure(fig, out / f"{name}_voi.png")
