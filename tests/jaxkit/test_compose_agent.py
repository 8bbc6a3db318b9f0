"""AIRA-Compose's language-model agent: parsing of replies, the fallback count, replay
from the reply cache with the model never called, the agent's claim rows and their
negative control, and the user's own strings (validation, stage-2 plan, tiny corpora).
One brief real-model test (slow)."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from jaxkit.compose import experiments as E
from jaxkit.compose import report as R
from jaxkit.compose.agent import AgentSearch, Proposer, agent_messages, parse_proposals
from jaxkit.compose.config import QUICK
from jaxkit.compose.results import SearchRun
from jaxkit.lm import replies as lm_replies

CFG = dataclasses.replace(QUICK, budget=8, search_seeds=3, search_batch=4,
                          policies=("random", "evolution", "agent"),
                          agent=dataclasses.replace(QUICK.agent, seeds=2),
                          promote_seeds=2)


def _loss(s: str) -> float:
    """A synthetic landscape over strings: lower with more D and alternation."""
    alternations = sum(a != b for a, b in zip(s[:-1], s[1:], strict=True))
    return 3.0 - 0.05 * s.count("D") - 0.02 * alternations


def _evaluate(new, rnd):
    return {s: _loss(s) for s in new}


def test_parse_replies_of_fixed_strings():
    reply = ("Here are some:\n1. AMDAMD\n2. `MMDDAA` - good\nA M D D M A\n- DDDDDD.\n"
             "AMDAMDX\nAMSAMS\nI think AMDAMD\nmad dam\nAMD\n")
    valid, bad = parse_proposals(reply, 6, "AMD")
    assert valid == ["AMDAMD", "MMDDAA", "AMDDMA", "DDDDDD"]
    # AMDAMDX (7 letters), AMSAMS (S outside the alphabet), the repeated AMDAMD and AMD
    assert bad == 4
    # the run's history is excluded; lower-case prose never counts
    assert parse_proposals("AMDAMD\nMMMMMM", 6, "AMD", exclude=["AMDAMD"]) == (["MMMMMM"], 1)
    assert parse_proposals("made a mad dam", 4, "AMD") == ([], 0)
    assert parse_proposals("", 6, "AMD") == ([], 0)


def test_prompt_shows_the_best_of_the_history():
    hist = [(f"{'AMD'[i % 3]}" * 6, 3.0 + i / 10) for i in range(20)]
    msgs = agent_messages(hist, 6, "AMD", 4, shown=5)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    # the worked exchange: valid strings of the grammar, no loss of this run
    demo, _ = parse_proposals(msgs[2]["content"], 6, "AMD")
    assert len(demo) == 3 and "3.000" not in msgs[1]["content"]
    user = msgs[-1]["content"]
    assert "Evaluated so far (20; the best 5 shown" in user
    assert user.index("AAAAAA 3.000") < user.index("MMMMMM 3.100")
    assert "DDDDDD 3.500" not in user and "Propose 4 new strings of 6 letters" in user
    assert "D = Mamba-2" in msgs[0]["content"]


def test_fallbacks_are_counted():
    rng = np.random.default_rng(0)
    a = AgentSearch(6, "AMD")
    got = a.accept("AMDAMD\nAMDAMD\nAXDAMD", 3, rng)
    assert got[0] == "AMDAMD" and len(set(got)) == 3
    assert all(len(s) == 6 and set(s) <= set("AMD") for s in got)
    c = a.counts()
    assert (c["proposed"], c["fallbacks"], c["invalid"]) == (1, 2, 2)
    for s in got:
        a.tell(s, _loss(s))
    # a failed call: every proposal of the round is a fallback, never a repeat
    got2 = a.accept(None, 4, rng)
    assert not set(got2) & set(got) and len(set(got2)) == 4
    c = a.counts()
    assert (c["fallbacks"], c["failed_calls"]) == (6, 1)
    assert c["fallback_rate"] == pytest.approx(6 / 7)


def _canned(requests, rows, st):
    """Stands in for the model: proposes D-rich strings (valid ones and one bad line)."""
    return [dict(key=key, k=k, model="smollm2-135m", settings=st, reply=f"DMDMD{'AMD'[k % 3]}\n"
                 f"DDMDDM\nAMSAMS\nDADADA", prompt_tokens=10, completion_tokens=12,
                 finish="stop") for _, key, k in rows]


def test_agent_search_replays_from_the_cache_without_the_model(tmp_path, monkeypatch):
    cache = tmp_path / "replies.jsonl"
    calls = []
    from jaxkit.compose import agent

    monkeypatch.setattr(agent, "DEFAULT_CACHE", tmp_path / "no-shipped-replies.jsonl")
    monkeypatch.setattr(lm_replies.Backend, "_generate",
                        lambda self, req, rows, st: calls.append(len(rows)) or
                        _canned(req, rows, st))
    key = jax.random.key(0)
    first = E._search_all(CFG, key, _evaluate, Proposer(cache=str(cache)))
    # one batched call per round for both agent seeds: budget 8 / 4 per round
    assert calls == [2, 2]
    assert len(first["runs"]["agent"]) == 2 and len(first["runs"]["random"]) == 3
    ag = first["runs"]["agent"][0].agent
    assert ag["proposed"] + ag["fallbacks"] == CFG.budget and ag["proposed"] == 3
    assert first["agent"]["misses"] == 4 and first["agent"]["hits"] == 0
    assert len(cache.read_text().splitlines()) == 4

    def boom(*a):
        raise AssertionError("the model was called on a replay")

    monkeypatch.setattr(lm_replies.Backend, "_generate", boom)
    again = E._search_all(CFG, key, _evaluate, Proposer(cache=str(cache), offline=True))
    assert again["agent"]["hits"] == 4 and again["agent"]["misses"] == 0
    assert again["runs"] == first["runs"]
    # offline with an empty cache: every call fails, every proposal is a counted fallback
    empty = E._search_all(CFG, key, _evaluate,
                          Proposer(cache=str(tmp_path / "none.jsonl"), offline=True))
    c = [r.agent for r in empty["runs"]["agent"]]
    assert all(x["fallbacks"] == CFG.budget and x["failed_calls"] == 2 for x in c)
    assert all(len(set(r.strings)) == CFG.budget for r in empty["runs"]["agent"])


def test_new_replies_go_to_the_users_file_not_the_package(tmp_path, monkeypatch):
    """The committed replies are read (a hit) and never appended to: a miss is written to
    the run's own file."""
    from jaxkit.compose.agent import DEFAULT_CACHE

    before = DEFAULT_CACHE.read_bytes()
    shipped = json.loads(before.splitlines()[0])
    monkeypatch.setattr(lm_replies.Backend, "_generate",
                        lambda self, req, rows, st: _canned(req, rows, st))
    p = Proposer(out_dir=tmp_path)
    assert p.client.cache.get(shipped["key"], shipped["k"]) == shipped
    p.complete([[{"role": "user", "content": "a request nobody recorded"}]])
    assert DEFAULT_CACHE.read_bytes() == before
    assert len((tmp_path / "agent-replies.jsonl").read_text().splitlines()) == 1


