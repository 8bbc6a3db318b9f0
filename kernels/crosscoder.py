"""Sparse autoencoders and crosscoders: one dictionary, specialised by the site shape.

Inputs ``x`` have shape ``(B, *site, d)``: ``site = ()`` is a sparse autoencoder (SAE),
``(T,)`` a temporal crosscoder over T consecutive positions, ``(V,)`` an acausal
crosscoder over V layers/models, ``(V, T)`` both. With ``W_enc (*site, d, F)`` and
``W_dec (F, *site, d)``::

    pre   = einsum(x, W_enc) + b_enc            (sum over site and d)
    z     = sparsify(pre)                       (ReLU, TopK, BatchTopK, JumpReLU, ...)
    x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec

and every decoder atom ``W_dec[f]`` has unit norm jointly over ``(*site, d)``.
Internally the site is flattened: ``x`` becomes ``(B, S*d)``, the weights ``(S*d, F)``
and ``(F, S*d)``. A TopK training step is computed sparsely by default (one dense
encoder product; :func:`sparse_decode` and scatter-add gradients for the rest, as in
EleutherAI's sparsify), see :func:`make_train_step`.

References:
  * Bricken et al. 2023, "Towards monosemanticity" (ReLU SAE, L1 with decoder norms).
  * Gao et al. 2024, "Scaling and evaluating sparse autoencoders" (TopK, AuxK, FVU,
    decoder-parallel gradient removal, tied initialisation, geometric-median b_dec).
  * Bussmann et al. 2024, "BatchTopK sparse autoencoders" (batch TopK, inference
    threshold).
  * Rajamanoharan et al. 2024, "Jumping ahead: improving reconstruction fidelity with
    JumpReLU SAEs" (JumpReLU, straight-through rectangle-kernel estimator, L0 penalty).
  * Lindsey et al. 2024, "Sparse crosscoders for cross-layer features and model diffing"
    (acausal crosscoders); Ameisen et al. 2025 "Circuit tracing" (cross-layer
    transcoders).

Everything here is pure: it runs eagerly, under ``jit``, ``vmap`` and ``grad``, and under
``jit`` with the batch sharded over a ``data`` mesh axis and the latents over ``model``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .checks import check_finite, is_traced

__all__ = [
    "Selector",
    "Params",
    "TrainState",
    "Info",
    "CLTParams",
    "ACTIVATIONS",
    "init",
    "geometric_median",
    "relu",
    "topk",
    "batch_topk",
    "threshold",
    "jumprelu",
    "step_ste",
    "l1_penalty",
    "l0_penalty",
    "tanh_penalty",
    "pre_activation",
    "encode",
    "decode",
    "forward",
    "loss_fn",
    "auxk_loss",
    "remove_parallel_grad",
    "normalize_decoder",
    "make_train_step",
    "sparse_decode",
    "clt_init",
    "clt_forward",
    "clt_loss",
    "fvu",
    "explained_variance",
    "l0",
    "dead_fraction",
    "reconstruction_cosine",
    "cosine_matrix",
    "mmcs",
    "mcc_hungarian",
    "recovery",
    "recovery_auc",
    "steer",
]

Activation = Literal["relu", "topk", "batch_topk", "threshold", "jumprelu"]
ACTIVATIONS = ("relu", "topk", "batch_topk", "threshold", "jumprelu")
SPARSITIES = ("l1", "l0", "tanh")
DEFAULT_BANDWIDTH = 0.001
_TINY = 1e-12
# optax >= 0.2.5 renamed tree_l2_norm to tree_norm
_tree_norm = optax.tree.norm
# compiled once per shape; eager dispatch of its while loop is slow
_hungarian = jax.jit(optax.assignment.hungarian_algorithm)


class Params(NamedTuple):
    """Crosscoder parameters; ``log_threshold`` is used only by JumpReLU but always
    present so the pytree structure does not depend on the activation."""

    W_enc: Float[Array, "*site d F"]
    b_enc: Float[Array, " F"]
    W_dec: Float[Array, "F *site d"]
    b_dec: Float[Array, "*site d"]
    log_threshold: Float[Array, " F"]


class TrainState(NamedTuple):
    """State of :func:`make_train_step`. ``threshold`` is the EMA of the smallest kept
    BatchTopK activation (the inference threshold of Bussmann et al. 2024)."""

    params: Params
    opt_state: Any
    step: Int[Array, ""]
    steps_since_fired: Int[Array, " F"]
    threshold: Float[Array, ""]
    key: PRNGKeyArray


class Info(NamedTuple):
    loss: Float[Array, ""]
    fvu: Float[Array, ""]
    aux_loss: Float[Array, ""]
    sparsity: Float[Array, ""]
    l0: Float[Array, ""]
    dead_fraction: Float[Array, ""]
    grad_norm: Float[Array, ""]


# --------------------------------------------------------------------------- checks


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"`activation` must be one of {ACTIVATIONS}; got {activation!r}")


def _check_k(k, n_latents: int | None, name: str = "k") -> int:
    if k is None:
        raise ValueError(f"`{name}` is required for this activation")
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ValueError(f"`{name}` must be a Python int; got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"`{name}` must be >= 1; got {k}")
    if n_latents is not None and k >= n_latents:
        raise ValueError(f"`{name}` must be < n_latents ({n_latents}); got {k}")
    return k


def _check_x(params: Params, x, name: str = "x"):
    """Static shape check against the parameters (trailing dims must equal
    ``(*site, d)``, at least one batch dim) plus a NaN/inf check."""
    unit = params.W_enc.shape[:-1]
    if not hasattr(x, "ndim"):
        raise ValueError(f"`{name}` must be an array; got {type(x).__name__}")
    if x.ndim < len(unit) + 1 or tuple(x.shape[x.ndim - len(unit):]) != tuple(unit):
        raise ValueError(f"`{name}` must have shape (batch, *site, d) = "
                         f"(B, {', '.join(map(str, unit))}); got shape {tuple(x.shape)}")
    return check_finite(x, name)


def _flat_dec(W_dec: Array) -> Array:
    return W_dec.reshape(W_dec.shape[0], -1)


def _atom_norms(W_dec: Array) -> Array:
    return jnp.linalg.norm(_flat_dec(W_dec), axis=-1)


# --------------------------------------------------------------------------- init


def geometric_median(
    x: Float[Array, " N *rest"], *, iters: int = 64, eps: float = 1e-8
) -> Float[Array, "*rest"]:
    """Geometric median ``argmin_m sum_i ||x_i - m||`` by Weiszfeld iterations.

    ``m <- sum_i w_i x_i / sum_i w_i`` with ``w_i = 1 / max(||x_i - m||, eps)`` (the
    epsilon guard keeps the update finite when ``m`` lands on a data point), started at
    the mean, for a fixed number of iterations (``lax.fori_loop``). Trailing axes of
    ``x`` are flattened jointly. Weiszfeld 1937; Gao et al. 2024 initialise ``b_dec``
    with it.
    """
    x = jnp.asarray(x)
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"`x` must have at least one row; got shape {x.shape}")
    x = check_finite(x, "x")
    flat = x.reshape(x.shape[0], -1)

    def body(_, m):
        dist = jnp.linalg.norm(flat - m, axis=-1)
        w = 1.0 / jnp.maximum(dist, eps)
        return (w @ flat) / jnp.sum(w)

    m = jax.lax.fori_loop(0, iters, body, jnp.mean(flat, axis=0))
    return m.reshape(x.shape[1:])


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
    """Random unit-norm decoder atoms ``W_dec (F, *site, d)``; ``W_enc`` is their
    transpose (same numbers, Gao et al. 2024); ``b_enc = 0``; ``b_dec`` is the geometric
    median of ``sample`` (``(N, *site, d)``) or 0; ``log_threshold = log(init_threshold)``.
    """
    _check_activation(activation)
    site = tuple(int(s) for s in site)
    if int(d) < 1 or any(s < 1 for s in site):
        raise ValueError(f"`d` and `site` must be positive; got d={d}, site={site}")
    if int(n_latents) < 1:
        raise ValueError(f"`n_latents` must be >= 1; got {n_latents}")
    if not init_threshold > 0:
        raise ValueError(f"`init_threshold` must be > 0; got {init_threshold}")
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


# --------------------------------------------------------------------------- activations


def relu(pre: Float[Array, "*B F"]) -> Float[Array, "*B F"]:
    """``max(pre, 0)``."""
    return jnp.maximum(pre, 0)


def _scatter_last(shape, idx: Array, vals: Array, dtype) -> Array:
    """Zeros of ``shape`` (rows, F) with ``vals`` put at column ``idx`` of each row."""
    rows = jnp.arange(shape[0])[:, None]
    return jnp.zeros(shape, dtype).at[rows, idx].set(vals)


def topk(pre: Float[Array, "*B F"], k: int) -> Float[Array, "*B F"]:
    """Keep the ``k`` largest entries of each row, then ReLU (Gao et al. 2024).

    Ties are broken towards the lower latent index (``lax.top_k``). Gradients flow to
    the kept entries only."""
    k = _check_k(k, pre.shape[-1] + 1)
    flat = pre.reshape(-1, pre.shape[-1])
    vals, idx = jax.lax.top_k(flat, k)
    return _scatter_last(flat.shape, idx, relu(vals), pre.dtype).reshape(pre.shape)


def batch_topk(pre: Float[Array, "*B F"], k: int) -> tuple[Float[Array, "*B F"], Float[Array, ""]]:
    """Keep the ``k * B`` largest entries over the whole batch, then ReLU (Bussmann et
    al. 2024). Returns ``(z, min_kept)`` where ``min_kept`` is the smallest kept positive
    value (``inf`` if none is positive), the sample for the inference-threshold EMA."""
    k = _check_k(k, pre.shape[-1] + 1)
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

    * ``topk_mask(pre, k) -> bool (B, F)``: the ``k`` largest entries of each row.
    * ``batch_threshold(pre, n) -> (t, min_kept)``: the ``n``-th largest entry of the
      whole ``pre`` and the smallest positive entry among the top ``n`` (``inf`` if
      none); BatchTopK keeps ``pre >= t`` (equal to :func:`batch_topk` up to exact ties).
    """

    topk_mask: Callable[[Array, int], Array]
    batch_threshold: Callable[[Array, int], tuple[Array, Array]]


