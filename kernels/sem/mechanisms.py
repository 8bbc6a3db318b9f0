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

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._draws import normals, uniforms
from .prior_noise import prior_noise

__all__ = ["MECHANISMS", "INTERVENTION_TYPES", "MechParams", "init_mechanisms",
           "topological_order", "simulate_scm", "masked_moments"]

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


def topological_order(adj: Bool[Array, "d d"], active: Bool[Array, " d"]) -> Int[Array, " d"]:
    """A topological order of the active nodes of the DAG ``adj`` (``adj[v, j]``:
    ``j -> v``), padding slots last: nodes sorted by their depth (longest path from a
    root), computed by ``d`` relaxations ``depth_v = max_j adj[v, j] (depth_j + 1)``."""
    d = adj.shape[0]
    a = adj & active[:, None] & active[None, :]

    def relax(depth, _):
        return jnp.max(jnp.where(a, depth[None, :] + 1, 0), axis=1), None

    depth, _ = jax.lax.scan(relax, jnp.zeros((d,), jnp.int32), None, length=d)
    return jnp.argsort(jnp.where(active, depth, d + 1), stable=True)


def masked_moments(v: Float[Array, " n"], m: Bool[Array, " n"]
                   ) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """Mean and standard deviation (ddof 0, floored at 1e-6) of ``v[m]``."""
    w = m.astype(v.dtype)
    cnt = jnp.maximum(jnp.sum(w), 1.0)
    mu = jnp.sum(v * w) / cnt
    sd = jnp.sqrt(jnp.sum(((v - mu) * w) ** 2) / cnt)
    return mu, jnp.maximum(sd, 1e-6)


def _mechanism(code, p: MechParams, xpa):
    """``(f, sigma)`` of one node for all rows; ``p`` holds that node's parameters (its
    rows of :class:`MechParams`) and ``xpa`` is ``x`` with non-parents zeroed."""
    lin = xpa @ p.w
    mlp = jnp.tanh(xpa @ p.w1 + p.b1) @ p.w2
    rff = jnp.sqrt(2.0 / _M) * jnp.cos(xpa @ p.omega + p.phi) @ p.c
    sig = (2.0 * jax.nn.sigmoid(xpa * p.slope) - 1.0) @ p.w
    het = jax.nn.softplus(xpa @ p.g + 0.5) / jax.nn.softplus(0.5)
    f = jnp.stack([lin, mlp, rff, sig, mlp])[code]
    sigma = jnp.where(code == 4, het, 1.0)
    return f, sigma


def simulate_scm(key: PRNGKeyArray, adj: Bool[Array, "d d"], params: MechParams, *,
                 mechanism: Int[Array, ""], noise: Int[Array, ""],
                 active: Bool[Array, " d"], rows: Bool[Array, " n"],
                 env: Int[Array, " n"], targets: Bool[Array, "k d"],
                 itype: Int[Array, ""], iscm: Bool[Array, ""] | bool = False
                 ) -> Float[Array, "n d"]:
    """Ancestral sampling of the padded SCM (module docstring).

    The nodes and every parameter are first permuted into a topological order, so the
    scan over nodes indexes by its step counter only (no per-task gathers under
    ``vmap``); the columns are permuted back at the end.

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
    n_env = targets.shape[0]
    z, zs, fac = uniforms(k_z, (n_env, d), (n_env, d), (n_env, d))
    z = (1.0 + 2.0 * z) * jnp.where(zs < 0.5, 1.0, -1.0)
    fac = 2.0 + 2.0 * fac
    envc = jnp.clip(env, 0, n_env - 1)
    hit = (env >= 0)[:, None] & targets[envc] & rows[:, None]  # (n, d)
    order = topological_order(adj, active)
    adjf = (adj & active[:, None] & active[None, :]).astype(jnp.float32)
    eps = prior_noise(k_noise, (n, d), noise) * params.noise_scale[None, :]

    # everything into topological order: node axis first, parent axis second
    po = MechParams(*[a[order] for a in params])
    po = po._replace(w=po.w[:, order], w1=po.w1[:, order], omega=po.omega[:, order],
                     slope=po.slope[:, order], g=po.g[:, order])
    xs = (po, adjf[order][:, order], eps[:, order].T, hit[:, order].T,
          z[envc][:, order].T, fac[envc][:, order].T, active[order],
          jnp.arange(d))

    def body(x, inp):
        p, pa, e, hv, zv, fv, act, t = inp
        n_pa = jnp.sum(pa)
        xpa = x * pa[None, :]
        f, sigma = _mechanism(mechanism, p, xpa)
        ref = rows & ~hv
        fm, fs = masked_moments(f, ref)
        f = jnp.where((mechanism != 0) & (n_pa > 0), (f - fm) / fs, f)
        e = jnp.where(hv & (itype == 1), e + zv * p.noise_scale, e)
        e = jnp.where(hv & (itype == 2), e * fv, e)
        val = f + sigma * e
        m, s = masked_moments(val, ref)
        val = jnp.where(hv & (itype == 0), m + zv * s, val)
        val = jnp.where(iscm, (val - m) / s, val)
        val = jnp.where(rows & act, val, 0.0)
        return jax.lax.dynamic_update_slice(x, val[:, None], (0, t)), None

    x, _ = jax.lax.scan(body, jnp.zeros((n, d), jnp.float32), xs)
    return x[:, jnp.argsort(order)]
