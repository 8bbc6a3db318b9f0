"""Claims and table of the Sachs comparison with label-aware methods
(:mod:`.sachs_labels`): the paper's real-data claim decided by bootstrap TOST, and its
negative control.

The claim "on real-world data the approach performs comparably to methods that
explicitly require environment labels" is an equivalence claim: per label-aware method
(GIES, JCI-style DirectLiNGAM), the F1 difference pooled ICA-LiNGAM minus the method,
paired on the same resample, must have its 90% bootstrap interval inside
``±sachs_margin`` (fixed in the configuration before the run). "yes" when it does for
every method (intersection-union), "no" when some method's interval lies wholly outside
the margin, else "not shown". The SHD differences are reported with their intervals.

The control: a chance-level graph (random DAGs with the consensus's edge count) must not
be "comparable" to GIES by the same test and margin; a "yes" or "not shown" there means
the test cannot tell a label-aware method from chance on these data, and the claim row
says nothing.
"""

from __future__ import annotations

import numpy as np

from jaxkit.claims import Claim
from jaxkit.report import markdown_table
from jaxkit.stats import Verdict

from .results import SachsComparison
from .sachs_labels import LABEL_METHODS, bootstrap_equivalence

__all__ = ["REAL_DATA", "sachs_claims", "sachs_label_table"]

REAL_DATA = ("On real-world data the approach performs comparably to methods that "
             "explicitly require environment labels.")
NAMES = {"gies": "GIES", "jci-direct": "JCI-DirectLiNGAM", "chance": "chance graph"}


def _fmt(v: Verdict) -> str:
    def f(x):
        return "n/a" if x is None or not np.isfinite(x) else f"{x:.3g}"

    return f"{f(v.estimate)} [{f(v.lo)}, {f(v.hi)}]"


def _diff(values: dict[str, np.ndarray], a: str, b: str) -> np.ndarray:
    return np.asarray(values[a], float) - np.asarray(values[b], float)


def sachs_claims(paper: str, margin: float,
                 cmp: SachsComparison | None) -> tuple[Claim, Claim | None]:
    """``(the paper's real-data claim, the negative control or None)`` (module
    docstring); ``cmp`` is :func:`.sachs_labels.sachs_compare`'s result, None when the
    stage did not run (the claim is then "not tested")."""
    if cmp is None:
        return Claim(paper, REAL_DATA, "-", "not tested", "",
                     "The Sachs comparison with methods given the environment labels did "
                     "not run."), None
    vs = {m: bootstrap_equivalence(_diff(cmp.f1, "pooled-ica", m), margin=margin)
          for m in LABEL_METHODS}
    shd = {m: bootstrap_equivalence(_diff(cmp.shd, "pooled-ica", m), margin=1e9)
           for m in LABEL_METHODS}
    verdicts = [v.verdict for v in vs.values()]
    verdict = ("yes" if all(v == "yes" for v in verdicts) else
               "no" if "no" in verdicts else "not shown")
    f1 = {m: cmp.f1[m][0] for m in cmp.f1}
    measured = "; ".join(f"F1 minus {NAMES[m]}: {_fmt(v)}" for m, v in vs.items())
    claim = Claim(
        paper, REAL_DATA + f" Sachs et al. (2005), {cmp.transform} data: pooled "
        f"ICA-LiNGAM without labels has an F1 within ±{margin:g} of GIES and of "
        "JCI-style DirectLiNGAM, both given the nine conditions (and GIES their targets).",
        measured, verdict,
        f"{vs[LABEL_METHODS[0]].test}; per method, 'yes' only if every method is within "
        "the margin (intersection-union)",
        f"F1 on all rows: pooled ICA-LiNGAM {f1['pooled-ica']:.3f}, "
        + ", ".join(f"{NAMES[m]} {f1[m]:.3f}" for m in LABEL_METHODS)
        + f", chance {f1['chance']:.3f}. SHD difference (ICA minus method, 90% interval): "
        + "; ".join(f"{NAMES[m]} {_fmt(v)}" for m, v in shd.items())
        + ". Bootstrap bias check (the verdict keeps the percentile interval, fixed "
        "before the run): ICA F1 on all rows vs its resample median "
        f"{f1['pooled-ica']:.3f} / {np.median(cmp.f1['pooled-ica'][1:]):.3f}; basic "
        "(bias-reversed) 90% intervals of the F1 difference: "
        + "; ".join(f"{NAMES[m]} [{2 * v.estimate - v.hi:.3g}, {2 * v.estimate - v.lo:.3g}]"
                    for m, v in vs.items())
        + ". Conditions mapped to the file's row blocks by their sizes (see "
        "`sachs_labels`); the margin is `sachs_margin`, fixed before the run.")
    ctrl = bootstrap_equivalence(_diff(cmp.f1, "chance", "gies"), margin=margin)
    control = Claim(
        paper, "Negative control: a chance-level graph (random DAGs with the consensus's "
        f"18 edges) is comparable to GIES on Sachs (F1 within ±{margin:g}); must be 'no' "
        "for the real-data claim to mean anything.", _fmt(ctrl), ctrl.verdict, ctrl.test,
        "Chance F1 = the mean over random DAGs per resample, paired with GIES on the same "
        "resample: if GIES were indistinguishable from chance, matching it would show "
        "nothing.", "setup")
    return claim, control


def sachs_label_table(cmp: SachsComparison | None, margin: float) -> list[str]:
    """The Markdown lines of the comparison: per method its F1 and SHD on all rows and
    the 90% bootstrap intervals over the resamples."""
    if cmp is None:
        return []
    rows = []
    for m in cmp.methods:
        f1 = np.asarray(cmp.f1[m], float)
        lo, hi = np.quantile(f1[1:], [0.05, 0.95])
        s = cmp.shd.get(m)
        shd = "-" if s is None else (f"{s[0]:.0f} [{np.quantile(s[1:], 0.05):.0f}, "
                                     f"{np.quantile(s[1:], 0.95):.0f}]")
        rows.append([m, f"{f1[0]:.3f} [{lo:.3f}, {hi:.3f}]", shd,
                     f"{cmp.seconds[m]:.1f}"])
    conds = ", ".join(f"{c} ({n})" for c, n in zip(cmp.conditions, cmp.n_rows, strict=True))
    return [
        f"### Sachs et al. (2005) with its conditions: label-free vs label-aware "
        f"({cmp.transform} data, {cmp.n_boot} resamples within conditions)", "",
        markdown_table(["method", "F1 on all rows [90% bootstrap]",
                        "SHD on all rows [90% bootstrap]", "time s"], rows), "",
        f"Conditions (rows): {conds}. pooled-ica sees the pooled rows only; gies gets the "
        "conditions and their targets; jci-direct gets one context column per condition "
        "(no targets); chance is the mean over random DAGs with 18 edges. Equivalence "
        f"margin ±{margin:g} F1 (`sachs_margin`).", ""]
