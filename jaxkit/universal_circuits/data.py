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
* :func:`augmented_stream` -- ``n`` augmented images at once (on the host, the same
  augmentation in NumPy, :func:`augment_np`: nothing to compile): the
  training stream the models sample their batches from and the images whose
  activations the transcoders are trained on.
* :func:`load_shapes` -- the second task, generated procedurally (nothing shipped): ten
  classes of strokes and shapes (bars, diagonals, crosses, squares, a ring, a
  triangle) drawn at random positions, sizes, rotations and stroke widths with pixel
  noise, split by index like the digits. :func:`load_task` picks the task by name.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = ["Digits", "load_digits", "load_shapes", "load_task", "TASKS", "SHAPE_CLASSES",
           "augment", "augment_np", "sample_batch", "bilinear", "augmented_stream", "N_CLASSES"]

N_CLASSES = 10


class Digits(NamedTuple):
    """Training pool and held-out test split, images ``(n, size * size)`` in [0, 1]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    size: int


def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits ``(images (1797, 8, 8), target)``, read from the CSV file in
    its wheel as ``sklearn.datasets.load_digits`` reads it (the same numbers) without
    importing scikit-learn (~1.7 s of CPU); through ``load_digits`` where the file is not
    at its usual place."""
    import gzip
    from importlib.util import find_spec

    spec = find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, "rt") as fh:
                data = np.loadtxt(fh, delimiter=",")
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    from sklearn.datasets import load_digits as sk_load

    d = sk_load()
    return d.images, d.target


def load_digits(size: int = 8, test_every: int = 5, exclude: int | None = None) -> Digits:
    """The digits, resized to ``size``, split by index (module docstring).

    Args:
      size: image side (>= 8).
      test_every: every ``test_every``-th image is a test image.
      exclude: a class removed from the training pool (the test split keeps it).

    Returns:
      :class:`Digits` (float32 images flattened row-major, int32 labels).
    """
    if size < 8 or test_every < 2:
        raise ValueError(f"`size` must be >= 8 and `test_every` >= 2; got {size}, {test_every}")
    images, target = _sklearn_digits()
    x = (images / 16.0).astype(np.float32)
    if size != 8:
        x = np.asarray(jax.image.resize(jnp.asarray(x), (x.shape[0], size, size), "bilinear"))
    x = x.reshape(x.shape[0], -1)
    y = target.astype(np.int32)
    test = np.arange(len(y)) % test_every == 0
    train = ~test if exclude is None else (~test & (y != exclude))
    return Digits(x[train], y[train], x[test], y[test], size)


SHAPE_CLASSES = ("horizontal bar", "vertical bar", "diagonal /", "diagonal \\", "plus",
                 "x cross", "square outline", "filled square", "ring", "triangle")
TASKS = ("digits", "shapes")


