"""The audit's computations: the grid, the Reisach cells and the consistency curves."""

from __future__ import annotations

import jax

from .axes import SCALES, cell
from .config import Config
from .grid import CellResult, run_cell, run_grid

__all__ = ["reisach_cells", "run_main_grid", "run_sizes"]


def reisach_cells(cfg: Config) -> dict:
    """The cells of the Reisach et al. headline: the base SCM with Gaussian noise, on
    the raw scale, standardised, and as an iSCM (``{scale: spec}``)."""
    base = cfg.base()
    return {s: cell(base, noise="gaussian", scale=s) for s in SCALES}


def run_main_grid(key, cfg: Config, *, mesh=None, track=None) -> dict:
    """Every pair's cells and the Reisach cells, one vmapped batch each."""
    return run_grid(key, cfg.base(), cfg.grid_pairs(), cfg.methods, batch=cfg.batch,
                    host_datasets=cfg.host_datasets, mesh=mesh, track=track,
                    extra=tuple(reisach_cells(cfg).values()))


def run_sizes(key, cfg: Config, *, mesh=None, track=None) -> list[CellResult]:
    """The base cell at each of ``cfg.sizes`` for the consistency methods; every size
    uses the same key, so dataset ``i`` has the same graph at every ``n``."""
    base = cfg.base()
    specs = [cell(base, n=n) for n in cfg.sizes]
    it = specs if track is None else track(specs, "causal-audit sizes")
    return [run_cell(jax.random.fold_in(key, 0), s, cfg.consistency_methods,
                     batch=cfg.batch, mesh=mesh) for s in it]
