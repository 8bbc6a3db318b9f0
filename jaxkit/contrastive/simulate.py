"""Questions of a domain: parameters, the true explanation, the likelihood tables of the
candidate experiments and the outcome each candidate yields when run.

:func:`questions` returns, for ``n`` questions of one domain, a :class:`Questions` of
arrays: the tables ``log p(y | H_k, x)`` of the X = 24 candidates (from the domain's
numpyro models through :func:`jaxkit.kernels.belief.evidence.log_lik_table`: exact for
the models without latents, prior Monte Carlo with ``n_samples`` draws otherwise), the
costs, the true explanation (uniform over the K) and the outcomes, drawn by running the
true numpyro model itself (not the estimated table) on each candidate.

With ``n_nuisance > 0`` each question also carries ``log_lik_nuisance``: the tables an
agent computes when the nuisance parameters are *not* known but drawn from the domain's
prior, ``log (1/M) sum_m p(y | H_k, x, theta_m)`` over ``M = n_nuisance`` prior draws
``theta_m`` (per experiment, so the product over experiments also ignores that the
replicates share the question's parameters: a misspecified agent, on purpose).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from numpyro import handlers

from jaxkit.kernels.belief.evidence import log_lik_table

from .domains import N_OUTCOMES, REPLICATES, Domain

__all__ = ["Questions", "questions", "candidates"]


class Questions(NamedTuple):
    """``n`` questions of one domain (leading axis n): ``log_lik`` (n, X, K, Y), ``costs``
    (n, X), ``truth`` (n,) int32, ``outcomes`` (n, X) int32, ``params`` (n, P)."""

    log_lik: jax.Array
    costs: jax.Array
    truth: jax.Array
    outcomes: jax.Array
    params: jax.Array
    log_lik_nuisance: jax.Array | None = None


def candidates(domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """The X = 12 x REPLICATES candidate designs and their costs (each design twice)."""
    return (np.tile(domain.designs, (REPLICATES, 1)),
            np.tile(np.asarray(domain.costs, np.float32), REPLICATES))


def _sample_outcome(key, model, x):
    tr = handlers.trace(handlers.seed(model, key)).get_trace(x)
    return tr["y"]["value"].astype(jnp.int32)


@functools.lru_cache(maxsize=32)
def _compiled(name: str, n: int, n_samples: int, n_nuisance: int = 0):
    from .domains import get

    domain = get(name)
    designs, costs = candidates(domain)
    K = len(domain.models)

    def one(key):
        kp, kt, kl, ko = jax.random.split(key, 4)
        kn = jax.random.fold_in(key, 7)  # the well-specified draws do not depend on it
        params = domain.draw_params(kp)
        xs = jnp.concatenate([jnp.asarray(designs),
                              jnp.broadcast_to(params, (designs.shape[0], params.shape[0]))], 1)
        truth = jax.random.randint(kt, (), 0, K, jnp.int32)
        table = log_lik_table(kl, domain.models, xs, jnp.arange(N_OUTCOMES),
                              n_samples=n_samples)
        okeys = jax.random.split(ko, designs.shape[0])
        outs = jnp.stack([jax.vmap(lambda k, x, m=m: _sample_outcome(k, m, x))(okeys, xs)
                          for m in domain.models])  # (K, X)
        nuis = None
        if n_nuisance:
            def drawn(k):
                kd, kt2 = jax.random.split(k)
                th = domain.draw_params(kd)
                xn = jnp.concatenate([jnp.asarray(designs), jnp.broadcast_to(
                    th, (designs.shape[0], th.shape[0]))], 1)
                return log_lik_table(kt2, domain.models, xn, jnp.arange(N_OUTCOMES),
                                     n_samples=n_samples)
            tabs = jax.lax.map(drawn, jax.random.split(kn, n_nuisance))
            nuis = logsumexp(tabs, axis=0) - jnp.log(n_nuisance)
        return Questions(table, jnp.asarray(costs), truth, outs[truth], params, nuis)

    return jax.jit(lambda key: jax.vmap(one)(jax.random.split(key, n)))


def questions(key, domain: Domain, n: int, *, n_samples: int = 128, chunk: int = 64,
              n_nuisance: int = 0) -> Questions:
    """``n`` questions of ``domain`` (see the module docstring), computed ``chunk`` at a
    time (one compilation; memory bounded by ``chunk x X x K x n_samples x Y``); question
    ``i`` of chunk ``c`` comes from ``fold_in(key, c)``.

    Args:
        key: PRNG key.
        domain: a :class:`jaxkit.contrastive.domains.Domain` (one of ``DOMAINS``).
        n: number of questions (>= 1).
        n_samples: prior draws per (model, design) of the models with latents.
        chunk: questions per compiled call (the last one is padded and truncated).
        n_nuisance: prior draws of the nuisance parameters for ``log_lik_nuisance``
            (0: none; the other arrays do not depend on it).

    Returns:
        A :class:`Questions` of NumPy arrays.
    """
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    if chunk < 1:
        raise ValueError(f"`chunk` must be >= 1; got {chunk}")
    if n_nuisance < 0:
        raise ValueError(f"`n_nuisance` must be >= 0; got {n_nuisance}")
    size = min(int(n), int(chunk))
    fn = _compiled(domain.name, size, int(n_samples), int(n_nuisance))
    parts = [jax.tree.map(np.asarray, fn(jax.random.fold_in(key, c)))
             for c in range(-(-n // size))]
    return jax.tree.map(lambda *a: np.concatenate(a)[:n], *parts)
