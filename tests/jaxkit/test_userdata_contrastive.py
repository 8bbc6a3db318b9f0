"""Contrastive discovery on a user's hypotheses file (jaxkit.contrastive.userfile): the
posterior and the EIG-per-cost ranking against closed forms; errors naming the file and
the experiment."""

import json

import numpy as np
import pytest

from jaxkit.contrastive import userfile
from jaxkit.contrastive.config import QUICK
from jaxkit.io import DataError
from jaxkit.registry import RunContext, get

DOC = {
    "hypotheses": ["h1", "h2"],
    "outcomes": ["lo", "hi"],
    "experiments": [
        {"name": "decisive", "cost": 2.0, "likelihood": {"h1": [1, 0], "h2": [0, 1]}},
        {"name": "useless", "cost": 1.0, "likelihood": [[0.5, 0.5], [0.5, 0.5]]},
        {"name": "noisy", "cost": 1.0, "likelihood": [[0.8, 0.2], [0.3, 0.7]]},
    ],
}


def _mi(prior, rows):
    """I(H; Y) in nats."""
    rows = np.asarray(rows, float)
    py = prior @ rows
    with np.errstate(divide="ignore", invalid="ignore"):
        t = prior[:, None] * rows * np.log(rows / py[None, :])
    return float(np.nansum(t))


def _write(tmp_path, doc, name="h.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_ranking_matches_mutual_information(tmp_path):
    h = userfile.read_hypotheses(_write(tmp_path, DOC))
    r = userfile.rank_file(h)
    prior = np.array([0.5, 0.5])
    for i, e in enumerate(DOC["experiments"]):
        rows = e["likelihood"] if isinstance(e["likelihood"], list) else \
            [e["likelihood"]["h1"], e["likelihood"]["h2"]]
        assert r["eig"][i] == pytest.approx(_mi(prior, rows), abs=1e-5)
    # ln2 / 2 = 0.347 beats the noisy one's 0.18 per unit cost; useless last
    assert [h.experiments[i] for i in r["order"]] == ["decisive", "noisy", "useless"]
    np.testing.assert_allclose(r["posterior"], prior)


def test_observed_outcomes_update_the_belief(tmp_path):
    doc = dict(DOC, prior=[0.6, 0.4], observed=[{"experiment": "noisy", "outcome": "hi"}])
    h = userfile.read_hypotheses(_write(tmp_path, doc))
    r = userfile.rank_file(h)
    post = np.array([0.6 * 0.2, 0.4 * 0.7])
    np.testing.assert_allclose(r["posterior"], post / post.sum(), rtol=1e-5)
    assert "noisy" not in [h.experiments[i] for i in r["order"]]
    res = get("contrastive").run(RunContext(out_dir=tmp_path / "o", quick=True,
                                            config=QUICK.override([f"data={h.path}"])))
    assert res.metrics["ranking"][0] == "decisive" and "decisive" in res.markdown
    # an outcome no hypothesis allows: the set is not exhaustive
    doc["observed"] = [{"experiment": "decisive", "outcome": "lo"},
                       {"experiment": "decisive", "outcome": "hi"}]
    assert userfile.rank_file(userfile.read_hypotheses(_write(tmp_path, doc)))["impossible"]


@pytest.mark.parametrize("change, match", [
    (lambda d: d["experiments"][0]["likelihood"].pop("h2"),
     r"experiment 0 \('decisive'\): no likelihood for hypothesis 'h2'"),
    (lambda d: d["experiments"][2].update(likelihood=[[0.8, 0.3], [0.3, 0.7]]),
     r"experiment 2 \('noisy'\), hypothesis 'h1': the likelihood must sum to 1"),
    (lambda d: d["experiments"][1].update(cost=0),
     r"experiment 1 \('useless'\): 'cost' must be a positive number"),
    (lambda d: d.update(observed=[{"experiment": "noisy", "outcome": "mid"}]),
     r"observed 0: needs an 'experiment'"),
    (lambda d: d.update(hypotheses=["h1"]), r"'hypotheses' must be a list of at least 2"),
])
def test_bad_files_name_the_experiment(tmp_path, change, match):
    doc = json.loads(json.dumps(DOC))
    change(doc)
    with pytest.raises(DataError, match=match):
        userfile.read_hypotheses(_write(tmp_path, doc))


def test_cli_discover_ranks_the_file_and_names_bad_input(tmp_path):
    from typer.testing import CliRunner

    from jaxkit.contrastive.cli import contrastive_app

    doc = dict(DOC, prior=[0.6, 0.4], observed=[{"experiment": "noisy", "outcome": "hi"}])
    p, out = _write(tmp_path, doc), tmp_path / "rank.json"
    r = CliRunner().invoke(contrastive_app, ["discover", str(p), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "not resolved" in r.output and "decisive" in r.output
    got = json.loads(out.read_text())
    post = np.array([0.6 * 0.2, 0.4 * 0.7]) / (0.6 * 0.2 + 0.4 * 0.7)
    np.testing.assert_allclose([got["posterior"]["h1"], got["posterior"]["h2"]], post,
                               rtol=1e-5)
    assert [e["experiment"] for e in got["ranking"]] == ["decisive", "useless"]
    assert got["ranking"][0]["eig"] == pytest.approx(_mi(post, [[1, 0], [0, 1]]), abs=1e-5)
    assert got["ranking"][1]["eig"] == pytest.approx(0.0, abs=1e-6)
    assert got["resolved"] is False
    # a loose threshold resolves it; --top keeps the best only
    r = CliRunner().invoke(contrastive_app, ["discover", str(p), "--tau", "0.6", "--top", "1",
                                             "--json", str(out)])
    assert r.exit_code == 0 and json.loads(out.read_text())["resolved"] is True
    assert len(json.loads(out.read_text())["ranking"]) == 1
    bad = json.loads(json.dumps(DOC))
    bad["experiments"][1]["cost"] = 0
    r = CliRunner().invoke(contrastive_app, ["discover", str(_write(tmp_path, bad, "b.json"))])
    assert r.exit_code == 2 and "experiment 1 ('useless')" in r.output
    r = CliRunner().invoke(contrastive_app, ["discover", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "missing.json" in r.output
    r = CliRunner().invoke(contrastive_app, ["discover", str(p), "--tau", "0"])
    assert r.exit_code == 2 and "--tau" in r.output
