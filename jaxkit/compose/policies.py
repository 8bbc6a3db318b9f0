"""The search policies of :mod:`jaxkit.compose.search` and the language-model agent of
:mod:`jaxkit.compose.agent`, built by name (:func:`make_policy`); kept apart from both so
that the agent, a :class:`~jaxkit.compose.search.RandomSearch`, and the policies it is
compared with import in one direction."""

from __future__ import annotations

from jaxkit.kernels import bandit

from .agent import AgentSearch
from .arch import LETTERS, mutation_ops
from .search import BanditEvolution, Evolution, RandomSearch

__all__ = ["POLICIES", "make_policy"]

POLICIES = ("random", "evolution", "bandit-qomax", "bandit-ducb", "composer", "agent")


def make_policy(name: str, depth: int, key, *, population: int = 8, sample: int = 3,
                alphabet: str = LETTERS, composer_alphabet: str = "AM"):
    """The policy ``name`` (one of :data:`POLICIES`) for strings of ``depth`` letters over
    ``alphabet`` (``composer_alphabet`` for "composer")."""
    k = len(mutation_ops(alphabet))
    kw = dict(population=population, sample=sample)
    if name == "random":
        return RandomSearch(depth, alphabet)
    if name == "evolution":
        return Evolution(depth, alphabet, **kw)
    if name == "composer":
        return Evolution(depth, composer_alphabet, **kw)
    if name == "bandit-qomax":
        return BanditEvolution(depth, bandit.qomax(k, n_batches=2, batch_size=2), key,
                               alphabet, **kw)
    if name == "bandit-ducb":
        return BanditEvolution(depth, bandit.discounted_ucb(k, gamma=0.9, alpha=0.5), key,
                               alphabet, **kw)
    if name == "agent":  # the language-model agent; without a model every proposal is a
        return AgentSearch(depth, alphabet)  # counted fallback
    raise ValueError(f"`policy` must be one of {POLICIES}; got {name!r}")
