"""Sparsifying activations of a crosscoder and their straight-through estimators.

With ``pre`` the encoder pre-activations ``(*B, F)``:

* ReLU ``max(pre, 0)`` (Bricken et al. 2023);
* TopK: keep the ``k`` largest entries of each row, then ReLU (Gao et al. 2024);
* BatchTopK: keep the ``k B`` largest entries of the whole batch, then ReLU, and at
  inference ``threshold(pre, theta)`` with ``theta`` the EMA of the smallest kept value
  (Bussmann et al. 2024);
* JumpReLU ``pre H(pre - theta)``, ``theta = exp(log_threshold)``, trained through the
  rectangle-kernel straight-through estimator; :func:`step_ste` is its Heaviside for the
  L0 penalty (Rajamanoharan et al. 2024, "Jumping ahead").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..checks import check_finite
from .params import DEFAULT_BANDWIDTH, check_k


def relu(pre: Float[Array, "*B F"]) -> Float[Array, "*B F"]:
    """``max(pre, 0)``.

    Differentiable: yes, in pre (almost everywhere).

    Args:
      pre: pre-activations.

    Returns:
      The rectified values.
    """
    return jnp.maximum(pre, 0)


def scatter_last(shape, idx: Array, vals: Array, dtype) -> Array:
    """Zeros of ``shape`` ``(rows, F)`` with ``vals[r, j]`` put at column ``idx[r, j]``.

    Differentiable: yes, in vals.

    Args:
      shape: ``(rows, F)``.
      idx: ``(rows, m)`` column indices.
      vals: ``(rows, m)`` values.
      dtype: the output dtype.

    Returns:
      The ``(rows, F)`` array.
    """
    rows = jnp.arange(shape[0])[:, None]
    return jnp.zeros(shape, dtype).at[rows, idx].set(vals)


def topk(pre: Float[Array, "*B F"], k: int) -> Float[Array, "*B F"]:
    """TopK activation: ``relu`` of the ``k`` largest entries of each row, 0 elsewhere
    (Gao et al. 2024). Ties are broken towards the lower latent index (``lax.top_k``);
    gradients flow to the kept entries only.

    Differentiable: yes, in pre (almost everywhere: the kept set is fixed).

    Args:
      pre: pre-activations ``(*B, F)``.
      k: entries kept per row, ``1 <= k <= F``.

    Returns:
      The sparse code, shape of ``pre``.
    """
    return _topk(check_finite(pre, "pre"), check_k(k, pre.shape[-1]))


def _topk(pre, k: int):
    """:func:`topk` on checked arguments."""
    flat = pre.reshape(-1, pre.shape[-1])
    vals, idx = jax.lax.top_k(flat, k)
    return scatter_last(flat.shape, idx, relu(vals), pre.dtype).reshape(pre.shape)


def batch_topk(pre: Float[Array, "*B F"], k: int) -> tuple[Float[Array, "*B F"], Float[Array, ""]]:
    """BatchTopK activation: ``relu`` of the ``k * rows`` largest entries of the whole
    batch (Bussmann et al. 2024).

    Differentiable: yes, in pre (z; min_kept carries no gradient).

    Args:
      pre: pre-activations ``(*B, F)``.
      k: mean entries kept per row, ``1 <= k <= F``.

    Returns:
      ``(z, min_kept)``: the code and the smallest kept positive value (``inf`` if none
      is positive), the sample of the inference-threshold EMA.
    """
    return _batch_topk(check_finite(pre, "pre"), check_k(k, pre.shape[-1]))


def _batch_topk(pre, k: int):
    """:func:`batch_topk` on checked arguments."""
    flat = pre.reshape(-1)
    n = min(k * (flat.shape[0] // pre.shape[-1]), flat.shape[0])
    vals, idx = jax.lax.top_k(flat, n)
    kept = relu(vals)
    z = jnp.zeros_like(flat).at[idx].set(kept).reshape(pre.shape)
    min_kept = jnp.min(jnp.where(vals > 0, jax.lax.stop_gradient(vals), jnp.inf))
    return z, min_kept


class Selector(NamedTuple):
    """How the training step selects its top entries. The default (``None`` where a
    function takes ``select``) is ``lax.top_k`` on the whole array; a distributed trainer
    passes shard-local versions (e.g. local top-k on each ``model`` shard, then a merge of
    the candidates), so the training step itself exists once.

    Attributes:
      topk_mask: ``topk_mask(pre, k) -> bool (B, F)``, the ``k`` largest entries of each
        row.
      batch_threshold: ``batch_threshold(pre, n) -> (t, min_kept)``, the ``n``-th largest
        entry of the whole ``pre`` and the smallest positive entry among the top ``n``
        (``inf`` if none); BatchTopK keeps ``pre >= t`` (equal to :func:`batch_topk` up to
        exact ties).
    """

    topk_mask: Callable[[Array, int], Array]
    batch_threshold: Callable[[Array, int], tuple[Array, Array]]


def threshold(
    pre: Float[Array, "*B F"], theta: Float[Array, "*#F"] | float
) -> Float[Array, "*B F"]:
    """``pre * 1{pre > theta}``: the inference form of BatchTopK (Bussmann et al. 2024).

    Differentiable: yes, in pre (almost everywhere; piecewise constant in theta).

    Args:
      pre: pre-activations.
      theta: the threshold (``>= 0``; scalar or broadcastable to ``pre``).

    Returns:
      The sparse code.
    """
    return pre * (pre > theta).astype(pre.dtype)


def _rect(u: Array) -> Array:
    """Rectangle kernel ``K(u) = 1{|u| < 1/2}``."""
    return (jnp.abs(u) < 0.5).astype(u.dtype)


@jax.custom_vjp
def _jumprelu_core(pre: Array, theta: Array, eps: Array) -> Array:
    return pre * (pre > theta).astype(pre.dtype)


def _jumprelu_fwd(pre, theta, eps):
    return _jumprelu_core(pre, theta, eps), (pre, theta, eps)


def _jumprelu_bwd(res, g):
    pre, theta, eps = res
    d_pre = g * (pre > theta).astype(pre.dtype)
    d_theta = -g * (theta / eps) * _rect((pre - theta) / eps)
    return d_pre, d_theta, jnp.zeros_like(eps)


_jumprelu_core.defvjp(_jumprelu_fwd, _jumprelu_bwd)


@jax.custom_vjp
def _step_core(pre: Array, theta: Array, eps: Array) -> Array:
    return (pre > theta).astype(pre.dtype)


def _step_fwd(pre, theta, eps):
    return _step_core(pre, theta, eps), (pre, theta, eps)


def _step_bwd(res, g):
    pre, theta, eps = res
    d_theta = -g * (1.0 / eps) * _rect((pre - theta) / eps)
    return jnp.zeros_like(pre), d_theta, jnp.zeros_like(eps)


_step_core.defvjp(_step_fwd, _step_bwd)


def _theta_eps(pre, log_threshold, bandwidth):
    theta = jnp.broadcast_to(jnp.exp(log_threshold).astype(pre.dtype), pre.shape)
    eps = jnp.broadcast_to(jnp.asarray(bandwidth, pre.dtype), pre.shape)
    return theta, eps


def jumprelu(
    pre: Float[Array, "*B F"],
    log_threshold: Float[Array, " F"],
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, "*B F"]:
    """JumpReLU ``pre H(pre - theta)``, ``theta = exp(log_threshold)`` (Rajamanoharan et
    al. 2024), with the straight-through estimator
    ``d/dtheta = -(theta/eps) K((pre - theta)/eps)``, ``K(u) = 1{|u| < 1/2}``, ``eps =
    bandwidth``; ``pre`` gets the plain gradient ``H(pre - theta)``. The gradient with
    respect to ``log_threshold`` is that times ``theta`` (chain rule through ``exp``).

    Differentiable: yes, in pre (straight-through pseudo-gradient in JumpReLU's log_threshold, by
    design, not the derivative).

    Args:
      pre: pre-activations ``(*B, F)``.
      log_threshold: ``log(theta)`` per latent.
      bandwidth: the kernel width ``eps`` (> 0).

    Returns:
      The sparse code.
    """
    theta, eps = _theta_eps(pre, log_threshold, bandwidth)
    return _jumprelu_core(pre, theta, eps)


def step_ste(
    pre: Float[Array, "*B F"],
    log_threshold: Float[Array, " F"],
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, "*B F"]:
    """Heaviside ``H(pre - theta)`` with the straight-through estimator
    ``d/dtheta = -(1/eps) K((pre - theta)/eps)`` and zero gradient for ``pre``
    (Rajamanoharan et al. 2024).

    Differentiable: no: a step, 0 almost everywhere; jax.grad returns the straight-through
    pseudo-gradient in log_threshold (Rajamanoharan et al. 2024), by design, not the derivative.

    Args:
      pre: pre-activations ``(*B, F)``.
      log_threshold: ``log(theta)`` per latent.
      bandwidth: the kernel width ``eps`` (> 0).

    Returns:
      The 0/1 indicators, dtype of ``pre``.
    """
    theta, eps = _theta_eps(pre, log_threshold, bandwidth)
    return _step_core(pre, theta, eps)


def sparsify(pre, log_threshold, activation, k, theta, bandwidth, select=None):
    """Apply ``activation`` to ``pre`` (arguments already checked).

    Differentiable: yes, in pre (almost everywhere; straight-through pseudo-gradient in JumpReLU's
    log_threshold, by design).

    Args:
      pre: pre-activations ``(B, F)``.
      log_threshold: JumpReLU ``log(theta)`` (used by ``"jumprelu"`` only).
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS`.
      k: TopK / BatchTopK ``k``.
      theta: the ``"threshold"`` threshold.
      bandwidth: JumpReLU kernel width.
      select: optional :class:`Selector` replacing the top-k selections.

    Returns:
      ``(z, min_kept)``; ``min_kept`` is ``None`` except for BatchTopK.
    """
    if activation == "relu":
        return relu(pre), None
    if activation == "topk":
        if select is not None:
            return jnp.where(select.topk_mask(pre, k), relu(pre), 0), None
        return _topk(pre, k), None
    if activation == "batch_topk":
        if select is not None:
            t, min_kept = select.batch_threshold(pre, min(k * pre.shape[0], pre.size))
            return jnp.where(pre >= t, relu(pre), 0), min_kept
        return _batch_topk(pre, k)
    if activation == "threshold":
        return threshold(pre, theta), None
    return jumprelu(pre, log_threshold, bandwidth), None