def threshold(
    pre: Float[Array, "*B F"], theta: Float[Array, "*#F"] | float
) -> Float[Array, "*B F"]:
    """``pre * (pre > theta)``: the inference form of BatchTopK (use ``theta >= 0``)."""
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
    """JumpReLU ``pre * H(pre - theta)``, ``theta = exp(log_threshold)`` (Rajamanoharan et
    al. 2024), with the straight-through estimator
    ``d/dtheta = -(theta/eps) K((pre - theta)/eps)``, ``K(u) = 1{|u| < 1/2}``, ``eps =
    bandwidth``; ``pre`` gets the plain gradient ``H(pre - theta)``. The gradient wrt
    ``log_threshold`` is that times ``theta`` (chain rule through ``exp``)."""
    theta, eps = _theta_eps(pre, log_threshold, bandwidth)
    return _jumprelu_core(pre, theta, eps)


def step_ste(
    pre: Float[Array, "*B F"],
    log_threshold: Float[Array, " F"],
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, "*B F"]:
    """Heaviside ``H(pre - theta)`` with the straight-through estimator
    ``d/dtheta = -(1/eps) K((pre - theta)/eps)`` and zero gradient for ``pre``
    (Rajamanoharan et al. 2024)."""
    theta, eps = _theta_eps(pre, log_threshold, bandwidth)
    return _step_core(pre, theta, eps)


# --------------------------------------------------------------------------- penalties


