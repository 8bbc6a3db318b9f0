"""The in-process chat backend of jaxkit.llm (jaxkit.lm.local_chat), the OpenAI-compatible
server (jaxkit.lm.serve) and the ``jaxkit lm`` commands, on a tiny random Llama GGUF file
(tests/jaxkit/lm_fixtures.py), never the real model."""

from __future__ import annotations

import json
import socket
import sys
import threading
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner

from jaxkit.llm import ChatClient, LLMError
from jaxkit.lm.local_chat import BadRequest, LocalChat, load_model, local_chat

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from lm_fixtures import write_tiny_gguf  # noqa: E402

MSG = [{"role": "user", "content": "Hello there"}]
MAX = 8  # one max_tokens everywhere: one compiled prefill / decode per batch size


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-lm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXKIT_CACHE_DIR", str(folder / "cache"))  # the dequantized-weights cache
        path = write_tiny_gguf(folder / "tiny.gguf", q8_0=("blk.0.ffn_down.weight",),
                               context_length=2048)  # room for the pipelines' prompts
        load_model(str(path))  # loaded (and cached in the process) under the temp cache
    return str(path)


@pytest.fixture(autouse=True)
def _no_endpoint(monkeypatch):
    for var in ("JAXKIT_LLM_BASE_URL", "OPENAI_BASE_URL", "JAXKIT_LLM_API_KEY",
                "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def _direct(path, messages, n=1, seed=0, **kw):
    """The same completion through jaxkit.lm itself (greedy unless told)."""
    import jax

    lm = load_model(path)
    kw.setdefault("temperature", 0.0)
    return lm, lm.chat([messages] * n, key=jax.random.key(seed), max_new_tokens=MAX, **kw)


def test_no_endpoint_uses_the_local_model_with_the_openai_shape(tiny):
    client = ChatClient(tiny, temperature=0.0)
    assert client.local_model == tiny and client.base_url == f"local://{tiny}"
    r = client.chat(MSG, max_tokens=MAX)
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    assert isinstance(r["created"], int) and r["model"] == tiny
    (choice,) = r["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    lm, gen = _direct(tiny, MSG)
    assert choice["message"]["content"] == gen.texts[0]
    assert choice["finish_reason"] == gen.finish_reasons[0] in ("stop", "length")
    n_prompt = len(lm.tokenizer.encode(lm.tokenizer.chat_prompt(MSG)))
    assert r["usage"] == {"prompt_tokens": n_prompt,
                          "completion_tokens": gen.completion_tokens[0],
                          "total_tokens": n_prompt + gen.completion_tokens[0]}
    assert gen.prompt_tokens[0] == n_prompt
    assert client.cost(r["usage"]) == 0.0  # local: priced in tokens only
    assert ChatClient(tiny, price_in=1.0, price_out=2.0).cost(r["usage"]) > 0


def test_local_selection_and_names(tiny, tmp_path, monkeypatch):
    # a remote model's name with no endpoint runs the default local model (replay only
    # here, so nothing is loaded and the real model need not be installed)
    c = ChatClient("gpt-x", cache=tmp_path, offline=True)
    assert c.local_model == "smollm2-135m" and c.base_url == "local://smollm2-135m"
    # local://<model> picks the model whatever the client's name
    c = ChatClient("editor", base_url=f"local://{tiny}")
    assert c.local_model == tiny and c.model == "editor"
    # an endpoint configured in the environment keeps the HTTP transport
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    c = ChatClient(tiny)
    assert c.local_model is None and c.url == "http://127.0.0.1:9/v1/chat/completions"


def test_n_choices_are_one_batch(tiny):
    client = ChatClient(tiny, temperature=1.0)
    r = client.chat(MSG, max_tokens=MAX, n=2, seed=3)
    assert [c["index"] for c in r["choices"]] == [0, 1]
    texts = [c["message"]["content"] for c in r["choices"]]
    assert texts[0] != texts[1]  # independent draws
    _, gen = _direct(tiny, MSG, n=2, seed=3, temperature=1.0)  # the seed is the key
    assert texts == gen.texts
    assert [c["finish_reason"] for c in r["choices"]] == gen.finish_reasons
    assert r["usage"]["completion_tokens"] == sum(gen.completion_tokens)
    assert r["usage"]["prompt_tokens"] == gen.prompt_tokens[0]  # the prompt counted once
    assert r["usage"]["total_tokens"] == (r["usage"]["prompt_tokens"]
                                          + r["usage"]["completion_tokens"])
    # greedy choices are all the greedy completion
    g = ChatClient(tiny, temperature=0.0).chat(MSG, max_tokens=MAX, n=2)
    assert _texts(g) == _direct(tiny, MSG, n=2)[1].texts
    assert _texts(g)[0] == _texts(g)[1]


def _texts(r):
    return [c["message"]["content"] for c in r["choices"]]


def test_seed_reproducibility(tiny):
    a = ChatClient(tiny, temperature=1.0).chat(MSG, max_tokens=MAX, seed=7)
    b = ChatClient(tiny, temperature=1.0).chat(MSG, max_tokens=MAX, seed=7)
    c = ChatClient(tiny, temperature=1.0).chat(MSG, max_tokens=MAX, seed=8)
    assert _texts(a) == _texts(b) and _texts(a) != _texts(c)
    # without a seed: a fresh client draws the same sequence; a repeated request differs
    one, two = ChatClient(tiny, temperature=1.0), ChatClient(tiny, temperature=1.0)
    first = [_texts(one.chat(MSG, max_tokens=MAX)) for _ in range(2)]
    again = [_texts(two.chat(MSG, max_tokens=MAX)) for _ in range(2)]
    assert first == again and first[0] != first[1]


def test_cache_replays_offline(tiny, tmp_path):
    rec = ChatClient(tiny, temperature=1.0, cache=tmp_path)
    got = [rec.chat(MSG, max_tokens=MAX) for _ in range(2)]
    assert rec.misses == 2 and rec.hits == 0 and len(list(tmp_path.glob("*.json"))) == 2
    replay = ChatClient(tiny, temperature=1.0, cache=tmp_path, offline=True)
    assert [replay.chat(MSG, max_tokens=MAX) for _ in range(2)] == got  # ids and all
    assert replay.hits == 2
    with pytest.raises(LLMError, match="offline replay: response not in the cache"):
        replay.chat(MSG, max_tokens=MAX)
    # a resumed run (half from the cache) draws what the uninterrupted run drew
    resumed = ChatClient(tiny, temperature=1.0, cache=tmp_path)
    out = [resumed.chat(MSG, max_tokens=MAX) for _ in range(3)]
    assert out[:2] == got and resumed.hits == 2 and resumed.misses == 1
    fresh = ChatClient(tiny, temperature=1.0)
    draws = [_texts(fresh.chat(MSG, max_tokens=MAX)) for _ in range(3)]
    assert [_texts(r) for r in out] == draws
    # the local model's name is in the key when the client's name differs
    other = ChatClient("editor", base_url=f"local://{tiny}", cache=tmp_path, offline=True)
    with pytest.raises(LLMError, match="not in the cache"):
        other.chat(MSG, max_tokens=MAX)


def test_bad_requests_are_llm_errors_with_status_400(tiny):
    client = ChatClient(tiny, temperature=0.0)
    for fields, what in [({"temperature": -1}, "temperature"), ({"max_tokens": 0}, "max_tokens"),
                         ({"n": 0}, "'n'"), ({"top_p": 0}, "top_p"),
                         ({"stop": [1]}, "stop"), ({"seed": "x"}, "seed")]:
        with pytest.raises(LLMError, match=what) as e:
            client.chat(MSG, **fields)
        assert e.value.status == 400
    with pytest.raises(LLMError, match="messages"):
        client.chat([])
    with pytest.raises(BadRequest, match=r"messages\[0\]"):
        LocalChat(tiny).complete({"messages": [{"content": "no role"}]})
    # text parts are joined; a too-long max_tokens is cut to the context
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello "},
                                          {"type": "text", "text": "there"}]}]
    r = local_chat(tiny).complete({"messages": parts, "temperature": 0, "max_tokens": MAX})
    assert _texts(r) == _texts(client.chat(MSG, max_tokens=MAX))


