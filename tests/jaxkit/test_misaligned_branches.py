"""The misaligned pipeline's drug-target-interaction and virtual-screening branches: the
shipped data, the grouped ridge against the plain one, cold and stratified splits, node
degree on a case with a known answer, the claims (a negative control that must say "no"),
and both branches end to end at tiny size."""

from types import SimpleNamespace

import jax
import numpy as np
import pytest

from jaxkit.claims import Claim
from jaxkit.data import drug_discovery as DD
from jaxkit.misaligned import branch_eval as E
from jaxkit.misaligned import branches as B
from jaxkit.misaligned import dti as D
from jaxkit.misaligned import models as Mo
from jaxkit.misaligned import screening as S
from jaxkit.registry import RunContext
from tests.jaxkit.misaligned_fakes import fake_gap, fake_split, mean_ci

pytestmark = pytest.mark.usefixtures("one_blas_thread")  # tests/jaxkit/conftest.py

TINY = Mo.TrainSettings(steps=40, batch_size=32, lr=3e-3, log_every=20, checkpoint_every=1,
                        mlp_width=32)


def test_shipped_data_shapes_and_errors():
    d = DD.load_davis()
    assert (len(d["smiles"]), len(d["sequences"]), d["label"].size) == (68, 379, 4477)
    assert int(d["label"].sum()) == 829 and set(np.unique(d["label"])) == {0.0, 1.0}
    assert d["drug"].max() == 67 and d["target"].max() == 378
    assert len({(a, b) for a, b in zip(d["drug"], d["target"], strict=True)}) == 4477
    smi, y, ids = DD.load_dude("ada")
    assert (len(smi), int(y.sum()), len(ids)) == (1023, 93, 1023)
    assert ids[0].startswith("CHEMBL") and ids[-1].startswith("C")
    with pytest.raises(ValueError, match="`target` must be one of"):
        DD.load_dude("egfr")


def test_grouped_ridge_equals_the_ridge_on_built_rows():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(7, 5)), rng.random((9, 4))
    A[:, 2] = 1.0  # a constant column (zero deviation) is left unscaled, as in ridge_scores
    ia, ib = rng.integers(0, 7, 60), rng.integers(0, 9, 60)
    y = (rng.random(60) < 0.4).astype(float)
    train = rng.random((3, 60)) < 0.7
    X = np.concatenate([A[ia], B[ib]], axis=1)
    want = E.ridge_scores(X, y, train, 2.0)
    got = E.grouped_ridge_scores([(A, ia), (B, ib)], y, train, 2.0)
    np.testing.assert_allclose(got, want, atol=1e-9)
    perm = np.stack([rng.permutation(y) for _ in range(3)])
    both = E.grouped_ridge_scores([(A, ia), (B, ib)], np.stack([np.tile(y, (3, 1)), perm]),
                                  train, 2.0)
    np.testing.assert_allclose(both[0], want, atol=1e-9)
    np.testing.assert_allclose(both[1, 2], E.ridge_scores(X, perm[2], train[2:], 2.0)[0],
                               atol=1e-9)
    with pytest.raises(ValueError, match="must agree"):
        E.grouped_ridge_scores([(A, ia[:10])], y, train, 1.0)


def test_auroc_and_best_on_validation():
    y = np.array([0, 0, 1, 1, 0.0])
    s = np.array([0.1, 0.4, 0.35, 0.8, 0.8])
    m = np.array([1, 1, 1, 1, 0], bool)
    assert E.auroc(y, s, m) == pytest.approx(0.75)  # sklearn's roc_auc_score: 0.75
    assert np.isnan(E.auroc(y, s, y > 0.5))
    assert E.best_on_validation({"a": np.array([0.6, 0.7]), "b": np.array([0.8, 0.8]),
                                 "c": np.array([0.9, 0.9])}, ["a", "b"]) == "b"


def test_protein_features():
    f = D.protein_features(["ACA", "acxw"])
    assert f.shape == (2, 420)
    np.testing.assert_allclose(f[:, :20].sum(1), 1.0)
    np.testing.assert_allclose(f[:, 20:].sum(1), 1.0)
    a, c, w = (D.AMINO_ACIDS.index(x) for x in "ACW")
    assert f[0, a] == pytest.approx(2 / 3) and f[0, 20 + a * 20 + c] == pytest.approx(0.5)
    assert f[1, 20 + c * 20 + w] == pytest.approx(0.5)  # X skipped: C then W
    with pytest.raises(ValueError, match="`sequences`: sequence 1"):
        D.protein_features(["ACDE", "XZ"])


