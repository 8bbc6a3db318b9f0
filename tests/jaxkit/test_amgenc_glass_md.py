"""AMGenC glasses from published potentials (jaxkit.amgenc.melt_quench): a tiny BKS silica
and a Pedone sodium-silicate cell quenched fast, checked against the published structure
figures of the module docstring's table, and the ``dataset="published"`` option of the
data stage."""

from __future__ import annotations

import numpy as np
import pytest

from jaxkit.amgenc import data, melt_quench
from jaxkit.amgenc.config import FULL, QUICK, Config
from jaxkit.amgenc.tables import ELEMENTS, OXIDE_NAMES, OXIDES

FAST = melt_quench.Protocol(steps=3000)  # 3 ps: seconds on a CPU


def _counts(**units):
    c = np.zeros(len(OXIDES), np.int64)
    for name, k in units.items():
        c[OXIDE_NAMES.index(name)] = k
    return c


def test_tiny_bks_silica_has_the_published_short_range_structure():
    cell = melt_quench.cell_from_counts(_counts(SiO2=34), seed=3, protocol=FAST)
    s = melt_quench.structure_summary(cell)
    assert cell.n_atoms == 102
    assert 1.55 <= s["si_o_peak"] <= 1.68, s  # published 1.608-1.62 A
    assert 1.55 <= s["si_o_bond"] <= 1.68, s
    assert 3.8 <= s["si_cn"] <= 4.3, s  # published 4
    assert 104.0 <= s["o_si_o"] <= 114.0, s  # published 109.5 deg
    assert 125.0 <= s["si_o_si_peak"] <= 170.0, s  # published 144-150 deg (few angles here)
    assert abs(s["density"] - 2.20) < 0.01  # fixed volume at the a-SiO2 density
    assert abs(cell.properties["pressure_gpa"]) < 10.0
    assert cell.properties["min_distance"] > 1.2  # no fused atoms after a 5000 K melt
    assert -19.0 < cell.properties["energy_per_atom"] < -17.0  # eV, BKS glass ~ -18


def test_tiny_pedone_sodium_silicate_keeps_silicon_tetrahedral():
    cell = melt_quench.cell_from_counts(_counts(SiO2=30, Na2O=8), seed=1, protocol=FAST)
    s = melt_quench.structure_summary(cell)
    assert 1.55 <= s["si_o_peak"] <= 1.68, s
    assert 3.8 <= s["si_cn"] <= 4.3, s
    assert 104.0 <= s["o_si_o"] <= 114.0, s
    na = cell.elements == ELEMENTS.index("Na")
    ox = cell.elements == ELEMENTS.index("O")
    d = cell.positions[na][:, None] - cell.positions[ox][None]
    d -= cell.box * np.rint(d / cell.box)
    r = np.sqrt((d * d).sum(-1))
    assert 2.1 <= float(np.median(r.min(1))) <= 2.6  # Na-O nearest, published ~2.3-2.4 A


def test_published_dataset_is_the_default_of_the_data_stage():
    assert Config().dataset == QUICK.dataset == FULL.dataset == "published"
    cfg = Config(kind="silica", other_kinds=(), dataset="published", n_train=1, n_test=1,
                 n_atoms=(100, 110), md_steps=400)
    d = data.make_data(cfg, np.random.default_rng(0))
    assert len(d.train) == len(d.test) == len(d.twins) == 1
    for c in d.train + d.test + d.twins:
        assert set(np.unique(c.elements)) == {ELEMENTS.index("Si"), ELEMENTS.index("O")}
        assert "pressure_gpa" in c.properties  # made by the MD stage, not the recipe
    assert d.twins[0] is not d.test[0]
    np.testing.assert_array_equal(d.twins[0].oxide_counts, d.test[0].oxide_counts)
    multi = melt_quench.generate("multi", 2, rng=np.random.default_rng(1),
                                 n_atoms=(100, 120), protocol=melt_quench.Protocol(steps=8))
    for c in multi:
        assert melt_quench.supports(c.oxide_counts)
        assert c.oxide_counts[OXIDE_NAMES.index("SiO2")] > 0
        assert c.oxide_counts[[OXIDE_NAMES.index(m) for m in melt_quench._MODIFIERS]].sum() > 0


def test_bad_input_fails_with_one_line_naming_it():
    with pytest.raises(ValueError, match="dataset"):
        Config(dataset="silica-md")
    with pytest.raises(ValueError, match="md_steps"):
        Config(md_steps=2)
    assert not melt_quench.supports(_counts(SiO2=30, B2O3=5))
    b = ELEMENTS.index("B")
    with pytest.raises(ValueError, match="elements: no Pedone parameters for \\['B'\\]"):
        melt_quench.melt_quench(np.zeros((3, 3)), 10.0, np.array([b, 0, 13]))
    with pytest.raises(ValueError, match="positions"):
        melt_quench.melt_quench(np.zeros((2, 3)), 10.0, np.array([0, 13, 13]))
    with pytest.raises(ValueError, match="counts"):
        melt_quench.cell_from_counts(np.ones(3))
    with pytest.raises(ValueError, match="n_cells"):
        melt_quench.generate("silica", 0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("make", [melt_quench.bks_table, melt_quench.pedone_table])
def test_published_tables_forces_equal_jax_grad_in_float64(make):
    import jax
    from jaxkit.kernels import md

    names = ("Si", "O") if make is melt_quench.bks_table else ("Si", "Na", "Ca", "Al", "O")
    rng = np.random.default_rng(0)
    box = 11.0
    g = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = g[rng.permutation(64)[:30]] * (box / 4) + rng.normal(0, 0.2, (30, 3))
    species = np.array([ELEMENTS.index(names[i % len(names)]) for i in range(30)])
    table = make(5.5, 5.5)
    mask = np.ones(30, bool)
    f, e = jax.jit(md.forces)(pos, box, species, mask, table)
    grad = jax.jit(jax.grad(md.energy))(pos, box, species, mask, table)
    assert f.dtype == np.float64
    np.testing.assert_allclose(f, -grad, rtol=1e-9, atol=1e-9)
    q = np.asarray(table.charge)
    assert all(abs(q[ELEMENTS.index(n)]) > 0 for n in names)  # every species is charged
    np.testing.assert_array_equal(np.asarray(table.buck_a), np.asarray(table.buck_a).T)
    np.testing.assert_array_equal(np.asarray(table.morse_d), np.asarray(table.morse_d).T)
