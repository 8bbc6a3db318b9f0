"""Pooled-LiNGAM pipeline (Paper 7): tiny sweeps, theory check, sharding, full tiny run."""

import json

import jax
import numpy as np
import pytest

from jaxkit.pipelines import PipelineResult, RunContext, get
from jaxkit.pipelines import pooled_lingam as pl
from jaxkit.report import write_report

# d = 6, ER-2 (dense), Gaussian noise, 1 observational + 6 atomic environments
# (noise sd x3), 100 rows each; 8 datasets. Over keys 0..4 pooled ICA-LiNGAM averaged
# F1 >= 0.99 and observational-only 0.68-0.84, so the margins below are loose.
_CFG = pl.TrialConfig(d=6, n_per_env=100, edges_per_node=2.0)


def test_pooled_beats_observational_only():
    res = pl.evaluate(jax.random.key(0), _CFG, n_seeds=8, methods=("pooled-ica", "obs-ica"))
    pooled, obs = res["pooled-ica"]["f1"], res["obs-ica"]["f1"]
    assert pooled.shape == obs.shape == (8,)
    assert pooled.mean() >= 0.9
    assert pooled.mean() - obs.mean() >= 0.1
    assert np.all(res["pooled-ica"]["converged"])


def test_run_sweep_rows_and_gies():
    rows = pl.run_sweep(jax.random.key(1), ds=(4,), n_seeds=2, n_per_env=30,
                        methods=("pooled-ica", "pooled-direct", "gies"))
    assert {r["method"] for r in rows} == {"pooled-ica", "pooled-direct", "gies"}
    for r in rows:
        assert r["d"] == 4 and r["n_samples"] == 5 * 30 and r["n_reps"] == 2
        assert 0.0 <= r["f1"] <= 1.0 and r["shd"] >= 0


def test_gies_convention():
    # chain 0 -> 1 -> 2 (lingam convention b[child, parent]), every node intervened
    b = np.zeros((3, 3))
    b[1, 0], b[2, 1] = 1.5, -1.0
    rng = np.random.default_rng(0)
    xs, envs, targets = [], [], np.zeros((4, 3), bool)
    for k in range(4):
        s = np.ones(3)
        if k:
            s[k - 1] = 3.0
            targets[k, k - 1] = True
        e = rng.normal(size=(500, 3)) * s
        xs.append(np.linalg.solve(np.eye(3) - b, e.T).T)
        envs.append(np.full(500, k))
    est = pl.gies_fit(np.concatenate(xs), np.concatenate(envs), targets)
    np.testing.assert_array_equal(est != 0, b != 0)


def test_theory_slopes():
    th = pl.theory_check(jax.random.key(2), ds=(5, 10, 20), strengths=(1.5,),
                         n_per_env=150, n_seeds=1, tail_from=10)
    assert th["kurtosis"].shape == (1, 3)
    assert th["slope_kurtosis"][0] < 0
    assert th["slope_dependence"][0] < th["slope_kurtosis"][0]
    np.testing.assert_allclose(th["kurtosis"], th["kurtosis_theory"], rtol=0.35)


def test_sharded_matches_unsharded():
    mesh = jax.make_mesh((len(jax.devices()),), ("data",))  # Explicit axes on jax 0.10
    cfg = pl.TrialConfig(d=4, n_per_env=30)
    kw = dict(n_seeds=3, methods=("pooled-ica", "pooled-direct"))
    a = pl.evaluate(jax.random.key(3), cfg, mesh=mesh, **kw)
    b = pl.evaluate(jax.random.key(3), cfg, **kw)
    for m in kw["methods"]:
        assert a[m]["f1"].shape == (3,)
        np.testing.assert_allclose(a[m]["f1"], b[m]["f1"])
        np.testing.assert_allclose(a[m]["shd"], b[m]["shd"])


_TINY = dict(
    n_seeds=2, ds=(4,), n_per_env=30, sweep_d=4, env_values=(2, 4), samples_values=(30,),
    strengths=(1.0, 3.0), gies_seeds=1, gies_max_d=4, theory_ds=(5, 10), theory_npe=50,
    theory_seeds=1, theory_strengths=(3.0,), sachs_restarts=1, ablations=False,
)


def test_pipeline_tiny_run(tmp_path):
    assert get("pooled-lingam") is pl.run
    ctx = RunContext(out_dir=tmp_path, quick=True, seed=0)
    res = pl.run(ctx, settings=_TINY)
    assert isinstance(res, PipelineResult) and res.name == "pooled-lingam"
    assert len(res.figures) == 6
    for f in res.figures:
        assert f.exists() and f.suffix == ".png" and f.stat().st_size > 1000
    for heading in ("### Verdict", "vs number of variables", "Theory check", "Sachs"):
        assert heading in res.markdown
    assert "| d |" in res.markdown
    assert set(res.metrics) >= {"claim_holds", "d_sweep", "theory", "sachs"}
    report = write_report(tmp_path, [res], quick=True)
    assert "pooled_lingam_f1_vs_d.png" in report.read_text()
    json.loads((tmp_path / "metrics.json").read_text())


def test_killed_run_resumes_from_saved_stages(tmp_path, monkeypatch):
    """A run killed in the theory stage keeps its finished sweeps; the rerun reloads
    them (recomputing them would fail here) and computes only what is left."""
    real_theory = pl.theory_check

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pl, "theory_check", killed)
    with pytest.raises(KeyboardInterrupt):
        pl.run(RunContext(out_dir=tmp_path, quick=True, seed=0), settings=_TINY)
    saved = sorted(p.name.split("-")[0] for p in (tmp_path / ".stages").glob("*.pkl"))
    assert saved == ["ablations", "d", "n_envs", "n_per_env", "strength"]
    assert not list((tmp_path / ".stages").glob("*.tmp*"))

    def must_not_run(*a, **k):
        raise AssertionError("a finished stage was recomputed")

    monkeypatch.setattr(pl, "theory_check", real_theory)
    monkeypatch.setattr(pl, "run_sweep", must_not_run)
    monkeypatch.setattr(pl, "sweep", must_not_run)
    ctx = RunContext(out_dir=tmp_path, quick=True, seed=0)
    res = pl.run(ctx, settings=_TINY)
    assert ctx.reloaded == ["d", "n_envs", "n_per_env", "strength", "ablations"]
    assert "reloaded from an earlier run" in res.markdown
    # a different configuration does not reuse them
    ctx2 = RunContext(out_dir=tmp_path, quick=True, seed=1)
    with pytest.raises(AssertionError, match="recomputed"):
        pl.run(ctx2, settings=_TINY)
