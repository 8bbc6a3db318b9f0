"""NumPy reference evaluators for the ballad problem suite (no JAX import).

``online_binpack`` follows the online bin-packing evaluator of FunSearch (Romera-Paredes et
al. 2024, Nature) and LLM4AD: one priority per open bin that fits the item, the item goes to
the argmax (ties to the lowest index). The ``*_theta`` functions replay the linear heuristics
of ``jaxkit.ballad.problems`` step by step with the same features and tie rules, so tests
can check the ``lax.scan`` versions against them. This module must not import JAX: the
sandbox that runs untrusted heuristics imports it in a fresh subprocess.
"""

from __future__ import annotations

import numpy as np

from jaxkit.jail.packing import binpack_excess, l1_bound  # the jail scores with them too

__all__ = [
    "online_binpack",
    "l1_bound",
    "best_fit_priority",
    "binpack_features",
    "binpack_theta",
    "binpack_excess",
    "tsp_theta",
    "knapsack_theta",
    "knapsack_optimum",
    "cvrp_theta",
    "linear",
    "distance_matrix",
    "tsp_features",
    "knapsack_features",
    "cvrp_features",
]


def _check_priority(p, n: int) -> np.ndarray:
    """Validate what a user ``priority`` returned: a finite numeric array of shape (n,)."""
    try:
        arr = np.asarray(p)
    except Exception as exc:  # pragma: no cover - exotic objects
        raise TypeError(f"priority must return a numeric array, got {type(p).__name__}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(
            f"priority must return a numeric array, got {type(p).__name__} of dtype {arr.dtype}"
        )
    if arr.shape != (n,):
        raise ValueError(
            f"priority must return an array of shape ({n},) (one score per feasible bin), "
            f"got shape {arr.shape}"
        )
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("priority returned NaN or infinite values")
    return arr


def online_binpack(priority, items: np.ndarray, capacity: float) -> int:
    """FunSearch-style online bin packing: for each item in order, bins = remaining capacities
    of the open bins that fit it plus one fresh bin of full capacity; the item goes to the bin
    with the highest ``priority(item, bins)`` (ties to the lowest index). Returns bins used.

    As in FunSearch / LLM4AD, ``len(items)`` bins of capacity ``capacity`` are preallocated;
    the feasible ones (``bins - item >= 0``) are passed in index order, so the first unused
    bin is the lowest-index fresh bin. Raises TypeError/ValueError when ``priority`` does not
    return a finite numeric array with one entry per feasible bin.
    """
    if not callable(priority):
        raise TypeError(f"priority must be callable, got {type(priority).__name__}")
    items = np.asarray(items, dtype=np.float64)
    if items.ndim != 1:
        raise ValueError(f"items must be 1-D, got shape {items.shape}")
    capacity = float(capacity)
    if not np.all(np.isfinite(items)) or np.any(items <= 0) or np.any(items > capacity):
        raise ValueError("items must be finite, positive and no larger than capacity")
    bins = np.full(len(items), capacity, dtype=np.float64)
    for item in items:
        valid = np.nonzero(bins - item >= 0)[0]
        p = _check_priority(priority(item, bins[valid]), len(valid))
        best = valid[int(np.argmax(p))]
        bins[best] -= item
    return int(np.count_nonzero(bins != capacity))


def best_fit_priority(item: float, bins: np.ndarray) -> np.ndarray:
    """Classic best fit: prefer the bin left with the least room, ``-(bins - item)``."""
    return -(bins - item)


def linear(feats: list[np.ndarray], theta: np.ndarray) -> np.ndarray:
    """``sum_k theta[k] * feats[k]`` in a fixed order (the JAX code uses the same order)."""
    p = feats[0] * theta[0]
    for k in range(1, len(feats)):
        p = p + feats[k] * theta[k]
    return p


# ---------------------------------------------------------------------------------------
# Bin packing
# ---------------------------------------------------------------------------------------


def binpack_features(item, bins, capacity: float):
    """Per-bin features (normalised by capacity) of placing ``item`` into ``bins``.

    slack s = (bins - item)/capacity, s**2, exact fit, fresh bin, awkward leftover
    (0 < s <= 0.1), item/capacity * s.
    """
    s = (bins - item) / capacity
    return [
        s,
        s * s,
        (s == 0).astype(s.dtype),
        (bins == capacity).astype(s.dtype),
        ((s > 0) & (s <= 0.1)).astype(s.dtype),
        (item / capacity) * s,
    ]


def binpack_theta(theta, items: np.ndarray, capacity: float) -> int:
    """Bins used by the linear bin-packing heuristic ``theta`` (same rules as online_binpack)."""
    theta = np.asarray(theta, dtype=np.float64)
    return online_binpack(
        lambda item, bins: linear(binpack_features(item, bins, capacity), theta), items, capacity
    )


# ---------------------------------------------------------------------------------------
# TSP (LLM4AD constructive TSP: select the next node from the current one)
# ---------------------------------------------------------------------------------------