def test_subclasses_run_on_the_local_model(tiny):
    from jaxkit.ballad.llm import OpenAIChat
    from jaxkit.cruxbench.proposers import ChatProposer

    llm = OpenAIChat(tiny, temperature=0.0)
    assert llm.local_model == tiny
    with pytest.raises(LLMError, match="no parsable code") as e:  # a random model's reply
        llm.propose([], {})
    assert e.value.cost == 0.0
    crux = ChatProposer(tiny, temperature=0.0)
    with pytest.raises(LLMError, match="no JSON list|subquestion"):  # ... nor sense
        crux.propose_questions("Will it rain?", n=2)


def test_missing_local_model_is_one_line(tmp_path):
    from jaxkit.lm import LMError

    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(LMError, match="no such file") as e:
        ChatClient(missing)
    assert "\n" not in str(e.value) and "JAXKIT_LLM_BASE_URL" in str(e.value)
    with pytest.raises(ValueError, match="no such file"):  # LMError is a ValueError
        ChatClient("x", base_url=f"local://{missing}")


# ---------------------------------------------------------------------- the server
@pytest.fixture(scope="module")
def served(tiny):
    from jaxkit.lm.serve import make_server

    server = make_server(local_chat(tiny), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(10)


def _post(url, data: bytes, headers=None):
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_server_answers_as_the_in_process_client(tiny, served):
    server, root = served
    assert server.server_address[0] == "127.0.0.1"
    http = ChatClient(tiny, base_url=f"{root}/v1", temperature=0.0)
    assert http.local_model is None
    local = ChatClient(tiny, temperature=0.0)
    for fields in ({}, {"n": 2}):
        a, b = http.chat(MSG, max_tokens=MAX, **fields), local.chat(MSG, max_tokens=MAX,
                                                                    **fields)
        assert a["choices"] == b["choices"] and a["usage"] == b["usage"]
        assert a["object"] == "chat.completion" and a["model"] == tiny
    with urllib.request.urlopen(f"{root}/v1/models", timeout=10) as resp:
        models = json.loads(resp.read())
    assert models["object"] == "list" and models["data"][0]["id"] == tiny


def test_server_rejects_bad_requests_with_json_400(served):
    _, root = served
    url = f"{root}/v1/chat/completions"
    cases = [b"{not json", b"[1, 2]", json.dumps({"messages": []}).encode(),
             json.dumps({"messages": MSG, "temperature": "hot"}).encode(),
             json.dumps({"messages": MSG, "stream": "yes"}).encode()]
    for data in cases:
        status, headers, body = _post(url, data)
        assert status == 400, data
        assert headers["Content-Type"] == "application/json"
        err = json.loads(body)["error"]
        assert err["type"] == "invalid_request_error" and err["message"]
    status, _, body = _post(f"{root}/v1/completions", b"{}")
    assert status == 404 and "error" in json.loads(body)
    # the HTTP client reports the server's 400 as before
    client = ChatClient("m", base_url=f"{root}/v1")
    with pytest.raises(LLMError, match="temperature") as e:
        client.chat(MSG, temperature=-2)
    assert e.value.status == 400


def test_server_streams_server_sent_events(tiny, served):
    _, root = served
    body = {"messages": MSG, "temperature": 0, "max_tokens": MAX}
    status, _, plain = _post(f"{root}/v1/chat/completions", json.dumps(body).encode())
    assert status == 200
    status, headers, raw = _post(f"{root}/v1/chat/completions",
                                 json.dumps({**body, "stream": True}).encode())
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [e for e in raw.decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    want = json.loads(plain)
    assert text == want["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == want["choices"][0]["finish_reason"]
    assert chunks[-1]["usage"] == want["usage"]


def test_server_shuts_down(tiny):
    from jaxkit.lm.serve import make_server

    server = make_server(local_chat(tiny), port=0)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
        assert json.loads(resp.read()) == {"status": "ok"}
    server.shutdown()
    server.server_close()
    thread.join(10)
    assert not thread.is_alive()
    with socket.socket() as s, pytest.raises(OSError):
        s.settimeout(2)
        s.connect(("127.0.0.1", port))


# ---------------------------------------------------------------------- the commands
def _app():
    from jaxkit.cli import app

    return app


def test_cli_generate(tiny):
    import jax

    r = CliRunner().invoke(_app(), ["lm", "generate", "Hello the", "--model", tiny,
                                    "--max-tokens", str(MAX)])
    assert r.exit_code == 0, r.output
    want = load_model(tiny).generate("Hello the", key=jax.random.key(0), max_new_tokens=MAX)
    assert r.stdout == want.texts[0] + "\n"


def test_cli_chat_keeps_the_conversation(tiny):
    r = CliRunner().invoke(_app(), ["lm", "chat", "--model", tiny, "--max-tokens", str(MAX),
                                    "--message", "Hello there"])
    assert r.exit_code == 0, r.output
    first = _texts(ChatClient(tiny, temperature=0.0).chat(MSG, max_tokens=MAX))[0]
    assert r.stdout == first + "\n"
    r = CliRunner().invoke(_app(), ["lm", "chat", "--model", tiny, "--max-tokens", str(MAX)],
                           input="Hello there\n\nHow are you\n/exit\nignored\n")
    assert r.exit_code == 0, r.output
    history = [*MSG, {"role": "assistant", "content": first},
               {"role": "user", "content": "How are you"}]
    second = local_chat(tiny).complete({"messages": history, "temperature": 0,
                                        "max_tokens": MAX})
    assert r.stdout == first + "\n" + _texts(second)[0] + "\n"


def test_cli_missing_model_is_one_line(tmp_path):
    for cmd in (["generate", "hi"], ["chat", "--message", "hi"], ["serve", "--port", "0"]):
        r = CliRunner().invoke(_app(), ["lm", *cmd, "--model", str(tmp_path / "none.gguf")])
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
        out = r.output.strip()
        assert out.startswith("error:") and "no such file" in out
        assert "Traceback" not in r.output and len(out.splitlines()) == 1
    r = CliRunner().invoke(_app(), ["lm", "generate", "hi", "--max-tokens", "0"])
    assert r.exit_code == 2 and "--max-tokens" in r.output
