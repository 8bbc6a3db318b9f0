"""Losses and penalties of crosscoder training, and the decoder constraints.

The training objective is ``FVU(x, x_hat) + sparsity_coef * penalty + aux_coef * AuxK``
with the penalty one of

* L1 weighted by the decoder norms ``mean_b sum_f z_f ||W_dec_f||`` (Bricken et al.
  2023; Lindsey et al. 2024 for crosscoders, norms jointly over the site);
* L0 through the JumpReLU straight-through estimator (Rajamanoharan et al. 2024);
* tanh ``mean_b sum_f tanh(c z_f ||W_dec_f||)`` (Anthropic, "Circuits updates", Feb.
  2024);

and AuxK the FVU of the residual reconstructed from the top ``k_aux`` dead latents (Gao et
al. 2024; ``aux_norm="gao"``) or sparsify's form, the squared error over the input's total
variance scaled by ``min(n_dead / k_aux, 1)`` (``aux_norm="sparsify"``; see
:func:`~jaxkit.kernels.crosscoder.params.check_aux_norm`). Atoms are kept at unit norm:
the gradient component parallel to each atom is removed before the update and the atoms
are renormalised after it (Gao et al. 2024).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .activations import Selector, scatter_last, step_ste
from .metrics import fvu_unchecked as fvu
from .model import apply_activation, decoder_product, encoder_product
from .params import (
    DEFAULT_BANDWIDTH,
    TINY,
    Activation,
    Params,
    atom_norms,
    check_aux_norm,
    check_k,
    flat_decoder,
)


def l1_penalty(z: Float[Array, "*B F"], W_dec: Float[Array, " F *unit"]) -> Float[Array, ""]:
    """Batch mean of ``sum_f z_f ||W_dec_f||`` (Bricken et al. 2023).

    Differentiable: yes, in z and W_dec.

    Args:
      z: codes ``(*B, F)``.
      W_dec: atoms ``(F, *unit)``.

    Returns:
      The penalty.
    """
    per_row = z.reshape(-1, z.shape[-1]) @ atom_norms(W_dec).astype(z.dtype)
    return jnp.mean(per_row)


def l0_penalty(
    pre: Float[Array, "*B F"],
    log_threshold: Float[Array, " F"],
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, ""]:
    """Batch mean of ``sum_f H(pre_f - theta_f)`` with the STE of
    :func:`~jaxkit.kernels.crosscoder.step_ste` (Rajamanoharan et al. 2024).

    Differentiable: no: a step, 0 almost everywhere; jax.grad returns the straight-through
    pseudo-gradient in log_threshold (Rajamanoharan et al. 2024), by design, not the derivative.

    Args:
      pre: pre-activations ``(*B, F)``.
      log_threshold: ``log(theta)`` per latent.
      bandwidth: the kernel width.

    Returns:
      The penalty.
    """
    s = step_ste(pre, log_threshold, bandwidth)
    return jnp.mean(jnp.sum(s.reshape(-1, s.shape[-1]), axis=-1))


def tanh_penalty(
    z: Float[Array, "*B F"], W_dec: Float[Array, " F *unit"], c: float = 4.0
) -> Float[Array, ""]:
    """Batch mean of ``sum_f tanh(c z_f ||W_dec_f||)`` (Anthropic, Feb. 2024 update).

    Differentiable: yes, in z and W_dec.

    Args:
      z: codes ``(*B, F)``.
      W_dec: atoms ``(F, *unit)``.
      c: the tanh scale.

    Returns:
      The penalty.
    """
    t = jnp.tanh(c * z.reshape(-1, z.shape[-1]) * atom_norms(W_dec).astype(z.dtype))
    return jnp.mean(jnp.sum(t, axis=-1))


def auxk_loss(
    pre: Float[Array, "B F"],
    residual: Float[Array, "B D"],
    W_dec_flat: Float[Array, "F D"],
    dead: Float[Array, " F"],
    k_aux: int,
    select: Selector | None = None,
    *,
    aux_norm: str = "gao",
    total_variance: Float[Array, ""] | None = None,
) -> Float[Array, ""]:
    """AuxK loss of Gao et al. 2024: reconstruct the residual ``x - x_hat`` (no ``b_dec``)
    from the top-``k_aux`` pre-activations among dead latents.

    Non-dead latents are masked with ``-inf`` so shapes stay static (a slot that falls
    on a live latent contributes 0: the same as taking ``min(k_aux, n_dead)`` latents);
    the residual is a constant (``stop_gradient``). Normalisation (``aux_norm``):

    * ``"gao"``: ``||e - e_hat||^2 / ||e - mean_B(e)||^2``, the residual's FVU
      (openai/sparse_autoencoder's ``normalized_mse``);
    * ``"sparsify"``: ``min(n_dead / k_aux, 1) ||e - e_hat||^2 / total_variance`` with
      ``total_variance = ||x - mean_B(x)||^2`` of the input (EleutherAI sparsify's
      ``SparseCoder.forward``; it takes ``k_aux = d // 2``).

    Differentiable: yes, in pre and W_dec_flat (residual is a constant by design, stop_gradient).

    Args:
      pre: pre-activations ``(B, F)``.
      residual: ``x - x_hat`` flattened, ``(B, D)``.
      W_dec_flat: atoms ``(F, D)``.
      dead: boolean ``(F,)`` mask of dead latents.
      k_aux: dead latents used per row, ``1 <= k_aux <= F``.
      select: optional :class:`~jaxkit.kernels.crosscoder.Selector`.
      aux_norm: ``"gao"`` or ``"sparsify"``.
      total_variance: the input's ``sum ||x - mean_B(x)||^2`` (needed by
        ``"sparsify"``).

    Returns:
      The normalised loss; 0 when no latent is dead.
    """
    k_aux = check_k(k_aux, pre.shape[-1], "k_aux")
    check_aux_norm(aux_norm)
    if aux_norm == "sparsify" and total_variance is None:
        raise ValueError("`total_variance` is required for aux_norm='sparsify'")
    masked = jnp.where(dead, pre, -jnp.inf)
    if select is not None:
        sel = select.topk_mask(masked, k_aux) & dead
        z_aux = jnp.where(sel, jnp.maximum(pre, 0), 0)
    else:
        vals, idx = jax.lax.top_k(masked, k_aux)
        vals = jnp.where(jnp.isfinite(vals), jnp.maximum(vals, 0), 0.0)
        z_aux = scatter_last(pre.shape, idx, vals, pre.dtype)
    e = jax.lax.stop_gradient(residual)
    e_hat = z_aux @ W_dec_flat
    return jnp.where(jnp.any(dead), aux_normalised(e, e_hat, dead, k_aux, aux_norm,
                                                   total_variance), 0.0)


def aux_normalised(e, e_hat, dead, k_aux: int, aux_norm: str, total_variance=None):
    """The AuxK reconstruction error of the residual ``e`` by ``e_hat`` under
    ``aux_norm`` (see :func:`auxk_loss`); ``e`` is treated as a constant.

    Differentiable: yes, in e and e_hat.

    Args:
      e: ``(B, D)`` residual of the main reconstruction.
      e_hat: ``(B, D)`` its reconstruction by the dead latents.
      dead: ``(F,)`` dead-latent mask (bool or 0/1).
      k_aux: number of auxiliary latents kept (a Python ``int``).
      aux_norm: the normalisation name (static), one of :data:`AUX_NORMS`.
      total_variance: the normaliser of the non-``"gao"`` norms (a scalar).

    Returns:
      The scalar error.
    """
    if aux_norm == "gao":
        return fvu(e, e_hat)
    n_dead = jnp.sum(dead.astype(e_hat.dtype))
    scale = jnp.minimum(n_dead / k_aux, 1.0)
    return scale * jnp.sum((e_hat - e) ** 2) / jnp.maximum(total_variance, TINY)


def remove_parallel_grad(W_dec: Float[Array, " F *unit"], g: Float[Array, " F *unit"]):
    """Remove from each atom's gradient its component parallel to the atom (jointly over
    ``(*site, d)``): ``g_f - <g_f, w_f> w_f / ||w_f||^2`` (Gao et al. 2024).

    Differentiable: yes, in W_dec and g.

    Args:
      W_dec: atoms ``(F, *unit)``.
      g: their gradient.

    Returns:
      The projected gradient, shape of ``g``.
    """
    W, G = flat_decoder(W_dec), flat_decoder(g)
    coef = jnp.sum(G * W, axis=-1, keepdims=True) / jnp.maximum(
        jnp.sum(W * W, axis=-1, keepdims=True), TINY)
    return (G - coef * W).reshape(g.shape)


def normalize_decoder(params: Params) -> Params:
    """Rescale every decoder atom to unit norm jointly over ``(*site, d)``.

    Differentiable: yes, in params.

    Args:
      params: the parameters.

    Returns:
      The parameters with unit-norm atoms.
    """
    W = flat_decoder(params.W_dec)
    W = W / jnp.maximum(jnp.linalg.norm(W, axis=-1, keepdims=True), TINY)
    return params._replace(W_dec=W.reshape(params.W_dec.shape))


def loss_fn(
    params: Params,
    x: Float[Array, "B *site d"],
    *,
    activation: Activation,
    k: int | None = None,
    theta=None,
    dead: Float[Array, " F"] | None = None,
    sparsity_coef: float = 0.0,
    sparsity: str = "l1",
    bandwidth: float = DEFAULT_BANDWIDTH,
    tanh_c: float = 4.0,
    k_aux: int | None = None,
    aux_coef: float = 1 / 32,
    select: Selector | None = None,
    aux_norm: str = "gao",
    apply_b_dec_to_input: bool = False,
):
    """The dense training loss ``FVU(x, x_hat) + sparsity_coef * penalty + aux_coef *
    AuxK`` (AuxK only when ``k_aux`` and ``dead`` are given).

    Differentiable: yes, in params and x (AuxK's residual is a constant by design, stop_gradient).

    Args:
      params: the parameters.
      x: ``(B, *site, d)`` (one batch axis).
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS`.
      k: TopK / BatchTopK ``k``.
      theta: the ``"threshold"`` threshold.
      dead: boolean ``(F,)`` mask of dead latents.
      sparsity_coef: penalty weight.
      sparsity: ``"l1"``, ``"l0"`` or ``"tanh"``.
      bandwidth: JumpReLU kernel width.
      tanh_c: the tanh penalty's scale.
      k_aux: AuxK latents per row.
      aux_coef: AuxK weight.
      select: optional :class:`~jaxkit.kernels.crosscoder.Selector`.
      aux_norm: AuxK normalisation, ``"gao"`` or ``"sparsify"`` (see :func:`auxk_loss`).
      apply_b_dec_to_input: encode ``x - b_dec`` (sparsify's convention; the gradient
        reaches ``b_dec`` through the encoder too).

    Returns:
      ``(loss, (fvu, aux, penalty, z, min_kept))``; ``min_kept`` is the BatchTopK
      threshold sample (``inf`` for other activations).
    """
    B = x.shape[0]
    pre = encoder_product(params, x, apply_b_dec_to_input)
    z, min_kept = apply_activation(pre, params.log_threshold, activation, k, theta, bandwidth,
                                   select)
    x_hat = decoder_product(params, z)
    xf = x.reshape(B, -1).astype(pre.dtype)
    rec = fvu(xf, x_hat.reshape(B, -1))
    if sparsity == "l1":
        pen = l1_penalty(z, params.W_dec)
    elif sparsity == "l0":
        pen = l0_penalty(pre, params.log_threshold, bandwidth)
    else:
        pen = tanh_penalty(z, params.W_dec, tanh_c)
    if k_aux is None or dead is None:
        aux = jnp.zeros((), pre.dtype)
    else:
        tv = jnp.sum((xf - jnp.mean(xf, axis=0)) ** 2)
        aux = aux_coef * auxk_loss(pre, xf - x_hat.reshape(B, -1), flat_decoder(params.W_dec),
                                   dead, k_aux, select, aux_norm=aux_norm, total_variance=tv)
    loss = rec + sparsity_coef * pen + aux
    if min_kept is None:
        min_kept = jnp.asarray(jnp.inf, pre.dtype)
    return loss, (rec, aux, pen, z, min_kept)