def distance_matrix(coords: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of ``coords`` (n, 2)."""
    diff = coords[:, None, :] - coords[None, :, :]
    return np.sqrt(np.sum(diff * diff, axis=-1))


def _tour_start(theta, coords) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``theta`` as float64, the distance matrix of ``coords`` and the unvisited mask of a
    tour that starts at node 0 (the TSP start, the CVRP depot)."""
    theta = np.asarray(theta, dtype=np.float64)
    dist = distance_matrix(np.asarray(coords, dtype=np.float64))
    unvisited = np.ones(len(dist), dtype=bool)
    unvisited[0] = False
    return theta, dist, unvisited


def tsp_features(dist: np.ndarray, cur: int, unvisited: np.ndarray) -> list[np.ndarray]:
    """Per-node features of moving from ``cur`` to each node (all n, masked by the caller).

    d(cur, j), d(j, start), mean d(j, k) over the other unvisited k, min d(j, k) over the other
    unvisited k (0 when j is the last one), d(cur, j)**2.
    """
    u = unvisited.astype(dist.dtype)
    n_other = np.maximum(np.sum(u) - 1.0, 1.0)
    mean_other = (dist @ u) / n_other
    masked = np.where(unvisited[None, :] & ~np.eye(len(u), dtype=bool), dist, np.inf)
    min_other = np.min(masked, axis=1)
    min_other = np.where(np.isfinite(min_other), min_other, 0.0)
    d = dist[cur]
    return [d, dist[:, 0], mean_other, min_other, d * d]


def tsp_theta(theta, coords: np.ndarray) -> tuple[float, np.ndarray]:
    """Tour length and tour (starting at node 0) of the linear next-node heuristic ``theta``."""
    theta, dist, unvisited = _tour_start(theta, coords)
    cur, length, tour = 0, 0.0, [0]
    for _ in range(len(dist) - 1):
        p = linear(tsp_features(dist, cur, unvisited), theta)
        p = np.where(unvisited, p, -np.inf)
        nxt = int(np.argmax(p))
        length += dist[cur, nxt]
        unvisited[nxt] = False
        tour.append(nxt)
        cur = nxt
    length += dist[cur, 0]
    return float(length), np.asarray(tour)


# ---------------------------------------------------------------------------------------
# Knapsack (LLM4AD constructive knapsack)
# ---------------------------------------------------------------------------------------


def knapsack_features(weights, values, remaining, capacity: float) -> list[np.ndarray]:
    """Per-item features: value/weight, value/100, weight/capacity, weight/remaining,
    (remaining - weight)/capacity (room left after adding the item)."""
    return [
        values / weights,
        values / 100.0,
        weights / capacity,
        weights / np.maximum(remaining, 1e-9),
        (remaining - weights) / capacity,
    ]


def knapsack_theta(theta, weights, values, capacity: float) -> tuple[float, np.ndarray]:
    """Value and chosen-item mask of greedily adding the highest-priority item that fits."""
    theta = np.asarray(theta, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    taken = np.zeros(len(w), dtype=bool)
    remaining = float(capacity)
    for _ in range(len(w)):
        feasible = ~taken & (w <= remaining)
        if not feasible.any():
            break
        p = linear(knapsack_features(w, v, remaining, capacity), theta)
        j = int(np.argmax(np.where(feasible, p, -np.inf)))
        taken[j] = True
        remaining -= w[j]
    return float(np.sum(v[taken])), taken


def knapsack_optimum(weights, values, capacity: int) -> float:
    """Exact 0/1 knapsack optimum by dynamic programming over integer capacities."""
    w = np.asarray(weights).astype(np.int64)
    v = np.asarray(values, dtype=np.float64)
    cap = int(capacity)
    best = np.zeros(cap + 1)
    for wi, vi in zip(w, v, strict=True):
        if wi <= cap:
            best[wi:] = np.maximum(best[wi:], best[: cap + 1 - wi] + vi)
    return float(best[cap])


# ---------------------------------------------------------------------------------------
# CVRP (LLM4AD constructive CVRP: nearest feasible customer, back to the depot when stuck)
# ---------------------------------------------------------------------------------------


def cvrp_features(dist, demands, cur: int, load, capacity: float) -> list[np.ndarray]:
    """Per-node features: d(cur, j), d(j, depot), demand/load left, (load - demand)/capacity,
    d(cur, j)**2."""
    d = dist[cur]
    return [d, dist[:, 0], demands / np.maximum(load, 1e-9), (load - demands) / capacity, d * d]


def cvrp_theta(theta, coords, demands, capacity: float) -> tuple[float, list[list[int]]]:
    """Total length and routes (customer lists, depot 0 implicit) of the linear heuristic."""
    theta, dist, unvisited = _tour_start(theta, coords)
    demands = np.asarray(demands, dtype=np.float64)
    cur, load, length = 0, float(capacity), 0.0
    routes: list[list[int]] = [[]]
    while unvisited.any():
        feasible = unvisited & (demands <= load)
        if not feasible.any():
            length += dist[cur, 0]
            cur, load = 0, float(capacity)
            routes.append([])
            continue
        p = linear(cvrp_features(dist, demands, cur, load, capacity), theta)
        j = int(np.argmax(np.where(feasible, p, -np.inf)))
        length += dist[cur, j]
        load -= demands[j]
        unvisited[j] = False
        routes[-1].append(j)
        cur = j
    length += dist[cur, 0]
    return float(length), [r for r in routes if r]
