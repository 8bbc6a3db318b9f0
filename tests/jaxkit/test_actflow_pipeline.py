"""The ActFlow pipeline: configuration, report sections, PNGs, claims and resume."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from jaxkit.actflow.config import DISCRETE, FULL, QUICK, Config, DiscreteSettings
from jaxkit.actflow.results import DiscreteRound, DomainRun, MethodRun, Pretraining
from jaxkit.registry import RunContext

TINY = Config(domains=("rings", "peptides-discrete"), hidden=16, depth=2, n_data=128,
              pretrain_steps=20, batch=32, rounds=1, budget=32, adapt_steps=5, n_eval=32,
              sample_steps=4, steer_steps=1, n_draws=2, n_seeds=2,
              dfm=DiscreteSettings(hidden=16, depth=1, pretrain_steps=10, batch=16, rounds=1,
                                   budget=16, adapt_steps=5, n_eval=16, sample_steps=3))


def _check(res, out: Path, domains):
    assert res.name == "actflow"
    for d in domains:
        assert f"### {d}" in res.markdown
        if d in ("rings", "torus", "sphere", "peptides"):
            assert (out / f"actflow_{d}_scatter.png").stat().st_size > 1000
    assert (out / "actflow_coverage.png").stat().st_size > 1000
    assert ("| domain | measure | pretrained | retrain | retrain+filter | tempered+filter | "
            "actflow-noexplore | actflow |") in res.markdown
    assert all(p.parent == out for p in res.figures)
    paper_d = ("peptides-discrete", "molecules", "druglike", "proteins")
    for d in domains:
        assert set(res.metrics[d]) == ({"pretrained", "retrain", "retrain+filter", "actflow"}
                                       | ({"tempered+filter", "actflow-noexplore"}
                                          if d in DISCRETE else set()))
    # paper: 4 domains x 2 sentences + the theory sentence; extension: 2 per domain run,
    # 3 more (every baseline on the independent measures: held-out k-NN coverage, held-out
    # recall at the novelty radius, valid-novel-unique yield) per discrete paper domain
    paper = [c for c in res.claims if c.kind == "paper"]
    assert len(paper) == 9 and len(res.claims) == 9 + sum(5 if d in paper_d else 2
                                                          for d in domains)
    tested = [c for c in paper if not c.verdict.startswith("not tested")]
    assert len(tested) == 2 * len([d for d in domains if d in paper_d])
    assert all("held-out coverage" in c.claim and "Holm" in c.test for c in tested)
    assert "over 2 training seeds" in res.markdown or "evaluation draws" in res.markdown
    for d in domains:  # every final number has its per-unit values in metrics.json
        assert set(res.metrics["final"][d]) == set(res.metrics[d])
    assert {c.verdict for c in res.claims if c.kind == "extension"} <= {"yes", "no",
                                                                           "not shown"}
    for d in domains:  # the final samples of the discrete domains, decoded
        if d in paper_d:
            rows = (out / f"actflow_{d}_samples.csv").read_text().splitlines()
            assert rows[0].endswith("smiles" if d in ("molecules", "druglike")
                                    else "sequence")
            assert len(rows) > 1 and f"`actflow_{d}_samples.csv`" in res.markdown


def test_config_fields_and_validation():
    assert QUICK.loop("rings").rounds == 3 and QUICK.loop("peptides").rounds == 2
    assert FULL.loop("peptides").hidden == 256 and FULL.loop("torus").hidden == 128
    two = QUICK.override(["rounds=2"])
    assert two.loop("rings").rounds == 2 and two.loop("peptides").rounds == 2
    both = FULL.override(["rounds=2", "peptide.rounds=none"])
    assert both.loop("peptides").rounds == 2
    with pytest.raises(ValueError, match="`replay`"):
        Config(replay=2.0)
    with pytest.raises(ValueError, match="`peptide.batch` must be none or a positive"):
        Config().override(["peptide.batch=0"])
    with pytest.raises(ValueError, match="`dfm.restart` must lie in"):
        QUICK.override(["dfm.restart=0.99"])
    assert QUICK.override(["dfm.rounds=4"]).discrete("molecules").rounds == 4
    with pytest.raises(ValueError, match="`domains`"):
        Config(domains=("rings", "rings"))
    with pytest.raises(ValueError, match="`domains`"):
        Config(domains=("disk",))
    with pytest.raises(ValueError, match="`n_draws`"):
        Config(n_draws=1)
    with pytest.raises(ValueError, match="`expansion_margin`"):
        Config(expansion_margin=-0.1)
    assert QUICK.expansion_margin == FULL.expansion_margin > 0
    assert QUICK.baseline_margin == FULL.baseline_margin > 0
    with pytest.raises(ValueError, match="`user_data`"):
        Config(domains=("user",))
    with pytest.raises(ValueError, match="`dfm.restart`"):
        Config().override(["dfm.restart=1.0"])
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


# ------------------------------------------------------------------ claims: negative control

METHODS = ("pretrained", "retrain", "retrain+filter", "actflow")
_KEYS = ("knn_coverage", "novel_circles", "outside_circles")


def _fake(shift: dict[str, float], *, same: bool = False, n: int = 4, seeds: int = 1,
          domains=("peptides-discrete", "proteins"), rng_seed: int = 0) -> dict:
    """Results of :func:`jaxkit.actflow.compare.compare_discrete` for ``domains``: per
    method, ``n`` draws of each measure around a common level plus ``shift[method]``
    (``same``: every method's draws are the pre-trained model's, as when no method's
    training changes the model); the final round's validation row beside them."""
    rng = np.random.default_rng(rng_seed)
    out = {}
    for d in domains:
        res = []
        for _ in range(seeds):
            base = {k: (0.6 if k == "knn_coverage" else 60.0) * (1 + 0.03 * rng.normal(
                size=n)) for k in _KEYS}
            draws = {}
            for m in METHODS:
                noise = 0 if same else {k: 0.02 * np.mean(base[k]) * rng.normal(size=n)
                                        for k in _KEYS}
                draws[m] = {k: base[k] + (0 if same else noise[k]) + shift.get(m, 0.0)
                            * (1 if k == "knn_coverage" else 100) for k in _KEYS}
            runs = {m: MethodRun(history=[DiscreteRound(
                round=0, method=m, metrics={k: float(np.mean(v)) + 0.001 * i
                                            for k, v in draws[m].items()},
                n_kept_round=None, updated=False, restart=None)], seconds=0.0)
                for i, m in enumerate(METHODS)}
            res.append(DomainRun(measure="novel_circles", draws=draws, runs=runs,
                                 description=d, pretrain=Pretraining(
                                     loss=0.0, seconds=0.0, n_data=1, resumed_from=0)))
        out[d] = res
    return out


