"""A seccomp-BPF system-call filter for the candidate process of the Ballad jail.

Imported by :mod:`jaxkit.jail._sandbox_worker` (standard library only: it runs under
``python -I`` inside the jail) and installed in the candidate process after its
capabilities are dropped and before the untrusted source is compiled. The kernel then
checks every system call of the candidate, and of every thread it starts, against the
filter; the filter can never be removed or loosened (``no_new_privs`` is set first, and a
later filter can only restrict further).

The policy is a deny list on top of the jail's namespaces and resource limits: the calls a
priority function never needs and an escape or an attack on the host would.

* a system call of another ABI (an ``x86`` or ``x32`` call from a 64-bit process) kills
  the process, so the numbers below cannot be bypassed;
* ``EPERM`` for networking (``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``,
  ``accept``, ``sendto``, ``sendmsg``...), running programs (``execve``, ``execveat``),
  new processes (``fork``, ``vfork``, and ``clone`` without ``CLONE_THREAD``; threads are
  allowed, so NumPy and the interpreter work as usual), debugging and reading other
  processes (``ptrace``, ``process_vm_readv`` / ``writev``, ``kcmp``, ``pidfd_getfd``,
  ``process_madvise``), namespaces and mounts (``unshare``, ``setns``, ``mount``,
  ``umount2``, ``pivot_root``, ``chroot``),
  kernel attack surface (``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*``,
  ``keyctl``, ``add_key``, ``request_key``, ``open_by_handle_at``, ``fanotify_init``),
  and administration (module loading, ``kexec``, ``reboot``, ``swapon``, ``acct``,
  ``quotactl``, ``personality``, ``mknod``);
* ``EPERM`` for every signal to another process or process group: ``kill``, ``tkill``,
  ``rt_sigqueueinfo`` unless the target is the candidate's own process id, ``tgkill`` and
  ``rt_tgsigqueueinfo`` unless the thread group is its own (its threads), and
  ``pidfd_send_signal`` always; so ``kill(-1, SIGKILL)``, ``kill(0, ...)`` (its group)
  and a signal to its parent are refused at every isolation level. ``fcntl``'s
  ``F_SETOWN`` / ``F_SETOWN_EX`` / ``F_SETSIG`` (which make the kernel send a chosen
  signal to a chosen process when a descriptor is ready) and the terminal ioctl
  ``TIOCSTI`` (typing into a terminal) are refused too;
* ``ENOSYS`` for ``clone3``, whose flags live in memory a filter cannot read: glibc then
  falls back to ``clone``, whose flags the filter checks;
* everything else is allowed.

Supported on x86-64 and AArch64 (the numbers are checked against the kernel headers in the
tests where the headers are installed); elsewhere :func:`install` returns ``False`` and
the evaluation records that no filter was installed. Reference: the kernel's
Documentation/userspace-api/seccomp_filter.rst.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

__all__ = ["DENY", "RESTRICT", "install", "program", "supported", "syscall_numbers"]

# linux/filter.h, linux/seccomp.h, linux/audit.h
_BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_BPF_RET_K = 0x06  # BPF_RET | BPF_K
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
# offsets in struct seccomp_data: nr (int), arch (u32), instruction_pointer (u64), args
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LO, _OFF_ARG1_LO = 0, 4, 16, 24  # low words (little-endian)
# signals: the call and which argument holds the target process (or thread group) id
_SIGNAL_TARGET = (("kill", _OFF_ARG0_LO), ("tkill", _OFF_ARG0_LO), ("tgkill", _OFF_ARG0_LO),
                  ("rt_sigqueueinfo", _OFF_ARG0_LO), ("rt_tgsigqueueinfo", _OFF_ARG0_LO))
# fcntl commands that make the kernel signal a chosen process (linux/fcntl.h)
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15
_TIOCSTI = 0x5412  # asm-generic/ioctls.h: push a byte into a terminal's input
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

#: the denied calls (``clone`` is denied only without ``CLONE_THREAD``; ``clone3`` gets
#: ``ENOSYS``); a name missing from an architecture's table does not exist there
DENY = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto",
    "sendmsg", "sendmmsg", "execve", "execveat", "fork", "vfork", "ptrace",
    "process_vm_readv", "process_vm_writev", "kcmp", "unshare", "setns", "mount",
    "umount2", "pivot_root", "chroot", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
    "request_key", "open_by_handle_at", "name_to_handle_at", "fanotify_init",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "personality", "mknod", "mknodat",
    "pidfd_send_signal", "pidfd_getfd", "process_madvise",
)
#: calls allowed only towards the candidate itself (``kill``...), or only with some
#: arguments (``fcntl``, ``ioctl``): see the module docstring
RESTRICT = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "fcntl",
            "ioctl")

_X86_64 = {
    "ioctl": 16, "kill": 62, "fcntl": 72, "rt_sigqueueinfo": 129, "tkill": 200,
    "tgkill": 234, "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "process_madvise": 440,
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "sendmsg": 46, "bind": 49,
    "listen": 50, "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59,
    "ptrace": 101, "mknod": 133, "personality": 135, "pivot_root": 155, "chroot": 161,
    "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "mknodat": 259, "unshare": 272, "accept4": 288, "perf_event_open": 298,
    "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "sendmmsg": 307, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "execveat": 322, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "clone3": 435,
}
_AARCH64 = {  # the asm-generic table
    "fcntl": 25, "ioctl": 29, "kill": 129, "tkill": 130, "tgkill": 131,
    "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424,
    "pidfd_getfd": 438, "process_madvise": 440,
    "mknodat": 33, "umount2": 39, "mount": 40, "pivot_root": 41, "chroot": 51,
    "quotactl": 60, "acct": 89, "personality": 92, "unshare": 97, "kexec_load": 104,
    "init_module": 105, "delete_module": 106, "ptrace": 117, "reboot": 142,
    "socket": 198, "socketpair": 199, "bind": 200, "listen": 201, "accept": 202,
    "connect": 203, "sendto": 206, "sendmsg": 211, "add_key": 217, "request_key": 218,
    "keyctl": 219, "clone": 220, "execve": 221, "swapon": 224, "swapoff": 225,
    "perf_event_open": 241, "accept4": 242, "fanotify_init": 262,
    "name_to_handle_at": 264, "open_by_handle_at": 265, "setns": 268, "sendmmsg": 269,
    "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273,
    "bpf": 280, "execveat": 281, "userfaultfd": 282, "kexec_file_load": 294,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "clone3": 435,
}
_TABLES = {"x86_64": _X86_64, "aarch64": _AARCH64}


def supported(machine: str | None = None) -> bool:
    """Whether a filter exists for ``machine`` (default: this one)."""
    return (machine or platform.machine()) in _TABLES


def syscall_numbers(machine: str | None = None) -> dict[str, int]:
    """The system-call numbers the filter uses on ``machine`` (default: this one)."""
    return dict(_TABLES[machine or platform.machine()])


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None, pid: int | None = None) -> bytes:
    """The classic-BPF program (``struct sock_filter`` array) for ``machine``, for the
    process ``pid`` (default: the calling process; the only target its signals may
    have)."""
    machine = machine or platform.machine()
    pid = os.getpid() if pid is None else int(pid)
    if not 0 < pid < 2**31:
        raise ValueError(f"pid must be a positive process id, got {pid}")
    table = _TABLES[machine]
    deny = sorted({table[n] for n in DENY if n in table})
    eperm = _RET_ERRNO | errno.EPERM
    ins = [
        _insn(_BPF_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        _insn(_BPF_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI
        _insn(_BPF_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":  # x32 calls carry the x32 bit in nr under the same arch
        ins += [_insn(_BPF_JGE_K, 0, 1, _X32_BIT), _insn(_BPF_RET_K, 0, 0, _RET_KILL_PROCESS)]
    # clone: allowed with CLONE_THREAD (a thread), EPERM otherwise (a process)
    ins += [
        _insn(_BPF_JEQ_K, 0, 4, table["clone"]),
        _insn(_BPF_LD_W_ABS, 0, 0, _OFF_ARG0_LO),
        _insn(_BPF_JSET_K, 0, 1, _CLONE_THREAD),
        _insn(_BPF_RET_K, 0, 0, _RET_ALLOW),
        _insn(_BPF_RET_K, 0, 0, eperm),
        _insn(_BPF_JEQ_K, 0, 1, table["clone3"]),
        _insn(_BPF_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    # signals: allowed only to the process itself (kill(-1), kill(0), the parent: EPERM)
    for name, offset in _SIGNAL_TARGET:
        ins += [
            _insn(_BPF_JEQ_K, 0, 4, table[name]),
            _insn(_BPF_LD_W_ABS, 0, 0, offset),
            _insn(_BPF_JEQ_K, 0, 1, pid),
            _insn(_BPF_RET_K, 0, 0, _RET_ALLOW),
            _insn(_BPF_RET_K, 0, 0, eperm),
        ]
    # fcntl: no signal owner or signal number for a descriptor; ioctl: no TIOCSTI
    ins += [
        _insn(_BPF_JEQ_K, 0, 6, table["fcntl"]),
        _insn(_BPF_LD_W_ABS, 0, 0, _OFF_ARG1_LO),
        _insn(_BPF_JEQ_K, 3, 0, _F_SETOWN),
        _insn(_BPF_JEQ_K, 2, 0, _F_SETSIG),
        _insn(_BPF_JEQ_K, 1, 0, _F_SETOWN_EX),
        _insn(_BPF_RET_K, 0, 0, _RET_ALLOW),
        _insn(_BPF_RET_K, 0, 0, eperm),
        _insn(_BPF_JEQ_K, 0, 4, table["ioctl"]),
        _insn(_BPF_LD_W_ABS, 0, 0, _OFF_ARG1_LO),
        _insn(_BPF_JEQ_K, 1, 0, _TIOCSTI),
        _insn(_BPF_RET_K, 0, 0, _RET_ALLOW),
        _insn(_BPF_RET_K, 0, 0, eperm),
    ]
    for nr in deny:
        if nr == table["clone3"]:
            continue
        ins += [_insn(_BPF_JEQ_K, 0, 1, nr), _insn(_BPF_RET_K, 0, 0, eperm)]
    ins.append(_insn(_BPF_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(ins)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> bool:
    """Install the filter in the calling process (and its future threads).

    Sets ``no_new_privs`` first (which the kernel requires of an unprivileged process).
    Irreversible. The process may signal only itself afterwards (its process id is
    written into the filter). Returns ``False``, installing nothing, on an architecture
    without a table; raises ``OSError`` if the kernel refuses the filter.
    """
    if not supported():
        return False
    prog = program(pid=os.getpid())
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    for option, arg2, arg3 in ((_PR_SET_NO_NEW_PRIVS, 1, 0),
                               (_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER,
                                ctypes.addressof(fprog))):
        if libc.prctl(option, arg2, arg3, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: prctl({option}) failed: {errno.errorcode.get(err)}")
    return True
