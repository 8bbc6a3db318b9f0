"""The causal-audit claims that can fail (issue 66; jaxkit.causal_audit.falsify): ranking
instability against a null cell, argument (i) as a rank correlation with a margin,
argument (ii) on a family of models (every member's error falls, the worst case stays
above a floor), the placebo negative control; each can say yes and no."""

import dataclasses

import jax
import numpy as np
import pytest

from jaxkit.causal_audit import falsify as F
from jaxkit.causal_audit import report as R
from jaxkit.causal_audit.audit import (
    family_members,
    null_cell,
    run_cell,
    run_family,
    run_placebo,
)
from jaxkit.causal_audit.config import Config
from jaxkit.causal_audit.grid import CellResult

K = 24
MS = ("a", "b", "c")


def _cell(means, rng, sd=0.02, k=K):
    f1 = {m: np.clip(v + rng.normal(0, sd, k), 0, 1) for m, v in zip(MS, means, strict=True)}
    return CellResult(None, f1, {m: 1 - v for m, v in f1.items()}, np.zeros(k), np.zeros(k),
                      np.ones(k, bool))


def test_discordance_counts_reversed_pairs():
    assert F.discordance([3, 2, 1], [3, 2, 1]) == 0.0
    assert F.discordance([3, 2, 1], [1, 2, 3]) == 1.0
    assert F.discordance([3, 2, 1], [2, 3, 1]) == pytest.approx(1 / 3)
    assert np.isnan(F.discordance([1, 1, 1], [1, 2, 3]))


def test_instability_against_the_null_says_yes_and_no():
    rng = np.random.default_rng(0)
    null = _cell((0.8, 0.5, 0.2), rng)
    a = _cell((0.8, 0.5, 0.2), rng)
    flipped = _cell((0.2, 0.5, 0.8), rng)
    v, measured, test, rows = F.instability_vs_null(
        rng, [("flip", a, flipped)], null, MS, margin=0.1, n_boot=200)
    assert v == "yes" and rows[0].est == pytest.approx(1.0) and "Holm" in test
    assert rows[0].name == "flip" and rows[0].lo <= rows[0].est and rows[0].pairs == K // 2
    same = _cell((0.8, 0.5, 0.2), rng)
    v, *_ = F.instability_vs_null(rng, [("same", a, same)], null, MS, margin=0.1,
                                  n_boot=200)
    assert v == "no"
    # the null absorbs noise: two methods tied in every cell flip at random, in the
    # benchmark and in the null alike, so the excess is not shown to pass the margin
    tie = [_cell((0.5, 0.5, 0.1), rng, sd=0.1) for _ in range(3)]
    v, *_ = F.instability_vs_null(rng, [("noise", tie[0], tie[1])], tie[2], MS,
                                  margin=0.4, n_boot=200)
    assert v != "yes"
    assert F.instability_vs_null(rng, [("x", a, a)], null, ("a",), margin=0.1)[0] == \
        "not tested at this size"


def test_rank_correlation_with_a_margin():
    rng = np.random.default_rng(1)
    base = _cell((0.8, 0.5, 0.2), rng)
    cells = {"L": base, "EV": _cell((0.2, 0.5, 0.8), rng), "ANM": _cell((0.8, 0.5, 0.2), rng)}
    v, measured, test = F.rank_correlation(rng, cells, MS, margin=0.5, n_boot=200)
    assert v == "yes" and "L vs EV: tau -1" in measured and "margin 0.5" in test
    same = {"L": base, "EV": _cell((0.8, 0.5, 0.2), rng)}
    assert F.rank_correlation(rng, same, MS, margin=0.5, n_boot=200)[0] == "no"


def _family(rng, members, ns, shd):
    """``shd(member, n)`` -> mean SHD; per-dataset noise."""
    return {(k, n): CellResult(None, {"m": np.zeros(K)},
                               {"m": np.maximum(shd(k, n) + rng.normal(0, 0.1, K), 0)},
                               np.zeros(K), np.zeros(K), np.ones(K, bool))
            for k in members for n in ns}


