"""One domain of the comparison: questions for every seed, every method, per-seed rates.

:func:`run_domain` draws ``seeds x questions`` questions of a domain
(:func:`jaxkit.contrastive.simulate.questions`); :func:`compare` runs all methods on
them (:func:`jaxkit.contrastive.methods.run_methods`; also on questions built by hand,
e.g. the negative control of the tests) and returns a
:class:`~jaxkit.contrastive.results.DomainResult` of NumPy summaries:

* ``rates[method]`` (also ``random``, :func:`jaxkit.contrastive.methods.random_design`,
  when ``compare`` has an ``order_key``): per-seed fractions of questions ``correct``
  (resolved to the true explanation), ``wrong`` (resolved to another one) and
  ``unresolved``, with the mean ``spent`` budget and ``steps`` (experiments run); for
  the pointwise agents also
  ``contrastive_correct`` / ``contrastive_wrong``: the same data evaluated contrastively.
* ``candidates[rule]``: per-seed counts of the pointwise candidates: ``high`` (the focal
  belief moved by at least ``surprise_width``, either way: AutoDiscovery's Bayesian
  surprise), ``high_rejections`` (of those, moves down), ``alt_resolved`` (of those
  rejections, the question's data resolve an alternative to the focal hypothesis when
  evaluated contrastively) and ``alt_correct`` (that alternative is the truth).
* ``trajectory[method]``: ``(T + 1,)`` mean posterior probability of the true
  explanation before and after each step, and per seed (for the figures; empty when the
  truth is not in the set).

Methods: ``contrastive``, the pointwise agents (:data:`~jaxkit.contrastive.methods.
POINTWISE`, stopping at acceptance), the same agents without early stopping
(:data:`~jaxkit.contrastive.methods.FULL_SPEND`) and ``random``.

Misspecified arms (``arms[name]``, each a :func:`compare` result on the same questions and
outcomes; only the tables the agents read change, :func:`misspecified`):

* ``missing``: the true explanation is removed from every question's set (K - 1 = 3
  explanations, truth -1): every resolution is wrong, so ``wrong`` is the rate of false
  resolutions and ``correct`` is 0.
* ``nuisance``: the nuisance parameters are not known but under their prior
  (:attr:`jaxkit.contrastive.simulate.Questions.log_lik_nuisance`, ``n_nuisance`` draws).
* ``noisy``: each log-likelihood gets independent N(0, ``table_noise``^2) noise and each
  row is renormalised over the outcomes (a misestimated simulator).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from .config import ARMS, Config
from .domains import DOMAINS
from .methods import FULL_SPEND, POINTWISE, run_methods
from .results import Candidates, DomainResult, Rates, Trajectory
from .simulate import Questions, questions

__all__ = ["ARMS", "max_steps", "run_domain", "compare", "misspecified"]



def max_steps(cfg: Config) -> int:
    """Steps of the selection loops: the most experiments ``budget`` buys (at the cheapest
    cost), at most the number of candidates."""
    cheapest = min(float(DOMAINS[d].costs.min()) for d in cfg.domains)
    n_cand = min(2 * len(DOMAINS[d].designs) for d in cfg.domains)
    return int(min(n_cand, math.floor(cfg.budget / cheapest + 1e-9)))


def _rates(answer: np.ndarray, truth: np.ndarray) -> dict:
    """Per-seed fractions; ``answer`` and ``truth`` are (seeds, questions)."""
    wrong = (answer >= 0) & (answer != truth)
    return dict(correct=((answer >= 0) & (answer == truth)).mean(1), wrong=wrong.mean(1),
                unresolved=(answer < 0).mean(1))


def _truth_prob(traj: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``(n, T + 1)`` probability of the true explanation, uniform prior first."""
    p = np.exp(np.take_along_axis(traj, truth[:, None, None], axis=2)[..., 0])
    K = traj.shape[-1]
    return np.concatenate([np.full((p.shape[0], 1), 1 / K), p], axis=1)


