"""LLM proposers: the :class:`Proposer` protocol and an OpenAI-compatible chat client.

:class:`OpenAIChat` talks to any server exposing ``POST {base_url}/chat/completions``
(OpenAI, vLLM, llama.cpp, Ollama, ...) with the standard library only. It asks for ONE
improved ``priority`` function in a fenced Python block, extracts the code from each
returned choice (parsed and compiled, never executed here; the sandbox runs it), and
prices the call from the ``usage`` field. Every transport or parsing failure raises
:class:`LLMError`, which the pipeline loop records as a failed proposal.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from jaxkit.io import atomic_write

__all__ = [
    "Candidate",
    "LLMError",
    "Proposer",
    "OpenAIChat",
    "extract_functions",
    "pool_from_env",
    "DEFAULT_TASK",
]

DEFAULT_TASK = (
    "Online bin packing: items of sizes in (0, capacity] arrive one at a time and each must be "
    "placed immediately into a bin. `priority(item: float, bins: np.ndarray) -> np.ndarray` "
    "receives the item size and the remaining capacities of the bins it fits into (a fresh, "
    "empty bin is always among them) and returns one score per bin; the item goes to the bin "
    "with the highest score. The goal is to use as few bins as possible. Only numpy (as np) "
    "and math are available."
)

_SYSTEM = (
    "You are an expert in combinatorial optimisation who writes Python priority functions "
    "for online bin packing. Reply with exactly one complete Python function in a ```python "
    "code block. The function must be deterministic, use only numpy (np) and math, and "
    "return a finite float array with one entry per bin."
)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PY_TAGS = {"", "python", "python3", "py"}


@dataclass
class Candidate:
    """A proposed heuristic: Python ``source`` and/or a parameter vector ``theta``."""

    source: str | None = None
    theta: np.ndarray | None = None
    note: str = ""


class LLMError(RuntimeError):
    """A failed LLM call; ``model``, ``url``, ``status`` (HTTP code or None), ``reason``,
    ``cost``."""

    def __init__(self, model: str, url: str, reason: str, status: int | None = None,
                 cost: float = 0.0):
        self.model, self.url, self.reason, self.status = model, url, reason, status
        self.cost = cost  # dollars the failed call still cost (tokens of a useless reply)
        code = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"LLM {model!r} at {url}: {code}{reason}")


@runtime_checkable
class Proposer(Protocol):
    """Anything that turns parent candidates into new ones, at a cost in dollars."""

    name: str

    def propose(
        self, parents: Sequence[Candidate], context: Mapping[str, Any]
    ) -> tuple[list[Candidate], float]: ...


def _defines(tree: ast.Module, func_name: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == func_name
        for node in tree.body
    )


def extract_functions(text: str, func_name: str = "priority") -> list[str]:
    """Fenced Python code blocks of ``text`` that compile and define ``func_name`` at top
    level, in order (nothing is executed)."""
    found = []
    for tag, body in _FENCE.findall(text):
        if tag.lower() not in _PY_TAGS:
            continue
        code = body.strip("\n")
        try:
            tree = ast.parse(code)
            compile(tree, "<candidate>", "exec")
        except (SyntaxError, ValueError):
            continue
        if _defines(tree, func_name):
            found.append(code + "\n")
    return found


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class OpenAIChat:
    """Proposer backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` / ``api_key`` default to ``JAXKIT_LLM_BASE_URL`` / ``JAXKIT_LLM_API_KEY``,
    then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Prices are dollars per million tokens.
    ``n_candidates > 1`` requests that many choices (field ``n``) in one call.

    ``cache``: a folder where every successful response is stored (JSON, written
    atomically) under a hash of the model and the request body plus how many times this
    client has sent that same body before, so a run replays call for call. A cached
    response is used instead of the network; with ``offline=True`` a request that is not
    in the cache is a failed call (:class:`LLMError`) and nothing is sent, so a recorded
    run can be replayed with no server. ``hits`` / ``misses`` count cache use.
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
        base_url = base_url or _env("JAXKIT_LLM_BASE_URL", "OPENAI_BASE_URL")
        if offline and cache is None:
            raise ValueError(f"LLM {model!r}: offline=True needs a `cache` folder to replay")
        if offline and not base_url:
            base_url = "offline://replay"
        if not base_url:
            raise ValueError(
                f"no base URL for LLM {model!r}: pass base_url= or set JAXKIT_LLM_BASE_URL "
                "(or OPENAI_BASE_URL), e.g. http://localhost:8000/v1"
            )
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
        self.name = model
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or _env("JAXKIT_LLM_API_KEY", "OPENAI_API_KEY")
        self.timeout = float(timeout)
        self.price_in = float(price_in)
        self.price_out = float(price_out)
        self.temperature = float(temperature)
        self.n_candidates = int(n_candidates)
        self.cache = None if cache is None else Path(cache)
        self.offline = bool(offline)
        self.hits = self.misses = 0
        self._seen: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"OpenAIChat({self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def messages(
        self, parents: Sequence[Candidate], context: Mapping[str, Any]
    ) -> list[dict[str, str]]:
        """The chat prompt: task, parents with their scores (higher is better), instruction."""
        func_name = context.get("func_name", "priority")
        scores = context.get("scores")
        parts = [f"Task:\n{context.get('task', DEFAULT_TASK)}"]
        shown = 0
        for i, parent in enumerate(parents):
            if parent.source is None:
                continue
            shown += 1
            score = ""
            if scores is not None and i < len(scores) and scores[i] is not None:
                score = f" (score {float(scores[i]):.4g}; higher is better)"
            parts.append(f"Version {shown}{score}:\n```python\n{parent.source.rstrip()}\n```")
        ask = "an improved version of the function" if shown else "a strong first version"
        parts.append(
            f"Write {ask}. Return ONE complete function named `{func_name}` with the same "
            "signature in a single ```python code block."
        )
        return [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def _post(self, body: dict) -> dict:
        if self.cache is None:
            return self._send(body)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        k = self._seen.get(digest, 0)
        self._seen[digest] = k + 1
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

    def cost(self, usage: Mapping[str, Any] | None) -> float:
        """Dollars for a call with this ``usage`` (0 when the server reports none)."""
        if not usage:
            return 0.0
        tokens_in = float(usage.get("prompt_tokens") or 0)
        tokens_out = float(usage.get("completion_tokens") or 0)
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6

    def propose(
        self, parents: Sequence[Candidate], context: Mapping[str, Any]
    ) -> tuple[list[Candidate], float]:
        """One chat call; one candidate per choice that contains a usable function (the last
        such block of the choice). Raises :class:`LLMError` when the call fails or no choice
        contains parsable code."""
        func_name = context.get("func_name", "priority")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages(parents, context),
            "temperature": self.temperature,
        }
        if self.n_candidates > 1:
            body["n"] = self.n_candidates
        data = self._post(body)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise LLMError(self.model, self.url, "response has no choices")
        candidates = []
        for choice in choices:
            try:
                content = choice["message"]["content"]
            except (KeyError, TypeError):
                continue
            if not isinstance(content, str):
                continue
            found = extract_functions(content, func_name)
            if found:
                candidates.append(Candidate(source=found[-1], note=self.model))
        if not candidates:
            raise LLMError(self.model, self.url, "no parsable code in response",
                           cost=self.cost(data.get("usage")))
        return candidates, self.cost(data.get("usage"))


