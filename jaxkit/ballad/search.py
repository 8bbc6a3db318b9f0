"""The heuristic-discovery loop with routing over a pool of proposers (LLMs).

One loop serves both representations: candidates with a parameter vector (evaluated by
a jitted JAX problem, all runs of a step in one vmapped call) and candidates with Python
source (evaluated in the subprocess sandbox). Many independent runs (routers x seeds)
advance in lockstep so that the bandit states of a router are one batched pytree
(``vmap`` over seeds) and one evaluation call scores every run's child.

Each step of each run: the router picks a proposer; parents are drawn from one island
of the run's :class:`~jaxkit.ballad.population.Population`; the proposer returns a
child (or fails: an :class:`~jaxkit.ballad.llm.LLMError`, a crash or timeout in the
sandbox); the child is evaluated and added to the genealogy (failures too, so nothing
is lost and the cost is counted); the router is rewarded with the child's rank among
everything the run has evaluated so far (the empirical CDF of its score, 0 for a
failure), which is scale-free across problems.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import bandit
from jaxkit.stats import as_generator

from .llm import Candidate, LLMError
from .population import Genealogy, Population

__all__ = ["Router", "RunLog", "EvalOutcome", "theta_evaluator", "source_evaluator",
           "standard_routers", "search"]


@dataclass(frozen=True)
class EvalOutcome:
    ok: bool
    score: float
    error: str | None = None


@dataclass(frozen=True)
class Router:
    """How a run picks its proposer: ``fixed`` (always ``arm``), ``uniform``, or a
    bandit ``policy`` from :mod:`jaxkit.kernels.bandit` over the pool.

    ``priced``: the policy is cost-aware (:func:`jaxkit.kernels.bandit.ballad_cost`) and
    its state is initialised with each run's prices, a budget of ``budget`` times the
    cost of always calling the run's most expensive proposer (``inf``: none) and the
    run's number of calls as horizon."""

    name: str
    kind: str = "policy"
    arm: int = 0
    policy: bandit.Policy | None = None
    priced: bool = False
    budget: float = math.inf

    def __post_init__(self):
        if self.kind not in ("fixed", "uniform", "policy"):
            raise ValueError(f"`kind` must be 'fixed', 'uniform' or 'policy'; got {self.kind!r}")
        if self.kind == "policy" and self.policy is None:
            raise ValueError(f"router {self.name!r}: kind='policy' needs a `policy`")
        if not self.budget > 0:
            raise ValueError(f"router {self.name!r}: `budget` must be > 0; got {self.budget}")


@dataclass
class RunLog:
    router: str
    seed: int
    genealogy: Genealogy
    best: np.ndarray  # (n_calls,) best score after each call
    cost: np.ndarray  # (n_calls,) cumulative cost after each call
    arms: np.ndarray  # (n_calls,) proposer index of each call
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    policy_state: object = None  # the router's final bandit state (policy routers)


