"""A backtracking test that fits a CPU: reasoning-like traces with a wrong step followed
by a correction, a small pretrained model's activations on them, and the paper's two
backtracking measures for any dictionary.

*Traces* (:func:`make_traces`, fully determined by the seed): arithmetic (``Step 1: 7 +
5 = 13. Wait, 7 + 5 = 12. Step 2: ...``) and lookup (``The capital of France is Rome.
Wait, the capital of France is Paris.``) questions; a fraction ``p_error`` of the first
steps is wrong (a sum off by 1-3, another capital) and followed by ``" Wait,"`` and the
correct step. The traces are joined into one token stream (each segment tokenized on its
own, so every label's position is exact) and cut into documents like the corpus.

*Labels* (per token): ``backtrack`` marks the token that closes a wrong step (the ``.``
just before ``" Wait"``): the position where a model that checks its step would start
to backtrack. Its identity is that of every other step's closing ``.``, so a dictionary
detects it only by reading the step's context. ``steer_site`` marks the ``.`` closing a
*correct* first step (where the next token is not ``" Wait"``).

*Measures* (for each dictionary, :func:`detect_and_steer`):

* ``detect``: the latent with the best AUROC for ``backtrack`` on the fit half of the
  documents (window ending at each token), thresholded at a false-positive rate of
  ``fpr`` on the fit half's other tokens; the share of the test half's backtracking
  positions it detects (:func:`jaxkit.tempbench.probes.detection_at_fpr`), with
  ``detect_fpr``, the false-positive rate it reaches on the test half. A latent that
  marks every first-step end passes this test without telling wrong from right, so
* ``detect_hard`` is the same with the step ends only (wrong vs correct first steps, the
  same ``.`` token): the latent and threshold chosen on the fit half's step ends;
* ``steer_sel`` / ``steer_rand``: the mean change in ``log p(" Wait")`` at the test
  half's ``steer_site`` positions when the selected latent's atom (or a random live
  latent's) of norm ``norm`` is added over the window ending there
  (:mod:`jaxkit.tempbench.steer`); ``steer = steer_sel - steer_rand``.

What this stand-in can and cannot show: a 135M instruction model that never learned to
backtrack, templated traces, and dictionaries trained on general text, so it tests
whether a dictionary's latents *represent* "this step was wrong" and *move* the model
towards the correction token, not whether they capture a reasoning model's learned
backtracking behaviour (the paper's DeepSeek-R1 distillations).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import numpy as np

from .probes import auroc_columns, candidate_columns, detection_at_fpr
from .results import Backtracking
from .steer import atom_of, steer_deltas, target_logprob

__all__ = ["Traces", "make_traces", "detect_and_steer", "CAPITALS", "WAIT"]

WAIT = " Wait"
CAPITALS = (("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"),
            ("Spain", "Madrid"), ("Japan", "Tokyo"), ("Egypt", "Cairo"),
            ("Canada", "Ottawa"), ("Russia", "Moscow"), ("China", "Beijing"),
            ("Greece", "Athens"), ("Norway", "Oslo"), ("Peru", "Lima"))


class Traces(NamedTuple):
    docs: np.ndarray  # (n, L + 1) token ids, position 0 context only
    backtrack: np.ndarray  # (n, L) bool, positions 1..L
    steer_site: np.ndarray  # (n, L) bool
    wait_id: int
    text: str  # the first traces, for the report


def _trace(rng: np.random.Generator, wrong: bool) -> list[tuple[str, str]]:
    """Segments ``(text, role)`` of one trace; role "bt" / "site" marks the closing ``.``."""
    end = "bt" if wrong else "site"
    if rng.random() < 0.5:
        a, b, c = (int(x) for x in rng.integers(2, 40, 3))
        s1 = a + b
        bad = s1 + int(rng.choice([-3, -2, -1, 1, 2, 3]))
        segs = [(f"Question: What is {a} + {b} + {c}?\nStep 1: {a} + {b} =", ""),
                (f" {bad if wrong else s1}", ""), (".", end)]
        if wrong:
            segs += [(WAIT, ""), (f", {a} + {b} = {s1}.", "")]
        segs += [(f" Step 2: {s1} + {c} = {s1 + c}.\nAnswer: {s1 + c}.\n\n", "")]
        return segs
    i, j = rng.choice(len(CAPITALS), 2, replace=False)
    country, city = CAPITALS[i]
    segs = [(f"Question: What is the capital of {country}?\nStep 1: The capital of "
             f"{country} is", ""), (f" {CAPITALS[j][1] if wrong else city}", ""), (".", end)]
    if wrong:
        segs += [(WAIT, ""), (f", the capital of {country} is {city}.", "")]
    segs += [(f"\nAnswer: {city}.\n\n", "")]
    return segs


def make_traces(tokenizer, seed: int, *, n_docs: int, doc_len: int,
                p_error: float = 0.5) -> Traces:
    """``n_docs`` documents of ``doc_len + 1`` tokens of traces (module docstring).

    Args:
      tokenizer: the model's tokenizer (``encode``, ``decode``).
      seed: the traces' seed.
      n_docs: documents.
      doc_len: recorded tokens per document (plus one context token).
      p_error: the probability that a trace's first step is wrong.
    """
    if n_docs < 1 or doc_len < 8 or not 0 < p_error < 1:
        raise ValueError(f"`n_docs` >= 1, `doc_len` >= 8 and 0 < `p_error` < 1 needed; got "
                         f"{n_docs}, {doc_len}, {p_error}")
    wait = tokenizer.encode(WAIT)
    if len(wait) != 1:
        raise ValueError(f"the tokenizer splits {WAIT!r} into {len(wait)} tokens; the "
                         "steering target must be one token")
    rng = np.random.default_rng(seed)
    ids: list[int] = []
    roles: list[str] = []
    texts: list[str] = []
    need = n_docs * (doc_len + 1)
    while len(ids) < need:
        segs = _trace(rng, bool(rng.random() < p_error))
        if len(texts) < 4:
            texts.append("".join(t for t, _ in segs))
        for text, role in segs:
            e = tokenizer.encode(text)
            ids += e
            roles += [""] * (len(e) - 1) + [role]
    docs = np.asarray(ids[:need], np.int32).reshape(n_docs, doc_len + 1)
    r = np.asarray(roles[:need]).reshape(n_docs, doc_len + 1)[:, 1:]
    return Traces(docs, r == "bt", r == "site", int(wait[0]), "".join(texts))


def _select(codes_fit: np.ndarray, y_fit: np.ndarray) -> int:
    cand = candidate_columns(codes_fit, y_fit, 512)
    au = auroc_columns(codes_fit[:, cand], y_fit)
    return int(cand[int(np.nanargmax(np.where(np.isfinite(au), au, -np.inf)))])


def detect_and_steer(key, method: str, params, codes: dict, labels: dict, *, window: int,
                     fpr: float, lm=None, layer: int = 0, scale: float = 1.0,
                     docs: np.ndarray | None = None, norm: float = 1.0,
                     max_sites: int = 64) -> Backtracking:
    """The backtracking measures of one dictionary (module docstring).

    Args:
      key: PRNG key of the random control latent.
      method: the dictionary's method (:func:`jaxkit.tempbench.steer.atom_of`).
      params: its parameters.
      codes: ``{"fit", "test"}``: ``(N, M)`` codes of the windows ending at each token
        ``t >= T - 1`` of the fit / test documents, row-major over (document, t).
      labels: ``{"fit", "test"}``: ``(backtrack, steer_site)`` flat like the codes.
      window: the dictionary's window T.
      fpr: the false-positive rate of the detection threshold.
      lm: a :class:`jaxkit.lm.LanguageModel` to steer (None: detection only).
      layer, scale: the recorded block and its unit (model = recorded x scale).
      docs: the test documents ``(n, L + 1)`` (with ``lm``).
      norm: the atoms' norm in recorded units.
      max_sites: the most steering positions (evenly spaced over the test half).

    Returns:
      The :class:`~jaxkit.tempbench.results.Backtracking` measures: ``detect``,
      ``detect_fpr``, ``detect_hard`` and with ``lm`` ``steer_sel``, ``steer_rand``,
      ``steer``.
    """
    bt_fit, _ = labels["fit"]
    bt_test, site_test = labels["test"]
    best = _select(codes["fit"], bt_fit)
    det, f = detection_at_fpr(codes["fit"][:, best], bt_fit, codes["test"][:, best], bt_test,
                              fpr)
    site_fit = labels["fit"][1]
    hf, ht = bt_fit | site_fit, bt_test | site_test  # step ends only: wrong vs right
    if bt_fit[hf].any() and (~bt_fit[hf]).any():
        hb = _select(codes["fit"][hf], bt_fit[hf])
        hard = detection_at_fpr(codes["fit"][hf, hb], bt_fit[hf], codes["test"][ht, hb],
                                bt_test[ht], fpr)[0]
    else:
        hard = float("nan")
    out = Backtracking(detect=det, detect_fpr=f, detect_hard=hard)
    if lm is None:
        return out
    T = window
    L = docs.shape[1] - 1
    W = L - T + 1
    flat = np.flatnonzero(site_test)
    if not len(flat):
        return dataclasses.replace(out, steer_sel=float("nan"), steer_rand=float("nan"),
                                   steer=float("nan"))
    flat = flat[np.unique(np.linspace(0, len(flat) - 1, min(max_sites, len(flat))).astype(int))]
    rows, ts = flat // W, flat % W + T - 1 + 1  # +1: position 0 is the context token
    alive = np.flatnonzero((codes["fit"] != 0).any(0))
    others = alive[alive != best]
    rand = int(others[int(jax.random.randint(key, (), 0, len(others)))]) if len(others) \
        else best
    where = [(int(r), int(t)) for r, t in zip(rows, ts, strict=True)]
    toks = docs[rows]
    target = np.full(len(rows), int(lm.tokenizer.encode(WAIT)[0]))
    d = lm.config.d_model
    clean = target_logprob(lm, layer, toks, np.zeros((len(rows), L + 1, d), np.float32), ts,
                           target)
    res = {}
    for tag, col in (("sel", best), ("rand", rand)):
        delta = steer_deltas(atom_of(method, params, col, T), where, L + 1, norm)
        got = target_logprob(lm, layer, toks, delta * np.float32(scale), ts, target)
        res[tag] = float(np.mean(got - clean))
    return dataclasses.replace(out, steer_sel=res["sel"], steer_rand=res["rand"],
                               steer=res["sel"] - res["rand"])
