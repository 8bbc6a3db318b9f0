"""The :class:`Policy` record and the index helpers every bandit policy shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._checks import check_count

__all__ = ["Policy"]


class Policy(NamedTuple):
    """A bandit policy: ``init() -> state``, ``index(key, state) -> (K,)`` scores,
    ``select(key, state) -> arm`` (the first argmax of the index) and
    ``update(state, arm, reward) -> state``.

    ``runs_last``: the functions also work on many runs at once with the runs on the last
    axis (``init(n_runs)`` gives (K, R) state arrays, ``select`` returns (R,) arms,
    ``update`` takes (R,) arms and rewards); see :func:`simulate_runs`.

    ``add_arm(state, arm) -> state`` / ``remove_arm(state, arm) -> state``: set only on
    policies wrapped by :func:`dynamic_arms` (arms entering and leaving a running policy);
    None otherwise."""

    init: Callable[..., Any]
    index: Callable[..., Array]
    select: Callable[..., Array]
    update: Callable[..., Any]
    n_arms: int
    runs_last: bool = False
    add_arm: Callable[..., Any] | None = None
    remove_arm: Callable[..., Any] | None = None


# Indices are int32 throughout, also with jax_enable_x64: an int64 argmax or one-hot
# slows the whole float32 step on XLA:CPU (wider lanes in every pass).


def argmax(index: Array) -> Array:
    """First argmax over the arms (axis 0; the runs, if any, are the trailing axes)."""
    return jax.lax.argmax(index, 0, jnp.int32)


def one_hot(arm: Array, n_arms: int, dtype) -> Array:
    """``[a = k]`` with the arms on axis 0: (K,) for a scalar arm, (K, R) for (R,) arms."""
    arms = jnp.arange(n_arms, dtype=jnp.int32).reshape((n_arms,) + (1,) * arm.ndim)
    return (arms == arm.astype(jnp.int32)).astype(dtype)


def state_shape(n_arms: int, n_runs) -> tuple[int, ...]:
    if n_runs is None:
        return (n_arms,)
    return (n_arms, check_count("n_runs", n_runs, or_none=True))


def make_select(index_fn):
    return lambda key, state: argmax(index_fn(key, state))


def safe_div(num, den):
    return num / jnp.where(den > 0, den, 1)


def ucb_index(sums, counts, bonus):
    """The optimistic index ``X_k / N_k + bonus_k``, +inf for an arm with ``N_k = 0``."""
    return jnp.where(counts > 0, safe_div(sums, counts) + bonus, jnp.inf)
