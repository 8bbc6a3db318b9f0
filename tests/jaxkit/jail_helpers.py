"""Running jail tests where a failure of the jail cannot hurt the machine.

The ``"rlimits"`` level of :mod:`jaxkit.jail.sandbox` refuses to run as root, and an
attack such as ``kill(-1, SIGKILL)`` must never run where a broken jail would reach the
test runner or anyone else's processes. Both needs are met by running tests inside a
*disposable namespace*: ``unshare --user --map-user=UID --pid --fork --mount-proc
--kill-child``. The tests then run as a non-root user (uid 1000 when the runner is root,
the runner's own uid otherwise) and as the first process (init) of a fresh PID namespace:
``kill(-1)`` from there reaches only the processes of that namespace (the kernel skips
every process the caller's namespace cannot see), and all of them die with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

#: environment variable set for the tests run inside; its value is a token that also
#: appears on the command line of the namespace's init (``/proc/1/cmdline``)
ENV = "JAXKIT_DISPOSABLE_PIDNS"
_PROBE = ("import json, os; print(json.dumps([os.getpid(), os.geteuid(), "
          "sorted(int(p) for p in os.listdir('/proc') if p.isdigit())]))")


def disposable_prefix() -> tuple[list[str] | None, str]:
    """The ``unshare`` command prefix that starts a disposable namespace as a non-root
    user, after checking that it works (the child is pid 1 of a namespace whose ``/proc``
    lists only itself, and not root); ``(None, reason)`` where it does not."""
    unshare = shutil.which("unshare")
    if unshare is None or sys.platform != "linux":
        return None, "no unshare (util-linux)"
    uid = 1000 if os.geteuid() == 0 else os.geteuid()
    gid = 1000 if os.geteuid() == 0 else os.getegid()
    prefix = [unshare, "--user", f"--map-user={uid}", f"--map-group={gid}", "--pid", "--fork",
              "--mount-proc", "--kill-child"]
    try:
        proc = subprocess.run([*prefix, sys.executable, "-I", "-c", _PROBE],
                              capture_output=True, text=True, timeout=60)
        pid, euid, pids = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None, "a disposable user + PID namespace cannot be created here"
    if pid != 1 or euid == 0 or pids != [1]:
        return None, f"unexpected disposable namespace: pid {pid}, euid {euid}, {pids}"
    return prefix, ""


def in_disposable_pid_namespace() -> bool:
    """True only inside a namespace started by :func:`run_pytest_disposable`: the token of
    :data:`ENV` is on the command line of this PID namespace's init, so ``/proc`` is the
    namespace's own and ``kill(-1)`` cannot leave it."""
    token = os.environ.get(ENV, "")
    if len(token) < 16:
        return False
    try:
        with open("/proc/1/cmdline", "rb") as fh:
            return token.encode() in fh.read()
    except OSError:
        return False


def run_pytest_disposable(args: list[str], basetemp: str, token: str,
                          timeout: float = 540.0) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` inside a disposable namespace (see the module
    docstring); the caller skips when :func:`disposable_prefix` finds none."""
    prefix, reason = disposable_prefix()
    assert prefix is not None, reason
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # the caller's PYTHONPATH first, then the repository (for ``tests.``): as the
    # caller imports jaxkit (-P: the working directory is not prepended)
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), root) if p)
    env = {**os.environ, ENV: token, "PYTHONPATH": path}
    cmd = [*prefix, sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--basetemp={basetemp}", "-o", f"cache_dir={basetemp}/cache", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=root)
