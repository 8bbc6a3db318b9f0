"""Linear structural equation models (SEMs) with pooled interventional data.

The simulator behind the pooled-LiNGAM experiments (Paper 7: ICA-LiNGAM on simply pooled
observational + interventional data, without environment labels).

Conventions
-----------
* Adjacency matrices follow the LiNGAM convention: ``b[i, j]`` is the weight of the edge
  ``j -> i`` (so ``b[i, j] != 0`` means "j is a parent of i"), and a sample is
  ``x = b @ x + e``, i.e. ``x = (I - b)^{-1} e``; row-wise for a data matrix,
  ``x = e @ (I - b)^{-T}``.
* Every function is pure: PRNG keys are explicit arguments, shapes depend only on static
  (Python) arguments, and everything runs eagerly, under ``jit`` and under ``vmap`` (e.g.
  over a batch of keys). Arguments documented as *static* must be Python values (use
  ``functools.partial`` or ``static_argnames`` when jitting); numeric knobs such as
  ``strength`` and ``noise_scale`` may be traced arrays, so sweeping them does not
  recompile.

Contents
--------
* random DAGs: :func:`erdos_renyi_dag`, :func:`scale_free_dag`, :func:`random_dag`, with
  a random topological order and weights ``+-U[w_low, w_high]``; :func:`is_acyclic`.
* noise: :func:`sample_noise` (Gaussian, Laplace, uniform; unit variance).
* environments: :func:`intervention_targets`, :func:`simulate_pooled` (observational +
  atomic / multi-node / all-node noise interventions: variance scaling, mean shift,
  replacement of the noise distribution), returning pooled data *and* the labels.
* theory checks: :func:`excess_kurtosis`, :func:`square_correlation`,
  :func:`mean_offdiag`, :func:`hsic`, and the closed form :func:`atomic_scale_theory`.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .checks import check_finite, is_traced

__all__ = [
    "SEMData",
    "GraphKind",
    "NoiseKind",
    "InterventionKind",
    "edge_weights",
    "erdos_renyi_dag",
    "scale_free_dag",
    "random_dag",
    "is_acyclic",
    "dag_inverse",
    "sample_noise",
    "intervention_targets",
    "simulate_pooled",
    "excess_kurtosis",
    "square_correlation",
    "mean_offdiag",
    "hsic",
    "atomic_scale_theory",
]

GraphKind = Literal["er", "sf"]
NoiseKind = Literal["gaussian", "laplace", "uniform"]
InterventionKind = Literal["scale", "shift", "replace"]
_NOISES = ("gaussian", "laplace", "uniform")
_INTERVENTIONS = ("scale", "shift", "replace")


class SEMData(NamedTuple):
    """Pooled data from :func:`simulate_pooled`.

    ``x`` is what a label-free method sees. ``env`` and ``targets`` are the metadata a
    label-aware baseline needs: environment ``k`` holds the rows with ``env == k`` and
    intervenes on the nodes ``targets[k]`` (an all-False row is observational).
    ``noise`` are the sources: ``x = (I - b)^{-1} e`` row-wise.
    """

    x: Float[Array, "n d"]
    env: Int[Array, " n"]
    targets: Bool[Array, "k d"]
    noise: Float[Array, "n d"]


# ----------------------------------------------------------------------------- graphs


def _float_dtype(dtype):
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def _check_d(d) -> int:
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ValueError(f"`d` must be a positive Python int; got {d!r}")
    return d


def _check_w_range(w_low, w_high):
    if isinstance(w_low, int | float) and isinstance(w_high, int | float):
        if not 0 <= w_low <= w_high:
            raise ValueError(f"need 0 <= w_low <= w_high; got w_low={w_low}, w_high={w_high}")


def edge_weights(
    key: PRNGKeyArray, shape: tuple[int, ...], *, w_low=0.5, w_high=2.0, dtype=None
) -> Float[Array, "..."]:
    """Edge weights ``s * m`` with a uniformly random sign ``s`` and magnitude
    ``m ~ U[w_low, w_high]`` (the weight law of Shimizu et al. 2011's simulations).

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


def erdos_renyi_dag(
    key: PRNGKeyArray,
    d: int,
    *,
    edges_per_node: float = 2.0,
    w_low: float = 0.5,
    w_high: float = 2.0,
    dtype=None,
) -> Float[Array, "d d"]:
    """Random Erdos-Renyi DAG with weights, in the LiNGAM convention (``b[i, j]``: j -> i).

    Each of the ``d (d - 1) / 2`` pairs (in a uniformly random topological order) is an
    edge independently with probability ``p = min(1, 2 * edges_per_node / (d - 1))``, so
    the expected number of edges is ``edges_per_node * d`` (the "ER-k" convention; the
    average total degree, in + out, is ``2 * edges_per_node``) unless ``p`` saturates at 1.

    Reference: P. Erdos, A. Renyi, "On random graphs I", Publ. Math. Debrecen 6, 1959.

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
    dtype = _float_dtype(dtype)
    k_edge, k_w, k_perm = jax.random.split(key, 3)
    p = jnp.clip(2.0 * jnp.asarray(edges_per_node, dtype) / max(d - 1, 1), 0.0, 1.0)
    mask = jax.random.bernoulli(k_edge, p, (d, d)) & jnp.tril(jnp.ones((d, d), bool), -1)
    w = edge_weights(k_w, (d, d), w_low=w_low, w_high=w_high, dtype=dtype)
    return _permute(k_perm, jnp.where(mask, w, 0.0).astype(dtype))


def scale_free_dag(
    key: PRNGKeyArray,
    d: int,
    *,
    edges_per_node: float = 2.0,
    w_low: float = 0.5,
    w_high: float = 2.0,
    dtype=None,
) -> Float[Array, "d d"]:
    """Random scale-free DAG by preferential attachment (Barabasi-Albert style).

    Nodes arrive one at a time; node ``i`` attaches to ``m = max(1, round(edges_per_node))``
    distinct earlier nodes (all of them when ``i < m``), sampled without replacement with
    probability proportional to ``degree + 1`` (Gumbel top-k). Edges point from the earlier
    to the later node, so early nodes become high out-degree hubs; labels are then
    randomly permuted. The number of edges is exactly ``sum_i min(i, m)``
    ``= m d - m (m + 1) / 2`` (for ``d > m``), i.e. about ``edges_per_node * d``.

    Reference: A.-L. Barabasi, R. Albert, "Emergence of scaling in random networks",
    Science 286, 1999.

    Args:
        key: PRNG key.
        d: number of nodes (static).
        edges_per_node: edges each new node attaches with, rounded (static).
        w_low: smallest edge-weight magnitude, see :func:`edge_weights`.
        w_high: largest edge-weight magnitude.
        dtype: float dtype (default: JAX's default float).

    Returns:
        The weighted adjacency ``b`` ``(d, d)``, ``b[i, j]`` the weight of ``j -> i``.
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
    w = edge_weights(k_w, (d, d), w_low=w_low, w_high=w_high, dtype=dtype)
    return _permute(k_perm, jnp.where(rows, w, 0.0).astype(dtype))


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


# ------------------------------------------------------------------------------ noise


def sample_noise(key: PRNGKeyArray, shape: tuple[int, ...], kind: NoiseKind = "gaussian",
                 dtype=None) -> Float[Array, "..."]:
    """Zero-mean, unit-variance noise.

    ``"gaussian"``: ``N(0, 1)``; ``"laplace"``: ``Laplace(0, 1/sqrt 2)`` (excess
    kurtosis 3); ``"uniform"``: ``U[-sqrt 3, sqrt 3]`` (excess kurtosis -1.2).

    Args:
        key: PRNG key.
        shape: output shape (static).
        kind: ``"gaussian"``, ``"laplace"`` or ``"uniform"`` (static).
        dtype: float dtype (default: JAX's default float).

    Returns:
        The noise, of shape ``shape``.
    """
    dtype = _float_dtype(dtype)
    if kind == "gaussian":
        return jax.random.normal(key, shape, dtype)
    if kind == "laplace":
        return jax.random.laplace(key, shape, dtype) / jnp.sqrt(jnp.asarray(2.0, dtype))
    if kind == "uniform":
        r3 = math.sqrt(3.0)
        return jax.random.uniform(key, shape, dtype, minval=-r3, maxval=r3)
    raise ValueError(f"noise `kind` must be one of {_NOISES}; got {kind!r}")


# ----------------------------------------------------------------------- environments


def intervention_targets(
    key: PRNGKeyArray,
    d: int,
    n_envs: int,
    *,
    targets_per_env: int = 1,
    choice: Literal["cycle", "random"] = "cycle",
) -> Bool[Array, "n_envs d"]:
    """Target mask of ``n_envs`` interventional environments, ``targets_per_env`` distinct
    nodes each (all static).

    ``choice="cycle"`` walks through a random permutation of the nodes, environment ``k``
    taking positions ``k t, ..., k t + t - 1`` (mod d): targets are balanced, and every node
    is a target once ``n_envs * targets_per_env >= d`` (with ``n_envs = d`` and ``t = 1``:
    one atomic intervention per node). ``choice="random"`` draws each environment's targets
    independently and uniformly.

    Args:
        key: PRNG key.
        d: number of nodes (static).
        n_envs: number of interventional environments (static).
        targets_per_env: distinct targets per environment, in ``[1, d]`` (static).
        choice: ``"cycle"`` or ``"random"`` (static).

    Returns:
        A boolean mask ``(n_envs, d)``: ``[k, j]`` iff environment ``k`` intervenes on ``j``.
    """
    d = _check_d(d)
    if not isinstance(n_envs, int) or n_envs < 0:
        raise ValueError(f"`n_envs` must be a non-negative Python int; got {n_envs!r}")
    if not isinstance(targets_per_env, int) or not 1 <= targets_per_env <= d:
        raise ValueError(f"`targets_per_env` must be an int in [1, d={d}]; "
                         f"got {targets_per_env!r}")
    t = targets_per_env
    if choice == "cycle":
        perm = jax.random.permutation(key, d)
        pos = (jnp.arange(n_envs)[:, None] * t + jnp.arange(t)[None, :]) % d
        picked = perm[pos]
    elif choice == "random":
        picked = jnp.argsort(jax.random.uniform(key, (n_envs, d)), axis=1)[:, :t]
    else:
        raise ValueError(f"`choice` must be 'cycle' or 'random'; got {choice!r}")
    rows = jnp.arange(n_envs)[:, None]
    return jnp.zeros((n_envs, d), bool).at[rows, picked].set(True)


def simulate_pooled(
    key: PRNGKeyArray,
    b: Float[Array, "d d"],
    *,
    n_envs: int,
    n_per_env: int | None = None,
    n_total: int | None = None,
    intervention: InterventionKind = "scale",
    strength: float | Float[Array, ""] = 3.0,
    noise: NoiseKind = "gaussian",
    noise_scale: float | Float[Array, "..."] = 1.0,
    targets_per_env: int = 1,
    target_choice: Literal["cycle", "random"] = "cycle",
    perturb_all: bool = False,
    replacement: NoiseKind = "uniform",
    obs_env: bool = True,
) -> SEMData:
    """Simulate a linear SEM in several environments and pool the rows.

    Environment 0 is observational when ``obs_env`` (its ``targets`` row is all False),
    followed by ``n_envs`` interventional environments; ``K = n_envs + obs_env`` in all.
    Every node ``j`` has noise ``e_j = noise_scale_j * eps_j`` with ``eps_j`` drawn from
    ``noise`` (unit variance), and ``x = e (I - b)^{-T}`` via :func:`dag_inverse`, so ``b``
    must be acyclic. An intervention on ``j`` in environment ``k`` changes only
    ``e_j`` (soft, noise-only interventions; the weights ``b`` are never changed):

    * ``"scale"``: ``e_j = strength * noise_scale_j * eps_j`` -- the noise variance is
      multiplied by ``strength ** 2`` (the mean stays 0);
    * ``"shift"``: ``e_j = noise_scale_j * (eps_j + s_kj * strength)`` with a random sign
      ``s_kj`` -- a mean shift of ``strength`` noise standard deviations;
    * ``"replace"``: ``e_j = strength * noise_scale_j * eps'_j`` with ``eps'`` drawn from
      ``replacement`` (unit variance) -- a different noise distribution whose standard
      deviation is ``strength`` times the original (``strength=1`` keeps the variance).

    Targets come from :func:`intervention_targets` (``targets_per_env`` nodes per
    environment, ``target_choice``). With ``perturb_all=True`` every node is perturbed
    in every interventional environment, independently: the scale factor (``"scale"``,
    ``"replace"``) is log-uniform on ``[1/strength, strength]`` and the shift
    (``"shift"``) uniform on ``[-strength, strength]``, drawn per (environment, node) --
    the setting where pooling yields exactly independent sources.

    Rows: pass exactly one of ``n_per_env`` (each environment gets that many rows,
    ``n = K * n_per_env``) or ``n_total`` (``n = n_total`` rows split as evenly as
    possible: row ``r`` belongs to environment ``r * K // n``; keeps the data shape fixed
    while ``n_envs`` varies). Rows are ordered by environment; a label-free method sees
    only ``x``.

    Static: ``n_envs``, ``n_per_env``, ``n_total``, ``intervention``, ``noise``,
    ``targets_per_env``, ``target_choice``, ``perturb_all``, ``replacement``, ``obs_env``.
    ``b``, ``strength`` and ``noise_scale`` (scalar or ``(d,)``) may be traced. A
    concrete ``b`` with NaN/inf raises ``ValueError``; a traced one is not checked (no
    run-time callback inside jitted simulation code).

    ``strength=1`` with ``"scale"`` gives purely observational data of the same shape.

    Args:
        key: PRNG key.
        b: weighted adjacency of a DAG ``(d, d)``, ``b[i, j]`` the weight of ``j -> i``.
        n_envs: number of interventional environments.
        n_per_env: rows per environment (exclusive with ``n_total``).
        n_total: total rows, split evenly (exclusive with ``n_per_env``).
        intervention: ``"scale"``, ``"shift"`` or ``"replace"``.
        strength: intervention strength (scalar).
        noise: observational noise law, see :func:`sample_noise`.
        noise_scale: per-node noise standard deviation, scalar or ``(d,)``.
        targets_per_env: nodes intervened on per environment.
        target_choice: ``"cycle"`` or ``"random"``, see :func:`intervention_targets`.
        perturb_all: perturb every node in every interventional environment.
        replacement: the noise law of ``"replace"`` interventions.
        obs_env: prepend an observational environment.

    Returns:
        A :class:`SEMData` ``(x, env, targets, noise)`` with ``x`` and ``noise`` of shape
        ``(n, d)``, ``env`` ``(n,)`` and ``targets`` ``(K, d)``.
    """
    if not hasattr(b, "ndim") or b.ndim != 2 or b.shape[0] != b.shape[1]:
        raise ValueError(f"`b` must be a square (d, d) matrix; got shape "
                         f"{getattr(b, 'shape', None)}")
    if noise not in _NOISES:
        raise ValueError(f"`noise` must be one of {_NOISES}; got {noise!r}")
    if replacement not in _NOISES:
        raise ValueError(f"`replacement` must be one of {_NOISES}; got {replacement!r}")
    if intervention not in _INTERVENTIONS:
        raise ValueError(f"`intervention` must be one of {_INTERVENTIONS}; "
                         f"got {intervention!r}")
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.floating):
        b = b.astype(jnp.result_type(float))
    if not is_traced(b):  # traced b (e.g. drawn inside the same jit): no run-time callback
        b = check_finite(b, "b")
    dtype = b.dtype
    d = b.shape[0]
    n_k = int(n_envs) + int(bool(obs_env))
    if n_k < 1:
        raise ValueError("need at least one environment (n_envs >= 1 or obs_env=True)")
    if (n_per_env is None) == (n_total is None):
        raise ValueError("pass exactly one of `n_per_env` and `n_total`")
    if n_per_env is not None:
        if not isinstance(n_per_env, int) or n_per_env < 1:
            raise ValueError(f"`n_per_env` must be a positive int; got {n_per_env!r}")
        n = n_k * n_per_env
        env = jnp.arange(n, dtype=jnp.int32) // n_per_env
    else:
        if not isinstance(n_total, int) or n_total < n_k:
            raise ValueError(f"`n_total` must be an int >= the number of environments "
                             f"({n_k}); got {n_total!r}")
        n = n_total
        env = ((jnp.arange(n) * n_k) // n).astype(jnp.int32)

    k_tgt, k_par, k_eps, k_alt = jax.random.split(key, 4)
    if perturb_all:
        tgt = jnp.ones((n_envs, d), bool)
    else:
        tgt = intervention_targets(k_tgt, d, n_envs, targets_per_env=targets_per_env,
                                   choice=target_choice)
    if obs_env:
        tgt = jnp.concatenate([jnp.zeros((1, d), bool), tgt], axis=0)

    strength = jnp.asarray(strength, dtype)
    u = jax.random.uniform(k_par, (n_k, d), dtype, minval=-1.0, maxval=1.0)
    if perturb_all:
        factor = jnp.exp(u * jnp.log(jnp.abs(strength)))
        shift = u * strength
    else:
        factor = jnp.broadcast_to(strength, (n_k, d))
        shift = jnp.where(u >= 0, 1.0, -1.0).astype(dtype) * strength
    one = jnp.ones((), dtype)
    eps = sample_noise(k_eps, (n, d), noise, dtype)
    tr = tgt[env]  # (n, d) targeted entries
    if intervention == "scale":
        e = eps * jnp.where(tr, factor[env], one)
    elif intervention == "shift":
        e = eps + jnp.where(tr, shift[env], 0.0)
    else:  # replace
        alt = sample_noise(k_alt, (n, d), replacement, dtype)
        e = jnp.where(tr, factor[env] * alt, eps)
    e = e * jnp.broadcast_to(jnp.asarray(noise_scale, dtype), (d,))
    x = e @ dag_inverse(b).T
    return SEMData(x=x, env=env, targets=tgt, noise=e)


def dag_inverse(b: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """``(I - b)^{-1}`` for the weighted adjacency ``b`` of a DAG, by matrix products only.

    ``b`` is nilpotent (``b^d = 0``), so ``(I - b)^{-1} = sum_{k<d} b^k
    = prod_{j<J} (I + b^(2^j))`` with ``2^J >= d``: ``2 (J - 1)`` matrix products, no
    LAPACK call. (Batched LAPACK solves under ``vmap`` can deadlock jaxlib 0.10.2's CPU
    thread pool on small machines, see the pooled-LiNGAM pipeline notes.) For a cyclic
    ``b`` the result is *not* the inverse.

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


# ----------------------------------------------------------------------- theory checks


def excess_kurtosis(e: Float[Array, "n d"]) -> Float[Array, " d"]:
    """Sample excess kurtosis ``m4 / m2^2 - 3`` of every column, with the central
    moments ``m_k = mean((e - mean e)^k)`` (0 for a Gaussian).

    Args:
        e: samples ``(n, d)``, one row per sample.

    Returns:
        The excess kurtosis of each column, ``(d,)``.
    """
    c = e - jnp.mean(e, axis=0)
    m2 = jnp.mean(c * c, axis=0)
    m4 = jnp.mean(c ** 4, axis=0)
    return m4 / (m2 * m2) - 3.0


def square_correlation(e: Float[Array, "n d"]) -> Float[Array, "d d"]:
    """Pearson correlation matrix of the squared, centred columns, ``corr(e_i^2, e_j^2)``.

    Uncorrelated sources can still be dependent; for sources that are scale mixtures
    (variance-changing interventions) the dependence shows up exactly here. Zero off the
    diagonal for independent sources (up to sampling error ~ ``1/sqrt(n)``).

    Args:
        e: samples ``(n, d)``, one row per sample.

    Returns:
        The ``(d, d)`` correlation matrix of ``(e - mean e)^2``.
    """
    c = e - jnp.mean(e, axis=0)
    s = c * c
    s = s - jnp.mean(s, axis=0)
    cov = s.T @ s / s.shape[0]
    sd = jnp.sqrt(jnp.diagonal(cov))
    return cov / (sd[:, None] * sd[None, :])


def mean_offdiag(m: Float[Array, "d d"]) -> Float[Array, ""]:
    """Mean of the off-diagonal entries of a square matrix (signed),
    ``sum_{i != j} m_ij / (d (d - 1))``.

    Args:
        m: square matrix ``(d, d)``.

    Returns:
        The scalar mean (0 for ``d = 1``).
    """
    d = m.shape[-1]
    off = ~jnp.eye(d, dtype=bool)
    return jnp.sum(jnp.where(off, m, 0.0)) / max(d * (d - 1), 1)


def hsic(a: Float[Array, " n"], b: Float[Array, " n"], *,
         bandwidth_a=None, bandwidth_b=None) -> Float[Array, ""]:
    """Biased (V-statistic) HSIC with Gaussian kernels, ``tr(K H L H) / n^2``.

    Bandwidths default to the median pairwise distance (median heuristic). Costs
    ``O(n^2)`` memory: pass a subsample of rows (shuffled: pooled rows are ordered by
    environment). Positive bias ~ ``1/n`` even for independent inputs, so compare
    against a permutation of one argument.

    Reference: A. Gretton, O. Bousquet, A. Smola, B. Scholkopf, "Measuring statistical
    dependence with Hilbert-Schmidt norms", ALT 2005.

    Args:
        a: first sample ``(n,)``.
        b: second sample ``(n,)``, paired with ``a``.
        bandwidth_a: Gaussian-kernel bandwidth for ``a``; ``None``: median heuristic.
        bandwidth_b: Gaussian-kernel bandwidth for ``b``; ``None``: median heuristic.

    Returns:
        The scalar HSIC estimate ``tr(K H L H) / n^2`` (``H`` the centring matrix).
    """
    a = jnp.asarray(a)
    b = jnp.asarray(b)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"`a` and `b` must be 1-D of equal length; got {a.shape}, {b.shape}")
    n = a.shape[0]

    def gram(v, bw):
        d2 = (v[:, None] - v[None, :]) ** 2
        if bw is None:
            bw = jnp.sqrt(jnp.median(d2))
        bw = jnp.maximum(bw, jnp.finfo(d2.dtype).tiny)
        return jnp.exp(-d2 / (2.0 * bw * bw))

    k = gram(a, bandwidth_a)
    lm = gram(b, bandwidth_b)
    kc = k - jnp.mean(k, axis=0) - jnp.mean(k, axis=1)[:, None] + jnp.mean(k)
    return jnp.sum(kc * lm) / (n * n)


def atomic_scale_theory(n_nodes, strength, n_envs_total=None):
    """Closed-form moments of the pooled sources for Gaussian noise and atomic
    variance-scaling interventions, each node targeted in exactly one of ``K``
    equally sized environments (default ``K = n_nodes + 1``: one observational plus one
    per node, as :func:`simulate_pooled` with ``n_envs = d`` and ``target_choice="cycle"``).

    With ``p = 1/K``, ``s = strength``, ``m2 = 1 + p (s^2 - 1)``, ``m4 = 1 + p (s^4 - 1)``:

    * excess kurtosis ``3 m4 / m2^2 - 3 = 3 p (1 - p) (s^2 - 1)^2 / m2^2`` -- ``O(1/n)``;
    * ``corr(e_i^2, e_j^2) = -p^2 (s^2 - 1)^2 / (3 m4 - m2^2)`` -- ``O(1/n^2)``.

    Args:
        n_nodes: number of nodes ``d``.
        strength: the intervention's scale factor ``s``.
        n_envs_total: number of environments ``K`` (default ``n_nodes + 1``).

    Returns:
        ``(excess_kurtosis, square_correlation)`` of one pooled source; broadcasts over
        array inputs.
    """
    n_nodes = jnp.asarray(n_nodes, jnp.result_type(float))
    k = n_nodes + 1.0 if n_envs_total is None else jnp.asarray(n_envs_total, n_nodes.dtype)
    p = 1.0 / k
    s2 = jnp.asarray(strength, n_nodes.dtype) ** 2
    m2 = 1.0 + p * (s2 - 1.0)
    m4 = 1.0 + p * (s2 * s2 - 1.0)
    kurt = 3.0 * m4 / (m2 * m2) - 3.0
    corr = -(p * (s2 - 1.0)) ** 2 / (3.0 * m4 - m2 * m2)
    return kurt, corr
