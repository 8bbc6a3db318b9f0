"""jaxkit.registry: registration, discovery, PRNG streams and the stage cache."""

import sys
import textwrap
from dataclasses import dataclass

import jax
import numpy as np
import pytest

import jaxkit
from jaxkit import registry
from jaxkit.config import PipelineConfig, require
from jaxkit.registry import RunContext
from jaxkit.report import PipelineResult


@dataclass(frozen=True)
class Cfg(PipelineConfig):
    rounds: int = 3

    def validate(self):
        require(self.rounds >= 1, "rounds", f"must be >= 1; got {self.rounds}")


@pytest.fixture
def clean_registry():
    """Restore the registry (and the discovery flag) after a test that registers."""
    saved, loaded = dict(registry._REGISTRY), registry._LOADED
    yield registry._REGISTRY
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry._LOADED = loaded


def test_every_pipeline_is_discovered():
    assert set(registry.names()) >= {"pooled-lingam", "ballad", "amgenc", "actflow",
                                     "tempbench"}
    for n in registry.names():
        e = registry.get(n)
        assert e.name == n and (e.quick is None) == (e.full is None)
    with pytest.raises(KeyError, match="unknown pipeline 'nope'; available: .*ballad"):
        registry.get("nope")


def test_register_with_configs(clean_registry):
    quick, full = Cfg(rounds=1), Cfg()

    @registry.register("toy-reg", quick=quick, full=full, title="Toy")
    def run(ctx):
        return PipelineResult("toy-reg", "toy", "")

    e = registry.get("toy-reg")
    assert (e.run, e.quick, e.full, e.title) == (run, quick, full, "Toy")
    assert e.config(True) is quick and e.config(False) is full
    assert e(RunContext(out_dir=".")).name == "toy-reg"
    with pytest.raises(ValueError, match="registered twice"):
        other = lambda ctx: None  # noqa: E731
        other.__module__ = "jaxkit.other.pipeline"
        registry.register("toy-reg", quick=quick, full=full)(other)
    with pytest.raises(ValueError, match="must be PipelineConfig instances"):
        registry.register("toy-half", quick=quick, full=None)
    with pytest.raises(ValueError, match="reserved"):
        registry.register("all", quick=quick, full=full)


