"""TempBench synthetic tasks: sequences of activations with known temporal structure.

Three generators, each a pure JAX function of an explicit PRNG key that returns the data
plus its ground truth (shape arguments are static: ``jax.jit(fn, static_argnames=...)``;
scalar rates may be traced, so a sweep over ``rho`` can be ``vmap``-ed):

* :func:`markov_features` -- F unit directions in d < F dimensions (superposition), each
  switched on/off along the sequence by its own two-state Markov chain with stationary
  firing probability ``pi`` and lag-1 autocorrelation ``rho`` of the on/off indicator:
  ``P(on -> on) = pi + rho (1 - pi)``, ``P(off -> on) = pi (1 - rho)``.
* :func:`hmm_denoising` -- a hidden Markov chain over S states; state s emits
  ``amplitude * mu_s + sigma * N(0, I_d)``, noisy enough that one token is ambiguous while
  a window (or the forward-backward posterior, :func:`hmm_posterior`) is not.
* :func:`ordered_features` -- C chains of m >= 3 distinct features that always fire in
  order (feature j of a chain at t + j when the chain starts at t), so the temporal atom
  is a multi-position pattern (:func:`chain_atoms`).

Ground truth for a window-T dictionary (atoms ``W_dec`` of shape ``(n, T, d)``):
per-token directions ``(F, d)`` (compare per-position slices, see
:mod:`jaxkit.tempbench.compare`); :func:`persistent_atoms` (a feature persisting over the
window: its direction replicated at all T positions, normalised jointly);
:func:`chain_atoms` (every full alignment of a chain with the window). The TempBench
setting follows "Crosscoding Through Time: Sparse Feature Discovery Across Sequence
Positions" (Mech Interp Workshop, ICML 2026); the recipes here are our own,
laptop-scale versions.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxkit.kernels.checks import check_finite, fail, is_traced

__all__ = [
    "MarkovTask", "HMMTask", "ChainTask", "unit_directions", "markov_features",
    "markov_transition", "persistent_atoms", "sticky_transition", "hmm_denoising",
    "hmm_posterior", "ordered_features", "chain_atoms", "sliding_windows",
]


class MarkovTask(NamedTuple):
    x: Float[Array, "n L d"]  # sum_g on * magnitude * direction + noise
    directions: Float[Array, "F d"]  # unit rows
    codes: Bool[Array, "n L F"]  # on/off indicators
    magnitudes: Float[Array, "n L F"]  # coefficients (zero where off)


class HMMTask(NamedTuple):
    x: Float[Array, "n L d"]
    states: Int[Array, "n L"]
    directions: Float[Array, "S d"]  # unit rows; emission mean is amplitude * direction
    transition: Float[Array, "S S"]
    initial: Float[Array, " S"]


class ChainTask(NamedTuple):
    x: Float[Array, "n L d"]
    directions: Float[Array, "C m d"]  # feature j of chain c (unit rows)
    codes: Bool[Array, "n L C m"]  # feature (c, j) on at t
    starts: Bool[Array, "n L C"]  # chain c starts at t


def _check_static(**kw):
    for name, (value, lo) in kw.items():
        if not isinstance(value, int) or value < lo:
            raise ValueError(f"`{name}` must be an int >= {lo}; got {value!r}")


def _check_range(x, name: str, lo: float, hi: float, *, lo_open=False, hi_open=False):
    """``lo <= x <= hi`` (open ends as asked). Concrete values (Python or NumPy scalars,
    concrete arrays) are checked in NumPy and raise ``ValueError`` at once, even inside
    ``jit`` (so no run-time check is compiled); traced values get ``equinox.error_if``."""
    interval = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    if is_traced(x):
        bad = (x <= lo if lo_open else x < lo) | (x >= hi if hi_open else x > hi)
        x = check_finite(x, name)
        return fail(x, jnp.any(bad), f"`{name}` must lie in {interval}")
    v = np.asarray(x, np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"`{name}` contains NaN or inf values; got {x!r}")
    bad = (v <= lo if lo_open else v < lo) | (v >= hi if hi_open else v > hi)
    if np.any(bad):
        raise ValueError(f"`{name}` must lie in {interval}; got {x!r}")
    return x


def unit_directions(key: PRNGKeyArray, n: int, d: int, *,
                    orthogonal: bool = False) -> Float[Array, "n d"]:
    """``n`` random unit vectors in ``R^d`` (isotropic Gaussian, normalised); with
    ``orthogonal=True`` (needs ``n <= d``) an orthonormal set from a QR decomposition."""
    _check_static(n=(n, 1), d=(d, 1))
    g = jax.random.normal(key, (d, n) if orthogonal else (n, d))
    if orthogonal:
        if n > d:
            raise ValueError(f"`orthogonal=True` needs n <= d; got n={n}, d={d}")
        q, r = jnp.linalg.qr(g)
        return (q * jnp.sign(jnp.diag(r))).T
    return g / jnp.linalg.norm(g, axis=1, keepdims=True)


def markov_transition(pi, rho) -> tuple[Float[Array, ""] | float, Float[Array, ""] | float]:
    """``(P(on -> on), P(off -> on)) = (pi + rho (1 - pi), pi (1 - rho))``: the two-state
    chain with stationary ``P(on) = pi`` and lag-1 autocorrelation ``rho`` of the
    indicator. Valid for ``pi`` in (0, 1) and ``-min(pi/(1-pi), (1-pi)/pi) <= rho <= 1``."""
    pi = _check_range(pi, "pi", 0.0, 1.0, lo_open=True, hi_open=True)
    rho = _check_range(rho, "rho", -1.0, 1.0)
    msg = ("`rho` is below -min(pi/(1-pi), (1-pi)/pi): no Markov chain has this "
           "stationary rate and autocorrelation")
    if is_traced(pi) or is_traced(rho):
        rho_min = -jnp.minimum(pi / (1 - pi), (1 - pi) / pi)
        rho = fail(rho, jnp.any(rho < rho_min - 1e-6), msg)
    else:
        p, r = np.asarray(pi, np.float64), np.asarray(rho, np.float64)
        if np.any(r < -np.minimum(p / (1 - p), (1 - p) / p) - 1e-6):
            raise ValueError(f"{msg}; got pi={pi!r}, rho={rho!r}")
    return pi + rho * (1 - pi), pi * (1 - rho)


def markov_features(key: PRNGKeyArray, *, n_seq: int, length: int, d: int, n_features: int,
                    pi=0.05, rho=0.5, noise=0.01, mag_std=0.1,
                    orthogonal: bool = False) -> MarkovTask:
    """Markov features in superposition.

    Feature g's indicator ``c_t`` is a stationary two-state Markov chain
    (``c_0 ~ Bernoulli(pi)``, transitions of :func:`markov_transition`), independent
    across features and sequences; magnitudes ``a_t ~ |N(1, mag_std^2)|`` i.i.d.;
    ``x_t = sum_g c_{t,g} a_{t,g} u_g + noise * N(0, I_d)`` with unit directions ``u_g``
    (:func:`unit_directions`). Then ``E c_t = pi`` and ``corr(c_t, c_{t+1}) = rho``.
    """
    _check_static(n_seq=(n_seq, 1), length=(length, 1), d=(d, 1), n_features=(n_features, 1))
    p11, p01 = markov_transition(pi, rho)
    k_dir, k0, k_u, k_mag, k_noise = jax.random.split(key, 5)
    directions = unit_directions(k_dir, n_features, d, orthogonal=orthogonal)
    c0 = jax.random.uniform(k0, (n_seq, n_features)) < pi
    u = jax.random.uniform(k_u, (length - 1, n_seq, n_features))

    def step(c, u_t):
        c = u_t < jnp.where(c, p11, p01)
        return c, c

    _, rest = jax.lax.scan(step, c0, u)
    codes = jnp.concatenate([c0[:, None], jnp.moveaxis(rest, 0, 1)], axis=1)
    mags = jnp.abs(1.0 + mag_std * jax.random.normal(k_mag, codes.shape)) * codes
    x = mags @ directions + noise * jax.random.normal(k_noise, (n_seq, length, d))
    return MarkovTask(x, directions, codes, mags)


def persistent_atoms(directions: Float[Array, "F d"], window: int) -> Float[Array, "F T d"]:
    """Temporal ground truth "feature g persists over the window": ``u_g`` at each of the
    T positions, divided by ``sqrt(T)`` (unit Frobenius norm)."""
    _check_static(window=(window, 1))
    return jnp.repeat(directions[:, None], window, axis=1) / jnp.sqrt(window)


def sticky_transition(n_states: int, stay) -> Float[Array, "S S"]:
    """Transition matrix ``stay * I + (1 - stay) / (S - 1) * (1 - I)``."""
    _check_static(n_states=(n_states, 2))
    stay = _check_range(stay, "stay", 0.0, 1.0)
    eye = jnp.eye(n_states)
    return stay * eye + (1 - stay) / (n_states - 1) * (1 - eye)


def _check_stochastic(p, name: str):
    p = jnp.asarray(p)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"`{name}` must be a square (S, S) matrix; got shape {p.shape}")
    p = check_finite(p, name)
    bad = jnp.any(p < 0) | jnp.any(jnp.abs(p.sum(1) - 1) > 1e-4)
    return fail(p, bad, f"`{name}` must be row-stochastic (entries >= 0, rows sum to 1)")


def hmm_denoising(key: PRNGKeyArray, *, n_seq: int, length: int, d: int, n_states: int,
                  stay=0.9, amplitude=1.0, sigma=0.8, transition=None,
                  orthogonal: bool = True) -> HMMTask:
    """HMM denoising task: ``s_0 ~`` uniform, ``s_{t+1} ~ P[s_t]`` (default
    :func:`sticky_transition`), ``x_t = amplitude * mu_{s_t} + sigma * N(0, I_d)`` with unit
    state directions ``mu`` (orthonormal by default, needs ``S <= d``). With ``sigma``
    comparable to ``amplitude`` one token is ambiguous, a window of a sticky chain is not.
    """
    _check_static(n_seq=(n_seq, 1), length=(length, 1), d=(d, 1), n_states=(n_states, 2))
    p = (sticky_transition(n_states, stay) if transition is None
         else _check_stochastic(transition, "transition"))
    if p.shape != (n_states, n_states):
        raise ValueError(f"`transition` must have shape ({n_states}, {n_states}); "
                         f"got {p.shape}")
    sigma = _check_range(sigma, "sigma", 0.0, jnp.inf)
    k_dir, k0, k_s, k_noise = jax.random.split(key, 4)
    directions = unit_directions(k_dir, n_states, d, orthogonal=orthogonal)
    init = jnp.full((n_states,), 1.0 / n_states)
    s0 = jax.random.categorical(k0, jnp.log(init), shape=(n_seq,))
    logp = jnp.log(p)

    def step(s, k):
        s = jax.random.categorical(k, logp[s])
        return s, s

    _, rest = jax.lax.scan(step, s0, jax.random.split(k_s, length - 1))
    states = jnp.concatenate([s0[:, None], jnp.moveaxis(rest, 0, 1)], axis=1)
    x = amplitude * directions[states] + sigma * jax.random.normal(k_noise, (n_seq, length, d))
    return HMMTask(x, states, directions, p, init)


def hmm_posterior(x: Float[Array, "L d"], directions: Float[Array, "S d"],
                  transition: Float[Array, "S S"], initial: Float[Array, " S"], *,
                  amplitude=1.0, sigma=0.8, filtered: bool = False) -> Float[Array, "L S"]:
    """Smoothed posterior ``P(s_t | x_{1:L})`` of one sequence by the (log-space)
    forward-backward algorithm (Rabiner 1989) with the true model: the Bayes-optimal
    reference for any state readout. ``filtered=True``: the causal Bayes filter
    ``P(s_t | x_{1:t})`` (the forward pass alone). ``vmap`` over sequences."""
    mu = amplitude * directions
    loglik = -0.5 * jnp.sum((x[:, None, :] - mu[None]) ** 2, -1) / sigma ** 2  # (L, S)
    logp = jnp.log(transition)
    lse = jax.scipy.special.logsumexp

    def fwd(a, ll):
        a = lse(a[:, None] + logp, axis=0) + ll
        return a - lse(a), a - lse(a)

    a0 = jnp.log(initial) + loglik[0]
    a0 = a0 - lse(a0)
    _, alphas = jax.lax.scan(fwd, a0, loglik[1:])
    alphas = jnp.concatenate([a0[None], alphas])
    if filtered:
        return jnp.exp(alphas)

    def bwd(b, ll):
        b = lse(logp + (ll + b)[None, :], axis=1)
        return b - lse(b), b - lse(b)

    _, betas = jax.lax.scan(bwd, jnp.zeros_like(a0), loglik[1:], reverse=True)
    betas = jnp.concatenate([betas, jnp.zeros_like(a0)[None]])
    post = alphas + betas
    return jnp.exp(post - lse(post, axis=1, keepdims=True))


def ordered_features(key: PRNGKeyArray, *, n_seq: int, length: int, d: int, n_chains: int,
                     chain_length: int = 3, p_start=0.05, noise=0.01,
                     mag_std=0.1) -> ChainTask:
    """Ordered (chained) features: chain c starts at t with probability ``p_start``
    independently (occurrences may overlap); a start at t switches on feature j of the chain
    at ``t + j`` for ``j < m``, so ``A`` at t is always followed by ``B`` at t+1, ``C`` at t+2,
    ... Starts are drawn from ``m - 1`` steps before the sequence so every on feature has its
    whole chain (possibly cut at the end). Each feature fires with rate ``p_start``;
    magnitudes ``|N(1, mag_std^2)|``; ``x_t = sum c a u + noise * N(0, I)``.
    """
    _check_static(n_seq=(n_seq, 1), length=(length, 1), d=(d, 1), n_chains=(n_chains, 1),
                  chain_length=(chain_length, 3))
    p_start = _check_range(p_start, "p_start", 0.0, 1.0)
    m = chain_length
    k_dir, k_s, k_mag, k_noise = jax.random.split(key, 4)
    directions = unit_directions(k_dir, n_chains * m, d).reshape(n_chains, m, d)
    starts = jax.random.uniform(k_s, (n_seq, length + m - 1, n_chains)) < p_start
    # codes[:, t, c, j] = starts[:, t + m - 1 - j, c]
    codes = jnp.stack([starts[:, m - 1 - j: m - 1 - j + length] for j in range(m)], axis=-1)
    mags = jnp.abs(1.0 + mag_std * jax.random.normal(k_mag, codes.shape)) * codes
    x = jnp.einsum("nlcm,cmd->nld", mags, directions)
    x = x + noise * jax.random.normal(k_noise, x.shape)
    return ChainTask(x, directions, codes, starts[:, m - 1:])


def chain_atoms(directions: Float[Array, "C m d"], window: int) -> Float[Array, "G T d"]:
    """Temporal ground truth of chains for a window of T positions: every full alignment of
    a chain with the window, normalised jointly (unit Frobenius norm). For ``T <= m`` the
    ``m - T + 1`` segments ``(u_o, ..., u_{o+T-1})``; for ``T > m`` the chain placed at each
    of the ``T - m + 1`` offsets with zeros elsewhere. Rows ordered chain-major."""
    _check_static(window=(window, 1))
    c, m, d = directions.shape
    T = window
    if T <= m:
        segs = [directions[:, o:o + T] for o in range(m - T + 1)]
    else:
        segs = [jnp.pad(directions, ((0, 0), (o, T - m - o), (0, 0)))
                for o in range(T - m + 1)]
    atoms = jnp.stack(segs, axis=1).reshape(-1, T, d)
    return atoms / jnp.linalg.norm(atoms.reshape(atoms.shape[0], -1), axis=1)[:, None, None]


def sliding_windows(x: Float[Array, "n L d"], window: int) -> Float[Array, "n W T d"]:
    """All ``W = L - T + 1`` windows of T consecutive positions (stride 1)."""
    _check_static(window=(window, 1))
    L = x.shape[1]
    if window > L:
        raise ValueError(f"`window` ({window}) exceeds the sequence length ({L})")
    idx = jnp.arange(L - window + 1)[:, None] + jnp.arange(window)[None]
    return x[:, idx]
