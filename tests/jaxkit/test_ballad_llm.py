"""OpenAIChat against a real local HTTP server replaying recorded chat-completion responses
(the ``server`` fixture of conftest.py)."""

from __future__ import annotations

import re
import socket
import time

import pytest

from jaxkit.ballad.llm import (
    Candidate,
    LLMError,
    OpenAIChat,
    Proposer,
    extract_functions,
    pool_from_env,
)

PARENT = "def priority(item, bins):\n    return -(bins - item)  # PARENT-MARKER\n"


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def _client(srv, model, **kw) -> OpenAIChat:
    return OpenAIChat(model, base_url=_url(srv) + "/", api_key="sk-test", **kw)


CONTEXT = {"task": "Pack items into few bins (TASK-MARKER).", "scores": [-4.25]}


def test_good_model_request_and_parsing(server):
    llm = _client(server, "good-model", price_in=2.0, price_out=8.0, temperature=0.7)
    assert isinstance(llm, Proposer) and llm.name == "good-model"
    cands, cost = llm.propose([Candidate(source=PARENT)], CONTEXT)

    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["body"]
    assert body["model"] == "good-model" and body["temperature"] == 0.7 and "n" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    assert "bin packing" in body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    assert "PARENT-MARKER" in user and "TASK-MARKER" in user and "-4.25" in user
    assert "```python" in user and "priority" in user

    assert len(cands) == 1
    src = cands[0].source
    assert src.startswith("import numpy as np") and "def priority(item: float" in src
    assert "```" not in src and "This keeps" not in src
    assert cands[0].theta is None and cands[0].note == "good-model"
    compile(src, "<c>", "exec")
    assert cost == pytest.approx(1200 * 2.0 / 1e6 + 300 * 8.0 / 1e6)


def test_multiple_choices_keep_the_last_function_of_each(server):
    llm = _client(server, "multi-model", n_candidates=2, price_in=1.0)
    cands, cost = llm.propose([], {})
    assert server.requests[0]["body"]["n"] == 2
    # no parents: the default task is sent and a first version is asked for
    user = server.requests[0]["body"]["messages"][1]["content"]
    assert "Online bin packing" in user and "first version" in user
    assert [c.source for c in cands] == [
        "def priority(item, bins):\n    return -(bins - item) ** 2\n",
        "def priority(item, bins):\n    return -abs(bins - item)\n",
    ]
    assert cost == pytest.approx(1000 / 1e6)


def test_missing_usage_costs_nothing(server):
    cands, cost = _client(server, "nousage-model", price_in=5.0).propose([], {})
    assert len(cands) == 1 and cost == 0.0


@pytest.mark.parametrize(
    ("model", "status", "reason"),
    [
        ("chatty-model", None, "no parsable code in response"),
        ("syntax-model", None, "no parsable code in response"),
        ("broken-model", 500, "internal server error"),
        ("limited-model", 429, "rate limit exceeded"),
        ("garbage-model", None, "invalid JSON response"),
        ("empty-model", None, "no choices"),
        ("unknown-model", 404, "no model"),
    ],
)
def test_failures_raise_llm_error(server, model, status, reason):
    llm = _client(server, model)
    with pytest.raises(LLMError) as info:
        llm.propose([Candidate(source=PARENT)], CONTEXT)
    err = info.value
    assert err.model == model and err.status == status and reason in err.reason
    msg = str(err)
    assert model in msg and llm.url in msg and reason in msg
    if status is not None:
        assert f"HTTP {status}" in msg
        assert err.cost == 0.0


def test_reply_without_code_still_costs_its_tokens(server):
    llm = _client(server, "chatty-model", price_in=1.0, price_out=4.0)
    with pytest.raises(LLMError, match="no parsable code") as info:
        llm.propose([Candidate(source=PARENT)], CONTEXT)
    assert info.value.cost == pytest.approx((900 * 1.0 + 40 * 4.0) / 1e6)


def test_client_timeout(server):
    llm = _client(server, "slow-model", timeout=0.5)
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="timeout after 0.5 s") as info:
        llm.propose([Candidate(source=PARENT)], CONTEXT)
    assert time.perf_counter() - t0 < 1.8
    assert info.value.status is None


