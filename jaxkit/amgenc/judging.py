"""Plausibility and design accuracy of the generated cells as the independent judge sees
them (:mod:`jaxkit.amgenc.judge`): the scores the paper rows use (issue 64, part 2).

For the held-out targets, their twins, the judged arms (:data:`JUDGED_ARMS`), the
post-hoc repair's cells (:mod:`jaxkit.amgenc.baselines`) and uniformly random positions
with each target's species:

* **energy**: the judged energy per atom before and after ``cfg.judge_steps`` FIRE steps
  at the fixed box, as the excess over the judge-relaxed twin of the cell's target
  (eV/atom, the median over the cells; the twin's own row is its unrelaxed excess);
* **plausibility** (:func:`jaxkit.amgenc.plausibility.plausibility`): before relaxation,
  raw cells against raw targets with the raw twins as the yardstick; after, the same
  with every cell (generated, target and twin) relaxed by the judge at its box;
* **design accuracy**: each cell relaxed by the judge at its target's judged pressure
  (the target relaxed at its own box by the judge; ``cfg.judge_rounds`` rounds of
  ``cfg.judge_steps`` FIRE steps and a box rescaling): its density against the target's,
  the mean O coordination of its network formers against the judge-relaxed target's,
  and the composition (no relaxation changes it). The twin row is the noise floor.

A cell the judge has no parameters for (B under Pedone, Ba or Zn under Teter) is NaN in
every quantity and counted in ``judged`` (the share that was scored). A composite judge
(``"pedone+teter"``) scores each cell with the member that has parameters for its
target's species (:func:`jaxkit.amgenc.judge.judge_cells`' ``targets``), so a generated
cell, its target and the twin meet the same potential.
"""

from __future__ import annotations

import numpy as np

from . import judge as J
from . import plausibility as PL
from .baselines import METHODS
from .config import Config
from .data import Data
from .design import former_cn
from .evaluate import R_MAX, box_of
from .results import (
    DesignAccuracy,
    DesignCells,
    Evaluation,
    JudgedRow,
    JudgeRelaxation,
    JudgeScores,
    MethodDraws,
)
from .sample import AMGENC_ARM, BASELINE_ARM, NOISE_ARM, Samples
from .tables import box_edges, is_cubic

__all__ = ["JUDGED_ARMS", "REPAIR", "RANDOM", "relaxation_text", "judge_evaluation"]

#: the sampled arms the judge scores (the others are the ablation's intermediate arms),
#: and the separately trained baseline's where it was sampled
JUDGED_ARMS = ("none", NOISE_ARM, AMGENC_ARM, BASELINE_ARM)
REPAIR = METHODS[2]
RANDOM = "uniform random positions"


def relaxation_text(name: str, steps: int, rounds: int) -> JudgeRelaxation:
    """The relaxation each judged quantity used, stated per row."""
    return JudgeRelaxation(
        plausibility=f"{name}: {steps} FIRE steps at the fixed box",
        design=f"{name}: {rounds} rounds x {steps} FIRE steps with box rescaling to the "
               "target's judged pressure")


def _cells_of(samples: Samples, species: np.ndarray, x: np.ndarray) -> list:
    out = []
    for i in range(samples.mask.shape[0]):
        m = samples.mask[i]
        box = box_of(samples.box[i])
        out.append((x[i][m] * box, box, species[i][m]))
    return out


def _edge(box):
    """A box as the analysis takes it: a float when cubic, else the (3,) edges."""
    e = box_edges(box)
    return float(e[0]) if is_cubic(e) else e


