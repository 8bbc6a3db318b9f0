"""Policies on a stored history of recent rewards: sliding-window UCB and the
extreme-value (max) bandits QoMax and Threshold Ascent."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._checks import check_arms, check_count, check_observation, check_positive, check_unit
from ._core import Policy, make_select, safe_div, ucb_index

__all__ = ["WindowState", "BufferState", "HistoryState", "sliding_window_ucb", "qomax",
           "threshold_ascent"]


class WindowState(NamedTuple):
    """The last ``W`` (arm, reward) pairs in a ring buffer (arm -1 = empty slot)."""

    arms: Int[Array, " W"]
    rewards: Float[Array, " W"]
    t: Int[Array, ""]


def sliding_window_ucb(n_arms: int, *, window: int = 100, alpha: float = 1.0,
                       dtype=jnp.float32) -> Policy:
    """Sliding-window UCB (Garivier & Moulines 2011): statistics over the last ``window``
    steps only, ``index_k = X_k/N_k + sqrt(2 alpha ln(min(t, window)) / N_k)``; an arm
    with no pull inside the window has index +inf.

    Peer convention: SMPyBandits' ``SWUCB(tau=window, alpha=a)`` has the index
    ``mean + sqrt(a ln(min(t, tau)) / N)``, so **jaxkit's ``alpha`` is SMPyBandits'
    ``a / 2``** (its default ``a = 1`` is ``alpha = 0.5``).

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        window: number of recent steps kept (static).
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = check_arms(n_arms)
    window = check_count("window", window)
    alpha = check_positive("alpha", alpha)

    def init() -> WindowState:
        return WindowState(jnp.full(window, -1, jnp.int32), jnp.zeros(window, dtype),
                           jnp.zeros((), jnp.int32))

    def index(key, state: WindowState) -> Float[Array, " K"]:
        del key
        hits = (state.arms[None, :] == jnp.arange(n_arms)[:, None]).astype(dtype)
        counts = hits.sum(1)
        sums = hits @ state.rewards
        n = jnp.maximum(jnp.minimum(state.t, window), 1).astype(dtype)
        bonus = jnp.sqrt(2 * alpha * jnp.log(n) * safe_div(1.0, counts))
        return ucb_index(sums, counts, bonus)

    def update(state: WindowState, arm, reward) -> WindowState:
        arm, reward = check_observation(n_arms, arm, reward, dtype)
        slot = state.t % window
        return WindowState(state.arms.at[slot].set(arm), state.rewards.at[slot].set(reward),
                           state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms)



class BufferState(NamedTuple):
    """Per-arm ring buffers of the most recent rewards."""

    buffer: Float[Array, "K S"]
    filled: Int[Array, " K"]  # samples seen per arm (the buffer holds min(filled, S))
    t: Int[Array, ""]


def qomax(n_arms: int, *, n_batches: int = 4, batch_size: int = 4, q: float = 0.5,
          alpha: float = 0.0, dtype=jnp.float32) -> Policy:
    """Extreme-value (max) bandit with the QoMax index (Baudry, Russac & Kaufmann 2022):
    the ``q``-quantile of the maxima of ``n_batches`` batches of ``batch_size`` samples,
    taken over each arm's most recent ``n_batches * batch_size`` rewards (so the index
    forgets old behaviour), plus an optional bonus ``alpha * sqrt(ln t / n_k)``. An arm
    with fewer samples than one full set has index +inf (forced exploration, as in
    QoMax-ETC).

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        n_batches: number of batches (static).
        batch_size: samples per batch (static).
        q: the quantile level, in ``[0, 1]``.
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = check_arms(n_arms)
    size = check_count("n_batches", n_batches) * check_count("batch_size", batch_size)
    q = check_unit("q", q, low_open=False)
    alpha = check_positive("alpha", alpha)

    def init() -> BufferState:
        return BufferState(jnp.zeros((n_arms, size), dtype), jnp.zeros(n_arms, jnp.int32),
                           jnp.zeros((), jnp.int32))

    def index(key, state: BufferState) -> Float[Array, " K"]:
        del key
        maxima = state.buffer.reshape(n_arms, n_batches, batch_size).max(-1)
        qmax = jnp.quantile(maxima, q, axis=1, method="lower")
        n = jnp.maximum(state.t, 1).astype(dtype)
        bonus = alpha * jnp.sqrt(jnp.log(n) * safe_div(1.0, state.filled.astype(dtype)))
        return jnp.where(state.filled >= size, qmax + bonus, jnp.inf)

    def update(state: BufferState, arm, reward) -> BufferState:
        arm, reward = check_observation(n_arms, arm, reward, dtype)
        slot = state.filled[arm] % size
        return BufferState(state.buffer.at[arm, slot].set(reward),
                           state.filled.at[arm].add(1), state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms)


class HistoryState(NamedTuple):
    """Every (arm, reward) so far, in a buffer of the horizon's length."""

    arms: Int[Array, " H"]
    rewards: Float[Array, " H"]
    t: Int[Array, ""]


def threshold_ascent(n_arms: int, *, horizon: int, s: int = 10, delta: float = 0.1,
                     dtype=jnp.float32) -> Policy:
    """Threshold Ascent (Streeter & Smith 2006) for the max-k-armed bandit. The
    threshold ``T`` is the ``s``-th largest payoff seen so far (so fewer than ``s``
    payoffs exceed it); with ``S_k`` arm k's payoffs above ``T`` out of ``n_k`` pulls,
    ``mu = S_k / n_k`` and ``index_k = mu + (a + sqrt(2 n_k mu a + a^2)) / n_k`` with
    ``a = ln(2 n K / delta)``, ``n`` the pulls so far. ``horizon`` fixes the history
    buffer (updates beyond it are not stored).

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        horizon: length of the history buffer (static).
        s: the threshold's rank: fewer than ``s`` payoffs exceed it (static).
        delta: confidence parameter, in ``(0, 1]``.
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = check_arms(n_arms)
    horizon, s = check_count("horizon", horizon), check_count("s", s)
    delta = check_unit("delta", delta)

    def init() -> HistoryState:
        return HistoryState(jnp.full(horizon, -1, jnp.int32),
                            jnp.full(horizon, -jnp.inf, dtype), jnp.zeros((), jnp.int32))

    def index(key, state: HistoryState) -> Float[Array, " K"]:
        del key
        k = min(s, horizon)
        thr = jnp.where(state.t >= s, jax.lax.top_k(state.rewards, k)[0][k - 1], -jnp.inf)
        hits = state.arms[None, :] == jnp.arange(n_arms)[:, None]
        n_k = hits.sum(1).astype(dtype)
        above = (hits & (state.rewards[None, :] > thr)).sum(1).astype(dtype)
        mu = safe_div(above, n_k)
        a = jnp.log(2 * jnp.maximum(state.t, 1) * n_arms / delta).astype(dtype)
        bound = mu + safe_div(a + jnp.sqrt(2 * n_k * mu * a + a * a), n_k)
        return jnp.where(n_k > 0, bound, jnp.inf)

    def update(state: HistoryState, arm, reward) -> HistoryState:
        arm, reward = check_observation(n_arms, arm, reward, dtype)
        slot = jnp.minimum(state.t, horizon)  # out of range once full: .at[] drops it
        return HistoryState(state.arms.at[slot].set(arm, mode="drop"),
                            state.rewards.at[slot].set(reward, mode="drop"), state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms)

