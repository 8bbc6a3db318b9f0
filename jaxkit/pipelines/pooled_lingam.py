"""Pooled ICA-LiNGAM without environment labels (Paper 7).

Claim under test: in a linear Gaussian SEM, pooling observational data with atomic
noise interventions (each environment changes one node's noise) makes the sources
non-Gaussian (excess kurtosis ~ O(1/n), n = number of variables) while their dependence
decays faster (~ O(1/n^2)), so classical ICA-LiNGAM on the *pooled, unlabeled* rows
recovers the DAG, matching label-aware methods.

Experiments (all simulated datasets of one configuration form one batch, ``jax.jit``-ed
once per shape: simulation and metrics are ``jax.vmap``-ed over seeds, the LiNGAM fits
are ``vmap``-ped kernels too (see the note above ``_fitter``); with a mesh the batch is
sharded along its ``"data"`` axis by :func:`jaxkit.distributed.sharded_vmap`):

* F1 / SHD vs number of variables, number of environments, samples per environment,
  intervention strength, plus an ablation table (intervention kind, multi-node, all-node
  perturbations, scale-free graphs, non-Gaussian noise) for pooled ICA-LiNGAM, pooled
  DirectLiNGAM, observational-only ICA-LiNGAM (same rows and noise, no interventions)
  and GIES, which receives the environment labels and targets (pure Python; small d).
* Theory check: excess kurtosis and correlation of squares of the pooled sources vs n,
  with log-log slopes and the closed form.
* Sachs et al. (2005) protein-signalling data, pooled: F1 / SHD / AUPRC vs the consensus.

Programmatic entry points: :func:`evaluate` (one configuration), :func:`sweep` and
:func:`run_sweep` (a sweep over one parameter / over ``d``), :func:`theory_check`,
:func:`sachs_eval`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm
from jaxkit.kernels import lingam, sem

from . import PipelineResult, RunContext, register

__all__ = [
    "TrialConfig",
    "METHODS",
    "evaluate",
    "sweep",
    "run_sweep",
    "theory_check",
    "sachs_eval",
    "gies_fit",
    "run",
]

METHODS = ("pooled-ica", "pooled-direct", "obs-ica", "gies")
LABELS = {
    "pooled-ica": "pooled ICA-LiNGAM (no labels)",
    "pooled-direct": "pooled DirectLiNGAM (no labels)",
    "obs-ica": "observational-only ICA-LiNGAM",
    "gies": "GIES (labels + targets)",
}
_METRICS = ("f1", "shd", "precision", "recall", "auprc")


# ------------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class TrialConfig:
    """One simulated setting; see :func:`jaxkit.kernels.sem.simulate_pooled`.

    ``n_envs=None`` means one atomic intervention per node (``n_envs = d``). Exactly one
    of ``n_per_env`` / ``n_total`` is used (``n_total`` wins when set).
    """

    d: int = 10
    n_envs: int | None = None
    n_per_env: int = 100
    n_total: int | None = None
    strength: float = 3.0
    intervention: str = "scale"
    noise: str = "gaussian"
    graph: str = "er"
    edges_per_node: float = 2.0
    targets_per_env: int = 1
    perturb_all: bool = False

    @property
    def envs(self) -> int:
        return self.d if self.n_envs is None else self.n_envs

    @property
    def n_samples(self) -> int:
        return self.n_total if self.n_total is not None else (self.envs + 1) * self.n_per_env

    def static(self) -> TrialConfig:
        """The config with the traced knob (strength) zeroed: the jit cache key."""
        return dataclasses.replace(self, strength=0.0)

    def sim_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = dict(
            n_envs=self.envs, intervention=self.intervention, noise=self.noise,
            targets_per_env=self.targets_per_env, perturb_all=self.perturb_all)
        if self.n_total is not None:
            kw["n_total"] = self.n_total
        else:
            kw["n_per_env"] = self.n_per_env
        return kw


# --------------------------------------------------------------------- jitted batches


def _simulate_one(key, strength, cfg: TrialConfig):
    kb, kx = jax.random.split(key)
    b = sem.random_dag(kb, cfg.d, graph=cfg.graph, edges_per_node=cfg.edges_per_node)
    kw = cfg.sim_kwargs()
    pooled = sem.simulate_pooled(kx, b, strength=strength, **kw)
    # same key, no intervention: identical base noise, purely observational
    kw_obs = {**kw, "intervention": "scale", "perturb_all": False}
    obs = sem.simulate_pooled(kx, b, strength=1.0, **kw_obs)
    return b, pooled.x, pooled.env, pooled.targets, obs.x


@partial(jax.jit, static_argnames="cfg")
def _simulate_batch(keys, strength, cfg: TrialConfig):
    return jax.vmap(lambda k: _simulate_one(k, strength, cfg))(keys)


# The LiNGAM fits are ``vmap``-ped kernels: on CPU their batching rule maps the
# datasets one at a time (each ICA fit stops at its own convergence, and no batched
# LAPACK call reaches jaxlib 0.10.2's CPU thread-pool stall); on accelerators they
# batch. With a mesh, ``jaxkit.distributed.sharded_vmap`` gives every device its slice
# of the batch (data parallel, no collectives).


def _direct_fit(x):
    return lingam.direct_lingam(x)


@functools.lru_cache(maxsize=16)
def _fitter(fn, mesh):
    return jax.jit(jax.vmap(fn)) if mesh is None else jd.sharded_vmap(fn, mesh).global_fn


def _fit_ica(keys, x, mesh=None):
    return _fitter(lingam.ica_lingam, mesh)(keys, x)


def _fit_direct(x, mesh=None):
    return _fitter(_direct_fit, mesh)(x)


def _score_one(true, est, scores):
    m = gm.edge_metrics(true, est)
    m["auprc"] = gm.auprc(true, jnp.abs(scores))
    return m


_score = jax.jit(jax.vmap(_score_one))


@partial(jax.jit, static_argnames=("d", "n_per_env"))
def _source_moments(keys, strength, d: int, n_per_env: int):
    """Mean excess kurtosis and mean off-diagonal correlation of squares of the pooled
    sources (atomic scaling, one environment per node + observational), per key;
    sequential over keys (lax.map) to bound memory."""

    def one(k):
        e = sem.simulate_pooled(k, jnp.zeros((d, d)), n_envs=d, n_per_env=n_per_env,
                                strength=strength).noise
        return (jnp.mean(sem.excess_kurtosis(e)),
                sem.mean_offdiag(sem.square_correlation(e)))

    return jax.lax.map(one, keys)


# --------------------------------------------------------------------------- sharding


def _data_mesh(mesh):
    """The mesh with Auto axis types (pure data parallelism needs no explicit types)."""
    if mesh is None:
        return None
    if "data" not in mesh.axis_names:
        raise ValueError(f"mesh needs a 'data' axis; got axes {mesh.axis_names}")
    if int(mesh.shape["data"]) == 1 and mesh.devices.size == 1:
        return None  # one device: nothing to shard, use the default placement
    auto = (jax.sharding.AxisType.Auto,) * len(mesh.axis_names)
    return jax.sharding.Mesh(mesh.devices, mesh.axis_names, axis_types=auto)


def _mesh_size(mesh) -> int:
    return 1 if mesh is None else int(mesh.shape["data"])


def _pad_shard(tree, size: int, mesh):
    """Pad every leaf along axis 0 to ``size`` (repeating the last row) and shard that
    axis over the mesh's ``"data"`` axis."""
    padded, _ = jd.pad_batch(tree, size)
    if mesh is None:
        return padded
    return jax.tree.map(lambda a: jax.device_put(a, jd.data_sharding(mesh, a.ndim)), padded)