def misspecified(key, q: Questions, arm: str, noise: float) -> Questions:
    """The questions ``q`` as the agents of ``arm`` read them (module docstring); the
    outcomes stay those of the true model. ``key`` draws the ``noisy`` arm's noise."""
    ll = np.asarray(q.log_lik)
    if arm == "missing":
        n, X, K, Y = ll.shape
        truth = np.asarray(q.truth)
        keep = np.stack([np.delete(np.arange(K), t) for t in truth])  # (n, K - 1)
        ll = np.take_along_axis(ll, keep[:, None, :, None], axis=2)
        return q._replace(log_lik=ll, truth=np.full_like(truth, -1))
    if arm == "nuisance":
        if q.log_lik_nuisance is None:
            raise ValueError("`q` has no log_lik_nuisance: draw it with n_nuisance > 0")
        return q._replace(log_lik=np.asarray(q.log_lik_nuisance))
    if arm == "noisy":
        eps = np.asarray(jax.random.normal(key, ll.shape, jax.numpy.float32))
        z = ll + noise * eps
        z = z - z.max(-1, keepdims=True)
        return q._replace(log_lik=(z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(
            ll.dtype))
    raise ValueError(f"`arm` must be one of {', '.join(ARMS)}; got {arm!r}")


def run_domain(key, name: str, cfg: Config) -> DomainResult:
    """All methods on ``cfg.seeds x cfg.questions`` questions of domain ``name``, well
    specified and in each arm of ``cfg.arms`` (``out.arms[arm]``; module docstring)."""
    q = questions(key, DOMAINS[name], cfg.seeds * cfg.questions, n_samples=cfg.n_samples,
                  n_nuisance=cfg.n_nuisance if "nuisance" in cfg.arms else 0)
    order_key = jax.random.fold_in(key, 2**20)
    out = compare(q, name, cfg, order_key=order_key)
    return out.with_arms({arm: compare(misspecified(jax.random.fold_in(key, 2**21), q, arm,
                                                    cfg.table_noise), name, cfg,
                                       order_key=order_key) for arm in cfg.arms})


def compare(q: Questions, name: str, cfg: Config, *, order_key=None) -> DomainResult:
    """All methods on the ``cfg.seeds x cfg.questions`` questions ``q`` (seed-major) of the
    domain ``name`` (see the module docstring); ``order_key`` adds the random design."""
    S, Q = cfg.seeds, cfg.questions
    out = run_methods(q.log_lik, q.costs, q.outcomes, float(cfg.budget), max_steps=max_steps(cfg),
                      tau=float(cfg.tau), alpha=float(cfg.alpha), kappa=float(cfg.kappa),
                      pointwise_prior=float(cfg.pointwise_prior), order_key=order_key)
    out = jax.tree.map(np.asarray, out)
    truth = np.asarray(q.truth)
    rs = lambda a: a.reshape(S, Q, *a.shape[1:])  # noqa: E731
    tr = rs(truth)
    rates, cands, traj = {}, {}, {}
    known = bool(np.all(truth >= 0))
    for m in ("contrastive", *POINTWISE, *FULL_SPEND):
        o = out[m]
        r = _rates(rs(o["answer"]), tr)
        r.update(spent=rs(o["spent"]).mean(1), steps=rs(o["steps"]).mean(1))
        if m != "contrastive":
            rc = _rates(rs(o["contrastive_answer"]), tr)
            r.update(contrastive_correct=rc["correct"], contrastive_wrong=rc["wrong"])
            hi = o["valid"] & (np.abs(o["shift"]) >= cfg.surprise_width)
            rej = hi & (o["shift"] < 0)
            ca = o["contrastive_answer"][:, None]
            alt = rej & (ca >= 0) & (ca != o["focal"])
            alt_ok = alt & (ca == truth[:, None])
            if m in FULL_SPEND:
                rates[m] = Rates(**r)
                continue
            cands[m] = Candidates(**{k: rs(v).reshape(S, -1).sum(1).astype(float) for k, v in
                                     dict(high=hi, high_rejections=rej, alt_resolved=alt,
                                          alt_correct=alt_ok).items()})
        rates[m] = Rates(**r)
        if known:
            p = rs(_truth_prob(o["traj"], truth))  # (S, Q, T + 1)
            traj[m] = Trajectory(mean=p.mean((0, 1)), per_seed=p.mean(1))
    if "random" in out:
        o = out["random"]
        rates["random"] = Rates(**_rates(rs(o["answer"]), tr), spent=rs(o["spent"]).mean(1),
                                steps=rs(o["steps"]).mean(1))
    return DomainResult(domain=name, rates=rates, candidates=cands, trajectory=traj,
                        n_questions=Q, n_seeds=S,
                        truth_counts=np.bincount(truth[truth >= 0],
                                                 minlength=q.log_lik.shape[2]))
