"""The crosscoder map: encode, decode, forward, steer.

Inputs ``x`` have shape ``(B, *site, d)``. With ``W_enc (*site, d, F)`` and
``W_dec (F, *site, d)``::

    pre   = einsum(x, W_enc) + b_enc            (sum over site and d)
    z     = sparsify(pre)                       (ReLU, TopK, BatchTopK, JumpReLU, ...)
    x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec

Internally the site is flattened: ``x`` becomes ``(B, S*d)``, the weights ``(S*d, F)``
and ``(F, S*d)``. References: Bricken et al. 2023 (SAEs); Lindsey et al. 2024, "Sparse
crosscoders for cross-layer features and model diffing" (crosscoders); Templeton et al.
2024, "Scaling monosemanticity" (steering by adding a decoder atom).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..checks import check_finite, is_traced
from .activations import Selector, relu, sparsify
from .params import (
    DEFAULT_BANDWIDTH,
    Activation,
    Params,
    batch_count,
    check_activation,
    check_batch_k,
    check_k,
    check_x,
)


def encoder_input(params: Params, x: Array, apply_b_dec_to_input: bool = False) -> Array:
    """``x`` flattened to ``(*B, S*d)`` in the parameters' dtype, minus ``b_dec`` when
    ``apply_b_dec_to_input`` (sparsify's and SAELens' ``apply_b_dec_to_input``
    convention: ``pre = (x - b_dec) W_enc + b_enc``; the same pre-activations as
    jaxkit's default with ``b_enc`` replaced by ``b_enc - b_dec W_enc``).

    Differentiable: yes, in params and x.

    Args:
      params: the crosscoder parameters.
      x: ``(*B, *site, d)`` inputs.
      apply_b_dec_to_input: subtract ``b_dec`` first (a Python bool).

    Returns:
      ``(*B, S*d)`` flattened inputs in ``W_enc``'s dtype.
    """
    nu = params.W_enc.ndim - 1
    lead = x.shape[: x.ndim - nu]
    xf = x.reshape(*lead, -1).astype(params.W_enc.dtype)
    if apply_b_dec_to_input:
        xf = xf - params.b_dec.reshape(-1).astype(xf.dtype)
    return xf


def encoder_product(params: Params, x: Array, apply_b_dec_to_input: bool = False) -> Array:
    """``x W_enc + b_enc`` over the flattened ``(*site, d)`` (``x`` not checked); with
    ``apply_b_dec_to_input``, ``(x - b_dec) W_enc + b_enc`` (see :func:`encoder_input`).

    Differentiable: yes, in params and x.

    Args:
      params: the parameters.
      x: ``(*B, *site, d)``.
      apply_b_dec_to_input: subtract ``b_dec`` from ``x`` first.

    Returns:
      The pre-activations ``(*B, F)`` in the parameters' dtype.
    """
    W = params.W_enc.reshape(-1, params.W_enc.shape[-1])
    return encoder_input(params, x, apply_b_dec_to_input) @ W + params.b_enc


def _batch_topk_count(pre, n: int, select: Selector | None):
    """``relu`` of the ``n`` largest entries of the whole batch, and the smallest kept
    positive value (``inf`` if none)."""
    if select is not None:
        t, min_kept = select.batch_threshold(pre, n)
        return jnp.where(pre >= t, relu(pre), 0), min_kept
    flat = pre.reshape(-1)
    vals, idx = jax.lax.top_k(flat, n)
    z = jnp.zeros_like(flat).at[idx].set(relu(vals)).reshape(pre.shape)
    min_kept = jnp.min(jnp.where(vals > 0, jax.lax.stop_gradient(vals), jnp.inf))
    return z, min_kept


def apply_activation(pre, log_threshold, activation, k, theta, bandwidth, select=None):
    """:func:`~jaxkit.kernels.crosscoder.activations.sparsify` with the peers'
    conventions at this boundary (arguments already checked):

    * BatchTopK with a float ``k`` keeps ``int(k * B)`` entries of the batch (SAELens'
      float ``k``; :func:`~jaxkit.kernels.crosscoder.params.batch_count`);
    * the inference ``"threshold"`` activation with a negative ``theta`` keeps every
      positive pre-activation and no negative one: codes are never negative, as SAELens'
      JumpReLU ``relu(pre) * 1{pre > theta}`` (``theta`` is clamped at 0). JumpReLU's
      trained threshold ``exp(log_threshold)`` is always positive; a threshold ``<= 0``
      loaded from elsewhere is ``log_threshold = -inf``
      (:func:`~jaxkit.kernels.crosscoder.params.log_threshold_from`), the same ``relu``.

    Differentiable: yes, in pre (almost everywhere; straight-through pseudo-gradient in JumpReLU's
    log_threshold, by design).

    Args:
      pre: pre-activations ``(*B, F)``.
      log_threshold: JumpReLU ``log(theta)`` ``(F,)`` (used by ``"jumprelu"`` only).
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS` (static).
      k: TopK / BatchTopK ``k`` (static; a float for BatchTopK is a mean per row).
      theta: the ``"threshold"`` activation's threshold (scalar or ``(F,)``).
      bandwidth: JumpReLU straight-through kernel width (a Python float).
      select: optional :class:`~jaxkit.kernels.crosscoder.sparse.Selector` replacing the
        top-k selections.

    Returns:
      ``(z, min_kept)`` as ``sparsify``.
    """
    if activation == "batch_topk" and isinstance(k, float):
        rows = pre.size // pre.shape[-1]
        return _batch_topk_count(pre, batch_count(k, rows, pre.shape[-1]), select)
    if activation == "threshold":
        theta = jnp.maximum(jnp.asarray(theta, pre.dtype), 0)
    return sparsify(pre, log_threshold, activation, k, theta, bandwidth, select)


def decoder_product(params: Params, z: Array) -> Array:
    """``z W_dec + b_dec`` reshaped to ``(*B, *site, d)`` (``z`` not checked).

    Differentiable: yes, in params and z.

    Args:
      params: the parameters.
      z: the codes ``(*B, F)``.

    Returns:
      The reconstruction.
    """
    unit = params.W_dec.shape[1:]
    out = z @ params.W_dec.reshape(params.W_dec.shape[0], -1) + params.b_dec.reshape(-1)
    return out.reshape(*z.shape[:-1], *unit)


def check_encode_args(params: Params, activation: str, k, theta) -> None:
    """Validate the activation arguments of :func:`encode` / :func:`forward`.

    Differentiable: no: validates Python values (returns None).

    Args:
      params: the parameters (for ``n_latents``).
      activation: the activation name.
      k: TopK ``k`` (``1 <= k <= n_latents``); BatchTopK's also a float ``0 < k <=
        n_latents`` (``int(k * B)`` kept).
      theta: the ``"threshold"`` threshold (required for that activation).
    """
    check_activation(activation)
    if activation == "topk":
        check_k(k, params.W_enc.shape[-1])
    elif activation == "batch_topk":
        check_batch_k(k, params.W_enc.shape[-1])
    if activation == "threshold" and theta is None:
        raise ValueError("`theta` is required for activation='threshold'")


def _pre_and_codes(params: Params, x, activation, k, theta, bandwidth, apply_b_dec_to_input):
    """The checked ``(pre, z)`` of :func:`encode` and :func:`forward`."""
    check_encode_args(params, activation, k, theta)
    if activation == "batch_topk":
        k = check_batch_k(k)
    x = check_x(params, x)
    pre = encoder_product(params, x, apply_b_dec_to_input)
    return pre, apply_activation(pre, params.log_threshold, activation, k, theta, bandwidth)[0]


def pre_activation(params: Params, x: Float[Array, "... d"]) -> Float[Array, "*B F"]:
    """``einsum(x, W_enc) + b_enc`` summed over ``(*site, d)``.

    Differentiable: yes, in params and x.

    Args:
      params: the parameters.
      x: ``(*B, *site, d)``, finite.

    Returns:
      The pre-activations ``(*B, F)``.
    """
    return encoder_product(params, check_x(params, x))


def encode(
    params: Params,
    x: Float[Array, "... d"],
    *,
    activation: Activation = "topk",
    k: int | None = None,
    theta: float | Float[Array, "*#F"] | None = None,
    bandwidth: float = DEFAULT_BANDWIDTH,
    apply_b_dec_to_input: bool = False,
) -> Float[Array, "*B F"]:
    """Latent codes ``z = sparsify(pre_activation(params, x))`` (see
    :func:`apply_activation` for the float BatchTopK ``k`` and negative thresholds).

    Differentiable: yes, in params and x (almost everywhere; straight-through pseudo-gradient in
    JumpReLU's log_threshold, by design).

    Args:
      params: the parameters.
      x: ``(*B, *site, d)``, finite.
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS`.
      k: kept latents for TopK (``1 <= k <= n_latents``, ``k = n_latents`` keeps every
        positive entry); BatchTopK's mean kept latents per row, an int or a float
        (``int(k * B)`` entries of the batch kept, SAELens' convention).
      theta: the threshold of ``activation="threshold"`` (a negative one acts as 0).
      bandwidth: JumpReLU kernel width.
      apply_b_dec_to_input: encode ``x - b_dec`` (sparsify's convention; SAELens'
        ``apply_b_dec_to_input=True``).

    Returns:
      The codes ``(*B, F)``.
    """
    return _pre_and_codes(params, x, activation, k, theta, bandwidth, apply_b_dec_to_input)[1]


def decode(params: Params, z: Float[Array, "*B F"]) -> Float[Array, "... d"]:
    """``x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec``.

    Differentiable: yes, in params and z.

    Args:
      params: the parameters.
      z: the codes ``(*B, F)``.

    Returns:
      The reconstruction ``(*B, *site, d)``.
    """
    F = params.W_dec.shape[0]
    if not hasattr(z, "ndim") or z.ndim < 1 or z.shape[-1] != F:
        raise ValueError(f"`z` must have shape (..., n_latents={F}); "
                         f"got {tuple(getattr(z, 'shape', ()))}")
    return decoder_product(params, check_finite(z, "z"))


def forward(params, x, *, activation="topk", k=None, theta=None, bandwidth=DEFAULT_BANDWIDTH,
            apply_b_dec_to_input=False):
    """``(pre, z, x_hat)`` in one pass (see :func:`encode` and :func:`decode`).

    Differentiable: yes, in params and x (almost everywhere; straight-through pseudo-gradient in
    JumpReLU's log_threshold, by design).

    Args:
      params, x, activation, k, theta, bandwidth, apply_b_dec_to_input: as in
        :func:`encode`.

    Returns:
      The pre-activations ``(*B, F)``, the codes ``(*B, F)`` and the reconstruction.
    """
    pre, z = _pre_and_codes(params, x, activation, k, theta, bandwidth, apply_b_dec_to_input)
    return pre, z, decoder_product(params, z)


def steer(
    params: Params, x: Float[Array, "B *site d"], latent: int | Int[Array, ""], alpha: float
) -> Float[Array, "B *site d"]:
    """Steering by a feature: ``x + alpha * W_dec[latent]`` (broadcast over the batch).

    Differentiable: yes, in params, x and alpha.

    Args:
      params: the parameters.
      x: ``(B, *site, d)``, finite.
      latent: the latent index in ``[0, F)`` (checked when concrete).
      alpha: the steering strength.

    Returns:
      The steered inputs.
    """
    x = check_x(params, x)
    F = params.W_dec.shape[0]
    if not is_traced(latent) and not 0 <= int(latent) < F:
        raise ValueError(f"`latent` must be in [0, {F}); got {latent}")
    return x + alpha * params.W_dec[latent].astype(x.dtype)
