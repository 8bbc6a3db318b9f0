"""The grid's simulator: one jitted, vmapped batch of SCM datasets per cell.

:func:`simulate` draws ``batch`` datasets of a :class:`~.axes.CellSpec`. Its shape
fields (``n``, ``d``, ``graph``, ``max_envs``; ``edges_per_node`` for scale-free graphs
only) are static; every other value is a traced parameter (:class:`Params`), so all
cells of one shape share one compiled program. The steps, in order (see
:data:`~.axes.AXES` for each axis's meaning):

1. graph ``b`` from the family ``graph`` (LiNGAM convention: ``b[i, j]`` is ``j -> i``);
2. faithfulness: optionally a root ``a`` and a descendant ``c`` get the direct weight
   that cancels every other path ``a ~> c`` (exactly, or leaving 10%);
3. noise ``e_j = s_j eps_j``: the family, heterogeneous scales ``s_j = exp(U[-h, h])``,
   AR(1) over the rows, atomic interventions (environment per row) of the kind
   ``intervention``: ``scale`` multiplies the target's noise by ``strength``, ``shift``
   adds ``strength s_j``, ``hard`` multiplies it by ``strength`` and cuts the target
   from its parents and confounders (``x_j = e_j`` in step 4); hidden confounders added
   to the noise of the two variables each one hits;
4. mechanisms, by ``d`` fixed-point sweeps ``z <- g(z) b^T + e`` (exact for a DAG after
   ``depth + 1`` sweeps), ``g`` the identity or ``tanh``; under ``scale="iscm"`` each
   sweep standardises every column right after its assignment, so each variable is
   standardised before its children read it (in a DAG the sweeps converge to exactly
   that iSCM);
5. measurement error; 6. post-hoc standardisation under ``scale="standardised"``.

A dataset whose graph is cyclic or whose data are non-finite or constant has
``valid=False`` and NaN data: the grid reports it, it is never silently scored.
"""

from __future__ import annotations

import itertools
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri
from jaxtyping import Array, Bool, Float, Int

from jaxkit.kernels.sem.dags import dag_inverse, is_acyclic

from .axes import FAITHFULNESS, GRAPHS, INTERVENTIONS, MECHANISMS, NOISES, SCALES, CellSpec

__all__ = ["Params", "SCMData", "params_of", "simulate", "simulate_one", "MAX_CONFOUNDERS",
           "standardise"]

MAX_CONFOUNDERS = 8  # static slots; `confounders` of them are active
NEAR_LEFT = 0.1  # "near" cancellation leaves this fraction of the path effect


class Params(NamedTuple):
    """The traced perturbation values of a cell (scalars; see :data:`~.axes.AXES`)."""

    noise: Int[Array, ""]
    noise_hetero: Float[Array, ""]
    nonlinear: Bool[Array, ""]
    scale: Int[Array, ""]
    faithfulness: Int[Array, ""]
    confounders: Int[Array, ""]
    confounder_strength: Float[Array, ""]
    meas_error: Float[Array, ""]
    ar: Float[Array, ""]
    n_envs: Int[Array, ""]
    intervention: Int[Array, ""]
    obs_fraction: Float[Array, ""]
    strength: Float[Array, ""]
    edges_per_node: Float[Array, ""]  # traced except for "sf" (static there)
    w_low: Float[Array, ""]
    w_high: Float[Array, ""]


class SCMData(NamedTuple):
    """One simulated dataset (leading batch axis under :func:`simulate`)."""

    x: Float[Array, "n d"]  # what a method sees (NaN when not valid)
    b: Float[Array, "d d"]  # the true graph among the observed variables
    env: Int[Array, " n"]  # environment of each row (0 = observational)
    targets: Bool[Array, "k d"]  # intervened node of each environment (row 0: none)
    valid: Bool[Array, ""]  # acyclic graph, finite non-constant data
    cancel_pair: Int[Array, " 2"]  # (a, c): root a, its cancelled descendant c
    cancelled: Bool[Array, ""]  # a cancellation was applied
    confounded: Int[Array, "h 2"]  # the two observed children of each confounder slot
    confounder_active: Bool[Array, " h"]


def params_of(spec: CellSpec) -> Params:
    """The traced parameters of ``spec`` (float32 / int32 scalars)."""
    f = partial(jnp.asarray, dtype=jnp.float32)
    i = partial(jnp.asarray, dtype=jnp.int32)
    return Params(
        noise=i(NOISES.index(spec.noise)), noise_hetero=f(spec.noise_hetero),
        nonlinear=jnp.asarray(spec.mechanism == MECHANISMS[1]),
        scale=i(SCALES.index(spec.scale)), faithfulness=i(FAITHFULNESS.index(spec.faithfulness)),
        confounders=i(spec.confounders), confounder_strength=f(spec.confounder_strength),
        meas_error=f(spec.meas_error), ar=f(spec.ar), n_envs=i(spec.n_envs),
        intervention=i(INTERVENTIONS.index(spec.intervention)),
        obs_fraction=f(spec.obs_fraction), strength=f(spec.strength),
        edges_per_node=f(spec.edges_per_node), w_low=f(spec.w_low), w_high=f(spec.w_high))


