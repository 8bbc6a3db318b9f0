"""The process tree of a sandboxed evaluation: its live descendants from ``/proc`` and
killing the whole group at the deadline (used by :mod:`jaxkit.jail.sandbox`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

__all__ = ["descendants", "running", "kill_group"]

def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from ``/proc/PID/task/TID/children``); empty
    where ``/proc`` has no such files."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    kids = [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def _running(pid: int) -> bool:
    """``pid`` exists and has not exited (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_group(proc: subprocess.Popen, *, settle: float = 5.0) -> None:
    """SIGKILL the worker's process group and every descendant, and wait until they are
    gone. In a jail, killing the PID namespace's init makes the kernel kill every
    process of the namespace (``setsid`` ones included), but only as that init exits:
    returning before then would let a candidate's process outlive the evaluation by a
    few milliseconds, so the parent waits (at most ``settle`` seconds) for all of them."""
    family = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # already gone
        pass
    except AttributeError:  # pragma: no cover - no process groups (Windows)
        proc.kill()
    for pid in family:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + settle
    while any(_running(pid) for pid in family) and time.monotonic() < end:
        time.sleep(0.005)


descendants, running, kill_group = _descendants, _running, _kill_group
