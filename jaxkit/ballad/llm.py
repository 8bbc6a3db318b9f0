"""LLM proposers: the :class:`Proposer` protocol and an OpenAI-compatible proposer.

:class:`OpenAIChat` talks to any server exposing ``POST {base_url}/chat/completions``
(OpenAI, vLLM, llama.cpp, Ollama, ...) through :class:`jaxkit.llm.ChatClient`. It asks for ONE
improved ``priority`` function in a fenced Python block, extracts the code from each
returned choice (parsed and compiled, never executed here; the sandbox runs it), and
prices the call from the ``usage`` field. Every transport or parsing failure raises
:class:`LLMError`, which the pipeline loop records as a failed proposal.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from jaxkit.llm import ChatClient, LLMError

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


class OpenAIChat(ChatClient):
    """Proposer backed by an OpenAI-compatible ``/chat/completions`` endpoint: the prompt
    for an improved ``priority`` function and the extraction of code from each choice.
    Transport, response cache, offline replay and pricing are
    :class:`jaxkit.llm.ChatClient`'s, with its arguments (``model``, ``base_url``,
    ``api_key``, ``timeout``, ``price_in`` / ``price_out``, ``temperature``,
    ``n_candidates``, ``cache``, ``offline``); with no endpoint configured it runs on the
    in-process :mod:`jaxkit.lm` model (SmolLM2-135M-Instruct by default).
    """

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
        data = self.post(body)
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
