"""Reading a user's molecules from CSV, and jaxkit's own models as ``fit_predict``.

:func:`read_molecules` reads a CSV or a Parquet file (:func:`read_molecule_csv` a CSV) with
a SMILES column and a numeric label column with errors
that name the file, the column and the row (a missing column lists the ones there; a
label that is empty, NaN or text is an error with its line numbers). :func:`model_fit_predict`
wraps the MLP / MPNN of :mod:`jaxkit.misaligned.models` (or the fingerprint ridge) as a
``fit_predict`` for :func:`jaxkit.misaligned.audit`.

An external model's predictions (``jaxkit misaligned audit --predictions preds.csv``):
:func:`read_predictions` reads them (columns ``y_true``, ``y_pred`` and ``smiles`` or
``id``; optional ``seed`` and ``split``) and :func:`assemble_predictions` matches them
with the data file into molecules, per-seed train / test masks and a prediction matrix,
with one-line errors for missing columns, non-numeric cells and mismatched rows.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from jaxkit.io import DataError

from . import models as Mo
from .features import MolDataset

__all__ = ["read_molecule_csv", "read_molecules", "read_ids", "model_fit_predict",
           "PRED_COLUMNS", "Predictions", "read_predictions", "UserSplit",
           "assemble_predictions"]


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


def read_ids(path: str | Path, id_column: str) -> list[str]:
    """The ``id_column`` cells of a data file (CSV or Parquet), in row order (for
    predictions matched by id).

    Raises:
        DataError: missing file or column (listing the header), an empty id.
    """
    path = Path(path)
    header, rows = _rows_of(path)
    if id_column not in header:
        raise DataError(f"{path}: no column {id_column!r} (--id-column); the header has "
                        f"{', '.join(map(repr, header)) or 'no columns'}")
    ids = [str(r.get(id_column) if r.get(id_column) is not None else "").strip()
           for _, r in rows]
    bad = [w for (w, _), k in zip(rows, ids, strict=True) if not k]
    if bad:
        raise _bad(path, id_column, bad, "ids are empty")
    return ids


def model_fit_predict(kind: str = "mlp", ts: Mo.TrainSettings = Mo.TrainSettings(),
                      key=None):
    """A ``fit_predict(dataset, train_idx, test_idx)`` training jaxkit's ``kind`` model
    (``"mlp"``, ``"mpnn"``, ``"dmpnn"``; ``"ridge"``: the fingerprint ridge) on
    ``train_idx``; each
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
        pred, _ = Mo.train(k, kind, Mo.model_arrays(kind, data), data.y, mask, ts)
        return pred[0, test_idx]

    return fit_predict


#: the columns of a predictions file (:func:`read_predictions`)
PRED_COLUMNS = ("y_true", "y_pred")
_TRUE = ("1", "true", "yes")


class Predictions(NamedTuple):
    """An external model's predictions (:func:`read_predictions`), one entry per row:
    ``by`` (``"smiles"`` or ``"id"``), ``keys`` (the SMILES or ids), ``y_true``,
    ``y_pred`` (NaN on training rows), ``seed`` (int), ``test`` (bool: a test row),
    ``where`` (the row's line in the file, for errors), ``path``."""

    by: str
    keys: list
    y_true: np.ndarray
    y_pred: np.ndarray
    seed: np.ndarray
    test: np.ndarray
    where: list
    path: Path


def _number(cell) -> float:
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return math.nan
    return v


def _rows_of(path: Path) -> tuple[list[str], list[tuple[str, dict]]]:
    """``(header, [(where, row dict)])`` of a CSV (``where`` = "line L") or a Parquet
    file (``where`` = "row R", 1-based)."""
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with path.open("rb") as fh:
        parquet = fh.read(4) == b"PAR1"
    if parquet or path.suffix.lower() in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq

            t = pq.read_table(path)
        except ImportError:
            raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow), "
                            "or save the table as CSV") from None
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise DataError(f"{path}: not a readable Parquet file ({e})") from None
        cols = {c: t.column(c).to_pylist() for c in t.column_names}
        return list(t.column_names), [(f"row {i + 1}", {c: v[i] for c, v in cols.items()})
                                      for i in range(t.num_rows)]
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = [(f"line {reader.line_num}", r) for r in reader]
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise DataError(f"{path}: not a readable CSV ({e})") from None
    return header, rows


def _bad(path, column: str, bad: list, what: str) -> DataError:
    return DataError(f"{path}, column {column!r}: {len(bad)} {what}: {', '.join(bad[:10])}"
                     + (" ..." if len(bad) > 10 else ""))


