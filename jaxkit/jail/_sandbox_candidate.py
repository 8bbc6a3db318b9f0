"""The candidate process of the Ballad jail: a fresh interpreter that runs the untrusted
source and answers priorities, one item at a time.

The supervisor (:mod:`jaxkit.jail._sandbox_worker`) forks, confines the child (limits,
no capabilities, an empty working directory) and *executes* a new interpreter in it::

    python -I -S -B -c <boot> <this file> <numpy_dir> <in_fd> <out_fd> <filter 0|1>

so the untrusted code starts in a process image that never held anything of the
supervisor or the parent: walking its frames, ``gc.get_objects()`` or every module's
globals finds only what this process was sent, which is the source and, one request at a
time, the current item (and, per instance, the number of bins and their capacity). No
future item exists in this process until the supervisor sends it, which it does only
after the previous answer.

Standard library and NumPy only, and no package imports: in the jail this file and
``_seccomp.py`` beside it are the only files of jaxkit bound into the candidate's root,
and they are loaded by path. Before the untrusted source is compiled, the process
installs the system-call filter and reports whether it is on (message ``S``), so the
first message is always written by this trusted code.

Messages, candidate to supervisor: one kind byte and a little-endian ``u32`` length, then
the payload: ``S`` (``b"1"`` filter on, ``b"0"`` off), ``R`` (ready: the source ran and
defines the function), ``B`` (the ``i64`` index of the bin chosen for the item: the first
maximal priority), ``E`` (a reason, UTF-8). Supervisor to candidate: ``u32`` length and
the job as JSON (``source``, ``func_name``), then fixed-size requests: ``N`` with the
number of bins and their capacity (a new instance), ``I`` with an item. (The forked child
sends ``L``, its Landlock ABI, before it executes this interpreter.)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import struct
import sys

MSG = struct.Struct("<cI")  # candidate -> supervisor: kind, payload length
REQ = struct.Struct("<cqd")  # supervisor -> candidate: N (bins, capacity) or I (0, item)
BIN = struct.Struct("<q")  # candidate -> supervisor: the chosen bin (payload of B)
LEN = struct.Struct("<I")  # supervisor -> candidate: length of the job
MAX_REASON = 4096  # characters of an error the candidate sends (the parent keeps ~300)
_MEMORY_LIMIT: list[int] = []  # RLIMIT_AS, for the MemoryError message (read at start)


class BadOutput(Exception):
    """The priority function returned something unusable (message is the whole reason)."""


def _text(value) -> str:
    """``str(value)``, or a placeholder when the object's ``__str__`` fails or lies."""
    try:
        text = str(value)
        if not isinstance(text, str):
            raise TypeError
    except BaseException:  # noqa: BLE001 - a candidate's __str__ may raise anything
        return "<unprintable>"
    return text


def reason(exc: BaseException) -> str:
    """One readable reason for ``exc`` (never raises; lone surrogates become ``\\udXXX``
    escapes so the text can always be encoded)."""
    try:
        if isinstance(exc, BadOutput):
            text = _text(exc)
        elif isinstance(exc, SyntaxError):
            text = f"{type(exc).__name__}: {_text(exc.msg)} (line {_text(exc.lineno)})"
        elif isinstance(exc, SystemExit):
            code = exc.code
            shown = repr(code) if isinstance(code, (int, str, type(None))) else "..."
            text = f"SystemExit: candidate called exit({shown})"
        else:
            text = _text(exc)
            if isinstance(exc, MemoryError) and not text and _MEMORY_LIMIT:
                text = f"out of memory (limit {_MEMORY_LIMIT[0] / 1024**3:.1f} GiB)"
            name = _text(type(exc).__name__)
            text = f"{name}: {text}" if text else name
    except BaseException:  # noqa: BLE001
        text = "<unprintable error>"
    text = text[:MAX_REASON]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def send(fd: int, kind: bytes, payload: bytes | str = b"") -> None:
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "backslashreplace")
    write_all(fd, MSG.pack(kind, len(payload)) + payload)


