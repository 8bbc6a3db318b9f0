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
    """Every pair's cells and the Reisach cells, one vmapped batch each; the
    ``reisach_methods`` join on the Reisach cells (the same datasets: same key)."""
    rc = tuple(reisach_cells(cfg).values())
    results = run_grid(key, cfg.base(), cfg.grid_pairs(), cfg.methods, batch=cfg.batch,
                       host_datasets=cfg.host_datasets, mesh=mesh, track=track, extra=rc)
    extra = [m for m in cfg.reisach_methods if m not in cfg.methods]
    for spec in rc if extra else ():
        r = run_cell(key, spec, extra, batch=cfg.batch, host_datasets=cfg.host_datasets,
                     mesh=mesh)
        res = results[spec]
        res.f1.update(r.f1)
        res.shd.update(r.shd)
        res.failures.update({k: v for k, v in r.failures.items() if k in extra})
        res.seconds.update(r.seconds)
    return results


def run_sizes(key, cfg: Config, *, mesh=None, track=None) -> list[CellResult]:
    """The base cell at each of ``cfg.sizes`` for the consistency methods; every size
    uses the same key, so dataset ``i`` has the same graph at every ``n``."""
    base = cfg.base()
    specs = [cell(base, n=n) for n in cfg.sizes]
    it = specs if track is None else track(specs, "causal-audit sizes")
    return [run_cell(jax.random.fold_in(key, 0), s, cfg.consistency_methods,
                     batch=cfg.batch, mesh=mesh) for s in it]
