"""The user's own problem for the real-proposer experiment: a Python plug-in file
(``jaxkit run ballad --set real.plugin=my_problem.py``).

The file is imported (it is the user's own trusted code; the model-written programs
still run only in :mod:`jaxkit.jail`) and must define::

    CAPACITY = 150.0                  # bin capacity, a positive number
    TRAIN = [[20, 95, ...], ...]      # training instances: item sizes, one row each
    TEST = [[...], ...]               # held-out test instances (same width not needed)
    VAL = [[...], ...]                # optional: validation instances (default: TEST is
                                      # NOT reused; the first half of TRAIN's rows is)
    DESCRIPTION = "..."               # optional: the task text of the prompt
    EVALUATOR = "binpacking"          # optional: the only evaluator the jail scores

The instances drive the search (TRAIN) as well as the test (TEST): nothing generated
is used. Rows of one split must have the same length (pad by splitting an instance
otherwise); sizes must be finite, positive and at most ``CAPACITY``. The evaluator is
online bin packing scored by the jail's parent (excess of bins over L1, percent): other
problems need an evaluator the jail computes itself, which this plug-in cannot add.

Every mistake is one ``ValueError`` line naming the file and the name, raised by
:func:`load_plugin` before anything is run or written (``Config.validate`` calls it).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Plugin", "load_plugin", "EVALUATORS"]

EVALUATORS = ("binpacking",)


@dataclass(frozen=True)
class Plugin:
    """A loaded plug-in: ``name``, ``capacity``, ``train`` / ``val`` / ``test`` (2-D
    float arrays), ``description`` (the prompt's task text, or "")."""

    name: str
    capacity: float
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    description: str


def _split(path: Path, mod, name: str, capacity: float) -> np.ndarray:
    raw = getattr(mod, name)
    try:
        rows = [np.asarray(r, dtype=np.float64) for r in raw]
    except (TypeError, ValueError):
        raise ValueError(f"{path}: `{name}` must be a list of instances, each a list of "
                         "item sizes") from None
    if not rows:
        raise ValueError(f"{path}: `{name}` holds no instance")
    for i, r in enumerate(rows):
        if r.ndim != 1 or r.size < 2:
            raise ValueError(f"{path}: `{name}`[{i}] must be a flat list of at least 2 "
                             f"item sizes; got shape {r.shape}")
        if len(r) != len(rows[0]):
            raise ValueError(f"{path}: `{name}`[{i}] has {len(r)} items, `{name}`[0] "
                             f"{len(rows[0])}: instances of one split must have one length")
        bad = ~(np.isfinite(r) & (r > 0) & (r <= capacity))
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(f"{path}: `{name}`[{i}][{j}] = {float(r[j])!r}: item sizes must be "
                             f"finite, > 0 and <= CAPACITY ({capacity:g})")
    return np.stack(rows)


def load_plugin(path: str | Path) -> Plugin:
    """Import and check the plug-in at ``path`` (module docstring).

    Args:
        path: the ``.py`` file.

    Returns:
        The :class:`Plugin`.

    Raises:
        ValueError: one line naming the file and what is wrong.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file" if not path.exists()
                         else f"{path}: is a folder, not a .py file")
    if path.suffix != ".py":
        raise ValueError(f"{path}: must be a Python file (.py)")
    spec = importlib.util.spec_from_file_location(f"_ballad_plugin_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001 (the user's file: one line, not a traceback)
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{path}: cannot be imported ({type(exc).__name__}: {msg})") from None
    finally:
        sys.modules.pop(spec.name, None)
    for name in ("CAPACITY", "TRAIN", "TEST"):
        if not hasattr(mod, name):
            raise ValueError(f"{path}: defines no `{name}` (needs CAPACITY, TRAIN, TEST)")
    cap = mod.CAPACITY
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap) \
            or cap <= 0:
        raise ValueError(f"{path}: `CAPACITY` must be a positive number; got {cap!r}")
    ev = getattr(mod, "EVALUATOR", "binpacking")
    if ev not in EVALUATORS:
        raise ValueError(f"{path}: `EVALUATOR` must be one of {', '.join(EVALUATORS)}; "
                         f"got {ev!r}")
    desc = getattr(mod, "DESCRIPTION", "")
    if not isinstance(desc, str):
        raise ValueError(f"{path}: `DESCRIPTION` must be a string")
    train = _split(path, mod, "TRAIN", float(cap))
    test = _split(path, mod, "TEST", float(cap))
    if hasattr(mod, "VAL"):
        val = _split(path, mod, "VAL", float(cap))
    else:
        if len(train) < 2:
            raise ValueError(f"{path}: give `VAL` or at least 2 `TRAIN` instances (the "
                             "first half is then the validation set)")
        val, train = train[: len(train) // 2], train[len(train) // 2:]
    key = lambda a: {tuple(r) for r in a}  # noqa: E731
    if key(test) & (key(train) | key(val)):
        raise ValueError(f"{path}: `TEST` shares an instance with `TRAIN` or `VAL`; the "
                         "test instances must be held out")
    return Plugin(str(getattr(mod, "NAME", path.stem)), float(cap), train, val, test, desc)
