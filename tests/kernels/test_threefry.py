"""The unrolled Threefry (kernels/_threefry.py) draws JAX's own bits: splits, bits of
every width the samplers use, normals and uniforms, for typed, folded and raw keys, under
jit and vmap; other generators are left alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels._threefry import unrolled_key


@jax.jit
def _draws(k):
    ks = jax.random.split(k, (2, 3))
    return (jax.random.key_data(ks), jax.random.bits(k, (2, 3), jnp.uint8),
            jax.random.bits(k, (5,), jnp.uint16), jax.random.bits(k, (3, 4, 5), jnp.uint32),
            jax.random.bits(k, (130, 64), jnp.uint32), jax.random.normal(k, (2, 3)),
            jax.random.uniform(k, (7,), jnp.float32),
            jax.vmap(lambda kk: jax.random.uniform(jax.random.split(kk)[1], (2,)))(ks[0]))


@pytest.mark.parametrize("key", [jax.random.key(5), jax.random.fold_in(jax.random.key(0), 7)],
                         ids=["typed", "folded"])
def test_unrolled_threefry_draws_the_same_bits(key):
    fast = unrolled_key(key)
    assert str(jax.random.key_impl(fast)) != "threefry2x32"
    for a, b in zip(_draws(fast), _draws(key), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    keys = jax.random.split(key, 3)  # a batch of keys, and under vmap
    f = jax.jit(jax.vmap(lambda k: jax.random.bits(k, (5, 3), jnp.uint32)))
    np.testing.assert_array_equal(np.asarray(f(unrolled_key(keys))), np.asarray(f(keys)))


def test_raw_keys_and_other_generators():
    raw = jax.random.PRNGKey(3)  # a raw uint32[2] key: re-wrapped with the same data
    np.testing.assert_array_equal(jax.random.key_data(unrolled_key(raw)), raw)
    np.testing.assert_array_equal(
        np.asarray(jax.random.uniform(unrolled_key(raw), (4, 3))),
        np.asarray(jax.random.uniform(raw, (4, 3))))
    rbg = jax.random.key(0, impl="rbg")
    assert unrolled_key(rbg) is rbg  # other generators are left alone
