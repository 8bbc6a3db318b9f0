"""AMGenC: charge-balanced generation of amorphous oxide cells, with its ablation.

``jaxkit run amgenc [--quick]``. Steps:

1. **Data** (stage ``amgenc-data``): relaxed, charge-balanced multicomponent oxide glass
   cells from :func:`jaxkit.amgenc.glass.generate` (training cells, and held-out cells
   whose properties are the sampling targets and whose structures are the RDF
   reference).
2. **Model** (stage ``amgenc-model``): the periodic E(3)-invariant graph flow model of
   :mod:`jaxkit.amgenc.model`, trained by conditional flow matching (optax Adam) on
   fractional coordinates and element channels, conditioned on the normalised density
   and the element fractions of the cell.
3. **Sampling** (stage ``amgenc-samples``): for each held-out target (its atom count, box
   and properties) cells are sampled with the three AMGenC mechanisms switched on or
   off: (1) charge-balanced element noise, (2) the soft charge projection at every step,
   (3) the final exact discrete projection. Arms: none; final discrete only; soft only;
   all three. Arms share the random keys, so they differ only by the mechanisms. One
   more arm, *all three, at the target composition*, replaces the final projection by
   :func:`jaxkit.kernels.charge.project_composition` with the target's element counts
   (a design that prescribes its composition: the model then only places the elements).
4. **Report**: the ablation table, extended-XYZ files of the generated cells and a PNG
   of radial distribution functions (reference vs generated).

Metrics: *balanced*: the integer sum of species charges is exactly 0; *|charge|*: mean
absolute total charge (e); *density error*: mean |rho - rho_target| / rho_target with
``rho`` the mass of the generated species over the target box volume; *composition
error*: mean L1 distance between generated and target element fractions; *valid
composition*: balanced, contains O and a network former (Si, B, Al, P), and its O/cation
ratio lies within the training range; *RDF L1*: integral of |g_gen(r) - g_ref(r)| over
r in (0, r_max] between the mean total g(r) of the generated and of the held-out cells;
*d < 1 A*: share of cells with an interatomic distance below 1.0 A, and pairs per cell;
*|charge| of final p*: mean |sum_i q . p_i| of the final channels' probabilities
(before argmax / discrete projection; what the soft projection acts on);
*time*: steady-state (compiled) sampling time per cell; *soft overhead*: time with the
soft projection / time without - 1; *discrete overhead*: final discrete projection
time / sampling time without projections.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import PipelineResult, RunContext, register

QUICK: dict[str, Any] = dict(
    kind="multi", n_train=24, n_test=8, n_atoms=(100, 128), relax_steps=600, min_steps=150,
    hidden=32, layers=2, k_nbr=12, train_steps=600, batch=8, lr=3e-3, samples_per_target=2,
    sample_steps=20, method="euler", soft_eta=1.0, soft_target="endpoint",
    balanced_share=0.5, post_relax_steps=150)
FULL: dict[str, Any] = dict(
    kind="multi", n_train=160, n_test=24, n_atoms=(100, 256), relax_steps=3000,
    min_steps=300, hidden=64, layers=3, k_nbr=12, train_steps=3000, batch=16, lr=1e-3,
    samples_per_target=4, sample_steps=50, method="heun", soft_eta=1.0,
    soft_target="endpoint", balanced_share=0.5, post_relax_steps=300)

#: (name, balanced noise, soft projection, final discrete projection)
ARMS: tuple[tuple[str, bool, bool, bool], ...] = (
    ("none", False, False, False),
    ("final discrete only", False, False, True),
    ("soft only", False, True, False),
    ("all three (AMGenC)", True, True, True),
)
# the AMGenC arm again, with the final projection at each target's composition (a design
# that prescribes the element counts): charge.project_composition instead of
# project_discrete
COMPOSITION_ARM = "all three, at the target composition"
FORMER_SYMBOLS = ("Si", "B", "Al", "P")
MIN_DISTANCE = 1.0  # A
R_MAX = 5.0  # A, RDF range (at most half the smallest box)
#: bond angles compared with the reference: (centre elements, neighbour elements); T is
#: a network former. O-T-O is the intra-polyhedron angle (109.5 deg for SiO4), T-O-T the
#: inter-polyhedron (bridging) angle.
ANGLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "O-T-O": (FORMER_SYMBOLS, ("O",)), "T-O-T": (("O",), FORMER_SYMBOLS)}
ANGLE_CUTOFF = 2.0  # A: T-O bonds (1.37-1.75 A in the recipe) but no O-O or T-T pairs
RELAXED_ARM = "all three (AMGenC)"


# ------------------------------------------------------------------------ data


def make_data(S: dict, seed: int) -> dict:
    """Training and held-out cells (lists of :class:`jaxkit.amgenc.glass.Cell`)."""
    from jaxkit.amgenc import glass

    cells = glass.generate(S["kind"], S["n_train"] + S["n_test"], seed=seed,
                           n_atoms=tuple(S["n_atoms"]), steps=S["relax_steps"],
                           min_steps=S["min_steps"])
    return dict(train=cells[:S["n_train"]], test=cells[S["n_train"]:])


def element_fractions(species: np.ndarray, k: int) -> np.ndarray:
    """Fractions of each species among the real atoms (``species >= 0``)."""
    s = np.asarray(species)
    s = s[s >= 0]
    return np.bincount(s, minlength=k) / max(s.size, 1)


def _raw_targets(cells, k: int) -> np.ndarray:
    return np.array([[c.density, *element_fractions(c.elements, k)] for c in cells])


def conditioning(train_cells, k: int) -> dict:
    """Normalisation of the condition vector (density z-score; fractions as they are)."""
    raw = _raw_targets(train_cells, k)
    return dict(mean=float(raw[:, 0].mean()), std=float(max(raw[:, 0].std(), 1e-3)),
                lo=raw.min(0), hi=raw.max(0))


def condition(cells, norm: dict, k: int) -> np.ndarray:
    raw = _raw_targets(cells, k)
    raw[:, 0] = (raw[:, 0] - norm["mean"]) / norm["std"]
    return raw.astype(np.float32)


def pad_cells(cells, n_pad: int, k: int, norm: dict):
    """Pad cells to ``n_pad`` atoms: a :class:`jaxkit.amgenc.model.Batch` of NumPy arrays."""
    from jaxkit.amgenc.model import Batch

    b = len(cells)
    x = np.zeros((b, n_pad, 3), np.float32)
    h = np.zeros((b, n_pad, k), np.float32)
    mask = np.zeros((b, n_pad), bool)
    for i, c in enumerate(cells):
        n = c.n_atoms
        x[i, :n] = np.mod(c.positions / c.box, 1.0)
        h[i, np.arange(n), c.elements] = 1.0
        mask[i, :n] = True
    box = np.array([c.box for c in cells], np.float32)
    return Batch(x, h, mask, box, condition(cells, norm, k))


# ------------------------------------------------------------------------ model


def _skeleton(S: dict, k: int, n_cond: int, seed: int):
    import jax

    from jaxkit.amgenc.model import Denoiser

    return Denoiser(k, n_cond, key=jax.random.key(seed), hidden=S["hidden"],
                    layers=S["layers"], k_nbr=S["k_nbr"])


def rebuild(S: dict, k: int, n_cond: int, seed: int, leaves: list[np.ndarray]):
    """The trained model from its saved array leaves."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    params, static = eqx.partition(_skeleton(S, k, n_cond, seed), eqx.is_array)
    treedef = jax.tree_util.tree_structure(params)
    params = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(v) for v in leaves])
    return eqx.combine(params, static)