def test_discovers_paper_packages_with_a_pipeline_module(tmp_path, clean_registry,
                                                         monkeypatch):
    pkg = tmp_path / "toy_paper"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A toy paper."""\n')
    (pkg / "pipeline.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass

        from jaxkit.config import PipelineConfig
        from jaxkit.registry import register
        from jaxkit.report import PipelineResult

        @dataclass(frozen=True)
        class Config(PipelineConfig):
            n: int = 1

        @register("toy-discovered", quick=Config(), full=Config(n=2))
        def run(ctx):
            return PipelineResult("toy-discovered", "Toy", "")
    """))
    (tmp_path / "no_pipeline").mkdir()
    (tmp_path / "no_pipeline" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.setattr(jaxkit, "__path__", [*jaxkit.__path__, str(tmp_path)])
    registry._LOADED = False
    try:
        assert "toy-discovered" in registry.names()
        assert "jaxkit.no_pipeline" not in sys.modules
    finally:
        for m in ("jaxkit.toy_paper.pipeline", "jaxkit.toy_paper"):
            sys.modules.pop(m, None)


def test_key_is_distinct_per_name_and_reproducible(tmp_path):
    ctx = RunContext(out_dir=tmp_path, seed=7)
    data = {n: np.asarray(jax.random.key_data(ctx.key(n))) for n in ("data", "model", "a")}
    assert len({d.tobytes() for d in data.values()}) == 3
    again = RunContext(out_dir=tmp_path, seed=7).key("data")
    np.testing.assert_array_equal(jax.random.key_data(again), data["data"])
    other_seed = RunContext(out_dir=tmp_path, seed=8).key("data")
    assert not np.array_equal(jax.random.key_data(other_seed), data["data"])
    assert jax.dtypes.issubdtype(ctx.key("data").dtype, jax.dtypes.prng_key)
    import zlib

    expected = jax.random.fold_in(jax.random.key(7), zlib.crc32(b"data"))
    np.testing.assert_array_equal(jax.random.key_data(expected), data["data"])
    # host-side streams follow the same derivation
    a = ctx.rng("data").normal(size=4)
    np.testing.assert_array_equal(a, RunContext(out_dir=tmp_path, seed=7).rng("data")
                                  .normal(size=4))
    assert not np.array_equal(a, ctx.rng("model").normal(size=4))


def _counting():
    calls = []

    def fn():
        calls.append(1)
        return {"value": len(calls)}

    return calls, fn


def test_stage_cache_keys_on_config_seed_and_version(tmp_path, monkeypatch):
    calls, fn = _counting()

    def ctx(**kw):
        kw.setdefault("config", Cfg())
        return RunContext(out_dir=tmp_path, **kw)

    first = ctx()
    assert first.stage("s", fn) == {"value": 1} and first.reloaded == []
    again = ctx()
    assert again.stage("s", fn) == {"value": 1} and again.reloaded == ["s"]
    assert ctx(config=Cfg(rounds=4)).stage("s", fn) == {"value": 2}  # config change
    assert ctx(seed=1).stage("s", fn) == {"value": 3}  # seed change
    assert ctx().stage("t", fn) == {"value": 4}  # another stage
    assert ctx().stage("s", fn, config=("extra",)) == {"value": 5}  # legacy extra key
    monkeypatch.setattr(jaxkit, "__version__", jaxkit.__version__ + ".post1")
    upgraded = ctx()
    assert upgraded.stage("s", fn) == {"value": 6} and upgraded.reloaded == []
    assert ctx(resume=False).stage("s", fn) == {"value": 7}  # --fresh recomputes
    files = list((tmp_path / ".stages").iterdir())
    assert all(f.suffix == ".pkl" for f in files), files  # no temporary files left


def test_legacy_stage_cache_keys_on_quick(tmp_path):
    calls, fn = _counting()
    assert RunContext(out_dir=tmp_path, quick=True).stage("s", fn) == {"value": 1}
    assert RunContext(out_dir=tmp_path, quick=True).stage("s", fn) == {"value": 1}
    assert RunContext(out_dir=tmp_path, quick=False).stage("s", fn) == {"value": 2}


def test_killed_stage_leaves_nothing(tmp_path):
    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        RunContext(out_dir=tmp_path, config=Cfg()).stage("s", boom)
    assert not (tmp_path / ".stages").exists() or not any((tmp_path / ".stages").iterdir())


def test_track_without_and_with_progress(tmp_path):
    from rich.progress import Progress

    assert list(RunContext(out_dir=tmp_path).track(range(3), "x")) == [0, 1, 2]
    with Progress(disable=True) as p:
        ctx = RunContext(out_dir=tmp_path, progress=p)
        assert list(ctx.track(range(3), "x")) == [0, 1, 2]
        assert not p.tasks


def test_a_stage_of_other_code_is_not_reloaded(tmp_path, monkeypatch):
    """Stages (and the training fingerprint) are keyed by the source's digest: after a code
    change the same configuration recomputes instead of reloading a stale result."""
    from jaxkit import registry

    assert len(registry.code_version()) == 16
    calls = []
    ctx = registry.RunContext(out_dir=tmp_path, quick=True)
    assert ctx.stage("s", lambda: calls.append(1) or 1) == 1
    assert ctx.stage("s", lambda: calls.append(2) or 2) == 1 and calls == [1]  # reloaded
    fp = ctx.fingerprint()
    monkeypatch.setattr(registry, "code_version", lambda: "other-code")
    assert ctx.stage("s", lambda: calls.append(3) or 3) == 3 and calls == [1, 3]
    assert ctx.fingerprint() != fp
