"""Sampling of the AMGenC ablation: every held-out target with the three mechanisms on
or off.

Mechanisms: (1) charge-balanced element noise, (2) the soft charge projection at every
ODE step, (3) the final exact discrete projection
(:func:`jaxkit.kernels.charge.project_discrete`, cost ``-log p``). Arms: none; final
discrete only; soft only; all three. All arms use the same keys, so they differ only by
the mechanisms. One more arm, *all three, at the target composition*, replaces the final
projection by :func:`jaxkit.kernels.charge.project_composition` with each target's
element counts.

The cells of a call are split over the mesh's ``"data"`` axis
(:func:`jaxkit.distributed.sharded_vmap`). Times are steady state: one call compiles,
then the median of ``cfg.timing_runs`` timed calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed
from jaxkit.kernels import charge

from . import model as M
from .config import Config
from .data import Data, pad_cells
from .train import Trained

__all__ = ["ARMS", "COMPOSITION_ARM", "AMGENC_ARM", "Arm", "Samples", "timed", "sample_all"]

#: (name, balanced noise, soft projection, final discrete projection)
ARMS: tuple[tuple[str, bool, bool, bool], ...] = (
    ("none", False, False, False),
    ("final discrete only", False, False, True),
    ("soft only", False, True, False),
    ("all three (AMGenC)", True, True, True),
)
AMGENC_ARM = "all three (AMGenC)"
#: the AMGenC arm again, its final projection at each target's element counts
COMPOSITION_ARM = "all three, at the target composition"


@dataclass(frozen=True, eq=False)
class Arm:
    """The cells of one arm (padded like the targets).

    Attributes:
        x: (B, N, 3) fractional coordinates.
        species: (B, N) species indices, -1 on padding.
        soft_charge: (B,) ``|sum_i q . p_i|`` of the final channel probabilities.
        ode_seconds: steady-state time of the sampling of all B cells (median).
        discrete_seconds: steady-state time of the final projection (0 without one).
        ode_times: every timed sampling run (s); run ``r`` of every arm was timed in the
            same round, so per-run ratios between arms are paired.
    """

    x: np.ndarray
    species: np.ndarray
    soft_charge: np.ndarray
    ode_seconds: float
    discrete_seconds: float
    ode_times: tuple = ()

    @property
    def seconds(self) -> float:
        return self.ode_seconds + self.discrete_seconds


@dataclass(frozen=True, eq=False)
class Samples:
    """Every arm's cells; ``mask`` (B, N), ``box`` (B,) and ``target_index`` (B,) (the
    held-out cell each sampled cell is conditioned on) are shared by the arms."""

    arms: dict[str, Arm]
    mask: np.ndarray
    box: np.ndarray
    target_index: np.ndarray


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


def sample_all(cfg: Config, data: Data, trained: Trained, key, *, mesh=None) -> Samples:
    """Sample ``cfg.samples_per_target`` cells per held-out target for every arm.

    Args:
        cfg: the settings (sampler, soft projection, timing runs).
        data: the cells (``data.test`` are the targets).
        trained: the trained denoiser.
        key: the PRNG key of the sampling (shared by the arms).
        mesh: a mesh with a ``"data"`` axis, or None (every device on one).

    Returns:
        The :class:`Samples`.
    """
    _, q = M.species_charges()
    k = q.size
    qn = np.asarray(q)
    net = trained.model
    targets = [c for c in data.test for _ in range(cfg.samples_per_target)]
    batch = pad_cells(targets, trained.n_pad, k, trained.norm)
    mask, box, cond = (jnp.asarray(a) for a in (batch.mask, batch.box, batch.cond))
    keys = jax.random.split(key, len(targets))

    def sampler(balanced: bool, eta: float):
        return distributed.sharded_vmap(lambda kk, m, b, c: M.sample(
            net, kk, m, b, c, q, steps=cfg.sample_steps,
            corrector_steps=cfg.corrector_steps, snr=cfg.snr,
            balanced=balanced, soft_eta=eta, soft_target=cfg.soft_target), mesh)

    trajectories, fns, times = {}, {}, {}
    for _, balanced, soft, _ in ARMS:
        mech = (balanced, cfg.soft_eta if soft else 0.0)
        if mech not in trajectories:  # compile and keep the cells
            fns[mech] = sampler(*mech)
            out = jax.block_until_ready(fns[mech](keys, mask, box, cond))
            trajectories[mech] = tuple(np.asarray(a) for a in out)
            times[mech] = []
    # timing rounds: every mechanism once per round, in a rotating order, so that a slow
    # spell of the machine hits the arms alike and per-round ratios are paired
    order = list(fns)
    for r in range(cfg.timing_runs):
        for mech in order[r % len(order):] + order[:r % len(order)]:
            t0 = time.perf_counter()
            jax.block_until_ready(fns[mech](keys, mask, box, cond))
            times[mech].append(time.perf_counter() - t0)
    seconds = {m: float(np.median(v)) for m, v in times.items()}

    discrete = distributed.sharded_vmap(
        lambda c, m: charge.project_discrete(c, qn, mask=m), mesh)
    arms = {}
    for name, balanced, soft, disc in ARMS:
        mech = (balanced, cfg.soft_eta if soft else 0.0)
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
                         ode_times=tuple(times[mech]))
    target_index = np.repeat(np.arange(len(data.test)), cfg.samples_per_target)
    # fixed composition: each target's element counts (one species per element here, so
    # one split); the cells of one target share the counts, hence one compiled solve each
    mech = (True, cfg.soft_eta)
    x, h = trajectories[mech]
    cost = -jnp.log(M.probabilities(jnp.asarray(h)))
    species = np.full(batch.mask.shape, -1, np.int32)
    extra = 0.0
    for t, cell in enumerate(data.test):
        rows = np.flatnonzero(target_index == t)
        counts = np.bincount(cell.elements, minlength=k)
        fn = distributed.sharded_vmap(lambda c, m, counts=counts: charge.project_composition(
            c, qn, np.arange(k), counts, mask=m), mesh)
        res, sec = timed(fn, cost[rows], mask[rows], runs=cfg.timing_runs)
        species[rows] = np.asarray(res.assignment)
        extra += sec
    arms[COMPOSITION_ARM] = Arm(x=x, species=species,
                                soft_charge=arms[AMGENC_ARM].soft_charge,
                                ode_seconds=seconds[mech], discrete_seconds=extra,
                                ode_times=tuple(times[mech]))
    return Samples(arms=arms, mask=np.asarray(batch.mask), box=np.asarray(batch.box),
                   target_index=target_index)
