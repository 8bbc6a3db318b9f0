"""The one optimizer builder: Adam or AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019)
with a learning-rate schedule and optional global-norm clipping, as every jaxkit training
uses it (the step itself is :func:`jaxkit.kernels.train.make_train_step`).

Schedules of the learning rate ``eta(t)`` at step ``t`` (``lr`` the peak, ``T = steps``,
``W = warmup``):

* ``"constant"``: ``eta = lr`` (handed to optax as a number, not a schedule);
* ``"cosine"``: ``eta(t) = end + (lr - end) (1 + cos(pi min(t, T) / T)) / 2``
  (``optax.cosine_decay_schedule`` with ``alpha = end_lr / lr``);
* ``"warmup"``: linear from 0 to ``lr`` over ``W`` steps (at least one), then constant;
* ``"warmup_cosine"``: linear from 0 to ``lr`` over ``W`` steps, then the cosine decay to
  ``end_lr`` at step ``T`` (``optax.warmup_cosine_decay_schedule``).

``weight_decay=None`` is Adam (``optax.adam``); a number is AdamW with that decoupled
decay (``optax.adamw``, a different optimizer state). ``clip_norm`` chains
``optax.clip_by_global_norm`` in front.
"""

from __future__ import annotations

import math
import numbers

import optax

__all__ = ["SCHEDULES", "optimizer", "schedule"]

#: The learning-rate schedules :func:`optimizer` knows (module docstring).
SCHEDULES = ("constant", "cosine", "warmup", "warmup_cosine")


def _positive(name: str, value, *, strict: bool = True) -> None:
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and math.isfinite(value))
    if not ok or (value <= 0 if strict else value < 0):
        raise ValueError(f"`{name}` must be a finite number {'>' if strict else '>='} 0; "
                         f"got {value!r}")


def schedule(lr: float, kind: str = "constant", *, steps: int | None = None,
             warmup: int = 0, end_lr: float = 0.0):
    """The learning rate of :func:`optimizer`: ``lr`` itself or an optax schedule.

    Args:
        lr: the peak learning rate, > 0.
        kind: one of :data:`SCHEDULES`.
        steps: the length ``T`` of the decay (``"cosine"``, ``"warmup_cosine"``); below 1
            counts as 1 for ``"cosine"``.
        warmup: the warm-up steps ``W`` (``"warmup"``, ``"warmup_cosine"``).
        end_lr: the rate the cosine decays to, >= 0.

    Returns:
        A float (``"constant"``) or an ``optax.Schedule``.

    Raises:
        ValueError: an unknown ``kind``, a non-positive ``lr``, a negative ``end_lr`` or
            ``warmup``, or a missing ``steps``; the message names the argument.
    """
    _positive("lr", lr)
    _positive("end_lr", end_lr, strict=False)
    if kind not in SCHEDULES:
        raise ValueError(f"`kind` must be one of {', '.join(SCHEDULES)}; got {kind!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or warmup < 0:
        raise ValueError(f"`warmup` must be an integer >= 0; got {warmup!r}")
    if kind in ("cosine", "warmup_cosine") and steps is None:
        raise ValueError(f"`steps` is needed for the {kind!r} schedule")
    if kind == "constant":
        return lr
    if kind == "cosine":
        return optax.cosine_decay_schedule(lr, max(int(steps), 1), alpha=end_lr / lr)
    if kind == "warmup":
        w = max(warmup, 1)
        return optax.join_schedules([optax.linear_schedule(0.0, lr, w),
                                     optax.constant_schedule(lr)], [w])
    return optax.warmup_cosine_decay_schedule(0.0, lr, warmup, int(steps), end_lr)


def optimizer(lr: float, *, schedule_kind: str = "constant", steps: int | None = None,
              warmup: int = 0, end_lr: float = 0.0, weight_decay: float | None = None,
              b1: float = 0.9, b2: float = 0.999, clip_norm: float | None = None
              ) -> optax.GradientTransformation:
    """Adam or AdamW with a schedule and optional clipping (module docstring).

    Args:
        lr: the peak learning rate, > 0.
        schedule_kind: one of :data:`SCHEDULES` (see :func:`schedule`).
        steps: the decay length for the cosine schedules.
        warmup: the warm-up steps for the warm-up schedules.
        end_lr: where the cosine decay ends.
        weight_decay: ``None`` for Adam, else AdamW's decoupled weight decay (>= 0).
        b1: the first-moment decay.
        b2: the second-moment decay.
        clip_norm: clip the gradients to this global norm first; ``None``: no clipping.

    Returns:
        The ``optax.GradientTransformation``.

    Raises:
        ValueError: a bad argument (named in the message), as :func:`schedule` and for a
            negative ``weight_decay`` or a non-positive ``clip_norm``.
    """
    if weight_decay is not None:
        _positive("weight_decay", weight_decay, strict=False)
    if clip_norm is not None:
        _positive("clip_norm", clip_norm)
    eta = schedule(lr, schedule_kind, steps=steps, warmup=warmup, end_lr=end_lr)
    if weight_decay is None:
        opt = optax.adam(eta, b1=b1, b2=b2)
    else:
        opt = optax.adamw(eta, b1=b1, b2=b2, weight_decay=weight_decay)
    return opt if clip_norm is None else optax.chain(optax.clip_by_global_norm(clip_norm), opt)
