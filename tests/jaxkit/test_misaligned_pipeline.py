"""jaxkit run misaligned at tiny size (claims, report, figures, stage reload), the
models' kill-and-resume and their training sharded over 8 devices, the MPNN's padding
invariance, the CLI sub-app's errors, and
the benchmark script's smoke run."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from jaxkit.claims import VERDICTS
from jaxkit.misaligned import features as F
from jaxkit.misaligned import models as Mo
from jaxkit.misaligned.config import QUICK
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline
from tests.jaxkit.misaligned_fakes import fake_gap, fake_split, mean_ci

TINY = QUICK.override(["datasets=freesolv", "max_molecules=40", "seeds=2", "steps=50",
                       "n_bits=64", "fractions=0,1", "carbon_inserted_strengths=1",
                       "n_boot=50", "mlp_width=16", "mpnn_width=8", "mpnn_rounds=1",
                       "dmpnn_width=8", "dmpnn_steps=1", "branches="])


pytestmark = pytest.mark.usefixtures("one_blas_thread")  # tests/jaxkit/conftest.py


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A whole run at tiny size (about 25 s of CPU, compile-bound: slow tests only; the
    claims' computation has its own default test below)."""
    out = tmp_path_factory.mktemp("misaligned")
    entry = get_pipeline("misaligned")
    return entry.run(RunContext(out_dir=out, config=TINY, quick=True)), out


@pytest.mark.slow
def test_tiny_pipeline_claims_report_and_figures(tiny_run):
    res, out = tiny_run
    assert res.name == "misaligned"
    # the paper rows (models not learning: decided over the 6 cases, 2 splits x 3 models;
    # multiple branches: not tested), then the 6 cases and random-flatters per model (3)
    # as extensions
    assert len(res.claims) == 11
    assert [c.kind for c in res.claims] == ["paper", *["extension"] * 6, "paper",
                                            *["extension"] * 3]
    assert all(c.verdict in VERDICTS for c in res.claims)
    assert all(c.measured != "n/a" for c in res.claims if c.verdict != "not tested")
    for f in res.figures:
        assert f.is_file() and f.stat().st_size > 1000
    md = res.markdown
    assert "Gap to the best misaligned baseline" in md and "Random versus scaffold" in md
    # the physics-aligned references (with and without logP) apart from the misaligned
    # family, and Renz et al.'s generative AddCarbon beside held-out molecules
    assert "Physics-aligned references (not misaligned baselines)" in md
    assert "size + TPSA, no logP" in md and "Crippen logP alone" in md
    assert "AddCarbon, a generative baseline" in md
    gen = res.metrics["generative"]["freesolv"]
    assert gen["addcarbon"]["n"] == TINY.addcarbon_samples
    assert gen["addcarbon"]["novelty"] == 1.0 and gen["addcarbon"]["validity"] == 1.0
    r = res.metrics["results"]["freesolv/scaffold"]
    assert set(r["gaps"]) == {"mlp", "mpnn", "dmpnn"}
    assert r["gaps"]["mlp"]["best"] in ("train_mean", "size_only", "label_scramble",
                                        "shuffled_inputs", "random_features", "nn_tanimoto",
                                        "carbon_inserted")  # never the physics ones
    assert r["gaps"]["mlp"]["selected_on"] == "validation"
    json.dumps(res.metrics, default=float)  # JSON-able
    assert (out / "checkpoints" / "misaligned-freesolv-mlp").is_dir()


@pytest.mark.slow
def test_tiny_pipeline_reloads_its_stages(tiny_run):
    res, out = tiny_run
    ctx = RunContext(out_dir=out, config=TINY, quick=True)
    again = get_pipeline("misaligned").run(ctx)
    assert {"misaligned-data-freesolv", "misaligned-freesolv-baselines",
            "misaligned-freesolv-mlp", "misaligned-freesolv-mpnn",
            "misaligned-freesolv-dmpnn"} <= set(ctx.reloaded)
    assert [c.measured for c in again.claims] == [c.measured for c in res.claims]


def _fake_results(gap_mlp, gap_mpnn, shift):
    """Hand-made evaluation summaries: per-seed RMSE gaps and a scaffold shift; stated
    experimental error 1.0, so the competitive margin is 0.33."""
    out = {}
    for split, extra in (("random", 0.0), ("scaffold", shift)):
        metrics, gaps = {}, {}
        for m, gap in (("mlp", gap_mlp), ("mpnn", gap_mpnn)):
            seeds = [1.0 + extra, 1.1 + extra, 0.9 + extra]
            metrics[m] = {"rmse": mean_ci(float(np.mean(seeds)), seeds=seeds)}
            gaps[m] = fake_gap(gap)
        metrics["size_only"] = {"rmse": mean_ci(1.0)}
        out[("freesolv", split)] = fake_split(metrics, gaps, dataset="freesolv", split=split,
                                              label_std=2.0, experimental_error=1.0)
    return out


