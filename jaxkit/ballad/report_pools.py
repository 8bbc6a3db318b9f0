"""Report of the over-pools experiment: match / beat rates, cost savings and the claims.

The unit of every claim here is a pool (random pools from :mod:`jaxkit.ballad.pools`,
none built to confirm the claim): per pool, the router's relative test improvement over
the best single proposer in hindsight (chosen per pool on validation instances; mean
over seeds, in units of the classic heuristic's test objective, positive = better) and
its relative cost saving against always calling the pool's most expensive proposer.
These rows are extension rows: the paper's claims are decided once, on the named pool
(:mod:`jaxkit.ballad.report`); here jaxkit asks whether they hold over pools nobody
designed. One-sample tests over pools (:mod:`jaxkit.stats`), the margins of the
configuration:

* Ballad matches or beats the best single proposer in hindsight: non-inferiority within
  ``cfg.margin(problem)``;
* Ballad beats uniform routing (superiority of the paired per-pool difference);
* Ballad costs less than always calling the most expensive proposer (saving above
  ``cfg.saving_margin``);
* the cost-aware Ballad ("ballad-cost") matches or beats Ballad's test objective, and
  costs less than Ballad;
* the genealogy credit helps (Ballad against "ballad -credit", superiority).
"""

from __future__ import annotations

import math

import numpy as np

from jaxkit.claims import Claim
from jaxkit.report import markdown_table
from jaxkit.stats import superiority, t_interval

from .compare import pool_table
from .config import Config
from .report import PAPER, match_verdict, measured
from .results import PoolRuns

__all__ = ["pool_section", "pool_claims"]


def _ci(x, pct: bool = True) -> str:
    m, h = t_interval(np.asarray(x, float))
    f = 100.0 if pct else 1.0
    return f"{f * m:+.1f}%" if not math.isfinite(h) else f"{f * m:+.1f} ± {f * h:.1f}%"


def _median_reach(reach, j: int) -> str:
    v = np.asarray([r[j] for r in reach])
    med = float(np.median(v))
    return "never" if not math.isfinite(med) else f"{med:.2f}"


def pool_section(res: PoolRuns, cfg: Config) -> tuple[list[str], dict]:
    """Markdown of one problem's over-pools table and its metrics."""
    match_margin = cfg.margin(res.problem)
    tab = pool_table(res, match_margin)
    n_pools = len(res.scenarios)
    n_seeds = res.test.shape[2]
    arrow = "lower is better" if res.lower_is_better else "higher is better"
    md = [f"### Over {n_pools} random pools: {res.problem} ({res.objective}, {arrow})",
          "", f"{n_seeds} seeds per pool and router; pools of {res.prices.shape[1]} "
          "proposers drawn from the priors of `jaxkit.ballad.pools` (scenarios in turn: "
          + ", ".join(f"{s} x{res.scenarios.count(s)}" for s in dict.fromkeys(
              res.scenarios)) + "). Per pool: relative test improvement over the best "
          "single proposer in hindsight (chosen on the validation instances; mean over "
          "seeds, as a fraction of the classic heuristic's test objective) and the "
          f"seed-level verdict (beats: superiority; matches: non-inferiority within "
          f"{match_margin:g} of it); saving against "
          "always calling the pool's most expensive proposer (mean ± 95% t interval over pools, "
          "and its quartiles over pools, in %); cost to reach 50% / 90% / "
          "100% of the way from the initial best to the best single proposer's final "
          "value, as a fraction of the most expensive proposer's total cost (median over "
          "pools). Intervals: 95% t over pools.", ""]
    header = ["router", "improvement vs best single", "beats", "matches", "short",
              "not shown", "saving", "cost to 50%", "to 90%", "to 100%"]
    body = []
    for name, row in tab.routers.items():
        v = row.verdicts
        body.append([name, _ci(row.rel)] + [f"{100 * v.count(w) / n_pools:.0f}%" for w in
                                              ("beats", "matches", "short", "not shown")]
                    + [_ci(row.saving) + " (quartiles " + "/".join(
                        f"{100 * q:.0f}" for q in np.percentile(row.saving, [25, 50, 75]))
                       + ")"] + [_median_reach(row.reach, j)
                                              for j in range(3)])
    md += [markdown_table(header, body), ""]
    refs = [f"m{j}" for j in tab.ref]
    cheap = sum(int(r == int(np.argmin(p))) for r, p in zip(tab.ref, res.prices,
                                                            strict=True))
    dearest = sum(int(a == b) for a, b in zip(tab.ref, tab.top, strict=True))
    md += [f"Best single proposer in hindsight: the cheapest in {cheap} of {n_pools} pools, "
           f"the most expensive in {dearest} (per pool: {', '.join(refs)}). Every "
           f"proposer alone ends at the same test value in {tab.ties} of {n_pools} pools "
           "(there the heuristic space leaves no room to tell routers apart).", ""]
    metrics = {name: dict(rel_mean=float(np.mean(r.rel)), saving_mean=float(
        np.mean(r.saving)), **{w: r.verdicts.count(w) / n_pools for w in
                                  ("beats", "matches", "short", "not shown")})
               for name, r in tab.routers.items()}
    return md, metrics


