"""The language-model agent of the layer-string search: it reads the history of
evaluated strings and their losses and proposes the next ones.

Each round, every agent run (one per seed) sends one chat request: a system message
stating the grammar (strings of ``depth`` capital letters over ``alphabet``: A
attention, M MLP, S Mamba-1, D Mamba-2), one worked exchange showing the reply format
(fixed random strings), and a user message listing the best
``history`` strings evaluated so far with their validation bits per byte (best first)
and asking for ``n`` new strings, one per line. :func:`parse_proposals` reads the reply
(list markers, quotes and spaced letters tolerated; lower-case words are prose and
ignored); a proposal is *valid* when it has exactly ``depth`` letters, all in
``alphabet``, and neither the run nor this reply has proposed it before. Missing valid
proposals are filled by uniform random unseen strings, each counted as a **fallback**
(the report's fallback rate: the share of evaluations the model did not choose).

Backends (both cache every reply, keyed by the request and its occurrence in the run,
so a seeded run replays call for call with no model and no server):

* local (``endpoint=""``): SmolLM2-135M-Instruct in process (:mod:`jaxkit.lm`), every
  round's requests of all seeds generated in one batched call, through
  :class:`jaxkit.lm.replies.Backend` and its JSON-lines
  :class:`~jaxkit.lm.replies.ReplyCache` (the committed QUICK replies,
  ``jaxkit/compose/replies/smollm2-135m.jsonl``, are read and never written; new ones go
  to ``<out>/agent-replies.jsonl``);
* any OpenAI-compatible endpoint (``endpoint=URL``): :class:`jaxkit.llm.ChatClient`,
  one call per request, its replies cached in a folder.

With ``offline=True`` a reply that is not cached is a failed call: all ``n`` proposals
of that request become fallbacks (counted), and the search goes on.

Reference: AIRA-Compose (Pepe et al. 2026), whose research agent proposes
architectures from the results so far; here the agent is a small local model, so the
claim tested is whether *this* agent beats random search at an equal budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .arch import LETTERS
from .search import RandomSearch

__all__ = ["AgentSearch", "Proposer", "parse_proposals", "agent_messages",
           "DEFAULT_CACHE", "NAMES"]

DEFAULT_CACHE = Path(__file__).parent / "replies" / "smollm2-135m.jsonl"
NAMES = {"A": "attention", "M": "MLP", "S": "Mamba-1", "D": "Mamba-2"}

_SPACED = re.compile(r"^[\s\-\*\d\.\)\(\"'`:,>#]*((?:[A-Z][\s,\-]+)+[A-Z])[\s\"'`.,;]*$")
_WORD = re.compile(r"\b[A-Z]+\b")


def parse_proposals(text: str, depth: int, alphabet: str,
                    exclude: Sequence[str] = ()) -> tuple[list[str], int]:
    """The valid proposals of a reply, in order, and how many candidates were invalid.

    A candidate is a capitalised word (``AMDAMD``; list markers, quotes and trailing
    prose around it are ignored) or a line of single capitals separated by spaces,
    commas or dashes (``A M D A M D``). It is valid when it has ``depth`` letters, all
    in ``alphabet``, and is not in ``exclude`` nor an earlier candidate of the reply.

    Args:
      text: the model's reply.
      depth: the string length.
      alphabet: the allowed letters (a subset of A, M, S, D).
      exclude: strings already proposed (the run's history).

    Returns:
      ``(valid, n_invalid)``: the valid strings, and the candidates that were not
      (wrong length, letters outside ``alphabet``, repeats). Words of one letter or of
      letters none of which is in A, M, S, D (prose such as "I") are not candidates.
    """
    seen, valid, bad = set(exclude), [], 0
    for line in text.splitlines():
        m = _SPACED.match(line)
        words = ["".join(re.findall(r"[A-Z]", m.group(1)))] if m else _WORD.findall(line)
        for w in words:
            if len(w) < 2 or not set(w) & set(LETTERS):
                continue
            if len(w) != depth or not set(w) <= set(alphabet) or w in seen:
                bad += 1
                continue
            seen.add(w)
            valid.append(w)
    return valid, bad


def _demo(depth: int, alphabet: str) -> list[dict]:
    """One worked exchange showing the reply format: three evaluated strings and an
    answer of three new ones (fixed random strings of ``depth`` letters of ``alphabet``,
    from a fixed seed; no loss information of the run)."""
    rng = np.random.default_rng(0)
    strings: list[str] = []
    for _ in range(200):
        s = "".join(rng.choice(list(alphabet), size=depth))
        if s not in strings:
            strings.append(s)
        if len(strings) == 6:
            break
    strings += [strings[-1]] * (6 - len(strings))
    user = _user(list(zip(strings[:3], (4.71, 4.75, 4.80), strict=True)), depth, alphabet, 3,
                 12)
    return [{"role": "user", "content": user},
            {"role": "assistant", "content": "\n".join(strings[3:])}]


def _user(history, depth: int, alphabet: str, n: int, shown: int) -> str:
    best = sorted(history, key=lambda kv: kv[1])[:shown]
    if best:
        lines = "\n".join(f"{s} {v:.3f}" for s, v in best)
        past = (f"Evaluated so far ({len(history)}; the best {len(best)} shown, "
                f"validation loss in bits per byte, lower is better):\n{lines}\n\n")
    else:
        past = "Nothing is evaluated yet.\n\n"
    return past + (f"Propose {n} new strings of {depth} letters from {alphabet}, not listed "
                   "above, likely to have a lower loss. One per line.")


def agent_messages(history: Sequence[tuple[str, float]], depth: int, alphabet: str, n: int,
                   *, shown: int = 12) -> list[dict]:
    """The chat request of one round (module docstring): the grammar, one worked
    exchange showing the reply format (:func:`_demo`; it raised the share of valid
    proposals of SmolLM2-135M), then the ``shown`` best of ``history`` ((string, bits
    per byte) pairs) and a request for ``n`` new strings.

    Args:
      history: the evaluated strings and their validation bits per byte.
      depth, alphabet: the grammar of a string.
      n: how many strings to ask for.
      shown: how many of the best of ``history`` the request lists.

    Returns:
      The chat messages (system, demonstration user / assistant, user).
    """
    letters = ", ".join(f"{c} = {NAMES[c]}" for c in alphabet)
    system = (f"You design language-model architectures. An architecture is a string of "
              f"exactly {depth} capital letters, one per layer, from {alphabet} ({letters}). "
              "Reply with architecture strings only, one per line.")
    return [{"role": "system", "content": system}, *_demo(depth, alphabet),
            {"role": "user", "content": _user(history, depth, alphabet, n, shown)}]


class Proposer:
    """The chat backend of the agent (module docstring): ``complete(requests) -> list of
    reply texts or None`` (None: a failed call), with ``hits`` / ``misses`` counts.

    Args:
      model: the local model (``jaxkit.lm.load`` name) or the endpoint's model name.
      endpoint: "" for the local model, else an OpenAI-compatible base URL.
      cache: the reply cache: a JSON-lines file new replies are appended to (local; ""
        for ``out_dir/agent-replies.jsonl``; :data:`DEFAULT_CACHE`, the committed
        replies, is read first and never written unless named here) or a folder
        (endpoint; "" for ``out_dir/agent-cache``).
      offline: replay only; nothing is generated or sent.
      temperature, max_tokens: the sampling settings of every request.
      out_dir: where the default cache file or folder goes.
    """

    def __init__(self, model: str = "smollm2-135m", *, endpoint: str = "", cache: str = "",
                 offline: bool = False, temperature: float = 0.0, max_tokens: int = 48,
                 out_dir: str | Path | None = None):
        self.settings = dict(temperature=float(temperature), top_p=0.95,
                             max_tokens=int(max_tokens))
        self.model, self.endpoint, self.offline = model, endpoint, offline
        self.failures: list[str] = []
        if endpoint:
            from jaxkit.llm import ChatClient

            folder = cache or str(Path(out_dir or ".") / "agent-cache")
            self.client = ChatClient(model, base_url=endpoint, temperature=temperature,
                                     cache=folder, offline=offline)
            self.cache_path = folder
        else:
            from jaxkit.lm.replies import Backend, ReplyCache

            # the committed replies are read, never written: new ones go to the user's file
            self.cache_path = cache or str(Path(out_dir or ".") / "agent-replies.jsonl")
            shipped = None if Path(self.cache_path) == DEFAULT_CACHE else DEFAULT_CACHE
            self.client = Backend(ReplyCache(self.cache_path, shipped=shipped),
                                  offline=offline, model=model, stop=("\n```",))

    @property
    def hits(self) -> int:
        return self.client.hits

    @property
    def misses(self) -> int:
        return self.client.misses

    def complete(self, requests: Sequence[list[dict]]) -> list[str | None]:
        """One reply text per request (``None`` for a failed call, its reason kept in
        ``failures``)."""
        if not requests:
            return []
        if not self.endpoint:
            recs = self.client.complete([(m, dict(self.settings)) for m in requests])
            out = []
            for r in recs:
                if isinstance(r, str):
                    self.failures.append(r)
                    out.append(None)
                else:
                    out.append(r["reply"])
            return out
        from jaxkit.llm import LLMError

        out = []
        for m in requests:
            try:
                resp = self.client.chat(m, max_tokens=self.settings["max_tokens"],
                                        top_p=self.settings["top_p"])
                out.append(str(resp["choices"][0]["message"]["content"] or ""))
            except (LLMError, KeyError, IndexError, TypeError) as e:
                self.failures.append(str(e))
                out.append(None)
        return out


class AgentSearch(RandomSearch):
    """The agent's policy state for one seed: the history it is shown and its counts.

    Use :meth:`request` to build the round's chat request and :meth:`accept` to turn
    the reply into ``n`` strings (valid proposals first, then counted fallbacks);
    :meth:`ask` alone (no model) is a fallback, as is every proposal of a failed call.

    Attributes:
      proposed: strings from the model; fallbacks: strings drawn at random instead;
      invalid: rejected candidates of replies; failed_calls: calls with no reply.
    """

    def __init__(self, depth: int, alphabet: str = LETTERS, *, shown: int = 12):
        super().__init__(depth, alphabet)
        self.shown = shown
        self.proposed = self.fallbacks = self.invalid = self.failed_calls = 0
        self.pending: list[str] = []

    def request(self, n: int) -> list[dict]:
        return agent_messages(list(self.seen.items()), self.depth, self.alphabet, n,
                              shown=self.shown)

    def accept(self, reply: str | None, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` strings for this round from ``reply`` (None: a failed call)."""
        taken = set(self.seen) | set(self.pending)
        if reply is None:
            self.failed_calls += 1
            valid = []
        else:
            valid, bad = parse_proposals(reply, self.depth, self.alphabet, exclude=taken)
            self.invalid += bad
            valid = valid[:n]
        self.proposed += len(valid)
        self.pending.extend(valid)
        out = list(valid)
        while len(out) < n:
            out.append(self.ask(rng))
        return out

    def ask(self, rng: np.random.Generator) -> str:
        """One fallback: a uniform random string not yet proposed (counted)."""
        self.fallbacks += 1
        taken = set(self.seen) | set(self.pending)
        s = super().ask(rng)
        for _ in range(50):
            if s not in taken:
                break
            s = super().ask(rng)
        self.pending.append(s)
        return s

    def tell(self, s: str, loss: float) -> None:
        super().tell(s, loss)
        if s in self.pending:
            self.pending.remove(s)

    def counts(self) -> dict:
        total = self.proposed + self.fallbacks
        return dict(proposed=self.proposed, fallbacks=self.fallbacks, invalid=self.invalid,
                    failed_calls=self.failed_calls,
                    fallback_rate=self.fallbacks / total if total else float("nan"))