def train(S: dict, data: dict, seed: int, track=None) -> dict:
    """Train the flow model; returns picklable leaves, the loss curve and the timing."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    from jaxkit.amgenc import glass
    from jaxkit.amgenc import model as M

    _, q = M.species_charges()
    k = q.size
    norm = conditioning(data["train"], k)
    n_pad = glass.padded_size(max(c.n_atoms for c in data["train"] + data["test"]))
    batch_all = jax.tree_util.tree_map(jnp.asarray, pad_cells(data["train"], n_pad, k, norm))
    net = _skeleton(S, k, batch_all.cond.shape[1], seed)
    opt = optax.adam(S["lr"])
    state = opt.init(eqx.filter(net, eqx.is_array))

    @eqx.filter_jit
    def step(net, state, idx, key):
        b = jax.tree_util.tree_map(lambda a: a[idx], batch_all)
        val, grads = eqx.filter_value_and_grad(M.loss)(net, b, key, q,
                                                      balanced_share=S["balanced_share"])
        updates, state = opt.update(grads, state, eqx.filter(net, eqx.is_array))
        return eqx.apply_updates(net, updates), state, val

    rng = np.random.default_rng([seed, 7])
    key = jax.random.key(seed + 1)
    losses = []
    t0 = time.perf_counter()
    steps = range(S["train_steps"])
    for i in (track(steps, "amgenc train") if track else steps):
        idx = jnp.asarray(rng.choice(len(data["train"]), size=min(S["batch"],
                                                                  len(data["train"])),
                                     replace=False))
        net, state, val = step(net, state, idx, jax.random.fold_in(key, i))
        losses.append(float(val))
    seconds = time.perf_counter() - t0
    leaves = [np.asarray(v) for v in jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array))]
    return dict(leaves=leaves, losses=np.array(losses), seconds=seconds, norm=norm,
                n_pad=n_pad, n_cond=int(batch_all.cond.shape[1]))


# ---------------------------------------------------------------------- sampling


def _timed(fn, *args, runs: int = 3):
    """(result, steady-state seconds): one call to compile, then the median of ``runs``
    timed calls (one timed call made the overhead figures swing by tens of percent)."""
    import jax

    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def sample_all(S: dict, data: dict, trained: dict, seed: int) -> dict:
    """Sample every arm; returns species, positions and timings (NumPy, picklable)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from jaxkit.amgenc import model as M
    from jaxkit.kernels import charge

    _, q = M.species_charges()
    k = q.size
    net = rebuild(S, k, trained["n_cond"], seed, trained["leaves"])
    targets = [c for c in data["test"] for _ in range(S["samples_per_target"])]
    batch = pad_cells(targets, trained["n_pad"], k, trained["norm"])
    mask, box, cond = (jnp.asarray(a) for a in (batch.mask, batch.box, batch.cond))
    keys = jax.random.split(jax.random.key(seed + 2), len(targets))

    def sampler(balanced: bool, eta: float):
        @eqx.filter_jit
        def run(net, keys, mask, box, cond):
            return jax.vmap(lambda kk, m, b, c: M.sample(
                net, kk, m, b, c, q, steps=S["sample_steps"], method=S["method"],
                balanced=balanced, soft_eta=eta, soft_target=S["soft_target"]))(
                    keys, mask, box, cond)
        return run

    trajectories, seconds = {}, {}
    for _, balanced, soft, _ in ARMS:
        cfg = (balanced, S["soft_eta"] if soft else 0.0)
        if cfg not in trajectories:
            out, sec = _timed(sampler(*cfg), net, keys, mask, box, cond)
            trajectories[cfg] = tuple(np.asarray(a) for a in out)
            seconds[cfg] = sec

    qn = np.asarray(q)
    discrete = jax.jit(jax.vmap(lambda c, m: charge.project_discrete(c, qn, mask=m)))
    arms = {}
    for name, balanced, soft, disc in ARMS:
        cfg = (balanced, S["soft_eta"] if soft else 0.0)
        x, h = trajectories[cfg]
        extra = 0.0
        if disc:
            cost = -jnp.log(M.probabilities(jnp.asarray(h)))
            res, extra = _timed(discrete, cost, mask)
            species = np.asarray(res.assignment)
        else:
            species, _ = M.final_species(h, batch.mask, q, discrete=False)
        p = np.asarray(M.probabilities(jnp.asarray(h)))
        soft_charge = np.abs(np.einsum("bnk,k,bn->b", p, qn.astype(np.float64),
                                       batch.mask.astype(np.float64)))
        arms[name] = dict(x=x, species=species, seconds=seconds[cfg] + extra,
                          ode_seconds=seconds[cfg], discrete_seconds=extra,
                          soft_charge=soft_charge)
    target_index = np.repeat(np.arange(len(data["test"])), S["samples_per_target"])
    # fixed composition: each target's element counts (one species per element here, so
    # one split); cells of one target share the counts, hence one compiled solve each
    x, h = trajectories[(True, S["soft_eta"])]
    cost = -jnp.log(M.probabilities(jnp.asarray(h)))
    species = np.full(batch.mask.shape, -1, np.int32)
    extra = 0.0
    for t, cell in enumerate(data["test"]):
        rows = np.flatnonzero(target_index == t)
        counts = np.bincount(cell.elements, minlength=k)
        fn = jax.jit(jax.vmap(lambda c, m, counts=counts: charge.project_composition(
            c, qn, np.arange(k), counts, mask=m)))
        res, sec = _timed(fn, cost[rows], mask[rows])
        species[rows] = np.asarray(res.assignment)
        extra += sec
    arms[COMPOSITION_ARM] = dict(
        x=x, species=species, seconds=seconds[(True, S["soft_eta"])] + extra,
        ode_seconds=seconds[(True, S["soft_eta"])], discrete_seconds=extra,
        soft_charge=arms["all three (AMGenC)"]["soft_charge"])
    return dict(arms=arms, mask=np.asarray(batch.mask), box=np.asarray(batch.box),
                target_index=target_index)


