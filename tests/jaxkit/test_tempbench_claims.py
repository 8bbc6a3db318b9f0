"""TempBench's claim logic and the reference setting: paired verdicts that can say no,
the interval verdict rule, the reference setting with every baseline on orthogonal
features, and its comparisons in the setting-1 paper row."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from jaxkit.tempbench import report as R
from jaxkit.tempbench.config import QUICK
from jaxkit.tempbench.results import ReferencePanel, Summary
from jaxkit.tempbench.train import TrainConfig

RBG = functools.partial(jax.random.key, impl="rbg")


def test_claims_can_say_no():
    def summ(tc, sae):
        return {m: {"x": Summary(mean=float(np.mean(v)), ci95=0.0, seeds=list(v))}
                for m, v in (("tc", tc), ("sae", sae))}

    better = R._diffs(summ([0.9, 0.91, 0.92], [0.5, 0.52, 0.5]), "x")
    worse = R._diffs(summ([0.5, 0.52, 0.5], [0.9, 0.91, 0.92]), "x")
    from jaxkit.stats import superiority

    assert superiority(better).verdict == "yes"
    assert superiority(worse).verdict == "no"
    np.testing.assert_allclose(R._diffs(summ([0.2], [0.5]), "x", higher=False), [0.3])


def test_verdict_rule():
    def s(mean, ci):
        return {"x": Summary(mean=mean, ci95=ci, seeds=[mean])}

    assert R.verdict({"tc": s(0.9, 0.01), "sae": s(0.5, 0.1)}, "x", True) == "win"
    assert R.verdict({"tc": s(0.9, 0.01), "sae": s(0.5, 0.1)}, "x", False) == "loss"
    assert R.verdict({"tc": s(0.9, 0.35), "sae": s(0.5, 0.1)}, "x", True) == "tie"


def test_reference_setting_every_baseline_on_orthogonal_features():
    """The reference setting at tiny size: every method's metrics finite, TopK methods at
    most k T active per window, per-token atoms placed at every position (so their
    temporal AUC is the structural one)."""
    from jaxkit.tempbench import reference as RF

    s = RF.RefSetting(d=6, n_features=4, length=12, n_train=6, n_test=2)
    cfg = TrainConfig(window=1, n_latents=8, k=1, steps=20, batch_size=16, lr=3e-3,
                      log_every=20, checkpoint_every=2)
    out = RF.compare_reference(RBG(1), 0.9, s, cfg, windows=(2,), ks=(1,), n_seeds=2,
                               methods=("tc", "sae_kT", "tfa"))
    assert set(out.cells) == {(2, 1)} and set(out.as_dict()) == {"T=2 k=1"}
    cell = out.cells[(2, 1)].methods
    assert set(cell) == {"tc", "sae_kT", "tfa"}
    for m, met in cell.items():
        assert set(met) == {"token_auc", "temporal_auc", "fvu", "l0"}
        seeds = {k: np.asarray(s.seeds) for k, s in met.items()}
        assert all(np.isfinite(v).all() and v.shape == (2,) for v in seeds.values()), m
        assert met["token_auc"].mean == pytest.approx(seeds["token_auc"].mean())
        assert ((seeds["token_auc"] >= 0) & (seeds["token_auc"] <= 1)).all()
    for m in ("tc", "sae_kT"):  # TopK k T (sae_kT: on its one token); ReLU may drop some
        l0 = np.asarray(cell[m]["l0"].seeds)
        assert (l0 <= 2.0 + 1e-6).all() and (l0 > 1.0).all(), m
    with pytest.raises(ValueError, match="n_features"):
        RF.compare_reference(RBG(1), 0.9, s._replace(n_features=9), cfg)
    from jaxkit.kernels import crosscoder as cc

    p = cc.init(RBG(0), 6, 8, site=(1,))
    atoms, slices = RF.ref_atoms("tsae", p, 3)
    assert atoms.shape == (24, 3, 6) and slices.shape == (8, 6)
    np.testing.assert_array_equal(atoms[8:16, 1], slices)  # placement at position 1
    assert np.abs(np.asarray(atoms[8:16, [0, 2]])).max() == 0


def test_reference_comparisons_enter_the_setting_1_row():
    """The setting-1 paper row holds the reference setting's comparisons with every
    baseline: a reference cell where TFA equals the TC turns a 'yes' into 'no' (TC - TFA
    = 0 is below the margin), and one where the TC leads everyone keeps it."""
    from jaxkit.tempbench import report_ref

    def summ(vals):
        return {"mean": float(np.mean(vals)), "ci95": 0.0, "seeds": list(vals)}

    def cell(tfa_gap):  # read back from the plain mapping metrics.json records
        base = np.asarray([0.6, 0.61, 0.62])
        return ReferencePanel.from_dict({"T=2 k=1": {
            "tc": {"token_auc": summ(base + 0.3), "temporal_auc": summ(base + 0.3)},
            "acausal": {"token_auc": summ(base), "temporal_auc": summ(base)},
            "tfa": {"token_auc": summ(base + 0.3 - tfa_gap), "temporal_auc": summ(base)}}})

    comps = report_ref.ref_comparisons(cell(0.3))
    assert [c[0].split(": ")[1] for c in comps] == ["token AUC vs acausal", "token AUC vs tfa",
                                                    "temporal AUC vs acausal"]
    cfg = QUICK.merged({"seeds": 3})
    lead = R._family_claim(cfg, "c", comps, "w")
    tie = R._family_claim(cfg, "c", report_ref.ref_comparisons(cell(0.0)), "w")
    assert lead.verdict == "yes" and tie.verdict == "no" and "lowest: reference" in tie.measured
