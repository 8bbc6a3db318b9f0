"""Combinatorial problems with parametric constructive heuristics, in JAX.

Each heuristic is a priority ``features @ theta`` over a few hand-chosen, normalised features;
a ``lax.scan`` builds the solution with fixed shapes (infeasible choices get ``-inf``, ties go
to the lowest index) and is vmapped over instances. The suites follow FunSearch
(Romera-Paredes et al. 2024: online bin packing, OR-Library "u"-class and Weibull 5k) and
LLM4AD's constructive TSP, knapsack and CVRP tasks. ``jaxkit.ballad.reference`` replays every
heuristic in NumPy with the same features and tie rules.

``score(theta, instances)`` is pure, jit- and vmap-able (over ``theta`` too) and returns one
value per instance, higher is better.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# the features are plain array arithmetic: one definition serves NumPy and JAX
from .reference import binpack_features as _binpack_features

__all__ = [
    "Problem",
    "NAMES",
    "get",
    "make",
    "binpack_bins",
    "tsp_tour",
    "knapsack_rollout",
    "cvrp_rollout",
]


@dataclass(frozen=True)
class Problem:
    """A problem suite: instance generator, parametric heuristic and its score."""

    name: str
    feature_names: tuple[str, ...]
    baseline: np.ndarray
    generate: Callable
    score: Callable
    objective: str
    lower_is_better_objective: bool


def _float():
    """The default float dtype (float64 when x64 is enabled)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _linear(feats, theta):
    """``sum_k theta[k] * feats[k]`` in a fixed order (as ``reference.linear``)."""
    p = feats[0] * theta[0]
    for k in range(1, len(feats)):
        p = p + feats[k] * theta[k]
    return p


def _dist(coords):
    diff = coords[:, None, :] - coords[None, :, :]
    return jnp.sqrt(jnp.sum(diff * diff, axis=-1))


# ---------------------------------------------------------------------------------------
# Online bin packing (FunSearch; OR-Library binpack "u" class; Weibull 5k)
# ---------------------------------------------------------------------------------------

BINPACK_FEATURES = ("slack", "slack^2", "exact_fit", "fresh_bin", "awkward_leftover", "item*slack")


# The greedy step only needs bins [0, n_open]: every bin past the open ones is still empty, so
# all fresh bins score the same and the first one (index n_open) wins their ties. The search
# walks the bins in blocks up to the one holding n_open (a while loop, so the cost grows with
# the bins opened so far, not with len(items)), keeping the first maximum; under vmap one loop
# serves the whole batch, running to the batch's largest n_open (``jax.custom_batching``), and
# the block layout is chosen from the batch size (measured on a 2-core CPU):
# - small batches keep a per-lane running best (one elementwise fusion per block, reduced
#   once at the end), in blocks small enough (batch * block <= 512 bins) that XLA runs them on
#   one thread instead of paying a split over the intra-op thread pool at every block;
# - large batches reduce each block to its best (priority, index) at once, which XLA
#   splits over threads with enough work per block to pay for it.
_SEARCH_BLOCK = 128  # bins per block for large batches; the bins array is padded to it
_LANE_BATCH = 16  # largest batch searched with per-lane running bests
_LANE_BINS = 512  # batch * block bound for the per-lane blocks


def _binpack_priority(item, bins, capacity, theta):
    """Priorities of ``bins`` (rows, block) for ``item`` (rows, 1), ``-inf`` where it does not
    fit; ``theta`` is (rows, 6). The same arithmetic as ``_linear(_binpack_features(...))``."""
    theta = [theta[:, k : k + 1] for k in range(theta.shape[1])]
    p = _linear(_binpack_features(item, bins, capacity), theta)
    return jnp.where(bins - item >= 0, p, -jnp.inf)


def _block_priority(bins, i, item, theta, capacity, block):
    """Priorities of block ``i`` (bins ``i * block`` onwards) of every row of ``bins``."""
    b = lax.dynamic_slice_in_dim(bins, i * block, block, 1)
    return _binpack_priority(item, b, capacity, theta)


