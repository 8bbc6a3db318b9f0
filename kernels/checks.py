"""Input checks shared by the kernels (public: pipelines and user code use them too).

Shape checks are static, so they run in Python at trace time and raise ``ValueError``.
Value checks (NaN/inf, constant columns) need the data: on concrete arrays they raise
``ValueError`` before any computation; on traced arrays (inside ``jit``/``vmap``) they
become :func:`equinox.error_if` checks, which raise at run time with the same message.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["check_data_matrix", "check_finite", "fail", "fail_first", "is_traced"]


def is_traced(x) -> bool:
    """Whether ``x`` is a tracer (inside ``jit``/``vmap``/``grad``), not a concrete value.

    Args:
        x: any value.

    Returns:
        ``True`` for a :class:`jax.core.Tracer`.
    """
    return isinstance(x, jax.core.Tracer)


def fail(x, bad, msg: str):
    """Raise now when ``bad`` is concrete, else attach a run-time check to ``x``.

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