def standardise(x: Float[Array, "n d"]) -> Float[Array, "n d"]:
    """Columns to zero mean and unit variance (ddof 0)."""
    xc = x - jnp.mean(x, axis=0)
    sd = jnp.sqrt(jnp.mean(xc * xc, axis=0))
    return xc / jnp.where(sd > 0, sd, 1.0)


def _cancel(b, mode):
    """Faithfulness violation by path cancellation (see the module docstring)."""
    d = b.shape[0]
    total = dag_inverse(jnp.where(is_acyclic(b), b, 0.0))
    off = ~jnp.eye(d, dtype=bool)
    roots = jnp.sum(b != 0, axis=1) == 0
    n_desc = jnp.sum((total != 0) & off, axis=0)
    a = jnp.argmax(jnp.where(roots, n_desc, -1)).astype(jnp.int32)
    other = jnp.where(jnp.arange(d) == a, 0.0, total[:, a] - b[:, a])  # paths of length >= 2
    c = jnp.argmax(jnp.abs(other)).astype(jnp.int32)
    apply = (mode > 0) & (jnp.abs(other[c]) > 1e-3)
    keep = jnp.where(mode == FAITHFULNESS.index("near"), NEAR_LEFT, 0.0)
    b = b.at[c, a].set(jnp.where(apply, -(1.0 - keep) * other[c], b[c, a]))
    return b, jnp.stack([a, c]), apply


def _pick(stack, idx):
    return jnp.take(stack, idx, axis=0)


def _uniforms(key, n: int, d: int, h: int):
    """Every random number of a dataset except the graph's, from one uniform draw (one
    PRNG call compiles far faster than eight), in the open interval ``(0, 1)``: the noise
    ``(n, d + h)``, the noise scales ``(d,)``, the target order ``(d,)``, the confounders'
    children ``(h, d)`` and signs ``(h, 2)``, the measurement error ``(n, d)``."""
    shapes = ((n, d + h), (d,), (d,), (h, d), (h, 2), (n, d))
    sizes = [math.prod(sh) for sh in shapes]
    u = jax.random.uniform(key, (sum(sizes),))
    u = u + jnp.finfo(u.dtype).eps / 2  # [0, 1 - eps] -> (0, 1)
    parts = jnp.split(u, list(itertools.accumulate(sizes))[:-1])
    return [q.reshape(sh) for q, sh in zip(parts, shapes, strict=True)]


def _noise(u, p: Params):
    """Unit-variance noise of the chosen family from uniforms ``u`` by inverse CDFs:
    ``N(0, 1)``, ``Laplace(0, 1/sqrt 2)``, ``U[-sqrt 3, sqrt 3]`` (the laws of
    :func:`jaxkit.kernels.sem.sample_noise`); every family from the same uniforms, so
    the noise cells differ only by the law."""
    v = u - 0.5
    laplace = -jnp.sign(v) * jnp.log1p(-2.0 * jnp.abs(v)) / math.sqrt(2.0)
    allk = jnp.stack([ndtri(u), laplace, (2.0 * u - 1.0) * math.sqrt(3.0)])
    return _pick(allk, p.noise)


def _ar(eps, phi):
    """AR(1) over rows with unit stationary variance: ``u_t = phi u_{t-1} + sqrt(1 -
    phi^2) eps_t``, ``u_0 = eps_0``."""
    c = jnp.sqrt(1.0 - phi * phi)

    def step(u, e):
        u = phi * u + c * e
        return u, u

    _, rest = jax.lax.scan(step, eps[0], eps[1:])
    return jnp.concatenate([eps[:1], rest], axis=0)


STATIC_EDGES = ("sf",)  # graph families whose edges_per_node must be a Python number


