"""The claims protocol's infrastructure: tallies generated from the recorded runs, and the
verdict-stability table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jaxkit import claims_stability
from jaxkit._cli_claims import BEGIN, END, tally_table
from jaxkit.claims import Claim

ROOT = Path(__file__).resolve().parents[2]


def test_results_readme_tally_is_what_the_recorded_metrics_give():
    """The committed tally in results/README.md equals `jaxkit claims tally` over the
    recorded runs (regenerate with `jaxkit claims tally --write`)."""
    text = (ROOT / "results" / "README.md").read_text()
    assert BEGIN in text and END in text
    committed = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert committed == tally_table(ROOT / "results")


def test_tally_counts_paper_rows_only(tmp_path):
    run = tmp_path / "x-full"
    run.mkdir()
    cs = [Claim("P", "a", "1", "yes"), Claim("P", "b", "1", "no"),
          Claim("P", "c", "1", "yes", kind="setup"),
          Claim("P", "d", "-", "not tested at this size")]
    (run / "metrics.json").write_text(json.dumps(
        {"claims": [dict(pipeline="x", **c.to_dict()) for c in cs]}))
    rows = [r for r in tally_table(tmp_path).splitlines() if r.startswith("| x-full")]
    assert rows == ["| x-full | 1 | 1 | 0 | 1 | 1 |  |"]


def _claims(*verdicts, kind="paper"):
    return [Claim("P", f"claim {i}", "1", v, kind=kind) for i, v in enumerate(verdicts)]


def test_stability_rows_name_the_flipping_verdicts():
    runs = {0: _claims("yes", "no", "not shown"), 1: _claims("yes", "not shown", "not shown"),
            2: _claims("yes", "no", "not shown")}
    rows = claims_stability.stability_rows(runs)
    assert [r["agreement"] for r in rows] == [1.0, pytest.approx(2 / 3), 1.0]
    assert [r["mode"] for r in rows] == ["yes", "no", "not shown"]
    md = claims_stability.stability_markdown("p", rows, [0, 1, 2])
    assert "| claim 1 | paper | N ? N | no | 0.67 |" in md
    assert "1 of 3 paper claims flip" in md


def test_stability_runs_each_seed_in_its_own_process(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, env, capture_output, text, timeout):
        calls.append((cmd, env.get("XLA_FLAGS", "")))
        seed = int(cmd[cmd.index("--seed") + 1])
        out = Path(cmd[cmd.index("--out") + 1])
        if seed == 2:
            return subprocess.CompletedProcess(cmd, 1, "", "Traceback\nValueError: boom\n")
        out.mkdir(parents=True)
        verdict = "yes" if seed == 0 else "not shown"
        (out / "metrics.json").write_text(json.dumps({"claims": [
            dict(pipeline="pooled-lingam", **Claim("P", "c", "1", verdict).to_dict())]}))
        return subprocess.CompletedProcess(cmd, 0, "ok", "")

    monkeypatch.setattr(claims_stability.subprocess, "run", fake_run)
    rows, failed = claims_stability.stability("pooled-lingam", [0, 1, 2], tmp_path,
                                              isa="avx2")
    assert failed == {2: "ValueError: boom"}
    assert rows[0]["verdicts"] == {0: "yes", 1: "not shown"} and rows[0]["agreement"] == 0.5
    assert all(c[0][1:5] == ["-m", "jaxkit", "run", "pooled-lingam"] for c in calls)
    assert all("--xla_cpu_max_isa=AVX2" in flags for _, flags in calls)
    assert "seed 2: ValueError: boom" in (tmp_path / "stability.md").read_text()
    assert json.loads((tmp_path / "stability.json").read_text())["failed"] == {
        "2": "ValueError: boom"}
    with pytest.raises(ValueError, match="at least 2 distinct"):
        claims_stability.stability("pooled-lingam", [1], tmp_path)
    with pytest.raises(ValueError, match="no pipeline named"):
        claims_stability.stability("nope", [0, 1], tmp_path)
