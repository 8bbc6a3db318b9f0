"""Files: reading user data with errors that say what is wrong and where, and atomic
writes (a file is either complete or absent, never half-written)."""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

__all__ = ["DataError", "read_csv_matrix", "atomic_write", "atomic_open"]

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open ``path`` for writing so that it appears only once complete.

    Writes go to a temporary file in the same folder (created, with its parents, if
    missing); on a clean exit it is flushed, fsynced and renamed over ``path``
    (``os.replace``, atomic on POSIX and Windows); on an exception it is removed and
    ``path`` is left as it was.

    Args:
        path: the destination file.
        mode: ``"w"`` (text, UTF-8) or ``"wb"`` (binary).

    Yields:
        The open temporary file.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"`mode` must be 'w' or 'wb'; got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (see
    :func:`atomic_open`); returns ``path``."""
    path = Path(path)
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return path


class DataError(ValueError):
    """A user data file that cannot be used as it is."""


def read_csv_matrix(path: str | Path) -> tuple[np.ndarray, list[str]]:
    """Read a numeric CSV with a header row into an (n, d) float64 array and names.

    Raises :class:`DataError` naming the file, line and column for a missing file,
    an empty file, a missing or duplicated header, ragged rows, or non-numeric cells.
    Empty cells and ``nan``/``inf`` are read as NaN/inf and rejected by the kernels'
    own checks, which name the offending argument.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    head = path.read_bytes()[:4096]
    if head.startswith(b"\x93NUMPY"):
        raise DataError(f"{path}: this is a NumPy .npy file, not a CSV; save it with "
                        f"numpy.savetxt(path, x, delimiter=',', header=..., comments='')")
    if b"\0" in head:
        raise DataError(f"{path}: a binary file, not a text CSV")
    try:
        # utf-8-sig drops a byte-order mark, which would otherwise stick to the first name
        with path.open(newline="", encoding="utf-8-sig") as fh:
            numbered = [(i + 1, r) for i, r in enumerate(csv.reader(fh))]
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV ({e})") from None
    # blank lines are skipped but every message gives the line number in the file
    rows = [(n, r) for n, r in numbered if any(c.strip() for c in r)]
    if not rows:
        raise DataError(f"{path}: the file is empty")
    header = [h.strip() for h in rows[0][1]]
    if len(header) < 2:
        raise DataError(f"{path}: need a header row naming at least 2 columns; got {header}")
    if any(_is_number(h) for h in header):
        raise DataError(f"{path}: the first row must be a header of column names; "
                        f"got {rows[0][1]}")
    if len(set(header)) != len(header):
        raise DataError(f"{path}: duplicate column names in the header")
    data = np.empty((len(rows) - 1, len(header)))
    for i, (line, row) in enumerate(rows[1:]):
        if len(row) != len(header):
            raise DataError(f"{path}, line {line}: expected {len(header)} values, "
                            f"got {len(row)}")
        for j, cell in enumerate(row):
            cell = cell.strip()
            try:
                data[i, j] = float(cell) if cell else np.nan
            except ValueError:
                raise DataError(f"{path}, line {line}, column {header[j]!r}: "
                                f"not a number: {cell!r}") from None
    if data.shape[0] == 0:
        raise DataError(f"{path}: the header has no data rows below it")
    return data, header


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
