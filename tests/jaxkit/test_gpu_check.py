"""benchmarks/gpu_check.sh (the accelerator check) and benchmarks/bench_quickrun.py (the
quick runs, cold and warm cache): argument handling, the plan, the JSON and Markdown
they write; the tiny CPU run of gpu_check.sh under -m slow."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def _gpu_check(*args, timeout=60):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={"PATH": "/usr/bin:/bin",
                                                          "PYTHON": sys.executable,
                                                          "HOME": str(Path.home())})


def test_plan_lists_every_family_with_only_flags_the_scripts_define(tmp_path):
    r = _gpu_check("--plan", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    body = json.loads((tmp_path / "gpu_check.json").read_text())
    assert body["mode"] == "plan"
    steps = {s["name"]: s for s in body["steps"]}
    families = {p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")}
    families.discard("quickrun")  # not a kernel family: the pipelines step covers it
    assert families <= {n.removeprefix("bench ").split("-")[0] for n in steps}
    assert "--dtype bfloat16" in " ".join(steps["bench compose-bf16"]["cmd"])
    for s in body["steps"]:
        if s["kind"] == "bench" and s["cmd"]:
            src = Path(s["cmd"][1]).read_text()
            for flag in (a for a in s["cmd"][2:] if a.startswith("--")):
                assert flag in src or flag in ("--json", "--quick", "--only", "--no-peers"), \
                    (s["name"], flag)
    assert steps["quick pipelines"]["cmd"][-5:] == ["all", "--quick", "--out",
                                                    str(tmp_path / "runs"), "--force"]
    assert "tests/jaxkit/test_distributed.py" in steps["multi-device tests"]["cmd"]
    md = (tmp_path / "gpu_check.md").read_text()
    assert md.startswith("# jaxkit gpu_check (plan)")
    assert "| bench compose-bf16 | planned |" in md and "| quick pipelines | planned |" in md


@pytest.mark.parametrize(("args", "match"), [
    (["--only", "bench,gpu"], "unknown section(s) ['gpu']"),
    (["--budget", "0"], "--budget must be > 0"),
    (["--tiny", "--nonsense"], "unrecognized arguments: --nonsense"),
])
def test_bad_arguments_are_one_clear_error(args, match):
    r = _gpu_check(*args, "--plan")
    assert r.returncode == 2 and match in r.stderr, r.stderr


def test_out_must_be_a_folder(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    r = _gpu_check("--plan", "--out", str(f))
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr


@pytest.mark.slow
def test_tiny_mode_runs_on_the_cpu(tmp_path):
    r = _gpu_check("--tiny", "--out", str(tmp_path), "--budget", "570", timeout=900)
    body = json.loads((tmp_path / "gpu_check.json").read_text())
    bad = {s["name"]: (s["status"], s.get("summary")) for s in body["steps"]
           if s["status"] != "ok"}
    assert r.returncode == 0 and not bad, (bad, r.stdout[-2000:])
    belief = next(s for s in body["steps"] if s["name"] == "bench belief")
    assert belief["result"]["table_markdown"]  # the one benchmark really ran (--quick)
    md = (tmp_path / "gpu_check.md").read_text()
    assert "## bench belief" in md and re.search(r"\| multi-device tests \| ok \|", md)


# ------------------------------------------------------------------ bench_quickrun.py


def _quickrun():
    spec = importlib.util.spec_from_file_location(
        "bench_quickrun", ROOT / "benchmarks" / "bench_quickrun.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quickrun_finds_the_pipelines_and_plans_cold_and_warm(tmp_path, capsys):
    q = _quickrun()
    names = q.pipelines()
    assert len(names) >= 12 and "tempbench" in names and "pooled-lingam" in names
    out = tmp_path / "plan.json"
    assert q.main(["--dry-run", "--only", "tempbench", "--work", str(tmp_path / "w"),
                   "--json", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["modes"] == ["cold", "warm"]
    cold = plan["plan"]["tempbench"]["cold"]
    assert cold[2:6] == ["jaxkit.cli", "run", "tempbench", "--quick"] and "--fresh" in cold
    assert "cold:" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        q.main(["--only", "no-such", "--dry-run"])
    env = q.child_env(tmp_path / "cache")
    assert env["JAXKIT_COMPILE_CACHE_DIR"] == str(tmp_path / "cache")
    assert "JAXKIT_NO_COMPILE_CACHE" not in env


def test_quickrun_all_jobs_plans_the_one_command_and_reads_its_lines(tmp_path, capsys):
    q = _quickrun()
    assert q.main(["--all-jobs", "1,2", "--dry-run", "--work", str(tmp_path)]) == 0
    cmds = capsys.readouterr().out.splitlines()
    assert [c.split()[2:9] for c in cmds] == [
        ["jaxkit.cli", "run", "all", "--quick", "--jobs", j, "--out"] for j in ("1", "2")]
    with pytest.raises(SystemExit):
        q.main(["--all-jobs", "0", "--dry-run"])
    log = ("running 2 pipelines (quick, 2 at a time, ...); verdicts: Y yes\n"
           "[ 1/2] ballad          56.5s  NY? (1 yes, 1 no, 1 not shown)\n"
           "warning (x): y\n"
           "[ 2/2] amgenc     [red]FAILED after 3.0s: RuntimeError: boom\n")
    assert q.verdict_lines(log) == {"ballad": "NY? (1 yes, 1 no, 1 not shown)",
                                    "amgenc": "FAILED"}


def test_quickrun_table_sums_modes():
    q = _quickrun()
    res = {"a": {"cold": dict(wall_s=10.0, cpu_s=8.0, rc=0, verdicts="YN (1 yes, 1 no)"),
                 "warm": dict(wall_s=4.0, cpu_s=3.0, rc=0, verdicts="YN (1 yes, 1 no)")},
           "b": {"cold": dict(wall_s=5.0, cpu_s=5.0, rc=1, verdicts=None),
                 "warm": dict(wall_s=2.0, cpu_s=1.0, rc=0, verdicts="-")}}
    t = q.table(res, q.MODES).splitlines()
    assert t[0] == "| pipeline | cold wall s | cold CPU s | warm wall s | warm CPU s | verdicts |"
    assert t[2] == "| a | 10.0 | 8.0 | 4.0 | 3.0 | YN (1 yes, 1 no) |"
    assert t[3].startswith("| b | 5.0 (1) |")
    assert t[-1] == "| **total** | 15.0 | 13.0 | 6.0 | 4.0 | |"


def test_quickrun_flags_a_busy_machine_only():
    q = _quickrun()
    assert not q.busy({"start": 1.3, "end": 1.9}, 2)
    assert q.busy({"start": 0.4, "end": 2.5}, 2)
    assert q.busy({"start": 3.0, "end": 1.0}, 2)
