"""Real images, offline: scikit-learn's handwritten digits (1,797 8x8 images, UCI ML
hand-written digits, shipped inside the scikit-learn wheel), resized and augmented.

* :func:`load_digits` -- the images in ``[0, 1]`` at ``size x size`` (bilinear resize),
  split by index: image ``i`` is a test image when ``i % test_every == 0`` (real,
  unaugmented, never trained on), the others form the training pool.
* :func:`augment` -- a batch of random augmentations of pool images: a shift of up to
  ``max_shift`` pixels, a rotation of up to ``max_rotation`` degrees and elastic noise
  (Simard et al. 2003: a Gaussian-smoothed random displacement field of strength
  ``alpha``), all by bilinear resampling (``jax.scipy.ndimage.map_coordinates``).
* :func:`sample_batch` -- ``batch`` augmented images and labels drawn from the pool by a
  key (deterministic in the key, so a training batch is a function of its step).
* :func:`augmented_stream` -- ``n`` augmented images at once (one compiled call): the
  training stream the models sample their batches from and the images whose
  activations the transcoders are trained on.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = ["Digits", "load_digits", "augment", "sample_batch", "bilinear",
           "augmented_stream", "N_CLASSES"]

N_CLASSES = 10


class Digits(NamedTuple):
    """Training pool and held-out test split, images ``(n, size * size)`` in [0, 1]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    size: int


def load_digits(size: int = 8, test_every: int = 5, exclude: int | None = None) -> Digits:
    """The digits, resized to ``size``, split by index (module docstring).

    Args:
      size: image side (>= 8).
      test_every: every ``test_every``-th image is a test image.
      exclude: a class removed from the training pool (the test split keeps it).

    Returns:
      :class:`Digits` (float32 images flattened row-major, int32 labels).
    """
    from sklearn.datasets import load_digits as sk_load

    if size < 8 or test_every < 2:
        raise ValueError(f"`size` must be >= 8 and `test_every` >= 2; got {size}, {test_every}")
    d = sk_load()
    x = (d.images / 16.0).astype(np.float32)
    if size != 8:
        x = np.asarray(jax.image.resize(jnp.asarray(x), (x.shape[0], size, size), "bilinear"))
    x = x.reshape(x.shape[0], -1)
    y = d.target.astype(np.int32)
    test = np.arange(len(y)) % test_every == 0
    train = ~test if exclude is None else (~test & (y != exclude))
    return Digits(x[train], y[train], x[test], y[test], size)


def _blur(field, sigma: float):
    """Separable Gaussian blur of ``(..., S, S)`` fields (edge padding)."""
    r = max(1, int(math.ceil(2 * sigma)))
    t = jnp.arange(-r, r + 1, dtype=field.dtype)
    w = jnp.exp(-0.5 * (t / sigma) ** 2)
    w = w / jnp.sum(w)
    S = field.shape[-1]

    def conv1(f, axis):
        f = jnp.moveaxis(f, axis, -1)
        p = jnp.pad(f, [(0, 0)] * (f.ndim - 1) + [(r, r)], mode="edge")
        out = sum(w[i] * p[..., i:i + S] for i in range(2 * r + 1))
        return jnp.moveaxis(out, -1, axis)

    return conv1(conv1(field, -1), -2)


def augment(key: PRNGKeyArray, x: Float[Array, "B P"], size: int, *, max_shift: float = 1.0,
            max_rotation: float = 10.0, alpha: float = 1.0, sigma: float = 2.0
            ) -> Float[Array, "B P"]:
    """Random shift, rotation and elastic noise of flattened ``size x size`` images."""
    B = x.shape[0]
    ks, kr, ke = jax.random.split(key, 3)
    shift = jax.random.uniform(ks, (B, 2), minval=-max_shift, maxval=max_shift)
    ang = jnp.deg2rad(jax.random.uniform(kr, (B,), minval=-max_rotation, maxval=max_rotation))
    disp = _blur(jax.random.normal(ke, (B, 2, size, size)), sigma)
    disp = alpha * disp / jnp.maximum(jnp.std(disp), 1e-6)
    c = (size - 1) / 2
    ii, jj = jnp.meshgrid(jnp.arange(size, dtype=x.dtype), jnp.arange(size, dtype=x.dtype),
                          indexing="ij")
    u, v = ii - c, jj - c
    cos, sin = jnp.cos(ang)[:, None, None], jnp.sin(ang)[:, None, None]
    src_i = cos * u - sin * v + c - shift[:, 0, None, None] + disp[:, 0]
    src_j = sin * u + cos * v + c - shift[:, 1, None, None] + disp[:, 1]
    return jnp.clip(bilinear(x, src_i, src_j, size), 0.0, 1.0)


def bilinear(x: Float[Array, "B P"], si: Float[Array, "B S S"], sj: Float[Array, "B S S"],
             size: int) -> Float[Array, "B P"]:
    """Bilinear samples of flattened ``size x size`` images at source coordinates
    ``(si, sj)``, zero outside the image (what ``map_coordinates(order=1,
    mode="constant")`` computes, written with gathers: it compiles in a fraction of
    the time)."""
    i0, j0 = jnp.floor(si), jnp.floor(sj)
    fi, fj = si - i0, sj - j0
    out = jnp.zeros(si.shape, x.dtype)
    for di, wi in ((0, 1 - fi), (1, fi)):
        for dj, wj in ((0, 1 - fj), (1, fj)):
            ii, jj = (i0 + di).astype(jnp.int32), (j0 + dj).astype(jnp.int32)
            inside = (ii >= 0) & (ii < size) & (jj >= 0) & (jj < size)
            flat = jnp.clip(ii, 0, size - 1) * size + jnp.clip(jj, 0, size - 1)
            v = jnp.take_along_axis(x, flat.reshape(x.shape[0], -1), axis=1).reshape(si.shape)
            out = out + jnp.where(inside, wi * wj * v, 0.0)
    return out.reshape(x.shape[0], -1)


def sample_batch(key: PRNGKeyArray, x_pool: Float[Array, "n P"], y_pool: Int[Array, " n"],
                 batch: int, size: int, **aug) -> tuple[Float[Array, "B P"], Int[Array, " B"]]:
    """``batch`` augmented pool images and their labels, drawn (with replacement) by
    ``key``; ``aug`` are :func:`augment`'s keywords."""
    k1, k2 = jax.random.split(key)
    idx = jax.random.randint(k1, (batch,), 0, x_pool.shape[0])
    return augment(k2, x_pool[idx], size, **aug), y_pool[idx]


@functools.partial(jax.jit, static_argnames=("n", "size", "chunk", "aug"))
def _stream(key, x_pool, y_pool, n: int, size: int, chunk: int, aug: tuple):
    keys = jax.random.split(key, n // chunk)
    xs, ys = jax.lax.map(lambda k: sample_batch(k, x_pool, y_pool, chunk, size, **dict(aug)),
                         keys)
    return xs.reshape(n, -1), ys.reshape(n)


def augmented_stream(key: PRNGKeyArray, x_pool, y_pool, n: int, size: int, **aug
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` augmented pool images and labels (a multiple of 512 is drawn and cut)."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    chunk = 512
    m = -(-n // chunk) * chunk
    x, y = _stream(key, jnp.asarray(x_pool), jnp.asarray(y_pool), m, size, chunk,
                   tuple(sorted(aug.items())))
    return np.asarray(x[:n]), np.asarray(y[:n])
