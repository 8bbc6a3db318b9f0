"""Search policies over layer strings: random, regularised evolution, a bandit over
mutation operators, and a Composer-like search restricted to {A, M} (or another
alphabet, e.g. {A, M, D} with the Mamba-2 block).

Every policy is an ask/tell object: ``ask(rng) -> string`` proposes the next candidate
(never one it has already evaluated, while unevaluated ones remain) and ``tell(string,
loss)`` reports its validation loss (lower is better). :func:`run_search` drives one
policy for ``budget`` evaluations against an ``evaluate(strings) -> losses`` oracle,
which may train the candidates (:mod:`jaxkit.compose.train`) or look them up in a table
of already trained ones; the curve it returns is the best loss after each evaluation.

* :class:`RandomSearch`: uniform strings over the alphabet.
* :class:`Evolution`: regularised ("aging") evolution (Real et al., AAAI 2019):
  population ``P``, tournament of ``S``, the winner's child by one random mutation
  replaces the oldest member.
* :class:`BanditEvolution`: the same loop, but the mutation operator
  (:func:`jaxkit.compose.arch.mutation_ops` of the alphabet) is chosen by a bandit of
  :mod:`jaxkit.kernels.bandit` -- an extreme-value policy (QoMax, Baudry et al. 2022:
  rewards rare large improvements) or discounted UCB (Garivier & Moulines 2011:
  forgets stale rewards) -- rewarded by the child's improvement on its parent in bits
  per byte, ``max(0, loss_parent - loss_child)`` (Ballad's "favour rare, high-scoring
  mutations"; the AIRA-dojo operators Draft/Improve are LLM calls, here they are
  string edits).
* ``agent``: a language model reading the history and proposing strings
  (:class:`jaxkit.compose.agent.AgentSearch`; driven by
  :func:`jaxkit.compose.experiments.stage1`, which batches its chat calls).

:func:`jaxkit.compose.policies.make_policy` builds any of them by name.
* Composer-like: :class:`Evolution` with the alphabet {A, M} (Composer's space; the
  paper searches it by Bayesian optimisation, here by the same evolution as above so
  the comparison isolates the search space).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import bandit

from .arch import LETTERS, mutate, mutation_ops, random_string
from .results import SearchRun

__all__ = ["RandomSearch", "Evolution", "BanditEvolution", "run_search"]


class RandomSearch:
    """Uniform random strings of ``depth`` letters over ``alphabet``."""

    def __init__(self, depth: int, alphabet: str = LETTERS):
        self.ops = mutation_ops(alphabet)  # validates the alphabet
        self.depth, self.alphabet = depth, alphabet
        self.seen: dict[str, float] = {}

    def _fresh(self, rng, propose: Callable[[], str], tries: int = 50) -> str:
        s = propose()
        for _ in range(tries):
            if s not in self.seen:
                return s
            s = propose()
        return s

    def ask(self, rng: np.random.Generator) -> str:
        return self._fresh(rng, lambda: random_string(rng, self.depth, self.alphabet))

    def tell(self, s: str, loss: float) -> None:
        self.seen[s] = float(loss)


class Evolution(RandomSearch):
    """Regularised evolution: random strings until the population holds ``population``
    members, then tournament selection of ``sample`` and one random mutation."""

    def __init__(self, depth: int, alphabet: str = LETTERS, *, population: int = 8,
                 sample: int = 3):
        super().__init__(depth, alphabet)
        self.population, self.sample = population, sample
        self.pop: list[tuple[str, float]] = []
        self.parent: str | None = None
        self.op: int | None = None

    def choose_op(self, rng) -> int:
        return int(rng.integers(len(self.ops)))

    def ask(self, rng: np.random.Generator) -> str:
        if len(self.pop) < self.population:
            self.parent, self.op = None, None
            return super().ask(rng)
        idx = rng.choice(len(self.pop), size=min(self.sample, len(self.pop)), replace=False)
        self.parent = min((self.pop[i] for i in idx), key=lambda m: m[1])[0]
        ops = self.ops

        def propose():
            self.op = self.choose_op(rng)
            return mutate(rng, self.parent, ops[self.op], self.alphabet)

        return self._fresh(rng, propose, tries=20)

    def tell(self, s: str, loss: float) -> None:
        super().tell(s, loss)
        self.pop.append((s, float(loss)))
        if len(self.pop) > self.population:
            self.pop.pop(0)


class BanditEvolution(Evolution):
    """Evolution whose mutation operator is chosen by ``policy`` (a
    :class:`jaxkit.kernels.bandit.Policy` over the operators), keyed by ``key``."""

    def __init__(self, depth: int, policy: bandit.Policy, key, alphabet: str = LETTERS,
                 **kw):
        super().__init__(depth, alphabet, **kw)
        if policy.n_arms != len(self.ops):
            raise ValueError(f"`policy` must have {len(self.ops)} arms (the mutation "
                             f"operators {self.ops}); got {policy.n_arms}")
        self.policy, self.key = policy, key
        self.state = policy.init()
        self.t = 0
        self.pulls = np.zeros(len(self.ops), int)

    def choose_op(self, rng) -> int:
        self.t += 1
        return int(self.policy.select(jax.random.fold_in(self.key, self.t), self.state))

    def tell(self, s: str, loss: float) -> None:
        if self.parent is not None and self.op is not None:
            gain = max(0.0, self.seen[self.parent] - float(loss))
            self.state = self.policy.update(self.state, jnp.int32(self.op),
                                            jnp.float32(gain))
            self.pulls[self.op] += 1
        super().tell(s, loss)


def run_search(policy, evaluate: Callable[[Sequence[str]], Sequence[float]], budget: int,
               rng: np.random.Generator, *, batch: int = 1) -> SearchRun:
    """Run ``policy`` for ``budget`` evaluations, ``batch`` proposals per round (all
    asked before any is told, as candidates trained together).

    Returns:
      A :class:`~jaxkit.compose.results.SearchRun`: the evaluated strings and losses in
      order, the best loss after each evaluation, the best string and its loss.
    """
    strings, losses = [], []
    while len(strings) < budget:
        asked = [policy.ask(rng) for _ in range(min(batch, budget - len(strings)))]
        vals = list(evaluate(asked))
        for s, v in zip(asked, vals, strict=True):
            policy.tell(s, v)
            strings.append(s)
            losses.append(float(v))
    return SearchRun.from_history(strings, losses, pulls=getattr(policy, "pulls", ()))
