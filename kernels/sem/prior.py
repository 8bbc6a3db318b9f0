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

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .._xla_cpu import YNN_DOTS_ONLY, cpu_options
from ._draws import uniforms
from .graphs import GRAPHS, active_mask, graph_family
from .grouping import grouped_switch
from .mechanisms import (
    INTERVENTION_TYPES,
    MECHANISMS,
    masked_moments,
    sample_mechanism_batch,
)
from .prior_noise import PRIOR_NOISES, noise_law

__all__ = ["REGIMES", "Prior", "TaskSpec", "Task", "make_prior", "mix_priors", "sample_task",
           "sample_tasks", "jit_sample_tasks", "default_chunk", "standardize_columns"]

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
    Every argument is a concrete Python value (checked eagerly); the result's leaves are
    arrays that may later be traced.

    Differentiable: no: builds a Prior from concrete Python values.

    Args:
        graphs: weights over :data:`GRAPHS` (``er``, ``sf``, ``ws``, ``sbm``, ``grg``).
        mechanisms: weights over ``MECHANISMS`` (``linear``, ``mlp``, ``rff``,
            ``sigmoid``, ``hetero``).
        noises: weights over ``PRIOR_NOISES`` (``gaussian``, ``laplace``, ``student_t``,
            ``uniform``, ``gumbel``).
        regimes: weights over :data:`REGIMES` (``observational``, ``atomic``, ``multi``).
        itypes: weights over ``INTERVENTION_TYPES`` (``hard``, ``shift``, ``scale``).
        d_range: number of variables ``(low, high)``, integers ``>= 2``.
        n_range: number of samples ``(low, high)``, integers ``>= 2``.
        k_range: expected edges per node ``(low, high)``, ``>= 0``.
        obs_frac: observational fraction of the rows ``(low, high)`` in ``[0, 1]``.
        w_range: edge-weight magnitudes ``(low, high)``, ``>= 0``.
        scale_range: noise scales ``(low, high)``, positive.
        multi_p: probability that a node is a target in the multi-node regime.
        p_known: probability that the targets are known (the indicator channel is kept).
        p_standardize: probability that a task's columns are standardised.
        p_iscm: probability of iSCM standardisation inside the simulation.

    Returns:
        The :class:`Prior` (weights normalised, ranges as arrays).

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
    ranges rounded).

    Differentiable: yes, in a, b and t (the float leaves; integer ranges are rounded).

    Args:
        a: the :class:`Prior` at ``t = 0``.
        b: the :class:`Prior` at ``t = 1``.
        t: the mixing weight, clipped to ``[0, 1]``; may be traced (e.g. a function of
            the step).

    Returns:
        The interpolated :class:`Prior` (float leaves as float32, integer ones rounded).
    """
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
    rows stay 0.

    Differentiable: yes, in x.

    Args:
        x: ``(n, d)`` data.
        rows: ``(n,)`` bool mask of the valid rows.

    Returns:
        ``(n, d)`` standardised data.
    """
    mu, sd = jax.vmap(masked_moments, in_axes=(1, None))(x, rows)
    return jnp.where(rows[:, None], (x - mu) / sd, 0.0)


def _uniform_int(u, lo, hi):
    """``U{lo..hi}`` from a uniform ``u`` in ``[0, 1)``."""
    return jnp.minimum(lo + jnp.floor(u * (hi - lo + 1)).astype(jnp.int32), hi)


def _categorical(u, w):
    """Index ``i`` with probability ``w[i]`` (``w`` sums to 1) from a uniform ``u``."""
    return jnp.minimum(jnp.sum(jnp.cumsum(w) <= u), w.shape[0] - 1).astype(jnp.int32)


def _check_slots(d_max, n_max):
    if not isinstance(d_max, int) or d_max < 2:
        raise ValueError(f"`d_max` must be a Python int >= 2; got {d_max!r}")
    if not isinstance(n_max, int) or n_max < 2:
        raise ValueError(f"`n_max` must be a Python int >= 2; got {n_max!r}")


