"""Structural mechanisms of the causal prior and ancestral sampling of a padded SCM with
interventions and optional iSCM standardisation.

Model: for every active node ``v`` in a topological order,

.. math::
    x_v = f_v(x_{pa(v)}) + \\sigma_v(x_{pa(v)})\\, s_v\\, \\epsilon_v

with ``epsilon_v`` unit-variance noise (:func:`.prior_noise.prior_noise`), ``s_v`` a
random noise scale and the mechanism family (``MECHANISMS``) chosen per task:

* ``linear``: ``f_v = sum_j w_vj x_j``, ``w ~ +-U[w_low, w_high]``, ``sigma = 1``;
* ``mlp``: ``f_v = tanh(x_pa W1_v + b1_v) w2_v`` (8 hidden units, Gaussian weights);
* ``rff``: ``f_v = sqrt(2/M) cos(x_pa Omega_v + phi_v) c_v`` (M = 16 random Fourier
  features, ``Omega ~ N(0, 1/l^2)``, ``l ~ U[0.5, 2]``: a GP draw with an RBF kernel,
  as in AVICI's ``RFFAdditive``);
* ``sigmoid``: additive ``f_v = sum_j w_vj (2 sigmoid(c_vj x_j) - 1)``, ``c ~ U[1, 3]``;
* ``hetero``: the ``mlp`` mean with a parent-dependent noise scale
  ``sigma_v = softplus(x_pa g_v + 0.5) / softplus(0.5)``.

For the nonlinear families ``f_v`` of a node with parents is standardised over the
reference rows (below) before the noise is added, so deep graphs do not blow up.

Interventions: row ``r`` belongs to environment ``env[r]`` (``-1``: observational) and
environment ``k`` targets the nodes ``targets[k]``. On a targeted node: ``hard`` sets
``x_v = m_v + z_kv sd_v`` (a do-intervention, ``z ~ +-U[1, 3]``, the same value for the
whole environment; the node ignores its parents and its noise), ``shift`` adds
``z_kv s_v`` to the noise, ``scale`` multiplies the noise by ``U[2, 4]``. ``m_v, sd_v``
are the mean and standard deviation of ``x_v`` over the *reference rows* (valid rows
that do not target ``v``). With ``iscm`` every node is standardised with its reference
statistics right after it is generated (Ormaniec et al., "Standardizing structural
causal models", ICLR 2025), which removes var-sortability along chains.

Everything is fixed-shape (``n_max`` rows, ``d_max`` node slots with masks) and traced in
its codes and flags, so one compiled function samples any mixture of tasks.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._draws import hash_normals, hash_uniforms, normals, uniforms
from .prior_noise import prior_noise

__all__ = ["MECHANISMS", "INTERVENTION_TYPES", "MechParams", "init_mechanisms",
           "init_mechanism", "topological_order", "simulate_mechanism",
           "simulate_mechanism_batch", "simulate_scm",
           "masked_moments", "fast_cos"]

#: Mechanism codes, in the order :func:`simulate_scm` indexes them.
MECHANISMS = ("linear", "mlp", "rff", "sigmoid", "hetero")
#: Intervention types: a do-intervention and two soft ones.
INTERVENTION_TYPES = ("hard", "shift", "scale")

_H = 8   # MLP hidden units
_M = 16  # random Fourier features


class MechParams(NamedTuple):
    """Random parameters of every node's mechanism (all families drawn; one is used).

    ``w[v, j]``: linear / additive weight of ``j -> v`` (zero off the graph); ``w1``
    ``(d, d, H)``, ``b1`` ``(d, H)``, ``w2`` ``(d, H)``: the MLP; ``omega`` ``(d, d, M)``,
    ``phi`` ``(d, M)``, ``c`` ``(d, M)``: the random Fourier features; ``slope`` ``(d, d)``:
    the sigmoid slopes; ``g`` ``(d, d)``: the heteroscedastic scale weights;
    ``noise_scale`` ``(d,)``."""

    w: Float[Array, "d d"]
    w1: Float[Array, "d d h"]
    b1: Float[Array, "d h"]
    w2: Float[Array, "d h"]
    omega: Float[Array, "d d m"]
    phi: Float[Array, "d m"]
    c: Float[Array, "d m"]
    slope: Float[Array, "d d"]
    g: Float[Array, "d d"]
    noise_scale: Float[Array, " d"]


def init_mechanisms(key: PRNGKeyArray, adj: Bool[Array, "d d"], *, w_low=0.5, w_high=2.0,
                    scale_low=0.5, scale_high=1.5) -> MechParams:
    """Draw the mechanism parameters of every node of ``adj`` (``adj[v, j]``: ``j -> v``).

    Differentiable: yes, in w_low, w_high, scale_low and scale_high (the key fixes the draws).

    Args:
        key: PRNG key.
        adj: boolean adjacency ``(d, d)``.
        w_low, w_high: linear weight magnitudes ``U[w_low, w_high]`` with random signs
            (traced).
        scale_low, scale_high: noise scales ``s_v ~ U[scale_low, scale_high]`` (traced).

    Returns:
        :class:`MechParams`.
    """
    d = adj.shape[0]
    a = adj.astype(jnp.float32)
    k_u, k_n = jax.random.split(key)
    mag, sign, ls, phi, slope, scale = uniforms(k_u, (d, d), (d, d), (d, 1, 1), (d, _M),
                                                (d, d), (d,))
    w1, b1, w2, omega, c, g = normals(k_n, (d, d, _H), (d, _H), (d, _H), (d, d, _M), (d, _M),
                                      (d, d))
    lerp = lambda u, lo, hi: lo + (hi - lo) * u  # noqa: E731
    return MechParams(
        w=a * lerp(mag, w_low, w_high) * jnp.where(sign < 0.5, 1.0, -1.0),
        w1=w1 * a[:, :, None],
        b1=b1 * 0.5,
        w2=w2,
        omega=omega / lerp(ls, 0.5, 2.0) * a[:, :, None],
        phi=phi * (2 * jnp.pi),
        c=c,
        slope=lerp(slope, 1.0, 3.0),
        g=g * a,
        noise_scale=lerp(scale, scale_low, scale_high),
    )


def init_mechanism(key: PRNGKeyArray, adj: Bool[Array, "d d"], code: int, *, w_low=0.5,
                   w_high=2.0, scale_low=0.5, scale_high=1.5) -> MechParams:
    """The parameters of mechanism ``MECHANISMS[code]`` only (``code`` static): the same
    laws as :func:`init_mechanisms` for the fields that mechanism uses, zeros elsewhere,
    so a task draws only the random numbers its family needs (from the counter hash
    of :mod:`._draws`).

    Differentiable: yes, in w_low, w_high, scale_low and scale_high (the key fixes the draws).

    Args:
        key: PRNG key.
        adj: boolean adjacency ``(d, d)``.
        code: mechanism code in ``[0, 5)`` (static).
        w_low, w_high, scale_low, scale_high: as :func:`init_mechanisms` (traced).

    Returns:
        :class:`MechParams` (unused fields zero).
    """
    if not isinstance(code, int) or not 0 <= code < len(MECHANISMS):
        raise ValueError(f"`code` must be a static int in [0, {len(MECHANISMS)}); got {code!r}")
    d = adj.shape[0]
    a = adj.astype(jnp.float32)
    k_u, k_n = jax.random.split(key)
    lerp = lambda u, lo, hi: lo + (hi - lo) * u  # noqa: E731
    z = dict(w=jnp.zeros((d, d)), w1=jnp.zeros((d, d, _H)), b1=jnp.zeros((d, _H)),
             w2=jnp.zeros((d, _H)), omega=jnp.zeros((d, d, _M)), phi=jnp.zeros((d, _M)),
             c=jnp.zeros((d, _M)), slope=jnp.zeros((d, d)), g=jnp.zeros((d, d)))
    if code in (0, 3):  # linear / additive sigmoid: signed weights (+ slopes)
        mag, sign, slope, scale = hash_uniforms(k_u, (d, d), (d, d), (d, d), (d,))
        z["w"] = a * lerp(mag, w_low, w_high) * jnp.where(sign < 0.5, 1.0, -1.0)
        if code == 3:
            z["slope"] = lerp(slope, 1.0, 3.0)
    elif code in (1, 4):  # MLP (+ heteroscedastic scale weights)
        (scale,) = hash_uniforms(k_u, (d,))
        w1, b1, w2, g = hash_normals(k_n, (d, d, _H), (d, _H), (d, _H), (d, d))
        z.update(w1=w1 * a[:, :, None], b1=b1 * 0.5, w2=w2)
        if code == 4:
            z["g"] = g * a
    else:  # random Fourier features
        ls, phi, scale = hash_uniforms(k_u, (d, 1, 1), (d, _M), (d,))
        omega, c = hash_normals(k_n, (d, d, _M), (d, _M))
        z.update(omega=omega / lerp(ls, 0.5, 2.0) * a[:, :, None], phi=phi * (2 * jnp.pi), c=c)
    return MechParams(**z, noise_scale=lerp(scale, scale_low, scale_high))


def _order_and_rank(adj, active):
    """:func:`topological_order` of a batch of DAGs ``(C, d, d)`` and its inverse
    permutation (``rank[order[t]] = t``). The depth relaxations run until no depth
    changes (longest path + 1 sweeps, usually far fewer than ``d``)."""
    d = adj.shape[-1]
    a = adj & active[..., :, None] & active[..., None, :]

    def relax(depth):
        return jnp.max(jnp.where(a, depth[..., None, :] + 1, 0), axis=-1)

    def body(c):
        new = relax(c[0])
        return new, jnp.any(new != c[0])

    depth, _ = jax.lax.while_loop(lambda c: c[1], body,
                                  (jnp.zeros(active.shape, jnp.int32), jnp.array(True)))
    key = jnp.where(active, depth, d + 1)
    i = jnp.arange(d)
    # the stable argsort by counting (XLA:CPU's sort is slow for many tiny arrays):
    # rank[v] = #{u: key_u < key_v} + #{u < v: key_u = key_v}
    kv, ku = key[..., :, None], key[..., None, :]
    rank = jnp.sum((ku < kv) | ((ku == kv) & (i[None, :] < i[:, None])), axis=-1,
                   dtype=jnp.int32)
    order = jnp.sum(jnp.where(rank[..., None, :] == i[:, None], i[None, :], 0), axis=-1,
                    dtype=jnp.int32)
    return order, rank


def topological_order(adj: Bool[Array, "d d"], active: Bool[Array, " d"]) -> Int[Array, " d"]:
    """A topological order of the active nodes of the DAG ``adj`` (``adj[v, j]``:
    ``j -> v``), padding slots last: nodes sorted (stably) by their depth (longest path
    from a root), computed by ``d`` relaxations ``depth_v = max_j adj[v, j] (depth_j + 1)``.

    Differentiable: no: integer output.

    Args:
        adj: ``(d, d)`` boolean adjacency of a DAG, ``adj[v, j]``: ``j -> v``.
        active: ``(d,)`` boolean mask of the active nodes (the others are padding).

    Returns:
        ``(d,)`` int32 node indices in a topological order, the padding slots last.
    """
    return _order_and_rank(adj, active)[0]


def masked_moments(v: Float[Array, " n"], m: Bool[Array, " n"]
                   ) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """Mean and standard deviation (ddof 0, floored at 1e-6) of ``v[m]``.

    Differentiable: yes, in v.

    Args:
        v: ``(n,)`` values.
        m: ``(n,)`` bool mask of the entries that count.

    Returns:
        ``(mean, sd)``, scalars in ``v``'s dtype.
    """
    w = m.astype(v.dtype)
    cnt = jnp.maximum(jnp.sum(w), 1.0)
    mu = jnp.sum(v * w) / cnt
    return mu, _floored_sd(jnp.sum(((v - mu) * w) ** 2) / cnt)


def _floored_sd(var):
    """``max(sqrt(var), 1e-6)``, the same values, with a finite gradient at ``var = 0``
    (a constant column, or the MLP output of a root node): there ``sqrt``'s infinite
    derivative times the floor's zero made every gradient through the moments NaN."""
    zero = var == 0
    return jnp.maximum(jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, var))), 1e-6)


