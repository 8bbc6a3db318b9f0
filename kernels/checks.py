"""Input checks shared by the kernels (public: pipelines and user code use them too).

Shape checks are static, so they run in Python at trace time and raise ``ValueError``.
Value checks (NaN/inf, constant columns) need the data: on concrete arrays they raise
``ValueError`` before any computation; on traced arrays (inside ``jit``/``vmap``) they
become :func:`equinox.error_if` checks, which raise at run time with the same message.

Errors raised inside ``jit``. JAX delivers an :func:`equinox.error_if` failure as a
``jax.errors.JaxRuntimeError`` ("INTERNAL: CpuCallback error ...") whose text holds the
message after a Python traceback and an equinox banner (under :func:`equinox.filter_jit`
it is an ``EquinoxRuntimeError`` with the same banner). That cannot be changed from
inside the kernel: the message travels through XLA as the text of a host-callback
failure. The host side can unwrap it: :func:`runtime_error_message` extracts the
message, :func:`clear_errors` (a context manager and decorator) re-raises such an error
as a plain ``ValueError`` with that message, and :func:`checked_jit` is ``jax.jit``
whose calls do so. ``EQX_ON_ERROR=nan`` (equinox's switch) turns every check into NaN
outputs instead, ``EQX_ON_ERROR=off`` removes them.

A user's own ``jax.jit``. The failure is a ``JaxRuntimeError`` created by jaxlib in C++
(``"INTERNAL: CpuCallback error calling callback: Traceback ..."``), so no exception
type of ours can make its ``str()`` lead with the message. What can be done on the
host, and is opt-in: :func:`install_error_display` (the ``jaxkit`` command calls it; a
library user calls it, or sets ``JAXKIT_ERROR_DISPLAY=1`` before the import). Importing
jaxkit changes no global hook otherwise. Installed, it does this:

* JAX's callback logger no longer prints the failed check's callback traceback to
  stderr ahead of the exception (a :mod:`logging` filter that drops only records of
  failed equinox checks);
* an uncaught such error (``sys.excepthook``, and IPython's / Jupyter's handler when a
  shell is running) prints ``jaxkit check failed: <message>`` as its first line, then
  the user's frames, then :class:`CheckError` with the message, instead of the banner.

A caught error still carries the full text; :func:`runtime_error_message` reads the
message from it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import traceback

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["CheckError", "check_data_matrix", "check_finite", "check_in_range", "checked_jit",
           "check_message", "clear_errors", "collinear_columns", "fail", "fail_first",
           "format_check_failure", "install_error_display", "is_traced", "runtime_error_message"]


class CheckError(ValueError):
    """A jaxkit input check that failed inside a compiled function, re-raised on the host
    (:func:`clear_errors`, :func:`checked_jit`) with the check's message alone. A
    ``ValueError``, as the same check raises outside ``jit``."""


def is_traced(x) -> bool:
    """Whether ``x`` is a tracer (inside ``jit``/``vmap``/``grad``), not a concrete value.

    Differentiable: no: a Python predicate on the argument's type.

    Args:
        x: any value.

    Returns:
        ``True`` for a :class:`jax.core.Tracer`.
    """
    return isinstance(x, jax.core.Tracer)


def fail(x, bad, msg: str):
    """Raise now when ``bad`` is concrete, else attach a run-time check to ``x``.

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: the value the check rides on (returned; traced, it carries the check).
        bad: boolean (array): the error condition; an array fails where any entry is
            true (as :func:`equinox.error_if`).
        msg: the error message, naming the argument.

    Returns:
        ``x``, with an :func:`equinox.error_if` check attached when traced.

    Raises:
        ValueError: ``bad`` is concrete and true.
    """
    if is_traced(bad) or is_traced(x):
        return eqx.error_if(x, bad, msg)
    if np.any(np.asarray(bad)):  # an array of conditions fails if any holds, as error_if
        raise ValueError(msg)
    return x


def fail_first(x, checks):
    """Like :func:`fail` for several ``(bad, msg)`` checks at once, reporting the first
    that fails. Traced, it is one :func:`equinox.branched_error_if` (one branch instead
    of one per check), which matters inside a loop body run thousands of times.

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: the value the checks ride on.
        checks: a sequence of ``(bad, msg)`` pairs, ``bad`` a boolean (array).

    Returns:
        ``x``, with one run-time check attached when traced.

    Raises:
        ValueError: some ``bad`` is concrete and true (the first such message).
    """
    bads = [jnp.any(bad) for bad, _ in checks]
    msgs = [msg for _, msg in checks]
    if any(is_traced(b) for b in bads) or is_traced(x):
        bad = jnp.stack(bads)
        return eqx.branched_error_if(x, jnp.any(bad), jnp.argmax(bad), msgs)
    for b, msg in zip(bads, msgs, strict=True):
        if bool(np.asarray(b)):
            raise ValueError(msg)
    return x


def check_finite(x, name: str):
    """Error naming ``name`` if ``x`` holds NaN or inf.

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: array to check.
        name: the argument's name, for the message.

    Returns:
        ``x`` (with a run-time check attached when traced).
    """
    return fail(x, ~jnp.all(jnp.isfinite(x)), f"`{name}` contains NaN or inf values")


def check_data_matrix(x, name: str = "x", *, min_rows: int | None = None, constant: bool = True):
    """Validate an (n, d) data matrix: rank 2, n >= 2, finite, n >= min_rows, no
    constant column.

    A column is constant when ``max - min <= 10 eps max(|max|, |min|, 1)``. Shape
    checks raise at trace time; value checks as :func:`fail`.

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: the data matrix.
        name: the argument's name, for the messages.
        min_rows: the fewest rows allowed (``None``: 2).
        constant: also reject constant columns.

    Returns:
        ``x`` (with run-time checks attached when traced).
    """
    if not hasattr(x, "ndim") or x.ndim != 2:
        shape = getattr(x, "shape", None)
        raise ValueError(f"`{name}` must be a 2-D array of shape (n_samples, n_features); "
                         f"got shape {shape}")
    n, d = x.shape
    if d < 1 or n < 2:
        raise ValueError(f"`{name}` needs at least 2 samples and 1 feature; got shape {x.shape}")
    if min_rows is not None and n < min_rows:
        raise ValueError(f"`{name}` has fewer samples ({n}) than required ({min_rows}); "
                         f"need at least as many samples as variables")
    if not constant:
        return check_finite(x, name)
    # one pass over the data: the column max and min give the spread, the scale, and
    # finiteness (a NaN or inf anywhere makes them non-finite)
    hi, lo = jnp.max(x, axis=0), jnp.min(x, axis=0)
    x = fail(x, ~jnp.all(jnp.isfinite(hi) & jnp.isfinite(lo)),
              f"`{name}` contains NaN or inf values")
    scale = jnp.maximum(jnp.maximum(jnp.abs(hi), jnp.abs(lo)), 1.0)
    const = hi - lo <= 10 * jnp.finfo(x.dtype).eps * scale
    return fail(x, jnp.any(const), f"`{name}` has a constant column (zero variance); "
                 f"drop it before fitting")


def check_in_range(value, name: str, *, lo=None, hi=None, lo_open: bool = False,
                   hi_open: bool = False, integer: bool = False):
    """Validate a concrete scalar hyperparameter: finite, in ``[lo, hi]`` (an end open
    with ``lo_open`` / ``hi_open``; ``None``: unbounded), an integer with ``integer``.
    A traced value is returned unchecked (it is data, checked where it is used).

    Differentiable: no: validates concrete Python scalars before tracing.

    Args:
        value: the hyperparameter (a Python or NumPy scalar, or a traced value).
        name: the argument's name, for the message.
        lo: lower bound, or ``None``.
        hi: upper bound, or ``None``.
        lo_open: exclude ``lo``.
        hi_open: exclude ``hi``.
        integer: require an integer value.

    Returns:
        ``value``.

    Raises:
        ValueError: ``value`` is concrete and outside the domain (or not a scalar).
    """
    if is_traced(value):
        return value
    arr = np.asarray(value)
    if arr.ndim != 0 or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"`{name}` must be a real scalar; got {value!r}")
    v = float(arr)
    if lo is None and hi is None:
        want = "a finite number"
    elif hi is None:
        want = f"{'>' if lo_open else '>='} {lo}"
    elif lo is None:
        want = f"{'<' if hi_open else '<='} {hi}"
    else:
        want = f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    if integer:
        want = {(1, None): "a positive integer", (0, None): "a non-negative integer"}.get(
            (lo, hi), f"an integer {want}")
    elif lo is not None and hi is not None:
        want = f"finite and {want}"
    bad = not np.isfinite(v)
    if integer:
        bad |= arr.dtype == bool or bad or v != int(v)
    if lo is not None:
        bad |= v <= lo if lo_open else v < lo
    if hi is not None:
        bad |= v >= hi if hi_open else v > hi
    if bad:
        raise ValueError(f"`{name}` must be {want}; got {value!r}")
    return value


def collinear_columns(x, *, rtol: float | None = None) -> tuple[int, list[int]]:
    """The numerical rank of the centred data matrix ``x`` and the columns taking part
    in its linear dependencies (concrete arrays only; for error messages).

    The null directions are the right singular vectors of ``x - mean`` (float64 SVD)
    whose singular value is at most ``rtol`` times the largest (default ``10 d eps`` of
    ``x``'s dtype); the rank counts the others. The columns are those with weight above
    ``1e-3`` in a null direction (in the smallest direction when there is none).

    Differentiable: no: NumPy on the host (a rank and column indices).

    Args:
        x: concrete ``(n, d)`` data.
        rtol: relative singular-value threshold.

    Returns:
        ``(rank, columns)``: the numerical rank and the sorted 0-based column indices.
    """
    a = np.asarray(x)
    dtype = a.dtype if np.issubdtype(a.dtype, np.floating) else np.float64
    a = a.astype(np.float64)
    n, d = a.shape
    if rtol is None:
        rtol = 10 * d * float(np.finfo(dtype).eps)
    _, s, vt = np.linalg.svd(a - a.mean(axis=0), full_matrices=True)
    s = np.concatenate([s, np.zeros(d - s.shape[0])])
    null = s <= rtol * max(s[0], np.finfo(np.float64).tiny)
    rank = int(d - null.sum())
    null[-1] = True
    cols = np.nonzero(np.max(np.abs(vt[null]), axis=0) > 1e-3)[0]
    return rank, [int(c) for c in cols]


_EQX_MESSAGE = re.compile(r"EquinoxRuntimeError: (.*?)(?:\n\n\n?-{10,}|\n-{10,}|$)", re.S)


def runtime_error_message(exc: BaseException) -> str | None:
    """The message of an :func:`equinox.error_if` check that failed inside ``jit``.

    Differentiable: no: reads an exception (returns a string).

    Args:
        exc: an exception, e.g. a ``jax.errors.JaxRuntimeError`` caught around a jitted
            call.

    Returns:
        The check's message (e.g. ``"`x` contains NaN or inf values"``), or ``None``
        when ``exc`` is not such a failure.
    """
    text = str(exc)
    if "EquinoxRuntimeError" not in text:
        return None
    found = _EQX_MESSAGE.findall(text)
    return found[-1].strip() if found else None


def _is_check_record(record: logging.LogRecord) -> bool:
    """A log record of JAX's callback machinery reporting a failed equinox check."""
    exc = record.exc_info[1] if record.exc_info else None
    return not (exc is not None and "EquinoxRuntimeError" in type(exc).__name__)


@contextlib.contextmanager
def _clear_errors():
    # JAX also logs the failing host callback with its traceback ("jax.pure_callback
    # failed"); inside the block those records of failed checks are dropped.
    log = logging.getLogger("jax._src.callback")
    added = _is_check_record not in log.filters  # installed for good already: keep it
    if added:
        log.addFilter(_is_check_record)
    try:
        yield
    except (jax.errors.JaxRuntimeError, RuntimeError) as e:
        msg = runtime_error_message(e)
        if msg is None:
            raise
        raise CheckError(msg) from None
    finally:
        if added:
            log.removeFilter(_is_check_record)


class clear_errors(contextlib.ContextDecorator):  # noqa: N801 (used as a function)
    """Context manager and decorator: an :func:`equinox.error_if` failure raised inside
    the block (a ``JaxRuntimeError`` or ``EquinoxRuntimeError`` carrying a jaxkit check)
    is re-raised as :class:`CheckError` (a ``ValueError``) with the message, without the
    callback traceback and banner. Other exceptions pass through unchanged. JAX
    dispatches asynchronously: block on the results (``jax.block_until_ready``) inside
    the block so a failure arrives there.

    Example::

        with checks.clear_errors():
            out = jax.block_until_ready(jitted(x))
    """

    def __enter__(self):
        self._cm = _clear_errors()
        return self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def checked_jit(fn=None, **jit_kwargs):
    """``jax.jit(fn, **jit_kwargs)`` whose calls block on their results and re-raise a
    failed jaxkit check as a plain ``ValueError`` with the check's message (see
    :class:`clear_errors`). For host-side callers; inside another ``jit`` call the
    function itself. Usable as ``@checked_jit`` or ``@checked_jit(static_argnames=...)``.

    Differentiable: no: returns a jitted function.

    Args:
        fn: the function to compile.
        **jit_kwargs: passed to :func:`jax.jit`.

    Returns:
        The wrapped, compiled function (its ``lower`` and ``trace`` are ``jax.jit``'s).
    """
    if fn is None:
        return functools.partial(checked_jit, **jit_kwargs)
    jitted = jax.jit(fn, **jit_kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with clear_errors():
            return jax.block_until_ready(jitted(*args, **kwargs))

    call.lower = jitted.lower
    call.trace = getattr(jitted, "trace", None)
    call.jitted = jitted
    return call


def check_message(exc: BaseException | None) -> str | None:
    """:func:`runtime_error_message` of ``exc`` or of an exception it was raised from
    (``__cause__`` / ``__context__``, a few levels).

    Differentiable: no: reads an exception (returns a string).
    """
    for _ in range(8):
        if exc is None:
            return None
        if isinstance(exc, CheckError):
            return str(exc)
        msg = runtime_error_message(exc)
        if msg is not None:
            return msg
        exc = exc.__cause__ or exc.__context__
    return None


def _user_frames(tb) -> list[str]:
    """The formatted frames of ``tb`` outside JAX's and equinox's own source."""
    keep = []
    for fs in traceback.extract_tb(tb):
        f = fs.filename.replace("\\", "/")
        if "/jax/_src/" in f or "/jaxlib/" in f or "/equinox/" in f:
            continue
        keep.append(fs)
    return traceback.format_list(keep)


def format_check_failure(msg: str, tb) -> str:
    """The text printed for an uncaught failed check: the message first, then the user's
    frames, then ``CheckError: message``.

    Differentiable: no: formats text.

    Args:
        msg: the failed check's message.
        tb: the traceback of the uncaught error (its jaxkit and JAX frames are left out).

    Returns:
        The text, a Python ``str`` ending with a newline.
    """
    lines = [f"jaxkit check failed: {msg}\n",
             "  (raised inside a compiled JAX function as jax.errors.JaxRuntimeError; call "
             "it through jaxkit.kernels.checks.checked_jit or within checks.clear_errors() "
             "to get a plain ValueError)\n",
             "Traceback (most recent call last):\n", *_user_frames(tb),
             f"{__name__}.CheckError: {msg}\n"]
    return "".join(lines)


_PREVIOUS_HOOK = None


def _excepthook(etype, value, tb):
    msg = check_message(value)
    if msg is None:
        return (_PREVIOUS_HOOK or sys.__excepthook__)(etype, value, tb)
    try:
        sys.stderr.write(format_check_failure(msg, tb))
        sys.stderr.flush()
    except Exception:  # never lose the error because the display failed
        (_PREVIOUS_HOOK or sys.__excepthook__)(etype, value, tb)


def _ipython_handler(shell, etype, value, tb, tb_offset=None):
    msg = check_message(value)
    if msg is None:
        return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    sys.stderr.write(f"jaxkit check failed: {msg}\n")
    err = CheckError(msg)
    return shell.showtraceback((CheckError, err, tb), tb_offset=tb_offset)


def install_error_display() -> bool:
    """Make a failed jaxkit check inside a user's ``jax.jit`` read as clearly as outside
    it (module docstring): the logging filter, ``sys.excepthook`` (chained to the one
    installed before) and, in a running IPython shell without custom handlers, its
    exception handler. Idempotent; opt-in (the ``jaxkit`` command installs it, and so does
    importing this module with ``JAXKIT_ERROR_DISPLAY=1``).

    Differentiable: no: installs a display hook (no arrays).

    Returns:
        Whether the hooks are installed.
    """
    global _PREVIOUS_HOOK
    logging.getLogger("jax._src.callback").addFilter(_is_check_record)  # a set: idempotent
    if sys.excepthook is not _excepthook:
        _PREVIOUS_HOOK = sys.excepthook
        sys.excepthook = _excepthook
    ipy = sys.modules.get("IPython")
    shell = getattr(ipy, "get_ipython", lambda: None)() if ipy is not None else None
    if shell is not None and not getattr(shell, "custom_exceptions", ()):
        try:
            shell.set_custom_exc((jax.errors.JaxRuntimeError, RuntimeError),
                                 _ipython_handler)
        except Exception:  # an unusual shell: keep its own display
            pass
    return True


if os.environ.get("JAXKIT_ERROR_DISPLAY", "0") == "1":
    install_error_display()
