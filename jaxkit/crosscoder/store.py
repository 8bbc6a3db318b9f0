"""Activation store: shuffled, resumable, per-process batches of activation windows.

A store is one ``.npy`` / ``.safetensors`` file or a directory of them (shards, read in
sorted file-name order). Each shard holds token-level activations of shape
``(n_tokens, d)`` (one document per shard) or ``(n_docs, n_tokens, d)`` (documents of
equal length). Nothing is loaded up front: ``.npy`` shards are memory-mapped
(``np.load(mmap_mode="r")``) and ``.safetensors`` shards are read slice by slice
(``safe_open(..., framework="numpy").get_slice``), so the shards together may be far
larger than memory.

Items are windows of ``window`` consecutive tokens that never cross a shard or document
boundary (``window=None``: single token rows). A batch is ``(batch_size, window, d)``
(or ``(batch_size, d)``). The order of windows is a permutation drawn from
``(seed, epoch)``, so a run is deterministic and its position is two integers,
:class:`StorePosition` ``(epoch, cursor)``, saved in the checkpoint. Multi-process: the
global batch ``b`` is the same on every process and process ``i`` of ``n`` reads only
its rows ``[i * B / n, (i + 1) * B / n)`` (or the rows the caller asks for), so the
processes read disjoint parts and the assembled global batch equals the single-process
one. See ``ACTIVATIONS.md`` for how to write shards from a PyTorch model.

Several models: :class:`SiteStore` holds one activation array per (model, site), all over
the same images in the same order, plus their labels (:func:`write_sites` writes one,
with a ``sites.json`` manifest). Every site is an :class:`ActivationStore` of single rows
with one shared seed, so one permutation orders them all and a batch is the same images
at every site; counts that differ between sites, NaN activations and (with
``n_classes``) a class missing from the labels are errors naming the site or argument.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["ActivationStore", "StorePosition", "SUFFIXES", "write_shards", "SiteStore",
           "write_sites", "iter_tensors", "safetensors_header"]

SUFFIXES = (".npy", ".safetensors")


class StorePosition(NamedTuple):
    """Where the stream stands: ``cursor`` batches of epoch ``epoch`` are consumed."""

    epoch: int = 0
    cursor: int = 0


class _Shard(NamedTuple):
    path: Path
    kind: str  # "npy" | "safetensors"
    tensor: str | None  # safetensors tensor name
    n_docs: int
    doc_len: int
    d: int
    three_d: bool
    dtype: str


def _list_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not files:
            raise ValueError(f"`path` {str(path)!r} contains no .npy or .safetensors shards")
        return files
    if not path.exists():
        raise ValueError(f"`path` {str(path)!r} does not exist")
    if path.suffix not in SUFFIXES:
        raise ValueError(f"`path` {str(path)!r} must be a directory, a .npy or a .safetensors "
                         f"file")
    return [path]


def _npy_header(p: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a ``.npy`` file, checked against its size, without reading it.

    Raises:
      ValueError: naming the file: not a ``.npy`` file, a corrupt or truncated header, a
        dtype that is not real numbers (object, string, complex, structured), or fewer
        data bytes than the header promises (a truncated file).
    """
    fmt = np.lib.format
    try:
        with open(p, "rb") as f:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            else:  # 2.0 and 3.0 share the 4-byte header length
                shape, _, dtype = fmt.read_array_header_2_0(f)
            data_start = f.tell()
    except (ValueError, EOFError, OSError, SyntaxError) as e:
        raise ValueError(f"shard {str(p)!r} is not a readable .npy file (corrupt or truncated "
                         f"header: {' '.join(str(e).split()) or type(e).__name__})") from None
    if dtype.hasobject:
        raise ValueError(f"shard {str(p)!r} holds Python objects (dtype object), not "
                         f"numbers; save the activations as a float array")
    if dtype.kind not in "biuf":
        raise ValueError(f"shard {str(p)!r} has dtype {dtype}; activations must be real "
                         f"numbers (float, int or bool)")
    need = math.prod(shape) * dtype.itemsize
    have = p.stat().st_size - data_start
    if have < need:
        raise ValueError(f"shard {str(p)!r} is truncated: its header promises shape "
                         f"{tuple(shape)} {dtype} ({need} bytes of data) but the file holds "
                         f"{have}")
    return tuple(int(n) for n in shape), dtype


