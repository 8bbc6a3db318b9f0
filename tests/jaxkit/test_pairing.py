"""jaxkit.pairing: host-side exact OT pairing of minibatch chunks, prefetched."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from jaxkit.pairing import ot_paired_chunks, paired_chunks

DATA = np.random.default_rng(0).normal(size=(300, 3)).astype(np.float32) * 2 + 1


@pytest.mark.parametrize("solver", ["emd", "host", "auction"])
def test_chunks_are_reproducible_and_exactly_paired(solver):
    make = paired_chunks(DATA, 16, 4, seed=5, solver=solver)
    x0, x1 = make(1)
    assert x0.shape == x1.shape == (4, 16, 3) and x0.dtype == x1.dtype == np.float32
    again = make(1)
    assert np.array_equal(again[0], x0) and np.array_equal(again[1], x1)
    assert not np.array_equal(make(2)[0], x0)
    rows = {tuple(r) for r in DATA.tolist()}
    for s in range(4):  # each minibatch is in its optimal pairing already
        c = ((x0[s][:, None].astype(float) - x1[s][None].astype(float)) ** 2).sum(-1)
        r, col = linear_sum_assignment(c)
        assert np.trace(c) == pytest.approx(c[r, col].sum(), rel=1e-9)
        assert all(tuple(v) in rows for v in x1[s].tolist())  # rows of the data


def test_prefetched_chunks_equal_the_direct_ones():
    make = paired_chunks(DATA, 8, 2, seed=3)
    got = list(ot_paired_chunks(DATA, 8, 2, 5, seed=3, workers=2))
    assert len(got) == 5
    for i, (a, b) in enumerate(got):
        want = make(i)
        assert np.array_equal(a, want[0]) and np.array_equal(b, want[1])


@pytest.mark.parametrize("args, kw, match", [
    ((np.zeros(5, np.float32), 4, 2), {}, "data"),
    ((np.zeros((5, 2), np.int32), 4, 2), {}, "floating"),
    ((np.full((5, 2), np.nan, np.float32), 4, 2), {}, "NaN"),
    ((DATA, 0, 2), {}, "batch"),
    ((DATA, 4, 1.5), {}, "n_steps"),
    ((DATA, 4, 2), {"solver": "hungarian"}, "solver"),
])
def test_bad_input(args, kw, match):
    with pytest.raises(ValueError, match=match):
        paired_chunks(*args, **kw)


def _blas_threads():
    from threadpoolctl import threadpool_info

    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})


def test_ot_paired_chunks_limits_blas_while_it_runs():
    """BLAS runs on one thread from the first chunk until the iterator ends or is closed,
    and the previous limits come back."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and before != [1]  # numpy's BLAS is loaded and not already at 1
        it = ot_paired_chunks(DATA, 8, 2, 3, seed=3, workers=2)
        assert _blas_threads() == before  # nothing happens before the first item
        next(it)
        assert _blas_threads() == [1]
        rest = list(it)
        assert len(rest) == 2 and _blas_threads() == before
        it = ot_paired_chunks(DATA, 8, 2, 3, seed=3, workers=2)
        next(it)
        it.close()
        assert _blas_threads() == before
        untouched = ot_paired_chunks(DATA, 8, 2, 2, seed=3, blas_threads=None)
        next(untouched)
        assert _blas_threads() == before
        untouched.close()
    with pytest.raises(ValueError, match="`blas_threads` must be None or an integer"):
        ot_paired_chunks(DATA, 8, 2, 2, blas_threads=0)


def test_box_muller_draws_are_standard_normal():
    from scipy import stats

    from jaxkit.pairing import _normal

    for dtype in (np.float32, np.float64):
        z = _normal(np.random.default_rng(0), (4001, 5), dtype)
        assert z.shape == (4001, 5) and z.dtype == dtype and np.all(np.isfinite(z))
        assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
        assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    a = _normal(np.random.default_rng(1), (100, 3), np.float32)
    assert np.array_equal(a, _normal(np.random.default_rng(1), (100, 3), np.float32))
