"""Contrastive discovery on the Sachs data with explanations from a language model:
protein names parsed from fixed replies, the likelihood tables on a hand-made parent,
the whole comparison with canned replies replayed from the cache without a model, and a
claim row that can say no or 'not tested'."""

from __future__ import annotations

import numpy as np
import pytest

from jaxkit.contrastive import real as RL
from jaxkit.contrastive import report as R
from jaxkit.contrastive.config import QUICK, Config
from jaxkit.llm import ChatClient


def test_parse_names_by_synonym_in_order():
    reply = "1. Mek: This protein regulates the Ras/Raf pathway.\n2. PKC\n3. Erk, mek again"
    assert RL.parse_names(reply, "praf") == ["pmek", "PKC", "p44/42"]  # target excluded
    assert RL.parse_names(reply, "PKA") == ["pmek", "praf", "PKC", "p44/42"]
    assert RL.parse_names("PIP3 and PIP2; akt? JNK!", "P38") == ["PIP3", "PIP2", "pakts473",
                                                                "pjnk"]
    assert RL.parse_names("I do not know.", "PKA") == []
    assert RL.parse_names("mekanism and pkcs", "PKA") == []  # whole words only


def test_tables_favour_the_true_parent():
    """T = P + small noise, P's level shifted per block: the outcome of every block is
    likelier under 'P regulates T' than under an unrelated protein or 'another'."""
    rng = np.random.default_rng(0)
    names = ["P", "T", "U"]
    ends = [200, 400, 600, 800]
    shift = np.repeat([-1.0, -0.3, 0.3, 1.0], 200)
    p = np.exp(shift + 0.3 * rng.normal(size=800))
    t = np.exp(np.log(p) + 0.05 * rng.normal(size=800))
    u = np.exp(rng.normal(size=800))
    ll, y = RL.tables(np.stack([p, t, u], 1), names, ends, "T", ["P", "U"])
    assert ll.shape == (4, 3, 21) and y.shape == (4,)
    np.testing.assert_allclose(np.exp(ll).sum(-1), 1.0, atol=1e-6)
    seen = ll[np.arange(4), :, y]  # (blocks, explanations)
    assert np.all(seen[:, 0] > seen[:, 1]) and np.all(seen[:, 0] > seen[:, 2])


def _canned(monkeypatch, text):
    calls = []

    def send(self, body):
        calls.append(body)
        return {"choices": [{"message": {"content": text}}], "usage": {}}

    monkeypatch.setattr(ChatClient, "_send", send)
    return calls


def test_run_real_with_canned_replies_and_cache_replay(monkeypatch, tmp_path):
    """Ten questions, one call each; a reply naming no protein is filled (counted); the
    offline replay from the cache gives the same answers with no call; the claim row
    reports the comparison, and 'not tested' when replies are missing."""
    url = "http://127.0.0.1:9/v1"
    calls = _canned(monkeypatch, "PKA, PKC and Raf")
    r = RL.run_real(ChatClient("m", base_url=url, cache=tmp_path), budget=3.0, n_orders=4)
    assert len(calls) == 10 and len(r["questions"]) == 10
    q = {x["target"]: x for x in r["questions"]}
    assert q["pmek"]["named"] == ["PKA", "PKC", "praf"] and q["pmek"]["truth_in_set"]
    assert q["praf"]["explanations"] == ["PKA", "PKC", "pmek"] and q["praf"]["filled"] == 1
    assert set(r["summary"]) >= {"contrastive", "random", "shannon-full"}
    assert all(0 <= v <= 1 for v in r["summary"].values())
    again = ChatClient("m", base_url=url, cache=tmp_path, offline=True)
    r2 = RL.run_real(again, budget=3.0, n_orders=4)
    assert len(calls) == 10 and again.hits == 10
    assert [x["answers"] for x in r2["questions"]] == [x["answers"] for x in r["questions"]]
    c = R.real_claim(QUICK, dict(r, error="", model="m", hits=0, misses=10))
    assert c.kind == "extension" and c.verdict in ("yes", "no", "not shown")
    assert "Sachs" in R.real_markdown(dict(r, error="", model="m", hits=0, misses=10))
    miss = RL.run_with_model("m", cache=tmp_path / "empty", offline=True)
    assert "not in the cache" in miss["error"]
    assert R.real_claim(QUICK, miss).verdict == "not tested"


def test_real_claim_can_say_no():
    qs = [dict(correct={"contrastive": 0.0, "random": 0.6}) for _ in range(5)]
    rr = dict(error="", model="m", questions=qs, truth_in_set=0.4, filled=0,
              summary={"contrastive": 0.0, "random": 0.6})
    assert R.real_claim(Config(seeds=2), rr).verdict == "no"
    with pytest.raises(ValueError, match="`real_k`"):
        Config(real_k=11)