def fast_cos(y):
    """``cos y`` in float32 by range reduction to ``[0, pi/2]`` and the Taylor polynomial
    of degree 14 (absolute error < 2e-6 for ``|y| < 1e3``; XLA's CPU ``cos`` is not
    vectorised and was the random-Fourier-feature mechanism's main cost).

    Differentiable: yes, in y.
    """
    r = y - (2.0 * math.pi) * jnp.round(y * (0.5 / math.pi))
    a = jnp.abs(r)
    flip = a > 0.5 * math.pi
    a = jnp.where(flip, math.pi - a, a)
    s = a * a
    p = jnp.float32(_COS[-1])
    for c in _COS[-2::-1]:
        p = p * s + c
    return jnp.where(flip, -p, p)


_COS = tuple((-1.0) ** k / math.factorial(2 * k) for k in range(8))


def _pdot(w, xs):
    """``sum_j w[c, j, ...] xs[c, j, :]``: the parent contraction of a batch as a multiply
    and a reduction over the parent axis (second), rows minor. ``w`` is ``(C, parents)``
    or ``(C, parents, k)``, ``xs`` ``(C, parents, n)``; the result ``(C, n)`` or
    ``(C, k, n)`` (XLA:CPU runs it as one vectorised loop; as a batched ``dot`` these
    small contractions were ~2.5x slower, and reducing over a leading parent axis ~2.5x
    slower as well)."""
    if w.ndim == 2:
        return jnp.sum(w[:, :, None] * xs, axis=1)
    return jnp.sum(w[:, :, :, None] * xs[:, :, None, :], axis=1)