def simulate_one(key, p: Params, *, n: int, d: int, graph: str, max_envs: int,
                 static_edges: float | None = None) -> SCMData:
    """One dataset; see the module docstring (static arguments keyword-only;
    ``static_edges`` replaces the traced ``p.edges_per_node`` for :data:`STATIC_EDGES`
    families)."""
    h = MAX_CONFOUNDERS
    k_g, k_u = jax.random.split(key)
    u_e, u_s, u_t, u_c, u_cw, u_m = _uniforms(k_u, n, d, h)
    epn = p.edges_per_node if static_edges is None else static_edges
    b = jnp.asarray(GRAPHS[graph](k_g, d, edges_per_node=epn, w_low=p.w_low,
                                  w_high=p.w_high), jnp.float32)
    b, pair, cancelled = _cancel(b, p.faithfulness)

    # noise: family, heterogeneous scale, AR(1) over rows
    eps = _ar(_noise(u_e, p), p.ar)
    e, u = eps[:, :d], eps[:, d:]
    s = jnp.exp((2.0 * u_s - 1.0) * p.noise_hetero)
    e = e * s

    # environments: the first round(obs_fraction n) rows observational, the rest split
    # evenly over n_envs atomic interventions (targets cycle over a random permutation)
    r = jnp.arange(n)
    n_obs = jnp.where(p.n_envs > 0, jnp.round(p.obs_fraction * n).astype(jnp.int32), n)
    n_int = jnp.maximum(n - n_obs, 1)
    env = jnp.where(r < n_obs, 0, 1 + ((r - n_obs) * p.n_envs) // n_int).astype(jnp.int32)
    perm = jnp.argsort(u_t)
    k_idx = jnp.arange(max_envs + 1)
    tgt_node = perm[(k_idx - 1) % d]
    targets = (k_idx[:, None] >= 1) & (k_idx[:, None] <= p.n_envs) & (
        tgt_node[:, None] == jnp.arange(d)[None, :])
    hit = targets[env]  # (n, d): row r intervenes on node j
    kind = p.intervention
    shift = kind == INTERVENTIONS.index("shift")
    e = e * jnp.where(hit & ~shift, p.strength, 1.0)  # 'scale' and 'hard': noise sd
    e = e + jnp.where(hit & shift, p.strength * s, 0.0)  # 'shift': noise mean
    cut = hit & (kind == INTERVENTIONS.index("hard"))  # do(): parents and confounders cut

    # hidden confounders: latent u_k -> two distinct observed variables
    kids = jnp.argsort(u_c, axis=1)[:, :2].astype(jnp.int32)  # two distinct nodes each
    active = jnp.arange(h) < p.confounders
    signs = jnp.where(u_cw < 0.5, 1.0, -1.0)
    w = jnp.where(active[:, None], signs * p.confounder_strength, 0.0)
    wc = jnp.zeros((d, h)).at[kids[:, 0], jnp.arange(h)].add(w[:, 0])
    wc = wc.at[kids[:, 1], jnp.arange(h)].add(w[:, 1])
    e_own = e
    e = e + u @ wc.T

    # mechanisms by fixed-point sweeps (exact after depth + 1 sweeps in a DAG)
    iscm = p.scale == SCALES.index("iscm")
    acyclic = is_acyclic(b)
    bs = jnp.where(acyclic, b, 0.0)

    def sweep(_, z):
        raw = jnp.where(cut, e_own, jnp.where(p.nonlinear, jnp.tanh(z), z) @ bs.T + e)
        return jnp.where(iscm, standardise(raw), raw)

    x = jax.lax.fori_loop(0, d, sweep, jnp.zeros_like(e))

    # measurement error, post-hoc standardisation
    sd = jnp.std(x, axis=0)
    x = x + jnp.sqrt(p.meas_error) * sd * ndtri(u_m)
    x = jnp.where(p.scale == SCALES.index("standardised"), standardise(x), x)

    spread = jnp.max(x, axis=0) - jnp.min(x, axis=0)
    valid = acyclic & jnp.all(jnp.isfinite(b)) & jnp.all(jnp.isfinite(x)) & jnp.all(
        spread > 1e-6 * jnp.maximum(jnp.max(jnp.abs(x), axis=0), 1.0))
    x = jnp.where(valid, x, jnp.nan)
    return SCMData(x, b, env, targets, valid, pair, cancelled, kids, active)


@partial(jax.jit, static_argnames=("n", "d", "graph", "max_envs", "static_edges"))
def _simulate(keys, p, *, n, d, graph, max_envs, static_edges):
    return jax.vmap(lambda k: simulate_one(k, p, n=n, d=d, graph=graph, max_envs=max_envs,
                                           static_edges=static_edges))(keys)


def simulate(key, spec: CellSpec, batch: int) -> SCMData:
    """``batch`` datasets of ``spec`` in one jitted, vmapped call.

    Dataset ``i`` uses ``fold_in(key, i)``, so the same key gives the same graphs and
    noise draws in every cell of one shape (common random numbers across cells: the
    cells differ only by their perturbation).

    Args:
        key: PRNG key.
        spec: the cell.
        batch: number of datasets (>= 1).

    Returns:
        :class:`SCMData` with a leading axis of size ``batch``.
    """
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive int; got {batch!r}")
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch))
    static = float(spec.edges_per_node) if spec.graph in STATIC_EDGES else None
    return _simulate(keys, params_of(spec), n=spec.n, d=spec.d, graph=spec.graph,
                     max_envs=spec.max_envs, static_edges=static)


def expected_confounded_corr(w1: float, w2: float, s1: float = 1.0, s2: float = 1.0) -> float:
    """Correlation of two otherwise independent variables ``x_i = w1 u + s1 e_i`` and
    ``x_j = w2 u + s2 e_j`` with a shared unit-variance latent ``u``:
    ``w1 w2 / sqrt((w1^2 + s1^2)(w2^2 + s2^2))``."""
    return w1 * w2 / math.sqrt((w1 * w1 + s1 * s1) * (w2 * w2 + s2 * s2))
