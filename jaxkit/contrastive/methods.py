"""Contrastive selection against pointwise baselines, on the same questions and budget.

Every method spends at most ``budget`` per question on the X candidate experiments (each
at most once); running candidate x yields the pre-drawn ``outcomes[x]`` (the same for
every method, so methods are compared on common random numbers).

* **Contrastive** (the paper's method): greedy EIG per cost over the MECE set
  (:func:`jaxkit.kernels.belief.eig.greedy_eig`); the question is *resolved* when the
  final posterior has ``max_k pi_k >= tau``, *correctly* when that k is the truth.
* **Pointwise** agents evaluate one hypothesis at a time. Each keeps a separate belief
  ``b_k = P(H_k)`` against an unspecified alternative "H_k is wrong", modelled as the
  diffuse reference ``R(y) = 1 / Y`` (uniform over the outcomes), starting from
  ``b_k = 0.5`` (the agent knows no alternatives; ``pointwise_prior``; 1/K gives it the
  MECE prior). The *focal* hypothesis f is the open one with the highest belief; the
  agent runs the affordable experiment with the best score per cost for f, observes
  y, updates ``logit b_f += log p(y | H_f) - log R(y)``, and decides: f is *accepted*
  (the agent stops: the question is resolved with answer f) or *rejected* (the next
  hypothesis becomes focal) or stays open. Stopping at acceptance, these agents spend
  less than the budget (the same budget *cap*); each also runs without early stopping
  (``<rule>-full``, :data:`FULL_SPEND`): a decision is then provisional, the focal
  hypothesis is the non-rejected one with the highest belief (any one once all are
  rejected) and the agent goes on until no affordable candidate is left, so it spends
  the budget as the contrastive agent does; its answer is the accepted hypothesis with
  the highest belief at the end. Scores and decisions:

  - ``shannon`` (AutoDiscovery-style surprisal search): the expected Shannon surprisal
    ``E_m[-log p(y | H_f)]`` under the agent's predictive ``m = b_f p_f + (1 - b_f) R``;
    accept at ``b_f >= tau``, reject at ``b_f <= 1 - tau``.
  - ``bayes`` (Bayesian surprise, AutoDiscovery's belief shift): the expected KL of the
    updated binary belief from the current one, ``E_m KL(Bern(b_f') || Bern(b_f))``;
    the same decisions.
  - ``evalue`` (POPPER-style sequential test): the expected log likelihood ratio under
    H_f, ``KL(p_f || R)`` (the growth rate of the e-process). Each experiment gives two
    p-values, calibrated to e-values ``e = kappa p^(kappa - 1)`` (kappa = 0.5): for
    acceptance, the null R and the statistic ``log p_f(y) - log R(y)``; for rejection,
    the null H_f and the statistic ``-log p_f(y)``. f is accepted (rejected) when the
    product of its acceptance (rejection) e-values exceeds ``1 / alpha``.

* ``random`` (jaxkit's reference, not in the paper): the candidates in a random order,
  each run while the budget affords it (so it spends the budget, as the contrastive
  agent does), evaluated with the MECE posterior: what experiment selection adds over
  spending the budget on any experiments.

Also recorded, for the paper's second claim: every pointwise *candidate* (focal
hypothesis, experiment, outcome) with its Shannon surprisal ``-log p(y | H_f)`` and its
belief before and after (AutoDiscovery flags a candidate as surprising when the belief
moves by at least a width, in either direction; a *rejection* is a move down); and the
contrastive evaluation of the pointwise agent's data: the posterior over the MECE set
given every experiment the agent ran (:func:`replay_posterior`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxkit.kernels.belief.eig import greedy_eig

__all__ = ["POINTWISE", "FULL_SPEND", "PointwiseInfo", "pointwise_run", "replay_posterior",
           "random_design", "run_methods"]

POINTWISE = ("shannon", "bayes", "evalue")
#: the pointwise agents without early stopping (they spend the budget)
FULL_SPEND = tuple(f"{r}-full" for r in POINTWISE)


class PointwiseInfo(NamedTuple):
    """One step of a pointwise agent (each ``(...)``; ``choice = -1``: no step)."""

    choice: jax.Array
    outcome: jax.Array
    focal: jax.Array
    surprisal: jax.Array
    log_lr: jax.Array
    belief_before: jax.Array
    belief_after: jax.Array
    spent: jax.Array


class _PState(NamedTuple):
    logit: jax.Array  # (K,)
    status: jax.Array  # (K,) 0 open, 1 accepted, -1 rejected
    log_e_acc: jax.Array
    log_e_rej: jax.Array
    spent: jax.Array
    used: jax.Array  # (X,)
    done: jax.Array


def _kl_bern(p, q):
    eps = 1e-7
    p, q = jnp.clip(p, eps, 1 - eps), jnp.clip(q, eps, 1 - eps)
    return p * jnp.log(p / q) + (1 - p) * jnp.log((1 - p) / (1 - q))


def _calibrate(p, kappa):
    """log of the p-to-e calibrator ``kappa p^(kappa - 1)`` (Vovk & Wang 2021)."""
    return jnp.log(kappa) + (kappa - 1) * jnp.log(jnp.clip(p, 1e-30, 1.0))


def _score(rule: str, lf, log_r, b):
    """Pointwise score of each candidate for the focal hypothesis: ``lf`` (X, Y) its log
    likelihoods, ``log_r`` the reference, ``b`` its belief."""
    pf = jnp.exp(lf)
    m = b * pf + (1 - b) * jnp.exp(log_r)
    if rule == "shannon":
        return jnp.sum(m * -lf, -1)
    if rule == "bayes":
        b_new = jax.nn.sigmoid(jax.scipy.special.logit(b) + lf - log_r)
        return jnp.sum(m * _kl_bern(b_new, b), -1)
    return jnp.sum(pf * (lf - log_r), -1)  # evalue: KL(p_f || R)


def pointwise_run(rule: str, log_prior, log_lik, costs, budget, outcomes, *, max_steps: int,
                  tau: float = 0.9, alpha: float = 0.1, kappa: float = 0.5,
                  stop_on_accept: bool = True):
    """One pointwise agent on one question (see the module docstring).

    Args:
        rule: ``"shannon"``, ``"bayes"`` or ``"evalue"``.
        log_prior: ``(K,)`` log of each hypothesis's initial pointwise belief (need not
            sum to one: ``log 0.5`` each for agents that know no alternatives).
        log_lik: ``(X, K, Y)``; costs ``(X,)``; budget scalar; outcomes ``(X,)`` int.
        max_steps: static number of steps.
        tau: belief threshold of acceptance (rejection at ``1 - tau``).
        alpha: level of the e-value tests.
        kappa: calibrator exponent.
        stop_on_accept: static; ``False``: no early stopping (decisions provisional, the
            agent runs until no affordable candidate is left; module docstring).

    Returns:
        ``(accepted, infos)``: ``accepted`` the int32 accepted hypothesis (-1: none; without
        early stopping the accepted one with the highest belief at the end) and a
        :class:`PointwiseInfo` stacked over the steps.
    """
    if rule not in POINTWISE:
        raise ValueError(f"`rule` must be one of {POINTWISE}; got {rule!r}")
    log_prior, log_lik, costs = (jnp.asarray(a) for a in (log_prior, log_lik, costs))
    outcomes = jnp.asarray(outcomes)
    X, K, Y = log_lik.shape
    log_r = -math.log(Y)
    b0 = jnp.clip(jnp.exp(log_prior), 1e-6, 1 - 1e-6)
    st = _PState(jax.scipy.special.logit(b0), jnp.zeros(K, jnp.int32), jnp.zeros(K),
                 jnp.zeros(K), jnp.zeros(()), jnp.zeros(X, bool), jnp.zeros((), bool))
    thr = math.log(1 / alpha)

    def body(s: _PState, _):
        if stop_on_accept:
            open_ = s.status == 0
        else:  # provisional decisions: any non-rejected one, any one once all are rejected
            open_ = s.status >= 0
            open_ = jnp.where(jnp.any(open_), open_, True)
        f = jnp.argmax(jnp.where(open_, s.logit, -jnp.inf)).astype(jnp.int32)
        lf = log_lik[:, f, :]  # (X, Y)
        b = jax.nn.sigmoid(s.logit[f])
        ok_x = (~s.used) & (costs <= budget - s.spent)
        ratio = jnp.where(ok_x, _score(rule, lf, log_r, b) / jnp.where(ok_x, costs, 1.0),
                          -jnp.inf)
        x = jnp.argmax(ratio).astype(jnp.int32)
        go = (~s.done) & jnp.any(open_) & (ratio[x] > -jnp.inf)
        y = outcomes[x]
        ly = lf[x, y]
        llr = ly - log_r
        logit = s.logit.at[f].add(jnp.where(go, llr, 0.0))
        bf = jax.nn.sigmoid(logit[f])
        # e-values: acceptance (null R, statistic llr) and rejection (null H_f, -log p_f)
        p_acc = jnp.mean(lf[x] - log_r >= llr)
        p_rej = jnp.sum(jnp.where(lf[x] <= ly, jnp.exp(lf[x]), 0.0))
        e_acc = s.log_e_acc.at[f].add(jnp.where(go, _calibrate(p_acc, kappa), 0.0))
        e_rej = s.log_e_rej.at[f].add(jnp.where(go, _calibrate(p_rej, kappa), 0.0))
        if rule == "evalue":
            acc, rej = e_acc[f] >= thr, e_rej[f] >= thr
        else:
            acc, rej = bf >= tau, bf <= 1 - tau
        new_status = jnp.where(acc, 1, jnp.where(rej, -1, 0)).astype(jnp.int32)
        status = s.status.at[f].set(jnp.where(go, new_status, s.status[f]))
        spent = s.spent + jnp.where(go, costs[x], 0.0)
        ns = _PState(logit, status, e_acc, e_rej, spent, s.used.at[x].set(s.used[x] | go),
                     s.done | (go & acc & stop_on_accept))
        info = PointwiseInfo(jnp.where(go, x, -1), jnp.where(go, y, -1), f, -ly, llr, b,
                             jnp.where(go, bf, b), spent)
        return ns, info

    final, infos = jax.lax.scan(body, st, None, length=int(max_steps))
    acc_logit = jnp.where(final.status == 1, final.logit, -jnp.inf)
    accepted = jnp.where(jnp.any(final.status == 1), jnp.argmax(acc_logit), -1)
    return accepted.astype(jnp.int32), infos


def replay_posterior(log_prior, log_lik, choices, outcomes_seen):
    """The MECE posterior after the experiments ``choices`` (T,) with outcomes (T,)
    (entries -1 skipped): ``log_prior + sum_t log_lik[x_t, :, y_t]``, normalised; and
    the trajectory ``(T, K)`` after each step."""
    valid = choices >= 0
    rows = log_lik[jnp.maximum(choices, 0), :, jnp.maximum(outcomes_seen, 0)]  # (T, K)
    rows = jnp.where(valid[:, None], rows, 0.0)
    cum = log_prior + jnp.cumsum(rows, axis=0)
    traj = cum - logsumexp(cum, axis=-1, keepdims=True)
    final = traj[-1] if traj.shape[0] else log_prior
    return final, traj


def random_design(log_prior, log_lik, costs, budget, outcomes, priority):
    """The candidates in the order of ``priority`` (``(X,)``, e.g. uniform draws), each
    run while ``budget`` affords its cost, evaluated with the MECE posterior.

    Returns:
        ``(final, traj, choices, spent)``: :func:`replay_posterior`'s outputs over the
        ``X`` positions of the order (``choices`` -1 where skipped) and the budget spent.
    """
    log_prior, log_lik, costs, outcomes = (jnp.asarray(a) for a in (log_prior, log_lik, costs,
                                                                   outcomes))
    order = jnp.argsort(jnp.asarray(priority))

    def body(spent, x):
        ok = costs[x] <= budget - spent
        return spent + jnp.where(ok, costs[x], 0.0), jnp.where(ok, x, -1)

    spent, choices = jax.lax.scan(body, jnp.zeros((), costs.dtype), order)
    seen = jnp.where(choices >= 0, outcomes[jnp.maximum(choices, 0)], -1)
    final, traj = replay_posterior(log_prior, log_lik, choices, seen)
    return final, traj, choices, spent


@functools.partial(jax.jit, static_argnames=("max_steps", "tau", "alpha", "kappa",
                                             "pointwise_prior"))
def run_methods(log_lik, costs, outcomes, budget, *, max_steps: int, tau: float,
                alpha: float, kappa: float, pointwise_prior: float | None = 0.5,
                order_key=None) -> dict:
    """All methods on a batch of questions (leading axis n) with a uniform prior over the
    MECE set; the pointwise agents start each hypothesis at belief ``pointwise_prior``
    (0.5: they know no alternatives; ``None``: the MECE prior 1/K), each also without
    early stopping (``<rule>-full``, the same outputs); with ``order_key`` also
    ``random`` (:func:`random_design`, the orders drawn from that key).

    Returns:
        A dict of arrays: ``contrastive`` (``answer`` (n,) int32 or -1 unresolved,
        ``traj`` (n, T, K), ``spent``, ``steps``); per pointwise rule (``answer`` by its
        own rule, ``contrastive_answer`` of its data, ``traj``, ``steps``, ``spent`` and
        the candidates ``focal``, ``surprisal``, ``log_lr``, ``shift`` (the focal belief's
        change), ``valid`` (n, T)); with ``order_key`` ``random`` (``answer``, ``traj``
        (n, X, K), ``spent``, ``steps``).
    """
    n, X, K, Y = log_lik.shape
    lp = jnp.full((K,), -math.log(K), log_lik.dtype)

    def answer(final):
        top = jnp.argmax(final, -1).astype(jnp.int32)
        return jnp.where(jnp.max(final, -1) >= math.log(tau), top, -1)

    def contrastive(ll, c, o):
        final, info = greedy_eig(lp, ll, c, budget, o, max_steps=max_steps)
        return dict(answer=answer(final.log_post), traj=info.log_post, spent=final.spent,
                    steps=jnp.sum(info.choice >= 0))

    lp_pw = lp if pointwise_prior is None else jnp.full((K,), math.log(pointwise_prior),
                                                        log_lik.dtype)
    out = dict(contrastive=jax.vmap(contrastive)(log_lik, costs, outcomes))
    for rule, stop in [(r, True) for r in POINTWISE] + [(r, False) for r in POINTWISE]:
        def pw(ll, c, o, rule=rule, stop=stop):
            acc, info = pointwise_run(rule, lp_pw, ll, c, budget, o, max_steps=max_steps,
                                      tau=tau, alpha=alpha, kappa=kappa, stop_on_accept=stop)
            final, traj = replay_posterior(lp, ll, info.choice, info.outcome)
            ca = answer(final)
            valid = info.choice >= 0
            return dict(answer=acc, contrastive_answer=ca, traj=traj, spent=jnp.max(info.spent),
                        steps=jnp.sum(valid), focal=info.focal, surprisal=info.surprisal,
                        log_lr=info.log_lr, shift=info.belief_after - info.belief_before,
                        valid=valid)
        out[rule if stop else f"{rule}-full"] = jax.vmap(pw)(log_lik, costs, outcomes)
    if order_key is not None:
        def rnd(ll, c, o, u):
            final, traj, choices, spent = random_design(lp, ll, c, budget, o, u)
            return dict(answer=answer(final), traj=traj, spent=spent,
                        steps=jnp.sum(choices >= 0))
        u = jax.random.uniform(order_key, costs.shape)
        out["random"] = jax.vmap(rnd)(log_lik, costs, outcomes, u)
    return out
