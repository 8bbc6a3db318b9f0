"""Recording a language model's residual stream into an activation store.

:func:`record_activations` runs a :class:`jaxkit.lm.LanguageModel` over documents of
``doc_len + 1`` consecutive tokens of a text and writes, shard by shard (never the whole
recording in memory), the safetensors layout that :mod:`jaxkit.crosscoder.store` and
TempBench read (``jaxkit/crosscoder/ACTIVATIONS.md``):

* ``activations (n, doc_len, d)`` float32: the residual stream after block ``layers[0]``
  at positions ``1 .. doc_len`` of each document, divided by ``scale[0]`` (the RMS of
  that layer over the first shard), so dictionaries see unit-RMS data;
* ``tokens (n, doc_len)`` int32: the token ids at those positions, and ``first (n,)``
  the id at position 0, which is recorded as context only: position 0 of a sequence is
  the model's attention sink, whose residual norm is orders of magnitude above the rest;
* ``layers (n, doc_len, n_layers, d)`` float16 (several layers only): every recorded
  layer's stream, each divided by its own scale (for multi-layer crosscoders).

Beside the shards: ``acts.json`` (model, digest, layers, scales, vocabulary size,
document length and count, the corpus's provenance) and ``vocab.json`` (the text of
every token id, so tasks can be labelled from token sequences). Each file is written
atomically.

:func:`stdlib_corpus` is English prose that ships with Python itself (nothing is
downloaded): the help topics of ``pydoc_data.topics`` (the language reference as
``help()`` shows it), then the docstrings of the standard library's top-level modules in
file-name order. :func:`text_documents` cuts a text's tokens into documents.
"""

from __future__ import annotations

import ast
import json
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxkit.io import atomic_write

__all__ = ["MANIFEST", "VOCAB", "stdlib_corpus", "text_documents", "record_activations",
           "read_text"]

MANIFEST = "acts.json"
VOCAB = "vocab.json"
_MIN_DOC = 200  # docstrings shorter than this many characters are skipped


def stdlib_corpus(max_chars: int | None = None) -> tuple[str, str]:
    """English text shipped with the running Python (module docstring).

    Args:
      max_chars: stop once the text holds this many characters (None: all of it,
        about 2-3 million characters on CPython 3.11).

    Returns:
      ``(text, provenance)``: the paragraphs joined by blank lines, and one sentence
      saying where they come from.
    """
    import pydoc_data.topics as topics

    parts = [topics.topics[k].strip() for k in sorted(topics.topics)]
    size = sum(len(p) for p in parts)
    std = Path(sysconfig.get_paths()["stdlib"])
    n_mod = 0
    for path in sorted(std.glob("*.py")):
        if max_chars is not None and size >= max_chars:
            break
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        n_mod += 1
        for node in [tree, *ast.walk(tree)]:
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= _MIN_DOC:
                    parts.append(doc.strip())
                    size += len(doc)
    text = "\n\n".join(parts)
    if max_chars is not None:
        text = text[:max_chars]
    prov = (f"Python {sysconfig.get_python_version()}'s own documentation: the "
            f"{len(topics.topics)} help topics of pydoc_data/topics.py, then docstrings of "
            f">= {_MIN_DOC} characters from {n_mod} standard-library modules ({std}) in "
            f"file-name order; {len(text)} characters")
    return text, prov


