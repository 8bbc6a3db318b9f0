"""Tests for the linear-SEM simulator (jaxkit.kernels.sem)."""

from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import sem


def topological_order(b) -> list[int] | None:
    """Kahn's algorithm on the LiNGAM-convention adjacency (b[i, j] != 0: j -> i)."""
    a = np.asarray(b) != 0
    d = a.shape[0]
    indeg = a.sum(axis=1)
    order, ready = [], [i for i in range(d) if indeg[i] == 0]
    while ready:
        j = ready.pop()
        order.append(j)
        for i in np.nonzero(a[:, j])[0]:
            indeg[i] -= 1
            if indeg[i] == 0:
                ready.append(int(i))
    return order if len(order) == d else None


def assert_dag(b):
    order = topological_order(b)
    assert order is not None, "graph has a cycle"
    p = np.asarray(b)[np.ix_(order, order)]
    np.testing.assert_array_equal(np.triu(p), 0)  # strictly lower triangular


# Module-level jitted callables: one compile per shape, reused across tests.
_er = jax.jit(jax.vmap(partial(sem.erdos_renyi_dag, d=10, edges_per_node=2.0)))
_sf = jax.jit(jax.vmap(partial(sem.scale_free_dag, d=10, edges_per_node=2)))
_sim_kw = dict(n_envs=4, n_per_env=4000, strength=2.0)
_sim = jax.jit(partial(sem.simulate_pooled, **_sim_kw))
_sim_small = jax.jit(partial(sem.simulate_pooled, n_envs=3, n_per_env=8))
_keys = jax.random.split(jax.random.key(1), 200)


@cache
def _dags():
    """200 ER and 200 scale-free graphs (d = 10): one compile of each generator serves
    every test here."""
    return _er(_keys), _sf(_keys)


def test_random_dags_acyclic_and_weights():
    for batch in (b[:20] for b in _dags()):
        for b in np.asarray(batch):
            assert_dag(b)
            w = np.abs(b[b != 0])
            assert np.all((w >= 0.5) & (w <= 2.0))
        assert bool(jnp.all(jax.vmap(sem.is_acyclic)(batch)))
        vals = np.asarray(batch)[np.asarray(batch) != 0]
        assert (vals > 0).any() and (vals < 0).any()


def test_is_acyclic_detects_cycle():
    b = jnp.zeros((3, 3)).at[1, 0].set(1.0).at[2, 1].set(1.0)
    assert bool(sem.is_acyclic(b))
    assert not bool(sem.is_acyclic(b.at[0, 2].set(1.0)))  # 0 -> 1 -> 2 -> 0
    assert not bool(sem.is_acyclic(jnp.eye(2)))  # self-loop


def test_expected_degree():
    er, sf = _dags()
    a_er = np.asarray(er) != 0
    n_er = a_er.sum(axis=(1, 2))
    # ER-2 on d=10: p = 4/9, E|E| = 20, sd per draw ~3.3, SE of the mean ~0.24
    assert abs(n_er.mean() - 20.0) < 1.2
    assert n_er.std() > 1.0  # random, not fixed
    # scale-free: exactly sum_i min(i, m) = m d - m (m + 1) / 2 edges
    a_sf = np.asarray(sf[:50]) != 0
    n_sf = a_sf.sum(axis=(1, 2))
    np.testing.assert_array_equal(n_sf, 2 * 10 - 3)
    # hubs: the max out-degree of SF graphs exceeds the ER one on average
    out_sf = a_sf.sum(axis=1).max(axis=1).mean()
    out_er = a_er[:50].sum(axis=1).max(axis=1).mean()
    assert out_sf > out_er


def test_random_dag_dispatch_and_errors(key):
    np.testing.assert_array_equal(sem.random_dag(key, 6, graph="sf", edges_per_node=1),
                                  sem.scale_free_dag(key, 6, edges_per_node=1))
    with pytest.raises(ValueError, match="graph"):
        sem.random_dag(key, 4, graph="xx")
    with pytest.raises(ValueError, match="`d`"):
        sem.erdos_renyi_dag(key, 0)


@settings(max_examples=8, deadline=None)  # each new d compiles every op afresh
@given(d=st.integers(1, 9), seed=st.integers(0, 2**31 - 1),
       k=st.floats(0.3, 4.0), graph=st.sampled_from(["er", "sf"]))