def l1_penalty(z: Float[Array, "*B F"], W_dec: Float[Array, " F *unit"]) -> Float[Array, ""]:
    """Batch mean of ``sum_f z_f ||W_dec_f||`` (ReLU SAE penalty, Bricken et al. 2023)."""
    per_row = z.reshape(-1, z.shape[-1]) @ _atom_norms(W_dec).astype(z.dtype)
    return jnp.mean(per_row)


def l0_penalty(
    pre: Float[Array, "*B F"],
    log_threshold: Float[Array, " F"],
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, ""]:
    """Batch mean of ``sum_f H(pre_f - theta_f)`` with the STE of :func:`step_ste`."""
    s = step_ste(pre, log_threshold, bandwidth)
    return jnp.mean(jnp.sum(s.reshape(-1, s.shape[-1]), axis=-1))


def tanh_penalty(
    z: Float[Array, "*B F"], W_dec: Float[Array, " F *unit"], c: float = 4.0
) -> Float[Array, ""]:
    """Batch mean of ``sum_f tanh(c z_f ||W_dec_f||)`` (Anthropic, Feb. 2024 update)."""
    t = jnp.tanh(c * z.reshape(-1, z.shape[-1]) * _atom_norms(W_dec).astype(z.dtype))
    return jnp.mean(jnp.sum(t, axis=-1))


# --------------------------------------------------------------------------- encode/decode


def pre_activation(params: Params, x: Float[Array, "... d"]) -> Float[Array, "*B F"]:
    """``einsum(x, W_enc) + b_enc`` summed over ``(*site, d)``."""
    x = _check_x(params, x)
    return _pre(params, x)


def _pre(params: Params, x: Array) -> Array:
    nu = params.W_enc.ndim - 1
    lead = x.shape[: x.ndim - nu]
    W = params.W_enc.reshape(-1, params.W_enc.shape[-1])
    pre = x.reshape(*lead, -1).astype(W.dtype) @ W + params.b_enc
    return pre


def _sparsify(pre, params, activation, k, theta, bandwidth, select=None):
    if activation == "relu":
        return relu(pre), None
    if activation == "topk":
        if select is not None:
            return jnp.where(select.topk_mask(pre, k), relu(pre), 0), None
        return topk(pre, k), None
    if activation == "batch_topk":
        if select is not None:
            t, min_kept = select.batch_threshold(pre, min(k * pre.shape[0], pre.size))
            return jnp.where(pre >= t, relu(pre), 0), min_kept
        return batch_topk(pre, k)
    if activation == "threshold":
        return threshold(pre, theta), None
    return jumprelu(pre, params.log_threshold, bandwidth), None


def _check_enc_args(params, activation, k, theta):
    _check_activation(activation)
    if activation in ("topk", "batch_topk"):
        _check_k(k, params.W_enc.shape[-1])
    if activation == "threshold" and theta is None:
        raise ValueError("`theta` is required for activation='threshold'")


def encode(
    params: Params,
    x: Float[Array, "... d"],
    *,
    activation: Activation = "topk",
    k: int | None = None,
    theta: float | Float[Array, "*#F"] | None = None,
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> Float[Array, "*B F"]:
    """Latent codes ``z = sparsify(pre_activation(params, x))``."""
    _check_enc_args(params, activation, k, theta)
    x = _check_x(params, x)
    return _sparsify(_pre(params, x), params, activation, k, theta, bandwidth)[0]


def decode(params: Params, z: Float[Array, "*B F"]) -> Float[Array, "... d"]:
    """``x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec``."""
    F = params.W_dec.shape[0]
    if not hasattr(z, "ndim") or z.ndim < 1 or z.shape[-1] != F:
        raise ValueError(f"`z` must have shape (..., n_latents={F}); "
                         f"got {tuple(getattr(z, 'shape', ()))}")
    return _dec(params, z)


def _dec(params: Params, z: Array) -> Array:
    unit = params.W_dec.shape[1:]
    out = z @ _flat_dec(params.W_dec) + params.b_dec.reshape(-1)
    return out.reshape(*z.shape[:-1], *unit)


def forward(params, x, *, activation="topk", k=None, theta=None, bandwidth=DEFAULT_BANDWIDTH):
    """``(pre, z, x_hat)`` in one pass."""
    _check_enc_args(params, activation, k, theta)
    x = _check_x(params, x)
    pre = _pre(params, x)
    z = _sparsify(pre, params, activation, k, theta, bandwidth)[0]
    return pre, z, _dec(params, z)


# --------------------------------------------------------------------------- metrics


def _rows(x: Array, n_unit: int | None = None) -> Array:
    """Flatten to (rows, features); features are the trailing ``n_unit`` axes (all but
    the first when None)."""
    if n_unit is None:
        return x.reshape(x.shape[0], -1)
    return x.reshape(-1, math.prod(x.shape[x.ndim - n_unit:]))


def fvu(x: Float[Array, " B *unit"], x_hat: Float[Array, " B *unit"]) -> Float[Array, ""]:
    """Fraction of variance unexplained ``sum ||x - x_hat||^2 / sum ||x - mean_B(x)||^2``
    (the batch is the leading axis; Gao et al. 2024's normalised MSE)."""
    x, x_hat = _rows(x), _rows(x_hat)
    num = jnp.sum((x - x_hat) ** 2)
    den = jnp.sum((x - jnp.mean(x, axis=0)) ** 2)
    return num / jnp.maximum(den, _TINY)


def explained_variance(x, x_hat) -> Float[Array, ""]:
    """``1 - fvu(x, x_hat)``."""
    return 1.0 - fvu(x, x_hat)


def l0(z: Float[Array, "*B F"]) -> Float[Array, ""]:
    """Mean number of non-zero latents per row."""
    return jnp.mean(jnp.sum((z != 0).astype(jnp.float32), axis=-1))


def dead_fraction(steps_since_fired: Int[Array, " F"], dead_steps: int) -> Float[Array, ""]:
    """Fraction of latents that have not fired for ``dead_steps`` steps or more."""
    return jnp.mean((steps_since_fired >= dead_steps).astype(jnp.float32))


def reconstruction_cosine(x, x_hat) -> Float[Array, ""]:
    """Mean over the batch of ``cos(x_b, x_hat_b)`` (each example flattened)."""
    x, x_hat = _rows(x), _rows(x_hat)
    num = jnp.sum(x * x_hat, axis=-1)
    den = jnp.linalg.norm(x, axis=-1) * jnp.linalg.norm(x_hat, axis=-1)
    return jnp.mean(num / jnp.maximum(den, _TINY))


def _unit_rows(w: Array) -> Array:
    w = _rows(w)
    return w / jnp.maximum(jnp.linalg.norm(w, axis=-1, keepdims=True), _TINY)


def _check_dicts(W_dec, true):
    if W_dec.ndim < 2 or true.ndim < 2 or math.prod(W_dec.shape[1:]) != math.prod(true.shape[1:]):
        raise ValueError(f"`W_dec` (F, *site, d) and `true` (G, *site, d) must have the same "
                         f"atom size; got {tuple(W_dec.shape)} and {tuple(true.shape)}")


def cosine_matrix(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]
) -> Float[Array, "G F"]:
    """Signed cosines ``C[g, f] = cos(true_g, W_dec_f)`` after flattening ``(*site, d)``."""
    _check_dicts(W_dec, true)
    return _unit_rows(true) @ _unit_rows(W_dec).T


