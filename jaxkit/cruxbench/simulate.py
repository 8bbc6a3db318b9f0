"""The simulated CruxBench: targets, proposers, their questions and one market per
question, as a :class:`~jaxkit.cruxbench.data.Dataset` (the form real data take), plus
what only a simulation knows (the VOI at each announcement, the proposers' traits, and
the separate forecasting agent's reading of every question,
:func:`jaxkit.cruxbench.proposers.separate_forecaster`).

Questions are asked at step 0 (the opening price ``Phi(-c)``) with their exact
``(q, p1, p0)``; question ``(m, i, k)`` is announced in its own market at step ``t_S``
(:func:`jaxkit.cruxbench.market.simulate_markets`); markets are ordered target-major,
so market ``(i, m, k)`` has index ``(i M + m) k_max + k``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .data import Dataset
from .market import known_voi_at_resolution, make_targets, simulate_markets
from .proposers import make_proposers, propose, quality_scores, separate_forecaster

__all__ = ["SimSettings", "Simulation", "simulate"]


class SimSettings(NamedTuple):
    """Sizes and traits of a simulated benchmark (hashable; see the pipeline config)."""

    n_targets: int
    n_proposers: int
    n_questions: int
    n_factors: int
    n_steps: int
    n_quality_targets: int
    explained: float
    loading_spread: float
    threshold_scale: float
    noise_min: float
    noise_max: float
    vagueness_max: float
    spread_max: float
    forecaster_noise: float = 0.3
    quality_link: float = 1.0


class Simulation(NamedTuple):
    """A simulated benchmark: ``data`` plus ``known_abs`` / ``known_sq`` / ``known_mi``
    (``(Q,)`` VOI given the state at each announcement), ``traits`` (``{name: (M,)}``),
    ``rho`` (``(Q,)``) and the separate forecaster's ``forecast_p1`` / ``forecast_p0``
    (``(Q,)``, in the data's question order)."""

    data: Dataset
    known_abs: np.ndarray
    known_sq: np.ndarray
    known_mi: np.ndarray
    traits: dict
    rho: np.ndarray
    forecast_p1: np.ndarray
    forecast_p0: np.ndarray


def _arrays(key, s: SimSettings):
    kt, kh, kp, kq, kz, km = jax.random.split(key, 6)
    tg = make_targets(kt, s.n_targets, s.n_factors, explained=s.explained,
                      loading_spread=s.loading_spread, threshold_scale=s.threshold_scale)
    held = make_targets(kh, s.n_quality_targets, s.n_factors, explained=s.explained,
                        loading_spread=s.loading_spread, threshold_scale=s.threshold_scale)
    pr = make_proposers(kp, s.n_proposers, noise_min=s.noise_min, noise_max=s.noise_max,
                        vagueness_max=s.vagueness_max, spread_max=s.spread_max)
    qu = propose(kq, pr, tg, s.n_questions)
    fp1, fp0 = separate_forecaster(jax.random.fold_in(kq, 1), pr, tg, qu,
                                   noise=s.forecaster_noise)
    other = make_proposers(jax.random.fold_in(kp, 1), s.n_proposers, noise_min=s.noise_min,
                           noise_max=s.noise_max).knowledge_noise
    quality = quality_scores(kz, pr, held, link=s.quality_link, other_noise=other)
    # target-major order (i, m, k)
    tr = lambda x: jnp.transpose(x, (1, 0, 2)).reshape(-1)  # noqa: E731
    c = jnp.repeat(tg.threshold, s.n_proposers * s.n_questions)
    zy = jnp.repeat(tg.z, s.n_proposers * s.n_questions)
    d, rho, zs = tr(qu.threshold), tr(qu.rho), tr(qu.z)
    mk = simulate_markets(km, c, d, rho, zy, zs, s.n_steps)
    known = known_voi_at_resolution(mk)
    # the opening (q, p1, p0) are the market's prices after a yes / no at step 0 (one
    # bivariate normal evaluation serves both; qu.q/p1/p0 are the same numbers)
    return dict(outcome=tg.outcome, prices=mk.prices, t_s=mk.t_resolve, answer=mk.answer,
                q=mk.q, p1=mk.if_yes[:, 0], p0=mk.if_no[:, 0], quality=quality, rho=rho,
                known_abs=known.abs_shift, known_sq=known.sq_shift,
                known_mi=known.mutual_info, traits=pr._asdict(), forecast_p1=tr(fp1),
                forecast_p0=tr(fp0))


_ARRAYS = jax.jit(_arrays, static_argnums=1)


def simulate(key, s: SimSettings) -> Simulation:
    """Draw a simulated benchmark (one compiled call per settings)."""
    a = jax.device_get(_ARRAYS(key, s))
    N, M, k, T = s.n_targets, s.n_proposers, s.n_questions, s.n_steps
    Q = N * M * k
    prices = np.asarray(a["prices"], float)
    ds = Dataset(
        target_ids=[f"t{i}" for i in range(N)], proposers=[f"sim-{m}" for m in range(M)],
        outcome=np.asarray(a["outcome"], float), market_target=np.repeat(np.arange(N), M * k),
        prices=prices, times=np.broadcast_to(np.arange(T + 1, dtype=float), (Q, T + 1)).copy(),
        mask=np.ones((Q, T + 1), bool), question_market=np.arange(Q),
        question_proposer=np.tile(np.repeat(np.arange(M), k), N),
        q=np.asarray(a["q"], float), p1=np.asarray(a["p1"], float),
        p0=np.asarray(a["p0"], float), asked_at=np.zeros(Q),
        resolved_at=np.asarray(a["t_s"], float), answer=np.asarray(a["answer"], float),
        quality=np.asarray(a["quality"], float))
    traits = {n: np.asarray(v, float) for n, v in a["traits"].items()}
    return Simulation(ds, np.asarray(a["known_abs"], float), np.asarray(a["known_sq"], float),
                      np.asarray(a["known_mi"], float), traits, np.asarray(a["rho"], float),
                      np.asarray(a["forecast_p1"], float), np.asarray(a["forecast_p0"], float))
