"""Sampling at the largest cell size: ``cfg.scale.cells`` cells of ``cfg.scale.atoms``
atoms (800 by default, the top of the recipe's range), batched and split over the mesh's
``"data"`` axis, with all three AMGenC mechanisms, timed in steady state.

The cells are conditioned on the held-out targets in turn (their density and element
fractions), each at the target's number density (box ``L_t (N / N_t)^(1/3)``); the final
species come from the exact discrete projection, so every cell is charge balanced or
flagged. Reported: cells per second (median of ``cfg.scale.runs`` timed calls of the
sampler compiled ahead of time; the first timed call's cells are checked), the share of
cells with no pair under 1 A, and the balanced share.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed

from . import model as M
from .analysis import min_distance
from .config import Config
from .data import Data, condition
from .results import Scale
from .sample import project_cells, sampler
from .train import Trained

__all__ = ["sample_large", "sized_sampler"]


def sized_sampler(cfg: Config, data: Data, trained: Trained, key, n: int, b: int, *,
                  steps: int, mesh=None):
    """The ablation's sampler (:func:`jaxkit.amgenc.sample.sampler`, compiled ahead of
    time) for ``b`` cells of ``n`` atoms conditioned on the held-out targets in turn, each
    at its target's number density.

    Returns:
        ``(run, mask, box)``: ``run(balanced, soft_eta) -> (x, h)`` with fractional
        positions ``x`` (b, n, 3) and species logits ``h``; the (b, n) mask; the (b,) box
        edges in angstrom ((b, 3) when a target is orthorhombic).
    """
    _, q = M.species_charges()
    targets = [data.test[i % len(data.test)] for i in range(b)]
    scaled = [np.asarray(c.box, np.float64) * (n / c.n_atoms) ** (1 / 3) for c in targets]
    if any(s.ndim for s in scaled):  # an orthorhombic target: (b, 3) edges
        scaled = [np.broadcast_to(s, (3,)) for s in scaled]
    box = jnp.asarray(np.stack(scaled), jnp.float32)
    cond = jnp.asarray(condition(targets, trained.norm, q.size))
    mask = jnp.ones((b, n), bool)
    keys = jax.random.split(key, b)
    run = sampler(trained.model, keys, mask, box, cond, steps=steps,
                  corrector_steps=cfg.corrector_steps, snr=cfg.snr,
                  soft_target=cfg.soft_target, mesh=mesh)
    return run, mask, box


def sample_large(cfg: Config, data: Data, trained: Trained, key, *, mesh=None) -> Scale:
    """Sample and time ``cfg.scale.cells`` cells of ``cfg.scale.atoms`` atoms."""
    n, b = cfg.scale.atoms, cfg.scale.cells
    # compiled ahead of time, so that every sampling call is a steady-state timed one
    run, mask, box = sized_sampler(cfg, data, trained, key, n, b, steps=cfg.scale.steps,
                                   mesh=mesh)
    times, out = [], None
    for _ in range(cfg.scale.runs):
        t0 = time.perf_counter()
        res = jax.block_until_ready(run(True, cfg.soft_eta))
        times.append(time.perf_counter() - t0)
        out = res if out is None else out
    x, h = out
    res = project_cells(-jnp.log(M.probabilities(h)), mask, mesh)
    x, boxes = np.asarray(x, np.float64), np.asarray(box, np.float64)
    ok = [min_distance(x[i] * boxes[i], boxes[i]) >= 1.0 for i in range(b)]
    return Scale(n_cells=b, n_atoms=n, steps=cfg.scale.steps,
                 devices=1 if mesh is None else int(mesh.shape[distributed.DATA]),
                 seconds=float(np.median(times)), times=tuple(times),
                 no_close_pair=float(np.mean(ok)),
                 balanced=float(np.mean(np.asarray(res.feasible))))
