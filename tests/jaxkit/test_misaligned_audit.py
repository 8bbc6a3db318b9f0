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
