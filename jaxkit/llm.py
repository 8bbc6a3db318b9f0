"""An OpenAI-compatible chat client (the transport every LLM-using pipeline shares).

:class:`ChatClient` posts to any server exposing ``POST {base_url}/chat/completions``
(OpenAI, vLLM, llama.cpp, Ollama, ``jaxkit lm serve``, ...) with the standard library only,
or, when no endpoint is configured (or ``base_url`` is ``local://<model>``), runs the
request in-process on a :mod:`jaxkit.lm` model (:mod:`jaxkit.lm.local_chat`, SmolLM2-135M-
Instruct by default), which answers with the same response object. Either way responses are
cached on disk so a run replays call for call, and each call is priced from the ``usage``
field (tokens; a local model costs nothing unless prices are given). Every transport
failure raises :class:`LLMError`. The prompts and the parsing of replies belong to the
pipelines (:class:`jaxkit.ballad.llm.OpenAIChat` for heuristics,
:class:`jaxkit.cruxbench.proposers.ChatProposer` for subquestions).
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxkit.io import atomic_write

__all__ = ["LLMError", "ChatClient", "env_first", "LOCAL_SCHEME"]

LOCAL_SCHEME = "local://"


class LLMError(RuntimeError):
    """A failed LLM call; ``model``, ``url``, ``status`` (HTTP code or None), ``reason``,
    ``cost``."""

    def __init__(self, model: str, url: str, reason: str, status: int | None = None,
                 cost: float = 0.0):
        self.model, self.url, self.reason, self.status = model, url, reason, status
        self.cost = cost  # dollars the failed call still cost (tokens of a useless reply)
        code = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"LLM {model!r} at {url}: {code}{reason}")


def env_first(*names: str) -> str | None:
    """The first of the environment variables ``names`` that is set and non-empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class ChatClient:
    """Client of an OpenAI-compatible ``/chat/completions`` endpoint, or of the local model.

    ``base_url`` / ``api_key`` default to ``JAXKIT_LLM_BASE_URL`` / ``JAXKIT_LLM_API_KEY``,
    then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Prices are dollars per million tokens.
    ``n_candidates > 1`` requests that many choices (field ``n``) in one call.

    **Local backend.** With no base URL at all, or ``base_url="local://<model>"``, requests
    run in this process on a :mod:`jaxkit.lm` model (:class:`jaxkit.lm.local_chat.LocalChat`,
    loaded on the first call, once per process): ``<model>``, else ``model`` itself when
    it names one :func:`jaxkit.lm.load` can load (``"smollm2-135m"``, a ``.gguf`` path),
    else ``"smollm2-135m"``. ``local_model`` names it (None for HTTP); ``base_url`` is then
    ``local://<that model>``. The request's ``temperature`` (0: greedy), ``top_p``,
    ``max_tokens``, ``stop``, ``n`` and ``seed`` are honoured; without a ``seed`` the PRNG
    key comes from the request and how many times this client has sent it, so a run
    (fresh, resumed or partly replayed) draws the same replies. A local model that is not
    installed is a ``ValueError`` (:class:`jaxkit.lm.LMError`, one line) here, not at the
    first call; a malformed request is an :class:`LLMError` with status 400.

    ``cache``: a folder where every successful response is stored (JSON, written
    atomically) under a hash of the request body (the model's name included; for the local
    backend also the local model's name when it differs from ``model``) plus how many times
    this client has sent that same body before, so a run replays call for call. A cached
    response is used instead of the backend; with ``offline=True`` a request that is not
    in the cache is a failed call (:class:`LLMError`) and nothing is sent (nor any model
    loaded), so a recorded run can be replayed with no server and no model.
    ``hits`` / ``misses`` count cache use.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        price_in: float = 0.0,
        price_out: float = 0.0,
        temperature: float = 1.0,
        n_candidates: int = 1,
        cache: str | os.PathLike | None = None,
        offline: bool = False,
    ):
        base_url = base_url or env_first("JAXKIT_LLM_BASE_URL", "OPENAI_BASE_URL")
        if offline and cache is None:
            raise ValueError(f"LLM {model!r}: offline=True needs a `cache` folder to replay")
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
        self.local_model: str | None = None
        if not base_url or base_url.startswith(LOCAL_SCHEME):
            from jaxkit.lm.local_chat import DEFAULT_MODEL, is_local_model, local_chat

            name = (base_url or "")[len(LOCAL_SCHEME):]
            name = name or (model if is_local_model(model) else DEFAULT_MODEL)
            self.local_model = name
            if not offline:
                from jaxkit.lm import LMError

                try:
                    local_chat(name).check()
                except LMError as exc:
                    hint = ("" if base_url else
                            "; or pass base_url= / set JAXKIT_LLM_BASE_URL (or "
                            "OPENAI_BASE_URL) for an OpenAI-compatible server")
                    raise LMError(f"{exc}{hint}") from None
            base_url = LOCAL_SCHEME + name
        else:
            base_url = base_url.rstrip("/")
        self.name = model
        self.model = model
        self.base_url = base_url
        self.api_key = api_key or env_first("JAXKIT_LLM_API_KEY", "OPENAI_API_KEY")
        self.timeout = float(timeout)
        self.price_in = float(price_in)
        self.price_out = float(price_out)
        self.temperature = float(temperature)
        self.n_candidates = int(n_candidates)
        self.cache = None if cache is None else Path(cache)
        self.offline = bool(offline)
        self.hits = self.misses = 0
        self._seen: dict[str, int] = {}
        self._seed: int | None = None  # the local backend's seed for the call in flight
        self._local_calls = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        if self.local_model is not None:
            return self.base_url
        return f"{self.base_url}/chat/completions"

    def _digest(self, body: dict) -> str:
        text = json.dumps(body, sort_keys=True)
        if self.local_model is not None and self.local_model != self.model:
            text += "\n" + self.base_url
        return hashlib.sha256(text.encode()).hexdigest()

    def post(self, body: dict) -> dict:
        """POST ``body`` (a chat-completions request) and return the decoded JSON object,
        from the cache when it holds this call. Raises :class:`LLMError` on failure."""
        digest = self._digest(body)
        k = self._seen.get(digest, 0)
        self._seen[digest] = k + 1
        if self.local_model is not None:
            from jaxkit.lm.local_chat import seed_of

            self._seed = seed_of(f"{digest}:{k}")
        if self.cache is None:
            return self._send(body)
        path = self.cache / f"{digest[:32]}-{k}.json"
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise LLMError(self.model, str(path), f"unreadable cached response: {exc}"
                               ) from exc
            self.hits += 1
            return data
        self.misses += 1
        if self.offline:
            raise LLMError(self.model, str(path), "offline replay: response not in the cache")
        data = self._send(body)
        atomic_write(path, json.dumps(data, sort_keys=True))
        return data

    def _send(self, body: dict) -> dict:
        if self.local_model is not None:
            return self._send_local(body)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", "replace") if exc.fp else ""
            raise LLMError(
                self.model, self.url, " ".join(detail.split()) or str(exc.reason), exc.code
            ) from exc
        except TimeoutError as exc:
            raise LLMError(self.model, self.url, f"timeout after {self.timeout:g} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise LLMError(self.model, self.url, f"timeout after {self.timeout:g} s") from exc
            raise LLMError(self.model, self.url, f"connection failed: {exc.reason}") from exc
        except OSError as exc:  # reset connections and the like
            raise LLMError(self.model, self.url, f"connection failed: {exc}") from exc
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = " ".join(raw[:80].decode("utf-8", "replace").split())
            raise LLMError(self.model, self.url, f"invalid JSON response: {snippet!r}") from exc
        if not isinstance(data, dict):
            raise LLMError(self.model, self.url, "invalid JSON response: not an object")
        return data

    def _send_local(self, body: dict) -> dict:
        """Answer ``body`` with the in-process model (see the class docstring)."""
        from jaxkit.lm import LMError
        from jaxkit.lm.local_chat import BadRequest, local_chat, seed_of

        seed, self._seed = self._seed, None
        if seed is None:  # called without post(): a per-client counter
            seed = seed_of(f"{self.model}:{self._local_calls}")
        self._local_calls += 1
        try:
            return local_chat(self.local_model).complete(body, seed=seed)
        except BadRequest as exc:
            raise LLMError(self.model, self.url, str(exc), 400) from exc
        except (LMError, FloatingPointError) as exc:
            raise LLMError(self.model, self.url, str(exc)) from exc
        except ValueError as exc:  # a request the model's own checks refuse
            raise LLMError(self.model, self.url, str(exc), 400) from exc

    def cost(self, usage: Mapping[str, Any] | None) -> float:
        """Dollars for a call with this ``usage`` (0 when the server reports none)."""
        if not usage:
            return 0.0
        tokens_in = float(usage.get("prompt_tokens") or 0)
        tokens_out = float(usage.get("completion_tokens") or 0)
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6

    def chat(self, messages: list[dict[str, str]], **fields: Any) -> dict:
        """One chat call with ``messages`` (plus any request ``fields``, such as ``n``);
        the model and temperature are this client's. Returns the decoded response."""
        return self.post({"model": self.model, "messages": messages,
                          "temperature": self.temperature, **fields})
