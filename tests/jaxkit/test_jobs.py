"""`jaxkit run all --jobs N` (jaxkit/jobs.py): pipelines in worker processes give the
results of the same pipelines run one after another in the parent, a failing or dying
worker fails only its own pipeline, and bad settings are one clear line."""

import json
import os
import re
import sys
import textwrap

import jax
import pytest
from typer.testing import CliRunner

os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")  # tests never share compiled code

from jaxkit import jobs, registry  # noqa: E402
from jaxkit.cli import app  # noqa: E402

runner = CliRunner()
ENV = {"JAXKIT_PROGRESS": "plain", "JAXKIT_PROGRESS_EVERY": "0", "COLUMNS": "200"}

# Three pipelines in a module of their own, so that a worker imports them by name: one
# draws from its keyed stream and saves a stage, one raises, one kills its own process
# (in a worker; in the parent it raises).
TOYS = '''
import os
from dataclasses import dataclass

import jax
import numpy as np

from jaxkit.claims import Claim
from jaxkit.config import PipelineConfig
from jaxkit.registry import register
from jaxkit.report import PipelineResult


@dataclass(frozen=True)
class Cfg(PipelineConfig):
    n: int = 5


@register("job-a", quick=Cfg(), full=Cfg(n=7), title="Job A")
def run_a(ctx):
    x = ctx.stage("draws", lambda: np.asarray(jax.random.normal(ctx.key("x"),
                                                                (ctx.config.n,))))
    list(ctx.track(range(3), "job-a cells"))
    return PipelineResult("job-a", "A", "draws " + repr(x.tolist()),
                          metrics={"x": x.tolist(), "pid": os.getpid(),
                                   "mesh": dict(ctx.mesh.shape)},
                          claims=[Claim("P", "c1", "1", "yes")])


@register("job-b", quick=Cfg(), full=Cfg())
def run_b(ctx):
    raise RuntimeError("boom")


@register("job-c", quick=Cfg(), full=Cfg())
def run_c(ctx):
    if str(os.getpid()) == os.environ["JOBTOYS_PARENT"]:
        raise RuntimeError("would die")  # not the test's own process
    os._exit(3)
'''


