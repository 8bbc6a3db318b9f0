"""Sachs with its conditions (pooled_lingam.sachs_labels, report_sachs): the conditions'
mapping to the shipped row blocks, the within-condition bootstrap, the JCI-style fit,
the chance control, the bootstrap TOST and the claim rows it decides."""

import numpy as np
import pytest

from jaxkit.data.sachs import SACHS_CHANGE_POINTS, load_sachs
from jaxkit.pooled_lingam import report_sachs as rs
from jaxkit.pooled_lingam import sachs_labels as sl
from jaxkit.pooled_lingam.results import SachsComparison


def test_conditions_match_the_row_blocks_and_their_signatures():
    x, names, _ = load_sachs()
    env, targets = sl.sachs_environments(names, SACHS_CHANGE_POINTS)
    assert env.shape == (7466,) and targets.shape == (9, 11)
    assert np.bincount(env).tolist() == [853, 902, 911, 723, 810, 799, 848, 913, 707]
    assert targets.sum(axis=1).tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1]
    col = {n: j for j, n in enumerate(names)}
    med = np.array([np.median(x[env == k], axis=0) for k in range(9)])
    cond = [c for c, _ in sl.CONDITIONS]
    # a PIP2 inhibitor (psitectorigenin) and a MEK inhibitor (U0126, Erk = p44/42 falls)
    assert cond[int(med[:, col["PIP2"]].argmin())] == "cd3cd28+psitect"
    assert cond[int(med[:, col["p44/42"]].argmin())] == "cd3cd28+u0126"
    assert targets[cond.index("cd3cd28+psitect"), col["PIP2"]]
    with pytest.raises(ValueError, match="`change_points`"):
        sl.sachs_environments(names, SACHS_CHANGE_POINTS[:-1])
    with pytest.raises(ValueError, match="`names`"):
        sl.sachs_environments([n.upper() for n in names], SACHS_CHANGE_POINTS)


def test_resample_within_keeps_each_row_in_its_condition():
    env = np.repeat([0, 1, 2], [5, 7, 4])
    rng = np.random.default_rng(0)
    idx = sl.resample_within(rng, env)
    assert idx.shape == env.shape and (env[idx] == env).all()
    draws = np.stack([sl.resample_within(rng, env) for _ in range(50)])
    assert len(np.unique(draws[:, 0])) > 1  # resampled, not the identity


def test_jci_direct_finds_the_edge_and_keeps_context_exogenous():
    rng = np.random.default_rng(1)
    env = np.repeat(np.arange(3), 400)
    a = rng.laplace(size=env.size) + np.array([0.0, 2.0, -2.0])[env]  # shifted by env
    b = 1.5 * a + rng.laplace(size=env.size)
    c = rng.laplace(size=env.size)
    adj = sl.jci_direct(np.column_stack([a, b, c]), env, 3)
    assert adj.shape == (3, 3)
    assert adj[1, 0] != 0 and adj[0, 1] == 0  # a -> b, not reversed
    assert adj[2, :2].tolist() == [0, 0] and adj[:2, 2].tolist() == [0, 0]
    with pytest.raises(ValueError, match="`n_envs`"):
        sl.jci_direct(np.ones((4, 2)), np.zeros(4), 1)


def test_chance_f1_is_the_expected_chance_level():
    _, _, truth = load_sachs()
    f = sl.chance_f1(np.random.default_rng(2), truth, 2000)
    assert f == pytest.approx(18 / 110, abs=0.015)  # E[TP] = k^2 / (d (d - 1))


def test_bootstrap_equivalence_says_yes_no_and_not_shown():
    rng = np.random.default_rng(3)
    near = np.concatenate([[0.0], rng.normal(0, 0.01, 200)])
    far = np.concatenate([[-0.2], rng.normal(-0.2, 0.01, 200)])
    wide = np.concatenate([[0.0], rng.normal(0, 0.2, 200)])
    assert sl.bootstrap_equivalence(near, margin=0.05).verdict == "yes"
    assert sl.bootstrap_equivalence(far, margin=0.05).verdict == "no"
    v = sl.bootstrap_equivalence(wide, margin=0.05)
    assert v.verdict == "not shown" and v.n == 200 and v.estimate == 0.0
    assert v.lo < -0.05 < 0.05 < v.hi
    with pytest.raises(ValueError, match="`margin`"):
        sl.bootstrap_equivalence(near, margin=0)


def _cmp(ica, gies, jci, chance, shd=10.0):
    def arr(v):
        return np.concatenate([[float(v)], np.full(20, v) + np.linspace(-0.01, 0.01, 20)])

    return SachsComparison(
        methods=["pooled-ica", "gies", "jci-direct", "chance"],
        f1={"pooled-ica": arr(ica), "gies": arr(gies), "jci-direct": arr(jci),
            "chance": arr(chance)},
        shd={m: np.full(21, shd) for m in ("pooled-ica", "gies", "jci-direct")},
        seconds=dict.fromkeys(("pooled-ica", "gies", "jci-direct", "chance"), 1.0),
        n_boot=20, transform="log", conditions=[c for c, _ in sl.CONDITIONS],
        n_rows=[1] * 9)


def test_sachs_claims_can_say_yes_and_no_and_the_control_bites():
    yes, ctrl = rs.sachs_claims("P", 0.05, _cmp(0.35, 0.34, 0.36, 0.16))
    assert yes.verdict == "yes" and yes.kind == "paper" and yes.claim.startswith(rs.REAL_DATA)
    assert "basic (bias-reversed)" in yes.note and "0.350 / 0.350" in yes.note
    assert ctrl.verdict == "no" and ctrl.kind == "setup"
    no, _ = rs.sachs_claims("P", 0.05, _cmp(0.20, 0.34, 0.36, 0.16))
    assert no.verdict == "no"
    # one method out of reach is enough for "no"; a chance level near GIES fails the control
    mixed, bad_ctrl = rs.sachs_claims("P", 0.05, _cmp(0.34, 0.34, 0.60, 0.33))
    assert mixed.verdict == "no" and bad_ctrl.verdict == "yes"
    untested, none = rs.sachs_claims("P", 0.05, None)
    assert untested.verdict == "not tested" and none is None
    md = "\n".join(rs.sachs_label_table(_cmp(0.35, 0.34, 0.36, 0.16), 0.05))
    assert "| jci-direct |" in md and "cd3cd28+psitect (1)" in md and "±0.05" in md
    # metrics.json's mapping: plain lists in the recorded key order, chance without SHD
    rec = _cmp(0.35, 0.34, 0.36, 0.16).as_dict()
    assert list(rec) == ["methods", "f1", "shd", "seconds", "n_boot", "transform",
                         "conditions", "n_rows"]
    assert type(rec["f1"]["gies"]) is list and rec["f1"]["gies"][0] == 0.34
    assert "chance" in rec["f1"] and "chance" not in rec["shd"]
