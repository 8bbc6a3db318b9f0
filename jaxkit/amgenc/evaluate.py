"""Metrics of the AMGenC ablation, per arm and per cell.

*balanced*: the integer sum of species charges is exactly 0; *|charge|*: mean absolute
total charge (e); *density error*: mean |rho - rho_target| / rho_target with ``rho`` the
mass of the generated species over the target box volume; *composition error*: mean L1
distance between generated and target element fractions; *valid composition*: balanced,
contains O and a network former (Si, B, Al, P), and its O/cation ratio lies within the
training range; *RDF L1*: integral of |g_gen(r) - g_ref(r)| over r in (0, r_max] between
the mean total g(r) of the generated and of the held-out cells (per cell: that cell's
g(r) against the same reference); *angle L1*: the same for the pooled O-T-O and T-O-T
bond-angle distributions; *d < 1 A*: share of cells with an interatomic distance below
1.0 A, and pairs per cell; *|charge| of final p*: mean |sum_i q . p_i| of the final
channels' probabilities (before argmax / discrete projection); *ms per cell*:
steady-state sampling time per cell.
"""

from __future__ import annotations

import math
import time

import numpy as np

from jaxkit import stats

from . import design, glass
from . import model as M
from . import plausibility as PL
from .config import Config
from .data import Data, Norm, element_fractions, raw_targets
from .results import (
    ArmCells,
    ArmRow,
    Baselines,
    Conditioning,
    Curves,
    DesignAccuracy,
    DesignCells,
    Evaluation,
    Overhead,
)
from .sample import AMGENC_ARM, Samples

__all__ = ["FORMER_SYMBOLS", "MIN_DISTANCE", "R_MAX", "ANGLES", "ANGLE_CUTOFF",
           "RELAXED", "relax_cells", "evaluate", "box_of"]

FORMER_SYMBOLS = ("Si", "B", "Al", "P")
MIN_DISTANCE = 1.0  # A
R_MAX = 5.0  # A, RDF range (at most half the smallest box)
#: bond angles compared with the reference: (centre elements, neighbour elements); T is
#: a network former. O-T-O is the intra-polyhedron angle (109.5 deg for SiO4), T-O-T the
#: inter-polyhedron (bridging) angle.
ANGLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "O-T-O": (FORMER_SYMBOLS, ("O",)), "T-O-T": (("O",), FORMER_SYMBOLS)}
ANGLE_CUTOFF = 2.0  # A: T-O bonds (1.37-1.75 A in the recipe) but no O-O or T-T pairs
RELAXED = f"{AMGENC_ARM} + FIRE relaxation"


def box_of(row):
    """One sampled cell's box: its cubic edge as a float, or its (3,) edges."""
    row = np.asarray(row, np.float64)
    return float(row) if row.ndim == 0 else row


def _rdf_l1(g: np.ndarray, g_ref: np.ndarray, dr: float) -> float:
    return float(np.sum(np.abs(g - g_ref)) * dr)


def _mean_rdf(cells: list[tuple[np.ndarray, float]], r_max: float, n_bins: int = 50):
    gs = [glass.rdf(pos, box, r_max=r_max, n_bins=n_bins) for pos, box in cells]
    return gs[0][0], np.mean([g for _, g in gs], axis=0), [g for _, g in gs]


def _pairs_below(pos: np.ndarray, box: float, cut: float) -> int:
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.rint(d / box)
    r = np.sqrt(np.einsum("ijk,ijk->ij", d, d))
    return int((np.triu(r < cut, 1)).sum())


def _angle_l1(cells, ref: dict) -> dict:
    """Bond-angle distribution L1 distances of ``cells`` ((positions, box, elements)
    each) to the reference densities ``ref`` (see :data:`ANGLES`), keyed by angle name;
    also each angle's density (``NAME density``) and the bin centres (``degrees``)."""
    out = {}
    for name, (centre, nbr) in ANGLES.items():
        x, dens, n = glass.angle_distribution(cells, centre, nbr, cutoff=ANGLE_CUTOFF)
        out[name] = glass.distribution_l1(x, dens, ref[name]) if n else float("nan")
        out[name + " density"] = dens
        out["degrees"] = x
    return out


