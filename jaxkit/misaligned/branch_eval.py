"""What the drug-target-interaction and virtual-screening branches share: ridge scores
over seeds, AUROC per seed, choosing the best misaligned baseline on
validation sets, and the competitive / above-chance claims.

* Ridge scores: per seed ``s``, features standardised by the training rows' mean and
  deviation, :math:`w = (X_t^\\top X_t + \\lambda I)^{-1} X_t^\\top (y_t - \\bar y_t)`,
  score :math:`x^\\top w + \\bar y_t` for every row (a linear-probability score on 0/1
  labels, as :mod:`jaxkit.misaligned.classification` uses). The fits are small (at
  most a thousand features) and run with one BLAS thread (``threadpoolctl``): a
  multithreaded Cholesky of that size spins its workers on a loaded machine (measured
  60x slower on 2 busy cores, 1.8 s against 0.03 s for 932 features).
* AUROC (Hanley & McNeil 1982): the probability that a random positive outscores a
  random negative, ties counting 1/2 (the Mann-Whitney statistic from average ranks).
* A baseline is *competitive* with a model when the model's per-seed AUROC advantage
  lies below a margin fixed in the configuration; tested one-sided both ways with Holm's
  correction over the cases (:func:`jaxkit.stats.holm_superiority` on the negated
  advantages), "yes" when competitive in every case (:func:`jaxkit.stats.all_of`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.stats import rankdata
from threadpoolctl import threadpool_limits

from jaxkit.claims import Claim
from jaxkit.stats import all_of, holm_superiority, superiority

from .results import SeedMean

__all__ = ["check_run_args", "ridge_scores", "grouped_ridge_scores", "auroc", "per_seed",
           "best_on_validation", "competitive_claims", "summary"]


def check_run_args(seeds: int, test_fraction: float, val_fraction: float, lam: float) -> None:
    """A one-line ``ValueError`` naming the first bad argument of a branch run: ``seeds``
    an integer >= 2, both fractions in (0, 1), ``lam`` > 0."""
    if int(seeds) != seeds or seeds < 2:
        raise ValueError(f"`seeds` must be an integer >= 2; got {seeds!r}")
    for name, f in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
        if not 0 < f < 1:
            raise ValueError(f"`{name}` must lie in (0, 1); got {f!r}")
    if not lam > 0:
        raise ValueError(f"`lam` must be > 0; got {lam!r}")


def _one_blas_thread(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapped


@_one_blas_thread
def ridge_scores(X, y, train, lam: float) -> np.ndarray:
    """``(S, n)`` ridge scores of every row, one model per row of ``train`` (``(S, n)``
    boolean) fitted on the standardised features ``X`` ``(n, d)`` with penalty ``lam``."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    train = np.asarray(train, bool)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or train.shape[-1] != y.shape[0]:
        raise ValueError(f"`X` {X.shape}, `y` {y.shape} and `train` {train.shape} must "
                         "agree on the number of rows")
    out = np.empty(train.shape)
    for s, t in enumerate(train):
        mu, sd = X[t].mean(0), X[t].std(0)
        sd = np.where(sd > 0, sd, 1.0)
        Z = (X - mu) / sd
        ym = y[t].mean()
        A = Z[t].T @ Z[t] + lam * np.eye(X.shape[1])
        w = np.linalg.solve(A, Z[t].T @ (y[t] - ym))
        out[s] = Z @ w + ym
    return out


@_one_blas_thread
def grouped_ridge_scores(blocks, y, train, lam: float) -> np.ndarray:
    """:func:`ridge_scores` of rows built from node features: row ``k`` is the
    concatenation of ``F_b[ids_b[k]]`` over the ``blocks`` ``[(F_b (N_b, d_b), ids_b
    (n,)), ...]`` (a drug-target pair: the drug's and the kinase's features).

    The same ridge without building the ``(n, sum d_b)`` matrix: the Gram matrix and the
    moments come from node counts, :math:`X^\\top X` having blocks
    :math:`F_b^\\top C_{bb'} F_{b'}` with :math:`C_{bb'}` the training co-occurrence counts
    of the nodes (diagonal for :math:`b = b'`), one Cholesky factor per seed, and the
    scores are sums of per-node terms.

    Args:
        blocks: ``[(F_b, ids_b), ...]``.
        y: ``(n,)`` labels, or ``(k, S, n)``: ``k`` label sets per seed sharing the fit's
            factor (e.g. the labels and their permutation).
        train: ``(S, n)`` boolean training masks.
        lam: the ridge penalty.

    Returns:
        ``(S, n)`` scores, or ``(k, S, n)`` for ``(k, S, n)`` labels.
    """
    from scipy.linalg import cho_factor, cho_solve

    train = np.asarray(train, bool)
    y = np.asarray(y, np.float64)
    Y = np.broadcast_to(y, (1, *train.shape)) if y.ndim == 1 else y
    Fs = [np.asarray(F, np.float64) for F, _ in blocks]
    ids = [np.asarray(i) for _, i in blocks]
    if Y.shape[1:] != train.shape or any(i.shape != (train.shape[1],) for i in ids):
        raise ValueError(f"`blocks` ids, `y` {y.shape} and `train` {train.shape} must agree "
                         "on the number of rows (and of seeds)")
    d = np.cumsum([0] + [F.shape[1] for F in Fs])
    out = np.empty(Y.shape)
    for s, t in enumerate(train):
        n = t.sum()
        G = np.empty((d[-1], d[-1]))
        xy = np.empty((Y.shape[0], d[-1]))
        mu = np.empty(d[-1])
        for b, (F, i) in enumerate(zip(Fs, ids, strict=True)):
            c = np.bincount(i[t], minlength=F.shape[0]).astype(np.float64)
            mu[d[b]:d[b + 1]] = F.T @ c / n
            for k in range(Y.shape[0]):
                xy[k, d[b]:d[b + 1]] = F.T @ np.bincount(i[t], weights=Y[k, s, t],
                                                         minlength=F.shape[0])
            for b2 in range(b, len(Fs)):
                F2, i2 = Fs[b2], ids[b2]
                if b2 == b:
                    blk = (F * c[:, None]).T @ F
                else:
                    C = np.zeros((F.shape[0], F2.shape[0]))
                    np.add.at(C, (i[t], i2[t]), 1.0)
                    blk = F.T @ C @ F2
                G[d[b]:d[b + 1], d[b2]:d[b2 + 1]] = blk
                G[d[b2]:d[b2 + 1], d[b]:d[b + 1]] = blk.T
        ym = Y[:, s, t].mean(axis=1)
        cov = G / n - np.outer(mu, mu)
        sd = np.sqrt(np.clip(np.diag(cov), 0, None))
        sd = np.where(sd > 1e-12, sd, 1.0)
        fac = cho_factor(n * cov / np.outer(sd, sd) + lam * np.eye(d[-1]))
        W = cho_solve(fac, ((xy - n * ym[:, None] * mu) / sd).T).T / sd  # (k, d)
        score = np.broadcast_to(ym[:, None], (Y.shape[0], Y.shape[2])).copy()
        for b, (F, i) in enumerate(zip(Fs, ids, strict=True)):
            score += ((F - mu[d[b]:d[b + 1]]) @ W[:, d[b]:d[b + 1]].T).T[:, i]
        out[:, s] = score
    return out[0] if y.ndim == 1 else out


