"""Pooled-LiNGAM paper package: tiny sweeps, theory check, sharding, compile reuse,
configuration, claims that can say no (margins from the configuration, Holm), the
negative control, a full tiny run and its resume."""

import dataclasses
import json

import jax
import numpy as np
import pytest

import jaxkit.pooled_lingam as pl
from jaxkit import distributed as jd
from jaxkit import stats
from jaxkit.pooled_lingam import pipeline, report
from jaxkit.pooled_lingam.config import FULL, QUICK, Config, SachsSettings, TheorySettings
from jaxkit.pooled_lingam.results import Moment, SachsRow, Spread, SweepRow, Theory
from jaxkit.registry import RunContext, get
from jaxkit.report import PipelineResult, write_report

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
    # 3 datasets of d = 4, 5 x 30 rows: the shapes of the sharded and compile-reuse tests
    # and of the tiny pipeline's sweeps, so one compile of each fit serves them all
    rows = pl.run_sweep(jax.random.key(1), ds=(4,), n_seeds=3, n_per_env=30,
                        methods=("pooled-ica", "pooled-direct", "gies"), gies_seeds=2)
    assert {r.method for r in rows} == {"pooled-ica", "pooled-direct", "gies"}
    for r in rows:
        n = 2 if r.method == "gies" else 3
        assert (r.param, r.value) == ("d", 4) and r.n_samples == 5 * 30 and r.n_reps == n
        assert 0.0 <= r.f1 <= 1.0 and r.shd >= 0
        assert r.f1_seeds.shape == r.shd_seeds.shape == (n,)
        assert np.isclose(np.mean(r.f1_seeds), r.f1)
        assert (r.converged is None) == (r.method == "gies")
        # metrics.json's row: the swept field first, plain numbers, no converged for GIES
        rec = r.as_dict()
        assert list(rec)[:3] == ["d", "n_samples", "method"] and rec["n_reps"] == n
        assert type(rec["f1_seeds"]) is list and ("converged" in rec) == (r.method != "gies")


def test_evaluate_rejects_unknown_method():
    with pytest.raises(ValueError, match="`methods`"):
        pl.evaluate(jax.random.key(0), _CFG, n_seeds=2, methods=("lasso",))


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


def test_gies_is_scored_against_what_its_targets_identify():
    """Chain 0 -> 1 -> 2: with a target on every node the truth GIES is scored against is
    the DAG; with only node 2 targeted the edge 0 -> 1 is not identifiable (no target set
    holds exactly one of 0, 1, no v-structure, and Meek's R1 needs an arrow into 0) and
    is undirected; an environment with no rows does not count."""
    from jaxkit.pooled_lingam.sweeps import _gies_truth

    b = np.zeros((3, 3))
    b[1, 0], b[2, 1] = 1.5, -1.0
    every = np.zeros((4, 3), bool)
    every[1, 0] = every[2, 1] = every[3, 2] = True
    env = np.repeat(np.arange(4), 5)
    np.testing.assert_array_equal(np.asarray(_gies_truth(b, env, every)) != 0, b != 0)
    one = np.zeros((4, 3), bool)
    one[1, 2] = True
    t = np.asarray(_gies_truth(b, env, one)) != 0
    assert t[2, 1] and not t[1, 2]  # 1 -> 2 cut by the target on 2
    assert t[1, 0] and t[0, 1]  # 0 - 1 undirected
    t = np.asarray(_gies_truth(b, env[env != 1], one)) != 0  # env 1 has no rows
    assert t[1, 0] and t[0, 1]  # the observational CPDAG of a chain: all undirected


def test_theory_slopes():
    th = pl.theory_check(jax.random.key(2), ds=(5, 10, 20), strengths=(1.5,),
                         n_per_env=150, n_seeds=2, tail_from=10)
    k = th.kurtosis
    assert k.mean.shape == (1, 3) and k.seeds.shape == (1, 3, 2)
    assert k.seed_slope.shape == (1, 2) and k.slope.shape == (1,)
    assert k.slope[0] < 0
    assert th.dependence.slope[0] < k.slope[0]
    np.testing.assert_allclose(k.mean, k.theory, rtol=0.35)
    rec = th.as_dict()  # metrics.json's flat mapping
    assert rec["kurtosis"] == k.mean.tolist() and rec["slope_dependence"][0] < 0
    assert list(rec)[-1] == "seed_tail_slope_dependence" and rec["ds"] == [5, 10, 20]


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
    # the shapes of test_theory_slopes (d = 5, 150 rows per environment, 2 seeds: padded
    # to the 8 devices), so the unsharded moments reuse its compile
    ta = pl.theory_check(jax.random.key(4), ds=(5,), n_per_env=150, n_seeds=2, mesh=mesh)
    tb = pl.theory_check(jax.random.key(4), ds=(5,), n_per_env=150, n_seeds=2)
    np.testing.assert_allclose(ta.kurtosis.seeds, tb.kurtosis.seeds, rtol=1e-12)