def _draw(key, prior: Prior, d_max: int, n_max: int) -> dict:
    """Steps 1 and 3 of the module docstring: every scalar of the task, its environments
    and targets, and the keys of the later stages (graph, mechanism, noise)."""
    k_u, k_graph, k_mech, k_env, k_sim = jax.random.split(key, 5)
    (u,) = uniforms(k_u, (16,))
    d = _uniform_int(u[0], jnp.clip(prior.d_range[0], 2, d_max),
                     jnp.clip(prior.d_range[1], 2, d_max))
    n = _uniform_int(u[1], jnp.clip(prior.n_range[0], 2, n_max),
                     jnp.clip(prior.n_range[1], 2, n_max))
    regime = _categorical(u[6], prior.regime_w)
    frac = prior.obs_frac[0] + u[11] * (prior.obs_frac[1] - prior.obs_frac[0])
    active = active_mask(d_max, d)

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
    k_noise, k_z = jax.random.split(k_sim)
    return dict(
        d=d, n=n, k=prior.k_range[0] + u[2] * (prior.k_range[1] - prior.k_range[0]),
        graph=_categorical(u[3], prior.graph_w), mech=_categorical(u[4], prior.mech_w),
        noise=_categorical(u[5], prior.noise_w), regime=regime,
        itype=_categorical(u[7], prior.itype_w), known=u[8] < prior.p_known,
        stdz=u[9] < prior.p_standardize, iscm=u[10] < prior.p_iscm, n_env=n_env,
        n_obs=n_obs, active=active, rows=rows, env=env, targets=targets,
        k_graph=k_graph, k_mech=k_mech, k_noise=k_noise, k_z=k_z,
        w_range=prior.w_range, scale_range=prior.scale_range)


def _graph_branch(family: int, d_max: int):
    return lambda t: graph_family(t["k_graph"], family, d_max, t["d"], t["k"])


def _noise_branch(code: int, n_max: int, d_max: int):
    # unit noise by (topological) position and row, ``(d_max, n_max)``: the mechanism
    # stage's layout (the law is i.i.d., so any indexing is the same law)
    return lambda t: noise_law(t["k_noise"], (d_max, n_max), code)


def _mech_chunk(code: int):
    """The mechanism stage of a chunk of tasks (all of mechanism ``code``): parameters
    drawn by topological position, then ancestral sampling; the node loop stops at the
    chunk's largest ``d`` (the chunks hold tasks sorted by ``d``)."""
    def run(t):
        return sample_mechanism_batch(
            code, t["k_mech"], t["k_z"], t["adj"], t["eps"], active=t["active"],
            rows=t["rows"], env=t["env"], targets=t["targets"], itype=t["itype"],
            iscm=t["iscm"], w_range=t["w_range"], scale_range=t["scale_range"],
            n_steps=jnp.max(t["d"]))
    return run


def _mech_branch(code: int):
    one = _mech_chunk(code)
    return lambda t: one(jax.tree.map(lambda a: a[None], t))[0]


def _finish(t) -> Task:
    """Steps 4 (standardisation) and 5 (the indicator channel)."""
    rows, active, env, d_max = t["rows"], t["active"], t["env"], t["active"].shape[0]
    x = jnp.where(t["stdz"], standardize_columns(t["x"], rows), t["x"])
    x = jnp.where(active[None, :], x, 0.0)
    tgt = (env >= 0)[:, None] & t["targets"][jnp.clip(env, 0, d_max - 1)] & rows[:, None]
    ind = (tgt & t["known"]).astype(jnp.float32)
    spec = TaskSpec(d=t["d"], n=t["n"], n_obs=t["n_obs"],
                    n_env=jnp.where(t["regime"] == 0, 0, t["n_env"]), graph=t["graph"],
                    mechanism=t["mech"], noise=t["noise"], regime=t["regime"],
                    itype=t["itype"], known=t["known"], standardized=t["stdz"],
                    iscm=t["iscm"], edges_per_node=t["k"])
    return Task(x=x, indicator=ind, targets=tgt, env=env, var_mask=active, sample_mask=rows,
                adj=t["adj"], spec=spec)


def sample_task(key: PRNGKeyArray, prior: Prior, *, d_max: int, n_max: int) -> Task:
    """Draw one task from ``prior`` (module docstring), padded to ``d_max`` variables and
    ``n_max`` rows (static). ``prior.d_range`` / ``n_range`` are clipped to
    ``[2, d_max]`` / ``[2, n_max]``. The graph family, the noise law and the mechanism are
    ``lax.switch`` branches (one is computed for one task; :func:`sample_tasks` draws a
    batch equal to ``vmap`` of this function without computing every branch per task).

    Differentiable: no: the node loop runs to the task's traced number of variables (a fori_loop
    with dynamic bounds: reverse mode fails).

    Args:
        key: PRNG key.
        prior: :class:`Prior` (traced).
        d_max: variable slots (static, >= 2).
        n_max: row slots (static, >= 2).

    Returns:
        A :class:`Task`.
    """
    _check_slots(d_max, n_max)
    t = _draw(key, prior, d_max, n_max)

    def switch(code, branches):
        return jax.lax.switch(code, [functools.partial(b, t) for b in branches])

    t["adj"] = switch(t["graph"], [_graph_branch(f, d_max) for f in range(len(GRAPHS))])
    t["eps"] = switch(t["noise"], [_noise_branch(c, n_max, d_max)
                                   for c in range(len(PRIOR_NOISES))])
    t["x"] = switch(t["mech"], [_mech_branch(m) for m in range(len(MECHANISMS))])
    return _finish(t)