def test_family_verdict_yes_no_and_floor():
    rng = np.random.default_rng(2)
    ns = [100, 300, 1000]
    # member k's error falls with n, but at its own n it is always 4 edges (weights
    # shrunk to the detection level): no uniform consistency
    fam = _family(rng, ns, ns, lambda k, n: 4.0 * (k / n) ** 0.7)
    v, measured, test = F.family_verdict(fam, "m", floor=1.0)
    assert v == "yes" and "3 fall" in test and "floor 1" in test
    assert F.family_verdict(fam, "m", floor=5.0)[0] != "yes"  # the floor decides
    # a family whose members all become easy: uniform consistency holds here
    fam = _family(rng, ns, ns, lambda k, n: 300.0 / n)
    assert F.family_verdict(fam, "m", floor=1.0)[0] == "no"
    c = F.family_curves(fam, "m")
    assert c.members == c.ns == ns and c.shd.shape == (3, 3, K)


def test_family_members_spread_over_the_sizes():
    cfg = Config(sizes=(50, 100, 200, 500, 1000, 2000, 5000, 10000), family_members=4)
    assert family_members(cfg) == [50, 200, 2000, 10000]
    assert family_members(dataclasses.replace(cfg, family_members=1)) == [50]


def test_new_config_fields_are_checked():
    for kw, name in ((dict(instability_margin=0.0), "instability_margin"),
                     (dict(identifiability_tau_margin=1.0), "identifiability_tau_margin"),
                     (dict(family_method="nope"), "family_method"),
                     (dict(placebo_factor=1.0), "placebo_factor"),
                     (dict(family_scale=0.0), "family_scale"),
                     (dict(reference_datasets=1), "reference_datasets"),
                     (dict(uniform_floor=-1.0), "uniform_floor")):
        with pytest.raises(ValueError, match=name):
            Config(**kw).validate()


TINY = Config(d=4, n=120, edges_per_node=1.0, batch=6, host_datasets=0,
              methods=("var-sort-regress", "random-sort-regress", "r2-sort-regress",
                       "direct-lingam", "pc"),
              pairs=("noise=gaussian/laplace;scale=raw/standardised",), sizes=(60, 120),
              consistency_methods=("direct-lingam",), family_members=2, n_boot=100,
              reisach_methods=())


def test_placebo_negative_control_comes_out_no_on_real_fits():
    """The null cell's datasets in another unit, refitted: DirectLiNGAM and PC rank the
    same, so the instability test must say "no"; a placebo whose scores are reversed
    must make it say "yes" (the control can fail)."""
    key = jax.random.key(0)
    ms = R.placebo_methods(TINY)
    assert ms == ["direct-lingam", "pc"]
    spec = null_cell(TINY)
    results = {spec: run_cell(key, spec, ms, batch=TINY.batch)}
    placebo = run_placebo(key, TINY, ms)
    for m in ms:
        np.testing.assert_allclose(placebo.f1[m], results[spec].f1[m], atol=1e-6)
    claim = R._placebo_claim(TINY, results, placebo, np.random.default_rng(0))
    assert claim.kind == "setup" and claim.verdict == "no", claim
    # a placebo that reverses every ranking (scores negated) must fire the test
    flipped = dataclasses.replace(placebo, f1={m: -v for m, v in placebo.f1.items()})
    assert R._placebo_claim(TINY, results, flipped, np.random.default_rng(0)).verdict == "yes"


def test_run_family_fits_every_member_at_every_size():
    fam = run_family(jax.random.key(1), TINY)
    assert sorted(fam) == [(60, 60), (60, 120), (120, 60), (120, 120)]
    # member 60 at n=60 has the base weights; member 120 the weights x sqrt(1/2): the
    # same graphs, so the weaker member is not easier at the same n
    shd = {k: float(np.nanmean(r.shd["direct-lingam"])) for k, r in fam.items()}
    assert all(np.isfinite(v) for v in shd.values())
    v, measured, test = F.family_verdict(fam, "direct-lingam", floor=TINY.uniform_floor)
    assert v in ("yes", "no", "not shown") and "worst case" in measured
