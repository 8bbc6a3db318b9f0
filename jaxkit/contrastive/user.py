"""Your own numpyro models as the MECE set: rank candidate experiments by expected
information gain per cost, and run the greedy contrastive loop against real outcomes.

Each explanation is a numpyro model ``model(x, y=None)`` whose observed site ``y`` is
one outcome out of the finite set ``outcomes`` (bin continuous measurements first), and
``x`` one row of ``designs``. The likelihood tables come from
:func:`jaxkit.kernels.belief.evidence.log_lik_table` (exact for models without latent
sites, prior Monte Carlo otherwise). Outcomes of different experiments must be
independent given the explanation (each experiment its own replicate), so beliefs
update by multiplying the per-experiment likelihoods.

Example::

    ranked = rank_experiments(key, [m_linear, m_sigmoid], designs, costs,
                              outcomes=np.arange(21))
    result = discover(key, [m_linear, m_sigmoid], designs, costs, budget=10.0,
                      observe=run_my_assay, outcomes=np.arange(21))
    result.winner, np.exp(result.log_post)

``observe(i)`` runs (or looks up) experiment ``i`` and returns the index of its outcome
in ``outcomes``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels.belief.eig import check_selection, eig_per_cost
from jaxkit.kernels.belief.evidence import log_lik_table
from jaxkit.kernels.belief.posterior import posterior

__all__ = ["Discovery", "likelihood_tables", "rank_experiments", "discover"]


class Discovery(NamedTuple):
    """Result of :func:`discover`: the experiments run (``choices``), their
    ``outcomes_seen``, the belief after each (``trajectory`` (T, K)), the final
    ``log_post``, the budget ``spent``, ``winner`` (argmax) and ``resolved``
    (``max posterior >= tau``)."""

    choices: list[int]
    outcomes_seen: list[int]
    trajectory: np.ndarray
    log_post: np.ndarray
    spent: float
    winner: int
    resolved: bool


def _prior(log_prior, K: int) -> np.ndarray:
    if log_prior is None:
        return np.full(K, -np.log(K))
    lp = np.asarray(log_prior, float)
    if lp.shape != (K,):
        raise ValueError(f"`log_prior` must have shape ({K},) (one entry per model); got "
                         f"{lp.shape}")
    return lp


def likelihood_tables(key, models: Sequence[Callable], designs, outcomes, *,
                      n_samples: int = 256) -> np.ndarray:
    """``(X, K, Y)`` tables ``log p(y | H_k, x)`` of the models on the designs."""
    if not isinstance(models, list | tuple) or not models or not all(map(callable, models)):
        raise ValueError("`models` must be a non-empty list of numpyro model functions")
    designs = jnp.asarray(designs)
    if designs.ndim < 1 or designs.shape[0] < 1:
        raise ValueError(f"`designs` must have a leading axis of candidates; got shape "
                         f"{designs.shape}")
    return np.asarray(_table_fn(tuple(models), int(n_samples))(key, designs,
                                                                jnp.asarray(outcomes)))


@functools.lru_cache(maxsize=16)
def _table_fn(models: tuple, n_samples: int):
    """One compiled table function per model set (reused across calls)."""
    return jax.jit(lambda k, d, o: log_lik_table(k, list(models), d, o, n_samples=n_samples))


def rank_experiments(key, models: Sequence[Callable], designs, costs, *, outcomes,
                     log_prior=None, n_samples: int = 256) -> dict:
    """EIG and EIG per cost of every candidate under the current belief.

    Args:
        key: PRNG key of the Monte Carlo draws.
        models: K numpyro models, the explanations.
        designs: ``(X, ...)`` candidate designs.
        costs: ``(X,)`` positive costs.
        outcomes: ``(Y, ...)`` the complete outcome set.
        log_prior: ``(K,)`` log belief (default uniform).
        n_samples: prior draws for models with latent sites.

    Returns:
        ``dict(order, eig, eig_per_cost, log_lik)``: candidates best first.
    """
    table = likelihood_tables(key, models, designs, outcomes, n_samples=n_samples)
    lp = _prior(log_prior, table.shape[1])
    costs = np.asarray(costs, float)
    lp_j, ll, c, _, _ = check_selection(lp, table, costs, float(np.min(costs)),
                                        np.zeros(table.shape[0], np.int32))
    # EIG at unit cost from the kernel, divided by the cost in float64 here: a cost beyond
    # float32's range would overflow on the device and read as EIG 0
    gain = np.asarray(eig_per_cost(lp_j, ll, jnp.ones_like(c), np.inf,
                                   jnp.zeros(table.shape[0], bool)), np.float64)
    score = gain / costs
    return dict(order=np.argsort(-score, kind="stable"), eig=gain,
                eig_per_cost=score, log_lik=table)


def discover(key, models: Sequence[Callable], designs, costs, budget: float,
             observe: Callable[[int], int], *, outcomes, log_prior=None, tau: float = 0.9,
             n_samples: int = 256, stop_when_resolved: bool = True) -> Discovery:
    """The greedy contrastive loop with real outcomes: choose the affordable unused
    candidate with the largest EIG per cost, call ``observe(i)``, update, repeat until
    the budget buys nothing more (or, with ``stop_when_resolved``, the belief reaches
    ``tau``).

    Args:
        key, models, designs, costs, outcomes, log_prior, n_samples: as
            :func:`rank_experiments`.
        budget: total budget, at least the cheapest cost.
        observe: ``observe(i) -> outcome index`` in ``[0, Y)``.
        tau: resolution threshold.
        stop_when_resolved: stop spending once resolved.

    Returns:
        A :class:`Discovery`.
    """
    costs = np.asarray(costs, float)
    if np.isfinite(budget) and costs.size and budget < np.min(costs):
        raise ValueError(f"`budget` is below every cost ({budget} < {np.min(costs):g}): no "
                         f"experiment is affordable")
    table = likelihood_tables(key, models, designs, outcomes, n_samples=n_samples)
    X, K, Y = table.shape
    lp = _prior(log_prior, K)
    costs = np.asarray(costs, float)
    lp_j, ll, c, b, _ = check_selection(lp, table, costs, budget, np.zeros(X, np.int32))
    score_fn = jax.jit(eig_per_cost)
    cur, used, spent = np.asarray(lp_j), np.zeros(X, bool), 0.0
    choices, seen, traj = [], [], []
    while True:
        if stop_when_resolved and np.exp(cur.max()) >= tau:
            break
        score = np.asarray(score_fn(jnp.asarray(cur), ll, c, float(budget) - spent,
                                    jnp.asarray(used)))
        i = int(np.argmax(score))
        if not np.isfinite(score[i]):
            break
        y = observe(i)
        if not (isinstance(y, int | np.integer) and 0 <= int(y) < Y):
            raise ValueError(f"`observe({i})` must return an outcome index in [0, {Y}); "
                             f"got {y!r}")
        res = posterior(cur, table[i, :, int(y)])
        if not bool(res.finite):
            raise ValueError(f"outcome {int(y)} of experiment {i} has probability 0 under "
                             f"every model: the explanations are not exhaustive")
        cur = np.asarray(res.log_post)
        used[i] = True
        spent += float(costs[i])
        choices.append(i)
        seen.append(int(y))
        traj.append(cur)
    traj_a = np.asarray(traj).reshape(len(traj), K)
    return Discovery(choices, seen, traj_a, cur, spent, int(np.argmax(cur)),
                     bool(np.exp(cur.max()) >= tau))
