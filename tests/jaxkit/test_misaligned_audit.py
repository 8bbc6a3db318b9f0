"""Screening metrics (PR-AUC, enrichment, BEDROC), the flagged AUROC, and
``jaxkit misaligned audit --predictions``: an external model's predictions audited
against the misaligned family, with one-line errors for bad files."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.misaligned import metrics as Me

pytestmark = pytest.mark.usefixtures("one_blas_thread")  # tests/jaxkit/conftest.py


def _case(seed=0, n=200):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.2).astype(np.float64)
    score = y * 0.8 + rng.standard_normal(n)  # distinct scores (no ties)
    w = (rng.random(n) < 0.8).astype(np.float64)
    return y, score, w


def test_screening_metrics_against_sklearn_and_rdkit():
    """PR-AUC equals scikit-learn's average precision (also with ties); EF 1% / 5% and
    BEDROC (alpha 20) equal RDKit's CalcEnrichment / CalcBEDROC on the test rows."""
    from rdkit.ML.Scoring import Scoring
    from sklearn.metrics import average_precision_score, roc_auc_score

    f = jax.jit(Me.screening_metrics)
    for seed in range(3):
        y, s, w = _case(seed)
        got = {k: float(v) for k, v in f(jnp.asarray(y), jnp.asarray(s), jnp.asarray(w)).items()}
        m = w > 0
        assert got["pr_auc"] == pytest.approx(average_precision_score(y[m], s[m]), rel=1e-5)
        assert got["auroc"] == pytest.approx(roc_auc_score(y[m], s[m]), rel=1e-5)
        ranked = sorted(zip(s[m], y[m], strict=True), key=lambda t: -t[0])
        ranked = [[sc, int(a)] for sc, a in ranked]
        ef1, ef5 = Scoring.CalcEnrichment(ranked, 1, [0.01, 0.05])
        assert got["ef1"] == pytest.approx(ef1, rel=1e-5)
        assert got["ef5"] == pytest.approx(ef5, rel=1e-5)
        assert got["bedroc"] == pytest.approx(Scoring.CalcBEDROC(ranked, 1, 20.0), rel=1e-4)
        assert bool(got["auroc_defined"])
    # ties: average precision as scikit-learn's (tied molecules enter together)
    y = np.array([1, 0, 1, 0, 0, 1, 0, 0.0])
    s = np.array([0.9, 0.9, 0.5, 0.5, 0.5, 0.1, 0.1, 0.0])
    w = np.ones(8)
    assert float(Me.average_precision(y, s, w)) == pytest.approx(average_precision_score(y, s))
    # EF with ties: the expectation over random orders of the tied molecules
    # (top ceil(0.25 * 8) = 2 are the two tied at 0.9, one active: EF = (1/2)/(3/8))
    assert float(Me.enrichment_factor(y, s, w, 0.25)) == pytest.approx((1 / 2) / (3 / 8))
    # one of the two at 0.9 in the top 1: expected 1/2 active
    assert float(Me.enrichment_factor(y, s, w, 0.125)) == pytest.approx((1 / 2) / (3 / 8))
    # a perfect ranking reaches BEDROC ~1, the reverse ~0
    assert float(Me.bedroc(y, y, w)) > 0.99 and float(Me.bedroc(y, -y, w)) < 0.05


def test_auroc_of_one_class_is_flagged_and_refused():
    """The weighted AUROC of rows holding one class is 0/0: NaN with the flag False, and
    the bootstrap of an AUROC gap refuses such a test set with a one-line error."""
    y = np.array([1, 1, 0, 0.0])
    s = np.array([0.9, 0.8, 0.1, 0.2])
    v, ok = Me.auroc_flagged(y, s, np.array([1, 1, 0, 0.0]))
    assert np.isnan(float(v)) and not bool(ok)
    v, ok = Me.auroc_flagged(y, s, np.ones(4))
    assert float(v) == 1.0 and bool(ok)
    test = np.array([[True, True, False, False], [True, True, True, True]])
    with pytest.raises(ValueError, match=r"seeds \[0\] hold one class"):
        Me.bootstrap_gap(jax.random.key(0), y, np.tile(s, (2, 1)), np.tile(-s, (2, 1)), test,
                         metric="auroc", n_boot=20)
    # both classes everywhere: resamples holding one class are counted, not averaged in
    test = np.ones((2, 4), bool)
    g = Me.bootstrap_gap(jax.random.key(0), y, np.tile(s, (2, 1)), np.tile(-s, (2, 1)), test,
                         metric="auroc", n_boot=200)
    assert g.undefined > 0 and np.isfinite([g.lo, g.hi]).all()
    assert g.estimate == pytest.approx(1.0)


