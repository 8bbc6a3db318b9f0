"""Contrastive discovery on real data with a known answer, the explanations proposed by a
language model: which protein directly regulates a target in the Sachs et al. (2005)
signalling data (:func:`jaxkit.data.sachs.load_sachs`, 7466 cells, 11 phospho-proteins,
the 18-edge consensus graph as the answer).

**Question** (one per protein with a consensus parent: 10): "which protein directly
regulates T?". **Explanations**: the language model is shown the other ten proteins and
asked for the ``k`` likeliest direct regulators; the reply is parsed by name
(:func:`parse_names`: every listed protein or synonym it mentions, in order, T excluded,
no repeats); when it names fewer than ``k``, the set is filled from the remaining proteins
in the list's order and the fill is counted as a fallback. A last explanation, "another
protein", makes the set exhaustive. The answer is *correct* when the question resolves to
a proposed protein that is a consensus parent of T, or to "another protein" when none of
the proposed ones is (the model's proposals are scored: ``truth_in_set``).

**Experiments**: the nine row blocks of the data (different stimulation and inhibition
conditions, mapping unconfirmed; cost 1 each). **Outcome** of block ``b``: the shift of
T's mean log level in the block from its mean over all cells, in units of T's pooled
standard deviation, binned into 21 bins over [-2, 2] (ends open). **Likelihood** under
"P regulates T": the shift is ``beta_P x`` the shift of P's mean log level in the block,
``beta_P`` the least-squares slope of log T on log P fitted on the *other* eight blocks,
with noise ``sd^2 = 1 / n_b + model_sd^2`` (``model_sd`` 0.3: what a single-parent
linear model misses); under "another protein" the shift is ``N(0, 1 / n_b + 0.5^2)``
(an unnamed cause moves T by an unknown amount). Every outcome has the outlier floor of
the synthetic domains.

Methods: the contrastive agent (greedy EIG per cost, :func:`jaxkit.kernels.belief.eig.
greedy_eig`) and a random design that spends the same budget, both read with the MECE
posterior (:func:`jaxkit.contrastive.methods.run_methods`, whose pointwise agents run too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from jax.scipy.stats import norm

from .domains import OUTLIER

__all__ = ["PROTEINS", "parse_names", "messages", "propose_sets", "tables", "run_real",
           "run_with_model"]

#: column name -> names a reply may use (lower case)
PROTEINS: dict[str, tuple[str, ...]] = {
    "praf": ("raf", "praf", "c-raf", "raf1"), "pmek": ("mek", "pmek", "mek1/2", "mek1"),
    "plcg": ("plcg", "plc-gamma", "plcgamma", "plc", "plc-g", "plcγ"),
    "PIP2": ("pip2",), "PIP3": ("pip3",), "p44/42": ("erk", "p44/42", "erk1/2", "mapk"),
    "pakts473": ("akt", "pakts473", "pkb"), "PKA": ("pka",), "PKC": ("pkc",),
    "P38": ("p38",), "pjnk": ("jnk", "pjnk"),
}
_LABEL = {"praf": "Raf", "pmek": "Mek", "plcg": "PLC-gamma", "p44/42": "Erk",
          "pakts473": "Akt", "pjnk": "JNK"}
N_BINS = 21


def _label(name: str) -> str:
    return _LABEL.get(name, name)


def parse_names(text: str, exclude: str) -> list[str]:
    """Column names of the proteins a reply mentions (by any synonym, whole words), in
    order of first mention, without ``exclude`` and without repeats."""
    low = str(text).lower()
    hits = []
    for name, syns in PROTEINS.items():
        pos = [m.start() for s in syns
               for m in re.finditer(rf"(?<![a-z0-9]){re.escape(s)}(?![a-z0-9])", low)]
        if pos and name != exclude:
            hits.append((min(pos), name))
    return [n for _, n in sorted(hits)]


def messages(target: str, k: int) -> list[dict[str, str]]:
    """The chat prompt asking for the ``k`` likeliest direct regulators of ``target``."""
    others = ", ".join(_label(n) for n in PROTEINS if n != target)
    return [{"role": "system", "content": "You are a cell-signalling biologist. Answer "
                                          "with protein names only."},
            {"role": "user", "content": (
                f"In human T cells, which proteins most likely directly regulate "
                f"{_label(target)}? Choose {k} from: {others}.")}]


def propose_sets(client, targets: Sequence[str], k: int, *, max_tokens: int = 48
                 ) -> list[dict]:
    """Per target: the model's reply, the parsed proposals and the explanation set
    (``k`` proteins, filled in list order when fewer are named; ``filled`` counts them).
    """
    out = []
    for t in targets:
        data = client.chat(messages(t, k), max_tokens=int(max_tokens))
        ch = (data.get("choices") or [{}])[0]
        reply = str((ch.get("message") or {}).get("content") or "")
        named = parse_names(reply, t)[:k]
        fill = [n for n in PROTEINS if n != t and n not in named][:k - len(named)]
        out.append(dict(target=t, reply=reply, named=named, explanations=named + fill,
                        filled=len(fill)))
    return out


def _binned(mean, sd):
    edges = np.linspace(-2.0, 2.0, N_BINS - 1)
    cdf = np.asarray(norm.cdf((edges[None] - np.asarray(mean)[..., None])
                              / np.asarray(sd)[..., None]))
    cdf = np.concatenate([np.zeros(cdf.shape[:-1] + (1,)), cdf,
                          np.ones(cdf.shape[:-1] + (1,))], -1)
    p = np.clip(np.diff(cdf, axis=-1), 0, 1)
    return (1 - OUTLIER) * p + OUTLIER / N_BINS


def tables(x: np.ndarray, names: list[str], ends: Sequence[int], target: str,
           explanations: Sequence[str], *, model_sd: float = 0.3, other_sd: float = 0.5
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(log_lik (B, K + 1, 21), outcomes (B,))`` of one question (module docstring):
    the B row blocks ending at ``ends``, the explanations then "another protein"."""
    lx = np.log(np.maximum(np.asarray(x, float), 1e-3))
    lx = (lx - lx.mean(0)) / lx.std(0)
    starts = (0, *ends[:-1])
    blocks = [np.arange(a, b) for a, b in zip(starts, ends, strict=True)]
    ti = names.index(target)
    shift_t = np.array([lx[b, ti].mean() for b in blocks])
    edges = np.linspace(-2.0, 2.0, N_BINS - 1)
    outcomes = np.searchsorted(edges, shift_t).astype(np.int32)
    n_b = np.array([len(b) for b in blocks], float)
    rows = []
    for e in explanations:
        pi = names.index(e)
        mean = np.empty(len(blocks))
        for j, b in enumerate(blocks):
            rest = np.concatenate([blocks[i] for i in range(len(blocks)) if i != j])
            xp, yt = lx[rest, pi], lx[rest, ti]
            beta = float(np.dot(xp - xp.mean(), yt - yt.mean()) / np.dot(xp - xp.mean(),
                                                                         xp - xp.mean()))
            mean[j] = beta * lx[b, pi].mean()
        rows.append(_binned(mean, np.sqrt(1 / n_b + model_sd ** 2)))
    rows.append(_binned(np.zeros(len(blocks)), np.sqrt(1 / n_b + other_sd ** 2)))
    return np.log(np.stack(rows, 1)), outcomes