def test_connection_refused():
    with socket.socket() as s:  # a port that was free a moment ago and nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIChat("good-model", base_url=f"http://127.0.0.1:{port}/v1", timeout=2)
    with pytest.raises(LLMError, match="connection failed"):
        llm.propose([], {})


def test_env_configuration(server, monkeypatch):
    for var in ("JAXKIT_LLM_BASE_URL", "JAXKIT_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    llm = OpenAIChat("good-model")
    assert llm.base_url == "http://example.invalid/v1" and llm.api_key == "sk-openai"

    monkeypatch.setenv("JAXKIT_LLM_BASE_URL", _url(server))  # JAXKIT_* wins
    monkeypatch.setenv("JAXKIT_LLM_API_KEY", "sk-jaxkit")
    llm = OpenAIChat("good-model")
    cands, _ = llm.propose([Candidate(source=PARENT)], CONTEXT)
    assert cands and server.requests[-1]["headers"]["Authorization"] == "Bearer sk-jaxkit"

    monkeypatch.delenv("JAXKIT_LLM_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIChat("good-model").propose([], {})
    assert "Authorization" not in server.requests[-1]["headers"]  # keyless local servers


def test_missing_base_url_selects_the_local_model(monkeypatch, tmp_path):
    for var in ("JAXKIT_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    # no endpoint: the in-process jaxkit.lm model (replay only here: nothing is loaded)
    llm = OpenAIChat("some-model", cache=tmp_path, offline=True)
    assert llm.local_model == "smollm2-135m" and llm.base_url == "local://smollm2-135m"
    # a local model that is not there is one line that also names the endpoint variables
    with pytest.raises(ValueError, match="no such file.*JAXKIT_LLM_BASE_URL.*OPENAI_BASE_URL"):
        OpenAIChat(str(tmp_path / "missing.gguf"))


def test_pool_from_env(monkeypatch):
    monkeypatch.setenv("JAXKIT_LLM_BASE_URL", "http://localhost:1/v1")
    pool = pool_from_env("gpt-a:0.15:0.6, llama3:8b:0:0 ,qwen2.5-coder:7b", timeout=5)
    assert [p.model for p in pool] == ["gpt-a", "llama3:8b", "qwen2.5-coder:7b"]
    assert [(p.price_in, p.price_out) for p in pool] == [(0.15, 0.6), (0.0, 0.0), (0.0, 0.0)]
    assert all(p.timeout == 5 for p in pool)
    monkeypatch.setenv("JAXKIT_LLM_POOL", "m1:1:2")
    assert pool_from_env()[0].price_out == 2.0
    with pytest.raises(ValueError, match="empty"):
        pool_from_env(" , ")


@pytest.mark.parametrize("entry,what", [
    ("name:abc:1", "price_in 'abc' is not a number"),
    ("name:1:abc", "price_out 'abc' is not a number"),
    ("name:0.5", "gives one price"),
    ("name:-1:2", "finite and >= 0"),
    ("name:inf:2", "finite and >= 0"),
    (":1:2", "empty model name"),
])
def test_pool_from_env_refuses_unparseable_prices_naming_the_entry(monkeypatch, entry, what):
    """'name:abc:1' used to become a model called 'name:abc:1' at price 0."""
    monkeypatch.setenv("JAXKIT_LLM_BASE_URL", "http://localhost:1/v1")
    with pytest.raises(ValueError, match=re.escape(what)) as e:
        pool_from_env(f"gpt-a:1:2,{entry}")
    assert repr(entry) in str(e.value)


def test_extract_functions():
    text = (
        "```python\ndef other(): pass\n```\n"
        "```javascript\nfunction priority() {}\n```\n"
        "```Python3\ndef priority(item, bins):\n    return bins\n```\n"
        "```python\nclass A:\n    def priority(self): pass\n```\n"
    )
    assert extract_functions(text) == ["def priority(item, bins):\n    return bins\n"]
    assert extract_functions(text, "other") == ["def other(): pass\n"]
    assert extract_functions("no code here") == []
