"""NOTEARS: the matrix exponential and the acyclicity function against SciPy / autodiff,
recovery of a known linear SEM, jit/vmap invariance and bad input."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from jaxkit.kernels.graph import shd
from jaxkit.kernels.sem import simulate_pooled
from jaxkit.kernels.sem.notears import expm_taylor, notears, notears_h


def test_expm_taylor_matches_scipy_float64():
    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 5.0):
        a = rng.normal(size=(7, 7)) * scale
        ref = sl.expm(a)
        got = np.asarray(expm_taylor(jnp.asarray(a, jnp.float64)))
        assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


def test_h_is_zero_on_dags_positive_on_cycles_and_its_gradient_is_exact():
    dag = jnp.asarray([[0, 0.0, 0], [1.5, 0, 0], [0, -0.7, 0]], jnp.float64)
    h, _ = notears_h(dag)
    assert abs(float(h)) < 1e-12
    cyc = dag.at[0, 2].set(0.9)
    h, g = notears_h(cyc)
    assert float(h) > 0.1
    g_ad = jax.grad(lambda w: notears_h(w)[0])(cyc)
    assert np.allclose(g, g_ad, atol=1e-10)


# a known linear SEM (LiNGAM convention b[i, j]: j -> i), equal noise variances
B = np.zeros((5, 5))
B[1, 0], B[2, 0], B[3, 1], B[3, 2], B[4, 3] = 1.5, -1.0, 1.2, 0.8, -1.3


@functools.cache
def _fit():
    x = simulate_pooled(jax.random.key(1), jnp.asarray(B, jnp.float32), n_envs=0,
                        n_total=500).x
    @chex.assert_max_traces(n=1)
    def f(x):
        return notears(x, outer_iters=10, inner_steps=60)
    fj = jax.jit(f)
    return x, fj, fj(x)


def test_notears_recovers_a_known_linear_sem():
    _, _, r = _fit()
    assert bool(r.finite)
    assert int(shd(jnp.asarray(B), r.b)) <= 1
    est = np.asarray(r.b)
    for (i, j) in zip(*np.nonzero(B), strict=True):
        assert abs(est[i, j] - B[i, j]) < 0.3


def test_notears_no_retrace_for_new_values():
    x, fj, r = _fit()
    r2 = fj(x * 1.0001)  # same shapes, new values: no new trace (assert_max_traces)
    assert np.array_equal(np.asarray(r.b) != 0, np.asarray(r2.b) != 0)


@pytest.mark.slow
def test_notears_vmap_matches_single_fits():
    x, _, r = _fit()
    rv = jax.jit(jax.vmap(lambda x: notears(x, outer_iters=10, inner_steps=60)))(
        jnp.stack([x, x[::-1]]))
    for k in range(2):  # row order does not change the covariance: the same graph
        assert np.array_equal(np.asarray(rv.b[k]) != 0, np.asarray(r.b) != 0)
        assert np.allclose(rv.b[k], r.b, atol=0.05)  # float32 L-BFGS: summation order


def test_notears_bad_input_names_the_argument():
    x = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="lambda1"):
        notears(jnp.asarray(x), lambda1=-1.0)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="`x`"):
        notears(jnp.asarray(bad))
    const = x.copy()
    const[:, 1] = 3.0
    with pytest.raises(ValueError, match="constant"):
        notears(jnp.asarray(const))
    with pytest.raises(ValueError, match="inner_steps"):
        notears(jnp.asarray(x), inner_steps=0)
