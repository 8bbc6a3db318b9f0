"""AMGenC model and pipeline: symmetries of the periodic graph denoiser (rotations of the
displacements, cubic lattice symmetries, atom permutations, lattice and periodic
translations), padding independence, exact charge balance with the final discrete
projection, a tiny pipeline run on an 8-device mesh with its table, claims and
extended-XYZ output, and resume.

Test time: one tiny pipeline run (module fixture ``tiny_run``) is shared by the
pipeline, resume, kill-and-resume, mesh, projection and soft-projection tests; they reuse
its data, its checkpoints and its compiled programs (the training step and the one
sampler of :func:`jaxkit.amgenc.sample.sample_cells`, whose mechanisms are traced), so
they add almost no compilation."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from jaxkit.amgenc import model as M
from jaxkit.registry import RunContext

K = len(M.species_charges()[1])
N = 24
N_REAL = 20
BOX = 6.0


# jitted once each (eager calls would compile every primitive of the network apart)
_init = eqx.filter_jit(lambda key: M.Denoiser(K, 3, key=key, hidden=16, layers=2, k_nbr=8))
_core = eqx.filter_jit(lambda net, h, disp, idx, valid, mask, t, cond: net.core(
    h, disp, idx, valid, mask, t, cond))
_net = eqx.filter_jit(lambda net, x, h, mask, cond, t: net(x, h, mask, BOX, cond, t))
_nbrs = jax.jit(M.neighbours, static_argnums=3)


@pytest.fixture(scope="module")
def setup():
    _, q = M.species_charges()
    net = _init(jax.random.key(0))
    k1, k2 = jax.random.split(jax.random.key(1))
    x = jax.random.uniform(k1, (N, 3))
    h = jax.random.normal(k2, (N, K))
    mask = jnp.arange(N) < N_REAL
    cond = jnp.array([0.3, -0.1, 0.5])
    return net, q, x, h, mask, cond


def _call(net, x, h, mask, cond, t=0.4):
    return _net(net, x, h, mask, cond, jnp.float32(t))


def test_species_match_glass():
    names, q = M.species_charges()
    assert names[0] == "Si4+" and names[-1] == "O2-" and q.tolist()[-1] == -2


def test_rotation_of_displacements_equivariant(setup):
    net, _, x, h, mask, cond = setup
    idx, disp, valid = _nbrs(x, BOX, mask, net.k_nbr)
    t = jnp.float32(0.3)
    vec, hv = _core(net, h, disp, idx, valid, mask, t, cond)
    rot = jnp.asarray(Rotation.random(random_state=3).as_matrix(), jnp.float32)
    vec_r, hv_r = _core(net, h, disp @ rot.T, idx, valid, mask, t, cond)
    np.testing.assert_allclose(vec_r, vec @ rot.T, atol=1e-5)
    np.testing.assert_allclose(hv_r, hv, atol=1e-5)
    # reflections too (E(3))
    vec_m, hv_m = _core(net, h, -disp, idx, valid, mask, t, cond)
    np.testing.assert_allclose(vec_m, -vec, atol=1e-5)
    np.testing.assert_allclose(hv_m, hv, atol=1e-5)


def test_cubic_symmetry_of_full_model(setup):
    net, _, x, h, mask, cond = setup
    # an axis permutation with a sign flip maps the cubic torus onto itself
    r = jnp.array([[0.0, 1, 0], [0, 0, -1], [1, 0, 0]])
    vx, vh = _call(net, x, h, mask, cond)
    vx2, vh2 = _call(net, jnp.mod(x @ r.T, 1.0), h, mask, cond)
    np.testing.assert_allclose(vx2, vx @ r.T, atol=1e-5)
    np.testing.assert_allclose(vh2, vh, atol=1e-5)


def test_translations_invariant(setup):
    net, _, x, h, mask, cond = setup
    vx, vh = _call(net, x, h, mask, cond)
    for shift in (jnp.array([1.0, 0.0, -2.0]), jnp.array([0.37, 0.81, 0.05])):
        vx2, vh2 = _call(net, jnp.mod(x + shift, 1.0), h, mask, cond)
        np.testing.assert_allclose(vx2, vx, atol=1e-5)
        np.testing.assert_allclose(vh2, vh, atol=1e-5)


def test_permutation_equivariant(setup):
    net, _, x, h, mask, cond = setup
    perm = np.random.default_rng(0).permutation(N)
    vx, vh = _call(net, x, h, mask, cond)
    vx2, vh2 = _call(net, x[perm], h[perm], mask[perm], cond)
    np.testing.assert_allclose(vx2, vx[perm], atol=1e-5)
    np.testing.assert_allclose(vh2, vh[perm], atol=1e-5)


def test_padding_does_not_affect_real_atoms(setup):
    net, _, x, h, mask, cond = setup
    vx, vh = _call(net, x, h, mask, cond)
    x2 = x.at[N_REAL:].set(jax.random.uniform(jax.random.key(9), (N - N_REAL, 3)))
    h2 = h.at[N_REAL:].set(100.0)
    vx2, vh2 = _call(net, x2, h2, mask, cond)
    np.testing.assert_allclose(vx2[:N_REAL], vx[:N_REAL], atol=1e-6)
    np.testing.assert_allclose(vh2[:N_REAL], vh[:N_REAL], atol=1e-6)
    assert np.all(np.asarray(vx2[N_REAL:]) == 0) and np.all(np.asarray(vh2[N_REAL:]) == 0)


def test_balanced_noise_start_is_balanced(setup):
    net, q, _, _, mask, cond = setup
    # mechanism 1: the initial element noise has zero total charge, padding rows zero
    from jaxkit.amgenc.model import _element_noise

    h0 = jax.jit(_element_noise, static_argnums=3)(jax.random.key(3), mask,
                                                   jnp.asarray(q, jnp.float32), True)
    assert abs(float(jnp.sum(h0 @ jnp.asarray(q, jnp.float32)))) < 1e-3
    assert np.all(np.asarray(h0[~mask]) == 0)


def read_xyz(path):
    """Tiny extended-XYZ reader: list of (symbols, positions, lattice (3, 3))."""
    lines = path.read_text().splitlines()
    frames, i = [], 0
    while i < len(lines):
        n = int(lines[i])
        header = lines[i + 1]
        assert "Properties=species:S:1:pos:R:3" in header
        lat = header.split('Lattice="')[1].split('"')[0]
        lattice = np.array(lat.split(), float).reshape(3, 3)
        rows = [ln.split() for ln in lines[i + 2:i + 2 + n]]
        assert all(len(r) == 4 for r in rows)
        frames.append(([r[0] for r in rows], np.array([r[1:] for r in rows], float), lattice))
        i += 2 + n
    return frames


def _tiny(kinds=""):
    """The tiny configuration: every padded shape of the run is (8 cells, 128 atoms), so
    the sampler of the ablation, of the 800-atom stage (here 128 atoms) and of the tests
    below is one compiled program, and the discrete projection another."""
    from jaxkit.amgenc.config import QUICK

    extra = [f"other_kinds={kinds}"] if kinds else []
    return QUICK.override(extra + TINY_SETS)


TINY_SETS = ["n_train=4", "n_test=2", "relax_steps=60", "min_steps=20", "hidden=16",
             "layers=1", "train_steps=15", "batch=4", "checkpoint_every=5",
             "samples_per_target=1", "sample_steps=4", "pressure_steps=5", "timing_runs=2",
             "scale.atoms=128", "scale.cells=2", "scale.steps=4", "post_relax_steps=150",
             "judge_steps=20", "judge_rounds=1", "min_cells=2", "md_steps=300"]


class Run(NamedTuple):
    cfg: object
    mesh: object
    ctx: RunContext
    res: object
    out: object


def _run(out, kinds=""):
    from jaxkit.amgenc import pipeline
    from jaxkit.distributed import make_mesh

    tiny, mesh = _tiny(kinds), make_mesh()
    ctx = RunContext(out_dir=out, config=tiny, quick=True, mesh=mesh)
    return Run(tiny, mesh, ctx, pipeline.run(ctx), out)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("amgenc"))


def _checkpoint_dir(run):
    """The training checkpoints of the pipeline run ``run`` (pipeline.py's folder)."""
    return run.out / "checkpoints" / "train" / f"{run.cfg.digest()[:16]}-seed{run.ctx.seed}"


@pytest.fixture(scope="module")
def tiny_data(tiny_run):
    """The run's data and trained model, reloaded from its stage and final checkpoint."""
    from jaxkit.amgenc import train as T

    ctx = RunContext(out_dir=tiny_run.out, config=tiny_run.cfg, quick=True,
                     mesh=tiny_run.mesh)
    data = ctx.stage("amgenc-data", lambda: pytest.fail("the data stage was not saved"))
    trained = T.fit_denoiser(tiny_run.cfg, data, ctx.key("train"), mesh=tiny_run.mesh,
                             checkpoint_dir=_checkpoint_dir(tiny_run))
    assert trained.resumed_from == tiny_run.cfg.train_steps  # restored, no step taken
    return data, trained, ctx.key("train")


def test_tiny_pipeline_and_resume(tiny_run):
    _check_run(tiny_run, "")


@pytest.mark.slow  # the second dataset doubles the run
def test_tiny_pipeline_two_datasets(tmp_path):
    _check_run(_run(tmp_path, "silica"), "silica")


def _check_run(run, kinds):
    from jaxkit import registry
    from jaxkit.amgenc import glass, pipeline
    from jaxkit.amgenc.sample import ARMS, BASELINE_ARM, COMPOSITION_ARM
    from jaxkit.claims import VERDICTS

    assert registry.get("amgenc").module == "jaxkit.amgenc.pipeline"
    tiny, mesh, ctx, res, tmp_path = run.cfg, run.mesh, run.ctx, run.res, run.out
    assert ctx.reloaded == []
    assert res.metrics["train_resumed_from"] == 0
    md = res.markdown
    for name, *_ in ARMS:
        assert f"| {name} |" in md
    assert "balanced" in md and "RDF L1" in md
    arms = res.metrics["arms"]
    assert arms["final discrete only"]["balanced"] == 1.0
    assert arms["all three (AMGenC)"]["balanced"] == 1.0
    # the fixed-composition arm meets each target's element counts exactly
    comp = arms[COMPOSITION_ARM]
    assert comp["balanced"] == 1.0 and comp["composition_l1"] == pytest.approx(0, abs=1e-12)
    assert f"| {COMPOSITION_ARM} |" in md
    assert res.metrics["claim_ok"] and not res.warnings
    # claims: three paper rows over every dataset and the same-model design row, then
    # each dataset's setup and extension rows (with the two property-steering rows of
    # the inverse design); the exact balance (an extension row: structural) holds; known
    # verdicts only
    assert len(res.claims) == 4 + 10 * (1 + bool(kinds))
    steer = [c for c in res.claims if "Inverse design on properties" in c.claim]  # [silica]
    assert len(steer) == 2 * (1 + bool(kinds)) and {c.kind for c in steer} == {"extension"}
    assert [c.kind for c in res.claims[:4]] == ["paper"] * 3 + ["extension"]
    assert {c.kind for c in res.claims[3:]} == {"setup", "extension"}
    assert "inverse-design accuracy" in res.claims[0].claim
    # the paper's unconstrained baseline is the separately trained (AMDEN-style) model;
    # the same model's arm "none" is the extension row that isolates the mechanisms
    assert "separately trained" in res.claims[0].note
    assert "same model" in res.claims[3].claim and "arm none" in res.claims[3].note
    assert res.metrics["baseline_train_seconds"] > 0
    assert np.isfinite(res.metrics["baseline_final_loss"])
    assert arms[BASELINE_ARM]["n_cells"] == arms["none"]["n_cells"]
    # the same keys through another network: other cells than the model's own none arm
    assert arms[BASELINE_ARM]["rdf_l1"] != arms["none"]["rdf_l1"]
    assert f"| {BASELINE_ARM} |" in md
    assert (tmp_path / "checkpoints" / "baseline").is_dir()
    assert "overhead" in res.claims[1].claim and "under whatever load" in res.claims[1].note
    # the existing methods are run and decide the third paper row
    assert "existing method" in res.claims[2].claim and res.claims[2].verdict != "not tested"
    assert "`mitigate_share`" in res.claims[2].test
    # the design row is scored by the independent judge, which did not make the data
    # (the default data: Pedone-made glasses, judged by Teter)
    assert "scored by: multi: teter:" in res.claims[0].note
    jd = res.metrics["judge"]
    assert jd["name"] == "teter" and jd["made_by"] == "pedone"
    assert {"twin", "none", "balanced noise only", "all three (AMGenC)", BASELINE_ARM,
            "post-hoc repair (fewest species changes)", "uniform random positions"
            } == set(jd["rows"])
    assert "relaxation used for scoring" in md and "Independent judge" in md
    assert set(res.metrics["methods"]) == {"rejection sampling",
                                           "oxidation-state filter (SMACT-like)",
                                           "post-hoc repair (fewest species changes)"}
    assert res.metrics["methods"]["post-hoc repair (fewest species changes)"]["balanced"] == 1
    rewritten = [c.claim for c in res.claims]
    assert any("after the same relaxation" in c for c in rewritten)
    assert any("charge left out of validity" in c for c in rewritten)
    exact = [c for c in res.claims if "every generated cell is exactly" in c.claim]
    assert len(exact) == 1 + bool(kinds) and all(c.verdict == "yes" for c in exact)
    assert all(c.kind == "extension" for c in exact)
    assert ("Holm over 3 errors x 2 datasets" if kinds else "Holm over 3 errors x 1 dataset"
            ) in res.claims[0].test
    sil = res.metrics["datasets"].get("silica")
    if kinds:  # the second dataset: its own section, claims, metrics and files
        assert all(c.claim.startswith("[silica] ") for c in res.claims[4 + 10:])
        assert "silica" in res.claims[0].measured
        assert sil["kind"] == "silica" and sil["arms"]["final discrete only"]["balanced"] == 1
        assert "### Dataset `silica`" in md
    else:
        assert sil is None and "### Dataset" not in md
    # plausibility against the twins, design accuracy per arm, overhead intervals, scale
    pl = res.metrics["plausibility"]
    assert {"twin", "uniform random", "none", "all three (AMGenC)"} <= set(pl)
    assert all(v == pytest.approx(1.0) for v in pl["twin"]["ratio"].values())
    assert pl["uniform random"]["no_close_pair"] == 0.0
    for arm in ("none", "soft only", "final discrete only", "all three (AMGenC)", "twin"):
        d = res.metrics["design"][arm]
        assert np.isfinite(d["density_error"]) and d["composition_l1"] >= 0
    assert res.metrics["design"]["twin"]["composition_l1"] == 0
    ov = res.metrics["overhead"]
    assert len(ov["soft_runs"]) == 2 and ov["soft_ci"][0] <= ov["soft_ci"][1]
    sc = res.metrics["scale"]
    assert sc["cells"] == 2 and sc["atoms"] == 128 and sc["cells_per_second"] > 0
    assert sc["balanced"] in (0.0, 0.5, 1.0) and "cells per second" in md
    assert "no pair < 1 A" in md and "density error (relaxed" in md
    assert all(c.verdict in VERDICTS and c.paper == "AMGenC" for c in res.claims)
    # FIRE post-relaxation keeps species (balance) and removes close pairs
    gen, rel = arms["all three (AMGenC)"], arms["all three (AMGenC) + FIRE relaxation"]
    assert rel["balanced"] == 1.0 and rel["composition_l1"] == gen["composition_l1"]
    assert rel["close_pairs"] <= gen["close_pairs"] and rel["close_pairs"] == 0
    assert "O-T-O angle L1" in md and "Property conditioning" in md
    for name in ("all three (AMGenC)", "none"):
        c = res.metrics["conditioning"][name]
        assert c["own"] == pytest.approx(arms[name]["composition_l1"])
        assert np.isfinite(c["other"])
    assert all(p.is_file() for p in res.figures)
    files = sorted(tmp_path.glob("amgenc_*.xyz"))
    n_sil = len(list(tmp_path.glob("amgenc_silica_*.xyz")))
    assert n_sil == (7 if kinds else 0) and len(files) == 7 + n_sil
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files
    _, q = M.species_charges()
    charge_of = dict(zip(glass.ELEMENTS, q.tolist(), strict=True))
    outside = set(res.metrics["baselines"]["outside_targets"])
    for f in files:
        frames = read_xyz(f)
        assert len(frames) == 2
        # every frame says whether its target lies outside the training range
        flags = [ln.split("extrapolated=")[1][0] for ln in f.read_text().splitlines()
                 if "extrapolated=" in ln]
        out_set = set(sil["baselines"]["outside_targets"]) if "silica" in f.name else outside
        assert flags == [str(int(t in out_set)) for t in range(2)]
        for symbols, pos, lat in frames:
            box = lat[0, 0]
            assert np.allclose(lat, box * np.eye(3))
            assert np.all((pos >= 0) & (pos <= box + 1e-5))
            if ("discrete" in f.name or "all_three" in f.name) and "Fe" not in symbols:
                assert sum(charge_of[s] for s in symbols) == 0
            elif "discrete" in f.name or "all_three" in f.name:
                # XYZ says only "Fe": some choice of Fe2+/Fe3+ must balance the cell
                from jaxkit.amgenc.userdata import assign_species

                assign_species(symbols, f.name)
        # the CIF twin holds the same cells (read back with ase)
        from ase.io import read

        cif = read(f.with_suffix(".cif"), index=":")
        assert len(cif) == len(frames)
        for atoms, (symbols, pos, lat) in zip(cif, frames, strict=True):
            assert atoms.get_chemical_symbols() == symbols
            assert np.allclose(atoms.cell.lengths(), np.diag(lat), atol=1e-4)
            assert np.allclose(atoms.get_scaled_positions(wrap=True) * lat[0, 0] % lat[0, 0],
                               pos % lat[0, 0], atol=1e-3)

    # a second run reloads the stages and restores the final checkpoint (no step runs)
    ctx2 = RunContext(out_dir=tmp_path, config=tiny, quick=True, mesh=mesh)
    res2 = pipeline.run(ctx2)
    assert ctx2.reloaded == ["amgenc-data", "amgenc-samples", "amgenc-relaxed",
                             "amgenc-judge", "amgenc-scale"] + [
        "amgenc-data-silica", "amgenc-samples-silica", "amgenc-relaxed-silica",
        "amgenc-judge-silica"] * bool(kinds)
    assert res2.metrics["train_resumed_from"] == tiny.train_steps
    assert res2.metrics["final_loss"] == res.metrics["final_loss"]
    assert res2.metrics["baseline_final_loss"] == res.metrics["baseline_final_loss"]
    assert res2.metrics["arms"]["none"]["balanced"] == arms["none"]["balanced"]
    assert [c.verdict for c in res2.claims] == [c.verdict for c in res.claims]


# ------------------------------------------------- tests on the tiny run's model and data


def _leaves(trained):
    import equinox as eqx

    model = getattr(trained, "model", trained)
    return [np.asarray(v) for v in jax.tree.leaves(eqx.filter(model, eqx.is_array))]


def test_killed_training_resumes_to_identical_parameters(tiny_run, tiny_data, tmp_path,
                                                         kill_batches):
    """Kill the tiny run's training at step 7 (checkpoints every 5) in a folder that holds
    the finished run's checkpoints, with ``resume=False``: the folder is emptied and the
    training starts afresh (it reaches step 7, where a restored run would take no step);
    the next run resumes from step 5 (the old checkpoints are gone) and ends with the
    parameters and loss curve of the pipeline's uninterrupted training (its compiled
    step, its mesh)."""
    import shutil

    from jaxkit.amgenc import train as T

    cfg, mesh = tiny_run.cfg, tiny_run.mesh
    data, full, key = tiny_data
    assert np.all(np.isfinite(full.losses)) and full.losses.shape == (cfg.train_steps,)
    # training moved the parameters away from the initialisation, and they are finite
    init = T.skeleton(cfg, full.norm.lo.size, jax.random.split(key, 3)[0])
    assert any(not np.allclose(a, b) for a, b in zip(_leaves(full), _leaves(init),
                                                      strict=True))
    assert all(np.all(np.isfinite(a)) for a in _leaves(full))
    ckpt = tmp_path / "ck"
    shutil.copytree(_checkpoint_dir(tiny_run), ckpt)  # the finished run's checkpoints
    restore = kill_batches(T, at=7)
    with pytest.raises(kill_batches.Killed):  # resume=False: afresh, not restored at 15
        T.fit_denoiser(cfg, data, key, mesh=mesh, checkpoint_dir=ckpt, resume=False)
    restore()
    res = T.fit_denoiser(cfg, data, key, mesh=mesh, checkpoint_dir=ckpt)
    assert res.resumed_from == 5
    for a, b in zip(_leaves(res), _leaves(full), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res.losses, full.losses)  # the curve came back too
    # checkpoints of another configuration are refused
    with pytest.raises(ValueError, match="another configuration"):
        T.fit_denoiser(cfg.override(["lr=0.01"]), data, key, checkpoint_dir=ckpt)


def test_mesh_splits_the_batch_and_padded_cells_add_nothing(tiny_run, tiny_data):
    """The batch of the pipeline's first training step on the mesh: 4 cells padded to 8
    and split over "data", the padded cells' masks all False; the loss that step
    recorded (the padded batch, sharded, in the pipeline's compiled step) equals the loss
    of the 4 cells alone on one device (padding keeps the real cells' keys). Training on
    the mesh against one device (a second compilation of the step) runs under -m slow in
    test_amgenc_train."""
    from jaxkit import distributed
    from jaxkit.amgenc import data as D
    from jaxkit.amgenc import train as T

    cfg, mesh = tiny_run.cfg, tiny_run.mesh
    data, trained, key = tiny_data
    _, q = M.species_charges()
    k_init, k_batch, k_step = jax.random.split(key, 3)  # fit_denoiser's keys
    cells = D.pad_cells(data.train, D.n_pad(data), q.size, trained.norm)
    idx = T.batch_indices(k_batch, cfg.train_steps, len(data.train), cfg.batch)
    b = T.make_batch_fn(cells, idx, mesh)(0)
    assert isinstance(b, M.Batch) and b.x.shape[0] == 8
    assert b.x.sharding.spec[0] == "data"
    assert np.asarray(b.mask[4:]).sum() == 0 and np.asarray(b.mask[:4]).any(axis=1).all()
    real = M.Batch(*(a[:4] for a in jax.device_get(b)))
    init = T.skeleton(cfg, cells.cond.shape[1], k_init)  # the parameters of step 0
    loss = eqx.filter_jit(lambda net, batch, k: M.loss(
        net, batch, k, q, balanced_share=cfg.balanced_share, augment_cells=cfg.augment,
        focus_share=cfg.focus_share))
    np.testing.assert_allclose(float(loss(init, real, jax.random.fold_in(k_step, 0))),
                               trained.losses[0], rtol=1e-5)
    assert distributed.mesh_size(mesh) == 8


def _cells(tiny_run, tiny_data, n_real):
    """8 cells of the run's padded shape, conditioned on its targets, with ``n_real``
    real atoms each (different paddings)."""
    from jaxkit.amgenc.data import pad_cells

    data, trained, _ = tiny_data
    _, q = M.species_charges()
    batch = pad_cells([data.test[i % 2] for i in range(8)], trained.n_pad, q.size,
                      trained.norm)
    mask = jnp.stack([jnp.arange(trained.n_pad) < n for n in n_real])
    return trained.model, mask, jnp.asarray(batch.box), jnp.asarray(batch.cond), q


def _sample(tiny_run, net, key, mask, box, cond, *, balanced, eta, target="endpoint"):
    from jaxkit.amgenc.sample import sample_cells

    cfg = tiny_run.cfg
    keys = jax.random.split(key, mask.shape[0])
    return sample_cells(net, keys, mask, box, cond, balanced=balanced, soft_eta=eta,
                        steps=cfg.sample_steps, corrector_steps=cfg.corrector_steps,
                        snr=cfg.snr, soft_target=target, mesh=tiny_run.mesh)


@pytest.mark.parametrize("target", ["endpoint", pytest.param("state", marks=pytest.mark.slow)])
def test_final_projection_balances_every_cell(tiny_run, tiny_data, target):
    from jaxkit.amgenc.sample import project_cells

    n_real = (100, 101, 110, 117, 121, 125, 127, 128)
    net, masks, box, cond, q = _cells(tiny_run, tiny_data, n_real)
    for balanced, eta in ((False, 0.0), (True, 1.0), (False, 0.5)):
        x, h = _sample(tiny_run, net, jax.random.key(5), masks, box, cond,
                       balanced=balanced, eta=eta, target=target)
        assert np.all((np.asarray(x) >= 0) & (np.asarray(x) < 1))
        res = project_cells(-jnp.log(M.probabilities(h)), masks, tiny_run.mesh)
        sp = np.asarray(res.assignment)
        assert np.asarray(res.feasible).all()
        for i in range(len(n_real)):
            m = np.asarray(masks[i])
            assert np.all(sp[i][m] >= 0) and np.all(sp[i][~m] == -1)
            assert int(q[sp[i][m]].sum()) == 0


def test_soft_projection_reduces_probability_charge(tiny_run, tiny_data):
    net, masks, box, cond, q = _cells(tiny_run, tiny_data, (128,) * 8)

    def charge_of(eta):
        _, h = _sample(tiny_run, net, jax.random.key(7), masks, box, cond, balanced=False,
                       eta=eta)
        p = np.asarray(M.probabilities(h))
        return np.abs(p @ q).sum(-1).mean()

    # a barely trained net: the endpoint is far from the simplex, so only a partial
    # reduction is asked for
    assert charge_of(1.0) < 0.8 * charge_of(0.0)


def _size_probe():
    """benchmarks/amgenc_size_probe.py (not a package), imported by path."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "amgenc_size_probe.py"
    spec = importlib.util.spec_from_file_location("jaxkit_amgenc_size_probe_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_size_probe_close_atoms_by_hand():
    """Minimum image: atoms 0 and 1 are 0.5 A apart across the boundary of a 10 A cell,
    atom 2 is 3 A from both; atom 3 is 1.0 A from atom 2 (not under 1 A)."""
    probe = _size_probe()
    pos = np.array([[0.2, 5.0, 5.0], [9.7, 5.0, 5.0], [3.2, 5.0, 5.0], [3.2, 6.0, 5.0]])
    assert probe._close_atoms(pos, 10.0) == 2
    assert probe._close_atoms(pos, 10.0, r_min=1.01) == 4
    assert probe._close_atoms(pos[2:], 10.0) == 0


def test_size_probe_on_the_tiny_run(tiny_run, tiny_data, tmp_path, capsys):
    """The probe reloads the run's data stage and finished checkpoint (no retraining),
    samples 8 cells of 128 atoms and reports rates consistent with each other; a
    configuration without a saved data stage is refused before anything is computed."""
    probe = _size_probe()
    sets = [a for s in TINY_SETS for a in ("--set", s)]
    out = tmp_path / "probe.json"
    assert probe.main([str(tiny_run.out), "--quick", *sets, "--sizes", "128", "--cells", "8",
                       "--steps", "3", "--corrector", "1", "--json", str(out)]) == 0
    import json

    (row,) = json.loads(out.read_text())
    assert (row["atoms"], row["cells"], row["steps"], row["corrector"]) == (128, 8, 3, 1)
    assert 0.0 <= row["atom_rate"] <= 1.0 and 0.0 <= row["no_close_pair"] <= 1.0
    assert row["independent"] == pytest.approx((1 - row["atom_rate"]) ** 128)
    # close atoms come in pairs: every cell with a close pair has at least two of them
    assert row["atom_rate"] * 128 >= 2 * (1 - row["no_close_pair"]) - 1e-9
    assert (row["atom_rate"] == 0) == (row["no_close_pair"] == 1)
    printed = capsys.readouterr().out
    assert "| 128 |" in printed and "3 levels, corrector 1 at snr 0.3" in printed
    with pytest.raises(SystemExit, match="no data stage"):
        probe.main([str(tiny_run.out), "--quick", *sets, "--set", "n_train=5"])


def test_design_claim_non_inferiority_by_hand():
    """Paper claim 1 on hand-made per-cell errors: equal errors are non-inferior ("yes"),
    errors well above the margins are a "no", a small noisy excess is "not shown", and a
    NaN coordination (a cell without formers) drops that cell's pair only."""
    from types import SimpleNamespace

    from jaxkit.amgenc import report
    from jaxkit.amgenc.config import QUICK
    from jaxkit.amgenc.results import DesignAccuracy, DesignCells
    from jaxkit.amgenc.sample import AMGENC_ARM

    rng = np.random.default_rng(0)
    base = {p: 0.2 + 0.05 * rng.random(40) for p in report.DESIGN_PROPERTIES}
    base["former_cn_error"][3] = np.nan

    def claim(am, datasets=("multi",)):
        ev = SimpleNamespace(design={
            k: DesignAccuracy.from_cells(DesignCells(**errors))
            for k, errors in (("none", base), (AMGENC_ARM, am))})
        c = report.design_claim(QUICK, [(k, ev) for k in datasets])
        assert c.paper == "AMGenC" and c.kind == "paper"
        return c

    assert claim({p: v.copy() for p, v in base.items()}).verdict == "yes"
    assert claim({p: v + 0.2 for p, v in base.items()}).verdict == "no"
    m = QUICK.margin_density
    noisy = {p: v + m + 0.5 * rng.standard_normal(40) for p, v in base.items()}
    assert claim(noisy).verdict == "not shown"
    c = claim(base, ("multi", "silica"))
    assert "Holm over 3 errors x 2 datasets" in c.test
    assert [s.rsplit("n=", 1)[1] for s in c.measured.split("; ")] == ["40)", "40)", "39)"] * 2
    assert "after Holm: multi relative density error yes" in c.note
