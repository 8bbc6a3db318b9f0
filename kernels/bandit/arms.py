"""Adding and removing arms on a running policy: a fixed maximum number of arms, padded,
with an active-arm mask (MABWiser's ``MAB.add_arm`` / ``MAB.remove_arm``, in fixed
shapes).

``pol = dynamic_arms(ucb1(8), initial=3)`` is a :class:`Policy` over at most 8 arms of
which arms 0, 1, 2 start active. Its state is an :class:`ArmSetState` (the wrapped
policy's state plus the ``(K,)`` boolean ``active`` mask); ``pol.add_arm(state, k)`` and
``pol.remove_arm(state, k)`` return new states, both jit-able with a traced ``k`` (no
retracing for new arms). Semantics, MABWiser's where they exist:

* an inactive arm's index is ``-inf``, so :attr:`Policy.select` never returns it;
  ``update`` with an inactive arm is an error (MABWiser would raise on an unknown arm),
  as is ``select`` with no active arm;
* ``add_arm`` of an active arm and ``remove_arm`` of an inactive one are errors
  (MABWiser: "The arm is already in the list of arms." / "The arm is not in the list of
  arms.");
* both reset the arm's statistics to the wrapped policy's initial values (MABWiser's
  ``_uptake_new_arm`` sets its sum and count to 0; ``_drop_existing_arm`` deletes them),
  so a re-added arm starts fresh. Buffer-based states (sliding window, Threshold Ascent)
  drop the arm's entries from their buffers;
* the step counter ``t`` (and so UCB's ``ln n``) keeps counting every pull, also of arms
  since removed: MABWiser's ``total_count`` does the same;
* a fresh arm has index ``+inf`` (jaxkit's convention: it is pulled next, as UCB1 plays
  each arm once), where MABWiser gives it expectation 0 until it is trained; a MABWiser
  user reproduces jaxkit by fitting the new arm once (``partial_fit([arm], [reward])``);
* exact ties of the index go to the lowest arm id (``jnp.argmax``); MABWiser takes the
  first in its arm list, where a re-added arm goes last, so after a re-addition the two
  can break an exact tie (equal counts and sums) differently.

Supported wrapped policies: those with :class:`CountState` (:func:`ucb1`,
:func:`discounted_ucb`, :func:`thompson_gaussian`, also with the runs on the last axis),
:class:`BetaState` (:func:`thompson_beta`), :class:`BufferState` (:func:`qomax`),
:class:`WindowState` (:func:`sliding_window_ucb`) and :class:`HistoryState`
(:func:`threshold_ascent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, Bool

from ..checks import fail
from ._core import Policy, argmax
from .counts import BetaState, CountState
from .history import BufferState, HistoryState, WindowState

__all__ = ["ArmSetState", "dynamic_arms"]

_PER_ARM = (CountState, BetaState, BufferState)  # every field but ``t`` is (K, ...)
_BUFFERED = (WindowState, HistoryState)  # ``arms`` (W,) of arm ids, -1 = empty


class ArmSetState(NamedTuple):
    """The wrapped policy's state (sized for the maximum number of arms) and the mask of
    the arms currently in play."""

    inner: Any
    active: Bool[Array, " K"]


def _reset_arm(state, fresh, arm):
    """``state`` with arm ``arm``'s statistics set back to those of ``fresh`` (the wrapped
    policy's ``init()``)."""
    if isinstance(state, _PER_ARM):
        return type(state)(*(
            v if name == "t" else v.at[arm].set(f[arm])
            for name, v, f in zip(state._fields, state, fresh, strict=True)))
    if isinstance(state, _BUFFERED):
        hit = state.arms == arm
        return state._replace(arms=jnp.where(hit, -1, state.arms).astype(state.arms.dtype),
                              rewards=jnp.where(hit, fresh.rewards, state.rewards))
    raise TypeError(f"dynamic_arms does not support states of type {type(state).__name__}")


