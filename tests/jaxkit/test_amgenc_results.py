"""AMGenC's typed results (jaxkit.amgenc.results, issue 70): each ``as_dict`` gives the
mapping metrics.json records (its keys in metrics.json's order, the per-cell arrays left
out), the NaN-ignoring means, and the results survive a pickle round trip (the stage
cache) and refuse to be changed."""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pytest

from jaxkit.amgenc import results as R


def _plausibility(share=0.5):
    return R.Plausibility(no_close_pair=share, per_cell={"T-O": np.array([0.1, 0.3])},
                          gen={"T-O": 0.2}, twin={"T-O": 0.1}, ratio={"T-O": 2.0},
                          meets={"T-O": True}, all_met=False)


def _design(dens=(0.1, np.nan)):
    d = np.asarray(dens, float)
    return R.DesignAccuracy.from_cells(R.DesignCells(
        density_error=d, composition_l1=np.array([0.2, 0.4]),
        former_cn_error=np.full(2, np.nan)))


def _judge():
    row = R.JudgedRow(judged=0.5, n=2, energy_before=1.0, energy_after=-0.5,
                      energy_before_cells=np.array([1.0, np.nan]),
                      energy_after_cells=np.array([-0.5, np.nan]),
                      plausibility_before=None, plausibility_after=_plausibility(),
                      design=_design(), target_index=np.array([0, 1]),
                      judged_target_index=np.array([0]))
    return R.JudgeScores(name="pedone", about="Pedone 2006", made_by="recipe",
                         relaxation=R.JudgeRelaxation(plausibility="p", design="d"),
                         rows={"twin": row}, targets_judged=1.0)


def test_as_dict_keys_are_metrics_json_keys_in_order():
    row = R.ArmRow(balanced=1.0, abs_charge=0.0, soft_charge=0.5, density_error=0.1,
                   composition_l1=0.2, valid=1.0, rdf_l1=1.5, oto_l1=0.9, tot_l1=1.1,
                   min_dist_violation=0.0, close_pairs=0.0, ms_per_cell=3.0, n_cells=16)
    assert list(row.as_dict()) == [f.name for f in dataclasses.fields(R.ArmRow)]
    assert row.as_dict()["n_cells"] == 16
    names = [f.name for f in dataclasses.fields(R.Baselines)]
    base = R.Baselines(**{n: float(i) for i, n in enumerate(names)})
    assert list(base.as_dict()) == [n for n in names if n != "random_rdf_l1"]
    assert base.as_dict()["r_max"] == names.index("r_max")
    ov = R.Overhead(soft=0.1, soft_all=0.2, discrete=0.01, soft_runs=[0.1], soft_ci=(0, 1),
                    soft_all_runs=[0.2], soft_all_ci=(math.nan, math.nan))
    assert list(ov.as_dict()) == ["soft", "soft_all", "discrete", "soft_runs", "soft_ci",
                                  "soft_all_runs", "soft_all_ci"]
    cond = R.Conditioning(own=0.1, other=0.3, in_range=None, out_of_range=0.2)
    assert cond.as_dict() == {"own": 0.1, "other": 0.3, "in_range": None,
                              "out_of_range": 0.2}
    p = _plausibility()
    assert list(p.as_dict()) == ["no_close_pair", "gen", "twin", "ratio", "meets", "all_met"]
    assert p.brief() == {"no_close_pair": 0.5, "ratio": {"T-O": 2.0}, "all_met": False}
    sc = R.Scale(n_cells=4, n_atoms=800, steps=10, devices=2, seconds=2.0, times=(2.0, 2.1),
                 no_close_pair=0.75, balanced=1.0)
    assert sc.as_dict() == {"cells": 4, "atoms": 800, "steps": 10, "devices": 2,
                            "seconds": 2.0, "cells_per_second": 2.0, "no_close_pair": 0.75,
                            "balanced": 1.0}


def test_judge_and_methods_leave_per_cell_arrays_out_and_ignore_nan():
    jd = _judge().as_dict()
    assert list(jd) == ["name", "made_by", "relaxation", "rows"]
    assert jd["relaxation"] == {"plausibility": "p", "design": "d"}
    row = jd["rows"]["twin"]
    assert list(row) == ["judged", "n", "energy_before", "energy_after",
                         "plausibility_before", "plausibility_after", "design"]
    assert row["plausibility_before"] is None
    assert row["plausibility_after"] == _plausibility().brief()
    # the design means ignore NaN cells, and are NaN when no cell was scored
    assert row["design"]["density_error"] == pytest.approx(0.1)
    assert row["design"]["composition_l1"] == pytest.approx(0.3)
    assert math.isnan(row["design"]["former_cn_error"])
    m = R.MethodDraws(delivered=np.array([1.0, 0.0, 1.0]), species=np.zeros((3, 2), int),
                      seconds=0.25, composition_l1=np.array([0.2, np.nan, 0.4]),
                      balanced=np.array([1.0, 0.0, 0.0]), changed=np.zeros(3))
    assert m.as_dict() == pytest.approx({"delivered": 2 / 3, "balanced": 1 / 3,
                                         "composition_l1": 0.3, "seconds": 0.25})
    nothing = dataclasses.replace(m, composition_l1=np.full(3, np.nan))
    assert math.isnan(nothing.as_dict()["composition_l1"])


def test_results_pickle_and_are_frozen():
    jd = _judge()
    back = pickle.loads(pickle.dumps(jd))
    assert isinstance(back.rows["twin"], R.JudgedRow)
    np.testing.assert_array_equal(back.rows["twin"].plausibility_after.per_cell["T-O"],
                                  [0.1, 0.3])
    assert repr(back.as_dict()) == repr(jd.as_dict())  # NaN compares unequal
    with pytest.raises(dataclasses.FrozenInstanceError):
        jd.rows["twin"].judged = 1.0
    with pytest.raises(TypeError):  # keyword-only: no positional construction
        R.CellProperties(2.5, 4.0)
