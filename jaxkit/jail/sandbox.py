"""Evaluate untrusted Python-source heuristics in a jail: separate processes, Linux
namespaces, no capabilities, resource limits, and a score the parent computes itself.

A candidate is the source of a FunSearch-style ``priority(item, bins) -> np.ndarray`` for
online bin packing (see :func:`jaxkit.ballad.reference.online_binpack`). Each evaluation
starts a fresh ``python -I`` *supervisor* (standard library only, no NumPy, no JAX) with
an empty environment (only thread pins for BLAS; no API keys or other secrets reach it),
which starts the *candidate* process that runs the untrusted code: a fork that is confined
and then *executes a fresh interpreter* (:mod:`jaxkit.jail._sandbox_candidate`), so the
untrusted code never runs in a process image that held the instances, the job or anything
of the parent or the supervisor. The supervisor runs the packing loop and sends the
candidate one item at a time; the candidate's interpreter calls the priority function on
the item and the remaining capacities of the bins it fits in (exactly as
``online_binpack`` does) and answers with the bin of the first maximal priority; the
supervisor checks in its own copy of the bins that the item fits there and only then
sends the next item. So the candidate sees one item at a time (walking its frames,
``gc.get_objects()`` or every module's globals finds no future item: it does not exist in
that process yet) and can only ever answer with a bin that holds the item. The
supervisor writes the bin assignment of every item to a pipe the candidate never holds;
the parent checks the assignments against the instance (every bin index in range, no bin
over capacity, at least the L1 bound of bins) and computes the bins used and the score
itself, so no score the candidate reports is ever trusted, and impossible ones are
rejected. The fresh interpreter costs one interpreter start-up with NumPy per evaluation
(one per candidate, not per item; the supervisor no longer imports NumPy, so the total is
within about 0.1 s of a forked candidate); see ``_sandbox_candidate`` for the protocol.

Isolation levels (``EvalResult.isolation`` says which one a run got):

``"namespaces"`` (the default wherever ``unshare`` from util-linux works, root or not)
    The supervisor is the first process of fresh user, mount, PID and network namespaces
    (``unshare --user --map-root-user --net --pid --fork --kill-child --mount``). It
    builds a new root: a read-only tmpfs holding read-only bind mounts of only the shared
    libraries (``/usr/lib``...) and Python's standard library and site-packages, the
    devices ``null``, ``zero``, ``random`` and ``urandom``, and a small writable tmpfs
    at ``/tmp`` (the only writable path, the working directory); then ``pivot_root`` and
    the host's tree is detached. There is no ``/proc``, no ``/dev/shm``, no shell, no home
    directory, no repository. The network namespace has only a loopback interface that
    is down, so no socket reaches anything (127.0.0.1 included). The candidate process
    drops every capability (bounding set, ambient, effective, permitted; securebits
    locked, so executing its interpreter gives none back; ``no_new_privs``) before the
    untrusted source is compiled, so it cannot undo
    the read-only mounts, and the supervisor is not dumpable, so the candidate cannot
    ptrace it or read its memory. At the deadline the parent kills ``unshare``, whose
    child (the namespace's init) dies with it (``--kill-child``), which makes the kernel
    kill every process of the PID namespace, ``setsid`` ones included. Limits of the
    candidate (hard, so it cannot raise them): RLIMIT_AS (``memory_bytes``), RLIMIT_CPU
    (the timeout plus one second), RLIMIT_NPROC (8 tasks of the namespace's user, so a
    fork bomb stops there), RLIMIT_FSIZE (16 MiB), RLIMIT_NOFILE (32), no core dumps.
    The interpreter, ``libpython`` and the two files of jaxkit the candidate's
    interpreter loads (``_sandbox_candidate.py``, ``_seccomp.py``) are bound read-only
    too; the rest of the repository is not.

``"rlimits"`` (fallback where user namespaces are unavailable: no ``unshare``, a kernel or
    container that forbids unprivileged user namespaces, an unknown CPU architecture)
    The same two processes, empty environment, resource limits (RLIMIT_NPROC of 1, so the
    candidate cannot fork), a non-dumpable supervisor, an empty working directory (the job
    files are deleted before the candidate starts), ``PR_SET_PDEATHSIG`` and the group
    kill at the deadline, and the system-call filter below, which this level requires (it
    is what keeps the candidate off the network, from programs and from signalling other
    processes). Where the kernel has Landlock (Linux 5.13 and later), the candidate runs
    in a Landlock domain (:mod:`jaxkit.jail._landlock`, ``EvalResult.landlock``): no
    access to the memory of any process outside it (``/proc/PID/mem`` of the jaxkit
    process, which holds every instance), no writes outside its working directory. It
    can still read the user's files (so also any copy of the test instances kept on
    disk); without Landlock it can also write them (``$HOME`` included) and, where Yama's
    ``ptrace_scope`` is 0, read the memory of the user's processes. The first evaluation
    at this level warns (a ``RuntimeWarning``, once per process). **This level refuses to
    run as root** (and where the architecture has no filter): :class:`SandboxError` says
    which isolation is missing, before anything runs.

``isolation="auto"`` (the default of :func:`evaluate_source`) probes ``"namespaces"`` once
per process with a trivial job and falls back to ``"rlimits"`` with the warning;
``isolation="namespaces"`` never falls back (a run where the jail cannot be built fails).
At both levels the candidate process runs under a seccomp-BPF system-call filter
(:mod:`jaxkit.jail._seccomp`, installed through ``prctl`` with no binding needed, on
x86-64 and AArch64; ``EvalResult.seccomp`` says whether it was on, for failed runs too, as
the candidate's interpreter reported it before any untrusted code ran): no sockets of any
kind, no ``execve``, no new processes (threads only), no signals to any process but its
own (``kill(-1, ...)``, its group, its parent: ``EPERM``), no ``ptrace`` or reading other
processes' memory, no namespaces or mounts, no ``bpf`` / ``io_uring`` / ``userfaultfd`` /
``perf_event_open`` / keyrings, and system calls of another ABI kill it. At the
``"rlimits"`` level this is what keeps the candidate off the network, from starting
programs and from signalling the user's processes; it can still read the user's files
there (and, without Landlock, write them).
Since the filter lets the candidate start threads but no processes, its RLIMIT_AS bounds
all the memory the untrusted code can take (threads share the address space); only with
``syscall_filter=False`` or on an architecture without a filter is the limit per process
(a cgroup for the whole tree would need privileges).

Every failure is reported as ``ok=False`` with a one-line reason and
``score = FAILURE_SCORE``; nothing the candidate does raises in the caller. Text a
candidate wrote (its exception, the last line of its stderr) reaches the reason only
through :func:`clean_text`: terminal escape sequences (clear screen, OSC-8 links...)
removed, other control and bidirectional-format characters and lone surrogates shown as
``\\xNN`` / ``\\uXXXX`` escapes, so it is safe to print on a terminal or in a report.
"""