def test_settings_of_one_shape_share_one_compile():
    """A strength sweep and an environments sweep at fixed total rows keep the shapes:
    after the first setting, no fit or scoring compiles again."""
    cfg = pl.TrialConfig(d=4, n_per_env=30)
    key = jax.random.key(5)
    pl.evaluate(key, cfg, n_seeds=3, methods=("pooled-ica", "pooled-direct"))
    before = jd._vmap_jit._cache_size()
    for c in (dataclasses.replace(cfg, strength=1.5),
              dataclasses.replace(cfg, n_total=150, n_envs=2)):
        pl.evaluate(key, c, n_seeds=3, methods=("pooled-ica", "pooled-direct"))
    assert jd._vmap_jit._cache_size() == before


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="`n_seeds`"):
        Config(n_seeds=0)
    with pytest.raises(ValueError, match="`env_values`"):
        Config(sweep_d=4, n_per_env=2, env_values=(2, 10))
    with pytest.raises(ValueError, match="`gies_margin`"):
        QUICK.override(["gies_margin=0"])
    assert QUICK.override(["ds=4,6"]).ds == (4, 6)


def test_sections_theory_and_sachs_by_dotted_path(tmp_path):
    cfg = QUICK.override(["theory.seeds=3", "sachs.transform=raw"])
    assert cfg.theory.seeds == 3 and cfg.sachs.transform == "raw"
    assert cfg.theory.ds == QUICK.theory.ds and cfg.sachs.boot == QUICK.sachs.boot
    toml = tmp_path / "c.toml"
    toml.write_text("[theory]\nds = [5, 10]\n[sachs]\nboot = 4\n")
    got = Config.from_toml(toml, base=QUICK)
    assert got.theory.ds == (5, 10) and got.sachs.boot == 4 and got.theory.npe == 300
    with pytest.raises(ValueError, match=r"`theory\.seeds`"):
        QUICK.override(["theory.seeds=0"])
    with pytest.raises(ValueError, match=r"`sachs\.transform`"):
        QUICK.override(["sachs.transform=sqrt"])
    with pytest.raises(ValueError, match=r"did you mean theory\.ds"):
        QUICK.override(["theory_ds=5,10"])


def test_full_keeps_the_recorded_full_run_settings():
    recorded = dict(
        n_seeds=16, ds=(5, 10, 20, 30, 40, 50), n_per_env=200, sweep_d=20,
        env_values=(5, 10, 20, 40, 80), samples_values=(25, 50, 100, 200, 400, 800),
        strengths=(1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 8.0), gies_seeds=8, gies_max_d=30,
        ablations=True, strength=3.0, edges_per_node=2.0)
    assert {k: getattr(FULL, k) for k in recorded} == recorded
    assert FULL.theory == TheorySettings(ds=(5, 10, 20, 40, 80, 160), npe=1000, seeds=8,
                                         strengths=(3.0, 1.5))
    assert FULL.sachs.restarts == 8
    assert get("pooled-lingam").quick is QUICK and get("pooled-lingam").full is FULL
    # every quick sweep shares the reference shape (one compile per fit serves them)
    assert QUICK.sweep_d in QUICK.ds and QUICK.sweep_d in QUICK.env_values
    assert QUICK.n_per_env in QUICK.samples_values and QUICK.strength in QUICK.strengths


def _row(method, param, value, f1):
    f1 = np.asarray(f1, float)
    m, sd = float(f1.mean()), float(f1.std())
    return SweepRow(param=param, value=value, n_samples=100, method=method,
                    n_reps=f1.size, f1=m, f1_sd=sd, shd=1.0, shd_sd=0.5, precision=m,
                    precision_sd=sd, recall=m, recall_sd=sd, auprc=m, auprc_sd=sd,
                    f1_seeds=f1, shd_seeds=np.ones_like(f1), converged=1.0, seconds=0.1)


