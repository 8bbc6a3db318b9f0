"""Simulating a linear SEM in several environments (noise interventions) and pooling
the rows, with the environment labels a label-aware baseline needs."""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ..checks import check_finite, is_traced
from .dags import dag_inverse, is_acyclic
from .interventions import intervention_targets
from .noise import NOISES as _NOISES
from .noise import NoiseKind, sample_noise

__all__ = ["SEMData", "InterventionKind", "simulate_pooled"]

InterventionKind = Literal["scale", "shift", "replace"]
_INTERVENTIONS = ("scale", "shift", "replace")


class SEMData(NamedTuple):
    """Pooled data from :func:`simulate_pooled`.

    ``x`` is what a label-free method sees. ``env`` and ``targets`` are the metadata a
    label-aware baseline needs: environment ``k`` holds the rows with ``env == k`` and
    intervenes on the nodes ``targets[k]`` (an all-False row is observational).
    ``noise`` are the sources: ``x = (I - b)^{-1} e`` row-wise.

    ``valid`` is False when a traced ``b``, ``strength`` or ``noise_scale`` was out of
    its domain (cyclic or non-finite ``b``, non-positive or non-finite strength or noise
    scale): ``x`` and ``noise`` are then NaN. Concrete out-of-domain values raise.
    """

    x: Float[Array, "n d"]
    env: Int[Array, " n"]
    targets: Bool[Array, "k d"]
    noise: Float[Array, "n d"]
    valid: Bool[Array, ""] = True



