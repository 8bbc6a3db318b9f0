"""Question proposers: simulated models of different quality, and an HTTP client.

Simulated proposer ``m`` (offline stand-in for an LLM) has three traits:

- ``knowledge_noise`` ``sigma_m``: it sees each target's factor loadings as
  ``a_hat = a + sigma_m eps`` and asks about the ``k`` factors with the largest
  ``|a_hat|`` (an informed model asks about the factors that matter);
- ``vagueness`` ``nu_m``: its question reads the factor with noise,
  ``Z_S = (F_j + nu_m xi) / sqrt(1 + nu_m^2)`` (a vague question is less informative);
- ``threshold_spread`` ``s_m``: its thresholds ``d ~ N(0, s_m^2)`` (a large spread asks
  about rare events, ``q`` far from 1/2, which carry less information).

Its independent quality measure (:func:`quality_scores`) is its own forecasting skill
on held-out targets whose factors are all revealed, forecasting with its noisy loadings
(minus the Brier score): driven by ``sigma_m`` alone, not by vagueness or threshold
choice, so VOI and quality share one trait and differ in two (``link`` loosens that
tie: at 0 quality comes from an independent draw of the trait).

The separate forecasting agent (:func:`separate_forecaster`) that measures downstream
usefulness never reads a proposer's probabilities: it reads each question's content
(which factor, how noisily it is read, the threshold) and weighs the answer with its
own noisy view of the target's loadings, so its Brier gain is not the proposer's VOI by
construction (an agent pooling the proposer's own exact ``p1`` / ``p0`` gains
``E dp^2``, the squared-shift VOI, identically).

:class:`ChatProposer` asks an OpenAI-compatible endpoint for subquestions with its
probabilities, through jaxkit's HTTP client (:class:`jaxkit.llm.ChatClient`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from jaxkit.llm import ChatClient, LLMError

from .market import Targets, question_probs

__all__ = ["Proposers", "Questions", "make_proposers", "propose", "quality_scores",
           "separate_forecaster", "ChatProposer", "parse_questions", "LLMError"]


class Proposers(NamedTuple):
    """Traits of ``M`` simulated proposers (``(M,)`` arrays)."""

    knowledge_noise: jax.Array
    vagueness: jax.Array
    threshold_spread: jax.Array


class Questions(NamedTuple):
    """Proposed questions, arrays of shape ``(M, N, k)`` (proposer, target, question).

    Attributes:
        factor: the factor asked about.
        threshold: ``d``.
        rho: ``corr(Z_S, Z_Y)``.
        z: realised latent ``Z_S``.
        q, p1, p0: ``P(S)``, ``P(Y | S)``, ``P(Y | not S)`` (exact, at the opening).
    """

    factor: jax.Array
    threshold: jax.Array
    rho: jax.Array
    z: jax.Array
    q: jax.Array
    p1: jax.Array
    p0: jax.Array


def make_proposers(key, n: int, *, noise_min: float = 0.05, noise_max: float = 1.5,
                   vagueness_max: float = 1.0, spread_max: float = 1.5) -> Proposers:
    """``n`` proposers: knowledge noise log-uniform in ``[noise_min, noise_max]``,
    vagueness uniform in ``[0, vagueness_max]``, threshold spread uniform in
    ``[0, spread_max]``, all independent."""
    k1, k2, k3 = jax.random.split(key, 3)
    u = jax.random.uniform(k1, (n,))
    sigma = jnp.exp(jnp.log(noise_min) + u * (jnp.log(noise_max) - jnp.log(noise_min)))
    return Proposers(sigma, vagueness_max * jax.random.uniform(k2, (n,)),
                     spread_max * jax.random.uniform(k3, (n,)))


def propose(key, proposers: Proposers, targets: Targets, n_questions: int) -> Questions:
    """Each proposer's ``n_questions`` questions about every target (see the module
    docstring); ``n_questions`` must not exceed the number of factors."""
    M = proposers.knowledge_noise.shape[0]
    N, J = targets.loadings.shape
    k = int(n_questions)
    if not 1 <= k <= J:
        raise ValueError(f"`n_questions` must be in [1, n_factors={J}]; got {k}")
    k1, k2, k3 = jax.random.split(key, 3)
    a = targets.loadings
    seen = a + proposers.knowledge_noise[:, None, None] * jax.random.normal(k1, (M, N, J))
    _, factor = jax.lax.top_k(jnp.abs(seen), k)                       # (M, N, k)
    a_j = jnp.take_along_axis(jnp.broadcast_to(a, (M, N, J)), factor, -1)
    f_j = jnp.take_along_axis(jnp.broadcast_to(targets.factors, (M, N, J)), factor, -1)
    nu = proposers.vagueness[:, None, None]
    rho = a_j / jnp.sqrt(1 + nu**2)
    z = (f_j + nu * jax.random.normal(k2, (M, N, k))) / jnp.sqrt(1 + nu**2)
    d = proposers.threshold_spread[:, None, None] * jax.random.normal(k3, (M, N, k))
    c = jnp.broadcast_to(targets.threshold[None, :, None], (M, N, k))
    _, q, p1, p0 = question_probs(c, d, rho)
    return Questions(factor, d, rho, z, q, p1, p0)


def quality_scores(key, proposers: Proposers, held_out: Targets, *, link: float = 1.0,
                   other_noise=None) -> jax.Array:
    """Independent quality of each proposer: minus its Brier score forecasting the
    held-out targets with all factors revealed, using its noisy loadings
    (``P(Y) = Phi((a_hat . F - c) / sqrt(max(1 - |a_hat|^2, 0.05)))``).

    The forecasting noise is the proposer's knowledge noise ``sigma_m`` (``link = 1``,
    the trait VOI also depends on) or, with ``other_noise`` (``(M,)``, an independent
    draw of the same trait), ``sigma_m^link other_m^(1 - link)``: at ``link = 0`` quality
    shares no trait with VOI, so any correlation between them is chance.

    Args:
        key: PRNG key.
        proposers: the proposers.
        held_out: the held-out targets.
        link: static, in [0, 1]; used only with ``other_noise``.
        other_noise: ``(M,)`` or ``None``.

    Returns:
        ``(M,)`` scores, higher is better.
    """
    M = proposers.knowledge_noise.shape[0]
    N, J = held_out.loadings.shape
    sigma = proposers.knowledge_noise
    if other_noise is not None and float(link) != 1.0:
        sigma = jnp.exp(link * jnp.log(sigma) + (1 - link) * jnp.log(other_noise))
    seen = held_out.loadings + sigma[:, None, None] * jax.random.normal(key, (M, N, J))
    resid = jnp.sqrt(jnp.maximum(1 - jnp.sum(seen**2, -1), 0.05))
    f = ndtr((jnp.sum(seen * held_out.factors, -1) - held_out.threshold) / resid)
    return -jnp.mean((f - held_out.outcome) ** 2, -1)


def separate_forecaster(key, proposers: Proposers, targets: Targets, questions: Questions, *,
                        noise: float) -> tuple[jax.Array, jax.Array]:
    """The separate forecasting agent's ``P(Y | S)`` and ``P(Y | not S)`` for every
    question, from the question's content only.

    The agent sees each target's loadings once, as ``a_f = a + noise eps`` (one view per
    target, shared by every proposer's questions), reads the question's factor ``j``, its
    vagueness ``nu`` and threshold ``d``, and takes ``rho_f = a_f[j] / sqrt(1 + nu^2)``
    (clipped to ``[-0.99, 0.99]``) in :func:`jaxkit.cruxbench.market.question_probs` with
    the target's public threshold ``c``: coherent with the opening price ``Phi(-c)``,
    wrong where its view of the loading is. It never reads the proposer's ``q``, ``p1``,
    ``p0``.

    Args:
        key: PRNG key of the agent's view.
        proposers: the proposers (their vagueness is part of each question's content).
        targets: the targets.
        questions: :func:`propose`'s output.
        noise: the agent's loading noise (0: it knows the loadings).

    Returns:
        ``(p1_f, p0_f)``, each ``(M, N, k)`` like ``questions``.
    """
    N, J = targets.loadings.shape
    a_f = targets.loadings + noise * jax.random.normal(key, (N, J))
    a_j = jnp.take_along_axis(jnp.broadcast_to(a_f, questions.factor.shape[:2] + (J,)),
                              questions.factor, -1)
    nu = proposers.vagueness[:, None, None]
    rho = jnp.clip(a_j / jnp.sqrt(1 + nu**2), -0.99, 0.99)
    c = jnp.broadcast_to(targets.threshold[None, :, None], rho.shape)
    _, _, p1, p0 = question_probs(c, questions.threshold, rho)
    return p1, p0


_SYSTEM = (
    "You are a forecaster who decomposes a forecasting question into informative "
    "subquestions: yes/no questions that will be answered before the target resolves and "
    "whose answers would move the target's probability the most. Reply with a JSON list "
    "only, one object per subquestion, with the keys \"question\" (text), \"q\" "
    "(probability the subquestion resolves yes), \"p1\" (probability of the target if it "
    "resolves yes) and \"p0\" (probability of the target if it resolves no)."
)
_JSON_LIST = re.compile(r"\[.*\]", re.DOTALL)


def parse_questions(text: str, n_max: int | None = None) -> list[dict[str, Any]]:
    """Subquestions from a model reply: the first JSON list of objects with
    ``question`` (non-empty text) and ``q``, ``p1``, ``p0`` in ``[0, 1]``; other
    entries are dropped.

    Raises:
        ValueError: no JSON list in the reply, or no valid entry.
    """
    m = _JSON_LIST.search(text)
    if m is None:
        raise ValueError("no JSON list in the reply")
    try:
        items = json.loads(m.group(0))
    except json.JSONDecodeError as e:
        raise ValueError(f"the reply's JSON list does not parse: {e.msg}") from None
    out = []
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, Mapping) or not str(it.get("question", "")).strip():
            continue
        try:
            probs = {k: float(it[k]) for k in ("q", "p1", "p0")}
        except (KeyError, TypeError, ValueError):
            continue
        if all(0 <= v <= 1 for v in probs.values()):
            out.append({"text": str(it["question"]).strip(), **probs})
    if not out:
        raise ValueError("the reply holds no subquestion with `question`, `q`, `p1`, `p0`")
    return out[:n_max] if n_max else out


class ChatProposer(ChatClient):
    """Subquestions from any OpenAI-compatible ``/chat/completions`` endpoint.

    Takes :class:`jaxkit.llm.ChatClient`'s arguments (``model``, ``base_url``, ``api_key``,
    ``timeout``, prices, ``temperature``); transport failures raise :class:`LLMError`.
    With no endpoint configured it runs on the in-process :mod:`jaxkit.lm` model.
    """

    def question_messages(self, target: str, price: float | None, n: int) -> list[dict]:
        """The chat prompt for ``n`` subquestions about the target ``target``."""
        where = "" if price is None else f" Its market probability is now {price:.2f}."
        return [{"role": "system", "content": _SYSTEM},
                {"role": "user", "content": f"Target question: {target}{where}\n"
                                            f"Propose {n} subquestions."}]

    def propose_questions(self, target: str, *, price: float | None = None,
                          n: int = 3) -> tuple[list[dict[str, Any]], float]:
        """Ask for ``n`` subquestions; returns ``(questions, dollars)``, each question a
        dict ``{"text", "q", "p1", "p0"}``.

        Raises:
            LLMError: the call failed or the reply held no usable subquestion.
        """
        data = self.chat(self.question_messages(target, price, n))
        cost = self.cost(data.get("usage"))
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(self.model, self.url, "response has no message content",
                           cost=cost) from None
        try:
            return parse_questions(str(content), n), cost
        except ValueError as e:
            raise LLMError(self.model, self.url, str(e), cost=cost) from None