def test_acyclic_property(d, seed, k, graph):
    b = sem.random_dag(jax.random.key(seed), d, graph=graph, edges_per_node=k)
    assert b.shape == (d, d)
    assert_dag(b)
    assert bool(sem.is_acyclic(b))


def _data(key, d=5):
    b = sem.erdos_renyi_dag(key, d)
    return b, _sim(key, b)


def test_structural_equation_holds_exactly(key):
    b, data = _data(key)
    x, e = np.asarray(data.x), np.asarray(data.noise)
    assert x.shape == (5 * 4000, 5) and x.dtype == np.float64
    np.testing.assert_allclose(x - x @ np.asarray(b).T, e, atol=1e-10)
    np.testing.assert_allclose(np.linalg.solve(np.eye(5) - b, e.T).T, x, atol=1e-10)


def test_environment_labels_and_targets(key):
    _, data = _data(key)
    env, tgt = np.asarray(data.env), np.asarray(data.targets)
    np.testing.assert_array_equal(np.bincount(env), [4000] * 5)
    assert np.all(np.diff(env) >= 0)
    assert tgt.shape == (5, 5) and not tgt[0].any()
    np.testing.assert_array_equal(tgt[1:].sum(axis=1), 1)
    assert len(set(np.nonzero(tgt[1:])[1])) == 4  # cycle: distinct atomic targets
    # n_envs = d covers every node once
    full = sem.intervention_targets(key, 6, 6)
    np.testing.assert_array_equal(np.asarray(full).sum(axis=0), 1)
    multi = sem.intervention_targets(key, 6, 5, targets_per_env=3, choice="random")
    np.testing.assert_array_equal(np.asarray(multi).sum(axis=1), 3)


def test_scale_intervention_changes_only_target_variance(key):
    _, data = _data(key)
    e, env, tgt = np.asarray(data.noise), np.asarray(data.env), np.asarray(data.targets)
    v0 = e[env == 0].var(axis=0)
    for k in range(1, 5):
        ratio = e[env == k].var(axis=0) / v0
        expected = np.where(tgt[k], 4.0, 1.0)  # strength 2 -> variance x 4
        np.testing.assert_allclose(ratio, expected, rtol=0.15)


def test_shift_and_replace_interventions(key):
    b = jnp.zeros((4, 4))
    sh = sem.simulate_pooled(key, b, n_envs=4, n_per_env=4000, intervention="shift",
                             strength=2.0, noise_scale=jnp.array([1.0, 2.0, 0.5, 1.0]))
    e, env, tgt = np.asarray(sh.noise), np.asarray(sh.env), np.asarray(sh.targets)
    for k in range(1, 5):
        mu = e[env == k].mean(axis=0)
        scale = np.array([1.0, 2.0, 0.5, 1.0])
        np.testing.assert_allclose(np.abs(mu), np.where(tgt[k], 2.0 * scale, 0.0), atol=0.12)
    rp = sem.simulate_pooled(key, b, n_envs=4, n_per_env=4000, intervention="replace",
                             strength=1.0, replacement="uniform")
    e, env, tgt = np.asarray(rp.noise), np.asarray(rp.env), np.asarray(rp.targets)
    for k in range(1, 5):
        kurt = np.asarray(sem.excess_kurtosis(e[env == k]))
        np.testing.assert_allclose(kurt, np.where(tgt[k], -1.2, 0.0), atol=0.3)
        np.testing.assert_allclose(e[env == k].var(axis=0), 1.0, rtol=0.1)


def test_perturb_all_and_n_total(key):
    b = jnp.zeros((3, 3))
    data = sem.simulate_pooled(key, b, n_envs=4, n_total=103, perturb_all=True)
    assert data.x.shape == (103, 3)
    assert np.asarray(data.targets)[1:].all() and not np.asarray(data.targets)[0].any()
    counts = np.bincount(np.asarray(data.env))
    assert len(counts) == 5 and counts.max() - counts.min() <= 1
    # strength 1 and "scale": purely observational
    obs = sem.simulate_pooled(key, b, n_envs=4, n_per_env=10, strength=1.0)
    ref = sem.sample_noise(jax.random.split(key, 4)[2], (50, 3))
    np.testing.assert_allclose(obs.noise, ref)