def simulate_pooled(
    key: PRNGKeyArray,
    b: Float[Array, "d d"],
    *,
    n_envs: int,
    n_per_env: int | None = None,
    n_total: int | None = None,
    intervention: InterventionKind = "scale",
    strength: float | Float[Array, ""] = 3.0,
    noise: NoiseKind = "gaussian",
    noise_scale: float | Float[Array, "..."] = 1.0,
    targets_per_env: int = 1,
    target_choice: Literal["cycle", "random"] = "cycle",
    perturb_all: bool = False,
    replacement: NoiseKind = "uniform",
    obs_env: bool = True,
) -> SEMData:
    """Simulate a linear SEM in several environments and pool the rows.

    Environment 0 is observational when ``obs_env`` (its ``targets`` row is all False),
    followed by ``n_envs`` interventional environments; ``K = n_envs + obs_env`` in all.
    Every node ``j`` has noise ``e_j = noise_scale_j * eps_j`` with ``eps_j`` drawn from
    ``noise`` (unit variance), and ``x = e (I - b)^{-T}`` via :func:`dag_inverse`, so ``b``
    must be acyclic. An intervention on ``j`` in environment ``k`` changes only
    ``e_j`` (soft, noise-only interventions; the weights ``b`` are never changed):

    * ``"scale"``: ``e_j = strength * noise_scale_j * eps_j`` -- the noise variance is
      multiplied by ``strength ** 2`` (the mean stays 0);
    * ``"shift"``: ``e_j = noise_scale_j * (eps_j + s_kj * strength)`` with a random sign
      ``s_kj`` -- a mean shift of ``strength`` noise standard deviations;
    * ``"replace"``: ``e_j = strength * noise_scale_j * eps'_j`` with ``eps'`` drawn from
      ``replacement`` (unit variance) -- a different noise distribution whose standard
      deviation is ``strength`` times the original (``strength=1`` keeps the variance).

    Targets come from :func:`intervention_targets` (``targets_per_env`` nodes per
    environment, ``target_choice``). With ``perturb_all=True`` every node is perturbed
    in every interventional environment, independently: the scale factor (``"scale"``,
    ``"replace"``) is log-uniform on ``[1/strength, strength]`` and the shift
    (``"shift"``) uniform on ``[-strength, strength]``, drawn per (environment, node) --
    the setting where pooling yields exactly independent sources.

    Rows: pass exactly one of ``n_per_env`` (each environment gets that many rows,
    ``n = K * n_per_env``) or ``n_total`` (``n = n_total`` rows split as evenly as
    possible: row ``r`` belongs to environment ``r * K // n``; keeps the data shape fixed
    while ``n_envs`` varies). Rows are ordered by environment; a label-free method sees
    only ``x``.

    Static: ``n_envs``, ``n_per_env``, ``n_total``, ``intervention``, ``noise``,
    ``targets_per_env``, ``target_choice``, ``perturb_all``, ``replacement``, ``obs_env``.
    ``b``, ``strength`` and ``noise_scale`` (scalar or ``(d,)``) may be traced. A
    concrete ``b`` that is cyclic or holds NaN/inf, and a concrete non-finite or
    non-positive ``strength`` (``"shift"``: negative) or ``noise_scale``, raise
    ``ValueError``; traced ones are not checked by a run-time callback inside jitted
    simulation code: the result then has ``valid=False`` and NaN data.

    ``strength=1`` with ``"scale"`` gives purely observational data of the same shape.

    Differentiable: yes, in b, strength and noise_scale (the key fixes the draws; b must stay
    acyclic).

    Args:
        key: PRNG key.
        b: weighted adjacency of a DAG ``(d, d)``, ``b[i, j]`` the weight of ``j -> i``.
        n_envs: number of interventional environments.
        n_per_env: rows per environment (exclusive with ``n_total``).
        n_total: total rows, split evenly (exclusive with ``n_per_env``).
        intervention: ``"scale"``, ``"shift"`` or ``"replace"``.
        strength: intervention strength (scalar).
        noise: observational noise law, see :func:`sample_noise`.
        noise_scale: per-node noise standard deviation, scalar or ``(d,)``.
        targets_per_env: nodes intervened on per environment.
        target_choice: ``"cycle"`` or ``"random"``, see :func:`intervention_targets`.
        perturb_all: perturb every node in every interventional environment.
        replacement: the noise law of ``"replace"`` interventions.
        obs_env: prepend an observational environment.

    Returns:
        A :class:`SEMData` ``(x, env, targets, noise, valid)`` with ``x`` and ``noise`` of
        shape ``(n, d)``, ``env`` ``(n,)`` and ``targets`` ``(K, d)``.

    Raises:
        ValueError: bad shapes or options; concrete out-of-domain ``b``, ``strength`` or
            ``noise_scale`` (see above).
    """
    if not hasattr(b, "ndim") or b.ndim != 2 or b.shape[0] != b.shape[1]:
        raise ValueError(f"`b` must be a square (d, d) matrix; got shape "
                         f"{getattr(b, 'shape', None)}")
    if noise not in _NOISES:
        raise ValueError(f"`noise` must be one of {_NOISES}; got {noise!r}")
    if replacement not in _NOISES:
        raise ValueError(f"`replacement` must be one of {_NOISES}; got {replacement!r}")
    if intervention not in _INTERVENTIONS:
        raise ValueError(f"`intervention` must be one of {_INTERVENTIONS}; "
                         f"got {intervention!r}")
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.floating):
        b = b.astype(jnp.result_type(float))
    if not is_traced(b):  # traced b (e.g. drawn inside the same jit): no run-time callback
        # evaluated now even when a concrete b is closed over by an outer jit
        with jax.ensure_compile_time_eval():
            check_finite(b, "b")
            if not bool(is_acyclic(b)):
                raise ValueError("`b` has a directed cycle (or a self-loop): the SEM "
                                 "x = b x + e needs an acyclic weight matrix")
    dtype = b.dtype
    d = b.shape[0]
    strength_ok = _check_positive(strength, "strength", allow_zero=intervention == "shift")
    scale_ok = _check_positive(noise_scale, "noise_scale", allow_zero=False)
    if not (jnp.ndim(noise_scale) == 0 or jnp.shape(noise_scale) == (d,)):
        raise ValueError(f"`noise_scale` must be a scalar or of shape ({d},); got shape "
                         f"{jnp.shape(noise_scale)}")
    n_k = int(n_envs) + int(bool(obs_env))
    if n_k < 1:
        raise ValueError("need at least one environment (n_envs >= 1 or obs_env=True)")
    if (n_per_env is None) == (n_total is None):
        raise ValueError("pass exactly one of `n_per_env` and `n_total`")
    if n_per_env is not None:
        if not isinstance(n_per_env, int) or n_per_env < 1:
            raise ValueError(f"`n_per_env` must be a positive int; got {n_per_env!r}")
        n = n_k * n_per_env
        env = jnp.arange(n, dtype=jnp.int32) // n_per_env
    else:
        if not isinstance(n_total, int) or n_total < n_k:
            raise ValueError(f"`n_total` must be an int >= the number of environments "
                             f"({n_k}); got {n_total!r}")
        n = n_total
        env = ((jnp.arange(n) * n_k) // n).astype(jnp.int32)

    k_tgt, k_par, k_eps, k_alt = jax.random.split(key, 4)
    if perturb_all:
        tgt = jnp.ones((n_envs, d), bool)
    else:
        tgt = intervention_targets(k_tgt, d, n_envs, targets_per_env=targets_per_env,
                                   choice=target_choice)
    if obs_env:
        tgt = jnp.concatenate([jnp.zeros((1, d), bool), tgt], axis=0)

    strength = jnp.asarray(strength, dtype)
    u = jax.random.uniform(k_par, (n_k, d), dtype, minval=-1.0, maxval=1.0)
    if perturb_all:
        factor = jnp.exp(u * jnp.log(jnp.abs(strength)))
        shift = u * strength
    else:
        factor = jnp.broadcast_to(strength, (n_k, d))
        shift = jnp.where(u >= 0, 1.0, -1.0).astype(dtype) * strength
    one = jnp.ones((), dtype)
    eps = sample_noise(k_eps, (n, d), noise, dtype)
    tr = tgt[env]  # (n, d) targeted entries
    if intervention == "scale":
        e = eps * jnp.where(tr, factor[env], one)
    elif intervention == "shift":
        e = eps + jnp.where(tr, shift[env], 0.0)
    else:  # replace
        alt = sample_noise(k_alt, (n, d), replacement, dtype)
        e = jnp.where(tr, factor[env] * alt, eps)
    e = e * jnp.broadcast_to(jnp.asarray(noise_scale, dtype), (d,))
    valid = is_acyclic(b) & jnp.all(jnp.isfinite(b)) & strength_ok & scale_ok
    e = jnp.where(valid, e, jnp.nan)
    x = e @ dag_inverse(jnp.where(valid, b, 0.0)).T
    return SEMData(x=x, env=env, targets=tgt, noise=e, valid=valid)


def _check_positive(value, name: str, *, allow_zero: bool):
    """Concrete: raise unless every entry is finite and > 0 (``>= 0`` with
    ``allow_zero``). Returns the condition as a boolean array (for traced values)."""
    v = jnp.asarray(value)
    if not is_traced(v):
        # checked with NumPy: inside an outer jit, jnp ops on a closed-over constant
        # give tracers, and bool() of a tracer fails
        a = np.asarray(v)
        ok = bool(np.all(np.isfinite(a) & ((a >= 0) if allow_zero else (a > 0))))
        if not ok:
            want = "non-negative" if allow_zero else "positive"
            raise ValueError(f"`{name}` must be finite and {want}; got {value!r}")
        return jnp.asarray(True)
    return jnp.all(jnp.isfinite(v) & ((v >= 0) if allow_zero else (v > 0)))