def overhead_intervals(samples: Samples) -> dict:
    """Paired per-round overheads of the soft projection (``soft only`` and AMGenC over
    ``none``, the same timing round) with 95 % intervals, as keyword arguments of
    :class:`jaxkit.amgenc.results.Overhead`: ``<name>_runs`` (per-round relative extra
    time) and ``<name>_ci`` (95 % t interval of their mean; NaN with fewer than 2
    rounds)."""
    base = np.asarray(samples.arms["none"].ode_times, float)
    out = {}
    for key, name in (("soft", "soft only"), ("soft_all", AMGENC_ARM)):
        runs = np.asarray(samples.arms[name].ode_times, float) / base - 1.0
        out[f"{key}_runs"] = runs.tolist()
        if runs.size >= 2:
            mean, half = stats.t_interval(runs)
            out[f"{key}_ci"] = (mean - half, mean + half)
        else:
            out[f"{key}_ci"] = (math.nan, math.nan)
    return out


def relax_cells(cfg: Config, samples: Samples, arm: str) -> tuple[np.ndarray, float]:
    """FIRE-minimised positions (fractional, the layout of the arm's ``x``) of every cell
    of ``arm`` with the pair potential of the data recipe (post-processing; species
    unchanged), and the seconds it took."""
    a = samples.arms[arm]
    x = np.array(a.x, dtype=np.float64)
    t0 = time.perf_counter()
    for i in range(x.shape[0]):
        m = samples.mask[i]
        box = box_of(samples.box[i])
        pos, _ = glass.minimize(x[i][m] * box, box, a.species[i][m],
                                steps=cfg.post_relax_steps)
        x[i][m] = pos / box
    return x, time.perf_counter() - t0


