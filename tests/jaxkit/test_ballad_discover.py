"""``jaxkit ballad discover``: LLM-driven heuristic discovery against the local recorded
chat-completion server (``llm_server`` of conftest.py) and the real sandbox."""

from __future__ import annotations

import ast
import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from jaxkit.ballad import reference
from jaxkit.ballad.discover import BEST_FIT_SOURCE, discover, weibull_items
from jaxkit.ballad.llm import LLMError, OpenAIChat
from jaxkit.cli import app

ITEMS = weibull_items(0, 2, 1000)  # FunSearch's heuristic beats best fit on these
PRICES = {  # dollars per 1M tokens (in, out); usage is in data/llm_responses.json
    "funsearch-model": (2.0, 8.0),
    "chatty-model": (1.0, 4.0),
    "broken-model": (3.0, 3.0),
    "crash-model": (0.5, 1.5),
}
USAGE = {"funsearch-model": (1500, 400), "crash-model": (1100, 60),
         "chatty-model": (900, 40)}  # a reply with no code still costs its tokens
runner = CliRunner()


def _pool(srv, models=tuple(PRICES), **kw):
    return [OpenAIChat(m, base_url=srv.url, price_in=PRICES.get(m, (0, 0))[0],
                       price_out=PRICES.get(m, (0, 0))[1], **kw) for m in models]


def _load(d):
    return json.loads((d / "population.json").read_text())


def _ref_excess(source: str, items: np.ndarray) -> float:
    ns: dict = {}
    exec(compile(source, "<best>", "exec"), ns)
    used = [reference.online_binpack(ns["priority"], row, 100.0) for row in items]
    return float(np.mean([reference.binpack_excess(u, row, 100.0)
                          for u, row in zip(used, items, strict=True)]))


def _user_prompt(req) -> str:
    return req["body"]["messages"][1]["content"]


