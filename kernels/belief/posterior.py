"""Posteriors over K mutually exclusive and collectively exhaustive (MECE) explanations,
in log space, and how evidence redistributes belief across them.

Bayes' rule over explanations ``H_1 .. H_K`` with prior ``pi`` and likelihoods
``L_k = p(e | H_k)``:

.. math:: \\log \\pi'_k = \\log \\pi_k + \\log L_k - \\operatorname{logsumexp}_j
          (\\log \\pi_j + \\log L_j), \\qquad \\log p(e) = \\operatorname{logsumexp}_j
          (\\log \\pi_j + \\log L_j).

Redistribution scores between a belief ``pi'`` (after) and ``pi`` (before):

* ``kl``: :math:`KL(\\pi' \\| \\pi) = \\sum_k \\pi'_k (\\log \\pi'_k - \\log \\pi_k)` (nats;
  Bayesian surprise of the whole MECE set);
* ``tv``: total variation :math:`\\tfrac12 \\sum_k |\\pi'_k - \\pi_k|`;
* ``entropy_drop``: :math:`H(\\pi) - H(\\pi')` (nats; negative when evidence spreads
  belief);
* ``top_two_log_bf``: the log Bayes factor of the two explanations most probable after
  the evidence, :math:`\\log L_i - \\log L_j = (\\log\\pi'_i - \\log\\pi_i) -
  (\\log\\pi'_j - \\log\\pi_j)` (+inf when only one explanation is possible).

Resolution rules: ``max_k pi'_k >= tau`` (:func:`resolved`, tau = 0.9 or 0.95 in the
contrastive-discovery setting) and the top-two Bayes factor at least a threshold
(:func:`bf_resolved`; 10 is Jeffreys' "strong", 20 / 150 Kass & Raftery's "strong" /
"very strong").

Masked explanations (padding to a common K) carry ``log_prior = -inf``: they keep
posterior ``-inf`` (probability 0) and drop out of every score. Reference: Kass &
Raftery, "Bayes factors", JASA 1995; the contrastive-discovery paper (NeurIPS 2026).

Bad input raises ``ValueError`` naming the argument (concrete values) or becomes an
:func:`equinox.error_if` check (traced values): NaN or +inf in a log probability, a log
prior that is ``-inf`` everywhere or does not sum to one (``|logsumexp| > tol``, tol
1e-3 in float32 and 1e-6 in float64), tables whose last axis is not K.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..checks import check_in_range, fail_first, is_traced

__all__ = ["Posterior", "Redistribution", "check_log_prior", "check_log_probs", "normalise_tol",
           "posterior", "entropy", "kl", "total_variation", "entropy_drop", "top_two_log_bf",
           "redistribution", "resolved", "bf_resolved"]

Array = jax.Array


class Posterior(NamedTuple):
    """Result of :func:`posterior`.

    Attributes:
        log_post: ``(..., K)`` log posterior (``-inf`` where the prior is ``-inf``).
        log_evidence: ``(...)`` :math:`\\log p(e)`, the log marginal likelihood of the
            evidence under the prior (``-inf`` when every explanation gives it
            probability 0).
        finite: ``(...)`` bool: the evidence is possible under some explanation (else
            ``log_post`` is NaN: no posterior exists).
    """

    log_post: Array
    log_evidence: Array
    finite: Array


class Redistribution(NamedTuple):
    """The four redistribution scores of :func:`redistribution` (each ``(...)``)."""

    kl: Array
    tv: Array
    entropy_drop: Array
    top_two_log_bf: Array


def _float(x) -> Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def normalise_tol(dtype) -> float:
    """Tolerance of the normalisation checks on ``|logsumexp|``: 1e-3 in float32 (and
    lower precisions), 1e-6 in float64.

    Differentiable: no: a Python float for a dtype.
    """
    return 1e-6 if jnp.dtype(dtype) == jnp.float64 else 1e-3


def check_log_probs(x, name: str):
    """Error naming ``name`` if the log probabilities ``x`` hold NaN or +inf (``-inf``,
    probability 0, is allowed).

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: log probabilities, any shape (an integer array is cast to float32).
        name: the argument's name in the error message (a Python ``str``).

    Returns:
        ``x`` as a float array (a run-time check attached when traced).

    Raises:
        ValueError: concrete ``x`` with NaN or +inf.
    """
    x = _float(x)
    msgs = (f"`{name}` contains NaN", f"`{name}` contains +inf (log probabilities are <= 0)")
    if not is_traced(x):  # concrete: check in NumPy (no per-op dispatch)
        a = np.asarray(x)
        for bad, msg in ((np.isnan(a), msgs[0]), (a == np.inf, msgs[1])):
            if np.any(bad):
                raise ValueError(msg)
        return x
    return fail_first(x, [(jnp.isnan(x), msgs[0]), (x == jnp.inf, msgs[1])])


def check_log_prior(log_prior, name: str = "log_prior"):
    """Validate a log prior over the last axis: no NaN or +inf, not ``-inf`` everywhere,
    ``|logsumexp| <= tol`` (:func:`normalise_tol`). Returns it as a float array (with a
    run-time check attached when traced).

    Differentiable: yes, in log_prior (returned unchanged, the checks attached).

    Args:
        log_prior: ``(..., K)`` log probabilities, K >= 1.
        name: the argument's name, for the messages.

    Returns:
        ``log_prior``.
    """
    lp = _float(log_prior)
    if lp.ndim < 1 or lp.shape[-1] < 1:
        raise ValueError(f"`{name}` must have a last axis of K >= 1 explanations; got shape "
                         f"{lp.shape}")
    tol = normalise_tol(lp.dtype)
    if not is_traced(lp):  # concrete: check in NumPy (no per-op dispatch)
        a = np.asarray(lp, np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            m = np.max(a, axis=-1, keepdims=True)
            lse = np.log(np.sum(np.exp(a - np.where(np.isfinite(m), m, 0.0)), axis=-1)) + m[..., 0]
        checks = [(np.isnan(a), f"`{name}` contains NaN"),
                  (a == np.inf, f"`{name}` contains +inf (log probabilities are <= 0)"),
                  (np.all(a == -np.inf, axis=-1), f"`{name}` is -inf everywhere (no "
                                                  f"explanation has positive prior probability)"),
                  (np.abs(lse) > tol, f"`{name}` must sum to one over its last axis "
                                      f"(|logsumexp| <= {tol:g}); normalise it with "
                                      f"log_prior - logsumexp(log_prior)")]
        for bad, msg in checks:
            if np.any(bad):
                raise ValueError(msg)
        return lp
    lse = logsumexp(lp, axis=-1)
    return fail_first(lp, [
        (jnp.isnan(lp), f"`{name}` contains NaN"),
        (lp == jnp.inf, f"`{name}` contains +inf (log probabilities are <= 0)"),
        (jnp.all(lp == -jnp.inf, axis=-1), f"`{name}` is -inf everywhere (no explanation "
                                           f"has positive prior probability)"),
        (jnp.abs(lse) > tol, f"`{name}` must sum to one over its last axis "
                             f"(|logsumexp| <= {tol:g}); normalise it with "
                             f"log_prior - logsumexp(log_prior)")])


def _probs(log_p: Array) -> Array:
    return jnp.exp(log_p)


def posterior(log_prior, log_lik) -> Posterior:
    """Posterior over K explanations in log space (see the module docstring).

    Differentiable: yes, in log_prior and log_lik.

    Args:
        log_prior: ``(..., K)`` normalised log prior.
        log_lik: ``(..., K)`` :math:`\\log p(e | H_k)` (broadcasts against
            ``log_prior``).

    Returns:
        A :class:`Posterior`; ``finite`` is False (and ``log_post`` NaN) where the
        evidence has probability 0 under every explanation with prior mass.
    """
    lp = check_log_prior(log_prior)
    ll = check_log_probs(log_lik, "log_lik")
    if ll.ndim < 1 or ll.shape[-1] != lp.shape[-1]:
        raise ValueError(f"`log_lik` must have a last axis of K = {lp.shape[-1]} (one entry "
                         f"per explanation, as `log_prior`); got shape {ll.shape}")
    joint = lp + ll
    log_z = logsumexp(joint, axis=-1)
    finite = jnp.isfinite(log_z)
    safe_z = jnp.where(finite, log_z, 0.0)
    log_post = jnp.where(finite[..., None], joint - safe_z[..., None], jnp.nan)
    return Posterior(log_post, log_z, finite)


def entropy(log_p) -> Array:
    """Shannon entropy :math:`-\\sum_k p_k \\log p_k` (nats) over the last axis; terms
    with ``p_k = 0`` count 0.

    Differentiable: yes, in log_p.
    """
    log_p = _float(log_p)
    p = _probs(log_p)
    return -jnp.sum(jnp.where(p > 0, p * log_p, 0.0), axis=-1)


def kl(log_p, log_q) -> Array:
    """:math:`KL(p \\| q) = \\sum_k p_k (\\log p_k - \\log q_k)` over the last axis (nats);
    terms with ``p_k = 0`` count 0, ``+inf`` where ``p_k > 0 = q_k``.

    Differentiable: yes, in log_p and log_q.

    Args:
        log_p: ``(..., K)`` normalised log probabilities of ``p`` (``-inf`` allowed).
        log_q: ``(..., K)`` normalised log probabilities of ``q``, broadcastable with
            ``log_p``.

    Returns:
        ``(...)`` the divergence in nats, in the float dtype of the inputs.
    """
    log_p, log_q = _float(log_p), _float(log_q)
    p = _probs(log_p)
    safe_q = jnp.where(p > 0, log_q, 0.0)
    return jnp.sum(jnp.where(p > 0, p * (log_p - safe_q), 0.0), axis=-1)


def total_variation(log_p, log_q) -> Array:
    """Total variation distance :math:`\\tfrac12 \\sum_k |p_k - q_k|` over the last axis.

    Differentiable: yes, in log_p and log_q (almost everywhere).

    Args:
        log_p: ``(..., K)`` normalised log probabilities of ``p``.
        log_q: ``(..., K)`` normalised log probabilities of ``q``, broadcastable with
            ``log_p``.

    Returns:
        ``(...)`` the distance, in ``[0, 1]``.
    """
    return 0.5 * jnp.sum(jnp.abs(_probs(_float(log_p)) - _probs(_float(log_q))), axis=-1)


def entropy_drop(log_post, log_prior) -> Array:
    """:math:`H(\\pi) - H(\\pi')` (nats): how much the evidence concentrated belief.

    Differentiable: yes, in log_post and log_prior.

    Args:
        log_post: ``(..., K)`` normalised log posterior :math:`\\log \\pi'`.
        log_prior: ``(..., K)`` normalised log prior :math:`\\log \\pi`, broadcastable
            with ``log_post``.

    Returns:
        ``(...)`` the entropy drop in nats (negative when the evidence spreads belief).
    """
    return entropy(log_prior) - entropy(log_post)


def top_two_log_bf(log_post, log_prior) -> Array:
    """Log Bayes factor of the most probable explanation after the evidence against the
    runner-up: :math:`(\\log\\pi'_i - \\log\\pi_i) - (\\log\\pi'_j - \\log\\pi_j)`, i and j
    the top two of ``log_post`` (ties by lowest index). ``+inf`` when only one
    explanation has prior mass.

    Differentiable: yes, in log_post and log_prior (almost everywhere: the top two are chosen by
    value).

    Args:
        log_post: ``(..., K)`` normalised log posterior.
        log_prior: ``(..., K)`` normalised log prior, broadcastable to ``log_post``'s shape.

    Returns:
        ``(...)`` the log Bayes factor (``+inf`` with a single possible explanation).
    """
    log_post, log_prior = _float(log_post), _float(log_prior)
    if log_post.shape[-1] < 2:
        return jnp.full(log_post.shape[:-1], jnp.inf, log_post.dtype)
    top2 = jax.lax.top_k(log_post, 2)[1]
    lpo = jnp.take_along_axis(log_post, top2, axis=-1)
    lpr = jnp.take_along_axis(jnp.broadcast_to(log_prior, log_post.shape), top2, axis=-1)
    second_possible = lpr[..., 1] > -jnp.inf
    ratio_i = lpo[..., 0] - lpr[..., 0]
    ratio_j = jnp.where(second_possible & (lpo[..., 1] > -jnp.inf),
                        lpo[..., 1] - jnp.where(second_possible, lpr[..., 1], 0.0), -jnp.inf)
    return jnp.where(second_possible, ratio_i - ratio_j, jnp.inf)


def redistribution(log_post, log_prior) -> Redistribution:
    """All four redistribution scores of ``log_post`` against ``log_prior`` (see the
    module docstring).

    Differentiable: yes, in log_post and log_prior (almost everywhere).

    Args:
        log_post: ``(..., K)`` log belief after the evidence.
        log_prior: ``(..., K)`` log belief before it.

    Returns:
        A :class:`Redistribution` of ``(...)`` arrays.
    """
    lpo = check_log_prior(log_post, "log_post")
    lpr = check_log_prior(log_prior)
    if lpo.shape[-1] != lpr.shape[-1]:
        raise ValueError(f"`log_post` and `log_prior` must have the same K; got "
                         f"{lpo.shape[-1]} and {lpr.shape[-1]}")
    return Redistribution(kl(lpo, lpr), total_variation(lpo, lpr), entropy_drop(lpo, lpr),
                          top_two_log_bf(lpo, lpr))


def resolved(log_post, tau: float = 0.9) -> tuple[Array, Array]:
    """The resolution rule ``max_k pi'_k >= tau``.

    Differentiable: no: boolean and integer outputs.

    Args:
        log_post: ``(..., K)`` log posterior.
        tau: threshold, in (0, 1].

    Returns:
        ``(is_resolved, winner)``: bool ``(...)`` and the int32 argmax ``(...)``.
    """
    check_in_range(tau, "tau", lo=0, hi=1, lo_open=True)
    lpo = _float(log_post)
    winner = jnp.argmax(lpo, axis=-1).astype(jnp.int32)
    return jnp.max(lpo, axis=-1) >= jnp.log(jnp.asarray(tau, lpo.dtype)), winner


def bf_resolved(log_post, log_prior, threshold: float = 10.0) -> tuple[Array, Array]:
    """The Bayes-factor resolution rule: the top-two Bayes factor is at least
    ``threshold`` (10: Jeffreys' "strong"; 20 / 150: Kass & Raftery's "strong" / "very
    strong").

    Differentiable: no: boolean and integer outputs.

    Args:
        log_post: ``(..., K)`` log posterior.
        log_prior: ``(..., K)`` log prior.
        threshold: Bayes factor threshold, > 1.

    Returns:
        ``(is_resolved, winner)`` as :func:`resolved`.
    """
    check_in_range(threshold, "threshold", lo=1, lo_open=True)
    lpo = _float(log_post)
    winner = jnp.argmax(lpo, axis=-1).astype(jnp.int32)
    return top_two_log_bf(lpo, log_prior) >= jnp.log(threshold), winner