def theta_evaluator(score_fn: Callable, instances, n_runs: int, fallback, *,
                    mesh=None) -> Callable:
    """Evaluate parameter-vector candidates: mean of ``score_fn(theta, instances)``
    for every run's child in one ``jit(vmap)`` call of fixed batch size ``n_runs``
    (missing candidates are padded with ``fallback`` and ignored; longer lists go in
    chunks of ``n_runs``). With a ``mesh`` the
    candidates are split over its ``data`` axis
    (:func:`jaxkit.distributed.sharded_vmap`); the scores are the same."""
    fallback = np.asarray(fallback, np.float64)
    one = lambda th: jnp.mean(score_fn(th, instances))
    if mesh is None:  # the instances as an argument, not a constant XLA would fold
        scan = jax.jit(jax.vmap(lambda th, inst: jnp.mean(score_fn(th, inst)),
                                in_axes=(0, None)))
        batched = lambda thetas: scan(thetas, instances)
    else:
        from jaxkit.distributed import sharded_vmap

        batched = sharded_vmap(one, mesh)

    def evaluate(cands: Sequence[Candidate | None]) -> list[EvalOutcome | None]:
        if len(cands) > n_runs:  # more than one batch: the same compiled call per chunk
            return [o for k in range(0, len(cands), n_runs)
                    for o in evaluate(cands[k:k + n_runs])]
        thetas = np.tile(fallback, (n_runs, 1))
        bad: dict[int, str] = {}
        for i, c in enumerate(cands):
            if c is None:
                continue
            th = None if c.theta is None else np.asarray(c.theta, np.float64)
            if th is None or th.shape != fallback.shape:
                bad[i] = f"candidate needs theta of shape {fallback.shape}"
            elif not np.all(np.isfinite(th)):
                bad[i] = "candidate theta has NaN or inf"
            else:
                thetas[i] = th
        scores = np.asarray(batched(jnp.asarray(thetas)))
        out: list[EvalOutcome | None] = []
        for i, c in enumerate(cands):
            if c is None:
                out.append(None)
            elif i in bad:
                out.append(EvalOutcome(False, -math.inf, bad[i]))
            elif not math.isfinite(scores[i]):
                out.append(EvalOutcome(False, -math.inf, "score is not finite"))
            else:
                out.append(EvalOutcome(True, float(scores[i])))
        return out

    return evaluate


def source_evaluator(items: np.ndarray, capacity: float, *, timeout: float = 10.0,
                     max_workers: int | None = None) -> Callable:
    """Evaluate Python-source bin-packing heuristics in the sandbox (in parallel); the
    same source twice in one call runs once (a program that draws random numbers then
    shares one draw)."""
    from jaxkit.jail.sandbox import evaluate_many

    def evaluate(cands: Sequence[Candidate | None]) -> list[EvalOutcome | None]:
        idx = [i for i, c in enumerate(cands) if c is not None]
        out: list[EvalOutcome | None] = [None] * len(cands)
        missing = [i for i in idx if not cands[i].source]
        for i in missing:
            out[i] = EvalOutcome(False, -math.inf, "candidate has no source")
        todo = [i for i in idx if i not in missing]
        if todo:
            distinct = list(dict.fromkeys(cands[i].source for i in todo))
            res = dict(zip(distinct, evaluate_many(distinct, items, capacity, timeout=timeout,
                                                   max_workers=max_workers), strict=True))
            for i in todo:
                r = res[cands[i].source]
                out[i] = EvalOutcome(r.ok, r.score if r.ok else -math.inf, r.error)
        return out

    return evaluate


def standard_routers(n_arms: int, capacity: int, names: Sequence[str] | None = None, *,
                     ablations: Sequence[str] = ("extreme", "credit", "discount"),
                     cost_weight: float = 0.5, budget: float = 0.3) -> list[Router]:
    """Every single proposer alone, uniform routing, UCB1, Ballad, Ballad without each
    of the parts in ``ablations`` (extreme-value index, DAG credit, discounting), and the
    two cost-aware Ballads (:func:`jaxkit.kernels.bandit.ballad_cost`): "ballad-cost"
    (index per relative price to the power ``cost_weight``, no budget) and
    "ballad-budget" (plain index under a budget of ``budget`` times the cost of always
    calling the most expensive proposer, with the pacing reserve)."""
    names = tuple(names) if names is not None else tuple(f"arm{k}" for k in range(n_arms))
    pol = _policies(n_arms, capacity, tuple(ablations), float(cost_weight))
    return ([Router(f"only {names[k]}", "fixed", arm=k) for k in range(n_arms)]
            + [Router("uniform", "uniform"), Router("ucb1", policy=pol["ucb1"]),
               Router("ballad", policy=pol["ballad"])]
            + [Router(f"ballad -{a}", policy=pol[f"ballad -{a}"]) for a in ablations]
            + [Router("ballad-cost", priced=True, policy=pol["ballad-cost"]),
               Router("ballad-budget", priced=True, budget=budget,
                      policy=pol["ballad-budget"])])


