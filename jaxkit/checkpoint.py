"""Checkpoints of any training state: orbax, atomic, restored onto the abstract state.

``Checkpointer(directory)`` saves a pytree (parameters, optimiser state, step, carried
state, PRNG keys, anything of arrays) plus a JSON dictionary (data position, config) at
a step number, and restores the latest (or a given) step onto a *target*: a pytree of
the same structure whose leaves are arrays or ``jax.ShapeDtypeStruct`` with the
shardings the restored arrays should have (the current run's mesh, which may differ from
the saving run's). Typed PRNG keys are stored as their key data and re-wrapped.

Writes are atomic (orbax writes into a temporary folder and renames it), synchronous (a
save has finished before training continues) and coordinated across hosts by orbax on
a multi-host mesh (the folder must be shared storage). A checkpoint that cannot be read
(a kill during a save left it partial, or the disk corrupted it) is skipped with a
warning and the previous intact one is restored. Every save records a SHA-256 of the
state's bytes (this process's shards) in its JSON part; a restored state whose bytes
differ (flipped bits that the storage format did not catch) counts as unreadable too. A
full disk or another write failure raises :class:`CheckpointError` with one line naming
the folder.
"""

from __future__ import annotations

import errno
import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["Checkpointer", "CheckpointError", "abstract_like", "uncommitted", "uncommit_like",
           "state_digest"]

_DIGEST = "_jaxkit_digest"  # the key of the state's checksum in a checkpoint's JSON part


class CheckpointError(OSError):
    """A checkpoint could not be written (a full disk, a read-only folder)."""


def state_digest(tree: Any) -> str:
    """SHA-256 over the bytes of every array leaf of ``tree`` (key leaves as their key
    data), in tree order, with each leaf's shape and dtype; on a multi-host mesh over this
    process's shards."""
    import numpy as np

    h = hashlib.sha256()
    for x in jax.tree.leaves(_to_saveable(tree)):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            parts = [np.asarray(sh.data) for sh in x.addressable_shards]
        else:
            parts = [np.asarray(x)]
        for a in parts:
            h.update(f"{a.shape}{a.dtype}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _key_impl(x):
    """The PRNG implementation of a key array or of an abstract key value."""
    return jax.random.key_impl(x) if isinstance(x, jax.Array) else x.dtype._impl


def _to_saveable(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def abstract_like(tree: Any, shardings: Any = None) -> Any:
    """``jax.ShapeDtypeStruct`` leaves for ``tree`` (arrays or abstract values), with the
    given shardings (a matching pytree of shardings, or one sharding for every leaf) or
    the leaves' own."""
    leaves, treedef = jax.tree.flatten(tree)
    if shardings is None:
        shs = [getattr(x, "sharding", None) for x in leaves]
    elif isinstance(shardings, jax.sharding.Sharding):
        shs = [shardings] * len(leaves)
    else:
        shs = treedef.flatten_up_to(shardings)
    out = [jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x) if not _is_key(x)
                                else x.dtype, sharding=s) for x, s in zip(leaves, shs,
                                                                          strict=True)]
    return jax.tree.unflatten(treedef, out)


def _uncommit(x):
    """An uncommitted copy (same values, default device) of a single-device array."""
    import numpy as np

    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jnp.asarray(np.asarray(jax.random.key_data(x))),
                                        impl=jax.random.key_impl(x))
    return jnp.asarray(np.asarray(x))


def uncommitted(tree: Any) -> Any:
    """``tree`` with every array committed to one device (what a checkpoint restores)
    replaced by an uncommitted copy of the same values (what a fresh run holds).

    ``jit`` caches on whether an input is committed, so without this every jitted
    function of a run compiles a second time after a restore; and a restored array
    committed to one device cannot meet arrays placed on a mesh in one jitted call.
    Multi-device (mesh) arrays are left alone."""

    def one(x):
        if isinstance(x, jax.Array) and x.committed and len(x.sharding.device_set) == 1:
            return _uncommit(x)
        return x

    return jax.tree.map(one, tree)


def uncommit_like(tree: Any, like: Any) -> Any:
    """:func:`uncommitted` for the leaves whose counterpart in ``like`` (the state the
    run started from) is an uncommitted array; every other leaf is kept as it is."""

    def one(x, ref):
        if (isinstance(ref, jax.Array) and not ref.committed and isinstance(x, jax.Array)
                and x.committed and len(x.sharding.device_set) == 1):
            return _uncommit(x)
        return x

    return jax.tree.map(one, tree, like)


def _saved_target(target: Any) -> Any:
    """The target with key leaves replaced by the abstract shape of their key data."""

    def one(x):
        if not _is_key(x):
            return x
        data = jax.eval_shape(lambda k: jax.random.key_data(k),
                              jax.ShapeDtypeStruct(x.shape, x.dtype))
        return jax.ShapeDtypeStruct(data.shape, data.dtype,
                                    sharding=getattr(x, "sharding", None))

    return jax.tree.map(one, target)


