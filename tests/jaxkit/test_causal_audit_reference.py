"""ICA-LiNGAM's standardisation result against the float64 reference
(jaxkit.causal_audit.reference): the reference recovers a known DAG, agrees with jaxkit's
kernel in the LiNGAM setting, and the claim can say yes and no."""

import jax
import numpy as np
import pytest

from jaxkit.causal_audit import reference as RF
from jaxkit.causal_audit.axes import cell
from jaxkit.causal_audit.results import StandardisationCheck


def test_reference_recovers_a_laplace_chain_raw_and_standardised():
    rng = np.random.default_rng(0)
    e = rng.laplace(size=(2000, 4))
    x = np.zeros_like(e)
    x[:, 0] = e[:, 0]
    for j in range(1, 4):
        x[:, j] = 0.9 * x[:, j - 1] + e[:, j]
    want = np.diag(np.ones(3), -1) != 0  # [i, j]: j -> i
    for data in (x, x / x.std(0)):
        np.testing.assert_array_equal(RF.ica_lingam_reference(data) != 0, want)
    with pytest.raises(ValueError, match="`x`"):
        RF.ica_lingam_reference(np.zeros((5, 1)))


def test_check_in_the_lingam_setting_agrees_with_the_kernel():
    spec = cell(n=400, d=4, edges_per_node=1.0, noise="laplace")
    c = RF.standardisation_check(jax.random.key(0), spec, 4)
    jr, js, rr, rs = c.jaxkit_raw, c.jaxkit_std, c.reference_raw, c.reference_std
    assert jr.shape == js.shape == rr.shape == rs.shape == (4,)
    # in scope (non-Gaussian) both are good and scale-free on average
    assert np.nanmean(jr) > 0.7 and np.nanmean(rr) > 0.7
    assert abs(np.nanmean(jr - js)) < 0.2 and abs(np.nanmean(rr - rs)) < 0.2
    with pytest.raises(ValueError, match="`k`"):
        RF.standardisation_check(jax.random.key(0), spec, 1)


def test_claim_says_yes_no_and_not_tested():
    rng = np.random.default_rng(1)
    raw = rng.uniform(0.6, 0.8, 40)
    def check(ref_std):
        return StandardisationCheck(jaxkit_raw=raw, jaxkit_std=raw - 0.3, reference_raw=raw,
                                    reference_std=ref_std)

    same = check(raw - 0.3 + rng.normal(0, .02, 40))
    assert RF.claim(same, 0.1, "p").verdict == "yes"
    apart = check(raw + rng.normal(0, .02, 40))
    c = RF.claim(apart, 0.1, "p")
    assert c.verdict == "no" and "not installed" in c.note and c.kind == "extension"
    assert RF.claim(None, 0.1, "p").verdict == "not tested at this size"