def _checked(func, np):
    """Wrap ``func`` so a bad return value raises :class:`BadOutput` with a clear reason."""

    def wrapper(item, bins):
        out = func(item, bins)
        try:
            arr = np.asarray(out)
        except Exception as exc:  # exotic objects
            raise BadOutput(f"priority returned {type(out).__name__}, expected an array") from exc
        if not (np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)):
            raise BadOutput(
                f"priority returned {type(out).__name__} of dtype {arr.dtype}, "
                "expected a numeric array"
            )
        if arr.shape != bins.shape:
            raise BadOutput(f"priority returned shape {arr.shape}, expected {bins.shape}")
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise BadOutput("priority returned non-finite values (NaN or inf)")
        return arr

    return wrapper


def _serve(namespace: dict, func_name: str, rfd: int, wfd: int, np) -> None:
    """Answer the supervisor: ``N`` starts an instance of ``n`` empty bins of the given
    capacity; for each item ``I`` the priority function sees the item and the remaining
    capacities of the bins it fits in, in index order (as
    :func:`jaxkit.ballad.reference.online_binpack`), and the bin of the first maximal
    priority is sent back. The supervisor keeps its own copy of the bins and refuses a
    bin the item does not fit in, so this bookkeeping, which the untrusted code could
    tamper with, can only ever hurt the candidate itself."""
    func = namespace.get(func_name)
    if func is None:
        send(wfd, b"E", f"no function named {func_name!r}")
        return
    if not callable(func):
        send(wfd, b"E", f"{func_name!r} is not callable")
        return
    wrapped = _checked(func, np)
    send(wfd, b"R")
    rooms = np.zeros(0)
    while True:
        try:
            kind, n, value = REQ.unpack(read_exact(rfd, REQ.size))
        except EOFError:
            return
        if kind == b"N":
            rooms = np.full(n, value, dtype=np.float64)
            continue
        item = value
        valid = np.nonzero(rooms - item >= 0)[0]
        try:
            out = wrapped(item, rooms[valid])
        except BaseException as exc:  # noqa: BLE001 - every failure is the candidate's
            send(wfd, b"E", reason(exc))
            return
        best = int(valid[int(np.argmax(out))])
        rooms[best] -= item
        send(wfd, b"B", BIN.pack(best))


def _load_seccomp():
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_seccomp.py")
    spec = importlib.util.spec_from_file_location("_jaxkit_seccomp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(numpy_dir: str, in_fd: str, out_fd: str, use_filter: str) -> None:
    """Body of the candidate process (never returns)."""
    rfd, wfd = int(in_fd), int(out_fd)
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            _MEMORY_LIMIT.append(limit)
        if numpy_dir not in sys.path:
            sys.path.append(numpy_dir)  # appended: it cannot shadow the standard library
        import numpy as np

        filtered = _load_seccomp().install() if use_filter == "1" else False
    except BaseException as exc:  # noqa: BLE001
        send(wfd, b"E", "worker: cannot confine the candidate: " + reason(exc))
        os._exit(0)
    send(wfd, b"S", b"1" if filtered else b"0")  # before any untrusted code runs
    try:
        job = json.loads(read_exact(rfd, LEN.unpack(read_exact(rfd, LEN.size))[0]))
        source, func_name = job["source"], job["func_name"]
        del job
    except BaseException as exc:  # noqa: BLE001
        send(wfd, b"E", "worker: no job for the candidate: " + reason(exc))
        os._exit(0)
    try:
        code = compile(source, "<candidate>", "exec")
        del source
        namespace: dict = {"__name__": "candidate", "np": np, "numpy": np, "math": math}
        exec(code, namespace)  # runs confined: see the module docstring
    except BaseException as exc:  # noqa: BLE001 - report everything, incl. SystemExit
        send(wfd, b"E", reason(exc))
        os._exit(0)
    try:
        _serve(namespace, func_name, rfd, wfd, np)
    except BaseException as exc:  # noqa: BLE001 - e.g. out of memory between two calls
        with contextlib.suppress(BaseException):  # a broken pipe: the supervisor has gone
            send(wfd, b"E", reason(exc))
    os._exit(0)


#: the ``-c`` program that loads this file by path and runs :func:`main`
BOOT = ("import sys, importlib.util as u; s = u.spec_from_file_location('_jaxkit_candidate', "
        "sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); del s, u; "
        "m.main(*sys.argv[2:6])")