def _sachs(auprc_reps):
    one = Spread.of([0.5, 0.5])
    return SachsRow(method="pooled-ica", transform="raw", n_reps=len(auprc_reps), seconds=1.0,
                    chance_auprc=18 / 110, f1=one, n_edges_est=one, n_edges_true=one,
                    precision=one, recall=one, shd=one, auprc=Spread.of(auprc_reps),
                    auroc=one, topk_f1=one, topk_shd=one, converged=one)


def _theory(kurt_slope, dep_slope, kurt0=(4.0, 4.2, 3.9), dep0=(0.05, 0.06, 0.055),
            ds=(5, 10, 20)):
    """Theory values for the claims: one strength; only the per-seed moments at the first
    d and the per-seed slopes matter (the rest filled with the same numbers)."""
    def moment(seed_slope, first):
        s = np.asarray([seed_slope], float)  # (1, seeds)
        seeds = np.repeat(np.asarray(first, float)[None, None, :], len(ds), axis=1)
        mean = seeds.mean(-1)
        return Moment(mean=mean, seeds=seeds, theory=mean, slope=s.mean(1),
                      slope_theory=s.mean(1), tail_slope=s.mean(1),
                      tail_slope_theory=s.mean(1), seed_slope=s, seed_tail_slope=s)

    return Theory(ds=list(ds), strengths=[3.0], kurtosis=moment(kurt_slope, kurt0),
                  dependence=moment(dep_slope, dep0), n_per_env=100, n_seeds=len(kurt0),
                  tail_from=10)


_CLAIMS_CFG = Config(n_seeds=4, ds=(5,), sweep_d=5, n_per_env=20, env_values=(2, 5),
                     strengths=(1.5, 3.0), gies_seeds=4, gies_max_d=5,
                     sachs=SachsSettings(restarts=2))


def test_claims_can_say_yes_and_no():
    cfg = _CLAIMS_CFG
    good, bad = [1.0, 0.98, 0.97, 1.0], [0.5, 0.55, 0.6, 0.52]
    d_rows = [_row("pooled-ica", "d", 5, good), _row("obs-ica", "d", 5, bad),
              _row("gies", "d", 5, [0.99, 0.98, 0.99, 1.0])]
    env_rows = [_row("pooled-ica", "n_envs", 5, good), _row("pooled-ica", "n_envs", 2, bad)]
    str_rows = [_row("pooled-ica", "strength", 3.0, good),
                _row("pooled-ica", "strength", 1.5, bad)]
    ind = [_row("pooled-ica", "perturb_all", True, good)]
    sachs = [_sachs([0.3, 0.31])]
    th = _theory([-0.8, -0.7, -0.9], [-1.5, -1.6, -1.4])
    yes = report.claims(cfg, d_rows, env_rows, str_rows, th, sachs, independent_rows=ind)
    kinds = [c.kind for c in yes]
    assert kinds == ["paper"] * 6 + ["setup"] + ["extension"] * 4
    assert [c.verdict for c in yes] == ["yes"] * 5 + ["not tested"] + ["yes"] * 3 + [
        "not tested at this size", "yes"]
    assert "Sachs" in yes[5].note and "labels" in yes[5].note
    # the same tests say no when the data contradict the claims
    d_rows = [_row("pooled-ica", "d", 5, bad), _row("obs-ica", "d", 5, good),
              _row("gies", "d", 5, good)]
    env_rows = [_row("pooled-ica", "n_envs", 5, bad), _row("pooled-ica", "n_envs", 2, good)]
    str_rows = [_row("pooled-ica", "strength", 3.0, bad),
                _row("pooled-ica", "strength", 1.5, good)]
    ind = [_row("pooled-ica", "perturb_all", True, bad)]
    sachs = [_sachs([0.1, 0.11, 0.1])]
    th = _theory([0.8, 0.7, 0.9], [1.5, 1.6, 1.4], kurt0=(-0.1, -0.12, -0.09))
    no = report.claims(cfg, d_rows, env_rows, str_rows, th, sachs, independent_rows=ind)
    assert [c.verdict for c in no] == ["no"] * 5 + ["not tested"] + ["no"] * 3 + [
        "not tested at this size", "no"]
    # no GIES cell, no environments below d, a single theory tail point: not tested
    cfg2 = dataclasses.replace(cfg, env_values=(5,), gies_max_d=4)
    th2 = _theory([-0.8, -0.7], [-1.5, -1.6], kurt0=(4.0, 4.2), dep0=(0.05, 0.06),
                  ds=(5, 10))
    few = report.claims(cfg2, d_rows[:2], env_rows[:1], str_rows, th2, sachs)
    assert [few[i].verdict for i in (0, 2, 4, 7)] == ["not tested at this size"] * 4


