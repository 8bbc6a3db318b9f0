"""Shared fixtures of the jaxkit tests: a local OpenAI-compatible HTTP server.

``llm_server`` replays the recorded chat-completion responses of
``data/llm_responses.json`` keyed by the requested model (``status``: HTTP code, ``body``:
JSON payload, ``text``: raw payload, ``sleep``: seconds before answering); unknown models
get HTTP 404. Each request (path, headers, JSON body) is appended to ``.requests``;
``.url`` is the base URL (``http://127.0.0.1:PORT/v1``). ``server`` is an alias.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

RESPONSES = json.loads((Path(__file__).parent / "data" / "llm_responses.json").read_text())
SERVER_LIFETIME_S = 60.0  # the server shuts itself down after this even if a test hangs


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(
            {"path": self.path, "headers": dict(self.headers), "body": body}
        )
        entry = RESPONSES.get(body.get("model"), {"status": 404, "body": {"error": "no model"}})
        if entry.get("sleep"):
            self.server.stop.wait(entry["sleep"])  # returns early when the fixture shuts down
        payload = entry["text"].encode() if "text" in entry else json.dumps(entry["body"]).encode()
        try:
            self.send_response(entry["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client timed out and hung up
            pass


@pytest.fixture
def llm_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.requests = []
    srv.stop = threading.Event()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    watchdog = threading.Timer(SERVER_LIFETIME_S, srv.shutdown)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield srv
    finally:
        watchdog.cancel()
        srv.stop.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def server(llm_server):
    """Alias of ``llm_server``."""
    return llm_server


@pytest.fixture(scope="module")
def load_benchmark():
    """Import ``benchmarks/bench_NAME.py`` (not a package) as a module: ``load_benchmark(NAME)``."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]

    def load(name: str):
        path = root / "benchmarks" / f"bench_{name}.py"
        spec = importlib.util.spec_from_file_location(f"jaxkit_bench_{name}_test", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


class KilledBatch(Exception):
    """Raised by :func:`kill_batches` in place of a batch: a simulated kill."""


@pytest.fixture
def kill_batches(monkeypatch):
    """``restore = kill_batches(module, at)``: the batch functions made by
    ``module.make_batch_fn`` raise ``kill_batches.Killed`` at step ``at`` (a run killed
    mid-training); ``restore()`` puts the original ``make_batch_fn`` back."""

    def patch(module, at):
        make = module.make_batch_fn

        def killing(*args, **kwargs):
            fn = make(*args, **kwargs)

            def batch_fn(i):
                if i == at:
                    raise KilledBatch
                return fn(i)

            return batch_fn

        monkeypatch.setattr(module, "make_batch_fn", killing)
        return lambda: monkeypatch.setattr(module, "make_batch_fn", make)

    patch.Killed = KilledBatch
    return patch


@pytest.fixture(scope="module")
def one_blas_thread():
    """One BLAS thread for the module: jaxlib's CPU LAPACK calls run in OpenBLAS, whose
    idle worker threads spin next to XLA's (5x the misaligned baseline family's CPU time
    under load), as ``evaluation.baseline_predictions`` runs the family. A module opts in
    with ``pytestmark = pytest.mark.usefixtures("one_blas_thread")``."""
    from jaxkit.pairing import limit_blas

    with limit_blas(1):
        yield