def _chunk_size(cfg: TrialConfig, n_seeds: int, msize: int, mem_bytes: float = 1.5e9) -> int:
    """Datasets per batch, bounding the simulated arrays (fits run one dataset at a
    time, so their n x d x d DirectLiNGAM temporaries do not scale with the batch)."""
    per = 8.0 * cfg.n_samples * cfg.d * 40
    c = int(max(1, min(n_seeds, mem_bytes // per)))
    return int(math.ceil(c / msize) * msize)


# --------------------------------------------------------------------------- baselines


def gies_fit(x: np.ndarray, env: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """GIES (``gies.fit_bic``) given environment labels and targets; returns the
    estimated I-essential graph in the LiNGAM convention (``[i, j] != 0``: j -> i).

    GIES's own convention is ``A[i, j] != 0`` => ``i -> j`` and an undirected edge
    ``i - j`` has both entries; the transpose keeps undirected edges as both directions,
    so a true edge estimated undirected scores one true and one false positive (and
    counts once in SHD).
    """
    import gies

    x = np.asarray(x, np.float64)
    env = np.asarray(env)
    targets = np.asarray(targets, bool)
    data, interventions = [], []
    for k in range(targets.shape[0]):
        rows = x[env == k]
        if rows.shape[0] == 0:
            continue
        data.append(rows)
        interventions.append([int(j) for j in np.nonzero(targets[k])[0]])
    est, _ = gies.fit_bic(data, interventions)
    return (np.asarray(est) != 0).T.astype(np.float64)


# ----------------------------------------------------------------------------- sweeps


def evaluate(
    key,
    cfg: TrialConfig,
    *,
    n_seeds: int,
    methods: Sequence[str] = METHODS,
    mesh=None,
    gies_seeds: int | None = None,
    gies_max_d: int = 10,
) -> dict[str, dict[str, np.ndarray]]:
    """Simulate ``n_seeds`` datasets of ``cfg`` and score every method on each.

    Returns ``{method: {metric: array (n_seeds,) or fewer for GIES}}`` with metrics
    ``f1, shd, precision, recall, auprc`` (AUPRC of ``|adjacency_unpruned|``; NaN for
    GIES), plus ``converged`` for the ICA fits and ``seconds`` (wall time per method,
    including compilation on first use of a shape). GIES runs on the first
    ``gies_seeds`` datasets (default all) and only when ``cfg.d <= gies_max_d``.
    """
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    mesh = _data_mesh(mesh)
    msize = _mesh_size(mesh)
    chunk = _chunk_size(cfg, n_seeds, msize)
    keys = jax.random.split(key, n_seeds)
    static = cfg.static()
    strength = jnp.asarray(cfg.strength, jnp.result_type(float))
    out: dict[str, dict[str, list]] = {m: {} for m in methods}
    secs = dict.fromkeys(methods, 0.0)
    n_gies = n_seeds if gies_seeds is None else min(gies_seeds, n_seeds)

    def add(method, metrics, n):
        for name, v in metrics.items():
            out[method].setdefault(name, []).append(np.asarray(v)[:n])

    for start in range(0, n_seeds, chunk):
        k = keys[start:start + chunk]
        n = k.shape[0]
        k = _pad_shard(k, chunk, mesh)
        b, x, env, tgt, x_obs = _simulate_batch(k, strength, static)
        kfit = jax.vmap(lambda kk: jax.random.fold_in(kk, 1))(k)
        for name in ("pooled-ica", "pooled-direct", "obs-ica"):
            if name not in methods:
                continue
            t0 = time.perf_counter()
            if name == "pooled-ica":
                r = _fit_ica(kfit, x, mesh)
            elif name == "pooled-direct":
                r = _fit_direct(x, mesh)
            else:
                r = _fit_ica(kfit, x_obs, mesh)
            met = _score(b, r.adjacency, r.adjacency_unpruned)
            met["converged"] = r.converged
            met = jax.device_get(met)
            secs[name] += time.perf_counter() - t0
            add(name, met, n)
        if "gies" in methods and cfg.d <= gies_max_d and start < n_gies:
            bn, xn, en, tn = (np.asarray(a) for a in jax.device_get((b, x, env, tgt)))
            t0 = time.perf_counter()
            rows = []
            for i in range(min(n, n_gies - start)):
                est = gies_fit(xn[i], en[i], tn[i])
                m = jax.device_get(gm.edge_metrics(bn[i], est))
                m["auprc"] = np.nan
                rows.append(m)
            secs["gies"] += time.perf_counter() - t0
            add("gies", {name: np.array([r[name] for r in rows]) for name in rows[0]},
                len(rows))
    result: dict[str, dict[str, np.ndarray]] = {}
    for m in methods:
        if out[m]:
            result[m] = {name: np.concatenate(v) for name, v in out[m].items()}
            result[m]["seconds"] = np.asarray(secs[m])
    return result


def _summarise(res: dict[str, dict[str, np.ndarray]], extra: dict[str, Any]) -> list[dict]:
    rows = []
    for method, mets in res.items():
        row = dict(extra, method=method, n_reps=int(len(mets["f1"])))
        for name in _METRICS:
            v = np.asarray(mets[name], np.float64)
            row[name] = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
            row[name + "_sd"] = float(np.nanstd(v)) if np.isfinite(v).any() else float("nan")
        if "converged" in mets:
            row["converged"] = float(np.mean(mets["converged"]))
        row["seconds"] = float(mets["seconds"])
        rows.append(row)
    return rows


def sweep(
    key,
    param: str,
    values: Iterable,
    *,
    base: TrialConfig = TrialConfig(),
    n_seeds: int = 4,
    methods: Sequence[str] = METHODS,
    mesh=None,
    gies_seeds: int | None = None,
    gies_max_d: int = 10,
    track: Callable | None = None,
) -> list[dict]:
    """Vary one :class:`TrialConfig` field; one summary row per (value, method) with
    the mean and standard deviation over seeds of F1, SHD, precision, recall, AUPRC.

    The same ``key`` is used for every value, so values are compared on the same
    graphs and base noise whenever the shapes agree (e.g. a strength sweep is paired).
    """
    values = list(values)
    it = values if track is None else track(values, f"pooled-lingam: {param}")
    rows: list[dict] = []
    for v in it:
        cfg = dataclasses.replace(base, **{param: v})
        res = evaluate(key, cfg, n_seeds=n_seeds, methods=methods, mesh=mesh,
                       gies_seeds=gies_seeds, gies_max_d=gies_max_d)
        rows += _summarise(res, {param: v, "n_samples": cfg.n_samples})
    return rows


def run_sweep(
    key,
    *,
    ds: Sequence[int] = (5, 10),
    n_seeds: int = 4,
    methods: Sequence[str] = METHODS,
    mesh=None,
    gies_seeds: int | None = None,
    gies_max_d: int = 10,
    track: Callable | None = None,
    **config,
) -> list[dict]:
    """F1 / SHD vs number of variables ``ds``; ``config`` overrides :class:`TrialConfig`
    fields (e.g. ``n_per_env=50, strength=3.0``). See :func:`sweep` for the rows."""
    return sweep(key, "d", ds, base=TrialConfig(**config), n_seeds=n_seeds, methods=methods,
                 mesh=mesh, gies_seeds=gies_seeds, gies_max_d=gies_max_d, track=track)


def _loglog_slope(xs, ys) -> float:
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    ok = (ys > 0) & np.isfinite(ys)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)[0])


def theory_check(
    key,
    *,
    ds: Sequence[int] = (5, 10, 20, 40),
    strengths: Sequence[float] = (3.0,),
    n_per_env: int = 400,
    n_seeds: int = 2,
    tail_from: int = 20,
    track: Callable | None = None,
) -> dict[str, Any]:
    """Pooled-source moments vs number of variables (Gaussian noise, atomic variance
    scaling by ``strength``, one environment per node plus an observational one).

    Returns ``ds``, ``strengths`` and, per strength (rows) and d (columns), the measured
    mean excess kurtosis ``kurtosis`` and minus the mean off-diagonal correlation of
    squares ``dependence`` (expected positive), their closed forms ``kurtosis_theory`` /
    ``dependence_theory``, and log-log slopes over all ``ds`` (``slope_*``) and over
    ``d >= tail_from`` (``tail_slope_*``), measured and theoretical (``*_theory``). The
    asymptotic slopes are -1 (kurtosis) and -2 (dependence).
    """
    ds = [int(d) for d in ds]
    strengths = [float(s) for s in strengths]
    keys = jax.random.split(key, n_seeds)
    kurt = np.zeros((len(strengths), len(ds)))
    dep = np.zeros_like(kurt)
    it = list(enumerate(ds))
    it = it if track is None else track(it, "pooled-lingam: theory")
    for j, d in it:
        for i, s in enumerate(strengths):
            k, c = jax.device_get(_source_moments(keys, jnp.asarray(s, jnp.result_type(float)),
                                                  d, n_per_env))
            kurt[i, j] = float(np.mean(k))
            dep[i, j] = -float(np.mean(c))
    kt, ct = (np.asarray(a) for a in sem.atomic_scale_theory(
        np.asarray(ds, float)[None, :], np.asarray(strengths)[:, None]))
    dep_t = -ct
    tail = np.asarray(ds) >= tail_from
    out: dict[str, Any] = dict(ds=ds, strengths=strengths, kurtosis=kurt, dependence=dep,
                               kurtosis_theory=kt, dependence_theory=dep_t,
                               n_per_env=n_per_env, n_seeds=n_seeds, tail_from=tail_from)
    for name, meas, th in (("kurtosis", kurt, kt), ("dependence", dep, dep_t)):
        out[f"slope_{name}"] = [_loglog_slope(ds, m) for m in meas]
        out[f"slope_{name}_theory"] = [_loglog_slope(ds, t) for t in th]
        dt = np.asarray(ds)[tail]
        out[f"tail_slope_{name}"] = [_loglog_slope(dt, m[tail]) for m in meas]
        out[f"tail_slope_{name}_theory"] = [_loglog_slope(dt, t[tail]) for t in th]
    return out


def _topk_metrics(truth, scores, k: int) -> dict[str, float]:
    s = np.abs(np.asarray(scores, np.float64))
    np.fill_diagonal(s, 0.0)
    kth = np.sort(s.ravel())[-k]
    est = (s >= kth).astype(np.float64)
    np.fill_diagonal(est, 0.0)
    m = jax.device_get(gm.edge_metrics(truth, est))
    return {name: float(v) for name, v in m.items()}


def sachs_eval(key, *, n_restarts: int = 4) -> list[dict]:
    """Pooled ICA-LiNGAM (``n_restarts`` FastICA initialisations) and DirectLiNGAM on the
    Sachs data, raw and ``log``-transformed, scored against the 18-edge consensus graph:
    the BIC-pruned graph (F1 / SHD / precision / recall / number of edges), AUPRC and
    AUROC of ``|adjacency_unpruned|``, and the top-k graph (the k = 18 largest
    ``|adjacency_unpruned|`` entries). One row per (method, transform): means over
    restarts, with ``*_sd``.
    """
    from jaxkit.data.sachs import load_sachs

    x_raw, _, truth = load_sachs()
    n_true = int(truth.sum())
    dtype = jnp.result_type(float)
    xs = {"raw": jnp.asarray(x_raw, dtype), "log": jnp.asarray(np.log(x_raw), dtype)}
    keys = jax.random.split(key, n_restarts)
    stacked = jnp.stack([xs["raw"]] * n_restarts + [xs["log"]] * n_restarts)
    t0 = time.perf_counter()
    ica = jax.device_get(_fit_ica(jnp.concatenate([keys, keys]), stacked))
    t_ica = time.perf_counter() - t0
    t0 = time.perf_counter()
    direct = jax.device_get(_fit_direct(jnp.stack([xs["raw"], xs["log"]])))
    t_direct = time.perf_counter() - t0
    rows = []
    for method, res, idx, secs in (
        ("pooled-ica", ica, {"raw": range(n_restarts),
                             "log": range(n_restarts, 2 * n_restarts)}, t_ica),
        ("pooled-direct", direct, {"raw": [0], "log": [1]}, t_direct),
    ):
        for tf, ii in idx.items():
            recs = []
            for i in ii:
                m = {k: float(v) for k, v in
                     jax.device_get(gm.edge_metrics(truth, res.adjacency[i])).items()}
                sc = np.abs(res.adjacency_unpruned[i])
                m["auprc"] = float(gm.auprc(truth, sc))
                m["auroc"] = float(gm.auroc(truth, sc))
                top = _topk_metrics(truth, sc, n_true)
                m["topk_f1"], m["topk_shd"] = top["f1"], top["shd"]
                m["converged"] = float(res.converged[i])
                recs.append(m)
            row: dict[str, Any] = dict(method=method, transform=tf, n_reps=len(recs),
                                       seconds=secs)
            for name in recs[0]:
                v = np.array([r[name] for r in recs])
                row[name], row[name + "_sd"] = float(v.mean()), float(v.std())
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- settings


QUICK = dict(
    n_seeds=8, ds=(5, 10, 20), n_per_env=100, sweep_d=10,
    env_values=(2, 5, 10, 20), samples_values=(30, 100, 300),
    strengths=(1.0, 1.5, 2.0, 3.0, 5.0), gies_seeds=4, gies_max_d=10,
    theory_ds=(5, 10, 20, 40, 80), theory_npe=400, theory_seeds=2,
    theory_strengths=(3.0, 1.5), sachs_restarts=4, ablations=True,
)
FULL = dict(
    n_seeds=16, ds=(5, 10, 20, 30, 40, 50), n_per_env=200, sweep_d=20,
    env_values=(5, 10, 20, 40, 80), samples_values=(25, 50, 100, 200, 400, 800),
    strengths=(1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 8.0), gies_seeds=8, gies_max_d=20,
    theory_ds=(5, 10, 20, 40, 80, 160), theory_npe=1000, theory_seeds=8,
    theory_strengths=(3.0, 1.5), sachs_restarts=8, ablations=True,
)


def _ablations(d: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("atomic variance scaling x3 (reference)", {}),
        ("atomic mean shift (3 sd)", dict(intervention="shift")),
        ("atomic noise replaced by uniform (same variance)",
         dict(intervention="replace", strength=1.0)),
        ("2 targets per environment", dict(targets_per_env=2)),
        ("every node perturbed in every environment", dict(perturb_all=True)),
        ("scale-free graph", dict(graph="sf")),
        ("Laplace noise (non-Gaussian even without interventions)", dict(noise="laplace")),
    ]


# ----------------------------------------------------------------------------- report


def _by_method(rows: list[dict], param: str):
    out: dict[str, tuple[list, dict[str, list]]] = {}
    for r in rows:
        xs, ms = out.setdefault(r["method"], ([], {}))
        xs.append(r[param])
        for k in ("f1", "f1_sd", "shd", "shd_sd"):
            ms.setdefault(k, []).append(r[k])
    return out


def _plot_metric(ax, rows, param, metric, *, logx=False):
    for method, (xs, ms) in _by_method(rows, param).items():
        ax.errorbar(xs, ms[metric], yerr=ms[metric + "_sd"], marker="o", capsize=3,
                    label=LABELS[method])
    ax.set_xlabel(param)
    ax.set_ylabel(metric.upper())
    if logx:
        ax.set_xscale("log")
    _int_ticks(ax, sorted({r[param] for r in rows}))
    ax.grid(alpha=0.3)


def _int_ticks(ax, values):
    """Tick exactly the swept values (no overlapping minor labels on log axes)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(values))
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _sweep_table(rows: list[dict], param: str) -> str:
    from jaxkit.report import markdown_table

    header = [param, "N rows", "method", "reps", "F1", "SHD", "precision", "recall",
              "AUPRC", "ICA conv.", "time s"]
    body = []
    for r in rows:
        body.append([r[param], r["n_samples"], r["method"], r["n_reps"],
                     f"{r['f1']:.2f} ± {r['f1_sd']:.2f}", f"{r['shd']:.1f} ± {r['shd_sd']:.1f}",
                     r["precision"], r["recall"], r["auprc"], r.get("converged", "-"),
                     r["seconds"]])
    return markdown_table(header, body)


def _get(rows, method, param, value, metric="f1"):
    for r in rows:
        if r["method"] == method and r[param] == value:
            return r[metric]
    return float("nan")


def _verdict(d_rows: list[dict], ds: Sequence[int], gies_max_d: int) -> tuple[str, bool]:
    ica = [_get(d_rows, "pooled-ica", "d", d) for d in ds]
    obs = [_get(d_rows, "obs-ica", "d", d) for d in ds]
    gies_ds = [d for d in ds if d <= gies_max_d]
    gap = [_get(d_rows, "pooled-ica", "d", d) - _get(d_rows, "gies", "d", d) for d in gies_ds]
    diff = np.subtract(ica, obs)
    holds_acc = min(ica) >= 0.85
    holds_obs = bool(np.all(diff > 0))
    holds_gies = (not gap) or min(gap) >= -0.05
    holds = holds_acc and holds_obs and holds_gies
    lines = [
        f"- Pooled ICA-LiNGAM F1 over d = {list(ds)}: "
        + ", ".join(f"{v:.2f}" for v in ica)
        + f" (minimum {min(ica):.2f}; criterion >= 0.85: {'met' if holds_acc else 'NOT met'}).",
        "- Observational-only ICA-LiNGAM (same rows, no interventions) F1: "
        + ", ".join(f"{v:.2f}" for v in obs)
        + f"; pooled better at every d: {'yes' if holds_obs else 'NO'} (gain "
        + ", ".join(f"{v:+.2f}" for v in diff) + ").",
    ]
    if gap:
        lines.append(
            f"- Versus label-aware GIES at d <= {gies_max_d}: F1 difference (pooled ICA - GIES) "
            + ", ".join(f"{g:+.2f}" for g in gap)
            + f"; 'matches or exceeds' (>= -0.05): {'yes' if holds_gies else 'NO'}.")
    return "\n".join(lines), holds


def _caveats(str_rows, env_rows, abl_rows, sachs_rows, d0: int) -> str:
    """Auto-generated findings that qualify the verdict (numbers from this run)."""
    lines = []
    strong = sorted(r["strength"] for r in str_rows
                    if r["method"] == "pooled-ica" and r["strength"] > 1 and r["f1"] >= 0.9)
    weak = [(r["strength"], r["f1"]) for r in str_rows
            if r["method"] == "pooled-ica" and r["strength"] > 1 and r["f1"] < 0.9]
    obs = _get(str_rows, "obs-ica", "strength", str_rows[0]["strength"]) if str_rows else np.nan
    if strong:
        lines.append(f"- Strength (d={d0}): pooled ICA-LiNGAM reaches F1 >= 0.9 from noise-sd "
                     f"factor {strong[0]:g}; weaker interventions "
                     + (", ".join(f"s={s:g}: F1 {f:.2f}" for s, f in weak) if weak else "none")
                     + f" (observational-only F1 {obs:.2f}): too little non-Gaussianity.")
    few = [(r["n_envs"], r["f1"]) for r in env_rows
           if r["method"] == "pooled-ica" and r["n_envs"] < d0]
    if few:
        lines.append(f"- Fewer interventional environments than nodes (d={d0}): F1 "
                     + ", ".join(f"{k} envs: {f:.2f}" for k, f in few)
                     + " -- untargeted nodes keep Gaussian sources, as theory predicts.")
    bad = [(r["setting"], r["f1"]) for r in abl_rows
           if r["method"] == "pooled-ica" and r["f1"] < 0.9]
    if bad:
        lines.append("- Ablations where pooled ICA-LiNGAM falls below F1 0.9: "
                     + "; ".join(f"{n}: {f:.2f}" for n, f in bad) + ".")
    elif abl_rows:
        lines.append("- All ablations keep pooled ICA-LiNGAM at F1 >= 0.9.")
    for r in sachs_rows:
        if r["method"] == "pooled-ica" and r["transform"] == "raw":
            lines.append(f"- Sachs (real, pooled, raw): ICA-LiNGAM F1 {r['f1']:.2f}, SHD "
                         f"{r['shd']:.0f}, AUPRC {r['auprc']:.2f} vs chance 0.16 -- weak recovery; "
                         "the paper's 'comparable to label-aware methods' on real data is not "
                         "tested here (no environment labels in the shipped file).")
    lines.append("- GIES (`gies` 0.0.3, BIC) is scored on its I-essential graph; undirected "
                 "edges cost it precision, so its F1 understates its skeleton recovery.")
    return "\n".join(lines)


@register("pooled-lingam")
def run(ctx: RunContext, settings: dict[str, Any] | None = None) -> PipelineResult:
    """Paper 7: pooled ICA-LiNGAM without environment labels (see module docstring).

    ``settings`` overrides entries of :data:`QUICK` / :data:`FULL` (chosen by
    ``ctx.quick``), e.g. tiny shapes for tests. Computes in float64 (``jax.enable_x64``
    for the duration of the run) regardless of the global setting.
    """
    S = {**(QUICK if ctx.quick else FULL), **(settings or {})}
    with jax.enable_x64(True):
        return _run(ctx, S)


def _run(ctx: RunContext, S: dict[str, Any]) -> PipelineResult:
    from jaxkit.report import markdown_table, new_figure, save_figure

    t_start = time.perf_counter()
    key = jax.random.key(ctx.seed)
    k_d, k_env, k_npe, k_str, k_abl, k_th, k_sachs = jax.random.split(key, 7)
    out = Path(ctx.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    common = dict(n_seeds=S["n_seeds"], mesh=ctx.mesh, gies_seeds=S["gies_seeds"],
                  gies_max_d=S["gies_max_d"], track=ctx.track)
    d0 = S["sweep_d"]
    base = TrialConfig(d=d0, n_per_env=S["n_per_env"])
    figures: list[Path] = []
    warnings: list[str] = []

    # 1. number of variables
    cfg_key = tuple(sorted((k, repr(v)) for k, v in S.items()))

    def stage(name, fn):
        return ctx.stage(name, fn, config=cfg_key)

    d_rows = stage("d", lambda: run_sweep(k_d, ds=S["ds"], n_per_env=S["n_per_env"],
                                          **common))
    for metric in ("f1", "shd"):
        fig, ax = new_figure()
        _plot_metric(ax[0, 0], d_rows, "d", metric)
        ax[0, 0].set_xlabel("number of variables d (one atomic intervention per node)")
        ax[0, 0].legend(fontsize=7)
        figures.append(save_figure(fig, out / f"pooled_lingam_{metric}_vs_d.png"))

    # 2.-4. environments (fixed total rows), samples per environment, strength
    env_rows = stage("n_envs", lambda: sweep(
        k_env, "n_envs", S["env_values"],
        base=dataclasses.replace(base, n_total=(d0 + 1) * S["n_per_env"]), **common))
    npe_rows = stage("n_per_env", lambda: sweep(k_npe, "n_per_env", S["samples_values"],
                                                base=base, **common))
    str_rows = stage("strength", lambda: sweep(k_str, "strength", S["strengths"], base=base,
                                               **common))
    for rows, param, logx, xlabel in (
        (env_rows, "n_envs", True, f"interventional environments (d={d0}, fixed total rows)"),
        (npe_rows, "n_per_env", True, f"samples per environment (d={d0})"),
        (str_rows, "strength", False, f"intervention strength: noise sd factor (d={d0})"),
    ):
        fig, ax = new_figure(ncols=2)
        for j, metric in enumerate(("f1", "shd")):
            _plot_metric(ax[0, j], rows, param, metric, logx=logx)
            ax[0, j].set_xlabel(xlabel)
        ax[0, 0].legend(fontsize=7)
        figures.append(save_figure(fig, out / f"pooled_lingam_{param}_sweep.png"))

    # 5. ablations at d0, n_envs = d0
    def ablations():
        rows: list[dict] = []
        for name, over in ctx.track(_ablations(d0) if S["ablations"] else [],
                                    "pooled-lingam: ablations"):
            cfg = dataclasses.replace(base, **over)
            res = evaluate(k_abl, cfg, n_seeds=S["n_seeds"], mesh=ctx.mesh,
                           gies_seeds=S["gies_seeds"], gies_max_d=S["gies_max_d"])
            rows += _summarise(res, {"setting": name, "n_samples": cfg.n_samples})
        return rows

    abl_rows = stage("ablations", ablations)

    # 6. theory check
    th = stage("theory", lambda: theory_check(
        k_th, ds=S["theory_ds"], strengths=S["theory_strengths"], n_per_env=S["theory_npe"],
        n_seeds=S["theory_seeds"], track=ctx.track))
    fig, ax = new_figure(ncols=2)
    for j, (name, ylab) in enumerate((("kurtosis", "mean excess kurtosis"),
                                      ("dependence", "-mean corr(e_i^2, e_j^2)"))):
        a = ax[0, j]
        for i, s in enumerate(th["strengths"]):
            line = a.loglog(th["ds"], th[name][i], "o", label=f"measured, s={s:g} "
                            f"(slope {th['slope_' + name][i]:.2f})")[0]
            a.loglog(th["ds"], th[name + "_theory"][i], "-", color=line.get_color(),
                     label=f"closed form, s={s:g}")
        ref = -1 if name == "kurtosis" else -2
        dd = np.asarray(th["ds"], float)
        y0 = th[name + "_theory"][-1][-1]
        a.loglog(dd, y0 * (dd / dd[-1]) ** ref, "k:", label=f"slope {ref}")
        _int_ticks(a, th["ds"])
        a.set_xlabel("number of variables n")
        a.set_ylabel(ylab)
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=6)
    figures.append(save_figure(fig, out / "pooled_lingam_theory_slopes.png"))

    # 7. Sachs
    sachs_rows = stage("sachs", lambda: sachs_eval(k_sachs, n_restarts=S["sachs_restarts"]))

    # ---------------------------------------------------------------- markdown
    verdict, holds = _verdict(d_rows, S["ds"], S["gies_max_d"])
    md: list[str] = []
    md.append(
        f"Mode: {'quick' if ctx.quick else 'full'}; seed {ctx.seed}; {S['n_seeds']} simulated "
        f"datasets per cell (GIES: first {S['gies_seeds']}, only d <= {S['gies_max_d']}, "
        "since the `gies` package is pure Python). Linear Gaussian SEMs, Erdos-Renyi DAGs "
        "with 2 expected edges per node, weights ±U[0.5, 2], unit noise; one observational "
        "environment plus atomic interventions that multiply one node's noise sd by the "
        f"strength (default 3, variance x9); {S['n_per_env']} rows per environment unless "
        "varied. Label-free methods see only the pooled rows. The observational-only "
        "control fits the same number of rows with the same base noise and no "
        "intervention. GIES gets the environment labels and targets; its CPDAG is scored "
        "with undirected edges counted in both directions (a true edge left undirected = "
        "one true and one false positive in F1, one error in SHD). SHD counts a reversed "
        "edge once; F1 is over directed edges; AUPRC ranks |unpruned adjacency|.")
    md += ["", "### Verdict", "", verdict, ""]
    md.append("**Synthetic claim " + ("holds" if holds else "does NOT fully hold")
              + " in this run, in the paper's setting** (one atomic variance-scaling "
              "intervention per node, strength 3; criteria: pooled ICA-LiNGAM F1 >= 0.85 "
              "at every d, above observational-only at every d, within 0.05 F1 of GIES "
              "where GIES ran). "
              "With 2 expected edges per node the d = 5 graphs are complete DAGs, where "
              "any causal order finds every adjacency and only orientation matters.")
    md += ["", "Qualifications (this run):", "",
           _caveats(str_rows, env_rows, abl_rows, sachs_rows, d0), "",
           "Tables: mean ± sd over datasets; 'time s' is wall time per method and cell "
           "including compilation on the first use of a shape; 'ICA conv.' is the fraction of "
           "FastICA runs that met the tolerance within 1000 iterations."]
    md += ["", "### F1 / SHD vs number of variables", "", _sweep_table(d_rows, "d"), ""]
    md += [f"### vs number of interventional environments (d={d0}, total rows fixed at "
           f"{(d0 + 1) * S['n_per_env']}; with fewer than d environments some nodes keep "
           "Gaussian noise, so identifiability is not expected)", "",
           _sweep_table(env_rows, "n_envs"), ""]
    md += [f"### vs samples per environment (d={d0})", "", _sweep_table(npe_rows, "n_per_env"),
           ""]
    md += [f"### vs intervention strength (d={d0}; strength 1 = no intervention, pooled = "
           "observational)", "", _sweep_table(str_rows, "strength"), ""]
    if abl_rows:
        md += [f"### Ablations (d={d0}, one environment per node)", "",
               _sweep_table(abl_rows, "setting"), ""]

    th_rows = []
    for i, s in enumerate(th["strengths"]):
        th_rows.append([s, "kurtosis", th["slope_kurtosis"][i],
                        th["slope_kurtosis_theory"][i], th["tail_slope_kurtosis"][i],
                        th["tail_slope_kurtosis_theory"][i], -1])
        th_rows.append([s, "dependence", th["slope_dependence"][i],
                        th["slope_dependence_theory"][i], th["tail_slope_dependence"][i],
                        th["tail_slope_dependence_theory"][i], -2])
    md += ["### Theory check: pooled-source moments vs n", "",
           f"Sources only (Gaussian, atomic variance scaling, n environments + 1 "
           f"observational, {th['n_per_env']} rows each, {th['n_seeds']} seeds): mean excess "
           "kurtosis and dependence = minus the mean off-diagonal correlation of the squared "
           "sources (the closed form is negative: -p^2 (s^2-1)^2 / (3 m4 - m2^2), p = 1/(n+1)). "
           f"Log-log slopes over n = {th['ds']} and over n >= {th['tail_from']}:", "",
           markdown_table(["strength", "quantity", "slope (all n)", "closed form (all n)",
                           f"slope (n>={th['tail_from']})",
                           f"closed form (n>={th['tail_from']})", "asymptotic"], th_rows), ""]
    val_rows = []
    for i, s in enumerate(th["strengths"]):
        for j, d in enumerate(th["ds"]):
            val_rows.append([s, d, th["kurtosis"][i, j], th["kurtosis_theory"][i, j],
                             th["dependence"][i, j], th["dependence_theory"][i, j]])
    md += [markdown_table(["strength", "n", "kurtosis", "closed form", "dependence",
                           "closed form"], val_rows), ""]
    k_ok = all(v < 0 for v in th["slope_kurtosis"])
    sep = [th["tail_slope_dependence"][i] < th["tail_slope_kurtosis"][i]
           for i in range(len(th["strengths"]))]
    md.append(
        "Measured moments follow the closed form; kurtosis decreases with n "
        f"({'all' if k_ok else 'NOT all'} slopes negative) and dependence decays faster than "
        f"kurtosis for n >= {th['tail_from']} at {sum(sep)}/{len(sep)} strengths. The slopes "
        "approach -1 and -2 only for n >> s^2: at strength 3 (variance x9) the range shown "
        "is pre-asymptotic and the fitted slopes are shallower than -1 / -2.")

    sachs_tab = [[r["method"], r["transform"], r["n_reps"], f"{r['f1']:.2f} ± {r['f1_sd']:.2f}",
                  f"{r['shd']:.1f}", r["n_edges_est"], r["precision"], r["recall"],
                  f"{r['auprc']:.2f} ± {r['auprc_sd']:.2f}", r["auroc"], r["topk_f1"],
                  r["topk_shd"]] for r in sachs_rows]
    md += ["", "### Sachs et al. (2005), pooled without labels (7466 x 11, 18 consensus edges)",
           "",
           markdown_table(["method", "data", "restarts", "F1 (BIC-pruned)", "SHD",
                           "edges est.", "precision", "recall", "AUPRC", "AUROC",
                           "top-18 F1", "top-18 SHD"], sachs_tab), "",
           "BIC pruning is loose at n = 7466 (many weak but 'significant' edges), hence the "
           "threshold-free AUPRC/AUROC of |unpruned adjacency| and the top-18 graph (as many "
           "edges as the consensus). Chance AUPRC = 18/110 = 0.16. The consensus contains "
           "the cycle PIP3 -> plcg -> PIP2 -> PIP3, so no DAG matches all 18 edges. "
           "No label-aware baseline "
           "is run on Sachs: the shipped file has no environment labels."]
    md += ["", f"Total pipeline time: {time.perf_counter() - t_start:.0f} s "
           "(CPU compile time included)."]
    if ctx.reloaded:
        md.append(f"Stages reloaded from an earlier run of this configuration (their time "
                  f"is not included): {', '.join(ctx.reloaded)}.")

    if not holds:
        warnings.append("pooled ICA-LiNGAM did not meet every synthetic criterion; "
                        "see the verdict")

    def _clean(rows):
        return [{k: (v if not isinstance(v, np.generic) else v.item()) for k, v in r.items()}
                for r in rows]

    metrics = {
        "claim_holds": bool(holds),
        "d_sweep": _clean(d_rows),
        "env_sweep": _clean(env_rows),
        "samples_sweep": _clean(npe_rows),
        "strength_sweep": _clean(str_rows),
        "ablations": _clean(abl_rows),
        "theory": {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v)
                   for k, v in th.items()},
        "sachs": _clean(sachs_rows),
        "seconds": time.perf_counter() - t_start,
    }
    return PipelineResult(name="pooled-lingam",
                          title="Pooled ICA-LiNGAM without environment labels (Paper 7)",
                          markdown="\n".join(md), figures=figures, metrics=metrics,
                          warnings=warnings)