def read_predictions(path: str | Path) -> Predictions:
    """An external model's predictions from a CSV (header row) or Parquet file.

    Columns: ``y_true`` and ``y_pred`` (numbers; ``y_pred`` a score for a 0/1 task), and
    ``smiles`` (the molecule) or ``id`` (a row id of the data file, which then gives the
    SMILES); optional ``seed`` (an integer: one test set per seed, default one seed 0)
    and ``split`` (``test`` or ``train``; default every row is a test row; a ``train``
    row adds a training molecule and may leave ``y_pred`` empty).

    Raises:
        DataError: missing file or column (listing the header), no rows, a ``y_true``
            (any row) or ``y_pred`` (test rows) that is not a finite number, a ``seed``
            that is not an integer or a ``split`` other than train/test (naming the
            lines), no test row.
    """
    path = Path(path)
    header, rows = _rows_of(path)
    have = ", ".join(map(repr, header)) or "no columns"
    for col in PRED_COLUMNS:
        if col not in header:
            raise DataError(f"{path}: no column {col!r}; a predictions file has y_true, "
                            f"y_pred and smiles or id (the header has {have})")
    by = "smiles" if "smiles" in header else "id" if "id" in header else None
    if by is None:
        raise DataError(f"{path}: no column 'smiles' or 'id' naming the molecules (the "
                        f"header has {have})")
    if not rows:
        raise DataError(f"{path}: no data rows")
    where = [w for w, _ in rows]
    split = [str(r.get("split") or "test").strip().lower() for _, r in rows]
    bad = [f"{w} ({s!r})" for w, s in zip(where, split, strict=True) if s not in ("test",
                                                                                  "train")]
    if bad:
        raise _bad(path, "split", bad, "values are not 'train' or 'test'")
    test = np.array([s == "test" for s in split])
    if not test.any():
        raise DataError(f"{path}: no test rows (column 'split' is 'train' everywhere)")
    y_true = np.array([_number(r.get("y_true")) for _, r in rows])
    y_pred = np.array([_number(r.get("y_pred")) if t else math.nan
                       for (_, r), t in zip(rows, test, strict=True)])
    for col, v, sel in (("y_true", y_true, np.ones_like(test)), ("y_pred", y_pred, test)):
        bad = [f"{w} ({rows[i][1].get(col)!r})" for i, w in enumerate(where)
               if sel[i] and not math.isfinite(v[i])]
        if bad:
            raise _bad(path, col, bad, "values are not finite numbers")
    seed = np.zeros(len(rows), int)
    if "seed" in header:
        bad = []
        for i, (w, r) in enumerate(rows):
            x = _number(r.get("seed"))
            if not math.isfinite(x) or x != int(x):
                bad.append(f"{w} ({r.get('seed')!r})")
            else:
                seed[i] = int(x)
        if bad:
            raise _bad(path, "seed", bad, "values are not integers")
    keys = [str(r.get(by) if r.get(by) is not None else "").strip() for _, r in rows]
    bad = [w for w, k in zip(where, keys, strict=True) if not k]
    if bad:
        raise _bad(path, by, bad, "cells are empty")
    return Predictions(by, keys, y_true, y_pred, seed, test, where, path)


class UserSplit(NamedTuple):
    """The molecules and split behind an external model's predictions
    (:func:`assemble_predictions`): ``smiles`` and labels ``y`` of the ``n`` molecules,
    ``train`` / ``test`` ``(S, n)`` masks, ``pred`` ``(S, n)`` (the test rows' ``y_pred``,
    0 elsewhere) and the seeds' names ``seeds``."""

    smiles: list
    y: np.ndarray
    train: np.ndarray
    test: np.ndarray
    pred: np.ndarray
    seeds: list


def _canonical_or_fail(smiles, where, source) -> list[str]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        out, bad = [], []
        for s, w in zip(smiles, where, strict=True):
            m = Chem.MolFromSmiles(s) if s else None
            if m is None:
                bad.append(f"{w} ({s!r})")
                out.append("")
            else:
                out.append(Chem.MolToSmiles(m))
    finally:
        RDLogger.EnableLog("rdApp.*")
    if bad:
        raise DataError(f"{source}: {len(bad)} SMILES do not parse: {', '.join(bad[:10])}"
                        + (" ..." if len(bad) > 10 else ""))
    return out