def auroc(y, score, mask) -> float:
    """AUROC of ``score`` for the 0/1 labels ``y`` on the rows ``mask`` (nan when one
    class is absent)."""
    m = np.asarray(mask, bool)
    yy, ss = np.asarray(y)[m] > 0.5, np.asarray(score, np.float64)[m]
    n1, n0 = int(yy.sum()), int((~yy).sum())
    if n1 == 0 or n0 == 0:
        return math.nan
    r = rankdata(ss)
    return float((r[yy].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def per_seed(fn, y, preds, masks, *args) -> np.ndarray:
    """``fn(y, preds[s], masks[s], *args)`` for every seed ``s``: ``(S,)``."""
    return np.array([fn(y, p, m, *args) for p, m in zip(preds, masks, strict=True)])


def best_on_validation(val_auroc: dict[str, np.ndarray], candidates) -> str:
    """The candidate with the highest mean validation AUROC (the first on ties)."""
    cands = [c for c in candidates if c in val_auroc]
    if not cands:
        raise ValueError("`candidates`: none has validation scores")
    return max(cands, key=lambda c: (np.nanmean(val_auroc[c]), -cands.index(c)))


def summary(v) -> SeedMean:
    """The :class:`~jaxkit.misaligned.results.SeedMean` (nan-ignoring mean, values) of a
    per-seed array."""
    v = np.asarray(v, float)
    return SeedMean(mean=float(np.nanmean(v)), per_seed=v.tolist())


def competitive_claims(paper: str, claim: str, cases: list[dict], margin: float, *,
                       note: str = "", kind: str = "paper", per_case: bool = True
                       ) -> list[Claim]:
    """The claim "the best misaligned baseline is competitive with the model in every
    case", and (``per_case``) one extension row per case.

    Args:
        paper: the citation.
        claim: the sentence.
        cases: ``{"label", "advantage" (per-seed model - baseline AUROC), "best"}``.
        margin: the AUROC margin fixed in the configuration.
        note: appended to the claim's note.
        kind: the claim's kind.
        per_case: add each case's Holm-adjusted row (kind ``"extension"``).

    Returns:
        The claim rows; "not shown" when there is no case.
    """
    if not cases:
        return [Claim(paper, claim, "n/a", "not shown", note=note or "no case ran",
                      kind=kind)]
    vs = holm_superiority([-np.asarray(c["advantage"], float) for c in cases],
                          margin=-margin)
    comp = [v.verdict == "yes" for v in vs]
    ahead = [v.verdict == "no" for v in vs]
    n = max(len(np.asarray(c["advantage"])) for c in cases)
    out = [Claim(paper, claim,
                 f"competitive in {sum(comp)} of {len(cases)} cases; the model ahead by more "
                 f"than the margin in {sum(ahead)}", all_of(v.verdict for v in vs),
                 f"per case: the model's per-seed AUROC advantage over its best misaligned "
                 f"baseline against the margin {margin:g} (fixed in the configuration), "
                 f"one-sided paired t over {n} seeds both ways, Holm over the {len(cases)} "
                 f"cases at family-wise 2.5% one-sided; yes if competitive in every case, no "
                 f"if the model leads by more than the margin in any", note, kind=kind)]
    if per_case:
        for c, ok, bad in zip(cases, comp, ahead, strict=True):
            v = superiority(c["advantage"], margin=margin)
            out.append(Claim(
                paper, f"{c['label']}: the best misaligned baseline ({c['best']}) is "
                       f"competitive with the model (AUROC advantage below {margin:g})",
                f"{v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]",
                "yes" if ok else "no" if bad else "not shown",
                f"the Holm-adjusted decision for this case ({len(cases)} cases); interval: "
                f"95% t CI of the mean advantage, n={v.n}",
                "best baseline chosen on validation sets", kind="extension"))
    return out
