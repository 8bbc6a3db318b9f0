"""The in-process chat backend of :mod:`jaxkit.llm`: OpenAI chat completions from a
:mod:`jaxkit.lm` model, with no server.

:class:`LocalChat` answers a chat-completions request body (``messages``, ``temperature``,
``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop``, ``n``, ``seed``) with the
response object an OpenAI-compatible server returns::

    {"id", "object": "chat.completion", "created", "model",
     "choices": [{"index", "message": {"role": "assistant", "content"}, "finish_reason"}],
     "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}

The conversation goes through the model file's chat template; the ``n`` choices are one
batched :meth:`jaxkit.lm.LanguageModel.chat` call (``temperature`` 0: greedy; the PRNG key
is ``seed``); ``finish_reason`` is ``"stop"`` (end of turn or a stop string) or
``"length"``. ``usage`` counts the prompt once and the completions of every choice.

The model is loaded on first use, once per process and (name, dtype) (:func:`local_chat`
hands out the shared instance), never on import; a lock serialises generation, so threads
(:mod:`jaxkit.lm.serve`'s server, a pipeline's workers) can share it. A malformed request
raises :class:`BadRequest` (a ``ValueError``: the server answers it with HTTP 400).
:class:`jaxkit.llm.ChatClient` selects this backend when no endpoint is configured or its
``base_url`` is ``local://<model>``.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LocalChat", "BadRequest", "DEFAULT_MODEL", "DEFAULT_MAX_TOKENS", "MAX_CHOICES",
           "local_chat", "load_model", "is_local_model", "seed_of", "parse_messages",
           "chunks_of"]

DEFAULT_MODEL = "smollm2-135m"
DEFAULT_MAX_TOKENS = 256
MAX_CHOICES = 64

_MODELS: dict[tuple[str, str], Any] = {}
_CHATS: dict[tuple[str, str], LocalChat] = {}
_LOCK = threading.Lock()


class BadRequest(ValueError):
    """A chat-completions request this backend cannot answer (names the field)."""


def is_local_model(name: str) -> bool:
    """Whether ``name`` names a model :func:`jaxkit.lm.load` can load (a known name, a
    ``.gguf`` path, or an existing file or folder) rather than a remote model's name."""
    from pathlib import Path

    from jaxkit.lm.gguf_file import KNOWN_MODELS

    name = str(name)
    if not name or "://" in name:
        return False
    if name in KNOWN_MODELS or name.lower().endswith(".gguf"):
        return True
    try:
        return Path(name).expanduser().exists()
    except OSError:
        return False


def load_model(model: str = DEFAULT_MODEL, dtype: str = "float32"):
    """The :class:`jaxkit.lm.LanguageModel` ``model`` in ``dtype``, loaded on the first
    call and shared by every later one in the process. Raises :class:`jaxkit.lm.LMError`
    for a missing or unreadable model."""
    k = (str(model), str(dtype))
    with _LOCK:
        if k not in _MODELS:
            from jaxkit.lm import load

            _MODELS[k] = load(model, dtype=dtype)
        return _MODELS[k]


def local_chat(model: str = DEFAULT_MODEL, dtype: str = "float32") -> LocalChat:
    """The process's shared :class:`LocalChat` of ``model`` (nothing is loaded yet)."""
    k = (str(model), str(dtype))
    with _LOCK:
        if k not in _CHATS:
            _CHATS[k] = LocalChat(model, dtype=dtype)
        return _CHATS[k]


def seed_of(text: str) -> int:
    """A 31-bit seed from a string (SHA-256), for keys derived from a request."""
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") >> 1


def _number(body: Mapping[str, Any], name: str, default: float) -> float:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise BadRequest(f"{name!r} must be a finite number, got {v!r}")
    return float(v)


def _integer(body: Mapping[str, Any], name: str) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{name!r} must be an integer, got {v!r}")
    return int(v)


