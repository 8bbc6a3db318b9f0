"""CausalTab predict on a user's table: CSV or Parquet with an intervention column
(jaxkit.causal_model.predict.read_data and ``jaxkit causaltab predict``)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.causal_model.predict import predict, read_data
from jaxkit.causaltab.cli import causaltab_app
from jaxkit.io import DataError


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 3))
    x[:, 1] += 0.8 * x[:, 0]
    x[:, 2] += 0.8 * x[:, 1]
    do = [""] * 30 + ["b"] * 5 + ["a;c"] * 5
    d = tmp_path_factory.mktemp("ct")
    csv = d / "mine.csv"
    csv.write_text("a,b,do,c\n" + "".join(f"{r[0]:.6f},{r[1]:.6f},{t},{r[2]:.6f}\n"
                                          for r, t in zip(x, do, strict=True)))
    return csv, x, do


def test_intervention_column_is_the_mask(table, tmp_path):
    csv, x, do = table
    xs, names, mask = read_data(csv, "do")
    assert names == ["a", "b", "c"]
    want = np.zeros((40, 3))
    want[30:35, 1] = 1
    want[35:, [0, 2]] = 1
    np.testing.assert_array_equal(mask, want)
    out = tmp_path / "g.json"
    r = CliRunner().invoke(causaltab_app, ["predict", str(csv), "--intervention-column", "do",
                                           "--json", str(out)])
    assert r.exit_code == 0, r.output
    got = np.asarray(json.loads(out.read_text())["probabilities"])
    np.testing.assert_allclose(got, predict(np.round(x, 6), want), atol=1e-6)
    # the mask matters: without it the probabilities differ
    assert not np.allclose(got, predict(np.round(x, 6)), atol=1e-6)


def test_parquet_and_errors(table, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    csv, x, do = table
    p = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "do": do, "c": x[:, 2]}), p)
    xp, names, mask = read_data(p, "do")
    np.testing.assert_allclose(xp, read_data(csv, "do")[0], atol=1e-6)
    assert names == ["a", "b", "c"] and mask.sum() == 15
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,do\n1,2,\n3,4,z\n")
    with pytest.raises(DataError, match=r"bad.csv, line 3, column 'do': 'z' is not a var"):
        read_data(bad, "do")
    r = CliRunner().invoke(causaltab_app, ["predict", str(bad), "--intervention-column", "do"])
    assert r.exit_code != 0 and "line 3" in r.output
