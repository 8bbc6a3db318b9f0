"""Replayable chat replies of the local model: a JSON-lines reply cache and the batched
backend that fills it (used by every pipeline that asks the local model: Ballad's real
proposers, AIRA-Compose's agent).

A request is ``(messages, settings)`` (settings: ``temperature``, ``top_p``,
``max_tokens``). Its key is the SHA-256 of (model, messages, settings); the ``k``-th time a
run sends the same key it reads record ``(key, k)``, so a seeded run replays call for call
with no model (``offline=True``: a miss is a failed call, an error string). The misses of
one :meth:`Backend.complete` call are generated in one batched
:meth:`jaxkit.lm.LanguageModel.chat` per distinct settings, with a sampling key derived from
the requests' keys (a batch drawn again gives the same replies).

Replies a package ships (a committed cache that makes a pipeline's quick run replayable)
are read from ``shipped`` and never written: new replies go to ``path`` only, a file the
user owns (a run's output folder by default), so nothing is written inside an installed
package.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["reply_key", "ReplyCache", "Backend"]


def reply_key(model: str, messages: list[dict], settings: Mapping[str, Any]) -> str:
    """The cache key of one request: 32 hex digits of the SHA-256 of its JSON.

    Args:
        model: the model's name.
        messages: the chat messages.
        settings: the sampling settings.

    Returns:
        The key.
    """
    text = json.dumps({"model": model, "messages": messages, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(path: Path, into: dict) -> None:
    if path.is_dir():
        raise ValueError(f"reply cache {path}: is a folder, not a file")
    if not path.exists():
        return
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
            into[(rec["key"], int(rec["k"]))] = rec
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line, or not a record


class ReplyCache:
    """Replies on disk: one JSON-lines file, one record per reply ``{key, k, model,
    settings, reply, prompt_tokens, completion_tokens, finish}`` (``k``: the occurrence of
    ``key`` in the run). Appending is one write per line; a torn last line is ignored.

    Args:
        path: the file new replies are appended to (created when the first is).
        shipped: optional read-only caches (a package's committed replies), read first;
            a record in ``path`` wins over a shipped one with the same key.
    """

    def __init__(self, path: str | os.PathLike,
                 shipped: str | os.PathLike | Sequence[str | os.PathLike] | None = None):
        self.path = Path(path)
        self.records: dict[tuple[str, int], dict] = {}
        if shipped is not None:
            for p in [shipped] if isinstance(shipped, str | os.PathLike) else shipped:
                _read(Path(p), self.records)
        _read(self.path, self.records)

    def get(self, key: str, k: int) -> dict | None:
        return self.records.get((key, k))

    def put(self, rec: dict) -> None:
        self.records[(rec["key"], int(rec["k"]))] = rec
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")


@dataclass
class Backend:
    """The local model behind a :class:`ReplyCache` (module docstring).

    Attributes:
        cache: the :class:`ReplyCache`.
        offline: replay only (a miss is a failed call; the model is never loaded).
        model: what :func:`jaxkit.lm.load` loads.
        stop: stop strings of every generation.
        hits, misses: cache use.
    """

    cache: ReplyCache
    offline: bool = False
    model: str = "smollm2-135m"
    stop: tuple[str, ...] = ()
    hits: int = 0
    misses: int = 0
    _seen: dict = field(default_factory=dict)
    _lock: Any = field(default_factory=threading.Lock)

    def complete(self, requests: Sequence[tuple[list[dict], dict]]) -> list[dict | str]:
        """Replies to ``requests`` ((messages, settings) pairs): one cache record each, or
        an error string for a miss offline. The misses are generated in one batched call
        per distinct settings."""
        out: list[dict | str | None] = [None] * len(requests)
        todo: dict[str, list[tuple[int, str, int]]] = {}
        with self._lock:
            for i, (msgs, st) in enumerate(requests):
                key = reply_key(self.model, msgs, st)
                k = self._seen.get(key, 0)
                self._seen[key] = k + 1
                rec = self.cache.get(key, k)
                if rec is not None:
                    self.hits += 1
                    out[i] = rec
                else:
                    self.misses += 1
                    if self.offline:
                        out[i] = "offline replay: reply not in the cache"
                    else:
                        todo.setdefault(json.dumps(st, sort_keys=True), []).append((i, key, k))
            for st_text, rows in todo.items():
                st = json.loads(st_text)
                for i, rec in zip([r[0] for r in rows], self._generate(requests, rows, st),
                                  strict=True):
                    self.cache.put(rec)
                    out[i] = rec
        return out  # type: ignore[return-value]

    def _generate(self, requests, rows, st: dict) -> list[dict]:
        import jax

        from .local_chat import load_model, seed_of

        lm = load_model(self.model)
        seed = seed_of("|".join(f"{key}:{k}" for _, key, k in rows))
        gen = lm.chat([requests[i][0] for i, _, _ in rows], key=jax.random.key(seed),
                      max_new_tokens=int(st["max_tokens"]),
                      temperature=float(st["temperature"]), top_p=float(st["top_p"]),
                      stop=list(self.stop))
        return [dict(key=key, k=k, model=self.model, settings=st, reply=text,
                     prompt_tokens=int(pt), completion_tokens=int(ct), finish=fin)
                for (_, key, k), text, pt, ct, fin in zip(
                    rows, gen.texts, gen.prompt_tokens, gen.completion_tokens,
                    gen.finish_reasons, strict=True)]
