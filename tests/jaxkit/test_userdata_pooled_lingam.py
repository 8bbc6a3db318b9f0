"""Pooled ICA-LiNGAM on a user's table (jaxkit.pooled_lingam.userdata): CSV and Parquet
with an environment column, through the registered pipeline (``--set data=FILE``)."""

import numpy as np
import pytest

from jaxkit.io import DataError
from jaxkit.pooled_lingam import userdata
from jaxkit.pooled_lingam.config import QUICK
from jaxkit.registry import RunContext, get

# the chain x0 -> x1 -> ... -> x4 with Gaussian noise: one observational environment and
# one scaling per node
D = 5
B = np.diag([1.0, -0.8, 0.9, 0.7], -1)
NAMES = [f"x{i}" for i in range(D)]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    # as jaxkit.kernels.sem.simulate_pooled: environment k > 0 scales node k-1's noise
    rng = np.random.default_rng(3)
    env = np.repeat(np.arange(D + 1), 100)
    e = rng.standard_normal((100 * (D + 1), D))
    for k in range(1, D + 1):
        e[env == k, k - 1] *= 3.0
    x = e @ np.linalg.inv(np.eye(D) - B).T
    labels = np.array(["obs"] + [f"do-{v}" for v in NAMES])[env]
    path = tmp_path_factory.mktemp("pooled") / "pooled.csv"
    lines = [",".join(["x0", "regime", *NAMES[1:]])] + [
        ",".join([f"{r[0]:.9g}", lab, *(f"{v:.9g}" for v in r[1:])])
        for r, lab in zip(x, labels, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path, x, labels


@pytest.fixture(scope="module")
def result(table, tmp_path_factory):
    cfg = QUICK.override([f"data={table[0]}", "env_column=regime", "data_restarts=2"])
    ctx = RunContext(out_dir=tmp_path_factory.mktemp("run"), config=cfg, quick=True)
    return get("pooled-lingam").run(ctx)


def test_pooling_adds_kurtosis_on_the_users_table(table):
    data = userdata.read_pooled(table[0], "regime")
    diag = userdata.kurtosis_diagnostic(data)
    assert diag.env_rows == [100] * (D + 1)
    assert diag.kurtosis_pooled.shape == diag.kurtosis_within.shape == (D,)
    (c,) = userdata.claims(data, diag)
    assert c.verdict == "yes", c
    # one environment: pooling is not tested
    flat = data._replace(env=np.zeros_like(data.env), env_names=["all"])
    assert userdata.claims(flat, userdata.kurtosis_diagnostic(flat))[0].verdict == \
        "not tested at this size"


@pytest.mark.slow
def test_pipeline_runs_on_the_users_table(result):
    m = result.metrics
    assert m["variables"] == NAMES
    assert m["environments"] == ["obs"] + [f"do-{v}" for v in NAMES]
    assert m["env_rows"] == [100] * (D + 1)
    adj = np.asarray(m["adjacency"]) != 0
    # the chain's skeleton: every true edge in one direction or the other
    assert all(adj[i + 1, i] or adj[i, i + 1] for i in range(D - 1))
    (c,) = result.claims
    # pooling Gaussian rows from noise-scaled environments adds kurtosis
    assert c.verdict == "yes", c
    assert "x0" in result.markdown and "regime" not in m["variables"]


def test_parquet_reads_as_the_csv(table, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path, x, labels = table
    p = tmp_path / "pooled.parquet"
    cols = {"x0": x[:, 0], "regime": labels, **{v: x[:, i] for i, v in enumerate(NAMES)}}
    pq.write_table(pa.table(cols), p)
    a, b = userdata.read_pooled(path, "regime"), userdata.read_pooled(p, "regime")
    np.testing.assert_allclose(a.x, b.x, rtol=1e-8)
    np.testing.assert_array_equal(a.env, b.env)
    assert a.env_names == b.env_names


def test_bad_tables_name_file_and_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a,b,env\n1,2,e1\n3,4,e2\n5,6,e1\n")
    with pytest.raises(DataError, match=r"no column 'regime'; the header has 'a', 'b', 'env'"):
        userdata.read_pooled(p, "regime")
    p.write_text("a,b,env\n1,2,e1\n3,,e2\n5,6,e1\n")
    with pytest.raises(DataError, match=r"t.csv, line 3, column 'b': empty or not finite"):
        userdata.read_pooled(p, "env")
    p.write_text("a,b,env\n1,2,e1\n1,4,e2\n1,6,e1\n")
    with pytest.raises(DataError, match=r"constant column\(s\) \['a'\]"):
        userdata.read_pooled(p, "env")
    p.write_text("a,b\n1,2\n3,5\n2,7\n")
    assert userdata.read_pooled(p, "").env_names == ["all rows"]