# ------------------------------------------------------------------------ metrics


def _mean_rdf(cells: list[tuple[np.ndarray, float]], r_max: float, n_bins: int = 50):
    from jaxkit.amgenc import glass

    gs = [glass.rdf(pos, box, r_max=r_max, n_bins=n_bins) for pos, box in cells]
    return gs[0][0], np.mean([g for _, g in gs], axis=0)


def _pairs_below(pos: np.ndarray, box: float, cut: float) -> int:
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.rint(d / box)
    r = np.sqrt(np.einsum("ijk,ijk->ij", d, d))
    return int((np.triu(r < cut, 1)).sum())


def _angle_l1(cells, ref: dict) -> dict:
    """Bond-angle distribution L1 distances of ``cells`` ((positions, box, elements)
    each) to the reference densities ``ref`` (see :data:`ANGLES`), keyed by angle name;
    also each angle's density (``NAME density``) and the bin centres (``degrees``)."""
    from jaxkit.amgenc import glass

    out = {}
    for name, (centre, nbr) in ANGLES.items():
        x, dens, n = glass.angle_distribution(cells, centre, nbr, cutoff=ANGLE_CUTOFF)
        out[name] = glass.distribution_l1(x, dens, ref[name]) if n else float("nan")
        out[name + " density"] = dens
        out["degrees"] = x
    return out


