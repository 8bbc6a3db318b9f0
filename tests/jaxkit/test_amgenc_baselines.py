"""AMGenC's existing methods (jaxkit.amgenc.baselines, issue 64 part 3) and the report rows
built on them (jaxkit.amgenc.report_more): the SMACT-like filter by hand, rejection and
repair on hand-made draws, the paper row's negative control (a method that does mitigate
makes it "no"), the rewritten validity row, and rows withheld below the minimum number
of held-out cells."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from jaxkit.amgenc import baselines as B
from jaxkit.amgenc import report_more as R
from jaxkit.amgenc.config import QUICK, Config
from jaxkit.amgenc.data import Data
from jaxkit.amgenc.glass import Cell
from jaxkit.amgenc.results import (
    ArmCells,
    DesignAccuracy,
    DesignCells,
    JudgedRow,
    JudgeRelaxation,
    JudgeScores,
    MethodDraws,
)
from jaxkit.amgenc.sample import AMGENC_ARM, Arm, Samples
from jaxkit.amgenc.tables import ELEMENTS, OXIDES
from jaxkit.claims import Claim

E = {e: ELEMENTS.index(e) for e in ELEMENTS}


def _sp(**counts) -> np.ndarray:
    return np.concatenate([np.full(n, E[k.replace("p", "+")]) for k, n in counts.items()])


def test_oxidation_filter_by_hand():
    # Na2O.SiO2: neutral with the table's states, species unchanged
    s = _sp(Na=2, Si=1, O=3)
    np.testing.assert_array_equal(B.oxidation_filter(s), s)
    # 1 Fe2+ + 2 Fe3+ + 4 O balances species by species, but one state per element
    # cannot (3 x 2 - 8, 3 x 3 - 8): the filter rejects what the species accept
    assert B.oxidation_filter(np.r_[_sp(Fe2p=1, Fe3p=2), _sp(O=4)]) is None
    # 2 Fe labelled Fe2+ with 3 O: neutral as Fe3+, and relabelled so
    got = B.oxidation_filter(np.r_[_sp(Fe2p=2), _sp(O=3)])
    np.testing.assert_array_equal(got, np.r_[_sp(Fe3p=2), _sp(O=3)])
    # P2O3 passes with P +3 (the filter's table), though unbalanced with P +5
    assert B.oxidation_filter(_sp(P=2, O=3)) is not None
    assert B.oxidation_filter(_sp(Si=1, O=3)) is None
    assert B.oxidation_filter(np.array([-1, E["O"]])) is None


def _cell(species, box=10.0):
    n = len(species)
    return Cell(np.asarray(species), np.random.default_rng(n).uniform(0, box, (n, 3)), box,
                np.zeros(len(OXIDES), np.int64), {})


def _draws():
    """Three draws padded to 6 atoms for targets SiO2 x2 (balanced: 6 atoms) and
    Na2O.SiO2 (6 atoms): a balanced draw, one O short of balance (Si3O5: +2), and a
    filter-only draw (P2O3 + a padding atom)."""
    targets = [_cell(_sp(Si=2, O=4)), _cell(_sp(Na=2, Si=1, O=3))]
    rows = [_sp(Si=2, O=4), np.r_[_sp(Si=3, O=3)], np.r_[_sp(P=2, O=3), -1]]
    species = np.stack(rows)
    mask = species >= 0
    arm = Arm(x=np.zeros((3, 6, 3), np.float32), species=species, soft_charge=np.zeros(3),
              ode_seconds=1.0, discrete_seconds=0.0)
    s = Samples(arms={"none": arm}, mask=mask, box=np.full(3, 10.0),
                target_index=np.array([0, 0, 1]))
    return s, Data(train=targets, test=targets)


def test_rejection_filter_and_repair_on_hand_made_draws():
    s, d = _draws()
    out = B.existing_methods(s, d)
    assert list(out) == list(B.METHODS)
    assert all(isinstance(m, MethodDraws) for m in out.values())
    rej, filt, rep = (out[m] for m in B.METHODS)
    np.testing.assert_array_equal(rej.delivered, [1, 0, 0])
    np.testing.assert_array_equal(filt.delivered, [1, 0, 1])
    np.testing.assert_array_equal(filt.balanced, [1, 0, 0])  # P2O3 only with P +3
    assert rej.composition_l1[0] == pytest.approx(0.0)
    assert np.isnan(rej.composition_l1[1])
    # repair: every draw balanced with the fewest species changes
    np.testing.assert_array_equal(rep.delivered, [1, 1, 1])
    np.testing.assert_array_equal(rep.balanced, [1, 1, 1])
    assert rep.changed[0] == 0 and rep.changed[1] == 1  # Si3O3 (+6): one atom
    q = np.array([4, 3, 3, 5, 1, 1, 1, 2, 2, 2, 2, 2, 3, -2])
    for i in range(3):
        sp = rep.species[i][s.mask[i]]
        assert q[sp].sum() == 0
    assert np.all(rep.species[2][~s.mask[2]] == -1)
    # metrics.json's means: the filter delivers 2 of 3 draws, balanced (P +5) only 1
    m = filt.as_dict()
    assert list(m) == ["delivered", "balanced", "composition_l1", "seconds"]
    assert m["delivered"] == pytest.approx(2 / 3) and m["balanced"] == pytest.approx(1 / 3)
    assert m["composition_l1"] == pytest.approx(np.nanmean(filt.composition_l1))


def _arm_cells(comp):
    """An arm's per-cell values with the composition errors ``comp`` (the rest zero)."""
    z = np.zeros(len(comp))
    return ArmCells(balanced=z, soft_charge=z, composition_l1=np.asarray(comp, float),
                    composition_other=z, valid=z, rdf_l1=z)