def assemble_predictions(preds: Predictions, data: tuple | None = None,
                         data_path: str | Path | None = None) -> UserSplit:
    """The molecules and per-seed split behind ``preds``.

    Molecules are matched by canonical SMILES (``preds.by == "smiles"``) or by id. The
    training set of seed ``s`` is every molecule of ``data`` that is not one of seed
    ``s``'s test molecules, plus the predictions file's ``train`` rows of that seed; so
    ``data`` may be the model's training set or the whole data set.

    Args:
        preds: :func:`read_predictions`' output.
        data: ``(smiles, labels)`` or ``(smiles, labels, ids)`` of the data file
            (:func:`read_molecules`; ``ids`` needed when ``preds.by == "id"``), or None.
        data_path: the data file's name, for errors.

    Raises:
        DataError: (one line each) unparseable SMILES; an id not in the data file; a
            molecule twice in one seed's test rows or in both its train and test rows;
            a ``y_true`` that differs from the data file's label (or another row's) for
            the same molecule; a seed without training molecules; id-based predictions
            without a data file.
    """
    src = preds.path
    dpath = data_path or "DATA"
    index: dict[str, int] = {}
    smiles: list[str] = []
    label: list[float] = []
    origin: list[str] = []

    def add(key, smi, y, where) -> int:
        if key in index:
            i = index[key]
            if not math.isclose(label[i], y, rel_tol=1e-6, abs_tol=1e-9):
                raise DataError(f"{where}: the label {y:g} differs from {label[i]:g} for the "
                                f"same molecule at {origin[i]} (mismatched rows)")
            return i
        index[key] = len(smiles)
        smiles.append(smi)
        label.append(float(y))
        origin.append(where)
        return index[key]

    in_data = []
    if data is not None:
        dsmi, dy = data[0], data[1]
        dwhere = [f"{dpath}, data row {i + 1}" for i in range(len(dsmi))]
        can = _canonical_or_fail(dsmi, dwhere, dpath)
        if preds.by == "id":
            if len(data) < 3:
                raise DataError(f"{src}: predictions by 'id' need the data file's id column")
            dkeys = [str(k).strip() for k in data[2]]
            dup = sorted({k for k in dkeys if dkeys.count(k) > 1})
            if dup:
                raise DataError(f"{dpath}: ids {dup[:10]} occur more than once")
        else:
            dkeys = can
        in_data = [add(k, c, y, w) for k, c, y, w in zip(dkeys, can, dy, dwhere, strict=True)]
    elif preds.by == "id":
        raise DataError(f"{src}: predictions by 'id' need DATA, the data file holding the "
                        "ids, SMILES and labels")
    if preds.by == "smiles":
        pkeys = _canonical_or_fail(preds.keys, [f"{src}, {w}" for w in preds.where], src)
        rows = [add(k, k, y, f"{src}, {w}") for k, y, w in
                zip(pkeys, preds.y_true, preds.where, strict=True)]
    else:
        missing = [f"{w} ({k!r})" for k, w in zip(preds.keys, preds.where, strict=True)
                   if k not in index]
        if missing:
            raise DataError(f"{src}: {len(missing)} ids are not in {dpath} (mismatched rows): "
                            f"{', '.join(missing[:10])}" + (" ..." if len(missing) > 10
                                                            else ""))
        rows = [add(k, smiles[index[k]], y, f"{src}, {w}") for k, y, w in
                zip(preds.keys, preds.y_true, preds.where, strict=True)]
    seeds = sorted(set(preds.seed.tolist()))
    S, n = len(seeds), len(smiles)
    train, test = np.zeros((S, n), bool), np.zeros((S, n), bool)
    pred = np.zeros((S, n))
    first: dict = {}
    for r, i in enumerate(rows):
        s = seeds.index(int(preds.seed[r]))
        kind = "test" if preds.test[r] else "train"
        if (s, i) in first:
            raise DataError(f"{src}, {preds.where[r]}: molecule {smiles[i]!r} also at "
                            f"{first[(s, i)]} of seed {seeds[s]} (one row per molecule and "
                            "seed)")
        first[(s, i)] = preds.where[r]
        if kind == "test":
            test[s, i] = True
            pred[s, i] = preds.y_pred[r]
        else:
            train[s, i] = True
    for s in range(S):
        for i in in_data:
            if not test[s, i]:
                train[s, i] = True
        if not train[s].any():
            raise DataError(f"{src}: seed {seeds[s]} has no training molecules; pass the "
                            "model's training data as DATA or add rows with split=train")
    return UserSplit(smiles, np.asarray(label), train, test, pred, seeds)
