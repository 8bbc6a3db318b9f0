"""The cost-aware Ballad index: Ballad's index per unit cost, under an optional budget."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..checks import fail
from ._checks import check_positive
from ._core import Policy, argmax
from .genealogy import BalladState, ballad

__all__ = ["BalladCostState", "ballad_cost"]


class BalladCostState(NamedTuple):
    """A :class:`~jaxkit.kernels.bandit.BalladState` plus the run's prices.

    ``costs`` (K,) is the price of one call to each arm, ``budget`` the run's total
    budget (``inf`` for none) and ``horizon`` the number of calls the run will make (0:
    no reserve). They live in the state, not the factory, so one compiled policy serves
    runs (pools) with different prices under ``vmap``. The money spent so far is
    ``pulls @ costs`` (every update counts, also beyond the genealogy's capacity)."""

    inner: BalladState
    costs: Float[Array, " K"]
    budget: Float[Array, ""]
    horizon: Int[Array, ""]


def ballad_cost(n_arms: int, *, capacity: int, cost_weight: float = 1.0,
                max_parents: int = 2, **ballad_kw) -> Policy:
    """Ballad's index divided by the relative price of each arm, under a budget.

    With ``I_k`` the plain :func:`~jaxkit.kernels.bandit.ballad` index (credit mean +
    extreme quantile + exploration bonus, all >= 0), prices ``c_k`` and
    ``c_min = min_k c_k``::

        index_k = I_k * (c_min / c_k) ** cost_weight                 if affordable_k
                = -inf                                               otherwise
        affordable_k  <=>  spent + c_k + max(horizon - t - 1, 0) * c_min <= budget

    ``cost_weight = 1`` is reward per unit cost (the index of an arm that costs ten
    times more must be ten times higher to be chosen), ``0`` the plain index; values in
    between trade quality for price. The budget constraint keeps enough money to make
    the remaining ``horizon - t - 1`` calls at the cheapest price (a pacing reserve);
    when no arm is affordable, :attr:`Policy.select` returns the cheapest arm (the run
    is then over budget: compare ``pulls @ costs`` with ``budget`` to stop). An arm never
    pulled keeps index +inf (if affordable), so each arm is tried once. Ties go to the
    lowest arm index.

    ``init(costs, budget=inf, horizon=0)`` takes the prices (positive, finite; checked,
    also under ``jit``); ``update(state, arm, reward, parents)`` is Ballad's update.

    References: the ratio (reward per unit cost) index of budget-limited bandits
    (Tran-Thanh, Chapman, Rogers & Jennings, AAAI 2012; Xia et al., IJCAI 2015), applied
    to the Ballad index of :func:`~jaxkit.kernels.bandit.ballad`.

    Differentiable: no: builds a Policy from static hyperparameters (its select returns integer
    arms).

    Args:
        n_arms: number of arms ``K`` (static).
        capacity: most genealogy nodes stored (static).
        cost_weight: exponent of the relative price (``>= 0``).
        max_parents: parents per node (static).
        **ballad_kw: the other :func:`~jaxkit.kernels.bandit.ballad` settings (gamma,
            alpha, decay, q, extreme, credit, discount, dtype).

    Returns:
        A :class:`Policy` whose state is a :class:`BalladCostState`.
    """
    cost_weight = check_positive("cost_weight", cost_weight)
    inner = ballad(n_arms, capacity=capacity, max_parents=max_parents, **ballad_kw)
    dtype = ballad_kw.get("dtype", jnp.float32)

    def init(costs, budget=jnp.inf, horizon=0) -> BalladCostState:
        costs = jnp.asarray(costs, dtype)
        if costs.shape != (n_arms,):
            raise ValueError(f"`costs` must have shape ({n_arms},); got {costs.shape}")
        costs = fail(costs, ~jnp.all(jnp.isfinite(costs) & (costs > 0)),
                     "`costs` must be finite and > 0")
        budget = jnp.asarray(budget, dtype)
        if budget.shape != ():
            raise ValueError(f"`budget` must be a scalar; got shape {budget.shape}")
        budget = fail(budget, ~(budget > 0), "`budget` must be > 0 (inf for none)")
        horizon = jnp.asarray(horizon, jnp.int32)
        if horizon.shape != ():
            raise ValueError(f"`horizon` must be a scalar; got shape {horizon.shape}")
        horizon = fail(horizon, horizon < 0, "`horizon` must be >= 0 (0: no reserve)")
        return BalladCostState(inner.init(), costs, budget, horizon)

    def _affordable(state: BalladCostState):
        c = state.costs
        spent = state.inner.pulls.astype(dtype) @ c
        left = jnp.maximum(state.horizon - state.inner.t - 1, 0).astype(dtype)
        return spent + c + left * jnp.min(c) <= state.budget

    def index(key, state: BalladCostState) -> Float[Array, " K"]:
        idx = inner.index(key, state.inner)
        rel = (jnp.min(state.costs) / state.costs) ** jnp.asarray(cost_weight, dtype)
        idx = jnp.where(jnp.isinf(idx), idx, idx * rel)
        return jnp.where(_affordable(state), idx, -jnp.inf)

    def select(key, state: BalladCostState):
        idx = index(key, state)
        return jnp.where(jnp.any(idx > -jnp.inf), argmax(idx),
                         jnp.argmin(state.costs).astype(jnp.int32))

    def update(state: BalladCostState, arm, reward, parents=None) -> BalladCostState:
        return state._replace(inner=inner.update(state.inner, arm, reward, parents))

    return Policy(init, index, select, update, n_arms)
