"""glibc ``malloc`` settings under which XLA:CPU reuses its per-call buffers, applied by
re-executing the command-line entry points once.

XLA:CPU allocates the temporary buffer of each call of a compiled program (every
intermediate of the program; 1.27 GB for the gpt-medium training step of
``benchmarks/bench_compose.py``) with ``malloc`` and frees it when the call returns.
glibc serves an allocation that large with a fresh ``mmap`` and gives it back with
``munmap``: every call faults in every page of the buffer again. On the 2-core AVX2
machine of ``benchmarks/RESULTS.md`` that was about 320,000 minor page faults and 0.8 s of
system time in each 2.8 s gpt-medium step, and 12,000 faults in each gpt-small step. The
faster the products, the larger that share: on a 2-core AVX-512 machine the step took
1.4-1.7 s under the system allocator and 0.81-0.88 s under the settings below. With

    GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1:
                   glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=8589934592

(one line) the buffer comes from the heap and stays mapped between calls:

- ``mmap_max=0``: no allocation is served by ``mmap``;
- ``arena_max=1``: every thread allocates from the main heap. XLA runs a program on a
  thread of its pool, whose secondary arena falls back to ``mmap`` for a block larger
  than its 64 MiB heaps, whatever ``mmap_max`` says: without this setting ``strace``
  still shows one 1.27 GB ``mmap`` per gpt-medium step. It is also the setting that
  costs compile-dominated runs their extra system time (below);
- ``trim_threshold``: free memory at the top of the heap goes back to the system only past
  8 GiB;
- ``hugetlb=1``: the heap is backed by transparent huge pages (``madvise``), 512 times
  fewer faults for what is touched the first time.

The price is memory: the process keeps the peak of its heap mapped, and while the
allocator settles it can hold more than one call's buffer (a call's buffer may still be
held while the next call asks for its own). The gpt-medium step, whose resident peak is
about 2.1 GB under the system allocator, settled after three steps at 4.5 GB and stayed
there (25 steps). ``JAXKIT_MALLOC=hugepages`` keeps only ``hugetlb=1``: memory goes back
to the system after each call, and faulting it in again costs 2 MiB pages instead of
4 KiB ones (650-1,250 faults and 0.12-0.19 s of system time per gpt-medium step instead
of 320,000 and 0.8 s), but it gains nothing when other work runs between calls (the
benchmarks' alternation with a peer). Compile-dominated runs (the QUICK pipelines) pay
2-4 s more system time under the tuned heap than under either of the others; the three
other tunables without ``arena_max=1`` pay none of it, but leave the step's buffer to
``mmap`` as above (benchmarks/RESULTS.md). The one arena also costs many small programs
running on several host CPU devices at once, whose threads then share its lock: batched
FastICA over two host devices took 37-57 ms tuned and 31-36 ms under ``system`` or
``hugepages``, while the gpt-medium step over two host devices still ran fastest tuned
(866 against 942 ms under ``hugepages``). A larger ``glibc.malloc.tcache_count`` removed
the first cost but let the gpt-medium process grow past 24 GB.

The dynamic loader reads ``GLIBC_TUNABLES`` when a process starts, so a running Python
cannot change them. :func:`reexec` starts the same command line again, once, with the
tunables added. Only launchers call it, first thing, before any work: the ``jaxkit``
command (``jaxkit.__main__.main``, also ``python -m jaxkit``) and the benchmark scripts
(``__main__`` only). Importing jaxkit, calling its functions, or running its command line
in-process (``jaxkit.cli.app``) never restarts your process (tested), and this module
imports nothing of jaxkit. Your own program that imports jaxkit's kernels gets the same
effect by exporting the line above before starting Python.

The launcher option (``jaxkit --help`` and the README name it):

- ``JAXKIT_MALLOC``: ``tuned`` (the default: all four), ``hugepages`` (``hugetlb=1``
  only) or ``system`` (leave the allocator as it is: no restart).
- A ``GLIBC_TUNABLES`` you set keeps its values; jaxkit only adds the names it lacks.
- Only on Linux with glibc; elsewhere (macOS, musl) nothing changes.
- ``JAXKIT_MALLOC_ORIGINAL`` holds the value ``GLIBC_TUNABLES`` had before (empty when
  unset). It marks the re-executed process, so there is never a second re-exec, and
  :func:`original_env` gives the peers of a benchmark the environment you started with.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

__all__ = ["CHOICES", "ENV_VAR", "MARKER", "TUNABLES", "original_env", "reexec", "state",
           "tuned_env"]

#: glibc tunables (name -> value) for XLA:CPU's per-call buffers (module docstring).
TUNABLES: dict[str, str] = {
    "glibc.malloc.hugetlb": "1",
    "glibc.malloc.arena_max": "1",
    "glibc.malloc.mmap_max": "0",
    "glibc.malloc.trim_threshold": str(8 << 30),
}
#: The ``JAXKIT_MALLOC`` choices: the tunables each adds (``system``: none).
CHOICES: dict[str, dict[str, str]] = {
    "tuned": TUNABLES,
    "hugepages": {"glibc.malloc.hugetlb": "1"},
    "system": {},
}
#: The environment variable that chooses among :data:`CHOICES` (default ``tuned``).
ENV_VAR = "JAXKIT_MALLOC"
#: Set in the re-executed process to the ``GLIBC_TUNABLES`` it was started with.
MARKER = "JAXKIT_MALLOC_ORIGINAL"


def _parse(tunables: str) -> dict[str, str]:
    out = {}
    for item in tunables.split(":"):
        name, sep, value = item.partition("=")
        if name.strip() and sep:
            out[name.strip()] = value
    return out


def tuned_env(env: Mapping[str, str] | None = None, *, libc: str | None = None
              ) -> dict[str, str] | None:
    """The environment to re-execute with: ``env`` (default ``os.environ``) with the
    missing :data:`TUNABLES` added to ``GLIBC_TUNABLES`` and :data:`MARKER` set; ``None``
    when nothing is to be done: not glibc (``libc``, default from
    ``platform.libc_ver``), ``JAXKIT_MALLOC=system``, already re-executed, or every name
    already set. ``JAXKIT_MALLOC=hugepages`` adds ``hugetlb=1`` only.

    Args:
      env: the current environment.
      libc: the C library's name ("glibc", "musl", ""), for tests.

    Returns:
      A new dict, or None.

    Raises:
      ValueError: ``JAXKIT_MALLOC`` is not one of :data:`CHOICES`.
    """
    env = dict(os.environ if env is None else env)
    choice = env.get(ENV_VAR, "tuned").strip().lower() or "tuned"
    if choice not in CHOICES:
        raise ValueError(f"{ENV_VAR}={env[ENV_VAR]!r}: must be one of {', '.join(CHOICES)}")
    if libc is None:
        libc = platform.libc_ver()[0] if sys.platform.startswith("linux") else ""
    if libc != "glibc" or MARKER in env:
        return None
    have = env.get("GLIBC_TUNABLES", "")
    missing = [f"{k}={v}" for k, v in CHOICES[choice].items() if k not in _parse(have)]
    if not missing:
        return None
    env[MARKER] = have
    env["GLIBC_TUNABLES"] = ":".join(([have] if have else []) + missing)
    return env


def reexec() -> None:
    """Replace this process by the same command line (``sys.orig_argv``: the interpreter,
    its options and the script or ``-m`` module) under :func:`tuned_env`; return at once
    when that is ``None`` or the command line is unknown. For launchers only: call it
    first thing in a ``__main__``, before any work, never from library code or on import
    (module docstring). A ``JAXKIT_MALLOC`` that is not one of :data:`CHOICES` exits
    with a one-line error (status 2)."""
    try:
        env = tuned_env()
    except ValueError as e:
        sys.stderr.write(f"error: {e}\n")
        raise SystemExit(2) from None
    argv = list(sys.orig_argv)
    if env is None or not argv:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def original_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) as the user started it: ``GLIBC_TUNABLES`` back to
    its value before :func:`reexec` (removed if it was unset) and no :data:`MARKER`. For
    peer libraries, which a benchmark runs as their users would."""
    env = dict(os.environ if env is None else env)
    if MARKER in env:
        before = env.pop(MARKER)
        if before:
            env["GLIBC_TUNABLES"] = before
        else:
            env.pop("GLIBC_TUNABLES", None)
    return env


def state() -> dict[str, object]:
    """For run and benchmark records: the ``GLIBC_TUNABLES`` in force and whether
    :func:`reexec` set them."""
    return {"glibc_tunables": os.environ.get("GLIBC_TUNABLES"),
            "set_by_jaxkit": MARKER in os.environ}

