"""The first-day command line: `jaxkit --version`, `jaxkit info` (dependencies, XLA_FLAGS,
threads, devices, the compilation cache), `jaxkit run all` printing one line per
pipeline, and the persistent compilation cache (on by default, off by flag or env)."""

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")  # tests never share compiled code

from jaxkit import __version__, config, registry  # noqa: E402
from jaxkit.claims import Claim  # noqa: E402
from jaxkit.cli import _claims_line, app  # noqa: E402
from jaxkit.config import PipelineConfig  # noqa: E402
from jaxkit.report import PipelineResult  # noqa: E402

runner = CliRunner()


def _out(r) -> str:
    return " ".join(r.output.split())


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"jaxkit {__version__}"


def test_info_lists_dependencies_threads_flags_and_cache(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "")
                       + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=2")
    r = runner.invoke(app, ["info"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    o = _out(r)
    for row in ("XLA_FLAGS", "xla_force_host_platform_device_count=8", "os.cpu_count",
                "OMP_NUM_THREADS │ 3", "XLA intra-op threads │ 2; multi-thread Eigen false",
                "dependencies", "optax ", "[test]", "hypothesis ", "optional", "pyarrow",
                "compile cache │ off (JAXKIT_NO_COMPILE_CACHE", "8 x cpu"):
        assert row in o, (row, o)
    if hasattr(os, "sched_getaffinity"):
        assert "CPU affinity" in o


def test_compile_cache_flag_and_env(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(config, "enable_compile_cache", lambda: calls.append(1))
    assert runner.invoke(app, ["--no-compile-cache", "--version"]).exit_code == 0
    r = runner.invoke(app, ["--no-compile-cache", "info"])
    assert r.exit_code == 0 and calls == []
    runner.invoke(app, ["info"])
    assert calls == [1]  # on by default (the real one then reads JAXKIT_NO_COMPILE_CACHE)
    runner.invoke(app, ["bench", "no-such"])
    assert calls == [1]  # benchmarks time compilation: no cache
    monkeypatch.undo()
    monkeypatch.setenv("JAXKIT_NO_COMPILE_CACHE", "1")
    assert config.enable_compile_cache(tmp_path / "c") is None and not (tmp_path / "c").exists()
    for v, off in (("0", False), ("", False), ("yes", True), ("false", False)):
        monkeypatch.setenv("JAXKIT_NO_COMPILE_CACHE", v)
        assert config.compile_cache_disabled() is off
    monkeypatch.delenv("JAXKIT_COMPILE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert config.compile_cache_dir() == tmp_path / "xdg" / "jaxkit" / "xla"
    monkeypatch.setenv("JAXKIT_COMPILE_CACHE_DIR", str(tmp_path / "mine"))
    assert config.compile_cache_dir() == tmp_path / "mine"


def test_compile_cache_writes_programs_in_a_fresh_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAXKIT_NO_COMPILE_CACHE"}
    env.update(JAXKIT_COMPILE_CACHE_DIR=str(tmp_path / "xla"), JAX_PLATFORMS="cpu")
    code = ("from jaxkit.config import enable_compile_cache, compile_cache_in_use\n"
            "p = enable_compile_cache()\n"
            "import jax, jax.numpy as jnp\n"
            "jax.jit(lambda x: jnp.sin(x) * 2 + 1)(jnp.ones(7)).block_until_ready()\n"
            "print(p, compile_cache_in_use())\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(tmp_path / "xla")] * 2
    assert any((tmp_path / "xla").iterdir())  # a compiled program was stored


def test_claims_line_short_form():
    cs = [Claim("P", "a", "1", v) for v in ("yes", "no", "not shown",
                                            "not tested at this size", "yes")]
    assert _claims_line(cs) == "YN?-Y (2 yes, 1 no, 1 not shown, 1 not tested)"
    assert _claims_line([]) == "no claims"


@pytest.fixture
def two_toys():
    """'all' made of two toy pipelines, the second failing."""
    from dataclasses import dataclass

    cfg = dataclass(frozen=True)(type("AllCfg", (PipelineConfig,), {}))()
    saved, loaded = dict(registry._REGISTRY), registry._LOADED
    registry._REGISTRY.clear()
    registry._LOADED = True  # 'all' is the two toys (the real pipelines are not imported)

    @registry.register("toy-a", quick=cfg, full=cfg, title="Toy A")
    def run_a(ctx):
        list(ctx.track(range(3), "toy-a cells"))
        return PipelineResult("toy-a", "A", "text", claims=[
            Claim("P", "c1", "1", "yes"), Claim("P", "c2", "2", "not shown")])

    @registry.register("toy-b", quick=cfg, full=cfg)
    def run_b(ctx):
        raise RuntimeError("boom")

    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry._LOADED = loaded


def test_run_all_prints_one_line_per_pipeline_and_carries_on(two_toys, tmp_path):
    out = tmp_path / "all"
    r = runner.invoke(app, ["run", "all", "--quick", "--out", str(out)],
                      env={"JAXKIT_PROGRESS": "plain", "JAXKIT_PROGRESS_EVERY": "0",
                           "COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("running 2 pipelines (quick); verdicts: Y yes")
    a = next(ln for ln in lines if "toy-a" in ln and "s " in ln and "Y?" in ln)
    assert a.startswith("[ 1/2] toy-a") and a.endswith("Y? (1 yes, 1 not shown)")
    assert any(ln.startswith("[ 2/2] toy-b") and "FAILED" in ln and "RuntimeError: boom" in ln
               for ln in lines)
    assert "toy-a cells: 3/3 (100%)" in r.output  # plain progress, not a bar
    assert "1/2 pipelines" in r.output and "failed: toy-b" in r.output
    rec = json.loads((out / "run.json").read_text())
    assert rec["status"] == "failed" and rec["failed"] == ["toy-b"]
    assert rec["errors"] == {"toy-b": "RuntimeError: boom"}
    # after the first pipeline, the overall progress with an ETA (none after the last)
    at = lines.index(a)
    assert re.fullmatch(r" +1/2 finished \(0 failed\), elapsed [\d.]+s, ETA [\d.]+s",
                        lines[at + 1]), lines
    assert sum("finished (" in ln for ln in lines) == 1
    # the report opens with the failure, then a summary row per pipeline
    report = (out / "report.md").read_text()
    assert "## Toy A" in report
    assert report.index("## Failed pipelines") < report.index("## Summary") < \
        report.index("## Claims")
    assert "- **toy-b**: `RuntimeError: boom`" in report and "output:" not in report
    assert "| toy-a | ran |" in report and "| 2 | 1 | 0 | 1 | 0 |" in report
    assert "| toy-b | **failed** |" in report
