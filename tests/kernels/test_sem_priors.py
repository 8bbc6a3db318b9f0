"""The CausalTab priors against their definitions: graph families (edge counts and degree
laws), noise moments, interventions, iSCM standardisation, the task sampler's masks."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels.sem import graphs as G
from jaxkit.kernels.sem import mechanisms as M
from jaxkit.kernels.sem import prior as P
from jaxkit.kernels.sem._draws import hash_normals, hash_uniforms
from jaxkit.kernels.sem.dags import is_acyclic
from jaxkit.kernels.sem.grouping import grouped_switch, n_chunks
from jaxkit.kernels.sem.prior_noise import PRIOR_NOISES, prior_noise

DM, D, K = 12, 10, 1.5  # slots, active nodes, edges per node
R = 300  # graphs per family


@functools.cache
def _families():
    """R graphs of every family (and WS without rewiring), in one compiled function."""
    def one(key):
        return jnp.stack([G.er_graph(key, DM, D, K), G.sf_graph(key, DM, D, K),
                          G.ws_graph(key, DM, D, K, rewire=0.3),
                          G.sbm_graph(key, DM, D, K, n_blocks=3, ratio=10.0),
                          G.geometric_graph(key, DM, D, K),
                          G.ws_graph(key, DM, D, K, rewire=0.0)])
    out = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), R))
    return np.asarray(out).transpose(1, 0, 2, 3)


def _family(code: int, rewire: float | None = None):
    return _families()[5 if rewire == 0.0 else code]


@pytest.mark.parametrize("code", range(5))
def test_graph_families_acyclic_padded_and_expected_edges(code):
    a = _family(code)
    assert a.shape == (R, DM, DM)
    assert not a[:, D:, :].any() and not a[:, :, D:].any()  # padding has no edges
    assert not np.any(np.diagonal(a, axis1=1, axis2=2))
    assert all(bool(is_acyclic(jnp.asarray(g))) for g in a[:20])
    edges = a.sum(axis=(1, 2))
    name = G.GRAPHS[code]
    if name == "sf":  # m = round(1.5) = 2 earlier nodes each: sum_i min(i, 2) = 2 d - 3
        assert np.all(edges == 2 * D - 3)
    elif name == "ws":  # h = 2 lattice edges per node, rewiring merges a few duplicates
        assert np.all(edges <= 2 * D) and edges.mean() > 0.85 * 2 * D
    else:  # er, sbm, grg: k d edges in expectation
        se = edges.std() / np.sqrt(R)
        assert abs(edges.mean() - K * D) < 4 * se + 0.02 * K * D, (name, edges.mean())


def test_watts_strogatz_lattice_degrees_without_rewiring():
    a = _family(2, rewire=0.0)
    und = a | a.transpose(0, 2, 1)
    deg = und.sum(axis=2)[:, :D]
    assert np.all(deg == 4)  # 2 h neighbours, h = round(1.5) = 2


def test_erdos_renyi_degree_is_binomial():
    a = _family(0)
    und = (a | a.transpose(0, 2, 1))[:, :D, :D]
    deg = und.sum(axis=2).ravel()
    p = 2 * K / (D - 1)
    assert abs(deg.mean() - (D - 1) * p) < 0.1
    assert abs(deg.var() - (D - 1) * p * (1 - p)) < 0.25


def test_scale_free_has_hubs_erdos_renyi_does_not():
    def max_deg(a):
        und = a | a.transpose(0, 2, 1)
        return und.sum(axis=2).max(axis=1).mean()
    assert max_deg(_family(1)) > max_deg(_family(0)) + 0.5


def test_relabel_is_uniform_over_active_nodes():
    a = _family(1)  # sf: the first arrival is a hub; after relabelling any label can be
    out_deg = a.sum(axis=1)[:, :D]  # column sums = out-degrees
    hub = out_deg.argmax(axis=1)
    counts = np.bincount(hub, minlength=D)
    assert counts.min() > 0


@functools.cache
def _noise():
    f = jax.jit(jax.vmap(lambda c: prior_noise(jax.random.key(7), (200_000,), c)))
    return np.asarray(f(jnp.arange(5)), np.float64)


@pytest.mark.parametrize("code,kurt,skew", [(0, 0.0, 0.0), (1, 3.0, 0.0), (2, 6.0, 0.0),
                                            (3, -1.2, 0.0), (4, 2.4, 1.1395)])
def test_noise_moments(code, kurt, skew):
    z = _noise()[code]
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.03, PRIOR_NOISES[code]
    zc = (z - z.mean()) / z.std()
    assert abs(np.mean(zc ** 3) - skew) < 0.1
    if code == 2:  # t_5's sample kurtosis has infinite variance: compare quantiles
        from scipy import stats
        q = np.array([0.01, 0.05, 0.25, 0.75, 0.95, 0.99])
        ref = stats.t.ppf(q, 5) * np.sqrt(3 / 5)
        assert np.allclose(np.quantile(z, q), ref, atol=0.03)
    else:
        assert abs(np.mean(zc ** 4) - 3 - kurt) < 0.25


def _chain(d):
    return jnp.asarray(np.eye(d, k=-1, dtype=bool))  # 0 -> 1 -> ... (a[i, i-1])


def test_topological_order_respects_edges():
    a = _family(0)[0]
    order = np.asarray(M.topological_order(jnp.asarray(a), G.active_mask(DM, D)))
    pos = np.argsort(order)
    i, j = np.nonzero(a)
    assert np.all(pos[j] < pos[i]) and set(order[D:]) == set(range(D, DM))


@functools.cache
def _sim():
    def run(key, mech, itype, iscm):
        d, n = 4, 400
        adj = _chain(d)
        p = M.init_mechanisms(jax.random.fold_in(key, 1), adj)
        env = jnp.where(jnp.arange(n) >= 200, (jnp.arange(n) - 200) % 2, -1)
        targets = jnp.zeros((2, d), bool).at[0, 2].set(True).at[1, 1].set(True)
        return M.simulate_scm(key, adj, p, mechanism=mech, noise=jnp.int32(1),
                              active=jnp.ones(d, bool), rows=jnp.ones(n, bool), env=env,
                              targets=targets, itype=itype, iscm=iscm), env
    return jax.jit(run)


@pytest.mark.parametrize("mech", range(5))
def test_hard_intervention_cuts_parents(mech):
    x, env = map(np.asarray, _sim()(jax.random.key(3), jnp.int32(mech), jnp.int32(0), False))
    assert np.isfinite(x).all()
    hit2 = env == 0  # environment 0 sets node 2 (child of 1, parent of 3)
    assert np.ptp(x[hit2, 2]) < 1e-4  # do(x_2 = c): one value, whatever x_1 is
    assert np.ptp(x[~hit2, 2]) > 0.1
    if mech != 4:  # (hetero: the child's noise scale may vanish at the do-value)
        assert np.ptp(x[hit2, 3]) > 0.1  # the child still has its own noise


@pytest.mark.parametrize("mech", range(5))
def test_simulate_mechanism_float64_inputs_match_float32(mech):
    """float64 parameters and noise run (the node loop's carry took float32 only) and
    agree with the float32 run to float32 precision."""
    d, n = 4, 32
    key = jax.random.key(5)
    adj = _chain(d)
    p64 = jax.tree.map(lambda a: a.astype(jnp.float64), M.init_mechanisms(key, adj))
    eps64 = jax.random.normal(jax.random.key(6), (n, d), jnp.float64)
    kw = dict(active=jnp.ones(d, bool), rows=jnp.ones(n, bool), env=-jnp.ones(n, jnp.int32),
              targets=jnp.zeros((1, d), bool), itype=jnp.int32(0))
    x64 = M.simulate_mechanism(mech, key, adj, p64, eps64, **kw)
    x32 = M.simulate_mechanism(mech, key, adj, jax.tree.map(lambda a: a.astype(jnp.float32), p64),
                               eps64.astype(jnp.float32), **kw)
    assert x64.dtype == jnp.float64 and x32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(x32), np.asarray(x64), rtol=2e-4, atol=2e-4)


def test_soft_interventions_shift_and_scale():
    sim = _sim()
    xs, env = map(np.asarray, sim(jax.random.key(4), jnp.int32(0), jnp.int32(1), False))
    xo, _ = map(np.asarray, sim(jax.random.key(4), jnp.int32(0), jnp.int32(2), False))
    obs, hit = env == -1, env == 1  # env 1 targets node 1, a child of root 0
    assert abs(xs[hit, 1].mean() - xs[obs, 1].mean()) > 0.5  # shift |z| in [1, 3] sds
    assert xo[hit, 1].std() > 1.3 * xo[obs, 1].std()  # noise scaled by U[2, 4]
    assert np.allclose(xs[:, 0], xo[:, 0])  # the root is untouched by either


def test_iscm_standardises_each_node_over_reference_rows():
    x, env = map(np.asarray, _sim()(jax.random.key(5), jnp.int32(0), jnp.int32(1), True))
    for v, tgt in ((0, None), (3, None), (1, 1), (2, 0)):
        ref = env != tgt if tgt is not None else np.ones_like(env, bool)
        assert abs(x[ref, v].mean()) < 1e-4 and abs(x[ref, v].std() - 1) < 1e-3


def test_raw_linear_chain_is_var_sortable_iscm_is_not():
    sim = _sim()
    raw, env = map(np.asarray, sim(jax.random.key(6), jnp.int32(0), jnp.int32(1), False))
    std, _ = map(np.asarray, sim(jax.random.key(6), jnp.int32(0), jnp.int32(1), True))
    obs = env == -1
    v_raw = raw[obs].var(axis=0)
    assert v_raw[3] > v_raw[0]  # variance accumulates down a linear chain (|w| >= 0.5)
    # iSCM: nodes 0 and 3 are never targeted, so all rows are their reference rows
    assert abs(std[:, 0].var() - 1) < 1e-3 and abs(std[:, 3].var() - 1) < 1e-3


BATCH, TDM, TNM = 32, 8, 40


#: the sampler compiles once per module at XLA's optimisation level 0 (half the compile
#: time of the default level; these tests check values, not speed)
FAST_COMPILE = {"xla_backend_optimization_level": 0}


@functools.cache
def _sampler():
    """The standalone jitted sampler users call (:func:`P.jit_sample_tasks`, with its CPU
    options), so the value tests below cover that program; the slow vmap test compares
    it with ``sample_task`` compiled with XLA's defaults."""
    return P.jit_sample_tasks(BATCH, d_max=TDM, n_max=TNM, chunk=5,
                              compiler_options=tuple(FAST_COMPILE.items()))


def test_task_sampler_masks_padding_and_indicators():
    prior = P.make_prior(d_range=(3, 8), n_range=(10, 40), p_known=0.5)
    t = jax.device_get(_sampler()(jax.random.key(0), prior))
    d, n = t.spec.d, t.spec.n
    assert np.all((d >= 3) & (d <= 8) & (n >= 10) & (n <= 40))
    for b in range(BATCH):
        assert t.var_mask[b].sum() == d[b] and t.sample_mask[b].sum() == n[b]
        assert np.all(t.x[b][~t.sample_mask[b]] == 0) and np.all(t.x[b][:, ~t.var_mask[b]] == 0)
        assert not t.adj[b][~t.var_mask[b]].any()
        ind = t.indicator[b]
        if t.spec.known[b]:
            assert np.array_equal(ind > 0, t.targets[b])
        else:
            assert not ind.any()
        obs_rows = (t.env[b] == -1) & t.sample_mask[b]
        assert obs_rows.sum() == t.spec.n_obs[b]
        if t.spec.regime[b] == 0:
            assert t.spec.n_obs[b] == n[b] and not t.targets[b].any()
        if t.spec.regime[b] == 1:  # atomic: each interventional row targets one node
            rows = t.env[b] >= 0
            assert np.all(t.targets[b][rows].sum(axis=1) == 1)
    assert np.isfinite(t.x).all()


def test_task_sampler_mixture_weights_and_no_retrace():
    f = _sampler()
    only_ws = P.make_prior(graphs={"ws": 1.0}, mechanisms={"rff": 1.0}, regimes=(1, 0, 0),
                           d_range=(3, 8), n_range=(10, 40))
    t = jax.device_get(f(jax.random.key(1), only_ws))  # a new prior value: no new trace
    assert np.all(t.spec.graph == 2) and np.all(t.spec.mechanism == 2)
    assert np.all(t.spec.regime == 0) and not t.targets.any()
    half = P.mix_priors(only_ws, P.make_prior(graphs={"er": 1.0}, d_range=(3, 8),
                                              n_range=(10, 40)), 0.5)
    assert np.allclose(np.asarray(half.graph_w), [0.5, 0, 0.5, 0, 0])
    t = jax.device_get(f(jax.random.key(2), half))
    assert set(np.unique(t.spec.graph)) <= {0, 2}
    assert f._cache_size() == 1  # three priors, one executable
    assert P.jit_sample_tasks(BATCH, d_max=TDM, n_max=TNM, chunk=5,
                              compiler_options=tuple(FAST_COMPILE.items())) is f


def test_jit_sample_tasks_cpu_options_and_bad_input():
    """The standalone sampler's XLA options: YNNPACK for products only on the CPU, merged
    with the caller's; an option this jaxlib rejects is dropped, not an error."""
    from jaxkit.kernels import _xla_cpu

    assert _xla_cpu.cpu_options(_xla_cpu.YNN_DOTS_ONLY) == dict(_xla_cpu.YNN_DOTS_ONLY)
    assert _xla_cpu.cpu_options((("xla_cpu_no_such_option", 1),)) is None
    assert _xla_cpu.cpu_options((("xla_cpu_experimental_ynn_fusion_type", "NOPE"),)) is None
    assert _xla_cpu.cpu_options() is None
    merged = _xla_cpu.cpu_options(_xla_cpu.YNN_DOTS_ONLY, (("xla_backend_optimization_level", 0),))
    assert merged == {**dict(_xla_cpu.YNN_DOTS_ONLY), "xla_backend_optimization_level": 0}
    with pytest.raises(ValueError, match="batch"):
        P.jit_sample_tasks(0, d_max=5, n_max=10)
    with pytest.raises(ValueError, match="n_max"):
        P.jit_sample_tasks(4, d_max=5, n_max=1)


def test_make_prior_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="graphs"):
        P.make_prior(graphs={"tree": 1.0})
    with pytest.raises(ValueError, match="d_range"):
        P.make_prior(d_range=(5, 2))
    with pytest.raises(ValueError, match="p_known"):
        P.make_prior(p_known=1.5)
    with pytest.raises(ValueError, match="obs_frac"):
        P.make_prior(obs_frac=(0.8, 0.2))
    with pytest.raises(ValueError, match="d_max"):
        P.sample_task(jax.random.key(0), P.make_prior(), d_max=1, n_max=10)


