"""Routing real (HTTP) models with response caching and offline replay, against a local
OpenAI-compatible server that serves a small deterministic program-editing model written
for this test: it reads the parent program in the prompt, changes one coefficient (which
one and by how much depends on the model name and on how many requests it has served)
and answers with the edited program and a token usage."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jax
import numpy as np
import pytest

from jaxkit.ballad import program as PG
from jaxkit.ballad import search as S
from jaxkit.ballad.llm import Candidate, LLMError, OpenAIChat

CAP = 100.0
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
STEP = {"editor-small": 0.3, "editor-large": -0.2}


class _Editor(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        srv = self.server
        with srv.lock:
            n = len(srv.requests)
            srv.requests.append(body)
        model = body["model"]
        prompt = body["messages"][-1]["content"]
        blocks = _BLOCK.findall(prompt)
        if model not in STEP:
            status, payload = 404, {"error": {"message": f"no model {model}"}}
        else:
            try:  # a program it cannot read is rewritten from best fit
                coefs = PG.program_terms(blocks[0], CAP)
            except (IndexError, ValueError):
                coefs = -np.eye(len(PG.TERMS))[0]
            coefs[n % len(PG.TERMS)] += STEP[model] * (1 + n % 3)
            code = PG.program_source(coefs, CAP)
            status, payload = 200, {
                "choices": [{"message": {"role": "assistant",
                                         "content": f"Edited:\n```python\n{code}```"}}],
                "usage": {"prompt_tokens": 400 + len(prompt) // 10, "completion_tokens": 200}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def editor_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Editor)
    srv.daemon_threads = True
    srv.requests, srv.lock = [], threading.Lock()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def items():
    from jaxkit.ballad.discover import weibull_items

    return weibull_items(3, 2, 40)


def _pool(url, cache, offline=False):
    return [OpenAIChat("editor-large", base_url=url, price_in=3.0, price_out=15.0, cache=cache,
                       offline=offline, timeout=10),
            OpenAIChat("editor-small", base_url=url, price_in=0.1, price_out=0.4, cache=cache,
                       offline=offline, timeout=10)]


def _run(pool, items):
    routers = [r for r in S.standard_routers(2, 2 + 4, [m.name for m in pool], ablations=())
               if r.name in ("ballad", "ballad-cost", "uniform")]
    init = [Candidate(source=PG.program_source(-np.eye(len(PG.TERMS))[0], CAP), note="bf"),
            Candidate(source=PG.program_source(np.r_[-1.0, 0.3, np.zeros(8)], CAP))]
    return S.search(S.source_evaluator(items, CAP, timeout=10.0, max_workers=2), pool,
                    routers, [0], init=init, n_calls=4, key=jax.random.key(4))


def _trace(logs):
    return [[(n.model, n.parents, n.ok, n.score, n.cost, n.candidate.source)
             for n in lg.genealogy.nodes] for lg in logs]


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_routed_http_run_is_cached_and_replays_offline(editor_server, items, tmp_path):
    cache = tmp_path / "llm-cache"
    pool = _pool(editor_server.url, cache)
    logs = _run(pool, items)
    sent = len(editor_server.requests)
    assert sent == 3 * 4  # one request per call, nothing cached yet
    assert sum(m.misses for m in pool) == sent and sum(m.hits for m in pool) == 0
    assert len(list(cache.glob("*.json"))) == sent
    for lg in logs:  # every child is the served edit of a parent in the genealogy
        for n in lg.genealogy.nodes[2:]:
            assert n.ok, n.error
            child = PG.program_terms(n.candidate.source, CAP)
            parent = PG.program_terms(lg.genealogy.nodes[n.parents[0]].candidate.source, CAP)
            assert np.count_nonzero(~np.isclose(child, parent)) == 1
            assert n.cost > 0
    # priced by tokens: the large editor costs ~30x more per call
    large = [n.cost for lg in logs for n in lg.genealogy.nodes[2:] if n.model == 0]
    small = [n.cost for lg in logs for n in lg.genealogy.nodes[2:] if n.model == 1]
    assert large and small and min(large) > 10 * max(small)

    # replay with no server at all: same genealogy call for call, no request sent
    editor_server.shutdown()
    replay_pool = _pool("http://127.0.0.1:9/v1", cache, offline=True)
    replay = _run(replay_pool, items)
    assert len(editor_server.requests) == sent
    assert _trace(replay) == _trace(logs)
    assert sum(m.hits for m in replay_pool) == sent and sum(m.misses for m in replay_pool) == 0


def test_offline_miss_is_a_failed_call_and_offline_needs_a_cache(tmp_path):
    m = OpenAIChat("editor-small", cache=tmp_path, offline=True)
    with pytest.raises(LLMError, match="offline replay: response not in the cache"):
        m.propose([Candidate(source="def priority(item, bins):\n    return -bins\n")], {})
    assert m.misses == 1
    with pytest.raises(ValueError, match="offline=True needs a `cache`"):
        OpenAIChat("x", base_url="http://127.0.0.1:9/v1", offline=True)
    (tmp_path / "bad").mkdir()
    m2 = OpenAIChat("editor-small", base_url="http://127.0.0.1:9/v1", cache=tmp_path / "bad",
                    offline=True)
    body = {"model": "editor-small", "messages": m2.messages([], {}), "temperature": 1.0}
    import hashlib

    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    (tmp_path / "bad" / f"{digest[:32]}-0.json").write_text("{not json")
    with pytest.raises(LLMError, match="unreadable cached response"):
        m2.propose([], {})


@pytest.mark.slow  # ~70 s under load: 84 sandboxed evaluations plus the test scoring
def test_pipeline_pool_http_records_then_replays(editor_server, tmp_path):
    from jaxkit.ballad import pipeline
    from jaxkit.ballad.config import QUICK
    from jaxkit.registry import RunContext

    cfg = QUICK.override(["pool=http", "http.models=editor-large:3:15,editor-small:0.1:0.4",
                          f"http.base_url={editor_server.url}", "http.calls=3",
                          "http.seeds=2", "http.items=30", "train_instances=1",
                          "test_instances=2"])
    res = pipeline.run(RunContext(out_dir=tmp_path / "a", config=cfg, quick=True))
    sent = len(editor_server.requests)
    assert sent == 7 * 2 * 3  # 2 singles, uniform, ucb1, ballad, ballad-cost, ballad-budget
    # five paper rows (the costlier-models claim tested on real models), a setup row and
    # uniform routing (no ablation routers over HTTP)
    assert len(res.claims) == 7 and "HTTP models (editor-large, editor-small)" in res.markdown
    assert next(c for c in res.claims if "costlier" in c.claim).verdict != "not tested"
    rows = res.metrics["binpacking_weibull (HTTP models)"]
    assert [r["router"] for r in rows][:2] == ["only editor-large", "only editor-small"]
    assert "0 replayed, 42 fetched" in res.markdown
    editor_server.shutdown()
    cache = tmp_path / "a" / "llm-cache"
    again = cfg.override(["http.offline=true", f"http.cache={cache}",
                          "http.base_url=http://127.0.0.1:9/v1"])
    res2 = pipeline.run(RunContext(out_dir=tmp_path / "b", config=again, quick=True))
    assert res2.metrics == res.metrics and res2.claims == res.claims
    assert "42 replayed, 0 fetched" in res2.markdown


def test_pool_http_config_errors_name_the_field(monkeypatch):
    from jaxkit.ballad.config import QUICK

    for var in ("JAXKIT_LLM_POOL", "JAXKIT_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="`http.models` must name the HTTP models"):
        QUICK.override(["pool=http"])
    with pytest.raises(ValueError, match="`http.base_url` must give the endpoint"):
        QUICK.override(["pool=http", "http.models=a:1:2"])
    # replaying offline needs no endpoint; the environment can name the models
    assert QUICK.override(["pool=http", "http.models=a:1:2", "http.offline=true"]).http.offline
    # the section's own checks name the dotted path
    with pytest.raises(ValueError, match="`http.items` must be >= 2; got 1"):
        QUICK.override(["http.items=1"])
    monkeypatch.setenv("JAXKIT_LLM_POOL", "a:1:2")
    monkeypatch.setenv("JAXKIT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert QUICK.override(["pool=http"]).pool == "http"
    with pytest.raises(ValueError, match="`pool`"):
        QUICK.override(["pool=grpc"])
