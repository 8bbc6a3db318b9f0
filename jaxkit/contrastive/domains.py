"""Six synthetic scientific domains with known ground truth for contrastive discovery.

Each :class:`Domain` asks one kind of question, answered by K = 4 mutually exclusive
explanations written as numpyro models ``model(x, y=None)``, and offers 12 candidate
experiments (designs) with costs, each available twice (two independent replicates: X =
24 candidates). Every experiment has Y = 21 outcomes (a count out of 20, or a
measurement binned into 21 bins), so all domains share the shapes (X, K, Y) = (24, 4,
21) and one compiled selection loop serves them all.

A *question* draws the domain's parameters (``draw_params``) and a true explanation
uniformly; the design vector a model sees is ``concat(design, params)``. Each experiment
observes an independent replicate (a new batch, town, sample or calibration), so the
outcomes of different experiments are independent given the explanation: the posterior
after several experiments is the product of the per-experiment likelihood tables.

Domains (explanations in order):

* ``dose_response``: responders of 20 subjects at a dose (beta-binomial, concentration
  20, exact): no effect, linear, sigmoid Emax (Hill 3), hormetic (bell-shaped).
* ``gene_knockout``: cells of 20 losing a phenotype after knocking out a set of genes A,
  B, C, at full or partial efficiency (binomial, exact): linear chain (any gene
  essential), A and B redundant with C essential, only C matters, A essential with B and
  C redundant.
* ``kinetics``: fraction of substrate left after time t from initial concentration c0,
  measured with noise 0.04 and binned (latent log-normal batch rate: prior Monte Carlo):
  zero-order, first-order, second-order, Michaelis-Menten; all calibrated to half-life
  ``h`` at c0 = 1.
* ``population_genetics``: allele count in 20 sampled chromosomes at generation t
  (beta-binomial with drift variance F = 1 - exp(-t / 2Ne), exact): neutral drift,
  positive selection, balancing selection, migration.
* ``epidemic``: positives among 20 tested on day t (binomial on the SIR-type prevalence;
  latent per-town R0, log-normal: prior Monte Carlo): SIR, SIS, SEIR, SIR with an
  intervention on day T.
* ``physics_law``: log force at distance r relative to r = 1, with a calibration offset
  and noise (marginal normal, exact), binned: 1/r, 1/r^2, 1/r^3, Yukawa
  e^{-(r-1)/lambda}/r^2.

Binned and binomial outcome distributions mix in 1e-4 of the uniform distribution (an
outlier rate), so no outcome has probability 0 under any explanation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.stats import norm

__all__ = ["Domain", "DOMAINS", "N_OUTCOMES", "N_TRIALS", "REPLICATES", "get", "binned"]

N_TRIALS = 20
N_OUTCOMES = 21
REPLICATES = 2
OUTLIER = 1e-4


@dataclass(frozen=True)
class Domain:
    """One synthetic domain: ``models`` (K numpyro models ``model(x, y=None)``, x =
    ``concat(design, params)``), their ``explanations`` names, the 12 ``designs``, their
    ``costs``, and ``draw_params(key) -> (P,)`` the question's parameters."""

    name: str
    question: str
    explanations: tuple[str, ...]
    models: tuple[Callable, ...]
    designs: np.ndarray
    costs: np.ndarray
    draw_params: Callable
    exact: bool


def _mix(p):
    return (1 - OUTLIER) * p + OUTLIER / N_OUTCOMES


def binned(mean, sd, lo: float, hi: float):
    """Probabilities of a normal measurement ``N(mean, sd^2)`` in 21 bins: 19 equal bins
    over ``[lo, hi]`` with the two tails as the end bins, mixed with the outlier rate."""
    edges = jnp.linspace(lo, hi, N_OUTCOMES - 1)
    cdf = norm.cdf((edges - mean) / sd)
    cdf = jnp.concatenate([jnp.zeros(1), cdf, jnp.ones(1)])
    return _mix(jnp.clip(jnp.diff(cdf), 0.0, 1.0))


