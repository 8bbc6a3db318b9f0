"""Cost-aware wrapping of any policy: reward per unit cost and a budget."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import check_observation, check_positive
from ._core import Policy, argmax

__all__ = ["CostState", "cost_aware"]


class CostState(NamedTuple):
    inner: Any
    spent: Float[Array, ""]


def cost_aware(policy: Policy, costs, *, budget: float | None = None,
               per_unit_cost: bool = True) -> Policy:
    """Make any policy cost-aware. With ``per_unit_cost`` the inner policy learns reward
    per unit cost (each reward is scaled by ``min(costs) / costs[arm]``). With a
    ``budget``, arms whose cost exceeds what is left get index -inf; once nothing is
    affordable the cheapest arm is returned and ``spent`` passes ``budget`` (check
    ``state.spent`` to stop).

    Differentiable: no: wraps a Policy (its select returns integer arms).

    Args:
        policy: the inner policy (one run per state).
        costs: positive, finite cost per arm ``(K,)`` (concrete: a list or array).
        budget: optional total budget (``> 0``).
        per_unit_cost: scale rewards by ``min(costs) / costs[arm]`` (static).

    Returns:
        A :class:`Policy` whose state is a :class:`CostState`.
    """
    # validated in NumPy: the factory also works inside jit (costs are static, concrete)
    costs_host = np.asarray(costs, np.float32)
    if costs_host.shape != (policy.n_arms,):
        raise ValueError(f"`costs` must have shape ({policy.n_arms},); "
                         f"got {costs_host.shape}")
    if not np.all(np.isfinite(costs_host) & (costs_host > 0)):
        raise ValueError("`costs` must be finite and > 0")
    if budget is not None:
        budget = check_positive("budget", budget, strict=True)
    costs_np = jnp.asarray(costs_host)
    scale = jnp.asarray(np.min(costs_host) / costs_host)
    cheapest = jnp.asarray(np.argmin(costs_host), jnp.int32)

    def init() -> CostState:
        return CostState(policy.init(), jnp.zeros((), jnp.float32))

    def index(key, state: CostState):
        idx = policy.index(key, state.inner)
        if budget is not None:
            idx = jnp.where(costs_np <= budget - state.spent, idx, -jnp.inf)
        return idx

    def select(key, state: CostState):
        idx = index(key, state)
        return jnp.where(jnp.any(idx > -jnp.inf), argmax(idx), cheapest)

    def update(state: CostState, arm, reward) -> CostState:
        arm, reward = check_observation(policy.n_arms, arm, reward, jnp.result_type(reward))
        r = reward * scale[arm].astype(reward.dtype) if per_unit_cost else reward
        return CostState(policy.update(state.inner, arm, r), state.spent + costs_np[arm])

    return Policy(init, index, select, update, policy.n_arms)

