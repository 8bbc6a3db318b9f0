"""jaxkit.kernels._auction: the host assignment solver (auction prices, then exact
Jonker-Volgenant augmentation) against SciPy's linear_sum_assignment."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jaxkit.kernels import _auction
from jaxkit.kernels._auction import auction_assignment
from scipy.optimize import linear_sum_assignment


def _optimal(c):
    r, col = linear_sum_assignment(c)
    return c[r, col].sum()


def _check(c, rel=1e-12, abs_=0.0):
    perm = auction_assignment(c)
    n = c.shape[0]
    assert perm.dtype == np.int32 and perm.shape == (n,)
    assert sorted(perm.tolist()) == list(range(n)), "not a permutation"
    got, best = c[np.arange(n), perm].sum(), _optimal(c)
    assert got == pytest.approx(best, rel=rel, abs=abs_), (got, best)
    return perm


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 300])
def test_random_costs_are_solved_optimally(n):
    rng = np.random.default_rng(n)
    _check(rng.random((n, n)))
    _check(rng.normal(size=(n, n)) * 1e3)  # negative costs too


@pytest.mark.parametrize("dim", [2, 64])
def test_geometric_minibatches_match_scipy(dim):
    # the OT-CFM case: Gaussian noise against clustered data, squared Euclidean costs
    rng = np.random.default_rng(dim)
    centres = rng.normal(size=(8, dim)) * 4
    x1 = centres[rng.integers(0, 8, 256)] + 0.3 * rng.normal(size=(256, dim))
    x0 = rng.normal(size=(256, dim))
    c = ((x0[:, None] - x1[None]) ** 2).sum(-1)
    perm = _check(c)
    r, col = linear_sum_assignment(c)  # generic position: the optimum is unique
    assert np.array_equal(perm, col)


def test_degenerate_costs():
    n = 50
    rng = np.random.default_rng(0)
    _check(np.zeros((n, n)))  # every permutation is optimal
    _check(np.full((n, n), 3.5))
    _check(rng.integers(0, 3, (n, n)).astype(float))  # many ties
    pts = rng.normal(size=(5, 2))[rng.integers(0, 5, n)]  # duplicated points
    _check(((pts[:, None] - pts[None]) ** 2).sum(-1), abs_=1e-12)
    # 24 decades: the duals live at the scale of the cost range, so costs far below it
    # round away in float64 (as in any dual method); optimal to n ulps of the range
    wide = rng.random((n, n)) * 10.0 ** rng.integers(-12, 12, (n, n))
    _check(wide, abs_=n * 1e-16 * np.ptp(wide))
    _check(np.float32(rng.random((n, n))))  # float32 input


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 12).map(lambda n: (n, n)),
                  elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)))
def test_property_optimal_permutation(c):
    _check(c, rel=1e-9, abs_=1e-6)


def test_threads_give_the_serial_answers():
    # the solver releases the GIL: concurrent calls must not share state
    rng = np.random.default_rng(1)
    costs = [rng.random((128, 128)) for _ in range(6)]
    serial = [auction_assignment(c) for c in costs]
    with ThreadPoolExecutor(3) as ex:
        threaded = list(ex.map(auction_assignment, costs))
    assert all(np.array_equal(a, b) for a, b in zip(serial, threaded, strict=True))


def test_large_problems_fall_back_to_scipy(monkeypatch):
    monkeypatch.setattr(_auction, "_MAX_N", 4)
    c = np.random.default_rng(2).random((6, 6))
    assert np.array_equal(auction_assignment(c), linear_sum_assignment(c)[1])
    assert auction_assignment(np.zeros((0, 0))).shape == (0,)


@pytest.mark.parametrize("n", [5, 64])
def test_auction_phases_give_eps_optimal_prices(n):
    # the exact finish hides a broken auction (it would only be slower): check the
    # auction itself: a full assignment, eps-complementary slackness, and a total cost
    # within n * eps of the optimum (Bertsekas's bound) on integer costs
    rng = np.random.default_rng(n)
    cq = rng.integers(0, 10_000, (n, n)).astype(np.int64)
    v = np.zeros(n, np.int64)
    rowof, colof = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    bits = max(1, int(np.ceil(np.log2(n))))
    for eps in (1000, 100, 10, 1):
        _auction._auction_phase(cq, v, rowof, colof, eps, bits)
        assert sorted(colof.tolist()) == list(range(n))
        assert np.array_equal(rowof[colof], np.arange(n))
        reduced = cq - v[None, :]
        slack = reduced[np.arange(n), colof] - reduced.min(1)
        assert slack.min() >= 0 and slack.max() <= eps
        total = cq[np.arange(n), colof].sum()
        assert _optimal(cq.astype(float)) <= total <= _optimal(cq.astype(float)) + n * eps


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 40),
                  elements=st.floats(-1e300, 1e300, allow_nan=False)))
def test_float_keys_preserve_order(w):
    # _argmin's integer keys: order-preserving, so the first minimum is the float minimum
    m, j = _auction._argmin(w, w.view(np.int64))
    assert m == w.min() and w[j] == m and not np.any(w[:j] < m)
