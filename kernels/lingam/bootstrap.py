"""Bootstrap of a LiNGAM fit, vmapped over the resamples (lingam's
``BootstrapMixin.bootstrap`` and ``BootstrapResult``).

lingam refits the model in a Python loop, once per resample; here the resamples are one
``vmap`` of the fixed-shape fit (under which the fits run one after another on CPU, each
a compiled program, or as one batched program on GPU/TPU: see ``sequential_vmap`` of
:func:`jaxkit.kernels.ica.fastica`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._checks import _check_x
from .effects import total_effects_from_adjacency
from .fit import direct_lingam, ica_lingam

__all__ = ["BootstrapResult", "bootstrap", "bootstrap_probabilities",
           "causal_direction_counts"]


class BootstrapResult(NamedTuple):
    """Per resample: the fit's adjacency, its total effects and its causal order."""

    adjacency_matrices: Float[Array, "b d d"]
    total_effects: Float[Array, "b d d"]  # [to, from], zero unless from precedes to
    causal_orders: Int[Array, "b d"]
    resampled_indices: Int[Array, "b n"]
    converged: Bool[Array, " b"]  # per resample (FastICA's flag for ICA-LiNGAM)


def bootstrap(
    key: PRNGKeyArray,
    x: Float[Array, "n d"],
    n_sampling: int,
    *,
    method: Literal["direct", "ica"] = "direct",
    **fit_kwargs,
) -> BootstrapResult:
    """Refit LiNGAM on ``n_sampling`` resamples of the rows of ``x`` (with replacement,
    ``n`` rows each, as scikit-learn's ``resample`` in lingam's ``bootstrap``).

    For each resample: the fit (:func:`jaxkit.kernels.lingam.direct_lingam` or
    :func:`jaxkit.kernels.lingam.ica_lingam`, with ``fit_kwargs``, e.g.
    ``prior_knowledge``), its adjacency, and the total effects ``T[to, from]`` of
    :func:`jaxkit.kernels.lingam.effects.total_effects_from_adjacency` for every ``from``
    preceding ``to`` in that fit's causal order (zero elsewhere), as lingam's
    ``calculate_total_effect`` over the order. ICA-LiNGAM's FastICA start is drawn per
    resample from its key. The resamples differ from lingam's (another generator), so
    only the distribution of the results is comparable.

    Differentiable: no: refits LiNGAM (see direct_lingam and ica_lingam).

    Args:
        key: PRNG key (resampling, and ICA-LiNGAM's ``w_init``).
        x: data ``(n, d)``: finite, no constant column, ``n >= d``.
        n_sampling: the number of resamples (static, ``>= 1``).
        method: ``"direct"`` or ``"ica"`` (static).
        **fit_kwargs: options of the fit (not ``w_init``).

    Returns:
        A :class:`BootstrapResult` with a leading axis of ``n_sampling``.
    """
    if isinstance(n_sampling, bool) or not isinstance(n_sampling, int) or n_sampling < 1:
        raise ValueError(f"`n_sampling` must be an integer greater than 0; got {n_sampling!r}")
    if method not in ("direct", "ica"):
        raise ValueError(f"`method` must be 'direct' or 'ica'; got {method!r}")
    if "w_init" in fit_kwargs:
        raise ValueError("`w_init` cannot be shared by the resamples: each draws its own")
    x = _check_x(x)
    n, d = x.shape
    k_idx, k_fit = jax.random.split(key)
    idx = jax.random.randint(k_idx, (n_sampling, n), 0, n)
    fit_keys = jax.random.split(k_fit, n_sampling)

    x = jnp.asarray(x)  # a NumPy array cannot be indexed by the traced resample rows

    def one(k, rows):
        xs = x[rows]
        if method == "ica":
            res = ica_lingam(k, xs, **fit_kwargs)
        else:
            res = direct_lingam(xs, **fit_kwargs)
        pos = jnp.zeros(d, jnp.int32).at[res.causal_order].set(jnp.arange(d, dtype=jnp.int32))
        earlier = pos[None, :] < pos[:, None]  # [to, from]: from precedes to
        te = jnp.where(earlier, total_effects_from_adjacency(res.adjacency), 0.0)
        return res.adjacency, te, res.causal_order, res.converged

    adj, te, orders, conv = jax.vmap(one)(fit_keys, idx)
    return BootstrapResult(adj, te, orders, idx, conv)


def bootstrap_probabilities(result: BootstrapResult, min_causal_effect: float | None = None
                            ) -> Float[Array, "d d"]:
    """Fraction of resamples with ``|B[i, j]| > min_causal_effect`` (lingam's
    ``BootstrapResult.get_probabilities``; NaN entries count as 0).

    Differentiable: no: fractions of thresholded edges (piecewise constant).

    Args:
        result: a :class:`BootstrapResult`.
        min_causal_effect: threshold (``None``: 0; else ``> 0``, as lingam).

    Returns:
        ``(d, d)`` probabilities.
    """
    thr = _threshold(min_causal_effect)
    b = jnp.nan_to_num(result.adjacency_matrices)
    return jnp.mean((jnp.abs(b) > thr).astype(b.dtype), axis=0)


def causal_direction_counts(result: BootstrapResult, n_directions: int | None = None,
                            min_causal_effect: float | None = None,
                            split_by_causal_effect_sign: bool = False) -> dict:
    """Counts of each edge ``from -> to`` over the resamples, most frequent first
    (lingam's ``get_causal_direction_counts``; concrete results only, it returns Python
    lists). Equal counts keep the ``(to, from[, sign])`` order of ``np.unique`` (a
    stable sort; lingam's ``argsort`` is not stable, so its ties may come in another
    order).

    Differentiable: no: counts in NumPy (a Python dict).

    Args:
        result: a :class:`BootstrapResult`.
        n_directions: keep the top ``n_directions`` (``None``: all).
        min_causal_effect: threshold on ``|B|`` (``None``: 0).
        split_by_causal_effect_sign: count the signs of the effects apart.

    Returns:
        ``{"from": [...], "to": [...], "count": [...]}`` (and ``"sign"``).
    """
    import numpy as np

    if n_directions is not None and (not isinstance(n_directions, int) or n_directions < 1):
        raise ValueError(f"`n_directions` must be an integer greater than 0; got "
                         f"{n_directions!r}")
    thr = _threshold(min_causal_effect)
    b = np.nan_to_num(np.asarray(result.adjacency_matrices))
    rows = []
    for am in b:
        to, fr = np.nonzero(np.abs(am) > thr)
        if split_by_causal_effect_sign:
            rows.append(np.c_[to, fr, np.sign(am[to, fr]).astype(np.int64)])
        else:
            rows.append(np.c_[to, fr])
    allr = np.concatenate(rows) if rows else np.zeros((0, 2), np.int64)
    keys = ["from", "to", "count"] + (["sign"] if split_by_causal_effect_sign else [])
    if len(allr) == 0:
        return {k: [] for k in keys}
    uniq, counts = np.unique(allr, axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:n_directions]
    out = {"from": uniq[order, 1].tolist(), "to": uniq[order, 0].tolist(),
           "count": counts[order].tolist()}
    if split_by_causal_effect_sign:
        out["sign"] = uniq[order, 2].tolist()
    return out


def _threshold(min_causal_effect):
    if min_causal_effect is None:
        return 0.0
    if not float(min_causal_effect) > 0.0:
        raise ValueError(f"`min_causal_effect` must be a value greater than 0; got "
                         f"{min_causal_effect!r}")
    return float(min_causal_effect)