def _mechanism(code: int, p: dict, xs):
    """``(f, sigma)`` ``(C, n)`` of one topological position of a batch of ``C`` tasks
    under the static mechanism ``code``; ``p`` holds that position's parameters (parent
    axis after the batch axis, masked by the parents), ``xs`` the data so far
    ``(C, parents, n)`` (``2 sigmoid(y) - 1`` is computed as ``tanh(y / 2)``)."""
    if code == 0:
        return _pdot(p["w"], xs), 1.0
    if code == 2:
        h = _pdot(p["omega"], xs) + p["phi"][..., None]
        return jnp.sqrt(2.0 / _M) * jnp.sum(fast_cos(h) * p["c"][..., None], axis=1), 1.0
    if code == 3:
        return jnp.sum(jnp.tanh(0.5 * xs * p["slope"][..., None]) * p["w"][..., None],
                       axis=1), 1.0
    h = _pdot(p["w1"], xs) + p["b1"][..., None]
    mlp = jnp.sum(jnp.tanh(h) * p["w2"][..., None], axis=1)
    if code == 1:
        return mlp, 1.0
    return mlp, jax.nn.softplus(_pdot(p["g"], xs) + 0.5) / jax.nn.softplus(0.5)


#: The fields of :class:`MechParams` each mechanism reads (the rest are not scanned).
_USES = {0: ("w",), 1: ("w1", "b1", "w2"), 2: ("omega", "phi", "c"), 3: ("w", "slope"),
         4: ("w1", "b1", "w2", "g")}