def test_claims_decide_from_the_per_seed_gaps():
    """'yes' means the run supports the paper: the misaligned baseline is competitive (the
    model's advantage below the margin) in every case, Holm-corrected; one model far
    ahead makes it 'no'."""
    from jaxkit.misaligned import report

    cfg = QUICK.override(["datasets=freesolv"])
    cl = report.claims(cfg, _fake_results([0.9, 1.0, 0.95], [-0.5, -0.4, -0.6], 1.0))
    assert len(cl) == 8 and cl[0].claim == report.C_NOT_LEARNING
    assert cl[0].verdict == "no"  # the MLP leads its baseline by ~0.95 > 0.33
    assert "margin" in cl[0].test and "Holm over the 4 cases" in cl[0].test
    assert [c.verdict for c in cl[1:5]] == ["no", "yes", "no", "yes"]  # mlp ahead, mpnn not
    assert cl[5].verdict == "not tested" and cl[5].note
    assert cl[6].verdict == "yes" and cl[7].verdict == "yes"  # scaffold 1.0 worse: flatters
    assert all(c.kind == "extension" for c in cl[1:5] + cl[6:])
    cl = report.claims(cfg, _fake_results([0.01, -0.01, 0.0], [-0.5, -0.6, -0.4], 0.0))
    assert cl[0].verdict == "yes"  # every case within the margin: competitive everywhere
    assert cl[6].verdict in ("no", "not shown")  # no shift: not flattered
    cl = report.claims(cfg, _fake_results([0.1, 0.5, 0.3], [-0.5, -0.6, -0.4], 0.0))
    assert cl[0].verdict == "not shown"  # the MLP's lead straddles the margin


def test_a_best_baseline_chosen_on_test_sets_cannot_decide_the_claim():
    """The protocol chooses the best baseline on validation data: a case whose baseline
    was chosen on its test sets makes the paper row and that case 'not tested'."""
    from jaxkit.misaligned import report

    cfg = QUICK.override(["datasets=freesolv"])
    res = _fake_results([0.01, -0.01, 0.0], [-0.5, -0.6, -0.4], 0.0)
    assert report.claims(cfg, res)[0].verdict == "yes"
    r = res[("freesolv", "random")]
    res[("freesolv", "random")] = dataclasses.replace(r, gaps={
        **r.gaps, "mlp": dataclasses.replace(r.gaps["mlp"], selected_on="test")})
    cl = report.claims(cfg, res)
    assert cl[0].verdict == "not tested" and "1 case(s) chose" in cl[0].note
    assert [c.verdict for c in cl[1:5]] == ["not tested", "yes", "yes", "yes"]


@pytest.fixture(scope="module")
def toy():
    s = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "c1ccccc1C", "c1ccccc1O", "C1CCCCC1", "CC(=O)O",
         "c1ccncc1", "CC(C)O", "OCCO", "CCN"]
    return F.featurise(s, np.arange(len(s), dtype=float), n_bits=32, max_atoms=8)


KILL_TS = Mo.TrainSettings(steps=20, log_every=10, checkpoint_every=1, batch_size=4,
                           mlp_width=8, mlp_depth=1)