def evaluate(cfg: Config, data: Data, samples: Samples, norm: Norm, rng: np.random.Generator,
             relaxed: dict | None = None) -> Evaluation:
    """Per-arm and per-cell metrics (see the module docstring), the RDF and angle curves,
    the conditioning check, the uniform-random baselines (positions drawn from ``rng``)
    and, for each arm in ``relaxed`` (name -> (positions, seconds)), the same metrics
    after FIRE post-relaxation."""
    _, q = M.species_charges()
    k = q.size
    formers = [glass.ELEMENTS.index(s) for s in FORMER_SYMBOLS]
    o = glass.ELEMENTS.index("O")
    oc = lambda f: f[o] / max(1 - f[o], 1e-9)  # noqa: E731
    train_oc = [oc(element_fractions(c.elements, k)) for c in data.train]
    oc_lo, oc_hi = min(train_oc), max(train_oc)
    r_max = min(R_MAX, 0.5 * min(float(glass.box_edges(c.box).min()) for c in data.test))
    r, g_ref, _ = _mean_rdf([(c.positions, c.box) for c in data.test], r_max)
    dr = r[1] - r[0]
    ref_cells = [(c.positions, c.box, c.elements) for c in data.test]
    ref_angles = {name: glass.angle_distribution(ref_cells, centre, nbr,
                                                 cutoff=ANGLE_CUTOFF)[1]
                  for name, (centre, nbr) in ANGLES.items()}
    struct = lambda pos, box, el: PL.structure(pos, box, el, r_max)  # noqa: E731
    ref_s = [struct(c.positions, c.box, c.elements) for c in data.test]
    twins = data.twins or data.test  # old data without twins: distance 0 (flagged NaN)
    twin_s = [struct(c.positions, c.box, c.elements) for c in twins]
    p_target = np.array([design.pressure(c.positions, c.box, c.elements)
                         for c in data.test])
    tgt_cn = np.array([design.former_cn(c.positions, c.box, c.elements) for c in data.test])
    t_all = np.arange(len(data.test))
    tgt_rho = np.array([c.density for c in data.test])

    def accuracy(cells, t_idx, comp_l1):
        relaxed = design.relax_at_pressure([(p, b, el) for p, b, el in cells],
                                           p_target[t_idx], steps=cfg.pressure_steps)
        props = [design.properties(p, b, el) for (p, b, _), (_, _, el)
                 in zip(relaxed, cells, strict=True)]
        dens = np.array([abs(pr.density - data.test[t].density) / data.test[t].density
                         for pr, t in zip(props, t_idx, strict=True)])
        cn = np.array([abs(pr.former_cn - tgt_cn[t]) for pr, t in zip(props, t_idx,
                                                                     strict=True)])
        # the same errors against every other held-out target (the condition's control)
        others = [np.delete(t_all, t) for t in t_idx]
        dens_o = np.array([np.mean(np.abs(pr.density - tgt_rho[o]) / tgt_rho[o])
                           if len(o) else np.nan for pr, o in zip(props, others, strict=True)])
        cn_o = np.array([PL._nanmean(np.abs(pr.former_cn - tgt_cn[o])) if len(o)
                         else np.nan for pr, o in zip(props, others, strict=True)])
        comp_l1 = np.asarray(comp_l1, float)
        return DesignAccuracy(
            density_error=float(np.mean(dens)), composition_l1=float(comp_l1.mean()),
            former_cn_error=PL._nanmean(cn),
            per_cell=DesignCells(density_error=dens, composition_l1=comp_l1,
                                 former_cn_error=cn, density_other=dens_o,
                                 former_cn_other=cn_o))

    plaus, acc = {}, {}
    plaus["twin"] = PL.plausibility(twin_s, t_all, ref_s, twin_s)
    acc["twin"] = accuracy([(c.positions, c.box, c.elements) for c in twins], t_all,
                           np.zeros(len(twins)))
    rand = [(rng.uniform(0, c.box, (c.n_atoms, 3)), c.box) for c in data.test]
    _, g_rand, g_rand_each = _mean_rdf(rand, r_max)
    test_f = np.array([element_fractions(c.elements, k) for c in data.test])
    outside = np.any(norm.outside(raw_targets(data.test, k, cn=norm.with_cn)), axis=1)
    rows, per_cell, cond = {}, {}, {}
    curves, angle_curves = {}, {}  # per arm
    runs = [(name, arm, arm.x, arm.seconds) for name, arm in samples.arms.items()]
    for name, (x_rel, sec) in (relaxed or {}).items():
        runs.append((f"{name} + FIRE relaxation", samples.arms[name], x_rel,
                     samples.arms[name].seconds + sec))
    for name, arm, xs, seconds in runs:
        balanced, charges, dens_err, comp_err, comp_other, valid, viol, pairs, cells = (
            [] for _ in range(9))
        for i, t in enumerate(samples.target_index):
            target = data.test[t]
            m = samples.mask[i]
            sp = arm.species[i][m]
            box = box_of(samples.box[i])
            pos = xs[i][m] * box
            ok = bool(np.all(sp >= 0))
            tot = int(q[np.maximum(sp, 0)].sum()) if ok else math.inf
            balanced.append(ok and tot == 0)
            charges.append(abs(tot))
            rho = glass.mass_density(np.maximum(sp, 0), box)
            dens_err.append(abs(rho - target.density) / target.density)
            f = element_fractions(sp, k)
            dist = np.abs(test_f - f).sum(axis=1)
            comp_err.append(dist[t])
            comp_other.append(np.delete(dist, t).mean() if len(dist) > 1 else np.nan)
            valid.append(balanced[-1] and f[o] > 0 and f[formers].sum() > 0
                         and oc_lo - 1e-9 <= oc(f) <= oc_hi + 1e-9)
            n_bad = _pairs_below(pos, box, MIN_DISTANCE)
            viol.append(n_bad > 0)
            pairs.append(n_bad)
            cells.append((pos, box, np.maximum(sp, 0)))
        _, g, g_each = _mean_rdf([c[:2] for c in cells], r_max)
        curves[name] = g
        plaus[name] = PL.plausibility([struct(*c) for c in cells], samples.target_index,
                                      ref_s, twin_s)
        if name in samples.arms:
            acc[name] = accuracy(cells, samples.target_index, comp_err)
        n = len(balanced)
        ang = _angle_l1(cells, ref_angles)
        angle_curves[name] = ang["O-T-O density"]
        rows[name] = ArmRow(
            balanced=float(np.mean(balanced)), abs_charge=float(np.mean(charges)),
            soft_charge=float(np.mean(arm.soft_charge)),
            density_error=float(np.mean(dens_err)), composition_l1=float(np.mean(comp_err)),
            valid=float(np.mean(valid)), rdf_l1=_rdf_l1(g, g_ref, dr),
            oto_l1=ang["O-T-O"], tot_l1=ang["T-O-T"],
            min_dist_violation=float(np.mean(viol)), close_pairs=float(np.mean(pairs)),
            ms_per_cell=1e3 * seconds / n, n_cells=n)
        per_cell[name] = ArmCells(
            balanced=np.array(balanced, float), soft_charge=np.asarray(arm.soft_charge),
            composition_l1=np.array(comp_err), composition_other=np.array(comp_other),
            valid=np.array(valid, float),
            rdf_l1=np.array([_rdf_l1(gi, g_ref, dr) for gi in g_each]))
        out_cell = outside[samples.target_index]
        ce = np.array(comp_err)
        cond[name] = Conditioning(
            own=float(ce.mean()), other=float(np.nanmean(comp_other)),
            in_range=float(ce[~out_cell].mean()) if (~out_cell).any() else None,
            out_of_range=float(ce[out_cell].mean()) if out_cell.any() else None)
    rand_cells = [(p, b, c.elements) for (p, b), c in zip(rand, data.test, strict=True)]
    rand_ang = _angle_l1(rand_cells, ref_angles)
    plaus["uniform random"] = PL.plausibility([struct(*c) for c in rand_cells], t_all, ref_s,
                                              twin_s)
    # the same post-relaxation from uniformly random positions: how much of the relaxed
    # row's structure the relaxation alone produces
    rand_rel = [(glass.minimize(p, b, el, steps=cfg.post_relax_steps)[0], b, el)
                for p, b, el in rand_cells]
    rand_rel_ang = _angle_l1(rand_rel, ref_angles)
    _, g_rand_rel, _ = _mean_rdf([c[:2] for c in rand_rel], r_max)
    rand_rel_pairs = [_pairs_below(p, b, MIN_DISTANCE) for p, b, _ in rand_rel]
    rand_pairs = [_pairs_below(p, b, MIN_DISTANCE) for p, b in rand]
    ref_pairs = [_pairs_below(c.positions, c.box, MIN_DISTANCE) for c in data.test]
    baselines = Baselines(
        rdf_l1_random=_rdf_l1(g_rand, g_ref, dr),
        random_rdf_l1=np.array([_rdf_l1(gi, g_ref, dr) for gi in g_rand_each]),
        oto_l1_random=rand_ang["O-T-O"], tot_l1_random=rand_ang["T-O-T"],
        rdf_l1_random_relaxed=_rdf_l1(g_rand_rel, g_ref, dr),
        oto_l1_random_relaxed=rand_rel_ang["O-T-O"], tot_l1_random_relaxed=rand_rel_ang["T-O-T"],
        min_dist_violation_random_relaxed=float(np.mean(np.array(rand_rel_pairs) > 0)),
        close_pairs_random_relaxed=float(np.mean(rand_rel_pairs)),
        min_dist_violation_random=float(np.mean(np.array(rand_pairs) > 0)),
        close_pairs_random=float(np.mean(rand_pairs)),
        min_dist_violation_reference=float(np.mean(np.array(ref_pairs) > 0)),
        r_max=float(r_max), outside_targets=[int(i) for i in np.flatnonzero(outside)])
    ode = {name: a.ode_seconds for name, a in samples.arms.items()}
    overhead = Overhead(
        soft=ode["soft only"] / ode["none"] - 1.0,
        soft_all=ode[AMGENC_ARM] / ode["none"] - 1.0,
        discrete=samples.arms["final discrete only"].discrete_seconds / ode["none"],
        **overhead_intervals(samples))
    return Evaluation(
        rows=rows, per_cell=per_cell,
        curves=Curves(x=r, reference=g_ref, random=g_rand, arms=curves),
        angle_curves=Curves(x=rand_ang["degrees"], reference=ref_angles["O-T-O"],
                            random=rand_ang["O-T-O density"], arms=angle_curves),
        baselines=baselines, overhead=overhead, conditioning=cond, plausibility=plaus,
        design=acc)
