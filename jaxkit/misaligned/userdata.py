"""Reading a user's molecules from CSV, and jaxkit's own models as ``fit_predict``.

:func:`read_molecules` reads a CSV or a Parquet file (:func:`read_molecule_csv` a CSV) with
a SMILES column and a numeric label column with errors
that name the file, the column and the row (a missing column lists the ones there; a
label that is empty, NaN or text is an error with its line numbers). :func:`model_fit_predict`
wraps the MLP / MPNN of :mod:`jaxkit.misaligned.models` (or the fingerprint ridge) as a
``fit_predict`` for :func:`jaxkit.misaligned.audit`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import jax
import numpy as np

from jaxkit.io import DataError

from . import models as Mo
from .features import MolDataset

__all__ = ["read_molecule_csv", "read_molecules", "model_fit_predict"]


def read_molecule_csv(path: str | Path, smiles_column: str, label_column: str
                      ) -> tuple[list[str], np.ndarray]:
    """``(smiles, labels)`` from a CSV with a header row.

    Raises:
        DataError: missing or unreadable file, missing column (listing those present),
            a label that is not a finite number (with the first line numbers), no rows.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            for col, what in ((smiles_column, "--smiles-column"),
                              (label_column, "--label-column")):
                if col not in header:
                    raise DataError(f"{path}: no column {col!r} ({what}); the header has "
                                    f"{', '.join(map(repr, header)) or 'no columns'}")
            rows = [(reader.line_num, r) for r in reader]
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV ({e})") from None
    if not rows:
        raise DataError(f"{path}: the header has no data rows below it")
    smiles, labels, bad = [], [], []
    for line, r in rows:
        cell = (r.get(label_column) or "").strip()
        try:
            v = float(cell)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            bad.append(f"line {line} ({cell!r})")
        smiles.append((r.get(smiles_column) or "").strip())
        labels.append(v)
    if bad:
        raise DataError(f"{path}, column {label_column!r}: {len(bad)} labels are not finite "
                        f"numbers: {', '.join(bad[:10])}" + (" ..." if len(bad) > 10 else ""))
    return smiles, np.asarray(labels)


def read_molecules(path: str | Path, smiles_column: str, label_column: str
                   ) -> tuple[list[str], np.ndarray]:
    """``(smiles, labels)`` from a CSV (header row; :func:`read_molecule_csv`) or a
    Parquet file (``.parquet`` / ``.pq`` or the ``PAR1`` magic bytes; needs pyarrow), with
    the same errors: a Parquet row is named by its 1-based row number.

    Raises:
        DataError: as :func:`read_molecule_csv`; a Parquet file that cannot be read.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with path.open("rb") as fh:
        parquet = fh.read(4) == b"PAR1"
    if not (parquet or path.suffix.lower() in (".parquet", ".pq")):
        return read_molecule_csv(path, smiles_column, label_column)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow), or "
                        "save the table as CSV") from None
    try:
        header = pq.read_schema(path).names
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise DataError(f"{path}: not a readable Parquet file ({e})") from None
    for col, what in ((smiles_column, "--smiles-column"), (label_column, "--label-column")):
        if col not in header:
            raise DataError(f"{path}: no column {col!r} ({what}); the table has "
                            f"{', '.join(map(repr, header)) or 'no columns'}")
    t = pq.read_table(path, columns=[smiles_column, label_column])
    if t.num_rows == 0:
        raise DataError(f"{path}: the table has no rows")
    smiles, labels, bad = [], [], []
    for i, (sm, v) in enumerate(zip(t.column(0).to_pylist(), t.column(1).to_pylist(),
                                    strict=True)):
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if not math.isfinite(x):
            bad.append(f"row {i + 1} ({v!r})")
        smiles.append("" if sm is None else str(sm).strip())
        labels.append(x)
    if bad:
        raise DataError(f"{path}, column {label_column!r}: {len(bad)} labels are not finite "
                        f"numbers: {', '.join(bad[:10])}" + (" ..." if len(bad) > 10 else ""))
    return smiles, np.asarray(labels)


def model_fit_predict(kind: str = "mlp", ts: Mo.TrainSettings = Mo.TrainSettings(),
                      key=None):
    """A ``fit_predict(dataset, train_idx, test_idx)`` training jaxkit's ``kind`` model
    (``"mlp"``, ``"mpnn"``; ``"ridge"``: the fingerprint ridge) on ``train_idx``; each
    call uses the next key ``fold_in(key, call)``."""
    key = jax.random.key(0) if key is None else key
    calls = [0]

    def fit_predict(data: MolDataset, train_idx, test_idx):
        k = jax.random.fold_in(key, calls[0])
        calls[0] += 1
        mask = np.zeros((1, data.n), bool)
        mask[0, train_idx] = True
        if kind == "ridge":
            from .baselines import kernel_ridge

            f = jax.numpy.asarray(data.fp, jax.numpy.float32)
            p = kernel_ridge(f @ f.T, jax.numpy.asarray(data.y, jax.numpy.float32),
                             jax.numpy.asarray(mask[0]), 3.0)
            return np.asarray(p)[test_idx]
        arrays = dict(fp=data.fp, atoms=data.atoms, adj=data.adj, atom_mask=data.atom_mask)
        pred, _ = Mo.train(k, kind, arrays, data.y, mask, ts)
        return pred[0, test_idx]

    return fit_predict
