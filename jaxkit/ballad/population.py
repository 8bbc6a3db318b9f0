"""Population management with genealogy for LLM-driven heuristic search.

Every evaluated candidate becomes a :class:`Node` of a :class:`Genealogy`: its parent
ids, the model that produced it, its score, cost and failure, in the order they were
made (so the genealogy is a DAG in topological order, as
:func:`jaxkit.kernels.bandit.propagate_credit` expects). Nothing is ever removed from
the genealogy; survival only decides which nodes may be parents.

:class:`Population` keeps islands as in FunSearch (Romera-Paredes et al. 2024): parents
are drawn inside one island with EoH's rank-based probability ``P(rank r) ∝ 1/(r + n)``
(Liu et al. 2024), children join the island of their first parent, each island keeps
its best ``island_size`` nodes with distinct scores, and every ``reset_every`` additions
the worse half of the islands restart from the best node of a better island.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .llm import Candidate

__all__ = ["Node", "Genealogy", "Population"]


@dataclass
class Node:
    id: int
    candidate: Candidate | None
    score: float  # higher is better; -inf for a failure
    ok: bool
    parents: tuple[int, ...] = ()
    model: int = -1  # index of the proposer that made it; -1 for an initial node
    step: int = -1  # the search step (LLM call) that made it; -1 for an initial node
    cost: float = 0.0
    error: str | None = None


@dataclass
class Genealogy:
    nodes: list[Node] = field(default_factory=list)

    def add(self, candidate: Candidate | None, score: float, *, ok: bool = True,
            parents=(), model: int = -1, step: int = -1, cost: float = 0.0,
            error: str | None = None) -> Node:
        parents = tuple(int(p) for p in parents)
        n = len(self.nodes)
        for p in parents:
            if not 0 <= p < n:
                raise ValueError(f"parent id {p} is not an earlier node (0 <= id < {n})")
        score = float(score)
        if ok and not math.isfinite(score):
            raise ValueError(f"a successful node needs a finite score; got {score}")
        node = Node(n, candidate, score if ok else -math.inf, ok, parents, int(model),
                    int(step), float(cost), error)
        self.nodes.append(node)
        return node

    def __len__(self) -> int:
        return len(self.nodes)

    def parent_matrix(self, max_parents: int, capacity: int | None = None) -> np.ndarray:
        """(capacity, max_parents) int32 parent ids padded with -1."""
        cap = len(self.nodes) if capacity is None else capacity
        out = np.full((cap, max_parents), -1, np.int32)
        for node in self.nodes[:cap]:
            out[node.id, : len(node.parents)] = node.parents[:max_parents]
        return out

    def best(self) -> Node:
        ok = [n for n in self.nodes if n.ok]
        if not ok:
            raise ValueError("the genealogy has no successful node")
        return max(ok, key=lambda n: n.score)


class Population:
    """Islands of surviving node ids over a :class:`Genealogy`."""

    def __init__(self, genealogy: Genealogy, *, n_islands: int = 2, island_size: int = 6,
                 reset_every: int = 0):
        if n_islands < 1 or island_size < 1:
            raise ValueError("`n_islands` and `island_size` must be >= 1")
        self.genealogy = genealogy
        self.island_size = island_size
        self.reset_every = reset_every
        self.islands: list[list[int]] = [[] for _ in range(n_islands)]
        self.home: dict[int, int] = {}
        self._added = 0

    def seed(self, node_ids) -> None:
        """Spread initial nodes round-robin over the islands."""
        for i, nid in enumerate(node_ids):
            self._insert(int(nid), i % len(self.islands))

    def _score(self, nid: int) -> float:
        return self.genealogy.nodes[nid].score

    def _insert(self, nid: int, island: int) -> bool:
        node = self.genealogy.nodes[nid]
        members = self.islands[island]
        if not node.ok or any(abs(self._score(m) - node.score) <= 1e-12 for m in members):
            return False  # failures and duplicate scores never survive (EoH)
        members.append(nid)
        members.sort(key=lambda m: -self._score(m))
        del members[self.island_size:]
        self.home[nid] = island
        return nid in members

    def select_parents(self, rng: np.random.Generator, k: int = 1) -> tuple[int, list[int]]:
        """``k`` distinct parents from one random non-empty island, P(rank r) ∝ 1/(r+n).
        Returns (island, parent ids)."""
        islands = [i for i, m in enumerate(self.islands) if m]
        if not islands:
            raise ValueError("the population is empty")
        island = islands[rng.integers(len(islands))]
        members = self.islands[island]
        n = len(members)
        p = 1.0 / (np.arange(n) + n)
        p /= p.sum()
        k = min(k, n)
        return island, [members[i] for i in rng.choice(n, size=k, replace=False, p=p)]

    def add(self, nid: int, island: int | None = None) -> bool:
        """Offer a new node to ``island`` (default: its first parent's island); returns
        whether it survived."""
        node = self.genealogy.nodes[nid]
        if island is None:
            island = self.home.get(node.parents[0], 0) if node.parents else 0
        survived = self._insert(nid, island)
        self._added += 1
        if self.reset_every and self._added % self.reset_every == 0:
            self._reset()
        return survived

    def _reset(self) -> None:
        order = sorted(range(len(self.islands)),
                       key=lambda i: -max((self._score(m) for m in self.islands[i]),
                                          default=-math.inf))
        half = len(order) // 2
        if half == 0:
            return
        keep, reset = order[: len(order) - half], order[len(order) - half:]
        for j, isl in enumerate(reset):
            donor = self.islands[keep[j % len(keep)]]
            self.islands[isl] = donor[:1]

    def members(self) -> list[int]:
        return sorted({m for isl in self.islands for m in isl})