def _check_arm(arm, n_arms: int):
    arm = jnp.asarray(arm)
    if arm.shape != () or not jnp.issubdtype(arm.dtype, jnp.integer):
        raise ValueError(f"`arm` must be an integer scalar; got dtype {arm.dtype}, shape "
                         f"{arm.shape}")
    return fail(arm, (arm < 0) | (arm >= n_arms),
                f"`arm` out of range: must be in [0, {n_arms}) (the maximum number of arms)"
                ).astype(jnp.int32)


def dynamic_arms(policy: Policy, initial: int | Sequence[int] | None = None) -> Policy:
    """Wrap ``policy`` (sized for the maximum number of arms ``K = policy.n_arms``) so that
    arms can be added and removed while it runs; see the module docstring.

    Differentiable: no: wraps a Policy (its select returns integer arms).

    Args:
        policy: a :class:`Policy` of a supported family, with ``n_arms`` the maximum.
        initial: the arms active at ``init``: a count ``m`` (arms ``0..m-1``), a sequence
            of arm ids, or None (all ``K``).

    Returns:
        A :class:`Policy` on :class:`ArmSetState` with ``add_arm(state, arm)`` and
        ``remove_arm(state, arm)`` (new states; ``arm`` an integer scalar, may be traced).

    Raises:
        ValueError: ``initial`` out of range or with duplicates.
    """
    k = policy.n_arms
    if initial is None:
        mask = [True] * k
    elif isinstance(initial, int) and not isinstance(initial, bool):
        if not 0 <= initial <= k:
            raise ValueError(f"`initial` must be in [0, {k}]; got {initial}")
        mask = [i < initial for i in range(k)]
    else:
        ids = [int(i) for i in initial]
        if len(set(ids)) != len(ids) or any(not 0 <= i < k for i in ids):
            raise ValueError(f"`initial` must hold distinct arms in [0, {k}); got {ids}")
        mask = [i in ids for i in range(k)]

    def init(*args) -> ArmSetState:
        return ArmSetState(policy.init(*args), jnp.asarray(mask))

    def _mask(active, idx):
        return active.reshape((k,) + (1,) * (idx.ndim - 1))

    def index(key, state: ArmSetState):
        idx = policy.index(key, state.inner)
        return jnp.where(_mask(state.active, idx), idx, -jnp.inf)

    def select(key, state: ArmSetState):
        arm = argmax(index(key, state))
        return fail(arm, ~jnp.any(state.active), "no active arm: add one with add_arm")

    def update(state: ArmSetState, arm, reward) -> ArmSetState:
        a = jnp.asarray(arm)
        if jnp.issubdtype(a.dtype, jnp.integer):
            ok = state.active[jnp.clip(a, 0, k - 1)]
            a = fail(a, ~ok, "`arm` is not an active arm (add it with add_arm first)")
        return ArmSetState(policy.update(state.inner, a, reward), state.active)

    def add_arm(state: ArmSetState, arm) -> ArmSetState:
        arm = _check_arm(arm, k)
        arm = fail(arm, state.active[arm], "`arm` is already an active arm")
        fresh = policy.init(*_runs(state.inner))
        return ArmSetState(_reset_arm(state.inner, fresh, arm), state.active.at[arm].set(True))

    def remove_arm(state: ArmSetState, arm) -> ArmSetState:
        arm = _check_arm(arm, k)
        arm = fail(arm, ~state.active[arm], "`arm` is not an active arm")
        fresh = policy.init(*_runs(state.inner))
        return ArmSetState(_reset_arm(state.inner, fresh, arm),
                           state.active.at[arm].set(False))

    def _runs(inner) -> tuple:
        """``init``'s arguments that reproduce ``inner``'s shapes (the runs axis)."""
        if policy.runs_last and isinstance(inner, _PER_ARM) and inner[0].ndim == 2:
            return (inner[0].shape[1],)
        return ()

    return Policy(init, index, select, update, k, policy.runs_last, add_arm, remove_arm)
