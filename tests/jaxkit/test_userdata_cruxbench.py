"""CruxBench on a user's JSON Lines file: the documented format (jaxkit.cruxbench.data's
docstring) parses, scores, and runs through the pipeline (``--set data=FILE``)."""

import json
import math

import numpy as np
import pytest

from jaxkit.cruxbench.data import read_jsonl
from jaxkit.cruxbench.scoring import question_scores
from jaxkit.io import DataError

# the records of the format's documentation, one of each type
DOC = [
    {"type": "target", "id": "fed-cut-june", "prices": [[0, 0.4], [1, 0.4], [2, 0.7]],
     "outcome": 1, "title": "Fed cuts in June"},
    {"type": "market", "id": "m1", "target": "fed-cut-june",
     "prices": [[0, 0.4], [1, 0.45], [2, 0.7]]},
    {"type": "question", "target": "fed-cut-june", "proposer": "model-a", "q": 0.4,
     "p1": 0.7, "p0": 0.2, "asked_at": 0, "resolved_at": 2, "answer": 1,
     "text": "Does May CPI come in below 3%?", "market": "m1"},
    {"type": "question", "target": "fed-cut-june", "proposer": "model-b", "q": 0.5,
     "p1": 0.5, "p0": 0.3, "answer": None},
    {"type": "quality", "proposer": "model-a", "score": 1234.5},
]


def _write(tmp_path, recs, extra=""):
    p = tmp_path / "mine.jsonl"
    p.write_text("# my markets\n\n" + "\n".join(json.dumps(r) for r in recs) + "\n" + extra)
    return p


def test_documented_records_parse_and_score(tmp_path):
    ds = read_jsonl(_write(tmp_path, DOC))
    assert ds.target_ids == ["fed-cut-june"] and ds.proposers == ["model-a", "model-b"]
    assert ds.texts[0].startswith("Does May CPI") and math.isnan(ds.quality[1])
    qs = question_scores(ds)
    # model-a: coherent with the price 0.4 (0.4 * 0.7 + 0.6 * 0.2); E|dp| = 2 q (1 - q) |p1 - p0|
    assert qs["ex_ante_abs"][0] == pytest.approx(2 * 0.4 * 0.6 * 0.5, rel=1e-5)
    # the move over the answer: m1 from its last price before t = 2 (0.45) to 0.7
    assert qs["realised_abs"][0] == pytest.approx(0.25, abs=1e-6)
    assert math.isnan(qs["realised_abs"][1])  # unresolved


def test_errors_name_the_line(tmp_path):
    with pytest.raises(DataError, match=r"mine.jsonl, line 8"):
        read_jsonl(_write(tmp_path, DOC, '{"type": "question", "target": "nope"}\n'))


@pytest.mark.slow
def test_pipeline_scores_the_users_file(tmp_path):
    from jaxkit.cruxbench.config import QUICK
    from jaxkit.registry import RunContext, get

    p = _write(tmp_path, DOC)
    cfg = QUICK.override([f"data={p}", "n_boot=200", "n_perm=200", "lm.model="])
    res = get("cruxbench").run(RunContext(out_dir=tmp_path / "o", config=cfg, quick=True))
    assert f"Data: {p}" in res.markdown and "data" in res.metrics
    # the simulated claims (2 paper, 2 setup, 3 extension), then the three claims on the
    # user's file (extension rows: a paper sentence is tallied once): 2 proposers, one
    # with a quality score, so the correlation claims are not tested at this size
    assert len(res.claims) == 10
    assert [c.verdict for c in res.claims[7:9]] == ["not tested at this size"] * 2
    assert all(c.kind == "extension" for c in res.claims[7:])


def test_claims_count_the_proposers_with_a_quality_measure(tmp_path):
    """Two proposers with a quality record: too few for the correlation claims, and the
    note says 2 (it said 0: the count came from the correlation, not computed below 3)."""
    import jax

    from jaxkit.cruxbench import report
    from jaxkit.cruxbench.analysis import evaluate
    from jaxkit.cruxbench.config import QUICK
    from jaxkit.cruxbench.scoring import score

    recs = [*DOC, {"type": "quality", "proposer": "model-b", "score": 1000.0}]
    ds = read_jsonl(_write(tmp_path, recs))
    assert int(np.isfinite(ds.quality).sum()) == 2
    st = evaluate(jax.random.key(0), score(ds, window=QUICK.window,
                                           clip=(QUICK.clip_lo, QUICK.clip_hi)),
                  ds.quality, n_boot=10, n_perm=10)
    assert st.n_quality == 2 and st.quality == {}
    assert st.as_dict() == {"quality": {}, "usefulness": st.usefulness}
    c1, c2, _ = report.data_claims(QUICK, st, source="mine.jsonl")
    for c in (c1, c2):
        assert c.verdict == "not tested at this size"
        assert c.note == "2 proposers with a quality measure (need >= 4)"
    ds = read_jsonl(_write(tmp_path, DOC[:-1]))  # no quality record at all
    st = evaluate(jax.random.key(0), score(ds, window=QUICK.window,
                                           clip=(QUICK.clip_lo, QUICK.clip_hi)),
                  ds.quality, n_boot=10, n_perm=10)
    assert report.data_claims(QUICK, st, source="x")[0].note.startswith("0 proposers")