def _paper(results, cfg=QUICK):
    from jaxkit.actflow import report

    return [c for c in report.claims(cfg, results) if c.kind == "paper"
            and not c.verdict.startswith("not tested")]


@pytest.mark.parametrize("seeds", [1, 3])
def test_negative_control_no_paper_claim_says_yes_without_an_effect(seeds):
    """Negative control: (a) every final model is the pre-trained model (ActFlow that keeps
    nothing, baselines that change nothing): the differences are exactly 0, below the
    margins, so every tested paper row says "no"; (b) the four methods exchangeable (the
    same distribution, independent draws: shuffled labels): no paper row says "yes". The
    positive control (ActFlow 0.2 above every method on the held-out coverage) says "yes",
    so the claim test can say yes."""
    null = _paper(_fake({}, same=True, seeds=seeds))
    assert len(null) == 4 and all(c.verdict == "no" for c in null)
    for r in range(5):
        assert all(c.verdict != "yes" for c in _paper(_fake({}, seeds=seeds, rng_seed=r)))
    good = _paper(_fake({"actflow": 0.2}, seeds=seeds))
    assert [c.verdict for c in good] == ["yes"] * 4
    assert all("Holm over 2 test(s), one per paper domain run" in c.test for c in good)


def test_claims_keep_rule_measures_are_extensions_and_baseline_is_chosen_on_validation():
    """ActFlow far ahead on #Circles of valid novel samples (what its keep rule selects)
    but not on the held-out coverage: the paper rows say no, the keep-rule rows (extension)
    say yes. The baseline of the second sentence is the synthetic one that is best on the
    validation row, here retrain, although retrain+filter is better on the test draws."""
    from jaxkit.actflow import report

    res = _fake({}, same=True)
    for seeds in res.values():
        for r in seeds:
            r.draws["actflow"]["novel_circles"] = r.draws["actflow"]["novel_circles"] + 50
            r.draws["retrain+filter"]["knn_coverage"] = (
                r.draws["retrain+filter"]["knn_coverage"] + 0.1)
            run = r.runs["retrain"]
            last = run.history[-1]
            r.runs["retrain"] = replace(run, history=[*run.history[:-1], replace(
                last, metrics={**last.metrics, "knn_coverage": 0.99})])
    cl = report.claims(QUICK, res)
    paper = [c for c in cl if c.kind == "paper" and not c.verdict.startswith("not tested")]
    assert all(c.verdict == "no" for c in paper)
    assert all("minus retrain)" in c.claim for c in paper if "outperforming" in c.claim)
    assert sum("outperforming" in c.claim for c in paper) == 2
    keep = [c for c in cl if c.kind == "extension" and "novel samples" in c.claim]
    assert len(keep) == 2 and all(c.verdict == "yes" for c in keep)
    assert all("keep-rule measure" in c.note for c in keep)
    assert report.validation_best(res["proteins"], "knn_coverage") == "retrain"
