"""The ActFlow pipeline: configuration, report sections, PNGs, claims and resume."""

from pathlib import Path

import pytest

from jaxkit.actflow.config import FULL, QUICK, Config
from jaxkit.registry import RunContext

TINY = Config(domains=("rings", "peptides-discrete"), hidden=16, depth=2, n_data=128,
              pretrain_steps=20, batch=32, rounds=1, budget=32, adapt_steps=5, n_eval=32,
              sample_steps=4, steer_steps=1, n_draws=2, n_seeds=2, dfm_hidden=16,
              dfm_depth=1, dfm_pretrain_steps=10, dfm_batch=16, dfm_rounds=1, dfm_budget=16,
              dfm_adapt_steps=5, dfm_n_eval=16, dfm_sample_steps=3)


def _check(res, out: Path, domains):
    assert res.name == "actflow"
    for d in domains:
        assert f"### {d}" in res.markdown
        if d in ("rings", "torus", "sphere", "peptides"):
            assert (out / f"actflow_{d}_scatter.png").stat().st_size > 1000
    assert (out / "actflow_coverage.png").stat().st_size > 1000
    assert "| domain | measure | pretrained | retrain | retrain+filter | actflow |" \
        in res.markdown
    assert all(p.parent == out for p in res.figures)
    for d in domains:
        assert set(res.metrics[d]) == {"pretrained", "retrain", "retrain+filter", "actflow"}
    n_claims = sum(3 if d in ("peptides-discrete", "molecules", "proteins") else 2
                   for d in domains)
    assert len(res.claims) == n_claims
    assert "over 2 training seeds" in res.markdown or "evaluation draws" in res.markdown
    for d in domains:  # every final number has its per-unit values in metrics.json
        assert set(res.metrics["final"][d]) == set(res.metrics[d])
    assert {c.verdict for c in res.claims} <= {"yes", "no", "not shown"}
    for d in domains:  # the final samples of the discrete domains, decoded
        if d in ("peptides-discrete", "molecules", "proteins"):
            rows = (out / f"actflow_{d}_samples.csv").read_text().splitlines()
            assert rows[0].endswith("smiles" if d == "molecules" else "sequence")
            assert len(rows) > 1 and f"`actflow_{d}_samples.csv`" in res.markdown


def test_config_fields_and_validation():
    assert QUICK.loop("rings").rounds == 3 and QUICK.loop("peptides").rounds == 2
    assert FULL.loop("peptides").hidden == 256 and FULL.loop("torus").hidden == 128
    two = QUICK.override(["rounds=2"])
    assert two.loop("rings").rounds == 2 and two.loop("peptides").rounds == 2
    both = FULL.override(["rounds=2", "peptide_rounds=none"])
    assert both.loop("peptides").rounds == 2
    with pytest.raises(ValueError, match="`replay`"):
        Config(replay=2.0)
    with pytest.raises(ValueError, match="`peptide_batch`"):
        Config(peptide_batch=0)
    with pytest.raises(ValueError, match="`domains`"):
        Config(domains=("rings", "rings"))
    with pytest.raises(ValueError, match="`domains`"):
        Config(domains=("disk",))
    with pytest.raises(ValueError, match="`n_draws`"):
        Config(n_draws=1)
    with pytest.raises(ValueError, match="`user_data`"):
        Config(domains=("user",))
    with pytest.raises(ValueError, match="`restart`"):
        Config(dfm_restart=1.0)
    assert FULL.n_seeds >= 5 and FULL.discrete().rounds == 5
    assert set(FULL.domains) >= {"rings", "torus", "sphere", "peptides", "peptides-discrete",
                                 "molecules", "proteins"}


def test_pipeline_tiny_writes_report_claims_and_resumes(tmp_path):
    from jaxkit.actflow import pipeline

    res = pipeline.run(RunContext(out_dir=tmp_path, config=TINY, quick=True))
    _check(res, tmp_path, TINY.domains)
    assert any((tmp_path / "checkpoints").iterdir())
    ctx = RunContext(out_dir=tmp_path, config=TINY, quick=True)
    res2 = pipeline.run(ctx)
    assert ctx.reloaded == ["actflow-rings", "actflow-rings-s1", "actflow-peptides-discrete",
                            "actflow-peptides-discrete-s1"]
    assert res2.metrics["rings"] == res.metrics["rings"]
    assert res2.claims == res.claims


def test_registered():
    from jaxkit.registry import get

    entry = get("actflow")
    assert entry.quick == QUICK and entry.full == FULL


@pytest.mark.slow
def test_pipeline_quick(tmp_path):
    from jaxkit.actflow import pipeline

    res = pipeline.run(RunContext(out_dir=tmp_path, config=QUICK, quick=True))
    _check(res, tmp_path, QUICK.domains)
