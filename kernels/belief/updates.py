"""Realised updates of a price path: how much beliefs actually moved.

A market's price ``p_t = P_t(Y)`` (last trade or mid) is clipped to ``[lo, hi]``
(default ``[0.01, 0.99]``: a thin market's extreme prints carry no information and the
logit would be infinite). Over a horizon ``h`` the realised update from ``t`` to
``t + h`` is measured three ways:

- absolute change ``|p_{t+h} - p_t|`` (the realised counterpart of ``E|dp|``);
- logit change ``logit p_{t+h} - logit p_t`` (signed);
- log-score gain ``y log(p_{t+h} / p_t) + (1 - y) log((1 - p_{t+h}) / (1 - p_t))``
  for the outcome ``y`` (0/1, or a probability: the expected gain under ``y``; the
  realised counterpart of the mutual information). Without an outcome the last valid
  price of the path stands in for ``y``.

Paths have a fixed length ``T`` with an optional validity mask (padded or missing
prices); an update is valid where both ends are. :func:`realised_updates` gives the
update at every start ``t`` (fixed shape ``(..., T)``, the last ``h`` starts invalid);
:func:`update_between` the update between two (traced) indices per path.

References: Wolfers & Zitzewitz, "Prediction markets" (J. Econ. Perspect. 2004) for
prices as probabilities; Good (1952) for the log score.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..checks import check_in_range, fail_first

__all__ = ["Updates", "realised_updates", "update_between", "clip_prices"]


class Updates(NamedTuple):
    """Realised updates (arrays of one shape).

    Attributes:
        abs_change: ``|p_end - p_start|``.
        logit_change: ``logit p_end - logit p_start``.
        log_score_gain: ``log p_end(y) - log p_start(y)``.
        valid: both ends observed (and, for :func:`realised_updates`, ``t + h < T``);
            invalid entries are 0.
    """

    abs_change: jax.Array
    logit_change: jax.Array
    log_score_gain: jax.Array
    valid: jax.Array


def _check_clip(clip):
    lo, hi = clip
    check_in_range(lo, "clip[0]", lo=0, hi=0.5, lo_open=True, hi_open=True)
    check_in_range(hi, "clip[1]", lo=0.5, hi=1, lo_open=True, hi_open=True)
    return lo, hi


def clip_prices(prices, clip=(0.01, 0.99)):
    """Prices clipped to ``[clip[0], clip[1]]`` in float (``0 < lo < 0.5 < hi < 1``).

    Differentiable: yes, in prices (zero outside the clip range).

    Args:
        prices: array of prices.
        clip: ``(lo, hi)``.

    Returns:
        The clipped prices.
    """
    lo, hi = _check_clip(clip)
    prices = jnp.asarray(prices, jnp.result_type(float, prices))
    return jnp.clip(prices, lo, hi)


def _prepare(prices, mask, outcome, clip, check):
    prices = jnp.asarray(prices, jnp.result_type(float, prices))
    if prices.ndim < 1:
        raise ValueError(f"`prices` must have a time axis (shape (..., T)); got shape "
                         f"{prices.shape}")
    mask = (jnp.ones(prices.shape, bool) if mask is None
            else jnp.broadcast_to(jnp.asarray(mask, bool), prices.shape))
    if check:
        good = (prices >= 0) & (prices <= 1)
        prices = fail_first(prices, [(jnp.any(mask & ~good),
                                      "`prices` must be probabilities in [0, 1] (no NaN) "
                                      "where `mask` is true")])
    lo, hi = _check_clip(clip)
    p = jnp.clip(jnp.where(mask, prices, 0.5), lo, hi)
    if outcome is None:
        t = jnp.arange(prices.shape[-1])
        last = jnp.argmax(jnp.where(mask, t, -1), axis=-1)
        y = jnp.take_along_axis(p, last[..., None], -1)[..., 0]
    else:
        y = jnp.asarray(outcome, p.dtype)
        if check:
            y = fail_first(y, [(jnp.any(~((y >= 0) & (y <= 1))),
                                "`outcome` must be 0/1 or a probability in [0, 1]")])
    return p, mask, y


def _measure(a, b, y, valid):
    lg = jnp.log(b) - jnp.log1p(-b) - (jnp.log(a) - jnp.log1p(-a))
    ls = y * (jnp.log(b) - jnp.log(a)) + (1 - y) * (jnp.log1p(-b) - jnp.log1p(-a))
    z = jnp.zeros_like(a)
    return Updates(abs_change=jnp.where(valid, jnp.abs(b - a), z),
                   logit_change=jnp.where(valid, lg, z),
                   log_score_gain=jnp.where(valid, ls, z), valid=valid)


def realised_updates(prices, horizon: int = 1, *, mask=None, outcome=None,
                     clip=(0.01, 0.99), check: bool = True) -> Updates:
    """Realised updates ``p_t -> p_{t+h}`` at every start ``t`` of each path.

    Differentiable: yes, in prices and outcome (almost everywhere: the clipping).

    Args:
        prices: ``(..., T)`` price paths.
        horizon: ``h >= 1`` steps (static).
        mask: ``(..., T)`` booleans, true where a price is observed (default all).
        outcome: the target's outcome per path, shape ``(...)`` (0/1 or a probability);
            ``None``: the last observed (clipped) price.
        clip: ``(lo, hi)`` price clipping, ``0 < lo < 0.5 < hi < 1``.
        check: check prices and outcome (default).

    Returns:
        :class:`Updates` of shape ``(..., T)``; entry ``t`` is the update from ``t`` to
        ``t + h``, invalid (and 0) for ``t >= T - h`` or an unobserved end.
    """
    horizon = check_in_range(horizon, "horizon", lo=1, integer=True)
    p, mask, y = _prepare(prices, mask, outcome, clip, check)
    T, h = p.shape[-1], int(horizon)
    if h >= T:
        raise ValueError(f"`horizon` ({h}) must be shorter than the paths ({T} steps)")
    pad = [(0, 0)] * (p.ndim - 1) + [(0, h)]
    b = jnp.pad(p[..., h:], pad, constant_values=0.5)
    mb = jnp.pad(mask[..., h:], pad, constant_values=False)
    return _measure(p, b, y[..., None], mask & mb)


def update_between(prices, start, stop, *, mask=None, outcome=None, clip=(0.01, 0.99),
                   check: bool = True) -> Updates:
    """Realised update of each path from index ``start`` to index ``stop``.

    Differentiable: yes, in prices and outcome (almost everywhere: the clipping).

    Args:
        prices: ``(..., T)`` price paths.
        start: integer index per path, shape broadcastable to ``prices.shape[:-1]``
            (may be traced); out-of-range indices make the update invalid.
        stop: integer index per path (``stop < start`` measures backwards).
        mask: ``(..., T)`` observed prices (default all).
        outcome: outcome per path (default: the last observed price).
        clip: ``(lo, hi)`` price clipping.
        check: check prices and outcome (default).

    Returns:
        :class:`Updates` of shape ``prices.shape[:-1]``.
    """
    p, mask, y = _prepare(prices, mask, outcome, clip, check)
    T = p.shape[-1]
    batch = p.shape[:-1]
    start = jnp.broadcast_to(jnp.asarray(start, jnp.int32), batch)
    stop = jnp.broadcast_to(jnp.asarray(stop, jnp.int32), batch)
    inside = (start >= 0) & (start < T) & (stop >= 0) & (stop < T)
    i0, i1 = jnp.clip(start, 0, T - 1), jnp.clip(stop, 0, T - 1)

    def at(x, i):
        return jnp.take_along_axis(x, i[..., None], -1)[..., 0]

    valid = inside & at(mask, i0) & at(mask, i1)
    return _measure(at(p, i0), at(p, i1), y, valid)