from __future__ import annotations

import json
import math
import os
import platform
import secrets
import selectors
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _landlock, _seccomp
from ._sandbox_check import _check_items, _Impossible, _score_packing
from ._sandbox_procs import _kill_group
from ._sandbox_text import clean_text

__all__ = ["FAILURE_SCORE", "ISOLATION_LEVELS", "EvalResult", "SandboxError", "clean_text",
           "evaluate_source", "evaluate_many", "isolation_level"]

#: Score of any failed evaluation. ``-inf`` sorts below every real score (real scores are
#: ``-excess`` with ``excess >= 0``); code that averages scores must filter on ``ok`` first.
FAILURE_SCORE: float = float("-inf")

#: Default address-space limit of the candidate process (bytes); ``None`` disables it.
DEFAULT_MEMORY_BYTES: int | None = 2 * 1024**3

#: Isolation levels, strongest first (see the module docstring).
ISOLATION_LEVELS = ("namespaces", "rlimits")

_MAX_ERROR_CHARS = 300
_MAX_RESULT_BYTES = 64 * 1024**2  # the supervisor's result line is read up to this size
_TMP_BYTES = 64 * 1024**2  # size of the jail's writable /tmp
_ROOT = str(Path(__file__).resolve().parents[2])  # directory that contains ``jaxkit/``
# numpy's own directory is appended so the worker finds it even where the parent got it
# from PYTHONPATH (which ``-I`` ignores); appended, it cannot shadow the standard library.
_NUMPY_DIR = str(Path(np.__file__).resolve().parents[1])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "sys.argv[2] in sys.path or sys.path.append(sys.argv[2]); "
    "from jaxkit.jail._sandbox_worker import main; main(sys.argv[3], sys.argv[4])"
)
# The whole environment of the worker. One BLAS thread: the arrays are tiny, and threads
# would multiply the virtual-memory reservations that count against RLIMIT_AS.
_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# unshare flags of the two ways to build the jail: "userns" for anyone (the candidate is
# root of a user namespace, without capabilities), "root" for a real root (no user
# namespace; the candidate becomes a fresh unprivileged uid, so RLIMIT_NPROC binds it:
# the kernel never applies RLIMIT_NPROC to processes of the real root)
_NS_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount")
_FLAVOURS = {"userns": ("--user", "--map-root-user", *_NS_FLAGS), "root": _NS_FLAGS}
_NPROC_FALLBACK = 1
_NPROC_JAIL = 8  # userns: unshare, supervisor, candidate and 5 more; root: candidate and 7
# shared libraries the interpreter may still dlopen once jailed (extension modules)
_LIB_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64",
             "/usr/libx32", "/etc/ld.so.cache")