def test_training_killed_and_resumed_ends_with_the_same_parameters(toy, tmp_path):
    arrays = dict(fp=toy.fp, atoms=toy.atoms, adj=toy.adj, atom_mask=toy.atom_mask)
    train = np.ones((2, toy.n), bool)
    train[0, :3] = False
    ts = KILL_TS
    key = jax.random.key(3)
    full, full_hist = Mo.train(key, "mlp", arrays, toy.y, train, ts)
    ck = tmp_path / "ck"
    # "killed" after 1 of 2 chunks: a run with steps=10 leaves its checkpoint behind
    Mo.train(key, "mlp", arrays, toy.y, train, ts._replace(steps=10), checkpoint_dir=ck)
    resumed, hist = Mo.train(key, "mlp", arrays, toy.y, train, ts, checkpoint_dir=ck)
    # the whole history comes back (chunk 1 from the checkpoint), equal to the unbroken run's
    assert [h["step"] for h in hist] == [1, 2]
    for a, b in zip(hist, full_hist, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    np.testing.assert_allclose(resumed, full, rtol=1e-6, atol=1e-6)
    assert np.all(np.isfinite(full)) and full.shape == (2, toy.n)


def _eight_vs_one(toy, kind):
    """The seeds trained on a mesh of the 8 simulated devices (2 seeds padded to 8) and
    on the default device: the same predictions and logged losses."""
    from jaxkit import distributed as jd

    arrays = dict(fp=toy.fp, atoms=toy.atoms, adj=toy.adj, atom_mask=toy.atom_mask)
    train = np.ones((2, toy.n), bool)
    train[0, :3] = False
    key = jax.random.key(3)
    one, h1 = Mo.train(key, kind, arrays, toy.y, train, KILL_TS)
    mesh = jd.make_mesh({"data": -1})
    assert mesh.devices.size == 8
    eight, h8 = Mo.train(key, kind, arrays, toy.y, train, KILL_TS, mesh=mesh)
    assert eight.shape == one.shape == (2, toy.n) and np.all(np.isfinite(eight))
    np.testing.assert_allclose(eight, one, rtol=1e-5, atol=1e-5)
    assert not np.allclose(one[0], one[1])  # the two seeds are different trainings
    for a, b in zip(h1, h8, strict=True):
        assert a["step"] == b["step"]
        for f in ("loss", "out"):  # the padding seeds add nothing to the loss
            assert a[f] == pytest.approx(b[f], rel=1e-5), f


def test_seeds_padded_and_split_over_the_mesh():
    """The pieces of the sharded training, without compiling one (the 8-vs-1 trainings
    are slow tests): seeds padded with copies of the last one, leaves with the seed axis
    split over the 8 devices there, the others replicated."""
    from jax.sharding import PartitionSpec

    from jaxkit import distributed as jd

    mesh = jd.make_mesh({"data": -1})
    tree = {"w": np.arange(6.0).reshape(3, 2), "count": np.zeros(())}
    pad, n = jd.pad_batch(tree, size=8)
    assert n == 3 and pad["count"] is tree["count"]  # no seed axis: unchanged
    np.testing.assert_array_equal(pad["w"][:3], tree["w"])
    np.testing.assert_array_equal(pad["w"][3:], np.broadcast_to([4.0, 5.0], (5, 2)))
    placed = jd.place_batch(pad, mesh, 8)
    assert placed["w"].sharding.spec == PartitionSpec("data", None)
    assert placed["count"].sharding.is_fully_replicated
    assert len(placed["w"].addressable_shards) == 8
    idx, _ = jd.pad_batch(np.arange(24).reshape(2, 3, 4), size=8, batch_axis=1)
    idx = jd.place_batch(idx, mesh, 8, batch_axis=1)
    assert idx.shape == (2, 8, 4) and idx.sharding.spec == PartitionSpec(None, "data", None)
    np.testing.assert_array_equal(np.asarray(idx)[:, 7], np.arange(24).reshape(2, 3, 4)[:, 2])
    assert jd.place_batch(tree, None, 8) is tree


@pytest.mark.slow  # one more compilation of the training chunk (about 3.5 s of CPU)
def test_mlp_training_on_eight_devices_equals_one(toy):
    # the one-device training is the kill test's (same shapes: compiled once)
    _eight_vs_one(toy, "mlp")


@pytest.mark.slow  # two more compilations (about 9 s of CPU)
def test_mpnn_training_on_eight_devices_equals_one(toy):
    _eight_vs_one(toy, "mpnn")


def test_mpnn_prediction_does_not_depend_on_padding(toy):
    key = jax.random.key(0)
    ts = Mo.TrainSettings(mpnn_width=8, mpnn_rounds=2)
    model = Mo.make_models("mpnn", jax.random.split(key, 1), 32, toy.atoms.shape[-1], ts)
    one = jax.tree.map(lambda a: a[0] if hasattr(a, "shape") else a, model)
    four = ["c1ccccc1O", "CCO", "CCN", "CCC"]
    big = F.featurise(four, [0.0] * 4, n_bits=32, max_atoms=20)
    small = F.featurise(four, [0.0] * 4, n_bits=32, max_atoms=7)
    fwd = jax.jit(lambda a, j, m: one({"atoms": a, "adj": j, "mask": m}))
    f = lambda d: float(fwd(d.atoms[0], d.adj[0], d.atom_mask[0]))  # noqa: E731
    assert f(big) == pytest.approx(f(small), rel=1e-5)


def test_cli_errors_are_one_line(tmp_path):
    from typer.testing import CliRunner

    from jaxkit.misaligned.cli import app

    p = tmp_path / "d.csv"
    p.write_text("smiles,y\nCCO,1\nC1CC,2\nCCN,x\n")
    run = lambda *a: CliRunner().invoke(app, ["audit", str(p), *a])  # noqa: E731
    r = run("--label-column", "dG")
    assert r.exit_code == 2 and "no column 'dG' (--label-column)" in r.output
    r = run()
    assert r.exit_code == 2 and "labels are not finite numbers: line 4 ('x')" in r.output
    p.write_text("smiles,y\nCCO,1\nC1CC,2\nCCN,3\nCCC,4\nCCCC,5\n")
    r = run()
    assert r.exit_code == 2 and "row 1 ('C1CC')" in r.output and "--skip-invalid" in r.output
    r = run("--split", "cluster")
    assert r.exit_code == 2 and "--split must be 'random' or 'scaffold'" in r.output


@pytest.mark.slow
def test_benchmark_quick_smoke(load_benchmark, tmp_path):
    bm = load_benchmark("misaligned")
    out = tmp_path / "b.json"
    bm.main(["--quick", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert {r["case"] for r in rows} >= {"family", "tanimoto"}
