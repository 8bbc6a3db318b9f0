"""AMGenC's independent judge (jaxkit.amgenc.judge, issue 64 part 2) on tiny cells: its
energies are kernels.md's, its relaxation is kernels.md's FIRE and lowers the judged
energy of a jittered silica structure, the pressure rounds pull a stretched cell back,
and the judge is never the potential that made the data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import md

from jaxkit.amgenc import judge as J
from jaxkit.amgenc.melt_quench import pedone_table
from jaxkit.amgenc.tables import ELEMENTS

SI, OX = ELEMENTS.index("Si"), ELEMENTS.index("O")
A = 7.16  # A, cubic beta-cristobalite


def cristobalite(reps=(1, 1, 1), jitter=0.1, seed=0):
    """Idealised beta-cristobalite (Si on a diamond lattice, O at the bond midpoints):
    8 Si + 16 O per cubic cell of edge :data:`A`, repeated ``reps`` times (an
    orthorhombic box when the repeats differ), jittered by ``jitter`` A."""
    fcc = np.array([[0, 0, 0], [0, .5, .5], [.5, 0, .5], [.5, .5, 0]])
    si = np.concatenate([fcc, fcc + 0.25])
    # each Si of the first sublattice bonds to four of the second, O at the midpoints
    dirs = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) * 0.125
    ox = np.concatenate([fcc + d for d in dirs])
    cell = np.concatenate([si, ox]) % 1.0
    el = np.r_[np.full(8, SI), np.full(16, OX)]
    shifts = np.stack(np.meshgrid(*[np.arange(r) for r in reps], indexing="ij"),
                      -1).reshape(-1, 3)
    pos = np.concatenate([(cell + s) * A for s in shifts])
    el = np.tile(el, len(shifts))
    pos += np.random.default_rng(seed).normal(0, jitter, pos.shape)
    box = A * np.asarray(reps, float)
    return np.mod(pos, box), box, el


def test_judged_energy_is_kernels_md_energy_per_atom():
    pos, box, el = cristobalite(jitter=0.05)
    table = pedone_table(0.5 * A, 0.5 * A)
    ref = jax.jit(md.energy)(jnp.asarray(pos, jnp.float32), jnp.float32(A), jnp.asarray(el),
                             jnp.ones(len(el), bool), table)
    got = J.judged_energy("pedone", pos, A, el)
    np.testing.assert_allclose(got, float(ref) / len(el), rtol=1e-5)
    # the same on an orthorhombic box of two cells: the same energy per atom as one
    pos2, box2, el2 = cristobalite((2, 1, 1), jitter=0.0)
    one = J.judged_energy("pedone", *cristobalite(jitter=0.0))
    np.testing.assert_allclose(J.judged_energy("pedone", pos2, box2, el2), one, rtol=1e-4)
    assert -30.0 < one < -5.0  # eV per atom: a bound ionic solid, not overlapping atoms


def test_judge_relaxation_is_kernels_md_fire_and_lowers_the_energy():
    pos, box, el = cristobalite((2, 1, 1), jitter=0.15, seed=1)
    res = J.judge_cells("pedone", [(pos, box, el)], steps=150)
    assert res.judged.tolist() == [True]
    assert res.e_after[0] < res.e_before[0] - 0.01  # the relaxation lowers it
    # the same positions by calling kernels.md's FIRE directly
    table = pedone_table(0.5 * A, 0.5 * A)
    n = len(el)
    size = 128
    x = np.full((size, 3), 0.5 * A, np.float32)
    x[:n] = pos
    e = np.full(size, OX, np.int32)
    e[:n] = el
    m = np.arange(size) < n
    b = jnp.asarray(box, jnp.float32)
    ff = lambda p: md.forces(p, b, jnp.asarray(e), jnp.asarray(m), table)  # noqa: E731
    xr, er = jax.jit(lambda p: md.fire(p, b, jnp.asarray(m), ff, 150))(jnp.asarray(x))
    np.testing.assert_allclose(res.relaxed[0], np.asarray(xr)[:n], atol=2e-3)
    np.testing.assert_allclose(res.e_after[0], float(er) / n, rtol=1e-4)
    # Si keeps four O within 2 A after the relaxation
    d = res.relaxed[0][el == SI][:, None] - res.relaxed[0][el == OX][None]
    d -= box * np.rint(d / box)
    assert np.all(((np.sqrt((d * d).sum(-1)) < 2.0).sum(1)) == 4)


def test_pressure_rounds_pull_a_stretched_cell_back_and_unjudgeable_cells_are_nan():
    pos, box, el = cristobalite(jitter=0.05)
    ref = J.judge_cells("pedone", [(pos, A, el)], steps=100)
    stretched = (pos * 1.06, A * 1.06, el)
    b_ = ELEMENTS.index("B")
    boron = (pos, A, np.where(np.arange(len(el)) == 0, b_, el))
    res = J.judge_cells("pedone", [stretched, boron], steps=100, rounds=4,
                        p_target=np.array([ref.pressure[0], 0.0]))
    edge = float(res.at_pressure[0][1][0])
    assert abs(edge - A) < abs(1.06 * A - A)  # moved towards the target's box
    assert res.judged.tolist() == [True, False]
    assert np.isnan(res.e_before[1]) and res.relaxed[1] is None
    assert np.isfinite(res.density(0, el)) and np.isnan(res.density(1, el))


def test_the_judge_never_made_the_data():
    for (dataset, kind), made in J.MADE_BY.items():
        name = J.judge_name(dataset, kind)
        assert name != made and name in J.JUDGES
    assert J.judge_name("published", "silica") == "pedone"
    assert J.judge_name("recipe", "silica") == "bks"
    assert J.judge_name("recipe", "multi") == "pedone+teter"
    assert J.judge_name("published", "multi") == "teter"
    with pytest.raises(ValueError, match="judge: 'bks' made"):
        J.judge_name("published", "silica", "bks")
    with pytest.raises(ValueError, match="holds 'pedone', which made"):
        J.judge_name("published", "multi", "pedone+teter")  # Pedone, one of its members
    with pytest.raises(ValueError, match="judge: must be"):
        J.judge_name("recipe", "multi", "chgnet")
    assert not J.judgeable("bks", np.array([SI, OX, ELEMENTS.index("Na")]))
    assert J.judgeable("pedone", np.array([SI, OX, ELEMENTS.index("Na")]))


def test_the_toy_potential_as_judge_of_published_multi_cells():
    # Pedone made the published multi cells; the toy potential may judge them (cubic only)
    from jaxkit.amgenc import design
    from jaxkit.amgenc import potential as P

    assert J.judge_name("published", "multi", "recipe") == "recipe"
    pos, box, el = cristobalite(jitter=0.1, seed=2)
    res = J.judge_cells("recipe", [(pos, A, el)], steps=100)
    ref = float(P.pair_energy(jnp.asarray(pos, jnp.float32), A, jnp.asarray(el),
                              jnp.ones(len(el), bool)))
    np.testing.assert_allclose(res.e_before[0], ref / len(el), rtol=1e-4)
    assert res.e_after[0] < res.e_before[0]
    np.testing.assert_allclose(res.pressure[0], design.pressure(res.relaxed[0], A, el),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(ValueError, match="cubic cells only"):
        J.judge_cells("recipe", [cristobalite((2, 1, 1))], steps=1)
