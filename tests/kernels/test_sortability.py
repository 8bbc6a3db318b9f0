"""Tests for var-/R2-sortability and the sort-and-regress floors
(jaxkit.kernels.sem.sortability)."""

from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels.sem import erdos_renyi_dag, simulate_pooled
from jaxkit.kernels.sem import sortability as S

CHAIN = jnp.array([[0.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])  # 0 -> 1 -> 2

# module-level jitted callables: one compile per shape, reused across tests (eager
# calls are checked in the jit/vmap test)
_vs = jax.jit(S.var_sortability)
_r2s = jax.jit(S.r2_sortability)
_r2c = jax.jit(S.r2_coefficients)
_vsr = jax.jit(S.var_sort_regress)
_align = jax.jit(S.order_alignment)
_er6 = jax.jit(partial(erdos_renyi_dag, d=6, edges_per_node=2.0))


def _data(seed, d=6, n=400, epn=1.5, noise="gaussian"):
    b = erdos_renyi_dag(jax.random.key(seed), d, edges_per_node=epn)
    x = simulate_pooled(jax.random.key(seed + 100), b, n_envs=0, n_per_env=n, noise=noise).x
    return x, b


@pytest.fixture(scope="module")
def datasets():
    return [_data(s) for s in range(4)]


def test_closed_forms_on_a_chain():
    # paths: 0->1, 1->2 (length 1), 0->2 (length 2): three (cause, effect, length) triples
    assert float(S.order_alignment(jnp.array([1.0, 2.0, 3.0]), CHAIN)) == 1.0
    assert float(S.order_alignment(jnp.array([3.0, 2.0, 1.0]), CHAIN)) == 0.0
    assert float(S.order_alignment(jnp.ones(3), CHAIN)) == 0.5
    # 1 < 2 ordered, 0 > 1 wrong, 0 < 2 ordered: 2 / 3
    np.testing.assert_allclose(float(S.order_alignment(jnp.array([2.0, 1.0, 3.0]), CHAIN)),
                               2 / 3, rtol=1e-6)
    # no edges: no paths, chance by convention
    assert float(S.order_alignment(jnp.array([1.0, 2.0, 3.0]), jnp.zeros((3, 3)))) == 0.5
    # tolerance: a difference within tol is a tie
    assert float(S.order_alignment(jnp.array([1.0, 1.05, 1.1]), CHAIN, tol=0.2)) == 0.5


def test_path_lengths_count_once_per_length():
    # diamond 0->1->3, 0->2->3 plus 0->3: pairs by length {1: 0-1,0-2,1-3,2-3,0-3; 2: 0-3}
    b = jnp.zeros((4, 4)).at[1, 0].set(1).at[2, 0].set(1).at[3, 1].set(1).at[3, 2].set(1)
    b = b.at[3, 0].set(1)
    s = jnp.array([0.0, 1.0, 1.0, -1.0])  # only 0 -> 1, 0 -> 2 ordered: 2 of 6 triples
    np.testing.assert_allclose(float(S.order_alignment(s, b)), 2 / 6, rtol=1e-6)


def test_matches_causaldisco(datasets):
    cd = pytest.importorskip("CausalDisco.analytics")
    cdb = pytest.importorskip("CausalDisco.baselines")
    for x, b in datasets:
        xn, w = np.asarray(x, np.float64), np.asarray(b).T  # CausalDisco: W[i, j] = i -> j
        np.testing.assert_allclose(float(_vs(x, b)), cd.var_sortability(xn, w), atol=1e-9)
        np.testing.assert_allclose(float(_r2s(x, b)), cd.r2_sortability(xn, w), atol=1e-9)
        np.testing.assert_allclose(np.asarray(_r2c(x)), cd.r2coeff(xn.T), atol=1e-9)
        ours = np.abs(np.asarray(_vsr(x).adjacency)) > 0
        ref = np.abs(cdb.var_sort_regress(xn).T) > 0
        # same order; lingam's standardised adaptive lasso vs LassoLarsIC on the raw scale
        assert (ours != ref).sum() <= 1


def test_r2_is_the_regression_r2_in_float64(datasets):
    from sklearn.linear_model import LinearRegression

    x = np.asarray(datasets[3][0], np.float64)
    want = [LinearRegression().fit(np.delete(x, j, 1), x[:, j]).score(np.delete(x, j, 1),
                                                                     x[:, j])
            for j in range(x.shape[1])]
    np.testing.assert_allclose(np.asarray(_r2c(jnp.asarray(x))), want, atol=1e-8)


def test_scale_invariance_of_r2_not_var(datasets):
    x, b = datasets[0]
    z = (x - x.mean(0)) / x.std(0)
    np.testing.assert_allclose(float(_r2s(z, b)), float(_r2s(x, b)), atol=1e-12)
    assert float(_vs(x, b)) > 0.8  # raw simulated SEM: var-sortable
    # rescale the columns to reverse the variance order: var-sortability flips
    order = jnp.argsort(jnp.var(x, axis=0))
    target = jnp.empty(x.shape[1]).at[order].set(jnp.arange(x.shape[1], 0, -1.0))
    y = z * target
    assert float(_vs(y, b)) < 0.2


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_sortability_of_reversed_scores_is_complement(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    b = _er6(k1)
    s = jax.random.normal(k2, (6,))  # ties have probability 0
    total = float(_align(s, b) + _align(-s, b))
    assert total == pytest.approx(1.0, abs=1e-9) or not bool(jnp.any(b != 0))


def test_floors_sort_then_prune(datasets):
    x, b = datasets[1]
    r = _vsr(x)
    np.testing.assert_array_equal(np.asarray(r.causal_order),
                                  np.argsort(np.asarray(jnp.var(x, axis=0)), kind="stable"))
    pos = np.empty(6, int)
    pos[np.asarray(r.causal_order)] = np.arange(6)
    a = np.abs(np.asarray(r.adjacency)) > 0
    i, j = np.nonzero(a)
    assert np.all(pos[j] < pos[i])  # every edge points forward in the order: a DAG
    r2 = jax.jit(S.r2_sort_regress)(x)
    np.testing.assert_allclose(np.asarray(r2.scores), np.asarray(_r2c(x)))
    rr = jax.jit(S.random_sort_regress)(jax.random.key(3), x)
    assert sorted(np.asarray(rr.causal_order).tolist()) == list(range(6))
    assert not bool(r.rank_deficient)


def test_var_sort_regress_recovers_a_var_sortable_graph():
    # equal noise variances and strong weights: the variance order is the causal order
    b = jnp.diag(jnp.full(5, 1.5), -1)  # the chain 0 -> 1 -> ... -> 5
    x = simulate_pooled(jax.random.key(1), b, n_envs=0, n_per_env=400).x
    est = np.abs(np.asarray(_vsr(x).adjacency)) > 0
    np.testing.assert_array_equal(est, np.asarray(b) != 0)
    assert float(_vs(x, b)) == 1.0


def test_jit_vmap_match_eager_without_retracing(datasets):
    xs = jnp.stack([x for x, _ in datasets])
    bs = jnp.stack([b for _, b in datasets])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def both(x, b):
        return S.var_sortability(x, b), S.r2_sortability(x, b), S.var_sort_regress(x).adjacency

    v, r, a = jax.vmap(both)(xs, bs)
    v2, _, a2 = jax.vmap(both)(xs * 2.0, bs)  # new values, same shapes: no retrace
    x, b = datasets[0]  # eager = jit(vmap)
    np.testing.assert_allclose(float(v[0]), float(S.var_sortability(x, b)), atol=1e-12)
    np.testing.assert_allclose(float(r[0]), float(S.r2_sortability(x, b)), atol=1e-9)
    for i, (x, b) in enumerate(datasets):
        np.testing.assert_allclose(float(v[i]), float(_vs(x, b)), atol=1e-12)
        np.testing.assert_allclose(np.asarray(a[i]), np.asarray(_vsr(x).adjacency), atol=1e-8)
    np.testing.assert_allclose(np.asarray(v2), np.asarray(v))  # doubling keeps the order
    np.testing.assert_allclose(np.asarray(a2), np.asarray(a), atol=1e-6)  # and the weights


def test_float32_matches_float64(datasets):
    x, b = datasets[2]
    f32 = _r2s(x.astype(jnp.float32), b.astype(jnp.float32))
    assert f32.dtype == jnp.float32
    np.testing.assert_allclose(float(f32), float(_r2s(x, b)), atol=0.02)


@pytest.mark.parametrize("call, name", [
    (lambda: S.order_alignment(jnp.ones((2, 2)), CHAIN), "scores"),
    (lambda: S.order_alignment(jnp.ones(4), CHAIN), "b"),
    (lambda: S.order_alignment(jnp.ones(3), CHAIN, tol=-1.0), "tol"),
    (lambda: S.order_alignment(jnp.array([1.0, jnp.nan, 2.0]), CHAIN), "scores"),
    (lambda: S.var_sortability(jnp.full((5, 3), jnp.nan), CHAIN), "x"),
    (lambda: S.var_sort_regress(jnp.ones(5)), "x"),
    (lambda: S.sort_regress(jnp.asarray(np.random.default_rng(0).normal(size=(20, 3))),
                            jnp.ones(2)), "scores"),
    (lambda: S.var_sort_regress(jnp.asarray(np.random.default_rng(0).normal(size=(20, 3))),
                                criterion="nope"), "criterion"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_collinear_columns_raise_eagerly_and_flag_under_jit():
    x = np.random.default_rng(0).normal(size=(50, 3))
    x = jnp.asarray(np.column_stack([x, x[:, 0]]))
    with pytest.raises(ValueError, match="collinear"):
        S.var_sort_regress(x)
    r = jax.jit(partial(S.var_sort_regress))(x)
    assert bool(r.rank_deficient) and bool(jnp.all(jnp.isfinite(r.adjacency)))