def relax_cells(S: dict, samples: dict, arm: str) -> tuple[np.ndarray, float]:
    """FIRE-minimised positions (fractional, same layout as the arm's ``x``) of every cell
    of ``arm`` with the pair potential of the data recipe (post-processing; species
    unchanged), and the seconds it took."""
    from jaxkit.amgenc import glass

    a = samples["arms"][arm]
    x = np.array(a["x"], dtype=np.float64)
    t0 = time.perf_counter()
    for i in range(x.shape[0]):
        m = samples["mask"][i]
        box = float(samples["box"][i])
        pos, _ = glass.minimize(x[i][m] * box, box, a["species"][i][m],
                                steps=S["post_relax_steps"])
        x[i][m] = pos / box
    return x, time.perf_counter() - t0


def evaluate(S: dict, data: dict, samples: dict, norm: dict,
             relaxed: dict | None = None) -> dict:
    """Per-arm metrics (see the module docstring), the RDF curves, the conditioning check
    and, for each arm in ``relaxed`` (name -> (positions, seconds)), the same metrics
    after FIRE post-relaxation."""
    from jaxkit.amgenc import glass
    from jaxkit.amgenc import model as M

    _, q = M.species_charges()
    k = q.size
    formers = [glass.ELEMENTS.index(s) for s in FORMER_SYMBOLS]
    o = glass.ELEMENTS.index("O")
    oc = lambda f: f[o] / max(1 - f[o], 1e-9)  # noqa: E731
    train_oc = [oc(element_fractions(c.elements, k)) for c in data["train"]]
    oc_lo, oc_hi = min(train_oc), max(train_oc)
    r_max = min(R_MAX, 0.5 * min(c.box for c in data["test"]))
    r, g_ref = _mean_rdf([(c.positions, c.box) for c in data["test"]], r_max)
    ref_cells = [(c.positions, c.box, c.elements) for c in data["test"]]
    ref_angles = {name: glass.angle_distribution(ref_cells, centre, nbr,
                                                 cutoff=ANGLE_CUTOFF)[1]
                  for name, (centre, nbr) in ANGLES.items()}
    rng = np.random.default_rng(0)
    rand = [(rng.uniform(0, c.box, (c.n_atoms, 3)), c.box) for c in data["test"]]
    _, g_rand = _mean_rdf(rand, r_max)
    dr = r[1] - r[0]
    test_f = np.array([element_fractions(c.elements, k) for c in data["test"]])
    raw = _raw_targets(data["test"], k)
    outside = np.any((raw < norm["lo"] - 1e-9) | (raw > norm["hi"] + 1e-9), axis=1)
    rows, curves, cond = {}, {"r": r, "reference": g_ref, "uniform random": g_rand}, {}
    angle_curves = {"reference": ref_angles["O-T-O"]}
    runs = [(name, arm, arm["x"], arm["seconds"]) for name, arm in samples["arms"].items()]
    for name, (x_rel, sec) in (relaxed or {}).items():
        runs.append((f"{name} + FIRE relaxation", samples["arms"][name], x_rel,
                     samples["arms"][name]["seconds"] + sec))
    for name, arm, xs, seconds in runs:
        balanced, charges, dens_err, comp_err, comp_other, valid, viol, pairs, cells = (
            [] for _ in range(9))
        for i, t in enumerate(samples["target_index"]):
            target = data["test"][t]
            m = samples["mask"][i]
            sp = arm["species"][i][m]
            box = float(samples["box"][i])
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
        _, g = _mean_rdf([c[:2] for c in cells], r_max)
        curves[name] = g
        n = len(balanced)
        ang = _angle_l1(cells, ref_angles)
        angle_curves[name] = ang["O-T-O density"]
        rows[name] = dict(
            balanced=float(np.mean(balanced)), abs_charge=float(np.mean(charges)),
            soft_charge=float(np.mean(arm["soft_charge"])),
            density_error=float(np.mean(dens_err)), composition_l1=float(np.mean(comp_err)),
            valid=float(np.mean(valid)), rdf_l1=float(np.sum(np.abs(g - g_ref)) * dr),
            oto_l1=ang["O-T-O"], tot_l1=ang["T-O-T"],
            min_dist_violation=float(np.mean(viol)), close_pairs=float(np.mean(pairs)),
            ms_per_cell=1e3 * seconds / n, n_cells=n)
        out_cell = outside[samples["target_index"]]
        ce = np.array(comp_err)
        cond[name] = dict(own=float(ce.mean()), other=float(np.nanmean(comp_other)),
                          in_range=float(ce[~out_cell].mean()) if (~out_cell).any() else None,
                          out_of_range=float(ce[out_cell].mean()) if out_cell.any() else None)
    rand_cells = [(p, b, c.elements) for (p, b), c in zip(rand, data["test"], strict=True)]
    rand_ang = _angle_l1(rand_cells, ref_angles)
    # the same post-relaxation from uniformly random positions: how much of the relaxed
    # row's structure the relaxation alone produces
    rand_rel = [(glass.minimize(p, b, el, steps=S["post_relax_steps"])[0], b, el)
                for p, b, el in rand_cells]
    rand_rel_ang = _angle_l1(rand_rel, ref_angles)
    _, g_rand_rel = _mean_rdf([c[:2] for c in rand_rel], r_max)
    rand_rel_pairs = [_pairs_below(p, b, MIN_DISTANCE) for p, b, _ in rand_rel]
    angle_curves["uniform random"] = rand_ang["O-T-O density"]
    angle_curves["degrees"] = rand_ang["degrees"]
    rand_pairs = [_pairs_below(p, b, MIN_DISTANCE) for p, b in rand]
    ref_pairs = [_pairs_below(c.positions, c.box, MIN_DISTANCE) for c in data["test"]]
    baselines = dict(
        rdf_l1_random=float(np.sum(np.abs(g_rand - g_ref)) * dr),
        oto_l1_random=rand_ang["O-T-O"], tot_l1_random=rand_ang["T-O-T"],
        rdf_l1_random_relaxed=float(np.sum(np.abs(g_rand_rel - g_ref)) * dr),
        oto_l1_random_relaxed=rand_rel_ang["O-T-O"], tot_l1_random_relaxed=rand_rel_ang["T-O-T"],
        min_dist_violation_random_relaxed=float(np.mean(np.array(rand_rel_pairs) > 0)),
        close_pairs_random_relaxed=float(np.mean(rand_rel_pairs)),
        min_dist_violation_random=float(np.mean(np.array(rand_pairs) > 0)),
        close_pairs_random=float(np.mean(rand_pairs)),
        min_dist_violation_reference=float(np.mean(np.array(ref_pairs) > 0)),
        r_max=float(r_max), outside_targets=[int(i) for i in np.flatnonzero(outside)])
    ode = {name: a["ode_seconds"] for name, a in samples["arms"].items()}
    overhead = dict(
        soft=ode["soft only"] / ode["none"] - 1.0,
        soft_all=ode["all three (AMGenC)"] / ode["none"] - 1.0,
        discrete=samples["arms"]["final discrete only"]["discrete_seconds"] / ode["none"])
    return dict(rows=rows, curves=curves, baselines=baselines, overhead=overhead,
                conditioning=cond, angle_curves=angle_curves)