def test_claim_margins_are_config_fields_stated_in_the_test():
    """Moving a margin in the configuration moves the verdict (nothing is derived from
    the data); the margin is written in the claim's test."""
    good = [0.9, 0.92, 0.91, 0.9]
    d_rows = [_row("pooled-ica", "d", 5, good)]
    th = _theory([-0.8, -0.7, -0.9], [-1.5, -1.6, -1.4])
    strict = dataclasses.replace(_CLAIMS_CFG, f1_target=0.95)
    for cfg, verdict in ((_CLAIMS_CFG, "yes"), (strict, "no")):
        c = report.claims(cfg, d_rows, [], [], th, [])[3]
        assert c.verdict == verdict and f"margin {cfg.f1_target:g}" in c.test
    loose = dataclasses.replace(_CLAIMS_CFG, rate_margin=5.0)
    assert report.claims(loose, d_rows, [], [], th, [])[2].verdict == "no"


def _p_below(diffs, margin):
    return stats.one_sided_p(diffs, margin)[1]


def test_holm():
    np.testing.assert_array_equal(stats.holm_reject([0.01, 0.04, 0.03], 0.05),
                                  [True, False, False])
    np.testing.assert_array_equal(stats.holm_reject([0.01, 0.02, 0.04], 0.05), [True] * 3)
    np.testing.assert_array_equal(stats.holm_reject([np.nan, 0.001], 0.05), [False, True])
    assert _p_below([0.1, 0.2, 0.15], 0.5) < 0.01 < _p_below([0.6, 0.7], 0.5)
    # a part that fails alone says "no"; among several, only if it survives Holm
    one = report._all_of("c", [("a", [0.76, 0.80, 0.79, 0.82], 0.85)])
    assert one.verdict == "no"
    many = report._all_of("c", [("a", [0.76, 0.80, 0.79, 0.82], 0.85)]
                          + [(str(i), [0.9, 0.95, 0.92, 0.97], 0.85) for i in range(7)])
    assert many.verdict == "not shown" and "Holm" in many.test


def test_negative_control_no_paper_claim_says_yes(monkeypatch):
    """The claims on a world whose interventions change nothing (noise-sd factor 1: the
    pooled rows are observational Gaussian data, every source Gaussian, every node
    "perturbed" or not alike): ICA-LiNGAM cannot recover the DAG and pooling adds no
    non-Gaussianity, so no paper claim may say "yes". The shapes of
    test_pooled_beats_observational_only (d = 6, 7 x 100 rows, 8 datasets) and of the
    theory tests (d = 5, 10 at 150 rows, 2 seeds), so nothing compiles anew. Over keys
    0-3 the recovery claims came out "not shown" or "no" (key 2: "no")."""
    d_rows = pl.run_sweep(jax.random.key(2), ds=(6,), n_seeds=8, n_per_env=100,
                          strength=1.0, methods=("pooled-ica", "gies"), gies_seeds=4,
                          gies_max_d=6)
    # with strength 1 perturbing every node changes nothing either: the same data
    ind = [dataclasses.replace(r, param="perturb_all", value=True) for r in d_rows
           if r.method == "pooled-ica"]
    th = pl.theory_check(jax.random.key(12), ds=(5, 10), strengths=(1.0,), n_per_env=150,
                         n_seeds=2, tail_from=5)
    cfg = dataclasses.replace(_CLAIMS_CFG, ds=(6,), sweep_d=6, env_values=(2, 6),
                              gies_max_d=6)

    def paper():
        return [c for c in report.claims(cfg, d_rows, [], [], th, [], independent_rows=ind)
                if c.kind == "paper"]

    verdicts = [c.verdict for c in paper()]
    assert len(verdicts) == 6 and "yes" not in verdicts, verdicts
    # GIES fails here too (the interventions it is told of do nothing): non-inferiority
    # alone says "yes", which is why recovery is part of the "matches" claim
    a, g = (next(r for r in d_rows if r.method == m) for m in ("pooled-ica", "gies"))
    bare = report._all_of("c", [("vs GIES", np.subtract(a.f1_seeds[:4], g.f1_seeds),
                                 -cfg.gies_margin)])
    assert bare.verdict == "yes"
    # the control has teeth: the same rows under a test that always says yes do say yes
    from jaxkit.stats import Verdict

    monkeypatch.setattr(stats, "superiority", lambda x, margin=0.0, level=0.95: Verdict(
        "yes", 1.0, 1.0, 1.0, len(x), "always yes"))
    assert "yes" in [c.verdict for c in paper()]


