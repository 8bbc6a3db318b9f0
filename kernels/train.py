"""The one training step: loss, gradients, optional gradient and parameter transforms,
an optax update, and algorithm state carried between steps.

Every model jaxkit trains (SAEs, temporal crosscoders and cross-layer transcoders, flow
matching, the AMGenC denoiser, ActFlow's generator, TempBench's baselines) is trained
by a step built here, so clipping, finiteness flags and the step counter behave the
same everywhere. The step is a pure function of the stateful-kernel shape
(:mod:`jaxkit.kernels.base`)::

    state = train.init(params, optimizer)                  # TrainState
    step = train.make_train_step(loss_fn, optimizer)
    state, info = step(key, state, batch)                  # (TrainState, StepInfo)

One step computes, with :math:`\\theta` the parameters, :math:`a` the carried state and
:math:`b` the batch,

.. math::

    (L, o) = \\mathrm{loss}(\\theta, k, b, a), \\quad
    g = T(\\theta, \\nabla_\\theta L, o, a), \\quad
    \\theta' = P(\\theta + \\mathrm{opt}(\\mathrm{clip}(g))), \\quad
    a' = U(a, o, \\mathrm{step})

with ``T`` a gradient transform (for example removing the decoder-parallel component),
``P`` a post-update projection (unit-norm decoder atoms) and ``U`` the update of the
carried state (dead-latent counters, thresholds). The key is an argument, never part of
the state: a resumed run that derives its step keys from the step number (see
:func:`jaxkit.training.fit`) replays the same keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

__all__ = ["TrainState", "StepInfo", "init", "make_train_step", "all_finite", "scan_steps"]


class TrainState(NamedTuple):
    """State of a training step.

    Attributes:
      params: the trained parameters (any pytree).
      opt_state: the optax optimiser state.
      step: number of steps taken (int32 scalar).
      aux: algorithm state carried between steps (any pytree; ``()`` when unused).
    """

    params: Any
    opt_state: Any
    step: Int[Array, ""]
    aux: Any = ()


class StepInfo(NamedTuple):
    """What one step reports.

    Attributes:
      loss: the scalar loss before the update.
      grad_norm: global L2 norm of the (transformed, unclipped) gradients.
      finite: True when the loss, the gradient norm and every updated parameter are
        finite; a training loop stops on the first False (see
        :class:`jaxkit.training.TrainingDiverged`).
      out: the second output of the loss function (metrics, selections, ...).
    """

    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    finite: Bool[Array, ""]
    out: Any


LossFn = Callable[[Any, PRNGKeyArray, Any, Any], tuple[Array, Any]]


def init(params: Any, optimizer: optax.GradientTransformation, aux: Any = ()) -> TrainState:
    """The state before the first step.

    Differentiable: yes, in params (carried into the state; the optimizer state starts from them).

    Args:
      params: initial parameters (pytree).
      optimizer: the optax optimiser the step will use.
      aux: initial carried state (pytree), ``()`` when the algorithm carries none.

    Returns:
      A :class:`TrainState` at step 0.
    """
    return TrainState(params=params, opt_state=optimizer.init(params),
                      step=jnp.zeros((), jnp.int32), aux=aux)


def all_finite(tree: Any) -> Bool[Array, ""]:
    """True when every floating leaf of ``tree`` is finite (a scalar bool array).

    Differentiable: no: boolean output.
    """
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.ones((), bool)


def make_train_step(
    loss_fn: LossFn,
    optimizer: optax.GradientTransformation,
    *,
    grad_transform: Callable[[Any, Any, Any, Any], Any] | None = None,
    post_update: Callable[[Any], Any] | None = None,
    update_aux: Callable[[Any, Any, TrainState], Any] | None = None,
    clip_norm: float | None = None,
    check_params: bool = True,
) -> Callable[[PRNGKeyArray, TrainState, Any], tuple[TrainState, StepInfo]]:
    """Build ``step(key, state, batch) -> (state, info)``.

    Differentiable: no: returns a training step (which differentiates loss_fn itself).

    Args:
      loss_fn: ``loss_fn(params, key, batch, aux) -> (loss, out)``, differentiated with
        respect to ``params``; ``out`` is any pytree (metrics, selections) handed to the
        transforms below and returned in :attr:`StepInfo.out`.
      optimizer: an optax gradient transformation.
      grad_transform: ``grad_transform(params, grads, out, aux) -> grads``, applied to the
        raw gradients (for example decoder-parallel gradient removal).
      post_update: ``post_update(params) -> params``, applied after the optimiser update
        (for example renormalising decoder atoms).
      update_aux: ``update_aux(aux, out, state) -> aux``, the new carried state (``state``
        is the state before the step).
      clip_norm: clip the gradients to this global norm before the optimiser (the norm is
        reported before clipping); ``None`` for no clipping.
      check_params: fold the finiteness of every updated parameter into
        :attr:`StepInfo.finite` (one extra pass over the parameters); with ``False`` only
        the loss and the gradient norm are checked.

    Returns:
      The pure step function; wrap it in ``jax.jit`` (with shardings on a mesh).
    """
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"`clip_norm` must be > 0 or None; got {clip_norm}")
    clip = optax.clip_by_global_norm(clip_norm) if clip_norm is not None else None
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def step(key: PRNGKeyArray, state: TrainState, batch: Any) -> tuple[TrainState, StepInfo]:
        params = state.params
        (loss, out), grads = grad_fn(params, key, batch, state.aux)
        if grad_transform is not None:
            grads = grad_transform(params, grads, out, state.aux)
        grad_norm = optax.tree.norm(grads)
        if clip is not None:
            grads, _ = clip.update(grads, clip.init(params))
        updates, opt_state = optimizer.update(grads, state.opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if post_update is not None:
            new_params = post_update(new_params)
        aux = update_aux(state.aux, out, state) if update_aux is not None else state.aux
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        if check_params:
            finite = finite & all_finite(new_params)
        new_state = TrainState(new_params, opt_state, state.step + 1, aux)
        return new_state, StepInfo(loss=loss, grad_norm=grad_norm, finite=finite, out=out)

    return step


def scan_steps(
    step: Callable[[PRNGKeyArray, TrainState, Any], tuple[TrainState, StepInfo]],
) -> Callable[[PRNGKeyArray, TrainState, Any], tuple[TrainState, StepInfo]]:
    """Several steps in one ``lax.scan``: ``chunk(key, state, batches)``.

    Differentiable: no: returns a function.

    Args:
      step: a step from :func:`make_train_step` (or any function of that shape).

    Returns:
      ``chunk(key, state, batches) -> (state, infos)``: ``batches`` carries a leading
      axis of length ``n`` (one batch per step; a pytree of such arrays), the key is
      split into ``n`` step keys, and ``infos`` are the stacked :class:`StepInfo`.
    """

    def chunk(key: PRNGKeyArray, state: TrainState, batches: Any):
        n = jax.tree.leaves(batches)[0].shape[0]
        keys = jax.random.split(key, n)

        def body(st, kb):
            return step(kb[0], st, kb[1])

        return jax.lax.scan(body, state, (keys, batches))

    return chunk