_PARENT_AXIS = ("w", "w1", "omega", "slope", "g")


def _intervene(key, eps_t, ns, env, rows, targets_p, itype):
    """One task's noise in topological order ``eps_t`` ``(d, n)`` scaled by the noise
    scales ``ns`` with the soft interventions applied (``shift`` adds ``z s_v``,
    ``scale`` multiplies by ``U[2, 4]`` on the targeted rows), and ``zv`` ``(d, n)``: on
    each targeted (node, row) the environment's value for that node (the hard / shift
    value ``z``, or the scale factor), 0 elsewhere (``z`` and the factor are never 0, so
    ``zv != 0`` marks the hits). ``targets_p`` ``(k, d)``: the environments' targets by
    position. The per-row values come from one row gather of a ``(k, d)`` table
    (element gathers are slow on XLA:CPU)."""
    n_env, d = targets_p.shape
    # one uniform gives the hard / shift value's magnitude or the scale factor (a task
    # has one intervention type), a second one the value's sign
    u, us = hash_uniforms(key, (n_env, d), (n_env, d))
    zf = jnp.where(itype == 2, 2.0 + 2.0 * u,
                   (1.0 + 2.0 * u) * jnp.where(us < 0.5, 1.0, -1.0))
    table = jnp.where(targets_p, zf, 0.0)
    zv = jnp.where(((env >= 0) & rows)[:, None], table[jnp.clip(env, 0, n_env - 1)], 0.0).T
    hit = zv != 0.0
    e = eps_t * ns[:, None]
    e = jnp.where(hit & (itype == 1), e + zv * ns[:, None], e)
    return jnp.where(hit & (itype == 2), e * zv, e), zv


