"""CausalTab's long training (curriculum phases, segmented fit with validation, exact
resume) and the causal-learn baselines PC and GES (scores in the LiNGAM convention)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxkit.causal_model.weights_io import load_weights
from jaxkit.causaltab import evaluate
from jaxkit.causaltab.longtrain import LongRecipe, phase_of, train_long

TINY = LongRecipe(dim=8, heads=2, layers=1, ffn=2, steps=50, batch=2, warmup=5, d_max=5,
                  n_max=16, small_d=3, small_n=8, small_frac=0.5, chunk=25, seed=3)
CELLS = ((4, 16),)


def test_cpdag_scores_convention():
    # causal-learn: g[a, b] = -1, g[b, a] = 1 is a -> b; both -1 undirected
    g = np.zeros((3, 3))
    g[0, 1], g[1, 0] = -1, 1  # 0 -> 1
    g[1, 2], g[2, 1] = -1, -1  # 1 - 2
    s = evaluate._cpdag_scores(g)
    want = np.zeros((3, 3))
    want[1, 0] = 1.0  # [child, parent]
    want[1, 2] = want[2, 1] = 0.5
    np.testing.assert_array_equal(s, want)


@pytest.mark.parametrize("method", ["pc", "ges"])
def test_pc_ges_find_a_collider(method):
    rng = np.random.default_rng(0)
    n = 2000
    a, b = rng.normal(size=n), rng.normal(size=n)
    c = a + b + 0.5 * rng.normal(size=n)
    x = np.stack([a, b, c], axis=1)
    est, sc = evaluate.run_method(method, x, np.zeros_like(x), np.zeros(x.shape, bool))
    want = np.zeros((3, 3))
    want[2, 0] = want[2, 1] = 1.0  # a -> c <- b is identified
    np.testing.assert_array_equal(sc, want)
    np.testing.assert_array_equal(est, want)


def test_causallearn_bad_method():
    with pytest.raises(ValueError, match="`method`"):
        evaluate.causallearn_scores("fci", np.zeros((5, 2)))


def test_recipe_checks_and_phases():
    with pytest.raises(ValueError, match="`steps`"):
        LongRecipe(steps=30, chunk=25).validate()
    with pytest.raises(ValueError, match="`small_d`"):
        LongRecipe(small_d=30).validate()
    assert [phase_of(TINY, i) for i in range(2)] == [0, 1]


@pytest.mark.slow  # three tiny trainings, each compiling both phases (~45 s CPU)
def test_segmented_training_resumes_exactly(tmp_path):
    kw = dict(eval_every=1, val_tasks=2, baselines=False, val_cells=CELLS, log=lambda s: None)
    full = train_long(TINY, tmp_path / "full", **kw)
    stop = train_long(TINY, tmp_path / "cut", max_cpu_s=0.0, **kw)  # stops after chunk 1
    assert stop["stopped_at_step"] == 25
    import shutil

    shutil.copytree(tmp_path / "cut", tmp_path / "export")
    ex = train_long(TINY, tmp_path / "export", export=True, **kw)  # restore, no training
    assert ex["stopped_at_step"] == 25
    assert ex["validation"]["model_auroc"] == stop["validation"]["model_auroc"]
    resumed = train_long(TINY, tmp_path / "cut", **kw)
    assert resumed["stopped_at_step"] is None
    pa, cfg_a, _ = load_weights(tmp_path / "full")
    pb, cfg_b, _ = load_weights(tmp_path / "cut")
    assert cfg_a == cfg_b == TINY.model()
    import jax

    for x, y in zip(jax.tree.leaves(pa), jax.tree.leaves(pb), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    curve = json.loads((tmp_path / "cut" / "curve.json").read_text())
    assert [c["step"] for c in curve] == [25, 50]
    assert all(0.0 <= c["val_auroc"] <= 1.0 for c in curve)
    assert full["validation"]["model_auroc"] == resumed["validation"]["model_auroc"]


def test_ship_scores_and_writes_the_shipped_format(tmp_path):
    import jax

    from jaxkit.causal_model.model import init_params
    from jaxkit.causal_model.weights_io import save_weights
    from jaxkit.causaltab import ship, validation

    cfg = TINY.model()
    params = init_params(jax.random.key(0), cfg)
    run = tmp_path / "run"
    save_weights(run, params, cfg, {"recipe": {"n_max": 16, "d_max": 5},
                                    "validation": {"cells": [[4, 16]], "tasks_per_cell": 2}})
    (run / "curve.json").write_text(json.dumps([{"step": 25, "val_auroc": 0.5}]))
    truth = validation.model_aurocs(params, cfg, validation.validation_set(CELLS, n_tasks=2))
    base = tmp_path / "b.json"
    base.write_text(json.dumps({"key": "", "auroc": {"pc": [0.0, 0.0], "ges": [0.1, 0.1]}}))
    with pytest.raises(FileNotFoundError, match="nope.json"):
        ship.ship(run, tmp_path / "dest", tmp_path / "nope.json")
    meta = ship.ship(run, tmp_path / "dest", base, compare=run)
    v = meta["validation"]
    assert v["strongest"] == "ges" and v["baselines_auroc"] == {"pc": 0.0, "ges": 0.1}
    assert v["model_auroc"] == pytest.approx(np.mean(truth))
    assert v["diff_vs_strongest"] == pytest.approx(np.mean(truth) - 0.1)
    assert v["previous"]["model_auroc"] == v["model_auroc"]
    assert meta["settings"]["n_max"] == 16
    p2, cfg2, meta2 = load_weights(tmp_path / "dest")  # the format predict() loads
    assert cfg2 == cfg and meta2["validation"]["n_paired"] == 2
    assert json.loads((tmp_path / "dest" / "curve.json").read_text())[0]["step"] == 25


def test_ship_records_the_segments_and_make_weights_replays_them(tmp_path):
    """A run continued from another (``init``) ships with both segments, first to last,
    their ``init`` and command naming the previous segment instead of a path; a run
    continued from a shipped folder inherits its segments; make_weights rebuilds the
    chain of recipes with each ``init`` the previous segment's folder."""
    import dataclasses

    import jax

    from jaxkit.causal_model.model import init_params
    from jaxkit.causal_model.weights_io import save_weights
    from jaxkit.causaltab import make_weights, ship

    cfg = TINY.model()
    params = init_params(jax.random.key(0), cfg)
    first, second = tmp_path / "c", tmp_path / "d"
    r1 = dataclasses.asdict(TINY)
    r2 = {**r1, "init": str(first), "steps": 100, "start_t": 1.0}
    for d, r, ev in ((first, r1, 8), (second, r2, 16)):
        cmd = "python -m jaxkit.causaltab.longtrain " + " ".join(
            f"--{k} {v}" for k, v in r.items() if v != "")
        save_weights(d, params, cfg, {"recipe": r, "command": cmd, "commit": "abc",
                                      "cpu_seconds": 1.0, "validation": {"model_auroc": 0.6}})
        (d / "curve.json").write_text(json.dumps([{"chunk": ev, "step": 25 * ev}]))
    curve: list = []
    segs = ship.segments(second, curve)
    assert [g["recipe"]["steps"] for g in segs] == [50, 100]
    assert [(c["segment"], c["step"]) for c in curve] == [(0, 200), (1, 450)]
    assert [g["recipe"]["init"] for g in segs] == ["", "segment 0"]
    assert [g["eval_every"] for g in segs] == [8, 16]
    assert "--init <segment 0> --start_t 1.0" in segs[1]["command"]
    assert "--init" not in segs[0]["command"] and str(tmp_path) not in json.dumps(segs)
    # a third segment continued from a shipped folder holding the first two
    shipped = tmp_path / "shipped"
    save_weights(shipped, params, cfg, {"segments": segs})
    third = tmp_path / "e"
    save_weights(third, params, cfg, {"recipe": {**r1, "init": str(shipped), "steps": 75}})
    (shipped / "curve.json").write_text(json.dumps(curve))
    (third / "curve.json").write_text(json.dumps([{"chunk": 1, "step": 25}]))
    curve3: list = []
    assert [g["recipe"]["steps"] for g in ship.segments(third, curve3)] == [50, 100, 75]
    assert [(c["segment"], c["step"]) for c in curve3] == [(0, 200), (1, 450), (2, 175)]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        save_weights(third, params, cfg, {"recipe": {**r1, "init": str(tmp_path / "nowhere")}})
        ship.segments(third)
    plan = make_weights.recipes({"segments": segs}, tmp_path / "work")
    assert [(r.steps, r.init, out.name, ev) for r, out, ev in plan] == [
        (50, "", "segment-0", 8), (100, str(tmp_path / "work" / "segment-0"), "segment-1", 16)]
    assert plan[1][0].start_t == 1.0
    with pytest.raises(ValueError, match="no training `segments`"):
        make_weights.recipes({"settings": {}}, tmp_path / "work")