# ------------------------------------------------------------------------ output


def write_cells(stem: Path, frames: list[tuple[list[str], np.ndarray, float, str]]
                ) -> list[Path]:
    """Write generated cells with ase: ``STEM.xyz`` (extended XYZ, one frame per cell,
    periodic cubic lattice) and ``STEM.cif`` (one data block per cell)."""
    from ase import Atoms
    from ase.io import write

    atoms = [Atoms(symbols=symbols, positions=pos, cell=[box, box, box], pbc=True,
                   info={"comment": comment}) for symbols, pos, box, comment in frames]
    paths = [stem.with_suffix(".xyz"), stem.with_suffix(".cif")]
    write(paths[0], atoms, format="extxyz")
    write(paths[1], atoms, format="cif")
    return paths


def _pcts(rows: list[dict]) -> str:
    return ", ".join(f"{100 * r['balanced']:.0f}%" for r in rows)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name.split(" (")[0]).strip("_")


def _plot(ev: dict, trained: dict, out: Path) -> Path:
    from jaxkit.report import new_figure, save_figure

    fig, axes = new_figure(ncols=3, size=(5.0, 3.5))
    c = ev["curves"]
    ax = axes[0, 0]
    ax.plot(c["r"], c["reference"], "k", lw=2, label="reference (held-out glass)")
    ax.plot(c["r"], c["uniform random"], ":", color="grey", label="uniform random")
    for name in ev["rows"]:
        ax.plot(c["r"], c[name], lw=1, label=name)
    ax.set_xlabel("r (A)")
    ax.set_ylabel("total g(r)")
    ax.legend(fontsize=6)
    ax = axes[0, 1]
    a = ev["angle_curves"]
    ax.plot(a["degrees"], a["reference"], "k", lw=2, label="reference")
    ax.plot(a["degrees"], a["uniform random"], ":", color="grey", label="uniform random")
    for name in (RELAXED_ARM, f"{RELAXED_ARM} + FIRE relaxation"):
        ax.plot(a["degrees"], a[name], lw=1, label=name)
    ax.set_xlabel(f"O-T-O angle (deg), T-O < {ANGLE_CUTOFF} A")
    ax.set_ylabel("density per degree")
    ax.legend(fontsize=6)
    ax = axes[0, 2]
    ax.plot(trained["losses"], lw=0.8)
    ax.set_xlabel("Adam step")
    ax.set_ylabel("flow-matching loss")
    ax.set_yscale("log")
    return save_figure(fig, out / "amgenc_rdf.png")