def run_real(client, *, k: int = 3, budget: float = 4.0, tau: float = 0.9, seed: int = 0,
             n_orders: int = 16) -> dict:
    """The whole real-data comparison (module docstring) with the language model
    ``client`` (a :class:`jaxkit.llm.ChatClient`); ``n_orders`` random designs per
    question (orders drawn from ``seed``).

    Returns:
        ``{"questions": [per target: target, reply, named, explanations, filled,
        parents, truth_in_set, answers (method -> resolved explanation or "" when
        unresolved), correct (method -> bool; random: the share of its orders)],
        "summary": {method: fraction correct}, "truth_in_set": share, "filled": total}``.
    """
    import jax

    from jaxkit.data.sachs import SACHS_CHANGE_POINTS, load_sachs

    from .methods import run_methods

    if k < 1 or budget < 1:
        raise ValueError(f"`k` and `budget` must be >= 1; got {k}, {budget}")
    x, names, truth = load_sachs()
    targets = [n for i, n in enumerate(names) if truth[i].any()]
    props = propose_sets(client, targets, k)
    ends = list(SACHS_CHANGE_POINTS)
    out, per = [], {}
    key = jax.random.key(seed)
    for qi, p in enumerate(props):
        t = p["target"]
        parents = {names[j] for j in np.flatnonzero(truth[names.index(t)])}
        ex = p["explanations"]
        ll, y = tables(x, names, ends, t, ex)
        good = [i for i, e in enumerate(ex) if e in parents] or [len(ex)]  # else "another"
        B = ll.shape[0]
        res = run_methods(np.repeat(ll[None], n_orders, 0).astype(np.float32),
                          np.ones((n_orders, B), np.float32),
                          np.repeat(y[None], n_orders, 0), float(budget),
                          max_steps=int(min(B, math.floor(budget))), tau=tau, alpha=0.1,
                          kappa=0.5, order_key=jax.random.fold_in(key, qi))
        labels = [*ex, "another protein"]
        answers, correct = {}, {}
        for m, r in res.items():
            a = np.asarray(r["answer"])
            answers[m] = labels[int(a[0])] if a[0] >= 0 else ""
            correct[m] = float(np.mean(np.isin(a, good)))
            per.setdefault(m, []).append(correct[m])
        out.append(dict(p, parents=sorted(parents), truth_in_set=bool(set(ex) & parents),
                        answers=answers, correct=correct))
    return dict(questions=out, summary={m: float(np.mean(v)) for m, v in per.items()},
                truth_in_set=float(np.mean([q["truth_in_set"] for q in out])),
                filled=int(sum(q["filled"] for q in out)))


def run_with_model(model: str, *, cache, offline: bool = False, **kw) -> dict:
    """:func:`run_real` through a :class:`jaxkit.llm.ChatClient` on ``model`` (greedy,
    replies cached in ``cache``; ``offline``: replay only); on a missing model or a reply
    missing from the cache ``{"error": one line}`` instead, nothing raised."""
    from jaxkit.llm import ChatClient, LLMError
    from jaxkit.lm import LMError

    try:
        client = ChatClient(model, temperature=0.0, cache=cache, offline=offline)
        out = run_real(client, **kw)
    except (LMError, LLMError) as exc:
        return dict(error=str(exc).splitlines()[0], model=model)
    return dict(out, error="", model=model, hits=client.hits, misses=client.misses)