@dataclass(frozen=True)
class EvalResult:
    """Outcome of one sandboxed evaluation.

    ``score`` is ``-excess`` (higher is better) or :data:`FAILURE_SCORE`; ``excess`` is the
    mean percentage of bins above the L1 bound over the instances; ``error`` a one-line
    reason when ``ok`` is false; ``seconds`` the wall time of the whole evaluation;
    ``bins`` the bins used per instance (empty on failure), counted by the parent from the
    candidate's bin assignments; ``isolation`` the level the run got (one of
    :data:`ISOLATION_LEVELS`, empty if it never started); ``seccomp`` whether the
    candidate ran under the system-call filter of :mod:`jaxkit.jail._seccomp` (as its
    interpreter reported before any untrusted code ran; also for a failed run, false
    where the candidate never got that far); ``landlock`` whether it ran in the Landlock
    domain of :mod:`jaxkit.jail._landlock` (the ``"rlimits"`` level, where the kernel
    has Landlock).
    """

    ok: bool
    score: float
    excess: float | None
    error: str | None
    seconds: float
    bins: tuple[int, ...] = field(default=())
    isolation: str = ""
    seccomp: bool = False
    landlock: bool = False


class SandboxError(RuntimeError):
    """The sandbox refuses to run candidates here (the message says which isolation is
    missing); raised before any candidate code runs."""


def _one_line(text: str) -> str:
    line = " ".join(clean_text(text).split())
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."


def _fail(error: str, start: float, isolation: str = "", status: dict | None = None
          ) -> EvalResult:
    status = status or {}
    return EvalResult(False, FAILURE_SCORE, None, _one_line(error), time.perf_counter() - start,
                      isolation=isolation, seccomp=status.get("seccomp") is True,
                      landlock=status.get("landlock") is True)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------
# Isolation level
# ---------------------------------------------------------------------------------------

_LEVEL_LOCK = threading.Lock()
_FLAVOUR: list[str | None] = []  # the probed jail flavour (None: no jail works), once known
_REASON: list[str] = []  # why no flavour works
_WARNED: list[bool] = []
_PROBE_SOURCE = "def priority(item, bins):\n    return -bins\n"


def _unshare() -> str | None:
    return shutil.which("unshare") or next(
        (p for p in ("/usr/bin/unshare", "/bin/unshare") if os.access(p, os.X_OK)), None)