def _toy_dti(rng, n_drugs=12, n_targets=15):
    """Every pair measured; a pair interacts when its drug is one of the promiscuous
    ones (flagged by the drug's first bit): node degree knows the answer, the kinase
    side carries nothing."""
    drug, target = (g.ravel() for g in np.meshgrid(np.arange(n_drugs), np.arange(n_targets),
                                                  indexing="ij"))
    promiscuous = rng.permutation(n_drugs)[:4]
    y = np.isin(drug, promiscuous).astype(float)
    flip = rng.random(y.size) < 0.05
    y[flip] = 1 - y[flip]
    bits = rng.random((n_drugs, 16)).round()
    bits[:, 0] = np.isin(np.arange(n_drugs), promiscuous)
    return D.DTIData(drug, target, y, bits,
                     D.protein_features(["".join(rng.choice(list(D.AMINO_ACIDS), 30))
                                         for _ in range(n_targets)]))


def test_cold_splits_hold_out_whole_nodes():
    rng = np.random.default_rng(2)
    d = _toy_dti(rng)
    for kind, ids in (("cold_drug", d.drug), ("cold_target", d.target)):
        sp = D.pair_splits(d, kind, rng, 3, 0.25)
        va = D.pair_splits(d, kind, rng, 3, 0.25, within=sp.train)
        for s in range(3):
            assert not set(ids[sp.test[s]]) & set(ids[sp.train[s]])
            assert (sp.test[s] | sp.train[s]).all()
            assert not (va.train[s] | va.test[s])[sp.test[s]].any()  # inside training
            assert not set(ids[va.test[s]]) & set(ids[va.train[s]])
    sp = D.pair_splits(d, "random", rng, 2, 0.2)
    assert sp.test.sum(1).tolist() == [36, 36]
    with pytest.raises(ValueError, match="`kind` must be one of"):
        D.pair_splits(d, "cold", rng, 2, 0.2)


def test_node_degree_knows_the_promiscuous_drugs():
    rng = np.random.default_rng(3)
    d = _toy_dti(rng)
    sp = D.pair_splits(d, "random", rng, 3, 0.3)
    base = D.baseline_scores(d, sp.train, rng, 1.0)
    deg = E.per_seed(E.auroc, d.y, base["node_degree"], sp.test)
    ctrl = E.per_seed(E.auroc, d.y, base["degree_scrambled"], sp.test)
    prot = E.per_seed(E.auroc, d.y, base["protein_only"], sp.test)
    assert deg.min() > 0.9 and abs(ctrl.mean() - 0.5) < 0.2 and prot.mean() < 0.75
    assert (E.per_seed(E.auroc, d.y, base["train_mean"], sp.test) == 0.5).all()


def test_competitive_claims_and_the_negative_control():
    near = [dict(label="a", best="x", advantage=[0.001, -0.002, 0.0, 0.001]),
            dict(label="b", best="x", advantage=[0.002, 0.0, -0.001, 0.001])]
    rows = E.competitive_claims("P", "competitive", near, 0.02)
    assert [r.verdict for r in rows] == ["yes", "yes", "yes"]
    assert rows[0].kind == "paper" and rows[1].kind == "extension"
    far = [dict(label="a", best="x", advantage=[0.4, 0.45, 0.42]),
           dict(label="b", best="x", advantage=[0.001, 0.0, -0.001])]
    rows = E.competitive_claims("P", "competitive", far, 0.02, per_case=False)
    assert len(rows) == 1 and rows[0].verdict == "no"
    assert E.competitive_claims("P", "c", [], 0.02)[0].verdict == "not shown"


def test_dti_branch_end_to_end_tiny():
    rng = np.random.default_rng(4)
    d = _toy_dti(rng, 14, 16)
    res = D.run_dti(jax.random.key(0), rng, d, seeds=3, test_fraction=0.25,
                    val_fraction=0.25, lam=1.0, ts=TINY)
    assert set(res) == set(D.SPLITS)
    r = res["random"]
    assert r.best in D.MISALIGNED and len(r.advantage) == 3
    assert r.test["node_degree"].mean > 0.85
    assert r.as_dict()["test"]["node_degree"]["per_seed"] == r.test["node_degree"].per_seed
    rows = D.claims(res, 0.02)
    control = [c for c in rows if c.claim.startswith("Negative control")]
    assert len(control) == 1 and control[0].verdict == "no"  # the MLP learns the drugs
    assert "| node degree |" in D.markdown(res)


def test_stratified_splits_per_target():
    data = S.ScreenData(("a", "b"), np.repeat([0, 1], 30),
                        np.tile(np.r_[np.ones(6), np.zeros(24)], 2), np.zeros((60, 17)),
                        np.zeros((60, 8), np.uint8))
    rng = np.random.default_rng(5)
    sp = S.stratified_splits(data, rng, 3, 0.2)
    va = S.stratified_splits(data, rng, 3, 0.25, within=sp.train)
    assert sp.train.shape == (6, 60)
    for r in range(6):
        t = r // 3
        rows = sp.train[r] | sp.test[r]
        assert rows.sum() == 30 and (data.target[rows] == t).all()
        assert data.y[sp.test[r]].sum() >= 1 and (data.y[sp.test[r]] == 0).sum() >= 1
        assert not (va.train[r] | va.test[r])[sp.test[r]].any()
    with pytest.raises(ValueError, match="`test_fraction`"):
        S.stratified_splits(data, rng, 3, 1.5)


