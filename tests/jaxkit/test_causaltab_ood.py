"""CausalTab's per-axis out-of-distribution cells and the extension claim rows: one axis
held out at a time, graphs larger than trained, observational versus mixed
interventional."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from jaxkit.causaltab import experiments as E
from jaxkit.causaltab import report
from jaxkit.causaltab.config import FULL, QUICK
from jaxkit.causaltab.results import MethodScores, SyntheticCell


@pytest.mark.parametrize("axis,field", [("graph", "graph_w"), ("mechanism", "mech_w"),
                                        ("noise", "noise_w")])
def test_ood_axis_prior_swaps_one_axis_only(axis, field):
    idp, ood, p = E.id_prior(), E.ood_prior(), E.ood_axis_prior(axis)
    for f in ("graph_w", "mech_w", "noise_w"):
        want = ood if f == field else idp
        np.testing.assert_array_equal(np.asarray(getattr(p, f)), np.asarray(getattr(want, f)))
    # the held-out families share no weight with the training ones on the swapped axis
    assert not np.any((np.asarray(getattr(p, field)) > 0) & (np.asarray(getattr(idp, field)) > 0))
    import jax

    for a, b in zip(jax.tree.leaves(E.prior_of(f"ood-{axis}")), jax.tree.leaves(p), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_axis_is_a_one_line_error():
    with pytest.raises(ValueError, match="`axis`"):
        E.ood_axis_prior("regime")
    with pytest.raises(ValueError, match="ood_axes"):
        dataclasses.replace(QUICK, ood_axes=("regime",))
    assert QUICK.ood_axes == () and FULL.ood_axes == ("graph", "mechanism", "noise")
    with pytest.raises(ValueError, match="smoke_steps"):  # the QUICK training smoke run
        dataclasses.replace(QUICK, smoke_steps=30)
    assert QUICK.smoke_steps == 50 and FULL.smoke_steps == 0


def _scores(auroc) -> MethodScores:
    nan = np.full(len(auroc), np.nan)
    return MethodScores.from_arrays(dict(shd=nan, f1=nan, auroc=auroc, auprc=nan, sid=nan,
                                         seconds=nan))


def _row(which, frac, ct, base, chunked=False):
    return SyntheticCell(which=which, d=10, n=40, int_frac=frac, var_sortability=0.5,
                         r2_sortability=0.5, chunked=chunked,
                         methods={"causaltab": _scores(ct), "notears": _scores(base),
                                  "pc": _scores(base - 0.05)})


def test_extension_rows():
    rng = np.random.default_rng(0)
    good, bad = 0.8 + 0.01 * rng.normal(size=8), 0.6 + 0.01 * rng.normal(size=8)
    synth = [_row("id", 0.0, good, bad), _row("id", 0.5, bad, good),
             _row("id", 0.0, good, bad, chunked=True),
             _row("ood-graph", 0.0, good, bad), _row("ood-noise", 0.5, bad, good)]
    c = report.extension_claims(synth)
    assert all(x.kind == "extension" for x in c)
    by = {x.claim: x for x in c}
    assert by["CausalTab beats the classical baselines with only the graph held out (the "
              "rest in distribution)"].verdict == "yes"
    assert by["CausalTab beats the classical baselines with only the noise held out (the "
              "rest in distribution)"].verdict == "no"
    big = next(x for x in c if "larger than" in x.claim)
    assert big.verdict == "yes" and "n=8/8" in big.test  # only the chunked cell
    obs = next(x for x in c if "on observational data" in x.claim)
    mixed = next(x for x in c if "mixed interventional" in x.claim)
    assert obs.verdict == "yes" and "n=16/16" in obs.test  # both observational id cells
    assert mixed.verdict == "no"
    assert "vs pc" in obs.measured and "vs notears" in obs.measured
    # the pipeline's claims end with these rows
    full = report.claims(synth, [])
    assert [x.claim for x in full[-len(c):]] == [x.claim for x in c]