_Y = np.arange(N_OUTCOMES)
_LOG_CHOOSE = np.array([math.lgamma(N_TRIALS + 1) - math.lgamma(y + 1)
                        - math.lgamma(N_TRIALS - y + 1) for y in _Y], np.float32)


def _binomial_probs(p):
    """Binomial(20, p) pmf over 0..20 (binomial coefficients precomputed), with the
    outlier mix."""
    p = jnp.clip(p, 1e-6, 1 - 1e-6)
    return _mix(jnp.exp(_LOG_CHOOSE + _Y * jnp.log(p) + (N_TRIALS - _Y) * jnp.log1p(-p)))


def _beta_binomial_probs(mean, conc):
    """Beta-binomial(20, a = mean conc, b = (1 - mean) conc) pmf over 0..20, exactly, by
    the ratio recursion P(y+1)/P(y) = (n-y)(y+a) / ((y+1)(n-y-1+b)) normalised (no
    log-gamma calls, which are slow to compile), with the outlier mix."""
    mean = jnp.clip(mean, 1e-4, 1 - 1e-4)
    a, b = mean * conc, (1 - mean) * conc
    j = _Y[:-1].astype(np.float32)
    steps = (jnp.log(N_TRIALS - j) + jnp.log(j + a) - jnp.log(j + 1)
             - jnp.log(N_TRIALS - j - 1 + b))
    logp = jnp.concatenate([jnp.zeros(1), jnp.cumsum(steps)])
    return _mix(jax.nn.softmax(logp))


def _obs(probs, y):
    numpyro.sample("y", dist.Categorical(probs=probs / jnp.sum(probs)), obs=y)


def _uniform(key, lo, hi):
    lo, hi = jnp.asarray(lo, jnp.float32), jnp.asarray(hi, jnp.float32)
    return jax.random.uniform(key, lo.shape, jnp.float32, lo, hi)


# ------------------------------------------------------------------ dose-response

def _dose_model(shape: str):
    def model(x, y=None):
        d, p0, pmax, ed50 = x[0], x[1], x[2], x[3]
        if shape == "none":
            m = p0
        elif shape == "linear":
            m = p0 + (pmax - p0) * d
        elif shape == "emax":
            m = p0 + (pmax - p0) * d ** 3 / (d ** 3 + ed50 ** 3)
        else:  # hormetic
            m = p0 + (pmax - p0) * 4 * d * (1 - d)
        _obs(_beta_binomial_probs(m, 20.0), y)
    return model


def _dose_params(key):
    return _uniform(key, [0.05, 0.6, 0.3], [0.2, 0.9, 0.6])


# ------------------------------------------------------------------ gene knock-outs

_STATES = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)], np.float32)
_LOST = {  # phenotype lost in each of the 8 knocked-out states (A, B, C)
    "chain": lambda a, b, c: a | b | c,
    "AB-redundant, C essential": lambda a, b, c: (a & b) | c,
    "only C": lambda a, b, c: c,
    "A essential, BC-redundant": lambda a, b, c: a | (b & c),
}


def _gene_model(name: str):
    lost = np.array([_LOST[name](*s.astype(int)) for s in _STATES], np.float32)

    def model(x, y=None):
        in_set, partial, leak, eff_p = x[:3], x[3], x[4], x[5]
        eff = jnp.where(partial > 0.5, eff_p, 0.98) * in_set  # P(gene knocked)
        pr = jnp.prod(jnp.where(_STATES == 1, eff, 1 - eff), axis=1)  # (8,)
        p_lost = jnp.sum(pr * lost)
        _obs(_binomial_probs(leak + (1 - 2 * leak) * p_lost), y)
    return model


_GENE_DESIGNS = np.array(
    [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0],
     [1, 1, 1, 0], [1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 1]],
    np.float32)


def _gene_params(key):
    return _uniform(key, [0.02, 0.5], [0.15, 0.8])


# ------------------------------------------------------------------ kinetics