@functools.lru_cache(maxsize=64)
def _policies(n_arms, capacity, ablations, cost_weight) -> dict:
    # cached: the same settings give the same policy objects, so their jitted steps
    # (:func:`_jitted`) compile once per process and batch shape, not once per stage or
    # run of the pipeline (the proposers' names and the budget are not part of a policy)
    kw = dict(capacity=capacity, max_parents=2)
    out = {"ucb1": bandit.ucb1(n_arms, alpha=0.5), "ballad": bandit.ballad(n_arms, **kw),
           "ballad-cost": bandit.ballad_cost(n_arms, cost_weight=cost_weight, **kw),
           "ballad-budget": bandit.ballad_cost(n_arms, cost_weight=0.0, **kw)}
    for a in ablations:
        out[f"ballad -{a}"] = bandit.ballad(n_arms, **{a: False}, **kw)
    return out


@functools.lru_cache(maxsize=128)
def _initialiser(policy: bandit.Policy, n: int, priced: bool, roots: bool):
    """One jitted function building the ``n`` runs' states (prices and roots included)."""

    def make(root_scores, costs, budgets, horizon):
        if priced:
            states = jax.vmap(policy.init, in_axes=(0, 0, None))(costs, budgets, horizon)
        else:
            states = jax.vmap(lambda _: policy.init())(jnp.arange(n))
        inner = states.inner if priced else states
        if roots and isinstance(inner, bandit.BalladState):
            inner = jax.vmap(bandit.ballad_add_roots, in_axes=(0, None))(
                inner, root_scores.astype(inner.score.dtype))
            states = states._replace(inner=inner) if priced else inner
        return states

    return jax.jit(make)


@functools.lru_cache(maxsize=128)
def _jitted(policy: bandit.Policy, with_parents: bool):
    """``jit(vmap)`` of a policy's select and update (cached per policy object)."""
    select = jax.jit(jax.vmap(policy.select))
    if with_parents:
        return select, jax.jit(jax.vmap(policy.update))
    return select, jax.jit(jax.vmap(lambda s, a, r, p: policy.update(s, a, r)))


def _price_per_call(model) -> float:
    """A proposer's price per call for cost-aware routers: its ``cost`` when that is a
    number (simulated models), else a nominal call of 1000 prompt and 500 completion
    tokens at its ``price_in`` / ``price_out`` (dollars per million tokens), floored at
    1e-9 so that free models stay comparable."""
    cost = getattr(model, "cost", None)
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return max(float(cost), 1e-9)
    nominal = (1000 * float(getattr(model, "price_in", 0.0))
               + 500 * float(getattr(model, "price_out", 0.0))) / 1e6
    return max(nominal, 1e-9)


def _rank(score: float, previous: list[float]) -> float:
    """Empirical CDF of ``score`` among earlier successful scores (ties count half)."""
    if not previous:
        return 0.5
    prev = np.asarray(previous)
    return float((np.sum(prev < score) + 0.5 * np.sum(prev == score)) / prev.size)


_fold = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(0, None)))


def _run_key(key, ri: int, j: int):
    """The key of run (router ``ri``, ``j``-th seed)."""
    return jax.random.fold_in(jax.random.fold_in(key, ri), j)


