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

from jaxtyping import Array, Float, Int

from ..checks import check_finite, is_traced
from .activations import sparsify
from .params import DEFAULT_BANDWIDTH, Activation, Params, check_activation, check_k, check_x


def encoder_product(params: Params, x: Array) -> Array:
    """``x W_enc + b_enc`` over the flattened ``(*site, d)`` (``x`` not checked).

    Args:
      params: the parameters.
      x: ``(*B, *site, d)``.

    Returns:
      The pre-activations ``(*B, F)`` in the parameters' dtype.
    """
    nu = params.W_enc.ndim - 1
    lead = x.shape[: x.ndim - nu]
    W = params.W_enc.reshape(-1, params.W_enc.shape[-1])
    return x.reshape(*lead, -1).astype(W.dtype) @ W + params.b_enc


def decoder_product(params: Params, z: Array) -> Array:
    """``z W_dec + b_dec`` reshaped to ``(*B, *site, d)`` (``z`` not checked).

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

    Args:
      params: the parameters (for ``n_latents``).
      activation: the activation name.
      k: TopK / BatchTopK ``k`` (``1 <= k <= n_latents``).
      theta: the ``"threshold"`` threshold (required for that activation).
    """
    check_activation(activation)
    if activation in ("topk", "batch_topk"):
        check_k(k, params.W_enc.shape[-1])
    if activation == "threshold" and theta is None:
        raise ValueError("`theta` is required for activation='threshold'")


def _pre_and_codes(params: Params, x, activation, k, theta, bandwidth):
    """The checked ``(pre, z)`` of :func:`encode` and :func:`forward`."""
    check_encode_args(params, activation, k, theta)
    x = check_x(params, x)
    pre = encoder_product(params, x)
    return pre, sparsify(pre, params.log_threshold, activation, k, theta, bandwidth)[0]


def pre_activation(params: Params, x: Float[Array, "... d"]) -> Float[Array, "*B F"]:
    """``einsum(x, W_enc) + b_enc`` summed over ``(*site, d)``.

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
) -> Float[Array, "*B F"]:
    """Latent codes ``z = sparsify(pre_activation(params, x))``.

    Args:
      params: the parameters.
      x: ``(*B, *site, d)``, finite.
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS`.
      k: kept latents for TopK / BatchTopK (``1 <= k <= n_latents``).
      theta: the threshold of ``activation="threshold"``.
      bandwidth: JumpReLU kernel width.

    Returns:
      The codes ``(*B, F)``.
    """
    return _pre_and_codes(params, x, activation, k, theta, bandwidth)[1]


def decode(params: Params, z: Float[Array, "*B F"]) -> Float[Array, "... d"]:
    """``x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec``.

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


def forward(params, x, *, activation="topk", k=None, theta=None, bandwidth=DEFAULT_BANDWIDTH):
    """``(pre, z, x_hat)`` in one pass (see :func:`encode` and :func:`decode`).

    Args:
      params, x, activation, k, theta, bandwidth: as in :func:`encode`.

    Returns:
      The pre-activations ``(*B, F)``, the codes ``(*B, F)`` and the reconstruction.
    """
    pre, z = _pre_and_codes(params, x, activation, k, theta, bandwidth)
    return pre, z, decoder_product(params, z)


def steer(
    params: Params, x: Float[Array, "B *site d"], latent: int | Int[Array, ""], alpha: float
) -> Float[Array, "B *site d"]:
    """Steering by a feature: ``x + alpha * W_dec[latent]`` (broadcast over the batch).

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