def test_kurtosis_signs(key):
    n = 20000
    kg, kl, ku = (np.asarray(sem.excess_kurtosis(sem.sample_noise(key, (n, 3), kind)))
                  for kind in ("gaussian", "laplace", "uniform"))
    assert np.all(np.abs(kg) < 0.2)
    assert np.all(kl > 1.5)  # 3 in theory
    assert np.all(ku < -0.9)  # -1.2 in theory
    for kind in ("gaussian", "laplace", "uniform"):
        v = np.asarray(sem.sample_noise(key, (n, 3), kind)).var(axis=0)
        np.testing.assert_allclose(v, 1.0, rtol=0.06)
    # pooled Gaussian with atomic variance scaling: positive kurtosis, negative
    # correlation of squares, both matching the closed form
    d = 4
    data = sem.simulate_pooled(key, jnp.zeros((d, d)), n_envs=d, n_per_env=20000)
    kurt_th, corr_th = sem.atomic_scale_theory(d, 3.0)
    kurt = np.asarray(sem.excess_kurtosis(data.noise))
    assert np.all(kurt > 1.0)
    np.testing.assert_allclose(kurt.mean(), kurt_th, rtol=0.1)
    corr = float(sem.mean_offdiag(sem.square_correlation(data.noise)))
    assert corr < 0
    np.testing.assert_allclose(corr, corr_th, rtol=0.15)


def test_theory_rates():
    kurt, corr = sem.atomic_scale_theory(jnp.array([1e3, 1e4]), 2.0)
    slope_k = np.diff(np.log(np.asarray(kurt))) / np.log(10)
    slope_c = np.diff(np.log(-np.asarray(corr))) / np.log(10)
    np.testing.assert_allclose(slope_k, -1.0, atol=0.02)
    np.testing.assert_allclose(slope_c, -2.0, atol=0.02)


def test_hsic(key):
    k1, k2 = jax.random.split(key)
    a = jax.random.normal(k1, (300,))
    b = jax.random.normal(k2, (300,))
    indep = float(sem.hsic(a, b))
    dep = float(sem.hsic(a, a * a))
    assert 0 <= indep < dep / 5


