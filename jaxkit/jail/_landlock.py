"""A Landlock domain for the candidate of the Ballad jail's ``"rlimits"`` level.

Landlock (Linux 5.13 and later; no privileges needed) confines a process and everything it
later executes. The candidate at the ``"rlimits"`` level has no namespaces around it, and
runs as the user: without this domain it could read the memory of the user's other
processes through ``/proc/PID/mem`` (the jaxkit process holds every test instance) where
the kernel's Yama module does not forbid it, and write or delete any of the user's files.
Inside a Landlock domain the kernel refuses every ptrace-class access (``/proc/PID/mem``,
``/proc/PID/maps``, ``ptrace``) to a process outside the domain, whatever Yama says, and

* every write-class file access (write, truncate, create, remove, rename, link, device
  ioctls) outside the candidate's own working directory and ``/dev/null``;
* with ABI 6 (Linux 6.12), signals to processes outside the domain and abstract UNIX
  sockets (the system-call filter already refuses both: a second layer).

Reading files is left alone (Python must read its standard library and NumPy; which files
a user keeps is unknown): at this level the candidate can still read the user's files.
Installed by the forked child before it executes the candidate's interpreter, after
``no_new_privs``. Reference: the kernel's Documentation/userspace-api/landlock.rst.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

__all__ = ["abi_version", "restrict"]

_NR = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create, add_rule, restrict
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
# access rights (linux/landlock.h) and the ABI that introduced each
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in (6, 7, 8, 9, 10, 11, 12))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE | _IOCTL_DEV  # of those, the ones a file rule takes


def _syscall(nr: int, *args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(nr), *args)


def abi_version() -> int:
    """The Landlock ABI of the running kernel; 0 where there is none (old kernel, Landlock
    not enabled, unknown architecture)."""
    nums = _NR.get(platform.machine())
    if nums is None:
        return 0
    version = _syscall(nums[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def restrict(writable_dir: str) -> int:
    """Confine the calling process (and what it executes) as the module docstring says,
    with ``writable_dir`` and ``/dev/null`` its only writable places. Sets
    ``no_new_privs``. Returns the ABI used, 0 where Landlock is unavailable (nothing
    confined); raises ``OSError`` if the kernel refuses a step."""
    abi = abi_version()
    if abi < 1:
        return 0
    create, add_rule, restrict_self = _NR[platform.machine()]
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    handled |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    handled |= _IOCTL_DEV if abi >= 5 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("<QQQ", handled, 0, scoped)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _syscall(create, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for path, rights in ((writable_dir, handled), (os.devnull, handled & _FILE_RIGHTS)):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
                if _syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                            rule, ctypes.c_uint32(0)) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
            finally:
                os.close(fd)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                               ctypes.c_ulong]
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            err = ctypes.get_errno()
            raise OSError(err, f"no_new_privs: {os.strerror(err)}")
        if _syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    return abi
