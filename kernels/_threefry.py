"""Threefry-2x32 with its 20 rounds unrolled: JAX's own random bits, as vector code on CPU.

JAX's default generator hashes counters with Threefry-2x32 (Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC 2011). On the CPU it lowers the hash as a rolled
XLA while-loop (5 steps of 4 rounds), and every step streams the whole array through
memory: a 642 x 2048 draw took 11 ms, and numpyro's per-site key splits took 65-70% of a
256 x 1024-draw evidence table. Written out in full, the hash is one elementwise
expression that XLA fuses with its consumers (comparisons, a ``where``, a sampler's
transform): about 2 ms for the same draw.

:data:`THREEFRY_UNROLLED` is that hash registered as a PRNG implementation
(``jax.extend.random.define_prng_impl``); :func:`unrolled_key` re-wraps a Threefry key
with the same data as one. Keys split and bits drawn from it are **bit-identical** to
JAX's ``threefry2x32`` under ``jax_threefry_partitionable`` (JAX's default; tested for
splits, 8/16/32-bit draws, normals and uniforms, under ``vmap``), so a kernel can switch
to it without changing a single number. Any other generator or setting is returned
unchanged, and draws that do not fit the unrolled form (64-bit, or ``2**32`` or more
values) fall back to JAX's implementation.

Caveat: unrolled everywhere, XLA:CPU recomputes a chain of hashes inside each consumer
(it drops ``optimization_barrier``), so use it for the wide draws, not for long chains
of small splits.
"""

from __future__ import annotations

import math

import jax
import jax.extend.random as jex_random
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["THREEFRY_UNROLLED", "unrolled_key", "threefry2x32"]

_THREEFRY = jex_random.threefry_prng_impl
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r: int):
    return lax.shift_left(x, np.uint32(r)) | lax.shift_right_logical(x, np.uint32(32 - r))


def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 (20 rounds) of the counters ``(x1, x2)`` under the key ``(k1, k2)``,
    unrolled: the same words as JAX's ``threefry2x32`` primitive.

    Args:
        k1, k2: the key words (uint32 scalars).
        x1, x2: the counter words (uint32 arrays of one shape).

    Returns:
        The two hashed words, each of the counters' shape.
    """
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = x1 + x2
            x2 = _rotl(x2, r) ^ x1
        x1 = x1 + ks[(i + 1) % 3]
        x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x1, x2


def _hash_iota(key, shape):
    """The hash of the flat index of every position of ``shape`` (high word 0), as JAX's
    partitionable Threefry split and random bits count."""
    lo = lax.iota(np.uint32, math.prod(shape)).reshape(shape)
    return threefry2x32(key[0], key[1], jnp.zeros(shape, np.uint32), lo)


def _fits(shape) -> bool:
    return 0 < math.prod(shape) < 2 ** 32


def _split_unrolled(key, shape):
    if not _fits(shape):
        return _THREEFRY.split(key, shape)
    return jnp.stack(_hash_iota(key, shape), axis=-1)


def _bits_unrolled(key, bit_width: int, shape):
    if bit_width == 64 or not _fits(shape):
        return _THREEFRY.random_bits(key, bit_width, shape)
    b1, b2 = _hash_iota(key, shape)
    bits = b1 ^ b2
    return bits if bit_width == 32 else bits.astype({8: np.uint8, 16: np.uint16}[bit_width])


#: Threefry-2x32 with the hash unrolled (the bits of JAX's ``threefry2x32`` keys under
#: ``jax_threefry_partitionable``, JAX's default).
THREEFRY_UNROLLED = jex_random.define_prng_impl(
    key_shape=(2,), seed=_THREEFRY.seed, split=_split_unrolled,
    random_bits=_bits_unrolled, fold_in=_THREEFRY.fold_in,
    name="threefry2x32 (unrolled)", tag="tfu")


def unrolled_key(key):
    """``key`` as a :data:`THREEFRY_UNROLLED` key with the same data when it is a
    Threefry key (typed, or a raw ``uint32[2]`` with Threefry as JAX's default; any
    leading batch shape) and JAX splits partitionably; otherwise ``key`` unchanged.
    Every draw from the result equals the same draw from ``key``."""
    if not jax.config.jax_threefry_partitionable:
        return key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32":
            return key
        data = jax.random.key_data(key)
    elif (key.dtype == jnp.uint32 and key.shape[-1:] == (2,)
          and jax.config.jax_default_prng_impl == "threefry2x32"):
        data = key
    else:
        return key
    return jax.random.wrap_key_data(data, impl=THREEFRY_UNROLLED)