def _prepare(mechanism: int, key, adj, params: MechParams, eps, active, rows, env, targets,
             order, itype):
    """One task's inputs of the node loop in topological order (position axis first): the
    parameters this mechanism reads (parent axis in the same order, masked by the
    parents), the scaled noise with the soft interventions and the intervention values
    (:func:`_intervene`). ``params`` and ``eps`` ``(n, d)`` are indexed by node label."""
    pa = (adj & active[:, None] & active[None, :])[order][:, order]
    p = {}
    for f in _USES[mechanism]:
        a = getattr(params, f)[order]
        if f in _PARENT_AXIS:
            a = a[:, order] * pa.astype(a.dtype).reshape(*pa.shape, *(1,) * (a.ndim - 2))
        p[f] = a
    e, zv = _intervene(key, eps[:, order].T, params.noise_scale[order], env, rows,
                       targets[:, order], itype)
    return dict(p=p, n_pa=jnp.sum(pa, axis=1), e=e, zv=zv, act=active[order])


def _prepare_drawn(mechanism: int, k_mech, key, adj, eps_t, active, rows, env, targets,
                   order, itype, w_range, scale_range):
    """:func:`_prepare` with the parameters drawn (:func:`init_mechanism`) directly by
    topological position and the noise ``eps_t`` ``(d, n)`` taken as indexed by position:
    both are i.i.d. over nodes, so this is the same law as drawing them by label and
    permuting, without the permutations."""
    pa = (adj & active[:, None] & active[None, :])[order][:, order]
    params = init_mechanism(k_mech, pa, mechanism, w_low=w_range[0], w_high=w_range[1],
                            scale_low=scale_range[0], scale_high=scale_range[1])
    p = {f: getattr(params, f) for f in _USES[mechanism]}
    e, zv = _intervene(key, eps_t, params.noise_scale, env, rows, targets[:, order], itype)
    return dict(p=p, n_pa=jnp.sum(pa, axis=1), e=e, zv=zv,
                act=jnp.arange(adj.shape[0]) < jnp.sum(active))


