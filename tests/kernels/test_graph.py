"""Tests for jaxkit.kernels.graph: SHD, directed edge metrics, AUROC / AUPRC."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels.graph import auprc, auroc, edge_metrics, shd
from sklearn.metrics import average_precision_score, roc_auc_score

D = 5
OFF = ~np.eye(D, dtype=bool)

# module-level jitted callables, reused across tests (compile once per shape)
shd_j = jax.jit(shd)
metrics_j = jax.jit(edge_metrics)
auroc_j = jax.jit(auroc)
auprc_j = jax.jit(auprc)


def _adj(edges, d=D):
    """Binary adjacency with a[i, j] = 1 for each edge j -> i given as (j, i)."""
    a = np.zeros((d, d))
    for j, i in edges:
        a[i, j] = 1.0
    return a


# chain 0 -> 1 -> 2 -> 3, plus 0 -> 4
TRUE = _adj([(0, 1), (1, 2), (2, 3), (0, 4)])


@pytest.mark.parametrize(
    "est_edges, expected_shd",
    [
        ([(0, 1), (1, 2), (2, 3), (0, 4)], 0),  # identical
        ([(0, 1), (1, 2), (2, 3)], 1),  # one missing
        ([(0, 1), (1, 2), (2, 3), (0, 4), (3, 4)], 1),  # one extra
        ([(1, 0), (1, 2), (2, 3), (0, 4)], 1),  # one reversed: counts once
        ([(1, 0), (2, 1), (3, 2), (4, 0)], 4),  # all reversed
        ([(0, 1), (1, 0), (1, 2), (2, 3), (0, 4)], 1),  # true edge plus its reverse
        ([], 4),  # empty estimate
        ([(1, 0), (2, 3), (0, 4), (1, 4)], 3),  # reversed + missing + extra
    ],
)
def test_shd_closed_forms(est_edges, expected_shd):
    est = _adj(est_edges)
    assert int(shd(TRUE, est)) == expected_shd
    assert int(shd_j(TRUE, est)) == expected_shd


def test_shd_threshold_and_diagonal_ignored():
    est = TRUE * np.array([0.5, 0.05, -2.0, 1.0, 0.01])[None, :]  # weighted, signed
    est = est + np.eye(D) * 9.0  # self-loops are ignored
    assert int(shd(TRUE, est)) == 0
    # 0->1 (0.5) and 0->4 (0.5) survive threshold 0.1; 1->2 (0.05) does not
    assert int(shd(TRUE, est, threshold=0.1)) == 1
    assert int(shd(TRUE, est, threshold=10.0)) == 4


def test_edge_metrics_closed_form():
    # one reversed (1->0 instead of 0->1), one extra (3->4), one missing (2->3)
    est = _adj([(1, 0), (1, 2), (0, 4), (3, 4)]) * 0.7
    m = edge_metrics(TRUE, est)
    tp, n_est, n_true = 2, 4, 4
    assert float(m["precision"]) == pytest.approx(tp / n_est)
    assert float(m["recall"]) == pytest.approx(tp / n_true)
    assert float(m["f1"]) == pytest.approx(0.5)
    assert int(m["shd"]) == 3
    assert int(m["n_edges_true"]) == 4 and int(m["n_edges_est"]) == 4
    mj = metrics_j(TRUE, est)
    for k in m:
        np.testing.assert_allclose(np.asarray(mj[k]), np.asarray(m[k]))


def test_edge_metrics_empty_conventions():
    m = edge_metrics(TRUE, np.zeros((D, D)))
    assert float(m["precision"]) == 0.0 and float(m["recall"]) == 0.0
    assert float(m["f1"]) == 0.0 and int(m["n_edges_est"]) == 0
    m = edge_metrics(np.zeros((D, D)), TRUE)
    assert float(m["recall"]) == 0.0 and float(m["precision"]) == 0.0
    assert np.isfinite(float(m["f1"]))


@pytest.mark.parametrize("seed", range(6))
def test_auroc_auprc_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    true = (rng.random((D, D)) < 0.35).astype(float)
    true[0, 1] = 1.0  # at least one positive
    true[1, 0] = 0.0  # and one negative off the diagonal
    scores = np.abs(rng.normal(size=(D, D)))
    if seed % 2:  # heavy ties
        scores = np.round(scores, 1)
        scores[rng.random((D, D)) < 0.3] = 0.0
    y, s = true[OFF], scores[OFF]
    np.testing.assert_allclose(float(auroc(true, scores)), roc_auc_score(y, s), atol=1e-12)
    np.testing.assert_allclose(float(auprc(true, scores)), average_precision_score(y, s),
                               atol=1e-12)
    np.testing.assert_allclose(float(auroc_j(true, scores)), roc_auc_score(y, s), atol=1e-12)
    np.testing.assert_allclose(float(auprc_j(true, scores)), average_precision_score(y, s),
                               atol=1e-12)


def test_auroc_auprc_ignore_diagonal_and_degenerate():
    scores = np.abs(TRUE) + np.eye(D) * 100.0  # diagonal would ruin a perfect ranking
    assert float(auroc(TRUE, scores)) == 1.0
    assert float(auprc(TRUE, scores)) == 1.0
    assert np.isnan(float(auroc(np.zeros((D, D)), scores)))  # undefined, as sklearn
    assert float(auprc(np.zeros((D, D)), scores)) == 0.0  # sklearn returns 0 too


def test_vmap_equals_loop():
    rng = np.random.default_rng(1)
    trues = (rng.random((3, D, D)) < 0.4).astype(float)
    trues[:, 0, 1], trues[:, 1, 0] = 1.0, 0.0
    ests = rng.normal(size=(3, D, D)) * (rng.random((3, D, D)) < 0.5)
    for fn in (shd, auroc, auprc):
        batched = jax.jit(jax.vmap(fn))(trues, ests if fn is shd else np.abs(ests))
        looped = [fn(t, e if fn is shd else np.abs(e)) for t, e in zip(trues, ests, strict=True)]
        np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), atol=1e-12)
    bm = jax.vmap(edge_metrics)(trues, ests)
    for b in range(3):
        m = edge_metrics(trues[b], ests[b])
        for k in m:
            np.testing.assert_allclose(np.asarray(bm[k][b]), np.asarray(m[k]))


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="`est`"):
        shd(TRUE, np.zeros((D, D + 1)))
    with pytest.raises(ValueError, match="`true`"):
        edge_metrics(np.zeros(D), np.zeros(D))
    with pytest.raises(ValueError, match="same shape"):
        auroc(TRUE, np.zeros((D + 1, D + 1)))


graphs = st.lists(st.booleans(), min_size=D * D, max_size=D * D).map(
    lambda b: np.asarray(b, dtype=float).reshape(D, D))


@settings(max_examples=40, deadline=None)
@given(graphs, graphs)
def test_shd_properties(g, h):
    assert int(shd_j(g, g)) == 0
    s_gh = int(shd_j(g, h))
    assert s_gh == int(shd_j(h, g))  # symmetric
    assert 0 <= s_gh <= D * (D - 1) // 2  # at most one per node pair
    # the pair-wise count is bounded by the number of differing directed entries
    assert s_gh <= int(np.sum((g != 0)[OFF] != (h != 0)[OFF]))
    m = metrics_j(g, h)
    for k in ("precision", "recall", "f1"):
        assert 0.0 <= float(m[k]) <= 1.0
    assert int(m["shd"]) == s_gh


def test_one_trace_for_same_shapes():
    traces = []

    def all_metrics(t, e):
        traces.append(1)
        return edge_metrics(t, e), auroc(t, jnp.abs(e)), auprc(t, jnp.abs(e))

    f = jax.jit(all_metrics)
    rng = np.random.default_rng(5)
    for _ in range(3):
        f((rng.random((D, D)) < 0.4).astype(float), rng.normal(size=(D, D)))
    assert len(traces) == 1


# ---------------------------------------------------------------- no silent garbage


@pytest.mark.parametrize("fn, name", [(auroc, "scores"), (auprc, "scores"),
                                      (shd, "est"), (edge_metrics, "est")])
def test_nan_scores_are_an_error_naming_the_argument(fn, name):
    """A NaN score used to rank silently (AUROC/AUPRC) or count as no edge (SHD, F1)."""
    from jaxkit.kernels.checks import clear_errors

    bad = np.abs(np.random.default_rng(0).normal(size=(D, D)))
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match=f"`{name}` contains NaN"):
        fn(TRUE, bad)
    with pytest.raises(ValueError, match="`true` contains NaN"):
        fn(np.where(np.eye(D, k=1) > 0, np.nan, TRUE), np.abs(bad[::-1]))
    jitted = {auroc: auroc_j, auprc: auprc_j, shd: shd_j, edge_metrics: metrics_j}[fn]
    with pytest.raises(ValueError, match=f"`{name}` contains NaN"), clear_errors():
        jax.block_until_ready(jitted(jnp.asarray(TRUE), jnp.asarray(bad)))
    # the ignored diagonal may hold anything
    diag_nan = np.where(np.eye(D) > 0, np.nan, np.nan_to_num(bad))
    assert np.isfinite(float(auroc(TRUE, diag_nan)))


@pytest.mark.parametrize("threshold", [-0.1, np.nan, np.inf])
def test_threshold_out_of_domain_is_an_error(threshold):
    with pytest.raises(ValueError, match="`threshold`"):
        shd(TRUE, TRUE, threshold=threshold)
    with pytest.raises(ValueError, match="`threshold`"):
        edge_metrics(TRUE, TRUE, threshold=threshold)
