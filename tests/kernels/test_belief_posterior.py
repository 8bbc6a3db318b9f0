"""kernels.belief.posterior: Bayes' rule over MECE explanations against a float64 NumPy
reference, redistribution scores against their definitions, resolution rules, masked
explanations, sequential updating (hypothesis), jit/vmap invariance without retracing,
and every bad input with the argument named (eagerly and under jit)."""

from __future__ import annotations

import importlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels.checks import checked_jit

# the package re-exports the function `posterior`, which shadows the module's name
P = importlib.import_module("jaxkit.kernels.belief.posterior")


def _rand(rng, shape, dtype=np.float64):
    p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    return np.log(p).astype(dtype)


def _np_post(lp, ll):
    j = lp + ll
    z = np.log(np.exp(j - j.max(-1, keepdims=True)).sum(-1)) + j.max(-1)
    return j - z[..., None], z


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_posterior_matches_float64_reference(dtype):
    rng = np.random.default_rng(0)
    lp = _rand(rng, (5, 4), dtype)
    ll = rng.normal(-3, 2, size=(5, 4)).astype(dtype)
    res = P.posterior(lp, ll)
    ref, z = _np_post(lp.astype(np.float64), ll.astype(np.float64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert res.log_post.dtype == dtype
    np.testing.assert_allclose(res.log_post, ref, atol=tol * 10)
    np.testing.assert_allclose(res.log_evidence, z, atol=tol * 10)
    np.testing.assert_allclose(np.exp(res.log_post).sum(-1), 1.0, atol=tol * 10)
    assert bool(np.all(res.finite))


def test_broadcasting_and_masked_explanations():
    lp = np.log(np.array([0.5, 0.5, 0.0]))  # third explanation masked
    ll = np.log(np.array([[0.2, 0.6, 0.9], [0.5, 0.5, 0.5]]))
    res = P.posterior(lp, ll)
    assert res.log_post.shape == (2, 3)
    assert np.all(res.log_post[:, 2] == -np.inf)
    np.testing.assert_allclose(np.exp(res.log_post[0, :2]), [0.25, 0.75])
    np.testing.assert_allclose(np.exp(res.log_post[1, :2]), [0.5, 0.5])


def test_impossible_evidence_is_flagged():
    res = P.posterior(np.log([0.5, 0.5, 0.0]), np.array([-np.inf, -np.inf, 0.0]))
    assert not bool(res.finite) and np.all(np.isnan(res.log_post))
    assert res.log_evidence == -np.inf


def test_redistribution_scores_against_definitions():
    lp = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    ll = np.log(np.array([0.05, 0.6, 0.3, 0.2]))
    post = np.asarray(P.posterior(lp, ll).log_post)
    p, q = np.exp(post), np.exp(lp)
    r = P.redistribution(post, lp)
    np.testing.assert_allclose(r.kl, np.sum(p * np.log(p / q)), rtol=1e-12)
    np.testing.assert_allclose(r.tv, 0.5 * np.abs(p - q).sum(), rtol=1e-12)
    H = lambda v: -np.sum(v * np.log(v))  # noqa: E731
    np.testing.assert_allclose(r.entropy_drop, H(q) - H(p), rtol=1e-12)
    top = np.argsort(-p)[:2]
    np.testing.assert_allclose(r.top_two_log_bf, ll[top[0]] - ll[top[1]], rtol=1e-12)
    assert float(r.top_two_log_bf) > 0
    # entropy drop negative when evidence spreads a concentrated belief
    lp2 = np.log(np.array([0.9, 0.1]))
    post2 = P.posterior(lp2, np.log(np.array([0.1, 0.9]))).log_post
    assert float(P.entropy_drop(post2, lp2)) < 0


def test_top_two_bf_single_explanation_is_inf_and_kl_zero_for_no_change():
    lp = np.array([0.0, -np.inf, -np.inf])
    assert float(P.top_two_log_bf(lp, lp)) == np.inf
    lp = np.log(np.array([0.3, 0.7]))
    r = P.redistribution(lp, lp)
    assert float(r.kl) == pytest.approx(0.0, abs=1e-15) and float(r.tv) == 0.0


def test_resolution_rules():
    post = np.log(np.array([[0.95, 0.04, 0.01], [0.6, 0.3, 0.1]]))
    ok, win = P.resolved(post, 0.9)
    np.testing.assert_array_equal(ok, [True, False])
    np.testing.assert_array_equal(win, [0, 0])
    prior = np.log(np.full(3, 1 / 3))
    ok, _ = P.bf_resolved(post, prior, 10.0)  # BF 0.95/0.04 = 23.75, 0.6/0.3 = 2
    np.testing.assert_array_equal(ok, [True, False])
    ok, _ = P.bf_resolved(post, prior, 150.0)
    np.testing.assert_array_equal(ok, [False, False])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(1, 5))
def test_sequential_updates_equal_one_joint_update(seed, K, n):
    rng = np.random.default_rng(seed)
    lp = _rand(rng, (K,))
    lls = rng.normal(-2, 1.5, size=(n, K))
    cur = lp
    for ll in lls:
        cur = np.asarray(P.posterior(cur, ll).log_post)
    joint = np.asarray(P.posterior(lp, lls.sum(0)).log_post)
    np.testing.assert_allclose(cur, joint, atol=1e-10)
    # order does not matter
    rev = lp
    for ll in lls[::-1]:
        rev = np.asarray(P.posterior(rev, ll).log_post)
    np.testing.assert_allclose(rev, joint, atol=1e-10)


def test_jit_vmap_equal_eager_and_no_retrace():
    rng = np.random.default_rng(1)
    lp = _rand(rng, (6, 4), np.float32)
    ll = rng.normal(-2, 1, (6, 4)).astype(np.float32)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(a, b):
        post = P.posterior(a, b).log_post
        return post, P.redistribution(post, a)

    eager = P.posterior(lp, ll).log_post
    post, red = f(lp, ll)
    np.testing.assert_allclose(post, eager, atol=1e-6)
    vm = jax.vmap(lambda a, b: P.posterior(a, b).log_post)(lp, ll)
    np.testing.assert_allclose(vm, eager, atol=1e-6)
    f(lp + 0.0, ll * 0.5)  # new values, same shapes: no retrace
    np.testing.assert_allclose(red.kl, P.kl(eager, lp), atol=1e-6)


BAD = [
    (np.array([np.nan, 0.0]), np.zeros(2), "`log_prior` contains NaN"),
    (np.log([0.5, 0.6]), np.zeros(2), "`log_prior` must sum to one"),
    (np.array([-np.inf, -np.inf]), np.zeros(2), "`log_prior` is -inf everywhere"),
    (np.array([np.inf, 0.0]), np.zeros(2), r"`log_prior` contains \+inf"),
    (np.log([0.5, 0.5]), np.array([np.nan, 0.0]), "`log_lik` contains NaN"),
]


@pytest.mark.parametrize("lp,ll,msg", BAD)
def test_bad_input_named_eagerly_and_under_jit(lp, ll, msg):
    with pytest.raises(ValueError, match=msg):
        P.posterior(lp, ll)
    with pytest.raises(ValueError, match=msg):
        checked_jit(P.posterior)(lp, ll)


def test_bad_shapes_and_thresholds():
    with pytest.raises(ValueError, match="`log_lik` must have a last axis of K = 2"):
        P.posterior(np.log([0.5, 0.5]), np.zeros(3))
    with pytest.raises(ValueError, match="`log_prior` must have a last axis"):
        P.posterior(np.zeros(()), np.zeros(()))
    with pytest.raises(ValueError, match="`tau`"):
        P.resolved(np.log([0.5, 0.5]), 1.5)
    with pytest.raises(ValueError, match="`threshold`"):
        P.bf_resolved(np.log([0.5, 0.5]), np.log([0.5, 0.5]), 0.5)
    with pytest.raises(ValueError, match="same K"):
        P.redistribution(np.log([0.5, 0.5]), np.log([0.2, 0.3, 0.5]))


def test_float32_tolerance_of_normalisation():
    lp = jnp.log(jnp.asarray([0.3, 0.7], jnp.float32)) + 5e-4  # within float32 tolerance
    assert P.posterior(lp, jnp.zeros(2, jnp.float32)).log_post.dtype == jnp.float32
    with pytest.raises(ValueError, match="must sum to one"):
        P.posterior(np.log([0.3, 0.7]) + 5e-4, np.zeros(2))  # float64: too far
