"""The misaligned audit's user data: CSV and Parquet molecules with errors naming the file,
the column and the row (jaxkit.misaligned.userdata.read_molecules and the CLI)."""

import numpy as np
import pytest

from jaxkit.io import DataError
from jaxkit.misaligned.userdata import read_molecules

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_parquet_reads_as_the_csv(tmp_path):
    c = tmp_path / "m.csv"
    c.write_text("name,smiles,y\na,CCO,1.5\nb,CCN,-2\n")
    p = tmp_path / "m.parquet"
    pq.write_table(pa.table({"name": ["a", "b"], "smiles": ["CCO", "CCN"], "y": [1.5, -2]}), p)
    s1, y1 = read_molecules(c, "smiles", "y")
    s2, y2 = read_molecules(p, "smiles", "y")
    assert s1 == s2 == ["CCO", "CCN"]
    np.testing.assert_array_equal(y1, y2)


def test_parquet_errors_name_the_row(tmp_path):
    p = tmp_path / "m.parquet"
    pq.write_table(pa.table({"smiles": ["CCO", "CCN", "CCC"], "y": ["1", "oops", None]}), p)
    with pytest.raises(DataError, match=r"m.parquet, column 'y': 2 labels are not finite "
                                        r"numbers: row 2 \('oops'\), row 3 \(None\)"):
        read_molecules(p, "smiles", "y")
    with pytest.raises(DataError, match=r"no column 'smi' \(--smiles-column\); the table has"):
        read_molecules(p, "smi", "y")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 broken")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        read_molecules(bad, "smiles", "y")


def test_cli_takes_parquet(tmp_path):
    from typer.testing import CliRunner

    from jaxkit.misaligned.cli import app

    p = tmp_path / "m.parquet"
    pq.write_table(pa.table({"smiles": ["CCO", "CCN", "CCC"], "y": [1.0, float("nan"), 2]}), p)
    r = CliRunner().invoke(app, ["audit", str(p)])
    assert r.exit_code == 2 and "row 2 (nan)" in r.output
