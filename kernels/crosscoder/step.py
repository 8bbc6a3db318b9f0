"""The crosscoder training step, built on the one training step of
:mod:`jaxkit.kernels.train`.

One step, with ``a = (steps_since_fired, threshold)`` the carried state (:class:`Carry`):

* loss ``FVU + sparsity_coef * penalty + aux_coef * AuxK`` on latents dead for
  ``dead_steps`` steps (:func:`~jaxkit.kernels.crosscoder.loss_fn`, or for TopK its
  sparse form :func:`~jaxkit.kernels.crosscoder.sparse_topk_loss`);
* gradient transform: decoder-parallel gradient removal
  (:func:`~jaxkit.kernels.crosscoder.remove_parallel_grad`); optional global-norm
  clipping; the optax update; post-update: decoder renormalisation;
* carried-state update: ``steps_since_fired`` reset where a latent fired, and the
  BatchTopK inference threshold EMA ``theta <- m theta + (1 - m) min_kept`` (the
  observed value at the first step; Bussmann et al. 2024).

References: Gao et al. 2024 (TopK, AuxK, unit-norm atoms with the parallel gradient
removed); Bussmann et al. 2024 (BatchTopK threshold); EleutherAI sparsify (the sparse
TopK step).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from .. import train as _train
from ..base import Algorithm
from .activations import Selector
from .losses import loss_fn, normalize_decoder, remove_parallel_grad
from .metrics import dead_fraction, l0
from .params import (
    DEFAULT_BANDWIDTH,
    SPARSITIES,
    Activation,
    Params,
    check_activation,
    check_aux_norm,
    check_batch_k,
    check_k,
)
from .sparse import Blocks, default_blocks, sparse_topk_loss

TrainState = _train.TrainState


class Carry(NamedTuple):
    """The crosscoder's carried state (``TrainState.aux``).

    Attributes:
      steps_since_fired: ``(F,)`` steps since each latent was last non-zero.
      threshold: the EMA of the smallest kept BatchTopK activation (the inference
        threshold of Bussmann et al. 2024); 0 for other activations.
    """

    steps_since_fired: Int[Array, " F"]
    threshold: Float[Array, ""]


class StepOut(NamedTuple):
    """The second output of the step's loss (``StepInfo.out`` of the generic step).

    Attributes:
      fvu: the reconstruction FVU.
      aux_loss: the weighted AuxK loss.
      sparsity: the (unweighted) sparsity penalty.
      l0: mean active latents per row.
      fired: ``(F,)`` latents non-zero in this batch.
      min_kept: the BatchTopK threshold sample (``inf`` otherwise).
    """

    fvu: Float[Array, ""]
    aux_loss: Float[Array, ""]
    sparsity: Float[Array, ""]
    l0: Float[Array, ""]
    fired: Bool[Array, " F"]
    min_kept: Float[Array, ""]


class Info(NamedTuple):
    """What a crosscoder step reports.

    Attributes:
      loss: the loss before the update.
      fvu: its reconstruction FVU.
      aux_loss: its weighted AuxK loss.
      sparsity: its sparsity penalty (unweighted).
      l0: mean active latents per row.
      dead_fraction: fraction of latents dead after the step.
      grad_norm: global norm of the transformed, unclipped gradients.
      finite: loss and gradient norm (and with ``check_params`` every updated parameter)
        finite.
    """

    loss: Float[Array, ""]
    fvu: Float[Array, ""]
    aux_loss: Float[Array, ""]
    sparsity: Float[Array, ""]
    l0: Float[Array, ""]
    dead_fraction: Float[Array, ""]
    grad_norm: Float[Array, ""]
    finite: Bool[Array, ""]


def _check_x_shape(params: Params, x) -> None:
    unit = params.W_enc.shape[:-1]
    if x.ndim != len(unit) + 1 or tuple(x.shape[1:]) != tuple(unit):
        raise ValueError(f"`x` must have shape (B, {', '.join(map(str, unit))}); "
                         f"got {tuple(x.shape)}")


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
    blocks: Blocks | None = None,
    check_params: bool = False,
    aux_norm: Literal["gao", "sparsify"] = "gao",
    apply_b_dec_to_input: bool = False,
) -> Algorithm:
    """Build ``(init(params) -> TrainState, step(key, state, x) -> (state, Info))``.

    The step is :func:`jaxkit.kernels.train.make_train_step` with the crosscoder's loss,
    the decoder-parallel gradient removal as ``grad_transform``, decoder renormalisation
    as ``post_update`` and the :class:`Carry` update as ``update_aux`` (see the module
    docstring). It is pure and deterministic (the key is taken, unused); wrap it with
    ``jax.jit`` (optionally with shardings: batch over ``data``, latents over
    ``model``).

    Differentiable: no: returns a training step (which differentiates the loss).

    Args:
      activation: one of :data:`~jaxkit.kernels.crosscoder.ACTIVATIONS`.
      k: kept latents for TopK (``1 <= k <= n_latents``); BatchTopK's mean kept latents
        per row, an int or a float (``int(k * B)`` entries of the batch, SAELens' float
        ``k``); else unused.
      optimizer: the optax optimiser.
      sparsity_coef: penalty weight (``>= 0``).
      sparsity: ``"l1"``, ``"l0"`` or ``"tanh"``.
      bandwidth: JumpReLU kernel width (``> 0``).
      tanh_c: the tanh penalty's scale (``> 0``).
      k_aux: AuxK latents per row (``1 <= k_aux <= n_latents``), ``None`` for no AuxK.
      aux_coef: AuxK weight (``>= 0``).
      dead_steps: a latent not fired for this many steps is dead (``>= 1``).
      threshold_momentum: BatchTopK threshold EMA momentum in ``[0, 1)``.
      clip_norm: global gradient-norm clip, ``None`` for none.
      select: replaces the top-k selections (see
        :class:`~jaxkit.kernels.crosscoder.Selector`; :mod:`jaxkit.crosscoder.sharding`
        passes shard-local ones).
      decoder: ``"sparse"`` computes a TopK step as EleutherAI's sparsify does
        (:func:`~jaxkit.kernels.crosscoder.sparse_topk_loss`: the same loss and
        gradients to float rounding, one dense ``B x D x F`` product instead of four);
        it needs ``activation="topk"``, no ``select`` and an ``"l1"`` or ``"tanh"``
        penalty. ``"auto"`` uses it whenever it applies, ``"dense"`` never.
      blocks: static blocking of the sparse step (``None``:
        :func:`~jaxkit.kernels.crosscoder.default_blocks` of the current backend).
      check_params: also fold the finiteness of every updated parameter into
        ``Info.finite`` (one more pass over the parameters). Without it the loss and the
        gradient norm are checked: finite gradients give a finite optax update of finite
        parameters except on overflow.
      aux_norm: AuxK normalisation: ``"gao"`` (the residual's FVU, Gao et al. 2024) or
        ``"sparsify"`` (``min(n_dead / k_aux, 1)`` times the squared error over the
        input's total variance, EleutherAI sparsify); see
        :func:`~jaxkit.kernels.crosscoder.auxk_loss`.
      apply_b_dec_to_input: encode ``x - b_dec`` (sparsify's convention, SAELens'
        ``apply_b_dec_to_input=True``); jaxkit's default encodes ``x``.

    Returns:
      An :class:`~jaxkit.kernels.base.Algorithm` ``(init, step)`` (unpacks as a pair).
      ``init(params)`` is the state at step 0 (:class:`TrainState` with a
      :class:`Carry` as ``aux``); ``step(key, state, x)`` takes ``x (B, *site, d)``.
    """
    check_activation(activation)
    if decoder not in ("auto", "dense", "sparse"):
        raise ValueError(f"`decoder` must be 'auto', 'dense' or 'sparse'; got {decoder!r}")
    why_not = ("activation='topk'" if activation != "topk" else
               "no `select` (the sharded trainer's selection is dense)" if select is not None
               else "sparsity 'l1' or 'tanh'" if sparsity not in ("l1", "tanh") else None)
    if decoder == "sparse" and why_not is not None:
        raise ValueError(f"decoder='sparse' needs {why_not}")
    use_sparse = decoder != "dense" and why_not is None
    if activation == "topk":
        k = check_k(k, None)
    elif activation == "batch_topk":
        k = check_batch_k(k, None)
    check_aux_norm(aux_norm)
    if sparsity not in SPARSITIES:
        raise ValueError(f"`sparsity` must be one of {SPARSITIES}; got {sparsity!r}")
    if k_aux is not None:
        k_aux = check_k(k_aux, None, "k_aux")
    if isinstance(dead_steps, bool) or int(dead_steps) != dead_steps or int(dead_steps) < 1:
        raise ValueError(f"`dead_steps` must be an int >= 1; got {dead_steps!r}")
    if not 0.0 <= threshold_momentum < 1.0:
        raise ValueError(f"`threshold_momentum` must be in [0, 1); got {threshold_momentum}")
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be > 0; got {clip_norm}")
    if not bandwidth > 0:
        raise ValueError(f"`bandwidth` must be > 0; got {bandwidth}")
    if not sparsity_coef >= 0:
        raise ValueError(f"`sparsity_coef` must be >= 0; got {sparsity_coef}")
    if not aux_coef >= 0:
        raise ValueError(f"`aux_coef` must be >= 0; got {aux_coef}")
    if not tanh_c > 0:
        raise ValueError(f"`tanh_c` must be > 0; got {tanh_c}")
    dead_steps = int(dead_steps)
    blocks = default_blocks() if blocks is None else blocks

    def check_sizes(params: Params) -> None:
        F = params.W_enc.shape[-1]
        if activation == "topk":
            check_k(k, F)
        elif activation == "batch_topk":
            check_batch_k(k, F)
        if k_aux is not None:
            check_k(k_aux, F, "k_aux")

    def loss(params: Params, key, x, carry: Carry):
        del key  # deterministic
        dead = carry.steps_since_fired >= dead_steps
        F = params.W_dec.shape[0]
        if use_sparse:
            total, (rec, aux, pen, (vals, idx)) = sparse_topk_loss(
                params, x, k=k, dead=dead, sparsity_coef=sparsity_coef, sparsity=sparsity,
                tanh_c=tanh_c, k_aux=k_aux, aux_coef=aux_coef, blocks=blocks,
                aux_norm=aux_norm, apply_b_dec_to_input=apply_b_dec_to_input)
            fired = jnp.zeros((F,), bool).at[idx.reshape(-1)].max(vals.reshape(-1) != 0)
            n_active = jnp.mean(jnp.sum((vals != 0).astype(jnp.float32), axis=-1))
            min_kept = jnp.asarray(jnp.inf, total.dtype)
        else:
            theta = carry.threshold if activation == "threshold" else None
            total, (rec, aux, pen, z, min_kept) = loss_fn(
                params, x, activation=activation, k=k, theta=theta, dead=dead,
                sparsity_coef=sparsity_coef, sparsity=sparsity, bandwidth=bandwidth,
                tanh_c=tanh_c, k_aux=k_aux, aux_coef=aux_coef, select=select,
                aux_norm=aux_norm, apply_b_dec_to_input=apply_b_dec_to_input)
            fired = jnp.any(z.reshape(-1, z.shape[-1]) != 0, axis=0)
            n_active = l0(z)
        out = StepOut(fvu=rec, aux_loss=aux, sparsity=pen, l0=n_active,
                      fired=jax.lax.stop_gradient(fired),
                      min_kept=jax.lax.stop_gradient(min_kept))
        return total, out

    def grad_transform(params: Params, grads: Params, out, carry) -> Params:
        return grads._replace(W_dec=remove_parallel_grad(params.W_dec, grads.W_dec))

    def update_aux(carry: Carry, out: StepOut, state: TrainState) -> Carry:
        ssf = jnp.where(out.fired, 0, carry.steps_since_fired + 1).astype(jnp.int32)
        thr = carry.threshold
        if activation == "batch_topk":
            m = out.min_kept.astype(thr.dtype)
            ema = jnp.where(state.step == 0, m,
                            threshold_momentum * thr + (1 - threshold_momentum) * m)
            thr = jnp.where(jnp.isfinite(m), ema, thr)
        return Carry(ssf, thr)

    core = _train.make_train_step(loss, optimizer, grad_transform=grad_transform,
                                  post_update=normalize_decoder, update_aux=update_aux,
                                  clip_norm=clip_norm, check_params=check_params)

    def init(params: Params) -> TrainState:
        check_sizes(params)
        F = params.W_dec.shape[0]
        carry = Carry(jnp.zeros((F,), jnp.int32), jnp.zeros((), params.W_dec.dtype))
        return _train.init(params, optimizer, carry)

    def step(key: PRNGKeyArray, state: TrainState, x: Float[Array, "B *site d"]
             ) -> tuple[TrainState, Info]:
        _check_x_shape(state.params, x)
        check_sizes(state.params)
        new, si = core(key, state, x)
        o = si.out
        info = Info(loss=si.loss, fvu=o.fvu, aux_loss=o.aux_loss, sparsity=o.sparsity,
                    l0=o.l0, dead_fraction=dead_fraction(new.aux.steps_since_fired, dead_steps),
                    grad_norm=si.grad_norm, finite=si.finite)
        return new, info

    return Algorithm(init, step)
