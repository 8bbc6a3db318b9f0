"""The user's own problem instances, as JSON or NumPy files, for Ballad's problem families.

``jaxkit run ballad --set instances=FILE --set instances_problem=tsp`` scores the best
heuristic of every run (searched on generated training instances, as always) on the
instances in ``FILE`` instead of generated test instances. One file holds instances of
one problem and one size (the heuristics run with fixed shapes). Formats, per problem
(the arrays of :mod:`jaxkit.ballad.problems`; ``m`` instances):

=====================  =====================================================================
problem                arrays
=====================  =====================================================================
``tsp``                ``coords`` ``(m, n, 2)``: city coordinates (the tour starts at city 0)
``cvrp``               ``coords`` ``(m, n + 1, 2)`` with the depot first, ``demands``
                       ``(m, n + 1)`` (the depot's 0; each at most the capacity 40)
``binpacking_or``,     ``items`` ``(m, n)``: item sizes in (0, capacity] (150 for OR,
``binpacking_weibull`` 100 for Weibull)
``knapsack``           ``weights``, ``values`` ``(m, n)``: positive (capacity 100)
=====================  =====================================================================

- ``.npz``: those arrays by name (``numpy.savez``).
- ``.npy``: one array, for the one-array problems (``tsp``, bin packing); a single
  instance (without the leading ``m``) is accepted.
- ``.json``: ``{"problem": "tsp", "instances": [{"coords": [[x, y], ...]}, ...]}`` (or the
  list of instances alone); ``problem`` in the file, when there, must agree with
  ``instances_problem`` (which may then be left empty).

Errors name the file and the instance (and the array): unreadable files, a missing or
unexpected array, instances of different sizes, wrong shapes, non-finite numbers,
infeasible items or demands.

Standard instances ship with jaxkit (``jaxkit/data/standard``, sources and licences in its
README): ``standard:or-u120`` and ``standard:or-u500`` (OR-Library's bin-packing u classes
of Falkenauer 1996, 20 instances each, capacity 150) and ``standard:tsplib-100`` (the six
100-city EUC_2D instances of TSPLIB, scaled into the unit square). Pass such a name
wherever a file is expected. A JSON file may also carry ``"optimum"``: one number per
instance, the best known value of the problem's objective (read by
:func:`instance_optimum`).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from jaxkit.io import DataError

from .problems import CVRP_CAPACITY, KNAPSACK_CAPACITY, NAMES

__all__ = ["ARRAYS", "STANDARD", "load_instances", "file_problem", "instance_optimum",
           "resolve"]

ARRAYS = {"tsp": ("coords",), "cvrp": ("coords", "demands"), "binpacking_or": ("items",),
          "binpacking_weibull": ("items",), "knapsack": ("weights", "values")}
_BIN_CAPACITY = {"binpacking_or": 150.0, "binpacking_weibull": 100.0}


#: The shipped standard instance sets: ``standard:NAME`` -> file in jaxkit/data/standard.
STANDARD = {"or-u120": "or_u120.json", "or-u500": "or_u500.json",
            "tsplib-100": "tsplib_100.json"}


def resolve(path: str | Path) -> Path:
    """The file of ``path``: a shipped set for ``standard:NAME`` (:data:`STANDARD`), else
    ``path`` itself.

    Raises:
        DataError: an unknown standard set.
    """
    text = str(path)
    if not text.startswith("standard:"):
        return Path(path)
    name = text.split(":", 1)[1]
    if name not in STANDARD:
        raise DataError(f"{text}: no such standard instance set; known: "
                        + ", ".join(f"standard:{k}" for k in STANDARD))
    from importlib import resources

    return Path(str(resources.files("jaxkit.data.standard") / STANDARD[name]))


def file_problem(path: str | Path) -> str | None:
    """The ``problem`` a JSON instance file names, or None (other formats, or none)."""
    path = resolve(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc.get("problem") if isinstance(doc, dict) else None


def _read(path: Path, problem: str) -> dict[str, np.ndarray]:
    names = ARRAYS[problem]
    suffix = path.suffix.lower()
    if suffix == ".npy":
        if len(names) != 1:
            raise DataError(f"{path}: {problem} needs the arrays {', '.join(names)}: save "
                            f"them together with numpy.savez(path.npz, {'=..., '.join(names)}"
                            "=...)")
        try:
            return {names[0]: np.load(path, allow_pickle=False)}
        except ValueError as e:
            raise DataError(f"{path}: not a readable .npy array ({e})") from None
    if suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as z:
                got = {k: z[k] for k in z.files}
        except (ValueError, zipfile.BadZipFile, OSError) as e:
            raise DataError(f"{path}: not a readable .npz file ({e})") from None
        missing = [n for n in names if n not in got]
        if missing:
            raise DataError(f"{path}: no array {missing[0]!r} for {problem} (it holds "
                            f"{', '.join(got) or 'none'}; {problem} needs {', '.join(names)})")
        return {n: got[n] for n in names}
    if suffix == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: not valid JSON ({e})") from None
        inst = doc.get("instances") if isinstance(doc, dict) else doc
        if not isinstance(inst, list) or not inst:
            raise DataError(f"{path}: expected a non-empty list of instances (or "
                            "{\"instances\": [...]})")
        out: dict[str, list] = {n: [] for n in names}
        for i, rec in enumerate(inst):
            if not isinstance(rec, dict):
                raise DataError(f"{path}, instance {i}: expected an object with "
                                f"{', '.join(names)}; got {type(rec).__name__}")
            for n in names:
                if n not in rec:
                    raise DataError(f"{path}, instance {i}: no {n!r} (it has "
                                    f"{', '.join(rec) or 'nothing'})")
                try:
                    a = np.asarray(rec[n], dtype=np.float64)
                except (TypeError, ValueError):
                    raise DataError(f"{path}, instance {i}, {n!r}: not an array of numbers"
                                    ) from None
                if out[n] and a.shape != out[n][0].shape:
                    raise DataError(f"{path}, instance {i}, {n!r}: shape {a.shape} but "
                                    f"instance 0 has {out[n][0].shape}; one file holds "
                                    "instances of one size")
                out[n].append(a)
        return {n: np.stack(v) for n, v in out.items()}
    raise DataError(f"{path}: unknown instance format {suffix!r}; use .json, .npy or .npz")


def _check(path: Path, problem: str, arrs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    first = ARRAYS[problem][0]
    want_ndim = 3 if problem in ("tsp", "cvrp") else 2
    for n, a in arrs.items():
        a = np.asarray(a)
        if a.dtype.kind not in "iuf":
            raise DataError(f"{path}: {n!r} must hold numbers; got dtype {a.dtype}")
        nd = want_ndim if n == "coords" else 2
        if a.ndim == nd - 1:
            a = a[None]  # one instance
        if a.ndim != nd:
            raise DataError(f"{path}: {n!r} must have shape ({'m, n, 2' if nd == 3 else 'm, n'})"
                            f"; got {a.shape}")
        arrs[n] = a.astype(np.float64)
    m, size = arrs[first].shape[:2]
    for n, a in arrs.items():
        if a.shape[:2] != (m, size):
            raise DataError(f"{path}: {n!r} has shape {a.shape[:2]} (instances, size) but "
                            f"{first!r} has {(m, size)}")
        bad = np.argwhere(~np.isfinite(a.reshape(m, -1)))
        if len(bad):
            raise DataError(f"{path}, instance {bad[0][0]}: {n!r} holds a non-finite number")
    if "coords" in arrs and arrs["coords"].shape[2] != 2:
        raise DataError(f"{path}: 'coords' must hold (x, y) pairs; got {arrs['coords'].shape}")
    if size < 2:
        raise DataError(f"{path}: instances of size {size}; need at least 2")

    def fail_where(mask, what):
        i, j = np.argwhere(mask)[0]
        raise DataError(f"{path}, instance {i}: {what} (entry {j})")

    if problem == "cvrp":
        d = arrs["demands"]
        if np.any(d[:, 0] != 0):
            fail_where(d[:, :1] != 0, "the depot (node 0) must have demand 0")
        if np.any(d < 0) or np.any(d > CVRP_CAPACITY):
            fail_where((d < 0) | (d > CVRP_CAPACITY),
                       f"a demand outside [0, capacity {CVRP_CAPACITY:g}]")
    if problem in _BIN_CAPACITY:
        c, x = _BIN_CAPACITY[problem], arrs["items"]
        if np.any(x <= 0) or np.any(x > c):
            fail_where((x <= 0) | (x > c), f"an item size outside (0, capacity {c:g}]")
    if problem == "knapsack":
        for n in ("weights", "values"):
            if np.any(arrs[n] <= 0):
                fail_where(arrs[n] <= 0, f"{n} must be > 0")
        if np.all(arrs["weights"] > KNAPSACK_CAPACITY, axis=1).any():
            fail_where(np.all(arrs["weights"] > KNAPSACK_CAPACITY, axis=1)[:, None],
                       f"no item fits the capacity {KNAPSACK_CAPACITY:g}")
    return arrs


def load_instances(path: str | Path, problem: str = "") -> tuple[str, dict[str, np.ndarray]]:
    """``(problem, arrays)`` of the instance file ``path`` (module docstring).

    Args:
        path: a ``.json``, ``.npy`` or ``.npz`` file.
        problem: one of :data:`jaxkit.ballad.problems.NAMES`; empty: the ``problem`` the
            JSON file names.

    Raises:
        DataError: naming the file and instance (module docstring).
    """
    path = resolve(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    named = file_problem(path)
    if named is not None and problem and named != problem:
        raise DataError(f"{path}: the file holds {named!r} instances, not {problem!r}")
    problem = problem or named or ""
    if problem not in NAMES:
        raise DataError(f"{path}: say which problem the instances are for "
                        f"(instances_problem = one of {', '.join(NAMES)}); got {problem!r}")
    return problem, _check(path, problem, _read(path, problem))


def instance_optimum(path: str | Path) -> float | None:
    """The mean best known objective of the instances in ``path`` (its JSON ``"optimum"``,
    one finite number per instance), or None where the file gives none.

    Raises:
        DataError: an ``"optimum"`` that is not one finite number per instance.
    """
    path = resolve(path)
    if path.suffix.lower() != ".json":
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or "optimum" not in doc:
        return None
    opt, n = doc["optimum"], len(doc.get("instances", []))
    try:
        arr = np.asarray(opt, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.asarray([np.nan])
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise DataError(f"{path}: \"optimum\" must hold one finite number per instance "
                        f"({n}); got {str(opt)[:60]}")
    return float(arr.mean())
