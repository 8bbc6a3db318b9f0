"""CruxBench's OpenAI-compatible proposer against a fake server on 127.0.0.1, the reply
parser, and the ``cruxbench`` CLI sub-app (score and propose)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from jaxkit.cruxbench.cli import cruxbench_app
from jaxkit.cruxbench.proposers import ChatProposer, LLMError, parse_questions

GOOD = ('Here you go:\n```json\n[{"question": "Will CPI print above 3%?", "q": 0.4, '
        '"p1": 0.7, "p0": 0.2}, {"question": "", "q": 0.5, "p1": 0.5, "p0": 0.5}, '
        '{"question": "Bad prob", "q": 1.4, "p1": 0.5, "p0": 0.5}, '
        '{"question": "Will the chair resign?", "q": 0.1, "p1": 0.9, "p0": 0.5}]\n```')


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "body": body,
                                     "auth": self.headers.get("Authorization")})
        model = body["model"]
        if model == "broken":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "overloaded"}')
            return
        content = {"good": GOOD, "chatty": "I would rather not answer in JSON."}[model]
        payload = {"choices": [{"message": {"role": "assistant", "content": content}}],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 50}}
        raw = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.requests = []
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv):
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def test_chat_proposer_parses_valid_questions(server):
    llm = ChatProposer("good", base_url=_url(server), api_key="sk-x", price_in=1.0,
                       price_out=2.0, timeout=10)
    qs, cost = llm.propose_questions("Will the Fed cut in June?", price=0.35, n=3)
    assert [q["text"] for q in qs] == ["Will CPI print above 3%?", "Will the chair resign?"]
    assert qs[0] == {"text": "Will CPI print above 3%?", "q": 0.4, "p1": 0.7, "p0": 0.2}
    assert cost == pytest.approx((100 * 1.0 + 50 * 2.0) / 1e6)
    req = server.requests[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-x"
    user = req["body"]["messages"][1]["content"]
    assert "Will the Fed cut in June?" in user and "0.35" in user and "3 subquestions" in user


def test_chat_proposer_errors(server):
    with pytest.raises(LLMError, match="HTTP 500"):
        ChatProposer("broken", base_url=_url(server), timeout=10).propose_questions("x")
    with pytest.raises(LLMError, match="no JSON list"):
        ChatProposer("chatty", base_url=_url(server), timeout=10).propose_questions("x")
    with pytest.raises(LLMError, match="connection failed"):
        ChatProposer("good", base_url="http://127.0.0.1:9/v1", timeout=2).propose_questions("x")


def test_parse_questions_rejects_replies_without_usable_entries():
    with pytest.raises(ValueError, match="no subquestion"):
        parse_questions('[{"question": "a", "q": 0.5}]')
    with pytest.raises(ValueError, match="does not parse"):
        parse_questions("[{not json}]")
    assert len(parse_questions(GOOD, n_max=1)) == 1


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_cli_score_and_propose(server, tmp_path):
    runner = CliRunner()
    targets = [{"type": "target", "id": f"t{i}", "title": f"Target {i}?",
                "prices": [[0, 0.5], [1, 0.5], [2, 0.5 + 0.1 * i]], "outcome": 1}
               for i in range(1, 4)]
    out = tmp_path / "q.jsonl"
    r = runner.invoke(cruxbench_app, ["propose", str(_write(tmp_path / "t.jsonl", targets)),
                                      "--model", "good", "--out", str(out),
                                      "--base-url", _url(server), "--n", "2"])
    assert r.exit_code == 0, r.output
    qs = [json.loads(s) for s in out.read_text().splitlines()]
    assert len(qs) == 6 and {q["target"] for q in qs} == {"t1", "t2", "t3"}
    assert all(q["asked_at"] == 2.0 and q["proposer"] == "good" for q in qs)
    # resolve them and score the file
    for q in qs:
        q.update(asked_at=0, resolved_at=2, answer=1)
    qual = [{"type": "quality", "proposer": "good", "score": 1.0}]
    data = _write(tmp_path / "all.jsonl", targets + qs + qual)
    js = tmp_path / "s.json"
    r = runner.invoke(cruxbench_app, ["score", str(data), "--window", "0", "--json", str(js)])
    assert r.exit_code == 0, r.output
    payload = json.loads(js.read_text())
    assert payload["proposers"] == ["good"]
    # realised |dp| per target 0.1, 0.2, 0.3 (both questions the same): mean 0.2
    assert payload["per_proposer"]["realised_abs"][0] == pytest.approx(0.2, abs=1e-6)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "target", "id": "t"\n')
    r = runner.invoke(cruxbench_app, ["score", str(bad)])
    assert r.exit_code == 2 and "line 1: invalid JSON" in r.output
