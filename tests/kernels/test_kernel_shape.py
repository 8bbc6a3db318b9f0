"""The shape of every public kernel: eager == ``jax.jit`` == ``jax.vmap`` (against a Python
loop over the batch), and a second jitted call with new values of the same shapes does not
retrace.

One table, :data:`CASES`, drives one harness (:func:`_check_case`). Each case is a tiny
function of arrays (the static choices closed over), a builder of its example arguments
from a PRNG key, and the public names it covers; cheap kernels share a case, since
compilation dominates the cost. :data:`NOT_TRACEABLE` lists the public functions the
harness leaves out, each with the reason; :func:`test_every_public_kernel_is_covered`
keeps the two tables complete as the modules grow. The compile-heavy cases whose kernels
the kernel's own test file also checks under jit and vmap are marked ``slow`` (run them with
``pytest -m slow``), which keeps this file's default run short.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jaxkit.kernels import (
    _auction,
    _batching,
    assignment,
    bandit,
    belief,
    checks,
    flow,
    flow_discrete,
    flow_ot,
    graph,
    ica,
    lingam,
    md,
    nets,
    sem,
    wasserstein,
)

MODULES = {"ica": ica, "lingam": lingam, "sem": sem, "graph": graph, "flow": flow,
           "flow_ot": flow_ot, "flow_discrete": flow_discrete, "bandit": bandit, "belief": belief,
           "nets": nets, "_batching": _batching, "_auction": _auction, "checks": checks,
           "assignment": assignment, "wasserstein": wasserstein, "md": md}
F32 = jnp.float32
BATCH = 3  # examples per vmap batch


class Case(NamedTuple):
    """``fn(*make(key))`` is checked; ``covers`` names the public kernels it exercises."""

    name: str
    fn: Any
    make: Any
    covers: tuple[str, ...]
    rtol: float = 1e-5
    atol: float = 1e-6
    vmap: bool = True  # False only where vmap makes no sense (say why in the case)
    slow: str = ""  # why the case runs only under ``-m slow`` (compile-heavy, and checked
    # for jit/vmap by the kernel's own test file too)


# ------------------------------------------------------------------------ builders


def _normal(key, shape, dtype=F32):
    return jax.random.normal(key, shape, dtype)


def _mixed_data(key, n=32, d=3, dtype=jnp.float64):
    """Non-Gaussian (Laplace) sources through a random mixing: an ICA-friendly x."""
    ks, ka = jax.random.split(key)
    s = jax.random.laplace(ks, (n, d), dtype)
    a = jax.random.normal(ka, (d, d), dtype) + 2 * jnp.eye(d, dtype=dtype)
    return s @ a.T


def _lingam_data(key, n=48, d=3):
    kb, ke = jax.random.split(key)
    b = sem.erdos_renyi_dag(kb, d, edges_per_node=1.0, dtype=jnp.float64)
    e = sem.sample_noise(ke, (n, d), "uniform", jnp.float64)
    return e @ sem.dag_inverse(b).T


def _linear_velocity(params, t, x, y=None):
    """A tiny batched velocity field ``x W + t b (+ y c)`` for the flow losses."""
    out = x @ params["w"] + jnp.asarray(t)[..., None] * params["b"]
    if y is not None:
        out = out + jnp.where(y < 0, 0.0, y.astype(out.dtype))[..., None] * params["c"]
    return out


def _velocity_params(key, d=2):
    kw, kb, kc = jax.random.split(key, 3)
    return {"w": 0.3 * _normal(kw, (d, d)), "b": _normal(kb, (d,)), "c": _normal(kc, (d,))}


def _token_logits(params, t, x):
    """A tiny logits model for discrete flow matching: a table lookup plus a time term."""
    return params["table"][x] + jnp.asarray(t).reshape(-1, 1, 1) * params["bias"]


def _token_params(key, v=5):
    kt, kb = jax.random.split(key)
    return {"table": _normal(kt, (v + 1, v)), "bias": _normal(kb, (v,))}


# --------------------------------------------------------------------------- cases: ICA


def _ica_steps(x, w):
    wr = ica.whiten(x)
    we = ica.whiten(x, n_components=2, solver="eigh")
    w0 = ica.sym_decorrelation(w)
    return (wr, we, w0, ica.fixed_point_update(w0, wr.z, fun="exp"),
            ica.amari_distance(w, w0))


def _ica_steps_args(key):
    kx, kw = jax.random.split(key)
    return _mixed_data(kx), jax.random.normal(kw, (3, 3), jnp.float64)


def _fastica(key, x):
    return ica.fastica(key, x, max_iter=30)


def _fastica_plain_vmap(x, w):
    return ica.fastica(None, x, w_init=w, max_iter=30, whiten_solver="eigh",
                       whiten_mode="arbitrary-variance", sequential_vmap=False)


def _lingam_steps(w):
    b = lingam.b_from_unmixing(w)
    return b, lingam.causal_order_from_b(b)


def _prune(x, order):
    return lingam.adaptive_lasso_prune(x, order, criterion="aic_sklearn")


def _prune_args(key):
    kx, ko = jax.random.split(key)
    return _lingam_data(kx), jax.random.permutation(ko, 3).astype(jnp.int32)


def _ica_lingam(key, x):
    # the pruning step is the case lingam.adaptive_lasso_prune
    return lingam.ica_lingam(key, x, max_iter=30, prune=False)


def _direct_lingam(x):
    return lingam.direct_lingam(x, prune=False)


# --------------------------------------------------------------------------- cases: SEM


def _sem_graphs(key):
    # random_dag(graph="er") is erdos_renyi_dag; the "cycle" targets are simulate_pooled's
    k = jax.random.split(key, 5)
    return (sem.edge_weights(k[0], (3,)), sem.random_dag(k[1], 4),
            sem.scale_free_dag(k[2], 4), sem.sample_noise(k[3], (5, 2), "laplace"),
            sem.intervention_targets(k[4], 4, 3, targets_per_env=2, choice="random"))


def _sem_simulate(key, b, strength):
    return (sem.simulate_pooled(key, b, n_envs=2, n_per_env=4, strength=strength),
            sem.simulate_pooled(key, b, n_envs=2, n_total=7, intervention="replace",
                                perturb_all=True, strength=strength, obs_env=False))


def _sem_simulate_args(key):
    kb, ks, kk = jax.random.split(key, 3)
    return kk, sem.erdos_renyi_dag(kb, 4, dtype=F32), 2.0 + jax.random.uniform(ks, (), F32)


def _sem_stats(e, b, strength):
    return (sem.excess_kurtosis(e), sem.square_correlation(e), sem.mean_offdiag(b),
            sem.hsic(e[:, 0], e[:, 1]), sem.hsic(e[:, 0], e[:, 1], bandwidth_a=1.0),
            sem.dag_inverse(b), sem.is_acyclic(b), sem.is_acyclic(b + b.T),
            sem.atomic_scale_theory(4, strength))


def _sem_stats_args(key):
    ke, kb, ks = jax.random.split(key, 3)
    return (_normal(ke, (12, 3)), sem.erdos_renyi_dag(kb, 4, dtype=F32),
            1.0 + jax.random.uniform(ks, (), F32))


def _graph_metrics(true, est):
    return (graph.shd(true, est), graph.edge_metrics(true, est, threshold=0.5),
            graph.auroc(true, jnp.abs(est)), graph.auprc(true, jnp.abs(est)),
            graph.auroc_defined(true))


def _graph_args(key):
    kt, ke = jax.random.split(key)
    true = (sem.erdos_renyi_dag(kt, 5, edges_per_node=1.5, dtype=F32) != 0).astype(F32)
    return true, true + 0.6 * _normal(ke, (5, 5))


# -------------------------------------------------------------------------- cases: flow


def _flow_paths(key, x0, x1, t, y):
    return (flow.linear_path(x0, x1, t), flow.linear_path(x0, x1, t, sigma=0.1, key=key),
            flow.cond_ot_path(x0, x1, t, 0.01), flow.vp_path(x0, x1, t),
            flow.sb_path(key, x0, x1, t, 0.5), flow.sample_path("vp", key, x0, x1, t),
            flow.linear_path({"a": x0, "b": x1[:, :1]}, {"a": x1, "b": x0[:, :1]}, t),
            flow.gaussian_logp(x0[0]), flow.drop_labels(key, y, 0.5))


def _flow_paths_args(key):
    k = jax.random.split(key, 5)
    return (k[0], _normal(k[1], (4, 2)), _normal(k[2], (4, 2)),
            jax.random.uniform(k[3], (4,), F32), jax.random.randint(k[4], (4,), 0, 3))


def _flow_losses(params, key, x0, x1, y):
    one = lambda p, t, x: _linear_velocity(p, t[None], x[None])[0]  # noqa: E731
    return (flow.cfm_loss(one, params, key, x1[0], x0[0]),
            flow.cfm_batch_loss(_linear_velocity, params, key, x0, x1),
            flow.cfm_batch_loss(_linear_velocity, params, key, x0, x1, path="sb", sigma=0.2,
                                y=y, p_uncond=0.3, weights=jnp.arange(4.0, dtype=F32)),
            flow.cfg_velocity(_linear_velocity, params, jnp.full((4,), 0.5, F32), x0, y, 1.5))


def _flow_losses_args(key):
    k = jax.random.split(key, 5)
    return (_velocity_params(k[0]), k[1], _normal(k[2], (4, 2)), _normal(k[3], (4, 2)),
            jax.random.randint(k[4], (4,), 0, 3))


def _flow_integrate(params, x0, t1):
    v = lambda t, x: _linear_velocity(params, t, x)  # noqa: E731
    out = {m: flow.integrate(v, x0, method=m, steps=3, t1=t1) for m in flow.FIXED_METHODS}
    out["stats"] = flow.integrate_with_stats(v, x0, method="heun", steps=2,
                                             post=lambda t, x: jnp.clip(x, -5, 5))
    out["reverse"] = flow.integrate(v, x0, method="euler", steps=2, t0=t1, t1=0.0,
                                    reverse=True)
    return out


def _flow_integrate_args(key):
    kp, kx, kt = jax.random.split(key, 3)
    return _velocity_params(kp), _normal(kx, (3, 2)), 1.0 + jax.random.uniform(kt, (), F32)


def _flow_adaptive(params, x0):
    v = lambda t, x: _linear_velocity(params, t, x)  # noqa: E731
    return flow.integrate_with_stats(v, x0, method="tsit5", steps=None, rtol=1e-4,
                                     atol=1e-4)


def _flow_likelihood(key, params, x1):
    v = lambda t, x: _linear_velocity(params, t[None], x[None])[0]  # noqa: E731
    return (flow.log_likelihood(v, x1, method="rk4", steps=3),
            flow.log_likelihood(v, x1, method="euler", steps=3, divergence="hutchinson",
                                key=key, n_probes=2, probe="gaussian"))


def _flow_likelihood_args(key):
    kk, kp, kx = jax.random.split(key, 3)
    return kk, _velocity_params(kp), _normal(kx, (2,))


def _two_batches(key, n=5, d=2):
    k0, k1 = jax.random.split(key)
    return _normal(k0, (n, d)), _normal(k1, (n, d)) + 1.0


def _ot_exact(x0, x1):
    i, j = flow_ot.exact_coupling(x0, x1)
    return flow_ot.sq_cost(x0, x1), (i, j), flow_ot.apply_coupling(x0, x1, i, j)


def _ot_host(x0, x1):
    return {s: flow_ot.exact_coupling(x0, x1, solver=s) for s in ("host", "emd", "auction")}


def _ot_sinkhorn(key, x0, x1):
    return (flow_ot.sinkhorn_plan(x0, x1, epsilon=0.1),
            flow_ot.sinkhorn_coupling(key, x0, x1, epsilon=0.1, sampling="rows"))


def _ot_scaling(key, x0, x1):
    plan = flow_ot.scaling_sinkhorn_plan(x0, x1, epsilon=0.1)
    draws = {s: flow_ot.sample_plan(key, plan, sampling=s) for s in flow_ot.SAMPLINGS}
    return plan, draws, flow_ot.sinkhorn_coupling(key, x0, x1, epsilon=0.1, solver="scaling",
                                                  sampling="no_duplicates")


def _with_key(builder):
    def make(key):
        k0, k1 = jax.random.split(key)
        return (k0, *builder(k1))

    return make


def _ot_cfm(params, key, x0, x1, y):
    # the couplings themselves are the flow_ot.exact and flow_ot.sinkhorn cases
    return (flow_ot.ot_cfm_loss(_linear_velocity, params, key, x0, x1, y=y,
                                exact_solver="auction"),
            flow_ot.ot_cfm_loss(_linear_velocity, params, key, x0, x1, coupling="sinkhorn",
                                sinkhorn_solver="scaling", epsilon=0.2, sampling="rows",
                                path="cond_ot"))


def _ot_cfm_args(key):
    k = jax.random.split(key, 4)
    return (_velocity_params(k[0]), k[1], *_two_batches(k[2], n=4),
            jax.random.randint(k[3], (4,), 0, 3))


# ----------------------------------------------------------------- cases: discrete flow


def _dfm_parts(key, t, x1, token):
    x0 = flow_discrete.uniform_source(key, x1.shape, 5)
    return (flow_discrete.kappa(t), flow_discrete.kappa(t, scheduler="polynomial"),
            flow_discrete.kappa_dot(t), flow_discrete.kappa_dot(t, scheduler="polynomial",
                                                                exponent=3.0),
            x0, flow_discrete.mask_source((2, 3), token),
            flow_discrete.mixture_path(key, x0, x1, t))


def _dfm_parts_args(key):
    kk, kt, kx, km = jax.random.split(key, 4)
    return (kk, jax.random.uniform(kt, (2,), F32), jax.random.randint(kx, (2, 4), 0, 5),
            jax.random.randint(km, (), 5, 9))


def _dfm_loss(params, key, x1, valid):
    return (flow_discrete.dfm_loss(_token_logits, params, key, x1, vocab_size=5),
            flow_discrete.dfm_loss(_token_logits, params, key, x1, vocab_size=5,
                                   source="uniform", positions="all", valid=valid,
                                   scheduler="polynomial"))


def _dfm_loss_args(key):
    kp, kk, kx, kv = jax.random.split(key, 4)
    return (_token_params(kp), kk, jax.random.randint(kx, (2, 4), 0, 5),
            jax.random.bernoulli(kv, 0.7, (2, 4)))


def _ctmc(key, params, valid):
    logits = lambda t, x: _token_logits(params, t, x)  # noqa: E731
    x0 = flow_discrete.mask_source((2, 4), 5)
    return flow_discrete.ctmc_euler_sample(key, logits, x0, steps=3, mask_token=5,
                                           temperature=0.5, valid=valid)


def _ctmc_args(key):
    kk, kp, kv = jax.random.split(key, 3)
    return kk, _token_params(kp), jax.random.bernoulli(kv, 0.7, (2, 4))


# -------------------------------------------------------------------------- cases: nets


@functools.cache
def _net_parts(kind):
    """(static part, key -> array part) of a tiny net. The nets hold non-array leaves
    (e.g. a dropout flag) that must stay static under jit/vmap, as with
    ``eqx.filter_jit``: the array part is the traced argument."""
    if kind == "mlp":
        build = lambda k: nets.MLP(3, width=8, depth=1, time_dim=4, num_classes=2,  # noqa: E731
                                   class_dim=3, key=k)
    elif kind == "transformer":
        build = lambda k: nets.SeqTransformer(6, 5, dim=8, depth=1, heads=2,  # noqa: E731
                                              time_dim=4, out_size=5, key=k)
    else:
        build = lambda k: nets.AttentionBlock(8, 2, mlp_ratio=1, key=k)  # noqa: E731
    static = eqx.partition(build(jax.random.key(0)), eqx.is_array)[1]
    return static, lambda k: eqx.partition(build(k), eqx.is_array)[0]


def _net(kind, params):
    return eqx.combine(params, _net_parts(kind)[0])


def _mlp(params, t, x, y):
    model = _net("mlp", params)
    one = model(t[0], x[0], y[0])
    return (nets.sinusoidal_embedding(t[0], 8), one, nets.apply_batch(model, t, x, y),
            nets.apply_batch(model, 0.5, x))


def _mlp_args(key):
    km, kt, kx, ky = jax.random.split(key, 4)
    return (_net_parts("mlp")[1](km), jax.random.uniform(kt, (2,), F32), _normal(kx, (2, 3)),
            jax.random.randint(ky, (2,), -1, 2))


def _transformer(params, block_params, t, x, h, mask):
    model, block = _net("transformer", params), _net("block", block_params)
    return model(t, x), model(t, x, mask), block(h)


def _transformer_args(key):
    km, kb, kt, kx, kh, kv = jax.random.split(key, 6)
    return (_net_parts("transformer")[1](km), _net_parts("block")[1](kb),
            jax.random.uniform(kt, (), F32), jax.random.randint(kx, (4,), 0, 6),
            _normal(kh, (4, 8)), jax.random.bernoulli(kv, 0.8, (4,)).at[0].set(True))


# ------------------------------------------------------------------------ cases: bandit


def _play(policy, key, arms, rewards, state=None, *, index=True):
    """A few updates, then the index and the arm selected (``select`` is the argmax of
    ``index``: ``index=False`` spares a second, costly Beta draw)."""
    state = policy.init() if state is None else state
    for a, r in zip(arms, rewards, strict=True):
        state = policy.update(state, a, r)
    return state, policy.index(key, state) if index else None, policy.select(key, state)


def _bandit_counts(key, arms, rewards):
    pols = [bandit.ucb1(3), bandit.discounted_ucb(3, gamma=0.9),
            bandit.thompson_gaussian(3, gamma=0.95), bandit.thompson_beta(3, gamma=0.9)]
    lone = [_play(p, key, arms, rewards, index=n < 2) for n, p in enumerate(pols)]
    # runs on the last axis (init(n_runs=2)): two runs, the second playing the arms in
    # reverse; the Thompson draws are lone's on other shapes, so only their updates here
    runs = [_play(p, key, jnp.stack([arms, arms[::-1]], 1),
                  jnp.stack([rewards, rewards[::-1]], 1), p.init(2))
            if n < 2 else p.update(p.init(2), arms, rewards) for n, p in enumerate(pols)]
    return lone, runs


def _bandit_args(key):
    ka, kk, kr = jax.random.split(key, 3)
    return (kk, jax.random.randint(ka, (2,), 0, 3), jax.random.uniform(kr, (2,), F32))


def _bandit_buffers(key, arms, rewards):
    pols = [bandit.sliding_window_ucb(3, window=3),
            bandit.qomax(3, n_batches=2, batch_size=1),
            bandit.threshold_ascent(3, horizon=6, s=2),
            bandit.cost_aware(bandit.ucb1(3), [1.0, 2.0, 0.5], budget=3.0)]
    return [_play(p, key, arms, rewards) for p in pols]


def _dynamic_arms(key, arms, rewards):
    pol = bandit.dynamic_arms(bandit.ucb1(4), initial=3)  # arms 0..2 active, 3 padded
    state = pol.init()
    for a, r in zip(arms, rewards, strict=True):
        state = pol.update(state, a, r)
    state = pol.add_arm(pol.remove_arm(state, arms[0]), 3)
    return state, pol.index(key, state), pol.select(key, state)


def _md_args(key):
    """8 atoms (2 cations, 5 anions, 1 padding) jittered around a 2.5 A cubic lattice."""
    g = jnp.stack(jnp.meshgrid(*[jnp.arange(2.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = 2.0 + 2.5 * g + 0.1 * jax.random.normal(key, (8, 3), jnp.float64)
    return pos, jax.random.fold_in(key, 1)


def _md(pos, key):
    box, species = 10.0, jnp.array([0, 1, 1, 0, 1, 1, 1, 1])
    mask = jnp.arange(8) < 7
    z = jnp.zeros((2, 2))
    table = md.PairTable(jnp.array([2.4, -1.2]), jnp.array([[0.0, 18003.8], [18003.8, 1388.8]]),
                         jnp.array([[0.0, 4.873], [4.873, 2.76]]),
                         jnp.array([[0.0, 133.5], [133.5, 175.0]]), z + 0.03, z + 2.0,
                         z + 2.5, z + 1.0, z + 1e-3, z + 1.0, 4.5, 5.0, 0.2)
    masses = jnp.where(species == 0, 28.0, 16.0)

    def force_fn(x):
        return md.forces(x, box, species, mask, table)

    x = md.descend(pos, box, mask, force_fn, 3)
    s0 = md.init_state(key, x, masses, mask, 1000.0, force_fn)
    s1, trace = md.run(s0, box, masses, mask, force_fn, jnp.full(3, 1000.0))
    pt = md.pair_terms(jnp.linspace(1.0, 3.0, 4), jnp.zeros(4, int), jnp.ones(4, int), table)
    xf, ef = md.fire(x, box, mask, force_fn, 3)
    return (md.energy(pos, box, species, mask, table), force_fn(pos)[0],
            md.virial(pos, box, species, mask, table), pt, s1.pos, trace["temperature"],
            md.kinetic_energy(s1.vel, masses), md.temperature(s1.vel, masses, mask), xf, ef)


def _wasserstein(x0, x1):
    return (wasserstein.wasserstein(x0, x1), wasserstein.wasserstein(x0, x1[:2], 1),
            wasserstein.wasserstein(x0, x1, solver="auction"))


def _assignment(c):
    return assignment.assignment(c), assignment.assignment(c[:, :3].T, maximize=True)


def _ballad(key, roots, arms, rewards, gain):
    pol = bandit.ballad(3, capacity=8, max_parents=2)
    state = bandit.ballad_add_roots(pol.init(), roots)
    for n, (a, r) in enumerate(zip(arms, rewards, strict=True)):
        state = pol.update(state, a, r, jnp.array([n % 2, -1], jnp.int32))
    parents = jnp.array([[-1, -1], [0, -1], [0, 1], [2, -1]], jnp.int32)
    credit = bandit.propagate_credit(parents, gain, decay=0.5)
    return (state, pol.index(key, state), pol.select(key, state), credit,
            bandit.credit_per_arm(credit, jnp.array([-1, 0, 1, 0]), n_arms=2),
            bandit.credit_per_arm(credit, jnp.array([-1, 0, 1, 0]), n_arms=2,
                                  node_time=jnp.arange(4), now=4, gamma=0.9))


def _ballad_args(key):
    kr, ka, kw, kg, kk = jax.random.split(key, 5)
    return (kk, jax.random.uniform(kr, (2,), F32), jax.random.randint(ka, (2,), 0, 3),
            jax.random.uniform(kw, (2,), F32), jax.random.uniform(kg, (4,), F32))


def _ballad_cost(key, costs, arms, rewards):
    pol = bandit.ballad_cost(3, capacity=6, max_parents=2)
    state = pol.init(costs, 4.0, 5)
    for n, (a, r) in enumerate(zip(arms, rewards, strict=True)):
        state = pol.update(state, a, r, jnp.array([n - 1, -1], jnp.int32))
    return state, pol.index(key, state), pol.select(key, state)


def _ballad_cost_args(key):
    kc, ka, kr, kk = jax.random.split(key, 4)
    return (kk, jax.random.uniform(kc, (3,), F32, 0.1, 2.0),
            jax.random.randint(ka, (2,), 0, 3), jax.random.uniform(kr, (2,), F32))


def _simulate(key, means):
    reward = lambda k, t, arm: jax.random.bernoulli(k, means[arm]).astype(F32)  # noqa: E731
    # simulate_runs: a runs_last policy, and one whose per-run functions are vmapped
    return (bandit.simulate(key, bandit.discounted_ucb(3), reward, 5),
            bandit.simulate_runs(key, bandit.ucb1(3), reward, 4, 2),
            bandit.simulate_runs(key, bandit.sliding_window_ucb(3, window=2), reward, 4, 2))


def _simulate_args(key):
    kk, km = jax.random.split(key)
    return kk, jax.random.uniform(km, (3,), F32)


# ---------------------------------------------------------------- cases: checks, batching


def _checks(x):
    y = checks.check_finite(x, "x")
    y = checks.check_data_matrix(y, "x", min_rows=3)
    y = checks.check_data_matrix(y, "x", constant=False)
    y = checks.fail(y, jnp.any(y > 1e6), "x too large")
    return checks.fail_first(y, [(jnp.any(y < -1e6), "x too small"),
                                 (jnp.any(jnp.isnan(y)), "x is NaN")])


def _halve_until_small(x, limit):
    """A while-loop whose trip count depends on the values (the case map_over_batch is for)."""
    def body(c):
        return c[0] / 2, c[1] + 1

    return jax.lax.while_loop(lambda c: jnp.max(jnp.abs(c[0])) > limit, body,
                              (x, jnp.asarray(0, jnp.int32)))


def _batching_case(x, limit):
    return (_batching.map_over_batch(_halve_until_small, sequential=True)(x, limit),
            _batching.map_over_batch(_halve_until_small, sequential=False)(x, limit))


def _batching_args(key):
    kx, kl = jax.random.split(key)
    return 100 * _normal(kx, (3,)), 0.5 + jax.random.uniform(kl, (), F32)


# ------------------------------------------------------------------------------- table

_LINGAM = "whole fits; test_lingam: test_jit_equals_eager, test_vmap_equals_loop"

def _belief_voi(q, p1, p0, p):
    pc = jnp.stack([jnp.stack([1 - p0, p0], -1), jnp.stack([1 - p1, p1], -1)], -2)
    return (belief.voi(q, p1, p0), belief.cohere(p, q, p1, p0),
            belief.cohere(p, q, p1, p0, method="q"),
            belief.voi_categorical(jnp.stack([1 - q, q], -1), pc),
            belief.binary_entropy(p), belief.check_probability(p, "p"))


def _belief_voi_args(key):
    return tuple(jax.random.uniform(k, (4,)) for k in jax.random.split(key, 4))


def _belief_updates(prices, start):
    return (belief.realised_updates(prices, 2), belief.update_between(prices, start, start + 1),
            belief.clip_prices(prices))


def _belief_updates_args(key):
    return jax.random.uniform(key, (2, 6)), jnp.array([0, 3])


def _belief_posterior(lp, ll):
    post = belief.posterior(lp, ll)
    lpo = post.log_post
    return (post, belief.redistribution(lpo, lp), belief.resolved(lpo, 0.5),
            belief.bf_resolved(lpo, lp, 2.0), belief.entropy(lp), belief.kl(lpo, lp),
            belief.total_variation(lpo, lp), belief.entropy_drop(lpo, lp),
            belief.top_two_log_bf(lpo, lp), belief.check_log_prior(lp),
            belief.check_log_probs(ll, "ll"))


def _belief_posterior_args(key):
    k1, k2 = jax.random.split(key)
    return (jax.nn.log_softmax(jax.random.normal(k1, (4,), F32)),
            jax.random.normal(k2, (4,), F32) - 2.0)


def _belief_eig(lp, ll, costs, outcomes):
    st = belief.greedy_init(lp, ll.shape[0])
    return (belief.eig(lp, ll), belief.outcome_posteriors(lp, ll),
            belief.greedy_eig(lp, ll, costs, 3.0, outcomes, max_steps=3),
            belief.eig_per_cost(lp, ll, costs, 2.0, st.used),
            belief.greedy_step(st, ll, costs, 3.0, outcomes),
            belief.check_log_lik_table(lp, ll),
            belief.check_selection(lp, ll, costs, 3.0, outcomes))


def _belief_eig_args(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return (jax.nn.log_softmax(jax.random.normal(k1, (3,), F32)),
            jax.nn.log_softmax(jax.random.normal(k2, (5, 3, 4), F32), axis=-1),
            0.5 + jax.random.uniform(k3, (5,), F32), jax.random.randint(k4, (5,), 0, 4))


def _belief_model(x, y=None):
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    numpyro.sample("y", dist.Binomial(4, p * x), obs=y)


def _belief_evidence(key, a, y):
    k = jnp.array([1, 3])
    return (belief.beta_binomial_log_evidence(k, jnp.array([4, 5]), a, 2.0),
            belief.gamma_poisson_log_evidence(k, a, 1.5, 2.0),
            belief.normal_log_evidence(y, 0.1, a, 0.5),
            belief.log_evidence(key, _belief_model, a / 4, n_samples=8, y=jnp.asarray(2)),
            belief.observed_log_lik(key, _belief_model, a / 4, y=jnp.asarray(2)),
            belief.log_lik_table(key, [_belief_model], jnp.stack([a, a]) / 4, jnp.arange(5),
                                 n_samples=8))


def _belief_evidence_args(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return k1, 1.0 + jax.random.uniform(k2, (), F32), jax.random.normal(k3, (3,), F32)


def _sem_priors(key, k):
    kg, km, ks, kt = jax.random.split(key, 4)
    graphs = [f(kg, 6, 5, k) for f in (sem.er_graph, sem.sf_graph, sem.ws_graph, sem.sbm_graph,
                                       sem.geometric_graph)]
    adj = sem.sample_graph(kg, jnp.asarray(2), 6, 5, k)
    params = sem.init_mechanisms(km, adj)
    active = jnp.arange(6) < 5
    x = sem.simulate_scm(ks, adj, params, mechanism=jnp.asarray(1), noise=jnp.asarray(2),
                         active=active, rows=jnp.arange(16) < 14, env=jnp.zeros(16, jnp.int32),
                         targets=jnp.zeros((1, 6), bool), itype=jnp.asarray(0))
    prior = sem.mix_priors(sem.make_prior(d_range=(3, 5), n_range=(8, 16)),
                           sem.make_prior(d_range=(3, 5), n_range=(8, 16)), 0.5)
    return (graphs, sem.topological_order(adj, active), x,
            sem.prior_noise(kt, (8,), jnp.asarray(3)),
            sem.sample_task(kt, prior, d_max=6, n_max=16),
            sem.sample_tasks(kt, prior, 2, d_max=6, n_max=16))


def _sem_priors_args(key):
    return key, 1.0 + jax.random.uniform(key, (), F32)


def _sem_sortability(key, x, b):
    return (sem.var_sortability(x, b), sem.r2_sortability(x, b), sem.r2_coefficients(x),
            sem.order_alignment(jnp.var(x, 0), b), sem.var_sort_regress(x),
            sem.r2_sort_regress(x), sem.random_sort_regress(key, x),
            sem.sort_regress(x, jnp.var(x, 0)))


def _sem_sortability_args(key):
    b = sem.erdos_renyi_dag(key, 4, edges_per_node=1.0)
    return key, sem.simulate_pooled(key, b, n_envs=0, n_per_env=200).x.astype(F32), b


def _sem_notears(x):
    return sem.notears(x, outer_iters=3, inner_steps=20)


def _sem_pc(x, alpha):
    return sem.pc(x, alpha=alpha, max_depth=1)


def _sem_pc_args(key):
    x = jax.random.normal(key, (24, 4), F32)
    return x.at[:, 1].add(x[:, 0]).at[:, 2].add(x[:, 1]), jnp.asarray(0.05, F32)


def _sem_dag_to_cpdag(b, targets):
    return sem.dag_to_cpdag(b), sem.dag_to_cpdag(b, targets)


def _sem_dag_to_cpdag_args(key):
    b = sem.erdos_renyi_dag(key, 5, edges_per_node=1.5)
    return b, jnp.zeros((2, 5), bool).at[1, 2].set(True)


def _ica_transforms(key, x):
    fit, s = ica.fit_transform(key, x, max_iter=30)
    return ica.transform(fit, x), ica.inverse_transform(fit, s), s


def _lingam_effects(x, b):
    te, ok = lingam.estimate_total_effect(x, b, jnp.arange(3), 0, 2)
    return (te, ok, lingam.total_effects_from_adjacency(b),
            lingam.error_independence_p_values(x, b), lingam.hsic_test_gamma(x[:, 0], x[:, 1]),
            lingam.kernel_mutual_information(x[:, 0], x[:, 1]))


def _lingam_effects_args(key):
    b = jnp.tril(jax.random.normal(jax.random.fold_in(key, 2), (3, 3)), -1)
    return _lingam_data(key), b


def _lingam_bootstrap(key, x):
    r = lingam.bootstrap(key, x, 2, prune=False)
    return r, lingam.bootstrap_probabilities(r)


def _direct_lingam_prior(x):
    pk = np.asarray([[-1, -1, -1], [0, -1, -1], [-1, -1, -1]])  # x0 has no path to x1
    return (lingam.direct_lingam(x, prune=False, prior_knowledge=pk),
            lingam.direct_lingam(x, prune=False, prior_knowledge=pk,
                                 apply_prior_knowledge_softly=True),
            lingam.direct_lingam(x[:12], prune=False, measure="kernel"))


CASES = [
    Case("ica.steps", _ica_steps, _ica_steps_args,
         ("ica.whiten", "ica.sym_decorrelation", "ica.fixed_point_update",
          "ica.amari_distance"), rtol=1e-8, atol=1e-10),
    Case("ica.fastica", _fastica, lambda k: (k, _mixed_data(jax.random.fold_in(k, 1))),
         ("ica.fastica",), rtol=1e-8, atol=1e-10,
         slow="test_ica: test_jit_equals_eager_and_vmap_equals_loop"),
    Case("ica.fastica[plain vmap]", _fastica_plain_vmap, _ica_steps_args, ("ica.fastica",),
         rtol=1e-8, atol=1e-10),
    Case("ica.transforms", _ica_transforms,
         lambda k: (k, _mixed_data(jax.random.fold_in(k, 1))),
         ("ica.fit_transform", "ica.transform", "ica.inverse_transform"), rtol=1e-8,
         atol=1e-10, slow="test_ica_options: fit_transform == transform, inverse round trip"),
    Case("lingam.effects", _lingam_effects, _lingam_effects_args,
         ("lingam.estimate_total_effect", "lingam.total_effects_from_adjacency",
          "lingam.error_independence_p_values", "lingam.hsic_test_gamma",
          "lingam.kernel_mutual_information"), rtol=1e-8, atol=1e-10),
    Case("lingam.bootstrap", _lingam_bootstrap,
         lambda k: (k, _lingam_data(jax.random.fold_in(k, 1))),
         ("lingam.bootstrap", "lingam.bootstrap_probabilities"), rtol=1e-8, atol=1e-10,
         slow="test_lingam_options: each resample equals the single fit on its rows"),
    Case("lingam.direct_lingam[prior, kernel]", _direct_lingam_prior,
         lambda k: (_lingam_data(k),), ("lingam.direct_lingam",), rtol=1e-8, atol=1e-10,
         slow=_LINGAM),
    Case("lingam.steps", _lingam_steps, lambda k: (jax.random.normal(k, (4, 4)),),
         ("lingam.b_from_unmixing", "lingam.causal_order_from_b")),
    Case("lingam.adaptive_lasso_prune", _prune, _prune_args, ("lingam.adaptive_lasso_prune",),
         rtol=1e-8, atol=1e-10, slow=_LINGAM),
    Case("lingam.ica_lingam", _ica_lingam,
         lambda k: (k, _lingam_data(jax.random.fold_in(k, 1))), ("lingam.ica_lingam",),
         rtol=1e-8, atol=1e-10, slow=_LINGAM),
    Case("lingam.direct_lingam", _direct_lingam, lambda k: (_lingam_data(k),),
         ("lingam.direct_lingam",), rtol=1e-8, atol=1e-10, slow=_LINGAM),
    Case("sem.graphs", _sem_graphs, lambda k: (k,),
         ("sem.edge_weights", "sem.erdos_renyi_dag", "sem.scale_free_dag", "sem.random_dag",
          "sem.sample_noise", "sem.intervention_targets")),
    Case("sem.simulate_pooled", _sem_simulate, _sem_simulate_args, ("sem.simulate_pooled",),
         slow="test_sem: test_jit_matches_eager, test_vmap_matches_loop"),
    Case("sem.stats", _sem_stats, _sem_stats_args,
         ("sem.excess_kurtosis", "sem.square_correlation", "sem.mean_offdiag", "sem.hsic",
          "sem.dag_inverse", "sem.is_acyclic", "sem.atomic_scale_theory"),
         slow="test_sem: test_jit_matches_eager, test_vmap_matches_loop (and the stats)"),
    Case("graph.metrics", _graph_metrics, _graph_args,
         ("graph.shd", "graph.edge_metrics", "graph.auroc", "graph.auprc",
          "graph.auroc_defined")),
    Case("flow.paths", _flow_paths, _flow_paths_args,
         ("flow.linear_path", "flow.cond_ot_path", "flow.vp_path", "flow.sb_path",
          "flow.sample_path", "flow.gaussian_logp", "flow.drop_labels")),
    Case("flow.losses", _flow_losses, _flow_losses_args,
         ("flow.cfm_loss", "flow.cfm_batch_loss", "flow.cfg_velocity")),
    Case("flow.integrate[fixed]", _flow_integrate, _flow_integrate_args,
         ("flow.integrate", "flow.integrate_with_stats")),
    Case("flow.integrate[adaptive]", _flow_adaptive,
         lambda k: (_velocity_params(k), _normal(jax.random.fold_in(k, 1), (2, 2))),
         ("flow.integrate_with_stats",), rtol=1e-4, atol=1e-5,
         slow="diffrax compiles a large program"),
    Case("flow.log_likelihood", _flow_likelihood, _flow_likelihood_args,
         ("flow.log_likelihood",)),
    Case("flow_ot.exact", _ot_exact, _two_batches,
         ("flow_ot.sq_cost", "flow_ot.exact_coupling", "flow_ot.apply_coupling")),
    # the host solvers run through jax.pure_callback(vmap_method="sequential")
    Case("flow_ot.exact[host]", _ot_host, _two_batches, ("flow_ot.exact_coupling",)),
    Case("flow_ot.sinkhorn[ott]", _ot_sinkhorn, _with_key(_two_batches),
         ("flow_ot.sinkhorn_plan", "flow_ot.sinkhorn_coupling"), rtol=1e-4, atol=1e-6,
         slow="ott-jax's solver; its jit path is also in test_flow_ot"),
    Case("flow_ot.sinkhorn[scaling]", _ot_scaling, _with_key(_two_batches),
         ("flow_ot.scaling_sinkhorn_plan", "flow_ot.sample_plan", "flow_ot.sinkhorn_coupling"),
         rtol=1e-4, atol=1e-6,
         slow="test_flow_ot: test_scaling_sinkhorn_coupling_jit_vmap_and_loss"),
    Case("flow_ot.ot_cfm_loss", _ot_cfm, _ot_cfm_args, ("flow_ot.ot_cfm_loss",), rtol=1e-4),
    Case("flow_discrete.parts", _dfm_parts, _dfm_parts_args,
         ("flow_discrete.kappa", "flow_discrete.kappa_dot", "flow_discrete.uniform_source",
          "flow_discrete.mask_source", "flow_discrete.mixture_path")),
    Case("flow_discrete.dfm_loss", _dfm_loss, _dfm_loss_args, ("flow_discrete.dfm_loss",)),
    Case("flow_discrete.ctmc_euler_sample", _ctmc, _ctmc_args,
         ("flow_discrete.ctmc_euler_sample",)),
    Case("nets.mlp", _mlp, _mlp_args, ("nets.sinusoidal_embedding", "nets.MLP",
                                       "nets.apply_batch"), rtol=1e-5, atol=1e-5),
    Case("nets.transformer", _transformer, _transformer_args,
         ("nets.SeqTransformer", "nets.AttentionBlock"), rtol=1e-5, atol=1e-5,
         slow="attention blocks, eager op by op"),
    Case("bandit.counts", _bandit_counts, _bandit_args,
         ("bandit.ucb1", "bandit.discounted_ucb", "bandit.thompson_gaussian",
          "bandit.thompson_beta")),
    Case("bandit.buffers", _bandit_buffers, _bandit_args,
         ("bandit.sliding_window_ucb", "bandit.qomax", "bandit.threshold_ascent",
          "bandit.cost_aware")),
    Case("bandit.dynamic_arms", _dynamic_arms, _bandit_args, ("bandit.dynamic_arms",)),
    Case("md", _md, _md_args,
         ("md.energy", "md.forces", "md.virial", "md.pair_terms", "md.descend", "md.init_state",
          "md.run", "md.kinetic_energy", "md.temperature", "md.fire"), rtol=1e-7, atol=1e-7),
    Case("wasserstein", _wasserstein,
         lambda k: (_normal(k, (4, 2)), _normal(jax.random.fold_in(k, 1), (4, 2))),
         ("wasserstein.wasserstein",)),
    Case("assignment", _assignment, lambda k: (_normal(k, (4, 5)),),
         ("assignment.assignment",)),
    Case("bandit.ballad", _ballad, _ballad_args,
         ("bandit.ballad", "bandit.ballad_add_roots", "bandit.propagate_credit",
          "bandit.credit_per_arm"),
         slow="test_bandit: test_propagate_credit_jit_and_vmap_equal_the_loop, simulate"),
    Case("bandit.ballad_cost", _ballad_cost, _ballad_cost_args, ("bandit.ballad_cost",),
         slow="test_bandit_cost: test_runs_with_different_prices_share_one_compilation_and_"
              "vmap_equals_loop"),
    Case("bandit.simulate", _simulate, _simulate_args,
         ("bandit.simulate", "bandit.simulate_runs"),
         slow="test_bandit: test_simulate_vmap_equals_python_loop, "
              "test_simulate_runs_equals_vmap_simulate"),
    Case("checks", _checks, lambda k: (_normal(k, (4, 2)),),
         ("checks.check_finite", "checks.check_data_matrix", "checks.fail",
          "checks.fail_first")),
    Case("_batching.map_over_batch", _batching_case, _batching_args, ("_batching.map_over_batch",)),
    Case("belief.voi", _belief_voi, _belief_voi_args,
         ("belief.voi", "belief.voi_categorical", "belief.cohere", "belief.binary_entropy",
          "belief.check_probability")),
    Case("belief.updates", _belief_updates, _belief_updates_args,
         ("belief.realised_updates", "belief.update_between", "belief.clip_prices")),
    Case("belief.posterior", _belief_posterior, _belief_posterior_args,
         ("belief.posterior", "belief.redistribution", "belief.resolved", "belief.bf_resolved",
          "belief.entropy", "belief.kl", "belief.total_variation", "belief.entropy_drop",
          "belief.top_two_log_bf", "belief.check_log_prior", "belief.check_log_probs")),
    Case("belief.eig", _belief_eig, _belief_eig_args,
         ("belief.eig", "belief.outcome_posteriors", "belief.greedy_eig", "belief.eig_per_cost",
          "belief.greedy_step", "belief.greedy_init", "belief.check_log_lik_table",
          "belief.check_selection")),
    Case("belief.evidence", _belief_evidence, _belief_evidence_args,
         ("belief.beta_binomial_log_evidence", "belief.gamma_poisson_log_evidence",
          "belief.normal_log_evidence", "belief.log_evidence", "belief.observed_log_lik",
          "belief.log_lik_table"),
         slow="compile-heavy (numpyro tracing, ~100 s); test_belief_eig checks the evidence "
              "kernels against closed forms and under jit"),
    Case("sem.priors", _sem_priors, _sem_priors_args,
         ("sem.er_graph", "sem.sf_graph", "sem.ws_graph", "sem.sbm_graph",
          "sem.geometric_graph", "sem.sample_graph", "sem.init_mechanisms",
          "sem.simulate_scm", "sem.topological_order", "sem.prior_noise", "sem.make_prior",
          "sem.mix_priors", "sem.sample_task", "sem.sample_tasks"),
         slow="compile-heavy; test_sem_priors checks the families and the task sampler "
              "under jit(vmap) and without retracing"),
    Case("sem.sortability", _sem_sortability, _sem_sortability_args,
         ("sem.var_sortability", "sem.r2_sortability", "sem.r2_coefficients",
          "sem.order_alignment", "sem.var_sort_regress", "sem.r2_sort_regress",
          "sem.random_sort_regress", "sem.sort_regress"), rtol=1e-4, atol=1e-5,
         slow="test_sortability: test_jit_vmap_match_eager_without_retracing"),
    Case("sem.notears", _sem_notears, lambda k: (jax.random.normal(k, (32, 3), jnp.float64),),
         ("sem.notears",), rtol=1e-5, atol=1e-6,  # float64: L-BFGS amplifies float32 rounding
         slow="test_notears: test_notears_no_retrace_for_new_values, "
              "test_notears_vmap_matches_single_fits"),
    Case("sem.pc", _sem_pc, _sem_pc_args, ("sem.pc",),
         slow="test_sem_pc: test_jit_equals_vmap (one compiled batch for every test)"),
    Case("sem.dag_to_cpdag", _sem_dag_to_cpdag, _sem_dag_to_cpdag_args, ("sem.dag_to_cpdag",)),
]

NOT_TRACEABLE = {
    "lingam.check_prior_knowledge": "validates a concrete prior-knowledge matrix in NumPy "
                                    "before tracing (it shapes the computation)",
    "lingam.partial_order": "NumPy on the host, from a validated prior-knowledge matrix",
    "lingam.causal_direction_counts": "counts a concrete bootstrap result's edges in NumPy "
                                      "(returns Python lists)",
    "assignment.linear_sum_assignment": "NumPy on the host (SciPy's API); inside jit it is "
                                        "reached through assignment.assignment's callback",
    "belief.latent_sites": "inspects a model's site structure in Python (names, no arrays)",
    "belief.normalise_tol": "a tolerance for a dtype (a Python float, no arrays)",
    "flow_ot.host_sq_cost": "NumPy on the host (input pipelines); not a JAX function",
    "flow_ot.default_exact_solver": "names the backend's default solver (a string, no "
                                    "arrays)",
    "flow_ot.host_assignment": "NumPy on the host; inside jit it is reached through "
                               "exact_coupling's pure_callback (case flow_ot.exact[host])",
    "_auction.auction_assignment": "numba on the host; as host_assignment",
    "_batching.resolve_sequential_vmap": "a Python-level choice of batching rule, no arrays",
    "checks.is_traced": "a Python predicate on the argument's type: it differs under jit "
                        "by design",
    "checks.check_in_range": "checks concrete hyperparameters in Python, before tracing",
    "checks.collinear_columns": "NumPy on the host, for error messages",
    "checks.runtime_error_message": "reads a raised exception, no arrays",
    "checks.checked_jit": "a wrapper around jax.jit (returns a function, not arrays)",
    "checks.check_message": "reads a raised exception (and its causes), no arrays",
    "checks.format_check_failure": "formats a message and a traceback for printing",
    "checks.install_error_display": "installs the host's error display hooks, no arrays",
}


# ----------------------------------------------------------------------------- harness


def _stack(examples):
    return jax.tree.map(lambda *a: jnp.stack(a), *examples)


def _assert_trees_close(got, want, rtol, atol, what):
    got_leaves, got_def = jax.tree.flatten(got)
    want_leaves, want_def = jax.tree.flatten(want)
    assert got_def == want_def, f"{what}: tree structures differ: {got_def} vs {want_def}"
    for n, (a, b) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if jnp.issubdtype(jnp.asarray(a).dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (
            f"{what}: leaf {n} is {a.dtype}{a.shape}, expected {b.dtype}{b.shape}")
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{what}: leaf {n}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: leaf {n}")


def _check_case(case: Case):
    keys = jax.random.split(jax.random.key(0), BATCH)
    make = jax.jit(case.make)  # one compile instead of op-by-op for every example
    examples = [make(k) for k in keys]
    eager = case.fn(*examples[0])

    traces = []

    def counted(*args):
        traces.append(None)  # runs once per trace, never when a compiled call is reused
        return case.fn(*args)

    jitted = jax.jit(counted)
    _assert_trees_close(jitted(*examples[0]), eager, case.rtol, case.atol, "jit vs eager")
    looped = [jitted(*ex) for ex in examples]  # new values, the same shapes: no retrace
    assert len(traces) == 1, f"{case.name}: jitted {len(traces)} times for one shape"
    if case.vmap:
        batched = jax.jit(jax.vmap(case.fn))(*_stack(examples))
        _assert_trees_close(batched, _stack(looped), case.rtol, case.atol, "vmap vs loop")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow]
                                               if c.slow else []) for c in CASES])
def test_eager_jit_vmap_agree_and_jit_traces_once(case):
    _check_case(case)


def _public_kernels():
    names = set()
    for mod_name, mod in MODULES.items():
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or (isinstance(obj, type)
                                           and issubclass(obj, eqx.Module)):
                names.add(f"{mod_name}.{name}")
    return names


def test_every_public_kernel_is_covered():
    covered = {n for c in CASES for n in c.covers}
    public = _public_kernels()
    assert public - covered - set(NOT_TRACEABLE) == set(), "kernels missing from CASES"
    assert covered - public == set(), "CASES name kernels that are not public"
    assert set(NOT_TRACEABLE) <= public