def judge_evaluation(cfg: Config, data: Data, samples: Samples, ev: Evaluation,
                     methods: dict[str, MethodDraws], rng: np.random.Generator
                     ) -> JudgeScores:
    """The judge's scores (module docstring).

    Args:
        cfg: the settings (``dataset``, ``kind``, ``judge``, ``judge_steps``,
            ``judge_rounds``).
        data: targets (``data.test``) and twins.
        samples: the sampled arms.
        ev: the evaluation (its per-cell composition errors are reused).
        methods: :func:`jaxkit.amgenc.baselines.existing_methods` of these samples.
        rng: the stream of the uniformly random positions.

    Returns:
        :class:`jaxkit.amgenc.results.JudgeScores`: ``name``, ``about``, ``made_by``,
        ``relaxation`` (:func:`relaxation_text`) and ``rows``: per cell set a
        :class:`~jaxkit.amgenc.results.JudgedRow`, ``judged`` (share scored),
        ``energy_before`` and ``energy_after`` (median excess over the twin, eV/atom: a
        cell with fused atoms is 1e5 eV/atom above it before relaxation) with their
        per-cell arrays, ``plausibility_before`` / ``plausibility_after`` and ``design``
        (mean ``density_error``, ``composition_l1``, ``former_cn_error`` and
        ``per_cell``).
    """
    name = J.judge_name(cfg.dataset, cfg.kind, cfg.judge)
    steps, rounds = cfg.judge_steps, cfg.judge_rounds
    tests, twins = data.test, data.twins or data.test
    n_t = len(tests)
    t_all = np.arange(n_t)
    tgt = J.judge_cells(name, [(c.positions, c.box, c.elements) for c in tests], steps=steps)
    p_t = np.nan_to_num(tgt.pressure)
    r_max = min(R_MAX, 0.5 * min(float(box_edges(c.box).min()) for c in tests))

    def struct(pos, box, el):
        return PL.structure(pos, _edge(box), el, r_max)

    ref_raw = [struct(c.positions, c.box, c.elements) for c in tests]
    ref_rel = [struct(tgt.relaxed[t], tests[t].box, tests[t].elements)
               if tgt.judged[t] else ref_raw[t] for t in t_all]
    tgt_cn = np.array([former_cn(tgt.relaxed[t], tests[t].box, tests[t].elements)
                       if tgt.judged[t] else np.nan for t in t_all])
    tw_cells = [(c.positions, c.box, c.elements) for c in twins]
    tw = J.judge_cells(name, tw_cells, steps=steps, rounds=rounds, p_target=p_t,
                       targets=[c.elements for c in tests])
    tw_raw = [struct(*c) for c in tw_cells]
    tw_rel = [struct(tw.relaxed[t], twins[t].box, twins[t].elements)
              if tw.judged[t] else tw_raw[t] for t in t_all]
    e_twin = tw.e_after

    sets = {}
    for arm in (a for a in JUDGED_ARMS if a in samples.arms):
        a = samples.arms[arm]
        sets[arm] = (_cells_of(samples, a.species, a.x), samples.target_index,
                     ev.per_cell[arm].composition_l1)
    rep = methods[REPAIR]
    ok = rep.delivered > 0
    rep_cells = [c for c, k in zip(_cells_of(samples, rep.species,
                                              samples.arms["none"].x), ok, strict=True) if k]
    sets[REPAIR] = (rep_cells, samples.target_index[ok], rep.composition_l1[ok])
    rand = [(rng.uniform(0, c.box, (c.n_atoms, 3)), c.box, c.elements) for c in tests]
    sets[RANDOM] = (rand, t_all, np.zeros(n_t))

    rows = {"twin": _row(tw, tw_cells, t_all, np.zeros(n_t), e_twin, tests, tgt_cn,
                         (tw_raw, ref_raw, tw_raw), (tw_rel, ref_rel, tw_rel))}
    for label, (cells, t_idx, comp) in sets.items():
        res = J.judge_cells(name, cells, steps=steps, rounds=rounds, p_target=p_t[t_idx],
                            targets=[tests[t].elements for t in t_idx])
        gen_raw = [struct(*c) for c in cells]
        gen_rel = [struct(res.relaxed[i], c[1], c[2]) if res.judged[i] else gen_raw[i]
                   for i, c in enumerate(cells)]
        rows[label] = _row(res, cells, t_idx, comp, e_twin, tests, tgt_cn,
                           (gen_raw, ref_raw, tw_raw), (gen_rel, ref_rel, tw_rel))
    return JudgeScores(name=name, about=J.JUDGES[name][0],
                       made_by=J.MADE_BY[(cfg.dataset, cfg.kind)],
                       relaxation=relaxation_text(name, steps, rounds), rows=rows,
                       targets_judged=float(tgt.judged.mean()) if n_t else float("nan"))


def _nanmedian(v) -> float:
    v = np.asarray(v, float)
    return float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan")


def _row(res: J.JudgeResult, cells, t_idx, comp, e_twin, tests, tgt_cn, before,
         after) -> JudgedRow:
    """One cell set's judged scores (see :func:`judge_evaluation`)."""
    t_idx = np.asarray(t_idx, int)
    n = len(cells)
    e_b = res.e_before - e_twin[t_idx] if n else np.zeros(0)
    e_a = res.e_after - e_twin[t_idx] if n else np.zeros(0)
    dens, cn = np.full(n, np.nan), np.full(n, np.nan)
    for i, (_, _, el) in enumerate(cells):
        if res.at_pressure[i] is None:
            continue
        rho_t = tests[t_idx[i]].density
        dens[i] = abs(res.density(i, el) - rho_t) / rho_t
        x, b = res.at_pressure[i]
        cn[i] = abs(former_cn(x, _edge(b), el) - tgt_cn[t_idx[i]])
    comp = np.where(res.judged, np.asarray(comp, float), np.nan) if n else np.zeros(0)
    keep = res.judged if n else np.zeros(0, bool)

    def plaus(gen, ref, twin):
        sub = [g for g, k in zip(gen, keep, strict=True) if k]
        if not sub:
            return None
        return PL.plausibility(sub, t_idx[keep], ref, twin)

    return JudgedRow(
        judged=float(np.mean(keep)) if n else float("nan"), n=n,
        energy_before=_nanmedian(e_b), energy_after=_nanmedian(e_a),
        energy_before_cells=e_b, energy_after_cells=e_a,
        plausibility_before=plaus(*before), plausibility_after=plaus(*after),
        design=DesignAccuracy.from_cells(DesignCells(density_error=dens, composition_l1=comp,
                                                     former_cn_error=cn)),
        target_index=t_idx, judged_target_index=t_idx[keep])
