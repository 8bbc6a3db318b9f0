"""Random weighted DAGs in the LiNGAM convention (``b[i, j]``: the weight of ``j -> i``):
Erdos-Renyi and scale-free generators, the weight law, acyclicity and ``(I - b)^{-1}``."""

from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from ..checks import check_in_range
from ._checks import check_d as _check_d
from ._checks import float_dtype as _float_dtype

__all__ = ["GraphKind", "edge_weights", "erdos_renyi_dag", "scale_free_dag", "random_dag",
           "is_acyclic", "dag_inverse"]

GraphKind = Literal["er", "sf"]


def _check_w_range(w_low, w_high):
    if isinstance(w_low, int | float) and isinstance(w_high, int | float):
        if not (0 <= w_low <= w_high and math.isfinite(w_high)):
            raise ValueError(f"need finite 0 <= w_low <= w_high; got w_low={w_low}, "
                             f"w_high={w_high}")


def edge_weights(
    key: PRNGKeyArray, shape: tuple[int, ...], *, w_low=0.5, w_high=2.0, dtype=None
) -> Float[Array, "..."]:
    """Edge weights ``s * m`` with a uniformly random sign ``s`` and magnitude
    ``m ~ U[w_low, w_high]`` (the weight law of Shimizu et al. 2011's simulations).

    Differentiable: yes, in w_low and w_high (the key fixes the signs and the uniforms).

    Args:
        key: PRNG key.
        shape: output shape (static).
        w_low: smallest magnitude (``0 <= w_low <= w_high``); may be traced.
        w_high: largest magnitude; may be traced.
        dtype: float dtype (default: JAX's default float).

    Returns:
        The weights, of shape ``shape``.
    """
    _check_w_range(w_low, w_high)
    dtype = _float_dtype(dtype)
    k_mag, k_sign = jax.random.split(key)
    mag = jax.random.uniform(k_mag, shape, dtype, minval=w_low, maxval=w_high)
    sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, shape), 1.0, -1.0).astype(dtype)
    return sign * mag