def test_committed_quick_cache_is_readable():
    from jaxkit.compose.agent import DEFAULT_CACHE

    recs = [json.loads(x) for x in DEFAULT_CACHE.read_text().splitlines()]
    assert len(recs) >= QUICK.agent.seeds and all(r["model"] == "smollm2-135m" for r in recs)
    assert {r["settings"]["max_tokens"] for r in recs} == {QUICK.agent.max_tokens}


def _results(agent_gain: float, seeds: int = 4, noise: float = 0.01):
    """Stage-1 and stage-2 results with promoted bests: the agent's test loss is
    ``agent_gain`` below every other policy's, per search seed."""
    rng = np.random.default_rng(3)
    pols = ("random", "evolution", "bandit-ducb", "agent")
    runs = {p: [SearchRun(best_loss=3.0, best="AMDAMD", best_curve=[3.0], strings=["AMDAMD"],
                          losses=[3.0], pulls=[],
                          agent=dict(proposed=6, fallbacks=2, invalid=1, failed_calls=0,
                                     fallback_rate=0.25) if p == "agent" else None)
                for _ in range(seeds)] for p in pols}
    s1 = dict(runs=runs, exhaustive=False, table={"AMDAMD": 3.0},
              agent=dict(model="smollm2-135m", endpoint="", cache="c", hits=8, misses=0))
    base = 3.0 + 0.05 * rng.standard_normal(seeds)  # a per-seed difficulty
    promoted = {f"promoted:{p}/{i}": dict(string="AMDAMD", bpb=[[float(
        base[i] + noise * rng.standard_normal() - (agent_gain if p == "agent" else 0))]])
        for p in pols for i in range(seeds)}
    return s1, dict(promoted=promoted)


