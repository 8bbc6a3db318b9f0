"""Input checks and shared moments of the LiNGAM fits."""

from __future__ import annotations

from typing import Literal

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ..checks import check_data_matrix, collinear_columns, is_traced

Criterion = Literal["bic", "aic", "bic_sklearn", "aic_sklearn"]
_CRITERIA = ("bic", "aic", "bic_sklearn", "aic_sklearn")

# Hyvarinen's maximum-entropy approximation constants (lingam's 'pwling' measure).
_K1 = 79.047
_K2 = 7.4129
_GAMMA_H = 0.37457

# Cap on LARS-lasso steps per target (scikit-learn's LassoLarsIC: max_iter=500).
_LARS_MAX_STEPS = 500


def _moments(x):
    """Mean-centred (1/n) covariance, standard deviations and correlation."""
    n = x.shape[0]
    xc = x - jnp.mean(x, axis=0)
    cov = xc.T @ xc / n
    sd = jnp.sqrt(jnp.diagonal(cov))
    corr = cov / (sd[:, None] * sd[None, :])
    return corr, sd


def _check_x(x):
    if not hasattr(x, "ndim"):
        x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = jnp.asarray(x, jnp.result_type(float))
    min_rows = x.shape[1] if x.ndim == 2 else None
    x = check_data_matrix(x, "x", min_rows=min_rows)
    if not is_traced(x) and bool(_rank_deficient(_moments(x)[0])):
        raise ValueError(_collinear_message(x))
    return x


def _rank_deficient(corr: Float[Array, "d d"]) -> Bool[Array, ""]:
    """The correlation matrix is numerically singular: its smallest eigenvalue is at most
    ``10 d eps`` times its largest (collinear or duplicated columns)."""
    d = corr.shape[0]
    ev = jnp.linalg.eigvalsh(corr)
    return ev[0] <= 10 * d * jnp.finfo(corr.dtype).eps * ev[-1]


def _collinear_message(x) -> str:
    if is_traced(x):
        cols = "some columns"
    else:
        _, found = collinear_columns(x)
        cols = f"columns {found}"
    return (f"`x` is rank-deficient: {cols} are collinear (one is a linear combination of "
            f"the others, e.g. a duplicated column), so the regressions of a LiNGAM fit "
            f"are not identified. Drop or combine them before fitting")


def _check_prune_args(gamma, criterion):
    if criterion not in _CRITERIA:
        raise ValueError(f"`criterion` must be one of {_CRITERIA}; got {criterion!r}")
    if not is_traced(gamma) and not (np.ndim(gamma) == 0 and 0 <= float(gamma) < np.inf):
        raise ValueError(f"`gamma` must be a finite non-negative scalar; got {gamma}")


def _check_order(causal_order, d: int):
    order = jnp.asarray(causal_order)
    if order.shape != (d,) or not jnp.issubdtype(order.dtype, jnp.integer):
        raise ValueError(f"`causal_order` must be an integer array of shape ({d},); "
                         f"got shape {order.shape} and dtype {order.dtype}")
    if not is_traced(order):
        o = np.asarray(order)
        if not np.array_equal(np.sort(o), np.arange(d)):
            raise ValueError(f"`causal_order` must be a permutation of 0..{d - 1}; got {o}")
    return order