def _ev(delivered, comp_method, comp_none):
    n = len(comp_none)
    d = np.asarray(delivered, float)
    m = MethodDraws(delivered=d, species=np.zeros((n, 1), int), seconds=0.0,
                    composition_l1=np.asarray(comp_method), balanced=d, changed=np.zeros(n))
    return SimpleNamespace(methods={"repair": m},
                           per_cell={"none": _arm_cells(comp_none),
                                     AMGENC_ARM: _arm_cells(np.zeros(n))})


def test_mitigation_row_says_no_when_a_method_mitigates():
    rng = np.random.default_rng(0)
    none = rng.uniform(0.1, 0.3, 40)
    # negative control: the method delivers a balanced cell per draw at the same
    # composition error: it mitigates, so "no existing method mitigates" must be "no"
    mit = R.mitigation_claim(QUICK, [("multi", _ev(np.ones(40), none + 0.001
                                                   * rng.standard_normal(40), none))])
    assert mit.verdict == "no" and mit.kind == "paper"
    # a method that delivers a cell for one draw in three fails: "yes"
    low = np.where(np.arange(40) % 3 == 0, 1.0, 0.0)
    fail = R.mitigation_claim(QUICK, [("multi", _ev(low, np.where(low > 0, none, np.nan),
                                                    none))])
    assert fail.verdict == "yes"
    # balanced every time but at a far worse composition: fails as well
    worse = R.mitigation_claim(QUICK, [("multi", _ev(np.ones(40), none + 0.3, none))])
    assert worse.verdict == "yes"
    assert "mitigate_share" in mit.test and "Holm over 2 tests" in mit.test


def test_validity_row_leaves_charge_out():
    s, d = _draws()  # training O/cation ratios: 2.0 (SiO2) and 1.0 (Na2O.SiO2)

    def arm(rows):
        return Arm(x=s.arms["none"].x, species=np.stack(rows), soft_charge=np.zeros(3),
                   ode_seconds=1.0, discrete_seconds=0.0)

    # none: a draw without a network former (Na4O2) and one without O (Si6) are not
    # valid; AMGenC: Si3O3 is unbalanced (+6) but valid once charge is left out
    none = arm([_sp(Si=2, O=4), _sp(Na=4, O=2), _sp(Si=6)])
    am = arm([_sp(Si=2, O=4), _sp(Si=2, O=4), _sp(Si=3, O=3)])
    s2 = Samples(arms={"none": none, AMGENC_ARM: am}, mask=np.ones((3, 6), bool),
                 box=s.box, target_index=s.target_index)
    c = R.validity_claim(d, s2)
    assert c.kind == "extension" and "charge left out" in c.claim
    assert "shares 1.00 vs 0.33" in c.note
    assert float(c.measured.split()[0]) == pytest.approx(2 / 3, abs=1e-3)


