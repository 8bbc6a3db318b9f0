"""Numpyro models as explanations: the log evidence (marginal likelihood) of data under
each model, so that a user's own numpyro models can be the MECE set.

For a model with latent sites ``theta`` and observed sites ``D``,
:math:`p(D | H) = \\int p(D | \\theta, H)\\, p(\\theta | H)\\, d\\theta`.

* **Exact** when the model has no latent sample site (every sample site is observed:
  a point hypothesis, or a model whose conjugate latent is integrated analytically, e.g.
  ``dist.BetaBinomial``, ``dist.GammaPoisson``): ``log p(D | H)`` is the summed log
  density of the observed sites. :func:`beta_binomial_log_evidence`,
  :func:`gamma_poisson_log_evidence` and :func:`normal_log_evidence` give the closed
  forms of the three standard conjugate models with a shared latent.
* **Otherwise, the stated estimator**: simple Monte Carlo over the prior,

  .. math:: \\log \\hat Z = \\operatorname{logsumexp}_s \\log p(D | \\theta_s) - \\log S,
            \\qquad \\theta_s \\sim p(\\theta | H),

  unbiased for ``Z`` (not for ``log Z``: biased low by about ``Var(w) / (2 S Z^2)``),
  consistent as ``S -> inf``, and reliable only when the posterior is not much narrower
  than the prior; the effective sample size ``ESS = (sum w)^2 / sum w^2`` and the
  delta-method standard error of ``log Z`` (``sd(w) / (sqrt(S) mean(w))``) are returned
  so a caller can see when it is not (Newton & Raftery 1994 discuss the alternatives).

The prior draws are the same bits as with the caller's key (Threefry-2x32, JAX's
default): the key is re-wrapped by ``kernels._threefry.unrolled_key``, the same hash
with its 20 rounds unrolled into vector code. JAX lowers Threefry on the CPU as a rolled loop, which
took 65-70% of a 256 x 1024-draw table (the seed handler splits a key per site and
draw); the unrolled hash fuses with the samplers.

Observed sites are those given to the model as data (``obs=``); ``numpyro.factor``
terms count as observed; ``scale`` handlers are honoured. Models are called as
``model(*args, **kwargs)``; :func:`log_lik_table` calls ``model(x, y=y)`` for design
``x`` and outcome ``y`` with the same prior draws for every outcome (common random
numbers), so each estimated row sums to one over a complete outcome set exactly as the
model's own outcome distribution does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, gammaln, logsumexp

from .._threefry import unrolled_key
from ..checks import check_finite, check_in_range, fail

__all__ = ["Evidence", "latent_sites", "observed_log_lik", "log_evidence", "log_lik_table",
           "beta_binomial_log_evidence", "gamma_poisson_log_evidence", "normal_log_evidence"]

Array = jax.Array


class Evidence(NamedTuple):
    """Log evidence of data under a model.

    Attributes:
        log_evidence: ``log p(D | H)`` (exact or estimated).
        stderr: delta-method standard error of the estimate (0 when exact).
        ess: effective sample size of the prior draws (``n_samples`` when exact).
        exact: bool array: the model had no latent site (the value is exact).
    """

    log_evidence: Array
    stderr: Array
    ess: Array
    exact: Array


def _trace(model: Callable, key, args, kwargs):
    from numpyro import handlers

    return handlers.trace(handlers.seed(model, key)).get_trace(*args, **kwargs)


def latent_sites(model: Callable, *args, **kwargs) -> list[str]:
    """Names of the latent (unobserved) sample sites of ``model(*args, **kwargs)`` (one
    trace with a fixed key; the site structure must not depend on random values).

    Differentiable: no: site names (Python strings).

    Args:
        model: a NumPyro model function.
        *args: positional arguments of ``model``.
        **kwargs: keyword arguments of ``model``.

    Returns:
        The site names in trace order, a Python ``list[str]``.
    """
    tr = _trace(model, jax.random.key(0), args, kwargs)
    return [n for n, s in tr.items() if s["type"] == "sample" and not s["is_observed"]]


def observed_log_lik(key, model: Callable, *args, **kwargs) -> Array:
    """``log p(D | theta)`` with ``theta`` one draw from the prior (key ``key``): the summed
    log density of the observed sites of one seeded trace.

    Differentiable: yes, in the model's array arguments (data, parameters; the prior draw fixed by
    key).

    Args:
        key: PRNG key of the prior draw.
        model: a NumPyro model function whose observed sites hold the data ``D``.
        *args: positional arguments of ``model``.
        **kwargs: keyword arguments of ``model``.

    Returns:
        A scalar float array, the summed (site-``scale``-weighted) log density.
    """
    tr = _trace(model, unrolled_key(key), args, kwargs)
    total = jnp.zeros(())
    for s in tr.values():
        if s["type"] == "sample" and s["is_observed"]:
            lp = s["fn"].log_prob(s["value"])
            if s.get("scale") is not None:
                lp = lp * s["scale"]
            total = total + jnp.sum(lp)
    return total


def _estimate(ll: Array) -> tuple[Array, Array, Array]:
    """Prior Monte Carlo ``(log Z, stderr, ESS)`` from per-draw log likelihoods."""
    n = ll.shape[0]
    log_z = logsumexp(ll) - math.log(n)
    m = jnp.max(ll)
    w = jnp.exp(ll - jnp.where(jnp.isfinite(m), m, 0.0))
    ess = jnp.sum(w) ** 2 / jnp.maximum(jnp.sum(w ** 2), jnp.finfo(w.dtype).tiny)
    sd = jnp.std(w, ddof=1) if n > 1 else jnp.zeros((), w.dtype)
    se = sd / (math.sqrt(n) * jnp.maximum(jnp.mean(w), jnp.finfo(w.dtype).tiny))
    return log_z, se, ess


def log_evidence(key, model: Callable, *args, n_samples: int = 1000, **kwargs) -> Evidence:
    """Log evidence of the observed sites of ``model(*args, **kwargs)``.

    Exact for a model without latent sites; otherwise the prior Monte Carlo estimator
    of the module docstring with ``n_samples`` draws.

    Differentiable: yes, in the model's array arguments (the prior draws fixed by key).

    Args:
        key: PRNG key of the prior draws.
        model: a numpyro model; data go in as ``obs=`` of its observed sites.
        *args: positional arguments of the model.
        n_samples: prior draws (static, >= 1).
        **kwargs: keyword arguments of the model (e.g. ``y=data``).

    Returns:
        An :class:`Evidence`.
    """
    check_in_range(n_samples, "n_samples", lo=1, integer=True)
    if not latent_sites(model, *args, **kwargs):
        ll = observed_log_lik(key, model, *args, **kwargs)
        return Evidence(ll, jnp.zeros_like(ll), jnp.asarray(float(n_samples), ll.dtype),
                        jnp.asarray(True))
    keys = jax.random.split(key, int(n_samples))
    ll = jax.vmap(lambda k: observed_log_lik(k, model, *args, **kwargs))(keys)
    return Evidence(*_estimate(ll), jnp.asarray(False))


def log_lik_table(key, models: Sequence[Callable], designs, outcomes, *, n_samples: int = 256,
                  obs_name: str = "y") -> Array:
    """The likelihood table ``log p(y | H_k, x)`` of K models, X designs and Y outcomes:
    the input of :func:`jaxkit.kernels.belief.eig.eig`.

    Each model is called as ``model(x, **{obs_name: y})`` with ``x`` one design (a row of
    ``designs``, any pytree leaf shape) and ``y`` one outcome. Exact for models without
    latent sites; otherwise the prior Monte Carlo estimate with ``n_samples`` draws,
    shared by all outcomes of a design (common random numbers) and fresh for each design
    and model.

    Differentiable: yes, in designs and outcomes (float ones, as the models are).

    Args:
        key: PRNG key.
        models: K numpyro models, the explanations.
        designs: ``(X, ...)`` designs (a pytree whose leaves have the leading axis X).
        outcomes: ``(Y, ...)`` the complete set of outcomes.
        n_samples: prior draws per (model, design) for models with latents.
        obs_name: keyword of the observed site.

    Returns:
        ``(X, K, Y)`` log likelihoods.
    """
    check_in_range(n_samples, "n_samples", lo=1, integer=True)
    if len(models) < 1:
        raise ValueError("`models` must hold at least one numpyro model")
    x0 = jax.tree.map(lambda a: a[0], designs)
    y0 = jax.tree.map(lambda a: a[0], outcomes)
    n_x = jax.tree.leaves(designs)[0].shape[0]
    cols = []
    for k, model in enumerate(models):
        has_latent = bool(latent_sites(model, x0, **{obs_name: y0}))
        kk = jax.random.fold_in(key, k)

        def one(key_x, x, model=model, has_latent=has_latent):
            def per_draw(kd):
                return jax.vmap(lambda y: observed_log_lik(kd, model, x, **{obs_name: y}))(
                    outcomes)
            if not has_latent:
                return per_draw(key_x)
            # draws on the minor axis, (Y, S): the logsumexp over the draws reads
            # contiguous rows and XLA fuses the log densities into it; with (S, Y) it
            # materialised the whole (X, S, Y) table first (22 MB at 256 x 1024 x 21)
            lls = jax.vmap(per_draw, out_axes=1)(jax.random.split(key_x, int(n_samples)))
            return logsumexp(lls, axis=1) - math.log(n_samples)

        cols.append(jax.vmap(one)(jax.random.split(kk, n_x), designs))  # (X, Y)
    return jnp.stack(cols, axis=1)


def _check_counts(k, n):
    k = jnp.asarray(k)
    n = jnp.asarray(n)
    return fail(k, (k < 0) | (k > n) | (k != jnp.round(k)),
                "`k` must be integer counts in [0, n]")


def beta_binomial_log_evidence(k, n, a, b) -> Array:
    """Exact log evidence of ``p ~ Beta(a, b)``, ``k_i ~ Binomial(n_i, p)`` (one shared
    ``p``; the observations along the last axis):

    .. math:: \\sum_i \\log\\binom{n_i}{k_i} + \\log B(a + \\textstyle\\sum k_i,\\,
              b + \\sum (n_i - k_i)) - \\log B(a, b)

    Differentiable: yes, in a and b (k and n are counts).

    Args:
        k: ``(..., n_obs)`` successes.
        n: ``(..., n_obs)`` trials.
        a: Beta shape a > 0.
        b: Beta shape b > 0.

    Returns:
        ``(...)`` log evidence.
    """
    k = _check_counts(k, n).astype(jnp.result_type(float))
    n = jnp.asarray(n, k.dtype)
    a = fail(jnp.asarray(a, k.dtype), ~(jnp.asarray(a) > 0), "`a` must be > 0")
    b = fail(jnp.asarray(b, k.dtype), ~(jnp.asarray(b) > 0), "`b` must be > 0")
    log_choose = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    ks, fs = jnp.sum(k, -1), jnp.sum(n - k, -1)
    return jnp.sum(log_choose, -1) + betaln(a + ks, b + fs) - betaln(a, b)


def gamma_poisson_log_evidence(counts, shape, rate, exposure=1.0) -> Array:
    """Exact log evidence of ``lambda ~ Gamma(shape, rate)``, ``c_i ~ Poisson(t_i
    lambda)`` (one shared rate; exposures ``t_i``; observations along the last axis):

    .. math:: \\alpha\\log\\beta - \\log\\Gamma(\\alpha) + \\log\\Gamma(\\alpha + C)
              - (\\alpha + C)\\log(\\beta + T) + \\sum_i (c_i \\log t_i - \\log c_i!)

    with ``C = sum c_i``, ``T = sum t_i``.

    Differentiable: yes, in shape, rate and exposure (counts are integers).

    Args:
        counts: ``(..., n_obs)`` non-negative integer counts.
        shape: Gamma shape > 0.
        rate: Gamma rate > 0.
        exposure: ``t_i > 0`` (broadcasts against ``counts``).

    Returns:
        ``(...)`` log evidence.
    """
    c = jnp.asarray(counts)
    c = fail(c, (c < 0) | (c != jnp.round(c)), "`counts` must be non-negative integers")
    c = c.astype(jnp.result_type(float))
    t = jnp.broadcast_to(jnp.asarray(exposure, c.dtype), c.shape)
    t = fail(t, ~(t > 0), "`exposure` must be > 0")
    al = fail(jnp.asarray(shape, c.dtype), ~(jnp.asarray(shape) > 0), "`shape` must be > 0")
    be = fail(jnp.asarray(rate, c.dtype), ~(jnp.asarray(rate) > 0), "`rate` must be > 0")
    C, T = jnp.sum(c, -1), jnp.sum(t, -1)
    return (al * jnp.log(be) - gammaln(al) + gammaln(al + C) - (al + C) * jnp.log(be + T)
            + jnp.sum(c * jnp.log(t) - gammaln(c + 1), -1))


def normal_log_evidence(y, mu0, tau0, sigma) -> Array:
    """Exact log evidence of ``mu ~ N(mu0, tau0^2)``, ``y_i ~ N(mu, sigma^2)`` (one shared
    mean; observations along the last axis): ``y ~ N(mu0 1, sigma^2 I + tau0^2 1 1^T)``,

    .. math:: -\\tfrac n2 \\log(2\\pi\\sigma^2) - \\tfrac12\\log(1 + n\\tau_0^2/\\sigma^2)
              - \\frac{1}{2\\sigma^2}\\Big[\\sum_i r_i^2 - \\frac{\\tau_0^2 (\\sum_i r_i)^2}
              {\\sigma^2 + n \\tau_0^2}\\Big], \\quad r_i = y_i - \\mu_0

    (Sherman-Morrison).

    Differentiable: yes, in y, mu0, tau0 and sigma.

    Args:
        y: ``(..., n_obs)`` observations.
        mu0: prior mean.
        tau0: prior standard deviation > 0.
        sigma: noise standard deviation > 0.

    Returns:
        ``(...)`` log evidence.
    """
    y = check_finite(jnp.asarray(y, jnp.result_type(float)), "y")
    tau0 = fail(jnp.asarray(tau0, y.dtype), ~(jnp.asarray(tau0) > 0), "`tau0` must be > 0")
    sigma = fail(jnp.asarray(sigma, y.dtype), ~(jnp.asarray(sigma) > 0), "`sigma` must be > 0")
    n = y.shape[-1]
    r = y - mu0
    s2, t2 = sigma ** 2, tau0 ** 2
    quad = (jnp.sum(r ** 2, -1) - t2 * jnp.sum(r, -1) ** 2 / (s2 + n * t2)) / s2
    return -0.5 * n * jnp.log(2 * jnp.pi * s2) - 0.5 * jnp.log1p(n * t2 / s2) - 0.5 * quad
