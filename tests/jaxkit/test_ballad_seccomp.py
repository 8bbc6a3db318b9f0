"""The seccomp-BPF filter of the Ballad jail (jaxkit.jail._seccomp).

The numbers are checked against the kernel headers; the filter itself in a fresh
interpreter (so nothing else of the test process is confined), and in the jail at the
fallback level, where it is what keeps a candidate off the network and from programs.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from jaxkit.jail import _seccomp, sandbox
from jaxkit.jail.sandbox import evaluate_source

HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}
ITEMS = np.random.default_rng(1).integers(20, 101, size=(1, 10)).astype(np.float64)
BEST_FIT = "def priority(item, bins):\n    return -(bins - item)\n"
supported = pytest.mark.skipif(not _seccomp.supported(),
                               reason=f"no seccomp table for {platform.machine()}")


@pytest.mark.parametrize("machine", sorted(HEADERS))
def test_numbers_match_the_kernel_headers(machine):
    header = HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} not installed")
    text = header.read_text()
    defined = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
    generic = {m.group(1): int(m.group(2)) for m in  # asm-generic: fcntl, ...
               re.finditer(r"#define (__NR3264_\w+)\s+(\d+)\b", text)}
    defined |= {m.group(1): generic[m.group(2)] for m in
                re.finditer(r"#define __NR_(\w+)\s+(__NR3264_\w+)\b", text)
                if m.group(2) in generic}
    table = _seccomp.syscall_numbers(machine)
    assert {"clone", "clone3", "socket", "execve", *_seccomp.RESTRICT} <= set(table)
    wrong = {n: (v, defined.get(n)) for n, v in table.items() if defined.get(n) != v}
    assert not wrong, f"syscall numbers differ from {header}: {wrong}"
    missing = [n for n in _seccomp.DENY if n not in table and n in defined]
    assert not missing, f"denied calls with no number in the table: {missing}"


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_program_shape(machine):
    prog = _seccomp.program(machine)
    assert len(prog) % 8 == 0 and 10 < len(prog) // 8 < 4096  # BPF_MAXINSNS
    assert prog[-4:] == (0x7FFF0000).to_bytes(4, sys.byteorder)  # default: allow


PROBE = textwrap.dedent("""
    import ctypes, errno, importlib.util, json, os, socket, subprocess, sys, threading
    spec = importlib.util.spec_from_file_location("seccomp", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.install()
    out = {}

    def attempt(name, fn):
        try:
            fn()
            out[name] = "allowed"
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    attempt("socketpair", socket.socketpair)
    attempt("fork", os.fork)
    attempt("subprocess", lambda: subprocess.run(["/bin/true"]))
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    libc = ctypes.CDLL(None, use_errno=True)
    out["ptrace"] = errno.errorcode.get(ctypes.get_errno()) if libc.ptrace(
        16, os.getppid(), 0, 0) != 0 else "allowed"  # PTRACE_ATTACH
    out["unshare"] = errno.errorcode.get(ctypes.get_errno()) if libc.unshare(
        0x10000000) != 0 else "allowed"  # CLONE_NEWUSER
    box = []
    t = threading.Thread(target=lambda: box.append(sum(range(10))))
    t.start(); t.join()
    out["thread"] = box == [45]
    fd = os.open(os.devnull, os.O_RDONLY); os.close(fd)
    out["files"] = True
    print(json.dumps(out))
""")


@supported
def test_filter_denies_escapes_and_allows_threads(tmp_path):
    proc = subprocess.run([sys.executable, "-I", "-c", PROBE, _seccomp.__file__],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("socket", "unix", "socketpair", "fork", "exec", "ptrace", "unshare"):
        assert out[name] == "EPERM", (name, out)
    assert out["subprocess"] in ("EPERM", "ENOSYS"), out  # vfork / clone3 refused
    assert out["thread"] is True and out["files"] is True


@supported
@pytest.mark.filterwarnings("ignore:jaxkit.jail.sandbox:RuntimeWarning")
@pytest.mark.parametrize("isolation", ["auto", "rlimits"])
def test_jail_candidate_runs_under_the_filter(isolation, tmp_path):
    if isolation == "rlimits" and os.geteuid() == 0:
        pytest.skip("the rlimits level refuses root (run unprivileged by test_ballad_jail_"
                    "clean.py::test_rlimits_level_and_kill_all_in_a_disposable_namespace)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        honest = evaluate_source(BEST_FIT, ITEMS, 150.0, isolation=isolation)
    assert honest.ok and honest.seccomp, honest
    marker = tmp_path / "ran"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.setblocking(False)
        port = server.getsockname()[1]
        src = ("import socket, subprocess\n"
               f"for f in (lambda: socket.create_connection(('127.0.0.1', {port}), timeout=1),\n"
               f"          lambda: subprocess.run(['/bin/sh', '-c', 'touch {marker}'])):\n"
               "    try:\n"
               "        f()\n"
               "    except OSError:\n"
               "        continue\n"
               "    raise RuntimeError('ESCAPED')\n") + BEST_FIT
        res = evaluate_source(src, ITEMS, 150.0, isolation=isolation)
        assert res.ok, res.error  # both attempts raised OSError inside the candidate
        with pytest.raises(BlockingIOError):
            server.accept()
    assert not marker.exists()
    assert res.isolation == (sandbox.isolation_level() if isolation == "auto" else "rlimits")