def _shape_mask(c: int, u: np.ndarray, v: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether points ``(u, v)`` (shape frame, the shape within ``|u|, |v| <= 0.8``) lie on
    shape ``c`` of stroke half-width ``t``."""
    r = 0.8
    box = (np.abs(u) <= r) & (np.abs(v) <= r)
    diag, anti = np.abs(u - v) / np.sqrt(2) < t, np.abs(u + v) / np.sqrt(2) < t
    rad = np.sqrt(u ** 2 + v ** 2)
    shapes = (
        (np.abs(v) < t) & box,
        (np.abs(u) < t) & box,
        diag & (rad <= r),
        anti & (rad <= r),
        ((np.abs(u) < t) | (np.abs(v) < t)) & box,
        (diag | anti) & (rad <= r),
        np.abs(np.maximum(np.abs(u), np.abs(v)) - 0.6) < t,
        np.maximum(np.abs(u), np.abs(v)) <= 0.55,
        np.abs(rad - 0.55) < t,
        (v >= -0.6) & (v <= 0.7) & (np.abs(u) <= (0.7 - v) * 0.55),
    )
    return shapes[c]


def load_shapes(size: int = 8, test_every: int = 5, n: int = 1800, seed: int = 0,
                exclude: int | None = None) -> Digits:
    """The procedural shapes task (module docstring): ``n`` images, classes in turn
    (image ``i`` has class ``(i // test_every) % 10``), each drawn with 4 x 4 supersampling after a
    random rotation (up to 20 degrees), scale (0.7-1.0 of the image), shift (up to 15%
    of the image) and stroke half-width (0.12-0.2 of the half-side), then pixel noise
    (std 0.05), clipped to [0, 1]; split by index like :func:`load_digits`.

    Args:
      size: image side (>= 8).
      test_every: every ``test_every``-th image is a test image.
      n: images in all (>= 10 * test_every, so every class has test images).
      seed: the generator's seed (the task is a pure function of it).
      exclude: a class removed from the training pool (the test split keeps it).

    Returns:
      :class:`Digits` (float32 images flattened row-major, int32 labels).
    """
    if size < 8 or test_every < 2 or n < 10 * test_every:
        raise ValueError(f"`size` must be >= 8, `test_every` >= 2 and `n` >= 10 * test_every; "
                         f"got {size}, {test_every}, {n}")
    rng = np.random.default_rng(seed)
    ss = 4
    g = (np.arange(size * ss) + 0.5) / ss - size / 2  # sub-pixel centres, image frame
    yy, xx = np.meshgrid(-g, g, indexing="ij")  # rows top to bottom: y decreasing
    y = ((np.arange(n) // test_every) % 10).astype(np.int32)  # balanced in both splits
    x = np.zeros((n, size, size), np.float32)
    for i in range(n):
        ang = np.deg2rad(rng.uniform(-20, 20))
        scale = rng.uniform(0.7, 1.0) * size / 2
        dx, dy = rng.uniform(-0.15, 0.15, 2) * size
        t = rng.uniform(0.12, 0.2)
        px, py = xx - dx, yy - dy
        u = (np.cos(ang) * px + np.sin(ang) * py) / scale
        v = (-np.sin(ang) * px + np.cos(ang) * py) / scale
        m = _shape_mask(int(y[i]), u, v, t).astype(np.float32)
        x[i] = m.reshape(size, ss, size, ss).mean((1, 3))
    x = np.clip(x + rng.normal(0, 0.05, x.shape), 0, 1).astype(np.float32).reshape(n, -1)
    test = np.arange(n) % test_every == 0
    train = ~test if exclude is None else (~test & (y != exclude))
    return Digits(x[train], y[train], x[test], y[test], size)


def load_task(task: str, size: int, test_every: int) -> Digits:
    """``"digits"`` (:func:`load_digits`) or ``"shapes"`` (:func:`load_shapes`); with
    ``"mnist"`` too: :func:`jaxkit.universal_circuits.mnist.load_task`."""
    if task == "digits":
        return load_digits(size, test_every)
    if task == "shapes":
        return load_shapes(size, test_every)
    raise ValueError(f"`task` must be one of {TASKS}; got {task!r}")


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


def _blur_np(field: np.ndarray, sigma: float) -> np.ndarray:
    """:func:`_blur` in NumPy."""
    r = max(1, int(math.ceil(2 * sigma)))
    t = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-0.5 * (t / sigma) ** 2)
    w = w / w.sum()
    S = field.shape[-1]

    def conv1(f, axis):
        f = np.moveaxis(f, axis, -1)
        p = np.pad(f, [(0, 0)] * (f.ndim - 1) + [(r, r)], mode="edge")
        out = sum(w[i] * p[..., i:i + S] for i in range(2 * r + 1))
        return np.moveaxis(out, -1, axis)

    return conv1(conv1(field, -1), -2)


def _bilinear_np(x: np.ndarray, si: np.ndarray, sj: np.ndarray, size: int) -> np.ndarray:
    """:func:`bilinear` in NumPy."""
    i0, j0 = np.floor(si), np.floor(sj)
    fi, fj = si - i0, sj - j0
    out = np.zeros(si.shape)
    rows = np.arange(x.shape[0])[:, None]
    for di, wi in ((0, 1 - fi), (1, fi)):
        for dj, wj in ((0, 1 - fj), (1, fj)):
            ii, jj = (i0 + di).astype(np.int64), (j0 + dj).astype(np.int64)
            inside = (ii >= 0) & (ii < size) & (jj >= 0) & (jj < size)
            flat = np.clip(ii, 0, size - 1) * size + np.clip(jj, 0, size - 1)
            v = x[rows, flat.reshape(x.shape[0], -1)].reshape(si.shape)
            out = out + np.where(inside, wi * wj * v, 0.0)
    return out.reshape(x.shape[0], -1)


def augment_np(rng: np.random.Generator, x: np.ndarray, size: int, *, max_shift: float = 1.0,
               max_rotation: float = 10.0, alpha: float = 1.0, sigma: float = 2.0
               ) -> np.ndarray:
    """:func:`augment` on the host (NumPy, nothing to compile), the noise drawn from
    ``rng``: the same shift, rotation and elastic noise (normalised over the batch)."""
    B = x.shape[0]
    shift = rng.uniform(-max_shift, max_shift, (B, 2))
    ang = np.deg2rad(rng.uniform(-max_rotation, max_rotation, B))
    disp = _blur_np(rng.standard_normal((B, 2, size, size)), sigma)
    disp = alpha * disp / max(float(np.std(disp)), 1e-6)
    c = (size - 1) / 2
    ii, jj = np.meshgrid(np.arange(size, dtype=np.float64), np.arange(size, dtype=np.float64),
                         indexing="ij")
    u, v = ii - c, jj - c
    cos, sin = np.cos(ang)[:, None, None], np.sin(ang)[:, None, None]
    src_i = cos * u - sin * v + c - shift[:, 0, None, None] + disp[:, 0]
    src_j = sin * u + cos * v + c - shift[:, 1, None, None] + disp[:, 1]
    return np.clip(_bilinear_np(np.asarray(x, np.float64), src_i, src_j, size), 0.0, 1.0)


def augmented_stream(key: PRNGKeyArray, x_pool, y_pool, n: int, size: int, **aug
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` augmented pool images and labels, drawn with replacement, deterministic in
    ``key``; made on the host in batches of 512 (:func:`augment_np`: no compilation)."""
    if n < 1:
        raise ValueError(f"`n` must be >= 1; got {n}")
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    x_pool, y_pool = np.asarray(x_pool, np.float32), np.asarray(y_pool, np.int32)
    idx = rng.integers(0, len(x_pool), n)
    xs = [augment_np(rng, x_pool[idx[i:i + 512]], size, **aug) for i in range(0, n, 512)]
    return np.concatenate(xs).astype(np.float32), y_pool[idx]