def mmcs(W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]) -> Float[Array, ""]:
    """Mean max cosine similarity: ``mean_g max_f |cos(true_g, W_dec_f)|``. The absolute
    value is used, so a sign-flipped atom counts as recovered."""
    return jnp.mean(jnp.max(jnp.abs(cosine_matrix(W_dec, true)), axis=-1))


def _matched(W_dec, true):
    C = jnp.abs(cosine_matrix(W_dec, true))
    i, j = _hungarian(-C)
    return C, i, j


def mcc_hungarian(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"]
) -> Float[Array, ""]:
    """Mean ``|cos|`` over the ``min(G, F)`` pairs of the one-to-one matching of true
    features to atoms maximising the total ``|cos|`` (Hungarian algorithm,
    ``optax.assignment.hungarian_algorithm``)."""
    C, i, j = _matched(W_dec, true)
    return jnp.mean(C[i, j])


def recovery(
    W_dec: Float[Array, " F *unit"],
    true: Float[Array, " G *unit"],
    threshold: float = 0.9,
    *,
    matched: bool = False,
) -> Float[Array, ""]:
    """Fraction of true features whose max ``|cos|`` over atoms (or, with ``matched``,
    the ``|cos|`` of their Hungarian match; unmatched count as 0) is ``>= threshold``."""
    return jnp.mean((_best_cos(W_dec, true, matched) >= threshold).astype(jnp.float32))


def _best_cos(W_dec, true, matched):
    if not matched:
        return jnp.max(jnp.abs(cosine_matrix(W_dec, true)), axis=-1)
    C, i, j = _matched(W_dec, true)
    return jnp.zeros(C.shape[0], C.dtype).at[i].set(C[i, j])


def recovery_auc(
    W_dec: Float[Array, " F *unit"], true: Float[Array, " G *unit"], n: int = 101, *,
    matched: bool = False,
) -> Float[Array, ""]:
    """Area under the recovered-fraction vs threshold curve on ``[0, 1]`` (trapezoid rule
    on ``n`` equally spaced thresholds; a cosine within 1e-6 of a threshold counts as
    reaching it, so exact copies reach 1); tends to the mean best ``|cos|`` as ``n``
    grows."""
    if int(n) < 2:
        raise ValueError(f"`n` must be >= 2; got {n}")
    best = _best_cos(W_dec, true, matched)
    ts = jnp.linspace(0.0, 1.0, int(n))
    frac = jnp.mean((best[None, :] >= ts[:, None] - 1e-6).astype(best.dtype), axis=-1)
    return jnp.trapezoid(frac, ts)


# --------------------------------------------------------------------------- steering


def steer(
    params: Params, x: Float[Array, "B *site d"], latent: int | Int[Array, ""], alpha: float
) -> Float[Array, "B *site d"]:
    """``x + alpha * W_dec[latent]`` (broadcast over the batch)."""
    x = _check_x(params, x)
    F = params.W_dec.shape[0]
    if not is_traced(latent) and not 0 <= int(latent) < F:
        raise ValueError(f"`latent` must be in [0, {F}); got {latent}")
    return x + alpha * params.W_dec[latent].astype(x.dtype)


# --------------------------------------------------------------------------- training


def auxk_loss(
    pre: Float[Array, "B F"],
    residual: Float[Array, "B D"],
    W_dec_flat: Float[Array, "F D"],
    dead: Float[Array, " F"],
    k_aux: int,
    select: Selector | None = None,
) -> Float[Array, ""]:
    """AuxK loss of Gao et al. 2024: reconstruct the residual ``x - x_hat`` (no ``b_dec``)
    from the top-``k_aux`` pre-activations among dead latents; returns the FVU of that
    reconstruction, 0 when no latent is dead. Non-dead latents are masked with ``-inf``
    so shapes stay static; the residual is a constant (stop_gradient)."""
    k_aux = min(int(k_aux), pre.shape[-1])
    masked = jnp.where(dead, pre, -jnp.inf)
    if select is not None:
        sel = select.topk_mask(masked, k_aux) & dead
        z_aux = jnp.where(sel, jnp.maximum(pre, 0), 0)
    else:
        vals, idx = jax.lax.top_k(masked, k_aux)
        vals = jnp.where(jnp.isfinite(vals), jnp.maximum(vals, 0), 0.0)
        z_aux = _scatter_last(pre.shape, idx, vals, pre.dtype)
    e = jax.lax.stop_gradient(residual)
    e_hat = z_aux @ W_dec_flat
    return jnp.where(jnp.any(dead), fvu(e, e_hat), 0.0)


