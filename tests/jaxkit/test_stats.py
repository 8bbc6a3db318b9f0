"""jaxkit.stats: intervals against SciPy / closed forms, and the claim tests' verdicts."""

import math

import jax
import numpy as np
import pytest
from scipy import stats as sps

from jaxkit import stats
from jaxkit.stats import Verdict, equivalence, superiority


def test_t_interval_matches_scipy():
    x = np.random.default_rng(0).normal(1.0, 2.0, size=9)
    for level in (0.9, 0.95, 0.99):
        mean, half = stats.t_interval(x, level)
        lo, hi = sps.t.interval(level, x.size - 1, loc=x.mean(), scale=sps.sem(x))
        assert mean == pytest.approx(x.mean())
        assert mean - half == pytest.approx(lo) and mean + half == pytest.approx(hi)
    # non-finite values are dropped; one value: no width; none: nan
    m, h = stats.t_interval(np.r_[x, np.nan, np.inf])
    assert (m, h) == pytest.approx(stats.t_interval(x))
    m, h = stats.t_interval([3.0, np.nan])
    assert m == 3.0 and math.isnan(h)
    assert all(math.isnan(v) for v in stats.t_interval([]))
    with pytest.raises(ValueError, match="`level`"):
        stats.t_interval(x, 1.5)


def test_report_reexports_t_interval():
    from jaxkit.report import t_interval

    assert t_interval is stats.t_interval


def test_fisher_z_interval_closed_form():
    r, n = 0.6, 28
    lo, hi = stats.fisher_z_interval(r, n)
    half = 1.959963984540054 / math.sqrt(n - 3)
    assert lo == pytest.approx(math.tanh(math.atanh(r) - half))
    assert hi == pytest.approx(math.tanh(math.atanh(r) + half))
    lo90, hi90 = stats.fisher_z_interval(r, n, level=0.9)
    assert lo < lo90 < r < hi90 < hi
    assert stats.fisher_z_interval(-0.3, 50) == pytest.approx(
        tuple(-v for v in reversed(stats.fisher_z_interval(0.3, 50))))
    assert all(math.isnan(v) for v in stats.fisher_z_interval(0.5, 3))
    assert stats.fisher_z_interval(1.0, 10) == (1.0, 1.0)
    with pytest.raises(ValueError, match="`r`"):
        stats.fisher_z_interval(1.5, 10)


def test_paired_difference():
    np.testing.assert_allclose(stats.paired_difference([3, 4], [1, 5]), [2.0, -1.0])
    with pytest.raises(ValueError, match="`a` and `b` must be paired"):
        stats.paired_difference([1, 2], [1, 2, 3])


def test_bootstrap_interval_reproducible_and_covers():
    x = np.random.default_rng(1).normal(5.0, 1.0, size=40)
    key = jax.random.key(3)
    est, lo, hi = stats.bootstrap_interval(key, x)
    assert est == pytest.approx(x.mean()) and lo < x.mean() < hi
    assert stats.bootstrap_interval(key, x) == (est, lo, hi)
    assert stats.bootstrap_interval(jax.random.key(4), x) != (est, lo, hi)
    # a Generator works too, and a statistic without `axis`
    med = stats.bootstrap_interval(np.random.default_rng(0), x, stat=lambda s: np.median(s),
                                   n_boot=200)
    assert med[1] < np.median(x) < med[2]
    # wider at a higher level
    _, lo99, hi99 = stats.bootstrap_interval(key, x, level=0.99)
    assert lo99 <= lo and hi99 >= hi
    assert all(math.isnan(v) for v in stats.bootstrap_interval(key, [np.nan]))
    with pytest.raises(ValueError, match="`key_or_rng`"):
        stats.bootstrap_interval("seed", x)


def _sample(mean, sd=1.0, n=10, seed=0):
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)  # exact mean and sd


def test_superiority_three_outcomes():
    # n=10, sd=1: the 95% half-width is t_{.975,9}/sqrt(10) = 0.715
    yes = superiority(_sample(1.0))
    assert isinstance(yes, Verdict) and yes.verdict == "yes" and yes.n == 10
    assert yes.estimate == pytest.approx(1.0)
    assert yes.lo == pytest.approx(1.0 - 0.7153, abs=1e-3)
    assert superiority(_sample(-1.0)).verdict == "no"
    assert superiority(_sample(0.3)).verdict == "not shown"
    # a margin moves the bar
    assert superiority(_sample(1.0), margin=0.5).verdict == "not shown"
    assert superiority(_sample(1.0), margin=2.0).verdict == "no"
    assert "superiority" in yes.test and "n=10" in yes.test


