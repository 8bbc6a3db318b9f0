"""benchmarks/bench_belief.py: the NumPy peers (the strong ones timed against, and the
previous ones kept for continuity) agree with the jaxkit kernels on the same inputs (VOI
closed forms, EIG with a masked outcome, the Monte Carlo evidence table against
quadrature), and the script end to end at tiny sizes (slow: it recompiles everything)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest


@pytest.fixture(scope="module")
def bb(load_benchmark):
    return load_benchmark("belief")


def test_numpy_eig_matches_kernel(bb):
    from jaxkit.kernels.belief.eig import eig

    rng = np.random.default_rng(0)
    lp = np.log(rng.dirichlet(np.ones(4)))
    ll = np.log(rng.dirichlet(np.ones(6), size=(5, 4)))
    ll[:, :, -1] = -np.inf  # an impossible outcome: 0 log 0 terms count 0
    ll[:, :, :-1] -= np.log(np.exp(ll[:, :, :-1]).sum(-1, keepdims=True))
    want = np.asarray(eig(lp, ll))
    np.testing.assert_allclose(bb.eig_numpy(lp, ll), want, rtol=1e-10)
    with np.errstate(invalid="ignore"):  # the previous peer has no masks: finite rows only
        np.testing.assert_allclose(bb.eig_numpy_logsumexp(lp, ll[..., :-1]), want, rtol=1e-10)


def test_numpy_voi_matches_closed_forms(bb):
    q, p1, p0 = np.array([0.3, 0.0, 1.0]), np.array([0.9, 0.2, 0.4]), np.array([0.2, 0.7, 0.4])
    a, s, mi, d = bb.voi_numpy(q, p1, p0)
    np.testing.assert_allclose(a, 2 * q * (1 - q) * np.abs(p1 - p0))
    np.testing.assert_allclose(s, q * (1 - q) * (p1 - p0) ** 2)
    H = lambda p: -(p * np.log(p) + (1 - p) * np.log(1 - p))  # noqa: E731
    p = 0.3 * 0.9 + 0.7 * 0.2
    assert mi[0] == pytest.approx(H(p) - 0.3 * H(0.9) - 0.7 * H(0.2), rel=1e-10)
    assert mi[1] == 0 and mi[2] == 0 and d[0] == pytest.approx(0.7)
    for x, y in zip(bb.voi_numpy_xlogy(q, p1, p0), (a, s, mi, d), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-15)


def test_numpy_evidence_close_to_quadrature(bb):
    doses = np.linspace(0, 1, 5).astype(np.float32)
    quad = bb.evidence_quadrature(doses.astype(np.float64))
    np.testing.assert_allclose(np.exp(quad).sum(-1), 1.0, atol=1e-6)
    for peer in (bb.evidence_numpy, bb.evidence_numpy_naive):
        mc = peer(np.random.default_rng(0), doses, 4000)
        assert mc.dtype == np.float32
        assert np.max(0.5 * np.abs(np.exp(mc) - np.exp(quad)).sum(-1)) < 0.05
    # the same draws give the same table in both forms
    np.testing.assert_allclose(bb.evidence_numpy(np.random.default_rng(1), doses, 64),
                               bb.evidence_numpy_naive(np.random.default_rng(1), doses, 64),
                               atol=2e-5)


@pytest.mark.slow
def test_script_end_to_end(bb, tmp_path):
    out = tmp_path / "b.json"
    try:
        assert bb.main(["--quick", "--runs", "1", "--markets", "100", "--candidates", "20",
                        "--designs", "4", "--draws", "16", "--json", str(out)]) == 0
    finally:
        jax.config.update("jax_enable_x64", True)  # main switches float64 off
    rows = json.loads(out.read_text())["rows"]
    # voi, voi checked, voi vs the previous peer; the same for eig; evidence vs both peers
    assert len(rows) == 8 and all(r["jax"]["median_s"] > 0 for r in rows)