def test_jit_matches_eager(key):
    b = sem.erdos_renyi_dag(key, 5)
    np.testing.assert_allclose(jax.jit(partial(sem.erdos_renyi_dag, d=5))(key), b)
    np.testing.assert_allclose(jax.jit(partial(sem.scale_free_dag, d=5))(key),
                               sem.scale_free_dag(key, 5))
    eager = sem.simulate_pooled(key, b, n_envs=3, n_per_env=8)
    jitted = _sim_small(key, b)
    for u, v in zip(eager, jitted, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_closed_over_noise_scale_under_jit(key):
    """A concrete ``noise_scale`` captured by an outer jit is checked on the host (a jnp
    check of it would be a tracer there, and bool() of a tracer raised)."""
    scale = jnp.array([0.5, 1.0, 2.0])
    b = jnp.zeros((3, 3))
    out = jax.jit(lambda k: sem.simulate_pooled(k, b, n_envs=1, n_per_env=4000,
                                                noise_scale=scale))(key)
    sd = np.asarray(out.noise)[np.asarray(out.env) == 0].std(axis=0)
    np.testing.assert_allclose(sd, [0.5, 1.0, 2.0], rtol=0.1)
    assert bool(out.valid)
    neg = -scale  # concrete, closed over: rejected at trace time, naming the argument
    with pytest.raises(ValueError, match="noise_scale"):
        jax.jit(lambda k: sem.simulate_pooled(k, b, n_envs=1, n_per_env=4,
                                              noise_scale=neg))(key)


def test_vmap_matches_loop(key):
    keys = jax.random.split(key, 3)
    bs = jax.jit(jax.vmap(partial(sem.erdos_renyi_dag, d=4)))(keys)
    # jitted: an eager vmap dispatches (and compiles) every op on its own
    batched = jax.jit(jax.vmap(partial(sem.simulate_pooled, n_envs=3, n_per_env=8)))(keys, bs)
    for i in range(3):
        single = _sim_small(keys[i], bs[i])
        for u, v in zip(single, batched, strict=True):
            np.testing.assert_allclose(u, v[i], rtol=1e-12, atol=1e-12)
    # strength is traced: vmap over it too
    st_ = jax.jit(jax.vmap(lambda s: sem.simulate_pooled(key, bs[0], n_envs=3, n_per_env=8,
                                                         strength=s).noise))(
        jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(st_[0], _sim_small(key, bs[0], strength=1.0).noise)


def test_input_validation(key):
    b = jnp.zeros((3, 3))
    with pytest.raises(ValueError, match="exactly one"):
        sem.simulate_pooled(key, b, n_envs=2)
    with pytest.raises(ValueError, match="noise"):
        sem.simulate_pooled(key, b, n_envs=2, n_per_env=5, noise="cauchy")
    with pytest.raises(ValueError, match="intervention"):
        sem.simulate_pooled(key, b, n_envs=2, n_per_env=5, intervention="do")
    with pytest.raises(ValueError, match="square"):
        sem.simulate_pooled(key, jnp.zeros((3, 2)), n_envs=2, n_per_env=5)
    with pytest.raises(ValueError, match="targets_per_env"):
        sem.intervention_targets(key, 3, 2, targets_per_env=4)
    with pytest.raises(ValueError, match="NaN"):
        sem.simulate_pooled(key, b.at[0, 1].set(jnp.nan), n_envs=2, n_per_env=5)


def test_dag_inverse_matches_inverse():
    for i, d in enumerate((1, 2, 3, 7, 16)):
        b = sem.erdos_renyi_dag(jax.random.key(i), d, edges_per_node=1.5)
        np.testing.assert_allclose(sem.dag_inverse(b), np.linalg.inv(np.eye(d) - np.asarray(b)),
                                   rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- no silent garbage


def test_cyclic_weights_and_bad_strengths_are_errors(key):
    """A cyclic b used to be simulated with a truncated series that is not the inverse;
    NaN or non-positive strengths and noise scales gave NaN or sign-flipped data."""
    cyc = jnp.array([[0.0, 0.5, 0.0], [0.0, 0.0, 0.7], [0.4, 0.0, 0.0]])
    with pytest.raises(ValueError, match="`b` has a directed cycle"):
        sem.simulate_pooled(key, cyc, n_envs=2, n_per_env=5)
    with pytest.raises(ValueError, match="`b` has a directed cycle"):
        sem.simulate_pooled(key, jnp.eye(3) * 0.5, n_envs=2, n_per_env=5)
    dag = jnp.tril(cyc.T, -1)
    for kw, name in [({"strength": float("nan")}, "strength"), ({"strength": 0.0}, "strength"),
                     ({"strength": -2.0}, "strength"),
                     ({"strength": -1.0, "intervention": "shift"}, "strength"),
                     ({"noise_scale": 0.0}, "noise_scale"),
                     ({"noise_scale": jnp.array([1.0, -1.0, 1.0])}, "noise_scale")]:
        with pytest.raises(ValueError, match=f"`{name}`"):
            sem.simulate_pooled(key, dag, n_envs=2, n_per_env=5, **kw)
    assert bool(sem.simulate_pooled(key, dag, n_envs=2, n_per_env=5, strength=0.0,
                                    intervention="shift").valid)


def test_traced_out_of_domain_inputs_give_an_invalid_flag(key):
    cyc = jnp.array([[0.0, 0.5, 0.0], [0.0, 0.0, 0.7], [0.4, 0.0, 0.0]])
    sim = jax.jit(lambda b, s: sem.simulate_pooled(key, b, n_envs=2, n_per_env=5, strength=s))
    ok = sim(jnp.tril(cyc.T, -1), 3.0)
    assert bool(ok.valid) and bool(jnp.all(jnp.isfinite(ok.x)))
    for b, s in [(cyc, 3.0), (jnp.tril(cyc.T, -1), -1.0), (jnp.tril(cyc.T, -1), jnp.nan)]:
        bad = sim(b, s)
        assert not bool(bad.valid) and bool(jnp.all(jnp.isnan(bad.x)))


@pytest.mark.parametrize("kw", [{"edges_per_node": -1.0}, {"w_low": 1.0, "w_high": 0.5},
                                {"w_high": float("inf")}])
def test_dag_hyperparameters_out_of_domain(key, kw):
    with pytest.raises(ValueError, match="edges_per_node|w_low"):
        sem.erdos_renyi_dag(key, 4, **kw)