def test_equivalence_three_outcomes():
    # n=10, sd=1: the 90% half-width is t_{.95,9}/sqrt(10) = 0.580
    assert equivalence(_sample(0.0), margin=1.0).verdict == "yes"
    assert equivalence(_sample(0.0), margin=0.5).verdict == "not shown"
    assert equivalence(_sample(3.0), margin=1.0).verdict == "no"
    assert equivalence(_sample(-3.0), margin=1.0).verdict == "no"
    # "not significant" is never a match: a noisy null difference is not shown
    noisy = _sample(0.0, sd=5.0)
    assert superiority(noisy).verdict == "not shown"
    assert equivalence(noisy, margin=1.0).verdict == "not shown"
    v = equivalence(_sample(0.0), margin=1.0)
    assert v.hi - v.estimate == pytest.approx(sps.t.ppf(0.95, 9) / math.sqrt(10))
    assert "TOST" in v.test
    with pytest.raises(ValueError, match="`margin` must be > 0"):
        equivalence(_sample(0.0), margin=0.0)


@pytest.mark.parametrize("test", [superiority, lambda d: equivalence(d, margin=1.0)])
def test_fewer_than_two_finite_values_is_not_shown(test):
    for diffs in ([], [1.0], [2.0, np.nan, np.inf]):
        v = test(diffs)
        assert v.verdict == "not shown" and "fewer than 2 finite values" in v.test
        assert v.n == len([d for d in diffs if np.isfinite(d)])


def test_holm_family_reduces_to_superiority_and_controls_the_family():
    from jaxkit import stats

    rng = np.random.default_rng(0)
    d = rng.normal(0.3, 0.2, 10)
    one = stats.holm_superiority([d], margin=0.1)[0]
    ref = stats.superiority(d, margin=0.1)
    assert one.verdict == ref.verdict and one.estimate == ref.estimate
    assert "Holm over 1 test" in one.test
    # Holm's thresholds: alpha/3, alpha/2, alpha for the sorted p-values
    np.testing.assert_array_equal(stats.holm_reject([0.01, 0.04, 0.03], 0.05),
                                  [True, False, False])
    np.testing.assert_array_equal(stats.holm_reject([0.01, 0.02, 0.03], 0.05),
                                  [True, True, True])
    # a marginal effect that one test calls "yes" is "not shown" among 20 null members
    weak = np.full(8, 0.1) + rng.normal(0, 0.05, 8) * np.array([1, -1] * 4)
    assert stats.superiority(weak).verdict == "yes"
    fam = stats.holm_superiority([weak] + [rng.normal(0, 1, 8) for _ in range(19)])
    assert stats.one_sided_p(weak)[0] > 0.025 / 20 or fam[0].verdict == "yes"
    # null families: across 200 families of 5 null members, "yes" anywhere is rare
    hits = sum(any(v.verdict == "yes" for v in stats.holm_superiority(
        [rng.normal(0, 1, 10) for _ in range(5)])) for _ in range(200))
    assert hits <= 12  # family-wise 2.5% per direction: about 5 expected
    assert stats.all_of(["yes", "yes"]) == "yes" and stats.all_of([]) == "not shown"
    assert stats.all_of(["yes", "no", "not shown"]) == "no"
    assert stats.all_of(["yes", "not shown"]) == "not shown"
    per = stats.holm_superiority([d, d], margin=[0.1, 1.0])
    assert per[0].verdict == "yes" and per[1].verdict == "no"


def test_holm_known_answers():
    """Holm (1979): p sorted 0.01, 0.02, 0.04 against 0.05/3, 0.05/2, 0.05: all rejected;
    0.01, 0.04, 0.045: the second fails 0.025 and stops."""
    from jaxkit.stats import holm_reject, holm_superiority, one_sided_p, superiority

    assert holm_reject([0.04, 0.01, 0.02], 0.05).tolist() == [True, True, True]
    assert holm_reject([0.045, 0.01, 0.04], 0.05).tolist() == [False, True, False]
    rng = np.random.default_rng(3)
    for shift in (-1.0, 0.0, 0.3, 1.0):
        d = shift + rng.normal(size=5)
        assert holm_superiority([d], margin=0.1)[0].verdict == superiority(
            d, margin=0.1).verdict
    assert one_sided_p([0.2, 0.2], 0.1) == (0.0, 1.0)
