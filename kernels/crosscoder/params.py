"""Crosscoder parameters, their initialisation, and the argument checks shared by the
other modules of :mod:`jaxkit.kernels.crosscoder`.

A dictionary over a site of shape ``site`` with ``d`` features per position and ``F``
latents has ``W_enc (*site, d, F)``, ``b_enc (F,)``, ``W_dec (F, *site, d)`` with every
atom ``W_dec[f]`` of unit norm jointly over ``(*site, d)``, ``b_dec (*site, d)`` and a
JumpReLU ``log_threshold (F,)``.

References:
  * Gao et al. 2024, "Scaling and evaluating sparse autoencoders" (tied initialisation:
    ``W_enc = W_dec^T``; ``b_dec`` at the geometric median of a data sample).
  * Weiszfeld 1937 (the geometric-median iteration).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ..checks import check_finite, check_in_range

Activation = Literal["relu", "topk", "batch_topk", "threshold", "jumprelu"]
ACTIVATIONS = ("relu", "topk", "batch_topk", "threshold", "jumprelu")
SPARSITIES = ("l1", "l0", "tanh")
DEFAULT_BANDWIDTH = 0.001
TINY = 1e-12  # floor of the norms and variances divided by


class Params(NamedTuple):
    """Crosscoder parameters.

    Attributes:
      W_enc: encoder ``(*site, d, F)``.
      b_enc: encoder bias ``(F,)``.
      W_dec: decoder atoms ``(F, *site, d)``, unit norm jointly over ``(*site, d)``.
      b_dec: decoder bias ``(*site, d)``.
      log_threshold: JumpReLU ``log(theta)`` ``(F,)``; used only by JumpReLU but always
        present, so the pytree structure does not depend on the activation.
    """

    W_enc: Float[Array, "*site d F"]
    b_enc: Float[Array, " F"]
    W_dec: Float[Array, "F *site d"]
    b_dec: Float[Array, "*site d"]
    log_threshold: Float[Array, " F"]


def check_activation(activation: str) -> None:
    """Raise ``ValueError`` unless ``activation`` is one of :data:`ACTIVATIONS`.

    Differentiable: no: validates a Python value.

    Args:
      activation: the activation name.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"`activation` must be one of {ACTIVATIONS}; got {activation!r}")


