"""Many random arrays from one PRNG call (each ``jax.random`` call under ``vmap`` costs
compile time, so the priors draw one flat block and cut it)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def uniforms(key, *shapes: tuple[int, ...]):
    """``U[0, 1)`` arrays of the given shapes from one :func:`jax.random.uniform` call."""
    return _cut(jax.random.uniform(key, (sum(math.prod(s) for s in shapes),), jnp.float32), shapes)


def normals(key, *shapes: tuple[int, ...]):
    """``N(0, 1)`` arrays of the given shapes from one :func:`jax.random.normal` call."""
    return _cut(jax.random.normal(key, (sum(math.prod(s) for s in shapes),), jnp.float32), shapes)


def _cut(flat, shapes):
    out, i = [], 0
    for s in shapes:
        m = math.prod(s)
        out.append(flat[i:i + m].reshape(s))
        i += m
    return out
