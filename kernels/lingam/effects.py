"""What a fitted LiNGAM model says beyond its graph: total causal effects and the
independence of its error variables (lingam's ``estimate_total_effect``,
``calculate_total_effect`` and ``get_error_independence_p_values``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ..checks import check_data_matrix

__all__ = ["estimate_total_effect", "total_effects_from_adjacency", "hsic_test_gamma",
           "error_independence_p_values"]


def estimate_total_effect(
    x: Float[Array, "n d"],
    adjacency: Float[Array, "d d"],
    causal_order: Int[Array, " d"],
    from_index,
    to_index,
) -> tuple[Float[Array, ""], Bool[Array, ""]]:
    """Total effect of ``x_from`` on ``x_to`` by regression (lingam's
    ``_BaseLiNGAM.estimate_total_effect``): the coefficient of ``x_from`` in the OLS (with
    intercept) of ``x_to`` on ``x_from`` and its parents in ``adjacency`` (the back-door
    adjustment set of a DAG: Pearl 2009, thm 3.3.2).

    lingam warns when ``to`` precedes ``from`` in the causal order (the estimate may be
    wrong); here that is the second output, ``order_ok`` (False in that case), so it
    also works under ``jit``/``vmap``. Indices may be traced.

    Differentiable: yes, in x (adjacency and causal_order choose the regression).

    Args:
        x: the data ``(n, d)`` the model was fitted to (or new data).
        adjacency: ``(d, d)``, ``[i, j]`` the direct effect of ``x_j`` on ``x_i``.
        causal_order: ``(d,)`` permutation, ``causal_order[0]`` a root.
        from_index: the cause.
        to_index: the effect.

    Returns:
        ``(effect, order_ok)``.
    """
    x = check_data_matrix(x, "x", constant=False)
    adjacency = jnp.asarray(adjacency)
    d = x.shape[1]
    if adjacency.shape != (d, d):
        raise ValueError(f"`adjacency` must have shape ({d}, {d}); got {adjacency.shape}")
    for name, v in (("from_index", from_index), ("to_index", to_index)):
        if not isinstance(v, jax.core.Tracer) and not 0 <= int(v) < d:
            raise ValueError(f"`{name}` must lie in [0, {d}); got {v}")
    idx = jnp.arange(d)
    pos = jnp.zeros(d, jnp.int32).at[jnp.asarray(causal_order)].set(
        jnp.arange(d, dtype=jnp.int32))
    order_ok = pos[from_index] <= pos[to_index]
    use = (idx == from_index) | (jnp.abs(adjacency[from_index]) > 0)
    use = use & (idx != to_index)
    xc = x - jnp.mean(x, axis=0)
    gram = xc.T @ xc
    a = jnp.where(use[:, None] & use[None, :], gram, 0.0) + jnp.diag(jnp.where(use, 0.0, 1.0))
    rhs = jnp.where(use, gram[:, to_index], 0.0)
    coef = jnp.linalg.solve(a, rhs)
    return coef[from_index], order_ok


def total_effects_from_adjacency(adjacency: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """All total effects implied by a DAG's weights: ``T = (I - B)^{-1} - I = B + B^2 +
    ... + B^{d-1}`` (``B`` is nilpotent), so ``T[to, from]`` is the sum over directed
    paths ``from -> to`` of the products of the edge weights (lingam's
    ``calculate_total_effect``, which enumerates the paths). Computed as that finite
    series, so pairs without a path are exactly zero.

    Differentiable: yes, in adjacency.

    Args:
        adjacency: ``(d, d)`` acyclic weights ``B``, ``[i, j]`` the effect of ``j`` on ``i``.

    Returns:
        ``(d, d)`` total effects, ``[to, from]``, zero on the diagonal.
    """
    b = jnp.asarray(adjacency)
    if b.ndim != 2 or b.shape[0] != b.shape[1]:
        raise ValueError(f"`adjacency` must be a square matrix; got shape {b.shape}")
    def body(_, carry):
        acc, power = carry
        power = power @ b
        return acc + power, power

    total, _ = jax.lax.fori_loop(0, max(b.shape[0] - 2, 0), body, (b, b))
    return total


def _kernel_width(v: Float[Array, " n"]) -> Float[Array, ""]:
    """lingam's ``get_kernel_width``: sqrt(0.5 median) of the positive pairwise squared
    distances among the first 100 points."""
    v = v[:100]
    m = v.shape[0]
    dist = (v[:, None] - v[None, :]) ** 2
    upper = jnp.triu(jnp.ones((m, m), bool), k=1) & (dist > 0)
    med = jnp.nanmedian(jnp.where(upper, dist, jnp.nan))
    return jnp.sqrt(0.5 * med)


def _centred_gram(v, width):
    k = jnp.exp(-((v[:, None] - v[None, :]) ** 2) / (2 * width**2))
    n = v.shape[0]
    kc = k - (k.sum(0)[None, :] + k.sum(1)[:, None]) / n + k.sum() / n**2
    return k, kc


def hsic_test_gamma(x: Float[Array, " n"], y: Float[Array, " n"]
                    ) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """HSIC independence test with the gamma approximation of the null (Gretton et al.,
    "A kernel statistical test of independence", NeurIPS 2007), as lingam's
    ``hsic_test_gamma`` (Gaussian kernels, median-distance widths from the first 100
    points, ``bw_method="mdbs"``).

    ``stat = tr(Kc Lc) / n``; null mean ``(1 + mu_x mu_y - mu_x - mu_y) / n`` with
    ``mu`` the mean off-diagonal kernel value, variance
    ``72 (n-4)(n-5) / (n(n-1)(n-2)(n-3)) * mean_offdiag((Kc Lc / 6)^2)``; the p-value
    is the gamma survival function at ``stat`` with shape ``mean^2 / var`` and scale
    ``var n / mean``.

    Differentiable: yes, in x and y (the statistic and its p-value).

    Args:
        x: first sample ``(n,)``.
        y: second sample ``(n,)``.

    Returns:
        ``(statistic, p_value)``.
    """
    n = x.shape[0]
    k, kc = _centred_gram(x, _kernel_width(x))
    ky, lc = _centred_gram(y, _kernel_width(y))
    stat = jnp.sum(kc * lc) / n
    v = (kc * lc / 6) ** 2
    var = (jnp.sum(v) - jnp.trace(v)) / n / (n - 1)
    var = 72 * (n - 4) * (n - 5) / n / (n - 1) / (n - 2) / (n - 3) * var
    off = ~jnp.eye(n, dtype=bool)
    mu_x = jnp.sum(jnp.where(off, k, 0.0)) / n / (n - 1)
    mu_y = jnp.sum(jnp.where(off, ky, 0.0)) / n / (n - 1)
    mean = (1 + mu_x * mu_y - mu_x - mu_y) / n
    shape = mean**2 / var
    scale = var * n / mean
    p = jax.scipy.special.gammaincc(shape, stat / scale)
    return stat, p


def error_independence_p_values(x: Float[Array, "n d"], adjacency: Float[Array, "d d"]
                                ) -> Float[Array, "d d"]:
    """p-values of pairwise independence of the model's error variables (lingam's
    ``get_error_independence_p_values``): ``E = X - X B^T``, and for each pair
    ``i < j`` the :func:`hsic_test_gamma` p-value of ``(E_i, E_j)``, symmetric with a
    zero diagonal. Small values say the LiNGAM assumption of independent errors fails
    for that pair. Memory ``O(n^2)`` per pair (pairs mapped one after another).

    Differentiable: yes, in x and adjacency.

    Args:
        x: data ``(n, d)``.
        adjacency: ``(d, d)``, ``[i, j]`` the effect of ``x_j`` on ``x_i``.

    Returns:
        ``(d, d)`` p-values.
    """
    x = check_data_matrix(x, "x", constant=False)
    adjacency = jnp.asarray(adjacency, x.dtype)
    d = x.shape[1]
    if adjacency.shape != (d, d):
        raise ValueError(f"`adjacency` must have shape ({d}, {d}); got {adjacency.shape}")
    e = x - x @ adjacency.T
    ii, jj = jnp.triu_indices(d, k=1)
    p = jax.lax.map(lambda ij: hsic_test_gamma(e[:, ij[0]], e[:, ij[1]])[1], (ii, jj))
    out = jnp.zeros((d, d), x.dtype).at[ii, jj].set(p)
    return out + out.T
