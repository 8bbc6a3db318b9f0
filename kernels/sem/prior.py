"""Dynamic task construction: one jitted call draws a batch of heterogeneous causal
discovery tasks from a mixture of priors, padded to ``d_max`` variables and ``n_max``
samples with masks.

A :class:`Prior` is a pytree of arrays (mixture weights over graph families, mechanisms,
noise laws, intervention regimes and types; ranges of the number of variables, samples,
expected degree, observational fraction, weights and noise scales; probabilities of known
targets, standardisation and iSCM standardisation). Every leaf is traced, so a curriculum
that moves the weights (:func:`mix_priors`) never recompiles. :func:`sample_task` draws
one task:

1. ``d ~ U{d_min..d_max}``, ``n ~ U{n_min..n_max}``, ``k ~ U[k_low, k_high]``;
2. a graph family ``~ graph_w`` (:func:`.graphs.sample_graph`), a mechanism
   ``~ mech_w``, a noise law ``~ noise_w`` (:mod:`.mechanisms`, :mod:`.prior_noise`);
3. a regime ``~ regime_w`` over ``REGIMES`` (observational only; atomic: one target per
   environment, the active nodes taken in a random cyclic order; multi-node: each active
   node a target with probability ``multi_p``, at least one), a type ``~ itype_w`` over
   ``INTERVENTION_TYPES``; ``n_obs = round(obs_frac n)`` observational rows (all rows
   in the observational regime), the others spread cyclically over ``n_env ~
   U{1..d}`` environments;
4. the data by :func:`.mechanisms.simulate_scm` (with iSCM standardisation with
   probability ``p_iscm``), then each column standardised over the valid rows with
   probability ``p_standardize``;
5. the intervention-indicator channel ``indicator[r, v]`` = row ``r`` targets ``v``,
   zeroed when the targets are unknown (probability ``1 - p_known``).

The task's truth is ``adj[i, j]`` = the edge ``j -> i`` (LiNGAM convention).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._draws import uniforms
from .graphs import GRAPHS, active_mask, sample_graph
from .mechanisms import (
    INTERVENTION_TYPES,
    MECHANISMS,
    init_mechanisms,
    masked_moments,
    simulate_scm,
)
from .prior_noise import PRIOR_NOISES

__all__ = ["REGIMES", "Prior", "TaskSpec", "Task", "make_prior", "mix_priors", "sample_task",
           "sample_tasks", "standardize_columns"]

#: Intervention regimes.
REGIMES = ("observational", "atomic", "multi")


class Prior(NamedTuple):
    """Mixture weights and ranges of the causal prior (every leaf an array; see the module
    docstring). Build with :func:`make_prior`."""

    graph_w: Float[Array, " 5"]
    mech_w: Float[Array, " 5"]
    noise_w: Float[Array, " 5"]
    regime_w: Float[Array, " 3"]
    itype_w: Float[Array, " 3"]
    d_range: Int[Array, " 2"]
    n_range: Int[Array, " 2"]
    k_range: Float[Array, " 2"]
    obs_frac: Float[Array, " 2"]
    w_range: Float[Array, " 2"]
    scale_range: Float[Array, " 2"]
    multi_p: Float[Array, ""]
    p_known: Float[Array, ""]
    p_standardize: Float[Array, ""]
    p_iscm: Float[Array, ""]


def _weights(spec, names, what):
    if isinstance(spec, dict):
        bad = set(spec) - set(names)
        if bad:
            raise ValueError(f"`{what}` has unknown names {sorted(bad)}; allowed {names}")
        w = [float(spec.get(n, 0.0)) for n in names]
    else:
        w = [float(v) for v in spec]
        if len(w) != len(names):
            raise ValueError(f"`{what}` needs {len(names)} weights ({names}); got {len(w)}")
    if any(v < 0 for v in w) or sum(w) <= 0:
        raise ValueError(f"`{what}` weights must be >= 0 with a positive sum; got {w}")
    return jnp.asarray(w, jnp.float32) / sum(w)


def _range(r, what, lo=None, integer=False):
    a, b = r
    if not a <= b or (lo is not None and a < lo):
        raise ValueError(f"`{what}` must be a range (low, high) with {lo if lo is not None else ''}"
                         f"{' <= ' if lo is not None else ''}low <= high; got {r}")
    return jnp.asarray([a, b], jnp.int32 if integer else jnp.float32)


def make_prior(*, graphs=None, mechanisms=None, noises=None, regimes=None, itypes=None,
               d_range=(5, 20), n_range=(100, 200), k_range=(1.0, 3.0),
               obs_frac=(0.5, 1.0), w_range=(0.5, 2.0), scale_range=(0.5, 1.5),
               multi_p=0.2, p_known=0.5, p_standardize=0.5, p_iscm=0.25) -> Prior:
    """A :class:`Prior` from mixture weights (a dict ``{name: weight}`` or a sequence in
    the order of ``GRAPHS`` / ``MECHANISMS`` / ``PRIOR_NOISES`` / ``REGIMES`` /
    ``INTERVENTION_TYPES``; ``None``: uniform) and ranges ``(low, high)`` (inclusive).

    Raises:
        ValueError: an unknown name, negative weights, an empty range, or a probability
            outside ``[0, 1]`` (the message names the argument).
    """
    for nm, p in (("multi_p", multi_p), ("p_known", p_known),
                  ("p_standardize", p_standardize), ("p_iscm", p_iscm)):
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"`{nm}` must be a probability in [0, 1]; got {p}")
    if not 0.0 <= obs_frac[0] <= obs_frac[1] <= 1.0:
        raise ValueError(f"`obs_frac` must satisfy 0 <= low <= high <= 1; got {obs_frac}")

    def uni(names):
        return [1.0] * len(names)

    return Prior(
        graph_w=_weights(graphs if graphs is not None else uni(GRAPHS), GRAPHS, "graphs"),
        mech_w=_weights(mechanisms if mechanisms is not None else uni(MECHANISMS), MECHANISMS,
                        "mechanisms"),
        noise_w=_weights(noises if noises is not None else uni(PRIOR_NOISES), PRIOR_NOISES,
                         "noises"),
        regime_w=_weights(regimes if regimes is not None else uni(REGIMES), REGIMES, "regimes"),
        itype_w=_weights(itypes if itypes is not None else uni(INTERVENTION_TYPES),
                         INTERVENTION_TYPES, "itypes"),
        d_range=_range(d_range, "d_range", 2, True),
        n_range=_range(n_range, "n_range", 2, True),
        k_range=_range(k_range, "k_range", 0.0),
        obs_frac=jnp.asarray(obs_frac, jnp.float32),
        w_range=_range(w_range, "w_range", 0.0),
        scale_range=_range(scale_range, "scale_range", 1e-6),
        multi_p=jnp.asarray(multi_p, jnp.float32),
        p_known=jnp.asarray(p_known, jnp.float32),
        p_standardize=jnp.asarray(p_standardize, jnp.float32),
        p_iscm=jnp.asarray(p_iscm, jnp.float32),
    )


def mix_priors(a: Prior, b: Prior, t) -> Prior:
    """The curriculum interpolation ``(1 - t) a + t b`` of two priors, leaf by leaf (integer
    ranges rounded); ``t`` in ``[0, 1]`` may be traced (e.g. a function of the step)."""
    t = jnp.clip(jnp.asarray(t, jnp.float32), 0.0, 1.0)

    def mix(x, y):
        m = (1.0 - t) * x.astype(jnp.float32) + t * y.astype(jnp.float32)
        return jnp.round(m).astype(x.dtype) if jnp.issubdtype(x.dtype, jnp.integer) else m

    return jax.tree.map(mix, a, b)


class TaskSpec(NamedTuple):
    """The drawn configuration of one task (int / float / bool scalars)."""

    d: Int[Array, ""]
    n: Int[Array, ""]
    n_obs: Int[Array, ""]
    n_env: Int[Array, ""]
    graph: Int[Array, ""]
    mechanism: Int[Array, ""]
    noise: Int[Array, ""]
    regime: Int[Array, ""]
    itype: Int[Array, ""]
    known: Bool[Array, ""]
    standardized: Bool[Array, ""]
    iscm: Bool[Array, ""]
    edges_per_node: Float[Array, ""]


class Task(NamedTuple):
    """One padded task.

    Attributes:
        x: data ``(n_max, d_max)``, zero on padding.
        indicator: the intervention-indicator channel ``(n_max, d_max)`` (1.0 where the
            row targets the variable and the targets are known; all zero otherwise).
        targets: the true per-row targets ``(n_max, d_max)`` (bool), known or not.
        env: environment of each row (``-1``: observational or padding).
        var_mask: active variables ``(d_max,)``; sample_mask: valid rows ``(n_max,)``.
        adj: the true DAG ``(d_max, d_max)`` (bool, ``adj[i, j]``: ``j -> i``).
        spec: the :class:`TaskSpec`.
    """

    x: Float[Array, "n d"]
    indicator: Float[Array, "n d"]
    targets: Bool[Array, "n d"]
    env: Int[Array, " n"]
    var_mask: Bool[Array, " d"]
    sample_mask: Bool[Array, " n"]
    adj: Bool[Array, "d d"]
    spec: TaskSpec


def standardize_columns(x: Float[Array, "n d"], rows: Bool[Array, " n"]) -> Float[Array, "n d"]:
    """Each column standardised (mean 0, sd 1, ddof 0) over the valid ``rows``; padding
    rows stay 0."""
    mu, sd = jax.vmap(masked_moments, in_axes=(1, None))(x, rows)
    return jnp.where(rows[:, None], (x - mu) / sd, 0.0)


def _uniform_int(u, lo, hi):
    """``U{lo..hi}`` from a uniform ``u`` in ``[0, 1)``."""
    return jnp.minimum(lo + jnp.floor(u * (hi - lo + 1)).astype(jnp.int32), hi)


def _categorical(u, w):
    """Index ``i`` with probability ``w[i]`` (``w`` sums to 1) from a uniform ``u``."""
    return jnp.minimum(jnp.sum(jnp.cumsum(w) <= u), w.shape[0] - 1).astype(jnp.int32)


def sample_task(key: PRNGKeyArray, prior: Prior, *, d_max: int, n_max: int) -> Task:
    """Draw one task from ``prior`` (module docstring), padded to ``d_max`` variables and
    ``n_max`` rows (static). ``prior.d_range`` / ``n_range`` are clipped to
    ``[2, d_max]`` / ``[2, n_max]``.

    Args:
        key: PRNG key.
        prior: :class:`Prior` (traced).
        d_max: variable slots (static, >= 2).
        n_max: row slots (static, >= 2).

    Returns:
        A :class:`Task`.
    """
    if not isinstance(d_max, int) or d_max < 2:
        raise ValueError(f"`d_max` must be a Python int >= 2; got {d_max!r}")
    if not isinstance(n_max, int) or n_max < 2:
        raise ValueError(f"`n_max` must be a Python int >= 2; got {n_max!r}")
    k_u, k_graph, k_mech, k_env, k_sim = jax.random.split(key, 5)
    (u,) = uniforms(k_u, (16,))
    d = _uniform_int(u[0], jnp.clip(prior.d_range[0], 2, d_max),
                     jnp.clip(prior.d_range[1], 2, d_max))
    n = _uniform_int(u[1], jnp.clip(prior.n_range[0], 2, n_max),
                     jnp.clip(prior.n_range[1], 2, n_max))
    k = prior.k_range[0] + u[2] * (prior.k_range[1] - prior.k_range[0])
    graph = _categorical(u[3], prior.graph_w)
    mech = _categorical(u[4], prior.mech_w)
    noise = _categorical(u[5], prior.noise_w)
    regime = _categorical(u[6], prior.regime_w)
    itype = _categorical(u[7], prior.itype_w)
    known = u[8] < prior.p_known
    stdz = u[9] < prior.p_standardize
    iscm = u[10] < prior.p_iscm
    frac = prior.obs_frac[0] + u[11] * (prior.obs_frac[1] - prior.obs_frac[0])

    active = active_mask(d_max, d)
    adj = sample_graph(k_graph, graph, d_max, d, k)
    params = init_mechanisms(k_mech, adj, w_low=prior.w_range[0], w_high=prior.w_range[1],
                             scale_low=prior.scale_range[0], scale_high=prior.scale_range[1])

    # environments: atomic -> one target each, cycling through a random order of the nodes
    n_env = _uniform_int(u[12], 1, d)
    u_perm, u_multi = uniforms(k_env, (d_max,), (d_max, d_max))
    perm = jnp.argsort(jnp.where(active, u_perm, 2.0 + jnp.arange(d_max, dtype=jnp.float32)))
    e_idx = jnp.arange(d_max)
    atomic = jnp.zeros((d_max, d_max), bool).at[e_idx, perm[e_idx % d]].set(True)
    multi = (u_multi < prior.multi_p) & active[None, :]
    multi = multi | (atomic & ~jnp.any(multi, axis=1, keepdims=True))
    targets = jnp.where(regime == 1, atomic, multi) & (e_idx < n_env)[:, None]

    rows = jnp.arange(n_max) < n
    n_obs = jnp.where(regime == 0, n, jnp.clip(jnp.round(frac * n).astype(jnp.int32), 0, n))
    r = jnp.arange(n_max)
    env = jnp.where(rows & (r >= n_obs), (r - n_obs) % n_env, -1)
    x = simulate_scm(k_sim, adj, params, mechanism=mech, noise=noise, active=active,
                     rows=rows, env=env, targets=targets, itype=itype, iscm=iscm)
    x = jnp.where(stdz, standardize_columns(x, rows), x)
    x = jnp.where(active[None, :], x, 0.0)
    tgt = (env >= 0)[:, None] & targets[jnp.clip(env, 0, d_max - 1)] & rows[:, None]
    ind = (tgt & known).astype(jnp.float32)
    spec = TaskSpec(d=d, n=n, n_obs=n_obs, n_env=jnp.where(regime == 0, 0, n_env),
                    graph=graph, mechanism=mech, noise=noise, regime=regime, itype=itype,
                    known=known, standardized=stdz, iscm=iscm, edges_per_node=k)
    return Task(x=x, indicator=ind, targets=tgt, env=env, var_mask=active, sample_mask=rows,
                adj=adj, spec=spec)


def sample_tasks(key: PRNGKeyArray, prior: Prior, batch: int, *, d_max: int, n_max: int
                 ) -> Task:
    """``batch`` independent tasks (``vmap`` of :func:`sample_task` over split keys); every
    leaf of the returned :class:`Task` has a leading batch axis. Jit with ``batch``,
    ``d_max``, ``n_max`` static; a new ``prior`` value does not recompile."""
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive Python int; got {batch!r}")
    keys = jax.random.split(key, batch)
    return jax.vmap(lambda k: sample_task(k, prior, d_max=d_max, n_max=n_max))(keys)
