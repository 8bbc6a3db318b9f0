"""Multi-armed bandits as pure functions: stationary, non-stationary, extreme-value and
cost-aware policies, genealogy (DAG) credit, and a jitted simulator.

A policy is a :class:`Policy` of pure functions (optax style: a factory closes over the
hyperparameters)::

    pol = discounted_ucb(10, gamma=0.99)
    state = pol.init()                      # a NamedTuple pytree
    arm = pol.select(key, state)            # int32 scalar: argmax of pol.index(key, state)
    state = pol.update(state, arm, reward)  # pure; every array keeps its shape

Indices are +inf for an arm that has no data, and ties go to the lowest arm index
(``jnp.argmax``), so deterministic policies replay exactly. States have fixed shapes, so
``jax.vmap`` batches thousands of independent runs and :func:`simulate` runs a whole
horizon in one ``lax.scan``.

The count-based policies (:func:`ucb1`, :func:`discounted_ucb`, :func:`thompson_gaussian`,
:func:`thompson_beta`; ``policy.runs_last``) also take many runs natively, with the runs
on the last axis: ``init(n_runs)`` gives (K, R) arrays, ``select`` returns (R,) arms and
``update`` takes (R,) arms and rewards. :func:`simulate_runs` steps R runs in lockstep
this way. It exists for speed on CPU: ``vmap`` puts the runs first, which leaves the
argmax over the K arms on the minor (vector) axis, a short reduction that XLA:CPU does
not vectorise; with the runs minor every operation of a step is a vector loop over the
runs (``benchmarks/bench_bandit.py`` compares the two; see benchmarks/RESULTS.md).

References: UCB1 (Auer, Cesa-Bianchi & Fischer 2002); discounted and sliding-window UCB
(Garivier & Moulines, ALT 2011); discounted Thompson sampling (Raj & Kalyani 2017);
QoMax (Baudry, Russac & Kaufmann, AISTATS 2022); Threshold Ascent (Streeter & Smith,
CP 2006); Ballad (bandit routing of LLMs in heuristic discovery) for :func:`ballad`.

Bad input (an arm out of range, a non-finite reward, a genealogy whose parent is not
earlier in the order) raises ``ValueError`` on concrete values and an
:func:`equinox.error_if` run-time error under ``jit``/``vmap``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .checks import fail, fail_first

__all__ = [
    "Policy",
    "CountState",
    "WindowState",
    "BetaState",
    "BufferState",
    "HistoryState",
    "BalladState",
    "CostState",
    "SimTrace",
    "ucb1",
    "discounted_ucb",
    "sliding_window_ucb",
    "thompson_beta",
    "thompson_gaussian",
    "qomax",
    "threshold_ascent",
    "cost_aware",
    "ballad",
    "ballad_add_roots",
    "propagate_credit",
    "credit_per_arm",
    "simulate",
    "simulate_runs",
]


class Policy(NamedTuple):
    """A bandit policy: ``init() -> state``, ``index(key, state) -> (K,)`` scores,
    ``select(key, state) -> arm`` (the first argmax of the index) and
    ``update(state, arm, reward) -> state``.

    ``runs_last``: the functions also work on many runs at once with the runs on the last
    axis (``init(n_runs)`` gives (K, R) state arrays, ``select`` returns (R,) arms,
    ``update`` takes (R,) arms and rewards); see :func:`simulate_runs`."""

    init: Callable[..., Any]
    index: Callable[..., Array]
    select: Callable[..., Array]
    update: Callable[..., Any]
    n_arms: int
    runs_last: bool = False


def _check_arms(n_arms: int) -> int:
    if int(n_arms) != n_arms or n_arms < 1:
        raise ValueError(f"`n_arms` must be a positive integer; got {n_arms!r}")
    return int(n_arms)


def _check_unit(name: str, value: float, *, low_open: bool = True) -> float:
    value = float(value)
    ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    if not ok:
        raise ValueError(f"`{name}` must be in {'(0, 1]' if low_open else '[0, 1]'}; "
                         f"got {value}")
    return value


def _check_positive(name: str, value: float, *, strict: bool = False) -> float:
    value = float(value)
    if not (value > 0 if strict else value >= 0) or value != value:
        raise ValueError(f"`{name}` must be {'> 0' if strict else '>= 0'}; got {value}")
    return value


def _check_observation(n_arms: int, arm, reward, dtype, runs: tuple = ()):
    """Validate one (arm, reward) observation per run (``runs`` the shape of the runs
    axis, () for one run); returns (arm as int32, reward as dtype)."""
    arm = jnp.asarray(arm)
    what = "scalar" if runs == () else f"array of shape {runs} (one per run)"
    if arm.shape != runs or not jnp.issubdtype(arm.dtype, jnp.integer):
        raise ValueError(f"`arm` must be an integer {what}; got dtype {arm.dtype}, "
                         f"shape {arm.shape}")
    reward = jnp.asarray(reward, dtype)
    if reward.shape != runs:
        raise ValueError(f"`reward` must be {'a' if runs == () else 'an'} {what}; got shape "
                         f"{reward.shape}")
    # both checks ride on ``arm`` (every update uses it): one branch per step, not two
    arm = fail_first(arm, [((arm < 0) | (arm >= n_arms),
                             f"`arm` out of range: must be in [0, {n_arms})"),
                            (~jnp.isfinite(reward), "`reward` is NaN or inf")])
    return arm.astype(jnp.int32), reward


# Indices are int32 throughout, also with jax_enable_x64: an int64 argmax or one-hot
# slows the whole float32 step on XLA:CPU (wider lanes in every pass).


def _argmax(index: Array) -> Array:
    """First argmax over the arms (axis 0; the runs, if any, are the trailing axes)."""
    return jax.lax.argmax(index, 0, jnp.int32)


def _one_hot(arm: Array, n_arms: int, dtype) -> Array:
    """``[a = k]`` with the arms on axis 0: (K,) for a scalar arm, (K, R) for (R,) arms."""
    arms = jnp.arange(n_arms, dtype=jnp.int32).reshape((n_arms,) + (1,) * arm.ndim)
    return (arms == arm.astype(jnp.int32)).astype(dtype)


def _state_shape(n_arms: int, n_runs) -> tuple[int, ...]:
    if n_runs is None:
        return (n_arms,)
    if int(n_runs) != n_runs or n_runs < 1:
        raise ValueError(f"`n_runs` must be a positive integer or None; got {n_runs!r}")
    return (n_arms, int(n_runs))


def _make_select(index_fn):
    return lambda key, state: _argmax(index_fn(key, state))


def _safe_div(num, den):
    return num / jnp.where(den > 0, den, 1)


# --------------------------------------------------------------------------- counts


class CountState(NamedTuple):
    """Per-arm (possibly discounted) pull counts ``counts`` and reward sums ``sums``;
    ``pulls`` counts actual pulls (integer, never discounted); ``t`` steps so far.
    Arrays are (K,), or (K, R) for R runs stepped together (``init(n_runs=R)``)."""

    counts: Float[Array, "K ..."]
    sums: Float[Array, "K ..."]
    pulls: Int[Array, "K ..."]
    t: Int[Array, ""]


def _count_init(n_arms: int, dtype) -> Callable[..., CountState]:
    def init(n_runs: int | None = None) -> CountState:
        shape = _state_shape(n_arms, n_runs)
        return CountState(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype),
                          jnp.zeros(shape, jnp.int32), jnp.zeros((), jnp.int32))

    return init


def _count_update(n_arms: int, gamma: float, dtype):
    def update(state: CountState, arm, reward) -> CountState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype, state.counts.shape[1:])
        hit = _one_hot(arm, n_arms, dtype)
        return CountState(gamma * state.counts + hit, gamma * state.sums + reward * hit,
                          state.pulls + hit.astype(jnp.int32), state.t + 1)

    return update


def _discounted_total(t, gamma: float, dtype):
    """``sum_k N_k`` after ``t`` discounted updates, ``sum_{i<t} gamma^i``, in closed form:
    every step adds 1 to one arm and decays all, so no reduction over the arms is needed
    (a reduction over a short axis is comparatively slow on XLA:CPU)."""
    t = t.astype(dtype)
    if gamma == 1.0:
        return t
    return -jnp.expm1(t * jnp.log(jnp.asarray(gamma, dtype))) / (1 - gamma)


def ucb1(n_arms: int, *, alpha: float = 1.0, dtype=jnp.float32) -> Policy:
    """UCB1: ``index_k = X_k/N_k + alpha * sqrt(2 ln n / N_k)`` with ``n`` the total number
    of pulls (MABWiser's ``UCB1(alpha)`` form; Auer et al. 2002 with ``alpha = 1``).

    Args:
        n_arms: number of arms ``K`` (static).
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    n_arms = _check_arms(n_arms)
    alpha = _check_positive("alpha", alpha)

    def index(key, state: CountState) -> Float[Array, " K"]:
        del key
        n = jnp.maximum(state.t, 1).astype(state.counts.dtype)  # = sum_k N_k, no reduction
        bonus = alpha * jnp.sqrt(2 * jnp.log(n) * _safe_div(1.0, state.counts))
        # counts == pulls here (no discount); reading counts spares a pass over pulls
        return jnp.where(state.counts > 0, _safe_div(state.sums, state.counts) + bonus,
                         jnp.inf)

    return Policy(_count_init(n_arms, dtype), index, _make_select(index),
                  _count_update(n_arms, 1.0, dtype), n_arms, runs_last=True)


def discounted_ucb(n_arms: int, *, gamma: float = 0.99, alpha: float = 1.0,
                   dtype=jnp.float32) -> Policy:
    """Discounted UCB (Garivier & Moulines 2011). Every arm decays every step:
    ``N_k <- gamma N_k + [a=k]``, ``X_k <- gamma X_k + r [a=k]``; the index is
    ``X_k/N_k + sqrt(2 alpha ln(n) / N_k)`` with ``n = sum_k N_k``; +inf for an arm
    never pulled.

    Args:
        n_arms: number of arms ``K`` (static).
        gamma: discount per step, in ``(0, 1]``.
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    n_arms = _check_arms(n_arms)
    gamma = _check_unit("gamma", gamma)
    alpha = _check_positive("alpha", alpha)

    def index(key, state: CountState) -> Float[Array, " K"]:
        del key
        n = jnp.maximum(_discounted_total(state.t, gamma, state.counts.dtype), 1)
        bonus = jnp.sqrt(2 * alpha * jnp.log(n) * _safe_div(1.0, state.counts))
        # counts > 0 implies pulls > 0; a count that decayed to exactly 0 (float
        # underflow) has an infinite bonus, as an arm never pulled
        return jnp.where(state.counts > 0, _safe_div(state.sums, state.counts) + bonus,
                         jnp.inf)

    return Policy(_count_init(n_arms, dtype), index, _make_select(index),
                  _count_update(n_arms, gamma, dtype), n_arms, runs_last=True)


def thompson_gaussian(n_arms: int, *, gamma: float = 1.0, sigma: float = 1.0,
                      prior_mean: float = 0.0, prior_count: float = 1.0,
                      dtype=jnp.float32) -> Policy:
    """Gaussian Thompson sampling with discounting: the posterior of arm k is
    ``N((X_k + c m0) / (N_k + c), sigma^2 / (N_k + c))`` with the discounted ``N_k, X_k``
    of :func:`discounted_ucb` (every arm decays every step) and a prior worth ``c``
    pseudo-observations at ``m0``.

    Args:
        n_arms: number of arms ``K`` (static).
        gamma: discount per step, in ``(0, 1]``.
        sigma: reward noise standard deviation (``> 0``).
        prior_mean: prior mean ``m0``.
        prior_count: prior weight ``c`` in pseudo-observations (``> 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    n_arms = _check_arms(n_arms)
    gamma = _check_unit("gamma", gamma)
    sigma = _check_positive("sigma", sigma, strict=True)
    prior_count = _check_positive("prior_count", prior_count, strict=True)

    def index(key, state: CountState) -> Float[Array, " K"]:
        prec = state.counts + prior_count
        mean = (state.sums + prior_count * prior_mean) / prec
        return mean + sigma / jnp.sqrt(prec) * jax.random.normal(key, prec.shape, dtype)

    return Policy(_count_init(n_arms, dtype), index, _make_select(index),
                  _count_update(n_arms, gamma, dtype), n_arms, runs_last=True)


# --------------------------------------------------------------------------- Beta TS


class BetaState(NamedTuple):
    """Discounted pseudo-successes and pseudo-failures per arm; (K,) or (K, R)."""

    successes: Float[Array, "K ..."]
    failures: Float[Array, "K ..."]
    t: Int[Array, ""]


def thompson_beta(n_arms: int, *, gamma: float = 1.0, prior: tuple[float, float] = (1.0, 1.0),
                  dtype=jnp.float32) -> Policy:
    """Beta-Bernoulli Thompson sampling with discounting (Raj & Kalyani 2017): the pulled
    arm gets ``S <- gamma S + r``, ``F <- gamma F + (1 - r)``; every other arm
    ``S, F <- gamma S, gamma F``. Rewards in [0, 1] (fractional rewards update both).
    Samples ``Beta(a + S_k, b + F_k)``.

    (SMPyBandits' ``DiscountedBayesianIndexPolicy`` decays the pulled arm K-1 times and
    never the others; this follows the paper.)

    Args:
        n_arms: number of arms ``K`` (static).
        gamma: discount per step, in ``(0, 1]``.
        prior: the Beta prior ``(a, b)``, both ``> 0``.
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    n_arms = _check_arms(n_arms)
    gamma = _check_unit("gamma", gamma)
    a0, b0 = (_check_positive("prior", p, strict=True) for p in prior)

    def init(n_runs: int | None = None) -> BetaState:
        shape = _state_shape(n_arms, n_runs)
        return BetaState(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype),
                         jnp.zeros((), jnp.int32))

    def index(key, state: BetaState) -> Float[Array, " K"]:
        return jax.random.beta(key, a0 + state.successes, b0 + state.failures, dtype=dtype)

    def update(state: BetaState, arm, reward) -> BetaState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype,
                                         state.successes.shape[1:])
        reward = fail(reward, (reward < 0) | (reward > 1),
                       "`reward` must be in [0, 1] for thompson_beta")
        hit = _one_hot(arm, n_arms, dtype)
        return BetaState(gamma * state.successes + reward * hit,
                         gamma * state.failures + (1 - reward) * hit, state.t + 1)

    return Policy(init, index, _make_select(index), update, n_arms, runs_last=True)


# --------------------------------------------------------------------------- window


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

    Args:
        n_arms: number of arms ``K`` (static).
        window: number of recent steps kept (static).
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = _check_arms(n_arms)
    if int(window) != window or window < 1:
        raise ValueError(f"`window` must be a positive integer; got {window!r}")
    window = int(window)
    alpha = _check_positive("alpha", alpha)

    def init() -> WindowState:
        return WindowState(jnp.full(window, -1, jnp.int32), jnp.zeros(window, dtype),
                           jnp.zeros((), jnp.int32))

    def index(key, state: WindowState) -> Float[Array, " K"]:
        del key
        hits = (state.arms[None, :] == jnp.arange(n_arms)[:, None]).astype(dtype)
        counts = hits.sum(1)
        sums = hits @ state.rewards
        n = jnp.maximum(jnp.minimum(state.t, window), 1).astype(dtype)
        bonus = jnp.sqrt(2 * alpha * jnp.log(n) * _safe_div(1.0, counts))
        return jnp.where(counts > 0, _safe_div(sums, counts) + bonus, jnp.inf)

    def update(state: WindowState, arm, reward) -> WindowState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype)
        slot = state.t % window
        return WindowState(state.arms.at[slot].set(arm), state.rewards.at[slot].set(reward),
                           state.t + 1)

    return Policy(init, index, _make_select(index), update, n_arms)


# --------------------------------------------------------------------------- extreme


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
    n_arms = _check_arms(n_arms)
    for name, v in (("n_batches", n_batches), ("batch_size", batch_size)):
        if int(v) != v or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {v!r}")
    size = int(n_batches) * int(batch_size)
    q = _check_unit("q", q, low_open=False)
    alpha = _check_positive("alpha", alpha)

    def init() -> BufferState:
        return BufferState(jnp.zeros((n_arms, size), dtype), jnp.zeros(n_arms, jnp.int32),
                           jnp.zeros((), jnp.int32))

    def index(key, state: BufferState) -> Float[Array, " K"]:
        del key
        maxima = state.buffer.reshape(n_arms, n_batches, batch_size).max(-1)
        qmax = jnp.quantile(maxima, q, axis=1, method="lower")
        n = jnp.maximum(state.t, 1).astype(dtype)
        bonus = alpha * jnp.sqrt(jnp.log(n) * _safe_div(1.0, state.filled.astype(dtype)))
        return jnp.where(state.filled >= size, qmax + bonus, jnp.inf)

    def update(state: BufferState, arm, reward) -> BufferState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype)
        slot = state.filled[arm] % size
        return BufferState(state.buffer.at[arm, slot].set(reward),
                           state.filled.at[arm].add(1), state.t + 1)

    return Policy(init, index, _make_select(index), update, n_arms)


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

    Args:
        n_arms: number of arms ``K`` (static).
        horizon: length of the history buffer (static).
        s: the threshold's rank: fewer than ``s`` payoffs exceed it (static).
        delta: confidence parameter, in ``(0, 1]``.
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = _check_arms(n_arms)
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"`horizon` must be a positive integer; got {horizon!r}")
    if int(s) != s or s < 1:
        raise ValueError(f"`s` must be a positive integer; got {s!r}")
    horizon, s = int(horizon), int(s)
    delta = _check_unit("delta", delta)

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
        mu = _safe_div(above, n_k)
        a = jnp.log(2 * jnp.maximum(state.t, 1) * n_arms / delta).astype(dtype)
        bound = mu + _safe_div(a + jnp.sqrt(2 * n_k * mu * a + a * a), n_k)
        return jnp.where(n_k > 0, bound, jnp.inf)

    def update(state: HistoryState, arm, reward) -> HistoryState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype)
        slot = jnp.minimum(state.t, horizon)  # out of range once full: .at[] drops it
        return HistoryState(state.arms.at[slot].set(arm, mode="drop"),
                            state.rewards.at[slot].set(reward, mode="drop"), state.t + 1)

    return Policy(init, index, _make_select(index), update, n_arms)


# --------------------------------------------------------------------------- cost


class CostState(NamedTuple):
    inner: Any
    spent: Float[Array, ""]


def cost_aware(policy: Policy, costs, *, budget: float | None = None,
               per_unit_cost: bool = True) -> Policy:
    """Make any policy cost-aware. With ``per_unit_cost`` the inner policy learns reward
    per unit cost (each reward is scaled by ``min(costs) / costs[arm]``). With a
    ``budget``, arms whose cost exceeds what is left get index -inf; once nothing is
    affordable the cheapest arm is returned and ``spent`` passes ``budget`` (check
    ``state.spent`` to stop).

    Args:
        policy: the inner policy (one run per state).
        costs: positive, finite cost per arm ``(K,)`` (concrete: a list or array).
        budget: optional total budget (``> 0``).
        per_unit_cost: scale rewards by ``min(costs) / costs[arm]`` (static).

    Returns:
        A :class:`Policy` whose state is a :class:`CostState`.
    """
    # validated in NumPy: the factory also works inside jit (costs are static, concrete)
    costs_host = np.asarray(costs, np.float32)
    if costs_host.shape != (policy.n_arms,):
        raise ValueError(f"`costs` must have shape ({policy.n_arms},); "
                         f"got {costs_host.shape}")
    if not np.all(np.isfinite(costs_host) & (costs_host > 0)):
        raise ValueError("`costs` must be finite and > 0")
    if budget is not None:
        budget = _check_positive("budget", budget, strict=True)
    costs_np = jnp.asarray(costs_host)
    scale = jnp.asarray(np.min(costs_host) / costs_host)
    cheapest = jnp.asarray(np.argmin(costs_host), jnp.int32)

    def init() -> CostState:
        return CostState(policy.init(), jnp.zeros((), jnp.float32))

    def index(key, state: CostState):
        idx = policy.index(key, state.inner)
        if budget is not None:
            idx = jnp.where(costs_np <= budget - state.spent, idx, -jnp.inf)
        return idx

    def select(key, state: CostState):
        idx = index(key, state)
        return jnp.where(jnp.any(idx > -jnp.inf), _argmax(idx), cheapest)

    def update(state: CostState, arm, reward) -> CostState:
        arm, reward = _check_observation(policy.n_arms, arm, reward, jnp.result_type(reward))
        r = reward * scale[arm].astype(reward.dtype) if per_unit_cost else reward
        return CostState(policy.update(state.inner, arm, r), state.spent + costs_np[arm])

    return Policy(init, index, select, update, policy.n_arms)


# --------------------------------------------------------------------------- credit


def _check_parents(parents, name: str = "parents"):
    parents = jnp.asarray(parents)
    if parents.ndim != 2 or not jnp.issubdtype(parents.dtype, jnp.integer):
        raise ValueError(f"`{name}` must be an integer array of shape (n_nodes, max_parents) "
                         f"padded with -1; got dtype {parents.dtype}, shape {parents.shape}")
    node = jnp.arange(parents.shape[0])[:, None]
    bad = (parents < -1) | (parents >= node)
    return fail(parents, jnp.any(bad),
                 f"`{name}`: every parent id must be -1 (padding) or an earlier node "
                 f"(0 <= parent < node): the genealogy has a cycle or is not in "
                 f"topological order")


def propagate_credit(parents: Int[Array, "N P"], gain: Float[Array, " N"], *,
                     decay: float) -> Float[Array, " N"]:
    """Credit through a genealogy DAG: ``c_u = gain_u + decay * sum_{v child of u}
    c_v / |parents(v)|``, i.e. ``c = (I - decay A^T)^{-1} gain`` with
    ``A[v, u] = 1 / |parents(v)|``.

    Nodes are ``0..N-1`` in topological order (every parent id is smaller than its
    child's); ``parents`` is padded with -1 (fixed capacity: unused nodes have gain 0).
    One reverse ``lax.scan``, O(N P).

    Args:
        parents: int parent ids ``(N, P)``, -1 padded, each smaller than its node's id.
        gain: each node's own gain ``(N,)``.
        decay: the factor on credit passed from a child to its parents.

    Returns:
        The credit ``c`` ``(N,)``.
    """
    parents = _check_parents(parents)
    gain = jnp.asarray(gain)
    if gain.shape != parents.shape[:1]:
        raise ValueError(f"`gain` must have shape ({parents.shape[0]},); got {gain.shape}")
    gain = fail(gain, ~jnp.all(jnp.isfinite(gain)), "`gain` contains NaN or inf values")
    n_nodes, n_par = parents.shape
    valid = parents >= 0
    share = 1.0 / jnp.maximum(valid.sum(1), 1).astype(gain.dtype)

    def body(acc, v):
        c_v = gain[v] + decay * acc[v]
        contrib = jnp.where(valid[v], c_v * share[v], 0)
        acc = acc.at[jnp.where(valid[v], parents[v], n_nodes)].add(contrib, mode="drop")
        return acc, c_v

    _, c = jax.lax.scan(body, jnp.zeros(n_nodes, gain.dtype), jnp.arange(n_nodes),
                        reverse=True)
    return c


def credit_per_arm(credit: Float[Array, " N"], node_arm: Int[Array, " N"], *, n_arms: int,
                   node_time: Int[Array, " N"] | None = None, now=None,
                   gamma: float = 1.0) -> Float[Array, " K"]:
    """Sum node credit per generating arm: ``C_k = sum_{v: arm(v)=k} c_v *
    gamma^(now - t_v)``. Nodes with arm -1 (roots, padding) count for no arm.

    Args:
        credit: node credit ``(N,)`` (e.g. from :func:`propagate_credit`).
        node_arm: the arm that produced each node ``(N,)``, -1 for none.
        n_arms: number of arms ``K`` (static).
        node_time: optional step each node was produced at ``(N,)``.
        now: the current step, required with ``node_time``.
        gamma: discount per step of age.

    Returns:
        The credit per arm ``(K,)``.
    """
    credit = jnp.asarray(credit)
    node_arm = jnp.asarray(node_arm)
    if node_arm.shape != credit.shape:
        raise ValueError(f"`node_arm` must have shape {credit.shape}; got {node_arm.shape}")
    w = credit
    if node_time is not None:
        if now is None:
            raise ValueError("`now` is required with `node_time`")
        w = credit * jnp.asarray(gamma, credit.dtype) ** (now - jnp.asarray(node_time))
    onehot = node_arm[:, None] == jnp.arange(n_arms)[None, :]
    return jnp.where(onehot, w[:, None], 0).sum(0)


# --------------------------------------------------------------------------- Ballad


class BalladState(NamedTuple):
    """The genealogy the policy learns from (fixed capacity ``C``).

    Node ``i`` is the ``i``-th observation (roots first): its parents, its score (the
    normalised reward), its gain over its best parent, the arm that produced it (-1 for a
    root) and the step it was produced at."""

    parents: Int[Array, "C P"]
    score: Float[Array, " C"]
    gain: Float[Array, " C"]
    arm: Int[Array, " C"]
    time: Int[Array, " C"]
    n_nodes: Int[Array, ""]
    pulls: Int[Array, " K"]
    t: Int[Array, ""]


def _weighted_quantile(values, weights, q):
    """Row-wise weighted ``q``-quantile (lower) of ``values`` (C,) under ``weights`` (K, C);
    rows with zero total weight give 0."""
    order = jnp.argsort(values)
    v = values[order]
    cw = jnp.cumsum(weights[:, order], axis=1)
    total = cw[:, -1:]
    own = weights[:, order] > 0  # cw only grows at the arm's own nodes; q = 0 needs this
    first = jnp.argmax((cw >= q * total - 1e-12 * total) & own, axis=1)
    return jnp.where(total[:, 0] > 0, v[first], 0)


def ballad(n_arms: int, *, capacity: int, max_parents: int = 2, gamma: float = 0.95,
           alpha: float = 0.5, decay: float = 0.5, q: float = 0.9,
           extreme: bool = True, credit: bool = True, discount: bool = True,
           dtype=jnp.float32) -> Policy:
    """The Ballad routing policy: extreme-value + discounted index with DAG credit.

    Every arm pull adds one node to the genealogy: ``update(state, arm, reward,
    parents)`` with ``reward`` the child's normalised score in [0, 1] and ``parents`` the
    (P,) ids of the nodes it was produced from (-1 padded). With node weights
    ``w_v = gamma^(t - t_v)`` (``discount``), discounted pulls ``N_k = sum_{arm(v)=k} w_v``,
    credit ``c = propagate_credit(parents, gain, decay)`` (``credit``; else ``c = gain``)
    where ``gain_v = max(0, score_v - max score of v's parents)``::

        index_k = sum_{arm(v)=k} w_v c_v / N_k                   (discounted credit)
                + Q_q({score_v : arm(v)=k}; weights w)           (extreme: a high quantile)
                + sqrt(2 alpha ln(sum_k N_k) / N_k)

    The quantile term favours arms that produce rare high scores over arms with a stable
    average (``extreme=False`` drops it). An arm never pulled has index +inf. Roots (the
    initial population) are added with :func:`ballad_add_roots`. Updates beyond
    ``capacity`` nodes are counted in ``pulls`` but not stored.

    Args:
        n_arms: number of arms ``K`` (static).
        capacity: most nodes stored (static).
        max_parents: parents per node, ``P`` (static).
        gamma: node discount per step, in ``(0, 1]``.
        alpha: exploration weight (``>= 0``).
        decay: credit decay along the genealogy (``>= 0``).
        q: quantile level of the extreme term, in ``[0, 1]``.
        extreme: include the quantile term (static).
        credit: propagate credit through the genealogy (static).
        discount: discount node weights by age (static).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = _check_arms(n_arms)
    gamma = _check_unit("gamma", gamma)
    q = _check_unit("q", q, low_open=False)
    alpha = _check_positive("alpha", alpha)
    decay = _check_positive("decay", decay)
    if int(capacity) != capacity or capacity < 1:
        raise ValueError(f"`capacity` must be a positive integer; got {capacity!r}")
    capacity, max_parents = int(capacity), int(max_parents)
    g = gamma if discount else 1.0

    def init() -> BalladState:
        return BalladState(jnp.full((capacity, max_parents), -1, jnp.int32),
                           jnp.zeros(capacity, dtype), jnp.zeros(capacity, dtype),
                           jnp.full(capacity, -1, jnp.int32), jnp.zeros(capacity, jnp.int32),
                           jnp.zeros((), jnp.int32), jnp.zeros(n_arms, jnp.int32),
                           jnp.zeros((), jnp.int32))

    def index(key, state: BalladState) -> Float[Array, " K"]:
        del key
        live = jnp.arange(capacity) < state.n_nodes
        w = jnp.where(live, jnp.asarray(g, dtype) ** (state.t - state.time), 0)
        onehot = (state.arm[None, :] == jnp.arange(n_arms)[:, None]) & live[None, :]
        wk = jnp.where(onehot, w[None, :], 0)  # (K, C)
        counts = wk.sum(1)
        c = propagate_credit(state.parents, state.gain, decay=decay) if credit else state.gain
        value = _safe_div(wk @ c, counts)
        if extreme:
            value = value + _weighted_quantile(state.score, wk, q)
        n = jnp.maximum(counts.sum(), 1)
        bonus = jnp.sqrt(2 * alpha * jnp.log(n) * _safe_div(1.0, counts))
        return jnp.where((state.pulls > 0) & (counts > 0), value + bonus, jnp.inf)

    def update(state: BalladState, arm, reward, parents=None) -> BalladState:
        arm, reward = _check_observation(n_arms, arm, reward, dtype)
        parents = _check_node_parents(parents, max_parents, state.n_nodes)
        state = _ballad_insert(state, arm, reward, parents)
        return state._replace(pulls=state.pulls.at[arm].add(1), t=state.t + 1)

    return Policy(init, index, _make_select(index), update, n_arms)


def _ballad_insert(state: BalladState, arm, reward, parents) -> BalladState:
    capacity = state.score.shape[0]
    valid = parents >= 0
    best_parent = jnp.max(jnp.where(valid, state.score[jnp.maximum(parents, 0)], 0))
    gain = jnp.maximum(reward - best_parent, 0)
    slot = jnp.where(state.n_nodes < capacity, state.n_nodes, capacity)  # dropped if full
    return state._replace(
        parents=state.parents.at[slot].set(parents, mode="drop"),
        score=state.score.at[slot].set(reward, mode="drop"),
        gain=state.gain.at[slot].set(gain, mode="drop"),
        arm=state.arm.at[slot].set(arm, mode="drop"),
        time=state.time.at[slot].set(state.t, mode="drop"),
        n_nodes=jnp.minimum(state.n_nodes + 1, capacity))


def _check_node_parents(parents, max_parents: int, n_nodes):
    if parents is None:
        return jnp.full(max_parents, -1, jnp.int32)
    parents = jnp.asarray(parents)
    if parents.shape != (max_parents,) or not jnp.issubdtype(parents.dtype, jnp.integer):
        raise ValueError(f"`parents` must be an integer array of shape ({max_parents},) "
                         f"padded with -1; got dtype {parents.dtype}, shape {parents.shape}")
    parents = fail(parents, jnp.any((parents < -1) | (parents >= n_nodes)),
                    "`parents`: each id must be -1 or an existing node (0 <= id < n_nodes)")
    return parents.astype(jnp.int32)


def ballad_add_roots(state: BalladState, scores: Float[Array, " R"]) -> BalladState:
    """Add the initial population (no parents, no generating arm) as nodes ``n_nodes ..
    n_nodes + R - 1`` of a :func:`ballad` state.

    Args:
        state: a :class:`BalladState`.
        scores: the roots' normalised scores ``(R,)``.

    Returns:
        The updated state (roots beyond ``capacity`` are dropped).
    """
    scores = jnp.asarray(scores)
    if scores.ndim != 1:
        raise ValueError(f"`scores` must be 1-D; got shape {scores.shape}")
    none = jnp.full(state.parents.shape[1], -1, jnp.int32)

    def body(st, s):
        return _ballad_insert(st, jnp.int32(-1), s.astype(st.score.dtype), none), None

    return jax.lax.scan(body, state, scores)[0]


# --------------------------------------------------------------------------- simulate


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

    Args:
        key: PRNG key.
        policy: the :class:`Policy`.
        reward_fn: ``reward_fn(key, t, arm) -> reward`` (a scalar).
        n_steps: horizon ``T`` (static).

    Returns:
        ``(final_state, trace)`` with ``trace`` a :class:`SimTrace` of ``(T,)`` arrays.
    """
    return _scan_steps(key, policy.init(), policy.select, policy.update, reward_fn, n_steps)


def _scan_steps(key, init, select, update, reward_fn, n_steps: int, n_runs: int | None = None):
    """The simulation loop of :func:`simulate` and :func:`simulate_runs` (``n_runs``: the
    reward shape it checks, ``(n_runs,)``)."""

    def body(state, inp):
        t, k = inp
        k_sel, k_rew = jax.random.split(k)
        arm = select(k_sel, state)
        reward = jnp.asarray(reward_fn(k_rew, t, arm))
        if n_runs is not None and reward.shape != (n_runs,):
            raise ValueError(f"`reward_fn` must return one reward per run, shape "
                             f"({n_runs},); got shape {reward.shape}")
        return update(state, arm, reward), (arm, reward)

    keys = jax.random.split(key, n_steps)
    state, (arms, rewards) = jax.lax.scan(body, init,
                                          (jnp.arange(n_steps, dtype=jnp.int32), keys))
    return state, SimTrace(arms, rewards)


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

    Args:
        key: PRNG key.
        policy: the :class:`Policy`.
        reward_fn: ``reward_fn(key, t, arms) -> rewards``, ``(R,)`` arms to ``(R,)``.
        n_steps: horizon ``T`` (static).
        n_runs: number of runs ``R`` (static).

    Returns:
        ``(final_state, trace)`` with ``trace`` a :class:`SimTrace` of ``(T, R)`` arrays.
    """
    if int(n_runs) != n_runs or n_runs < 1:
        raise ValueError(f"`n_runs` must be a positive integer; got {n_runs!r}")
    n_runs = int(n_runs)
    if policy.runs_last:
        init = policy.init(n_runs)
        select, update = policy.select, policy.update
    else:
        init = jax.vmap(lambda _: policy.init())(jnp.arange(n_runs))
        update = jax.vmap(policy.update)

        def select(k, state):
            return jax.vmap(policy.select)(jax.random.split(k, n_runs), state)

    return _scan_steps(key, init, select, update, reward_fn, n_steps, n_runs)
