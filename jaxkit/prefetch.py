"""Ordered prefetching of host-side work in background threads.

``prefetch(make, n)`` yields ``make(0), make(1), ..., make(n - 1)`` in order while up to
``depth`` later items are already being computed by ``workers`` threads, so that host work
(NumPy data preparation, an exact OT assignment solved by POT or SciPy, file reads) runs
while the device executes the previous step: JAX dispatch is asynchronous and XLA runs on
its own threads. Threads rather than processes: the useful host work here (NumPy, POT's
network simplex, SciPy's assignment) releases the GIL, and threads share memory with the
caller at no copy. We write this small ordered pool ourselves instead of using a data
loader library because jaxkit's only need is "the next few items of an index-addressed
sequence, in order"; :class:`concurrent.futures.ThreadPoolExecutor` does the threading.

Errors raised by ``make(i)`` are raised by the iterator when item ``i`` is reached;
closing the iterator (or leaving a ``for`` loop early) cancels the items not started.

``nice`` lowers the workers' scheduling priority (Linux), so that on a CPU shared with
XLA's threads the host work fills the gaps of the device's step instead of preempting
its threads (an XLA:CPU parallel loop waits for its slowest thread).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["prefetch"]

T = TypeVar("T")


def prefetch(make: Callable[[int], T], n: int | None = None, *, depth: int = 2,
             workers: int = 1, nice: int | None = None) -> Iterator[T]:
    """Yield ``make(i)`` for ``i = 0, 1, ...`` (``n`` items, or without end if ``n`` is
    None) in order, keeping up to ``depth`` items ahead of the consumer in flight on
    ``workers`` background threads. ``make`` must be safe to call from several threads
    at once when ``workers > 1`` (derive randomness from ``i``, not from shared state).

    ``nice`` (0-19, Linux): the worker threads' niceness, a lower priority than the
    caller's threads and XLA's; ignored on other systems, where it is per process."""
    if not callable(make):
        raise TypeError(f"`make` must be callable; got {type(make).__name__}")
    if n is not None and (int(n) != n or n < 0):
        raise ValueError(f"`n` must be None or an integer >= 0; got {n!r}")
    if int(depth) != depth or depth < 1:
        raise ValueError(f"`depth` must be an integer >= 1; got {depth!r}")
    if int(workers) != workers or workers < 1:
        raise ValueError(f"`workers` must be an integer >= 1; got {workers!r}")
    if nice is not None and (int(nice) != nice or not 0 <= nice <= 19):
        raise ValueError(f"`nice` must be None or an integer in [0, 19]; got {nice!r}")
    return _prefetch(make, None if n is None else int(n), int(depth), int(workers),
                     None if nice is None else int(nice))


def _set_thread_nice(nice: int) -> None:
    # On Linux a thread is a schedulable task with its own niceness: setpriority on its
    # native id changes that thread only (POSIX leaves threads' priorities to the process)
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(nice, os.getpriority(os.PRIO_PROCESS, tid)))


def _prefetch(make, n, depth, workers, nice=None):
    init = None if nice is None else (lambda: _set_thread_nice(nice))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jaxkit-prefetch",
                              initializer=init)
    pending: collections.deque[Future] = collections.deque()
    nxt = 0
    try:
        while True:
            while len(pending) < depth and (n is None or nxt < n):
                pending.append(pool.submit(make, nxt))
                nxt += 1
            if not pending:
                return
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
