"""Files: reading user data with errors that say what is wrong and where, and atomic
writes (a file is either complete or absent, never half-written)."""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np

__all__ = ["DataError", "read_csv_matrix", "atomic_write", "atomic_open", "Table", "read_table",
           "labels_to_codes", "targets_mask", "check_user_path", "user_data"]

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


def _missing(path: Path) -> str:
    """Why ``path`` cannot be read: absent, or a folder it sits in is absent."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return "no such file or folder" if parent == path.parent else \
        f"no such file or folder ({parent} has no {path.relative_to(parent).parts[0]!r})"


def check_user_path(path: str | Path, setting: str, *, folder: bool = False,
                    text: bool = False) -> Path:
    """Check a path a user named in a setting (``--set SETTING=PATH``) before any work:
    it exists, is a folder (``folder``) or a regular file, a file is not empty, and with
    ``text`` its first 64 KiB hold no NUL byte and are UTF-8 (a byte-order mark is
    allowed).

    Args:
        path: the path as given.
        setting: the setting's name, for the message.
        folder: want a folder instead of a file.
        text: want a UTF-8 text file.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        DataError: one line naming the setting and the path: missing, a folder where a
            file is wanted (or the reverse), an empty file, a binary or non-UTF-8 file.
    """
    p = Path(path)
    where = f"`{setting}` {p}"
    if not p.exists():
        raise DataError(f"{where}: {_missing(p)}")
    if folder and not p.is_dir():
        raise DataError(f"{where}: a file, not a folder (want a folder here)")
    if not folder and p.is_dir():
        raise DataError(f"{where}: a folder, not a file")
    if folder:
        return p
    if not p.is_file():
        raise DataError(f"{where}: not a regular file")
    try:
        with p.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError as e:
        raise DataError(f"{where}: cannot read it ({e.strerror or e})") from None
    if not head:
        raise DataError(f"{where}: the file is empty")
    if text:
        if b"\0" in head:
            raise DataError(f"{where}: a binary file, not text")
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.end < len(head) - 3:  # not just a character cut at the 64 KiB boundary
                raise DataError(f"{where}: not UTF-8 text ({e.reason} at byte "
                                f"{e.start})") from None
    return p


def _one_line(text: str) -> str:
    """``text`` on one line, control characters shown escaped."""
    flat = " ".join(str(text).split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)


@contextlib.contextmanager
def user_data(setting: str, path: str | Path, *, folder: bool = False,
              text: bool = False) -> Iterator[Path]:
    """Read a user's file or folder named in a setting with one-line errors: the path is
    checked first (:func:`check_user_path`), then any ``ValueError``, ``OSError``,
    ``KeyError``, ``IndexError``, ``TypeError`` or ``UnicodeError`` the reading code in
    the block raises becomes a :class:`DataError` naming the setting and the path (a
    :class:`DataError` passes through with its own message, on one line). For the
    checks at the start of a pipeline, before any work.

    Example::

        with user_data("data", cfg.data) as path:
            table = read_my_format(path)

    Args:
        setting: the setting's name, for the message.
        path: the path as given.
        folder: want a folder instead of a file.
        text: want a UTF-8 text file.

    Yields:
        ``path`` as a :class:`~pathlib.Path`.
    """
    p = check_user_path(path, setting, folder=folder, text=text)
    try:
        yield p
    except DataError as e:
        raise DataError(_one_line(str(e))) from None
    except (ValueError, OSError, KeyError, IndexError, TypeError, UnicodeError) as e:
        msg = _one_line(str(e)) or type(e).__name__
        if str(p) not in msg:
            msg = f"`{setting}` {p}: {msg}"
        raise DataError(msg) from None


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
    rows = _csv_rows(path, npy_hint="; save it with numpy.savetxt(path, x, delimiter=',', "
                               "header=..., comments='')", binary_hint="")
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


# -- tables with label columns (CSV or Parquet) -------------------------------------------

_PARQUET_SUFFIXES = (".parquet", ".pq")


class Table(NamedTuple):
    """A user's table: the numeric columns and the label columns kept as text.

    ``rows[i]`` names row ``i`` in messages: the line number in a CSV file, the 1-based
    row number in a Parquet file (``where(i)`` spells it).
    """

    path: Path
    x: np.ndarray  # (n, d) float64: every column not kept as a label
    names: list[str]  # the d numeric column names
    labels: dict[str, list[str]]  # kept column -> its n cells as text ("" for empty)
    rows: list[int]  # line (CSV) or row (Parquet) number of each row
    parquet: bool

    def where(self, i: int) -> str:
        """``"FILE, line L"`` (CSV) or ``"FILE, row R"`` (Parquet) of row ``i``."""
        return f"{self.path}, {'row' if self.parquet else 'line'} {self.rows[i]}"


def read_table(path: str | Path, *, labels: tuple[str, ...] | list[str] = (),
               optional: tuple[str, ...] | list[str] = (), min_columns: int = 2) -> Table:
    """Read a CSV (header row) or Parquet file (``.parquet`` / ``.pq``, or the ``PAR1``
    magic bytes; needs ``pyarrow``) into numeric columns and text label columns.

    Args:
        path: the file.
        labels: columns read as text labels (an environment or an intervention column,
            SMILES); each must be present.
        optional: label columns kept when present.
        min_columns: the fewest numeric columns accepted.

    Returns:
        A :class:`Table`.

    Raises:
        DataError: naming the file (and the line / row and column where one is at fault)
            for a missing, empty, binary or unreadable file, a missing label column
            (listing the columns there), duplicated names, ragged rows, non-numeric cells
            in a numeric column, or fewer than ``min_columns`` numeric columns.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a file")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if path.suffix.lower() in _PARQUET_SUFFIXES or magic == b"PAR1":
        header, cells, rows, parquet = _parquet_cells(path)
    else:
        header, cells, rows = _csv_cells(path)
        parquet = False
    if len(set(header)) != len(header):
        raise DataError(f"{path}: duplicate column names in the header")
    for col in labels:
        if col not in header:
            raise DataError(f"{path}: no column {col!r}; the header has "
                            f"{', '.join(map(repr, header)) or 'no columns'}")
    kept = [c for c in header if c in labels or c in optional]
    names = [c for c in header if c not in kept]
    if len(names) < min_columns:
        raise DataError(f"{path}: need at least {min_columns} numeric columns besides "
                        f"{kept or 'the label columns'}; got {names}")
    if not rows:
        raise DataError(f"{path}: the header has no data rows below it")
    where = "row" if parquet else "line"
    x = np.empty((len(rows), len(names)))
    for j, c in enumerate(names):
        for i, cell in enumerate(cells[c]):
            if cell is None or (isinstance(cell, str) and not cell.strip()):
                x[i, j] = np.nan
                continue
            try:
                x[i, j] = float(cell.strip() if isinstance(cell, str) else cell)
            except (TypeError, ValueError):
                raise DataError(f"{path}, {where} {rows[i]}, column {c!r}: not a number: "
                                f"{cell!r}") from None
    text = {c: ["" if v is None else str(v).strip() for v in cells[c]] for c in kept}
    return Table(path, x, names, text, rows, parquet)


