"""AMGenC training through the one step and the one loop: a run killed mid-way resumes to
the same parameters, the mesh (batch split over "data", padded cells masked) changes
nothing but rounding, and the configuration is validated.

The default run covers kill-and-resume and the mesh on the tiny pipeline run's model
(tests/jaxkit/test_amgenc_pipeline.py, which shares its compiled step); the versions
here train their own model without a mesh and run under -m slow."""

import jax
import numpy as np
import pytest

from jaxkit.amgenc import data as D
from jaxkit.amgenc import train as T
from jaxkit.amgenc.config import FULL, QUICK, Config
from jaxkit.amgenc.model import Batch


@pytest.fixture(scope="module")
def tiny():
    cfg = QUICK.override(["n_train=3", "n_test=1", "relax_steps=40", "min_steps=10",
                          "hidden=8", "layers=1", "k_nbr=6", "train_steps=10", "batch=3",
                          "checkpoint_every=3"])
    return cfg, D.make_data(cfg, np.random.default_rng(0))


def _leaves(trained):
    import equinox as eqx

    return [np.asarray(v) for v in jax.tree.leaves(eqx.filter(trained.model, eqx.is_array))]


@pytest.mark.slow
def test_killed_training_resumes_to_identical_parameters(tiny, tmp_path, kill_batches):
    cfg, data = tiny
    key = jax.random.key(4)
    full = T.fit_denoiser(cfg, data, key)
    restore = kill_batches(T, at=7)
    with pytest.raises(kill_batches.Killed):
        T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path)
    restore()
    res = T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path)
    assert res.resumed_from == 6
    for a, b in zip(_leaves(res), _leaves(full), strict=True):
        np.testing.assert_array_equal(a, b)
    # the loss curve before the kill came back from the checkpoint
    np.testing.assert_array_equal(res.losses, full.losses)
    assert res.losses.shape == (cfg.train_steps,) and np.all(np.isfinite(res.losses))
    # a further run restores the final checkpoint and takes no step
    again = T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path)
    assert again.resumed_from == cfg.train_steps
    np.testing.assert_array_equal(_leaves(again)[0], _leaves(full)[0])
    # resume=False starts afresh in the same folder
    fresh = T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path, resume=False)
    assert fresh.resumed_from == 0
    # checkpoints of another configuration are refused
    other = cfg.override(["lr=0.01"])
    with pytest.raises(ValueError, match="another configuration"):
        T.fit_denoiser(other, data, key, checkpoint_dir=tmp_path)


@pytest.mark.slow
def test_mesh_splits_the_batch_and_matches_one_device(tiny):
    from jaxkit.distributed import make_mesh

    cfg, data = tiny
    key = jax.random.key(2)
    mesh = make_mesh()
    # 3 cells on 8 devices: 5 padded cells, masked out of the loss
    _, q = T.M.species_charges()
    norm = D.conditioning(data.train, q.size)
    cells = D.pad_cells(data.train, D.n_pad(data), q.size, norm)
    idx = T.batch_indices(key, 2, len(data.train), cfg.batch)
    b = T.make_batch_fn(cells, idx, mesh)(0)
    assert isinstance(b, Batch) and b.x.shape[0] == 8
    assert b.x.sharding.spec[0] == "data"
    assert np.asarray(b.mask[3:]).sum() == 0 and np.asarray(b.mask[:3]).any(axis=1).all()
    one = T.fit_denoiser(cfg.override(["train_steps=3"]), data, key)
    many = T.fit_denoiser(cfg.override(["train_steps=3"]), data, key, mesh=mesh)
    np.testing.assert_allclose(many.losses, one.losses, rtol=1e-5)
    for a, c in zip(_leaves(many), _leaves(one), strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-6)


def test_batch_indices_are_distinct_and_fixed_by_the_key():
    key = jax.random.key(0)
    idx = T.batch_indices(key, 5, 6, 4)
    assert idx.shape == (5, 4)
    assert all(len(set(r.tolist())) == 4 for r in idx)
    np.testing.assert_array_equal(idx[:3], T.batch_indices(key, 3, 6, 4))


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="`batch`"):
        Config(batch=0)
    with pytest.raises(ValueError, match="`n_atoms`"):
        QUICK.override(["n_atoms=50,120"])
    with pytest.raises(ValueError, match="`balanced_share`"):
        QUICK.override(["balanced_share=1.5"])
    with pytest.raises(ValueError, match="corrector_steps"):
        QUICK.override(["corrector_steps=-1"])
    assert QUICK.train_steps == 300 and QUICK.corrector_steps == 0