def check_k(k, n_latents: int | None = None, name: str = "k") -> int:
    """Validate a number of kept latents: a Python int with ``1 <= k <= n_latents``.

    Differentiable: no: validates a Python value.

    Args:
      k: the value to check.
      n_latents: the dictionary size (``None``: no upper bound checked yet).
      name: the argument name used in the error message.

    Returns:
      ``k`` as an ``int``.

    Raises:
      ValueError: ``k`` is missing, not an int, below 1 or above ``n_latents``.
    """
    if k is None:
        raise ValueError(f"`{name}` is required for this activation")
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ValueError(f"`{name}` must be a Python int; got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"`{name}` must be >= 1; got {k}")
    if n_latents is not None and k > n_latents:
        raise ValueError(f"`{name}` must be <= n_latents ({n_latents}); got {k}")
    return k


AUX_NORMS = ("gao", "sparsify")


def log_threshold_from(theta) -> Array:
    """JumpReLU's ``log_threshold`` for thresholds ``theta`` (e.g. a SAELens JumpReLU
    SAE's ``threshold``): ``log(theta)`` where ``theta > 0`` and ``-inf`` where ``theta
    <= 0``. jaxkit's threshold ``exp(log_threshold)`` is positive by construction
    (Rajamanoharan et al. 2024's parametrisation); a threshold ``<= 0`` gives the code
    ``relu(pre)``, which is what SAELens' ``relu(pre) * 1{pre > theta}`` gives for it.

    Differentiable: yes, in theta.

    Args:
      theta: thresholds, any real values.

    Returns:
      ``log_threshold``, shape of ``theta``.
    """
    t = jnp.asarray(theta)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        t = t.astype(jnp.float32)
    return jnp.where(t > 0, jnp.log(jnp.where(t > 0, t, 1)), -jnp.inf)


def check_batch_k(k, n_latents: int | None = None) -> int | float:
    """Validate BatchTopK's ``k``, the mean kept latents per row: an int as
    :func:`check_k`, or a finite float ``0 < k <= n_latents`` (SAELens' float ``k``).

    Differentiable: no: validates a Python value.

    Args:
      k: the value to check.
      n_latents: the dictionary size (``None``: no upper bound checked yet).

    Returns:
      ``k`` as an ``int`` or a ``float``.
    """
    if isinstance(k, float | np.floating) and not isinstance(k, bool):
        k = float(k)
        if not (math.isfinite(k) and k > 0):
            raise ValueError(f"`k` must be a finite number > 0; got {k}")
        if n_latents is not None and k > n_latents:
            raise ValueError(f"`k` must be <= n_latents ({n_latents}); got {k}")
        return k
    return check_k(k, n_latents)


def batch_count(k, rows: int, n_latents: int) -> int:
    """The number of entries BatchTopK keeps in a batch of ``rows`` rows:
    ``int(k * rows)`` (rounded down, as SAELens' ``BatchTopK`` does for a float ``k``; an
    int ``k`` gives exactly ``k * rows``), at least 1 and at most ``rows * n_latents``.

    Differentiable: no: a static Python int.

    Args:
      k: the mean kept latents per row (int or float, see :func:`check_batch_k`).
      rows: rows in the batch (static).
      n_latents: the dictionary size ``F``.

    Returns:
      The count ``n``.
    """
    k = check_batch_k(k, n_latents)
    n = k * rows if isinstance(k, int) else int(k * rows)
    if n < 1:
        raise ValueError(f"BatchTopK keeps int(k * rows) = int({k} * {rows}) = {n} entries; "
                         "`k` must give at least 1")
    return min(n, rows * n_latents)


def check_aux_norm(aux_norm: str) -> str:
    """Validate the AuxK normalisation name (one of :data:`AUX_NORMS`).

    ``"gao"`` (Gao et al. 2024, openai/sparse_autoencoder): the FVU of the residual,
    ``||e - e_hat||^2 / ||e - mean_B(e)||^2``. ``"sparsify"`` (EleutherAI sparsify,
    SAELens without its variance division): ``min(n_dead / k_aux, 1) ||e - e_hat||^2 /
    ||x - mean_B(x)||^2``, the squared error over the input's total variance, scaled down
    when fewer latents are dead than ``k_aux``.

    Differentiable: no: validates a Python value.
    """
    if aux_norm not in AUX_NORMS:
        raise ValueError(f"`aux_norm` must be one of {AUX_NORMS}; got {aux_norm!r}")
    return aux_norm


def check_x(params: Params, x, name: str = "x"):
    """Check that ``x`` is an array of shape ``(*batch, *site, d)`` (at least one batch
    axis) for ``params`` and holds no NaN/inf (a run-time check under ``jit``).

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
      params: the parameters giving ``(*site, d)``.
      x: the input.
      name: the argument name used in the error messages.

    Returns:
      ``x`` (with a run-time check attached when traced).
    """
    unit = params.W_enc.shape[:-1]
    if not hasattr(x, "ndim"):
        raise ValueError(f"`{name}` must be an array; got {type(x).__name__}")
    if x.ndim < len(unit) + 1 or tuple(x.shape[x.ndim - len(unit):]) != tuple(unit):
        raise ValueError(f"`{name}` must have shape (batch, *site, d) = "
                         f"(B, {', '.join(map(str, unit))}); got shape {tuple(x.shape)}")
    return check_finite(x, name)


def flat_decoder(W_dec: Float[Array, " F *unit"]) -> Float[Array, "F D"]:
    """The decoder flattened to ``(F, D)``, ``D = prod(site) * d``.

    Differentiable: yes, in W_dec.
    """
    return W_dec.reshape(W_dec.shape[0], -1)


def atom_norms(W_dec: Float[Array, " F *unit"]) -> Float[Array, " F"]:
    """``||W_dec[f]||`` jointly over ``(*site, d)``.

    Differentiable: yes, in W_dec.
    """
    return jnp.linalg.norm(flat_decoder(W_dec), axis=-1)


def geometric_median(
    x: Float[Array, " N *rest"], *, iters: int = 64, eps: float = 1e-8
) -> Float[Array, "*rest"]:
    """Geometric median ``argmin_m sum_i ||x_i - m||`` by Weiszfeld iterations.

    ``m <- sum_i w_i x_i / sum_i w_i`` with ``w_i = 1 / max(||x_i - m||, eps)`` (the
    epsilon guard keeps the update finite when ``m`` lands on a data point), started at
    the mean, for a fixed number of iterations (``lax.fori_loop``). Trailing axes of
    ``x`` are flattened jointly. Weiszfeld 1937; Gao et al. 2024 initialise ``b_dec``
    with it.

    Differentiable: yes, in x (through the fixed Weiszfeld iterations).

    Args:
      x: ``(N, *rest)`` points, ``N >= 1``, finite.
      iters: number of Weiszfeld iterations.
      eps: floor of the distances.

    Returns:
      The median, shape ``rest``.
    """
    x = jnp.asarray(x)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"`x` must have at least one row; got shape {x.shape}")
    x = check_finite(x, "x")
    flat = x.reshape(x.shape[0], -1)
    carry = (flat, jnp.mean(flat, axis=0), jnp.asarray(eps, flat.dtype))
    m = jax.lax.fori_loop(0, iters, _weiszfeld_step, carry)[1]
    return m.reshape(x.shape[1:])