def _mm_fraction(c0, vt, km):
    """Michaelis-Menten fraction left f: c0 (1 - f) - Km log f = V t (bisection on
    log f)."""
    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        g = c0 * (1 - jnp.exp(mid)) - km * mid - vt
        return jnp.where(g > 0, mid, lo), jnp.where(g > 0, hi, mid)
    lo, hi = jax.lax.fori_loop(0, 40, body, (jnp.asarray(-40.0), jnp.asarray(0.0)))
    return jnp.exp(0.5 * (lo + hi))


def _kin_model(order: str):
    def model(x, y=None):
        c0, t, h, km = x[0], x[1], x[2], x[3]
        rate = numpyro.sample("batch_rate", dist.LogNormal(0.0, 0.25))
        tt = t / h * rate  # time in half-lives at c0 = 1, times the batch's activity
        if order == "zero":
            f = jnp.maximum(1 - 0.5 * tt / c0, 0.0)
        elif order == "first":
            f = jnp.exp(-jnp.log(2.0) * tt)
        elif order == "second":
            f = 1 / (1 + c0 * tt)
        else:
            f = _mm_fraction(c0, (0.5 + km * jnp.log(2.0)) * tt, km)
        _obs(binned(f, 0.04, 0.025, 0.975), y)
    return model


def _kin_params(key):
    return _uniform(key, [0.7, 0.3], [1.5, 3.0])


# ------------------------------------------------------------------ population genetics

def _pop_model(kind: str):
    def model(x, y=None):
        t, p0, ne, s, c, pm, mig = x[0], x[1], x[2], x[3], x[4], x[5], x[6]
        if kind == "neutral":
            m = p0
        elif kind == "positive":
            m = p0 * jnp.exp(s * t) / (1 - p0 + p0 * jnp.exp(s * t))
        elif kind == "balancing":
            m = 0.5 + (p0 - 0.5) * jnp.exp(-c * t)
        else:
            m = pm + (p0 - pm) * jnp.exp(-mig * t)
        F = 1 - jnp.exp(-t / (2 * ne))
        _obs(_beta_binomial_probs(m, jnp.maximum((1 - F) / F, 0.5)), y)
    return model


def _pop_params(key):
    return _uniform(key, [0.15, 200, 0.03, 0.02, 0.55, 0.02], [0.35, 1000, 0.08, 0.06, 0.8, 0.05])


# ------------------------------------------------------------------ epidemic

_DT, _DAYS = 0.5, 48


def _epi_model(kind: str):
    n_steps = int(_DAYS / _DT)

    def model(x, y=None):
        day, r_q, t_int = x[0], x[1], x[2]
        r0 = numpyro.sample("town_R0", dist.LogNormal(jnp.log(r_q), 0.1))
        gamma, sigma = 0.25, 0.25

        def step(state, i):
            s, e, inf = state
            t = i * _DT
            beta = r0 * gamma * jnp.where((kind == "intervention") & (t >= t_int), 0.4, 1.0)
            new_inf = beta * s * inf * _DT
            rec = gamma * inf * _DT
            if kind == "SEIR":
                act = sigma * e * _DT
                s, e, inf = s - new_inf, e + new_inf - act, inf + act - rec
            elif kind == "SIS":
                s, inf = s - new_inf + rec, inf + new_inf - rec
            else:
                s, inf = s - new_inf, inf + new_inf - rec
            return (s, e, inf), inf

        i0 = 2e-3
        _, traj = jax.lax.scan(step, (1 - i0, jnp.zeros(()), jnp.asarray(i0)),
                               jnp.arange(n_steps, dtype=jnp.float32))
        prev = traj[jnp.clip(jnp.round(day / _DT).astype(jnp.int32) - 1, 0, n_steps - 1)]
        _obs(_binomial_probs(prev), y)
    return model


def _epi_params(key):
    return _uniform(key, [1.5, 10.0], [2.5, 20.0])


# ------------------------------------------------------------------ physics law

