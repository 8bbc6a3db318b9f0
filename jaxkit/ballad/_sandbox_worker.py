"""Subprocess side of :mod:`jaxkit.ballad.sandbox` (NumPy only; never imports jax).

Run as ``python -I -c <boot> <repo_root> <job_dir>``. Reads ``job.json`` (then deletes it)
and ``items.npy`` from ``job_dir``, evaluates the candidate, and writes one line
``<nonce><json>`` to a private duplicate of the original stdout. The candidate's own
stdout goes to /dev/null, so its prints cannot forge or corrupt the result.
"""

from __future__ import annotations

import json
import math
import os
import sys

_FSIZE = 16 * 1024**2  # bytes any file the candidate writes may grow to
_MEMORY_LIMIT: list[int] = []  # the RLIMIT_AS that was set, for the MemoryError message


class _BadOutput(Exception):
    """The priority function returned something unusable (message is the whole reason)."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, _BadOutput):
        return str(exc)
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"SystemExit: candidate called exit({exc.code!r})"
    text = str(exc)
    if isinstance(exc, MemoryError) and not text and _MEMORY_LIMIT:
        text = f"out of memory (limit {_MEMORY_LIMIT[0] / 1024**3:.1f} GiB)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _checked(func, np):
    """Wrap ``func`` so a bad return value raises :class:`_BadOutput` with a clear reason."""

    def wrapper(item, bins):
        out = func(item, bins)
        try:
            arr = np.asarray(out)
        except Exception as exc:  # exotic objects
            raise _BadOutput(f"priority returned {type(out).__name__}, expected an array") from exc
        if not (np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)):
            raise _BadOutput(
                f"priority returned {type(out).__name__} of dtype {arr.dtype}, "
                "expected a numeric array"
            )
        if arr.shape != bins.shape:
            raise _BadOutput(f"priority returned shape {arr.shape}, expected {bins.shape}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise _BadOutput("priority returned non-finite values (NaN or inf)")
        return arr

    return wrapper


def _evaluate(job: dict, items, np, reference) -> dict:
    func_name = job["func_name"]
    source = job["source"]
    try:
        code = compile(source, "<candidate>", "exec")
    except SyntaxError as exc:  # includes IndentationError
        return {"ok": False, "error": _reason(exc)}
    namespace: dict = {"__name__": "candidate", "np": np, "numpy": np, "math": math}
    try:
        exec(code, namespace)  # this is the sandbox
    except BaseException as exc:  # report everything, incl. SystemExit
        return {"ok": False, "error": _reason(exc)}
    func = namespace.get(func_name)
    if func is None:
        return {"ok": False, "error": f"no function named {func_name!r}"}
    if not callable(func):
        return {"ok": False, "error": f"{func_name!r} is not callable"}
    wrapped = _checked(func, np)
    capacity = float(job["capacity"])
    excess, bins = [], []
    try:
        for row in items:
            used = int(reference.online_binpack(wrapped, row, capacity))
            bins.append(used)
            excess.append(float(reference.binpack_excess(used, row, capacity)))
    except BaseException as exc:
        return {"ok": False, "error": _reason(exc)}
    mean = float(np.mean(excess))
    if not math.isfinite(mean):
        return {"ok": False, "error": "excess is not finite"}
    return {"ok": True, "excess": mean, "bins": bins}


def _set_limits(mem: int | None) -> None:
    """Address-space limit ``mem`` (hard, so the candidate cannot raise it back) and a cap
    on file sizes (the stderr file; Python ignores SIGXFSZ, so writes fail with EFBIG)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    limits = [(resource.RLIMIT_FSIZE, _FSIZE)]
    if mem:
        limits.append((resource.RLIMIT_AS, mem))
    for which, value in limits:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            continue
        if which == resource.RLIMIT_AS:
            _MEMORY_LIMIT.append(value)


def main(job_dir: str) -> None:
    """Evaluate the job in ``job_dir`` and report on the private result fd."""
    result_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(1, "w", closefd=False)
    job_path = os.path.join(job_dir, "job.json")
    with open(job_path) as fh:
        job = json.load(fh)
    os.remove(job_path)
    nonce = job["nonce"]
    try:
        import numpy as np

        from jaxkit.ballad import reference

        items = np.load(os.path.join(job_dir, "items.npy"), allow_pickle=False)
        _set_limits(job.get("memory_bytes"))
        result = _evaluate(job, items, np, reference)
    except BaseException as exc:
        result = {"ok": False, "error": "worker: " + _reason(exc)}
    result["jax_loaded"] = "jax" in sys.modules
    line = nonce + json.dumps(result) + "\n"
    os.write(result_fd, line.encode())
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[-1])
