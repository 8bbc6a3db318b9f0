"""The CausalTab experiments: synthetic in- and out-of-distribution cells at every ``d``
and interventional fraction, semantic environments from expert networks, and the real
Sachs data. Each returns the typed rows of :mod:`.results` (per-dataset arrays per
method) for the report.

Pairing: within a prior and ``d``, every interventional fraction draws its datasets from
the same key, so the graphs, mechanisms and noises are identical across fractions
(:func:`jaxkit.kernels.sem.sample_task` uses separate draws for the regime) and the
fraction comparison is paired.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.data.sachs import load_sachs
from jaxkit.kernels import sem
from jaxkit.kernels.sem import sortability as srt

from . import semantic
from .config import OOD_AXES
from .evaluate import Bench, evaluate, make_bench
from .results import AblationCell, MethodScores, SachsResult, SemanticRow, SyntheticCell

__all__ = ["ood_prior", "ood_axis_prior", "cell_prior", "synthetic", "semantic_envs", "sachs_real",
           "sortabilities", "prior_ablation", "scores"]


def ood_prior() -> sem.Prior:
    """Held-out families: SBM and geometric graphs, RFF and heteroscedastic mechanisms,
    Student-t and Gumbel noise (none of them in the training prior)."""
    return sem.make_prior(graphs={"sbm": 1, "grg": 1}, mechanisms={"rff": 1, "hetero": 1},
                          noises={"student_t": 1, "gumbel": 1}, k_range=(1.0, 2.5))


def id_prior() -> sem.Prior:
    """In-distribution: the training prior's families (ER/SF/WS; linear, MLP, sigmoid;
    Gaussian, Laplace, uniform)."""
    return sem.make_prior(graphs={"er": 1, "sf": 1, "ws": 1},
                          mechanisms={"linear": 2, "mlp": 1, "sigmoid": 1},
                          noises={"gaussian": 1, "laplace": 1, "uniform": 1},
                          k_range=(1.0, 2.5))


def ood_axis_prior(axis: str) -> sem.Prior:
    """:func:`id_prior` with one axis (``"graph"``, ``"mechanism"`` or ``"noise"``) swapped
    for :func:`ood_prior`'s held-out families, the others in distribution.

    Raises:
        ValueError: an unknown ``axis``.
    """
    fields = {"graph": "graph_w", "mechanism": "mech_w", "noise": "noise_w"}
    if axis not in OOD_AXES:
        raise ValueError(f"`axis` must be one of {OOD_AXES}; got {axis!r}")
    return id_prior()._replace(**{fields[axis]: getattr(ood_prior(), fields[axis])})


def prior_of(which: str) -> sem.Prior:
    """The prior of a cell kind: ``"id"``, ``"ood"`` or ``"ood-AXIS"``."""
    if which == "id":
        return id_prior()
    if which == "ood":
        return ood_prior()
    return ood_axis_prior(which.removeprefix("ood-"))


def cell_prior(base: sem.Prior, int_frac: float) -> sem.Prior:
    """``base`` restricted to one regime: observational (``int_frac = 0``) or atomic
    interventions on a fraction ``int_frac`` of the rows with known targets."""
    if int_frac == 0.0:
        regime = jnp.asarray([1.0, 0.0, 0.0])
    else:
        regime = jnp.asarray([0.0, 1.0, 0.0])
    f = jnp.asarray([1.0 - int_frac, 1.0 - int_frac], jnp.float32)
    return base._replace(regime_w=regime, obs_frac=f, p_known=jnp.asarray(1.0))


def scores(res: dict) -> dict[str, MethodScores]:
    """:func:`.evaluate.evaluate`'s ``{method: {metric: array}}`` as
    :class:`.results.MethodScores` per method."""
    return {m: MethodScores.from_arrays(r) for m, r in res.items()}


@functools.cache
def _sortability_fns():
    # jitted once (one compile per data shape): called eagerly, each call traced and
    # compiled the kernels' path-count loop anew (12 compilations per benchmark cell)
    return jax.jit(srt.var_sortability), jax.jit(srt.r2_sortability)


def sortabilities(bench: Bench) -> dict:
    """Mean var- and R2-sortability of a cell's observational rows (the artefacts a
    benchmark should report)."""
    vs, rs = [], []
    var_fn, r2_fn = _sortability_fns()
    for b in range(bench.x.shape[0]):
        obs = ~bench.targets[b].any(axis=1)
        x = jnp.asarray(bench.x[b][obs] if obs.sum() >= 8 else bench.x[b])
        a = jnp.asarray(bench.adj[b], x.dtype)
        vs.append(float(var_fn(x, a)))
        try:
            rs.append(float(r2_fn(x, a)))
        except (ValueError, RuntimeError):  # a run-time check failed (non-finite data)
            rs.append(float("nan"))
    return {"var_sortability": float(np.nanmean(vs)), "r2_sortability": float(np.nanmean(rs))}


def synthetic(key, *, which: str, d: int, n: int, n_datasets: int, int_frac: float,
              methods, model, gies_max_d: int) -> SyntheticCell:
    """One cell: ``which`` in ``{"id", "ood", "ood-graph", "ood-mechanism", "ood-noise"}``
    (:func:`prior_of`), ``d`` variables, ``n`` rows, a fraction ``int_frac`` of
    interventional rows. ``key`` must be the same for every fraction of a (which, d)
    pair (pairing)."""
    base = prior_of(which)
    bench = make_bench(key, cell_prior(base, int_frac), n_datasets, d, n)
    res = evaluate(bench, methods, model=model, gies_max_d=gies_max_d)
    return SyntheticCell(which=which, d=d, n=n, int_frac=int_frac, **sortabilities(bench),
                         methods=scores(res))


def semantic_envs(key, *, networks, seeds: int, n: int, methods, model, max_vars: int,
                  gies_max_d: int) -> list[SemanticRow]:
    """Every expert network, observational and half-interventional, ``seeds`` datasets
    each. BIF networks: their own CPTs (discrete states); dagitty DAGs: MLP mechanisms
    with Gaussian noise. CausalTab scores networks with more than ``max_vars`` nodes
    over covering subsets of ``max_vars`` variables (:mod:`.predict`; the row says
    ``chunked``)."""
    rows = []
    for ni, name in enumerate(networks):
        net = semantic.load_network(name)
        d = len(net.names)
        for frac in (0.0, 0.5):
            xs, ts = [], []
            for s in range(seeds):
                k = jax.random.fold_in(jax.random.fold_in(key, ni), s)
                n_int = int(round(frac * n))
                if net.cpt is not None:
                    rng = np.random.default_rng(np.asarray(jax.random.key_data(k)).ravel())
                    x, t = semantic.sample_bif(rng, net, n - n_int, n_int)
                else:
                    x, t = semantic.sample_structure(k, net, n - n_int, n_int)
                # a discrete column can come out constant in a small sample: jitter it
                sd = x.std(axis=0)
                if np.any(sd == 0):
                    jit = np.random.default_rng(s).normal(0, 1e-3, x.shape)
                    x = x + jit * (sd == 0)
                xs.append(x)
                ts.append(t)
            x, t = np.stack(xs), np.stack(ts)
            bench = Bench(x, t.astype(np.float64), t,
                          np.broadcast_to(net.adj, (seeds, d, d)).copy(), {})
            res = evaluate(bench, methods, model=model, gies_max_d=gies_max_d)
            rows.append(SemanticRow(network=name, d=d, int_frac=frac,
                                    kind="bif" if net.cpt is not None else "dagitty",
                                    variables=list(net.names), chunked=d > max_vars,
                                    **sortabilities(bench), methods=scores(res)))
    return rows


def sachs_real(key, *, rows: int, methods, model, gies_max_d: int) -> SachsResult:
    """The real Sachs et al. (2005) measurements (pooled, no intervention labels:
    observational input), ``rows`` rows drawn at random, log-transformed; truth: the
    18-edge consensus graph."""
    x, names, truth = load_sachs()
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
    sel = rng.choice(x.shape[0], size=min(rows, x.shape[0]), replace=False)
    xs = np.log(np.maximum(x[sel], 1e-3))
    bench = Bench(xs[None], np.zeros_like(xs)[None], np.zeros(xs.shape, bool)[None],
                  (truth != 0)[None], {})
    res = evaluate(bench, methods, model=model, gies_max_d=gies_max_d)
    return SachsResult(variables=names, rows=int(xs.shape[0]), methods=scores(res))


def prior_ablation(key, *, models: dict, d: int, n: int, n_datasets: int,
                   int_fracs) -> list[AblationCell]:
    """The prior ablation's benchmark: every model of ``models`` (``{name: (params,
    cfg)}``, e.g. trained on the broad and on the narrow prior) on the same datasets, in
    and out of distribution (:func:`id_prior`, :func:`ood_prior`) at every fraction of
    ``int_fracs``, ``d`` variables and ``n`` rows. One :class:`.results.AblationCell`
    per cell (``methods`` keyed by model name); the fractions of one prior
    share their graphs, mechanisms and noise (paired)."""
    rows = []
    for wi, which in enumerate(("id", "ood")):
        k = jax.random.fold_in(key, wi)  # the same for every fraction: paired
        base = id_prior() if which == "id" else ood_prior()
        for f in int_fracs:
            bench = make_bench(k, cell_prior(base, f), n_datasets, d, n)
            res = {name: evaluate(bench, ("causaltab",), model=m)["causaltab"]
                   for name, m in models.items()}
            rows.append(AblationCell(which=which, d=d, n=n, int_frac=f, methods=scores(res)))
    return rows
