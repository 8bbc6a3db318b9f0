"""Padded random DAG families for causal priors: Erdos-Renyi, scale-free, Watts-Strogatz,
stochastic block model and random geometric graphs, with a traced number of nodes.

Every generator works on ``d_max`` node slots (static) of which the first ``d`` (traced)
are active; padding slots have no edges. Graphs are returned as boolean adjacencies in
the LiNGAM convention, ``a[i, j]`` = the edge ``j -> i``. The undirected families
(Watts-Strogatz, SBM, geometric) are oriented acyclically by a uniformly random order
of the active nodes (an edge points from the earlier to the later node); ER and
scale-free are built in a construction order as in :mod:`.dags` (:func:`erdos_renyi_dag`,
:func:`scale_free_dag`, which these padded versions match in law when ``d = d_max``).
Finally the active labels are permuted uniformly, so a node's label says nothing about
its position in the causal order.

``edges_per_node`` ``k`` (traced) sets the expected number of edges to about ``k d``
(average total degree ``2 k``) in every family. Family codes (``GRAPHS``) index the
families for :func:`sample_graph`, which draws any family from a traced code, so a
mixture over families is one compiled function.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PRNGKeyArray

__all__ = ["GRAPHS", "active_mask", "relabel", "orient_by_order", "er_graph", "sf_graph",
           "ws_graph", "sbm_graph", "geometric_graph", "graph_family", "sample_graph",
           "edge_count"]

#: Graph family codes, in the order :func:`sample_graph` indexes them.
GRAPHS = ("er", "sf", "ws", "sbm", "grg")

#: Largest attachment number / lattice half-degree the padded generators support.
MAX_HALF_DEGREE = 4


def _check_dmax(d_max) -> int:
    if not isinstance(d_max, int) or isinstance(d_max, bool) or d_max < 2:
        raise ValueError(f"`d_max` must be a Python int >= 2; got {d_max!r}")
    return d_max


def active_mask(d_max: int, d) -> Bool[Array, " d_max"]:
    """``arange(d_max) < d``: the active node slots.

    Differentiable: no: boolean output.

    Args:
        d_max: node slots (static).
        d: active nodes (may be traced).

    Returns:
        ``(d_max,)`` bool mask.
    """
    return jnp.arange(d_max) < d


def relabel(key: PRNGKeyArray, a: Bool[Array, "d d"], d) -> Bool[Array, "d d"]:
    """Permute the labels of the first ``d`` nodes of ``a`` uniformly (padding stays
    last): ``out[perm[p], perm[q]] = a[p, q]``.

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key of the permutation.
        a: ``(d_max, d_max)`` boolean adjacency.
        d: active nodes (may be traced).

    Returns:
        The relabelled ``(d_max, d_max)`` adjacency.
    """
    d_max = a.shape[0]
    act = active_mask(d_max, d)
    u = jnp.where(act, jax.random.uniform(key, (d_max,), jnp.float32),
                  2.0 + jnp.arange(d_max, dtype=jnp.float32))
    perm = jnp.argsort(jnp.argsort(u))  # a random bijection of the active slots
    inv = jnp.argsort(perm)
    return a[inv][:, inv]


def orient_by_order(key: PRNGKeyArray, u: Bool[Array, "d d"], d) -> Bool[Array, "d d"]:
    """Orient a symmetric adjacency ``u`` by a uniformly random order of the active nodes:
    ``a[i, j] = u[i, j] and rank[j] < rank[i]`` (acyclic).

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key of the order.
        u: ``(d_max, d_max)`` symmetric boolean adjacency.
        d: active nodes (may be traced); edges touching padding slots are dropped.

    Returns:
        ``(d_max, d_max)`` boolean DAG adjacency.
    """
    d_max = u.shape[0]
    rank = jax.random.uniform(key, (d_max,), jnp.float32)
    act = active_mask(d_max, d)
    ok = act[:, None] & act[None, :] & ~jnp.eye(d_max, dtype=bool)
    return u & ok & (rank[None, :] < rank[:, None])


def er_graph(key: PRNGKeyArray, d_max: int, d, edges_per_node) -> Bool[Array, "d d"]:
    """Erdos-Renyi DAG: each pair of active nodes is an edge with probability
    ``p = min(1, 2 k / (d - 1))`` (expected ``k d`` edges), oriented by a random order.

    Reference: P. Erdos, A. Renyi, Publ. Math. Debrecen 6, 1959.

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key.
        d_max: node slots (static, >= 2).
        d: active nodes (traced int, ``2 <= d <= d_max``).
        edges_per_node: ``k`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``, ``a[i, j]``: ``j -> i``.
    """
    d_max = _check_dmax(d_max)
    k_e, k_o = jax.random.split(key)
    dm1 = jnp.maximum(jnp.asarray(d, jnp.float32) - 1.0, 1.0)
    p = jnp.clip(2.0 * edges_per_node / dm1, 0.0, 1.0)
    tril = jnp.tril(jnp.ones((d_max, d_max), bool), -1)
    low = (jax.random.uniform(k_e, (d_max, d_max), jnp.float32) < p) & tril
    return orient_by_order(k_o, low | low.T, d)


def sf_graph(key: PRNGKeyArray, d_max: int, d, edges_per_node) -> Bool[Array, "d d"]:
    """Scale-free DAG by preferential attachment (Barabasi-Albert): node ``i`` (in
    arrival order) attaches to ``m = clip(round(k), 1, 4)`` distinct earlier nodes drawn
    with probability proportional to ``degree + 1`` (Gumbel top-k), edges pointing from
    the earlier node; ``sum_i min(i, m)`` edges exactly. Labels are then permuted.

    Reference: A.-L. Barabasi, R. Albert, Science 286, 1999.

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key.
        d_max: node slots (static, >= 2).
        d: active nodes (traced int, ``2 <= d <= d_max``).
        edges_per_node: ``k`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``, ``a[i, j]``: ``j -> i``.
    """
    d_max = _check_dmax(d_max)
    M = min(MAX_HALF_DEGREE, d_max - 1)
    m = jnp.clip(jnp.round(edges_per_node), 1, M).astype(jnp.int32)
    k_att, k_perm = jax.random.split(key)
    idx = jnp.arange(d_max)
    gumbels = jax.random.gumbel(k_att, (d_max, d_max), jnp.float32)
    act = active_mask(d_max, d)

    def step(deg, inp):
        i, g = inp
        earlier = idx < i
        scores = jnp.where(earlier, jnp.log(deg + 1.0) + g, -jnp.inf)
        top, picked = jax.lax.top_k(scores, M)
        valid = jnp.isfinite(top) & (jnp.arange(M) < m) & act[i]
        row = jnp.zeros((d_max,), bool).at[picked].max(valid)
        deg = deg + row + jnp.where(idx == i, jnp.sum(valid), 0)
        return deg, row

    _, rows = jax.lax.scan(step, jnp.zeros((d_max,), jnp.float32), (idx, gumbels))
    return relabel(k_perm, rows, d)


def ws_graph(key: PRNGKeyArray, d_max: int, d, edges_per_node, *, rewire=0.3
             ) -> Bool[Array, "d d"]:
    """Watts-Strogatz small world: a ring of the ``d`` active nodes, each joined to its
    ``h = clip(round(k), 1, 4)`` nearest neighbours on either side (``h d`` edges when
    ``d > 2 h``), then each lattice edge ``(i, i + s)`` rewired with probability
    ``rewire`` to ``(i, u)``, ``u`` uniform among the other nodes (a rewired edge that
    duplicates another is merged); oriented by a random order, labels permuted.

    Reference: D. J. Watts, S. H. Strogatz, "Collective dynamics of 'small-world'
    networks", Nature 393, 1998.

    Differentiable: no: boolean adjacency.

    Args:
        key, d_max, d, edges_per_node: as :func:`er_graph`.
        rewire: rewiring probability in ``[0, 1]`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``.
    """
    d_max = _check_dmax(d_max)
    H = min(MAX_HALF_DEGREE, d_max - 1)
    h = jnp.clip(jnp.round(edges_per_node), 1, H).astype(jnp.int32)
    k_r, k_u, k_o, k_p = jax.random.split(key, 4)
    di = jnp.maximum(jnp.asarray(d, jnp.int32), 2)
    i = jnp.arange(d_max)[:, None]
    s = jnp.arange(1, H + 1)[None, :]
    j = (i + s) % di
    off = jnp.floor(jax.random.uniform(k_u, (d_max, H), jnp.float32) * (di - 1)).astype(jnp.int32)
    other = (i + 1 + jnp.minimum(off, di - 2)) % di
    j = jnp.where(jax.random.uniform(k_r, (d_max, H), jnp.float32) < rewire, other, j)
    # a lattice edge exists for s <= h, both ends active; s > d/2 would repeat an edge
    ok = (s <= h) & (i < di) & (2 * s <= di) & ~((2 * s == di) & (i >= di // 2))
    ii = jnp.broadcast_to(i, (d_max, H))
    u = jnp.zeros((d_max, d_max), bool).at[ii, j].max(ok)
    u = u | u.T
    return relabel(k_p, orient_by_order(k_o, u, d), d)


def sbm_graph(key: PRNGKeyArray, d_max: int, d, edges_per_node, *, n_blocks=3,
              ratio=10.0) -> Bool[Array, "d d"]:
    """Stochastic block model: each active node joins one of ``n_blocks`` blocks
    uniformly; a pair is an edge with probability ``p_in`` within a block and
    ``p_out = p_in / ratio`` across blocks, where ``p_out = 2 k / ((d - 1) (ratio / B +
    1 - 1 / B))`` makes the expected total degree ``(d - 1) (p_in / B + p_out (1 - 1/B))
    = 2 k`` (unless ``p_in`` clips at 1); oriented by a random order.

    Reference: P. W. Holland, K. B. Laskey, S. Leinhardt, "Stochastic blockmodels: first
    steps", Social Networks 5, 1983.

    Differentiable: no: boolean adjacency.

    Args:
        key, d_max, d, edges_per_node: as :func:`er_graph`.
        n_blocks: number of blocks ``B >= 1`` (traced).
        ratio: ``p_in / p_out >= 1`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``.
    """
    d_max = _check_dmax(d_max)
    k_b, k_e, k_o = jax.random.split(key, 3)
    B = jnp.maximum(jnp.asarray(n_blocks, jnp.int32), 1)
    block = jnp.floor(jax.random.uniform(k_b, (d_max,), jnp.float32) * B).astype(jnp.int32)
    dm1 = jnp.maximum(jnp.asarray(d, jnp.float32) - 1.0, 1.0)
    inv_b = 1.0 / B.astype(jnp.float32)
    p_out = 2.0 * edges_per_node / (dm1 * (ratio * inv_b + 1.0 - inv_b))
    p_in = jnp.clip(p_out * ratio, 0.0, 1.0)
    p = jnp.where(block[:, None] == block[None, :], p_in, jnp.clip(p_out, 0.0, 1.0))
    low = jax.random.uniform(k_e, (d_max, d_max), jnp.float32) < p
    low = low & jnp.tril(jnp.ones((d_max, d_max), bool), -1)
    return orient_by_order(k_o, low | low.T, d)


def geometric_graph(key: PRNGKeyArray, d_max: int, d, edges_per_node
                    ) -> Bool[Array, "d d"]:
    """Random geometric graph on the unit torus: active nodes uniform in ``[0, 1)^2``,
    joined when their torus distance is below ``r = sqrt(2 k / (pi (d - 1)))`` (capped at
    1/2), so each node has ``(d - 1) pi r^2 = 2 k`` neighbours in expectation exactly (no
    boundary effect on the torus); oriented by a random order.

    Reference: M. Penrose, "Random Geometric Graphs", Oxford University Press, 2003.

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key.
        d_max: node slots (static, >= 2).
        d: active nodes (traced int, ``2 <= d <= d_max``).
        edges_per_node: ``k`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``, ``a[i, j]``: ``j -> i``.
    """
    d_max = _check_dmax(d_max)
    k_x, k_o = jax.random.split(key)
    pts = jax.random.uniform(k_x, (d_max, 2), jnp.float32)
    diff = jnp.abs(pts[:, None, :] - pts[None, :, :])
    diff = jnp.minimum(diff, 1.0 - diff)
    dist2 = jnp.sum(diff ** 2, axis=-1)
    dm1 = jnp.maximum(jnp.asarray(d, jnp.float32) - 1.0, 1.0)
    r2 = jnp.minimum(2.0 * edges_per_node / (math.pi * dm1), 0.25)
    return orient_by_order(k_o, dist2 < r2, d)


def graph_family(key: PRNGKeyArray, family: int, d_max: int, d, edges_per_node
                 ) -> Bool[Array, "d d"]:
    """A DAG of family ``GRAPHS[family]`` with a *static* ``family`` code, drawing the WS
    rewiring probability and the SBM block count / ratio from ``key``:
    ``rewire ~ U[0.1, 0.5]``, ``B ~ U{2, 3, 4}``, ``ratio ~ U[4, 20]`` (the branches of
    :func:`sample_graph`).

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key.
        family: int code in ``[0, 5)`` (static), see :data:`GRAPHS`.
        d_max: node slots (static).
        d: active nodes (traced).
        edges_per_node: ``k`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``.
    """
    d_max = _check_dmax(d_max)
    if not isinstance(family, int) or not 0 <= family < len(GRAPHS):
        raise ValueError(f"`family` must be a static int in [0, {len(GRAPHS)}); got {family!r}")
    k_g, k_a, k_b, k_c = jax.random.split(key, 4)
    k = jnp.asarray(edges_per_node, jnp.float32)
    if family == 0:
        return er_graph(k_g, d_max, d, k)
    if family == 1:
        return sf_graph(k_g, d_max, d, k)
    if family == 2:
        rewire = jax.random.uniform(k_a, (), jnp.float32, 0.1, 0.5)
        return ws_graph(k_g, d_max, d, k, rewire=rewire)
    if family == 3:
        blocks = jax.random.randint(k_b, (), 2, 5)
        ratio = jax.random.uniform(k_c, (), jnp.float32, 4.0, 20.0)
        return sbm_graph(k_g, d_max, d, k, n_blocks=blocks, ratio=ratio)
    return geometric_graph(k_g, d_max, d, k)


def sample_graph(key: PRNGKeyArray, family: Int[Array, ""], d_max: int, d,
                 edges_per_node) -> Bool[Array, "d d"]:
    """A DAG of family ``GRAPHS[family]`` (traced code, so one compiled function serves a
    mixture of families: a ``lax.switch`` over :func:`graph_family`; under ``vmap`` every
    family is computed and one selected, :func:`.prior.sample_tasks` groups tasks by
    family instead).

    Differentiable: no: boolean adjacency.

    Args:
        key: PRNG key.
        family: int code in ``[0, 5)`` (traced), see :data:`GRAPHS`.
        d_max: node slots (static).
        d: active nodes (traced).
        edges_per_node: ``k`` (traced).

    Returns:
        Boolean adjacency ``(d_max, d_max)``.
    """
    d_max = _check_dmax(d_max)
    fam = jnp.clip(jnp.asarray(family, jnp.int32), 0, len(GRAPHS) - 1)
    return jax.lax.switch(fam, [functools.partial(graph_family, key, f, d_max, d, edges_per_node)
                                for f in range(len(GRAPHS))])


def edge_count(a: Bool[Array, "d d"]) -> Int[Array, ""]:
    """Number of edges of a boolean adjacency.

    Differentiable: no: an integer count.
    """
    return jnp.sum(a.astype(jnp.int32))