def test_discover_records_every_node(llm_server, tmp_path):
    snapshots = []

    def progress(t, node):  # the file is already saved when the callback runs
        pop = _load(tmp_path)
        assert len(pop["nodes"]) == t + 2 and pop["nodes"][-1] == node
        snapshots.append(pop)

    s = discover(_pool(llm_server), router="uniform", calls=6, seed=0, items=ITEMS,
                 capacity=100.0, timeout=20, out_dir=tmp_path, progress=progress)
    pop = _load(tmp_path)
    nodes = pop["nodes"]
    assert len(nodes) == 7 and [n["id"] for n in nodes] == list(range(7))
    # the step-by-step record equals the final one rebuilt from search()'s genealogy
    assert snapshots[-1]["nodes"] == nodes

    root = nodes[0]
    assert root["parents"] == [] and root["model"] is None and root["step"] == -1
    assert root["ok"] and root["source"] == BEST_FIT_SOURCE and root["cost"] == 0
    assert root["excess"] == pytest.approx(_ref_excess(BEST_FIT_SOURCE, ITEMS))

    seen = {n["model"] for n in nodes[1:]}
    assert seen == set(PRICES), f"seed 0 no longer calls every model: {seen}"
    requests = llm_server.requests
    assert len(requests) == 6
    for n, req in zip(nodes[1:], requests, strict=True):
        assert n["step"] == n["id"] - 1 and req["body"]["model"] == n["model"]
        assert 1 <= len(n["parents"]) <= 2
        for p in n["parents"]:
            assert p < n["id"] and nodes[p]["ok"]
            # the parent ids are right: their sources are what the model was shown
            assert nodes[p]["source"].rstrip() in _user_prompt(req)
        if n["model"] == "funsearch-model":
            assert n["ok"] and n["error"] is None and n["excess"] < root["excess"]
            assert "FunSearch" in n["source"]
        else:
            assert not n["ok"] and n["score"] is None and n["excess"] is None
        if n["model"] == "chatty-model":
            assert "no parsable code" in n["error"] and n["source"] is None
        elif n["model"] == "broken-model":
            assert "HTTP 500" in n["error"] and "internal server error" in n["error"]
        elif n["model"] == "crash-model":  # parsed fine, crashed in the sandbox
            assert n["error"] == "ValueError: recorded crash" and "raise" in n["source"]
        # cost = usage * prices, also for a reply with no parsable code; an HTTP error
        # costs nothing
        pin, pout = PRICES[n["model"]]
        tin, tout = USAGE.get(n["model"], (0, 0))
        assert n["cost"] == pytest.approx((tin * pin + tout * pout) / 1e6)

    calls = {m: sum(n["model"] == m for n in nodes) for m in seen}
    assert s["calls_per_model"] == calls and s["calls"] == 6
    assert s["failures"] == sum(not n["ok"] for n in nodes)
    assert s["total_cost"] == pytest.approx(sum(n["cost"] for n in nodes))
    assert s["total_cost"] == pytest.approx(
        calls["funsearch-model"] * (1500 * 2.0 + 400 * 8.0) / 1e6
        + calls["crash-model"] * (1100 * 0.5 + 60 * 1.5) / 1e6
        + calls["chatty-model"] * (900 * 1.0 + 40 * 4.0) / 1e6)

    best = (tmp_path / "best.py").read_text()
    tree = ast.parse(best)
    assert any(isinstance(f, ast.FunctionDef) and f.name == "priority" for f in tree.body)
    assert s["best_model"] == "funsearch-model" and pop["best"] == s["best_id"]
    assert s["best_excess"] == pytest.approx(_ref_excess(best, ITEMS))
    assert s["best_excess"] < s["baseline_excess"] == pytest.approx(root["excess"])
    report = (tmp_path / "report.md").read_text()
    assert "funsearch-model" in report and "total cost" in report
    assert sorted(os.listdir(tmp_path)) == ["best.py", "population.json", "report.md"]


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_killed_run_resumes(llm_server, tmp_path):
    pool = _pool(llm_server, ("funsearch-model", "chatty-model"))

    def kill_after_two(t, node):
        if t == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        discover(pool, calls=5, seed=3, items=ITEMS, out_dir=tmp_path,
                 progress=kill_after_two)  # router="ballad" (the default)
    before = _load(tmp_path)["nodes"]
    assert len(before) == 3 and (tmp_path / "best.py").is_file()  # nothing finished is lost

    n_req = len(llm_server.requests)
    s = discover(pool, calls=3, seed=3, items=ITEMS, out_dir=tmp_path, resume=True)
    pop = _load(tmp_path)
    nodes = pop["nodes"]
    assert len(nodes) == 6 and nodes[:3] == before  # earlier nodes preserved
    assert [n["id"] for n in nodes] == list(range(6))
    assert [n["step"] for n in nodes[3:]] == [2, 3, 4]
    for n, req in zip(nodes[3:], llm_server.requests[n_req:], strict=True):
        assert req["body"]["model"] == n["model"]
        for p in n["parents"]:
            assert p < n["id"]
            assert nodes[p]["ok"] and nodes[p]["source"].rstrip() in _user_prompt(req)
    segs = pop["segments"]
    assert [(g["segment"], g["seed"], g["router"], g["done"]) for g in segs] == [
        (0, 3, "ballad", 2), (1, 4, "ballad", 3)]
    assert s["n_nodes"] == 6 and s["calls"] == 5 and s["segments"] == 2

    with pytest.raises(ValueError, match="exists: continue it with resume"):
        discover(pool, calls=1, items=ITEMS, out_dir=tmp_path)  # never overwrites
    assert _load(tmp_path) == pop
    with pytest.raises(ValueError, match="other instances"):
        discover(pool, calls=1, seed=4, items=ITEMS[:1], out_dir=tmp_path, resume=True)
    with pytest.raises(ValueError, match="nothing to resume"):
        discover(pool, calls=1, items=ITEMS, out_dir=tmp_path / "empty", resume=True)


class _Buggy:
    name = "buggy"

    def propose(self, parents, context):
        return [], 0.25  # no candidate: recorded as a failure that still costs


class _Raising:
    name = "raising"

    def propose(self, parents, context):
        raise ZeroDivisionError("proposer bug")


