"""The jaxkit CLI: info, run, bench and lingam fit, including malformed input."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.cli import app

runner = CliRunner()


def _out(r) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(r.output.split())


def test_info_lists_devices_and_processes():
    r = runner.invoke(app, ["info"])
    assert r.exit_code == 0, r.output
    assert "8 x cpu" in _out(r) and "processes" in r.output and "backend" in r.output


def test_run_unknown_pipeline_is_a_clear_error():
    r = runner.invoke(app, ["run", "no-such-pipeline"])
    assert r.exit_code == 2
    assert "unknown pipeline 'no-such-pipeline'" in _out(r)
    assert "pooled-lingam" in _out(r)


def test_bench_unknown_name_lists_available():
    r = runner.invoke(app, ["bench", "no-such-bench"])
    assert r.exit_code == 2
    assert "unknown benchmark" in _out(r)


def _chain_csv(path, n=1500, seed=0):
    """x0 -> x1 -> x2 with Laplace noise; true B[1,0]=1.5, B[2,1]=-1."""
    rng = np.random.default_rng(seed)
    e = rng.laplace(size=(n, 3))
    x0 = e[:, 0]
    x1 = 1.5 * x0 + e[:, 1]
    x2 = -1.0 * x1 + e[:, 2]
    np.savetxt(path, np.c_[x0, x1, x2], delimiter=",", header="a,b,c", comments="")


@pytest.mark.parametrize("method", ["ica", "direct"])
def test_lingam_fit_recovers_chain(tmp_path, method):
    csv, out = tmp_path / "chain.csv", tmp_path / "g.json"
    _chain_csv(csv)
    r = runner.invoke(app, ["lingam", "fit", str(csv), "--method", method, "--json", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())
    assert g["causal_order"] == ["a", "b", "c"]
    edges = {(e["cause"], e["effect"]): e["weight"] for e in g["edges"]}
    assert set(edges) == {("a", "b"), ("b", "c")}
    assert abs(edges[("a", "b")] - 1.5) < 0.1 and abs(edges[("b", "c")] + 1.0) < 0.1
    assert "a -> b -> c" in _out(r)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("a,b,c\n1,2,3\n4,5\n", "line 3: expected 3 values, got 2"),
        ("a,b,c\n1,2,x\n4,5,6\n", "line 2, column 'c': not a number"),
        ("1,2,3\n4,5,6\n", "header"),
        ("", "empty"),
        ("a,b\n", "no data rows"),
        ("a,a\n1,2\n3,4\n", "duplicate column"),
        ("a,b,c\n1,2,3\n4,nan,6\n7,8,9\n1,0,2\n", "`x` contains NaN or inf"),
        ("a,b,c\n1,2,3\n4,5,6\n", "fewer samples"),
        ("a,b,c\n1,2,3\n4,2,6\n7,2,9\n1,2,0\n", "constant column"),
    ],
)
def test_lingam_fit_bad_csv(tmp_path, content, match):
    csv = tmp_path / "bad.csv"
    csv.write_text(content)
    r = runner.invoke(app, ["lingam", "fit", str(csv)])
    assert r.exit_code == 2, r.output
    assert match in _out(r)


def test_lingam_fit_missing_file_and_bad_method(tmp_path):
    r = runner.invoke(app, ["lingam", "fit", str(tmp_path / "nope.csv")])
    assert r.exit_code == 2 and "no such file" in _out(r)
    r = runner.invoke(app, ["lingam", "fit", str(tmp_path / "nope.csv"), "--method", "pc"])
    assert r.exit_code == 2 and "--method must be" in _out(r)


def test_lingam_fit_nonconvergence_is_a_warning_not_a_crash(tmp_path):
    csv, out = tmp_path / "chain.csv", tmp_path / "g.json"
    _chain_csv(csv)
    r = runner.invoke(app, ["lingam", "fit", str(csv), "--max-iter", "1", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "did not converge in 1 iterations" in _out(r)
    assert json.loads(out.read_text())["converged"] is False
