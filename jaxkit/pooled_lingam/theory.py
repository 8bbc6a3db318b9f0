"""The theory check: moments of the pooled sources against the number of variables.

Gaussian noise, one observational environment plus one atomic variance-scaling
intervention per node, pooled: the sources become non-Gaussian with excess kurtosis
``O(1/n)`` while their dependence (minus the correlation of their squares) decays as
``O(1/n^2)``; closed forms in :func:`jaxkit.kernels.sem.atomic_scale_theory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import sem

from .results import Moment, Theory

__all__ = ["theory_check", "loglog_slope"]


def _moments_one(key, strength, d: int, n_per_env: int):
    e = sem.simulate_pooled(key, jnp.zeros((d, d)), n_envs=d, n_per_env=n_per_env,
                            strength=strength).noise
    return jnp.mean(sem.excess_kurtosis(e)), sem.mean_offdiag(sem.square_correlation(e))


def _moments_many(keys, strength, d: int, n_per_env: int):
    """Sequential over keys (``lax.map``) to bound memory."""
    return jax.lax.map(lambda k: _moments_one(k, strength, d, n_per_env), keys)


@partial(jax.jit, static_argnames=("d", "n_per_env"))
def _moments_jit(keys, strength, d: int, n_per_env: int):
    return _moments_many(keys, strength, d, n_per_env)


def _moments_fn(d: int, n_per_env: int, mesh) -> Callable:
    """``(keys, strength) -> (kurtosis, square correlation)`` per key; with a mesh the
    keys are split over its ``"data"`` axis (each device maps over its own)."""
    mesh = jd.data_mesh(mesh)
    if mesh is None:
        return partial(_moments_jit, d=d, n_per_env=n_per_env)
    return jd.sharded_runs(partial(_moments_many, d=d, n_per_env=n_per_env), mesh,
                           in_axes=(0, None), out_axes=0)


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of ``log y`` on ``log x`` over the positive finite ``y``
    (nan with fewer than two)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    ok = (ys > 0) & np.isfinite(ys)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)[0])


def _slopes(ds, values) -> list[float]:
    """One log-log slope per trailing-axis entry of ``values`` ``(len(ds), m)``; nan
    where any value is not positive (a slope through fewer points is not comparable)."""
    out = []
    for col in np.asarray(values, float).T:
        out.append(loglog_slope(ds, col) if np.all(col > 0) else float("nan"))
    return out


def theory_check(
    key,
    *,
    ds: Sequence[int] = (5, 10, 20, 40),
    strengths: Sequence[float] = (3.0,),
    n_per_env: int = 400,
    n_seeds: int = 2,
    tail_from: int = 20,
    mesh=None,
    track: Callable | None = None,
) -> Theory:
    """Pooled-source moments vs number of variables.

    Args:
        key: PRNG key; seed ``i`` uses ``split(key, n_seeds)[i]`` at every d and
            strength.
        ds: numbers of variables (one environment per node plus an observational one).
        strengths: noise-sd factors of the interventions.
        n_per_env: rows per environment.
        n_seeds: independent simulations per (d, strength).
        tail_from: the tail slopes use ``d >= tail_from``.
        mesh: a mesh whose ``"data"`` axis splits the seeds, or None.
        track: optional progress wrapper ``track(iterable, description)``.

    Returns:
        A :class:`~.results.Theory`: ``ds``, ``strengths`` and two
        :class:`~.results.Moment` values, the measured mean excess kurtosis
        ``kurtosis`` and minus the mean off-diagonal correlation of squares
        ``dependence`` (expected positive): per strength (rows) and d (columns) the
        seed mean ``mean``, the per-seed values ``seeds`` ``(S, D, n_seeds)``, the
        closed form ``theory``; log-log slopes of the seed means over all ``ds``
        (``slope``) and over ``d >= tail_from`` (``tail_slope``), measured and
        theoretical (``*_theory``), and per seed (``seed_slope``, ``seed_tail_slope``:
        ``(S, n_seeds)``, nan where a value is not positive). The asymptotic slopes are
        -1 (kurtosis) and -2 (dependence).
    """
    ds = [int(d) for d in ds]
    strengths = [float(s) for s in strengths]
    if n_seeds < 1:
        raise ValueError(f"`n_seeds` must be >= 1; got {n_seeds}")
    keys = jax.random.split(key, n_seeds)
    kurt = np.zeros((len(strengths), len(ds), n_seeds))
    dep = np.zeros_like(kurt)
    it = list(enumerate(ds))
    for j, d in (it if track is None else track(it, "pooled-lingam: theory")):
        fn = _moments_fn(d, n_per_env, mesh)  # one compile per d, every strength
        for i, s in enumerate(strengths):
            k, c = jax.device_get(fn(keys, jnp.asarray(s, jnp.result_type(float))))
            kurt[i, j], dep[i, j] = np.asarray(k), -np.asarray(c)
    kt, ct = (np.asarray(a) for a in sem.atomic_scale_theory(
        np.asarray(ds, float)[None, :], np.asarray(strengths)[:, None]))
    dep_t = -ct
    tail = np.asarray(ds) >= tail_from
    dt = np.asarray(ds)[tail]
    def moment(meas, th) -> Moment:
        mean = meas.mean(-1)
        return Moment(
            mean=mean, seeds=meas, theory=th,
            slope=np.array([loglog_slope(ds, m) for m in mean]),
            slope_theory=np.array([loglog_slope(ds, t) for t in th]),
            tail_slope=np.array([loglog_slope(dt, m[tail]) for m in mean]),
            tail_slope_theory=np.array([loglog_slope(dt, t[tail]) for t in th]),
            seed_slope=np.array([_slopes(ds, m) for m in meas]),
            seed_tail_slope=np.array([_slopes(dt, m[tail]) for m in meas]))

    return Theory(ds=ds, strengths=strengths, kurtosis=moment(kurt, kt),
                  dependence=moment(dep, dep_t), n_per_env=n_per_env, n_seeds=n_seeds,
                  tail_from=tail_from)
