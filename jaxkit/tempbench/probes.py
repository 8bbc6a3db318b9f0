"""Probing scores shared by the real-activation panel and the backtracking test.

* :func:`auroc_columns`: AUROC of every column (Mann-Whitney U with average ranks);
* :func:`logistic_fit`: L2 logistic regression by Newton's method (scikit-learn's
  ``LogisticRegression(C)`` objective);
* :func:`probe_scores`: the best single latent's held-out AUROC (chosen on the fit half,
  among :func:`candidate_columns` when there are many) and the k-sparse probe's
  (SAEBench's k-sparse probing);
* :func:`detection_at_fpr`: the detection rate of a score at a fixed false-positive rate,
  the threshold set on the fit half.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from .results import ProbeScores

__all__ = ["auroc_columns", "logistic_fit", "probe_scores", "detection_at_fpr",
           "candidate_columns"]


def auroc_columns(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUROC of every column of ``scores (N, M)`` for binary labels ``y (N,)``
    (Mann-Whitney with average ranks for ties; 0.5 for a constant column; nan when one
    class is absent)."""
    y = np.asarray(y, bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return np.full(scores.shape[1], np.nan)
    r = rankdata(np.asarray(scores, np.float64), axis=0)
    return (r[y].sum(0) - n1 * (n1 + 1) / 2) / (n1 * n0)


def logistic_fit(x: np.ndarray, y: np.ndarray, C: float = 1.0, iters: int = 50
                 ) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method (float64): minimises
    ``||w||^2 / 2 + C sum_i logloss(y_i, x_i w + b)`` with the intercept ``b``
    unpenalised (scikit-learn's ``LogisticRegression(C=C)`` objective). Returns
    ``(w, b)``."""
    X = np.concatenate([np.asarray(x, np.float64), np.ones((len(x), 1))], 1)
    t = np.asarray(y, np.float64)
    reg = np.eye(X.shape[1]) / C
    reg[-1, -1] = 0.0
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ beta))
        g = X.T @ (p - t) + reg @ beta
        H = (X * (p * (1 - p))[:, None]).T @ X + reg + 1e-10 * np.eye(X.shape[1])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta[:-1], float(beta[-1])


def candidate_columns(fit_x: np.ndarray, fit_y: np.ndarray, max_columns: int) -> np.ndarray:
    """The columns whose AUROC is computed: all, or (more than ``max_columns``) the
    ``max_columns`` with the largest standardised mean difference positive - negative
    on the fit half (a column's AUROC exceeds 0.5 only when it is larger on positives,
    so this keeps the contenders and bounds the ranking work)."""
    n = fit_x.shape[1]
    if n <= max_columns:
        return np.arange(n)
    y = np.asarray(fit_y, bool)
    diff = fit_x[y].mean(0) - fit_x[~y].mean(0)
    score = diff / (fit_x.std(0) + 1e-12)
    return np.sort(np.argsort(-score, kind="stable")[:max_columns])


def probe_scores(fit_x: np.ndarray, fit_y: np.ndarray, test_x: np.ndarray,
                 test_y: np.ndarray, k_probe: int, max_columns: int = 512
                 ) -> ProbeScores:
    """``auroc_best`` and ``probe_k`` (module docstring) of one representation
    (:class:`~jaxkit.tempbench.results.ProbeScores`); the best latent is chosen among
    :func:`candidate_columns`."""
    fit_y, test_y = np.asarray(fit_y, bool), np.asarray(test_y, bool)
    if fit_y.all() or not fit_y.any() or test_y.all() or not test_y.any():
        return ProbeScores(auroc_best=float("nan"), probe_k=float("nan"))
    cand = candidate_columns(fit_x, fit_y, max_columns)
    au = auroc_columns(fit_x[:, cand], fit_y)
    best = int(cand[int(np.nanargmax(au))])
    auroc_best = float(auroc_columns(test_x[:, best:best + 1], test_y)[0])
    diff = np.abs(fit_x[fit_y].mean(0) - fit_x[~fit_y].mean(0))
    cols = np.argsort(-diff, kind="stable")[:k_probe]
    mu, sd = fit_x[:, cols].mean(0), fit_x[:, cols].std(0) + 1e-6
    w, b = logistic_fit((fit_x[:, cols] - mu) / sd, fit_y)
    score = ((test_x[:, cols] - mu) / sd) @ w + b
    return ProbeScores(auroc_best=auroc_best,
                       probe_k=float(auroc_columns(score[:, None], test_y)[0]))


def detection_at_fpr(fit_score: np.ndarray, fit_y: np.ndarray, test_score: np.ndarray,
                     test_y: np.ndarray, fpr: float) -> tuple[float, float]:
    """Detection rate (true-positive rate) on the test half of ``score > threshold``, the
    threshold the smallest value whose false-positive rate on the fit half's negatives is
    at most ``fpr``. Returns ``(detection rate, test false-positive rate)``."""
    fit_y, test_y = np.asarray(fit_y, bool), np.asarray(test_y, bool)
    if not (0 < fpr < 1):
        raise ValueError(f"`fpr` must lie in (0, 1); got {fpr}")
    neg = np.sort(np.asarray(fit_score, np.float64)[~fit_y])
    if not len(neg) or not test_y.any() or test_y.all():
        return float("nan"), float("nan")
    thr = neg[min(int(np.ceil((1 - fpr) * len(neg))) - 1, len(neg) - 1)]
    ts = np.asarray(test_score, np.float64)
    return float((ts[test_y] > thr).mean()), float((ts[~test_y] > thr).mean())
