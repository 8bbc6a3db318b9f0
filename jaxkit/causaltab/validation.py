"""A fixed validation set of causal-discovery tasks, the classical baselines' scores on
it (computed once and cached), and a trained model's AUROC on it: what the training
curve of :mod:`jaxkit.causaltab.longtrain` is measured against.

The set: for each ``(d, n)`` cell, ``n_tasks`` tasks of exactly ``d`` variables and ``n``
rows drawn from the broad training prior (:func:`jaxkit.causaltab.train.train_prior`,
graph families ER / scale-free / Watts-Strogatz, linear / MLP / sigmoid mechanisms,
Gaussian / Laplace / uniform noise, observational and interventional regimes as the
prior draws them) by :func:`jaxkit.causaltab.evaluate.make_bench` from a fixed key, so
the same set comes back in every process. Out-of-distribution cells use
:func:`ood_prior` (held-out SBM and geometric graphs, RFF and heteroscedastic
mechanisms, Student-t and Gumbel noise).

Baselines (scores in the LiNGAM convention ``[i, j]`` = ``j -> i``): DirectLiNGAM and
NOTEARS (jaxkit's kernels, through :func:`jaxkit.causaltab.evaluate.run_method`), PC
(Fisher-z, alpha 0.05) and GES (BIC) from causal-learn (Spirtes et al. 2000; Chickering
2002): their CPDAGs scored 1 for a directed edge and 0.5 in both directions for an
undirected one. The metric is the AUROC of the scores over the off-diagonal pairs
(:func:`jaxkit.kernels.graph.auroc`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.causal_model.model import forward
from jaxkit.io import atomic_write
from jaxkit.kernels import graph as gm
from jaxkit.kernels import sem

from .evaluate import Bench, make_bench, run_method
from .train import train_prior

__all__ = ["BASELINES", "CELLS", "ood_prior", "validation_set", "baseline_aurocs",
           "model_aurocs", "cached_baselines"]

#: The classical baselines of the training curve.
BASELINES = ("direct-lingam", "notears", "pc", "ges")
#: The default validation cells ``(d, n)``.
CELLS = ((10, 64), (20, 64))


def ood_prior(d_max: int = 20, n_max: int = 64) -> sem.Prior:
    """The held-out prior: SBM and geometric graphs, RFF and heteroscedastic mechanisms,
    Student-t and Gumbel noise (none of them in :func:`train_prior`)."""
    return sem.make_prior(graphs={"sbm": 1, "grg": 1}, mechanisms={"rff": 1, "hetero": 1},
                          noises={"student_t": 1, "gumbel": 1}, d_range=(3, d_max),
                          n_range=(max(2, n_max // 2), n_max), k_range=(1.0, 2.5),
                          obs_frac=(0.3, 1.0))


def validation_set(cells=CELLS, n_tasks: int = 16, *, seed: int = 7, prior: str = "broad"
                   ) -> list[Bench]:
    """One :class:`Bench` of ``n_tasks`` tasks per ``(d, n)`` cell (module docstring);
    ``prior`` is ``"broad"`` (in distribution) or ``"ood"``. Deterministic in ``seed``.

    Raises:
        ValueError: ``n_tasks < 2``, an unknown ``prior`` or a cell with ``d < 3`` or
            ``n < 8``.
    """
    if n_tasks < 2:
        raise ValueError(f"`n_tasks` must be >= 2; got {n_tasks}")
    if prior not in ("broad", "ood"):
        raise ValueError(f"`prior` must be 'broad' or 'ood'; got {prior!r}")
    out = []
    for c, (d, n) in enumerate(cells):
        if d < 3 or n < 8:
            raise ValueError(f"`cells` need d >= 3 and n >= 8; got {(d, n)}")
        p = train_prior(d, n) if prior == "broad" else ood_prior(d, n)
        out.append(make_bench(jax.random.key(seed * 1000 + c), p, n_tasks, d, n))
    return out


@functools.lru_cache(maxsize=1)
def _auroc_fn():
    return jax.jit(gm.auroc)


def _auroc(true, scores) -> float:
    if not np.all(np.isfinite(scores)):
        return float("nan")
    return float(_auroc_fn()(np.asarray(true, np.float64), np.asarray(scores, np.float64)))


def baseline_aurocs(benches: list[Bench], methods=BASELINES) -> dict[str, list[float]]:
    """Per task AUROC of each baseline, over the benches' tasks in order (NaN where a
    method failed, e.g. a singular covariance)."""
    out: dict[str, list[float]] = {}
    for m in methods:
        vals = []
        for b in benches:
            for k in range(b.x.shape[0]):
                s = run_method(m, b.x[k], b.ind[k], b.targets[k])[1]
                vals.append(_auroc(b.adj[k], s))
        out[m] = vals
    return out


@functools.lru_cache(maxsize=8)
def _batched(cfg):
    return jax.jit(jax.vmap(lambda p, x, i: forward(p, cfg, x, i, jnp.ones(x.shape[1], bool),
                                                    jnp.ones(x.shape[0], bool)),
                            in_axes=(None, 0, 0)))


def model_aurocs(params, cfg, benches: list[Bench]) -> list[float]:
    """Per task AUROC of the model's edge probabilities (all rows in one pass; every
    cell must have ``d <= cfg.max_vars``)."""
    out = []
    for b in benches:
        p = np.asarray(_batched(cfg)(params, jnp.asarray(b.x, jnp.float32),
                                     jnp.asarray(b.ind, jnp.float32)), np.float64)
        out += [_auroc(b.adj[k], p[k]) for k in range(p.shape[0])]
    return out


def cached_baselines(path: Path, benches: list[Bench], methods=BASELINES, key: str = ""
                     ) -> dict[str, list[float]]:
    """:func:`baseline_aurocs`, read from / written to the JSON ``path`` (recomputed
    when ``key``, a description of the set, differs from the stored one)."""
    path = Path(path)
    if path.is_file():
        got = json.loads(path.read_text())
        if got.get("key") == key and all(m in got["auroc"] for m in methods):
            return {m: got["auroc"][m] for m in methods}
    res = baseline_aurocs(benches, methods)
    atomic_write(path, json.dumps({"key": key, "auroc": res}))
    return res
