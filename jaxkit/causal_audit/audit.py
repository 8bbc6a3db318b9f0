"""The audit's computations: the grid, the Reisach cells, the identifiability-swap cells,
the consistency curves and the uniform-consistency family."""

from __future__ import annotations

import math

import jax
import numpy as np

from .axes import SCALES, cell
from .config import Config
from .grid import CellResult, run_cell, run_grid
from .scm import simulate

__all__ = ["reisach_cells", "assumption_cells", "uniform_family", "run_main_grid",
           "run_sizes", "run_uniform", "family_members", "run_family", "null_cell",
           "run_placebo"]


def reisach_cells(cfg: Config) -> dict:
    """The cells of the Reisach et al. headline: the base SCM with Gaussian noise, on
    the raw scale, standardised, and as an iSCM (``{scale: spec}``)."""
    base = cfg.base()
    return {s: cell(base, noise="gaussian", scale=s) for s in SCALES}


#: the identifiability assumptions of :func:`assumption_cells`
LINGAM_CELL, EV_CELL = "non-Gaussian noise (LiNGAM)", "Gaussian noise, equal variances (EV)"
ANM_CELL = "nonlinear additive Gaussian noise (ANM)"


def assumption_cells(cfg: Config) -> dict:
    """Equally defensible identifiability assumptions a benchmark of the base SEM (raw
    scale) may adopt, each identifying the DAG: non-Gaussian noise (Laplace,
    heterogeneous variances: LiNGAM, Shimizu et al. 2006), Gaussian noise with equal
    variances (EV, Peters & Buhlmann 2014) and, when ``cfg.anm_cell``, nonlinear
    (tanh) mechanisms with additive Gaussian noise (ANM, Hoyer et al. 2009; Peters et al.
    2014). ``{name: spec}``."""
    base = cfg.base()
    out = {LINGAM_CELL: cell(base, noise="laplace", scale="raw",
                             noise_hetero=base.noise_hetero or 0.5),
           EV_CELL: cell(base, noise="gaussian", scale="raw", noise_hetero=0.0)}
    if cfg.anm_cell:
        out[ANM_CELL] = cell(base, noise="gaussian", scale="raw", mechanism="nonlinear",
                             noise_hetero=base.noise_hetero or 0.5)
    return out


def null_cell(cfg: Config):
    """The cell of the instability null: the LiNGAM cell (linear, non-Gaussian, raw,
    i.i.d., faithful, no confounders), inside the declared scope of every linear
    observational contender."""
    return assumption_cells(cfg)[LINGAM_CELL]


def uniform_family(cfg: Config) -> list:
    """The base cell at each of ``cfg.sizes`` with its edge weights shrunk by
    ``sqrt(n0 / n)`` (``n0`` the smallest size): every member is inside DirectLiNGAM's
    scope, yet each edge's signal stays at the detection level of ``n0`` rows, so a
    pointwise consistent method's error need not fall along the family (a failure of
    uniform consistency)."""
    base, n0 = cfg.base(), min(cfg.sizes)
    return [cell(base, n=n, w_low=base.w_low * math.sqrt(n0 / n),
                 w_high=base.w_high * math.sqrt(n0 / n)) for n in cfg.sizes]


def run_main_grid(key, cfg: Config, *, mesh=None, track=None) -> dict:
    """Every pair's cells, the Reisach cells and the :func:`assumption_cells`, one
    vmapped batch each; the ``reisach_methods`` join on the first ``reisach_datasets``
    datasets of the Reisach cells (the same datasets: same key; their scores are NaN
    beyond, "not run")."""
    rc = tuple(reisach_cells(cfg).values())
    extra = rc + tuple(assumption_cells(cfg).values())
    results = run_grid(key, cfg.base(), cfg.grid_pairs(), cfg.methods, batch=cfg.batch,
                       host_datasets=cfg.host_datasets, mesh=mesh, track=track, extra=extra)
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


def run_uniform(key, cfg: Config, *, mesh=None, track=None) -> list[CellResult]:
    """The :func:`uniform_family` for the consistency methods, on the datasets of
    :func:`run_sizes` (pass the same ``key``): the same graphs and noise draws, only the
    weights shrunk (the smallest size is the base cell itself). Each member is simulated
    at the largest size (one compiled simulator, the weights traced) and takes its first
    ``n`` rows."""
    k = jax.random.fold_in(key, 0)
    nmax = max(cfg.sizes)
    specs = uniform_family(cfg)
    it = specs if track is None else track(specs, "causal-audit uniform family")
    out = []
    for s in it:
        big = simulate(jax.random.fold_in(k, 0), cell(s, n=nmax), cfg.batch)
        data = big._replace(x=big.x[:, :s.n], env=big.env[:, :s.n])
        out.append(run_cell(k, s, cfg.consistency_methods, batch=cfg.batch, mesh=mesh,
                            data=data))
    return out


def family_members(cfg: Config) -> list[int]:
    """The member sizes ``n_k`` of the uniform-consistency family: ``family_members``
    of ``cfg.sizes`` evenly spread, the smallest and the largest included."""
    ns = sorted(cfg.sizes)
    k = min(cfg.family_members, len(ns))
    idx = sorted({round(i * (len(ns) - 1) / max(k - 1, 1)) for i in range(k)})
    return [ns[i] for i in idx]


def run_family(key, cfg: Config, *, mesh=None, track=None) -> dict:
    """Argument (ii)'s family: member ``n_k`` is the base cell with its edge weights
    multiplied by ``family_scale * sqrt(n0 / n_k)`` (``n0`` the smallest size: every
    member built for its own ``n`` has the same per-edge signal ``w sqrt(n)``, set by
    ``family_scale`` near the detection level), each fitted by
    ``cfg.family_method`` at every size of ``cfg.sizes`` (the first ``n`` rows of one
    sample at the largest size; the same key as :func:`run_sizes`: the same graphs and
    noise draws in every member). ``{(n_k, n): CellResult}``."""
    base, n0, nmax = cfg.base(), min(cfg.sizes), max(cfg.sizes)
    k = jax.random.fold_in(key, 0)
    jobs = [(m, n) for m in family_members(cfg) for n in sorted(cfg.sizes)]
    it = jobs if track is None else track(jobs, "causal-audit family")
    out, big, last = {}, None, None
    for m, n in it:
        f = cfg.family_scale * math.sqrt(n0 / m)
        spec = cell(base, w_low=base.w_low * f, w_high=base.w_high * f)
        if m != last:
            big, last = simulate(jax.random.fold_in(k, 0), cell(spec, n=nmax), cfg.batch), m
        data = big._replace(x=big.x[:, :n], env=big.env[:, :n])
        out[(m, n)] = run_cell(k, cell(spec, n=n), (cfg.family_method,), batch=cfg.batch,
                               mesh=mesh, data=data)
    return out


def run_placebo(key, cfg: Config, methods, *, mesh=None) -> CellResult:
    """The negative control of the instability claim: the :func:`null_cell`'s datasets
    (the grid's key: the same datasets) with every variable multiplied by the common
    factor ``cfg.placebo_factor`` (a change of unit that no method's assumptions speak
    about), refitted by ``methods``."""
    spec = null_cell(cfg)
    data = simulate(jax.random.fold_in(key, 0), spec, cfg.batch)
    data = data._replace(x=data.x * cfg.placebo_factor)
    return run_cell(key, spec, methods, batch=cfg.batch, mesh=mesh, data=data)
