"""jaxkit.io.read_table: CSV and Parquet tables with label columns, errors naming the
file, the line / row and the column; environment codes and intervention masks."""

import numpy as np
import pytest

from jaxkit.io import DataError, labels_to_codes, read_table, targets_mask

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _csv(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_label_columns_and_codes(tmp_path):
    p = _csv(tmp_path, "a,env,b\n1,obs,2\n\n3,hot,4\n5,obs,6\n")
    t = read_table(p, labels=("env",))
    assert t.names == ["a", "b"]
    np.testing.assert_array_equal(t.x, [[1, 2], [3, 4], [5, 6]])
    assert t.rows == [2, 4, 5]
    codes, names = labels_to_codes(t, "env")
    np.testing.assert_array_equal(codes, [0, 1, 0])
    assert names == ["obs", "hot"]


def test_parquet_matches_csv(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1.0, 3.0], "env": ["x", "y"], "b": [2, 4]}), p)
    t = read_table(p, labels=("env",))
    assert t.parquet and t.names == ["a", "b"]
    np.testing.assert_array_equal(t.x, [[1, 2], [3, 4]])
    assert t.labels["env"] == ["x", "y"]


def test_errors_name_file_row_and_column(tmp_path):
    p = _csv(tmp_path, "a,b\n1,2\n3,x\n")
    with pytest.raises(DataError, match=r"t.csv, line 3, column 'b': not a number"):
        read_table(p)
    with pytest.raises(DataError, match=r"no column 'env'; the header has 'a', 'b'"):
        read_table(p, labels=("env",))
    q = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": ["1", "oops"], "b": [1.0, 2.0]}), q)
    with pytest.raises(DataError, match=r"t.parquet, row 2, column 'a': not a number"):
        read_table(q)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="not a readable Parquet"):
        read_table(bad)
    e = _csv(tmp_path, "a,env,b\n1,,2\n", "e.csv")
    with pytest.raises(DataError, match=r"e.csv, line 2, column 'env': empty label"):
        labels_to_codes(read_table(e, labels=("env",)), "env")


def test_targets_mask(tmp_path):
    p = _csv(tmp_path, "a,b,c,do\n1,2,3,\n1,2,3,b\n1,2,3,a;c\n1,2,3,obs\n")
    t = read_table(p, labels=("do",))
    np.testing.assert_array_equal(targets_mask(t, "do"),
                                  [[0, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]])
    p = _csv(tmp_path, "a,b,do\n1,2,a\n1,2,zz\n", "u.csv")
    with pytest.raises(DataError, match=r"u.csv, line 3, column 'do': 'zz' is not a variable"):
        targets_mask(read_table(p, labels=("do",)), "do")
