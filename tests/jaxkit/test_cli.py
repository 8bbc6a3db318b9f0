"""The jaxkit CLI: info, run, bench and lingam fit, including malformed input."""

import json
import os
from dataclasses import dataclass

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit import malloc, registry
from jaxkit.claims import Claim
from jaxkit.cli import app
from jaxkit.config import PipelineConfig, require
from jaxkit.report import PipelineResult
from jaxkit.stats import superiority

# the CLI turns on the persistent compilation cache: never from tests
os.environ.setdefault("JAXKIT_NO_COMPILE_CACHE", "1")
runner = CliRunner()


def _out(r) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(r.output.split())


def test_info_lists_devices_and_processes():
    r = runner.invoke(app, ["info"])
    assert r.exit_code == 0, r.output
    assert "8 x cpu" in _out(r) and "processes" in r.output and "backend" in r.output


def test_list_names_every_pipeline_with_its_paper():
    r = runner.invoke(app, ["list"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    names = registry.names()
    assert [ln.split()[0] for ln in lines[:len(names)]] == names  # one line each, sorted
    for n, ln in zip(names, lines, strict=False):
        title = registry.get(n).title
        assert ln.split(None, 1)[1] == " ".join(title.split()), ln
    assert "Pooled ICA-LiNGAM" in r.output and "CruxBench" in r.output
    assert lines[-1].startswith(f"{len(names)} pipelines; run one with 'jaxkit run NAME")


def test_list_falls_back_to_the_package_docstring():
    from jaxkit.cli import _one_line

    e = registry.Entry("x", lambda ctx: None, module="jaxkit.cruxbench.pipeline")
    assert _one_line(e) == ("CruxBench: grading proposed subquestions by their value of "
                            "information (VOI)")


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


# --------------------------------------------------------------------------- jaxkit run


@dataclass(frozen=True)
class ToyConfig(PipelineConfig):
    rounds: int = 3
    scale: float = 1.0
    sizes: tuple[int, ...] = (2, 4)
    label: str | None = None

    def validate(self):
        require(self.rounds >= 1, "rounds", f"must be >= 1; got {self.rounds}")


TOY_QUICK, TOY_FULL = ToyConfig(rounds=1), ToyConfig()


@pytest.fixture
def toy():
    """A tiny registered pipeline with QUICK/FULL configs; records its contexts."""
    registry.names()  # discover the real ones first, so that they are restored afterwards
    saved = dict(registry._REGISTRY)
    seen = []

    @registry.register("toy-cli", quick=TOY_QUICK, full=TOY_FULL, title="Toy paper")
    def run(ctx):
        seen.append(ctx)
        draws = ctx.stage("draws", lambda: jax.device_get(jax.random.normal(
            ctx.key("draws"), (ctx.config.rounds,))) * ctx.config.scale)
        v = superiority(np.asarray(draws) + 10.0)
        return PipelineResult("toy-cli", "toy", f"rounds {ctx.config.rounds}",
                              metrics={"n": len(draws)},
                              claims=[Claim.from_verdict("Toy 2024", "draws beat -10", v)])

    yield seen
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def test_run_show_config_resolves_quick_toml_and_set(toy, tmp_path):
    r = runner.invoke(app, ["run", "toy-cli", "--show-config"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("# toy-cli (full)\nrounds = 3\nscale = 1.0\nsizes = [2, 4]\n"
                               'label = "none"')
    toml = tmp_path / "c.toml"
    toml.write_text('rounds = 5\nsizes = [1, 2, 3]\nlabel = "x"\n')
    r = runner.invoke(app, ["run", "toy-cli", "--quick", "--config", str(toml),
                            "--set", "rounds=7", "--set", "scale=2", "--show-config"])
    assert r.exit_code == 0, r.output
    assert "# toy-cli (quick)" in r.output and "rounds = 7" in r.output
    assert "scale = 2.0" in r.output and "sizes = [1, 2, 3]" in r.output
    assert 'label = "x"' in r.output and not toy  # nothing ran
    # the printed configuration reads back as a --config file
    toml.write_text(r.output)
    again = runner.invoke(app, ["run", "toy-cli", "--config", str(toml), "--show-config"])
    assert again.output.splitlines()[1:] == r.output.splitlines()[1:]


def test_run_all_show_config_and_per_pipeline_settings(toy, tmp_path):
    toml = tmp_path / "all.toml"
    toml.write_text("[toy-cli]\nrounds = 2\n")
    r = runner.invoke(app, ["run", "all", "--quick", "--config", str(toml),
                            "--set", "toy-cli.scale=0.5", "--show-config"])
    assert r.exit_code == 0, r.output
    assert "[toy-cli]\nrounds = 2\nscale = 0.5" in r.output
    assert "[pooled-lingam]" in r.output


def test_run_all_sets_and_reads_back_a_section(tmp_path):
    """A section of a real pipeline (aira-compose's ``scale``) set by a dotted path with
    ``all``, printed as ``[NAME.section]`` and read back from that output."""
    r = runner.invoke(app, ["run", "all", "--quick", "--set", "aira-compose.scale.seeds=4",
                            "--set", "aira-compose.agent.offline=yes", "--show-config"])
    assert r.exit_code == 0, r.output
    assert "[aira-compose.scale]\ndepth = 6\nwidths = [16, 24]" in r.output
    assert "seeds = 4" in r.output and "offline = true" in r.output
    toml = tmp_path / "all.toml"
    toml.write_text(r.output)
    again = runner.invoke(app, ["run", "all", "--quick", "--config", str(toml), "--show-config"])
    assert again.output == r.output
    bad = runner.invoke(app, ["run", "aira-compose", "--quick", "--set", "scale.seeds=0"])
    assert bad.exit_code == 2 and "`scale.seeds` must be >= 1; got 0" in bad.output


@pytest.mark.parametrize(("args", "match"), [
    (["--set", "rond=2"], "toy-cli: --set: unknown field `rond` for ToyConfig; did you "
                          "mean rounds?"),
    (["--set", "rounds=two"], "toy-cli: --set: `rounds` expects int; got 'two'"),
    (["--set", "rounds=0"], "`rounds` must be >= 1; got 0"),
    (["--set", "sizes=1,a"], "`sizes` expects tuple[int, ...] (comma-separated)"),
    (["--mesh", "rows=2"], "--mesh axes must be 'data'"),
])
def test_run_bad_settings_are_one_clear_line(toy, args, match):
    r = runner.invoke(app, ["run", "toy-cli", "--quick", *args])
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert not toy


def test_run_bad_config_files_and_all_syntax(toy, tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("rounds = 2.5\n")
    r = runner.invoke(app, ["run", "toy-cli", "--config", str(toml)])
    assert r.exit_code == 2 and "`rounds` expects int; got 2.5" in _out(r)
    r = runner.invoke(app, ["run", "toy-cli", "--config", str(tmp_path / "none.toml")])
    assert r.exit_code == 2 and "no such file" in _out(r)
    toml.write_text("rounds = 2\n")
    r = runner.invoke(app, ["run", "all", "--config", str(toml)])
    assert r.exit_code == 2 and "tables named after pipelines" in _out(r)
    toml.write_text("[toy-clj]\nrounds = 2\n")
    r = runner.invoke(app, ["run", "all", "--config", str(toml)])
    assert r.exit_code == 2 and "unknown pipeline 'toy-clj'; did you mean toy-cli" in _out(r)
    r = runner.invoke(app, ["run", "all", "--set", "rounds=2"])
    assert r.exit_code == 2 and "PIPELINE.field=value" in _out(r)
    assert not toy


def test_run_records_config_and_refuses_a_different_run(toy, tmp_path):
    out = tmp_path / "run"
    base = ["run", "toy-cli", "--quick", "--out", str(out), "--mesh", "data=8"]
    r = runner.invoke(app, [*base, "--set", "rounds=4"])
    assert r.exit_code == 0, r.output
    ctx = toy[-1]
    assert ctx.config == ToyConfig(rounds=4) and ctx.quick and ctx.mesh.shape["data"] == 8
    rec = json.loads((out / "run.json").read_text())
    assert rec["configs"] == {"toy-cli": {"rounds": 4, "scale": 1.0, "sizes": [2, 4],
                                          "label": None}}
    assert rec["seed"] == 0 and rec["mode"] == "quick" and rec["status"] == "done"
    text = (out / "report.md").read_text()
    assert "| toy-cli | Toy 2024 | draws beat -10 |" in text and "## Toy paper" in text
    assert json.loads((out / "metrics.json").read_text())["claims"][0]["verdict"] == "yes"
    # the same run resumes from its saved stage
    r = runner.invoke(app, [*base, "--set", "rounds=4"])
    assert r.exit_code == 0, r.output
    assert toy[-1].reloaded == ["draws"]
    # the record keeps both invocations and says which one reloaded what
    inv = json.loads((out / "run.json").read_text())["invocations"]
    assert [i["status"] for i in inv] == ["done", "done"]
    assert inv[0]["reloaded"] == {} and inv[1]["reloaded"] == {"toy-cli": ["draws"]}
    assert all(i["wall_s"] >= 0 and not i["fresh"] for i in inv)
    # ... and the malloc settings it ran under (jaxkit.malloc; in process: no re-exec)
    assert all(i["malloc"] == malloc.state() for i in inv)
    # an invocation that never finished (killed: its record still says running) is kept
    # as such when the next one resumes
    rec = json.loads((out / "run.json").read_text())
    rec["invocations"].append(dict(started="x", status="running", commit=None, fresh=False))
    (out / "run.json").write_text(json.dumps(dict(rec, status="running")))
    r = runner.invoke(app, [*base, "--set", "rounds=4"])
    assert r.exit_code == 0, r.output
    inv = json.loads((out / "run.json").read_text())["invocations"]
    assert [i["status"] for i in inv] == ["done", "done", "stopped before the end (killed or "
                                          "failed)", "done"]
    # a different config, seed or mode is refused, without running
    n = len(toy)
    for extra, what in [(["--set", "rounds=5"], "configs"), (["--set", "rounds=4", "--seed",
                                                                "1"], "seed")]:
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code == 2 and f"holds a run of a different {what}" in _out(r)
        assert "--force" in _out(r)
    r = runner.invoke(app, ["run", "toy-cli", "--out", str(out)])
    assert r.exit_code == 2 and "mode" in _out(r)
    assert len(toy) == n
    r = runner.invoke(app, [*base, "--set", "rounds=5", "--force"])
    assert r.exit_code == 0, r.output
    rec = json.loads((out / "run.json").read_text())
    assert rec["configs"]["toy-cli"]["rounds"] == 5
    assert len(rec["invocations"]) == 1  # another configuration: a new history
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def test_run_out_checks(toy, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = runner.invoke(app, ["run", "toy-cli", "--quick", "--out", str(f)])
    assert r.exit_code == 2 and "is a file, not a folder" in _out(r)
    old = tmp_path / "old"
    old.mkdir()
    (old / "report.md").write_text("# an old report\n")
    r = runner.invoke(app, ["run", "toy-cli", "--quick", "--out", str(old)])
    assert r.exit_code == 2 and "unknown configuration (no run.json)" in _out(r)
    assert not toy


def test_lingam_json_folder_is_checked_before_computing(tmp_path):
    csv = tmp_path / "chain.csv"
    _chain_csv(csv, n=50)
    r = runner.invoke(app, ["lingam", "fit", str(csv), "--json",
                            str(tmp_path / "missing" / "g.json")])
    assert r.exit_code == 2 and "does not exist" in _out(r)
    r = runner.invoke(app, ["lingam", "fit", str(csv), "--json", str(tmp_path)])
    assert r.exit_code == 2 and "is a folder" in _out(r)


def test_bench_json_folder_is_checked(tmp_path):
    r = runner.invoke(app, ["bench", "ica", "--json", str(tmp_path / "missing" / "b.json")])
    assert r.exit_code == 2 and "does not exist" in _out(r)


def test_fresh_removes_only_the_runs_checkpoints(tmp_path):
    """--fresh retrains from step 0: the run's OUT/checkpoints goes (a training would
    otherwise refuse a folder holding a previous run's checkpoints); the rest of OUT
    stays; nothing to remove is not an error."""
    from jaxkit.cli import _clear_checkpoints

    (tmp_path / "checkpoints" / "lm" / "100").mkdir(parents=True)
    (tmp_path / "report.md").write_text("kept")
    assert _clear_checkpoints(tmp_path) == tmp_path / "checkpoints"
    assert not (tmp_path / "checkpoints").exists()
    assert (tmp_path / "report.md").read_text() == "kept"
    assert _clear_checkpoints(tmp_path) is None


def test_a_second_run_into_a_locked_folder_is_one_line(toy, tmp_path):
    """Two runs into one --out: the second fails at once (the first holds the folder's
    lock) and leaves the first's records alone; after the first ends the lock is free."""
    from filelock import FileLock

    from jaxkit.cli import LOCK

    out = tmp_path / "run"
    out.mkdir()
    held = FileLock(str(out / LOCK))
    held.acquire()
    try:
        r = runner.invoke(app, ["run", "toy-cli", "--quick", "--out", str(out)])
        assert r.exit_code == 2 and "another jaxkit run is writing to this folder" in _out(r)
        assert len(_out(r).strip().splitlines()) == 1
        assert not (out / "run.json").exists()
    finally:
        held.release()
    r = runner.invoke(app, ["run", "toy-cli", "--quick", "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["run", "toy-cli", "--quick", "--out", str(out)])  # released
    assert r.exit_code == 0, r.output


def test_pipelines_run_under_the_context_fingerprint(toy, tmp_path):
    """jaxkit run installs the run's fingerprint for its trainings: the same
    configuration gives the same one, another configuration or seed another."""
    from jaxkit import registry

    a = registry.RunContext(out_dir=tmp_path, config=ToyConfig(rounds=4), seed=0)
    b = registry.RunContext(out_dir=tmp_path, config=ToyConfig(rounds=4), seed=0)
    c = registry.RunContext(out_dir=tmp_path, config=ToyConfig(rounds=5), seed=0)
    d = registry.RunContext(out_dir=tmp_path, config=ToyConfig(rounds=4), seed=1)
    assert a.fingerprint() == b.fingerprint()
    assert len({a.fingerprint(), c.fingerprint(), d.fingerprint()}) == 3
