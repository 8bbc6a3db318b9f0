"""Input checks shared by the charge-balance kernels (shapes, masks, charges).

Shape checks run in Python at trace time and raise ``ValueError``; value checks on traced
arrays become :func:`jaxkit.kernels.checks.fail` run-time checks.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ..checks import fail, is_traced

__all__ = ["check_allowed", "check_mask", "check_matrix", "check_q_int", "check_q_real",
           "never_balances"]


def check_matrix(x, name: str, k: int | None = None):
    """An ``(N, K)`` array with ``N, K >= 1`` (``K`` given: must match), as floats."""
    x = jnp.asarray(x)
    if x.ndim != 2 or (k is not None and x.shape[1] != k):
        want = "(N, K)" if k is None else f"(N, {k}) with K = len(q)"
        raise ValueError(f"`{name}` must be a 2-D array of shape {want}; got shape {x.shape}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"`{name}` needs at least one atom row and one species column; "
                         f"got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def check_mask(mask, n: int) -> Bool[Array, " N"]:
    """An ``(N,)`` boolean atom mask (``None``: every atom)."""
    if mask is None:
        return jnp.ones(n, bool)
    mask = jnp.asarray(mask)
    if mask.shape != (n,):
        raise ValueError(f"`mask` must have shape (N,) = ({n},); got shape {mask.shape}")
    return mask.astype(bool)


def check_allowed(allowed, n: int, k: int) -> Bool[Array, "N K"]:
    """An ``(N, K)`` boolean allowed-species matrix (``None``: everything allowed)."""
    if allowed is None:
        return jnp.ones((n, k), bool)
    allowed = jnp.asarray(allowed)
    if allowed.shape != (n, k):
        raise ValueError(f"`allowed` must have shape (N, K) = ({n}, {k}); "
                         f"got shape {allowed.shape}")
    return allowed.astype(bool)


def never_balances(qmin, qmax) -> str | None:
    """The error message when charges of one strict sign can never balance, else None."""
    if qmin > 0:
        return "all charges in `q` are > 0, so no assignment can ever be charge-balanced"
    if qmax < 0:
        return "all charges in `q` are < 0, so no assignment can ever be charge-balanced"
    return None


def check_q_real(q, dtype) -> Float[Array, " K"]:
    """Charges for the continuous routines: any finite reals; may be traced."""
    q = jnp.asarray(q)
    if q.ndim != 1 or q.shape[0] < 1:
        raise ValueError(f"`q` must be a non-empty 1-D array of species charges; "
                         f"got shape {q.shape}")
    q = q.astype(dtype)
    if not is_traced(q):
        qn = np.asarray(q)
        if not np.all(np.isfinite(qn)):
            raise ValueError("`q` contains NaN or inf values")
    else:
        q = fail(q, ~jnp.all(jnp.isfinite(q)), "`q` contains NaN or inf values")
    return q


def check_q_int(q) -> np.ndarray:
    """Charges for the discrete routines: a concrete 1-D array of integers."""
    if is_traced(q):
        raise ValueError("`q` must be concrete (a NumPy array or list, not a traced value): "
                         "its range sets the static size of the charge DP. Close over it "
                         "instead of passing it through jit/vmap")
    qn = np.asarray(q)
    if qn.ndim != 1 or qn.shape[0] < 1:
        raise ValueError(f"`q` must be a non-empty 1-D array of species charges; "
                         f"got shape {qn.shape}")
    if qn.dtype == bool or not np.issubdtype(qn.dtype, np.number):
        raise ValueError(f"`q` must hold integer charges; got dtype {qn.dtype}")
    if not np.all(np.isfinite(qn)):
        raise ValueError("`q` contains NaN or inf values")
    if np.abs(qn).max() > 1000:
        raise ValueError(f"charges in `q` must be at most 1000 in magnitude; got {qn.tolist()}")
    if not np.all(qn == np.round(qn)):
        raise ValueError(f"`q` must hold integer charges for the discrete projection; "
                         f"got {qn.tolist()}")
    qi = np.round(qn).astype(np.int64)
    if np.abs(qi).max() > 1000:
        raise ValueError(f"charges in `q` must be at most 1000 in magnitude; got {qi.tolist()}")
    if qi.shape[0] > 32767:
        raise ValueError(f"at most 32767 species are supported; got {qi.shape[0]}")
    msg = never_balances(qi.min(), qi.max())
    if msg:
        raise ValueError(msg)
    return qi