def test_timeouts_and_proposer_bugs_are_failed_nodes(llm_server, tmp_path):
    pool = _pool(llm_server, ("slow-model", "loop-model"), timeout=0.3) + [_Buggy(), _Raising()]
    items = ITEMS[:1, :200]
    expect = {"slow-model": "timeout after 0.3 s", "loop-model": "timeout after 1.5 s",
              "buggy": "no candidate", "raising": "ZeroDivisionError: proposer bug"}
    for k, name in enumerate(expect):  # one segment per proposer, routed to it alone
        s = discover(pool, router=name, calls=1, items=items, timeout=1.5, out_dir=tmp_path,
                     resume=k > 0)
        node = _load(tmp_path)["nodes"][-1]
        assert node["model"] == name and not node["ok"] and expect[name] in node["error"]
    nodes = _load(tmp_path)["nodes"]
    assert [n["model"] for n in nodes] == [None, *expect]
    assert s["failures"] == 4 and s["best_id"] == 0
    assert nodes[3]["cost"] == 0.25 and s["total_cost"] == pytest.approx(0.25)
    assert isinstance(LLMError("m", "u", "r"), RuntimeError)
    with pytest.raises(ValueError, match="unknown router"):
        discover(pool, router="nope", calls=1, items=items, out_dir=tmp_path / "x")


def _env(srv, monkeypatch, pool="funsearch-model:2:8,chatty-model:1:4"):
    for var in ("JAXKIT_LLM_BASE_URL", "JAXKIT_LLM_API_KEY", "JAXKIT_LLM_POOL",
                "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    if srv is not None:
        monkeypatch.setenv("JAXKIT_LLM_BASE_URL", srv.url)
    if pool:
        monkeypatch.setenv("JAXKIT_LLM_POOL", pool)


def _out(r) -> str:
    return " ".join(r.output.split())


@pytest.mark.slow  # test-time budget: 2-11 s CPU; kept in the slow set
def test_cli_discover_and_resume(llm_server, tmp_path, monkeypatch):
    _env(llm_server, monkeypatch)
    monkeypatch.setenv("JAXKIT_LLM_API_KEY", "sk-cli")
    args = ["ballad", "discover", "--calls", "3", "--instances", "2", "--items", "1000",
            "--out", str(tmp_path)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    out = _out(r)
    assert "best excess" in out and "total cost" in out and "funsearch-model" in out
    assert "step 3/3" in out
    assert llm_server.requests[0]["headers"]["Authorization"] == "Bearer sk-cli"
    nodes = _load(tmp_path)["nodes"]
    assert len(nodes) == 4
    s_cost = sum(n["cost"] for n in nodes)
    assert f"${s_cost:.6f}" in out

    r = runner.invoke(app, [*args[:3], "2", *args[4:], "--resume", "--router", "ucb1"])
    assert r.exit_code == 0, r.output
    pop = _load(tmp_path)
    assert len(pop["nodes"]) == 6 and pop["nodes"][:4] == nodes
    assert pop["segments"][1]["router"] == "ucb1"


def test_cli_errors_are_clear(llm_server, tmp_path, monkeypatch):
    base = ["ballad", "discover", "--calls", "1", "--instances", "1", "--items", "50",
            "--out", str(tmp_path)]
    # no base URL: the pool runs on the local jaxkit.lm model, here a missing one
    _env(None, monkeypatch, pool=str(tmp_path / "missing.gguf"))
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
    assert "no such file" in _out(r) and "JAXKIT_LLM_BASE_URL" in _out(r)
    assert "Traceback" not in r.output

    _env(llm_server, monkeypatch, pool="")  # a base URL but no models
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and "JAXKIT_LLM_POOL" in _out(r)

    _env(llm_server, monkeypatch)
    r = runner.invoke(app, [*base, "--router", "nope"])
    assert r.exit_code == 2 and "unknown --router 'nope'" in _out(r)
    r = runner.invoke(app, [*base, "--resume"])
    assert r.exit_code == 2 and "nothing to resume" in _out(r)
    (tmp_path / "population.json").write_text("{}")
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and "--resume" in _out(r)
    r = runner.invoke(app, [*base, "--resume"])
    assert r.exit_code == 2 and "not a jaxkit.ballad.discover/1 population file" in _out(r)
    assert not llm_server.requests