def _first_max_per_lane(bins, nblk, item, theta, capacity, block):
    """Index of the first maximal priority among the first ``nblk`` blocks of each row,
    through per-lane running bests (ties keep the earlier block; NaN wins, as in argmax)."""
    rows, size = bins.shape

    def priority(i):
        return _block_priority(bins, i, item, theta, capacity, block)

    def body(c):
        i, bp, bk = c
        p = priority(i)
        better = (p > bp) | ((p != p) & (bp == bp))
        return i + 1, jnp.where(better, p, bp), jnp.where(better, i, bk)

    dtype = jax.eval_shape(priority, 0).dtype  # wider than bins' with a wider capacity
    init = (jnp.int32(0), jnp.full((rows, block), -jnp.inf, dtype),
            jnp.zeros((rows, block), jnp.int32))
    _, bp, bk = lax.while_loop(lambda c: c[0] < nblk, body, init)
    m = jnp.max(bp, axis=1, keepdims=True)
    index = bk * block + lax.iota(jnp.int32, block)
    return jnp.min(jnp.where((bp == m) | (bp != bp), index, jnp.int32(size)), axis=1)


def _first_max_per_block(bins, nblk, item, theta, capacity, block):
    """As ``_first_max_per_lane``, reducing every block to its first maximum."""
    rows = bins.shape[0]
    lane = lax.iota(jnp.int32, block)

    def priority(i):
        return _block_priority(bins, i, item, theta, capacity, block)

    def body(c):
        i, bp, bi = c
        p = priority(i)
        pj = jnp.max(p, axis=1)
        j = jnp.min(jnp.where((p == pj[:, None]) | (p != p), lane, jnp.int32(block)), axis=1)
        better = (pj > bp) | ((pj != pj) & (bp == bp))
        return i + 1, jnp.where(better, pj, bp), jnp.where(better, i * block + j, bi)

    dtype = jax.eval_shape(priority, 0).dtype
    init = (jnp.int32(0), jnp.full((rows,), -jnp.inf, dtype), jnp.zeros((rows,), jnp.int32))
    return lax.while_loop(lambda c: c[0] < nblk, body, init)[2]