# -- external predictions ----------------------------------------------------------------

MOLS = ["CCO", "CCCO", "CCCCO", "CCCCCO", "c1ccccc1", "c1ccccc1C", "c1ccccc1CC", "c1ccccc1O",
        "C1CCCCC1", "C1CCCCC1C", "C1CCCCC1O", "CC(=O)O", "CCC(=O)O", "c1ccncc1", "c1ccncc1C",
        "CC(C)O", "CC(C)CO", "OCCO", "c1ccc2ccccc2c1", "c1ccc2ccccc2c1C", "C1CCNCC1",
        "C1CCNCC1C", "CCN", "CCCN", "CCCCN", "c1ccoc1", "c1ccsc1", "CC(=O)N", "CCOC(=O)C",
        "CCOCC", "CCCl", "CCBr", "ClCCCl", "c1ccc(Cl)cc1", "c1ccc(F)cc1", "CC(C)(C)O",
        "CCCCCCO", "CCCCCCCO", "c1ccc(N)cc1", "NCCN"]


def _write(path, header, rows):
    path.write_text("\n".join([",".join(header), *(",".join(map(str, r)) for r in rows)])
                    + "\n")
    return path


def _run(*args):
    from typer.testing import CliRunner

    from jaxkit.misaligned.cli import app

    return CliRunner().invoke(app, ["audit", *map(str, args)])


def _heavy(s):
    from rdkit import Chem

    return Chem.MolFromSmiles(s).GetNumHeavyAtoms()


