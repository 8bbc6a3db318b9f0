"""Discrete flow matching on token sequences (Gat et al., "Discrete flow matching",
NeurIPS 2024; Campbell et al., "Generative flows on discrete state-spaces", ICML 2024).

Sequences are ``(B, L)`` integer arrays over a vocabulary of ``V`` tokens
``0 .. V-1``; the masking source uses an extra token ``mask_token`` (default ``V``), so a
model for it embeds ``V + 1`` tokens and predicts logits over the ``V`` real ones.

* Mixture path: independently per position, ``x_t^i = x1^i`` with probability
  ``kappa(t)``, else ``x0^i``; ``x0`` from the uniform source (:func:`uniform_source`)
  or all-mask (:func:`mask_source`). Schedulers: ``"linear"`` ``kappa = t`` and
  ``"polynomial"`` ``kappa = t^n``.
* :func:`dfm_loss`: cross-entropy of the model posterior ``p_theta(x1^i | x_t, t)``.
* :func:`ctmc_euler_sample`: Euler steps of the CTMC whose rate toward the predicted
  ``x1`` is ``kappa'(t) / (1 - kappa(t))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .checks import check_in_range, is_traced

__all__ = ["SCHEDULERS", "kappa", "kappa_dot", "uniform_source", "mask_source",
           "mixture_path", "dfm_loss", "ctmc_euler_sample"]

SCHEDULERS = ("linear", "polynomial")
PyTree = Any


def _check_scheduler(scheduler: str, exponent: float):
    if scheduler not in SCHEDULERS:
        raise ValueError(f"`scheduler` must be one of {SCHEDULERS}; got {scheduler!r}")
    if scheduler == "polynomial":
        check_in_range(exponent, "exponent", lo=0, lo_open=True)


def kappa(t, *, scheduler: str = "linear", exponent: float = 2.0):
    """Mixture schedule ``kappa(t)``: ``t`` (linear) or ``t^exponent`` (polynomial)
    (Gat et al. 2024, sec. 2.2).

    Differentiable: yes, in t and exponent.

    Args:
        t: time(s) in ``[0, 1]``.
        scheduler: ``"linear"`` or ``"polynomial"`` (static).
        exponent: the polynomial's exponent (``> 0``).

    Returns:
        ``kappa(t)``, of ``t``'s shape.
    """
    _check_scheduler(scheduler, exponent)
    t = jnp.asarray(t)
    return t if scheduler == "linear" else t ** exponent


def kappa_dot(t, *, scheduler: str = "linear", exponent: float = 2.0):
    """``d kappa / dt``: ``1`` (linear) or ``exponent t^(exponent - 1)`` (polynomial).

    Differentiable: yes, in t and exponent.

    Args:
        t: time(s) in ``[0, 1]``.
        scheduler: ``"linear"`` or ``"polynomial"`` (static).
        exponent: the polynomial's exponent (``> 0``).

    Returns:
        ``kappa'(t)``, of ``t``'s shape.
    """
    _check_scheduler(scheduler, exponent)
    t = jnp.asarray(t)
    if scheduler == "linear":
        return jnp.ones_like(t)
    return exponent * t ** (exponent - 1)


def uniform_source(key: PRNGKeyArray, shape: tuple[int, ...],
                   vocab_size: int) -> Int[Array, "..."]:
    """``x0`` uniform over the ``vocab_size`` tokens (the uniform source of Gat et al.
    2024).

    Differentiable: no: integer tokens.

    Args:
        key: PRNG key.
        shape: token shape, e.g. ``(B, L)`` (static).
        vocab_size: number of tokens ``V`` (static).

    Returns:
        int32 tokens in ``[0, V)`` of shape ``shape``.
    """
    return jax.random.randint(key, shape, 0, vocab_size, dtype=jnp.int32)


def mask_source(shape: tuple[int, ...], mask_token: int) -> Int[Array, "..."]:
    """``x0`` all equal to ``mask_token`` (the masking / absorbing source of Gat et al.
    2024 and Campbell et al. 2024).

    Differentiable: no: integer tokens.

    Args:
        shape: token shape, e.g. ``(B, L)`` (static).
        mask_token: the mask token's id (conventionally ``V``).

    Returns:
        int32 tokens of shape ``shape``.
    """
    return jnp.full(shape, mask_token, jnp.int32)


def _check_tokens(x, name: str):
    if not hasattr(x, "dtype") or not jnp.issubdtype(x.dtype, jnp.integer):
        raise ValueError(f"`{name}` must be an integer token array; got "
                         f"{getattr(x, 'dtype', type(x))}")
    if x.ndim != 2:
        raise ValueError(f"`{name}` must have shape (B, L); got {x.shape}")


def _check_valid(valid, shape):
    if valid is None:
        return None
    valid = jnp.asarray(valid)
    if valid.ndim > len(shape) or any(a not in (1, b) for a, b in zip(
            valid.shape[::-1], shape[::-1], strict=False)):
        raise ValueError(f"`valid` must broadcast to the token shape {shape}; "
                         f"got {valid.shape}")
    return jnp.broadcast_to(valid.astype(bool), shape)


def mixture_path(key: PRNGKeyArray, x0: Int[Array, "B L"], x1: Int[Array, "B L"],
                 t: Float[Array, " B"], *, scheduler: str = "linear",
                 exponent: float = 2.0) -> tuple[Int[Array, "B L"], Bool[Array, "B L"]]:
    """Sample ``x_t``: position ``i`` of sequence ``b`` takes ``x1`` with probability
    ``kappa(t_b)`` else ``x0``: ``p_t(x^i | x0, x1) = kappa(t) delta(x^i, x1^i) +
    (1 - kappa(t)) delta(x^i, x0^i)`` (Gat et al. 2024, eq. 7).

    Differentiable: no: integer tokens and a boolean mask.

    Args:
        key: PRNG key.
        x0: source tokens ``(B, L)``.
        x1: target tokens ``(B, L)``.
        t: time per sequence ``(B,)`` or a scalar.
        scheduler: ``"linear"`` or ``"polynomial"`` (static).
        exponent: the polynomial's exponent.

    Returns:
        ``(x_t, from_x1)``: the tokens and whether each came from ``x1``.
    """
    if x0.shape != x1.shape:
        raise ValueError(f"`x0` and `x1` must have the same shape; got {x0.shape} and "
                         f"{x1.shape}")
    t = jnp.asarray(t)
    if t.ndim > 1 or (t.ndim == 1 and t.shape[0] != x1.shape[0]):
        raise ValueError(f"`t` must be a scalar or of shape ({x1.shape[0]},); got {t.shape}")
    k = kappa(t, scheduler=scheduler, exponent=exponent)
    k = jnp.reshape(k, (-1,) + (1,) * (x1.ndim - 1)) if k.ndim == 1 else k
    from_x1 = jax.random.uniform(key, x1.shape) < k
    return jnp.where(from_x1, x1, x0), from_x1


def dfm_loss(logits_fn: Callable, params: PyTree, key: PRNGKeyArray, x1: Int[Array, "B L"],
             *, vocab_size: int, source: str = "mask", mask_token: int | None = None,
             scheduler: str = "linear", exponent: float = 2.0,
             positions: str = "corrupted", valid: Bool[Array, "B L"] | None = None,
             x0: Int[Array, "B L"] | None = None) -> Float[Array, ""]:
    """Discrete flow-matching loss ``E_t [ -sum_i log p_theta(x1^i | x_t, t) ] / n``.

    ``t ~ U(0, 1)`` per sequence; ``x0`` from ``source`` (``"mask"``: all ``mask_token``,
    default ``vocab_size``; ``"uniform"``: uniform tokens) unless given;
    ``x_t`` from :func:`mixture_path`. ``logits_fn(params, t, x_t) -> (B, L, V)`` logits
    over the ``V = vocab_size`` real tokens. ``positions="corrupted"`` (default) averages
    over positions whose token came from ``x0`` (for the mask source exactly the masked
    positions; the posterior elsewhere is known), ``"all"`` over every position (the
    loss of Gat et al. 2024). ``valid``: optional padding mask (``False`` positions are
    ignored).

    Differentiable: yes, in params (as logits_fn is).

    Args:
        logits_fn: ``logits_fn(params, t, x_t) -> (B, L, V)``, ``t`` of shape ``(B,)``.
        params: the model's parameters (any pytree).
        key: PRNG key (``t``, the source, the path).
        x1: target tokens ``(B, L)`` in ``[0, V)``.
        vocab_size: ``V`` (static).
        source: ``"mask"`` or ``"uniform"`` (static).
        mask_token: the mask token (default ``vocab_size``).
        scheduler: ``"linear"`` or ``"polynomial"`` (static).
        exponent: the polynomial's exponent.
        positions: ``"corrupted"`` or ``"all"`` (static).
        valid: optional padding mask, broadcastable to ``(B, L)``.
        x0: optional source tokens ``(B, L)``, overriding ``source``.

    Returns:
        The scalar mean cross-entropy over the counted positions.
    """
    _check_tokens(x1, "x1")
    if source not in ("mask", "uniform"):
        raise ValueError(f"`source` must be 'mask' or 'uniform'; got {source!r}")
    if positions not in ("corrupted", "all"):
        raise ValueError(f"`positions` must be 'corrupted' or 'all'; got {positions!r}")
    valid = _check_valid(valid, x1.shape)
    msg = f"`x1` tokens must lie in [0, vocab_size={vocab_size})"
    if is_traced(x1):
        x1 = eqx.error_if(x1, jnp.any((x1 < 0) | (x1 >= vocab_size)), msg)
    else:
        lo, hi = int(np.min(np.asarray(x1))), int(np.max(np.asarray(x1)))
        if lo < 0 or hi >= vocab_size:
            raise ValueError(f"{msg}; got range [{lo}, {hi}]")
    kt, ks, kp = jax.random.split(key, 3)
    b = x1.shape[0]
    if x0 is None:
        if source == "mask":
            x0 = mask_source(x1.shape, vocab_size if mask_token is None else mask_token)
        else:
            x0 = uniform_source(ks, x1.shape, vocab_size)
    _check_tokens(x0, "x0")
    t = jax.random.uniform(kt, (b,))
    xt, from_x1 = mixture_path(kp, x0, x1, t, scheduler=scheduler, exponent=exponent)
    logits = logits_fn(params, t, xt)
    if logits.shape != x1.shape + (vocab_size,):
        raise ValueError(f"`logits_fn` must return shape {x1.shape + (vocab_size,)}; "
                         f"got {logits.shape}")
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    ce = -jnp.take_along_axis(logp, x1[..., None], axis=-1)[..., 0]
    w = jnp.ones(x1.shape, jnp.float32) if positions == "all" else (~from_x1).astype(
        jnp.float32)
    if valid is not None:
        w = w * valid.astype(jnp.float32)
    return jnp.sum(ce * w) / jnp.maximum(jnp.sum(w), 1.0)


def ctmc_euler_sample(key: PRNGKeyArray, logits_fn: Callable, x0: Int[Array, "B L"], *,
                      steps: int, scheduler: str = "linear", exponent: float = 2.0,
                      t0: float = 0.0, t1: float = 1.0, temperature: float = 1.0,
                      mask_token: int | None = None,
                      valid: Bool[Array, "B L"] | None = None) -> Int[Array, "B L"]:
    """CTMC Euler sampler for the mixture path (Gat et al. 2024, Alg. 1).

    At each of ``steps`` equal steps of size ``h`` from ``t0`` to ``t1``: draw
    ``x1_hat ~ softmax(logits_fn(t, x) / temperature)`` per position and move each
    position to ``x1_hat`` with probability ``min(1, h kappa'(t) / (1 - kappa(t)))`` (the
    Euler step of the rate ``kappa'/(1 - kappa) [p(y | x_t) - delta(y, x_t)]``); when ``t1 >= 1``
    the last step jumps with probability 1 (``kappa(1) = 1``), so the result is a sample
    of the predicted ``x1``.
    ``mask_token``: if given, only positions currently equal to it may change
    (unmasking sampler for the mask source). ``valid``: padding positions never change.
    ``logits_fn(t, x) -> (B, L, V)`` with scalar ``t``. One ``lax.scan``; jit/vmap-able.

    Differentiable: no: integer tokens.

    Args:
        key: PRNG key.
        logits_fn: ``logits_fn(t, x) -> (B, L, V)``, ``t`` a scalar.
        x0: initial tokens ``(B, L)`` (e.g. :func:`mask_source`).
        steps: number of Euler steps (static).
        scheduler: ``"linear"`` or ``"polynomial"`` (static).
        exponent: the polynomial's exponent.
        t0: initial time.
        t1: final time.
        temperature: softmax temperature of the posterior draws.
        mask_token: if given (static), only positions equal to it may change.
        valid: optional padding mask, broadcastable to ``(B, L)``.

    Returns:
        The tokens at ``t1``, ``(B, L)``.
    """
    _check_tokens(x0, "x0")
    _check_scheduler(scheduler, exponent)
    check_in_range(steps, "steps", lo=1, integer=True)
    check_in_range(temperature, "temperature", lo=0, lo_open=True)
    check_in_range(t0, "t0")
    check_in_range(t1, "t1")
    if not (is_traced(t0) or is_traced(t1)) and not float(t0) < float(t1):
        raise ValueError(f"`t0` must be < `t1`; got t0={t0}, t1={t1}")
    valid = _check_valid(valid, x0.shape)
    steps = int(steps)
    h = (t1 - t0) / steps
    out = jax.eval_shape(logits_fn, jax.ShapeDtypeStruct((), jnp.float32), x0)
    if out.shape[:-1] != x0.shape:
        raise ValueError(f"`logits_fn(t, x)` must return shape {x0.shape + ('V',)}; "
                         f"got {out.shape}")

    def body(x, inp):
        i, k = inp
        t = t0 + i.astype(jnp.float32) * h
        logits = logits_fn(t, x).astype(jnp.float32) / temperature
        ks, kj = jax.random.split(k)
        x1_hat = jax.random.categorical(ks, logits, axis=-1).astype(x.dtype)
        rate = kappa_dot(t, scheduler=scheduler, exponent=exponent) / jnp.maximum(
            1.0 - kappa(t, scheduler=scheduler, exponent=exponent), 1e-12)
        final = (i == steps - 1) & (jnp.asarray(t1) >= 1.0)
        p = jnp.where(final, 1.0, jnp.clip(h * rate, 0.0, 1.0))
        jump = jax.random.uniform(kj, x.shape) < p
        if mask_token is not None:
            jump = jump & (x == mask_token)
        if valid is not None:
            jump = jump & valid
        return jnp.where(jump, x1_hat, x), None

    keys = jax.random.split(key, steps)
    x, _ = lax.scan(body, x0, (jnp.arange(steps), keys))
    return x
