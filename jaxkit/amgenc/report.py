"""The AMGenC report: generated cells as extended XYZ and CIF, the figure, the tables,
the text, and the paper's claims tested on this run.

Paper claims (the abstract's result sentences; one-sided paired t tests at 5% with Holm
over the family, :func:`jaxkit.stats.holm_superiority` at level 0.90, margins fixed in
the configuration;
each decided over every dataset of the run, the arms sharing their keys so that per-cell
differences are paired):

1. AMGenC keeps the inverse-design accuracy of unconstrained sampling: non-inferiority of
   each design-accuracy error (density, composition, network-former coordination,
   measured on the cells relaxed at the recipe's pressure, :mod:`jaxkit.amgenc.design`)
   of the AMGenC arm to the unconstrained arm (the separately trained AMDEN-style model
   where ``cfg.baseline_model``, else the same model with no mechanism; with the
   baseline, the same-model comparison is an extension row), margins
   ``cfg.margin_density``,
   ``cfg.margin_composition``, ``cfg.margin_former_cn``; Holm over the three errors x
   the datasets; "yes" when every one holds, "no" when one is worse by more than its
   margin;
2. with minimal additional computational overhead: per timing round, AMGenC's extra
   sampling time over unconstrained sampling (the soft projection inside every step plus
   the final discrete projection) is below ``cfg.overhead_margin``; Holm over the datasets;
3. no existing method effectively mitigates charge imbalance: rejection sampling, a
   SMACT-like oxidation-state filter and post-hoc repair on the unconstrained draws
   (:mod:`jaxkit.amgenc.baselines`), decided in :mod:`jaxkit.amgenc.report_more`.

With the independent judge attached (:mod:`jaxkit.amgenc.judging`), claim 1 is scored by
it (a potential that did not make the data) and the rows on random positions and valid
compositions are the rewritten ones of :mod:`jaxkit.amgenc.report_more`.

Setup rows (preconditions), per dataset: unconstrained sampling leaves a large portion
of the cells unbalanced; the property condition steers the composition; the generated
structures are closer to the glass than random positions. Extension rows (never
tallied), per dataset: the final discrete projection balances every cell and raises the
balanced share, the soft projection lowers the charge of the final probabilities (all
three hold by construction: the projections enforce or minimise exactly what they
measure), the mechanisms keep the structure (RDF equivalence within ``cfg.rdf_margin``)
and give valid compositions more often (validity includes balance: by construction).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxkit import stats
from jaxkit.claims import Claim
from jaxkit.plotting import legend_outside
from jaxkit.report import markdown_table, new_figure, save_figure

from . import glass
from . import model as M
from . import plausibility as PL
from .cellfiles import cell_files, write_cells
from .config import Config
from .data import Data, raw_targets
from .evaluate import ANGLE_CUTOFF, MIN_DISTANCE, RELAXED
from .results import ArmRow, Evaluation, Scale
from .sample import AMGENC_ARM, ARMS, BASELINE_ARM, COMPOSITION_ARM, Samples
from .train import Trained

__all__ = ["PAPER", "DESIGN_PROPERTIES", "LARGE_PORTION", "write_cells", "cell_files",
           "figure", "claims", "paper_claims", "design_claim", "overhead_claim",
           "overhead_runs", "exact_balance", "ablation_table", "conditioning_table",
           "plausibility_table", "design_table", "scale_text", "markdown"]

PAPER = "AMGenC"

#: the design-accuracy errors of paper claim 1: (configuration field of the margin, label)
DESIGN_PROPERTIES: dict[str, tuple[str, str]] = {
    "density_error": ("margin_density", "relative density error"),
    "composition_l1": ("margin_composition", "composition L1"),
    "former_cn_error": ("margin_former_cn", "network-former O coordination error"),
}
#: the unbalanced share of unconstrained cells the setup row calls "a large portion"
LARGE_PORTION = 0.25


def figure(ev: Evaluation, trained: Trained, out: Path, prefix: str = "amgenc") -> Path:
    """RDFs, O-T-O angle densities and the loss curve: ``out/<prefix>_rdf.png``."""
    fig, axes = new_figure(ncols=3, size=(5.0, 3.5))
    c = ev.curves
    ax = axes[0, 0]
    ax.plot(c.x, c.reference, "k", lw=2, label="reference (held-out glass)")
    ax.plot(c.x, c.random, ":", color="grey", label="uniform random")
    colour = {}  # one colour per arm in both panels (they share one legend)
    for name in ev.rows:
        colour[name] = ax.plot(c.x, c.arms[name], lw=1, label=name)[0].get_color()
    ax.set_xlabel("r (A)")
    ax.set_ylabel("total g(r)")
    ax = axes[0, 1]
    a = ev.angle_curves
    ax.plot(a.x, a.reference, "k", lw=2, label="reference (held-out glass)")
    ax.plot(a.x, a.random, ":", color="grey", label="uniform random")
    for name in (AMGENC_ARM, RELAXED):
        ax.plot(a.x, a.arms[name], lw=1, label=name, color=colour.get(name))
    ax.set_xlabel(f"O-T-O angle (deg), T-O < {ANGLE_CUTOFF} A")
    ax.set_ylabel("density per degree")
    legend_outside(fig, where="below", fontsize=6)  # one legend for both panels
    ax = axes[0, 2]
    ax.plot(trained.losses, lw=0.8)
    ax.set_xlabel("Adam step")
    ax.set_ylabel("flow-matching loss")
    ax.set_yscale("log")
    return save_figure(fig, out / f"{prefix}_rdf.png")


def exact_balance(ev: Evaluation) -> stats.Verdict:
    """Is every cell of every arm with the final discrete projection balanced? (an exact
    count: one unbalanced cell is a "no")."""
    disc = [n for n, _, _, d in ARMS if d] + [COMPOSITION_ARM]
    bal = np.concatenate([ev.per_cell[n].balanced for n in disc])
    return stats.Verdict("yes" if bal.size and bal.min() == 1.0 else "no",
                         float(bal.mean()), math.nan, math.nan, int(bal.size),
                         f"exact count over {len(disc)} arms, n={bal.size}: one unbalanced "
                         "cell is a no")


def claims(cfg: Config, ev: Evaluation, samples: Samples, data: Data | None = None
           ) -> list[Claim]:
    """This dataset's setup and extension rows (see the module docstring); the paper
    rows are decided over every dataset by :func:`paper_claims`. With the judge attached
    (``ev.judge``) and ``data`` given, the random-positions and validity rows are the
    rewritten ones of :mod:`jaxkit.amgenc.report_more`."""
    rows = _claims(cfg, ev, samples)
    if ev.judge is None or data is None:
        return rows
    from . import report_more

    out = []
    for c in rows:
        if c.claim.startswith("Generated structures are closer"):
            c = report_more.random_claim(ev)
        elif c.claim.startswith("The charge mechanisms give valid"):
            c = report_more.validity_claim(data, samples)
        out.append(c)
    return out


def _claims(cfg: Config, ev: Evaluation, samples: Samples) -> list[Claim]:
    pc = ev.per_cell
    disc = [n for n, _, _, d in ARMS if d] + [COMPOSITION_ARM]
    setup, ext = dict(kind="setup"), dict(kind="extension")
    am = pc[AMGENC_ARM]
    t_idx = samples.target_index
    gen = np.array([am.rdf_l1[t_idx == t].mean() for t in range(t_idx.max() + 1)])
    return [
        Claim.from_verdict(
            PAPER, "Unconstrained sampling leaves a large portion of the cells charge "
            f"unbalanced (more than {LARGE_PORTION:.0%}; \"a large portion of generated "
            "materials may be charge unbalanced\")",
            stats.superiority(1.0 - pc["none"].balanced, margin=LARGE_PORTION),
            note="per-cell unbalanced (0/1), arm none: the problem the method solves",
            **setup),
        Claim.from_verdict(
            PAPER, "The property condition steers the generated composition towards its "
            "target", stats.superiority(am.composition_other - am.composition_l1),
            note="per-cell composition L1 to the other held-out targets - to the own target "
            "(AMGenC arm): inverse design needs a working condition", **setup),
        *_property_steering(ev),
        Claim.from_verdict(
            PAPER, "Generated structures are closer to the glass than random positions",
            stats.superiority(ev.baselines.random_rdf_l1 - gen),
            note="per held-out target RDF L1 (A), uniform random - AMGenC (its cells "
            "averaged)", **setup),
        Claim.from_verdict(
            PAPER, "With the final exact discrete projection every generated cell is exactly "
            "charge balanced", exact_balance(ev),
            note="structural: the projection solves for a balanced assignment, so this checks "
            "the solver, not the method; share of balanced cells; arms: " + ", ".join(disc),
            **ext),
        Claim.from_verdict(
            PAPER, "The final discrete projection raises the share of balanced cells over "
            "unconstrained sampling",
            stats.superiority(pc["final discrete only"].balanced - pc["none"].balanced),
            note="structural (the projection balances every cell); per-cell balanced (0/1), "
            "discrete only - none", **ext),
        Claim.from_verdict(
            PAPER, "The soft projection lowers the total charge of the final channel "
            "probabilities", stats.superiority(pc["none"].soft_charge
                                               - pc["soft only"].soft_charge),
            note="self-confirming (the soft projection minimises this quantity); per-cell "
            "|sum q.p| (e), none - soft only; the argmax of unconfident rows does not follow "
            "it", **ext),
        Claim.from_verdict(
            PAPER, "The charge mechanisms keep the structure of unconstrained sampling",
            stats.equivalence(am.rdf_l1 - pc["none"].rdf_l1, margin=cfg.rdf_margin),
            note=f"per-cell RDF L1 (A), AMGenC - none, margin {cfg.rdf_margin:g} A "
            "(`rdf_margin`)", **ext),
        Claim.from_verdict(
            PAPER, "The charge mechanisms give valid compositions more often",
            stats.superiority(am.valid - pc["none"].valid),
            note="structural (validity includes charge balance, which the projection "
            "enforces); per-cell valid composition (0/1), AMGenC - none", **ext),
    ]


def _members(names, verdicts) -> str:
    return "after Holm: " + ", ".join(f"{n} {v.verdict}" for n, v in zip(names, verdicts,
                                                                       strict=True))


def _has_arm(ev, arm: str) -> bool:
    jd = getattr(ev, "judge", None)
    src = ev.design if jd is None else jd.rows
    return arm in (src or {})


def design_claim(cfg: Config, datasets: list[tuple[str, Evaluation]],
                 against: str | None = None) -> Claim:
    """Paper claim 1 (module docstring) over ``datasets`` ((kind, evaluation) each):
    per dataset and design property, non-inferiority of the AMGenC arm to the
    unconstrained arm ``against`` on the per-cell errors (paired: the arms share their
    keys and targets); NaN errors drop their cell's pair. ``against`` None takes the
    separately trained AMDEN-style baseline (:data:`jaxkit.amgenc.sample.BASELINE_ARM`)
    where every dataset sampled it, else the same model's ``"none"`` arm; naming
    ``"none"`` with the baseline present makes the extension row that isolates the
    mechanisms (same network, same keys). The errors are the independent judge's
    (``ev.judge``, :mod:`jaxkit.amgenc.judging`: cells relaxed by a potential that did
    not make the data, at the target's judged pressure) when it is attached, else those
    of the cells relaxed at the recipe's pressure by the recipe's own potential."""
    with_baseline = bool(datasets) and all(_has_arm(ev, BASELINE_ARM) for _, ev in datasets)
    if against is None:
        against = BASELINE_ARM if with_baseline else "none"
    diffs, margins, names, judges = [], [], [], []
    for kind, ev in datasets:
        jd = getattr(ev, "judge", None)
        src = ev.design if jd is None else {k: jd.rows[k].design
                                            for k in (against, AMGENC_ARM)}
        judges.append(f"{kind}: " + ("the data's own potential (the toy recipe), cells "
                                     "relaxed at the recipe's pressure" if jd is None
                                     else jd.relaxation.design))
        none, am = src[against].per_cell, src[AMGENC_ARM].per_cell
        for prop, (field, label) in DESIGN_PROPERTIES.items():  # DesignCells' fields
            diffs.append(np.asarray(getattr(none, prop), float)
                         - np.asarray(getattr(am, prop), float))
            margins.append(-float(getattr(cfg, field)))
            names.append(f"{kind} {label}")
    vs = stats.holm_superiority(diffs, margin=margins, level=0.90)
    meas = [f"{n}: {_ci(v, '{:+.3g}')} vs {m:g} (n={v.n})" if v.n >= 2 else
            f"{n}: too few scored pairs (n={v.n}; the judge has no parameters for a "
            "species of the others, e.g. Ba or Zn under Teter, B under Pedone alone)"
            for n, v, m in zip(names, vs, margins, strict=True)]
    k = len(datasets)
    baseline = against == BASELINE_ARM
    same_model = against == "none" and with_baseline
    if same_model:
        claim = ("The charge mechanisms keep the inverse-design accuracy of the same "
                 "model's unconstrained sampling (mechanisms isolated: same network, keys "
                 "and targets)")
    else:
        claim = ("AMGenC keeps the inverse-design accuracy of unconstrained sampling "
                 "(\"without sacrificing inverse design accuracy\")")
    who = ("the separately trained unconstrained model (AMDEN-style: the same denoiser "
           "trained with plain element noise, sampled with no mechanism)" if baseline
           else "the same model sampled with no mechanism (arm none)")
    return Claim(
        PAPER, claim, "; ".join(meas),
        stats.all_of(v.verdict for v in vs),
        "non-inferiority per error: one-sided paired t (alpha 0.05, the 90% t interval "
        "shown) of the per-cell error of the unconstrained cells minus AMGenC's against "
        "-margin (`margin_density`, `margin_composition`, `margin_former_cn`); Holm over 3 "
        f"errors x {k} dataset{'s' if k != 1 else ''}: yes if every one holds, no if one "
        "is worse by more than its margin",
        f"unconstrained: {who}; scored by: " + "; ".join(judges)
        + "; positive: AMGenC's error is smaller; " + _members(names, vs),
        kind="extension" if same_model else "paper")


def overhead_runs(samples: Samples) -> np.ndarray:
    """Per timing round: AMGenC's extra time over unconstrained sampling of the timing
    batch, as a fraction of the unconstrained time: the soft projection inside every
    step (the two arms' sampling times of that round) plus the final discrete projection
    of the timing batch (its median time, scaled from all the cells to the batch)."""
    none = np.asarray(samples.arms["none"].ode_times, float)
    am = samples.arms[AMGENC_ARM]
    b = am.x.shape[0]
    disc = am.discrete_seconds * (am.timed_cells or b) / b
    if none.size == 0 or none.size != len(am.ode_times):
        return np.zeros(0)
    return (np.asarray(am.ode_times, float) + disc) / none - 1.0


def overhead_claim(cfg: Config, datasets: list[tuple[str, Samples]]) -> Claim:
    """Paper claim 2 (module docstring) over ``datasets`` ((kind, samples) each)."""
    runs = [overhead_runs(s) for _, s in datasets]
    # superiority of the saving against -margin is "the overhead is below the margin"
    vs = stats.holm_superiority([-r for r in runs], margin=-cfg.overhead_margin, level=0.90)
    meas = []
    for (kind, _), v in zip(datasets, vs, strict=True):
        ci = "" if math.isnan(v.lo) else f" [{-v.hi:+.1%}, {-v.lo:+.1%}]"
        meas.append(f"{kind}: {-v.estimate:+.1%}{ci} (n={v.n} rounds)")
    k = len(datasets)
    return Claim(
        PAPER, "AMGenC adds minimal computational overhead (\"with minimal additional "
        "computational overhead\")", "; ".join(meas), stats.all_of(v.verdict for v in vs),
        "per timing round, AMGenC's extra sampling time (soft projection in every step + "
        "final discrete projection) over unconstrained sampling; one-sided t (alpha 0.05, "
        f"the 90% t interval shown) against {cfg.overhead_margin:.0%} (`overhead_margin`); "
        f"Holm over {k} dataset{'s' if k != 1 else ''}: yes if below it on every one",
        "steady-state timings as measured on this machine, under whatever load it carried "
        "(a shared CPU: other jobs slow the arms alike only on average), every arm once per "
        "round in rotating order; "
        + _members([k for k, _ in datasets], vs))


def paper_claims(cfg: Config, datasets: list[tuple[str, Evaluation, Samples]]) -> list[Claim]:
    """The paper rows over every dataset ((kind, evaluation, samples) each; module
    docstring)."""
    evs = [(k, ev) for k, ev, _ in datasets]
    rows = [design_claim(cfg, evs), overhead_claim(cfg, [(k, s) for k, _, s in datasets]),
            _mitigation(cfg, datasets)]
    if evs and all(_has_arm(ev, BASELINE_ARM) for _, ev in evs):  # the mechanisms alone
        rows.append(design_claim(cfg, evs, against="none"))
    return rows


def _mitigation(cfg: Config, datasets) -> Claim:
    """Paper claim 3: tested when every dataset ran the existing methods."""
    if datasets and all(getattr(ev, "methods", None) for _, ev, _ in datasets):
        from .report_more import mitigation_claim

        return mitigation_claim(cfg, [(k, ev) for k, ev, _ in datasets])
    return Claim(PAPER, "No existing method effectively mitigates charge imbalance (\"no "
                 "existing methods can effectively mitigate this limitation\")", "",
                 "not tested", "",
                 "no existing method (rejection sampling, post-hoc repair, an "
                 "oxidation-state filter) was run in this evaluation")


def ablation_table(ev: Evaluation) -> str:
    """The per-arm metrics and the uniform-random baselines."""
    rows = []
    for name, r in ev.rows.items():
        rows.append([name, f"{100 * r.balanced:.0f}%", r.abs_charge, r.soft_charge,
                     f"{100 * r.density_error:.1f}%", r.composition_l1,
                     f"{100 * r.valid:.0f}%", r.rdf_l1, r.oto_l1, r.tot_l1,
                     f"{100 * r.min_dist_violation:.0f}%", r.close_pairs,
                     r.ms_per_cell])
    b = ev.baselines
    for label, rdf, oto, tot, viol, pairs in (
            ("(uniform random positions)", b.rdf_l1_random, b.oto_l1_random,
             b.tot_l1_random, b.min_dist_violation_random, b.close_pairs_random),
            ("(uniform random positions + FIRE relaxation)", b.rdf_l1_random_relaxed,
             b.oto_l1_random_relaxed, b.tot_l1_random_relaxed,
             b.min_dist_violation_random_relaxed, b.close_pairs_random_relaxed)):
        rows.append([label, "", "", "", "", "", "", rdf, oto, tot, f"{100 * viol:.0f}%",
                     pairs, ""])
    return markdown_table(["arm", "balanced", "mean abs charge (e)",
                           "mean abs charge of final p (e)", "density error",
                           "composition L1", "valid composition", "RDF L1",
                           "O-T-O angle L1", "T-O-T angle L1",
                           "cells with d < 1 A", "pairs d < 1 A per cell",
                           "ms per cell"], rows)


def _property_steering(ev: Evaluation) -> list[Claim]:
    """Inverse design on properties (extension rows): after relaxation at the target's
    pressure, the AMGenC cells' density and former O coordination are closer to their
    own target's than to the other held-out targets' (paired per cell, margin 0, fixed):
    the condition, not the data's average, sets the property."""
    am = (ev.design or {}).get(AMGENC_ARM)
    if am is None:
        return []
    d = am.per_cell
    rows = []
    for prop, own, other, unit in (("density", d.density_error, d.density_other,
                                    "relative density error"),
                                   ("network-former O coordination", d.former_cn_error,
                                    d.former_cn_other, "coordination error")):
        if other is None:
            continue
        x = np.asarray(other, float) - np.asarray(own, float)
        rows.append(Claim.from_verdict(
            PAPER, f"Inverse design on properties: the generated cells' {prop} follows its "
            "target (own target closer than the other held-out targets)",
            stats.superiority(x[np.isfinite(x)]),
            note=f"per-cell {unit} after relaxation at the target's pressure, to the other "
            "targets (mean) - to the own target (AMGenC arm), margin 0", kind="extension"))
    return rows


def conditioning_table(ev: Evaluation) -> str:
    """Composition L1 to the own and the other targets, per arm."""
    rows = [[name, c.own, c.other, "" if c.in_range is None else c.in_range,
             "" if c.out_of_range is None else c.out_of_range]
            for name, c in ev.conditioning.items()]
    return markdown_table(["arm", "composition L1 to own target",
                           "to the other held-out targets", "own, targets in range",
                           "own, targets outside the training range"], rows)


def plausibility_table(ev: Evaluation) -> str:
    """Per arm: share of cells without a pair under 1 A, and each partial-RDF and
    bond-angle distance to the own target as a multiple of the twin distance (target:
    <= 2; the twin row gives the twin distances themselves)."""
    names = [*PL.PARTIALS, *PL.ANGLES]
    rows = []
    for name, p in ev.plausibility.items():
        if name == "twin":
            cells = [f"{p.twin[n]:.3f}" if np.isfinite(p.twin[n]) else "" for n in names]
        else:
            cells = [(f"{p.ratio[n]:.2f}x" + ("" if p.meets[n] else " (fails)"))
                     if np.isfinite(p.ratio[n]) else "" for n in names]
        rows.append([name, f"{100 * p.no_close_pair:.0f}%", *cells,
                     "yes" if p.all_met else "no"])
    return markdown_table(["cells", "no pair < 1 A", *[f"{n} RDF" for n in PL.PARTIALS],
                           *[f"{n} angles" for n in PL.ANGLES], "all targets met"], rows)


def _toy(cfg: Config) -> str:
    """The potential of the post-relaxation and of the design table, as the text names
    it: the data's own for the toy recipe, else jaxkit's toy potential, said so."""
    if cfg.dataset == "recipe":
        return "the data recipe's pair potential"
    return ("jaxkit's toy pair potential (`jaxkit.amgenc.glass`: fast, not the potential "
            "that made these glasses; the independent judge's rows are the scored ones)")


def design_table(ev: Evaluation) -> str:
    """Design accuracy per arm on the cells relaxed at the recipe's pressure: each
    error's mean over the cells with its 95% t interval."""
    def cell(v, pct=False):
        mean, half = stats.t_interval(v)
        f = (lambda v: f"{100 * v:.1f}%") if pct else (lambda v: f"{v:.3g}")
        return f(mean) + ("" if not math.isfinite(half) or half == 0
                          else f" [{f(mean - half)}, {f(mean + half)}]")

    rows = [[name, cell(d.per_cell.density_error, True), cell(d.per_cell.composition_l1),
             cell(d.per_cell.former_cn_error)] for name, d in ev.design.items()]
    return markdown_table(["cells", "density error (relaxed at the target's pressure)",
                           "composition L1", "former coordination error"], rows)


def scale_text(scale: Scale) -> str:
    """The large-cell throughput paragraph (:mod:`jaxkit.amgenc.scale`)."""
    return (f"Scale: {scale.n_cells} cells of {scale.n_atoms} atoms sampled in one batch split "
            f"over {scale.devices} device(s), {scale.steps} noise levels, all three mechanisms: "
            f"{scale.seconds:.2f} s steady state (median of {len(scale.times)} timed call(s) of "
            "the sampler compiled ahead), "
            f"**{scale.cells_per_second:.2f} cells per second**; "
            f"{100 * scale.no_close_pair:.0f}% of them have no pair under 1 A, "
            f"{100 * scale.balanced:.0f}% are exactly charge balanced.")


def _ci(ci, fmt: str = "") -> str:
    """A verdict's estimate and interval with ``fmt``, or (no ``fmt``) an interval
    ``(lo, hi)`` in percent."""
    if fmt:
        v = ci
        return fmt.format(v.estimate) + ("" if math.isnan(v.lo) else
                                        f" [{fmt.format(v.lo)}, {fmt.format(v.hi)}]")
    lo, hi = ci
    return "n/a" if not np.isfinite(lo) else f"[{100 * lo:+.1f}%, {100 * hi:+.1f}%]"


def _data_text(cfg: Config, data: Data) -> str:
    """Where the cells came from: the user's files or the generator that made them."""
    made = (f"`jaxkit.amgenc.glass`, the toy pair potential, {cfg.relax_steps} melt-quench "
            f"+ {cfg.min_steps} FIRE steps" if cfg.dataset == "recipe" else
            f"`jaxkit.amgenc.melt_quench`, molecular dynamics with the published "
            f"potentials (BKS for silica, Pedone 2006 otherwise), {cfg.md_steps} steps")
    parts = []
    for label, path, cells in (("training", cfg.user_train, data.train),
                               ("held-out", cfg.user_test, data.test)):
        parts.append(f"{len(cells)} {label} cells from your file `{path}`" if path else
                     f"{len(cells)} {label} `{cfg.kind}` glass cells of {cfg.n_atoms[0]}-"
                     f"{cfg.n_atoms[1]} atoms ({made})")
    return " and ".join(parts)


def _pcts(rows: list[ArmRow]) -> str:
    return ", ".join(f"{100 * r.balanced:.0f}%" for r in rows)


def markdown(cfg: Config, *, quick: bool, seed: int, data: Data, trained: Trained,
             samples: Samples, ev: Evaluation, files: list[Path]) -> str:
    """The report section."""
    _, q = M.species_charges()
    b, ov, rows = ev.baselines, ev.overhead, ev.rows
    raw = raw_targets(data.test, q.size, cn=trained.norm.with_cn)
    bad = trained.norm.outside(raw)
    out_what = [f"target {t}: " + ", ".join("density" if j == 0 else "former coordination"
                                           if j == q.size + 1 else
                                           f"x({glass.ELEMENTS[j - 1]})"
                                           for j in np.flatnonzero(bad[t]))
                for t in b.outside_targets]
    rel, gen = rows[RELAXED], rows[AMGENC_ARM]
    comp = rows[COMPOSITION_ARM]
    disc_rows = [rows[n] for n, _, _, d in ARMS if d] + [comp]
    nodisc_rows = [rows[n] for n, _, _, d in ARMS if not d]
    all_ok = all(r.balanced == 1.0 for r in disc_rows)
    c_all = ev.conditioning[AMGENC_ARM]
    cond_cn = ", network-former O coordination" if trained.norm.with_cn else ""
    steers = c_all.own < c_all.other
    n_cells = rows["none"].n_cells
    resumed = ("" if trained.resumed_from == 0 else
               f", restored from the checkpoint of step {trained.resumed_from}")
    md = [
        f"Mode: {'quick' if quick else 'full'}; seed {seed}. Data: {_data_text(cfg, data)}"
        ". Model: periodic E(3)-invariant graph denoiser "
        "(wrapped-Gaussian position noise, element flow), "
        f"hidden {cfg.hidden}, {cfg.layers} layers, {cfg.k_nbr} nearest neighbours; "
        f"{cfg.train_steps} Adam steps (batch {cfg.batch}, {trained.seconds:.1f} s"
        f"{resumed}, final loss {np.mean(trained.losses[-20:]):.3f}). Sampling: {n_cells} "
        f"cells per arm ({cfg.samples_per_target} per held-out target, with its atom count, "
        f"box, density{cond_cn} and element fractions as the condition), "
        f"{cfg.sample_steps} "
        f"reverse-SDE noise levels with {cfg.corrector_steps} Langevin corrector step(s) "
        f"each, soft projection of the {cfg.soft_target} channels with "
        f"eta = {cfg.soft_eta}. {len(out_what)} of {len(data.test)} held-out targets lie "
        "outside the training range of density, of some element fraction or of the "
        "former coordination "
        f"(extrapolation; flagged, not refused{': ' + '; '.join(out_what) if out_what else ''}"
        "; their cells carry `extrapolated=1` in the XYZ comment).", "",
        ablation_table(ev), "",
        f"The row `{RELAXED}` is post-processing, not generation: the AMGenC cells after "
        f"{cfg.post_relax_steps} FIRE steps of {_toy(cfg)} (species "
        "unchanged, so charge balance and composition are kept). It takes cells with a pair "
        f"under {MIN_DISTANCE} A from {100 * gen.min_dist_violation:.0f}% to "
        f"{100 * rel.min_dist_violation:.0f}% and the RDF L1 from {gen.rdf_l1:.2f} to "
        f"{rel.rdf_l1:.2f}; the same relaxation from uniformly random positions (with the "
        f"reference species) reaches {b.rdf_l1_random_relaxed:.2f}, so "
        + ("most of that structure comes from the relaxation, not from the generator"
           if b.rdf_l1_random_relaxed < 1.5 * max(rel.rdf_l1, 1e-9) else
           "the generated starting points do help")
        + ". Bond angles: L1 distance between the pooled angle distributions (5-degree "
        f"bins, neighbours within {ANGLE_CUTOFF} A, T = Si, B, Al, P) of the generated and "
        "the held-out cells; 0 is identical, 2 disjoint.", "",
        f"The row `{COMPOSITION_ARM}` keeps the AMGenC trajectories and replaces the final "
        "projection by the exact fixed-composition projection (`charge.project_composition`"
        ": the target's element counts, cheapest placement of them on the generated "
        f"channels): composition L1 {comp.composition_l1:.3f} (vs "
        f"{gen.composition_l1:.3f} free), {100 * comp.balanced:.0f}% balanced, RDF L1 "
        f"{comp.rdf_l1:.2f}; its projection took "
        f"{1e3 * samples.arms[COMPOSITION_ARM].discrete_seconds:.1f} ms for all {n_cells} "
        "cells (one compiled solve per target).", "",
        "Property conditioning: each cell is sampled for one held-out target (its box, "
        f"density{cond_cn} and element fractions). If the condition steers the model, a cell's "
        "composition is closer to its own target than to the other held-out targets:", "",
        conditioning_table(ev), "",
        f"With all three mechanisms the composition L1 to the own target is "
        f"{c_all.own:.3f} against {c_all.other:.3f} to the other targets: on average "
        f"the conditioning {'does' if steers else 'does NOT'} steer the composition (the "
        "claims table tests the per-cell difference).", "",
        f"Charge balance: with the final discrete projection {_pcts(disc_rows)} of cells are "
        f"exactly balanced ({'as guaranteed' if all_ok else 'NOT all: see warnings'}); "
        f"without it {_pcts(nodisc_rows)}. The soft projection takes the mean |charge| of "
        f"the final probabilities from {rows['none'].soft_charge:.2f} e (none) to "
        f"{rows['soft only'].soft_charge:.2f} e (soft only), but the argmax of rows that "
        "are not confident does not follow it (mean |charge| after argmax "
        f"{rows['none'].abs_charge:.1f} e vs {rows['soft only'].abs_charge:.1f} e): "
        "only the discrete projection gives exact balance.",
        "Projection overhead (steady state, sampling of a timing batch of "
        f"{samples.timing_cells or n_cells} of the sampled cells around the median size "
        f"(padded to {samples.timing_atoms or samples.mask.shape[1]} atoms), split over the "
        f"mesh, {cfg.timing_runs} timing rounds, every arm once per round; medians): soft "
        f"projection {100 * ov.soft:+.1f}% of sampling time (95% interval of the paired "
        f"per-round overhead {_ci(ov.soft_ci)}), all three {100 * ov.soft_all:+.1f}% "
        f"({_ci(ov.soft_all_ci)}); an interval that contains 0 means the cost is within "
        "the timing noise. The final discrete projection adds "
        f"{100 * ov.discrete:.1f}% of the unprojected sampling time.", "",
        "Plausibility before any relaxation (`jaxkit.amgenc.plausibility`): each generated "
        "cell against its own target, as a multiple of the distance between the target "
        "and its twin (a second cell of the same composition made the same way, other "
        "seed); targets: >= 90% of "
        "cells without a pair under 1 A and every distance <= 2x the twin's. T: network "
        "formers, M: modifiers; RDF distances over r <= "
        f"{b.r_max:.1f} A.", "",
        plausibility_table(ev), "",
        "Design accuracy from the generated structure: every cell relaxed at its target's "
        f"pressure by {_toy(cfg)} (the held-out cell's virial pressure under it; "
        f"{cfg.pressure_steps} FIRE steps per box-rescaling round, `jaxkit.amgenc.design`), "
        "then its density against the target density, its element fractions, and the mean "
        "O coordination of its network formers against the target's. The twin row is the "
        "noise floor of the data (same composition, other seed).", "",
        design_table(ev), "",
        f"Honest caveats: this is a tiny CPU model trained for {cfg.train_steps} steps on "
        f"{cfg.n_train} cells, so generated *coordinates* are poor: the RDF L1 distance to "
        f"the held-out reference (r <= {b.r_max:.1f} A) should be read against uniformly "
        f"random positions ({b.rdf_l1_random:.2f}), and "
        f"{100 * b.min_dist_violation_random:.0f}% of random cells (vs "
        f"{100 * b.min_dist_violation_reference:.0f}% of reference cells) have a pair "
        f"closer than {MIN_DISTANCE} A. The density error of the first table uses the target "
        "box, so it measures only the generated composition's mass; the design-accuracy "
        "table relaxes the box. Valid composition: balanced, has O and a "
        "network former, O/cation ratio inside the training range.", "",
        "Generated cells (extended XYZ and CIF, written with ase): "
        + ", ".join(f"`{p.name}`" for p in files) + ".",
    ]
    return "\n".join(md)
