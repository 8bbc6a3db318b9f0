"""Simulating a policy over a horizon in one ``lax.scan``: one run, or many in lockstep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ..checks import check_in_range, clear_errors, is_traced
from ._checks import check_count
from ._core import Policy

__all__ = ["SimTrace", "simulate", "simulate_runs"]


class SimTrace(NamedTuple):
    """The arm pulled and the reward seen at each step: (T,), or (T, R) from
    :func:`simulate_runs`."""

    arms: Int[Array, "T ..."]
    rewards: Float[Array, "T ..."]


def simulate(key: PRNGKeyArray, policy: Policy, reward_fn: Callable, n_steps: int
             ) -> tuple[Any, SimTrace]:
    """Run ``policy`` for ``n_steps`` in one ``lax.scan``: at step t, ``arm =
    select(k1, state)``, ``reward = reward_fn(k2, t, arm)``, ``state = update(...)``.
    ``jax.vmap`` over keys (and whatever ``reward_fn`` closes over) runs independent
    runs in one program.

    Differentiable: no: integer arm choices drive the run (piecewise constant).

    Args:
        key: PRNG key.
        policy: the :class:`Policy`.
        reward_fn: ``reward_fn(key, t, arm) -> reward`` (a scalar).
        n_steps: horizon ``T``, a non-negative integer (static).

    Returns:
        ``(final_state, trace)`` with ``trace`` a :class:`SimTrace` of ``(T,)`` arrays.

    Raises:
        ValueError: a negative or non-integer ``n_steps``; a NaN or inf reward from
            ``reward_fn`` (called eagerly: a :class:`jaxkit.kernels.checks.CheckError`
            with the message; inside the caller's ``jit``, a run-time check that
            :func:`jaxkit.kernels.checks.clear_errors` reads).
    """
    return _scan_steps(key, policy.init(), policy.select, policy.update, reward_fn, n_steps)


def _scan_steps(key, init, select, update, reward_fn, n_steps: int, n_runs: int | None = None):
    """The simulation loop of :func:`simulate` and :func:`simulate_runs` (``n_runs``: the
    reward shape it checks, ``(n_runs,)``). Called with a concrete key (not inside the
    caller's ``jit``/``vmap``), it blocks on the result and re-raises a failed run-time
    check (a non-finite reward) as a ``ValueError`` with its message."""
    check_in_range(n_steps, "n_steps", lo=0, integer=True)
    n_steps = int(n_steps)

    def body(state, inp):
        t, k = inp
        k_sel, k_rew = jax.random.split(k)
        arm = select(k_sel, state)
        reward = jnp.asarray(reward_fn(k_rew, t, arm))
        if n_runs is not None and reward.shape != (n_runs,):
            raise ValueError(f"`reward_fn` must return one reward per run, shape "
                             f"({n_runs},); got shape {reward.shape}")
        return update(state, arm, reward), (arm, reward)

    def run():
        keys = jax.random.split(key, n_steps)
        state, (arms, rewards) = jax.lax.scan(body, init,
                                              (jnp.arange(n_steps, dtype=jnp.int32), keys))
        return state, SimTrace(arms, rewards)

    if is_traced(key):
        return run()
    with clear_errors():  # eager: the scan's checks raise here, as a ValueError
        return jax.block_until_ready(run())


def simulate_runs(key: PRNGKeyArray, policy: Policy, reward_fn: Callable, n_steps: int,
                  n_runs: int) -> tuple[Any, SimTrace]:
    """Run ``n_runs`` independent runs of ``policy`` in lockstep, ``n_steps`` in one
    ``lax.scan``: at step t, ``arms = select(k1, state)`` (R,), ``rewards =
    reward_fn(k2, t, arms)`` (R,), ``state = update(state, arms, rewards)``.

    With a ``runs_last`` policy the state holds (K, R) arrays and every operation of a
    step vectorises over the runs (the fast path on CPU; see the module docstring);
    otherwise the per-run functions are ``vmap``-ed (state arrays (R, ...), one key per
    run). A deterministic policy picks the same arms as ``vmap(simulate)`` on the same
    rewards; a randomised one draws from other streams.

    Differentiable: no: integer arm choices drive the runs (piecewise constant).

    Args:
        key: PRNG key.
        policy: the :class:`Policy`.
        reward_fn: ``reward_fn(key, t, arms) -> rewards``, ``(R,)`` arms to ``(R,)``.
        n_steps: horizon ``T``, a non-negative integer (static).
        n_runs: number of runs ``R`` (static).

    Returns:
        ``(final_state, trace)`` with ``trace`` a :class:`SimTrace` of ``(T, R)`` arrays.

    Raises:
        ValueError: as :func:`simulate`; ``n_runs`` not a positive integer.
    """
    n_runs = check_count("n_runs", n_runs)
    if policy.runs_last:
        init = policy.init(n_runs)
        select, update = policy.select, policy.update
    else:
        init = jax.vmap(lambda _: policy.init())(jnp.arange(n_runs))
        update = jax.vmap(policy.update)

        def select(k, state):
            return jax.vmap(policy.select)(jax.random.split(k, n_runs), state)

    return _scan_steps(key, init, select, update, reward_fn, n_steps, n_runs)