class Checkpointer:
    """Save and restore training states in ``directory`` (one sub-folder per step).

    Args:
      directory: where the checkpoints live (created when ``writer``).
      keep: how many recent checkpoints to keep (older ones are deleted after a save).
      writer: ``False`` opens the folder read-only (it must exist).
    """

    def __init__(self, directory: str | os.PathLike, *, keep: int = 3, writer: bool = True):
        import orbax.checkpoint as ocp

        self.directory = Path(directory).absolute()
        if not writer and not self.directory.is_dir():
            raise ValueError(f"checkpoint folder {str(self.directory)!r} does not exist")
        if int(keep) < 1:
            raise ValueError(f"`keep` must be >= 1; got {keep}")
        opts = ocp.CheckpointManagerOptions(
            max_to_keep=int(keep), create=writer, enable_async_checkpointing=False,
            cleanup_tmp_directories=writer, read_only=not writer)
        self._mngr = ocp.CheckpointManager(self.directory, options=opts,
                                           item_names=("state", "meta"))

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._mngr.close()

    def steps(self) -> list[int]:
        """The saved step numbers, oldest first."""
        self._mngr.reload()
        return sorted(self._mngr.all_steps())

    def latest_step(self) -> int | None:
        """The newest saved step, or ``None`` when the folder holds none."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, state: Any, meta: dict | None = None) -> None:
        """Save ``state`` (a pytree of arrays) and the JSON-able ``meta`` at ``step``.

        A checkpoint already at ``step`` is replaced (it can only be one that
        :meth:`restore` skipped as unreadable, or the resumed run would have started at or
        after it)."""
        import orbax.checkpoint as ocp

        meta = {**dict(meta or {}), _DIGEST: state_digest(state)}
        try:
            if int(step) in self.steps():
                self._mngr.delete(int(step))
            self._mngr.save(int(step), args=ocp.args.Composite(
                state=ocp.args.StandardSave(_to_saveable(state)),
                meta=ocp.args.JsonSave(meta)), force=True)
            self._mngr.wait_until_finished()
        except Exception as e:  # orbax wraps OS errors in its own types
            cause, seen = e, 0
            while cause is not None and not isinstance(cause, OSError) and seen < 8:
                cause, seen = cause.__cause__ or cause.__context__, seen + 1
            if isinstance(cause, OSError) or "No space left" in str(e):
                what = ("no space left on the device" if getattr(cause, "errno", None)
                        == errno.ENOSPC or "No space left" in str(e)
                        else (getattr(cause, "strerror", None) or str(cause)))
                raise CheckpointError(f"cannot write checkpoint {int(step)} to "
                                      f"{str(self.directory)!r}: {what}") from None
            raise

    def read_meta(self, step: int | None = None) -> dict:
        """The JSON part of a checkpoint (latest by default)."""
        import orbax.checkpoint as ocp

        step = self.latest_step() if step is None else step
        if step is None:
            raise ValueError(f"checkpoint folder {str(self.directory)!r} holds no checkpoint")
        out = self._mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        meta = dict(out.meta)
        meta.pop(_DIGEST, None)
        return meta

    def restore(self, target: Any, step: int | None = None, *,
                max_step: int | None = None,
                min_step: int | None = None) -> tuple[Any, dict, int]:
        """Restore onto ``target``; returns ``(state, meta, step)``.

        Args:
          target: a pytree of the saved structure; its leaves (arrays or
            ``jax.ShapeDtypeStruct``) give the shapes, dtypes and the shardings of the
            restored arrays (see :func:`abstract_like`). Key leaves are re-wrapped as
            keys of the target's implementation.
          step: the step to restore; ``None`` for the newest readable one (an unreadable
            newer checkpoint is skipped with a warning).
          max_step: with ``step=None``, consider only checkpoints at or below it (a run
            asked for fewer steps than a folder holds restores no state from its future).
          min_step: with ``step=None``, consider only checkpoints above it (a loop whose
            state is already at ``min_step``).

        Returns:
          The restored state (the target's pytree structure), the JSON dictionary saved
          with it, and its step number.

        Raises:
          ValueError: the folder holds no (readable) checkpoint, or the saved arrays do
            not fit the target.
        """
        import orbax.checkpoint as ocp

        abstract = abstract_like(_saved_target(target))
        candidates = [step] if step is not None else [
            s for s in self.steps()[::-1] if (max_step is None or s <= int(max_step))
            and (min_step is None or s > int(min_step))]
        if not candidates:
            raise ValueError(f"checkpoint folder {str(self.directory)!r} holds no checkpoint"
                             + ("" if max_step is None else f" at or below step {max_step}")
                             + ("" if min_step is None else f" above step {min_step}"))
        errors = []
        for s in candidates:
            try:
                out = self._mngr.restore(s, args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
            except Exception as e:  # noqa: BLE001 - any unreadable checkpoint is skipped
                if step is not None:
                    raise ValueError(f"checkpoint {s} in {str(self.directory)!r} cannot be "
                                     f"restored onto the target: {e}") from e
                errors.append(f"step {s}: {type(e).__name__}: {str(e)[:200]}")
                warnings.warn(f"checkpoint {s} in {str(self.directory)!r} is unreadable "
                              f"({type(e).__name__}); trying the previous one", stacklevel=2)
                continue
            leaves = jax.tree.leaves(out.state)
            treedef = jax.tree.structure(target)
            if len(leaves) != treedef.num_leaves:
                raise ValueError(f"checkpoint {s} holds {len(leaves)} arrays; the target "
                                 f"has {treedef.num_leaves}")
            restored = [jax.random.wrap_key_data(v, impl=_key_impl(t)) if _is_key(t) else v
                        for v, t in zip(leaves, jax.tree.leaves(target), strict=True)]
            state = jax.tree.unflatten(treedef, restored)
            meta = dict(out.meta)
            saved = meta.pop(_DIGEST, None)
            if saved is not None and saved != state_digest(state):
                msg = (f"checkpoint {s} in {str(self.directory)!r} does not match its "
                       "checksum (corrupted on disk)")
                if step is not None:
                    raise ValueError(msg)
                errors.append(f"step {s}: checksum mismatch")
                warnings.warn(msg + "; trying the previous one", stacklevel=2)
                continue
            return state, meta, int(s)
        raise ValueError(f"no readable checkpoint in {str(self.directory)!r}: "
                         + "; ".join(errors))