# ------------------------------------------------ grouping, cheap draws, fast cosine


BRANCHES = (lambda x: x["a"] * 2.0, lambda x: x["a"] + x["b"], lambda x: -x["a"],
            lambda x: x["a"] ** 2)


@functools.cache
def _grouped(batch, chunk, batched=False):
    def f(codes, inp, key):
        if not batched:
            return grouped_switch(codes, BRANCHES, inp, chunk=chunk)
        # whole-chunk branches that depend on the chunk's largest key (all slots of a chunk
        # must hold elements of the chunk's code): a_b * code-law + 0 * max(key)
        def chunked(f):
            return lambda x: jax.vmap(f)(x) + 0.0 * jnp.max(x["k"])
        return grouped_switch(codes, [chunked(f) for f in BRANCHES], inp, chunk=chunk,
                              sort_key=key, batched=True)
    return jax.jit(f)


@pytest.mark.parametrize("batch,chunk", [(1, 1), (24, 5)])
def test_grouped_switch_equals_vmap_of_switch(batch, chunk):
    rng = np.random.default_rng(batch + chunk)
    ref = jax.jit(jax.vmap(lambda c, x: jax.lax.switch(c, BRANCHES, x)))
    for codes in (rng.integers(0, 4, batch), np.zeros(batch, int), np.full(batch, 3),
                  np.arange(batch) % 4):
        key = jnp.asarray(rng.integers(0, 5, batch), jnp.int32)
        inp = {"a": jnp.asarray(rng.normal(size=(batch, 3)), jnp.float32),
               "b": jnp.asarray(rng.normal(size=(batch, 3)), jnp.float32), "k": key}
        c = jnp.asarray(codes, jnp.int32)
        want = ref(c, inp)
        np.testing.assert_array_equal(_grouped(batch, chunk)(c, inp, key), want)
        np.testing.assert_array_equal(_grouped(batch, chunk, True)(c, inp, key), want)


