"""A cost near float64's largest (1e308) keeps its experiment's EIG (issue 58, section 3):
the cost overflowed to inf in float32 on the device and EIG = score * cost read 0."""

import json

import numpy as np
from typer.testing import CliRunner

from jaxkit.cli import app
from jaxkit.contrastive.userfile import rank_file, read_hypotheses

LIK = {"a": [0.9, 0.1], "b": [0.4, 0.6]}


def _file(tmp_path, cost):
    p = tmp_path / "h.json"
    p.write_text(json.dumps({"hypotheses": ["a", "b"], "outcomes": ["x", "y"], "experiments": [
        {"name": "e1", "cost": cost, "likelihood": LIK},
        {"name": "e2", "cost": 1.0, "likelihood": {"a": [0.5, 0.5], "b": [0.4, 0.6]}}]}))
    return p


def test_huge_cost_keeps_the_eig(tmp_path):
    small = rank_file(read_hypotheses(_file(tmp_path, 1.0)))
    huge = rank_file(read_hypotheses(_file(tmp_path, 1e308)))
    assert small["eig"][0] > 0.1
    np.testing.assert_allclose(huge["eig"], small["eig"], rtol=1e-6)
    assert 0 < huge["eig_per_cost"][0] < 1e-300
    assert huge["order"] == [1, 0]  # still ranked, last


def test_discover_shows_the_eig_of_a_huge_cost(tmp_path):
    eig = rank_file(read_hypotheses(_file(tmp_path, 1.0)))["eig"][0]
    r = CliRunner().invoke(app, ["contrastive", "discover", str(_file(tmp_path, 1e308))])
    assert r.exit_code == 0, r.output
    row = next(ln for ln in r.output.splitlines() if "e1" in ln)
    assert f"{eig:.4f}" in row and f"{eig:.4f}" != "0.0000", row
