"""Evaluate untrusted Python-source heuristics in a separate, time- and memory-limited process.

A candidate is the source of a FunSearch-style ``priority(item, bins) -> np.ndarray`` for
online bin packing (see :func:`jaxkit.ballad.reference.online_binpack`). Each evaluation
runs in a fresh ``python -I`` subprocess (its own process group; NumPy only, no JAX, so it
starts in about a tenth of a second) that reads its job from a private temporary
directory and writes the result as one nonce-prefixed JSON line to a private copy of its
stdout; the candidate's own prints go to /dev/null. On a wall-clock timeout the whole
process group is killed. Every failure is reported as ``ok=False`` with a one-line reason
and ``score = FAILURE_SCORE``; nothing the candidate does raises in the caller.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["FAILURE_SCORE", "EvalResult", "evaluate_source", "evaluate_many"]

#: Score of any failed evaluation. ``-inf`` sorts below every real score (real scores are
#: ``-excess`` with ``excess >= 0``); code that averages scores must filter on ``ok`` first.
FAILURE_SCORE: float = float("-inf")

#: Default address-space limit of the worker (bytes); ``None`` disables it.
DEFAULT_MEMORY_BYTES: int | None = 2 * 1024**3

_MAX_ERROR_CHARS = 300
_ROOT = str(Path(__file__).resolve().parents[2])  # directory that contains ``jaxkit/``
# numpy's own directory is appended so the worker finds it even where the parent got it
# from PYTHONPATH (which ``-I`` ignores); appended, it cannot shadow the standard library.
_NUMPY_DIR = str(Path(np.__file__).resolve().parents[1])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "sys.argv[2] in sys.path or sys.path.append(sys.argv[2]); "
    "from jaxkit.ballad._sandbox_worker import main; main(sys.argv[3])"
)
# One BLAS thread: the worker's arrays are tiny, and threads would multiply the
# virtual-memory reservations that count against RLIMIT_AS.
_ENV_PINS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class EvalResult:
    """Outcome of one sandboxed evaluation.

    ``score`` is ``-excess`` (higher is better) or :data:`FAILURE_SCORE`; ``excess`` is the
    mean percentage of bins above the L1 bound over the instances; ``error`` a one-line
    reason when ``ok`` is false; ``seconds`` the wall time of the whole evaluation;
    ``bins`` the bins used per instance (empty on failure).
    """

    ok: bool
    score: float
    excess: float | None
    error: str | None
    seconds: float
    bins: tuple[int, ...] = field(default=())


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."


def _fail(error: str, start: float) -> EvalResult:
    return EvalResult(False, FAILURE_SCORE, None, _one_line(error), time.perf_counter() - start)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # already gone
        pass
    except AttributeError:  # pragma: no cover - no process groups (Windows)
        proc.kill()
    proc.wait()


def _check_items(items: np.ndarray, capacity: float) -> np.ndarray:
    items = np.asarray(items, dtype=np.float64)
    if items.ndim == 1:
        items = items[None, :]
    if items.ndim != 2 or items.shape[1] == 0:
        raise ValueError(f"items must have shape (n_instances, n_items), got {items.shape}")
    if not (capacity > 0) or not np.isfinite(capacity):
        raise ValueError(f"capacity must be positive and finite, got {capacity}")
    return items


def evaluate_source(
    source: str,
    items: np.ndarray,
    capacity: float,
    *,
    timeout: float = 10.0,
    func_name: str = "priority",
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
) -> EvalResult:
    """Run ``source``'s ``func_name`` as an online bin-packing priority on every row of
    ``items`` (shape ``(n_instances, n_items)``; a 1-D array is one instance) in a sandboxed
    subprocess. Never raises for anything the candidate does; bad ``items`` / ``capacity``
    (the caller's fault) raise ValueError.
    """
    items = _check_items(items, capacity)
    start = time.perf_counter()
    nonce = "@@jaxkit-sandbox-" + secrets.token_hex(16) + "@@"
    with tempfile.TemporaryDirectory(prefix="jaxkit-sandbox-") as tmp:
        job_dir = Path(tmp)
        np.save(job_dir / "items.npy", items, allow_pickle=False)
        job = {
            "source": source,
            "capacity": float(capacity),
            "func_name": func_name,
            "nonce": nonce,
            "memory_bytes": memory_bytes,
        }
        (job_dir / "job.json").write_text(json.dumps(job))
        out_path, err_path = job_dir / "stdout", job_dir / "stderr"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(_ENV_PINS)
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-c", _BOOT, _ROOT, _NUMPY_DIR, str(job_dir)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=tmp,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                return _fail(f"could not start worker: {exc}", start)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return _fail(f"timeout after {timeout:.1f} s", start)
            finally:
                if proc.returncode is None:  # interrupted in the caller: never leak it
                    _kill_group(proc)
        result = None
        for line in _tail(out_path, 1 << 20).splitlines():
            if line.startswith(nonce):
                try:
                    result = json.loads(line[len(nonce) :])
                except ValueError:
                    continue
        if result is None:
            if rc is not None and rc < 0:
                reason = f"worker killed by signal {-rc}"
            else:
                reason = f"worker exited with code {rc} without a result"
            last = [ln for ln in _tail(err_path).splitlines() if ln.strip()]
            return _fail(reason + (f": {last[-1]}" if last else ""), start)
    seconds = time.perf_counter() - start
    if not result.get("ok"):
        return EvalResult(False, FAILURE_SCORE, None, _one_line(str(result.get("error"))), seconds)
    excess = float(result["excess"])
    return EvalResult(True, -excess, excess, None, seconds, tuple(result["bins"]))


def evaluate_many(
    sources: Sequence[str],
    items: np.ndarray,
    capacity: float,
    *,
    timeout: float = 10.0,
    func_name: str = "priority",
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    max_workers: int | None = None,
) -> list[EvalResult]:
    """:func:`evaluate_source` for each source, up to ``max_workers`` (default: CPU count,
    at most 8) subprocesses at a time; results are in the order of ``sources``."""
    items = _check_items(items, capacity)
    if not sources:
        return []
    workers = max_workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(workers, len(sources))) as pool:
        futures = [
            pool.submit(
                evaluate_source,
                src,
                items,
                capacity,
                timeout=timeout,
                func_name=func_name,
                memory_bytes=memory_bytes,
            )
            for src in sources
        ]
        return [f.result() for f in futures]
