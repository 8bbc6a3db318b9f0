"""Simulated pooled data: one setting (:class:`TrialConfig`) and its jitted batch.

A linear Gaussian SEM on a random DAG, one observational environment plus
interventional ones that each change one node's noise
(:func:`jaxkit.kernels.sem.simulate_pooled`), pooled without labels. Every dataset
comes with its observational-only twin: the same graph, rows and base noise, no
intervention (the control of the claim that interventions are what help).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxkit import distributed as jd
from jaxkit.kernels import sem

__all__ = ["TrialConfig", "Simulated", "simulate_batch", "ablations", "INDEPENDENT"]

#: the ablation in which every node's noise is perturbed in every environment: the
#: paper's independent-perturbation setting (exactly independent sources)
INDEPENDENT = "every node perturbed in every environment"


@dataclass(frozen=True)
class TrialConfig:
    """One simulated setting; see :func:`jaxkit.kernels.sem.simulate_pooled`.

    ``n_envs=None`` means one atomic intervention per node (``n_envs = d``). Exactly one
    of ``n_per_env`` / ``n_total`` is used (``n_total`` wins when set). Hashable: with
    ``strength`` zeroed (:meth:`static`) it is the jit cache key of
    :func:`simulate_batch`, so settings that differ only in strength share one compile.
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


class Simulated(NamedTuple):
    """A batch of simulated datasets (leading axis = datasets)."""

    b: jax.Array  # (B, d, d) true weighted adjacency, b[i, j] = effect of j on i
    x: jax.Array  # (B, n, d) pooled rows
    env: jax.Array  # (B, n) environment of each row (hidden from label-free methods)
    targets: jax.Array  # (B, K, d) intervened nodes per environment
    x_obs: jax.Array  # (B, n, d) observational-only twin (same graph and base noise)


def _simulate_one(key, strength, cfg: TrialConfig):
    kb, kx = jax.random.split(key)
    b = sem.random_dag(kb, cfg.d, graph=cfg.graph, edges_per_node=cfg.edges_per_node)
    kw = cfg.sim_kwargs()
    pooled = sem.simulate_pooled(kx, b, strength=strength, **kw)
    # same key, no intervention: identical base noise, purely observational
    kw_obs = {**kw, "intervention": "scale", "perturb_all": False}
    obs = sem.simulate_pooled(kx, b, strength=1.0, **kw_obs)
    return Simulated(b, pooled.x, pooled.env, pooled.targets, obs.x)


@partial(jax.jit, static_argnames="cfg")
def _simulate_jit(keys, strength, cfg: TrialConfig):
    return jax.vmap(lambda k: _simulate_one(k, strength, cfg))(keys)


@functools.cache
def _one_of(static: TrialConfig):
    """``(key, strength) -> Simulated`` of the setting ``static`` (one function object
    per setting shape, so :func:`jaxkit.distributed.batched` compiles it once)."""
    return lambda key, strength: _simulate_one(key, strength, static)


def simulate_batch(keys, cfg: TrialConfig, mesh=None, *, sequential: bool = False
                   ) -> Simulated:
    """One dataset of ``cfg`` per key.

    Compiled once per :meth:`TrialConfig.static`, number of keys and mesh;
    ``cfg.strength`` is traced. Without ``mesh`` and ``sequential`` the datasets are
    simulated under ``vmap`` and the keys' sharding, if any, carries over. With a
    ``mesh`` (keys placed by :func:`jaxkit.distributed.shard_batch`) each device
    simulates the datasets it holds; ``sequential`` simulates one dataset at a time
    (see :func:`jaxkit.distributed.batched`: then each dataset's rows are bit-identical
    on one device and on any mesh).

    Args:
        keys: PRNG keys, shape ``(B,)``.
        cfg: the setting.
        mesh: a mesh with a ``"data"`` axis the keys are split over, or None.
        sequential: one dataset at a time (``lax.map``) instead of ``vmap``.

    Returns:
        A :class:`Simulated` batch.
    """
    strength = jnp.asarray(cfg.strength, jnp.result_type(float))
    if jd.data_mesh(mesh) is None and not sequential:
        return _simulate_jit(keys, strength, cfg.static())
    strengths = jnp.full(keys.shape, strength)
    if jd.data_mesh(mesh) is not None:
        strengths = jax.device_put(strengths, keys.sharding)
    return jd.batched(_one_of(cfg.static()), mesh, sequential=sequential)(keys, strengths)


def ablations() -> list[tuple[str, dict[str, Any]]]:
    """The ablation settings: (name, :class:`TrialConfig` overrides of the reference)."""
    return [
        ("atomic variance scaling x3 (reference)", {}),
        ("atomic mean shift (3 sd)", dict(intervention="shift")),
        ("atomic noise replaced by uniform (same variance)",
         dict(intervention="replace", strength=1.0)),
        ("2 targets per environment", dict(targets_per_env=2)),
        (INDEPENDENT, dict(perturb_all=True)),
        ("scale-free graph", dict(graph="sf")),
        ("Laplace noise (non-Gaussian even without interventions)", dict(noise="laplace")),
    ]
