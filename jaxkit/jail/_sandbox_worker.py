"""Subprocess side of :mod:`jaxkit.jail.sandbox` (standard library only: no NumPy, no jax).

Run as ``python -I -c <boot> <repo_root> <numpy_dir> <job_dir> <result_fd>``, possibly as
the first process of fresh user, mount, PID and network namespaces (``unshare``). This
process is the *supervisor*: it reads ``job.json`` and ``items.f64`` and deletes both,
builds the jail when the job asks for one (a tmpfs root holding read-only bind mounts of
only what Python needs, a small writable tmpfs at ``/tmp``, then ``pivot_root``), and
starts the *candidate*: it forks, and the child closes every descriptor but its two pipes
and stderr, sets its resource limits, drops every capability (in the jail) or enters a
Landlock domain (:mod:`jaxkit.jail._landlock`, at the ``"rlimits"`` level where the
kernel has Landlock), reports which, and then *executes* a fresh interpreter
(:mod:`jaxkit.jail._sandbox_candidate`), so the untrusted code never runs in an image
that held the job or the instances. The candidate installs the system-call filter, says
so, and only then receives and compiles the untrusted source. The packing loop runs in
the supervisor: it sends one item at a time and reads back the bin the candidate chose
(by its priorities over the bins the item fits in), checks that the bin holds the item in
its own copy of the bins, and only then sends the next item; so all the candidate can
ever see is one item at a time and all it can say is a bin that fits. The supervisor
writes JSON lines to ``result_fd``, which the candidate never holds: ``{"seccomp": ...,
"landlock": ...}`` as soon as the candidate reported its confinement, then the result
(the bin assignments, which the parent rechecks).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import signal
import struct
import sys

from jaxkit.jail import _landlock
from jaxkit.jail import _sandbox_candidate as C

_FSIZE = 16 * 1024**2  # bytes any file the candidate writes may grow to
_NOFILE = 32  # descriptors the candidate may hold
_CANDIDATE_FILES = tuple(  # the only files of jaxkit the candidate's interpreter loads
    os.path.realpath(os.path.join(os.path.dirname(__file__), name))
    for name in ("_sandbox_candidate.py", "_seccomp.py"))

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




class JailError(Exception):
    """The jail could not be built (the run fails; the parent may fall back)."""


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
    # the private /tmp first, the binds after: a bind under /tmp (an install or a clone
    # there) would otherwise be hidden by the tmpfs mounted over it
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("tmpfs", root + "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={int(jail['tmp_bytes'])},nr_inodes=1024,mode=1777")
    for src in jail["binds"]:
        if os.path.lexists(src):
            _bind(src, root)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "random", "urandom"):
        if os.path.exists("/dev/" + dev):
            _bind("/dev/" + dev, root, device=True)
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


def _close_all_but(keep: set[int]) -> None:
    top = max(max(keep) + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    low = 0
    for fd in sorted(keep) + [top]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


def _mapped_files() -> list[str]:
    """Regular files this interpreter has mapped (its executable, ``libpython``, libc and
    the other shared libraries), so the fresh interpreter of the candidate finds them in
    the jail wherever Python is installed."""
    found = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and os.path.isfile(parts[5]):
                    found.add(parts[5])
    except OSError:
        pass
    return sorted(found)


def _file_binds(dirs: list[str], files) -> list[str]:
    """``files`` that no directory of ``dirs`` already holds."""
    return [f for f in sorted(set(files))
            if not any(f.startswith(d.rstrip("/") + "/") for d in dirs)]


# ---------------------------------------------------------------------------------------
# Candidate process (until it executes a fresh interpreter)
# ---------------------------------------------------------------------------------------


def _start_candidate(job: dict, rfd: int, wfd: int, argv: list[str]) -> None:
    """Body of the forked child: confine it and execute the fresh candidate interpreter
    ``argv``; never returns. Limits and privileges are set here (they survive
    ``execve``), the system-call filter by the new interpreter (it refuses ``execve``)."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        _close_all_but({0, 1, 2, rfd, wfd})
        for fd in (rfd, wfd):
            os.set_inheritable(fd, True)
        if not job["jail"]:
            os.chdir(job["workdir"])  # an empty directory (in the jail: its private /tmp)
        _set_limits(job["limits"])
        if job["jail"]:
            _drop_privileges(job["jail"].get("uid"))
            abi = 0
        else:  # no namespaces: no access to other processes, writes in its directory only
            abi = _landlock.restrict(job["workdir"])
        # after any change of uid, which would clear it; execve keeps it
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "pdeathsig")
        C.send(wfd, b"L", bytes([min(abi, 255)]))
        os.execve(argv[0], argv, dict(os.environ))
    except BaseException as exc:  # noqa: BLE001
        C.send(wfd, b"E", "worker: cannot start the candidate: " + C.reason(exc))
    os._exit(0)


# ---------------------------------------------------------------------------------------
# Supervisor
# ---------------------------------------------------------------------------------------


class _CandidateFailed(Exception):
    """The candidate reported an error (message) or died (``died`` true)."""

    def __init__(self, message: str, died: bool = False):
        super().__init__(message)
        self.died = died