# the shapes of the tests above (3 datasets of d = 4 with 150 rows; the theory's d = 5, 10
# at 150 rows per environment, 2 seeds), so the tiny run compiles little of its own
_TINY = Config(
    n_seeds=3, ds=(4,), n_per_env=30, sweep_d=4, env_values=(2, 4), samples_values=(30,),
    strengths=(1.0, 3.0), gies_seeds=1, gies_max_d=4,
    theory=TheorySettings(ds=(5, 10), npe=150, seeds=2, strengths=(3.0,), tail_from=5),
    sachs=SachsSettings(restarts=1, boot=2, chance_graphs=2), ablations=False,
)


def _ctx(tmp_path, seed=0):
    return RunContext(out_dir=tmp_path, config=_TINY, quick=True, seed=seed)


def test_pipeline_tiny_run(tmp_path):
    assert get("pooled-lingam").run is pipeline.run is pl.run
    res = pipeline.run(_ctx(tmp_path))
    assert isinstance(res, PipelineResult) and res.name == "pooled-lingam"
    assert len(res.figures) == 6
    for f in res.figures:
        assert f.exists() and f.suffix == ".png" and f.stat().st_size > 1000
    for heading in ("### Verdict", "vs number of variables", "Theory check", "Sachs"):
        assert heading in res.markdown
    assert "| d |" in res.markdown
    assert set(res.metrics) >= {"claim_holds", "d_sweep", "theory", "sachs"}
    assert [c.kind for c in res.claims] == ["paper"] * 6 + ["setup"] * 2 + ["extension"] * 4
    assert res.claims[5].verdict != "not tested" and res.metrics["sachs_labels"]["n_boot"] == 2
    assert {c.verdict for c in res.claims} <= {"yes", "no", "not shown", "not tested",
                                               "not tested at this size"}
    assert res.metrics["independent"] and res.claims[0].verdict != "not tested at this size"
    report_md = write_report(tmp_path, [res], quick=True)
    text = report_md.read_text()
    assert "pooled_lingam_f1_vs_d.png" in text and "## Claims" in text
    assert len(json.loads((tmp_path / "metrics.json").read_text())["claims"]) == 12


def test_killed_run_resumes_from_saved_stages(tmp_path, monkeypatch):
    """A run killed in the theory stage keeps its finished sweeps; the rerun reloads
    them (recomputing them would fail here) and computes only what is left."""
    real_theory = pipeline.theory_check

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "theory_check", killed)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run(_ctx(tmp_path))
    saved = sorted(p.name.split("-")[0] for p in (tmp_path / ".stages").glob("*.pkl"))
    assert saved == ["ablations", "d", "independent", "n_envs", "n_per_env", "strength",
                     "two_targets"]
    assert not list((tmp_path / ".stages").glob("*.tmp*"))

    def must_not_run(*a, **k):
        raise AssertionError("a finished stage was recomputed")

    monkeypatch.setattr(pipeline, "theory_check", real_theory)
    monkeypatch.setattr(pipeline, "run_sweep", must_not_run)
    monkeypatch.setattr(pipeline, "sweep", must_not_run)
    ctx = _ctx(tmp_path)
    res = pipeline.run(ctx)
    assert ctx.reloaded == ["d", "n_envs", "n_per_env", "strength", "ablations",
                            "independent", "two_targets"]
    assert "reloaded from an earlier run" in res.markdown
    # a different seed does not reuse them
    with pytest.raises(AssertionError, match="recomputed"):
        pipeline.run(_ctx(tmp_path, seed=1))