def test_grouped_switch_batched_chunks_are_pure_and_sorted():
    # each chunk sees only its code's elements, in increasing sort key
    def branch(code):
        def f(x):
            k = x["k"]
            ok = jnp.all(x["c"] == code) & jnp.all(k[1:] >= k[:-1])
            return jnp.broadcast_to(ok, k.shape)
        return f
    rng = np.random.default_rng(0)
    codes = jnp.asarray(rng.integers(0, 3, 40), jnp.int32)
    key = jnp.asarray(rng.integers(0, 9, 40), jnp.int32)
    out = jax.jit(lambda c, k: grouped_switch(c, [branch(i) for i in range(3)],
                                              {"c": c, "k": k}, chunk=6, sort_key=k,
                                              batched=True))(codes, key)
    assert np.asarray(out).all()


def test_grouped_switch_chunk_bound_and_bad_chunk():
    # the worst case of sum_l ceil(c_l / C) over all count vectors equals n_chunks
    import itertools
    for B, C in ((7, 2), (10, 3), (9, 4)):
        worst = max(sum(-(-c // C) for c in cs)
                    for cs in itertools.product(range(B + 1), repeat=3) if sum(cs) == B)
        assert worst <= n_chunks(B, 3, C)
    with pytest.raises(ValueError, match="chunk"):
        grouped_switch(jnp.zeros(3, jnp.int32), BRANCHES, {"a": jnp.zeros(3)}, chunk=0)


def test_hash_draws_are_uniform_and_normal_and_unrelated_across_keys():
    from scipy import stats
    f = jax.jit(lambda k: (hash_uniforms(k, (100_000,))[0], hash_normals(k, (100_000,))[0]))
    u, z = map(np.asarray, f(jax.random.key(11)))
    u2, _ = map(np.asarray, f(jax.random.key(12)))
    assert 0.0 < u.min() and u.max() < 1.0 and np.isfinite(z).all()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(np.corrcoef(u, u2)[0, 1]) < 0.02  # two keys: unrelated streams
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02  # no lag-1 correlation


def test_fast_cos_matches_cos():
    y = np.linspace(-300.0, 300.0, 20_001, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(jax.jit(M.fast_cos)(y)), np.cos(y.astype(np.float64)),
                               atol=3e-5)


def test_init_mechanism_draws_the_used_fields_only():
    adj = _chain(5)
    init = jax.jit(M.init_mechanism, static_argnums=2)
    for code, used in M._USES.items():
        p = init(jax.random.key(code), adj, code)
        for f in M.MechParams._fields:
            a = np.asarray(getattr(p, f))
            if f in used or f == "noise_scale":
                assert np.abs(a).sum() > 0, (code, f)
            else:
                assert not a.any(), (code, f)
    with pytest.raises(ValueError, match="code"):
        M.init_mechanism(jax.random.key(0), adj, 5)


@pytest.mark.slow
def test_sample_tasks_equals_vmap_of_sample_task():
    """The grouped sampler draws exactly the tasks of ``vmap(sample_task)`` (same keys):
    grouping by law changes where each task is computed, not what is drawn."""
    prior = P.make_prior(d_range=(3, 8), n_range=(10, 40))
    key = jax.random.key(3)
    got = _sampler()(key, prior)
    ref = jax.jit(jax.vmap(lambda k: P.sample_task(k, prior, d_max=TDM, n_max=TNM)),
                  compiler_options=FAST_COMPILE)(jax.random.split(key, BATCH))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=1e-4)
