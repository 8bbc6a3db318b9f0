"""The ActFlow pipeline writes its report sections, PNGs and checkpoints, and resumes."""

from pathlib import Path

import pytest

from jaxkit.pipelines import RunContext

TINY = dict(
    continuous=dict(hidden=16, depth=2, n_data=128, pretrain_steps=100, batch=32, rounds=1,
                    budget=32, adapt_steps=5, n_eval=32, sample_steps=4, steer_steps=1),
    peptides=dict(hidden=16, depth=1, n_data=64, pretrain_steps=50, batch=16, rounds=1,
                  budget=16, adapt_steps=5, n_eval=16, sample_steps=3, steer_steps=0))


def _check(res, out: Path, domains):
    assert res.name == "actflow"
    for d in domains:
        assert f"### {d}" in res.markdown
        assert (out / f"actflow_{d}_scatter.png").stat().st_size > 1000
    assert (out / "actflow_coverage.png").stat().st_size > 1000
    assert "| domain | measure | pretrained | retrain | retrain+filter | actflow |" \
        in res.markdown
    assert all(p.parent == out for p in res.figures)
    for d in domains:
        assert set(res.metrics[d]) == {"pretrained", "retrain", "retrain+filter", "actflow"}


def test_pipeline_tiny_writes_report_and_resumes(tmp_path):
    import jaxkit.pipelines.actflow as A

    settings = dict(TINY, domains=("rings", "peptides"))
    res = A.run(RunContext(out_dir=tmp_path, quick=True), settings)
    _check(res, tmp_path, ("rings", "peptides"))
    assert any((tmp_path / ".actflow").iterdir())
    ctx = RunContext(out_dir=tmp_path, quick=True)
    res2 = A.run(ctx, settings)
    assert "actflow-pretrain-rings" in ctx.reloaded
    assert res2.metrics["rings"]["actflow"] == res.metrics["rings"]["actflow"]


@pytest.mark.slow
def test_pipeline_quick(tmp_path):
    import jaxkit.pipelines.actflow as A

    res = A.run(RunContext(out_dir=tmp_path, quick=True))
    _check(res, tmp_path, A.QUICK["domains"])