def safetensors_header(p: Path, tensor: str | None) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype and name of the tensor a ``.safetensors`` shard is read from.

    Raises:
      ValueError: naming the file: a corrupt or truncated file, ``tensor`` missing, or
        several tensors and no ``tensor`` given (listing the names).
    """
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(p), framework="numpy") as f:
            names = list(f.keys())
            if tensor is not None:
                if tensor not in names:
                    raise ValueError(f"`tensor` {tensor!r} not in shard {str(p)!r} "
                                     f"(it holds {', '.join(map(repr, names)) or 'nothing'})")
                name = tensor
            elif len(names) == 1:
                name = names[0]
            elif "activations" in names:
                name = "activations"
            elif not names:
                raise ValueError(f"shard {str(p)!r} holds no tensors")
            else:
                raise ValueError(f"shard {str(p)!r} holds several tensors "
                                 f"({', '.join(map(repr, names))}); choose one with "
                                 f"`tensor` (`--tensor NAME` on the command line)")
            sl = f.get_slice(name)
            return tuple(int(n) for n in sl.get_shape()), str(sl.get_dtype()), name
    except (SafetensorError, OSError) as e:
        raise ValueError(f"shard {str(p)!r} is not a readable .safetensors file (corrupt or "
                         f"truncated: {' '.join(str(e).split())})") from None


def _open_shard(p: Path, tensor: str | None) -> _Shard:
    if p.suffix == ".npy":
        shape, dtype = _npy_header(p)
        dtype, name, kind = str(dtype), None, "npy"
    else:
        shape, dtype, name = safetensors_header(p, tensor)
        kind = "safetensors"
    if len(shape) not in (2, 3):
        raise ValueError(f"shard {str(p)!r} has shape {shape}; expected (n_tokens, d) or "
                         f"(n_docs, n_tokens, d)")
    if len(shape) == 2:
        return _Shard(p, kind, name, 1, int(shape[0]), int(shape[1]), False, dtype)
    return _Shard(p, kind, name, int(shape[0]), int(shape[1]), int(shape[2]), True, dtype)


class ActivationStore:
    """Stream shuffled fixed-size batches of activation windows from disk.

    Args:
      path: a ``.npy`` / ``.safetensors`` file or a directory of such shards.
      batch_size: global batch size ``B`` (all processes together).
      window: tokens per window ``W`` (``None``: single token rows of shape ``(d,)``).
      stride: token step between window starts within a document (default ``W``:
        non-overlapping windows).
      seed: shuffle seed; the epoch-``e`` order is a permutation drawn from ``(seed, e)``.
      tensor: safetensors tensor name (default: the only tensor, or ``"activations"``;
        a shard with several other tensors is refused, listing their names).
      dtype: dtype of the returned batches.
      process_index, process_count: this process's share of every global batch (default
        ``jax.process_index()`` / ``jax.process_count()``).
      check_finite: raise ``ValueError`` naming the shard when a batch holds NaN/inf.
    """

    def __init__(self, path: str | os.PathLike, *, batch_size: int, window: int | None = None,
                 stride: int | None = None, seed: int = 0, tensor: str | None = None,
                 dtype=np.float32, process_index: int | None = None,
                 process_count: int | None = None, check_finite: bool = True):
        self.path = Path(path)
        if process_index is None or process_count is None:
            import jax

            process_index = jax.process_index() if process_index is None else process_index
            process_count = jax.process_count() if process_count is None else process_count
        if window is not None and (int(window) != window or window < 1):
            raise ValueError(f"`window` must be a positive integer or None; got {window!r}")
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive integer; got {batch_size!r}")
        if process_count < 1 or not 0 <= process_index < process_count:
            raise ValueError(f"`process_index` {process_index} must lie in "
                             f"[0, process_count={process_count})")
        if batch_size % process_count:
            raise ValueError(f"`batch_size` {batch_size} must be a multiple of the process "
                             f"count {process_count}")
        self.window = None if window is None else int(window)
        w = 1 if window is None else int(window)
        self.stride = w if stride is None else int(stride)
        if self.stride < 1:
            raise ValueError(f"`stride` must be positive; got {stride!r}")
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.dtype = np.dtype(dtype)
        self.process_index, self.process_count = int(process_index), int(process_count)
        self.check_finite = check_finite
        shards = [_open_shard(p, tensor) for p in _list_files(self.path)]
        self.shards = [s for s in shards if s.n_docs * s.doc_len > 0]  # skip empty shards
        if not self.shards:
            raise ValueError(f"`path` {str(self.path)!r} holds no activations (empty shards)")
        ds = {s.d for s in self.shards}
        if len(ds) != 1:
            by_d = {s.d: s.path.name for s in self.shards}
            raise ValueError(f"`path` shards disagree on the feature size d: "
                             f"{', '.join(f'{n} has d={d}' for d, n in sorted(by_d.items()))}")
        self.d = ds.pop()
        for s in self.shards:
            if s.doc_len < w:
                what = "document" if s.three_d else "shard"
                raise ValueError(f"`window` {w} is longer than the {what} length {s.doc_len} "
                                 f"of shard {str(s.path)!r}")
        # windows per document and the global window-id offset of each shard
        self._wpd = np.array([(s.doc_len - w) // self.stride + 1 for s in self.shards],
                             dtype=np.int64)
        counts = self._wpd * np.array([s.n_docs for s in self.shards], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(counts)])
        self.n_windows = int(self._offsets[-1])
        if self.n_windows == 0:
            raise ValueError(f"`path` {str(self.path)!r} holds no activations (empty shards)")
        if self.batch_size > self.n_windows:
            raise ValueError(f"`batch_size` {self.batch_size} exceeds the number of windows "
                             f"in the store ({self.n_windows})")
        self.batches_per_epoch = self.n_windows // self.batch_size  # remainder dropped
        self._perm_epoch, self._perm = None, None
        self._mmaps: dict[int, np.ndarray] = {}

    # -- description -------------------------------------------------------------------
    @property
    def item_shape(self) -> tuple[int, ...]:
        return (self.d,) if self.window is None else (self.window, self.d)

    @property
    def local_batch_size(self) -> int:
        return self.batch_size // self.process_count

    def config(self) -> dict:
        """What a checkpoint must agree on to resume this stream."""
        return {"d": self.d, "window": self.window, "stride": self.stride,
                "batch_size": self.batch_size, "seed": self.seed, "n_windows": self.n_windows}

    def __repr__(self) -> str:
        return (f"ActivationStore({str(self.path)!r}, shards={len(self.shards)}, d={self.d}, "
                f"window={self.window}, n_windows={self.n_windows}, "
                f"batch_size={self.batch_size}, seed={self.seed})")

    # -- order ---------------------------------------------------------------------------
    def permutation(self, epoch: int) -> np.ndarray:
        """Window ids in the shuffled order of ``epoch`` (cached for one epoch)."""
        if self._perm_epoch != epoch:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, int(epoch)]))
            self._perm, self._perm_epoch = rng.permutation(self.n_windows), epoch
        return self._perm

    def normalise(self, position) -> StorePosition:
        """``position`` (an ``(epoch, cursor)`` pair) checked, with a cursor past the end
        of an epoch carried into the next: a :class:`StorePosition`; a negative entry is
        a ValueError."""
        epoch, cursor = (int(v) for v in position)
        if epoch < 0 or cursor < 0:
            raise ValueError(f"`position` must be non-negative; got {tuple(position)}")
        epoch += cursor // self.batches_per_epoch
        return StorePosition(epoch, cursor % self.batches_per_epoch)

    def batch_ids(self, position, rows: slice | None = None) -> np.ndarray:
        """Window ids of the global batch at ``position`` (restricted to ``rows``)."""
        epoch, cursor = self.normalise(position)
        ids = self.permutation(epoch)[cursor * self.batch_size:(cursor + 1) * self.batch_size]
        return ids if rows is None else ids[rows]

    def local_rows(self) -> slice:
        n = self.local_batch_size
        return slice(self.process_index * n, (self.process_index + 1) * n)

    # -- reading -------------------------------------------------------------------------
    def _locate(self, ids: np.ndarray):
        s = np.searchsorted(self._offsets, ids, side="right") - 1
        local = ids - self._offsets[s]
        wpd = self._wpd[s]
        return s, local // wpd, (local % wpd) * self.stride

    def _read_shard(self, si: int, docs: np.ndarray, starts: np.ndarray) -> np.ndarray:
        from safetensors import SafetensorError

        try:
            return self._read_shard_unchecked(si, docs, starts)
        except (SafetensorError, OSError, EOFError) as e:  # changed or unreadable since
            raise ValueError(f"shard {str(self.shards[si].path)!r} could not be read: "
                             f"{' '.join(str(e).split()) or type(e).__name__}") from None

    def _read_shard_unchecked(self, si: int, docs: np.ndarray, starts: np.ndarray
                              ) -> np.ndarray:
        sh, w = self.shards[si], (1 if self.window is None else self.window)
        if sh.kind == "npy":
            arr = self._mmaps.get(si)
            if arr is None:
                arr = self._mmaps[si] = np.load(sh.path, mmap_mode="r")
            tok = starts[:, None] + np.arange(w)  # (n, w) token indices, one read per row
            out = arr[docs[:, None], tok] if sh.three_d else arr[tok]
            return np.asarray(out)
        from safetensors import safe_open

        with safe_open(str(sh.path), framework="numpy") as f:
            sl = f.get_slice(sh.tensor)
            if sh.three_d:
                parts = [sl[int(a):int(a) + 1, int(b):int(b) + w] for a, b in zip(docs, starts,
                                                                                 strict=True)]
                return np.concatenate(parts, axis=0)
            return np.stack([sl[int(b):int(b) + w] for b in starts])

    def read(self, ids: np.ndarray) -> np.ndarray:
        """Windows ``ids`` (global window ids) as an array ``(len(ids), *item_shape)``."""
        ids = np.asarray(ids, dtype=np.int64)
        w = 1 if self.window is None else self.window
        out = np.empty((len(ids), w, self.d), dtype=self.dtype)
        s, docs, starts = self._locate(ids)
        for si in np.unique(s):
            sel = np.flatnonzero(s == si)
            order = np.lexsort((starts[sel], docs[sel]))  # sequential reads within a shard
            sel = sel[order]
            out[sel] = self._read_shard(int(si), docs[sel], starts[sel])
        if self.check_finite:
            bad = ~np.isfinite(out).reshape(len(ids), -1).all(axis=1)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                sh = self.shards[int(s[i])]
                where = f"document {int(docs[i])}, " if sh.three_d else ""
                raise ValueError(f"`store` batch contains NaN or inf values from shard "
                                 f"{str(sh.path)!r} ({where}tokens {int(starts[i])}.."
                                 f"{int(starts[i]) + w - 1}); {int(bad.sum())} bad windows "
                                 f"in this batch")
        return out[:, 0] if self.window is None else out

    def batch(self, position, rows: slice | None = None) -> tuple[np.ndarray, StorePosition]:
        """This process's rows of the global batch at ``position`` and the next position.

        ``rows`` defaults to :meth:`local_rows` (process ``i`` of ``n`` reads rows
        ``[i*B/n, (i+1)*B/n)``); pass ``slice(None)`` for the whole global batch."""
        pos = self.normalise(position)
        x = self.read(self.batch_ids(pos, self.local_rows() if rows is None else rows))
        return x, self.normalise((pos.epoch, pos.cursor + 1))

    def iterate(self, position=StorePosition(), rows: slice | None = None
                ) -> Iterator[tuple[np.ndarray, StorePosition]]:
        """Endless ``(batch, next_position)`` pairs starting at ``position``."""
        pos = self.normalise(position)
        while True:
            x, pos = self.batch(pos, rows)
            yield x, pos


def iter_tensors(path: str | os.PathLike, names: Sequence[str], *,
                 optional: Sequence[str] = (), chunk: int | None = None
                 ) -> Iterator[tuple[Path, dict[str, np.ndarray | None]]]:
    """Stream named tensors of a store's ``.safetensors`` shards, one shard (or one chunk
    of ``chunk`` leading rows of a shard) at a time, in sorted file-name order, so a
    directory larger than memory is read piece by piece (``safe_open(...).get_slice``:
    only the requested rows are read).

    Args:
      path: a ``.safetensors`` file or a directory of them (``.npy`` files are refused:
        they hold one unnamed array).
      names: tensors every shard must hold.
      optional: tensors read when present (``None`` in the dict when absent).
      chunk: leading rows (documents) per yielded piece; None: whole shards.

    Yields:
      ``(shard path, {name: array})``; the arrays of one piece share the leading rows.

    Raises:
      ValueError: naming the shard: an ``.npy`` shard, a missing tensor, tensors whose
        leading sizes differ, or an unreadable file.
    """
    from safetensors import SafetensorError, safe_open

    if chunk is not None and (int(chunk) != chunk or chunk < 1):
        raise ValueError(f"`chunk` must be a positive integer or None; got {chunk!r}")
    for p in _list_files(Path(path)):
        if p.suffix != ".safetensors":
            raise ValueError(f"shard {str(p)!r} is a .npy file; named tensors need "
                             f".safetensors shards")
        try:
            with safe_open(str(p), framework="numpy") as f:
                have = set(f.keys())
                missing = [n for n in names if n not in have]
                if missing:
                    raise ValueError(f"shard {str(p)!r} lacks tensor(s) "
                                     f"{', '.join(map(repr, missing))} (it holds "
                                     f"{', '.join(map(repr, sorted(have))) or 'nothing'})")
                wanted = [*names, *(n for n in optional if n in have)]
                slices = {n: f.get_slice(n) for n in wanted}
                rows = {n: int(sl.get_shape()[0]) for n, sl in slices.items()}
                if len(set(rows.values())) > 1:
                    raise ValueError(f"shard {str(p)!r}: tensors disagree on the number "
                                     f"of rows: {rows}")
                n_rows = next(iter(rows.values()))
                step = n_rows if chunk is None else int(chunk)
                for a in range(0, max(n_rows, 1), max(step, 1)):
                    out: dict[str, np.ndarray | None] = {n: None for n in optional}
                    out.update({n: sl[a:min(a + step, n_rows)] for n, sl in slices.items()})
                    yield p, out
        except (SafetensorError, OSError) as e:
            raise ValueError(f"shard {str(p)!r} is not a readable .safetensors file "
                             f"({' '.join(str(e).split())})") from None


def write_shards(directory: str | os.PathLike, arrays: Sequence[np.ndarray], *,
                 fmt: str = "npy", name: str = "activations") -> list[Path]:
    """Write ``arrays`` as shards ``shard_00000.{npy,safetensors}`` (tests, examples)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, a in enumerate(arrays):
        p = directory / f"shard_{i:05d}.{fmt}"
        if fmt == "npy":
            np.save(p, np.ascontiguousarray(a))
        elif fmt == "safetensors":
            from safetensors.numpy import save_file

            save_file({name: np.ascontiguousarray(a)}, str(p))
        else:
            raise ValueError(f"`fmt` must be 'npy' or 'safetensors'; got {fmt!r}")
        paths.append(p)
    return paths


