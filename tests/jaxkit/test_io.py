"""Reading a user's CSV: errors that name the file and the real line, no BOM in names,
no binary files read as text; atomic writes."""

import numpy as np
import pytest

from jaxkit.io import DataError, atomic_write, read_csv_matrix


def test_reads_a_csv_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeffa,b\n1,2\n3,4\n".encode())
    x, names = read_csv_matrix(p)
    assert names == ["a", "b"]
    np.testing.assert_array_equal(x, [[1, 2], [3, 4]])


def test_line_numbers_count_blank_lines(tmp_path):
    p = tmp_path / "gap.csv"
    p.write_text("a,b\n1,2\n\n\n3,x\n")
    with pytest.raises(DataError, match=r"line 5, column 'b'"):
        read_csv_matrix(p)
    p.write_text("a,b\n\n1,2,3\n")
    with pytest.raises(DataError, match=r"line 3: expected 2 values"):
        read_csv_matrix(p)


def test_binary_and_npy_files_are_named(tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((3, 2)))
    with pytest.raises(DataError, match=r"x\.npy: this is a NumPy \.npy file"):
        read_csv_matrix(npy)
    binf = tmp_path / "x.bin"
    binf.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(DataError, match="binary file"):
        read_csv_matrix(binf)
    latin = tmp_path / "l.csv"
    latin.write_bytes("caf\xe9,b\n1,2\n".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        read_csv_matrix(latin)


def test_atomic_write_leaves_only_the_file(tmp_path):
    atomic_write(tmp_path / "sub" / "f.txt", "hello")
    atomic_write(tmp_path / "sub" / "f.txt", b"bytes")
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["f.txt"]
    assert (tmp_path / "sub" / "f.txt").read_bytes() == b"bytes"