class _BatchedPolicy:
    """One policy's states for all seeds of a router, stepped with jit(vmap)."""

    def __init__(self, policy: bandit.Policy, n: int, root_scores: np.ndarray | None,
                 priced: tuple | None = None):
        self.policy = policy
        k = policy.n_arms
        if priced is None:
            costs, budgets, horizon = np.ones((n, k)), np.ones(n), 0
        else:  # (costs (n, K), budgets (n,), horizon): one state per run's prices
            costs, budgets, horizon = priced
        make = _initialiser(policy, n, priced is not None, root_scores is not None)
        roots = np.zeros(0) if root_scores is None else np.asarray(root_scores)
        states = make(jnp.asarray(roots), jnp.asarray(costs, jnp.float32),
                      jnp.asarray(budgets, jnp.float32), jnp.int32(horizon))
        self.is_ballad = isinstance(states, (bandit.BalladState, bandit.BalladCostState))
        self.states = states
        self._select, self._update = _jitted(policy, self.is_ballad)

    def select(self, keys) -> np.ndarray:
        return np.asarray(self._select(keys, self.states))

    def update(self, arms, rewards, parents) -> None:
        self.states = self._update(self.states, jnp.asarray(arms, jnp.int32),
                                   jnp.asarray(rewards, jnp.float32),
                                   jnp.asarray(parents, jnp.int32))


def _propose_all(proposers: Sequence, asks: Sequence[tuple]) -> list:
    """Each run's call: ``(candidates, cost)``, or the exception it raised. Proposers
    with ``propose_batch`` (real models, :class:`jaxkit.ballad.smol.Member`) answer all
    the runs that routed to them in one call; the rest are called run by run, in run
    order (each run draws from its own generator, so the order does not change them)."""
    out: list = [None] * len(asks)
    batched: dict[int, list[int]] = {}
    for i, prop in enumerate(proposers):
        if hasattr(prop, "propose_batch"):
            batched.setdefault(id(prop), []).append(i)
            continue
        _, _, parents, ctx = asks[i]
        try:
            out[i] = _checked(prop, *prop.propose(parents, ctx))
        except Exception as err:  # noqa: BLE001 (recorded as a failed node)
            out[i] = err
    for idx in batched.values():
        prop = proposers[idx[0]]
        try:
            res = prop.propose_batch([(asks[i][2], asks[i][3]) for i in idx])
        except Exception as err:  # noqa: BLE001
            res = [err] * len(idx)
        for i, r in zip(idx, res, strict=True):
            out[i] = r if isinstance(r, Exception) else _checked(prop, *r)
    return out


def _checked(prop, proposed, cost) -> tuple | LLMError:
    if not proposed or not isinstance(proposed[0], Candidate):
        return LLMError(getattr(prop, "name", "proposer"), "local",
                        "proposer returned no candidate", cost=float(cost))
    return proposed, cost


