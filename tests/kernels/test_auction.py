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


# ------------------------------------------------------------------ public assignment API
# Cases ported from SciPy's own suite (scipy/optimize/tests/test_linear_assignment.py and
# scipy/sparse/csgraph/tests/test_matching.py::linear_sum_assignment_test_cases), with
# SciPy's reference answers: the chosen entries of each row, for both signs
# (maximize=True on the negated matrix) and for the transpose.
from jaxkit.kernels import assignment as lsa  # noqa: E402

_INF = float("inf")
SCIPY_CASES = [
    ([[400, 150, 400], [400, 450, 600], [300, 225, 300]], [150, 400, 300]),
    ([[400, 150, 400, 1], [400, 450, 600, 2], [300, 225, 300, 3]], [150, 2, 300]),
    ([[10, 10, 8], [9, 8, 1], [9, 7, 4]], [10, 1, 7]),
    ([[10, 10, 8, 11], [9, 8, 1, 1], [9, 7, 4, 10]], [10, 1, 4]),
    ([[10, _INF, _INF], [_INF, _INF, 1], [_INF, 7, _INF]], [10, 1, 7]),
]


@pytest.mark.parametrize("sign", [-1, 1])
@pytest.mark.parametrize("case", range(len(SCIPY_CASES)))
def test_scipy_small_inputs(sign, case):
    cost, expected = SCIPY_CASES[case]
    c = sign * np.array(cost, float)
    exp = sign * np.array(expected, float)
    res = lsa.linear_sum_assignment(c, maximize=sign == -1)
    assert res.feasible
    np.testing.assert_array_equal(res.rows, np.sort(res.rows))
    np.testing.assert_array_equal(c[res.rows, res.cols], exp)
    assert res.cost == exp.sum()
    res = lsa.linear_sum_assignment(c.T, maximize=sign == -1)
    np.testing.assert_array_equal(res.rows, np.sort(res.rows))
    np.testing.assert_array_equal(np.sort(c.T[res.rows, res.cols]), np.sort(exp))


def test_scipy_input_checks_and_trivial_problems():
    with pytest.raises(ValueError, match="`cost` must be a matrix"):
        lsa.linear_sum_assignment([1, 2, 3])
    with pytest.raises(ValueError, match="invalid numeric entries"):
        lsa.linear_sum_assignment(np.diag([np.nan, 1, 1]))
    with pytest.raises(ValueError, match="invalid numeric entries"):
        lsa.linear_sum_assignment(np.diag([1, -np.inf, 1]))
    with pytest.raises(ValueError, match="invalid numeric entries"):  # +inf when maximising
        lsa.linear_sum_assignment(np.diag([1, np.inf, 1]), maximize=True)
    with pytest.raises(TypeError, match="numeric"):
        lsa.linear_sum_assignment(np.identity(3).astype(str))
    # list input, bool input as SciPy
    c = [[1, 2, 3], [4, 5, 6]]
    res = lsa.linear_sum_assignment(c)
    r, col = linear_sum_assignment(c)
    np.testing.assert_array_equal(res.rows, r)
    assert res.cost == np.asarray(c)[r, col].sum()
    eye = np.identity(3)
    assert lsa.linear_sum_assignment(eye.astype(bool)).cost == \
        lsa.linear_sum_assignment(eye).cost == 0
    # constant matrix (SciPy #11602): any permutation, cost n
    res = lsa.linear_sum_assignment(np.ones((8, 8)))
    assert sorted(res.cols.tolist()) == list(range(8)) and res.cost == 8
    for shape in [(0, 0), (2, 0), (0, 3)]:
        res = lsa.linear_sum_assignment(np.empty(shape))
        assert res.rows.size == res.cols.size == 0 and res.feasible and res.cost == 0


