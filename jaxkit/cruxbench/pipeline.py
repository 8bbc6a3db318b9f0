"""``jaxkit run cruxbench``: value of information of proposed subquestions, measured
against prediction-market price moves, its correlation with model quality and its use
to a forecasting agent.

Stages: the simulated benchmark of seed 0 (``cruxbench-sim``: targets, proposers,
questions, one market per question; :mod:`jaxkit.cruxbench.simulate`), shown in detail;
then ``n_sim_seeds`` simulated benchmarks (``cruxbench-seeds``: seed 0 and fresh draws),
each reduced to one number per claim (:func:`jaxkit.cruxbench.analysis.seed_stats`); the
claims are decided over the seeds (:mod:`jaxkit.cruxbench.report`). The scoring is the
one real data use (:mod:`jaxkit.cruxbench.scoring`). ``--set data=FILE.jsonl`` also
scores the user's markets (format: :mod:`jaxkit.cruxbench.data`). With ``lm.model`` set,
the stage ``cruxbench-text`` has a language model write subquestions for plain-language
targets, scored by content (:mod:`jaxkit.cruxbench.text`; replies cached in
``lm.cache``, default ``OUT/llm-cache``, and replayed from there). Nothing is trained, so
there is no checkpoint; a killed run reloads the finished stages.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

from jaxkit.io import user_data
from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import report
from .analysis import SEED_STATS, evaluate, forecaster_usefulness, seed_stats, simulator_check
from .config import FULL, QUICK, Config
from .data import read_data
from .scoring import question_scores, score
from .simulate import simulate
from .text import run_text

TITLE = "CruxBench: value of information of subquestions against market prices"


def _seeds(ctx: RunContext, cfg: Config, keys, sim0) -> dict:
    """:func:`seed_stats` of every simulator seed (``sim0``: seed 0's, already drawn)."""
    clip = (cfg.clip_lo, cfg.clip_hi)
    rows = []
    for s in ctx.track(range(len(keys)), "cruxbench simulator seeds"):
        sim = sim0 if s == 0 else simulate(keys[s], cfg.sim_settings())
        rows.append(seed_stats(sim.data, sim.forecast_p1, sim.forecast_p0,
                               window=cfg.window, clip=clip))
    return {k: np.array([r[k] for r in rows], float) for k in SEED_STATS}


def _links(ctx: RunContext, cfg: Config, keys) -> dict:
    """Per link of ``cfg.link_sweep`` (other than ``quality_link``): the seeds'
    VOI-quality correlations with the simulator's quality tied to VOI that much."""
    out = {}
    for link in cfg.link_sweep:
        if float(link) == float(cfg.quality_link):
            continue
        st = cfg.sim_settings()._replace(quality_link=float(link))
        rs = []
        for s in ctx.track(range(len(keys)), f"cruxbench quality link {link:g}"):
            sim = simulate(keys[s], st)
            rs.append(seed_stats(sim.data, sim.forecast_p1, sim.forecast_p0,
                                 window=cfg.window, clip=(cfg.clip_lo, cfg.clip_hi))
                      ["r_quality"])
        out[float(link)] = np.asarray(rs, float)
    return out


@register("cruxbench", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Simulate over seeds, score, test the claims; optionally score the user's file."""
    cfg: Config = ctx.config
    if cfg.data:  # the user's file is read first: a bad one is one line, before any work
        with user_data("data", cfg.data, text=True):
            user_ds = read_data(cfg.data)
    clip = (cfg.clip_lo, cfg.clip_hi)
    base = ctx.key("cruxbench-sim")
    keys = [jax.random.fold_in(base, s) for s in range(cfg.n_sim_seeds)]
    sim = ctx.stage("cruxbench-sim", lambda: simulate(keys[0], cfg.sim_settings()))
    seeds = ctx.stage("cruxbench-seeds", lambda: _seeds(ctx, cfg, keys, sim))
    scores = score(sim.data, window=cfg.window, clip=clip)
    fore = forecaster_usefulness(sim.data, scores.questions, sim.forecast_p1,
                                 sim.forecast_p0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives NaN
        fore_prop = np.nanmean(fore, 0)
    stats = evaluate(ctx.key("cruxbench-stats"), scores, sim.data.quality,
                     n_boot=cfg.n_boot, n_perm=cfg.n_perm)
    tight = question_scores(sim.data, clip=(1e-6, 1 - 1e-6))
    check = simulator_check(tight, dict(abs=sim.known_abs, sq=sim.known_sq, mi=sim.known_mi))
    links = ctx.stage("cruxbench-links", lambda: _links(ctx, cfg, keys))
    claims = report.claims(cfg, seeds, check)
    lm = None
    if cfg.lm.model:
        t = cfg.lm
        cache = t.cache or str(ctx.out_dir / "llm-cache")
        lm = ctx.stage("cruxbench-text", lambda: run_text(
            t.model, n_targets=t.targets, n=t.questions, temperatures=t.temperatures,
            samples=t.samples, cache=cache, offline=t.offline, max_tokens=t.max_tokens))
        claims += report.text_claims(cfg, lm)
    md = [report.seeds_markdown(cfg, seeds), report.links_markdown(cfg, seeds, links),
          report.markdown(scores, stats, sim.data.proposers, sim.data.quality,
                          traits=sim.traits, check=check, forecaster=fore_prop,
                          title="Simulator seed 0 in detail"),
          report.text_markdown(lm)]
    figures = [report.plot(scores, sim.data.quality, ctx.out_dir, usefulness=fore_prop,
                           usefulness_label="separate forecaster's Brier improvement")]
    metrics = dict(settings=cfg.to_dict(), per_proposer={k: v.tolist() for k, v in
                                                         scores.per_proposer.items()},
                   separate_forecaster=fore_prop.tolist(),
                   quality=sim.data.quality.tolist(), simulator_check=check,
                   seeds={k: v.tolist() for k, v in seeds.items()},
                   quality_link_sweep={str(k): v.tolist() for k, v in links.items()},
                   correlations=stats.as_dict())
    if lm is not None:
        metrics["text"] = lm.as_dict()
    if cfg.data:
        ds = user_ds
        sc = score(ds, window=cfg.window, clip=clip)
        st = evaluate(ctx.key("cruxbench-data"), sc, ds.quality, n_boot=cfg.n_boot,
                      n_perm=cfg.n_perm)
        claims += report.data_claims(cfg, st, source=cfg.data)
        md.append(report.markdown(sc, st, ds.proposers, ds.quality, title=f"Data: {cfg.data}"))
        figures.append(report.plot(sc, ds.quality, ctx.out_dir, "cruxbench_data"))
        metrics["data"] = dict(per_proposer={k: v.tolist() for k, v in
                                             sc.per_proposer.items()},
                               correlations=st.as_dict())
    warns = [] if cfg.n_proposers >= 8 else [
        f"{cfg.n_proposers} proposers: the correlation intervals are very wide"]
    metrics["total_seconds"] = ctx.elapsed()
    return PipelineResult("cruxbench", TITLE, "\n".join(md), figures=figures, metrics=metrics,
                          warnings=warns, claims=claims)