def _jail_binds() -> list[str]:
    """Host paths bound read-only into the jail: shared libraries, the standard library,
    site-packages and NumPy; nested ones are dropped (the outer bind holds them)."""
    paths = set(_LIB_DIRS) | {_NUMPY_DIR}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.update({path, os.path.realpath(path)})
    for path in list(sys.path):
        if path and os.path.isdir(path) and "site-packages" in path:
            paths.update({path, os.path.realpath(path)})
    paths = {os.path.normpath(p) for p in paths if os.path.isabs(p)}
    out = []
    for path in sorted(paths):
        if not any(path.startswith(outer.rstrip("/") + "/") for outer in out):
            out.append(path)
    return out


def _flavour() -> str | None:
    """The first jail flavour that evaluates a trivial candidate (probed once per process;
    warns once when none does)."""
    with _LEVEL_LOCK:
        if not _FLAVOUR:
            reason, found = None, None
            if sys.platform != "linux":
                reason = f"not Linux ({sys.platform})"
            elif _unshare() is None:
                reason = "no unshare (util-linux) on PATH"
            else:
                for flavour in (["root", "userns"] if os.geteuid() == 0 else ["userns"]):
                    res = _run(_PROBE_SOURCE, np.array([[1.0, 2.0]]), 4.0, timeout=30.0,
                               func_name="priority", memory_bytes=None, level="namespaces",
                               flavour=flavour)
                    if res.ok:
                        found = flavour
                        break
                    reason = res.error
            if found is None:
                _REASON.append(f"Linux namespaces are unavailable ({reason})")
            _FLAVOUR.append(found)
        return _FLAVOUR[0]


def _why_rlimits() -> str:
    with _LEVEL_LOCK:
        return _REASON[0] if _REASON else "isolation='rlimits' was requested"


def _refuse_rlimits(syscall_filter: bool) -> None:
    """Raise :class:`SandboxError` where the ``"rlimits"`` level must not run: as root
    (a candidate could then write anywhere, and signal or read any process), or without
    the system-call filter on this architecture (nothing would keep it off the network or
    from signalling the user's processes). ``syscall_filter=False`` is the tests' switch
    to reach the layers under the filter; it is allowed for a non-root user only."""
    missing = ("the namespace jail (user, mount, PID and network namespaces; "
               f"{_why_rlimits()})")
    if os.geteuid() == 0:
        raise SandboxError(
            "jaxkit.jail.sandbox: refusing to run candidate code as root with resource "
            f"limits only (isolation='rlimits'): missing {missing}. Run as an unprivileged "
            "user, or where 'unshare --user --map-root-user --net --pid --fork --mount' "
            "works.")
    if syscall_filter and not _seccomp.supported():
        raise SandboxError(
            "jaxkit.jail.sandbox: refusing to run candidate code with resource limits "
            f"only (isolation='rlimits'): missing {missing} and the seccomp system-call "
            f"filter (none for this architecture, {platform.machine()}).")


def _warn_rlimits() -> None:
    """Warn, once per process, that a run gets the ``"rlimits"`` level only."""
    with _LEVEL_LOCK:
        if _WARNED:
            return
        _WARNED.append(True)
    files = ("CAN read your files (Landlock confines its writes to its own directory)"
             if _landlock.abi_version() else
             "CAN read and write your files (no Landlock in this kernel)")
    warnings.warn(
        f"jaxkit.jail.sandbox: {_why_rlimits()}; candidate code runs with resource limits "
        f"and the system-call filter only and {files} (isolation='rlimits')",
        RuntimeWarning, stacklevel=4)


def isolation_level() -> str:
    """The level ``isolation="auto"`` gives on this machine (probed once per process)."""
    return "rlimits" if _flavour() is None else "namespaces"


# ---------------------------------------------------------------------------------------
# Running one evaluation
# ---------------------------------------------------------------------------------------


