"""Sampling of the AMGenC ablation: every held-out target with the three mechanisms on
or off.

Mechanisms: (1) charge-balanced element noise, (2) the soft charge projection at every
ODE step, (3) the final exact discrete projection
(:func:`jaxkit.kernels.charge.project_discrete`, cost ``-log p``). Arms: none; final
discrete only; soft only; balanced noise only (:data:`NOISE_ARM`); all three. All arms
use the same keys, so they differ only by the mechanisms. One more arm, *all three, at
the target composition*, replaces the final projection by
:func:`jaxkit.kernels.charge.project_composition` with each target's element counts.
With a separately trained baseline network (the AMDEN-style unconstrained diffusion
over positions and elements: the same denoiser trained with plain element noise,
``balanced_share = 0``), its cells, sampled with no mechanism and the same keys, are the
arm :data:`BASELINE_ARM`.

The cells of a call are split over the mesh's ``"data"`` axis
(:func:`jaxkit.distributed.sharded_vmap`). The cells are sampled once per mechanism, one
call per size bucket; the sampling times are steady state, measured apart on a timing
batch of ``cfg.timing_cells`` cells (compiled ahead, then ``cfg.timing_runs`` paired
rounds); the final projections' times are the median of ``cfg.timing_runs`` calls after
a compiling one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from jaxkit import distributed
from jaxkit.kernels import charge

from . import model as M
from .config import Config
from .data import Data, pad_cells
from .potential import padded_size
from .train import Trained

__all__ = ["ARMS", "COMPOSITION_ARM", "AMGENC_ARM", "NOISE_ARM", "BASELINE_ARM", "Arm",
           "Samples", "timed", "sample_cells", "sampler", "size_groups", "timing_indices",
           "project_cells", "sample_all"]

#: (name, balanced noise, soft projection, final discrete projection)
ARMS: tuple[tuple[str, bool, bool, bool], ...] = (
    ("none", False, False, False),
    ("final discrete only", False, False, True),
    ("soft only", False, True, False),
    ("balanced noise only", True, False, False),
    ("all three (AMGenC)", True, True, True),
)
#: the arm with the charge-balanced element noise alone (no projection)
NOISE_ARM = "balanced noise only"
AMGENC_ARM = "all three (AMGenC)"
#: the AMGenC arm again, its final projection at each target's element counts
COMPOSITION_ARM = "all three, at the target composition"
#: the separately trained unconstrained model (AMDEN-style), sampled with no mechanism
BASELINE_ARM = "unconstrained model, separately trained (AMDEN-style)"


_Q = np.asarray(M.species_charges()[1])
#: the baseline network's key among the sampled mechanisms
BASELINE = "baseline"


@eqx.filter_jit
def _sample_batch(net, keys, mask, box, cond, balanced, eta, settings, mesh):
    """Every cell of a placed batch, split over ``mesh``'s data axis; ``balanced`` and
    ``eta`` are unbatched scalars (traced), ``settings`` the static sampler settings."""
    steps, corrector_steps, snr, soft_target = settings
    params, static = eqx.partition(net, eqx.is_array)

    def local(params, keys, mask, box, cond, balanced, eta):
        model = eqx.combine(params, static)
        return jax.vmap(lambda k, m, b, c: M.sample(
            model, k, m, b, c, _Q, steps=steps, corrector_steps=corrector_steps, snr=snr,
            balanced=balanced, soft_eta=eta, soft_target=soft_target))(keys, mask, box, cond)

    d, r = PartitionSpec(distributed.DATA), PartitionSpec()
    return jax.shard_map(local, mesh=mesh, in_specs=(r, d, d, d, d, r, r), out_specs=d,
                         check_vma=False)(params, keys, mask, box, cond, balanced, eta)


def sample_cells(net: M.Denoiser, keys, mask, box, cond, *, balanced: bool, soft_eta: float,
                 steps: int, corrector_steps: int = 0, snr: float = 0.1,
                 soft_target: str = "endpoint", mesh=None):
    """:func:`jaxkit.amgenc.model.sample` of every cell (keys (B,), mask (B, N), box (B,),
    cond (B, C)), the batch padded and split over the mesh's ``"data"`` axis (None: all
    devices). The mechanisms (``balanced``, ``soft_eta``) are traced, so every arm, every
    network of the same architecture and every batch of the same padded shape share one
    compiled program (:func:`sampler`). Returns (x (B, N, 3), h (B, N, K))."""
    return sampler(net, keys, mask, box, cond, steps=steps, corrector_steps=corrector_steps,
                   snr=snr, soft_target=soft_target, mesh=mesh)(balanced, soft_eta)


#: the compiled samplers of this process, by network architecture, padded shape and
#: settings
_COMPILED: dict = {}


def sampler(net: M.Denoiser, keys, mask, box, cond, *, steps: int, corrector_steps: int = 0,
            snr: float = 0.1, soft_target: str = "endpoint", mesh=None):
    """The sampler of :func:`sample_cells` for one batch, compiled ahead of time (no
    sampling run spent on compilation; once per process for every network of the same
    architecture, padded shape and settings): returns
    ``run(balanced, soft_eta) -> (x, h)``, every mechanism one compiled program."""
    mesh = distributed.make_mesh() if mesh is None else mesh
    placed, n = distributed.shard_batch((keys, mask, box, cond), mesh)
    settings = (int(steps), int(corrector_steps), float(snr), str(soft_target))
    mech = lambda b, e: (jnp.asarray(bool(b)), jnp.asarray(e, jnp.float32))  # noqa: E731
    leaves, tree = jax.tree.flatten(net)
    shape = (tree, tuple((getattr(v, "shape", None), str(getattr(v, "dtype", type(v))))
                         for v in leaves),
             tuple((a.shape, str(a.dtype)) for a in placed), settings, id(mesh))
    if shape not in _COMPILED:
        _COMPILED[shape] = _sample_batch.lower(net, *placed, *mech(False, 0.0), settings,
                                               mesh).compile()
    compiled = _COMPILED[shape]

    def run(balanced, soft_eta):
        out = compiled(net, *placed, *mech(balanced, soft_eta), settings, mesh)
        return tuple(a[:n] for a in out)

    return run


def _discrete(cost, mask):
    return charge.project_discrete(cost, _Q, mask=mask)


def _by_splits(cost, mask, splits):
    return charge.project_splits(cost, _Q, splits, mask=mask)


def project_cells(cost, mask, mesh=None, splits=None):
    """The exact discrete projection of every cell (cost (B, N, K), mask (B, N)), or with
    ``splits`` (B, S, K) the projection at those species counts
    (:func:`jaxkit.kernels.charge.project_splits`); one compiled program per shape."""
    if splits is None:
        return distributed.sharded_vmap(_discrete, mesh)(cost, mask)
    return distributed.sharded_vmap(_by_splits, mesh)(cost, mask, splits)


def target_splits(cells, k: int) -> np.ndarray:
    """(T, S, K) int32 balanced species counts of each cell's counts
    (:func:`jaxkit.kernels.charge.composition_splits` with every species its own element,
    as in the glass vocabulary: one split, the target's species counts), padded to one
    ``S`` by repeating a cell's first split (all zeros, never met, when it has none)."""
    rows = [charge.composition_splits(_Q, np.arange(k), np.bincount(c.elements, minlength=k))
            for c in cells]
    s = max(1, max(r.shape[0] for r in rows))
    out = np.zeros((len(cells), s, k), np.int32)
    for i, r in enumerate(rows):
        if r.shape[0]:
            out[i] = r[np.arange(s) % r.shape[0]]
    return out


@dataclass(frozen=True, eq=False)
class Arm:
    """The cells of one arm (padded like the targets).

    Attributes:
        x: (B, N, 3) fractional coordinates.
        species: (B, N) species indices, -1 on padding.
        soft_charge: (B,) ``|sum_i q . p_i|`` of the final channel probabilities.
        ode_seconds: steady-state time of one sampling call of the timing batch
            (median over the timing rounds).
        discrete_seconds: steady-state time of the final projection of all B cells (0
            without one).
        ode_times: every timed sampling run (s); run ``r`` of every arm was timed in the
            same round, so per-run ratios between arms are paired.
        timed_cells: cells of the timing batch (0: all B cells, the layout of old runs).
    """

    x: np.ndarray
    species: np.ndarray
    soft_charge: np.ndarray
    ode_seconds: float
    discrete_seconds: float
    ode_times: tuple = ()
    timed_cells: int = 0

    @property
    def seconds(self) -> float:
        """Steady-state seconds of all B cells: the timing batch's sampling time per cell
        times B, plus the final projection."""
        b = self.x.shape[0]
        return self.ode_seconds * b / (self.timed_cells or b) + self.discrete_seconds


@dataclass(frozen=True, eq=False)
class Samples:
    """Every arm's cells; ``mask`` (B, N), ``box`` (B,) and ``target_index`` (B,) (the
    held-out cell each sampled cell is conditioned on) are shared by the arms;
    ``timing_cells`` cells padded to ``timing_atoms`` atoms made the timing batch."""

    arms: dict[str, Arm]
    mask: np.ndarray
    box: np.ndarray
    target_index: np.ndarray
    timing_atoms: int = 0
    timing_cells: int = 0


def timed(fn, *args, runs: int = 3):
    """``(fn(*args), seconds)``: one call to compile, then the median of ``runs`` timed
    calls, each ended by ``jax.block_until_ready``."""
    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def size_groups(cells) -> list[tuple[int, np.ndarray]]:
    """(padded size, indices) of each size bucket of ``cells``
    (:func:`jaxkit.amgenc.potential.padded_size`), smallest first."""
    sizes = np.array([padded_size(c.n_atoms) for c in cells])
    return [(int(z), np.flatnonzero(sizes == z)) for z in np.unique(sizes)]


def timing_indices(cells, n: int) -> np.ndarray:
    """The ``n`` cells (indices into ``cells``) of the timing batch: a window of
    consecutive atom counts around the median size (all cells when there are fewer)."""
    order = np.argsort([c.n_atoms for c in cells], kind="stable")
    n = min(int(n), len(cells))
    start = max(0, min(len(cells) - n, (len(cells) - n) // 2))
    return np.sort(order[start:start + n])


def sample_all(cfg: Config, data: Data, trained: Trained, key, *, mesh=None,
               baseline: Trained | None = None) -> Samples:
    """Sample ``cfg.samples_per_target`` cells per held-out target for every arm.

    Each mechanism's cells are sampled once, one call per size bucket
    (:func:`size_groups`: the cells of a call padded to their bucket, not to the
    largest cell) and laid out padded to ``trained.n_pad``. The projection overhead is
    timed apart, on a timing batch of ``cfg.timing_cells`` of these cells around the
    median size (:func:`timing_indices`, the same keys and conditions): compiled ahead,
    then ``cfg.timing_runs`` rounds with every mechanism once per round in a rotating
    order, so that a slow spell of the machine hits the arms alike and per-round ratios
    are paired.

    Args:
        cfg: the settings (sampler, soft projection, timing batch and rounds).
        data: the cells (``data.test`` are the targets).
        trained: the trained denoiser.
        key: the PRNG key of the sampling (shared by the arms).
        mesh: a mesh with a ``"data"`` axis, or None (every device on one).
        baseline: the separately trained unconstrained denoiser (same architecture and
            training cells), sampled with no mechanism as :data:`BASELINE_ARM` and timed
            in the same rounds; None: no such arm.

    Returns:
        The :class:`Samples`.
    """
    _, q = M.species_charges()
    k = q.size
    qn = np.asarray(q)
    net = trained.model
    targets = [c for c in data.test for _ in range(cfg.samples_per_target)]
    batch = pad_cells(targets, trained.n_pad, k, trained.norm)
    mask = jnp.asarray(batch.mask)
    keys = jax.random.split(key, len(targets))
    settings = dict(steps=cfg.sample_steps, corrector_steps=cfg.corrector_steps, snr=cfg.snr,
                    soft_target=cfg.soft_target, mesh=mesh)

    if baseline is not None and baseline.n_pad != trained.n_pad:
        raise ValueError(f"baseline: padded to {baseline.n_pad} atoms, the model to "
                         f"{trained.n_pad}; train both on the same cells")

    mechs = list(dict.fromkeys((bal, cfg.soft_eta if soft else 0.0)
                               for _, bal, soft, _ in ARMS))
    kinds = mechs + ([BASELINE] if baseline is not None else [])

    def compiled(idx, model=net, norm=trained.norm):
        sub = [targets[i] for i in idx]
        size = padded_size(max(c.n_atoms for c in sub))
        b = pad_cells(sub, size, k, norm)
        return sampler(model, keys[jnp.asarray(idx)], *(jnp.asarray(a) for a in
                                                        (b.mask, b.box, b.cond)), **settings)

    def runners(idx):
        """mechanism -> () -> (x, h) on the cells ``idx``: one compiled program serves
        every mechanism and the baseline network (same architecture)."""
        run = compiled(idx)
        out = {m: (lambda m=m: run(*m)) for m in mechs}
        if baseline is not None:
            run_b = compiled(idx, baseline.model, baseline.norm)
            out[BASELINE] = lambda: run_b(False, 0.0)
        return out

    trajectories = {m: (np.zeros((len(targets), trained.n_pad, 3), np.float32),
                        np.zeros((len(targets), trained.n_pad, k), np.float32))
                    for m in kinds}
    for size, idx in size_groups(targets):
        for mech, fn in runners(idx).items():
            x, h = jax.block_until_ready(fn())
            trajectories[mech][0][idx, :size] = np.asarray(x)
            trajectories[mech][1][idx, :size] = np.asarray(h)

    t_idx = timing_indices(targets, cfg.timing_cells)
    fns = runners(t_idx)
    times = {m: [] for m in kinds}
    for r in range(cfg.timing_runs):
        for mech in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            t0 = time.perf_counter()
            jax.block_until_ready(fns[mech]())
            times[mech].append(time.perf_counter() - t0)
    seconds = {m: float(np.median(v)) for m, v in times.items()}
    n_timed = len(t_idx)

    discrete = lambda c, m: project_cells(c, m, mesh)  # noqa: E731
    # (arm, its trajectories' key, final discrete projection); the baseline's arm last
    specs = [(name, (balanced, cfg.soft_eta if soft else 0.0), disc)
             for name, balanced, soft, disc in ARMS]
    specs += [(BASELINE_ARM, BASELINE, False)] if baseline is not None else []
    arms = {}
    for name, mech, disc in specs:
        x, h = trajectories[mech]
        extra = 0.0
        p = M.probabilities(jnp.asarray(h))
        if disc:
            res, extra = timed(discrete, -jnp.log(p), mask, runs=cfg.timing_runs)
            species = np.asarray(res.assignment)
        else:
            species, _ = M.final_species(h, batch.mask, q, discrete=False)
        soft_charge = np.abs(np.einsum("bnk,k,bn->b", np.asarray(p, np.float64),
                                       qn.astype(np.float64), batch.mask.astype(np.float64)))
        arms[name] = Arm(x=x, species=species, soft_charge=soft_charge,
                         ode_seconds=seconds[mech], discrete_seconds=extra,
                         ode_times=tuple(times[mech]), timed_cells=n_timed)
    target_index = np.repeat(np.arange(len(data.test)), cfg.samples_per_target)
    # fixed composition: each target's species counts, as a traced (B, S, K) array, so
    # one compiled solve serves every target
    mech = (True, cfg.soft_eta)
    x, h = trajectories[mech]
    cost = -jnp.log(M.probabilities(jnp.asarray(h)))
    splits = jnp.asarray(target_splits(data.test, k)[target_index])
    res, extra = timed(lambda c, m, sp: project_cells(c, m, mesh, sp), cost, mask, splits,
                       runs=cfg.timing_runs)
    species = np.asarray(res.assignment)
    arms[COMPOSITION_ARM] = Arm(x=x, species=species,
                                soft_charge=arms[AMGENC_ARM].soft_charge,
                                ode_seconds=seconds[mech], discrete_seconds=extra,
                                ode_times=tuple(times[mech]), timed_cells=n_timed)
    return Samples(arms=arms, mask=np.asarray(batch.mask), box=np.asarray(batch.box),
                   target_index=target_index,
                   timing_atoms=padded_size(max(targets[i].n_atoms for i in t_idx)),
                   timing_cells=n_timed)