def test_screening_branch_shows_the_decoy_bias_tiny(tmp_path):
    """Through the pipeline's glue (a stage that reloads), at tiny size."""
    cfg = SimpleNamespace(branches=("screening",), dude_targets=("ada",), seeds=2,
                          test_fraction=0.25, val_fraction=0.25, ridge_lambda=3.0, n_bits=64,
                          auroc_margin=0.02, chance_margin=0.1)
    ctx = RunContext(out_dir=tmp_path, quick=True)
    branches = B.run_branches(ctx, cfg, TINY)
    assert branches.dti is None and list(branches.as_dict()) == ["screening"]
    res = branches.screening
    r = res["ada"]
    assert r.test["all_properties"]["auroc"].mean > 0.9  # DUD-E's decoy bias
    assert abs(r.test["properties_permuted"]["auroc"].mean - 0.5) < 0.15
    assert r.test["train_mean"]["ef1"].mean == pytest.approx(1.0)
    rows = B.claims(cfg, branches)
    assert all(c.kind == "extension" for c in rows)
    bias = [c for c in rows if c.claim == S.C_BIAS]
    control = [c for c in rows if c.claim.startswith("Negative control")]
    assert bias[0].verdict == "yes" and control[0].verdict == "no"
    assert "| MLP (fingerprints) |" in B.markdown(branches)
    again = B.run_branches(RunContext(out_dir=tmp_path, quick=True), cfg, TINY)
    assert again.screening["ada"].advantage == r.advantage


def test_branches_claim():
    rows = [Claim("P", D.C_DTI, "", "yes", kind="extension"),
            Claim("P", S.C_SCREEN, "", "not shown", kind="extension")]
    c = B.branches_claim("P", "multi", "yes", rows)
    assert (c.kind, c.verdict) == ("paper", "not shown")
    assert c.measured == ("molecular property prediction: yes; drug-target interaction: "
                          "yes; virtual screening: not shown")
    assert B.branches_claim("P", "multi", "no", rows[:1]).verdict == "no"
    assert B.branches_claim("P", "multi", "yes", rows[:1]).verdict == "yes"
    assert B.branches_claim("P", "multi", "yes", []).verdict == "not tested"


def test_bad_arguments_are_one_line_errors_before_any_work():
    d = _toy_dti(np.random.default_rng(7))
    for kw, match in ((dict(seeds=1), "`seeds`"), (dict(test_fraction=0.0), "`test_fraction`"),
                      (dict(val_fraction=1.0), "`val_fraction`"), (dict(lam=0.0), "`lam`")):
        args = dict(seeds=2, test_fraction=0.2, val_fraction=0.2, lam=1.0, ts=TINY) | kw
        with pytest.raises(ValueError, match=match):
            D.run_dti(jax.random.key(0), np.random.default_rng(0), d, **args)
    with pytest.raises(ValueError, match="`targets`"):
        S.load_screening("ada")
    with pytest.raises(ValueError, match="`targets`: \\['egfr'\\] not shipped"):
        S.load_screening(("ada", "egfr"))


def test_report_decides_the_multiple_branches_row_from_the_branches():
    """The pipeline's paper row on multiple branches: 'not tested' without branch rows,
    otherwise every branch's verdict (property prediction's paper row included), and the
    branch rows follow the pipeline's own rows."""
    from jaxkit.misaligned import report
    from jaxkit.misaligned.config import QUICK

    cfg = QUICK.override(["datasets=freesolv"])
    # one property case whose MLP is within the margin (0.33 x 1.0): that branch says yes
    res = {("freesolv", "random"): fake_split(
        {"mlp": {"rmse": mean_ci(1.0, seeds=[1.0, 1.1, 0.9])}},
        {"mlp": fake_gap([0.01, -0.01, 0.0])}, dataset="freesolv", label_std=2.0,
        experimental_error=1.0)}
    plain = report.claims(cfg, res)
    row = next(c for c in plain if c.claim == report.C_BRANCHES)
    assert row.verdict == "not tested"
    branch = [Claim("P", D.C_DTI, "", "yes", kind="extension"),
              Claim("P", S.C_SCREEN, "", "yes", kind="extension")]
    cl = report.claims(cfg, res, None, branch)
    row = next(c for c in cl if c.claim == report.C_BRANCHES)
    assert (row.kind, row.verdict) == ("paper", "yes") and cl[-2:] == branch
    assert len(cl) == len(plain) + 2
    branch[1] = Claim("P", S.C_SCREEN, "", "no", kind="extension")
    row = next(c for c in report.claims(cfg, res, None, branch) if c.claim == report.C_BRANCHES)
    assert row.verdict == "no"
    assert row.measured.endswith("virtual screening: no")
