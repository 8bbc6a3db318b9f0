"""``jaxkit run actflow``: verifier-guided expansion of a flow model's generable set.

Per domain and training seed, one stage (continuous domains of
:mod:`jaxkit.actflow.domains` and the relaxed peptides: :func:`~jaxkit.actflow.compare.
compare_domain`; discrete peptides, molecules, proteins and your own data:
:func:`~jaxkit.actflow.compare.compare_discrete`):

1. **Pre-training** on data that cover part of the valid set (a quarter of the manifold;
   AMPs of net charge <= ``peptide_max_charge``; molecules of MW <= ``molecule_max_mw``;
   MOSES drug-like molecules of logP <= ``druglike_max_logp`` (skipped, with a note, when
   the molsets wheel is not installed);
   protein fragments of hydrophobic moment <= ``protein_max_moment``).
2. **Rounds**: the pre-trained model (no update), recursive retraining on its own
   samples, retraining on verifier-filtered samples, and ActFlow; same budget and keys
   for every method. Checkpoints under ``out_dir/checkpoints/``: a killed run resumes.
3. **Report** (:mod:`jaxkit.actflow.report`): final models with intervals over
   ``n_seeds`` seeds (one seed: over ``n_draws`` evaluation draws), per-round tables,
   figures, and the claims as paired superiority tests.
"""

from __future__ import annotations

from jaxkit.io import DataError, user_data
from jaxkit.registry import RunContext, register
from jaxkit.report import PipelineResult

from . import moses, report
from .compare import compare_discrete, compare_domain
from .config import DISCRETE, DOMAINS, FULL, QUICK, Config

TITLE = "ActFlow: verifier-guided expansion of a flow's generable set"


def _check_user_data(cfg: Config) -> None:
    """``cfg.user_data`` readable (:func:`.user.read_sequences`), with at least 2 sequences
    of printable characters, and ``cfg.user_verifier`` importable and callable
    (:func:`.user.load_verifier`); else a :class:`jaxkit.io.DataError` naming the file or
    the entry point."""
    from .user import load_verifier, read_sequences

    with user_data("user_data", cfg.user_data) as path:
        seqs, rows = read_sequences(path, cfg.user_column)
    if len(seqs) < 2:
        raise DataError(f"`user_data` {path}: {len(seqs)} sequence(s) in column "
                        f"{cfg.user_column!r}; pre-training needs at least 2")
    for s, r in zip(seqs, rows, strict=True):
        if not s.isprintable():
            raise DataError(f"`user_data` {path}, line {r}, column {cfg.user_column!r}: "
                            f"control characters in {s!r} (a binary file?)")
    try:
        load_verifier(cfg.user_verifier)
    except ValueError as e:
        raise DataError(str(e)) from None


def _stage(ctx: RunContext, cfg: Config, name: str, seed: int, shared: dict):
    tag = "" if seed == 0 else f"-s{seed}"
    keys = {k: ctx.key(f"{k}-{name}{tag}") for k in ("pretrain", "rounds", "draws")}
    ck = ctx.out_dir / "checkpoints"
    if name in DISCRETE:
        return ctx.stage(f"actflow-{name}{tag}", lambda: compare_discrete(
            cfg, name, keys, checkpoint_root=ck, resume=ctx.resume, track=ctx.track,
            shared=shared))
    return ctx.stage(f"actflow-{name}{tag}", lambda: compare_domain(
        cfg, name, keys, checkpoint_root=ck, resume=ctx.resume, mesh=ctx.mesh,
        track=ctx.track, shared=shared))


@register("actflow", quick=QUICK, full=FULL, title=TITLE)
def run(ctx: RunContext) -> PipelineResult:
    """Pre-train, run the four methods per domain and seed, tabulate, plot, test."""
    cfg: Config = ctx.config
    if "user" in cfg.domains:  # the user's file first: a bad one is one line, before any work
        _check_user_data(cfg)
    run_domains, notes = list(cfg.domains), []
    if "druglike" in run_domains and not moses.available():
        run_domains.remove("druglike")
        notes.append("\nDomain druglike skipped: the MOSES data are not installed (pip "
                     "install --no-deps molsets==0.3.1); its claim rows are 'not tested'.")
    shared: dict = {}  # per domain: the domain and its compiled kernels, for every seed
    results = {name: [_stage(ctx, cfg, name, s, shared) for s in range(cfg.n_seeds)]
               for name in run_domains}
    figures = [report.plot_curves(results, ctx.out_dir)]
    figures += [report.plot_scatter(cfg, n, results[n][0], ctx.out_dir) for n in results
                if n not in DISCRETE]
    files = report.write_samples(results, ctx.out_dir)
    body, warnings = report.tables(cfg, results)
    settings = ", ".join(f"{n}: {cfg.loop(n).to_dict()}" for n in run_domains
                         if n not in DISCRETE)
    if any(n in DISCRETE for n in run_domains):
        settings += f"; discrete domains: {cfg.discrete().to_dict()}"
    md = [f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}; {cfg.n_seeds} training "
          f"seed(s). Settings: {settings}. " + report.METHOD_NOTE + " " + report.DISCRETE_NOTE,
          "", *body,
          "Figures: `actflow_coverage.png` (claim measure versus round, first seed), "
          "`actflow_DOMAIN_scatter.png` for the continuous domains (samples per method at "
          "the first, middle and last round; blue valid, grey invalid, orange pre-training "
          "data, light grey the valid manifold)."
          + (f" Final samples: {', '.join(f'`{f.name}`' for f in files)}." if files else "")]
    md += notes
    skipped = [d for d in DOMAINS[:-1] if d not in cfg.domains]
    if skipped:
        md.append(f"\nDomains not run in this configuration (their claims are not tested at "
                  f"this size): {', '.join(skipped)}.")
    if ctx.reloaded:
        md.append(f"\nStages reloaded from an earlier run: {', '.join(ctx.reloaded)}.")
    metrics = {name: seeds[0].histories() for name, seeds in results.items()}
    metrics["final"] = {name: report.per_unit_all(seeds) for name, seeds in results.items()}
    metrics["total_seconds"] = ctx.elapsed()
    return PipelineResult("actflow", TITLE, "\n".join(md), figures=figures, metrics=metrics,
                          warnings=warnings, claims=report.claims(cfg, results))
