"""Count-based policies: UCB1, discounted UCB and discounted Thompson sampling (Gaussian
and Beta-Bernoulli); all step many runs at once with the runs on the last axis."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..checks import fail
from ._checks import check_arms, check_observation, check_positive, check_unit
from ._core import Policy, make_select, one_hot, safe_div, state_shape, ucb_index

__all__ = ["CountState", "BetaState", "ucb1", "discounted_ucb", "thompson_gaussian",
           "thompson_beta"]


class CountState(NamedTuple):
    """Per-arm (possibly discounted) pull counts ``counts`` and reward sums ``sums``;
    ``pulls`` counts actual pulls (integer, never discounted); ``t`` steps so far.
    Arrays are (K,), or (K, R) for R runs stepped together (``init(n_runs=R)``)."""

    counts: Float[Array, "K ..."]
    sums: Float[Array, "K ..."]
    pulls: Int[Array, "K ..."]
    t: Int[Array, ""]


def _count_policy(n_arms: int, gamma: float, dtype, index) -> Policy:
    """The :class:`Policy` of a count-based ``index``: a :class:`CountState` (zeros, (K,) or
    (K, R)) updated as ``N <- gamma N + [a=k]``, ``X <- gamma X + r [a=k]``."""

    def init(n_runs: int | None = None) -> CountState:
        shape = state_shape(n_arms, n_runs)
        return CountState(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype),
                          jnp.zeros(shape, jnp.int32), jnp.zeros((), jnp.int32))

    def update(state: CountState, arm, reward) -> CountState:
        arm, reward = check_observation(n_arms, arm, reward, dtype, state.counts.shape[1:])
        hit = one_hot(arm, n_arms, dtype)
        return CountState(gamma * state.counts + hit, gamma * state.sums + reward * hit,
                          state.pulls + hit.astype(jnp.int32), state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms, runs_last=True)


def _discounted_total(t, gamma: float, dtype):
    """``sum_k N_k`` after ``t`` discounted updates, ``sum_{i<t} gamma^i``, in closed form:
    every step adds 1 to one arm and decays all, so no reduction over the arms is needed
    (a reduction over a short axis is comparatively slow on XLA:CPU)."""
    t = t.astype(dtype)
    if gamma == 1.0:
        return t
    return -jnp.expm1(t * jnp.log(jnp.asarray(gamma, dtype))) / (1 - gamma)


def _ucb_policy(n_arms: int, gamma: float, alpha: float, dtype, bonus) -> Policy:
    """UCB on the (discounted) counts: ``index_k = X_k / N_k + bonus(n, 1 / N_k, alpha)`` with
    ``n = max(sum_k N_k, 1)`` (:func:`_discounted_total`, no reduction over the arms),
    +inf for ``N_k = 0``. A count that decayed to exactly 0 (float underflow) has an
    infinite index, as an arm never pulled; without discount ``N_k`` is the pull count."""
    n_arms = check_arms(n_arms)
    alpha = check_positive("alpha", alpha)

    def index(key, state: CountState) -> Float[Array, " K"]:
        del key
        n = jnp.maximum(_discounted_total(state.t, gamma, state.counts.dtype), 1)
        return ucb_index(state.sums, state.counts, bonus(n, safe_div(1.0, state.counts), alpha))

    return _count_policy(n_arms, gamma, dtype, index)


def ucb1(n_arms: int, *, alpha: float = 1.0, dtype=jnp.float32) -> Policy:
    """UCB1: ``index_k = X_k/N_k + alpha * sqrt(2 ln n / N_k)`` with ``n`` the total number
    of pulls (MABWiser's ``UCB1(alpha)`` form; Auer et al. 2002 with ``alpha = 1``).

    Peer conventions: MABWiser ``LearningPolicy.UCB1(alpha=a)`` is ``alpha = a`` (its
    ``_get_ucb``: ``mean + alpha sqrt(2 ln(total_count) / arm_count)``; it gives a
    never-pulled arm expectation 0 where jaxkit gives +inf). SMPyBandits'
    ``UCBalpha(alpha=a)`` (``mean + sqrt(a ln t / (2 N))``) is ``alpha = sqrt(a) / 2``.

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    return _ucb_policy(n_arms, 1.0, alpha, dtype,
                       lambda n, inv, a: a * jnp.sqrt(2 * jnp.log(n) * inv))


def discounted_ucb(n_arms: int, *, gamma: float = 0.99, alpha: float = 1.0,
                   dtype=jnp.float32) -> Policy:
    """Discounted UCB (Garivier & Moulines 2011). Every arm decays every step:
    ``N_k <- gamma N_k + [a=k]``, ``X_k <- gamma X_k + r [a=k]``; the index is
    ``X_k/N_k + sqrt(2 alpha ln(n) / N_k)`` with ``n = sum_k N_k``; +inf for an arm
    never pulled.

    Peer convention: SMPyBandits' ``DiscountedUCB(alpha=a, gamma)`` has the index
    ``X/N + sqrt(a ln(sum N) / (2 N))``, so **jaxkit's ``alpha`` is SMPyBandits'
    ``a / 4``** (its default ``a = 1`` is ``alpha = 0.25``). SMPyBandits also returns
    +inf whenever ``N_k < 1`` (not only for never-pulled arms), truncates ``N_k`` to an
    integer and discounts an arm lazily when it is next pulled (see
    ``benchmarks/peers/bandit_worker.py``); the formula is the same.

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        gamma: discount per step, in ``(0, 1]``.
        alpha: exploration weight (``>= 0``).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    return _ucb_policy(n_arms, check_unit("gamma", gamma), alpha, dtype,
                       lambda n, inv, a: jnp.sqrt(2 * a * jnp.log(n) * inv))


def thompson_gaussian(n_arms: int, *, gamma: float = 1.0, sigma: float = 1.0,
                      prior_mean: float = 0.0, prior_count: float = 1.0,
                      dtype=jnp.float32) -> Policy:
    """Gaussian Thompson sampling with discounting: the posterior of arm k is
    ``N((X_k + c m0) / (N_k + c), sigma^2 / (N_k + c))`` with the discounted ``N_k, X_k``
    of :func:`discounted_ucb` (every arm decays every step) and a prior worth ``c``
    pseudo-observations at ``m0``.

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

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
    n_arms = check_arms(n_arms)
    gamma = check_unit("gamma", gamma)
    sigma = check_positive("sigma", sigma, strict=True)
    prior_count = check_positive("prior_count", prior_count, strict=True)

    def index(key, state: CountState) -> Float[Array, " K"]:
        prec = state.counts + prior_count
        mean = (state.sums + prior_count * prior_mean) / prec
        return mean + sigma / jnp.sqrt(prec) * jax.random.normal(key, prec.shape, dtype)

    return _count_policy(n_arms, gamma, dtype, index)


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

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        gamma: discount per step, in ``(0, 1]``.
        prior: the Beta prior ``(a, b)``, both ``> 0``.
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy` (``runs_last``: also (K, R) states for R runs).
    """
    n_arms = check_arms(n_arms)
    gamma = check_unit("gamma", gamma)
    a0, b0 = (check_positive("prior", p, strict=True) for p in prior)

    def init(n_runs: int | None = None) -> BetaState:
        shape = state_shape(n_arms, n_runs)
        return BetaState(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype),
                         jnp.zeros((), jnp.int32))

    def index(key, state: BetaState) -> Float[Array, " K"]:
        return jax.random.beta(key, a0 + state.successes, b0 + state.failures, dtype=dtype)

    def update(state: BetaState, arm, reward) -> BetaState:
        arm, reward = check_observation(n_arms, arm, reward, dtype,
                                         state.successes.shape[1:])
        reward = fail(reward, (reward < 0) | (reward > 1),
                       "`reward` must be in [0, 1] for thompson_beta")
        hit = one_hot(arm, n_arms, dtype)
        return BetaState(gamma * state.successes + reward * hit,
                         gamma * state.failures + (1 - reward) * hit, state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms, runs_last=True)

