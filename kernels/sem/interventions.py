"""Which nodes each interventional environment targets."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PRNGKeyArray

from ._checks import check_d as _check_d

__all__ = ["intervention_targets"]


def intervention_targets(
    key: PRNGKeyArray,
    d: int,
    n_envs: int,
    *,
    targets_per_env: int = 1,
    choice: Literal["cycle", "random"] = "cycle",
) -> Bool[Array, "n_envs d"]:
    """Target mask of ``n_envs`` interventional environments, ``targets_per_env`` distinct
    nodes each (all static).

    ``choice="cycle"`` walks through a random permutation of the nodes, environment ``k``
    taking positions ``k t, ..., k t + t - 1`` (mod d): targets are balanced, and every node
    is a target once ``n_envs * targets_per_env >= d`` (with ``n_envs = d`` and ``t = 1``:
    one atomic intervention per node). ``choice="random"`` draws each environment's targets
    independently and uniformly.

    Differentiable: no: boolean output.

    Args:
        key: PRNG key.
        d: number of nodes (static).
        n_envs: number of interventional environments (static).
        targets_per_env: distinct targets per environment, in ``[1, d]`` (static).
        choice: ``"cycle"`` or ``"random"`` (static).

    Returns:
        A boolean mask ``(n_envs, d)``: ``[k, j]`` iff environment ``k`` intervenes on ``j``.
    """
    d = _check_d(d)
    if not isinstance(n_envs, int) or n_envs < 0:
        raise ValueError(f"`n_envs` must be a non-negative Python int; got {n_envs!r}")
    if not isinstance(targets_per_env, int) or not 1 <= targets_per_env <= d:
        raise ValueError(f"`targets_per_env` must be an int in [1, d={d}]; "
                         f"got {targets_per_env!r}")
    t = targets_per_env
    if choice == "cycle":
        perm = jax.random.permutation(key, d)
        pos = (jnp.arange(n_envs)[:, None] * t + jnp.arange(t)[None, :]) % d
        picked = perm[pos]
    elif choice == "random":
        picked = jnp.argsort(jax.random.uniform(key, (n_envs, d)), axis=1)[:, :t]
    else:
        raise ValueError(f"`choice` must be 'cycle' or 'random'; got {choice!r}")
    rows = jnp.arange(n_envs)[:, None]
    return jnp.zeros((n_envs, d), bool).at[rows, picked].set(True)

