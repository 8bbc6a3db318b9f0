"""AMGenC's claims protocol (issue 57): the paper rows' tests, their margins in the
configuration, and the negative control: cells scored against shuffled targets and a
projection that costs half the sampling time, where no paper claim may say "yes"."""

from types import SimpleNamespace

import numpy as np
import pytest

from jaxkit.amgenc import report
from jaxkit.amgenc.config import FULL, QUICK, Config
from jaxkit.amgenc.results import DesignAccuracy, DesignCells
from jaxkit.amgenc.sample import AMGENC_ARM


def test_margins_are_configuration_fields():
    for cfg in (QUICK, FULL):
        assert cfg.overhead_margin == 0.10 and cfg.margin_composition == 0.02
        for field, _ in report.DESIGN_PROPERTIES.values():
            assert getattr(cfg, field) > 0
    # the quick run times enough rounds for the overhead test to decide something
    assert QUICK.timing_runs >= 4
    with pytest.raises(ValueError, match="`overhead_margin`"):
        Config(overhead_margin=0.0)


def _shuffled_targets(rng, n_targets=24, per_target=2):
    """Per-cell design errors as :mod:`jaxkit.amgenc.evaluate` computes them, for two
    arms sampled for the same targets: the unconstrained arm's cells have their own
    target's properties up to small noise; the "AMGenC" arm holds the same cells assigned
    to shuffled targets (a conditioning that is ignored), so its errors are those of a
    cell against another target."""
    dens = rng.uniform(2.2, 3.0, n_targets)
    comp = rng.dirichlet(np.ones(6), n_targets)
    cn = rng.uniform(3.7, 4.3, n_targets)
    t = np.repeat(np.arange(n_targets), per_target)
    perm = rng.permutation(n_targets)
    while np.any(perm == np.arange(n_targets)):  # a derangement: every cell misassigned
        perm = rng.permutation(n_targets)
    cell_d = dens[t] * (1 + 0.01 * rng.standard_normal(t.size))
    cell_c = np.abs(comp[t] + 0.005 * rng.standard_normal(comp[t].shape))
    cell_c /= cell_c.sum(1, keepdims=True)
    cell_n = cn[t] + 0.02 * rng.standard_normal(t.size)

    def errors(src):  # the cells of targets ``src`` scored against their own target t
        return DesignAccuracy.from_cells(DesignCells(
            density_error=np.abs(cell_d[src] - dens[t]) / dens[t],
            composition_l1=np.abs(cell_c[src] - comp[t]).sum(1),
            former_cn_error=np.abs(cell_n[src] - cn[t])))

    idx = np.arange(t.size)
    shuffled = perm[t] * per_target + idx % per_target  # a cell of another target
    return SimpleNamespace(design={"none": errors(idx), AMGENC_ARM: errors(shuffled)})


def _slow_projection(rng, rounds=6, cells=16):
    """Timings where the mechanisms cost half the sampling time (plus timing noise)."""
    none = 1.0 + 0.03 * rng.standard_normal(rounds)
    arm = lambda times, disc=0.0: SimpleNamespace(  # noqa: E731
        ode_times=tuple(times), discrete_seconds=disc, timed_cells=cells,
        x=np.zeros((cells, 1, 3)))
    return SimpleNamespace(arms={"none": arm(none),
                                 AMGENC_ARM: arm(1.45 * none + 0.02 * rng.random(rounds),
                                                 disc=0.05)})


def test_negative_control_no_paper_claim_says_yes():
    rng = np.random.default_rng(0)
    datasets = [(kind, _shuffled_targets(rng), _slow_projection(rng))
                for kind in ("multi", "silica")]
    paper = report.paper_claims(QUICK, datasets)
    assert [c.kind for c in paper] == ["paper"] * 3
    assert not [c.claim for c in paper if c.verdict == "yes"]
    # both testable claims are decided against the method, not skipped
    assert [c.verdict for c in paper] == ["no", "no", "not tested"]
    # ... while the same tests say "yes" when the arms agree and the projection is cheap
    same = [(k, SimpleNamespace(design={"none": ev.design["none"],
                                        AMGENC_ARM: ev.design["none"]}),
             SimpleNamespace(arms={"none": s.arms["none"], AMGENC_ARM: s.arms["none"]}))
            for k, ev, s in datasets]
    assert [c.verdict for c in report.paper_claims(QUICK, same)][:2] == ["yes", "yes"]


def test_overhead_runs_add_the_final_projection_of_the_timing_batch():
    arm = lambda times, disc, b: SimpleNamespace(  # noqa: E731
        ode_times=times, discrete_seconds=disc, timed_cells=4, x=np.zeros((b, 1, 3)))
    s = SimpleNamespace(arms={"none": arm((1.0, 2.0), 0.0, 8),
                              AMGENC_ARM: arm((1.1, 2.2), 0.4, 8)})
    # 0.4 s for 8 cells -> 0.2 s for the 4-cell timing batch
    np.testing.assert_allclose(report.overhead_runs(s), [0.3, 0.2])


def test_property_steering_rows_can_say_yes_and_no():
    """Inverse design on properties: a cell whose density and coordination sit at its own
    target's says yes; a condition that pulls towards the other targets says no."""
    R = report
    rng = np.random.default_rng(0)
    own, other = 0.02 + 0.005 * rng.random(12), 0.10 + 0.005 * rng.random(12)

    def ev(a, b, others=True):
        cells = DesignCells(density_error=a, composition_l1=np.zeros_like(a),
                            former_cn_error=a,
                            density_other=b if others else None,  # a NaN (no formers)
                            former_cn_other=np.r_[b[:-1], np.nan] if others else None)
        return SimpleNamespace(design={R.AMGENC_ARM: DesignAccuracy.from_cells(cells)})

    good = R._property_steering(ev(own, other))
    assert [c.verdict for c in good] == ["yes", "yes"] and good[1].test.endswith("n=11")
    assert [c.verdict for c in R._property_steering(ev(other, own))] == ["no", "no"]
    assert R._property_steering(SimpleNamespace(design=None)) == []
    # errors without the other targets' (the judge's) give no row
    assert R._property_steering(ev(own, other, others=False)) == []
