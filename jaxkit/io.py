"""Reading user data files, with errors that say what is wrong and where."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

__all__ = ["DataError", "read_csv_matrix"]


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
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise DataError(f"{path}: the file is empty")
    header = [h.strip() for h in rows[0]]
    if len(header) < 2:
        raise DataError(f"{path}: need a header row naming at least 2 columns; got {header}")
    if any(_is_number(h) for h in header):
        raise DataError(f"{path}: the first row must be a header of column names; "
                        f"got {rows[0]}")
    if len(set(header)) != len(header):
        raise DataError(f"{path}: duplicate column names in the header")
    data = np.empty((len(rows) - 1, len(header)))
    for i, row in enumerate(rows[1:]):
        line = i + 2
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
