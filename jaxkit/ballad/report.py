"""Ballad report: per-problem tables, the best-versus-budget figure, and the claims.

Claims per problem, each on per-seed paired differences (seed ``j`` of one router
against seed ``j`` of the other; same instances and initial population) of the test
objective, oriented so that positive means Ballad is better:

* Ballad matches or beats the best single model in hindsight: "yes" when the
  superiority test (:func:`jaxkit.stats.superiority`, 95%) or the equivalence test
  (:func:`jaxkit.stats.equivalence`, TOST at 5%, margin ``match_margin`` times the best
  single model's mean) holds, "no" when Ballad is shown worse and not equivalent, else
  "not shown" (a difference that is not significant is not a match).
* Ballad costs less than always calling the most expensive model (superiority of the
  per-seed cost saving in dollars).
* Ballad beats uniform random routing (superiority).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxkit.claims import Claim
from jaxkit.plotting import label_axes, legend_outside
from jaxkit.report import markdown_table, new_figure, save_figure
from jaxkit.stats import Verdict, equivalence, paired_difference, superiority

from .compare import summarise

__all__ = ["PAPER", "match_verdict", "claims", "section", "plot"]

PAPER = "Ballad"


def _fmt_ci(ci: tuple[float, float]) -> str:
    m, h = ci
    return f"{m:.4g}" if not math.isfinite(h) else f"{m:.4g} ± {h:.2g}"


def _gain(res: dict, a: dict, b: dict) -> np.ndarray:
    """Per-seed improvement of router ``a`` over ``b`` (positive: ``a`` better)."""
    d = paired_difference(a["test_values"], b["test_values"])
    return -d if res["lower_is_better"] else d


def _best_single(res: dict, rows: list[dict]) -> dict:
    singles = [r for r in rows if r["router"].startswith("only ")]
    pick = min if res["lower_is_better"] else max
    return pick(singles, key=lambda r: r["test"][0])


def match_verdict(gain, margin: float) -> tuple[str, str, Verdict, Verdict]:
    """Does Ballad match or beat a reference, from per-seed improvements ``gain``?

    Returns:
        ``(verdict, status, superiority, equivalence)``: verdict "yes" / "no" /
        "not shown" and the status words "beats", "matches (within ±margin)",
        "falls short of" or "is not shown to match".
    """
    sup = superiority(gain)
    eq = equivalence(gain, margin=margin)
    if sup.verdict == "yes":
        return "yes", "beats", sup, eq
    if eq.verdict == "yes":
        return "yes", f"matches (within ±{margin:.3g})", sup, eq
    if sup.verdict == "no":
        return "no", "falls short of", sup, eq
    return "not shown", "is neither shown to beat nor to match", sup, eq


def _measured(v: Verdict) -> str:
    if math.isnan(v.lo):
        return f"{v.estimate:+.3g}"
    return f"{v.estimate:+.3g} [{v.lo:+.3g}, {v.hi:+.3g}]"


def claims(results: list[dict], match_margin: float) -> list[Claim]:
    """Three claims per problem (see the module docstring)."""
    out = []
    for res in results:
        rows = summarise(res)
        by = {r["router"]: r for r in rows}
        ballad, uni, single = by["ballad"], by["uniform"], _best_single(res, rows)
        margin = match_margin * abs(single["test"][0])
        verdict, _, sup, eq = match_verdict(_gain(res, ballad, single), margin)
        p, n = res["problem"], res["n_seeds"]
        note = (f"improvement in {res['objective']} (positive: Ballad better), per-seed "
                f"pairs, n={n}")
        out.append(Claim(PAPER, f"{p}: Ballad matches or beats the best single model in "
                         f"hindsight ({single['router']}) on the test set",
                         _measured(sup), verdict, f"{sup.test}; {eq.test}",
                         note + f"; margin {match_margin:.0%} of the single model's mean"))
        strongest = res["models"][int(np.argmax(res["model_cost"]))]
        saving = paired_difference(by[f"only {strongest}"]["cost_values"],
                                   ballad["cost_values"])
        out.append(Claim.from_verdict(
            PAPER, f"{p}: Ballad costs less than always calling the most expensive model "
            f"({strongest})", superiority(saving), fmt="${:.3g}",
            note=f"per-seed saving in dollars, n={n}"))
        out.append(Claim.from_verdict(
            PAPER, f"{p}: Ballad beats uniform random routing on the test set",
            superiority(_gain(res, ballad, uni)), fmt="{:+.3g}", note=note))
    return out


def section(res: dict, match_margin: float) -> tuple[list[str], list[dict]]:
    """The Markdown lines of one problem and its per-router rows."""
    rows = summarise(res)
    arrow = "lower is better" if res["lower_is_better"] else "higher is better"
    md = [f"### {res['problem']} ({res['objective']}, {arrow})", "",
          f"Classic heuristic on the test set: {res['baseline_test']:.4g}; best initial "
          f"heuristic on the training set: {res['init_best']:.4g}.", ""]
    header = (["router", "train best", "test", "cost $", "saving", "reached target",
               "cost to target"] + [f"% {m}" for m in res["models"]] + ["failures"])
    body = [[r["router"], _fmt_ci(r["final"]), _fmt_ci(r["test"]), r["cost"],
             f"{100 * r['saving']:.1f}%", f"{100 * r['reach']:.0f}%", r["cost_to_target"]]
            + [f"{100 * s:.0f}" for s in r["share"]] + [r["failures"]] for r in rows]
    md += [markdown_table(header, body), "", _sentence(res, rows, match_margin), ""]
    if "optimum_test" in res:
        md += [_ceiling(res, rows), ""]
    return md, rows


def _ceiling(res: dict, rows: list[dict]) -> str:
    """How close the classic heuristic and the routers come to the exact optimum."""
    opt = res["optimum_test"]
    best = max(rows, key=lambda r: r["test"][0])
    return (f"Exact optimum of the test instances (dynamic programming): {opt:.4g}. The "
            f"classic heuristic reaches {100 * res['baseline_test'] / opt:.2f}% of it; the "
            f"best router ({best['router']}) {100 * best['test'][0] / opt:.2f}%, the worst "
            f"{100 * min(r['test'][0] for r in rows) / opt:.2f}% (means over seeds). A "
            "router cannot beat the classic heuristic by more than the gap between them.")


def _sentence(res: dict, rows: list[dict], match_margin: float) -> str:
    """Does Ballad match the best single model, by the tests of :func:`claims`?"""
    by = {r["router"]: r for r in rows}
    ballad, uni, single = by["ballad"], by["uniform"], _best_single(res, rows)
    margin = match_margin * abs(single["test"][0])
    _, status, sup, _ = match_verdict(_gain(res, ballad, single), margin)
    saving = ballad["saving"]
    cost = (f"{100 * saving:.0f}% lower cost than" if saving >= 0
            else f"{-100 * saving:.0f}% higher cost than")
    vu = superiority(_gain(res, ballad, uni))
    return (f"On the test set Ballad {status} the best single model in hindsight "
            f"({single['router']}: {single['test'][0]:.4g}; Ballad {ballad['test'][0]:.4g}; "
            f"improvement {_measured(sup)}, paired 95% t interval over seeds; equivalence "
            f"margin ±{margin:.3g}), at {cost} always calling the most expensive model. "
            f"Against uniform random routing ({uni['test'][0]:.4g}, "
            f"{100 * uni['saving']:.0f}% saving) the improvement is {_measured(vu)} "
            f"({vu.verdict}).")


def plot(results: list[dict], out: Path) -> Path:
    """Best objective versus calls and versus cumulative cost, per problem."""
    fig, axes = new_figure(ncols=2, nrows=len(results), size=(5.0, 3.2))
    for row, res in enumerate(results):
        n_r, n_s = len(res["routers"]), res["n_seeds"]
        best = res["best"].reshape(n_r, n_s, -1).mean(1)
        cost = res["cost"].reshape(n_r, n_s, -1).mean(1)
        for r, name in enumerate(res["routers"]):
            style = dict(lw=2.2, color="k") if name == "ballad" else (
                dict(lw=1, ls="--") if name.startswith("only") else dict(lw=1, alpha=0.8))
            calls = np.arange(1, best.shape[1] + 1)
            axes[row, 0].plot(calls, best[r], label=name, **style)
            axes[row, 1].plot(np.maximum(cost[r], 1e-3), best[r], label=name, **style)
        for ax, xl in zip(axes[row], ("LLM calls", "cumulative cost ($, log)"), strict=True):
            label_axes(ax, xl, f"best {res['objective']} (mean over seeds)",
                       title=res["problem"])
        axes[row, 1].set_xscale("log")
    legend_outside(fig, where="below", ncol=4)
    return save_figure(fig, out / "ballad_best_vs_budget.png")