def default_chunk(batch: int) -> int:
    """The chunk size :func:`sample_tasks` uses by default: about a tenth of the batch
    (at least 1, at most 8), so the pure chunks of each law waste few slots (smaller
    chunks were faster than 13 or 16 at 128 tasks on a 2-core CPU: benchmarks/RESULTS.md).

    Differentiable: no: a static Python int.
    """
    return max(1, min(8, -(-batch // 10)))


def sample_tasks(key: PRNGKeyArray, prior: Prior, batch: int, *, d_max: int, n_max: int,
                 chunk: int | None = None) -> Task:
    """``batch`` independent tasks: equal to ``vmap`` of :func:`sample_task` over
    ``jax.random.split(key, batch)`` (every leaf has a leading batch axis), but each task
    computes only its own graph family, noise law and mechanism: the per-task codes are
    drawn first, then each stage runs every law on its own tasks only, in pure chunks of
    ``chunk`` tasks (:func:`.grouping.grouped_switch`). Jit with ``batch``, ``d_max``,
    ``n_max`` (and ``chunk``) static; a new ``prior`` value does not recompile.

    Differentiable: no: as sample_task.

    Args:
        key: PRNG key.
        prior: :class:`Prior` (traced).
        batch: number of tasks (static, >= 1).
        d_max, n_max: slots (static, >= 2).
        chunk: tasks per chunk (static; default :func:`default_chunk`).

    Returns:
        A :class:`Task` with a leading batch axis.
    """
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive Python int; got {batch!r}")
    _check_slots(d_max, n_max)
    chunk = default_chunk(batch) if chunk is None else chunk
    keys = jax.random.split(key, batch)
    t = jax.vmap(lambda k: _draw(k, prior, d_max, n_max))(keys)
    t["adj"] = grouped_switch(t["graph"], [_graph_branch(f, d_max) for f in range(len(GRAPHS))],
                              t, chunk=chunk)
    t["eps"] = grouped_switch(t["noise"], [_noise_branch(c, n_max, d_max)
                                           for c in range(len(PRIOR_NOISES))], t, chunk=chunk)
    t["x"] = grouped_switch(t["mech"], [_mech_chunk(m) for m in range(len(MECHANISMS))], t,
                            chunk=chunk, sort_key=t["d"], batched=True)
    return jax.vmap(_finish)(t)


@functools.lru_cache(maxsize=16)
def jit_sample_tasks(batch: int, *, d_max: int, n_max: int, chunk: int | None = None,
                     compiler_options: tuple[tuple[str, object], ...] = ()):
    """``jax.jit`` of :func:`sample_tasks` for a standalone call ``f(key, prior) -> Task``
    (cached per static arguments), compiled on the CPU without YNNPACK's elementwise
    and reduction fusions (:mod:`jaxkit.kernels._xla_cpu`): the sampler's per-chunk
    arrays are small, and XLA's own loops draw them faster (benchmarks/RESULTS.md).
    The same values as ``jax.jit(sample_tasks)`` up to float32 rounding. Inside
    a larger program (a training step that samples and fits in one call) keep XLA's
    defaults: its model fusions gain from YNNPACK.

    Differentiable: no: returns a jitted function.

    Args:
        batch, d_max, n_max, chunk: as :func:`sample_tasks` (static).
        compiler_options: extra ``(name, value)`` XLA options (e.g. a test's
            optimisation level), applied on any backend.

    Returns:
        The jitted function of ``(key, prior)``.
    """
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive Python int; got {batch!r}")
    _check_slots(d_max, n_max)
    opts = {**(cpu_options(YNN_DOTS_ONLY) or {}), **dict(compiler_options)} or None
    return jax.jit(functools.partial(sample_tasks, batch=batch, d_max=d_max, n_max=n_max,
                                     chunk=chunk), compiler_options=opts)