def test_agent_claims_and_negative_control():
    cfg = QUICK
    s1, s2 = _results(0.1)
    rows = R._agent_rows(cfg, s1, s2)
    assert [c.kind for c in rows] == ["paper", "extension", "extension"]
    assert all(c.verdict == "yes" for c in rows)
    assert "fallback rate 25%" in rows[0].note and "Holm over 2" in rows[1].test
    assert R.promoted_final(s2, "agent")[0] < R.promoted_final(s2, "random")[0]
    # negative control: an agent no better than random search is never a "yes"
    for seed in range(5):
        rng_gain = np.random.default_rng(seed).normal(0, 0.002)
        s1, s2 = _results(rng_gain, noise=0.02)
        assert all(c.verdict in ("no", "not shown") for c in R._agent_rows(cfg, s1, s2))
    # worse than random: "no"
    s1, s2 = _results(-0.2)
    assert R._agent_rows(cfg, s1, s2)[0].verdict == "no"
    # no promoted strings, or no agent: the paper row is not tested
    assert R._agent_rows(cfg, s1, {})[0].verdict == "not tested"
    md = "\n".join(R._agent_markdown(cfg, *_results(0.1)))
    assert "fallback rate 25%" in md and "| agent | 4 |" in md
    s1, s2 = _results(0.1)
    s1["agent"].update(offline=True, hits=0, misses=8)
    md = "\n".join(R._agent_markdown(cfg, s1, s2))
    assert "not in it (offline: failed calls): 8" in md and "generated" not in md


def test_user_strings_are_validated_and_planned(tmp_path):
    with pytest.raises(ValueError, match=r"`strings`.*'AMXAMD'"):
        QUICK.override(["strings=AMDAMD,AMXAMD"])
    with pytest.raises(ValueError, match=r"`strings`.*'AMD'.*depth=6"):
        QUICK.override(["strings=AMD"])
    cfg = QUICK.override(["strings=DDDDDD,AMDAMD"])
    s1 = dict(runs={p: [SearchRun.from_history(["MMMMMM"], [3.0])] * 3
                    for p in cfg.policies})
    plan = E.stage2_plan(cfg, s1)
    assert plan["user1"] == "DDDDDD" and plan["user2"] == "AMDAMD"
    assert plan["user1@3"] == "DDD"
    assert plan["promoted:agent/2"] == "MMMMMM"
    assert sum(k.startswith("promoted:") for k in plan) == 3 * len(cfg.policies)


def test_tiny_user_corpus_is_a_one_line_error(tmp_path):
    from jaxkit.compose.pipeline import corpus_of

    p = tmp_path / "tiny.txt"
    p.write_bytes(b"to be or not to be\n" * 10)
    with pytest.raises(ValueError, match="tiny.txt") as e:
        corpus_of(QUICK.override([f"text={p}"]))
    assert "\n" not in str(e.value)
    p.write_bytes(b"to be or not to be\n" * 200)
    cfg = QUICK.override([f"text={p}"])
    assert corpus_of(cfg).plays == ("tiny.txt",)
    assert str(p) in R.corpus_description(cfg)


