"""Subprocess side of :mod:`jaxkit.ballad.sandbox` (NumPy only; never imports jax).

Run as ``python -I -c <boot> <repo_root> <numpy_dir> <job_dir> <result_fd>``, possibly as
the first process of fresh user, mount, PID and network namespaces (``unshare``). This
process is the *supervisor*: it reads ``job.json`` (then deletes it) and ``items.npy``,
builds the jail when the job asks for one (a tmpfs root holding read-only bind mounts of
only what Python needs, a small writable tmpfs at ``/tmp``, then ``pivot_root``), and forks
the *candidate* process. The candidate closes every descriptor but its two pipes and
stderr, sets its resource limits, drops every capability, and only then compiles and runs
the untrusted source. The packing loop runs in the supervisor: for each item it sends the
item and the bins that fit to the candidate and reads back one priority per bin, so all the
candidate can ever say is priorities. The supervisor writes the bin assignments as one
JSON line to ``result_fd``, which the candidate never holds; the parent rechecks them.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import platform
import signal
import struct
import sys

from jaxkit.ballad import _seccomp

_FSIZE = 16 * 1024**2  # bytes any file the candidate writes may grow to
_NOFILE = 32  # descriptors the candidate may hold
_MEMORY_LIMIT: list[int] = []  # the RLIMIT_AS that was set, for the MemoryError message

_MSG = struct.Struct("<cI")  # candidate -> supervisor: kind, payload length
_REQ = struct.Struct("<qd")  # supervisor -> candidate: number of bins, item

# Linux constants (linux/mount.h, linux/prctl.h, linux/capability.h, linux/securebits.h)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 1, 2, 4
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_PR_SET_SECUREBITS, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 28, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECURE_ALL = 0xEF  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE + locks
_CAP_VERSION_3 = 0x20080522
#: syscall numbers: pivot_root, capset, mount_setattr
_SYSCALLS = {"x86_64": (155, 126, 442), "aarch64": (41, 91, 442)}


class _BadOutput(Exception):
    """The priority function returned something unusable (message is the whole reason)."""


class JailError(Exception):
    """The jail could not be built (the run fails; the parent may fall back)."""


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


# ---------------------------------------------------------------------------------------
# Low-level helpers (libc through ctypes)
# ---------------------------------------------------------------------------------------

_LIBC: list = []


def _libc():
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(err)}")


def _prctl(option: int, arg: int = 0, what: str = "prctl") -> None:
    libc = _libc()
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    _check(libc.prctl(option, arg, 0, 0, 0), what)


def _mount(src, dst, fstype, flags: int, data=None) -> None:
    enc = [x.encode() if isinstance(x, str) else x for x in (src, dst, fstype, data)]
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_char_p]
    _check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {dst}")


def _read_only(path: str, nodev: bool = True) -> None:
    """Make the mount at ``path`` and every mount below it read-only, nosuid and (with
    ``nodev``) nodev."""
    nums = _SYSCALLS.get(platform.machine())
    if nums is not None:

        class MountAttr(ctypes.Structure):
            _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                        ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

        flags = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | (_MOUNT_ATTR_NODEV if nodev else 0)
        attr = MountAttr(flags, 0, 0, 0)
        libc = _libc()
        ret = libc.syscall(ctypes.c_long(nums[2]), ctypes.c_int(_AT_FDCWD), path.encode(),
                           ctypes.c_uint(_AT_RECURSIVE), ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)))
        if ret == 0:
            return
    # no mount_setattr (Linux < 5.12): remount the top mount, keeping its locked flags
    flags = os.statvfs(path).f_flag & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    flags |= _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | (_MS_NODEV if nodev else 0)
    _mount(None, path, None, flags)


def _bind(src: str, root: str, device: bool = False) -> None:
    """Bind ``src`` read-only at the same path under ``root`` (symlinks are copied); a
    ``device`` node stays usable (writes to a device ignore the read-only flag)."""
    dst = root + src
    if os.path.islink(src):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.lexists(dst):
            os.symlink(os.readlink(src), dst)
        return
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w"):
            pass
    _mount(src, dst, None, _MS_BIND | _MS_REC)
    _read_only(dst, nodev=not device)


def _enter_jail(jail: dict) -> None:
    """Build the jail's root under ``jail['root']`` and ``pivot_root`` into it.

    Must run as root of a fresh mount namespace (and user namespace, unless real root).
    Afterwards ``/`` is a read-only
    tmpfs holding read-only binds of ``jail['binds']`` and of a few device files, and
    ``/tmp`` a writable tmpfs of ``jail['tmp_bytes']``; nothing else of the host is visible.
    """
    nums = _SYSCALLS.get(platform.machine())
    if nums is None:
        raise JailError(f"no jail on {platform.machine()} (pivot_root/capset unknown)")
    root = jail["root"]
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    for src in jail["binds"]:
        if os.path.lexists(src):
            _bind(src, root)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "random", "urandom"):
        if os.path.exists("/dev/" + dev):
            _bind("/dev/" + dev, root, device=True)
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("tmpfs", root + "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={int(jail['tmp_bytes'])},nr_inodes=1024,mode=1777")
    os.chdir(root)
    libc = _libc()
    _check(libc.syscall(ctypes.c_long(nums[0]), b".", b"."), "pivot_root")
    _check(libc.umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.chdir("/tmp")


def _drop_privileges(uid: int | None) -> None:
    """No capabilities (bounding, ambient, effective, permitted, inheritable), no way back
    through execve, and no new privileges. With ``uid`` (the jail of a real root, which
    has no user namespace) the process also becomes that unprivileged user and group."""
    for cap in range(64):
        try:
            _prctl(_PR_CAPBSET_DROP, cap, "drop capability")
        except JailError:
            if cap < 38:  # CAP_LAST_CAP is at least 37 on every kernel with user namespaces
                raise
            break
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, "clear ambient capabilities")
    if uid is None:
        _prctl(_PR_SET_SECUREBITS, _SECURE_ALL, "securebits")
    else:  # leaving uid 0 clears the capability sets
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if {*os.getresuid(), *os.getresgid()} != {uid}:
            raise JailError(f"could not become uid {uid}")
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc().syscall(ctypes.c_long(_SYSCALLS[platform.machine()][1]), header, data),
           "capset")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")


def _set_limits(limits: dict) -> None:
    """Hard limits (so the candidate cannot raise them back); Python ignores SIGXFSZ, so
    writes past RLIMIT_FSIZE fail with EFBIG."""
    import resource

    table = [(resource.RLIMIT_FSIZE, _FSIZE), (resource.RLIMIT_NOFILE, _NOFILE),
             (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, limits["nproc"])]
    if limits.get("cpu_seconds"):
        table.append((resource.RLIMIT_CPU, int(limits["cpu_seconds"])))
    if limits.get("memory_bytes"):
        table.append((resource.RLIMIT_AS, int(limits["memory_bytes"])))
    for which, value in table:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))  # failure is fatal: no silent gaps
        if which == resource.RLIMIT_AS:
            _MEMORY_LIMIT.append(value)


def _close_all_but(keep: set[int]) -> None:
    top = max(max(keep) + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    low = 0
    for fd in sorted(keep) + [top]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------------------------------
# Candidate process
# ---------------------------------------------------------------------------------------


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


def _send(fd: int, kind: bytes, payload: bytes = b"") -> None:
    _write_all(fd, _MSG.pack(kind, len(payload)) + payload)


def _candidate(job: dict, rfd: int, wfd: int, np) -> None:
    """Body of the forked candidate process; never returns."""
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "pdeathsig")
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        _close_all_but({0, 1, 2, rfd, wfd})
        _set_limits(job["limits"])
        if job["jail"]:
            _drop_privileges(job["jail"].get("uid"))
        if job["seccomp"]:
            _seccomp.install()  # no sockets, exec, processes, ptrace, mounts: see _seccomp
    except BaseException as exc:
        _send(wfd, b"E", ("worker: cannot confine the candidate: " + _reason(exc)).encode())
        os._exit(0)
    sys.stdout = open(1, "w", closefd=False)
    func_name = job["func_name"]
    try:
        code = compile(job["source"], "<candidate>", "exec")
        namespace: dict = {"__name__": "candidate", "np": np, "numpy": np, "math": math}
        exec(code, namespace)  # runs confined: see the module docstring
    except BaseException as exc:  # report everything, incl. SystemExit
        _send(wfd, b"E", _reason(exc).encode())
        os._exit(0)
    os._exit(_serve(namespace, func_name, rfd, wfd, np))


def _serve(namespace: dict, func_name: str, rfd: int, wfd: int, np) -> int:
    func = namespace.get(func_name)
    if func is None:
        _send(wfd, b"E", f"no function named {func_name!r}".encode())
        return 0
    if not callable(func):
        _send(wfd, b"E", f"{func_name!r} is not callable".encode())
        return 0
    wrapped = _checked(func, np)
    _send(wfd, b"R")
    while True:
        try:
            n, item = _REQ.unpack(_read_exact(rfd, _REQ.size))
            bins = np.frombuffer(_read_exact(rfd, 8 * n), dtype=np.float64).copy()
        except EOFError:
            return 0
        try:
            out = wrapped(item, bins)
        except BaseException as exc:
            _send(wfd, b"E", _reason(exc).encode())
            return 0
        _send(wfd, b"P", np.ascontiguousarray(out, dtype="<f8").tobytes())


# ---------------------------------------------------------------------------------------
# Supervisor
# ---------------------------------------------------------------------------------------


class _CandidateFailed(Exception):
    """The candidate reported an error (message) or died (``died`` true)."""

    def __init__(self, message: str, died: bool = False):
        super().__init__(message)
        self.died = died


def _receive(fd: int, n: int | None):
    """Next message of the candidate: ``None`` for ready, the priorities for ``n`` bins."""
    try:
        kind, length = _MSG.unpack(_read_exact(fd, _MSG.size))
        if kind == b"E":
            raise _CandidateFailed(_read_exact(fd, min(length, 4096)).decode("utf-8", "replace"))
        if kind == b"R" and n is None and length == 0:
            return None
        if kind == b"P" and n is not None and length == 8 * n:
            return _read_exact(fd, length)
    except EOFError:
        raise _CandidateFailed("", died=True) from None
    raise _CandidateFailed("protocol error: unexpected message from the candidate")


def _pack(items, capacity: float, rfd: int, wfd: int, np) -> list[list[int]]:
    """Online bin packing of every row of ``items`` with the candidate's priorities (as
    :func:`jaxkit.ballad.reference.online_binpack`); returns the bin of every item."""
    assignments = []
    for row in items:
        bins = np.full(len(row), capacity, dtype=np.float64)
        chosen = []
        for item in row:
            item = float(item)
            valid = np.nonzero(bins - item >= 0)[0]
            _write_all(wfd, _REQ.pack(len(valid), item) + bins[valid].astype("<f8").tobytes())
            p = np.frombuffer(_receive(rfd, len(valid)), dtype="<f8")
            if not np.all(np.isfinite(p)):
                raise _CandidateFailed("priority returned non-finite values (NaN or inf)")
            best = int(valid[int(np.argmax(p))])
            bins[best] -= item
            chosen.append(best)
        assignments.append(chosen)
    return assignments


def _wait_status(pid: int) -> str:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"worker killed by signal {os.WTERMSIG(status)}"
    return f"worker exited with code {os.waitstatus_to_exitcode(status)} without a result"


def _supervise(job: dict, items, np) -> dict:
    if job["jail"]:
        _enter_jail(job["jail"])
    _prctl(_PR_SET_DUMPABLE, 0, "dumpable")  # no ptrace or /proc/<pid>/mem from the candidate
    to_cand_r, to_cand_w = os.pipe()
    from_cand_r, from_cand_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(to_cand_w)
            os.close(from_cand_r)
            _candidate(job, to_cand_r, from_cand_w, np)
        finally:  # whatever the candidate raised, it never returns into the supervisor
            os._exit(1)
    os.close(to_cand_r)
    os.close(from_cand_w)
    capacity = float(job["capacity"])
    filtered = bool(job["seccomp"]) and _seccomp.supported()
    job.clear()
    try:
        _receive(from_cand_r, None)
        assignments = _pack(items, capacity, from_cand_r, to_cand_w, np)
    except (_CandidateFailed, BrokenPipeError) as exc:
        died = isinstance(exc, BrokenPipeError) or exc.died
        if died:
            return {"ok": False, "error": _wait_status(pid), "died": True}
        os.kill(pid, signal.SIGKILL)
        return {"ok": False, "error": str(exc)}
    os.kill(pid, signal.SIGKILL)
    return {"ok": True, "assignments": assignments, "seccomp": filtered}


def main(job_dir: str, result_fd: str) -> None:
    """Evaluate the job in ``job_dir`` and write the result to descriptor ``result_fd``."""
    out = int(result_fd)
    job_path = os.path.join(job_dir, "job.json")
    with open(job_path) as fh:
        job = json.load(fh)
    os.remove(job_path)
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as namespace init: ignored from inside
        import numpy as np

        items = np.load(os.path.join(job_dir, "items.npy"), allow_pickle=False)
        result = _supervise(job, items, np)
    except JailError as exc:
        result = {"ok": False, "error": f"jail: {exc}", "jail_error": True}
    except BaseException as exc:
        result = {"ok": False, "error": "worker: " + _reason(exc)}
    try:
        _write_all(out, (json.dumps(result) + "\n").encode())
    finally:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[-2], sys.argv[-1])