def _price(text: str) -> float | None:
    """A price field as a float, or None when it is not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def _pool_entry(entry: str) -> tuple[str, float, float]:
    """``(model, price_in, price_out)`` from ``"model"`` or ``"model:price_in:price_out"``.

    Model names may contain ':' (``llama3:8b``); a numeric last field means prices were
    given, so both of the last two fields must then be prices.

    Raises:
      ValueError: naming the entry: a price that is not a number, a single price, a
        negative or non-finite price, or an empty model name.
    """
    fields = entry.split(":")
    model, prices = entry, (0.0, 0.0)
    if len(fields) >= 2 and _price(fields[-1]) is not None:
        if len(fields) == 2:
            raise ValueError(f"LLM pool entry {entry!r} gives one price; write "
                             f"'model:price_in:price_out' (dollars per 1M tokens) or just "
                             f"'model'")
        p_in, p_out = _price(fields[-2]), _price(fields[-1])
        if p_in is None:
            raise ValueError(f"LLM pool entry {entry!r}: price_in {fields[-2]!r} is not a "
                             f"number (expected 'model:price_in:price_out')")
        model, prices = ":".join(fields[:-2]), (p_in, p_out)
    elif len(fields) >= 3 and _price(fields[-2]) is not None:
        raise ValueError(f"LLM pool entry {entry!r}: price_out {fields[-1]!r} is not a "
                         f"number (expected 'model:price_in:price_out')")
    if not all(math.isfinite(v) and v >= 0 for v in prices):
        raise ValueError(f"LLM pool entry {entry!r}: prices must be finite and >= 0; got "
                         f"{prices[0]:g} and {prices[1]:g}")
    if not model.strip():
        raise ValueError(f"empty model name in LLM pool entry {entry!r}")
    return model.strip(), prices[0], prices[1]


def pool_from_env(spec: str | None = None, **kwargs: Any) -> list[OpenAIChat]:
    """Proposers from ``"model:price_in:price_out,model2,..."`` (prices optional, dollars per
    1M tokens; model names may contain ':'). ``spec`` defaults to env ``JAXKIT_LLM_POOL``;
    ``kwargs`` go to every :class:`OpenAIChat`.

    Raises:
      ValueError: an empty spec, or an entry whose prices do not parse (naming it).
    """
    spec = spec if spec is not None else os.environ.get("JAXKIT_LLM_POOL", "")
    pool = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        model, price_in, price_out = _pool_entry(entry)
        pool.append(OpenAIChat(model, price_in=price_in, price_out=price_out, **kwargs))
    if not pool:
        raise ValueError("empty LLM pool spec (set JAXKIT_LLM_POOL='model:price_in:price_out,...')")
    return pool