def _csv_rows(path: Path, *, npy_hint: str, binary_hint: str) -> list[tuple[int, list[str]]]:
    """The non-blank rows of a CSV file with their line numbers in the file (blank lines
    are skipped, but every message gives the real line); clear errors for a .npy or binary
    file, text that is not UTF-8 (a byte-order mark is dropped: it would stick to the first
    name), an unreadable CSV, and an empty file."""
    head = path.read_bytes()[:4096]
    if head.startswith(b"\x93NUMPY"):
        raise DataError(f"{path}: this is a NumPy .npy file, not a CSV{npy_hint}")
    if b"\0" in head:
        raise DataError(f"{path}: a binary file, not a text CSV{binary_hint}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            numbered = [(i + 1, r) for i, r in enumerate(csv.reader(fh))]
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV ({e})") from None
    rows = [(n, r) for n, r in numbered if any(c.strip() for c in r)]
    if not rows:
        raise DataError(f"{path}: the file is empty")
    return rows


def _csv_cells(path: Path) -> tuple[list[str], dict[str, list], list[int]]:
    numbered = _csv_rows(path, npy_hint=" or Parquet table",
                         binary_hint=" (Parquet files end in .parquet)")
    header = [h.strip() for h in numbered[0][1]]
    if any(_is_number(h) for h in header):
        raise DataError(f"{path}: the first row must be a header of column names; "
                        f"got {numbered[0][1]}")
    body = numbered[1:]
    for line, r in body:
        if len(r) != len(header):
            raise DataError(f"{path}, line {line}: expected {len(header)} values, "
                            f"got {len(r)}")
    cells = {h: [r[j] for _, r in body] for j, h in enumerate(header)}
    return header, cells, [n for n, _ in body]


def _parquet_cells(path: Path) -> tuple[list[str], dict[str, list], list[int], bool]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow), "
                        f"or save the table as CSV") from None
    try:
        t = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise DataError(f"{path}: not a readable Parquet file ({e})") from None
    header = [str(c) for c in t.column_names]
    cells = {h: t.column(k).to_pylist() for k, h in enumerate(header)}
    return header, cells, list(range(1, t.num_rows + 1)), True


def labels_to_codes(table: Table, column: str) -> tuple[np.ndarray, list[str]]:
    """The label column ``column`` as integer codes ``(n,)`` in order of first
    appearance, and the label of each code; an empty cell is a :class:`DataError`
    naming its line / row."""
    values = table.labels[column]
    codes: dict[str, int] = {}
    out = np.empty(len(values), np.int32)
    for i, v in enumerate(values):
        if not v:
            raise DataError(f"{table.where(i)}, column {column!r}: empty label")
        out[i] = codes.setdefault(v, len(codes))
    return out, list(codes)


_OBSERVATIONAL = {"", "none", "obs", "observational", "-"}


def targets_mask(table: Table, column: str, sep: str = ";") -> np.ndarray:
    """The intervention column ``column`` as a 0/1 mask ``(n, d)`` over the numeric
    columns: a cell names the intervened variables (``sep``-separated), or is empty /
    ``none`` / ``obs`` / ``observational`` / ``-`` for an observational row.

    Raises:
        DataError: a cell naming no numeric column of the table (with its line / row).
    """
    index = {n: j for j, n in enumerate(table.names)}
    mask = np.zeros(table.x.shape)
    for i, v in enumerate(table.labels[column]):
        if v.lower() in _OBSERVATIONAL:
            continue
        for t in (s.strip() for s in v.split(sep)):
            if t not in index:
                raise DataError(f"{table.where(i)}, column {column!r}: {t!r} is not a "
                                f"variable of the table ({', '.join(table.names)}); use "
                                f"'{sep}' between several targets, empty for none")
            mask[i, index[t]] = 1.0
    return mask
