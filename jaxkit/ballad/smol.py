"""Real proposers: SmolLM2-135M-Instruct (in-process, :mod:`jaxkit.lm`) writing Python
priority functions as text, under distinct configurations, with every reply cached.

A :class:`Member` is one configuration of the local model:

* ``fewshot`` (FunSearch-style): the task, then up to ``n_shots`` programs of the
  parent's island with their scores (worst first, so the best is next to the
  question), and "write an improved version";
* ``free``: the task and ONE parent, and "rewrite it into a different heuristic".

:func:`MEMBERS` gives the pool's three configurations (greedy few-shot, hot free rewrite,
sampled few-shot with the longest context).

Each call is priced by tokens consumed and generated: ``cost = (prompt_tokens *
price_in + completion_tokens * price_out) / 1000``, so with the default prices of 1 the
cost is thousands of tokens (the units of every real-proposer cost in the report).

Replies are parsed without executing anything (:func:`parse_reply`: a fenced block, an
unclosed fence, or bare ``def priority``; ``import numpy as np`` prepended when missing);
the program then runs only inside :mod:`jaxkit.jail`. A reply without a usable
``priority`` function is a failed call (:class:`~jaxkit.ballad.llm.LLMError`, which
still costs its tokens).

Batching and the cache: :meth:`Member.propose_batch` answers every run of a search step
that routed to this member in one batched :meth:`jaxkit.lm.LanguageModel.chat` call
(:func:`jaxkit.ballad.search.search` uses it). Every reply is stored in a
:class:`ReplyCache`: one JSON-lines file, keyed by the SHA-256 of (model, messages,
temperature, top_p, max_tokens) and the occurrence index of that key in the run, so a
seeded run replays call for call with no model (``offline=True``: a miss is a failed
call). The sampling key of a batch is derived from its requests' keys, so a batch drawn
again gives the same replies.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jaxkit.lm import replies as _replies
from jaxkit.lm.replies import ReplyCache

from .llm import Candidate, LLMError

__all__ = ["Member", "ReplyCache", "Backend", "MEMBERS", "MODEL", "parse_reply",
           "TASK_BINPACK", "fewshot_messages", "free_messages"]

MODEL = "smollm2-135m"
STOP = ("\n```",)

TASK_BINPACK = (
    "Online bin packing: items arrive one at a time and each goes into a bin at once. "
    "`priority(item, bins)` gets the item size (a float) and `bins`, a numpy array of the "
    "remaining capacities of the bins the item fits in, and returns a numpy array with one "
    "score per bin; the item goes to the bin with the highest score. Fewer bins is better. "
    "Use only numpy (np) and math.")

_SYSTEM = ("You write short Python heuristics. Reply with one Python function in a "
           "```python code block and nothing else.")

_FENCE_OPEN = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n")


def _defines(code: str, func_name: str) -> bool:
    try:
        tree = ast.parse(code)
        compile(tree, "<reply>", "exec")
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == func_name
               and len(n.args.args) >= 2 for n in tree.body)


def _longest_prefix(lines: list[str], func_name: str) -> str | None:
    """The longest leading run of ``lines`` that parses and defines ``func_name``."""
    for end in range(len(lines), 0, -1):
        code = "\n".join(lines[:end]).rstrip() + "\n"
        if _defines(code, func_name):
            return code
    return None


def parse_reply(text: str, func_name: str = "priority") -> str:
    """The program in a model's reply, ready for the jail (nothing is executed here).

    Tries, in order: each fenced block (closed or not; any language tag), then the text
    from the first ``import`` / ``def func_name`` line; of each, the longest leading run
    of lines that parses and defines ``func_name`` with at least two arguments at top
    level. ``import numpy as np`` and ``import math`` are prepended when missing.

    Args:
        text: the reply.
        func_name: the function the program must define.

    Returns:
        The source.

    Raises:
        ValueError: "no code in reply", or "no parsable `priority` function in reply".
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty reply")
    blocks = []
    pos = 0
    while (m := _FENCE_OPEN.search(text, pos)) is not None:
        end = text.find("```", m.end())
        blocks.append(text[m.end(): end if end >= 0 else len(text)])
        pos = end + 3 if end >= 0 else len(text)
    bare = re.search(rf"^(import |from |def {re.escape(func_name)}\b)", text, re.MULTILINE)
    if bare is not None:
        blocks.append(text[bare.start():])
    if not blocks:
        raise ValueError("no code in reply")
    for block in blocks:
        code = _longest_prefix(block.strip("\n").split("\n"), func_name)
        if code is not None:
            head = [] if re.search(r"^import numpy as np\b", code, re.MULTILINE) \
                else ["import numpy as np"]
            head += [] if re.search(r"^import math\b", code, re.MULTILINE) else ["import math"]
            return "\n".join(head + ([""] if head else [])) + code
    raise ValueError(f"no parsable `{func_name}` function in reply")


def fewshot_messages(programs: Sequence[tuple[str, float]], task: str) -> list[dict]:
    """The few-shot prompt: ``programs`` ((source, score), shown worst first) then the
    request for an improved version."""
    parts = [task]
    for i, (src, score) in enumerate(sorted(programs, key=lambda p: p[1])):
        parts.append(f"Version {i + 1} (score {score:.4g}, higher is better):\n"
                     f"```python\n{src.strip()}\n```")
    parts.append("Write an improved version of `priority` with the same arguments.")
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def free_messages(source: str, task: str) -> list[dict]:
    """The free-rewrite prompt: one program and the request for a different one."""
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"{task}\n\nA starting point:\n```python\n"
                                        f"{source.strip()}\n```\n\nRewrite `priority` into a "
                                        "different, new heuristic with the same arguments."}]


