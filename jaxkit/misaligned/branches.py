"""The pipeline's second and third branches of drug discovery and the paper row they
decide.

``run_branches`` runs each branch of ``cfg.branches`` as one cached stage:

* ``"dti"``: drug-target interaction on Davis (:mod:`jaxkit.misaligned.dti`), stage
  ``misaligned-dti``;
* ``"screening"``: virtual screening on DUD-E's actives and property-matched decoys of
  ``cfg.dude_targets`` (:mod:`jaxkit.misaligned.screening`), stage
  ``misaligned-screening``.

Both use the run's ``seeds``, ``test_fraction``, ``val_fraction``, ``ridge_lambda``,
``n_bits`` and the MLP's training settings, and the margins fixed in the configuration:
``auroc_margin`` (a baseline is competitive when the model's AUROC advantage is below
it) and ``chance_margin`` (the decoy-bias row: AUROC above 1/2 + it).

The paper sentence "By examining case studies across multiple branches of AIDD, we
demonstrate that misaligned baselines have consistently exposed such failure modes"
(:func:`branches_claim`): each branch that ran contributes its own competitive verdict
(molecular property prediction: the pipeline's paper row over its cases; DTI and
screening: their branch rows, Holm over their cases); "yes" when every branch says yes,
"no" when any says no (:func:`jaxkit.stats.all_of`), "not tested" with fewer than two
branches. The literature part of the sentence ("have exposed", a historical claim) is not
tested; the note says so.
"""

from __future__ import annotations

from jaxkit.claims import Claim
from jaxkit.registry import RunContext
from jaxkit.stats import all_of

from . import dti as D
from . import models as Mo
from . import screening as S
from .results import Branches

__all__ = ["BRANCHES", "run_branches", "markdown", "claims", "branches_claim"]

BRANCHES = ("dti", "screening")
_ROWS = {"dti": D.C_DTI, "screening": S.C_SCREEN}
_NAMES = {"property": "molecular property prediction", "dti": "drug-target interaction",
          "screening": "virtual screening"}


def run_branches(ctx: RunContext, cfg, ts: Mo.TrainSettings) -> Branches:
    """The results of every branch of ``cfg.branches`` (module docstring)."""
    out = {}
    common = dict(seeds=cfg.seeds, test_fraction=cfg.test_fraction,
                  val_fraction=cfg.val_fraction, lam=cfg.ridge_lambda, ts=ts,
                  resume=ctx.resume, mesh=ctx.mesh)
    ck = ctx.out_dir / "checkpoints"
    if "dti" in cfg.branches:
        out["dti"] = ctx.stage("misaligned-dti", lambda: D.run_dti(
            ctx.key("misaligned-train-dti"), ctx.rng("misaligned-dti"),
            D.load_dti(cfg.n_bits), checkpoint_dir=ck / "misaligned-dti", **common))
    if "screening" in cfg.branches:
        out["screening"] = ctx.stage("misaligned-screening", lambda: S.run_screening(
            ctx.key("misaligned-train-screening"), ctx.rng("misaligned-screening"),
            S.load_screening(cfg.dude_targets, cfg.n_bits),
            checkpoint_dir=ck / "misaligned-screening", **common))
    return Branches(**out)


def markdown(results: Branches) -> str:
    """The branches' tables."""
    md = D.markdown(results.dti) if results.dti is not None else ""
    return md + (S.markdown(results.screening) if results.screening is not None else "")


def claims(cfg, results: Branches) -> list[Claim]:
    """Every branch's rows (all extensions, module docstring)."""
    rows: list[Claim] = []
    if results.dti is not None:
        rows += D.claims(results.dti, cfg.auroc_margin)
    if results.screening is not None:
        rows += S.claims(results.screening, cfg.auroc_margin, cfg.chance_margin)
    return rows


def branches_claim(paper: str, claim: str, property_verdict: str | None,
                   branch_rows: list[Claim]) -> Claim:
    """The multiple-branches paper row (module docstring).

    Args:
        paper: the citation.
        claim: the sentence.
        property_verdict: the molecular-property branch's paper verdict (None: it did
            not run).
        branch_rows: the rows of :func:`claims`.

    Returns:
        A ``"paper"`` :class:`~jaxkit.claims.Claim`.
    """
    parts = {} if property_verdict is None else {"property": property_verdict}
    for b, sentence in _ROWS.items():
        row = next((r for r in branch_rows if r.claim == sentence), None)
        if row is not None:
            parts[b] = row.verdict
    measured = "; ".join(f"{_NAMES[b]}: {v}" for b, v in parts.items()) or "n/a"
    note = ("the literature half of the sentence (misaligned baselines have exposed such "
            "failures in published case studies) is historical and not tested; each "
            "branch's own verdict is its competitive test (property prediction: the paper "
            "row above; DTI and screening: their branch rows below)")
    if len(parts) < 2:
        return Claim(paper, claim, measured, "not tested",
                     note="fewer than two branches ran (`branches` in the configuration); "
                          + note)
    return Claim(paper, claim, measured, all_of(parts.values()),
                 f"every branch's competitive verdict must be yes (intersection-union over "
                 f"{len(parts)} branches); no if any branch's is no", note)
