"""Real-activation probing tasks whose labels are derived from the text itself.

Each document is a row of byte tokens (the byte-level language model of
:mod:`jaxkit.tempbench.lm_acts`, or a user's byte tokens); each task labels every
position, and marks where the label is *knowable from the document* (``valid``): a
span whose opening marker lies before the document start, or a line whose start is not
in the document, is unknown there and left out of every metric.

* ``word_interior`` (multi-token words): the byte is a letter and so are the two bytes
  before it (the third or later byte of a word; needs two tokens of context).
* ``line_start`` (position within a verse line): the byte is among the first
  ``line_start`` bytes after a newline (valid once a newline is in the document).
* ``speaker`` (speaker turns): the byte lies inside a ``**NAME**`` span (bold speaker
  heading of the plays), markers excluded (valid after the first ``**`` marker: one
  after whitespace opens, any other closes).
* ``stage_direction`` (quotation spans): inside an ``_..._`` italic span (stage
  directions), markers excluded (valid after the first ``_``, same rule).
* ``repeated_ngram``: the ``ngram`` bytes ending here occurred earlier in the document
  (an induction-style feature; valid from position ``ngram - 1``).

Every label needs context beyond the current token, which is the point of a temporal
benchmark; :func:`task_labels` is plain NumPy on the host (labels are data, not a
kernel).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TASKS", "task_labels", "encode_text"]

TASKS = ("word_interior", "line_start", "speaker", "stage_direction", "repeated_ngram")
_NL = ord("\n")


def encode_text(text: str, length: int) -> np.ndarray:
    """UTF-8 bytes of ``text`` cut into documents of ``length`` bytes ``(n, length)``
    (the tail that does not fill a document is dropped)."""
    b = np.frombuffer(text.encode("utf-8"), np.uint8)
    n = len(b) // length
    if n < 1:
        raise ValueError(f"`text` holds {len(b)} bytes, fewer than one document "
                         f"({length})")
    return b[:n * length].reshape(n, length)


def _is_letter(t: np.ndarray) -> np.ndarray:
    return ((t >= 65) & (t <= 90)) | ((t >= 97) & (t <= 122))


_SPACE = frozenset(b" \t\r\n")


def _span(doc: np.ndarray, marker: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Inside a ``marker ... marker`` span (markers excluded), and where that is known.

    A marker after whitespace opens a span, one after any other byte closes it (so a
    document that starts inside a span is read correctly from its first closing
    marker); a marker at the document start is ambiguous and leaves the state unknown.
    """
    m, L = len(marker), len(doc)
    inside = np.zeros(L, bool)
    valid = np.zeros(L, bool)
    state, known, t = False, False, 0
    code = np.frombuffer(marker, np.uint8)
    while t < L:
        if t + m <= L and np.array_equal(doc[t:t + m], code):
            if t > 0:
                state, known = int(doc[t - 1]) in _SPACE, True
            t += m  # marker bytes: not inside, not valid (their identity gives them away)
            continue
        inside[t], valid[t] = state and known, known
        t += 1
    return inside, valid


def _line_start(doc: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    L = len(doc)
    lab, valid = np.zeros(L, bool), np.zeros(L, bool)
    last = None
    for t in range(L):
        if last is not None:
            lab[t], valid[t] = t - last - 1 < n, True
        if doc[t] == _NL:
            last = t
    return lab, valid


def _repeated(doc: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    L = len(doc)
    lab, valid = np.zeros(L, bool), np.zeros(L, bool)
    seen: set[bytes] = set()
    for t in range(n - 1, L):
        g = doc[t - n + 1:t + 1].tobytes()
        lab[t], valid[t] = g in seen, True
        seen.add(g)
    return lab, valid


def task_labels(tokens: np.ndarray, *, line_start: int = 8,
                ngram: int = 4) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Labels of every task (module docstring) for documents of byte tokens.

    Args:
      tokens: ``(n, L)`` integer byte tokens (0..255).
      line_start: bytes after a newline that count as the line start.
      ngram: the n of ``repeated_ngram``.

    Returns:
      ``{task: (labels (n, L) bool, valid (n, L) bool)}`` in :data:`TASKS` order.
    """
    tok = np.asarray(tokens)
    if tok.ndim != 2 or tok.dtype.kind not in "iu":
        raise ValueError(f"`tokens` must be an integer array (n_docs, length); got "
                         f"{tok.dtype} {tok.shape}")
    if tok.size and (tok.min() < 0 or tok.max() > 255):
        raise ValueError(f"`tokens` must be bytes (0..255); got values in "
                         f"[{tok.min()}, {tok.max()}]")
    for name, v in (("line_start", line_start), ("ngram", ngram)):
        if int(v) != v or v < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {v!r}")
    tok = tok.astype(np.uint8)
    n, L = tok.shape
    let = _is_letter(tok)
    wi = np.zeros((n, L), bool)
    wi[:, 2:] = let[:, 2:] & let[:, 1:-1] & let[:, :-2]
    wv = np.zeros((n, L), bool)
    wv[:, 2:] = True
    out = {"word_interior": (wi, wv)}
    per = {"line_start": lambda d: _line_start(d, line_start),
           "speaker": lambda d: _span(d, b"**"),
           "stage_direction": lambda d: _span(d, b"_"),
           "repeated_ngram": lambda d: _repeated(d, ngram)}
    for name, fn in per.items():
        rows = [fn(d) for d in tok]
        out[name] = (np.stack([r[0] for r in rows]).reshape(n, L),
                     np.stack([r[1] for r in rows]).reshape(n, L))
    return {t: out[t] for t in TASKS}