def search(evaluate: Callable, pool: Sequence, routers: Sequence[Router],
           seeds: Sequence[int], *, init: Sequence[Candidate], n_calls: int,
           n_islands: int = 2, island_size: int = 6, reset_every: int = 0,
           n_examples: int = 4, context: dict | None = None, key=None,
           run_pools: Sequence[Sequence] | None = None,
           progress: Callable[[int], None] | None = None,
           on_step: Callable[[int, list[RunLog]], None] | None = None) -> list[RunLog]:
    """Run every (router, seed) for ``n_calls`` proposer calls in lockstep.

    ``evaluate(list[Candidate | None]) -> list[EvalOutcome | None]`` scores one child per
    run (None = that run has no child this step). ``init`` is the initial population
    (evaluated once; identical for every run). ``context`` is passed to every proposer
    call, plus ``rng``, ``step``, ``budget``, ``examples`` ((theta, score) of island
    members), ``source_examples`` ((source, score) of island members) and ``scores``
    (of the parents). A proposer that raises (an
    :class:`~jaxkit.ballad.llm.LLMError` or any other exception) or returns no candidate
    makes a failed node with the reason and the cost of the call (``LLMError.cost``); the
    loop goes on. ``on_step(t, logs)`` is called once the initial population is in every
    genealogy (``t = -1``) and after every step, with the genealogies up to date (e.g. to
    save them). Randomness: with a JAX PRNG ``key``, run (router ``ri``, ``j``-th seed)
    draws from ``k = fold_in(fold_in(key, ri), j)``: its NumPy generator (parent
    selection, uniform routing, the proposers' ``rng``) is seeded from ``fold_in(k, 0)``
    (:func:`jaxkit.stats.as_generator`) and its routing keys are ``fold_in(fold_in(k,
    1), t)``; the ``seeds`` are then only the runs' labels. Without ``key`` the streams
    come from the integer seeds (``default_rng([seed, ri, 7])`` and ``fold_in(key(seed),
    1000 + ri)``), as the ``jaxkit discover`` command uses them. ``run_pools``: one pool
    per seed (``len(seeds)`` pools of ``len(pool)`` proposers each; seed ``j`` of every
    router calls ``run_pools[j]``), so that runs over many pools share one lockstep loop
    and one compiled policy per router; the prices of cost-aware routers are then each
    run's own. Returns one :class:`RunLog` per run, routers outer, seeds inner."""
    if n_calls < 1:
        raise ValueError(f"`n_calls` must be >= 1; got {n_calls}")
    if not init:
        raise ValueError("`init` must hold at least one candidate")
    n_arms = len(pool)
    if run_pools is not None:
        if len(run_pools) != len(seeds):
            raise ValueError(f"`run_pools` must hold one pool per seed ({len(seeds)}); "
                             f"got {len(run_pools)}")
        if any(len(p) != n_arms for p in run_pools):
            raise ValueError(f"every pool of `run_pools` must have {n_arms} proposers")
    seed_pools = list(run_pools) if run_pools is not None else [pool] * len(seeds)
    for r in routers:
        if r.kind == "fixed" and not 0 <= r.arm < n_arms:
            raise ValueError(f"router {r.name!r}: arm {r.arm} out of range [0, {n_arms})")
        if r.kind == "policy" and r.policy.n_arms != n_arms:
            raise ValueError(f"router {r.name!r}: policy has {r.policy.n_arms} arms, "
                             f"pool has {n_arms}")
    runs = [(ri, s) for ri in range(len(routers)) for s in seeds]
    init_scores = [o for o in evaluate(list(init))[: len(init)]]
    for i, o in enumerate(init_scores):
        if o is None or not o.ok:
            why = "no outcome" if o is None else o.error
            raise ValueError(f"initial candidate {i} failed to evaluate: {why}")
    root_scores = [o.score for o in init_scores]
    root_ranks = np.asarray([_rank(s, root_scores[:i] + root_scores[i + 1:])
                             for i, s in enumerate(root_scores)])

    gens, pops, rngs, ok_scores, logs = [], [], [], [], []
    for i, (ri, s) in enumerate(runs):
        g = Genealogy()
        ids = [g.add(c, o.score).id for c, o in zip(init, init_scores, strict=True)]
        pop = Population(g, n_islands=n_islands, island_size=island_size,
                         reset_every=reset_every)
        pop.seed(ids)
        gens.append(g)
        pops.append(pop)
        if key is None:
            rngs.append(np.random.default_rng([int(s), ri, 7]))
        else:
            rngs.append(as_generator(jax.random.fold_in(_run_key(key, ri, i % len(seeds)),
                                                        0)))
        ok_scores.append(list(root_scores))
        logs.append(RunLog(routers[ri].name, int(s), g, np.zeros(n_calls), np.zeros(n_calls),
                           np.zeros(n_calls, np.int32)))
    if any(r.priced for r in routers):
        prices = np.array([[_price_per_call(m) for m in p] for p in seed_pools])
    policies = {}
    for ri, r in enumerate(routers):
        if r.kind == "policy":
            priced = ((prices, r.budget * n_calls * prices.max(1), n_calls) if r.priced
                      else None)
            policies[ri] = _BatchedPolicy(r.policy, len(seeds), root_ranks, priced)
    if key is None:
        seed_arr = jnp.asarray([int(s) for s in seeds], jnp.uint32)
        keys = {ri: jax.vmap(lambda s, ri=ri: jax.random.fold_in(jax.random.key(s),
                                                                 1000 + ri))(seed_arr)
                for ri in policies}
    else:
        keys = {ri: jnp.stack([jax.random.fold_in(_run_key(key, ri, j), 1)
                               for j in range(len(seeds))]) for ri in policies}
    spent = np.zeros(len(runs))
    ctx = dict(context or {})
    if on_step is not None:
        on_step(-1, logs)

    for t in range(n_calls):
        arms = np.zeros(len(runs), np.int32)
        for ri, bp in policies.items():
            step_keys = _fold(keys[ri], t)
            chosen = bp.select(step_keys)
            for j in range(len(seeds)):
                arms[ri * len(seeds) + j] = chosen[j]
        asks = []
        for i, (ri, _) in enumerate(runs):
            r, rng, pop, g = routers[ri], rngs[i], pops[i], gens[i]
            if r.kind == "fixed":
                arms[i] = r.arm
            elif r.kind == "uniform":
                arms[i] = rng.integers(n_arms)
            island, parents = pop.select_parents(rng, 2 if rng.random() < 0.5 else 1)
            members = pop.islands[island][:n_examples]
            call_ctx = dict(ctx, rng=rng, step=t, budget=n_calls,
                            scores=[g.nodes[p].score for p in parents],
                            examples=[(g.nodes[m].candidate.theta, g.nodes[m].score)
                                      for m in members
                                      if g.nodes[m].candidate.theta is not None],
                            source_examples=[(g.nodes[m].candidate.source, g.nodes[m].score)
                                             for m in members
                                             if g.nodes[m].candidate.source is not None])
            asks.append((island, parents, [g.nodes[p].candidate for p in parents], call_ctx))
        results = _propose_all([seed_pools[i % len(seeds)][arms[i]]
                                for i in range(len(runs))], asks)
        cands: list[Candidate | None] = []
        meta = []
        for i, res in enumerate(results):
            island, parents = asks[i][:2]
            if isinstance(res, LLMError):
                cands.append(None)
                meta.append((island, parents, float(res.cost), str(res)))
            elif isinstance(res, Exception):  # a proposer's bug is a failed node
                cands.append(None)
                meta.append((island, parents, 0.0, f"{type(res).__name__}: {res}"))
            else:
                cands.append(res[0][0])
                meta.append((island, parents, float(res[1]), None))
        outcomes = evaluate(cands)
        rewards = np.zeros(len(runs))
        parent_mat = np.full((len(runs), 2), -1, np.int32)
        for i in range(len(runs)):
            island, parents, cost, err = meta[i]
            g, log = gens[i], logs[i]
            out = outcomes[i] if err is None else EvalOutcome(False, -math.inf, err)
            node = g.add(cands[i], out.score, ok=out.ok, parents=parents, model=int(arms[i]),
                         step=t, cost=cost, error=out.error)
            if out.ok:
                rewards[i] = _rank(out.score, ok_scores[i])
                ok_scores[i].append(out.score)
                pops[i].add(node.id, island)
            else:
                log.failures += 1
                log.errors.append(out.error or "unknown failure")
            parent_mat[i, : len(parents)] = parents[:2]
            spent[i] += cost
            log.best[t] = max(ok_scores[i])
            log.cost[t] = spent[i]
            log.arms[t] = arms[i]
        for ri, bp in policies.items():
            sl = slice(ri * len(seeds), (ri + 1) * len(seeds))
            bp.update(arms[sl], rewards[sl], parent_mat[sl])
        if progress is not None:
            progress(t)
        if on_step is not None:
            on_step(t, logs)
    for ri, bp in policies.items():
        for j in range(len(seeds)):
            logs[ri * len(seeds) + j].policy_state = jax.tree.map(lambda x, j=j: x[j],
                                                                  bp.states)
    return logs
