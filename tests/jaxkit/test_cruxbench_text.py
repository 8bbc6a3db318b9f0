"""CruxBench with text: model replies parsed on fixed strings (JSON, numbered lines, the
fallback), validation, the content VOI against its closed form, the reply cache replayed
with no model, the soft failure without a model, and claims that can say no."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from jaxkit.cruxbench import report
from jaxkit.cruxbench import text as T
from jaxkit.cruxbench.config import QUICK, Config
from jaxkit.cruxbench.results import ProposerText, TextRun
from jaxkit.llm import ChatClient

JSON_REPLY = ('Sure:\n[{"question": "Will CPI rise?", "q": 0.4, "p1": 0.7, "p0": 0.2}, '
              '{"question": "", "q": 0.5, "p1": 0.5, "p0": 0.5}]')
LINES_REPLY = ("Here are three questions:\n1. Will the Fed raise interest rates in March? "
               "The answer is yes.\n2) \"Is oil above $90 a barrel?\n- What is GDP?\n"
               "The answer to the question is no.")


def test_parse_reply_json_lines_and_fallback():
    qs, how = T.parse_reply(JSON_REPLY, 3)
    assert how == "json" and qs == [{"text": "Will CPI rise?", "q": 0.4, "p1": 0.7, "p0": 0.2}]
    qs, how = T.parse_reply(LINES_REPLY, 3)
    assert how == "lines"
    assert [q["text"] for q in qs] == ["Will the Fed raise interest rates in March?",
                                       "Is oil above $90 a barrel?", "What is GDP?"]
    assert all(math.isnan(q["q"]) for q in qs)
    assert T.parse_reply(LINES_REPLY, 1)[0][0]["text"].startswith("Will the Fed")
    assert T.parse_reply("I cannot help with that.", 3) == ([], "none")


def test_validate_and_factors():
    target = "Will the US enter a recession in 2027?"
    assert T.validate("Will the Fed raise interest rates in March?", target) == ""
    assert T.validate("What is GDP?", target) == "not yes/no"
    assert T.validate("Will the US enter a recession in 2027?", target) == "restates the target"
    assert T.validate("Will oil rise", target) == "no question mark"
    assert T.validate("Is it?", target) == "length"
    assert T.validate("Will oil rise above $90?", target,
                      ["Will oil rise above $90?"]) == "repeat"
    assert T.factors_of("Will the Fed raise interest rates?") == [0]
    assert T.factors_of("Will CPI inflation and oil prices rise?") == [1, 4]
    assert T.factors_of("Will the Olympics be held?") == []
    assert T.factors_of("Will Brent fall?") == [4]
    assert T.factors_of("Will fedex growth slow?") == [3]  # 'fed' only as a whole word


def test_content_voi_closed_form_and_baseline():
    """At an even price and threshold, E|dp| = asin(rho) / pi (orthant probabilities);
    a question naming no factor is worth nothing; one naming the primary factor is worth
    more than the random-factor baseline."""
    a = T.loadings("inflation", "oil and energy")
    np.testing.assert_allclose(a ** 2, 0.8 * np.array([0.025, 0.6, 0.025, 0.025, 0.25,
                                                       0.025, 0.025, 0.025]), rtol=1e-12)
    v = T.content_voi(a, [[1], [1, 4], []])
    rho = [a[1], (a[1] + a[4]) / math.sqrt(2)]
    np.testing.assert_allclose(v[:2], [math.asin(r) / math.pi for r in rho], atol=1e-5)
    assert v[2] == pytest.approx(0.0, abs=1e-7)
    assert T.random_factor_voi(a) < v[0]
    with pytest.raises(ValueError, match="`primary`"):
        T.loadings("astrology", "inflation")


def _canned(monkeypatch, replies):
    """ChatClient._send answers with ``replies`` (a list of reply lists, one per call) and
    counts the calls; no server, no model."""
    calls = []

    def send(self, body):
        calls.append(body)
        texts = replies[len(calls) - 1]
        return {"choices": [{"message": {"content": t}} for t in texts],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    monkeypatch.setattr(ChatClient, "_send", send)
    return calls


def test_cache_replays_without_the_model(monkeypatch, tmp_path):
    """A run caches every reply; an offline run replays it call for call with the same
    questions and scores and sends nothing; a reply missing from the cache is reported
    in one line, and the claim row then says 'not tested'."""
    url = "http://127.0.0.1:9/v1"  # never contacted: _send is replaced
    calls = _canned(monkeypatch, [[LINES_REPLY], [JSON_REPLY]])
    first = T.propose_all(ChatClient("m", base_url=url, cache=tmp_path), T.TARGETS[:2], n=3)
    assert len(calls) == 2 and first.counts["replies"] == {"json": 1, "lines": 1, "none": 0}
    assert first.counts["questions"] == {"valid": 3, "not yes/no": 1} and first.n_valid == 3
    again = ChatClient("m", base_url=url, cache=tmp_path, offline=True)
    second = T.propose_all(again, T.TARGETS[:2], n=3)
    assert len(calls) == 2 and again.hits == 2 and again.misses == 0
    assert str(second.questions) == str(first.questions)  # NaN stated VOI: by text
    np.testing.assert_array_equal(second.per_target, first.per_target)
    out = T.run_text("m", n_targets=3, n=3, temperatures=(1.0,), samples=1,
                     cache=tmp_path / "empty", offline=True)
    assert out.proposers == {} and "not in the cache" in out.error
    (c,) = report.text_claims(QUICK, out)
    assert c.verdict == "not tested" and "not in the cache" in c.note


def test_text_claim_can_say_yes_and_no():
    def lm(per_target, baseline):
        r = ProposerText(per_target=np.asarray(per_target, float),
                         baseline=np.asarray(baseline), questions=[], how=["lines"],
                         replies=["x"], counts=dict(questions={"valid": 1},
                                                    replies={"json": 0, "lines": 1, "none": 0}))
        return TextRun(model="m", error="", hits=0, misses=0, proposers={"m T=1": r})

    base = [0.08] * 6
    assert report.text_claims(QUICK, lm([0.2, 0.24, 0.22, 0.21, 0.2, 0.23], base)
                              )[0].verdict == "yes"
    # no valid question (NaN: the fallback) counts as VOI 0, below the baseline
    assert report.text_claims(QUICK, lm([np.nan, 0.0, 0.01, np.nan, 0.0, 0.01], base)
                              )[0].verdict == "no"
    md = report.text_markdown(lm([0.2] * 6, base))
    assert "random-factor VOI" in md and "none (fallback)" in md


def test_results_as_dict_and_pickle():
    """The text block's metrics.json mapping (key order included) and a pickle round trip
    (the stage cache)."""
    import pickle

    p = ProposerText(counts=dict(replies={"json": 0, "lines": 1, "none": 0},
                                 questions={"valid": 1}),
                     per_target=np.array([0.2, np.nan]), baseline=np.array([0.1, 0.1]),
                     questions=[dict(target=0, text="Will oil rise?", reason="", factors=[4],
                                     content_voi=0.2, stated_voi=math.nan)],
                     how=["lines"], replies=["1. Will oil rise?"])
    run = TextRun(model="m", error="", hits=1, misses=0, proposers={"m T=0": p})
    d = run.as_dict()
    assert list(d) == ["model", "error", "proposers"]
    assert list(d["proposers"]["m T=0"]) == ["counts", "per_target", "baseline", "questions"]
    assert d["proposers"]["m T=0"]["baseline"] == [0.1, 0.1]
    back = pickle.loads(pickle.dumps(run))
    assert back.as_dict()["proposers"]["m T=0"]["counts"] == p.counts
    np.testing.assert_array_equal(back.proposers["m T=0"].per_target, p.per_target)
    with pytest.raises(AttributeError):
        run.model = "x"  # frozen


def test_config_checks_the_text_settings():
    with pytest.raises(ValueError, match="`lm.targets` must be in"):
        Config().override(["lm.targets=99"])
    with pytest.raises(ValueError, match="`lm.temperatures` must be a non-empty"):
        Config().override(["lm.temperatures="])
    with pytest.raises(ValueError, match="did you mean lm.offline"):
        Config().override(["lm_offline=true"])
    assert QUICK.override(["lm.offline=yes"]).lm == dataclasses.replace(QUICK.lm, offline=True)
    assert QUICK.lm.targets * len(QUICK.lm.temperatures) * QUICK.lm.samples <= 4


@pytest.mark.slow  # one short generation with the real local model, if it is installed
def test_real_model_writes_a_reply(tmp_path):
    from jaxkit.lm import LMError

    try:
        client = ChatClient("smollm2-135m", temperature=0.0, cache=tmp_path)
    except (LMError, ValueError) as exc:
        pytest.skip(f"local model not installed: {exc}")
    r = T.propose_all(client, T.TARGETS[:1], n=2, max_tokens=40)
    assert len(r.replies) == 1 and r.replies[0].strip()
    assert sum(r.counts["replies"].values()) == 1 and r.baseline.shape == (1,)
