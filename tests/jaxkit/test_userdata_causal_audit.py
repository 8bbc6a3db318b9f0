"""The causal audit on a user's table (jaxkit.causal_audit.userdata): CSV / Parquet with
an optional intervention column; a scale-reading method is caught, a scale-free one
passes; errors name file, line and column."""

import numpy as np
import pytest

from jaxkit.causal_audit import userdata
from jaxkit.causal_audit.config import QUICK
from jaxkit.causal_audit.results import MethodAudit
from jaxkit.io import DataError
from jaxkit.registry import RunContext, get

NAMES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    # a chain a -> b -> c -> d whose variance grows along it (Var-SortnRegress's premise);
    # rows 150+ intervene on c (its noise scaled)
    rng = np.random.default_rng(0)
    e = rng.standard_normal((200, 4))
    e[150:, 2] *= 3.0
    x = np.zeros_like(e)
    x[:, 0] = e[:, 0]
    for j in range(1, 4):
        x[:, j] = 1.5 * x[:, j - 1] + e[:, j]
    do = ["obs"] * 150 + ["c"] * 50
    path = tmp_path_factory.mktemp("audit") / "mine.csv"
    path.write_text("a,b,do,c,d\n" + "".join(
        f"{r[0]:.8g},{r[1]:.8g},{t},{r[2]:.8g},{r[3]:.8g}\n"
        for r, t in zip(x, do, strict=True)))
    return path, x, do


def test_reads_environments_from_the_intervention_column(table):
    t = userdata.read_audit_table(table[0], "do")
    assert t.names == NAMES
    np.testing.assert_array_equal(t.targets, [[0, 0, 0, 0], [0, 0, 1, 0]])
    assert (t.env[:150] == 0).all() and (t.env[150:] == 1).all()
    with pytest.raises(DataError, match=r"mine.csv, line 2, column 'do': not a number"):
        userdata.read_audit_table(table[0], "")


def test_parquet_reads_as_the_csv(table, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _, x, do = table
    p = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "do": do, "c": x[:, 2],
                             "d": x[:, 3]}), p)
    a, b = userdata.read_audit_table(table[0], "do"), userdata.read_audit_table(p, "do")
    np.testing.assert_allclose(a.x, b.x, rtol=1e-7)
    np.testing.assert_array_equal(a.env, b.env)


def test_bad_intervention_names_the_line(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("a,b,c,do\n1,2,3,\n2,3,5,b\n3,1,4,zz\n4,5,1,\n5,5,2,\n")
    with pytest.raises(DataError, match=r"bad.csv, line 4, column 'do': 'zz' is not a var"):
        userdata.read_audit_table(p, "do")


def test_claims_say_yes_and_no():
    flat = dict(full=np.zeros((3, 3)), frequency=np.zeros((3, 3)), failed=None)
    res = {"same": MethodAudit(**flat, shd=np.array([0.0, 0, 1, 0, 0, 0, 0, 1])),
           "moves": MethodAudit(**flat, shd=np.array([3.0, 4, 5, 3, 4, 4, 5, 3]))}
    v = {c.claim.split(":")[0]: c.verdict for c in userdata.claims(res, 1.0)}
    assert v == {"same": "yes", "moves": "no"}
    # metrics.json's per-method entry: plain lists in this order
    rec = res["moves"].as_dict()
    assert list(rec) == ["full", "frequency", "shd", "failed"] and rec["shd"][0] == 3.0


@pytest.mark.slow
def test_scale_reading_method_is_caught(table):
    data = userdata.read_audit_table(table[0], "do")
    res = userdata.audit_table(__import__("jax").random.key(0), data,
                               ("var-sort-regress", "r2-sort-regress"), resamples=16)
    v = {c.claim.split(":")[0]: c.verdict for c in userdata.claims(res, 1.0)}
    # R^2 is scale-free: the same graph raw and standardised; sorting by variance is not
    assert v["r2-sort-regress"] == "yes"
    assert v["var-sort-regress"] != "yes"
    assert np.nanmean(res["var-sort-regress"].shd) > 1.0
    f = res["r2-sort-regress"].frequency
    assert f.shape == (4, 4) and f[1, 0] + f[0, 1] > 0.5  # a - b found in most resamples


@pytest.mark.slow
def test_pipeline_on_the_users_table(table, tmp_path):
    cfg = QUICK.override([f"data={table[0]}", "intervention_column=do", "user_resamples=4",
                          "host_datasets=2"])
    res = get("causal-audit").run(RunContext(out_dir=tmp_path, config=cfg, quick=True))
    assert {c.claim.split(":")[0] for c in res.claims} == set(cfg.methods)
    assert res.metrics["variables"] == NAMES and "r2-sort-regress" in res.markdown
    # the scope table: each method's assumptions against the table's measured properties
    assert "## Scope conditions on your data" in res.markdown
    rows = res.metrics["scope"]
    assert {r[0] for r in rows} == {*cfg.methods, "(all)"}
    # the rows of rows 150+ intervene on c: two environments, so "one distribution" fails
    assert all(r[4] == "violated" for r in rows if r[1] == "one distribution")
