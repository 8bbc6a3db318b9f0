"""kernels/_rowmeans.py: the means of FastICA's loop, as products in float64 only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import _rowmeans as R


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_means_equal_numpy_and_take_the_measured_form(dtype):
    assert jax.config.jax_enable_x64  # tests/conftest.py
    a = jnp.asarray(np.random.default_rng(0).normal(size=(7, 300)) + 3.0, dtype)
    ref = np.asarray(a, np.float64)
    tol = 1e-12 if dtype == jnp.float64 else 1e-5
    np.testing.assert_allclose(R.mean_last(a), ref.mean(-1), rtol=tol)
    np.testing.assert_allclose(R.mean_first(a), ref.mean(0), rtol=tol)
    np.testing.assert_allclose(R.std_last(a), ref.std(-1), rtol=10 * tol)
    for f in (R.mean_last, R.mean_first):
        assert f(a).dtype == dtype
        prims = {e.primitive.name for e in jax.make_jaxpr(f)(a).jaxpr.eqns}
        # float64: a product (XLA:CPU emits it inline); float32: the plain reduction,
        # which is faster there (benchmarks/RESULTS.md, 2026-12-04)
        assert ("dot_general" in prims) == (dtype == jnp.float64), prims
        assert ("reduce_sum" in prims) == (dtype != jnp.float64), prims