def test_infeasible_is_a_flag_not_an_assignment():
    c = np.identity(3)
    c[:, 0] = np.inf  # SciPy: ValueError("cost matrix is infeasible")
    res = lsa.linear_sum_assignment(c)
    assert not res.feasible and res.rows.size == 0 and res.cost == np.inf
    # every row has an allowed column, but two rows share the only one
    c = np.array([[1.0, np.inf, np.inf], [2.0, np.inf, np.inf], [1.0, 1.0, 1.0]])
    assert not lsa.linear_sum_assignment(c).feasible
    res = lsa.linear_sum_assignment(-c, maximize=True)
    assert not res.feasible and res.cost == -np.inf
    # rectangular: 2 rows, 3 columns, feasible only through the last column
    c = np.array([[np.inf, np.inf, 5.0], [1.0, np.inf, 2.0]])
    res = lsa.linear_sum_assignment(c)
    assert res.feasible and res.cols.tolist() == [2, 0] and res.cost == 6.0


def test_scipy_sparse_comparison_feasible_and_infeasible():
    # SciPy's test_two_methods_give_same_result_on_many_sparse_inputs, smaller: sparse
    # integer costs with +inf for missing edges, many infeasible; SciPy as the reference
    rng = np.random.default_rng(12342309)
    n_infeasible = 0
    for _ in range(30):
        dense = np.where(rng.random((30, 30)) < 0.1, rng.integers(1, 100, (30, 30)), np.inf)
        try:
            r, col = linear_sum_assignment(dense)
            ref = dense[r, col].sum()
        except ValueError:
            ref = None
        res = lsa.linear_sum_assignment(dense)
        assert res.feasible == (ref is not None)
        if ref is None:
            n_infeasible += 1
        else:
            assert res.cost == ref
    assert 0 < n_infeasible < 30  # both outcomes exercised


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.booleans(), st.integers(0, 2 ** 31))
def test_property_rectangular_with_forbidden_matches_scipy(n, m, maximize, seed):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, m)) * 100
    c[rng.random((n, m)) < 0.3] = -np.inf if maximize else np.inf
    try:
        r, col = linear_sum_assignment(c, maximize=maximize)
        ref = c[r, col].sum()
    except ValueError:
        ref = None
    res = lsa.linear_sum_assignment(c, maximize=maximize)
    assert res.feasible == (ref is not None)
    if ref is not None:
        assert res.rows.size == min(n, m) and len(set(res.cols.tolist())) == min(n, m)
        assert res.cost == pytest.approx(ref, rel=1e-12, abs=1e-9)


def test_assignment_under_jit_and_vmap():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    c = rng.random((4, 3, 5))
    c[1, :, :] = np.inf
    c[1, 0, 0] = 1.0  # batch element 1 is infeasible
    rows, cols, ok = jax.jit(jax.vmap(lsa.assignment))(jnp.asarray(c, jnp.float32))
    assert ok.tolist() == [True, False, True, True]
    for b in (0, 2, 3):
        ref = lsa.linear_sum_assignment(np.float32(c[b]))
        np.testing.assert_array_equal(np.asarray(cols[b]), ref.cols)
    r, col, f = jax.jit(lambda x: lsa.assignment(x, maximize=True))(jnp.asarray(c[0]))
    assert bool(f) and r.shape == (3,)
    assert float(c[0][np.asarray(r), np.asarray(col)].sum()) == pytest.approx(
        lsa.linear_sum_assignment(c[0], maximize=True).cost)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(0, 6), st.integers(0, 2 ** 31))
def test_rectangular_augmentation_and_capped_prices_are_optimal(n, extra, seed):
    # n < m: shortest augmenting paths from zero duals (no auction); and square costs
    # whose big entries enter the auction capped: both exact against SciPy
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 20, (n, n + extra)).astype(float)
    cols = auction_assignment(c)
    assert cols.shape == (n,) and len(set(cols.tolist())) == n
    r, col = linear_sum_assignment(c)
    assert c[np.arange(n), cols].sum() == c[r, col].sum()
    sq = rng.random((n, n))
    sq[rng.random((n, n)) < 0.3] = n + 1.0  # big-M stand-ins
    perm = auction_assignment(sq, cap=2.0)
    assert sq[np.arange(n), perm].sum() == pytest.approx(_optimal(sq), rel=1e-12)