def test_scale_section_by_dotted_path(tmp_path):
    cfg = QUICK.override(["scale.cells=2", "scale.atoms=128"])
    assert (cfg.scale.cells, cfg.scale.atoms, cfg.scale.steps) == (2, 128, QUICK.scale.steps)
    toml = tmp_path / "c.toml"
    toml.write_text("[scale]\nruns = 3\n")
    assert Config.from_toml(toml, base=QUICK).scale.runs == 3
    assert FULL.scale.cells == 64 and FULL.scale.atoms == 800 and QUICK.scale.cells == 0
    with pytest.raises(ValueError, match=r"`scale\.atoms`"):
        QUICK.override(["scale.atoms=5000"])
    with pytest.raises(ValueError, match=r"`scale\.runs`"):
        QUICK.override(["scale.runs=0"])
    with pytest.raises(ValueError, match=r"did you mean scale\.cells"):
        QUICK.override(["scale_cells=2"])


def test_focus_draws_noise_levels_in_the_band():
    from jaxkit.amgenc import model as M

    t = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(M.sigma_time(M.sigma(t)), t, atol=1e-5)
    keys = jax.random.split(jax.random.key(0), 64)
    draw = jax.jit(jax.vmap(M.noise_time, in_axes=(0, None)))
    plain = np.asarray(draw(keys, 0.0))
    np.testing.assert_array_equal(plain, np.asarray(jax.vmap(
        lambda k: jax.random.uniform(k, ()))(keys)))
    s = np.asarray(M.sigma(draw(keys, 1.0)))
    assert np.all((s <= M.FOCUS_BAND[0] * 1.0001) & (s >= M.FOCUS_BAND[1] * 0.9999))
    half = np.asarray(M.sigma(draw(keys, 0.5)))
    inside = (half <= M.FOCUS_BAND[0]) & (half >= M.FOCUS_BAND[1])
    assert 0.55 < inside.mean() < 0.95  # half forced in, plus the uniform draws' own share
    with pytest.raises(ValueError, match="`focus_share`"):
        QUICK.override(["focus_share=1.5"])


def test_condition_carries_the_former_coordination_as_a_z_score():
    """Inverse design on properties: with ``condition_cn`` the condition vector ends with
    the z-score of the cell's network-former O coordination (a formerless cell at the
    training mean), and the model's condition width follows."""
    from jaxkit.amgenc.design import former_cn
    from jaxkit.amgenc.glass import ELEMENTS

    cfg = QUICK.override(["n_train=4", "n_test=1", "relax_steps=40", "min_steps=10"])
    data = D.make_data(cfg, np.random.default_rng(1))
    k = len(ELEMENTS)
    cn = np.array([former_cn(c.positions, c.box, c.elements) for c in data.train])
    assert np.all(np.isfinite(cn)) and cn.std() > 0
    norm = D.conditioning(data.train, k, cn=True)
    assert norm.with_cn and norm.cn_mean == pytest.approx(cn.mean())
    cond = D.condition(data.train, norm, k)
    assert cond.shape == (4, 2 + k)
    np.testing.assert_allclose(cond[:, -1], (cn - cn.mean()) / cn.std(), rtol=1e-5)
    np.testing.assert_allclose(cond[:, :-1], D.condition(
        data.train, D.conditioning(data.train, k), k), rtol=1e-6)
    # a cell without formers (all O atoms): NaN coordination, conditioned at the mean
    import dataclasses

    c0 = data.train[0]
    no_formers = dataclasses.replace(c0, elements=np.full_like(c0.elements,
                                                               ELEMENTS.index("O")))
    assert D.condition([no_formers], norm, k)[0, -1] == 0.0
    with pytest.raises(ValueError, match="condition_cn: no training cell"):
        D.conditioning([no_formers], k, cn=True)
    # the range check covers the new column, and old Norms (pickled without it) read False
    assert norm.lo.shape == norm.hi.shape == (2 + k,)
    assert not D.Norm(mean=0.0, std=1.0, lo=np.zeros(1), hi=np.ones(1)).with_cn