def _node(mechanism: int, xs, inp, rows, itype, iscm):
    """The values ``(C, n)`` of one topological position of every task of a batch, from
    the data so far ``xs`` ``(C, parents, n)`` and the position's slice ``inp`` of the
    prepared inputs (soft interventions already in the noise ``inp["e"]``)."""
    f, sigma = _mechanism(mechanism, inp["p"], xs)
    hv = inp["zv"] != 0.0
    ref = rows & ~hv
    if mechanism != 0:
        fm, fs = _moments(f, ref)
        f = jnp.where((inp["n_pa"] > 0)[:, None], (f - fm) / fs, f)
    val = f + sigma * inp["e"]
    m, s = _moments(val, ref)
    val = jnp.where(hv & (itype == 0)[:, None], m + inp["zv"] * s, val)
    val = jnp.where(iscm[:, None], (val - m) / s, val)
    return jnp.where(rows & inp["act"][:, None], val, 0.0)


def _moments(v, m):
    """:func:`masked_moments` of each row of ``v`` ``(C, n)`` over the mask ``m``, as
    ``(C, 1)`` columns."""
    w = m.astype(v.dtype)
    cnt = jnp.maximum(jnp.sum(w, axis=-1, keepdims=True), 1.0)
    mu = jnp.sum(v * w, axis=-1, keepdims=True) / cnt
    return mu, _floored_sd(jnp.sum(((v - mu) * w) ** 2, axis=-1, keepdims=True) / cnt)


def _node_major(prep):
    """The prepared inputs of a batch (leading axis ``C``) moved to the node loop's
    layout: position axis first, then the batch (then the parent axis, if any)."""
    return jax.tree.map(lambda a: jnp.moveaxis(a, 0, 1), prep)


def _node_loop(mechanism: int, xs, rows, itype, iscm, n_steps, n_blocks: int):
    """Ancestral sampling of a batch in topological order (``xs``: :func:`_node_major`
    inputs): step ``t`` computes position ``t`` of every task from positions ``< t``.
    The carry is ``(C, d, n)``, so the parent contraction reduces over its second axis
    without a transpose. The steps are cut into ``n_blocks`` static
    blocks; block ``[lo, hi)`` contracts over the first ``hi`` positions only (its
    nodes' parents are earlier), about half of ``d^2`` per task instead of ``d^2``.
    ``n_steps``: ``None`` (all ``d`` positions, static) or a traced scalar: positions
    ``>= n_steps`` (padding in every task) are not computed (left 0)."""
    d, C = xs["act"].shape
    n = rows.shape[1]
    xt = jnp.zeros((C, d, n), xs["e"].dtype)
    size = -(-d // max(1, min(n_blocks, d)))
    for lo in range(0, d, size):
        hi = min(d, lo + size)

        def step(t, xt, hi=hi):
            inp = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, t, 0, False), xs)
            inp["p"] = {f: a[:, :hi] if f in _PARENT_AXIS else a for f, a in inp["p"].items()}
            val = _node(mechanism, xt[:, :hi], inp, rows, itype, iscm)
            return jax.lax.dynamic_update_index_in_dim(xt, val, t, 1)

        upper = hi if n_steps is None else jnp.clip(n_steps, lo, hi)
        xt = jax.lax.fori_loop(lo, upper, step, xt)
    return xt


def _unpermute(xt, rank):
    """``x[c, r, v] = xt[c, rank[c, v], r]``: the loop's ``(C, d, n)`` result back to
    node labels, ``(C, n, d)``."""
    return jax.vmap(lambda x, r: x[r].T)(xt, rank)