MANIFEST = "sites.json"


def write_sites(directory: str | os.PathLike, sites: dict[str, Sequence[np.ndarray]],
                labels: np.ndarray | None = None) -> Path:
    """Write the activations of several models over the same images.

    Args:
      directory: the store folder (created): ``<model>/site_<t>.npy`` per site,
        ``labels.npy`` and the manifest ``sites.json``; each file written atomically.
      sites: ``{model name: [array (n, d_t) for each site t]}``.
      labels: ``(n,)`` integer labels of the images, or None.

    Returns:
      The folder.

    Raises:
      ValueError: naming the site whose row count differs, or ``labels``.
    """
    import json

    from jaxkit.io import atomic_open, atomic_write

    directory = Path(directory)
    if not sites:
        raise ValueError("`sites` must hold at least one model")
    n = None
    manifest: dict = {"models": {}, "labels": None}
    for name, arrs in sites.items():
        if not arrs:
            raise ValueError(f"`sites`[{name!r}] holds no site")
        if "/" in name or name.startswith("."):
            raise ValueError(f"`sites` model name {name!r} must be a plain folder name")
        files = []
        for t, a in enumerate(arrs):
            a = np.asarray(a)
            if a.ndim != 2:
                raise ValueError(f"`sites`[{name!r}][{t}] must have shape (n, d); got {a.shape}")
            if n is None:
                n = a.shape[0]
            elif a.shape[0] != n:
                raise ValueError(f"`sites`[{name!r}][{t}] holds {a.shape[0]} activations but "
                                 f"the first site holds {n}: every site must hold the same "
                                 f"images")
            rel = f"{name}/site_{t:02d}.npy"
            with atomic_open(directory / rel, "wb") as fh:
                np.save(fh, np.ascontiguousarray(a))
            files.append(rel)
        manifest["models"][name] = files
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n,) or labels.dtype.kind not in "iu":
            raise ValueError(f"`labels` must be an integer array of shape ({n},); got "
                             f"{labels.dtype} {labels.shape}")
        with atomic_open(directory / "labels.npy", "wb") as fh:
            np.save(fh, labels)
        manifest["labels"] = "labels.npy"
    atomic_write(directory / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return directory


class SiteStore:
    """Aligned shuffled batches of several models' sites (and labels) from disk.

    Args:
      directory: a folder written by :func:`write_sites`.
      batch_size: global batch size.
      seed: shuffle seed (one permutation for every site).
      models: the models to read, in order (default: all, in manifest order).
      n_classes: when given, every class ``0..n_classes-1`` must occur in the labels.
      process_index, process_count, check_finite, dtype: as :class:`ActivationStore`.
    """

    def __init__(self, directory: str | os.PathLike, *, batch_size: int, seed: int = 0,
                 models: Sequence[str] | None = None, n_classes: int | None = None,
                 dtype=np.float32, process_index: int | None = 0,
                 process_count: int | None = 1, check_finite: bool = True):
        import json

        self.path = Path(directory)
        mf = self.path / MANIFEST
        if not mf.is_file():
            raise ValueError(f"`directory` {str(self.path)!r} has no {MANIFEST} (write it with "
                             f"write_sites)")
        manifest = json.loads(mf.read_text())
        names = list(manifest["models"]) if models is None else list(models)
        missing = [m for m in names if m not in manifest["models"]]
        if missing or not names:
            raise ValueError(f"`models` {missing or names} not in the store (it holds "
                             f"{', '.join(manifest['models'])})")
        self.models = tuple(names)
        self.stores = tuple(tuple(ActivationStore(self.path / rel, batch_size=batch_size,
                                                  window=None, seed=seed, dtype=dtype,
                                                  process_index=process_index,
                                                  process_count=process_count,
                                                  check_finite=check_finite)
                                  for rel in manifest["models"][m]) for m in names)
        first = self.stores[0][0]
        for m, row in zip(names, self.stores, strict=True):
            for t, st in enumerate(row):
                if st.n_windows != first.n_windows:
                    raise ValueError(f"`directory` site {m}/{t} holds {st.n_windows} "
                                     f"activations but site {names[0]}/0 holds "
                                     f"{first.n_windows}: the models' activation counts "
                                     f"differ")
        self.n = first.n_windows
        self.batch_size = first.batch_size
        self.batches_per_epoch = first.batches_per_epoch
        self.labels = None
        if manifest.get("labels"):
            self.labels = np.load(self.path / manifest["labels"])
            if self.labels.shape != (self.n,):
                raise ValueError(f"`directory` labels hold {self.labels.shape[0]} entries for "
                                 f"{self.n} activations")
        if n_classes is not None:
            if self.labels is None:
                raise ValueError("`n_classes` given but the store has no labels")
            absent = sorted(set(range(n_classes)) - set(np.unique(self.labels).tolist()))
            if absent:
                raise ValueError(f"`labels` of the store have no image of class(es) {absent} "
                                 f"(a class missing from the data)")

    @property
    def d_sites(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(st.d for st in row) for row in self.stores)

    def config(self) -> dict:
        """What a checkpoint must agree on to resume this stream."""
        return {"models": list(self.models), "d_sites": [list(r) for r in self.d_sites],
                "n": self.n, **{k: v for k, v in self.stores[0][0].config().items()
                                if k in ("batch_size", "seed")}}

    def read(self, ids: np.ndarray) -> tuple[tuple[tuple[np.ndarray, ...], ...], np.ndarray]:
        """Rows ``ids`` of every site, and their labels (None without labels)."""
        sites = tuple(tuple(st.read(ids) for st in row) for row in self.stores)
        return sites, (None if self.labels is None else self.labels[np.asarray(ids)])

    def batch(self, position, rows: slice | None = None):
        """``(sites, labels, next_position)``: this process's rows of the global batch at
        ``position`` for every site (the same images everywhere)."""
        first = self.stores[0][0]
        pos = first.normalise(position)
        ids = first.batch_ids(pos, first.local_rows() if rows is None else rows)
        sites, labels = self.read(ids)
        return sites, labels, first.normalise((pos.epoch, pos.cursor + 1))
