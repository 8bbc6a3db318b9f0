"""``jaxkit lm serve``: an OpenAI-compatible HTTP endpoint for a :mod:`jaxkit.lm` model.

Standard library only (``http.server.ThreadingHTTPServer``); the model is shared through
:class:`jaxkit.lm.local_chat.LocalChat`, whose lock lets one request generate at a time.

* ``POST /v1/chat/completions`` (also ``/chat/completions``): the request and response
  of OpenAI's chat completions (see :mod:`jaxkit.lm.local_chat` for the fields honoured).
  ``"stream": true`` answers with server-sent events: ``data: {chunk}`` lines of
  ``chat.completion.chunk`` objects (a role chunk, the content, the finish reason; the
  last one with ``usage``), then ``data: [DONE]``. The chunks are sent once the
  completion is done (the decode loop is one compiled call), not token by token.
* ``GET /v1/models`` (also ``/models``): the one model served. ``GET /health``: ``ok``.

A malformed request is answered with HTTP 400 and OpenAI's error object
``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``; an unknown
path with 404, a failure of the model with 500. Without ``seed`` a request's PRNG key comes
from a per-server counter, so a server session is reproducible request for request.
Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jaxkit.lm.gguf_file import LMError
from jaxkit.lm.local_chat import LocalChat, chunks_of, seed_of

__all__ = ["make_server", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 16 << 20


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    server_version = "jaxkit-lm"
    server: _Server

    def log_message(self, fmt: str, *args: Any) -> None:
        if self.server.log:
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self._path()
        if path in ("/v1/models", "/models"):
            self._json(200, self.server.chat.models())
        elif path == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._json(404, _error(f"unknown path {path!r}", "not_found_error"))

    def do_POST(self) -> None:  # noqa: N802
        path = self._path()
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, _error(f"unknown path {path!r} (POST /v1/chat/completions)",
                                   "not_found_error"))
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length <= 0:
            self._json(400, _error("the request needs a JSON body with a Content-Length"))
            return
        if length > MAX_BODY_BYTES:
            self._json(413, _error(f"the request body exceeds {MAX_BODY_BYTES} bytes"))
            return
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._json(400, _error(f"the request body is not valid JSON ({exc})"))
            return
        if not isinstance(body, dict):
            self._json(400, _error("the request body must be a JSON object"))
            return
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            self._json(400, _error("'stream' must be true or false"))
            return
        try:
            response = self.server.chat.complete(body, seed=self.server.next_seed())
        except LMError as exc:  # the model cannot be loaded
            self._json(500, _error(str(exc), "server_error"))
            return
        except ValueError as exc:  # BadRequest, or a request the model's checks refuse
            self._json(400, _error(" ".join(str(exc).split())))
            return
        except Exception as exc:  # the model failed (not loadable, non-finite): one line
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self._json(500, _error(reason, "server_error"))
            return
        if not stream:
            self._json(200, response)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks_of(response):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], chat: LocalChat, log: bool):
        super().__init__(address, _Handler)
        self.chat = chat
        self.log = log
        self._count = 0
        self._count_lock = threading.Lock()

    def next_seed(self) -> int:
        with self._count_lock:
            k = self._count
            self._count += 1
        return seed_of(f"serve:{k}")


def make_server(chat: LocalChat, host: str = "127.0.0.1", port: int = 8000, *,
                log: bool = False) -> ThreadingHTTPServer:
    """An HTTP server for ``chat``, bound (port 0: any free port; the bound one is
    ``server.server_address[1]``) but not yet serving: call ``serve_forever()`` (in a
    thread, for tests) and ``shutdown()`` / ``server_close()`` to stop it.

    Args:
      chat: the :class:`jaxkit.lm.local_chat.LocalChat` to answer with.
      host: the interface (127.0.0.1: this machine only).
      port: the TCP port.
      log: one line per request on stderr.
    """
    return _Server((host, int(port)), chat, log)