@pytest.mark.slow
def test_real_model_proposes(tmp_path):
    """SmolLM2 itself (if installed): one batched round of two requests, parsed."""
    pr = Proposer(cache=str(tmp_path / "r.jsonl"), max_tokens=24)
    try:
        replies = pr.complete([agent_messages([("AMDAMD", 3.1)], 6, "AMD", 2)] * 2)
    except Exception as e:  # noqa: BLE001 - no model installed
        pytest.skip(f"no local model: {e}")
    assert len(replies) == 2 and all(isinstance(r, str) for r in replies)
    assert pr.misses == 2
    for r in replies:
        valid, _ = parse_proposals(r, 6, "AMD")
        assert all(len(s) == 6 for s in valid)


def test_stage1_trains_user_strings_once_and_runs_the_agent(monkeypatch, tmp_path):
    """Stage 1 on a space too large to tabulate (729 strings), training faked by the
    synthetic landscape: the user's strings are trained first (and never again), every
    round trains only new strings, the agent's replies come from the cache."""
    from types import SimpleNamespace

    trained = []

    def fake_train(key, arch, strings, corpus, s, **kw):
        trained.append(list(strings))
        return SimpleNamespace(val_bpb=np.asarray([[_loss(x) for x in strings]]),
                               tokens_per_s=1.0, flops_per_s=1.0, compile_s=0.0)

    monkeypatch.setattr(E, "train_candidates", fake_train)
    monkeypatch.setattr(lm_replies.Backend, "_generate",
                        lambda self, req, rows, st: _canned(req, rows, st))
    from jaxkit.compose import agent

    monkeypatch.setattr(agent, "DEFAULT_CACHE", tmp_path / "no-shipped-replies.jsonl")
    cfg = dataclasses.replace(CFG, strings=("DDDDDD", "AMAMAM"))
    s1 = E.stage1(jax.random.key(0), cfg, None,
                  proposer=Proposer(cache=str(tmp_path / "r.jsonl")))
    assert not s1["exhaustive"] and trained[0] == ["DDDDDD", "AMAMAM"]
    assert s1["user"] == {"DDDDDD": _loss("DDDDDD"), "AMAMAM": _loss("AMAMAM")}
    flat = [x for t in trained for x in t]
    assert len(flat) == len(set(flat)) == len(s1["table"])  # nothing trained twice
    assert all(len(r.strings) == cfg.budget for runs in s1["runs"].values() for r in runs)
    assert s1["agent"]["misses"] == 4 and len(s1["runs"]["agent"]) == 2
    md = "\n".join(R._agent_markdown(cfg, s1, {}))
    assert "user1 `DDDDDD`" in md and "generated: 4" in md


def test_endpoint_backend_replays_its_folder_cache(tmp_path):
    """An OpenAI-compatible endpoint goes through jaxkit.llm.ChatClient: a cached
    response is used with no server; a missing one offline is a failed call."""
    from jaxkit.llm import ChatClient

    msgs = agent_messages([], 6, "AMD", 2)
    pr = Proposer("some-model", endpoint="http://127.0.0.1:9/v1", cache=str(tmp_path),
                  offline=True)
    assert pr.complete([msgs]) == [None] and "offline replay" in pr.failures[0]
    # record the response the client would have received, under the client's own key
    body = {"model": "some-model", "messages": msgs, "temperature": 0.0,
            "max_tokens": 48, "top_p": 0.95}
    digest = ChatClient("some-model", base_url="http://127.0.0.1:9/v1")._digest(body)
    (tmp_path / f"{digest[:32]}-0.json").write_text(json.dumps(
        {"choices": [{"message": {"content": "DDMMAA\nAMDAMD"}}]}))
    pr = Proposer("some-model", endpoint="http://127.0.0.1:9/v1", cache=str(tmp_path),
                  offline=True)
    assert pr.complete([msgs]) == ["DDMMAA\nAMDAMD"] and pr.hits == 1