def _read_result(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Read ``fd`` to EOF (at most ``_MAX_RESULT_BYTES``) or until ``deadline``; returns
    the bytes and whether EOF was reached."""
    chunks, size = [], 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while size <= _MAX_RESULT_BYTES:
            left = deadline - time.perf_counter()
            if left <= 0:
                return b"".join(chunks), False
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks), True  # oversized: cannot parse, treated as garbage


def _parse_lines(data: bytes) -> tuple[dict | None, dict]:
    """The supervisor's result (its last line with ``ok``, ``None`` if there is none) and
    the status it reported before it (``{"seccomp": ...}``)."""
    result, status = None, {}
    for line in data.split(b"\n"):
        try:
            obj = json.loads(line.decode())
        except ValueError:
            continue
        if isinstance(obj, dict):
            if "ok" in obj:
                result = obj
            else:
                status.update(obj)
    if result is not None:
        status.update({k: v for k, v in result.items() if k in ("seccomp", "landlock")})
    return result, status


def _run(source: str, items: np.ndarray, capacity: float, *, timeout: float,
         func_name: str, memory_bytes: int | None, level: str,
         flavour: str | None = None, syscall_filter: bool = True) -> EvalResult:
    start = time.perf_counter()
    deadline = start + timeout
    jail = level == "namespaces"
    if not jail:
        _refuse_rlimits(syscall_filter)
    if jail and flavour is None:
        flavour = _flavour() or "userns"  # no flavour works: this run fails as it should
    with tempfile.TemporaryDirectory(prefix="jaxkit-sandbox-") as tmp:
        job_dir = Path(tmp)
        (job_dir / "items.f64").write_bytes(np.ascontiguousarray(items, "<f8").tobytes())
        (job_dir / "root").mkdir()
        (job_dir / "work").mkdir()
        job = {
            "source": source,
            "capacity": float(capacity),
            "func_name": func_name,
            "seccomp": bool(syscall_filter),
            "numpy_dir": _NUMPY_DIR,
            "n_items": int(items.shape[1]),
            "workdir": str(job_dir / "work"),
            "limits": {
                "memory_bytes": memory_bytes,
                "cpu_seconds": math.ceil(timeout) + 1,
                "nproc": _NPROC_JAIL if jail else _NPROC_FALLBACK,
            },
            "jail": {
                "root": str(job_dir / "root"),
                "binds": _jail_binds(),
                "tmp_bytes": _TMP_BYTES,
                # a fresh uid per run, so RLIMIT_NPROC counts this run's processes only
                "uid": 2**20 + secrets.randbelow(2**30) if flavour == "root" else None,
            } if jail else None,
        }
        (job_dir / "job.json").write_text(json.dumps(job))
        err_path = job_dir / "stderr"
        cmd = [sys.executable, "-I", "-c", _BOOT, _ROOT, _NUMPY_DIR, str(job_dir)]
        if jail:
            unshare = _unshare()
            if unshare is None:
                return _fail("jail: no unshare (util-linux) on PATH", start, level)
            cmd = [unshare, *_FLAVOURS[flavour], "--", *cmd]
        read_fd, write_fd = os.pipe()
        try:
            with open(err_path, "wb") as err:
                try:
                    proc = subprocess.Popen(
                        [*cmd, str(write_fd)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        cwd=tmp,
                        env=dict(_ENV),
                        start_new_session=True,
                        pass_fds=(write_fd,),
                    )
                except OSError as exc:
                    return _fail(f"could not start worker: {exc}", start, level)
                finally:
                    os.close(write_fd)
                try:
                    data, eof = _read_result(read_fd, deadline)
                    rc = proc.wait(timeout=max(0.05, deadline - time.perf_counter())) \
                        if eof else None
                except subprocess.TimeoutExpired:
                    rc = None
                finally:
                    if proc.returncode is None:  # deadline, or interrupted in the caller
                        _kill_group(proc)
        finally:
            os.close(read_fd)
        result, status = _parse_lines(data)
        if rc is None:
            return _fail(f"timeout after {timeout:.1f} s", start, level, status)
        if result is None:
            reason = (f"worker killed by signal {-rc}" if rc < 0
                      else f"worker exited with code {rc} without a result")
            last = [ln for ln in _tail(err_path).splitlines() if ln.strip()]
            return _fail(reason + (f": {last[-1]}" if last else ""), start, level, status)
        if not result.get("ok"):
            error = str(result.get("error"))
            if result.get("died"):
                last = [ln for ln in _tail(err_path).splitlines() if ln.strip()]
                error += f": {last[-1]}" if last else ""
            return _fail(error, start, level, status)
    try:
        bins, excess = _score_packing(result.get("assignments"), items, capacity)
    except _Impossible as exc:
        return _fail(f"impossible result rejected: {exc}", start, level, status)
    return EvalResult(True, -excess, excess, None, time.perf_counter() - start, bins, level,
                      status.get("seccomp") is True, status.get("landlock") is True)


def _resolve(isolation: str, syscall_filter: bool = True) -> str:
    if isolation == "auto":
        level = isolation_level()
    elif isolation in ISOLATION_LEVELS:
        level = isolation
    else:
        raise ValueError(f"isolation must be 'auto' or one of {ISOLATION_LEVELS}, "
                         f"got {isolation!r}")
    if level == "rlimits":
        _refuse_rlimits(syscall_filter)
        _warn_rlimits()
    return level


def evaluate_source(
    source: str,
    items: np.ndarray,
    capacity: float,
    *,
    timeout: float = 10.0,
    func_name: str = "priority",
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    isolation: str = "auto",
    syscall_filter: bool = True,
) -> EvalResult:
    """Run ``source``'s ``func_name`` as an online bin-packing priority on every row of
    ``items`` (shape ``(n_instances, n_items)``; a 1-D array is one instance) in the jail.

    Args:
        source: Python source defining ``func_name(item, bins) -> array`` (``np`` and
            ``math`` are predefined).
        items: item sizes, each in ``(0, capacity]``.
        capacity: bin capacity.
        timeout: wall-clock seconds for the whole evaluation, start-up included.
        func_name: the priority function's name.
        memory_bytes: address-space limit of the candidate process (``None``: none).
        isolation: ``"auto"`` (the strongest level available, see the module
            docstring), ``"namespaces"`` or ``"rlimits"``.
        syscall_filter: run the candidate under the seccomp filter (the default). Turn it
            off only to test the jail's other layers, which the filter otherwise shields.

    Returns:
        An :class:`EvalResult`. Never raises for anything the candidate does; bad
        ``items`` / ``capacity`` / ``isolation`` (the caller's fault) raise ValueError.

    Raises:
        SandboxError: the run would get the ``"rlimits"`` level as root, or without a
            system-call filter (the message says which isolation is missing).
    """
    items = _check_items(items, capacity)
    level = _resolve(isolation, syscall_filter)
    return _run(source, items, capacity, timeout=timeout, func_name=func_name,
                memory_bytes=memory_bytes, level=level, syscall_filter=syscall_filter)


def evaluate_many(
    sources: Sequence[str],
    items: np.ndarray,
    capacity: float,
    *,
    timeout: float = 10.0,
    func_name: str = "priority",
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    max_workers: int | None = None,
    isolation: str = "auto",
) -> list[EvalResult]:
    """:func:`evaluate_source` for each source, up to ``max_workers`` (default: CPU count,
    at most 8) jails at a time; results are in the order of ``sources``. Raises
    :class:`SandboxError` as :func:`evaluate_source` does, before anything runs."""
    items = _check_items(items, capacity)
    if not sources:
        return []
    level = _resolve(isolation)
    workers = max_workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(workers, len(sources))) as pool:
        futures = [
            pool.submit(
                _run,
                src,
                items,
                capacity,
                timeout=timeout,
                func_name=func_name,
                memory_bytes=memory_bytes,
                level=level,
            )
            for src in sources
        ]
        return [f.result() for f in futures]