@dataclass
class Backend(_replies.Backend):
    """:class:`jaxkit.lm.replies.Backend` stopping each reply at a closing code fence (the
    shared local model and reply cache of a pool of :class:`Member` s)."""

    stop: tuple[str, ...] = STOP


@dataclass
class Member:
    """One configuration of the local model as a proposer (module docstring).

    Attributes:
        name: the proposer's name.
        mode: ``"fewshot"`` or ``"free"``.
        temperature: 0 is greedy.
        top_p: nucleus mass.
        max_tokens: the most tokens per reply.
        n_shots: programs shown in ``fewshot`` mode.
        backend: the shared :class:`Backend` (model and cache).
        price_in, price_out: cost per thousand prompt / completion tokens.
        nominal_tokens: (prompt, completion) tokens of a typical call, for the prices
            cost-aware routers see before any call (``cost``).
        task: the problem description in the prompt (the context's ``task`` wins).
    """

    name: str
    mode: str
    temperature: float
    backend: Backend
    top_p: float = 1.0
    max_tokens: int = 128
    n_shots: int = 2
    price_in: float = 1.0
    price_out: float = 1.0
    nominal_tokens: tuple[int, int] = (300, 128)
    task: str = TASK_BINPACK

    def __post_init__(self):
        if self.mode not in ("fewshot", "free"):
            raise ValueError(f"member {self.name!r}: `mode` must be 'fewshot' or 'free'; "
                             f"got {self.mode!r}")

    @property
    def cost(self) -> float:
        """The nominal price of one call (thousands of tokens at the default prices)."""
        return (self.nominal_tokens[0] * self.price_in
                + self.nominal_tokens[1] * self.price_out) / 1000.0

    def settings(self) -> dict:
        return {"temperature": float(self.temperature), "top_p": float(self.top_p),
                "max_tokens": int(self.max_tokens)}

    def messages(self, parents: Sequence[Candidate], context: Mapping[str, Any]) -> list:
        task = context.get("task") or self.task
        if self.mode == "free":
            src = next((p.source for p in parents if p.source), None)
            if src is None:
                raise LLMError(self.name, "local", "no parent program to rewrite")
            return free_messages(src, task)
        progs = [(s, float(v)) for s, v in context.get("source_examples", ()) if s]
        scores = list(context.get("scores") or [])
        for i, p in enumerate(parents):
            if p.source and all(p.source != s for s, _ in progs):
                progs.append((p.source, float(scores[i]) if i < len(scores) else 0.0))
        if not progs:
            raise LLMError(self.name, "local", "no parent program to show")
        progs = sorted(progs, key=lambda p: -p[1])[: self.n_shots]
        return fewshot_messages(progs, task)

    def _result(self, rec: dict | str) -> tuple[list[Candidate], float] | LLMError:
        if isinstance(rec, str):
            return LLMError(self.name, "local", rec)
        cost = (rec["prompt_tokens"] * self.price_in
                + rec["completion_tokens"] * self.price_out) / 1000.0
        try:
            src = parse_reply(rec["reply"])
        except ValueError as e:
            return LLMError(self.name, "local", str(e), cost=cost)
        return [Candidate(source=src, note=self.name)], cost

    def propose_batch(self, requests: Sequence[tuple[Sequence[Candidate], Mapping]]
                      ) -> list[tuple[list[Candidate], float] | LLMError]:
        """One result per (parents, context) request: (candidates, cost) or the
        :class:`LLMError` of a failed call; the model runs once for all misses."""
        out: list = [None] * len(requests)
        asks, where = [], []
        for i, (parents, ctx) in enumerate(requests):
            try:
                asks.append((self.messages(parents, ctx), self.settings()))
                where.append(i)
            except LLMError as e:
                out[i] = e
        for i, rec in zip(where, self.backend.complete(asks), strict=True):
            out[i] = self._result(rec)
        return out

    def propose(self, parents: Sequence[Candidate], context: Mapping[str, Any]
                ) -> tuple[list[Candidate], float]:
        """One call (see :meth:`propose_batch`); raises the failed call's LLMError."""
        (res,) = self.propose_batch([(parents, context)])
        if isinstance(res, LLMError):
            raise res
        return res


def MEMBERS(backend: Backend) -> list[Member]:  # noqa: N802 (a fixed pool, named as data)
    """The three real configurations: ``smol-fewshot`` (greedy, 3 programs shown, 160
    tokens), ``smol-free`` (temperature 1, top-p 0.95, one program to rewrite, 128 tokens)
    and ``smol-fewshot-hot`` (temperature 0.7, top-p 0.95, 4 programs shown: the longest
    context, hence the dearest)."""
    return [Member("smol-fewshot", "fewshot", 0.0, backend, max_tokens=160, n_shots=3,
                   nominal_tokens=(420, 160)),
            Member("smol-free", "free", 1.0, backend, top_p=0.95, max_tokens=128,
                   nominal_tokens=(220, 128)),
            Member("smol-fewshot-hot", "fewshot", 0.7, backend, top_p=0.95, max_tokens=160,
                   n_shots=4, nominal_tokens=(520, 160))]
