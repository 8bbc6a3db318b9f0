"""jaxkit.report, jaxkit.claims and jaxkit.io: the claims table, atomic files."""

import json
import math
import subprocess
import sys

import pytest

from jaxkit.claims import Claim, claims_table
from jaxkit.io import atomic_open, atomic_write
from jaxkit.report import PipelineResult, markdown_table, new_figure, save_figure, write_report
from jaxkit.stats import Verdict, superiority


def test_report_does_not_import_the_pipelines():
    code = ("import sys, jaxkit.report; "
            "assert not [m for m in sys.modules if m.endswith('.pipeline')]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_claim_verdicts_and_from_verdict():
    with pytest.raises(ValueError, match="`verdict` must be one of"):
        Claim("P", "c", "1", "maybe")
    v = Verdict("yes", 0.123456, 0.05, 0.2, 8, "superiority (paired t, 95% CI), n=8")
    c = Claim.from_verdict("Smith 2020", "A beats B", v, note="quick run")
    assert c.measured == "0.123 [0.05, 0.2]" and c.verdict == "yes"
    assert c.test == v.test and c.note == "quick run"
    assert Claim.from_verdict("P", "c", v, fmt="{:.1%}").measured == "12.3% [5.0%, 20.0%]"
    few = Claim.from_verdict("P", "c", superiority([1.0]))
    assert few.verdict == "not shown" and few.measured == "1"
    none = Claim.from_verdict("P", "c", Verdict("not shown", math.nan, math.nan, math.nan,
                                                0, "t"))
    assert none.measured == "n/a"


def test_claims_table():
    cs = [Claim("P1", "a | b", "1", "yes"), Claim("P2", "c\nd", "2", "not shown", "t", "n")]
    t = claims_table(cs, ["p-one", "p-two"])
    lines = t.splitlines()
    assert lines[0] == "| pipeline | paper | claim | measured | verdict | test | note |"
    assert lines[2] == "| p-one | P1 | a \\| b | 1 | **yes** |  |  |"
    assert lines[3] == "| p-two | P2 | c d | 2 | **not shown** | t | n |"
    assert claims_table(cs, "same").count("| same |") == 2
    with pytest.raises(ValueError, match="`pipeline_names`"):
        claims_table(cs, ["only-one"])


def test_write_report_opens_with_one_claims_table(tmp_path):
    fig, ax = new_figure()
    ax[0, 0].plot([0, 1], [1, 0])
    ax[0, 0].set(xlabel="x", ylabel="y")
    png = save_figure(fig, tmp_path / "a" / "f.png")
    r1 = PipelineResult("alpha", "Alpha paper", "body one", figures=[png],
                        metrics={"x": 1.5}, warnings=["careful"],
                        claims=[Claim("Alpha 2020", "A beats B", "0.1 [0.05, 0.2]", "yes")])
    r2 = PipelineResult("beta", "Beta paper", "body two",
                        claims=[Claim("Beta 2021", "C matches D", "0", "not shown", "TOST"),
                                Claim("Beta 2021", "E scales", "-", "not tested at this size")])
    report = write_report(tmp_path, [r1, r2], quick=True, seed=3)
    text = report.read_text()
    assert text.count("| pipeline | paper | claim |") == 1
    table_at = text.index("| pipeline | paper |")
    assert table_at < text.index("## Alpha paper") < text.index("## Beta paper")
    for row in ("| alpha | Alpha 2020 | A beats B |", "| beta | Beta 2021 | C matches D |",
                "| beta | Beta 2021 | E scales |"):
        assert row in text
    assert "mode: quick; seed 3" in text and "> warning: careful" in text
    assert "![f](a/f.png)" in text
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["alpha"] == {"x": 1.5} and m["beta"] == {}
    assert m["claims"][0] == {"pipeline": "alpha", "paper": "Alpha 2020", "claim": "A beats B",
                              "measured": "0.1 [0.05, 0.2]", "verdict": "yes", "test": "",
                              "note": "", "kind": "paper"}
    assert [c["verdict"] for c in m["claims"]] == ["yes", "not shown",
                                                  "not tested at this size"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "metrics.json", "report.md"]


def test_write_report_without_claims_and_numpy_metrics(tmp_path):
    import numpy as np

    r = PipelineResult("gamma", "Gamma", "x", metrics={"a": np.float32(0.5),
                                                       "b": np.arange(3)})
    text = write_report(tmp_path, [r], quick=False).read_text()
    assert "No pipeline that ran tested a paper claim." in text and "mode: full" in text
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["gamma"] == {"a": 0.5, "b": [0, 1, 2]} and m["claims"] == []


def test_markdown_table_formats_floats():
    t = markdown_table(["a", "b"], [[1.23456, float("nan")], [12345.0, "s"]])
    assert t.splitlines()[2] == "| 1.23 | nan |" and "1.234e+04" in t


def test_atomic_write_leaves_no_temp_files(tmp_path):
    p = atomic_write(tmp_path / "deep" / "er" / "f.txt", "hello\n")
    assert p.read_text() == "hello\n"
    atomic_write(p, b"\x00bytes")
    assert p.read_bytes() == b"\x00bytes"
    assert [x.name for x in p.parent.iterdir()] == ["f.txt"]
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert p.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # not mkstemp's 0600


def test_atomic_open_keeps_the_old_file_on_error(tmp_path):
    p = tmp_path / "f.json"
    p.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(p) as fh:
        fh.write("half of the new")
        raise RuntimeError("killed")
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["f.json"]
    with atomic_open(p) as fh:
        fh.write("new")
    assert p.read_text() == "new"
    with pytest.raises(ValueError, match="`mode`"), atomic_open(p, "a"):
        pass


def test_write_report_opens_with_failures_then_a_summary_per_pipeline(tmp_path):
    from jaxkit.report import last_line, verdict_counts

    ok = PipelineResult("alpha", "Alpha paper", "body", metrics={"wall_s": 12.34},
                        claims=[Claim("A", "a", "1", "yes"), Claim("A", "b", "1", "no"),
                                Claim("A", "c", "1", "not shown"),
                                Claim("A", "d", "-", "not tested at this size"),
                                Claim("A", "e", "1", "yes"),
                                Claim("A", "f", "1", "yes", kind="setup")])
    none = PipelineResult("gamma", "Gamma paper", "body")
    log = tmp_path / "beta" / "run.log"
    text = write_report(tmp_path, [ok, none], quick=True,
                        failed={"beta": "ModuleNotFoundError: Traceback ...\n  File x\n"
                                        "No module named 'sklearn'\n\n"},
                        logs={"beta": log}, order=["alpha", "beta", "gamma"]).read_text()
    head = text[:text.index("## Claims")]
    assert head.index("## Failed pipelines") < head.index("## Summary")
    assert "1 of 3 pipelines failed" in head
    assert "- **beta**: `No module named 'sklearn'` (output: [beta/run.log](beta/run.log))" \
        in head
    rows = [ln for ln in head.splitlines() if ln.startswith("| ")]
    assert rows == ["| pipeline | status | wall s | paper claims | yes | no | not shown | "
                    "not tested | setup / extension rows |",
                    "| alpha | ran | 12.3 | 5 | 2 | 1 | 1 | 1 | 1 |",
                    "| beta | **failed** |  |  |  |  |  |  |  |",
                    "| gamma | ran |  | 0 | 0 | 0 | 0 | 0 | 0 |"]
    # nothing failed: no failure section, the summary still there
    text = write_report(tmp_path, [ok], quick=True).read_text()
    assert "## Failed pipelines" not in text and "| alpha | ran | 12.3 | 5 |" in text
    assert last_line("a\nb `x`\n \n") == "b `x`" and last_line("") == ""
    assert verdict_counts([]) == {"yes": 0, "no": 0, "not shown": 0, "not tested": 0}


def test_only_paper_claims_are_tallied_and_tabled_first(tmp_path):
    from jaxkit.claims import KINDS, paper_claims, tally

    cs = [Claim("P", "the paper's result", "1", "yes"),
          Claim("P", "model accuracy above 0.9", "0.95", "yes", kind="setup"),
          Claim("P", "holds by construction", "1", "yes", kind="extension"),
          Claim("P", "a second result", "-", "not tested", note="no data for it")]
    assert tally(cs) == {"yes": 1, "no": 0, "not shown": 0, "not tested": 1}
    assert [c.claim for c in paper_claims(cs)] == ["the paper's result", "a second result"]
    assert KINDS == ("paper", "setup", "extension")
    with pytest.raises(ValueError, match="`kind` must be one of"):
        Claim("P", "x", "1", "yes", kind="structural")
    assert Claim.from_dict({"pipeline": "p", **cs[1].to_dict()}) == cs[1]
    old = {k: v for k, v in cs[0].to_dict().items() if k != "kind"}  # a pre-kinds record
    assert Claim.from_dict(old).kind == "paper"
    text = write_report(tmp_path, [PipelineResult("p", "P", "body", claims=cs)],
                        quick=True).read_text()
    paper_table = text[text.index("## Claims"):text.index("### Setup checks")]
    assert "the paper's result" in paper_table and "a second result" in paper_table
    assert "model accuracy" not in paper_table and "Holm" in paper_table
    rest = text[text.index("### Setup checks"):]
    assert "model accuracy above 0.9" in rest and "holds by construction" in rest
