"""Cross-layer transcoders (CLT): latents read at layer ``s`` write to every layer
``t >= s``.

With ``x (B, L, d_in)`` the inputs at ``L`` layers and ``y (B, L, d_out)`` the targets::

    z[b, s]     = sparsify(x[b, s] W_enc[s] + b_enc[s])         (per layer)
    y_hat[b, t] = sum_{s <= t} z[b, s] W_dec[s, :, t] + b_dec[t]

trained on ``FVU(y, y_hat) + sparsity_coef * mean_b sum_{s,f} z[b,s,f] ||W_dec[s, f]||``
(the decoder norm jointly over the unmasked targets). Reference: Ameisen et al. 2025,
"Circuit tracing: revealing computational graphs in language models".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ..checks import check_finite
from .activations import batch_topk, sparsify
from .metrics import fvu_unchecked as fvu
from .params import DEFAULT_BANDWIDTH, Activation, check_activation, check_k


class CLTParams(NamedTuple):
    """Cross-layer transcoder parameters; ``W_dec[s, :, t]`` for ``t < s`` is masked out
    in the forward pass.

    Attributes:
      W_enc: ``(L, d_in, F)`` per-layer encoders.
      b_enc: ``(L, F)``.
      W_dec: ``(L, F, L, d_out)``: source layer, latent, target layer, feature.
      b_dec: ``(L, d_out)``.
    """

    W_enc: Float[Array, "L d_in F"]
    b_enc: Float[Array, "L F"]
    W_dec: Float[Array, "L F L d_out"]
    b_dec: Float[Array, "L d_out"]


def clt_mask(n_layers: int) -> Float[Array, "L L"]:
    """``mask[s, t] = 1{t >= s}`` (source ``s`` writes to later-or-same targets only).

    Differentiable: no: a constant 0/1 mask of a static size.

    Args:
      n_layers: ``L``.

    Returns:
      The ``(L, L)`` float32 mask.
    """
    return jnp.triu(jnp.ones((n_layers, n_layers), jnp.float32))


def clt_init(
    key: PRNGKeyArray, n_layers: int, d_in: int, d_out: int, n_latents: int, *, dtype=jnp.float32
) -> CLTParams:
    """Gaussian encoder (std ``1/sqrt(d_in)``) and decoder (std
    ``1/sqrt(n_layers * n_latents)``, zero below the causal mask); zero biases.

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
      key: PRNG key.
      n_layers: ``L``.
      d_in: input features per layer.
      d_out: target features per layer.
      n_latents: latents per layer ``F``.
      dtype: parameter dtype.

    Returns:
      The :class:`CLTParams`.
    """
    if min(n_layers, d_in, d_out, n_latents) < 1:
        raise ValueError("`n_layers`, `d_in`, `d_out`, `n_latents` must be >= 1")
    k1, k2 = jax.random.split(key)
    W_enc = jax.random.normal(k1, (n_layers, d_in, n_latents)) / math.sqrt(d_in)
    W_dec = jax.random.normal(k2, (n_layers, n_latents, n_layers, d_out))
    W_dec = W_dec / math.sqrt(n_layers * n_latents) * clt_mask(n_layers)[:, None, :, None]
    return CLTParams(W_enc.astype(dtype), jnp.zeros((n_layers, n_latents), dtype),
                     W_dec.astype(dtype), jnp.zeros((n_layers, d_out), dtype))


def clt_forward(
    params: CLTParams,
    x: Float[Array, "B L d_in"],
    *,
    activation: Activation = "topk",
    k: int | None = None,
    theta=None,
) -> tuple[Float[Array, "B L F"], Float[Array, "B L d_out"]]:
    """The CLT map (module docstring); TopK per layer, BatchTopK over the batch per layer.

    Differentiable: yes, in params and x (almost everywhere: the activation).

    Args:
      params: the parameters.
      x: ``(B, L, d_in)``, finite.
      activation: any activation but ``"jumprelu"``.
      k: kept latents for TopK / BatchTopK (``1 <= k <= F``).
      theta: the ``"threshold"`` threshold.

    Returns:
      ``(z, y_hat)``: codes ``(B, L, F)`` and predictions ``(B, L, d_out)``.
    """
    L, d_in, F = params.W_enc.shape
    if not hasattr(x, "ndim") or x.ndim != 3 or x.shape[1:] != (L, d_in):
        raise ValueError(f"`x` must have shape (B, {L}, {d_in}); "
                         f"got {tuple(getattr(x, 'shape', ()))}")
    check_activation(activation)
    if activation == "jumprelu":
        raise ValueError("`activation`='jumprelu' is not supported by the CLT")
    if activation in ("topk", "batch_topk"):
        check_k(k, F)
    if activation == "threshold" and theta is None:
        raise ValueError("`theta` is required for activation='threshold'")
    x = check_finite(x, "x")
    pre = jnp.einsum("bld,ldf->blf", x, params.W_enc) + params.b_enc
    if activation == "batch_topk":  # top k * B per layer over the batch
        z = jax.vmap(lambda p: batch_topk(p, k)[0], in_axes=1, out_axes=1)(pre)
    else:
        z = sparsify(pre, None, activation, k, theta, DEFAULT_BANDWIDTH)[0]
    W = params.W_dec * clt_mask(L)[:, None, :, None].astype(params.W_dec.dtype)
    y_hat = jnp.einsum("bsf,sftd->btd", z, W) + params.b_dec
    return z, y_hat


def clt_loss(
    params: CLTParams,
    x: Float[Array, "B L d_in"],
    y: Float[Array, "B L d_out"],
    *,
    activation: Activation = "topk",
    k: int | None = None,
    theta=None,
    sparsity_coef: float = 0.0,
) -> Float[Array, ""]:
    """``FVU(y, y_hat) + sparsity_coef * mean_b sum_{s,f} z[b,s,f] ||W_dec[s, f]||``.

    Differentiable: yes, in params, x and y (almost everywhere: the activation).

    Args:
      params: the parameters.
      x: ``(B, L, d_in)`` inputs.
      y: ``(B, L, d_out)`` targets.
      activation: see :func:`clt_forward`.
      k: see :func:`clt_forward`.
      theta: see :func:`clt_forward`.
      sparsity_coef: penalty weight.

    Returns:
      The scalar loss.
    """
    if not hasattr(y, "shape") or y.shape != (x.shape[0], *params.b_dec.shape):
        raise ValueError(f"`y` must have shape (B, {', '.join(map(str, params.b_dec.shape))});"
                         f" got {tuple(getattr(y, 'shape', ()))}")
    z, y_hat = clt_forward(params, x, activation=activation, k=k, theta=theta)
    L = params.W_enc.shape[0]
    W = params.W_dec * clt_mask(L)[:, None, :, None].astype(params.W_dec.dtype)
    norms = jnp.sqrt(jnp.sum(W**2, axis=(2, 3)))  # (L, F)
    pen = jnp.mean(jnp.sum(z * norms, axis=(1, 2)))
    return fvu(y, y_hat) + sparsity_coef * pen
