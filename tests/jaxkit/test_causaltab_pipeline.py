"""``jaxkit run causaltab`` end to end on a tiny configuration (shipped weights), and the
registry entry."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jaxkit.causaltab import pipeline as P
from jaxkit.causaltab import recipes as R
from jaxkit.causaltab.config import QUICK, AblationSettings, Config
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline


def test_registered_with_quick_and_full():
    e = get_pipeline("causaltab")
    assert e.config(True) == QUICK and isinstance(e.config(False), Config)
    with pytest.raises(ValueError, match="int_fracs"):
        dataclasses.replace(QUICK, int_fracs=(0.0,))
    with pytest.raises(ValueError, match="methods"):
        dataclasses.replace(QUICK, methods=("notears",))
    with pytest.raises(ValueError, match="`ablation.d`"):  # beyond the narrow prior's d
        QUICK.override(["ablation.d=12"])
    assert QUICK.ablation.steps == 0 < e.config(False).ablation.steps
    full = e.config(False)  # scores the shipped weights; the ablation trains both arms
    assert full.train_steps == 0 == QUICK.train_steps
    retrain = full.override(["train_steps=3600"])  # the first recipe: shared broad arm
    assert R.main_recipe(retrain) == R.ablation_recipe(full, "broad")
    assert R.ablation_recipe(full, "narrow") != R.main_recipe(retrain)
    with pytest.raises(ValueError, match="train_d_max"):
        dataclasses.replace(QUICK, train_d_max=2)


@pytest.mark.slow  # compiles every method (minutes on a loaded 2-core machine)
def test_tiny_run_reports_every_claim_and_resumes(tmp_path):
    tiny = dataclasses.replace(QUICK, n_datasets=3, n=32, semantic_seeds=2, semantic_n=32,
                               sachs_rows=32, methods=("causaltab", "var-sort-regress",
                                                       "random"))
    ctx = RunContext(out_dir=tmp_path, config=tiny, quick=True)
    res = P.run(ctx)
    kinds = [c.kind for c in res.claims]  # paper rows, then chance, LLM audit and its
    assert kinds[:9] == ["paper"] * 6 + ["setup"] * 3  # control, then the extensions
    assert set(kinds[9:]) == {"extension"}
    assert [c.claim for c in res.claims[9:]] == [
        "CausalTab beats the classical baselines on observational data (in distribution)",
        "CausalTab beats the classical baselines on mixed interventional data (in "
        "distribution)"]
    assert res.metrics["audit"][0]["network"] == "asia"
    assert res.claims[1].verdict == "not tested at this size"  # no ablation in QUICK
    assert "## Semantic environments" in res.markdown and len(res.figures) == 3
    json.dumps(res.metrics, default=float)
    again = RunContext(out_dir=tmp_path, config=tiny, quick=True)
    res2 = P.run(again)
    assert len(again.reloaded) >= 6  # every stage reloaded
    assert [c.measured for c in res2.claims] == [c.measured for c in res.claims]


def test_ablation_broad_arm_is_the_main_training_only_when_the_recipes_coincide(
        tmp_path, monkeypatch):
    import jax
    import numpy as np

    calls = []

    def fake_train(key, mcfg, st, *, start=None, end=None, mesh=None, checkpoint_dir=None,
                   resume=True):  # records the run; parameters tell the runs apart
        calls.append({"key": np.asarray(jax.random.key_data(key)).tolist(), "mcfg": mcfg,
                      "st": st, "curriculum": start is not None,
                      "folder": checkpoint_dir.name})
        return ({"w": np.full(1, float(len(calls)))},
                [{"step": st.steps, "loss": 1.0, "bce": 0.5}], {"tasks_per_s": 2.0})

    monkeypatch.setattr(R, "train_model", fake_train)
    same = dataclasses.replace(QUICK, train_steps=50, train_batch=2, train_n_max=16,
                               train_d_max=R.ABLATION_D_MAX, train_curriculum=False,
                               ablation=AblationSettings(steps=50, batch=2, n=16))

    def run(cfg, folder, resume=True):
        ctx = RunContext(out_dir=tmp_path / folder, config=cfg, resume=resume)
        (params, _), info, trained = R.get_model(ctx, cfg)
        assert info.settings == dataclasses.asdict(R.main_recipe(cfg).settings)
        models, abl = R.train_ablation(ctx, cfg, trained)
        return ctx, params, models, abl

    ctx, params, models, abl = run(same, "same")
    assert [c["folder"] for c in calls] == ["train", "narrow"]  # trained twice, not 3x
    assert models["broad"][0] is params and abl.arms["broad"].shared_with_main
    assert not abl.arms["narrow"].shared_with_main and models["narrow"][0]["w"][0] == 2.0
    assert list(abl.as_dict()) == ["config", "settings", "broad", "narrow"]
    assert abl.as_dict()["narrow"] == {"final_bce": 0.5, "final_loss": 1.0,
                                       "tasks_per_s": 2.0, "shared_with_main": False}
    assert calls[0]["key"] == calls[1]["key"] and calls[0]["st"] == calls[1]["st"]
    # the main stage's cache key carries the recipe; a rerun reloads it, trains nothing
    assert ctx.stage_path("causaltab-train",
                          config=repr(R.main_recipe(same))).is_file()
    calls.clear()
    again, _, models2, _ = run(same, "same")
    assert calls == [] and "causaltab-train" in again.reloaded
    assert models2["broad"][0]["w"][0] == 1.0
    # any difference in the recipe: the ablation trains its own broad arm
    for i, change in enumerate((dict(train_curriculum=True), dict(train_batch=4),
                                dict(ablation=AblationSettings(steps=75, batch=2, n=16)),
                                dict(train_n_max=32), dict(train_d_max=24))):
        calls.clear()
        _, params, models, abl = run(dataclasses.replace(same, **change), f"diff{i}")
        assert [c["folder"] for c in calls] == ["train", "broad", "narrow"], change
        assert not abl.arms["broad"].shared_with_main and models["broad"][0] is not params
        assert not calls[1]["curriculum"] and calls[1]["key"] == calls[2]["key"]