def simulate_mechanism(mechanism: int, key: PRNGKeyArray, adj: Bool[Array, "d d"],
                       params: MechParams, eps: Float[Array, "n d"], *,
                       active: Bool[Array, " d"], rows: Bool[Array, " n"],
                       env: Int[Array, " n"], targets: Bool[Array, "k d"],
                       itype: Int[Array, ""], iscm: Bool[Array, ""] | bool = False,
                       n_blocks: int = 4) -> Float[Array, "n d"]:
    """Ancestral sampling (module docstring) under the static mechanism ``mechanism``,
    given the unit noise ``eps`` (before the noise scales); ``key`` draws the
    interventions' values. :func:`simulate_scm` is this with a traced mechanism code and
    the noise drawn from its code.

    Differentiable: yes, in params and eps.

    Args:
        mechanism: code in ``MECHANISMS`` (a static Python ``int``).
        key: PRNG key of the interventions' values.
        adj: boolean adjacency ``(d, d)``, a DAG on the active nodes.
        params: :func:`init_mechanisms` output.
        eps: ``(n, d)`` unit noise.
        active: active node slots ``(d,)``.
        rows: valid rows ``(n,)``.
        env: environment of each row ``(n,)``, ``-1`` for observational rows.
        targets: targets of each environment ``(k, d)``.
        itype: code in ``INTERVENTION_TYPES`` (traced).
        iscm: standardise each node as it is generated (traced bool).
        n_blocks: static number of blocks of the node loop, as
            :func:`simulate_mechanism_batch`.

    Returns:
        ``x`` ``(n, d)``; padding rows and node slots are 0.
    """
    one = lambda a: jnp.asarray(a)[None]  # noqa: E731
    return simulate_mechanism_batch(
        mechanism, key[None], one(adj),
        jax.tree.map(one, params), one(eps), active=one(active), rows=one(rows),
        env=one(env), targets=one(targets), itype=one(itype), iscm=one(iscm),
        n_blocks=n_blocks)[0]


def simulate_mechanism_batch(mechanism: int, keys: PRNGKeyArray, adj: Bool[Array, "C d d"],
                             params: MechParams, eps: Float[Array, "C n d"], *,
                             active: Bool[Array, "C d"], rows: Bool[Array, "C n"],
                             env: Int[Array, "C n"], targets: Bool[Array, "C k d"],
                             itype: Int[Array, " C"], iscm: Bool[Array, " C"],
                             n_steps: Int[Array, ""] | None = None, n_blocks: int = 4
                             ) -> Float[Array, "C n d"]:
    """:func:`simulate_mechanism` for a batch of ``C`` tasks of one mechanism (every
    argument with a leading batch axis), stepping through the topological positions
    together: equal to its ``vmap``, but the loop can stop early for the whole batch.

    The nodes and every parameter are first permuted into each task's topological order
    (active nodes first), so the loop indexes by its step counter only; the columns are
    permuted back at the end.

    Differentiable: yes, in params and eps with n_steps=None (a traced n_steps bounds the loop:
    reverse mode fails).

    Args:
        mechanism: code in ``MECHANISMS`` (a static Python ``int``).
        keys: ``(C,)`` PRNG keys of the interventions' values.
        adj: ``(C, d, d)`` boolean adjacencies.
        params: :func:`init_mechanisms` outputs stacked over the batch.
        eps: ``(C, n, d)`` unit noise.
        active: ``(C, d)`` active node slots.
        rows: ``(C, n)`` valid rows.
        env: ``(C, n)`` environment of each row, ``-1`` for observational rows.
        targets: ``(C, k, d)`` targets of each environment.
        itype: ``(C,)`` codes in ``INTERVENTION_TYPES``.
        iscm: ``(C,)`` bool: iSCM standardisation per task.
        n_steps: ``None``, or a traced scalar ``>=`` every task's number of active nodes
            (e.g. the batch's largest ``d``): the positions past it are padding and are
            not computed.
        n_blocks: static number of blocks of the node loop (each block contracts over
            the parents its positions can have; more blocks cost compile time).

    Returns:
        ``x`` ``(C, n, d)``; padding rows and node slots are 0.
    """
    itype, iscm = jnp.asarray(itype), jnp.asarray(iscm)
    order, rank = _order_and_rank(adj, active)
    prep = jax.vmap(functools.partial(_prepare, mechanism))(
        keys, adj, params, eps, active, rows, env, targets, order, itype)
    xt = _node_loop(mechanism, _node_major(prep), rows, itype, iscm, n_steps, n_blocks)
    return _unpermute(xt, rank)


