"""`jaxkit lingam fit` with the new LiNGAM options: --prior-knowledge FILE (with a
header naming the variables, or without), --soft-prior, --measure and --bootstrap N."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(size=300)
    x1 = 2.0 * x0 + rng.uniform(size=300)
    x2 = 4.0 * x1 + rng.uniform(size=300)
    p = tmp_path_factory.mktemp("cli") / "d.csv"
    np.savetxt(p, np.c_[x0, x1, x2], delimiter=",", header="a,b,c", comments="")
    return p


def test_prior_knowledge_and_bootstrap(data_csv, tmp_path):
    pk = tmp_path / "pk.csv"
    pk.write_text("a,b,c\n-1,-1,-1\n-1,-1,-1\n-1,0,-1\n")  # b has no path to c
    out = tmp_path / "o.json"
    r = runner.invoke(app, ["lingam", "fit", str(data_csv), "--method", "direct",
                            "--prior-knowledge", str(pk), "--bootstrap", "3",
                            "--json", str(out)])
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["adjacency"][2][1] == 0.0  # the forbidden edge b -> c
    assert d["prior_knowledge"]["matrix"][2][1] == 0
    probs = np.asarray(d["bootstrap"]["probabilities"])
    assert probs.shape == (3, 3) and probs[2, 1] == 0.0, probs  # forbidden in every resample
    np.testing.assert_allclose(probs * 3, np.round(probs * 3), atol=1e-9)  # counts out of 3
    adj = np.asarray(d["adjacency"])
    assert np.all(probs[adj != 0] > 0), (adj, probs)  # the point fit's edges recur
    assert "bootstrap p" in r.output


@pytest.mark.parametrize("content, args, match", [
    ("x,y,z\n-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n", [], "does not match the data's columns"),
    ("-1,-1\n-1,-1\n", [], "a 3 x 3 matrix is needed"),
    ("-1,1,-1\n1,-1,-1\n-1,-1,-1\n", [], "inconsistencies"),
    ("-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n", ["--method", "ica", "--soft-prior"], "direct only"),
])
def test_bad_prior_knowledge_file(data_csv, tmp_path, content, args, match):
    pk = tmp_path / "pk.csv"
    pk.write_text(content)
    r = runner.invoke(app, ["lingam", "fit", str(data_csv), "--prior-knowledge", str(pk),
                            *args])
    assert r.exit_code != 0 and match in r.output, r.output
