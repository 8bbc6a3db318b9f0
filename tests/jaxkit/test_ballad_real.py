"""Real proposers (issue 61): reply parsing on fixed strings, the reply cache and its
offline replay, batched proposer calls in the search loop, the recorded statistics and
the simulated members calibrated from them. No model is loaded here."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from jaxkit.ballad import search as S_
from jaxkit.ballad.llm import Candidate, LLMError
from jaxkit.ballad.population import Genealogy
from jaxkit.ballad.real_run import calibrated_members, member_stats
from jaxkit.ballad.smol import MEMBERS, Backend, Member, ReplyCache, parse_reply

# ------------------------------------------------------------------ parsing

CLOSED = "Here it is:\n```python\ndef priority(item, bins):\n    return -(bins - item)\n```\nDone."
UNCLOSED = "```python\nimport numpy as np\n\ndef priority(item, bins):\n    return -bins\n"
BARE = "def priority(item, bins):\n    return bins * 0.0\n\nThis packs tightly, because"
BROKEN = "```python\ndef priority(item, bins)\n    return bins\n```"
OTHER = "```python\ndef score(x):\n    return x\n```"


def test_parse_reply_fixed_strings():
    src = parse_reply(CLOSED)
    assert src.startswith("import numpy as np\nimport math\n")
    assert "return -(bins - item)" in src and "Done" not in src
    src = parse_reply(UNCLOSED)
    assert src.count("import numpy as np") == 1 and "return -bins" in src
    src = parse_reply(BARE)
    assert "return bins * 0.0" in src and "because" not in src
    compile(src, "<t>", "exec")
    for bad, why in ((BROKEN, "no parsable"), (OTHER, "no parsable"),
                     ("I cannot help with that.", "no code"), ("", "empty")):
        with pytest.raises(ValueError, match=why):
            parse_reply(bad)


# ------------------------------------------------------------------ the cache


class _Canned(Backend):
    """A backend whose 'model' answers from a list (counts its batched calls)."""

    def __init__(self, cache, replies, **kw):
        super().__init__(cache, **kw)
        self.replies, self.batches = list(replies), []

    def _generate(self, requests, rows, st):
        self.batches.append(len(rows))
        return [dict(key=key, k=k, model=self.model, settings=st, reply=self.replies.pop(0),
                     prompt_tokens=100, completion_tokens=20, finish="stop")
                for _, key, k in rows]


_PARENT = [Candidate(source="import numpy as np\ndef priority(item, bins):\n    return -bins\n")]
_CTX = {"scores": [-4.0], "source_examples": []}


def test_cache_replays_offline_and_a_miss_is_a_failed_call(tmp_path):
    path = tmp_path / "replies.jsonl"
    live = _Canned(ReplyCache(path), [CLOSED, "no code here", UNCLOSED])
    fewshot, free, _ = MEMBERS(live)
    res = fewshot.propose_batch([(_PARENT, _CTX), (_PARENT, _CTX)])  # same prompt twice
    res += free.propose_batch([(_PARENT, _CTX)])
    assert live.batches == [2, 1] and live.misses == 3
    assert isinstance(res[1], LLMError) and res[1].cost == pytest.approx(0.12)
    assert res[0][1] == pytest.approx(0.12)  # (100 + 20) tokens / 1000
    assert len(path.read_text().splitlines()) == 3
    replay = Backend(ReplyCache(path), offline=True)
    again = MEMBERS(replay)
    res2 = again[0].propose_batch([(_PARENT, _CTX), (_PARENT, _CTX)])
    res2 += again[1].propose_batch([(_PARENT, _CTX)])
    assert replay.hits == 3 and replay.misses == 0
    assert res2[0][0][0].source == res[0][0][0].source
    assert res2[2][0][0].source == res[2][0][0].source
    assert isinstance(res2[1], LLMError)
    # a fourth identical request is a new occurrence: not in the cache -> failed call
    with pytest.raises(LLMError, match="offline replay"):
        again[1].propose(_PARENT, _CTX)
    # each record names the model and its sampling settings
    rec = json.loads(path.read_text().splitlines()[2])
    assert rec["settings"] == {"temperature": 1.0, "top_p": 0.95, "max_tokens": 128}


def test_bad_member_and_cache_inputs(tmp_path):
    with pytest.raises(ValueError, match="`mode`"):
        Member("x", "sideways", 0.0, Backend(ReplyCache(tmp_path / "c.jsonl")))
    with pytest.raises(ValueError, match="is a folder"):
        ReplyCache(tmp_path)


# ------------------------------------------------------------------ batched search


class _Batch:
    name, cost = "batch", 1.0

    def __init__(self):
        self.calls = []

    def propose_batch(self, requests):
        self.calls.append(len(requests))
        return [([Candidate(source="x" * (len(p[0].source or "") + 1))], 1.0)
                for p, _ in requests]

    def propose(self, parents, context):  # pragma: no cover - the loop must batch
        raise AssertionError("called one by one")


def _length(cands):
    return [None if c is None else S_.EvalOutcome(True, float(len(c.source))) for c in cands]


def test_search_calls_a_batching_proposer_once_per_step():
    prop = _Batch()
    routers = [S_.Router("only batch", kind="fixed", arm=0), S_.Router("u", kind="uniform")]
    logs = S_.search(_length, [prop], routers, [0, 1, 2], init=[Candidate(source="ab")],
                     n_calls=3)
    assert prop.calls == [6, 6, 6]
    assert all(log.best[-1] >= 3.0 and log.cost[-1] == 3.0 for log in logs)


# ------------------------------------------------------------------ statistics


def _log(scores, parents, models, oks, costs, errors):
    g = Genealogy()
    g.add(Candidate(source="root"), -5.0)
    for s, p, m, ok, c, e in zip(scores, parents, models, oks, costs, errors, strict=True):
        g.add(Candidate(source=f"c{s}"), s, ok=ok, parents=p, model=m, step=len(g.nodes) - 1,
              cost=c, error=e)
    n = len(scores)
    return S_.RunLog("r", 0, g, np.zeros(n), np.zeros(n), np.zeros(n, np.int32))


def test_member_stats_and_calibration():
    log = _log([-4.0, -6.0, -np.inf, -4.0], [(0,), (0,), (0,), (1,)], [0, 0, 1, 1],
               [True, True, False, True], [0.5, 0.5, 0.3, 0.3],
               [None, None, "no code in reply", None])
    st = member_stats([log], ["a", "b"], baseline=-4.5)
    a, b = st["a"], st["b"]
    assert (a["calls"], a["failure_rate"], a["improve_rate"], a["beats_rate"],
            a["novelty"], a["tokens"]) == (2, 0.0, 0.5, 0.5, 1.0, 0.5)
    assert (b["failure_rate"], b["improve_rate"], b["novelty"]) == (0.5, 0.0, 0.0)
    assert b["errors"] == {"no code in reply": 1} and a["new_beats_rate"] == 0.5
    assert a["copy_rate"] == 0.0
    sims = calibrated_members(st, 100.0)
    assert [s.name for s in sims] == ["sim-a", "sim-b"]
    assert sims[0].editor.model.step == pytest.approx(0.32)
    assert sims[1].editor.model.fail_prob == 0.5 and sims[1].cost == pytest.approx(0.3)
    # a calibrated member edits best fit's terms when its parent is a model's free program
    rng = np.random.default_rng(0)
    (child,), cost = sims[0].propose([Candidate(source=CLOSED)],
                                     {"rng": rng, "step": 0, "budget": 4})
    assert "def priority" in child.source and cost == pytest.approx(0.5)


# ------------------------------------------------------------------ the shift, measured


def _shift_res(improved):
    S = len(improved)
    arms = np.tile(np.array([0, 1, 0, 1, 0, 1, 0, 1]), (S, 1))
    return SimpleNamespace(routers=["uniform"], models=["a", "b"], n_seeds=S, arms=arms,
                           improved=np.array(improved, bool), problem="p")


def test_shift_claim_is_measured_per_window():
    from jaxkit.ballad.real_run import shift_claim

    # a improves early, b late, on every seed: the best member shifts -> yes
    swap = [[1, 0, 1, 0, 0, 1, 0, 1], [1, 0, 1, 0, 0, 1, 0, 0], [1, 0, 0, 0, 0, 1, 0, 1],
            [1, 0, 1, 0, 0, 0, 0, 1]]
    assert shift_claim(_shift_res(swap)).verdict == "yes"
    # a best throughout: no shift
    same = [[1, 0, 1, 0, 1, 0, 1, 0]] * 4
    c = shift_claim(_shift_res(same))
    assert c.verdict == "no" and "a best" in c.measured
    # nobody ever improves: nothing to shift, not a "no"
    assert shift_claim(_shift_res([[0] * 8] * 4)).verdict == "not tested at this size"


def test_moved_tells_a_vacuous_comparison():
    from jaxkit.ballad.real_run import moved

    res = SimpleNamespace(routers=["only a", "only b", "ballad"], n_seeds=2, baseline_test=4.0,
                          test=[4.0, 4.0, 4.0, 4.0, 3.0, 3.0])
    assert not moved(res)  # only Ballad moved: the members alone all equal the heuristic
    res.test = [4.0, 3.9, 4.0, 4.0, 3.0, 3.0]
    assert moved(res)


# ------------------------------------------------------------------ the user's plug-in

_GOOD = """CAPACITY = 10.0
TRAIN = [[1, 2, 3], [4, 5, 6], [2, 2, 2], [3, 3, 3]]
TEST = [[9, 1, 1]]
DESCRIPTION = "Pack boxes."
"""


def test_plugin_loads_and_splits_validation_from_train(tmp_path):
    from jaxkit.ballad.plugin import load_plugin

    f = tmp_path / "boxes.py"
    f.write_text(_GOOD)
    p = load_plugin(f)
    assert (p.name, p.capacity, p.description) == ("boxes", 10.0, "Pack boxes.")
    assert p.val.tolist() == [[1, 2, 3], [4, 5, 6]] and p.train.shape == (2, 3)
    assert p.test.tolist() == [[9, 1, 1]]
    from jaxkit.ballad.config import QUICK

    assert QUICK.margin("plugin:tsp (real models)") == QUICK.margin_plugin == 0.02
    assert QUICK.margin("tsp") == QUICK.margin_tsp


@pytest.mark.parametrize("text, why", [
    ("TRAIN = [[1, 2]]\nTEST = [[1, 2]]", "defines no `CAPACITY`"),
    ("CAPACITY = -1\nTRAIN = [[1, 2]]\nTEST = [[1, 2]]", "`CAPACITY` must be a positive"),
    ("CAPACITY = 5\nTRAIN = [[1, 2], [1, 9]]\nTEST = [[1, 2]]", r"`TRAIN`\[1\]\[1\] = 9.0"),
    ("CAPACITY = 5\nTRAIN = [[1, 2], [1, 2, 3]]\nTEST = [[1, 2]]", "one length"),
    ("CAPACITY = 5\nTRAIN = [[1, 2], [2, 2]]\nTEST = [[2, 2]]", "held out"),
    ("CAPACITY = 5\nTRAIN = [[1, 2], [2, 2]]\nTEST = [[1, 3]]\nEVALUATOR = 'tsp'",
     "`EVALUATOR`"),
    ("CAPACITY = 5\nTRAIN = [[1, 2]]\nTEST = [[1, 3]]", "give `VAL`"),
    ("import nosuchmodule_xyz\n", "cannot be imported"),
])
def test_plugin_errors_are_one_line_naming_the_file(tmp_path, text, why):
    from jaxkit.ballad.config import QUICK

    f = tmp_path / "mine.py"
    f.write_text(text)
    with pytest.raises(ValueError, match=why) as e:
        QUICK.override([f"real.plugin={f}"])
    assert "\n" not in str(e.value) and "mine.py" in str(e.value)
    assert str(e.value).startswith("`real.plugin`: ")


def test_or_library_classes_only(tmp_path):
    from jaxkit.ballad.config import QUICK, RealSettings

    with pytest.raises(ValueError, match="^`real.items` must be an OR-Library u class"):
        QUICK.override(["real.problem=binpacking_or", "real.items=200"])
    cfg = QUICK.override(["real.problem=binpacking_or", "real.items=120"])
    assert cfg.real == RealSettings(problem="binpacking_or", calls=3, seeds=1, items=120)
    with pytest.raises(ValueError, match="^`items` must be an OR-Library u class"):
        RealSettings(problem="binpacking_or", items=200)  # the section alone: its own name


def test_sections_by_dotted_path_and_toml(tmp_path):
    """The http / program / real settings are sections: a dotted path changes one field
    (the others keep QUICK's values), a section's check names the dotted path, an old
    flat name suggests the dotted one, and --show-config's TOML reads back the same."""
    from jaxkit.ballad.config import QUICK, Config, ProgramSettings

    cfg = QUICK.override(["real.calls=5", "program.bug_prob=0.5", "http.timeout=3"])
    assert (cfg.real.calls, cfg.real.seeds, cfg.real.items) == (5, 1, 200)
    assert cfg.program == ProgramSettings(calls=6, seeds=1, items=200, bug_prob=0.5,
                                          timeout=5.0)
    assert cfg.http.timeout == 3.0 and cfg.seeds == QUICK.seeds
    with pytest.raises(ValueError, match=r"^`program.bug_prob` must be in \[0, 1\]; got 2"):
        QUICK.override(["program.bug_prob=2"])
    with pytest.raises(ValueError, match="^`real.seeds` must be >= 1; got 0"):
        QUICK.merged({"real": {"seeds": 0}})
    with pytest.raises(ValueError, match="unknown field `real_calls`.*did you mean real.calls"):
        QUICK.override(["real_calls=3"])
    toml = tmp_path / "c.toml"
    toml.write_text(cfg.to_toml())
    text = toml.read_text()
    assert "[http]" in text and "[program]" in text and "[real]" in text
    assert Config.from_toml(toml) == cfg


# ------------------------------------------------------------------ the stage, replayed

_GOOD_REPLIES = ["```python\ndef priority(item, bins):\n    return -(bins - item) ** 2\n```",
                 "no code", "```python\ndef priority(item, bins):\n    return bins * 0.0\n```"]


def test_real_stage_replays_from_its_cache(tmp_path, monkeypatch):
    """A tiny live run (a canned 'model') writes the cache; the same run offline replays
    it call for call (same arms, costs and test values); the claims and the report work
    on its result."""
    from dataclasses import replace

    import jax

    from jaxkit.ballad import real_run, report
    from jaxkit.ballad.config import QUICK

    cfg = replace(QUICK, train_instances=1, val_instances=1, test_instances=2,
                  program=replace(QUICK.program, timeout=20.0),
                  real=replace(QUICK.real, calls=1, seeds=2, items=12,
                               cache=str(tmp_path / "r.jsonl")))
    keys = {k: jax.random.fold_in(jax.random.key(3), i)
            for i, k in enumerate(("train", "val", "test", "search"))}
    canned = lambda cache, offline: _Canned(cache, _GOOD_REPLIES * 200)  # noqa: E731
    monkeypatch.setattr(real_run, "Backend", canned)
    monkeypatch.setattr(real_run, "DEFAULT_CACHE", tmp_path / "no-shipped-replies.jsonl")
    live = real_run.search_real(cfg, keys)
    monkeypatch.setattr(real_run, "Backend", Backend)  # the real one, offline below
    again = real_run.search_real(replace(cfg, real=replace(cfg.real, offline=True)), keys)
    assert live.cache_misses > 0 and again.cache_misses == 0
    assert again.cache_hits == live.cache_misses
    np.testing.assert_array_equal(again.arms, live.arms)
    np.testing.assert_allclose(again.cost, live.cost)
    np.testing.assert_allclose(again.test, live.test)
    st = again.stats
    assert set(st) == {"smol-fewshot", "smol-free", "smol-fewshot-hot"}
    assert all(0 <= s["failure_rate"] <= 1 for s in st.values())
    assert len(again.l1_test) == 2 and all(b >= 1 for b in again.l1_test)
    rows = report.claims([again], cfg, simulated=False)
    assert any("costlier" in c.claim and c.verdict != "not tested" for c in rows)
    assert real_run.shift_claim(again).verdict in ("yes", "no", "not shown",
                                                   "not tested at this size")
    from jaxkit.ballad.real_run import run_claims as _claims

    paper = [c for c in _claims([], [], again, cfg) if c.kind == "paper"]
    assert sum(c.claim.startswith("The optimal LLM shifts") for c in paper) == 1
    assert all(c.verdict != "not tested" for c in paper if "costlier" in c.claim)
    lines, metrics = real_run.real_section(again)
    assert "copied a parent" in "\n".join(lines) and metrics["cache_misses"] == 0
    # offline with an empty cache: every real call fails, the run still completes
    empty = real_run.search_real(replace(cfg, real=replace(
        cfg.real, offline=True, seeds=1, cache=str(tmp_path / "none.jsonl"))), keys)
    assert all(s["failure_rate"] == 1.0 for s in empty.stats.values())
    assert all(s["errors"] == {"not in the cache": s["calls"]}
               for s in empty.stats.values())


def test_a_copy_is_spotted_up_to_docstrings_annotations_and_layout():
    from jaxkit.ballad.real_run import _shape

    a = 'import numpy as np\n\ndef priority(item: float, bins: np.ndarray) -> np.ndarray:\n' \
        '    """Best fit."""\n    return -(bins - item)\n'
    b = "def priority(item, bins):\n    # tight\n    return -(bins-item)\n"
    c = "def priority(item, bins):\n    return -(bins - item) ** 2\n"
    assert _shape(a) == _shape(b) != _shape(c)
    assert _shape("not python (") is None


@pytest.mark.slow
def test_the_real_model_answers_a_batch_and_it_is_cached(tmp_path):
    """SmolLM2-135M itself (slow: loads and compiles the model): two requests in one
    batch, each reply recorded with its token counts, replayed offline."""
    from jaxkit.lm import LMError
    from jaxkit.lm.gguf_file import resolve

    try:
        resolve("smollm2-135m")
    except LMError:
        pytest.skip("SmolLM2-135M is not installed")
    backend = Backend(ReplyCache(tmp_path / "r.jsonl"))
    member = Member("tiny", "free", 1.0, backend, top_p=0.95, max_tokens=8)
    res = member.propose_batch([(_PARENT, _CTX), (_PARENT, _CTX)])
    assert backend.misses == 2 and len(res) == 2
    recs = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [r["k"] for r in recs] == [0, 1]
    assert all(0 < r["completion_tokens"] <= 8 and r["prompt_tokens"] > 50 for r in recs)
    replay = Member("tiny", "free", 1.0, Backend(ReplyCache(tmp_path / "r.jsonl"),
                                                 offline=True), top_p=0.95, max_tokens=8)
    again = replay.propose_batch([(_PARENT, _CTX), (_PARENT, _CTX)])
    assert [type(r) for r in again] == [type(r) for r in res]