def sample_mechanism_batch(mechanism: int, k_mech: PRNGKeyArray, keys: PRNGKeyArray,
                           adj: Bool[Array, "C d d"], eps_t: Float[Array, "C d n"], *,
                           active: Bool[Array, "C d"], rows: Bool[Array, "C n"],
                           env: Int[Array, "C n"], targets: Bool[Array, "C k d"],
                           itype: Int[Array, " C"], iscm: Bool[Array, " C"],
                           w_range: Float[Array, "C 2"], scale_range: Float[Array, "C 2"],
                           n_steps: Int[Array, ""] | None = None, n_blocks: int = 4
                           ) -> Float[Array, "C n d"]:
    """The data of a batch of ``C`` tasks of one mechanism with the parameters drawn as
    well: the law of :func:`init_mechanism` (key ``k_mech``) followed by
    :func:`simulate_mechanism_batch`, but the parameters are drawn directly by
    topological position and the unit noise ``eps_t`` ``(C, d, n)`` (i.i.d. over nodes
    and rows) is taken as indexed by position, so nothing is permuted before the loop
    (only the result, back to node labels). The task sampler's mechanism stage.

    Returns:
        ``x`` ``(C, n, d)``; padding rows and node slots are 0.
    """
    itype, iscm = jnp.asarray(itype), jnp.asarray(iscm)
    order, rank = _order_and_rank(adj, active)
    prep = jax.vmap(functools.partial(_prepare_drawn, mechanism))(
        k_mech, keys, adj, eps_t, active, rows, env, targets, order, itype, w_range,
        scale_range)
    xt = _node_loop(mechanism, _node_major(prep), rows, itype, iscm, n_steps, n_blocks)
    return _unpermute(xt, rank)

def simulate_scm(key: PRNGKeyArray, adj: Bool[Array, "d d"], params: MechParams, *,
                 mechanism: Int[Array, ""], noise: Int[Array, ""],
                 active: Bool[Array, " d"], rows: Bool[Array, " n"],
                 env: Int[Array, " n"], targets: Bool[Array, "k d"],
                 itype: Int[Array, ""], iscm: Bool[Array, ""] | bool = False
                 ) -> Float[Array, "n d"]:
    """Ancestral sampling of the padded SCM (module docstring).

    The nodes and every parameter are first permuted into a topological order, so the
    scan over nodes indexes by its step counter only (no per-task gathers under
    ``vmap``); the columns are permuted back at the end. The mechanism and the noise law
    are ``lax.switch`` branches (:func:`simulate_mechanism`, :func:`.prior_noise.noise_law`).

    Differentiable: yes, in params (the key and the codes fix the draws).

    Args:
        key: PRNG key.
        adj: boolean adjacency ``(d, d)``, a DAG on the active nodes.
        params: :func:`init_mechanisms` output.
        mechanism: code in ``MECHANISMS`` (traced).
        noise: code in :data:`.prior_noise.PRIOR_NOISES` (traced).
        active: active node slots ``(d,)``.
        rows: valid rows ``(n,)``.
        env: environment of each row ``(n,)``, ``-1`` for observational rows.
        targets: targets of each environment ``(k, d)``.
        itype: code in ``INTERVENTION_TYPES`` (traced).
        iscm: standardise each node as it is generated (traced bool).

    Returns:
        ``x`` ``(n, d)``; padding rows and node slots are 0.
    """
    n, d = rows.shape[0], adj.shape[0]
    k_noise, k_z = jax.random.split(key)
    eps = prior_noise(k_noise, (n, d), noise)
    kw = dict(active=active, rows=rows, env=env, targets=targets, itype=itype, iscm=iscm)
    mech = jnp.clip(jnp.asarray(mechanism, jnp.int32), 0, len(MECHANISMS) - 1)
    return jax.lax.switch(mech, [functools.partial(simulate_mechanism, m, k_z, adj, params, eps,
                                                   **kw) for m in range(len(MECHANISMS))])