@register("amgenc")
def run(ctx: RunContext, settings: dict[str, Any] | None = None) -> PipelineResult:
    """Data, training, sampling of the AMGenC ablation and the report."""
    from jaxkit.amgenc import glass
    from jaxkit.amgenc import model as M
    from jaxkit.report import markdown_table

    S = {**(QUICK if ctx.quick else FULL), **(settings or {})}
    out = Path(ctx.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    data_cfg = {k: S[k] for k in ("kind", "n_train", "n_test", "n_atoms", "relax_steps",
                                  "min_steps")}
    data = ctx.stage("amgenc-data", lambda: make_data(S, ctx.seed), config=data_cfg)
    model_cfg = (data_cfg, {k: S[k] for k in ("hidden", "layers", "k_nbr", "train_steps",
                                              "batch", "lr", "balanced_share")})
    trained = ctx.stage("amgenc-model", lambda: train(S, data, ctx.seed, ctx.track),
                        config=model_cfg)
    sample_cfg = (model_cfg, {k: S[k] for k in ("samples_per_target", "sample_steps",
                                                "method", "soft_eta", "soft_target")},
                  [name for name, *_ in ARMS] + [COMPOSITION_ARM])
    samples = ctx.stage("amgenc-samples", lambda: sample_all(S, data, trained, ctx.seed),
                        config=sample_cfg)
    relax_cfg = (sample_cfg, S["post_relax_steps"])
    relaxed = ctx.stage("amgenc-relaxed", lambda: relax_cells(S, samples, RELAXED_ARM),
                        config=relax_cfg)
    ev = evaluate(S, data, samples, trained["norm"], {RELAXED_ARM: relaxed})

    names, q = M.species_charges()
    symbols = [e for e in glass.ELEMENTS]
    out_set = set(ev["baselines"]["outside_targets"])
    files = []
    for name, arm in samples["arms"].items():
        frames = []
        for i, t in enumerate(samples["target_index"]):
            m = samples["mask"][i]
            sp = arm["species"][i][m]
            box = float(samples["box"][i])
            frames.append(([symbols[s] if s >= 0 else "X" for s in sp], arm["x"][i][m] * box,
                           box, f"arm={_slug(name)} target={int(t)} "
                                f"charge={int(q[np.maximum(sp, 0)].sum())} "
                                f"extrapolated={int(t in out_set)}"))
        files += write_cells(out / f"amgenc_{_slug(name)}", frames)
    figures = [_plot(ev, trained, out)]

    rows = []
    for name in ev["rows"]:
        r = ev["rows"][name]
        rows.append([name, f"{100 * r['balanced']:.0f}%", r["abs_charge"], r["soft_charge"],
                     f"{100 * r['density_error']:.1f}%", r["composition_l1"],
                     f"{100 * r['valid']:.0f}%", r["rdf_l1"], r["oto_l1"], r["tot_l1"],
                     f"{100 * r['min_dist_violation']:.0f}%", r["close_pairs"],
                     r["ms_per_cell"]])
    b = ev["baselines"]
    rows.append(["(uniform random positions)", "", "", "", "", "", "", b["rdf_l1_random"],
                 b["oto_l1_random"], b["tot_l1_random"],
                 f"{100 * b['min_dist_violation_random']:.0f}%", b["close_pairs_random"], ""])
    rows.append(["(uniform random positions + FIRE relaxation)", "", "", "", "", "", "",
                 b["rdf_l1_random_relaxed"], b["oto_l1_random_relaxed"],
                 b["tot_l1_random_relaxed"],
                 f"{100 * b['min_dist_violation_random_relaxed']:.0f}%",
                 b["close_pairs_random_relaxed"], ""])
    table = markdown_table(["arm", "balanced", "mean abs charge (e)",
                            "mean abs charge of final p (e)", "density error",
                            "composition L1", "valid composition", "RDF L1",
                            "O-T-O angle L1", "T-O-T angle L1",
                            "cells with d < 1 A", "pairs d < 1 A per cell",
                            "ms per cell"], rows)
    cond_rows = []
    for name, c in ev["conditioning"].items():
        cond_rows.append([name, c["own"], c["other"],
                          "" if c["in_range"] is None else c["in_range"],
                          "" if c["out_of_range"] is None else c["out_of_range"]])
    cond_table = markdown_table(["arm", "composition L1 to own target",
                                 "to the other held-out targets", "own, targets in range",
                                 "own, targets outside the training range"], cond_rows)
    c_all = ev["conditioning"][RELAXED_ARM]
    steers = c_all["own"] < c_all["other"]
    ov = ev["overhead"]
    norm = trained["norm"]
    raw = _raw_targets(data["test"], q.size)
    out_idx = b["outside_targets"]
    outside = len(out_idx)
    out_what = []
    for t in out_idx:
        bad = [("density" if j == 0 else f"x({glass.ELEMENTS[j - 1]})")
               for j in np.flatnonzero((raw[t] < norm["lo"] - 1e-9)
                                       | (raw[t] > norm["hi"] + 1e-9))]
        out_what.append(f"target {t}: {', '.join(bad)}")
    rel = ev["rows"][f"{RELAXED_ARM} + FIRE relaxation"]
    gen = ev["rows"][RELAXED_ARM]
    disc_rows = [ev["rows"][n] for n, _, _, d in ARMS if d] + [ev["rows"][COMPOSITION_ARM]]
    nodisc_rows = [ev["rows"][n] for n, _, _, d in ARMS if not d]
    claim_ok = all(r["balanced"] == 1.0 for r in disc_rows)
    n_cells = ev["rows"]["none"]["n_cells"]
    warnings = []
    if not claim_ok:
        warnings.append("a cell with the final discrete projection on is not charge balanced")
    md = [
        f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}. Data: "
        f"{S['n_train']} training and {S['n_test']} held-out `{S['kind']}` glass cells of "
        f"{S['n_atoms'][0]}-{S['n_atoms'][1]} atoms (`jaxkit.amgenc.glass`, "
        f"{S['relax_steps']} melt-quench + {S['min_steps']} FIRE steps). Model: periodic "
        f"E(3)-invariant graph flow model, hidden {S['hidden']}, {S['layers']} layers, "
        f"{S['k_nbr']} nearest neighbours; {S['train_steps']} Adam steps (batch "
        f"{S['batch']}, {trained['seconds']:.1f} s, final loss "
        f"{np.mean(trained['losses'][-20:]):.3f}). Sampling: {n_cells} cells per arm "
        f"({S['samples_per_target']} per held-out target, with its atom count, box, "
        f"density and element fractions as the condition), {S['sample_steps']} "
        f"{S['method']} steps, soft projection of the {S['soft_target']} channels with "
        f"eta = {S['soft_eta']}. {outside} of {len(data['test'])} held-out targets lie "
        "outside the training range of density or of some element fraction "
        f"(extrapolation; flagged, not refused{': ' + '; '.join(out_what) if out_what else ''}"
        "; their cells carry `extrapolated=1` in the XYZ comment).", "",
        table, "",
        f"The row `{RELAXED_ARM} + FIRE relaxation` is post-processing, not generation: "
        f"the AMGenC cells after {S['post_relax_steps']} FIRE steps of the data recipe's "
        f"pair potential (species unchanged, so charge balance and composition are "
        f"kept). It takes cells with a pair under {MIN_DISTANCE} A from "
        f"{100 * gen['min_dist_violation']:.0f}% to {100 * rel['min_dist_violation']:.0f}% "
        f"and the RDF L1 from {gen['rdf_l1']:.2f} to {rel['rdf_l1']:.2f}; the same "
        f"relaxation from uniformly random positions (with the reference species) reaches "
        f"{b['rdf_l1_random_relaxed']:.2f}, so "
        + ("most of that structure comes from the relaxation, not from the generator"
           if b["rdf_l1_random_relaxed"] < 1.5 * max(rel["rdf_l1"], 1e-9) else
           "the generated starting points do help")
        + ". Bond angles: "
        f"L1 distance between the pooled angle distributions (5-degree bins, neighbours "
        f"within {ANGLE_CUTOFF} A, T = Si, B, Al, P) of the generated and the held-out "
        "cells; 0 is identical, 2 disjoint.", "",
        f"The row `{COMPOSITION_ARM}` keeps the AMGenC trajectories and replaces the final "
        "projection by the exact fixed-composition projection (`charge.project_composition`"
        ": the target's element counts, cheapest placement of them on the generated "
        f"channels): composition L1 {ev['rows'][COMPOSITION_ARM]['composition_l1']:.3f} "
        f"(vs {ev['rows']['all three (AMGenC)']['composition_l1']:.3f} free), "
        f"{100 * ev['rows'][COMPOSITION_ARM]['balanced']:.0f}% balanced, RDF L1 "
        f"{ev['rows'][COMPOSITION_ARM]['rdf_l1']:.2f}; its projection took "
        f"{1e3 * samples['arms'][COMPOSITION_ARM]['discrete_seconds']:.1f} ms for all "
        f"{n_cells} cells (one compiled solve per target).", "",
        "Property conditioning: each cell is sampled for one held-out target (its box, "
        "density and element fractions). If the condition steers the model, a cell's "
        "composition is closer to its own target than to the other held-out targets:", "",
        cond_table, "",
        f"With all three mechanisms the composition L1 to the own target is "
        f"{c_all['own']:.3f} against {c_all['other']:.3f} to the other targets: the "
        f"conditioning {'does' if steers else 'does NOT'} steer the composition"
        f"{'' if steers else ' in this run'}.", "",
        f"Charge balance: with the final discrete projection "
        f"{_pcts(disc_rows)} of cells are "
        f"exactly balanced ({'as guaranteed' if claim_ok else 'NOT all: see warnings'}); "
        f"without it {_pcts(nodisc_rows)}. The soft projection takes the mean |charge| of "
        f"the final probabilities from {ev['rows']['none']['soft_charge']:.2f} e (none) to "
        f"{ev['rows']['soft only']['soft_charge']:.2f} e (soft only), but the argmax of "
        f"rows that are not confident does not follow it (mean |charge| after argmax "
        f"{ev['rows']['none']['abs_charge']:.1f} e vs "
        f"{ev['rows']['soft only']['abs_charge']:.1f} e): only the discrete projection "
        "gives exact balance.",
        f"Projection overhead (steady state, {n_cells} cells vmapped on CPU, median of 3 "
        f"timed runs per arm): soft projection {100 * ov['soft']:+.1f}% of sampling time "
        f"(all three: {100 * ov['soft_all']:+.1f}%)"
        + ("; a negative value means the projection costs less than the run-to-run "
           "timing noise" if min(ov["soft"], ov["soft_all"]) < 0 else "")
        + f"; the final discrete projection adds {100 * ov['discrete']:.1f}% of the "
        "unprojected sampling time.", "",
        f"Honest caveats: this is a tiny CPU model trained for {S['train_steps']} steps on "
        f"{S['n_train']} cells, so generated *coordinates* are poor: the RDF L1 distance "
        f"to the held-out reference (r <= {b['r_max']:.1f} A) should be read against "
        f"uniformly random positions ({b['rdf_l1_random']:.2f}), and "
        f"{100 * b['min_dist_violation_random']:.0f}% of random cells (vs "
        f"{100 * b['min_dist_violation_reference']:.0f}% of reference cells) have a pair "
        f"closer than {MIN_DISTANCE} A. Density error uses the target box, so it measures "
        "the generated composition's mass. Valid composition: balanced, has O and a "
        "network former, O/cation ratio inside the training range.", "",
        "Generated cells (extended XYZ and CIF, written with ase): "
        + ", ".join(f"`{p.name}`" for p in files) + ".",
    ]
    metrics = {"arms": ev["rows"], "baselines": b, "overhead": ov,
               "conditioning": ev["conditioning"],
               "train_seconds": trained["seconds"],
               "final_loss": float(np.mean(trained["losses"][-20:])),
               "total_seconds": time.perf_counter() - t_start, "claim_ok": claim_ok}
    return PipelineResult("amgenc", "AMGenC: charge-balanced amorphous cell generation",
                          "\n".join(md), figures=figures, metrics=metrics, warnings=warnings)
