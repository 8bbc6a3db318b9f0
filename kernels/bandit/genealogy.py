"""Genealogy (DAG) credit and the Ballad routing policy built on it."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..checks import check_in_range, fail, is_traced
from ._checks import check_arms, check_count, check_observation, check_positive, check_unit
from ._core import Policy, make_select, safe_div

__all__ = ["BalladState", "propagate_credit", "credit_per_arm", "ballad", "ballad_add_roots"]


def _check_parents(parents, name: str = "parents"):
    parents = jnp.asarray(parents)
    if parents.ndim != 2 or not jnp.issubdtype(parents.dtype, jnp.integer):
        raise ValueError(f"`{name}` must be an integer array of shape (n_nodes, max_parents) "
                         f"padded with -1; got dtype {parents.dtype}, shape {parents.shape}")
    node = jnp.arange(parents.shape[0])[:, None]
    bad = (parents < -1) | (parents >= node)
    return fail(parents, jnp.any(bad),
                 f"`{name}`: every parent id must be -1 (padding) or an earlier node "
                 f"(0 <= parent < node): the genealogy has a cycle or is not in "
                 f"topological order")


def propagate_credit(parents: Int[Array, "N P"], gain: Float[Array, " N"], *,
                     decay: float) -> Float[Array, " N"]:
    """Credit through a genealogy DAG: ``c_u = gain_u + decay * sum_{v child of u}
    c_v / |parents(v)|``, i.e. ``c = (I - decay A^T)^{-1} gain`` with
    ``A[v, u] = 1 / |parents(v)|``.

    Nodes are ``0..N-1`` in topological order (every parent id is smaller than its
    child's); ``parents`` is padded with -1 (fixed capacity: unused nodes have gain 0).
    One reverse ``lax.scan``, O(N P).

    Differentiable: yes, in gain.

    Args:
        parents: int parent ids ``(N, P)``, -1 padded, each smaller than its node's id.
        gain: each node's own gain ``(N,)``.
        decay: the factor on credit passed from a child to its parents, finite and
            ``>= 0`` (a concrete value is checked at once, a traced one at run time).

    Returns:
        The credit ``c`` ``(N,)``.

    Raises:
        ValueError: a malformed genealogy, ``gain`` of the wrong shape or not finite, a
            NaN, infinite or negative ``decay``.
    """
    check_in_range(decay, "decay", lo=0.0)
    parents = _check_parents(parents)
    gain = jnp.asarray(gain)
    if gain.shape != parents.shape[:1]:
        raise ValueError(f"`gain` must have shape ({parents.shape[0]},); got {gain.shape}")
    gain = fail(gain, ~jnp.all(jnp.isfinite(gain)), "`gain` contains NaN or inf values")
    if is_traced(decay):
        gain = fail(gain, ~(jnp.isfinite(decay) & (decay >= 0)),
                    "`decay` must be >= 0 and finite")
    n_nodes, n_par = parents.shape
    valid = parents >= 0
    share = 1.0 / jnp.maximum(valid.sum(1), 1).astype(gain.dtype)

    def body(acc, v):
        c_v = gain[v] + decay * acc[v]
        contrib = jnp.where(valid[v], c_v * share[v], 0)
        acc = acc.at[jnp.where(valid[v], parents[v], n_nodes)].add(contrib, mode="drop")
        return acc, c_v

    _, c = jax.lax.scan(body, jnp.zeros(n_nodes, gain.dtype), jnp.arange(n_nodes),
                        reverse=True)
    return c


def credit_per_arm(credit: Float[Array, " N"], node_arm: Int[Array, " N"], *, n_arms: int,
                   node_time: Int[Array, " N"] | None = None, now=None,
                   gamma: float = 1.0) -> Float[Array, " K"]:
    """Sum node credit per generating arm: ``C_k = sum_{v: arm(v)=k} c_v *
    gamma^(now - t_v)``. Nodes with arm -1 (roots, padding) count for no arm.

    Differentiable: yes, in credit.

    Args:
        credit: node credit ``(N,)`` (e.g. from :func:`propagate_credit`).
        node_arm: the arm that produced each node ``(N,)``, -1 for none.
        n_arms: number of arms ``K`` (static).
        node_time: optional step each node was produced at ``(N,)``.
        now: the current step, required with ``node_time``.
        gamma: discount per step of age.

    Returns:
        The credit per arm ``(K,)``.
    """
    credit = jnp.asarray(credit)
    node_arm = jnp.asarray(node_arm)
    if node_arm.shape != credit.shape:
        raise ValueError(f"`node_arm` must have shape {credit.shape}; got {node_arm.shape}")
    w = credit
    if node_time is not None:
        if now is None:
            raise ValueError("`now` is required with `node_time`")
        w = credit * jnp.asarray(gamma, credit.dtype) ** (now - jnp.asarray(node_time))
    onehot = node_arm[:, None] == jnp.arange(n_arms)[None, :]
    return jnp.where(onehot, w[:, None], 0).sum(0)


# --------------------------------------------------------------------------- Ballad


class BalladState(NamedTuple):
    """The genealogy the policy learns from (fixed capacity ``C``).

    Node ``i`` is the ``i``-th observation (roots first): its parents, its score (the
    normalised reward), its gain over its best parent, the arm that produced it (-1 for a
    root) and the step it was produced at."""

    parents: Int[Array, "C P"]
    score: Float[Array, " C"]
    gain: Float[Array, " C"]
    arm: Int[Array, " C"]
    time: Int[Array, " C"]
    n_nodes: Int[Array, ""]
    pulls: Int[Array, " K"]
    t: Int[Array, ""]


def _weighted_quantile(values, weights, q):
    """Row-wise weighted ``q``-quantile (lower) of ``values`` (C,) under ``weights`` (K, C);
    rows with zero total weight give 0."""
    order = jnp.argsort(values)
    v = values[order]
    cw = jnp.cumsum(weights[:, order], axis=1)
    total = cw[:, -1:]
    own = weights[:, order] > 0  # cw only grows at the arm's own nodes; q = 0 needs this
    first = jnp.argmax((cw >= q * total - 1e-12 * total) & own, axis=1)
    return jnp.where(total[:, 0] > 0, v[first], 0)


def ballad(n_arms: int, *, capacity: int, max_parents: int = 2, gamma: float = 0.95,
           alpha: float = 0.5, decay: float = 0.5, q: float = 0.9,
           extreme: bool = True, credit: bool = True, discount: bool = True,
           dtype=jnp.float32) -> Policy:
    """The Ballad routing policy: extreme-value + discounted index with DAG credit.

    Every arm pull adds one node to the genealogy: ``update(state, arm, reward,
    parents)`` with ``reward`` the child's normalised score in [0, 1] and ``parents`` the
    (P,) ids of the nodes it was produced from (-1 padded). With node weights
    ``w_v = gamma^(t - t_v)`` (``discount``), discounted pulls ``N_k = sum_{arm(v)=k} w_v``,
    credit ``c = propagate_credit(parents, gain, decay)`` (``credit``; else ``c = gain``)
    where ``gain_v = max(0, score_v - max score of v's parents)``::

        index_k = sum_{arm(v)=k} w_v c_v / N_k                   (discounted credit)
                + Q_q({score_v : arm(v)=k}; weights w)           (extreme: a high quantile)
                + sqrt(2 alpha ln(sum_k N_k) / N_k)

    The quantile term favours arms that produce rare high scores over arms with a stable
    average (``extreme=False`` drops it). An arm never pulled has index +inf. Roots (the
    initial population) are added with :func:`ballad_add_roots`. Updates beyond
    ``capacity`` nodes are counted in ``pulls`` but not stored.

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        capacity: most nodes stored (static).
        max_parents: parents per node, ``P`` (static).
        gamma: node discount per step, in ``(0, 1]``.
        alpha: exploration weight (``>= 0``).
        decay: credit decay along the genealogy (``>= 0``).
        q: quantile level of the extreme term, in ``[0, 1]``.
        extreme: include the quantile term (static).
        credit: propagate credit through the genealogy (static).
        discount: discount node weights by age (static).
        dtype: float dtype of the statistics (static).

    Returns:
        A :class:`Policy`.
    """
    n_arms = check_arms(n_arms)
    gamma = check_unit("gamma", gamma)
    q = check_unit("q", q, low_open=False)
    alpha = check_positive("alpha", alpha)
    decay = check_positive("decay", decay)
    capacity, max_parents = check_count("capacity", capacity), int(max_parents)
    g = gamma if discount else 1.0

    def init() -> BalladState:
        return BalladState(jnp.full((capacity, max_parents), -1, jnp.int32),
                           jnp.zeros(capacity, dtype), jnp.zeros(capacity, dtype),
                           jnp.full(capacity, -1, jnp.int32), jnp.zeros(capacity, jnp.int32),
                           jnp.zeros((), jnp.int32), jnp.zeros(n_arms, jnp.int32),
                           jnp.zeros((), jnp.int32))

    def index(key, state: BalladState) -> Float[Array, " K"]:
        del key
        live = jnp.arange(capacity) < state.n_nodes
        w = jnp.where(live, jnp.asarray(g, dtype) ** (state.t - state.time), 0)
        onehot = (state.arm[None, :] == jnp.arange(n_arms)[:, None]) & live[None, :]
        wk = jnp.where(onehot, w[None, :], 0)  # (K, C)
        counts = wk.sum(1)
        c = propagate_credit(state.parents, state.gain, decay=decay) if credit else state.gain
        value = safe_div(wk @ c, counts)
        if extreme:
            value = value + _weighted_quantile(state.score, wk, q)
        n = jnp.maximum(counts.sum(), 1)
        bonus = jnp.sqrt(2 * alpha * jnp.log(n) * safe_div(1.0, counts))
        return jnp.where((state.pulls > 0) & (counts > 0), value + bonus, jnp.inf)

    def update(state: BalladState, arm, reward, parents=None) -> BalladState:
        arm, reward = check_observation(n_arms, arm, reward, dtype)
        parents = _check_node_parents(parents, max_parents, state.n_nodes)
        state = _ballad_insert(state, arm, reward, parents)
        return state._replace(pulls=state.pulls.at[arm].add(1), t=state.t + 1)

    return Policy(init, index, make_select(index), update, n_arms)


def _ballad_insert(state: BalladState, arm, reward, parents) -> BalladState:
    capacity = state.score.shape[0]
    valid = parents >= 0
    best_parent = jnp.max(jnp.where(valid, state.score[jnp.maximum(parents, 0)], 0))
    gain = jnp.maximum(reward - best_parent, 0)
    slot = jnp.where(state.n_nodes < capacity, state.n_nodes, capacity)  # dropped if full
    return state._replace(
        parents=state.parents.at[slot].set(parents, mode="drop"),
        score=state.score.at[slot].set(reward, mode="drop"),
        gain=state.gain.at[slot].set(gain, mode="drop"),
        arm=state.arm.at[slot].set(arm, mode="drop"),
        time=state.time.at[slot].set(state.t, mode="drop"),
        n_nodes=jnp.minimum(state.n_nodes + 1, capacity))


def _check_node_parents(parents, max_parents: int, n_nodes):
    if parents is None:
        return jnp.full(max_parents, -1, jnp.int32)
    parents = jnp.asarray(parents)
    if parents.shape != (max_parents,) or not jnp.issubdtype(parents.dtype, jnp.integer):
        raise ValueError(f"`parents` must be an integer array of shape ({max_parents},) "
                         f"padded with -1; got dtype {parents.dtype}, shape {parents.shape}")
    parents = fail(parents, jnp.any((parents < -1) | (parents >= n_nodes)),
                    "`parents`: each id must be -1 or an existing node (0 <= id < n_nodes)")
    return parents.astype(jnp.int32)


def ballad_add_roots(state: BalladState, scores: Float[Array, " R"]) -> BalladState:
    """Add the initial population (no parents, no generating arm) as nodes ``n_nodes ..
    n_nodes + R - 1`` of a :func:`ballad` state.

    Differentiable: yes, in scores.

    Args:
        state: a :class:`BalladState`.
        scores: the roots' normalised scores ``(R,)``.

    Returns:
        The updated state (roots beyond ``capacity`` are dropped).
    """
    scores = jnp.asarray(scores)
    if scores.ndim != 1:
        raise ValueError(f"`scores` must be 1-D; got shape {scores.shape}")
    none = jnp.full(state.parents.shape[1], -1, jnp.int32)

    def body(st, s):
        return _ballad_insert(st, jnp.int32(-1), s.astype(st.score.dtype), none), None

    return jax.lax.scan(body, state, scores)[0]