def _content(i: int, content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                raise BadRequest(f"messages[{i}].content: only text parts are supported")
            parts.append(part["text"])
        return "".join(parts)
    if content is None:
        return ""
    raise BadRequest(f"messages[{i}].content must be a string or a list of text parts")


def parse_messages(messages: Any) -> list[dict[str, str]]:
    """``messages`` as ``[{"role", "content"}]`` with string contents (text parts joined);
    raises :class:`BadRequest` naming the bad entry."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not m["role"]:
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
        out.append({"role": m["role"], "content": _content(i, m.get("content"))})
    return out


class LocalChat:
    """Chat completions from a :mod:`jaxkit.lm` model in this process.

    Args:
      model: what :func:`jaxkit.lm.load` takes: ``"smollm2-135m"`` (default), a ``.gguf``
        file or a safetensors folder.
      dtype: ``"float32"`` or ``"bfloat16"`` weights.

    Attributes: ``name`` (the model, as given), ``dtype``, ``lock`` (held while generating),
    ``lm`` (the :class:`jaxkit.lm.LanguageModel`, loaded on first access).
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, dtype: str = "float32"):
        self.name = str(model)
        self.dtype = str(dtype)
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalChat({self.name!r}, dtype={self.dtype!r})"

    @property
    def lm(self):
        return load_model(self.name, self.dtype)

    def check(self) -> None:
        """Raise :class:`jaxkit.lm.LMError` now if the model cannot be found (without
        loading it)."""
        from jaxkit.lm.gguf_file import resolve

        resolve(self.name)

    def complete(self, body: Mapping[str, Any], *, seed: int | None = None) -> dict[str, Any]:
        """Answer one chat-completions request.

        Args:
          body: the request (see the module docstring; other fields are ignored).
          seed: the seed when ``body`` has none (default 0).

        Returns:
          The response object (``choices``, ``usage``, ...). Raises :class:`BadRequest`
          for a malformed request, :class:`jaxkit.lm.LMError` when the model cannot be
          loaded, ``FloatingPointError`` when the model's logits were not finite.
        """
        import jax

        if not isinstance(body, Mapping):
            raise BadRequest("the request body must be a JSON object")
        messages = parse_messages(body.get("messages"))
        temperature = _number(body, "temperature", 1.0)
        if temperature < 0:
            raise BadRequest(f"'temperature' must be >= 0, got {temperature:g}")
        top_p = _number(body, "top_p", 1.0)
        if not 0 < top_p <= 1:
            raise BadRequest(f"'top_p' must be in (0, 1], got {top_p:g}")
        max_tokens = _integer(body, "max_completion_tokens")
        if max_tokens is None:
            max_tokens = _integer(body, "max_tokens")
        max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        if max_tokens < 1:
            raise BadRequest(f"'max_tokens' must be >= 1, got {max_tokens}")
        n = _integer(body, "n")
        n = 1 if n is None else n
        if not 1 <= n <= MAX_CHOICES:
            raise BadRequest(f"'n' must be in [1, {MAX_CHOICES}], got {n}")
        stop = body.get("stop")
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        elif not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("'stop' must be a string or a list of strings")
        req_seed = _integer(body, "seed")
        seed = req_seed if req_seed is not None else (0 if seed is None else int(seed))

        lm = self.lm
        try:
            prompt = lm.tokenizer.chat_prompt(messages)
        except Exception as exc:  # jinja's errors: a template that rejects these messages
            raise BadRequest(f"'messages': the chat template rejects them "
                             f"({' '.join(str(exc).split())})") from None
        n_prompt = len(lm.tokenizer.encode(prompt))
        from jaxkit.lm import language_model

        bucket = language_model.PROMPT_BUCKET  # generate pads prompts to it
        room = lm.config.context_length - _round_up(n_prompt, bucket)
        if room < 1:
            raise BadRequest(f"'messages': the prompt's {n_prompt} tokens fill the context "
                             f"length {lm.config.context_length}")
        max_new = min(max_tokens, room)
        with self.lock:
            gen = lm.chat([messages] * n, key=jax.random.key(seed % (1 << 32)),
                          max_new_tokens=max_new, temperature=temperature, top_p=top_p,
                          stop=list(stop))
        if not gen.finite:
            raise FloatingPointError(f"model {self.name!r}: non-finite logits")
        completion = sum(gen.completion_tokens)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": i, "message": {"role": "assistant", "content": text},
                         "finish_reason": reason, "logprobs": None}
                        for i, (text, reason) in enumerate(zip(gen.texts, gen.finish_reasons,
                                                               strict=True))],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": completion,
                      "total_tokens": n_prompt + completion},
            "system_fingerprint": f"jaxkit-{lm.digest[:12]}" if lm.digest else "jaxkit",
        }

    def models(self) -> dict[str, Any]:
        """The ``GET /v1/models`` response: this one model."""
        return {"object": "list", "data": [{"id": self.name, "object": "model", "created": 0,
                                            "owned_by": "jaxkit"}]}


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def chunks_of(response: Mapping[str, Any]) -> Sequence[dict[str, Any]]:
    """A completed response as the ``chat.completion.chunk`` objects a streaming server
    sends: per choice a role chunk, one content chunk and a chunk with the finish reason;
    the last chunk carries ``usage``."""
    base = {"id": response["id"], "object": "chat.completion.chunk",
            "created": response["created"], "model": response["model"]}
    out = []
    for c in response["choices"]:
        i = c["index"]
        out.append({**base, "choices": [{"index": i, "delta": {"role": "assistant",
                                                                "content": ""},
                                         "finish_reason": None}]})
        if c["message"]["content"]:
            out.append({**base, "choices": [{"index": i,
                                             "delta": {"content": c["message"]["content"]},
                                             "finish_reason": None}]})
        out.append({**base, "choices": [{"index": i, "delta": {},
                                         "finish_reason": c["finish_reason"]}]})
    out[-1] = {**out[-1], "usage": response["usage"]}
    return out