def test_predictions_matched_by_smiles_id_and_split_rows(tmp_path):
    """Training sets: DATA minus each seed's test molecules, plus split=train rows;
    molecules matched by canonical SMILES or by id; one-line errors for mismatched rows."""
    from jaxkit.io import DataError
    from jaxkit.misaligned.userdata import assemble_predictions, read_predictions

    data = (["CCO", "OCC", "CCN", "CCC"], np.array([1.0, 1.0, 2.0, 3.0]), ["a", "b", "c", "d"])
    # whole data set as DATA: OCC is CCO (merged); seed 0 tests CCN, seed 1 tests CCC
    p = _write(tmp_path / "p.csv", ["smiles", "y_true", "y_pred", "seed"],
               [["NCC", 2, 2.5, 0], ["CCC", 3, 2.0, 1]])
    us = assemble_predictions(read_predictions(p), data[:2])
    assert us.smiles == ["CCO", "CCN", "CCC"] and us.seeds == [0, 1]
    np.testing.assert_array_equal(us.test, [[0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(us.train, [[1, 0, 1], [1, 1, 0]])
    assert us.pred[0, 1] == 2.5 and us.pred[1, 2] == 2.0
    # by id, with a training row in the file and no overlap with DATA's ids
    p = _write(tmp_path / "q.csv", ["id", "y_true", "y_pred", "split"],
               [["c", 2, 1.5, "test"], ["d", 3, "", "train"]])
    us = assemble_predictions(read_predictions(p), data)
    i_c, i_d = us.smiles.index("CCN"), us.smiles.index("CCC")
    assert us.test[0, i_c] and us.train[0, i_d] and not us.train[0, i_c]
    bad = _write(tmp_path / "r.csv", ["id", "y_true", "y_pred"], [["zz", 2, 1.5]])
    with pytest.raises(DataError, match=r"1 ids are not in DATA \(mismatched rows\): line 2"):
        assemble_predictions(read_predictions(bad), data)
    bad = _write(tmp_path / "s.csv", ["smiles", "y_true", "y_pred"], [["CCN", 9, 1.5]])
    with pytest.raises(DataError, match="label 9 differs from 2"):
        assemble_predictions(read_predictions(bad), data[:2])
    with pytest.raises(DataError, match="seed 0 has no training molecules"):
        assemble_predictions(read_predictions(bad), None)


def test_bad_prediction_files_are_one_line_errors_with_exit_code_2(tmp_path):
    d = _write(tmp_path / "d.csv", ["id", "smiles", "y"], [["a", "CCO", 1], ["b", "CCN", 2]])
    cases = [
        (["smiles", "y_true"], [["CCC", 1]], "no column 'y_pred'"),
        (["y_true", "y_pred"], [[1, 2]], "no column 'smiles' or 'id'"),
        (["smiles", "y_true", "y_pred"], [["CCC", 1, "high"]],
         "column 'y_pred': 1 values are not finite numbers: line 2 ('high')"),
        (["smiles", "y_true", "y_pred"], [["CCC", "x", 1]], "column 'y_true'"),
        (["smiles", "y_true", "y_pred", "seed"], [["CCC", 1, 1, "1.5"]],
         "column 'seed': 1 values are not integers"),
        (["smiles", "y_true", "y_pred", "split"], [["CCC", 1, 1, "valid"]],
         "values are not 'train' or 'test'"),
        (["smiles", "y_true", "y_pred"], [["C1CC", 1, 1]], "SMILES do not parse"),
        (["smiles", "y_true", "y_pred"], [["CCC", 1, 1], ["CCC", 1, 2]],
         "also at line 2 of seed 0"),
        (["id", "y_true", "y_pred"], [["q", 1, 1]], "mismatched rows"),
        (["smiles", "y_true", "y_pred"], [["CCC", 1, 0.3], ["CCCC", 1, 0.9]],
         "the test rows of seeds [0] hold one class"),
        (["smiles", "y_true", "y_pred"], [["CCC", 2, 0.3], ["CCCC", 1, 0.9]],
         "--task classification needs labels 0 or 1"),
    ]
    c = _write(tmp_path / "c.csv", ["id", "smiles", "y"], [["a", "CCO", 1], ["b", "CCN", 0]])
    for header, rows, msg in cases:
        p = _write(tmp_path / "p.csv", header, rows)
        extra = ("--task", "classification") if "class" in msg else ()
        r = _run(c if "class" in msg else d, "--predictions", p, *extra,
                 "--out", tmp_path / "o")
        assert r.exit_code == 2, (msg, r.output)
        assert msg in r.output, (msg, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "o").exists()  # nothing written
    r = _run(d, "--predictions", tmp_path / "none.csv")
    assert r.exit_code == 2 and "no such file" in r.output
    r = _run("--predictions", p, "--task", "ranking")
    assert r.exit_code == 2 and "--task must be" in r.output
    r = _run()
    assert r.exit_code == 2 and "give DATA" in r.output


def test_external_predictions_audited_regression_and_screening(tmp_path):
    """An external model that predicts the labels (size) closely beats the family on the
    same split, the best baseline chosen on validation sets among the misaligned ones;
    as screening scores (0/1 labels) it ranks every active first (AUROC, PR-AUC, BEDROC
    1), and --lower-is-better reverses a docking-style score."""
    import json

    from jaxkit.misaligned.baselines import MISALIGNED

    y = np.array([_heavy(s) + 0.1 * np.sin(i) for i, s in enumerate(MOLS)])
    tr, te = range(28), range(28, 40)
    d = _write(tmp_path / "train.csv", ["smiles", "y"], [[MOLS[i], y[i]] for i in tr])
    rng = np.random.default_rng(0)
    p = _write(tmp_path / "p.csv", ["smiles", "y_true", "y_pred", "seed"],
               [[MOLS[i], y[i], y[i] + 0.05 * rng.standard_normal(), s]
                for s in range(2) for i in te])
    out = tmp_path / "out"
    r = _run(d, "--predictions", p, "--n-bits", 64, "--n-boot", 20, "--out", out)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "audit.json").read_text())
    g = res["gaps"]["model"]
    assert res["task"] == "regression" and g["selected_on"] == "validation"
    assert g["best"] in MISALIGNED and min(g["per_seed"]) > 0
    assert res["metrics"]["model"]["rmse"]["mean"] < 0.1
    # screening: actives are the larger molecules; the score is minus a "docking energy"
    act = (y > 6).astype(int)
    p = _write(tmp_path / "c.csv", ["smiles", "y_true", "y_pred"],
               [[MOLS[i], act[i], -float(y[i])] for i in te])
    d = _write(tmp_path / "ctrain.csv", ["smiles", "y"], [[MOLS[i], act[i]] for i in tr])
    r = _run(d, "--predictions", p, "--n-bits", 64, "--n-boot", 20, "--out", out,
             "--lower-is-better")
    assert r.exit_code == 0, r.output
    res = json.loads((out / "audit.json").read_text())
    m = res["metrics"]["model"]
    assert res["task"] == "classification"
    for k in ("auroc", "pr_auc", "bedroc"):
        assert m[k]["mean"] == pytest.approx(1.0, abs=1e-5), k
    assert m["ef5"]["mean"] == pytest.approx(1 / act[list(te)].mean(), rel=1e-5)
    assert res["gaps"]["model"]["best"] in MISALIGNED
    assert "PR-AUC" in (out / "audit.md").read_text()
    r = _run(d, "--predictions", p, "--n-bits", 64, "--n-boot", 20, "--out", out)
    res = json.loads((out / "audit.json").read_text())
    assert res["metrics"]["model"]["auroc"]["mean"] == pytest.approx(0.0, abs=1e-5)