def _permute(key, lower: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """Relabel the nodes of a DAG given strictly lower triangular in construction order:
    node at position ``a`` of the order gets label ``perm[a]``, so
    ``b[perm[a], perm[c]] = lower[a, c]`` and ``perm`` is a topological order of ``b``."""
    d = lower.shape[0]
    perm = jax.random.permutation(key, d)
    inv = jnp.argsort(perm)
    return lower[inv][:, inv]


def _weighted(k_w, k_perm, mask: Bool[Array, "d d"], w_low, w_high,
              dtype) -> Float[Array, "d d"]:
    """The DAG with edges ``mask`` (strictly lower triangular in construction order): its
    weights drawn from :func:`edge_weights` with ``k_w``, its nodes relabelled by
    :func:`_permute` with ``k_perm``."""
    d = mask.shape[0]
    w = edge_weights(k_w, (d, d), w_low=w_low, w_high=w_high, dtype=dtype)
    return _permute(k_perm, jnp.where(mask, w, 0.0).astype(dtype))


def erdos_renyi_dag(key: PRNGKeyArray, d: int, *, edges_per_node: float = 2.0,
                    w_low: float = 0.5, w_high: float = 2.0, dtype=None) -> Float[Array, "d d"]:
    """Random Erdos-Renyi DAG with weights, in the LiNGAM convention (``b[i, j]``: j -> i).

    Each of the ``d (d - 1) / 2`` pairs (in a uniformly random topological order) is an
    edge independently with probability ``p = min(1, 2 * edges_per_node / (d - 1))``, so
    the expected number of edges is ``edges_per_node * d`` (the "ER-k" convention; the
    average total degree, in + out, is ``2 * edges_per_node``) unless ``p`` saturates at 1.

    Reference: P. Erdos, A. Renyi, "On random graphs I", Publ. Math. Debrecen 6, 1959.

    Differentiable: yes, in w_low and w_high (the key fixes the graph and the draws).

    Args:
        key: PRNG key.
        d: number of nodes (static).
        edges_per_node: expected edges per node; may be traced.
        w_low: smallest edge-weight magnitude, see :func:`edge_weights`.
        w_high: largest edge-weight magnitude.
        dtype: float dtype (default: JAX's default float).

    Returns:
        The weighted adjacency ``b`` ``(d, d)``, ``b[i, j]`` the weight of ``j -> i``.
    """
    d = _check_d(d)
    check_in_range(edges_per_node, "edges_per_node", lo=0)
    dtype = _float_dtype(dtype)
    k_edge, k_w, k_perm = jax.random.split(key, 3)
    p = jnp.clip(2.0 * jnp.asarray(edges_per_node, dtype) / max(d - 1, 1), 0.0, 1.0)
    mask = jax.random.bernoulli(k_edge, p, (d, d)) & jnp.tril(jnp.ones((d, d), bool), -1)
    return _weighted(k_w, k_perm, mask, w_low, w_high, dtype)


def scale_free_dag(key: PRNGKeyArray, d: int, *, edges_per_node: float = 2.0,
                   w_low: float = 0.5, w_high: float = 2.0, dtype=None) -> Float[Array, "d d"]:
    """Random scale-free DAG by preferential attachment (Barabasi-Albert style).

    Nodes arrive one at a time; node ``i`` attaches to ``m = max(1, round(edges_per_node))``
    distinct earlier nodes (all of them when ``i < m``), sampled without replacement with
    probability proportional to ``degree + 1`` (Gumbel top-k). Edges point from the earlier
    to the later node, so early nodes become high out-degree hubs; labels are then
    randomly permuted. The number of edges is exactly ``sum_i min(i, m)``
    ``= m d - m (m + 1) / 2`` (for ``d > m``), i.e. about ``edges_per_node * d``.

    Reference: A.-L. Barabasi, R. Albert, "Emergence of scaling in random networks",
    Science 286, 1999.

    Differentiable: yes, in w_low and w_high (the key fixes the graph and the draws).

    Args:
        key: PRNG key.
        d: number of nodes (static).
        edges_per_node: edges each new node attaches with, rounded (static).
        w_low: smallest edge-weight magnitude, see :func:`edge_weights`.
        w_high: largest edge-weight magnitude.
        dtype: float dtype (default: JAX's default float).

    Returns:
        The weighted adjacency ``b`` ``(d, d)`` (``b[i, j]``: ``j -> i``), edges pointing
        from earlier to later arrivals before the relabelling.
    """
    d = _check_d(d)
    dtype = _float_dtype(dtype)
    if not isinstance(edges_per_node, int | float) or edges_per_node <= 0:
        raise ValueError(f"`edges_per_node` must be a positive Python number for a "
                         f"scale-free graph; got {edges_per_node!r}")
    m = min(max(1, int(round(edges_per_node))), max(d - 1, 1))
    k_att, k_w, k_perm = jax.random.split(key, 3)
    idx = jnp.arange(d)
    gumbels = jax.random.gumbel(k_att, (d, d), dtype)

    def step(deg, inp):
        i, g = inp
        earlier = idx < i
        scores = jnp.where(earlier, jnp.log(deg + 1.0) + g, -jnp.inf)
        top, picked = jax.lax.top_k(scores, m)
        valid = jnp.isfinite(top)
        row = jnp.zeros((d,), bool).at[picked].set(valid)
        deg = deg + row + jnp.where(idx == i, jnp.sum(valid), 0)
        return deg, row

    _, rows = jax.lax.scan(step, jnp.zeros((d,), dtype), (idx, gumbels))
    return _weighted(k_w, k_perm, rows, w_low, w_high, dtype)


def random_dag(
    key: PRNGKeyArray,
    d: int,
    *,
    graph: GraphKind = "er",
    edges_per_node: float = 2.0,
    w_low: float = 0.5,
    w_high: float = 2.0,
    dtype=None,
) -> Float[Array, "d d"]:
    """A random weighted DAG: :func:`erdos_renyi_dag` (``graph="er"``) or
    :func:`scale_free_dag` (``graph="sf"``).

    Differentiable: yes, in w_low and w_high (the key fixes the graph and the draws).

    Args:
        key: PRNG key.
        d: number of nodes (static).
        graph: ``"er"`` or ``"sf"`` (static).
        edges_per_node: see the two generators.
        w_low: smallest edge-weight magnitude.
        w_high: largest edge-weight magnitude.
        dtype: float dtype (default: JAX's default float).

    Returns:
        The weighted adjacency ``b`` ``(d, d)``.
    """
    if graph == "er":
        fn = erdos_renyi_dag
    elif graph == "sf":
        fn = scale_free_dag
    else:
        raise ValueError(f"`graph` must be 'er' or 'sf'; got {graph!r}")
    return fn(key, d, edges_per_node=edges_per_node, w_low=w_low, w_high=w_high, dtype=dtype)


def is_acyclic(b: Float[Array, "d d"]) -> Bool[Array, ""]:
    """Whether the directed graph with edges ``b != 0`` has no cycle.

    A graph is acyclic iff its 0/1 adjacency ``A`` is nilpotent, ``A^d = 0``, i.e. no
    node reaches itself; reachability within ``2^k`` steps comes from ``ceil(log2 d)``
    boolean squarings ``R <- min(R R + R, 1)``.

    Differentiable: no: boolean output.

    Args:
        b: square (weighted) adjacency ``(d, d)``; self-loops count as cycles.

    Returns:
        A boolean scalar.
    """
    d = b.shape[-1]
    a = (b != 0).astype(jnp.float32)
    p = a
    for _ in range(max(1, math.ceil(math.log2(max(d, 2))))):
        p = jnp.minimum(p @ p + p, 1.0)  # reachability within 2^k steps
    return ~jnp.any(jnp.diagonal(p) > 0)


def dag_inverse(b: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """``(I - b)^{-1}`` for the weighted adjacency ``b`` of a DAG, by matrix products only.

    ``b`` is nilpotent (``b^d = 0``), so ``(I - b)^{-1} = sum_{k<d} b^k
    = prod_{j<J} (I + b^(2^j))`` with ``2^J >= d``: ``2 (J - 1)`` matrix products, no
    LAPACK call. (Batched LAPACK solves under ``vmap`` can deadlock jaxlib 0.10.2's CPU
    thread pool on small machines, see the pooled-LiNGAM pipeline notes.) For a cyclic
    ``b`` the result is *not* the inverse.

    Differentiable: yes, in b.

    Args:
        b: weighted adjacency of a DAG ``(d, d)``.

    Returns:
        ``(I - b)^{-1}`` ``(d, d)``, so that ``x = e @ dag_inverse(b).T`` solves
        ``x = x b^T + e`` row-wise.
    """
    d = b.shape[-1]
    eye = jnp.eye(d, dtype=b.dtype)
    inv = eye + b
    p = b
    for _ in range(max(1, math.ceil(math.log2(max(d, 2)))) - 1):
        p = p @ p
        inv = inv @ (eye + p)
    return inv

