"""A prediction-market simulator whose value of information is known in closed form.

Latent-Gaussian targets (a threshold model of an event, as in probit forecasting):

- target ``i`` has ``J`` latent factors ``F ~ N(0, I)`` and loadings ``a`` (``|a| < 1``),
  latent ``Z_Y = a . F + sqrt(1 - |a|^2) e`` and outcome ``Y = 1[Z_Y > c]``, so the
  opening price is ``p = Phi(-c)``;
- a subquestion asks whether a (noisily read) factor exceeds a threshold,
  ``Z_S = (F_j + nu xi) / sqrt(1 + nu^2)``, ``S = 1[Z_S > d]``, so ``q = Phi(-d)`` and
  ``corr(Z_S, Z_Y) = rho = a_j / sqrt(1 + nu^2)``;
- ``P(Y, S) = Phi_2(-c, -d; rho)`` gives ``p1 = P(Y | S)`` and ``p0 = P(Y | not S)``,
  hence the known VOI (:func:`jaxkit.kernels.belief.voi`).

Price paths: for each question a market on the target (the market in which that
question's answer becomes public) moves as information arrives. Writing ``Z_Y = rho Z_S
+ s E`` (``s = sqrt(1 - rho^2)``, ``E`` independent of ``Z_S``), the rest ``E`` is
revealed as a Brownian path ``B(tau)`` with ``B(1) = E`` (a bridge to the realised ``E``,
so every market resolves to the one realised ``Y``) on the grid ``tau_j = j / T``, and
``S`` is announced at step ``t_S`` (no other news in that step). With ``u = c - s B``,
``v = rho^2 + s^2 (1 - tau)``:

- before ``t_S``: ``p_t = Phi(-u / sqrt v)``;
- from ``t_S`` on: ``P(Y, S | B) = Phi_2(-u / sqrt v, -d; rho / sqrt v)``, divided by
  ``q`` (``S = 1``) or subtracted from ``Phi(-u / sqrt v)`` and divided by ``1 - q``.

The jump at ``t_S`` is therefore exactly the answer's update, with expected absolute
size ``2 q (1 - q) |p1(B) - p0(B)|`` given the state ``B`` at ``t_S - 1``
(:func:`known_voi_at_resolution`); at step 0 (``B = 0``, ``v = 1``) the two
prices are the question's ``p1`` and ``p0``. ``Phi_2`` is :func:`bvn_cdf` (Sheppard's integral
in ``theta``, Gauss-Legendre, log-spaced near ``theta = pi / 2`` for ``|r|`` close to 1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from jaxkit.kernels.belief import VOI, voi

__all__ = ["bvn_cdf", "question_probs", "Markets", "simulate_markets",
           "known_voi_at_resolution", "Targets", "make_targets"]

_NODES, _WEIGHTS = (np.asarray(a) for a in np.polynomial.legendre.leggauss(24))
_SPLIT = 1.0  # theta below it: plain Gauss-Legendre; above: nodes in log(pi/2 - theta)


def _gl(f, a, b):
    """Gauss-Legendre quadrature of ``f`` over ``[a, b]`` (arrays broadcast)."""
    x = jnp.asarray(_NODES, a.dtype)
    w = jnp.asarray(_WEIGHTS, a.dtype)
    mid, half = 0.5 * (a + b), 0.5 * (b - a)
    t = mid[..., None] + half[..., None] * x
    return half * jnp.sum(w * f(t), -1)


def _bvn_pos(h, k, r):
    """``Phi_2(h, k; r)`` for ``0 <= r < 1``."""
    hk, hh = h * k, h * h + k * k
    h_, hk_ = hh[..., None], hk[..., None]

    def dens(theta):
        c2 = jnp.cos(theta) ** 2
        return jnp.exp(-(h_ - 2 * hk_ * jnp.sin(theta)) / (2 * c2))

    tmax = jnp.arcsin(r)
    t1 = jnp.minimum(tmax, _SPLIT)
    part1 = _gl(dens, jnp.zeros_like(t1), t1)
    # theta = pi/2 - exp(s): s from log(pi/2 - tmax) to log(pi/2 - SPLIT)
    eps_lo = jnp.maximum(jnp.pi / 2 - tmax, jnp.finfo(h.dtype).tiny)
    s_hi = jnp.log(jnp.asarray(jnp.pi / 2 - _SPLIT, h.dtype))
    s_lo = jnp.minimum(jnp.log(eps_lo), s_hi)

    def dens_s(s):
        e = jnp.exp(s)
        return dens(jnp.pi / 2 - e) * e

    part2 = jnp.where(tmax > _SPLIT, _gl(dens_s, s_lo, jnp.broadcast_to(s_hi, s_lo.shape)), 0)
    return ndtr(h) * ndtr(k) + (part1 + part2) / (2 * jnp.pi)


def bvn_cdf(h, k, r):
    """Standard bivariate normal CDF ``Phi_2(h, k; r) = P(X < h, Y < k)``, corr ``r``.

    Sheppard (1898): ``Phi_2 = Phi(h) Phi(k) + 1/(2 pi) int_0^{asin r}
    exp(-(h^2 + k^2 - 2 h k sin t) / (2 cos^2 t)) dt``; negative ``r`` through
    ``Phi_2(h, k; r) = Phi(h) - Phi_2(h, -k; -r)``, ``|r| = 1`` as the limit.
    Accurate to about 1e-12 in float64 (tested against SciPy's Genz algorithm).

    Args:
        h: upper limit of the first variable.
        k: upper limit of the second.
        r: correlation in ``[-1, 1]``; all three broadcast.

    Returns:
        The probability, of the broadcast shape.
    """
    dtype = jnp.result_type(float, h, k, r)
    h, k, r = jnp.broadcast_arrays(*(jnp.asarray(x, dtype) for x in (h, k, r)))
    neg = r < 0
    k2 = jnp.where(neg, -k, k)
    ra = jnp.minimum(jnp.abs(r), 1 - jnp.finfo(dtype).eps)
    val = _bvn_pos(h, k2, ra)
    val = jnp.where(neg, ndtr(h) - val, val)
    one = jnp.abs(r) >= 1
    lim = jnp.where(r > 0, ndtr(jnp.minimum(h, k)), jnp.maximum(ndtr(h) - ndtr(-k), 0))
    return jnp.clip(jnp.where(one, lim, val), 0, 1)


def question_probs(c, d, rho):
    """``(p, q, p1, p0)`` of target ``Y = 1[Z_Y > c]`` and question ``S = 1[Z_S > d]``
    with ``corr(Z_Y, Z_S) = rho`` (broadcast)."""
    p, q = ndtr(-c), ndtr(-d)
    both = bvn_cdf(-c, -d, rho)
    p1 = jnp.clip(both / jnp.maximum(q, 1e-30), 0, 1)
    p0 = jnp.clip((p - both) / jnp.maximum(1 - q, 1e-30), 0, 1)
    return p, q, p1, p0


class Targets(NamedTuple):
    """Latent-Gaussian targets.

    Attributes:
        loadings: ``(n, J)`` factor loadings ``a`` (``|a|^2 < 1``).
        threshold: ``(n,)`` thresholds ``c``; the opening price is ``Phi(-c)``.
        factors: ``(n, J)`` realised factors ``F``.
        residual: ``(n,)`` realised idiosyncratic noise ``e``.
        z: ``(n,)`` latent ``Z_Y``; ``outcome = z > threshold``.
        outcome: ``(n,)`` float 0/1.
    """

    loadings: jax.Array
    threshold: jax.Array
    factors: jax.Array
    residual: jax.Array
    z: jax.Array
    outcome: jax.Array


def make_targets(key, n: int, n_factors: int, *, explained: float = 0.8,
                 loading_spread: float = 1.0, threshold_scale: float = 0.8) -> Targets:
    """Draw ``n`` targets: loadings ``a_j = +-sqrt(explained w_j)`` with log-normal
    weights ``w ~ exp(loading_spread g)`` normalised to sum 1 (a large spread: a few
    factors dominate), random signs, thresholds ``c ~ N(0, threshold_scale^2)``."""
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    w = jax.nn.softmax(loading_spread * jax.random.normal(k1, (n, n_factors)), -1)
    sign = jnp.where(jax.random.bernoulli(k2, 0.5, (n, n_factors)), 1.0, -1.0)
    a = sign * jnp.sqrt(explained * w)
    c = threshold_scale * jax.random.normal(k3, (n,))
    f = jax.random.normal(k4, (n, n_factors))
    e = jax.random.normal(k5, (n,))
    z = jnp.sum(a * f, -1) + jnp.sqrt(1 - explained) * e
    return Targets(a, c, f, e, z, (z > c).astype(f.dtype))


class Markets(NamedTuple):
    """Simulated price paths, one market per question (leading axes: the questions').

    Attributes:
        prices: ``(..., T + 1)`` prices ``p_0 .. p_T``.
        t_resolve: ``(...)`` step ``t_S`` at which the answer is announced.
        answer: ``(...)`` the answer ``S`` (0/1 float).
        bridge: ``(..., T)`` the background path ``B(tau_j)``, ``j = 0 .. T - 1``.
        if_yes, if_no: ``(..., T + 1)`` the price at each step had the answer been
            announced by then as yes / no (at step 0: ``p1`` and ``p0``).
        q: ``(...)`` ``P(S)``.
    """

    prices: jax.Array
    t_resolve: jax.Array
    answer: jax.Array
    bridge: jax.Array
    if_yes: jax.Array
    if_no: jax.Array
    q: jax.Array


def simulate_markets(key, c, d, rho, z_y, z_s, n_steps: int) -> Markets:
    """Price paths of the target ``Y = 1[z_y > c]`` in the market where the question
    ``S = 1[z_s > d]`` (``corr = rho``) is announced at a uniform step in ``[1, T - 1]``.

    Args:
        key: PRNG key.
        c, d, rho, z_y, z_s: per-question arrays (one shape): the target threshold, the
            question threshold, the latent correlation and the realised latents.
        n_steps: ``T`` (static, >= 2).

    Returns:
        :class:`Markets`.
    """
    T = int(n_steps)
    shape = jnp.shape(c)
    kb, kt = jax.random.split(key)
    s = jnp.sqrt(jnp.maximum(1 - rho**2, 0))
    e = (z_y - rho * z_s) / jnp.maximum(s, 1e-12)
    tau = jnp.arange(T, dtype=jnp.result_type(float)) / T
    inc = jax.random.normal(kb, (*shape, T)) * jnp.sqrt(1.0 / T)
    w = jnp.concatenate([jnp.zeros((*shape, 1)), jnp.cumsum(inc, -1)], -1)  # W(j/T), j<=T
    bridge = w[..., :T] - tau * w[..., T:] + tau * e[..., None]
    t_s = jax.random.randint(kt, shape, 1, T)
    answer = (z_s > d).astype(bridge.dtype)
    t = jnp.arange(T + 1)
    j = jnp.where(t < t_s[..., None], t, t - 1)  # no background news in the announcement step
    j = jnp.where(t == 0, 0, j)
    b = jnp.take_along_axis(bridge, jnp.minimum(j, T - 1), -1)
    tj = jnp.asarray(j, tau.dtype) / T
    v = rho[..., None] ** 2 + s[..., None] ** 2 * (1 - tj)
    sqv = jnp.sqrt(v)
    u = (c[..., None] - s[..., None] * b) / sqv
    before = ndtr(-u)
    q = ndtr(-d)
    joint = bvn_cdf(-u, -d[..., None], rho[..., None] / sqv)
    yes = jnp.clip(joint / jnp.maximum(q[..., None], 1e-30), 0, 1)
    no = jnp.clip((before - joint) / jnp.maximum(1 - q[..., None], 1e-30), 0, 1)
    after = jnp.where(answer[..., None] > 0, yes, no)
    prices = jnp.where(t < t_s[..., None], before, after)
    return Markets(prices, t_s, answer, bridge, yes, no, q)


def known_voi_at_resolution(markets: Markets) -> VOI:
    """The VOI of each question given the market's state just before its announcement
    (the background path at step ``t_S - 1``): the expected size of the jump at
    ``t_S``, from the prices the market would show after a yes or a no."""
    at = markets.t_resolve[..., None]
    p1 = jnp.take_along_axis(markets.if_yes, at, -1)[..., 0]
    p0 = jnp.take_along_axis(markets.if_no, at, -1)[..., 0]
    return voi(markets.q, p1, p0, check=False)
