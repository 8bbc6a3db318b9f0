"""Real activations for TempBench: a pretrained language model's residual stream over
English text, recorded into the activation store, and the reader of such a store (the
pipeline's own or a user's).

* :func:`record_corpus` loads a Llama-family model through :func:`jaxkit.lm.load`
  (SmolLM2-135M-Instruct by default), cuts :func:`jaxkit.lm.record.stdlib_corpus` (English
  prose that ships with Python) or a text file into documents of ``doc_len + 1`` tokens
  and records the residual stream after each block of ``layers`` with
  :func:`jaxkit.lm.record.record_activations` (safetensors shards written one at a time,
  ``acts.json`` with the provenance, ``vocab.json``).
* :func:`check_store` reads only the shards' headers and the manifest: a bad directory
  fails in a second with one line naming the file, before any training.
* :func:`load_documents` streams a store shard by shard
  (:func:`jaxkit.crosscoder.store.iter_tensors`: sliced reads) and labels the tasks:
  ``activations (n, L, d)`` and integer ``tokens (n, L)`` with ids below the vocabulary
  size (``acts.json``'s ``vocab_size``, else ``len(vocab.json)``); optional ``first
  (n,)``, ``layers (n, L, n_layers, d)`` and user task labels ``label.<task> (n, L)``
  (1 positive, 0 negative, -1 unknown). The text tasks of
  :mod:`jaxkit.tempbench.text_tasks` need ``vocab.json``; user labels need nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxkit.crosscoder.store import iter_tensors
from jaxkit.lm.record import MANIFEST, VOCAB, read_text, record_activations, text_documents

from .text_tasks import task_labels

__all__ = ["record_corpus", "stream_of", "check_store", "Documents", "load_documents", "MANIFEST",
           "VOCAB"]

LABEL = "label."


def record_corpus(lm, out, *, layers, n_docs: int, doc_len: int, docs_per_shard: int,
                  text: str = "stdlib", batch: int = 16) -> Path:
    """Record ``lm`` (a :class:`jaxkit.lm.LanguageModel`) over the first ``n_docs``
    documents of ``doc_len + 1`` tokens of ``text`` (``"stdlib"`` or a UTF-8 file) into
    ``out`` (module docstring). Returns the folder."""
    body, prov = read_text(text)
    docs = text_documents(lm.tokenizer, body, doc_len=doc_len, n_docs=n_docs)
    return record_activations(lm, docs, layers, out, docs_per_shard=docs_per_shard,
                              batch=batch, provenance=prov)


def stream_of(lm, docs: np.ndarray, layer: int, scale: float, batch: int = 16) -> np.ndarray:
    """The residual stream after block ``layer`` of ``lm`` at positions ``1..`` of
    ``docs (n, L + 1)``, divided by ``scale`` (the store's units): ``(n, L, d)`` float32;
    ``batch`` documents per call (the recording's compiled shape)."""
    docs = np.asarray(docs, np.int32)
    out = []
    for i in range(0, len(docs), batch):
        rows = docs[i:i + batch]
        m = len(rows)
        if m < batch:
            rows = np.concatenate([rows, np.repeat(rows[-1:], batch - m, 0)])
        a = lm.activations(rows, [layer])[f"resid.{layer}"]
        out.append(np.asarray(a, np.float32)[:m, 1:] / np.float32(scale))
    return np.concatenate(out)


def _meta(directory: Path) -> dict:
    p = directory / MANIFEST
    if not p.is_file():
        return {}
    try:
        meta = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{str(p)!r} is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{str(p)!r} must hold a JSON object")
    return meta


def _vocab(directory: Path) -> list[str] | None:
    p = directory / VOCAB
    if not p.is_file():
        return None
    try:
        v = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{str(p)!r} is not a JSON list of token texts ({e})") from None
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ValueError(f"{str(p)!r} must be a JSON list of strings (the text of each id)")
    return v


def check_store(directory) -> dict:
    """Check a TempBench activation directory cheaply (headers, manifest, vocabulary):
    it exists, holds ``.safetensors`` shards whose ``activations`` are ``(n, L, d)`` with
    one ``(L, d)`` and ``tokens`` ``(n, L)``, and has a vocabulary size and either
    ``vocab.json`` or user labels. Returns ``{"shards", "vocab_size", "text_tasks",
    "user_tasks", "meta"}``.

    Raises:
      ValueError: one line naming the directory or the file.
    """
    from jaxkit.crosscoder.store import safetensors_header

    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"`acts_dir` {str(directory)!r} is not a directory")
    files = sorted(d.glob("*.safetensors"))
    if not files:
        raise ValueError(f"`acts_dir` {str(directory)!r} holds no .safetensors shards")
    meta, vocab = _meta(d), _vocab(d)
    shapes, user = set(), None
    for f in files:
        heads = {name: safetensors_header(f, name)[0] for name in ("activations", "tokens")}
        a, t = heads["activations"], heads["tokens"]
        if len(a) != 3 or tuple(t) != tuple(a[:2]):
            raise ValueError(f"shard {str(f)!r}: `activations` must be (n, L, d) and "
                             f"`tokens` (n, L); got {tuple(a)} and {tuple(t)}")
        shapes.add(tuple(a[1:]))
        names = _tensor_names(f)
        labs = sorted(n[len(LABEL):] for n in names if n.startswith(LABEL))
        if user is None:
            user = labs
        elif labs != user:
            raise ValueError(f"shard {str(f)!r}: label tensors {labs} differ from the first "
                             f"shard's {user}")
    if len(shapes) != 1:
        raise ValueError(f"`acts_dir` {str(directory)!r}: shards disagree on (L, d): "
                         f"{sorted(shapes)}")
    V = meta.get("vocab_size", len(vocab) if vocab is not None else None)
    if not isinstance(V, int) or V < 1:
        raise ValueError(f"`acts_dir` {str(directory)!r}: no vocabulary size (write "
                         f"{MANIFEST} with \"vocab_size\" or {VOCAB})")
    if vocab is not None and len(vocab) != V:
        raise ValueError(f"{str(d / VOCAB)!r} lists {len(vocab)} tokens, {MANIFEST} says "
                         f"vocab_size {V}")
    if vocab is None and not user:
        raise ValueError(f"`acts_dir` {str(directory)!r}: no tasks (write {VOCAB}, the text "
                         "of each token id, or label.<task> tensors in the shards)")
    return dict(shards=len(files), vocab_size=V, text_tasks=vocab is not None,
                user_tasks=user or [], meta=meta)


def _tensor_names(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return list(f.keys())


class Documents(NamedTuple):
    acts: np.ndarray  # (n, L, d)
    tokens: np.ndarray  # (n, L) int32
    layers: np.ndarray | None  # (n, L, n_layers, d) float16 (as stored), or None
    first: np.ndarray | None  # (n,) context token before each document, or None
    labels: dict[str, tuple[np.ndarray, np.ndarray]]  # task -> (y, valid), each (n, L)
    meta: dict[str, Any]


def load_documents(directory, *, max_docs: int | None = None, with_layers: bool = True
                   ) -> Documents:
    """Read a store (module docstring) in file-name order, shard by shard, stopping after
    ``max_docs`` documents, and label the tasks (text tasks when ``vocab.json`` is there,
    then the user's ``label.<task>`` tensors, which replace a text task of the same
    name). ``with_layers=False`` skips the ``layers`` tensor.

    Raises:
      ValueError: naming the file (:func:`check_store`'s checks, ids outside the
        vocabulary, non-finite activations, labels of the wrong shape or values).
    """
    d = Path(directory)
    info = check_store(d)
    V = info["vocab_size"]
    user = info["user_tasks"]
    opt = ("first", *(["layers"] if with_layers else []), *(LABEL + u for u in user))
    acts, toks, lays, firsts, labs = [], [], [], [], {u: [] for u in user}
    n = 0
    for path, got in iter_tensors(d, ("activations", "tokens"), optional=opt):
        a, t = got["activations"], got["tokens"]
        if t.dtype.kind not in "iu" or (t.size and (t.min() < 0 or t.max() >= V)):
            raise ValueError(f"shard {str(path)!r}: `tokens` must be integer ids in "
                             f"[0, {V}) (the vocabulary size)")
        if not np.isfinite(a).all():
            raise ValueError(f"shard {str(path)!r}: `activations` holds NaN or inf")
        take = a.shape[0] if max_docs is None else min(a.shape[0], max_docs - n)
        acts.append(np.asarray(a[:take], np.float32))
        toks.append(np.asarray(t[:take]).astype(np.int32))
        lay = got.get("layers")
        lays.append(None if lay is None else np.asarray(lay[:take], np.float16))
        f = got.get("first")
        firsts.append(None if f is None else np.asarray(f[:take]).astype(np.int32))
        for u in user:
            lab = np.asarray(got[LABEL + u][:take])
            if lab.shape != t[:take].shape or not np.isin(lab, (-1, 0, 1)).all():
                raise ValueError(f"shard {str(path)!r}: `{LABEL}{u}` must be (n, L) with "
                                 "values 1, 0 or -1 (unknown)")
            labs[u].append(lab)
        n += take
        if max_docs is not None and n >= max_docs:
            break
    tokens = np.concatenate(toks)
    layers = None if any(x is None for x in lays) else np.concatenate(lays)
    first = None if any(x is None for x in firsts) else np.concatenate(firsts)
    labels: dict = {}
    if info["text_tasks"]:
        labels = task_labels(tokens, _vocab(d), first=first)
    for u in user:
        lab = np.concatenate(labs[u])
        labels[u] = (lab == 1, lab >= 0)
    meta = {**info["meta"], "vocab_size": V, "source": str(d)}
    return Documents(np.concatenate(acts), tokens, layers, first, labels, meta)