@functools.lru_cache(maxsize=None, typed=True)
def _bin_search(capacity):
    """``search(bins, n_open, item, theta, cap) -> best`` over rows (leading axis) of bins;
    vmap folds its axis into the rows, so nested vmaps share one loop. The capacity is the
    constant ``capacity`` (as the features had it before), or with ``None`` the operand
    ``cap`` (one per row, for a traced capacity)."""

    @jax.custom_batching.custom_vmap
    def search(bins, n_open, item, theta, cap):
        rows, size = bins.shape
        c = cap[:, None] if capacity is None else capacity
        if rows <= _LANE_BATCH:
            block = min(_SEARCH_BLOCK, max(_LANE_BINS // rows, 8))
            block = 1 << (block.bit_length() - 1)  # a power of two, so it divides size
            first_max = _first_max_per_lane
        else:
            block, first_max = _SEARCH_BLOCK, _first_max_per_block
        nblk = jnp.max(n_open) // block + 1  # the blocks up to the first fresh bin
        return first_max(bins, nblk, item[:, None], theta, c, block)

    @search.def_vmap
    def _(axis_size, in_batched, *args):
        args = [a if b else jnp.broadcast_to(a, (axis_size, *a.shape))
                for a, b in zip(args, in_batched, strict=True)]
        rows = args[0].shape[1]
        best = search(*[a.reshape(axis_size * rows, *a.shape[2:]) for a in args])
        return best.reshape(axis_size, rows), True

    return search


def binpack_bins(theta, items, capacity: float):
    """Bins used when packing ``items`` online with the linear priority ``theta``.

    ``len(items)`` bins are preallocated; each item goes to the feasible bin of highest
    priority (ties to the lowest index, so a fresh bin is the first unused one).
    """
    return jnp.sum(_binpack_levels(theta, items, capacity) != capacity)


def _binpack_levels(theta, items, capacity):
    """Room left in each of the ``len(items)`` preallocated bins after packing ``items``."""
    items = jnp.asarray(items)
    theta = jnp.asarray(theta, items.dtype)
    n = items.shape[0]
    size = -(-n // _SEARCH_BLOCK) * _SEARCH_BLOCK
    if isinstance(capacity, (int, float, np.integer, np.floating)):
        search, cap = _bin_search(capacity), jnp.zeros((1,), items.dtype)
    else:  # an array (e.g. traced) capacity
        search, cap = _bin_search(None), jnp.reshape(jnp.asarray(capacity), (1,))
    # the choice is piecewise constant in theta and the items (custom_vmap has no reverse mode)
    theta_sg = lax.stop_gradient(theta)

    def step(carry, item):
        bins, n_open = carry  # bins[n_open:] are all fresh
        args = lax.stop_gradient((bins[None], item[None]))
        best = search(args[0], n_open[None], args[1], theta_sg[None], cap)[0]
        # a fresh bin can only win at index n_open (their ties go to the lowest index)
        n_open = n_open + (best == n_open).astype(n_open.dtype)
        return (bins.at[best].add(-item), n_open), None

    bins0 = jnp.full((size,), capacity, items.dtype)
    (bins, _), _ = lax.scan(step, (bins0, jnp.int32(0)), items)
    return bins[:n]


def _binpack_score(theta, instances, capacity):
    items = instances["items"]

    def one(x):
        n_bins = binpack_bins(theta, x, capacity).astype(x.dtype)
        lb = jnp.ceil(jnp.sum(x) / capacity)
        return -100.0 * (n_bins - lb) / lb

    return jax.vmap(one)(items)


def _or_generate(key, n_instances, n_items):
    x = jax.random.randint(key, (n_instances, n_items), 20, 101)
    return {"items": x.astype(_float())}


def _weibull_generate(key, n_instances, n_items):
    w = jax.random.weibull_min(key, 1.0, 3.0, (n_instances, n_items), _float())
    return {"items": jnp.round(jnp.clip(w * 45.0, 1.0, 100.0))}


# ---------------------------------------------------------------------------------------
# TSP (LLM4AD constructive TSP)
# ---------------------------------------------------------------------------------------

TSP_FEATURES = ("dist", "dist_to_start", "mean_dist_unvisited", "min_dist_unvisited", "dist^2")


def tsp_tour(theta, coords):
    """Tour length and tour (from node 0, back to it) of the linear next-node heuristic."""
    coords = jnp.asarray(coords)
    theta = jnp.asarray(theta, coords.dtype)
    n = coords.shape[0]
    dist = _dist(coords)
    offdiag = ~jnp.eye(n, dtype=bool)

    def step(carry, _):
        cur, unvisited, length = carry
        u = unvisited.astype(dist.dtype)
        n_other = jnp.maximum(jnp.sum(u) - 1.0, 1.0)
        mean_other = (dist @ u) / n_other
        min_other = jnp.min(jnp.where(unvisited[None, :] & offdiag, dist, jnp.inf), axis=1)
        min_other = jnp.where(jnp.isfinite(min_other), min_other, 0.0)
        d = dist[cur]
        p = _linear([d, dist[:, 0], mean_other, min_other, d * d], theta)
        nxt = jnp.argmax(jnp.where(unvisited, p, -jnp.inf))
        carry = (nxt, unvisited.at[nxt].set(False), length + dist[cur, nxt])
        return carry, nxt

    init = (jnp.asarray(0), jnp.arange(n) != 0, jnp.zeros((), dist.dtype))
    (cur, _, length), tour = lax.scan(step, init, None, length=n - 1)
    tour = jnp.concatenate([jnp.zeros((1,), tour.dtype), tour])
    return length + dist[cur, 0], tour


def _tsp_score(theta, instances):
    return jax.vmap(lambda c: -tsp_tour(theta, c)[0])(instances["coords"])


def _tsp_generate(key, n_instances, n_nodes):
    return {"coords": jax.random.uniform(key, (n_instances, n_nodes, 2), _float())}


# ---------------------------------------------------------------------------------------
# 0/1 knapsack (LLM4AD constructive knapsack)
# ---------------------------------------------------------------------------------------

KNAPSACK_FEATURES = ("value/weight", "value", "weight", "weight/remaining", "room_after")
KNAPSACK_CAPACITY = 100.0


def knapsack_rollout(theta, weights, values, capacity: float):
    """Value and taken-mask of repeatedly adding the highest-priority item that fits."""
    w = jnp.asarray(weights)
    v = jnp.asarray(values, w.dtype)
    theta = jnp.asarray(theta, w.dtype)

    def step(carry, _):
        taken, remaining = carry
        feasible = ~taken & (w <= remaining)
        feats = [
            v / w,
            v / 100.0,
            w / capacity,
            w / jnp.maximum(remaining, 1e-9),
            (remaining - w) / capacity,
        ]
        j = jnp.argmax(jnp.where(feasible, _linear(feats, theta), -jnp.inf))
        ok = feasible[j]
        taken = taken.at[j].set(taken[j] | ok)
        return (taken, remaining - jnp.where(ok, w[j], 0.0)), None

    init = (jnp.zeros(w.shape, bool), jnp.asarray(capacity, w.dtype))
    (taken, _), _ = lax.scan(step, init, None, length=w.shape[0])
    return jnp.sum(jnp.where(taken, v, 0.0)), taken


def _knapsack_score(theta, instances, capacity):
    def one(w, v):
        return knapsack_rollout(theta, w, v, capacity)[0]

    return jax.vmap(one)(instances["weights"], instances["values"])


def _knapsack_generate(key, n_instances, n_items, capacity):
    kw, kv = jax.random.split(key)
    hi = int(capacity // 2 + 10)
    w = jax.random.randint(kw, (n_instances, n_items), 10, hi)
    v = jax.random.randint(kv, (n_instances, n_items), 1, 100)
    return {"weights": w.astype(_float()), "values": v.astype(_float())}


# ---------------------------------------------------------------------------------------
# CVRP (LLM4AD constructive CVRP)
# ---------------------------------------------------------------------------------------

CVRP_FEATURES = ("dist", "dist_to_depot", "demand/load", "load_after", "dist^2")
CVRP_CAPACITY = 40.0


def cvrp_rollout(theta, coords, demands, capacity: float):
    """Construct routes: go to the highest-priority customer whose demand fits the load
    left, else back to the depot (node 0) to reload.

    Returns (total length, visits, loads): ``visits[t]`` is the node reached at step t
    (0 = depot, -1 = no move once every customer is served) and ``loads[t]`` the load left.
    """
    coords = jnp.asarray(coords)
    demands = jnp.asarray(demands, coords.dtype)
    theta = jnp.asarray(theta, coords.dtype)
    n = coords.shape[0]
    dist = _dist(coords)
    cap = jnp.asarray(capacity, coords.dtype)

    def step(carry, _):
        cur, load, unvisited, length = carry
        feasible = unvisited & (demands <= load)
        d = dist[cur]
        feats = [d, dist[:, 0], demands / jnp.maximum(load, 1e-9), (load - demands) / cap, d * d]
        j = jnp.argmax(jnp.where(feasible, _linear(feats, theta), -jnp.inf))
        go_customer = feasible[j]
        go_depot = jnp.any(unvisited) & ~go_customer
        nxt = jnp.where(go_customer, j, jnp.where(go_depot, 0, cur))
        load = jnp.where(go_customer, load - demands[j], jnp.where(go_depot, cap, load))
        unvisited = unvisited.at[j].set(unvisited[j] & ~go_customer)
        length = length + jnp.where(go_customer | go_depot, dist[cur, nxt], 0.0)
        visit = jnp.where(go_customer | go_depot, nxt, -1)
        return (nxt, load, unvisited, length), (visit, load)

    init = (jnp.asarray(0), cap, jnp.arange(n) != 0, jnp.zeros((), coords.dtype))
    (cur, _, _, length), (visits, loads) = lax.scan(step, init, None, length=2 * n)
    return length + dist[cur, 0], visits, loads


def _cvrp_score(theta, instances, capacity):
    def one(c, d):
        return -cvrp_rollout(theta, c, d, capacity)[0]

    return jax.vmap(one)(instances["coords"], instances["demands"])


def _cvrp_generate(key, n_instances, n_customers):
    kc, kd = jax.random.split(key)
    coords = jax.random.uniform(kc, (n_instances, n_customers + 1, 2), _float())
    dem = jax.random.randint(kd, (n_instances, n_customers + 1), 1, 10).astype(_float())
    return {"coords": coords, "demands": dem.at[:, 0].set(0.0)}


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------

NAMES = ("binpacking_or", "binpacking_weibull", "tsp", "knapsack", "cvrp")

# full / quick instance sizes (items, nodes, items, customers)
_SIZES = {
    "binpacking_or": (500, 120),
    "binpacking_weibull": (5000, 1000),
    "tsp": (50, 20),
    "knapsack": (50, 20),
    "cvrp": (50, 20),
}


def _unit(n: int, k: int, sign: float = 1.0) -> np.ndarray:
    theta = np.zeros(n)
    theta[k] = sign
    theta.setflags(write=False)  # shared by the cached Problem
    return theta


@functools.cache
def make(name: str, size: int) -> Problem:
    """The problem ``name`` with ``size`` items / nodes / customers per instance.

    Cached, so repeated calls share one jitted ``score`` (and its compiled code).
    """
    if name not in NAMES:
        raise KeyError(f"unknown problem {name!r}; known problems: {', '.join(NAMES)}")
    size = int(size)
    if size < 2:
        raise ValueError(f"size must be at least 2, got {size}")
    if name in ("binpacking_or", "binpacking_weibull"):
        cap = 150.0 if name == "binpacking_or" else 100.0
        gen = _or_generate if name == "binpacking_or" else _weibull_generate
        return Problem(
            name=name,
            feature_names=BINPACK_FEATURES,
            baseline=_unit(len(BINPACK_FEATURES), 0, -1.0),  # best fit: minimise slack
            generate=functools.partial(gen, n_items=size),
            score=jax.jit(functools.partial(_binpack_score, capacity=cap)),
            objective="excess bins over L1 (%)",
            lower_is_better_objective=True,
        )
    if name == "tsp":
        return Problem(
            name=name,
            feature_names=TSP_FEATURES,
            baseline=_unit(len(TSP_FEATURES), 0, -1.0),  # nearest neighbour
            generate=functools.partial(_tsp_generate, n_nodes=size),
            score=jax.jit(_tsp_score),
            objective="tour length",
            lower_is_better_objective=True,
        )
    if name == "knapsack":
        cap = KNAPSACK_CAPACITY
        return Problem(
            name=name,
            feature_names=KNAPSACK_FEATURES,
            baseline=_unit(len(KNAPSACK_FEATURES), 0, 1.0),  # greedy value/weight
            generate=functools.partial(_knapsack_generate, n_items=size, capacity=cap),
            score=jax.jit(functools.partial(_knapsack_score, capacity=cap)),
            objective="total value",
            lower_is_better_objective=False,
        )
    return Problem(
        name=name,
        feature_names=CVRP_FEATURES,
        baseline=_unit(len(CVRP_FEATURES), 0, -1.0),  # nearest feasible customer
        generate=functools.partial(_cvrp_generate, n_customers=size),
        score=jax.jit(functools.partial(_cvrp_score, capacity=CVRP_CAPACITY)),
        objective="total route length",
        lower_is_better_objective=True,
    )


def get(name: str, *, quick: bool = False) -> Problem:
    """The problem ``name`` (one of ``NAMES``) at full or ``quick`` (smaller) size."""
    if name not in _SIZES:
        raise KeyError(f"unknown problem {name!r}; known problems: {', '.join(NAMES)}")
    full, small = _SIZES[name]
    return make(name, small if quick else full)


def l1_bound(items, capacity: float):
    """``ceil(sum(items) / capacity)``, the L1 lower bound on bins (JAX)."""
    return jnp.ceil(jnp.sum(jnp.asarray(items)) / capacity)