def pool_claims(results: list[PoolRuns], cfg: Config) -> list[Claim]:
    """The over-pools rows of each problem (extension rows; module docstring)."""
    out = []
    for res in results:
        match_margin = cfg.margin(res.problem)
        tab = pool_table(res, match_margin).routers
        p, n = res.problem, len(res.scenarios)
        rel = {k: np.asarray(v.rel) for k, v in tab.items()}
        sav = {k: np.asarray(v.saving) for k, v in tab.items()}
        note = (f"per-pool improvement as a fraction of the classic heuristic's test "
                f"objective (positive: better), n={n} pools")
        verdict, status, sup, ni = match_verdict(rel["ballad"], match_margin)
        beat = tab["ballad"].verdicts
        ext = dict(kind="extension")
        out.append(Claim(PAPER, f"{p}, over random pools: Ballad matches or beats the best "
                         "single proposer in hindsight (chosen on validation)", measured(sup),
                         verdict, f"{sup.test}; non-inferiority: {ni.test}",
                         note + f"; margin {match_margin:g}; per pool beats "
                         f"{beat.count('beats')}, matches {beat.count('matches')}, short "
                         f"{beat.count('short')}, not shown {beat.count('not shown')}", **ext))
        out.append(Claim.from_verdict(
            PAPER, f"{p}, over random pools: Ballad beats uniform routing",
            superiority(rel["ballad"] - rel["uniform"]), fmt="{:+.3g}", note=note, **ext))
        out.append(Claim.from_verdict(
            PAPER, f"{p}, over random pools: Ballad saves more than "
            f"{cfg.saving_margin:.0%} of the cost of always calling the most expensive "
            "proposer", superiority(sav["ballad"], margin=cfg.saving_margin), fmt="{:+.3g}",
            note=f"per-pool relative saving, n={n} pools", **ext))
        v2, _, sup2, ni2 = match_verdict(rel["ballad-cost"] - rel["ballad"], match_margin)
        out.append(Claim(PAPER, f"{p}, over random pools: cost-aware Ballad (index per unit "
                         "cost) matches or beats Ballad's test objective", measured(sup2), v2,
                         f"{sup2.test}; non-inferiority: {ni2.test}",
                         note + f"; margin {match_margin:g}", **ext))
        out.append(Claim.from_verdict(
            PAPER, f"{p}, over random pools: cost-aware Ballad costs less than Ballad",
            superiority(sav["ballad-cost"] - sav["ballad"]), fmt="{:+.3g}",
            note=f"per-pool difference of relative savings, n={n} pools", **ext))
        out.append(Claim.from_verdict(
            PAPER, f"{p}, over random pools: the genealogy credit improves Ballad (ablation)",
            superiority(rel["ballad"] - rel["ballad -credit"]), fmt="{:+.3g}", note=note,
            **ext))
    return out
