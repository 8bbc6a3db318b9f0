"""Questions of a domain: parameters, the true explanation, the likelihood tables of the
candidate experiments and the outcome each candidate yields when run.

:func:`questions` returns, for ``n`` questions of one domain, a :class:`Questions` of
arrays: the tables ``log p(y | H_k, x)`` of the X = 24 candidates (from the domain's
numpyro models through :func:`jaxkit.kernels.belief.evidence.log_lik_table`: exact for
the models without latents, prior Monte Carlo with ``n_samples`` draws otherwise), the
costs, the true explanation (uniform over the K) and the outcomes, drawn by running the
true numpyro model itself (not the estimated table) on each candidate.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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


def candidates(domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """The X = 12 x REPLICATES candidate designs and their costs (each design twice)."""
    return (np.tile(domain.designs, (REPLICATES, 1)),
            np.tile(np.asarray(domain.costs, np.float32), REPLICATES))


def _sample_outcome(key, model, x):
    tr = handlers.trace(handlers.seed(model, key)).get_trace(x)
    return tr["y"]["value"].astype(jnp.int32)


@functools.lru_cache(maxsize=32)
def _compiled(name: str, n: int, n_samples: int):
    from .domains import get

    domain = get(name)
    designs, costs = candidates(domain)
    K = len(domain.models)

    def one(key):
        kp, kt, kl, ko = jax.random.split(key, 4)
        params = domain.draw_params(kp)
        xs = jnp.concatenate([jnp.asarray(designs),
                              jnp.broadcast_to(params, (designs.shape[0], params.shape[0]))], 1)
        truth = jax.random.randint(kt, (), 0, K, jnp.int32)
        table = log_lik_table(kl, domain.models, xs, jnp.arange(N_OUTCOMES),
                              n_samples=n_samples)
        okeys = jax.random.split(ko, designs.shape[0])
        outs = jnp.stack([jax.vmap(lambda k, x, m=m: _sample_outcome(k, m, x))(okeys, xs)
                          for m in domain.models])  # (K, X)
        return Questions(table, jnp.asarray(costs), truth, outs[truth], params)

    return jax.jit(lambda key: jax.vmap(one)(jax.random.split(key, n)))


def questions(key, domain: Domain, n: int, *, n_samples: int = 128, chunk: int = 64
              ) -> Questions:
    """``n`` questions of ``domain`` (see the module docstring), computed ``chunk`` at a
    time (one compilation; memory bounded by ``chunk x X x K x n_samples x Y``); question
    ``i`` of chunk ``c`` comes from ``fold_in(key, c)``.

    Args:
        key: PRNG key.
        domain: a :class:`jaxkit.contrastive.domains.Domain` (one of ``DOMAINS``).
        n: number of questions (>= 1).
        n_samples: prior draws per (model, design) of the models with latents.
        chunk: questions per compiled call (the last one is padded and truncated).

    Returns:
        A :class:`Questions` of NumPy arrays.
    """
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    if chunk < 1:
        raise ValueError(f"`chunk` must be >= 1; got {chunk}")
    size = min(int(n), int(chunk))
    fn = _compiled(domain.name, size, int(n_samples))
    parts = [jax.tree.map(np.asarray, fn(jax.random.fold_in(key, c)))
             for c in range(-(-n // size))]
    return jax.tree.map(lambda *a: np.concatenate(a)[:n], *parts)