def read_text(source: str) -> tuple[str, str]:
    """``"stdlib"`` (:func:`stdlib_corpus`) or a UTF-8 text file: ``(text, provenance)``.

    Raises:
      ValueError: naming the file when it is missing, not UTF-8, or empty.
    """
    if source == "stdlib":
        return stdlib_corpus()
    p = Path(source)
    if not p.is_file():
        raise ValueError(f"TEXT {source!r} is neither 'stdlib' nor a file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"TEXT {source!r} is not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise ValueError(f"TEXT {source!r} is empty")
    return text, f"the file {p.resolve()} ({len(text)} characters)"


def text_documents(tokenizer, text: str, *, doc_len: int, n_docs: int | None = None
                   ) -> np.ndarray:
    """The tokens of ``text`` cut into consecutive documents of ``doc_len + 1`` tokens
    ``(n, doc_len + 1)`` int32 (the first ``n_docs``; the tail that does not fill one is
    dropped). Paragraphs (blank-line separated) are tokenized one by one and joined with
    their separators, so the ids are those of the whole text up to merges across a blank
    line."""
    if doc_len < 1:
        raise ValueError(f"`doc_len` must be >= 1; got {doc_len}")
    paras = text.split("\n\n")
    pieces = [p + ("\n\n" if i < len(paras) - 1 else "") for i, p in enumerate(paras)]
    ids = np.fromiter((t for row in tokenizer.encode_batch(pieces) for t in row), np.int32)
    n = len(ids) // (doc_len + 1)
    if n_docs is not None:
        if n < n_docs:
            raise ValueError(f"`n_docs` ({n_docs}) x {doc_len + 1} tokens exceeds the text "
                             f"({len(ids)} tokens)")
        n = n_docs
    if n < 1:
        raise ValueError(f"the text holds {len(ids)} tokens, fewer than one document "
                         f"({doc_len + 1})")
    return ids[:n * (doc_len + 1)].reshape(n, doc_len + 1)


def record_activations(lm, docs: np.ndarray, layers: Sequence[int] | int, out, *,
                       docs_per_shard: int = 256, batch: int = 16,
                       provenance: str = "") -> Path:
    """Record ``lm``'s residual stream over ``docs`` into the folder ``out`` (module
    docstring).

    Args:
      lm: a :class:`jaxkit.lm.LanguageModel`.
      docs: ``(n, doc_len + 1)`` token ids (:func:`text_documents`).
      layers: the blocks whose output is recorded (0-based); the first is
        ``activations``.
      out: the output folder (created).
      docs_per_shard: documents per safetensors file (a multiple of ``batch`` is best).
      batch: documents per forward pass (one compiled shape).
      provenance: where the text came from (kept in ``acts.json``).

    Returns:
      The folder.

    Raises:
      ValueError: naming the argument (layers outside the model, bad shapes, ids outside
        the vocabulary) before any forward pass.
    """
    from safetensors.numpy import save

    layers = [int(x) for x in ([layers] if isinstance(layers, int | np.integer) else layers)]
    n_layers = lm.config.n_layers
    if not layers or len(set(layers)) != len(layers) or not all(
            0 <= x < n_layers for x in layers):
        raise ValueError(f"`layers` must be distinct blocks in [0, {n_layers}); got {layers}")
    docs = np.asarray(docs)
    if docs.ndim != 2 or docs.shape[1] < 2 or docs.dtype.kind not in "iu":
        raise ValueError(f"`docs` must be integer token ids (n, doc_len + 1 >= 2); got "
                         f"{docs.dtype} {docs.shape}")
    V = lm.config.vocab_size
    if docs.size and (docs.min() < 0 or docs.max() >= V):
        raise ValueError(f"`docs` holds ids outside the vocabulary [0, {V})")
    if docs_per_shard < 1 or batch < 1:
        raise ValueError(f"`docs_per_shard` and `batch` must be >= 1; got {docs_per_shard}, "
                         f"{batch}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n, S = docs.shape
    batch = min(batch, n)
    scales: list[float] | None = None
    buf: list[np.ndarray] = []
    shard = 0

    def flush(rows: list[np.ndarray], j: int) -> None:
        h = np.concatenate(rows)  # (m, L, nl, d) model units, float32
        lo = j * docs_per_shard
        toks = docs[lo:lo + len(h)]
        tensors = {"activations": np.ascontiguousarray(h[:, :, 0] / np.float32(scales[0])),
                   "tokens": np.ascontiguousarray(toks[:, 1:].astype(np.int32)),
                   "first": np.ascontiguousarray(toks[:, 0].astype(np.int32))}
        if len(layers) > 1:
            tensors["layers"] = np.ascontiguousarray(
                (h / np.asarray(scales, np.float32)[:, None]).astype(np.float16))
        atomic_write(out / f"shard_{j:05d}.safetensors", save(tensors))

    held = 0
    for i in range(0, n, batch):
        rows = docs[i:i + batch]
        m = len(rows)
        if m < batch:  # one compiled shape: pad the last batch
            rows = np.concatenate([rows, np.repeat(rows[-1:], batch - m, 0)])
        acts = lm.activations(rows, layers)
        h = np.stack([np.asarray(acts[f"resid.{x}"], np.float32)[:m, 1:] for x in layers],
                     axis=2)  # (m, L, nl, d)
        if not np.isfinite(h).all():
            raise ValueError(f"the model's activations on documents {i}..{i + m - 1} hold "
                             "NaN or inf")
        buf.append(h)
        held += m
        if scales is None and (held >= docs_per_shard or i + batch >= n):
            allh = np.concatenate(buf)
            scales = [float(np.sqrt(np.mean(allh[:, :, j].astype(np.float64) ** 2)) or 1.0)
                      for j in range(len(layers))]
        while scales is not None and held >= docs_per_shard:
            allh = np.concatenate(buf)
            flush([allh[:docs_per_shard]], shard)
            shard += 1
            buf, held = [allh[docs_per_shard:]], held - docs_per_shard
    if held:
        flush(buf, shard)
    tok = lm.tokenizer
    atomic_write(out / VOCAB, json.dumps([tok.decode([i], skip_special=False)
                                          for i in range(V)]) + "\n")
    atomic_write(out / MANIFEST, json.dumps(dict(
        model=lm.name, digest=getattr(lm, "digest", None), layers=layers, scales=scales,
        layer=layers[0], scale=scales[0], vocab_size=V, doc_len=S - 1, n_docs=n,
        tokens=int(n * (S - 1)), d=int(lm.config.d_model), docs_per_shard=docs_per_shard,
        provenance=provenance), indent=1) + "\n")
    return out
