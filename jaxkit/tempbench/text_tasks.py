"""Real-activation probing tasks whose labels are derived from token sequences.

Each document is a row of token ids of a language model; ``vocab[i]`` is the text of id
``i`` (the ``vocab.json`` that :func:`jaxkit.lm.record.record_activations` writes). Each
task labels every position and marks where the label is *knowable from the document*
(``valid``): a bracket or quotation opened before the document start, a sentence whose
start is not in the document, is unknown there and left out of every metric. A token
that itself holds the marker a label is read from (a bracket, a quote, a negation word)
is left out too: its identity would give the answer away. The document's context token
(``first``, position 0, not recorded) is read as context only.

* ``multi_token_word``: the token continues a word (it starts with a letter, without a
  space, and the token before it ends with a letter): the second or later piece of a word
  split into several tokens.
* ``in_brackets`` (bracket depth): inside ``( )``, ``[ ]`` or ``{ }`` (depth > 0 over all
  three kinds); valid once a bracket has been seen (a closing bracket at depth 0 tells that
  the document started inside).
* ``in_quotes`` (quote depth): inside a ``"..."`` or ``“...”`` quotation; a straight quote
  after whitespace, an opening bracket or the text start opens one, any other closes;
  valid once a quote has been seen.
* ``sentence_start`` (position in sentence): among the first ``first_n`` tokens of a
  sentence (a sentence starts after a token ending in ``.``, ``!``, ``?`` or ``:``
  followed by whitespace, or after a line break); valid once a boundary has been seen.
* ``repeated_ngram``: the ``ngram`` tokens ending here occurred earlier in the document
  (an induction-style feature); valid from position ``ngram - 1``.
* ``negation_scope`` (semantic): after a negation (``not``, ``no``, ``never``, ``n't``,
  ``cannot``, ...) and before the next clause boundary (``, . ; : ! ?`` or a line
  break); valid after the first boundary or negation.

Every label needs context beyond the current token, which is the point of a temporal
benchmark; :func:`task_labels` is plain Python on the host (labels are data, not a
kernel).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TASKS", "task_labels", "NEGATIONS"]

TASKS = ("multi_token_word", "in_brackets", "in_quotes", "sentence_start", "repeated_ngram",
         "negation_scope")
NEGATIONS = frozenset({"not", "no", "never", "nor", "cannot", "n't", "'t", "without",
                       "nothing", "none", "neither", "nobody", "nowhere"})
_OPEN, _CLOSE = "([{", ")]}"
_CLAUSE = set(",.;:!?\n")
_END = (".", "!", "?", ":")


def _word_continuation(ps: list[str]) -> tuple[list[bool], list[bool]]:
    y = [False] * len(ps)
    v = [False] * len(ps)
    for t in range(1, len(ps)):
        prev, cur = ps[t - 1], ps[t]
        y[t] = bool(cur[:1].isalpha() and prev[-1:].isalpha())
        v[t] = True
    return y, v


def _brackets(ps: list[str]) -> tuple[list[bool], list[bool]]:
    y, v = [False] * len(ps), [False] * len(ps)
    depth, known = 0, False
    for t, p in enumerate(ps):
        if any(c in _OPEN or c in _CLOSE for c in p):
            for c in p:
                if c in _OPEN:
                    depth += 1
                    known = True
                elif c in _CLOSE:
                    depth, known = max(depth - 1, 0), True
            continue
        y[t], v[t] = known and depth > 0, known
    return y, v


def _quotes(ps: list[str]) -> tuple[list[bool], list[bool]]:
    y, v = [False] * len(ps), [False] * len(ps)
    inside, known = False, False
    prev_char = " "
    for t, p in enumerate(ps):
        if any(c in "\"“”" for c in p):
            for c in p:
                if c == "“":
                    inside, known = True, True
                elif c == "”":
                    inside, known = False, True
                elif c == '"':
                    inside, known = prev_char.isspace() or prev_char in _OPEN, True
                prev_char = c
            continue
        y[t], v[t] = known and inside, known
        prev_char = p[-1:] or prev_char
    return y, v


def _sentence_start(ps: list[str], first_n: int) -> tuple[list[bool], list[bool]]:
    y, v = [False] * len(ps), [False] * len(ps)
    since = None  # tokens since the last sentence start (None: unknown)
    for t in range(len(ps)):
        if t > 0:
            prev, cur = ps[t - 1], ps[t]
            if "\n" in prev or (prev.rstrip(" \"')”").endswith(_END)
                                and cur[:1].isspace()):
                since = 0
            elif since is not None:
                since += 1
        if since is not None and ps[t].strip():
            y[t], v[t] = since < first_n, True
    return y, v


def _repeated(ids: Sequence[int], n: int) -> tuple[list[bool], list[bool]]:
    y, v = [False] * len(ids), [False] * len(ids)
    seen: set[tuple[int, ...]] = set()
    for t in range(n - 1, len(ids)):
        g = tuple(ids[t - n + 1:t + 1])
        y[t], v[t] = g in seen, True
        seen.add(g)
    return y, v


def _negation(ps: list[str]) -> tuple[list[bool], list[bool]]:
    y, v = [False] * len(ps), [False] * len(ps)
    scope, known = False, False
    for t, p in enumerate(ps):
        w = p.strip().lower()
        if w in NEGATIONS:
            scope, known = True, True
            continue
        if any(c in _CLAUSE for c in p):
            scope, known = False, True
            continue
        y[t], v[t] = known and scope, known
    return y, v


def task_labels(tokens: np.ndarray, vocab: Sequence[str], *, first: np.ndarray | None = None,
                first_n: int = 3, ngram: int = 3) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Labels of every task (module docstring).

    Args:
      tokens: ``(n, L)`` integer token ids.
      vocab: the text of every id (``len(vocab)`` is the vocabulary size).
      first: ``(n,)`` the context token before each document (None: none, so position 0
        of each document is unknown for the tasks that read the token before).
      first_n: tokens from a sentence start that count as its start.
      ngram: the n of ``repeated_ngram``.

    Returns:
      ``{task: (labels (n, L) bool, valid (n, L) bool)}`` in :data:`TASKS` order.
    """
    tok = np.asarray(tokens)
    if tok.ndim != 2 or tok.dtype.kind not in "iu":
        raise ValueError(f"`tokens` must be an integer array (n_docs, length); got "
                         f"{tok.dtype} {tok.shape}")
    V = len(vocab)
    if tok.size and (tok.min() < 0 or tok.max() >= V):
        raise ValueError(f"`tokens` must be ids in [0, {V}) (the vocabulary); got values in "
                         f"[{tok.min()}, {tok.max()}]")
    for name, val in (("first_n", first_n), ("ngram", ngram)):
        if int(val) != val or val < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {val!r}")
    if first is not None:
        first = np.asarray(first)
        if first.shape != (tok.shape[0],) or (first.size and (first.min() < 0
                                                               or first.max() >= V)):
            raise ValueError(f"`first` must be ({tok.shape[0]},) ids in [0, {V}); got "
                             f"shape {first.shape}")
    n, L = tok.shape
    out = {t: (np.zeros((n, L), bool), np.zeros((n, L), bool)) for t in TASKS}
    for i in range(n):
        ids = [int(x) for x in tok[i]]
        ps = [vocab[x] for x in ids]
        pre = [vocab[int(first[i])]] if first is not None else []
        full = pre + ps
        rows = {"multi_token_word": _word_continuation(full), "in_brackets": _brackets(full),
                "in_quotes": _quotes(full),
                "sentence_start": _sentence_start(full, first_n),
                "negation_scope": _negation(full)}
        for name, (y, v) in rows.items():
            y, v = y[len(pre):], v[len(pre):]
            if not pre and name == "multi_token_word":
                v = [False, *v[1:]]
            out[name][0][i], out[name][1][i] = y, v
        y, v = _repeated(ids, ngram)
        out["repeated_ngram"][0][i], out["repeated_ngram"][1][i] = y, v
    return out