def test_rows_are_withheld_below_the_minimum_number_of_cells():
    rows = [Claim("AMGenC", "x", "1", "yes", "t", "n"), Claim("AMGenC", "y", "2", "no")]
    kept = R.withhold(rows, 8, 8)
    assert [c.verdict for c in kept] == ["yes", "no"]
    held = R.withhold(rows, 3, 8)
    assert {c.verdict for c in held} == {"not tested at this size"}
    assert all("withheld: 3 held-out cell(s), fewer than the 8" in c.note for c in held)
    assert held[0].measured == "1"
    assert QUICK.min_cells == 8 and QUICK.n_test >= QUICK.min_cells
    with pytest.raises(ValueError, match="`min_cells`"):
        Config(min_cells=0)
    with pytest.raises(ValueError, match="`mitigate_share`"):
        Config(mitigate_share=1.5)
    with pytest.raises(ValueError, match="`judge`"):
        Config(dataset="published", kind="silica", other_kinds=(), judge="bks")


def test_design_row_is_scored_by_the_judge_when_attached():
    from jaxkit.amgenc import report

    rng = np.random.default_rng(1)
    n = 30
    good = {p: rng.uniform(0.0, 0.01, n) for p in report.DESIGN_PROPERTIES}
    bad = {p: v + 1.0 for p, v in good.items()}  # AMGenC far worse

    def design(errors):
        return DesignAccuracy.from_cells(DesignCells(**errors))

    def judge(none, am):
        rows = {k: JudgedRow(judged=1.0, n=n, energy_before=0.0, energy_after=0.0,
                             energy_before_cells=np.zeros(n), energy_after_cells=np.zeros(n),
                             plausibility_before=None, plausibility_after=None,
                             design=design(e), target_index=np.arange(n),
                             judged_target_index=np.arange(n))
                for k, e in (("none", none), (AMGENC_ARM, am))}
        return JudgeScores(name="pedone", about="Pedone", made_by="recipe", rows=rows,
                           relaxation=JudgeRelaxation(
                               plausibility="pedone: 60 FIRE steps at the fixed box",
                               design="pedone: 2 rounds x 60 FIRE steps"),
                           targets_judged=1.0)

    # the data potential's own scores say AMGenC is no worse; the judge's say it is
    own = {"none": design(good), AMGENC_ARM: design(good)}
    ev = SimpleNamespace(design=own, judge=judge(good, bad))
    assert report.design_claim(QUICK, [("multi", SimpleNamespace(design=own, judge=None))]
                               ).verdict == "yes"
    c = report.design_claim(QUICK, [("multi", ev)])
    assert c.verdict == "no" and "scored by: multi: pedone: 2 rounds" in c.note
    # a judge that could score no cell: too few pairs, said so, not shown
    nan = {p: np.full(n, np.nan) for p in report.DESIGN_PROPERTIES}
    ev = SimpleNamespace(design=own, judge=judge(nan, nan))
    assert np.isnan(ev.judge.rows["none"].design.density_error)
    c = report.design_claim(QUICK, [("multi", ev)])
    assert c.verdict == "not shown" and "too few scored pairs (n=0" in c.measured


def test_design_row_compares_with_the_separately_trained_baseline():
    """With the AMDEN-style baseline sampled, the paper row compares AMGenC with it and the
    same model's unconstrained arm moves to an extension row; the two can disagree."""
    from jaxkit.amgenc import report
    from jaxkit.amgenc.sample import BASELINE_ARM

    rng = np.random.default_rng(2)
    n = 30
    good = {p: rng.uniform(0.0, 0.01, n) for p in report.DESIGN_PROPERTIES}
    bad = {p: v + 1.0 for p, v in good.items()}

    def design(errors):
        return DesignAccuracy.from_cells(DesignCells(**errors))

    # AMGenC as good as its own model's unconstrained arm, far worse than the baseline
    own = {"none": design(good), AMGENC_ARM: design(good), BASELINE_ARM: design(
        {p: v - 0.5 for p, v in good.items()})}
    ev = SimpleNamespace(design=own, judge=None)
    paper = report.design_claim(QUICK, [("multi", ev)])
    assert paper.kind == "paper" and paper.verdict == "no"
    assert "separately trained" in paper.note and "AMDEN" in paper.note
    same = report.design_claim(QUICK, [("multi", ev)], against="none")
    assert same.kind == "extension" and same.verdict == "yes"
    assert "same model" in same.claim and "arm none" in same.note
    # without the baseline the paper row is the same-model comparison, as before
    ev = SimpleNamespace(design={"none": design(good), AMGENC_ARM: design(bad)}, judge=None)
    c = report.design_claim(QUICK, [("multi", ev)])
    assert c.kind == "paper" and c.verdict == "no" and "arm none" in c.note
