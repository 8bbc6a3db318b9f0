"""AMGenC at 100-800 atoms: the relaxations' neighbour list gives the dense forces (and
falls back to the dense sum when it overflows), training draws each step's cells within
one size bucket as a fixed function of the key and the step (a killed run resumes to
the same parameters), and the sampler's timing batch and size groups."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.amgenc import glass
from jaxkit.amgenc import potential as P
from jaxkit.amgenc import sample as S
from jaxkit.amgenc import train as T
from jaxkit.amgenc.config import QUICK
from jaxkit.amgenc.data import Data


def _cell(rng, n, relaxed=False):
    """A cell of about ``n`` atoms of the multi recipe: its random packing (no
    melt-quench), positions in [0, box)."""
    counts = glass.draw_composition(rng, "multi", n)
    el = glass._elements_from_counts(counts)
    rho = glass.additive_density(counts)
    box = float((glass.MASS[el].sum() / glass._AVOGADRO / rho) ** (1 / 3) * 1e8)
    pos = glass._random_packing(rng, len(el), box)
    return glass.Cell(el, pos, box, counts, {"density": rho})


def _padded(cell, size):
    n = cell.n_atoms
    pos = np.zeros((size, 3))
    pos[:n] = cell.positions
    el = np.full(size, P._O, np.int32)
    el[:n] = cell.elements
    return pos, el, np.arange(size) < n


def test_neighbour_list_forces_equal_the_dense_forces_until_the_rebuild():
    """float64: the list built at x0 gives the dense gradient at positions moved by up to
    the rebuild interval's worth of capped steps (every atom by _REBUILD * MAX_STEP), and
    the padding atoms get none."""
    rng = np.random.default_rng(3)
    cell = _cell(rng, 300)
    size = P.padded_size(cell.n_atoms)
    pos, el, mask = _padded(cell, size)
    with jax.enable_x64(True):
        x0, box = jnp.asarray(pos), jnp.asarray(cell.box)
        el, mask = jnp.asarray(el), jnp.asarray(mask)
        params = P._pair_params(el, mask, jnp.float64)
        idx, valid, count = P._build_list(x0, box, params[0], P.LIST_CAPACITY)
        assert 0 < int(count) <= P.LIST_CAPACITY
        step = rng.normal(size=pos.shape)
        step *= 0.999 * P._REBUILD * P.MAX_STEP / np.linalg.norm(step, axis=1, keepdims=True)
        x1 = jnp.mod(x0 + jnp.asarray(step) * mask[:, None], box)
        dense = jax.grad(P._energy)(x1, box, params)
        listed = P._list_grad(x1, box, el, (idx, valid))
        np.testing.assert_allclose(np.asarray(listed), np.asarray(dense), rtol=1e-9,
                                   atol=1e-9)
        assert float(jnp.max(jnp.abs(dense))) > 1.0  # a test with forces in it
        assert np.all(np.asarray(listed)[~np.asarray(mask)] == 0)


def test_relaxation_with_the_list_matches_the_dense_one_and_overflow_falls_back(
        monkeypatch):
    rng = np.random.default_rng(4)
    cell = _cell(rng, 280)
    size = P.padded_size(cell.n_atoms)
    assert P.list_capacity(size) > 0  # this size uses the list
    pos, el, mask = _padded(cell, size)
    args = (jnp.asarray(pos, jnp.float32), jnp.float32(cell.box), jnp.asarray(el),
            jnp.asarray(mask), jax.random.key(0))
    kw = dict(n_hold=20, n_quench=30, n_min=25)
    dense, e_dense, _ = P._relax_jit(*args, **kw, capacity=0)
    listed, e_list, count = P._relax_jit(*args, **kw, capacity=P.LIST_CAPACITY)
    assert 0 < int(count) <= P.LIST_CAPACITY
    # the same forces up to float32 rounding: the same relaxed cell
    np.testing.assert_allclose(float(e_list), float(e_dense), rtol=1e-4)
    d = np.asarray(listed) - np.asarray(dense)
    d -= cell.box * np.round(d / cell.box)
    assert np.abs(d[mask]).max() < 1e-2
    # a list too small for the cell: the relaxation is the dense one
    monkeypatch.setattr(P, "LIST_CAPACITY", 16)
    assert P.list_capacity(size) == 16
    out, energy = P._relax_padded(*args, **kw)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(dense))
    assert float(energy) == float(e_dense)


def test_bucket_indices_draw_within_one_bucket_as_a_fixed_function_of_the_step():
    key = jax.random.key(7)
    n_atoms = [110, 120, 200, 230, 250, 700, 790, 800, 760]  # buckets 128, 256, 768, 800
    sizes = np.array([P.padded_size(n) for n in n_atoms])
    buckets, idx = T.bucket_indices(key, 400, n_atoms, 3)
    assert idx.shape == (400, 3)
    for z, row in zip(buckets, idx, strict=True):
        real = row[row >= 0]
        assert real.size == min(3, int((sizes == z).sum()))
        assert len(set(real.tolist())) == real.size and np.all(sizes[real] == z)
    # a fixed function of the key and the step: a longer run starts with the same steps
    b2, i2 = T.bucket_indices(key, 100, n_atoms, 3)
    np.testing.assert_array_equal(b2, buckets[:100])
    np.testing.assert_array_equal(i2, idx[:100])
    # buckets drawn in proportion to their atoms
    weight = {z: sum(n for n, s in zip(n_atoms, sizes, strict=True) if s == z)
              for z in np.unique(sizes)}
    total = sum(weight.values())
    for z, w in weight.items():
        assert abs(np.mean(buckets == z) - w / total) < 0.08
    # one bucket: exactly the unbucketed draws
    one = [100, 110, 120, 128, 105]
    b1, i1 = T.bucket_indices(key, 50, one, 3)
    assert np.all(b1 == 128)
    np.testing.assert_array_equal(i1, T.batch_indices(key, 50, len(one), 3))


def _leaves(trained):
    import equinox as eqx

    return [np.asarray(v) for v in jax.tree.leaves(eqx.filter(trained.model, eqx.is_array))]


def test_bucketed_training_killed_resumes_to_identical_parameters(tmp_path, kill_batches):
    rng = np.random.default_rng(5)
    cells = [_cell(rng, n) for n in (100, 110, 200, 220, 240)]  # buckets 128 and 256
    assert len({P.padded_size(c.n_atoms) for c in cells}) == 2
    data = Data(train=cells, test=cells[:1], twins=cells[:1])
    cfg = QUICK.override(["hidden=8", "layers=1", "k_nbr=6", "train_steps=10", "batch=2",
                          "checkpoint_every=3"])
    key = jax.random.key(4)
    buckets, _ = T.bucket_indices(jax.random.split(key, 3)[1], cfg.train_steps,
                                  [c.n_atoms for c in cells], cfg.batch)
    assert len(set(buckets.tolist())) == 2  # the run steps through both buckets
    full = T.fit_denoiser(cfg, data, key)
    assert np.all(np.isfinite(full.losses)) and full.n_pad == 256
    restore = kill_batches(T, at=7)
    with pytest.raises(kill_batches.Killed):
        T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path)
    restore()
    res = T.fit_denoiser(cfg, data, key, checkpoint_dir=tmp_path)
    assert res.resumed_from == 6
    for a, b in zip(_leaves(res), _leaves(full), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res.losses, full.losses)


def test_timing_batch_is_a_window_around_the_median_size_and_groups_are_buckets():
    rng = np.random.default_rng(6)
    cells = [glass.Cell(np.zeros(n, int), np.zeros((n, 3)), 10.0, np.zeros(1), {})
             for n in rng.permutation([100, 150, 200, 300, 400, 500, 600, 700, 800])]
    idx = S.timing_indices(cells, 3)
    assert sorted(cells[i].n_atoms for i in idx) == [300, 400, 500]
    assert len(S.timing_indices(cells, 20)) == len(cells)
    groups = S.size_groups(cells)
    assert [z for z, _ in groups] == [128, 256, 384, 512, 640, 768, 800]
    assert sorted(np.concatenate([g for _, g in groups]).tolist()) == list(range(9))
    for z, g in groups:
        assert all(P.padded_size(cells[i].n_atoms) == z for i in g)
