"""The position paper's arguments as tests that can fail (issue 66).

* :func:`instability_vs_null`: ranking instability under a benchmark choice against a
  null in which rankings should be stable. The statistic is the discordance of two
  rankings by mean F1, ``D(a, b) = (1 - tau_b) / 2`` (the share of method pairs ordered
  oppositely; Kendall 1938). The benchmark value ranks the methods on the even-numbered
  datasets of cell ``a`` and the odd-numbered ones of cell ``b``; the null value ranks
  them on the even and odd datasets of one *null cell* in which every ranked method's
  declared assumptions hold (so the two rankings differ by sampling noise alone, the
  same amount of it). ``Delta = D_bench - D_null``, bootstrapped over the (even, odd)
  dataset pairs; claim "yes" when ``Delta`` exceeds the margin for some choice (one-
  sided bootstrap p-values, Holm over the choices), "no" when every choice's one-sided
  upper bound lies below the margin.
* :func:`rank_correlation`: argument (i): Kendall tau between the rankings under two
  identifiability assumptions (non-Gaussian noise, equal variances, nonlinear additive
  noise), a percentile bootstrap interval over datasets (resampled jointly: the cells
  share their graphs), and a stated margin: "yes" (the ranking changes) when some
  pair's Bonferroni upper bound lies below the margin, "no" when every pair's lower
  bound lies above it.
* :func:`family_verdict`: argument (ii): a family of in-scope models (the base SCM
  with its edge weights multiplied by ``sqrt(n0 / n_k)``, one member per ``n_k``);
  every member at every sample size. Pointwise consistency: each member's SHD falls
  with ``n`` (per-dataset log-log slope, one-sided t, Holm over members). No uniform
  consistency: at each member size ``n_k`` the member built for it (a lower bound of
  the family's worst case) keeps a mean SHD above the stated floor (one-sided t, every
  size: intersection-union). "no" when at the largest size every member's SHD is shown
  below the floor.

References: Kendall (1938), Holm (1979), Efron & Tibshirani (1993, percentile
bootstrap); uniform consistency: Robins, Scheines, Spirtes & Wasserman (2003).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jaxkit.stats import as_generator, holm_reject, one_sided_p

from .analysis import kendall_tau
from .results import ChoiceInstability, FamilyCurves

__all__ = ["discordance", "instability_vs_null", "rank_correlation", "family_curves",
           "family_verdict"]


def discordance(a, b) -> float:
    """``(1 - tau_b) / 2`` of two score vectors (0: same order, 1: reversed); NaN when
    tau is undefined."""
    t = kendall_tau(a, b)
    return (1.0 - t) / 2.0 if np.isfinite(t) else math.nan


def _stack(cell, methods) -> np.ndarray:
    return np.stack([np.asarray(cell.f1[m], float) for m in methods], 1)


def _boot_p(boot: np.ndarray, margin: float) -> float:
    """One-sided percentile-bootstrap p-value of "the statistic exceeds ``margin``"."""
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return math.nan
    return float((1 + np.sum(boot <= margin)) / (boot.size + 1))


def instability_vs_null(key, choices: Sequence[tuple[str, object, object]], null,
                        methods: Sequence[str], *, margin: float, n_boot: int = 500,
                        alpha: float = 0.05
                        ) -> tuple[str, str, str, list[ChoiceInstability]]:
    """Ranking instability of benchmark choices against the null cell (module docstring).

    Args:
        key: a JAX key or numpy Generator (the bootstrap).
        choices: ``(name, cell a, cell b)`` with :class:`~.grid.CellResult` cells that
            share their datasets' graphs (the same index = the same graph).
        null: the null cell (every method in ``methods`` in scope there).
        methods: the ranked methods (each counted once).
        margin: the discordance excess that counts as instability (fixed in the config).
        n_boot: bootstrap resamples.
        alpha: one-sided level.

    Returns:
        ``(verdict, measured, test, rows)``; ``rows`` per choice a
        :class:`~.results.ChoiceInstability` (name, estimate, lower and upper one-sided
        bounds, p, dataset pairs).
    """
    if len(methods) < 2 or not choices:
        return "not tested at this size", "-", "fewer than 2 ranked methods", []
    rng = as_generator(key)
    fn = _stack(null, methods)
    rows = []
    for name, a, b in choices:
        fa, fb = _stack(a, methods), _stack(b, methods)
        ok = np.nonzero(np.isfinite(fa).all(1) & np.isfinite(fb).all(1)
                        & np.isfinite(fn).all(1))[0]
        h1, h2 = ok[0::2], ok[1::2]
        k = min(h1.size, h2.size)
        h1, h2 = h1[:k], h2[:k]
        if k < 2:
            rows.append(ChoiceInstability(name=name, est=math.nan, lo=math.nan, hi=math.nan,
                                          p=math.nan, pairs=k))
            continue

        def delta(j, fa=fa, fb=fb, h1=h1, h2=h2):
            i1, i2 = h1[j], h2[j]
            return (discordance(fa[i1].mean(0), fb[i2].mean(0))
                    - discordance(fn[i1].mean(0), fn[i2].mean(0)))

        boot = np.array([delta(rng.integers(0, k, k)) for _ in range(n_boot)])
        fin = boot[np.isfinite(boot)]
        lo, hi = (np.quantile(fin, [alpha, 1 - alpha]) if fin.size else (math.nan,) * 2)
        rows.append(ChoiceInstability(name=name, est=delta(np.arange(k)), lo=float(lo),
                                      hi=float(hi), p=_boot_p(boot, margin), pairs=k))
    ps = [r.p if np.isfinite(r.p) else 1.0 for r in rows]
    rej = holm_reject(ps, alpha)
    absent = all(np.isfinite(r.hi) and r.hi < margin for r in rows)
    verdict = "yes" if rej.any() else "no" if absent else "not shown"
    measured = "; ".join(f"{r.name}: {r.est:.3g} [{r.lo:.3g}, {r.hi:.3g}]" for r in rows)
    test = (f"discordance excess over the null cell (D = (1 - tau_b)/2 of mean-F1 rankings "
            f"on disjoint dataset halves), {n_boot} bootstrap resamples of the half-pairs; "
            f"'yes' if some choice's one-sided p survives Holm over {len(rows)} at "
            f"{alpha:g} against margin {margin:g}; 'no' if every one-sided "
            f"{1 - alpha:.0%} upper bound is below it")
    return verdict, measured, test, rows


def rank_correlation(key, cells: dict, methods: Sequence[str], *, margin: float,
                     n_boot: int = 500, alpha: float = 0.05) -> tuple[str, str, str]:
    """Argument (i): Kendall tau between the mean-F1 rankings under each pair of
    identifiability assumptions (``cells``: ``{name: CellResult}``; module docstring).

    Returns:
        ``(verdict, measured, test)``.
    """
    names = list(cells)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    if len(methods) < 2 or not pairs:
        return "not tested at this size", "-", "fewer than 2 ranked methods or cells"
    rng = as_generator(key)
    q = alpha / len(pairs)  # Bonferroni for "some pair changed"
    out = []
    for a, b in pairs:
        fa, fb = _stack(cells[a], methods), _stack(cells[b], methods)
        ok = np.nonzero(np.isfinite(fa).all(1) & np.isfinite(fb).all(1))[0]
        if ok.size < 2:
            out.append((a, b, math.nan, math.nan, math.nan, math.nan))
            continue
        est = kendall_tau(fa[ok].mean(0), fb[ok].mean(0))
        boot = []
        for _ in range(n_boot):
            j = ok[rng.integers(0, ok.size, ok.size)]
            boot.append(kendall_tau(fa[j].mean(0), fb[j].mean(0)))
        boot = np.asarray(boot)
        boot = boot[np.isfinite(boot)]
        hi_b = float(np.quantile(boot, 1 - q)) if boot.size else math.nan
        lo = float(np.quantile(boot, alpha)) if boot.size else math.nan
        out.append((a, b, est, lo, hi_b, ok.size))
    changed = any(np.isfinite(r[4]) and r[4] < margin for r in out)
    stable = all(np.isfinite(r[3]) and r[3] > margin for r in out)
    verdict = "yes" if changed else "no" if stable else "not shown"
    measured = "; ".join(f"{a} vs {b}: tau {e:.3g} (lower {lo:.3g}, upper {hi:.3g})"
                         for a, b, e, lo, hi, _ in out)
    test = (f"Kendall tau of mean-F1 rankings of {len(methods)} methods, percentile "
            f"bootstrap over datasets ({n_boot}); 'yes' if some pair's upper bound "
            f"(Bonferroni, one-sided {q:.3g}) is below margin {margin:g}; 'no' if every "
            f"pair's one-sided {1 - alpha:.0%} lower bound is above it")
    return verdict, measured, test


def family_curves(family: dict, method: str) -> FamilyCurves:
    """The :class:`~.results.FamilyCurves` (members ``[n_k]``, sizes ``[n]``, SHD
    ``(members, sizes, batch)``) of ``family`` (``{(n_k, n): CellResult}``, member
    ``n_k`` at sample size ``n``)."""
    members = sorted({k for k, _ in family})
    ns = sorted({n for _, n in family})
    shd = np.stack([np.stack([np.asarray(family[(k, n)].shd[method], float) for n in ns])
                    for k in members])
    return FamilyCurves(members=members, ns=ns, shd=shd)


def family_verdict(family: dict, method: str, *, floor: float,
                   alpha: float = 0.05) -> tuple[str, str, str]:
    """Argument (ii) on the family (module docstring). ``floor``: mean SHD (edges)."""
    c = family_curves(family, method)
    members, ns, shd = c.members, c.ns, c.shd
    if len(ns) < 2 or len(members) < 1:
        return "not tested at this size", "-", "needs two sizes and a member"
    ln = np.log(np.asarray(ns, float))
    lc = ln - ln.mean()
    y = np.log(shd + 1.0)  # (members, sizes, batch)
    slopes = (lc[None, :, None] * (y - y.mean(1, keepdims=True))).sum(1) / (lc * lc).sum()
    p_fall = [one_sided_p(-s)[0] for s in slopes]
    falls = holm_reject(p_fall, alpha)
    diag = [(k, shd[i, ns.index(k)]) for i, k in enumerate(members) if k in ns]
    above = [one_sided_p(v - floor)[0] < alpha for _, v in diag]
    last = shd[:, -1]
    below_all = all(one_sided_p(v - floor)[1] < alpha for v in last)
    verdict = ("yes" if falls.all() and diag and all(above) else
               "no" if below_all else "not shown")
    mean = np.nanmean(shd, 2)
    measured = (f"worst case (member built for n) mean SHD "
                f"{' / '.join(f'{np.nanmean(v):.2f}' for _, v in diag)} at n = "
                f"{[k for k, _ in diag]}; members' mean SHD from n={ns[0]} to n={ns[-1]}: "
                + "; ".join(f"{k}: {mean[i, 0]:.2f} -> {mean[i, -1]:.2f}"
                            for i, k in enumerate(members)))
    test = (f"each member's per-dataset slope of log(SHD + 1) on log n below 0 (one-sided "
            f"t, Holm over {len(members)} members at {alpha:g}: {int(falls.sum())} fall) "
            f"and, at every member size, the member built for it above the floor "
            f"{floor:g} SHD (one-sided t at {alpha:g}, all sizes); 'no' if at n={ns[-1]} "
            f"every member is shown below the floor")
    return verdict, measured, test
