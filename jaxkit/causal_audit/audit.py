"""The audit's computations: the grid, the Reisach cells and the consistency curves."""

from __future__ import annotations

import jax
import numpy as np

from .axes import SCALES, cell
from .config import Config
from .grid import CellResult, run_cell, run_grid
from .scm import simulate

__all__ = ["reisach_cells", "run_main_grid", "run_sizes"]


def reisach_cells(cfg: Config) -> dict:
    """The cells of the Reisach et al. headline: the base SCM with Gaussian noise, on
    the raw scale, standardised, and as an iSCM (``{scale: spec}``)."""
    base = cfg.base()
    return {s: cell(base, noise="gaussian", scale=s) for s in SCALES}


def run_main_grid(key, cfg: Config, *, mesh=None, track=None) -> dict:
    """Every pair's cells and the Reisach cells, one vmapped batch each; the
    ``reisach_methods`` join on the first ``reisach_datasets`` datasets of the Reisach
    cells (the same datasets: same key; their scores are NaN beyond, "not run")."""
    rc = tuple(reisach_cells(cfg).values())
    results = run_grid(key, cfg.base(), cfg.grid_pairs(), cfg.methods, batch=cfg.batch,
                       host_datasets=cfg.host_datasets, mesh=mesh, track=track, extra=rc)
    extra = [m for m in cfg.reisach_methods if m not in cfg.methods]
    k = min(cfg.reisach_datasets, cfg.batch)
    for spec in rc if extra else ():
        # the first k datasets of the cell (the same key: the same datasets), NaN beyond
        data = simulate(jax.random.fold_in(key, 0), spec, cfg.batch)
        data = jax.tree.map(lambda a, k=k: a[:k], data)
        r = run_cell(key, spec, extra, batch=k, host_datasets=min(cfg.host_datasets, k),
                     mesh=mesh, data=data)
        res = results[spec]
        pad = np.full(cfg.batch - k, np.nan)
        res.f1.update({m: np.concatenate([v, pad]) for m, v in r.f1.items()})
        res.shd.update({m: np.concatenate([v, pad]) for m, v in r.shd.items()})
        res.failures.update({k: v for k, v in r.failures.items() if k in extra})
        res.seconds.update(r.seconds)
    return results


def run_sizes(key, cfg: Config, *, mesh=None, track=None) -> list[CellResult]:
    """The base cell at each of ``cfg.sizes`` for the consistency methods. The base SCM
    is simulated once at the largest size and each size takes the first ``n`` rows of
    every dataset: the same graph and nested i.i.d. samples at every ``n`` (the base
    cell is observational, raw-scale and i.i.d., so a prefix of the rows is a sample of
    the same SCM), and one compiled simulator instead of one per size."""
    base = cfg.base()
    specs = [cell(base, n=n) for n in cfg.sizes]
    k = jax.random.fold_in(key, 0)
    big = simulate(jax.random.fold_in(k, 0), cell(base, n=max(cfg.sizes)), cfg.batch)
    it = specs if track is None else track(specs, "causal-audit sizes")
    out = []
    for s in it:
        data = big._replace(x=big.x[:, :s.n], env=big.env[:, :s.n])
        out.append(run_cell(k, s, cfg.consistency_methods, batch=cfg.batch, mesh=mesh,
                            data=data))
    return out
