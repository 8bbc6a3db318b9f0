"""The one training loop: steps from :mod:`jaxkit.kernels.train`, checkpoints from
:mod:`jaxkit.checkpoint`, a divergence guard, and exact resume after a kill.

``fit(key, state, step, batch_fn, steps=N, checkpoint_dir=...)`` runs ``step(key_i,
state, batch_fn(i))`` for ``i`` in ``[start, N)``. The step key is
``jax.random.fold_in(key, i)`` and the batch a deterministic function of ``i`` (or of a
data position saved in the checkpoint's JSON), so a run killed at any point and started
again with ``resume=True`` restores the newest checkpoint and ends with the same
parameters as an uninterrupted run. Every pipeline that trains goes through here.

Resume by the book: a run asked for ``N`` steps restores the newest readable checkpoint
*at or below* ``N`` (never a state from a longer run's future); each checkpoint carries
the history logged so far (:attr:`FitResult.restored_history`) and the *fingerprint* of
the run that wrote it (by default the configuration digest, seed and jaxkit version that
``jaxkit run`` installs with :func:`use_fingerprint`). Checkpoints of another fingerprint
(the configuration changed under ``--force``) are never restored: the folder is emptied,
the run starts from step 0 with a warning, and :attr:`FitResult.restarted` says why.
A loop that trains in stages through one folder (a budget sweep: ``fit(steps=20)``,
then ``fit(steps=40)`` from its state) passes ``initial_step``, the step its state is
already at, so a resumed sweep restores only checkpoints in ``(initial_step, steps]``
and never trains a state twice over the same steps.

What ``jaxkit run`` records: inside :func:`record_resumes`, every :func:`fit` that
restored a checkpoint or removed stale ones appends one dictionary (folder, steps,
``resumed_from``, ``restarted``) to the list it installed; the command line writes them
to ``run.json``. :func:`interrupt_after` (and the ``JAXKIT_TEST_KILL_AFTER`` environment
variable, for a subprocess) stops a training right after a checkpoint, to test resumes.

Divergence: each step reports :attr:`~jaxkit.kernels.train.StepInfo.finite`; the loop
keeps an on-device flag of the first non-finite step and reads it at every logging and
checkpoint boundary, raising :class:`TrainingDiverged` *before* anything is saved, so
the newest checkpoint on disk is always finite.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .checkpoint import Checkpointer, abstract_like, uncommit_like

__all__ = ["FitResult", "TrainingDiverged", "Interrupted", "fit", "step_key",
           "use_fingerprint", "current_fingerprint", "record_resumes", "interrupt_after"]

_FINGERPRINT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jaxkit_fit_fingerprint", default=None)
_RESUMES: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "jaxkit_fit_resumes", default=None)
_INTERRUPT: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "jaxkit_fit_interrupt", default=None)
KILL_ENV = "JAXKIT_TEST_KILL_AFTER"
_HISTORY = "_jaxkit_history"
_FP = "_jaxkit_fingerprint"


def current_fingerprint() -> str | None:
    """The fingerprint :func:`use_fingerprint` installed, or None."""
    return _FINGERPRINT.get()


@contextlib.contextmanager
def use_fingerprint(fingerprint: str | None) -> Iterator[str | None]:
    """Tag every checkpoint :func:`fit` writes in this block with ``fingerprint`` (the
    registry installs the run's configuration digest, seed and version), so a changed
    configuration never resumes from them."""
    tok = _FINGERPRINT.set(fingerprint)
    try:
        yield fingerprint
    finally:
        _FINGERPRINT.reset(tok)


@contextlib.contextmanager
def record_resumes(into: list) -> Iterator[list]:
    """Append to ``into`` one dictionary per :func:`fit` in this block that restored a
    checkpoint or removed stale ones: ``checkpoints`` (the folder), ``steps`` (asked
    for), ``resumed_from`` (the restored step, 0 when none) and ``restarted`` (why stale
    checkpoints were removed, or ``""``). ``jaxkit run`` writes them to ``run.json``.

    Args:
      into: the list to append to (``RunContext.resumed``).

    Returns:
      A context manager yielding ``into``.
    """
    tok = _RESUMES.set(into)
    try:
        yield into
    finally:
        _RESUMES.reset(tok)


class Interrupted(RuntimeError):
    """Raised by :func:`fit` inside :func:`interrupt_after` (a simulated kill)."""


@contextlib.contextmanager
def interrupt_after(step: int) -> Iterator[dict]:
    """A test hook: the first :func:`fit` in this block that saves a checkpoint at a
    step ``>= step`` raises :class:`Interrupted` right after saving it, as if the process
    had been killed there (the checkpoint is on disk; nothing after it ran). The yielded
    dictionary's ``"fired"`` says whether it happened.

    A subprocess gets the same with the environment variable ``JAXKIT_TEST_KILL_AFTER=
    step``, which kills the process with ``SIGKILL`` instead (a real kill).

    Args:
      step: the first checkpoint step at or above which to stop (>= 1).

    Returns:
      A context manager yielding ``{"step": step, "fired": bool}``.
    """
    if int(step) < 1:
        raise ValueError(f"`step` must be >= 1; got {step}")
    state = {"step": int(step), "fired": False}
    tok = _INTERRUPT.set(state)
    try:
        yield state
    finally:
        _INTERRUPT.reset(tok)


def _maybe_interrupt(done: int) -> None:
    """After the checkpoint of step ``done``: the :func:`interrupt_after` hook."""
    hook = _INTERRUPT.get()
    if hook is not None and not hook["fired"] and done >= hook["step"]:
        hook["fired"] = True
        raise Interrupted(f"interrupted after the checkpoint of step {done}")
    env = os.environ.get(KILL_ENV, "")
    if env.strip().isdigit() and done >= int(env):
        os.kill(os.getpid(), signal.SIGKILL)


class TrainingDiverged(RuntimeError):
    """Raised when a step produced a non-finite loss, gradient or parameter."""

    def __init__(self, step: int):
        super().__init__(f"training diverged at step {step}: non-finite loss, gradient or "
                         f"parameters (lower the learning rate or check the inputs)")
        self.step = step


class FitResult(NamedTuple):
    """What :func:`fit` returns.

    Attributes:
      state: the final training state.
      history: one dict of host floats per logged step (``step`` plus the scalar leaves
        of the step's info, ``out`` flattened by name where it is a NamedTuple or dict).
      resumed_from: the step restored from a checkpoint (0 for a fresh run).
      meta: the JSON dictionary of the restored checkpoint (``{}`` for a fresh run).
      restored_history: the records logged before ``resumed_from`` (saved in the
        checkpoint); ``restored_history + history`` is the whole run's (with an
        ``initial_step``, it may hold records of the earlier fits into the same folder
        or only those after ``initial_step``: keep the records whose ``step`` is above it).
      restarted: why checkpoints in the folder were not used (``""``: they were, or there
        were none).
    """

    state: Any
    history: list[dict]
    resumed_from: int
    meta: dict
    restored_history: list[dict] = []
    restarted: str = ""

    @property
    def full_history(self) -> list[dict]:
        """Every record of the run, restored ones first."""
        return list(self.restored_history) + list(self.history)


def step_key(key, i: int | jax.Array):
    """The key of step ``i``: ``fold_in(key, i)`` (the same on a resumed run)."""
    return jax.random.fold_in(key, i)


def _scalars(info: Any) -> dict[str, float]:
    out = {}

    def add(prefix, x):
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            for f, v in zip(x._fields, x, strict=True):
                add(f if prefix in ("", "out") else f"{prefix}.{f}", v)
        elif isinstance(x, dict):
            for f, v in x.items():
                add(f if prefix in ("", "out") else f"{prefix}.{f}", v)
        elif hasattr(x, "shape") and np.ndim(x) == 0:
            out[prefix] = float(x)
        elif hasattr(x, "shape") and np.ndim(x) == 1 and np.size(x):  # a scanned chunk
            out[prefix] = float(x[-1])

    add("", jax.device_get(info))
    out.pop("finite", None)
    return out


def fit(
    key,
    state: Any,
    step: Callable[[Any, Any, Any], tuple[Any, Any]],
    batch_fn: Callable[[int], Any],
    *,
    steps: int,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 100,
    keep: int = 2,
    resume: bool = True,
    log_every: int = 0,
    on_log: Callable[[int, dict], None] | None = None,
    meta_fn: Callable[[int], dict] | None = None,
    on_restore: Callable[[dict], None] | None = None,
    target: Any = None,
    progress: Any = "auto",
    fingerprint: str | None = "auto",
    initial_step: int = 0,
    init: Callable[[], Any] | None = None,
) -> FitResult:
    """Run ``steps`` training steps with checkpoints and resume.

    Args:
      key: the run's base key; step ``i`` uses :func:`step_key` ``(key, i)``.
      state: the initial state (its structure and shardings are the restore target
        unless ``target`` is given).
      step: ``step(key, state, batch) -> (state, info)``, usually jitted; ``info`` has a
        ``finite`` field (:class:`~jaxkit.kernels.train.StepInfo`) or none.
      batch_fn: ``batch_fn(i)``: the batch of step ``i`` (deterministic in ``i`` and the
        data position).
      steps: the total number of steps (a resumed run continues up to it).
      checkpoint_dir: where to checkpoint; ``None`` for no checkpoints.
      checkpoint_every: steps between checkpoints (and one at the end).
      keep: checkpoints kept on disk.
      resume: restore the newest checkpoint in ``checkpoint_dir`` when there is one.
      log_every: record the step's scalars every this many steps (0: only the last).
      on_log: ``on_log(step_done, scalars)`` at each recorded step.
      meta_fn: ``meta_fn(step_done) -> dict``: extra JSON saved with each checkpoint (a
        data position, the config).
      on_restore: ``on_restore(meta)`` after a restore (to reposition a data stream).
      target: the restore target (see :meth:`jaxkit.checkpoint.Checkpointer.restore`).
      progress: where to report steps done (a ``rich`` Progress or a
        :class:`jaxkit.log.PlainProgress`); ``"auto"``: the one ``jaxkit run`` installed
        (:func:`jaxkit.log.current_progress`, none outside the command line); None:
        silent. Reporting never changes what is computed.
      fingerprint: what ties the checkpoints to this run's configuration; ``"auto"``:
        :func:`current_fingerprint`; None: no check (module docstring).
      initial_step: the step ``state`` is already at (a loop that continues its own
        previous :func:`fit` in the same folder passes the step it ended at): only a
        checkpoint in ``(initial_step, steps]`` is restored, else training continues
        from ``state`` at ``initial_step``.
      init: builds the initial state when no checkpoint is restored after all (all of
        them stale, unreadable or beyond ``steps``); with it, ``state`` may be abstract
        (``jax.ShapeDtypeStruct`` leaves: the restore target of a run that expects to
        resume), so that nothing is initialised twice.

    Returns:
      A :class:`FitResult`.

    Raises:
      TrainingDiverged: a step was not finite (nothing after it is saved).
      ValueError: bad arguments, or an unreadable checkpoint folder.
    """
    steps = int(steps)
    if steps < 0:
        raise ValueError(f"`steps` must be >= 0; got {steps}")
    if int(checkpoint_every) < 1:
        raise ValueError(f"`checkpoint_every` must be >= 1; got {checkpoint_every}")
    if int(log_every) < 0:
        raise ValueError(f"`log_every` must be >= 0; got {log_every}")
    initial_step = int(initial_step)
    if not 0 <= initial_step <= steps:
        raise ValueError(f"`initial_step` must be in [0, steps={steps}]; got {initial_step}")
    ckpt = Checkpointer(checkpoint_dir, keep=keep) if checkpoint_dir is not None else None
    if fingerprint == "auto":
        fingerprint = current_fingerprint()
    start, meta = initial_step, {}
    past: list[dict] = []
    restarted = ""
    task = None
    try:
        if ckpt is not None and ckpt.steps():
            restarted = _stale(ckpt, fingerprint)
        usable = [s for s in ckpt.steps() if initial_step < s <= steps] \
            if ckpt is not None else []
        if resume and usable:
            tgt = abstract_like(state) if target is None else target
            restored, meta, start = ckpt.restore(tgt, max_step=steps,
                                                 min_step=initial_step)
            # placed as the fresh state was: no second compilation, no device clash
            state = uncommit_like(restored, state) if target is None else restored
            past = list(meta.pop(_HISTORY, []))
            meta.pop(_FP, None)
            if on_restore is not None:
                on_restore(meta)
        elif init is not None:
            state = init()
        record = _RESUMES.get()
        if record is not None and ckpt is not None and (start > initial_step or restarted):
            record.append({"checkpoints": str(ckpt.directory), "steps": steps,
                           "resumed_from": start if start > initial_step else 0,
                           "restarted": restarted})
        if progress == "auto":
            from .log import current_progress

            progress = current_progress()
        if progress is not None and steps > start:
            name = Path(checkpoint_dir).name if checkpoint_dir is not None else ""
            task = progress.add_task(f"train {name}".strip(), total=steps, completed=start)
        history: list[dict] = []
        bad = jnp.asarray(-1, jnp.int32)  # first non-finite step (1-based); -1: none
        last_info = None

        def check():
            b = int(bad)
            if b >= 0:
                raise TrainingDiverged(b)

        for i in range(start, steps):
            state, info = step(step_key(key, i), state, batch_fn(i))
            last_info = info
            fin = getattr(info, "finite", None)
            if fin is not None:
                bad = jnp.where((bad < 0) & ~jnp.all(fin), i + 1, bad)
            done = i + 1
            if (log_every and done % log_every == 0) or done == steps:
                check()
                rec = {"step": done, **_scalars(info)}
                history.append(rec)
                if on_log is not None:
                    on_log(done, rec)
            if ckpt is not None and (done % checkpoint_every == 0 or done == steps):
                check()
                extra = {_HISTORY: past + history}
                if fingerprint is not None:
                    extra[_FP] = fingerprint
                ckpt.save(done, state, {**(meta_fn(done) if meta_fn is not None else {}),
                                        **extra})
                _maybe_interrupt(done)
            if task is not None:
                progress.advance(task)
        if last_info is not None:
            check()
        return FitResult(state=state, history=history, resumed_from=start, meta=meta,
                         restored_history=past, restarted=restarted)
    finally:
        if task is not None:
            progress.remove_task(task)
        if ckpt is not None:
            ckpt.close()


def _stale(ckpt: Checkpointer, fingerprint: str | None) -> str:
    """Empty ``ckpt``'s folder when its newest checkpoint was written under another
    fingerprint; returns the reason (``""`` when the checkpoints are this run's)."""
    if fingerprint is None:
        return ""
    try:
        saved = ckpt.read_meta().get(_FP)
    except Exception:  # noqa: BLE001 - an unreadable newest one: restore() falls back
        return ""
    if saved is None or saved == fingerprint:
        return ""
    reason = (f"the checkpoints in {str(ckpt.directory)!r} were written under another "
              "configuration, seed or jaxkit version; they were removed and training "
              "started from step 0")
    warnings.warn(reason, stacklevel=3)
    for s in ckpt.steps():
        ckpt._mngr.delete(s)
    return reason
