"""CruxBench with text: subquestions written by a language model, scored by content.

Targets are plain-language forecasting questions (:data:`TARGETS`) over eight named
latent factors (:data:`FACTORS`: interest rates, inflation, employment, growth, energy,
politics, technology, weather). Target ``i`` is the latent-Gaussian event
``Y = 1[sum_j a_ij F_j + sqrt(1 - 0.8) e > c_i]`` with its *primary* factor carrying 60%
of the explained variance 0.8, its *secondary* 25% and the other six 15% together
(``a_ij = sqrt(0.8 w_ij)``; ``c_i = 0``, an even opening price).

A language model (:class:`jaxkit.llm.ChatClient`: the in-process :mod:`jaxkit.lm` model
when no endpoint is configured, with its disk cache, so a run replays without the model)
is asked for ``n`` yes/no subquestions per target. Each reply is parsed
(:func:`parse_reply`): a JSON list with stated probabilities
(:func:`jaxkit.cruxbench.proposers.parse_questions`) if there is one, else one question
per line (numbered or bulleted lines ending in ``?``), else nothing (the reply falls back
to no question, counted). Each question is validated (:func:`validate`: 8 to 200
characters, ends with ``?``, opens with an auxiliary verb (a yes/no question), not a
restatement of the target (word Jaccard >= 0.6), not
a repeat of an earlier question of the same reply) and mapped to the factors it names by
keyword (:func:`factors_of`).

**Content VOI** (never the proposer's own probabilities): a question naming the factor set
``J`` is read as ``S = 1[sum_{j in J} F_j / sqrt|J| > 0]``, so ``corr(Z_Y, Z_S) =
sum_{j in J} a_ij / sqrt|J|`` and ``(q, p1, p0)`` follow in closed form
(:func:`jaxkit.cruxbench.market.question_probs`); the VOI is
:func:`jaxkit.kernels.belief.voi` of those (expected absolute shift; 0 for a question
naming no factor). The baseline asks the same number of questions about uniformly random
single factors (its expected VOI, exactly). Where the model states ``q, p1, p0`` their
VOI (*stated*) is reported beside the content VOI.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxkit.kernels.belief import voi

from .market import question_probs
from .proposers import parse_questions
from .results import ProposerText, TextRun

__all__ = ["FACTORS", "TARGETS", "loadings", "parse_reply", "validate", "factors_of",
           "content_voi", "random_factor_voi", "messages", "propose_all", "run_text"]

#: factor name -> keywords (lower case; a keyword matches whole words)
FACTORS: dict[str, tuple[str, ...]] = {
    "interest rates": ("interest rate", "interest rates", "rate cut", "rate hike", "fed",
                       "federal reserve", "central bank", "monetary", "yield", "yields",
                       "treasury", "bond", "bonds"),
    "inflation": ("inflation", "cpi", "consumer price", "consumer prices", "price index",
                  "deflation", "pce"),
    "employment": ("unemployment", "jobs", "job", "employment", "payroll", "payrolls",
                   "labor", "labour", "hiring", "layoffs", "wages"),
    "economic growth": ("gdp", "growth", "recession", "economy", "economic", "output",
                        "stock market", "s&p", "earnings"),
    "oil and energy": ("oil", "crude", "brent", "energy", "gas", "gasoline", "opec", "fuel",
                       "barrel"),
    "politics": ("election", "elections", "vote", "voters", "poll", "polls", "president",
                 "presidential", "congress", "senate", "party", "government", "incumbent"),
    "technology": ("ai", "artificial intelligence", "chip", "chips", "semiconductor",
                   "technology", "tech", "software", "nvidia"),
    "weather": ("weather", "storm", "storms", "hurricane", "hurricanes", "rain", "rainfall",
                "temperature", "temperatures", "drought", "climate", "heat", "hottest"),
}
_NAMES = tuple(FACTORS)

#: (target question, primary factor, secondary factor)
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("Will the US Federal Reserve cut its policy rate by December 2027?", "interest rates",
     "inflation"),
    ("Will US CPI inflation be above 3% in December 2027?", "inflation", "oil and energy"),
    ("Will the US unemployment rate exceed 5% at any point in 2027?", "employment",
     "economic growth"),
    ("Will the US enter a recession in 2027?", "economic growth", "employment"),
    ("Will Brent crude oil trade above $100 a barrel in 2027?", "oil and energy",
     "economic growth"),
    ("Will the incumbent party win the 2028 US presidential election?", "politics",
     "economic growth"),
    ("Will Nvidia be the world's most valuable company at the end of 2027?", "technology",
     "interest rates"),
    ("Will 2027 be the hottest year on record?", "weather", "oil and energy"),
    ("Will US gasoline prices average above $4 a gallon in summer 2027?", "oil and energy",
     "inflation"),
    ("Will a Category 5 hurricane make landfall in the US in 2027?", "weather", "politics"),
    ("Will the 10-year US Treasury yield end 2027 above 5%?", "interest rates", "inflation"),
    ("Will US GDP grow by more than 2% in 2027?", "economic growth", "technology"),
)

EXPLAINED = 0.8
_SYSTEM = "You write short yes/no forecasting questions, one per line."
_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.):]|Q\d*[.:])?\s*(.+?\?)\s*(?:\S.*)?$")
_WORD = re.compile(r"[a-z0-9&$%]+")
_YES_NO = frozenset(("will", "would", "is", "are", "was", "were", "does", "do", "did", "has",
                     "have", "had", "can", "could", "should", "shall", "might", "may"))


def loadings(primary: str, secondary: str) -> np.ndarray:
    """``(J,)`` loadings ``a = sqrt(0.8 w)``: ``w`` 0.6 on ``primary``, 0.25 on
    ``secondary``, 0.15 spread over the other factors (module docstring)."""
    for name, f in (("primary", primary), ("secondary", secondary)):
        if f not in FACTORS:
            raise ValueError(f"`{name}` must be one of {', '.join(_NAMES)}; got {f!r}")
    if primary == secondary:
        raise ValueError(f"`secondary` must differ from `primary` ({primary!r})")
    w = np.full(len(_NAMES), 0.15 / (len(_NAMES) - 2))
    w[_NAMES.index(primary)], w[_NAMES.index(secondary)] = 0.6, 0.25
    return np.sqrt(EXPLAINED * w)


def messages(target: str, n: int) -> list[dict[str, str]]:
    """The chat prompt asking for ``n`` subquestions about ``target``."""
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": (
                f"Target: {target}\nWrite {n} different yes/no questions about other events, "
                f"answered before the target, whose answers would change the chance of the "
                f"target. One question per line, no answers.")}]


def parse_reply(text: str, n_max: int) -> tuple[list[dict[str, Any]], str]:
    """Subquestions from one reply and how they were found.

    Returns:
        ``(questions, how)``: each question ``{"text", "q", "p1", "p0"}`` (NaN
        probabilities when the reply states none); ``how`` is ``"json"`` (a JSON list
        with probabilities), ``"lines"`` (questions read line by line) or ``"none"``
        (nothing usable: the fallback, no question).
    """
    try:
        return parse_questions(text, n_max), "json"
    except ValueError:
        pass
    out = []
    for line in str(text).splitlines():
        m = _LINE.match(line)
        if m:
            out.append({"text": m.group(1).strip(" \t\"'`*"), "q": math.nan, "p1": math.nan,
                        "p0": math.nan})
    return (out[:n_max], "lines") if out else ([], "none")


def _words(s: str) -> set[str]:
    return set(_WORD.findall(s.lower()))


def validate(question: str, target: str, earlier: Sequence[str] = ()) -> str:
    """``""`` for a valid subquestion, else the reason (``"length"``, ``"no question
    mark"``, ``"not yes/no"``, ``"restates the target"``, ``"repeat"``) (module
    docstring)."""
    q = question.strip()
    if not 8 <= len(q) <= 200:
        return "length"
    if not q.endswith("?"):
        return "no question mark"
    if q.split()[0].lower() not in _YES_NO:
        return "not yes/no"
    w, t = _words(q), _words(target)
    if w and len(w & t) / len(w | t) >= 0.6:
        return "restates the target"
    if any(_words(e) == w for e in earlier):
        return "repeat"
    return ""


def factors_of(question: str) -> list[int]:
    """Indices of the factors whose keywords the question names (whole words)."""
    text = " " + " ".join(_WORD.findall(question.lower())) + " "
    return [j for j, kws in enumerate(FACTORS.values())
            if any(f" {' '.join(_WORD.findall(k))} " in text for k in kws)]


def content_voi(a: np.ndarray, factor_sets: Sequence[Sequence[int]]) -> np.ndarray:
    """``(Q,)`` content VOI (expected absolute shift) of questions naming ``factor_sets``
    about one target with loadings ``a`` (``(J,)``), at an even opening price; 0 for an
    empty set (module docstring)."""
    a = np.asarray(a, float)
    rho = np.array([a[list(s)].sum() / math.sqrt(len(s)) if len(s) else 0.0
                    for s in factor_sets], float)
    if not rho.size:
        return np.zeros(0)
    zero = jnp.zeros(rho.shape)
    _, q, p1, p0 = question_probs(zero, zero, jnp.asarray(rho))
    return np.asarray(voi(q, p1, p0, check=False).abs_shift, float)


def random_factor_voi(a: np.ndarray) -> float:
    """The expected content VOI of a question about one uniformly random factor."""
    return float(np.mean(content_voi(a, [[j] for j in range(len(a))])))


def _stated_voi(qs: list[dict]) -> np.ndarray:
    q = np.array([x["q"] for x in qs], float)
    p1 = np.array([x["p1"] for x in qs], float)
    p0 = np.array([x["p0"] for x in qs], float)
    ok = np.isfinite(q) & np.isfinite(p1) & np.isfinite(p0)
    out = np.full(q.shape, np.nan)
    if ok.any():
        out[ok] = np.asarray(voi(q[ok], p1[ok], p0[ok], check=False).abs_shift, float)
    return out


def propose_all(client, targets: Sequence[tuple[str, str, str]], *, n: int,
                samples: int = 1, max_tokens: int = 160) -> ProposerText:
    """Ask ``client`` (a :class:`jaxkit.llm.ChatClient`) for ``n`` subquestions per
    target, ``samples`` choices per call (one batched call per target), and score them.

    Returns:
        :class:`~jaxkit.cruxbench.results.ProposerText`: ``replies``, ``how`` (per
        reply), ``questions`` (list of dicts: target index, text, reason (``""`` when
        valid), factors, content_voi, stated_voi), ``per_target`` (``(N,)`` mean content
        VOI of the valid questions, NaN if none), ``baseline`` (``(N,)`` random-factor
        VOI), ``counts`` (replies by how, questions by reason).
    """
    if n < 1 or samples < 1:
        raise ValueError(f"`n` and `samples` must be >= 1; got {n}, {samples}")
    replies, hows, rows = [], [], []
    per_target, baseline = [], []
    for i, (target, prim, sec) in enumerate(targets):
        a = loadings(prim, sec)
        data = client.chat(messages(target, n), max_tokens=int(max_tokens), n=int(samples))
        vals = []
        for ch in data.get("choices") or []:
            text = str((ch.get("message") or {}).get("content") or "")
            replies.append(text)
            qs, how = parse_reply(text, n)
            hows.append(how)
            seen: list[str] = []
            stated = _stated_voi(qs) if qs else np.zeros(0)
            for k, qd in enumerate(qs):
                why = validate(qd["text"], target, seen)
                fs = factors_of(qd["text"])
                cv = float(content_voi(a, [fs])[0])
                rows.append(dict(target=i, text=qd["text"], reason=why, factors=fs,
                                 content_voi=cv, stated_voi=float(stated[k])))
                if not why:
                    seen.append(qd["text"])
                    vals.append(cv)
        per_target.append(float(np.mean(vals)) if vals else math.nan)
        baseline.append(random_factor_voi(a))
    reasons: dict[str, int] = {}
    for r in rows:
        reasons[r["reason"] or "valid"] = reasons.get(r["reason"] or "valid", 0) + 1
    return ProposerText(
        counts=dict(replies={h: hows.count(h) for h in ("json", "lines", "none")},
                    questions=reasons),
        per_target=np.asarray(per_target), baseline=np.asarray(baseline), questions=rows,
        how=hows, replies=replies)


def run_text(model: str, *, n_targets: int, n: int, temperatures: Sequence[float],
             samples: int, cache, offline: bool = False,
             max_tokens: int = 160) -> TextRun:
    """The text block of the pipeline: :func:`propose_all` on the first ``n_targets``
    targets for each temperature (one "proposer" per temperature; greedy ``0`` draws one
    choice, others ``samples``), through a :class:`jaxkit.llm.ChatClient` on ``model``
    with its reply cache in ``cache`` (``offline``: replay only).

    Returns:
        :class:`~jaxkit.cruxbench.results.TextRun`: ``proposers`` (``{label:
        propose_all(...)}``), ``model``, ``error`` (``""`` or the one line saying why no
        reply came: no model installed, a reply missing from the cache), ``hits``,
        ``misses``.
    """
    from jaxkit.llm import ChatClient, LLMError
    from jaxkit.lm import LMError

    proposers: dict[str, ProposerText] = {}
    error, hits, misses = "", 0, 0
    for temp in temperatures:
        try:
            client = ChatClient(model, temperature=float(temp), cache=cache, offline=offline)
            res = propose_all(client, TARGETS[:n_targets], n=n,
                              samples=1 if float(temp) == 0 else samples,
                              max_tokens=max_tokens)
        except (LMError, LLMError) as exc:
            error = str(exc).splitlines()[0]
            break
        hits += client.hits
        misses += client.misses
        proposers[f"{model} T={float(temp):g}"] = res
    return TextRun(model=model, error=error, hits=hits, misses=misses, proposers=proposers)