def remove_parallel_grad(W_dec: Float[Array, " F *unit"], g: Float[Array, " F *unit"]):
    """Remove from each atom's gradient its component parallel to the atom (jointly over
    ``(*site, d)``): ``g_f - <g_f, w_f> w_f / ||w_f||^2`` (Gao et al. 2024)."""
    W, G = _flat_dec(W_dec), _flat_dec(g)
    coef = jnp.sum(G * W, axis=-1, keepdims=True) / jnp.maximum(
        jnp.sum(W * W, axis=-1, keepdims=True), _TINY)
    return (G - coef * W).reshape(g.shape)


def normalize_decoder(params: Params) -> Params:
    """Rescale every decoder atom to unit norm jointly over ``(*site, d)``."""
    W = _flat_dec(params.W_dec)
    W = W / jnp.maximum(jnp.linalg.norm(W, axis=-1, keepdims=True), _TINY)
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
):
    """``FVU(x, x_hat) + sparsity_coef * penalty + aux_coef * AuxK``.

    Returns ``(loss, (fvu, aux, penalty, z, min_kept))``; ``x`` has one batch axis.
    ``select``: see :class:`Selector`."""
    B = x.shape[0]
    pre = _pre(params, x)
    z, min_kept = _sparsify(pre, params, activation, k, theta, bandwidth, select)
    x_hat = _dec(params, z)
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
        aux = aux_coef * auxk_loss(pre, xf - x_hat.reshape(B, -1), _flat_dec(params.W_dec),
                                   dead, k_aux, select)
    loss = rec + sparsity_coef * pen + aux
    if min_kept is None:
        min_kept = jnp.asarray(jnp.inf, pre.dtype)
    return loss, (rec, aux, pen, z, min_kept)


# --------------------------------------------------------------------------- sparse TopK

# The TopK training step computed sparsely, as EleutherAI's sparsify does: only the
# encoder product is dense. The decoder is a sum of k gathered atoms, and the gradients
# of W_dec, W_enc and b_enc are scatter-adds into the k * B touched rows, instead of the
# three further dense (B x D x F) products of the dense formulation. Written by hand
# (custom VJPs) because autodiff of the gathers gives one full-size scatter per atom
# slot, and XLA:CPU needs the layout below to stay fast (measured at B=4096, D=768,
# F=16384, k=32; benchmarks/RESULTS.md):
#   * the decoder fuses each of the k gathers with its multiply-add (one (B, k, D) gather
#     would be materialised: 400 MB);
#   * the backward products run over blocks of rows (_BLOCK_SLOTS // k of them, 64 at
#     k=32) in a fori_loop, so that a block's (rows, k, D) products stay in cache and
#     their buffer is reused: the scatter-adds take 40 ms instead of 137 ms, the
#     row-wise dot products 22 instead of 110 (on GPU/TPU one block covers the batch);
#   * the encoder product and its top-k run over blocks of _ENC_BLOCK rows, each
#     block's pre-activations selected while in cache;
#   * optimisation barriers keep the top-k a TopK op (otherwise its slices are fused
#     into the gathers and XLA falls back to sorting every row) and keep the decoder
#     output from being recomputed inside each of its consumers.
_UNROLL_K = 64  # decoder slots unrolled up to here; row blocks beyond
_BLOCK_SLOTS = 2048  # (row, slot) pairs per block of the backward products on CPU
_ENC_BLOCK = 1024  # rows per block of the encoder product and its top-k on CPU


def _rows_at(W: Array, idx: Array) -> Array:
    """``W[idx]`` for in-range ``idx`` (no clamping code)."""
    return W.at[idx].get(mode="promise_in_bounds")


def _slot_sum(vals: Array, idx: Array, W: Array) -> Array:
    """``sum_j vals[:, j, None] * W[idx[:, j]]``: one fused gather per slot (up to
    :data:`_UNROLL_K` slots), else per row block."""
    kk = idx.shape[1]
    if kk <= _UNROLL_K:
        out = vals[:, 0, None] * _rows_at(W, idx[:, 0])
        for j in range(1, kk):
            out = out + vals[:, j, None] * _rows_at(W, idx[:, j])
        return out

    def f(out, start, v_c, i_c):
        s = jnp.einsum("bk,bkd->bd", v_c, _rows_at(W, i_c))
        return jax.lax.dynamic_update_slice_in_dim(out, s, start, 0)

    return _by_row_blocks(f, jnp.zeros((idx.shape[0], W.shape[1]), W.dtype), vals, idx,
                          block=_slot_block(kk))