@pytest.fixture
def toys(tmp_path, monkeypatch):
    """'all' is the three toys of TOYS, importable as the module `jobtoys`."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "jobtoys.py").write_text(TOYS)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setenv("JOBTOYS_PARENT", str(os.getpid()))
    saved, loaded = dict(registry._REGISTRY), registry._LOADED
    registry._REGISTRY.clear()
    registry._LOADED = True
    sys.modules.pop("jobtoys", None)
    import jobtoys  # noqa: F401 -- registers the toys

    yield
    sys.modules.pop("jobtoys", None)
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry._LOADED = loaded


def test_workers_match_the_parent_and_fail_alone(toys, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = runner.invoke(app, ["run", "all", "--quick", "--jobs", "1", "--out", str(one)], env=ENV)
    r2 = runner.invoke(app, ["run", "all", "--quick", "--jobs", "2", "--out", str(two)],
                       env=ENV)
    assert r1.exit_code == r2.exit_code == 1, (r1.output, r2.output)
    # the parent ran them one after another; workers two at a time
    assert "2 at a time" in r2.output and "at a time" not in r1.output
    m1 = json.loads((one / "metrics.json").read_text())
    m2 = json.loads((two / "metrics.json").read_text())
    assert m1["job-a"]["x"] == m2["job-a"]["x"]  # the same draws, to the bit
    assert m1["job-a"]["pid"] == os.getpid() != m2["job-a"]["pid"]
    assert m2["job-a"]["mesh"] == m1["job-a"]["mesh"] == {"data": len(jax.devices())}
    assert m1["claims"] == m2["claims"]
    report = (two / "report.md").read_text()
    assert "## Job A" in report and "draws [" in report
    lines = r2.output.splitlines()
    a = next(ln for ln in lines if "job-a" in ln and "Y (1 yes)" in ln)
    assert a.endswith("Y (1 yes)")
    b = next(ln for ln in lines if " job-b" in ln)
    assert "FAILED" in b and "RuntimeError: boom" in b
    c = next(ln for ln in lines if " job-c" in ln)
    assert "FAILED" in c and "worker exited with code 3 and no result" in c
    assert "1/3 pipelines" in r2.output and "failed: job-b, job-c" in r2.output
    rec = json.loads((two / "run.json").read_text())
    assert rec["failed"] == ["job-b", "job-c"] and rec["invocations"][-1]["jobs"] == 2
    assert json.loads((one / "run.json").read_text())["invocations"][-1]["jobs"] == 1
    # each worker's output is in its own folder: progress lines and the traceback
    assert "job-a cells: 3/3 (100%)" in (two / "job-a" / jobs.LOG).read_text()
    assert "RuntimeError: boom" in (two / "job-b" / jobs.LOG).read_text()
    # the header names the real folder of the logs; after each pipeline but the last,
    # how many are done and an ETA
    out2 = " ".join(r2.output.split())
    assert f"each one's output in {two / '<pipeline>' / jobs.LOG}" in out2
    assert "OUT/NAME" not in out2
    progress = [ln.strip() for ln in lines if "finished (" in ln]
    assert [ln.split(" finished")[0] for ln in progress] == ["1/3", "2/3"]
    assert all("elapsed" in ln and "ETA" in ln for ln in progress), progress
    assert "finished (" not in r1.output.split("job-c")[-1]  # none after the last
    # the report hides nothing: the failures first, then one summary row per pipeline
    for out, log in ((one, False), (two, True)):
        report = (out / "report.md").read_text()
        head = report[:report.index("## Claims")]
        assert head.index("## Failed pipelines") < head.index("## Summary")
        assert "- **job-b**: `RuntimeError: boom`" in head
        assert ("(output: [job-b/run.log](job-b/run.log))" in head) == log
        assert "- **job-c**: `" in head and head.count("job-c/run.log") == log
        assert "| job-a | ran |" in head and "| 1 | 1 | 0 | 0 | 0 |" in head
        assert "| job-b | **failed** |" in head and "| job-c | **failed** |" in head
    assert "worker exited with code 3 and no result" in report
    assert json.loads((two / "run.json").read_text())["errors"]["job-b"] == \
        "RuntimeError: boom"
    # a second invocation resumes: the worker reloads the saved stage, and says so
    r3 = runner.invoke(app, ["run", "all", "--quick", "--jobs", "2", "--out", str(two)],
                       env=ENV)
    assert r3.exit_code == 1, r3.output
    rec = json.loads((two / "run.json").read_text())
    assert rec["invocations"][-1]["reloaded"] == {"job-a": ["draws"]}
    assert json.loads((two / "metrics.json").read_text())["job-a"]["x"] == m1["job-a"]["x"]


def test_bad_jobs_are_one_clear_line(toys, tmp_path, monkeypatch):
    # in a folder where the README's main job ran before (its runs/all holds the report
    # of another configuration): the bad argument is named, not the folder
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "all").mkdir(parents=True)
    (tmp_path / "runs" / "all" / "run.json").write_text(json.dumps(
        {"pipeline": "all", "mode": "quick", "seed": 0, "configs": {"other": {}}}))
    for args, match in [(["all", "--jobs", "0"], "--jobs must be >= 1; got 0"),
                        (["job-a", "--jobs", "2"], "runs the pipelines of 'all' at once"),
                        (["all", "--mesh", "rows=2"], "--mesh axes must be 'data'")]:
        r = runner.invoke(app, ["run", *args, "--quick"])
        assert r.exit_code == 2 and match in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1
    # good arguments reach the folder check
    r = runner.invoke(app, ["run", "all", "--quick", "--jobs", "1"])
    assert r.exit_code == 2 and "holds a run of a different configs" in r.output


def test_default_jobs_and_portability():
    assert jobs.default_jobs(12, quick=True, backend="cpu", processes=1, cores=2) == 2
    assert jobs.default_jobs(12, quick=True, backend="cpu", processes=1, cores=64) == \
        jobs.MAX_AUTO
    assert jobs.default_jobs(1, quick=True, backend="cpu", processes=1, cores=8) == 1
    assert jobs.default_jobs(12, quick=False, backend="cpu", processes=1, cores=8) == 1
    assert jobs.default_jobs(12, quick=True, backend="gpu", processes=1, cores=8) == 1
    assert jobs.default_jobs(12, quick=True, backend="cpu", processes=2, cores=8) == 1

    def local(ctx):
        return ctx

    assert jobs.portable(textwrap.dedent) and not jobs.portable(local)
    with pytest.raises(ValueError, match="`n_at_once` must be an int >= 1"):
        jobs.run_jobs([], 0)


def test_pipelines_a_worker_cannot_import_run_in_the_parent(tmp_path):
    from dataclasses import dataclass

    from jaxkit.config import PipelineConfig
    from jaxkit.report import PipelineResult

    cfg = dataclass(frozen=True)(type("LocalCfg", (PipelineConfig,), {}))()
    saved, loaded = dict(registry._REGISTRY), registry._LOADED
    registry._REGISTRY.clear()
    registry._LOADED = True
    try:
        for name in ("local-1", "local-2"):
            @registry.register(name, quick=cfg, full=cfg)
            def run_local(ctx, name=name):
                return PipelineResult(name, name, f"pid {os.getpid()}")

        r = runner.invoke(app, ["run", "all", "--quick", "--jobs", "2", "--out",
                                str(tmp_path / "o")], env=ENV)
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
        registry._LOADED = loaded
    assert r.exit_code == 0, r.output
    assert ("--jobs 2: the function of local-1, local-2 is not at the top level of an "
            "importable module; running one at a time") in " ".join(r.output.split())
    assert f"pid {os.getpid()}" in (tmp_path / "o" / "report.md").read_text()


# A pipeline that prints without flushing and reads its own log while it runs, and one
# whose error has several lines.
LOGTOYS = '''
from dataclasses import dataclass

from jaxkit.config import PipelineConfig
from jaxkit.registry import register
from jaxkit.report import PipelineResult


@dataclass(frozen=True)
class Cfg(PipelineConfig):
    n: int = 1


@register("log-reader", quick=Cfg(), full=Cfg())
def run_reader(ctx):
    print("hello from the pipeline")  # no flush: the worker's stdout is line-buffered
    ctx.stage("s", lambda: 1)
    return PipelineResult("log-reader", "R", "read", metrics={
        "log": (ctx.out_dir / "run.log").read_text()})


@register("log-fails", quick=Cfg(), full=Cfg())
def run_fails(ctx):
    raise ValueError("the first line of the error\\nthe last line of the error")
'''


def test_worker_logs_are_written_as_they_go(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "logtoys.py").write_text(LOGTOYS)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    saved, loaded = dict(registry._REGISTRY), registry._LOADED
    registry._REGISTRY.clear()
    registry._LOADED = True
    sys.modules.pop("logtoys", None)
    try:
        import logtoys  # noqa: F401 -- registers the toys

        out = tmp_path / "o"
        r = runner.invoke(app, ["run", "all", "--quick", "--jobs", "2", "--out", str(out)],
                          env=ENV)
    finally:
        sys.modules.pop("logtoys", None)
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
        registry._LOADED = loaded
    assert r.exit_code == 1, r.output
    # what the pipeline found in its own log while it ran: the first line, its print and
    # its stage, before the pipeline returned
    seen = json.loads((out / "metrics.json").read_text())["log-reader"]["log"].splitlines()
    assert seen[0].startswith("jaxkit run log-reader (quick, seed 0) in ")
    assert seen[1] == "hello from the pipeline", seen
    assert seen[2].endswith("] stage s: started"), seen
    assert re.search(r"\] stage s: done in [\d.]+s$", seen[3]), seen
    assert (out / "log-reader" / jobs.LOG).read_text().splitlines()[-1].startswith("done in ")
    # the failure: its error's last line in the report and on the terminal
    assert "- **log-fails**: `the last line of the error`" in (out / "report.md").read_text()
    line = next(ln for ln in r.output.splitlines() if "log-fails" in ln and "FAILED" in ln)
    assert line.endswith("the last line of the error")
    log = (out / "log-fails" / jobs.LOG).read_text()
    assert "the first line of the error" in log and log.splitlines()[-1].startswith("FAILED")