def _receive(fd: int, want: bytes):
    """The candidate's next message, which must be of kind ``want``: ``L`` (the Landlock
    ABI its confinement used, 0 for none), ``S`` (whether the filter is on), ``R``
    (``None``) or ``B`` (the payload: the chosen bin)."""
    try:
        kind, length = C.MSG.unpack(C.read_exact(fd, C.MSG.size))
        if kind == b"E":
            raise _CandidateFailed(
                C.read_exact(fd, min(length, 4 * C.MAX_REASON)).decode("utf-8", "replace"))
        if kind == want == b"L" and length == 1:
            return C.read_exact(fd, 1)[0]
        if kind == want == b"S" and length == 1:
            return C.read_exact(fd, 1) == b"1"
        if kind == want == b"R" and length == 0:
            return None
        if kind == want == b"B" and length == C.BIN.size:
            return C.read_exact(fd, length)
    except EOFError:
        raise _CandidateFailed("", died=True) from None
    raise _CandidateFailed("protocol error: unexpected message from the candidate")


def _pack(items, capacity: float, rfd: int, wfd: int) -> list[list[int]]:
    """Online bin packing of every row of ``items`` with the candidate's choices; returns
    the bin of every item. The candidate is sent one item at a time, the next only after
    it answered with a bin, which must exist and hold the item (the same float64
    arithmetic as :func:`jaxkit.ballad.reference.online_binpack`: Python floats are IEEE
    doubles). Plain Python, O(1) per item: the supervisor never imports NumPy."""
    assignments = []
    for row in items:
        n = len(row)
        bins = [capacity] * n
        C.write_all(wfd, C.REQ.pack(b"N", n, capacity))
        chosen = []
        for item in row:
            C.write_all(wfd, C.REQ.pack(b"I", 0, item))
            (best,) = C.BIN.unpack(_receive(rfd, b"B"))
            if not (0 <= best < n and bins[best] - item >= 0):
                raise _CandidateFailed(f"protocol error: the candidate chose bin {best}, "
                                       "which does not hold the item")
            bins[best] -= item
            chosen.append(best)
        assignments.append(chosen)
    return assignments


def _wait_status(pid: int) -> str:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"worker killed by signal {os.WTERMSIG(status)}"
    return f"worker exited with code {os.waitstatus_to_exitcode(status)} without a result"


def _supervise(job: dict, raw_items: bytes, state: dict, report) -> dict:
    python = os.path.realpath(sys.executable)
    argv = [python, "-I", "-S", "-B", "-c", C.BOOT, _CANDIDATE_FILES[0], job["numpy_dir"],
            "", "", "1" if job["seccomp"] else "0"]
    if job["jail"]:
        binds = list(job["jail"]["binds"])
        binds += _file_binds(binds, [*_mapped_files(), *_CANDIDATE_FILES])
        _enter_jail({**job["jail"], "binds": binds})
    _prctl(_PR_SET_DUMPABLE, 0, "dumpable")  # no ptrace or /proc/<pid>/mem from the candidate
    to_cand_r, to_cand_w = os.pipe()
    from_cand_r, from_cand_w = os.pipe()
    argv[8:10] = [str(to_cand_r), str(from_cand_w)]
    pid = os.fork()  # the child executes a new image at once
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(to_cand_w)
            os.close(from_cand_r)
            _start_candidate(job, to_cand_r, from_cand_w, argv)
        finally:
            os._exit(1)
    os.close(to_cand_r)
    os.close(from_cand_w)
    n = int(job["n_items"])
    flat = struct.unpack(f"<{len(raw_items) // 8}d", raw_items)
    items = [flat[k : k + n] for k in range(0, len(flat), n)]
    capacity = float(job["capacity"])
    payload = json.dumps({"source": job["source"], "func_name": job["func_name"]}).encode()
    job.clear()
    try:
        state["landlock"] = _receive(from_cand_r, b"L") > 0
        state["seccomp"] = bool(_receive(from_cand_r, b"S"))
        report(dict(state))
        C.write_all(to_cand_w, C.LEN.pack(len(payload)) + payload)
        del payload
        _receive(from_cand_r, b"R")
        assignments = _pack(items, capacity, from_cand_r, to_cand_w)
    except (_CandidateFailed, BrokenPipeError) as exc:
        died = isinstance(exc, BrokenPipeError) or exc.died
        if died:
            return {"ok": False, "error": _wait_status(pid), "died": True}
        os.kill(pid, signal.SIGKILL)
        return {"ok": False, "error": str(exc)}
    os.kill(pid, signal.SIGKILL)
    return {"ok": True, "assignments": assignments}


def main(job_dir: str, result_fd: str) -> None:
    """Evaluate the job in ``job_dir`` and write the result to descriptor ``result_fd``."""
    out = int(result_fd)
    state = {"seccomp": False, "landlock": False}

    def report(obj: dict) -> None:
        C.write_all(out, (json.dumps(obj) + "\n").encode())

    try:
        job_path, items_path = (os.path.join(job_dir, n) for n in ("job.json", "items.f64"))
        with open(job_path) as fh:
            job = json.load(fh)
        with open(items_path, "rb") as fh:
            raw_items = fh.read()
        os.remove(job_path)  # nothing of the job stays where a candidate could look
        os.remove(items_path)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as namespace init: ignored from inside
        result = _supervise(job, raw_items, state, report)
    except JailError as exc:
        result = {"ok": False, "error": f"jail: {exc}", "jail_error": True}
    except BaseException as exc:  # noqa: BLE001
        result = {"ok": False, "error": "worker: " + C.reason(exc)}
    result.update(state)
    try:
        report(result)
    finally:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[-2], sys.argv[-1])
