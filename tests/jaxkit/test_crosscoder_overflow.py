"""Crosscoder training on activations near 1e30 (issue 58, section 3): the RMS used to
normalise them squared the data and overflowed float32, so training saw zeros and the
returned parameters were NaN with nothing flagged."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxkit.crosscoder as jc


def _fit(x):
    return jc.fit(jax.random.key(0), jnp.asarray(x), n_latents=8, k=2, steps=3, batch_size=8,
                  log_every=1)


def test_fit_near_1e30_matches_unit_scale():
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    small, big = _fit(x), _fit(x * np.float32(1e30))
    for a in jax.tree_util.tree_leaves(big.params):
        assert bool(jnp.all(jnp.isfinite(a)))
    np.testing.assert_allclose(big.config["scale"] / small.config["scale"], 1e30, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(big.params.b_dec) / 1e30,
                               np.asarray(small.params.b_dec), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(big.history["fvu"], small.history["fvu"], rtol=1e-3)