def _slot_block(kk: int) -> int:
    return max(1, _BLOCK_SLOTS // kk)


def _by_row_blocks(f, init, *arrays, block: int):
    """Fold ``acc = f(acc, start, *blocks)`` over row blocks of ``arrays`` (equal leading
    dims): a fori_loop over full blocks of ``block`` rows on CPU (one block elsewhere),
    then the remainder."""
    n = arrays[0].shape[0]
    size = block if jax.default_backend() == "cpu" else n
    n_full, rem = divmod(n, size)
    acc = init
    if n_full == 1:
        acc = f(acc, 0, *(a[:size] for a in arrays))
    elif n_full:
        def body(c, acc):
            start = c * size
            return f(acc, start, *(jax.lax.dynamic_slice_in_dim(a, start, size)
                                   for a in arrays))

        acc = jax.lax.fori_loop(0, n_full, body, acc)
    if rem:
        acc = f(acc, n_full * size, *(a[n_full * size:] for a in arrays))
    return acc


def _slot_dots(e: Array, idx: Array, W: Array) -> Array:
    """``out[:, j] = <e, W[idx[:, j]]>`` row-wise."""
    def f(out, start, e_c, i_c):
        d = jnp.einsum("bkd,bd->bk", _rows_at(W, i_c), e_c)
        return jax.lax.dynamic_update_slice_in_dim(out, d, start, 0)

    return _by_row_blocks(f, jnp.zeros(idx.shape, e.dtype), e, idx,
                          block=_slot_block(idx.shape[1]))


def _row_scatter(n_rows: int, idx: Array, coef: Array, rows: Array) -> Array:
    """``(n_rows, D)`` zeros plus ``coef[b, j] * rows[b]`` added at row ``idx[b, j]``."""
    def f(acc, start, i_c, c_c, r_c):
        upd = (c_c[:, :, None] * r_c[:, None, :]).reshape(-1, r_c.shape[-1])
        return acc.at[i_c.reshape(-1)].add(upd, mode="promise_in_bounds")

    return _by_row_blocks(f, jnp.zeros((n_rows, rows.shape[-1]), rows.dtype), idx, coef, rows,
                          block=_slot_block(idx.shape[1]))


def sparse_decode(vals: Float[Array, "B k"], idx: Int[Array, "B k"],
                  W: Float[Array, "F D"]) -> Float[Array, "B D"]:
    """``sum_j vals[:, j] W[idx[:, j]]``: the decoder product ``z @ W`` of a code ``z``
    with k non-zeros per row, given as values and latent indices (``W`` flattened to
    ``(F, D)``, e.g. ``params.W_dec.reshape(F, -1)``). The VJP is sparse too: a
    scatter-add into the touched rows of ``W``. Indices must lie in ``[0, F)`` (checked;
    at run time under ``jit``)."""
    for name, a, nd in (("vals", vals, 2), ("idx", idx, 2), ("W", W, 2)):
        if getattr(a, "ndim", None) != nd:
            raise ValueError(f"`{name}` must be a 2-D array; got shape "
                             f"{tuple(getattr(a, 'shape', ()))}")
    if vals.shape != idx.shape:
        raise ValueError(f"`vals` and `idx` must have the same shape (B, k); got "
                         f"{tuple(vals.shape)} and {tuple(idx.shape)}")
    if not jnp.issubdtype(idx.dtype, jnp.integer):
        raise ValueError(f"`idx` must be an integer array; got dtype {idx.dtype}")
    bad = jnp.any((idx < 0) | (idx >= W.shape[0]))
    msg = f"`idx` holds latent indices outside [0, {W.shape[0]})"
    if is_traced(bad):
        idx = eqx.error_if(idx, bad, msg)
    elif bool(bad):
        raise ValueError(msg)
    return _sparse_decode(vals, idx, W)


@jax.custom_vjp
def _sparse_decode(vals, idx, W):
    return _slot_sum(vals, idx, W)


def _sparse_decode_fwd(vals, idx, W):
    return jax.lax.optimization_barrier(_slot_sum(vals, idx, W)), (vals, idx, W)


def _sparse_decode_bwd(res, g):
    vals, idx, W = res
    g = jax.lax.optimization_barrier(g)
    return (_slot_dots(g, idx, W), np.zeros(idx.shape, jax.dtypes.float0),
            _row_scatter(W.shape[0], idx, vals, g))


_sparse_decode.defvjp(_sparse_decode_fwd, _sparse_decode_bwd)


def _topk_select(x2, W, b, dead, k, k_aux):
    """The selections, over blocks of :data:`_ENC_BLOCK` rows on CPU: each block's
    pre-activations are selected while in cache, and the (B, F) array is never formed
    (2-5% of the step at B=4096, F=16384 in ad-hoc A/B timings: within run-to-run
    noise, kept for the memory it saves: 268 MB there)."""
    n = x2.shape[0]
    kk = [k] if k_aux is None else [k, k_aux]

    def f(acc, start, x_c):
        pre = x_c @ W + b
        out = [jax.lax.top_k(pre, k)]
        if k_aux is not None:
            out.append(jax.lax.top_k(jnp.where(dead, pre, -jnp.inf), k_aux))
        return [(jax.lax.dynamic_update_slice_in_dim(av, v, start, 0),
                 jax.lax.dynamic_update_slice_in_dim(ai, i, start, 0))
                for (av, ai), (v, i) in zip(acc, out, strict=True)]

    init = [(jnp.zeros((n, m), x2.dtype), jnp.zeros((n, m), jnp.int32)) for m in kk]
    sel = jax.lax.optimization_barrier(_by_row_blocks(f, init, x2, block=_ENC_BLOCK))
    (v, i) = sel[0]
    if k_aux is None:
        return jnp.maximum(v, 0), i, None, None
    va, ia = sel[1]
    # a slot filled from a live latent (fewer dead latents than k_aux) is -inf: value 0
    return jnp.maximum(v, 0), i, jnp.where(jnp.isfinite(va), jnp.maximum(va, 0), 0), ia


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _topk_encode(x2, W, b, dead, k, k_aux):
    """``(relu(v), i, relu(v_aux), i_aux)``: the top-``k`` pre-activations of each row
    and (with ``k_aux``) the top-``k_aux`` among ``dead`` latents (AuxK), with a sparse
    VJP to ``x2``, ``W`` and ``b``."""
    return _topk_select(x2, W, b, dead, k, k_aux)


def _topk_encode_fwd(x2, W, b, dead, k, k_aux):
    out = _topk_select(x2, W, b, dead, k, k_aux)
    return out, (x2, W, dead, out)


def _topk_encode_bwd(k, k_aux, res, g):
    x2, W, dead, (v, i, va, ia) = res
    # the kept values are ReLU(pre) at the selected entries: the gradient reaches pre
    # only where the value is positive
    gpre = jnp.where(v > 0, g[0], 0)
    idx = i
    if va is not None:
        gpre = jnp.concatenate([gpre, jnp.where(va > 0, g[2], 0)], axis=1)
        idx = jnp.concatenate([i, ia], axis=1)
    gpre = jax.lax.optimization_barrier(gpre)
    F = W.shape[1]
    dW = _row_scatter(F, idx, gpre, x2).T  # scattered as rows of W^T, then transposed
    db = jnp.zeros((F,), gpre.dtype).at[idx.reshape(-1)].add(gpre.reshape(-1),
                                                             mode="promise_in_bounds")
    dx = _slot_sum(gpre, idx, W.T)  # dropped by XLA when x needs no gradient
    return dx, dW, db, np.zeros(dead.shape, jax.dtypes.float0)


_topk_encode.defvjp(_topk_encode_fwd, _topk_encode_bwd)


def _sparse_topk_loss(params: Params, x, *, k, dead, sparsity_coef, sparsity, tanh_c,
                      k_aux, aux_coef):
    """:func:`loss_fn` for ``activation="topk"`` computed sparsely (see above). Returns
    ``(loss, (fvu, aux, penalty, (vals, idx)))``."""
    B, F = x.shape[0], params.W_enc.shape[-1]
    W = params.W_enc.reshape(-1, F)
    Wd = _flat_dec(params.W_dec)
    xf = x.reshape(B, -1).astype(W.dtype)
    use_aux = k_aux is not None and dead is not None
    kk_aux = min(int(k_aux), F) if use_aux else None
    dead_arg = dead if use_aux else jnp.zeros((F,), bool)
    vals, idx, va, ia = _topk_encode(xf, W, params.b_enc, dead_arg, k, kk_aux)
    x_hat = _sparse_decode(vals, idx, Wd) + params.b_dec.reshape(-1)
    rec = fvu(xf, x_hat)
    # the penalty of the dense loss_fn from the k kept values (l1 or tanh)
    scaled = vals * _rows_at(_atom_norms(params.W_dec).astype(vals.dtype), idx)
    if sparsity == "l1":
        pen = jnp.mean(jnp.sum(scaled, -1))
    else:
        pen = jnp.mean(jnp.sum(jnp.tanh(tanh_c * scaled), -1))
    if use_aux:
        e = jax.lax.stop_gradient(xf - x_hat)
        aux = aux_coef * jnp.where(jnp.any(dead), fvu(e, _sparse_decode(va, ia, Wd)), 0.0)
    else:
        aux = jnp.zeros((), W.dtype)
    return rec + sparsity_coef * pen + aux, (rec, aux, pen, (vals, idx))


def make_train_step(
    *,
    activation: Activation,
    k: int | None,
    optimizer: optax.GradientTransformation,
    sparsity_coef: float = 0.0,
    sparsity: Literal["l1", "l0", "tanh"] = "l1",
    bandwidth: float = DEFAULT_BANDWIDTH,
    tanh_c: float = 4.0,
    k_aux: int | None = None,
    aux_coef: float = 1 / 32,
    dead_steps: int = 1000,
    threshold_momentum: float = 0.99,
    clip_norm: float | None = None,
    select: Selector | None = None,
    decoder: Literal["auto", "dense", "sparse"] = "auto",
) -> tuple[Callable[[PRNGKeyArray, Params], TrainState],
           Callable[[TrainState, Array], tuple[TrainState, Info]]]:
    """Build ``(init_state(key, params), step(state, x) -> (state, info))``.

    One step: loss (FVU + sparsity + AuxK on latents dead for ``dead_steps`` steps),
    gradients, decoder-parallel gradient removal, optional global-norm clipping, the
    optimizer update, decoder renormalisation, the ``steps_since_fired`` update and the
    BatchTopK threshold EMA (first step: the observed value). ``step`` is pure; wrap it
    with ``jax.jit`` (optionally with shardings: batch over ``data``, latents over
    ``model``). ``x`` has shape ``(B, *site, d)``. ``select`` replaces the top-k
    selections (see :class:`Selector`; :mod:`jaxkit.crosscoder.sharding` passes
    shard-local ones).

    ``decoder``: ``"sparse"`` computes a TopK step as EleutherAI's sparsify does (see
    :func:`sparse_decode`): the same loss and gradients to float rounding, with one dense
    ``B x D x F`` product instead of four (3.2x the dense step's throughput on a
    2-core CPU at d=768, F=16384, k=32; ``benchmarks/RESULTS.md``). It needs
    ``activation="topk"``, no ``select`` and an ``"l1"`` or ``"tanh"`` penalty;
    ``"auto"`` (default) uses it whenever it applies, ``"dense"`` never.
    """
    _check_activation(activation)
    if decoder not in ("auto", "dense", "sparse"):
        raise ValueError(f"`decoder` must be 'auto', 'dense' or 'sparse'; got {decoder!r}")
    why_not = ("activation='topk'" if activation != "topk" else
               "no `select` (the sharded trainer's selection is dense)" if select is not None
               else "sparsity 'l1' or 'tanh'" if sparsity not in ("l1", "tanh") else None)
    if decoder == "sparse" and why_not is not None:
        raise ValueError(f"decoder='sparse' needs {why_not}")
    use_sparse = decoder != "dense" and why_not is None
    if activation in ("topk", "batch_topk"):
        k = _check_k(k, None)
    if sparsity not in SPARSITIES:
        raise ValueError(f"`sparsity` must be one of {SPARSITIES}; got {sparsity!r}")
    if k_aux is not None:
        k_aux = _check_k(k_aux, None, "k_aux")
    if int(dead_steps) < 1:
        raise ValueError(f"`dead_steps` must be >= 1; got {dead_steps}")
    if not 0.0 <= threshold_momentum < 1.0:
        raise ValueError(f"`threshold_momentum` must be in [0, 1); got {threshold_momentum}")
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be > 0; got {clip_norm}")
    if not bandwidth > 0:
        raise ValueError(f"`bandwidth` must be > 0; got {bandwidth}")
    dead_steps = int(dead_steps)

    def init_state(key: PRNGKeyArray, params: Params) -> TrainState:
        if activation in ("topk", "batch_topk"):
            _check_k(k, params.W_enc.shape[-1])
        F = params.W_dec.shape[0]
        return TrainState(
            params=params,
            opt_state=optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            steps_since_fired=jnp.zeros((F,), jnp.int32),
            threshold=jnp.zeros((), params.W_dec.dtype),
            key=key,
        )

    def step(state: TrainState, x: Float[Array, "B *site d"]) -> tuple[TrainState, Info]:
        params = state.params
        unit = params.W_enc.shape[:-1]
        if x.ndim != len(unit) + 1 or tuple(x.shape[1:]) != tuple(unit):
            raise ValueError(f"`x` must have shape (B, {', '.join(map(str, unit))}); "
                             f"got {tuple(x.shape)}")
        if activation in ("topk", "batch_topk"):
            _check_k(k, params.W_enc.shape[-1])
        dead = state.steps_since_fired >= dead_steps
        theta = state.threshold if activation == "threshold" else None
        F = params.W_dec.shape[0]
        if use_sparse:
            grad_fn = jax.value_and_grad(_sparse_topk_loss, has_aux=True)
            (loss, (rec, aux, pen, (vals, idx))), grads = grad_fn(
                params, x, k=k, dead=dead, sparsity_coef=sparsity_coef, sparsity=sparsity,
                tanh_c=tanh_c, k_aux=k_aux, aux_coef=aux_coef)
            fired = jnp.zeros((F,), bool).at[idx.reshape(-1)].max(vals.reshape(-1) != 0)
            n_active = jnp.mean(jnp.sum((vals != 0).astype(jnp.float32), axis=-1))
        else:
            grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
            (loss, (rec, aux, pen, z, min_kept)), grads = grad_fn(
                params, x, activation=activation, k=k, theta=theta, dead=dead,
                sparsity_coef=sparsity_coef, sparsity=sparsity, bandwidth=bandwidth,
                tanh_c=tanh_c, k_aux=k_aux, aux_coef=aux_coef, select=select)
            fired = jnp.any(z.reshape(-1, z.shape[-1]) != 0, axis=0)
            n_active = l0(z)
        grads = grads._replace(W_dec=remove_parallel_grad(params.W_dec, grads.W_dec))
        grad_norm = _tree_norm(grads)
        if clip_norm is not None:
            clip = optax.clip_by_global_norm(clip_norm)
            grads, _ = clip.update(grads, clip.init(params))
        updates, opt_state = optimizer.update(grads, state.opt_state, params)
        new_params = normalize_decoder(optax.apply_updates(params, updates))
        ssf = jnp.where(fired, 0, state.steps_since_fired + 1).astype(jnp.int32)
        thr = state.threshold
        if activation == "batch_topk":
            m = min_kept.astype(thr.dtype)
            ema = jnp.where(state.step == 0, m,
                            threshold_momentum * thr + (1 - threshold_momentum) * m)
            thr = jnp.where(jnp.isfinite(m), ema, thr)
        key, _ = jax.random.split(state.key)
        new_state = TrainState(new_params, opt_state, state.step + 1, ssf, thr, key)
        info = Info(loss=loss, fvu=rec, aux_loss=aux, sparsity=pen, l0=n_active,
                    dead_fraction=dead_fraction(ssf, dead_steps), grad_norm=grad_norm)
        return new_state, info

    return init_state, step


# --------------------------------------------------------------------------- CLT


class CLTParams(NamedTuple):
    """Cross-layer transcoder: latents read at layer ``s`` write to every layer
    ``t >= s``; ``W_dec[s, :, t]`` for ``t < s`` is masked out in the forward pass."""

    W_enc: Float[Array, "L d_in F"]
    b_enc: Float[Array, "L F"]
    W_dec: Float[Array, "L F L d_out"]
    b_dec: Float[Array, "L d_out"]


def clt_mask(n_layers: int) -> Float[Array, "L L"]:
    """``mask[s, t] = 1{t >= s}`` (source s may only write to later-or-same targets)."""
    return jnp.triu(jnp.ones((n_layers, n_layers), jnp.float32))


def clt_init(
    key: PRNGKeyArray, n_layers: int, d_in: int, d_out: int, n_latents: int, *, dtype=jnp.float32
) -> CLTParams:
    """Gaussian encoder (std ``1/sqrt(d_in)``) and decoder (std
    ``1/sqrt(n_layers * n_latents)``, zero below the causal mask); zero biases."""
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
    """``z[b, s] = sparsify(x[b, s] W_enc[s] + b_enc[s])`` (per layer; TopK per layer),
    ``y_hat[b, t] = sum_{s <= t} z[b, s] W_dec[s, :, t] + b_dec[t]``."""
    L, d_in, F = params.W_enc.shape
    if not hasattr(x, "ndim") or x.ndim != 3 or x.shape[1:] != (L, d_in):
        raise ValueError(f"`x` must have shape (B, {L}, {d_in}); "
                         f"got {tuple(getattr(x, 'shape', ()))}")
    _check_activation(activation)
    if activation == "jumprelu":
        raise ValueError("`activation`='jumprelu' is not supported by the CLT")
    if activation in ("topk", "batch_topk"):
        _check_k(k, F)
    if activation == "threshold" and theta is None:
        raise ValueError("`theta` is required for activation='threshold'")
    x = check_finite(x, "x")
    pre = jnp.einsum("bld,ldf->blf", x, params.W_enc) + params.b_enc
    if activation == "batch_topk":  # top k * B per layer over the batch
        z = jax.vmap(lambda p: batch_topk(p, k)[0], in_axes=1, out_axes=1)(pre)
    else:
        z = _sparsify(pre, None, activation, k, theta, DEFAULT_BANDWIDTH)[0]
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
    """``FVU(y, y_hat) + sparsity_coef * mean_b sum_{s,f} z[b,s,f] ||W_dec[s, f]||``
    (decoder norm jointly over the unmasked targets)."""
    if not hasattr(y, "shape") or y.shape != (x.shape[0], *params.b_dec.shape):
        raise ValueError(f"`y` must have shape (B, {', '.join(map(str, params.b_dec.shape))});"
                         f" got {tuple(getattr(y, 'shape', ()))}")
    z, y_hat = clt_forward(params, x, activation=activation, k=k, theta=theta)
    L = params.W_enc.shape[0]
    W = params.W_dec * clt_mask(L)[:, None, :, None].astype(params.W_dec.dtype)
    norms = jnp.sqrt(jnp.sum(W**2, axis=(2, 3)))  # (L, F)
    pen = jnp.mean(jnp.sum(z * norms, axis=(1, 2)))
    return fvu(y, y_hat) + sparsity_coef * pen
