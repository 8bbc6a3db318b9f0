"""One domain of the comparison: questions for every seed, every method, per-seed rates.

:func:`run_domain` draws ``seeds x questions`` questions of a domain
(:func:`jaxkit.contrastive.simulate.questions`); :func:`compare` runs all methods on
them (:func:`jaxkit.contrastive.methods.run_methods`; also on questions built by hand,
e.g. the negative control of the tests) and returns plain NumPy summaries:

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
  explanation before and after each step, and per seed (for the figures).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from .config import Config
from .domains import DOMAINS
from .methods import POINTWISE, run_methods
from .simulate import Questions, questions

__all__ = ["max_steps", "run_domain", "compare"]


def max_steps(cfg: Config) -> int:
    """Steps of the selection loops: the most experiments ``budget`` buys (at the cheapest
    cost), at most the number of candidates."""
    cheapest = min(float(DOMAINS[d].costs.min()) for d in cfg.domains)
    n_cand = min(2 * len(DOMAINS[d].designs) for d in cfg.domains)
    return int(min(n_cand, math.floor(cfg.budget / cheapest + 1e-9)))


def _rates(answer: np.ndarray, truth: np.ndarray) -> dict:
    """Per-seed fractions; ``answer`` and ``truth`` are (seeds, questions)."""
    wrong = (answer >= 0) & (answer != truth)
    return dict(correct=(answer == truth).mean(1), wrong=wrong.mean(1),
                unresolved=(answer < 0).mean(1))


def _truth_prob(traj: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``(n, T + 1)`` probability of the true explanation, uniform prior first."""
    p = np.exp(np.take_along_axis(traj, truth[:, None, None], axis=2)[..., 0])
    K = traj.shape[-1]
    return np.concatenate([np.full((p.shape[0], 1), 1 / K), p], axis=1)


def run_domain(key, name: str, cfg: Config) -> dict:
    """All methods on ``cfg.seeds x cfg.questions`` questions of domain ``name`` (see the
    module docstring)."""
    q = questions(key, DOMAINS[name], cfg.seeds * cfg.questions, n_samples=cfg.n_samples)
    return compare(q, name, cfg, order_key=jax.random.fold_in(key, 2**20))


def compare(q: Questions, name: str, cfg: Config, *, order_key=None) -> dict:
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
    for m in ("contrastive", *POINTWISE):
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
            cands[m] = {k: rs(v).reshape(S, -1).sum(1).astype(float) for k, v in
                        dict(high=hi, high_rejections=rej, alt_resolved=alt,
                             alt_correct=alt_ok).items()}
        rates[m] = r
        p = rs(_truth_prob(o["traj"], truth))  # (S, Q, T + 1)
        traj[m] = dict(mean=p.mean((0, 1)), per_seed=p.mean(1))
    if "random" in out:
        o = out["random"]
        rates["random"] = {**_rates(rs(o["answer"]), tr), "spent": rs(o["spent"]).mean(1),
                           "steps": rs(o["steps"]).mean(1)}
    return dict(domain=name, rates=rates, candidates=cands, trajectory=traj,
                n_questions=Q, n_seeds=S, truth_counts=np.bincount(truth, minlength=4))
