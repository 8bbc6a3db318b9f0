"""Argument and observation checks shared by the bandit policies."""

from __future__ import annotations

import math

import jax.numpy as jnp

from ..checks import fail_first


def check_count(name: str, value, *, or_none: bool = False) -> int:
    """``value`` must be a positive integer (a static size); returns it as an int."""
    try:
        bad = isinstance(value, bool) or int(value) != value or value < 1
    except (TypeError, ValueError, OverflowError):  # NaN, inf, not a number
        bad = True
    if bad:
        raise ValueError(f"`{name}` must be a positive integer{' or None' if or_none else ''}; "
                         f"got {value!r}")
    return int(value)


def check_arms(n_arms: int) -> int:
    """The number of arms, a positive integer."""
    return check_count("n_arms", n_arms)


def check_unit(name: str, value: float, *, low_open: bool = True) -> float:
    value = float(value)
    ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    if not ok:
        raise ValueError(f"`{name}` must be in {'(0, 1]' if low_open else '[0, 1]'}; "
                         f"got {value}")
    return value


def check_positive(name: str, value: float, *, strict: bool = False) -> float:
    value = float(value)
    if not (value > 0 if strict else value >= 0) or not math.isfinite(value):
        raise ValueError(f"`{name}` must be {'> 0' if strict else '>= 0'} and finite; "
                         f"got {value}")
    return value


def check_observation(n_arms: int, arm, reward, dtype, runs: tuple = ()):
    """Validate one (arm, reward) observation per run (``runs`` the shape of the runs
    axis, () for one run); returns (arm as int32, reward as dtype)."""
    arm = jnp.asarray(arm)
    what = "scalar" if runs == () else f"array of shape {runs} (one per run)"
    if arm.shape != runs or not jnp.issubdtype(arm.dtype, jnp.integer):
        raise ValueError(f"`arm` must be an integer {what}; got dtype {arm.dtype}, "
                         f"shape {arm.shape}")
    reward = jnp.asarray(reward, dtype)
    if reward.shape != runs:
        raise ValueError(f"`reward` must be {'a' if runs == () else 'an'} {what}; got shape "
                         f"{reward.shape}")
    # both checks ride on ``arm`` (every update uses it): one branch per step, not two
    arm = fail_first(arm, [((arm < 0) | (arm >= n_arms),
                             f"`arm` out of range: must be in [0, {n_arms})"),
                            (~jnp.isfinite(reward), "`reward` is NaN or inf (the reward given to "
                             "`update`, or returned by `reward_fn` in `simulate`)")])
    return arm.astype(jnp.int32), reward