def _law_model(law: str):
    def model(x, y=None):
        r, lam, noise = x[0], x[1], x[2]
        if law == "1/r":
            lf = -jnp.log(r)
        elif law == "1/r^2":
            lf = -2 * jnp.log(r)
        elif law == "1/r^3":
            lf = -3 * jnp.log(r)
        else:
            lf = -2 * jnp.log(r) - (r - 1) / lam
        # calibration offset N(0, 0.1^2) per experiment integrated exactly (normal-normal)
        _obs(binned(lf, jnp.sqrt(0.1 ** 2 + noise ** 2), -4.0, 2.0), y)
    return model


def _law_params(key):
    return _uniform(key, [0.8, 0.1], [2.0, 0.25])


# ------------------------------------------------------------------ the six domains

def _grid(*cols):
    return np.stack(np.meshgrid(*cols, indexing="ij"), -1).reshape(-1, len(cols)).astype(
        np.float32)


_DOSES = np.array([0, .05, .1, .2, .3, .4, .5, .6, .7, .8, .9, 1.0], np.float32)[:, None]
_KIN = _grid([0.25, 1.0, 4.0], [0.5, 1.0, 2.0, 4.0])
_GENS = np.arange(5, 65, 5, dtype=np.float32)[:, None]
_EPI_DAYS = np.arange(4, 52, 4, dtype=np.float32)[:, None]
_RADII = np.array([0.5, 0.6, 0.75, 0.9, 1.1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4], np.float32)[:, None]

_DOSE_NAMES = ("no effect", "linear", "sigmoid Emax", "hormetic")
_GENE_NAMES = tuple(_LOST)
_KIN_NAMES = ("zero-order", "first-order", "second-order", "Michaelis-Menten")
_POP_NAMES = ("neutral drift", "positive selection", "balancing selection", "migration")
_EPI_NAMES = ("SIR", "SIS", "SEIR", "intervention")
_LAW_NAMES = ("1/r", "1/r^2", "1/r^3", "Yukawa")

DOMAINS: dict[str, Domain] = {d.name: d for d in (
    Domain("dose_response", "How does the response depend on the dose?", _DOSE_NAMES,
           tuple(_dose_model(s) for s in ("none", "linear", "emax", "hormetic")),
           _DOSES, 1.0 + 1.5 * _DOSES[:, 0], _dose_params, True),
    Domain("gene_knockout", "How do genes A, B, C produce the phenotype?", _GENE_NAMES,
           tuple(_gene_model(n) for n in _GENE_NAMES), _GENE_DESIGNS,
           _GENE_DESIGNS[:, :3].sum(1) * np.where(_GENE_DESIGNS[:, 3] > 0, 0.7, 1.0),
           _gene_params, True),
    Domain("kinetics", "Which mechanism governs the reaction?", _KIN_NAMES,
           tuple(_kin_model(o) for o in ("zero", "first", "second", "mm")), _KIN,
           0.5 + 0.5 * _KIN[:, 1], _kin_params, False),
    Domain("population_genetics", "What drives the allele frequency?", _POP_NAMES,
           tuple(_pop_model(k) for k in ("neutral", "positive", "balancing", "migration")),
           _GENS, 1.0 + _GENS[:, 0] / 30, _pop_params, True),
    Domain("epidemic", "Which transmission model explains the outbreak?", _EPI_NAMES,
           tuple(_epi_model(k) for k in _EPI_NAMES), _EPI_DAYS, 1.0 + _EPI_DAYS[:, 0] / 24,
           _epi_params, False),
    Domain("physics_law", "How does the force fall off with distance?", _LAW_NAMES,
           tuple(_law_model(w) for w in _LAW_NAMES), _RADII,
           1.0 + np.abs(np.log(_RADII[:, 0])), _law_params, True),
)}


def get(name: str) -> Domain:
    """The domain ``name``; ``ValueError`` listing the names otherwise."""
    if name not in DOMAINS:
        raise ValueError(f"`domain` must be one of {', '.join(DOMAINS)}; got {name!r}")
    return DOMAINS[name]
