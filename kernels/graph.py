"""Structure-recovery metrics for estimated causal graphs.

Convention (the ``lingam`` package's): ``true[i, j] != 0`` means the directed edge
``j -> i``; an estimate ``est`` is a weighted adjacency in the same orientation, and an
edge ``j -> i`` is present where ``|est[i, j]| > threshold``. Diagonal entries
(self-loops) are ignored by every metric here.

All functions are pure, use fixed shapes and no Python control flow on values, so they
run eagerly, under ``jit`` and under ``vmap`` over a batch of same-shaped graphs.
NaN or inf off the diagonal of any graph or score matrix is an error naming the
argument (``ValueError`` on concrete arrays, an :func:`equinox.error_if` run-time check
under ``jit``), as is a negative or non-finite ``threshold``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, Num

from .checks import check_in_range, fail

__all__ = ["shd", "edge_metrics", "auroc", "auroc_defined", "auprc"]


def _check_square(a, name: str):
    a = jnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"`{name}` must be a square 2-D adjacency matrix; got shape {a.shape}")
    return a


def _check_pair(true, other, other_name: str, threshold=None):
    true = _check_square(true, "true")
    other = _check_square(other, other_name)
    if true.shape != other.shape:
        raise ValueError(f"`true` and `{other_name}` must have the same shape; "
                         f"got {true.shape} and {other.shape}")
    if threshold is not None:
        check_in_range(threshold, "threshold", lo=0)
    return _check_offdiag_finite(true, "true"), _check_offdiag_finite(other, other_name)


def _check_offdiag_finite(a, name: str):
    """NaN/inf off the diagonal is an error naming ``name`` (the diagonal is ignored)."""
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        return a
    off = ~jnp.eye(a.shape[0], dtype=bool)
    return fail(a, ~jnp.all(jnp.isfinite(jnp.where(off, a, 0))),
                f"`{name}` contains NaN or inf values (off the diagonal)")


def _binary_offdiag(true, est, threshold) -> tuple[Bool[Array, "d d"], Bool[Array, "d d"]]:
    d = true.shape[0]
    off = ~jnp.eye(d, dtype=bool)
    return (true != 0) & off, (jnp.abs(est) > threshold) & off


def shd(true: Num[Array, "d d"], est: Num[Array, "d d"], *, threshold: float = 0.0
        ) -> Int[Array, ""]:
    """Structural Hamming distance between a binary truth and a thresholded estimate.

    Counts the node pairs ``{i, j}`` whose edge configuration differs: a missing edge,
    an extra edge and a reversed edge each count **once** (as in the CDT / AVICI
    ``shd(..., double_for_anticausal=False)``). A pair with one true edge estimated
    in both directions also counts once. Symmetric in its two graph arguments.

    Reference: I. Tsamardinos, L. E. Brown, C. F. Aliferis, "The max-min hill-climbing
    Bayesian network structure learning algorithm", Machine Learning 65, 2006.

    Differentiable: no: an integer count.

    Args:
        true: true adjacency ``(d, d)``; ``true[i, j] != 0`` is the edge ``j -> i``.
        est: estimated (weighted) adjacency ``(d, d)``.
        threshold: an estimated edge is present where ``|est| > threshold`` (``>= 0``).

    Returns:
        The int32 number of node pairs whose edges differ.

    Raises:
        ValueError: non-square or mismatched shapes, NaN/inf entries, or a negative
            ``threshold`` (under ``jit``, value checks at run time).
    """
    true, est = _check_pair(true, est, "est", threshold)
    t, e = _binary_offdiag(true, est, threshold)
    diff = t != e
    pair_diff = diff | diff.T  # pair {i, j} differs in either direction
    return (jnp.sum(pair_diff) // 2).astype(jnp.int32)


def edge_metrics(true: Num[Array, "d d"], est: Num[Array, "d d"], *,
                 threshold: float = 0.0) -> dict[str, Array]:
    """Directed-edge precision, recall, F1 plus SHD and edge counts.

    An estimated edge ``j -> i`` is a true positive only when ``true[i, j] != 0``; a
    reversed edge is therefore one false positive *and* one false negative here (while
    :func:`shd` counts it once). Conventions for empty sets (instead of NaN):
    precision = 0 when no edge is estimated, recall = 0 when the truth has no edge,
    F1 = 0 when precision + recall = 0 (scikit-learn's ``zero_division=0``).

    With ``TP`` the estimated edges that are true: precision ``TP / n_est``, recall
    ``TP / n_true``, ``F1 = 2 P R / (P + R)``.

    Differentiable: no: counts and ratios of thresholded edges (piecewise constant).

    Args:
        true: true adjacency ``(d, d)``; ``true[i, j] != 0`` is the edge ``j -> i``.
        est: estimated (weighted) adjacency ``(d, d)``.
        threshold: an estimated edge is present where ``|est| > threshold`` (``>= 0``).

    Returns:
        A dict with float ``"precision"``, ``"recall"``, ``"f1"`` and int32 ``"shd"``
        (:func:`shd`), ``"n_edges_true"``, ``"n_edges_est"``.
    """
    true, est = _check_pair(true, est, "est", threshold)
    t, e = _binary_offdiag(true, est, threshold)
    dtype = jnp.result_type(float)
    tp = jnp.sum(t & e).astype(dtype)
    n_true = jnp.sum(t)
    n_est = jnp.sum(e)
    precision = jnp.where(n_est > 0, tp / jnp.maximum(n_est, 1), 0.0).astype(dtype)
    recall = jnp.where(n_true > 0, tp / jnp.maximum(n_true, 1), 0.0).astype(dtype)
    denom = precision + recall
    f1 = jnp.where(denom > 0, 2 * precision * recall / jnp.where(denom > 0, denom, 1.0), 0.0)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1.astype(dtype),
        "shd": shd(true, est, threshold=threshold),
        "n_edges_true": n_true.astype(jnp.int32),
        "n_edges_est": n_est.astype(jnp.int32),
    }


def _offdiag_labels_scores(true, scores):
    true, scores = _check_pair(true, scores, "scores")
    d = true.shape[0]
    rows, cols = np.nonzero(~np.eye(d, dtype=bool))  # static indices: fixed shapes
    y = true[rows, cols] != 0
    s = scores[rows, cols]
    if not jnp.issubdtype(s.dtype, jnp.floating):
        s = s.astype(jnp.result_type(float))
    return y, s


def auroc(true: Num[Array, "d d"], scores: Num[Array, "d d"]) -> Float[Array, ""]:
    """Area under the ROC curve of ``scores`` (e.g. ``|adjacency|``) for the binary
    truth, over the off-diagonal entries.

    Computed as the Mann-Whitney statistic with average ranks for ties, which equals
    ``sklearn.metrics.roc_auc_score(true != 0, scores)`` on the off-diagonal entries.
    NaN when the truth has no edge or is complete (the AUC is undefined).

    With ``n+`` true and ``n-`` absent edges and ``R`` the average ranks of the scores,
    ``AUC = (sum_{true} R - n+ (n+ + 1) / 2) / (n+ n-)`` (H. B. Mann, D. R. Whitney,
    Ann. Math. Stat. 18, 1947; J. A. Hanley, B. J. McNeil, Radiology 143, 1982).

    Differentiable: no: a rank statistic (piecewise constant in scores).

    Args:
        true: true adjacency ``(d, d)``; ``true[i, j] != 0`` is the edge ``j -> i``.
        scores: edge scores ``(d, d)``, higher meaning more likely an edge.

    Returns:
        The scalar AUC, in ``[0, 1]``, or NaN where it is undefined: the flag that says so
        is :func:`auroc_defined` (``jnp.where(auroc_defined(true), auc, fallback)``).
    """
    y, s = _offdiag_labels_scores(true, scores)
    srt = jnp.sort(s)
    lo = jnp.searchsorted(srt, s, side="left")
    hi = jnp.searchsorted(srt, s, side="right")
    rank = (lo + hi + 1).astype(s.dtype) / 2  # 1-based average rank
    n_pos = jnp.sum(y).astype(s.dtype)
    n_neg = y.shape[0] - n_pos
    u = jnp.sum(jnp.where(y, rank, 0.0)) - n_pos * (n_pos + 1) / 2
    ok = (n_pos > 0) & (n_neg > 0)
    return jnp.where(ok, u / jnp.where(ok, n_pos * n_neg, 1.0), jnp.nan)


def auroc_defined(true: Num[Array, "d d"]) -> Bool[Array, ""]:
    """Whether :func:`auroc` is defined for the truth ``true``: it has at least one edge
    and one absent edge off the diagonal (``n+ > 0`` and ``n- > 0``; the Mann-Whitney
    statistic divides by ``n+ n-``). The flag that goes with :func:`auroc`'s NaN, as
    ``sklearn.metrics.roc_auc_score`` raises for a single class.

    Differentiable: no: a boolean of the truth's support.

    Args:
        true: true adjacency ``(d, d)``; ``true[i, j] != 0`` is the edge ``j -> i``.

    Returns:
        A boolean scalar.
    """
    true = _check_offdiag_finite(_check_square(true, "true"), "true")
    d = true.shape[0]
    rows, cols = np.nonzero(~np.eye(d, dtype=bool))
    y = true[rows, cols] != 0
    return jnp.any(y) & jnp.any(~y)


def auprc(true: Num[Array, "d d"], scores: Num[Array, "d d"]) -> Float[Array, ""]:
    """Average precision of ``scores`` for the binary truth, over the off-diagonal
    entries: ``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds in
    decreasing order, exactly ``sklearn.metrics.average_precision_score`` (no
    interpolation; tied scores form one threshold). Equivalently the mean, over the
    true edges, of the precision at the threshold equal to that edge's score.

    0 when the truth has no edge (as scikit-learn, which also warns).

    Differentiable: no: a rank statistic (piecewise constant in scores).

    Args:
        true: true adjacency ``(d, d)``; ``true[i, j] != 0`` is the edge ``j -> i``.
        scores: edge scores ``(d, d)``, higher meaning more likely an edge.

    Returns:
        The scalar average precision, in ``[0, 1]``.
    """
    y, s = _offdiag_labels_scores(true, scores)
    m = s.shape[0]
    # number of entries / of positives with score >= s_i, for every i
    n_ge = m - jnp.searchsorted(jnp.sort(s), s, side="left")
    pos_sorted = jnp.sort(jnp.where(y, s, -jnp.inf))
    tp_ge = m - jnp.searchsorted(pos_sorted, s, side="left")
    prec = tp_ge.astype(s.dtype) / n_ge.astype(s.dtype)
    n_pos = jnp.sum(y)
    ap = jnp.sum(jnp.where(y, prec, 0.0)) / jnp.maximum(n_pos, 1).astype(s.dtype)
    return ap  # 0 when there is no positive, as scikit-learn
