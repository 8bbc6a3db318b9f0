"""Long checks, excluded from the default run (`pytest -m slow` runs them)."""

import jax
import pytest

import jaxkit.pooled_lingam as pl

pytestmark = pytest.mark.slow


def test_pooled_ica_lingam_recovers_d40_gaussian_sem():
    """The paper's regime at d = 40: one atomic variance-scaling intervention per node,
    pooled without labels; ICA-LiNGAM recovers the graph, observational-only does not."""
    cfg = pl.TrialConfig(d=40, n_per_env=100, edges_per_node=2.0)
    res = pl.evaluate(jax.random.key(7), cfg, n_seeds=4, methods=("pooled-ica", "obs-ica"))
    assert res["pooled-ica"]["f1"].mean() >= 0.9
    assert res["pooled-ica"]["f1"].mean() - res["obs-ica"]["f1"].mean() >= 0.2
