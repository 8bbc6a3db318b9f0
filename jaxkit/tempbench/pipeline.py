"""``jaxkit run tempbench``: temporal crosscoders vs per-token SAEs on synthetic tasks.

Claim under test ("Crosscoding Through Time", Mech Interp Workshop, ICML 2026): a
temporal crosscoder (one dictionary whose latents read from and write to a window of T
consecutive tokens) recovers temporal features better than per-token SAEs. Stages:

1. **Markov features** in superposition (:func:`jaxkit.tempbench.tasks.markov_features`),
   one stage per per-token budget k and persistence rho (``tempbench-markov-k-rho``),
   every window T of ``cfg.windows`` inside it; every rho draws from the same key, so
   the sweep compares persistences on common random numbers.
2. **HMM denoising** (stage ``tempbench-hmm``) and 3. **ordered chains**
   (``tempbench-chains``), and the reference setting (``tempbench-reference``,
   ``cfg.reference``): orthogonal features, several k and T, every baseline
   (:mod:`jaxkit.tempbench.reference`).
4. **Real activations** (``cfg.panel`` "all" or "real"; run *first*, so a bad model,
   corpus or store fails before the synthetic panel): SmolLM2-135M-Instruct
   (:mod:`jaxkit.lm`) recorded over English text shipped with Python into the activation
   store (``tempbench-acts``, ``out_dir/acts``) -- or the user's ``cfg.acts_dir``, checked
   when the configuration is built -- then every method and baseline probed on the
   token-sequence tasks, spliced back into the model (loss recovered) and scored on
   generated backtracking traces (``tempbench-real``, :mod:`jaxkit.tempbench.panel`), and
   the temporal crosscoder streamed from the store with the dictionary sharded over the
   mesh (``tempbench-store``). ``--set panel=real`` skips stages 1-3.

Every training (method x window x seed) is its own cached stage and the acausal
crosscoder's trainings are checkpointed under ``out_dir/checkpoints/``, so a killed run
resumes to the same parameters (:mod:`jaxkit.tempbench.train`); batches are split over
``ctx.mesh``'s ``"data"`` axis. Report, figures and claims: :mod:`jaxkit.tempbench.report`.
"""

from __future__ import annotations

from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import compare as C
from . import report, report_real, report_ref
from .config import FULL, QUICK, Config
from .panel import run_real
from .reference import REF_METHODS, RefSetting, compare_reference
from .results import MarkovSweep
from .train import TrainConfig, Trainer

TITLE = "TempBench: temporal crosscoders vs per-token SAEs"


def train_config(cfg: Config) -> TrainConfig:
    """The hashable training settings of ``cfg`` (window and k are set per setting)."""
    return TrainConfig(window=1, n_latents=cfg.n_latents, k=1, steps=cfg.steps,
                       batch_size=cfg.batch_size, lr=cfg.lr, acausal_lam=cfg.acausal_lam,
                       acausal_eta=cfg.acausal_eta, log_every=cfg.log_every,
                       checkpoint_every=cfg.checkpoint_every)


@register("tempbench", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Markov-feature sweep, HMM denoising and ordered chains; tables, plots, claims."""
    cfg: Config = ctx.config
    tc = train_config(cfg)
    trainer = Trainer(mesh=ctx.mesh, checkpoint_dir=ctx.out_dir / "checkpoints", resume=ctx.resume,
                      cache=ctx.stage)
    common = dict(d=cfg.d, length=cfg.length, n_train=cfg.n_train, n_test=cfg.n_test)
    mk = C.MarkovSetting(n_features=cfg.n_features, pi=cfg.pi, **common)
    hs = C.HMMSetting(n_states=cfg.n_states, sigma=cfg.sigma, **common)
    cs = C.ChainSetting(n_chains=cfg.n_chains, **common)

    real_res = run_real(ctx, cfg, trainer, train_config(cfg)) if cfg.panel != "synthetic" \
        else None
    panels: dict = {}  # per (k, rho): the Markov panel
    hmm = chains = ref = None
    if cfg.panel != "real":
        jobs = [(k, r) for k in cfg.ks for r in cfg.rhos]
        for k, rho in ctx.track(jobs, "tempbench markov"):
            name = f"tempbench-markov-k{k}-rho{rho}"
            panels[(k, rho)] = ctx.stage(name, lambda k=k, rho=rho, name=name: C.compare_markov(
                ctx.key("tempbench-markov"), rho, mk, tc, windows=cfg.windows, k=k,
                n_seeds=cfg.seeds, trainer=trainer, name=name))
        hmm = ctx.stage("tempbench-hmm", lambda: C.compare_hmm(
            ctx.key("tempbench-hmm"), hs, tc, windows=cfg.hmm_windows, k=1,
            n_seeds=cfg.seeds, trainer=trainer, name="tempbench-hmm"))
        chains = ctx.stage("tempbench-chains", lambda: C.compare_chains(
            ctx.key("tempbench-chains"), cs, tc, windows=cfg.chain_windows, k=1,
            n_seeds=cfg.seeds, trainer=trainer, name="tempbench-chains"))
        if cfg.reference:
            rs = RefSetting(d=cfg.ref.d, n_features=cfg.ref.features, pi=cfg.pi,
                            length=cfg.length, n_train=cfg.n_train, n_test=cfg.n_test)
            ref = ctx.stage("tempbench-reference", lambda: compare_reference(
                ctx.key("tempbench-reference"), cfg.ref.rho, rs,
                tc._replace(n_latents=cfg.ref.latents), windows=cfg.ref.windows,
                ks=cfg.ref.ks, n_seeds=cfg.seeds, methods=cfg.ref.methods or REF_METHODS,
                trainer=trainer, name="tempbench-reference"))

    markov = MarkovSweep(windows=tuple(cfg.windows), ks=tuple(cfg.ks), panels=panels)
    figures, md, summary, claims = [], "", {}, []
    if hmm is not None:
        figures = [report.plot_markov(cfg, markov, ctx.out_dir),
                   report.plot_other(hmm, chains, ctx.out_dir)]
        md, summary = report.markdown(cfg, markov, hmm, chains, quick=ctx.quick, seed=ctx.seed)
        claims = report.claims(cfg, markov, hmm, chains, ref)
        if ref is not None:
            md += "\n\n" + report_ref.ref_markdown(cfg, ref)
    else:
        md = (f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}. The synthetic "
              "panel was skipped (panel=real).")
        claims = report.not_run_synthetic()
    if real_res is not None:
        md_r, summary_r = report_real.real_markdown(cfg, real_res)
        md, summary = md + "\n\n" + md_r, {**summary, **summary_r}
    claims = claims + report_real.real_claims(cfg, real_res)
    warnings = [] if cfg.seeds >= 3 else [
        f"{cfg.seeds} seeds per setting: the t-intervals have {cfg.seeds - 1} degree(s) of "
        "freedom, so most claims cannot be decided at this size"]
    plain = {k: None if v is None else v.as_dict() for k, v in (
        ("markov", markov), ("hmm", hmm), ("chains", chains), ("reference", ref),
        ("real", real_res))}
    metrics = dict(settings=cfg.to_dict(), **plain, **summary,
                   total_seconds=ctx.elapsed())
    return PipelineResult("tempbench", TITLE, md, figures=figures, metrics=metrics,
                          warnings=warnings, claims=claims)

