"""F1 / SHD of every method on simulated settings, and sweeps over one setting.

All datasets of one setting form one batch: simulated by :func:`.data.simulate_batch`
and fitted by the batched kernels of :mod:`.methods`, padded once to a fixed chunk
(a multiple of the mesh's ``"data"`` size) and split over that axis. Settings with the
same shapes (a strength sweep, ablations, environments at fixed total rows) reuse the
compiled fits. On CPU each dataset is simulated, fitted and scored on its own
(``sequential``), so the graphs and metrics on one device and on a mesh are
bit-identical; padded datasets repeat the last key and are cut off before scoring.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm
from jaxkit.kernels.sem.pc import dag_to_cpdag

from .data import TrialConfig, ablations, simulate_batch
from .methods import METHODS, fit_direct, fit_ica, gies_fit, score
from .results import SweepRow

__all__ = ["evaluate", "summarise", "sweep", "run_sweep", "run_ablations"]

_LINGAM = ("pooled-ica", "pooled-direct", "obs-ica")


@jax.jit
def _gies_truth(b, env, targets):
    """The interventional essential graph of ``b`` under the target sets of the
    environments that have rows (Hauser & Buhlmann 2012): what GIES can identify, and
    so what it is scored against. With one atomic intervention per node it is ``b``."""
    present = (env[None, :] == jnp.arange(targets.shape[0])[:, None]).any(axis=1)
    return dag_to_cpdag(b, targets & present[:, None])


def _fold1(keys):
    return jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)


def evaluate(
    key,
    cfg: TrialConfig,
    *,
    n_seeds: int,
    methods: Sequence[str] = METHODS,
    mesh=None,
    gies_seeds: int | None = None,
    gies_max_d: int = 10,
    sequential: bool | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Simulate ``n_seeds`` datasets of ``cfg`` (keys split from ``key``) and score
    every method on each.

    Args:
        key: PRNG key; dataset ``i`` uses ``split(key, n_seeds)[i]`` (its FastICA key
            is folded from it), so equal keys give paired datasets across settings of
            the same shape.
        cfg: the setting.
        n_seeds: number of datasets.
        methods: a subset of :data:`.methods.METHODS`.
        mesh: a mesh with a ``"data"`` axis over which the datasets are split, or None.
        gies_seeds: GIES runs on the first ``gies_seeds`` datasets (default all).
        gies_max_d: GIES runs only when ``cfg.d <= gies_max_d``.
        sequential: simulate, fit and score one dataset at a time (``lax.map``, each
            device over the datasets it holds) instead of ``vmap``; ``None``: on CPU
            (where FastICA's batching rule loops anyway). Then one device and any mesh
            give bit-identical graphs and metrics (:func:`jaxkit.distributed.batched`);
            under ``vmap`` the rows of a dataset can differ in the last bits with the
            batch each device holds, and FastICA can turn that into another causal
            order.

    Returns:
        ``{method: {metric: array (n_seeds,) or fewer for GIES}}`` with metrics
        ``f1, shd, precision, recall, auprc`` (AUPRC of ``|adjacency_unpruned|``; NaN
        for GIES), ``converged`` for the ICA fits and ``seconds`` (wall time per method,
        compilation included on the first use of a shape).
    """
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"`methods`: unknown {sorted(unknown)}; choose from {METHODS}")
    if n_seeds < 1:
        raise ValueError(f"`n_seeds` must be >= 1; got {n_seeds}")
    mesh = jd.data_mesh(mesh)
    seq = jax.default_backend() == "cpu" if sequential is None else bool(sequential)
    chunk = jd.chunk_size(n_seeds, 8.0 * cfg.n_samples * cfg.d * 40, mesh)
    keys = jax.random.split(key, n_seeds)
    out: dict[str, dict[str, list]] = {m: {} for m in methods}
    secs = dict.fromkeys(methods, 0.0)
    n_gies = n_seeds if gies_seeds is None else min(gies_seeds, n_seeds)
    run_gies = "gies" in methods and cfg.d <= gies_max_d

    def add(method, metrics, n):
        for name, v in metrics.items():
            out[method].setdefault(name, []).append(np.asarray(v)[:n])

    for start in range(0, n_seeds, chunk):
        # one padding, to the fixed chunk: every chunk and setting of this shape
        # reuses the compiled simulation and fits
        k, n = jd.shard_batch(keys[start:start + chunk], mesh, size=chunk)
        sim = simulate_batch(k, cfg, mesh, sequential=seq)
        kfit = _fold1(k)
        for name in _LINGAM:
            if name not in methods:
                continue
            t0 = time.perf_counter()
            if name == "pooled-ica":
                r = fit_ica(kfit, sim.x, mesh, sequential=seq)
            elif name == "pooled-direct":
                r = fit_direct(sim.x, mesh, sequential=seq)
            else:
                r = fit_ica(kfit, sim.x_obs, mesh, sequential=seq)
            met = score(sim.b, r.adjacency, r.adjacency_unpruned, mesh, sequential=seq)
            met["converged"] = r.converged
            met = jax.device_get(met)
            secs[name] += time.perf_counter() - t0
            add(name, met, n)
        if run_gies and start < n_gies:
            bn, xn, en, tn = (np.asarray(a) for a in
                              jax.device_get((sim.b, sim.x, sim.env, sim.targets)))
            t0 = time.perf_counter()
            rows = []
            for i in range(min(n, n_gies - start)):
                truth = _gies_truth(bn[i], en[i], tn[i])
                m = jax.device_get(gm.edge_metrics(truth, gies_fit(xn[i], en[i], tn[i])))
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


