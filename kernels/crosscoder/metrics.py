"""Metrics of a crosscoder: reconstruction (FVU, explained variance, cosine), sparsity
(L0, dead latents) and dictionary recovery against ground-truth atoms (MMCS, the
Hungarian-matched MCC, recovery rates and their AUC).

References:
  * Gao et al. 2024, "Scaling and evaluating sparse autoencoders" (FVU: the normalised
    MSE; dead latents).
  * Sharkey et al. 2022, "Taking features out of superposition with sparse
    autoencoders" (mean max cosine similarity to the true features).
  * Kuhn 1955 (the Hungarian algorithm; ``optax.assignment.hungarian_algorithm``).

The Hungarian matching runs a ``while_loop``: called eagerly it is dispatched op by op,
so wrap the metrics in ``jax.jit`` when calling them repeatedly.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int

from ..checks import check_finite
from .params import TINY


def _rows(x: Array) -> Array:
    """Flatten to ``(rows, features)``: every axis but the first is a feature axis."""
    return x.reshape(x.shape[0], -1)


def fvu(x: Float[Array, " B *unit"], x_hat: Float[Array, " B *unit"]) -> Float[Array, ""]:
    """Fraction of variance unexplained (Gao et al. 2024's normalised MSE):
    ``sum ||x - x_hat||^2 / sum ||x - mean_B(x)||^2`` (the batch is the leading axis).

    Differentiable: yes, in x and x_hat.

    Args:
      x: the inputs ``(B, *unit)``.
      x_hat: the reconstructions, same shape.

    Both arrays are first divided by the power of two nearest their largest magnitude
    (exact in floating point, and the ratio is scale-free), so activations near the
    float32 range (1e30) or below its square root (1e-25) neither overflow nor underflow
    in the squares.

    Returns:
      The scalar FVU (the scaled denominator floored at 1e-12).
    """
    x = check_finite(jnp.asarray(x), "x")
    x_hat = check_finite(jnp.asarray(x_hat), "x_hat")
    big = jnp.maximum(jnp.max(jnp.abs(x), initial=0.0), jnp.max(jnp.abs(x_hat), initial=0.0))
    scale = jnp.where(big > 0, jnp.exp2(jnp.round(jnp.log2(jnp.where(big > 0, big, 1.0)))),
                      1.0).astype(x.dtype)
    return fvu_unchecked(x / scale, x_hat / scale)


def fvu_unchecked(x: Float[Array, " B *unit"], x_hat: Float[Array, " B *unit"]
                  ) -> Float[Array, ""]:
    """:func:`fvu` without the finiteness checks, for training losses: there a non-finite
    value is reported by the step's ``finite`` flag (:mod:`jaxkit.kernels.train`), and a
    run-time check in the step would stop the loop instead.

    Differentiable: yes, in x and x_hat.

    Args:
      x: ``(B, *unit)`` inputs.
      x_hat: ``(B, *unit)`` reconstructions.

    Returns:
      The scalar FVU.
    """
    x, x_hat = _rows(x), _rows(x_hat)
    num = jnp.sum((x - x_hat) ** 2)
    den = jnp.sum((x - jnp.mean(x, axis=0)) ** 2)
    return num / jnp.maximum(den, TINY)


def explained_variance(x, x_hat) -> Float[Array, ""]:
    """``1 - fvu(x, x_hat)``.

    Differentiable: yes, in x and x_hat.

    Args:
      x: the inputs ``(B, *unit)``.
      x_hat: the reconstructions.

    Returns:
      The explained variance.
    """
    return 1.0 - fvu(x, x_hat)


def l0(z: Float[Array, "*B F"]) -> Float[Array, ""]:
    """Mean number of non-zero latents per row.

    Differentiable: no: a count of non-zero codes (piecewise constant).

    Args:
      z: the codes ``(*B, F)``.

    Returns:
      The mean L0 (float32).
    """
    return jnp.mean(jnp.sum((z != 0).astype(jnp.float32), axis=-1))


def dead_fraction(steps_since_fired: Int[Array, " F"], dead_steps: int) -> Float[Array, ""]:
    """Fraction of latents that have not fired for ``dead_steps`` steps or more.

    Differentiable: no: integer inputs.

    Args:
      steps_since_fired: per-latent counters.
      dead_steps: the dead-latent rule.

    Returns:
      The fraction in ``[0, 1]``.
    """
    return jnp.mean((steps_since_fired >= dead_steps).astype(jnp.float32))


def reconstruction_cosine(x, x_hat) -> Float[Array, ""]:
    """Mean over the batch of ``cos(x_b, x_hat_b)`` (each example flattened).

    Differentiable: yes, in x and x_hat.

    Args:
      x: the inputs ``(B, *unit)``.
      x_hat: the reconstructions.

    Returns:
      The mean cosine.
    """
    x, x_hat = _rows(x), _rows(x_hat)
    num = jnp.sum(x * x_hat, axis=-1)
    den = jnp.linalg.norm(x, axis=-1) * jnp.linalg.norm(x_hat, axis=-1)
    return jnp.mean(num / jnp.maximum(den, TINY))


def _unit_rows(w: Array) -> Array:
    w = _rows(w)
    return w / jnp.maximum(jnp.linalg.norm(w, axis=-1, keepdims=True), TINY)


def _check_dicts(W_dec, true):
    if W_dec.ndim < 2 or true.ndim < 2 or math.prod(W_dec.shape[1:]) != math.prod(true.shape[1:]):
        raise ValueError(f"`W_dec` (F, *site, d) and `true` (G, *site, d) must have the same "
                         f"atom size; got {tuple(W_dec.shape)} and {tuple(true.shape)}")


def cosine_matrix(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]
) -> Float[Array, "G F"]:
    """Signed cosines ``C[g, f] = cos(true_g, W_dec_f)`` after flattening ``(*site, d)``.

    Differentiable: yes, in W_dec and true.

    Args:
      W_dec: learned atoms ``(F, *unit)``.
      true: ground-truth atoms ``(G, *unit)`` (same atom size).

    Returns:
      The ``(G, F)`` cosines.
    """
    _check_dicts(W_dec, true)
    W_dec, true = check_finite(W_dec, "W_dec"), check_finite(true, "true")
    return _unit_rows(true) @ _unit_rows(W_dec).T


def mmcs(W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]) -> Float[Array, ""]:
    """Mean max cosine similarity ``mean_g max_f |cos(true_g, W_dec_f)|`` (Sharkey et al.
    2022). The absolute value is used, so a sign-flipped atom counts as recovered.

    Differentiable: yes, in W_dec and true (almost everywhere: the maxima).

    Args:
      W_dec: learned atoms ``(F, *unit)``.
      true: ground-truth atoms ``(G, *unit)``.

    Returns:
      The MMCS in ``[0, 1]``.
    """
    return jnp.mean(jnp.max(jnp.abs(cosine_matrix(W_dec, true)), axis=-1))


def _matched(W_dec, true):
    C = jnp.abs(cosine_matrix(W_dec, true))
    i, j = optax.assignment.hungarian_algorithm(-C)
    return C, i, j


def mcc_hungarian(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]
) -> Float[Array, ""]:
    """Mean ``|cos|`` over the ``min(G, F)`` pairs of the one-to-one matching of true
    features to atoms that maximises the total ``|cos|`` (Hungarian algorithm, Kuhn 1955).

    Differentiable: yes, in W_dec and true (almost everywhere: the matching held fixed).

    Args:
      W_dec: learned atoms ``(F, *unit)``.
      true: ground-truth atoms ``(G, *unit)``.

    Returns:
      The matched mean ``|cos|``.
    """
    C, i, j = _matched(W_dec, true)
    return jnp.mean(C[i, j])


def _best_cos(W_dec, true, matched):
    if not matched:
        return jnp.max(jnp.abs(cosine_matrix(W_dec, true)), axis=-1)
    C, i, j = _matched(W_dec, true)
    return jnp.zeros(C.shape[0], C.dtype).at[i].set(C[i, j])


def recovery(
    W_dec: Float[Array, " F *unit"],
    true: Float[Array, " G *unit"],
    threshold: float = 0.9,
    *,
    matched: bool = False,
) -> Float[Array, ""]:
    """Fraction of true features recovered: whose max ``|cos|`` over atoms (or, with
    ``matched``, the ``|cos|`` of their Hungarian match; unmatched count as 0) is
    ``>= threshold``.

    Differentiable: no: a thresholded fraction (piecewise constant).

    Args:
      W_dec: learned atoms ``(F, *unit)``.
      true: ground-truth atoms ``(G, *unit)``.
      threshold: the cosine a recovered feature reaches.
      matched: use the one-to-one matching.

    Returns:
      The fraction in ``[0, 1]``.
    """
    return jnp.mean((_best_cos(W_dec, true, matched) >= threshold).astype(jnp.float32))


def recovery_auc(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"], n: int = 101, *,
    matched: bool = False,
) -> Float[Array, ""]:
    """Area under the recovered-fraction vs threshold curve on ``[0, 1]``: the trapezoid
    rule on ``n`` equally spaced thresholds (a cosine within 1e-6 of a threshold counts
    as reaching it, so exact copies reach 1); it tends to the mean best ``|cos|`` as
    ``n`` grows.

    Differentiable: no: thresholded fractions (piecewise constant).

    Args:
      W_dec: learned atoms ``(F, *unit)``.
      true: ground-truth atoms ``(G, *unit)``.
      n: number of thresholds (>= 2).
      matched: use the one-to-one matching.

    Returns:
      The AUC in ``[0, 1]``.
    """
    if int(n) < 2:
        raise ValueError(f"`n` must be >= 2; got {n}")
    best = _best_cos(W_dec, true, matched)
    ts = jnp.linspace(0.0, 1.0, int(n))
    frac = jnp.mean((best[None, :] >= ts[:, None] - 1e-6).astype(best.dtype), axis=-1)
    return jnp.trapezoid(frac, ts)
