"""Progress and warnings for jaxkit's command line: rich bars on a terminal, plain
periodic lines (with rate and ETA) in a log file or a cluster job, and third-party
deprecation warnings shown once.

``jaxkit run`` makes one progress object with :func:`make_progress` and installs it with
:func:`use_progress`; :meth:`jaxkit.registry.RunContext.track` and
:func:`jaxkit.training.fit` report through it (``fit`` finds it with
:func:`current_progress`, so no pipeline passes it by hand). Library users who never
call :func:`use_progress` get no output.

Environment:
    ``JAXKIT_PROGRESS``: ``rich``, ``plain`` or ``off`` (default: ``rich`` when stderr is
    a terminal, else ``plain``).
    ``JAXKIT_PROGRESS_EVERY``: seconds between plain lines of one task (default 10).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from contextvars import ContextVar
from typing import Any, TextIO

__all__ = ["PlainProgress", "make_progress", "use_progress", "current_progress",
           "format_duration", "quiet_third_party_warnings", "THIRD_PARTY"]

_CURRENT: ContextVar[Any] = ContextVar("jaxkit_progress", default=None)


def format_duration(s: float) -> str:
    """``5s``, ``2m05s``, ``1h02m``: a duration for a log line."""
    if s != s or s == float("inf"):
        return "?"
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class PlainProgress:
    """The subset of ``rich.progress.Progress`` jaxkit uses (``add_task``, ``advance``,
    ``update``, ``remove_task``, a context manager), writing one plain line per task at
    most every ``every`` seconds, and one when it finishes (when it printed before or ran
    for at least ``every / 2``: hundreds of sub-second tasks print nothing)::

        models: 3/10 (30%) 0.52/s, elapsed 5.8s, ETA 13s

    Args:
        stream: where lines go (default ``sys.stderr``), flushed after each.
        every: seconds between two lines of the same task.
        clock: the time source (for tests).
    """

    def __init__(self, stream: TextIO | None = None, every: float = 10.0, clock=time.monotonic):
        self.stream = stream
        self.every = float(every)
        self.clock = clock
        self._tasks: dict[int, dict] = {}
        self._next = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self):  # rich.progress.Progress API
        pass

    def stop(self):
        pass

    def add_task(self, description: str, total: float | None = None, completed: float = 0,
                 **fields) -> int:
        tid = self._next
        self._next += 1
        now = self.clock()
        self._tasks[tid] = dict(description=description, total=total, completed=float(completed),
                                done0=float(completed),
                                start=now, last=now, printed=False, fields=fields)
        return tid

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def update(self, task: int, *, total: float | None = None, completed: float | None = None,
               advance: float | None = None, description: str | None = None,
               **fields) -> None:
        t = self._tasks.get(task)
        if t is None:
            return
        if total is not None:
            t["total"] = total
        if description is not None:
            t["description"] = description
        if completed is not None:
            t["completed"] = float(completed)
        if advance is not None:
            t["completed"] += float(advance)
        t["fields"].update(fields)
        now = self.clock()
        done = t["total"] is not None and t["completed"] >= t["total"]
        if done and not t.get("finished"):
            t["finished"] = True
            # the end of a task that printed before or ran long; a short task stays quiet
            if t["printed"] or now - t["start"] >= self.every / 2:
                self._line(t, now)
        elif now - t["last"] >= self.every:
            self._line(t, now)

    def remove_task(self, task: int) -> None:
        t = self._tasks.pop(task, None)
        if t is not None and not t.get("finished") and t["printed"]:
            self._line(t, self.clock())  # the last state of a task that printed before

    def line(self, task: int) -> str:
        """The line task ``task`` would print now."""
        return self._format(self._tasks[task], self.clock())

    def _format(self, t: dict, now: float) -> str:
        el = now - t["start"]
        n, tot = t["completed"], t["total"]
        rate = (n - t["done0"]) / el if el > 0 else float("nan")  # this run's own rate
        cnt = f"{n:g}" if tot is None else f"{n:g}/{tot:g} ({100 * n / tot:.0f}%)" if tot \
            else f"{n:g}/0"
        parts = [f"{t['description']}: {cnt}"]
        if rate > 0:
            parts.append(f"{rate:.3g}/s" if rate >= 1 else f"{1 / rate:.3g}s each")
        parts.append(f"elapsed {format_duration(el)}")
        if tot and n < tot:
            parts.append(f"ETA {format_duration((tot - n) / rate) if rate > 0 else '?'}")
        extra = ", ".join(f"{k} {v}" for k, v in t["fields"].items() if v not in (None, ""))
        if extra:
            parts.append(extra)
        return ", ".join(parts)

    def _line(self, t: dict, now: float) -> None:
        t["last"], t["printed"] = now, True
        out = self.stream if self.stream is not None else sys.stderr
        out.write(self._format(t, now) + "\n")
        out.flush()


def _mode() -> str:
    mode = os.environ.get("JAXKIT_PROGRESS", "").strip().lower()
    if mode and mode not in ("rich", "plain", "off"):
        raise ValueError(f"JAXKIT_PROGRESS must be rich, plain or off; got {mode!r}")
    return mode


def make_progress(console=None, *, mode: str | None = None, every: float | None = None):
    """The progress display for this process: a transient ``rich`` Progress on
    ``console`` when it is a terminal, a :class:`PlainProgress` otherwise, None for
    ``off``.

    Args:
        console: a ``rich.console.Console`` (default: one on stderr).
        mode: ``rich``, ``plain``, ``off``, or None for ``JAXKIT_PROGRESS`` / the
            terminal test.
        every: seconds between plain lines (default ``JAXKIT_PROGRESS_EVERY`` or 10).
    """
    from rich.console import Console

    console = console if console is not None else Console(stderr=True)
    mode = mode or _mode() or ("rich" if console.is_terminal else "plain")
    if mode == "off":
        return None
    if mode == "plain":
        if every is None:
            raw = os.environ.get("JAXKIT_PROGRESS_EVERY", "10")
            try:
                every = float(raw)
            except ValueError:
                raise ValueError(f"JAXKIT_PROGRESS_EVERY must be a number of seconds; "
                                 f"got {raw!r}") from None
        return PlainProgress(console.file, every=every)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                    BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console,
                    transient=True)


def current_progress():
    """The progress object installed by :func:`use_progress`, or None."""
    return _CURRENT.get()


@contextlib.contextmanager
def use_progress(progress):
    """Install ``progress`` (a rich Progress, a :class:`PlainProgress` or None) as
    :func:`current_progress` for the duration of the block."""
    tok = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(tok)


# Modules whose deprecation warnings are not the user's to act on.
THIRD_PARTY = ("orbax", "flax", "optax", "equinox", "jax", "jaxlib", "numpyro", "chex",
               "diffrax", "ott", "ase", "absl", "etils", "tensorstore", "jaxopt", "numba",
               "google", "pkg_resources", "matplotlib", "typer", "click", "rich")


def quiet_third_party_warnings() -> None:
    """Show each third-party ``DeprecationWarning`` / ``FutureWarning`` /
    ``PendingDeprecationWarning`` once per process (by message), not on every import or
    restore; jaxkit's own warnings are left as they are."""
    for cat in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
        for mod in THIRD_PARTY:
            warnings.filterwarnings("once", category=cat, module=rf"{mod}(\.|$)")