def _weiszfeld_step(_, carry):
    """One Weiszfeld update; a module-level body with the data in the carry, so eager
    calls on equal shapes reuse one compiled loop (a closure over the data would be a
    new function, traced and compiled again, on every call)."""
    flat, m, eps = carry
    w = 1.0 / jnp.maximum(jnp.linalg.norm(flat - m, axis=-1), eps)
    return flat, (w @ flat) / jnp.sum(w), eps


def init(
    key: PRNGKeyArray,
    d: int,
    n_latents: int,
    *,
    site: Sequence[int] = (),
    sample: Float[Array, "N *site d"] | None = None,
    activation: Activation = "topk",
    init_threshold: float = 1e-3,
    dtype=jnp.float32,
) -> Params:
    """Initial parameters (Gao et al. 2024's tied initialisation).

    Random unit-norm decoder atoms ``W_dec (F, *site, d)``; ``W_enc`` is their transpose
    (the same numbers); ``b_enc = 0``; ``b_dec`` is the geometric median of ``sample`` or
    0; ``log_threshold = log(init_threshold)``.

    Differentiable: yes, in sample (b_dec, its geometric median in float32; the key fixes the rest).

    Args:
      key: PRNG key of the atoms.
      d: features per site position.
      n_latents: dictionary size ``F``.
      site: the site shape (``()``: an SAE; ``(T,)``: a temporal crosscoder ...).
      sample: optional ``(N, *site, d)`` data sample for ``b_dec``.
      activation: the activation the parameters are for (checked).
      init_threshold: the initial JumpReLU threshold (> 0).
      dtype: parameter dtype.

    Returns:
      The :class:`Params`.
    """
    check_activation(activation)
    site = tuple(int(s) for s in site)
    if int(d) < 1 or any(s < 1 for s in site):
        raise ValueError(f"`d` and `site` must be positive; got d={d}, site={site}")
    if int(n_latents) < 1:
        raise ValueError(f"`n_latents` must be >= 1; got {n_latents}")
    check_in_range(init_threshold, "init_threshold", lo=0, lo_open=True)
    unit = (*site, int(d))
    D = math.prod(unit)
    W = jax.random.normal(key, (n_latents, D), dtype=jnp.float32)
    W = W / jnp.linalg.norm(W, axis=-1, keepdims=True)
    W_dec = W.reshape(n_latents, *unit).astype(dtype)
    W_enc = W.T.reshape(*unit, n_latents).astype(dtype)
    if sample is None:
        b_dec = jnp.zeros(unit, dtype)
    else:
        sample = jnp.asarray(sample)
        if sample.ndim != len(unit) + 1 or tuple(sample.shape[1:]) != unit:
            raise ValueError(f"`sample` must have shape (N, {', '.join(map(str, unit))}); "
                             f"got {tuple(sample.shape)}")
        b_dec = geometric_median(sample.astype(jnp.float32)).astype(dtype)
    return Params(
        W_enc=W_enc,
        b_enc=jnp.zeros((n_latents,), dtype),
        W_dec=W_dec,
        b_dec=b_dec,
        log_threshold=jnp.full((n_latents,), math.log(init_threshold), dtype),
    )