def _mean_sd(values) -> tuple[float, float]:
    """Mean and sd over the finite values (nan, nan when none is finite)."""
    v = np.asarray(values, np.float64)
    if not np.isfinite(v).any():
        return float("nan"), float("nan")
    return float(np.nanmean(v)), float(np.nanstd(v))


def summarise(res: dict[str, dict[str, np.ndarray]], param: str, value: Any,
              n_samples: int) -> list[SweepRow]:
    """One :class:`~.results.SweepRow` per method of :func:`evaluate`'s result on the
    setting ``param == value`` (``n_samples`` pooled rows): the mean and sd over datasets
    of each metric, the per-dataset F1 and SHD (for paired claim tests), ``converged``
    (fraction, ICA fits) and ``seconds``."""
    rows = []
    for method, mets in res.items():
        (f1, f1_sd), (shd, shd_sd), (prec, prec_sd), (rec, rec_sd), (auprc, auprc_sd) = (
            _mean_sd(mets[name]) for name in ("f1", "shd", "precision", "recall", "auprc"))
        rows.append(SweepRow(
            param=param, value=value, n_samples=n_samples, method=method,
            n_reps=int(len(mets["f1"])), f1=f1, f1_sd=f1_sd, shd=shd, shd_sd=shd_sd,
            precision=prec, precision_sd=prec_sd, recall=rec, recall_sd=rec_sd,
            auprc=auprc, auprc_sd=auprc_sd,
            f1_seeds=np.asarray(mets["f1"], np.float64),
            shd_seeds=np.asarray(mets["shd"], np.float64),
            converged=float(np.mean(mets["converged"])) if "converged" in mets else None,
            seconds=float(mets["seconds"])))
    return rows


def _scored(key, items: list, param: str,
            setting: Callable[[Any], tuple[TrialConfig, Any]], description: str,
            track: Callable | None, evaluate_kw: dict) -> list[SweepRow]:
    """:func:`summarise` rows of :func:`evaluate` (on the same ``key``, with
    ``evaluate_kw``) for each of ``items``, whose ``setting(item)`` is the setting and
    the value of ``param`` the rows record."""
    rows: list[SweepRow] = []
    for item in (items if track is None else track(items, description)):
        cfg, value = setting(item)
        res = evaluate(key, cfg, **evaluate_kw)
        rows += summarise(res, param, value, cfg.n_samples)
    return rows


def sweep(
    key,
    param: str,
    values: Iterable,
    *,
    base: TrialConfig = TrialConfig(),
    n_seeds: int = 4,
    track: Callable | None = None,
    **evaluate_kw,
) -> list[SweepRow]:
    """Vary one :class:`.data.TrialConfig` field; one :func:`summarise` row per
    (value, method). ``evaluate_kw`` (``methods``,
    ``mesh``, ``gies_seeds``, ``gies_max_d``) go to :func:`evaluate`.

    The same ``key`` is used for every value, so values are compared on the same
    graphs and base noise whenever the shapes agree (e.g. a strength sweep is paired).
    """
    if param not in {f.name for f in dataclasses.fields(TrialConfig)}:
        raise ValueError(f"`param` must be a TrialConfig field; got {param!r}")
    return _scored(key, list(values), param,
                   lambda v: (dataclasses.replace(base, **{param: v}), v),
                   f"pooled-lingam: {param}", track, dict(evaluate_kw, n_seeds=n_seeds))


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
) -> list[SweepRow]:
    """F1 / SHD vs number of variables ``ds``; ``config`` overrides
    :class:`.data.TrialConfig` fields (e.g. ``n_per_env=50, strength=3.0``). See
    :func:`sweep` for the rows and :func:`evaluate` for the other arguments."""
    return sweep(key, "d", ds, base=TrialConfig(**config), n_seeds=n_seeds, methods=methods,
                 mesh=mesh, gies_seeds=gies_seeds, gies_max_d=gies_max_d, track=track)


def run_ablations(
    key,
    base: TrialConfig,
    *,
    track: Callable | None = None,
    **evaluate_kw,
) -> list[SweepRow]:
    """Every :func:`.data.ablations` setting applied to ``base``, on the same keys;
    :func:`summarise` rows with ``param`` ``"setting"`` and the ablation's name as value
    and ``setting``.
    ``evaluate_kw`` (``n_seeds``, ``methods``, ``mesh``, ``gies_seeds``, ``gies_max_d``)
    go to :func:`evaluate`."""
    rows = _scored(key, ablations(), "setting",
                   lambda item: (dataclasses.replace(base, **item[1]), item[0]),
                   "pooled-lingam: ablations", track, evaluate_kw)
    return [r.named(r.value) for r in rows]
