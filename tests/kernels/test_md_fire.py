"""jaxkit.kernels.md: FIRE minimisation (lowers the energy below capped steepest descent's,
keeps padding still, eager = jit = vmap) and the orthorhombic minimum image (equal to the
cubic one on a cubic box, forces = -grad on a stretched box, and a tiling check)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxkit.kernels import md

from .test_md import BOX, _cell, _table


def _force_fn(table, species, mask, box=BOX):
    return lambda x: md.forces(x, box, species, mask, table)


def test_fire_lowers_the_energy_more_than_descend_and_keeps_padding_still():
    table = _table(False)
    pos, species, mask = _cell(pad=4, seed=1)
    ff = _force_fn(table, species, mask)
    e0 = float(ff(pos)[1])
    x, e = jax.jit(lambda p: md.fire(p, BOX, mask, ff, 300))(pos)
    x_sd = jax.jit(lambda p: md.descend(p, BOX, mask, ff, 300))(pos)
    e_sd = float(ff(x_sd)[1])
    assert float(e) < e0 - 1.0
    assert float(e) < e_sd  # a better minimiser than capped steepest descent
    np.testing.assert_allclose(float(e), float(ff(x)[1]), rtol=1e-12)  # energy at x
    pad = ~np.asarray(mask)
    np.testing.assert_array_equal(np.asarray(x)[pad], np.asarray(pos)[pad])
    # near a minimum: the largest force is small compared with the start
    f_end = float(jnp.abs(ff(x)[0]).max())
    assert f_end < 0.2 * float(jnp.abs(ff(pos)[0]).max())
    assert np.all((np.asarray(x) >= 0) & (np.asarray(x) < BOX))


def test_fire_eager_jit_and_vmap_agree():
    table = _table(False)
    cells = [_cell(pad=2, seed=s) for s in (0, 2)]
    species, mask = cells[0][1], cells[0][2]
    ff = _force_fn(table, species, mask)
    run = lambda p: md.fire(p, BOX, mask, ff, 20)  # noqa: E731
    pos = jnp.stack([c[0] for c in cells])
    with jax.disable_jit(False):
        eager = [run(p) for p in pos[:1]]
    jitted = [jax.jit(run)(p) for p in pos]
    vm = jax.jit(jax.vmap(run))(pos)
    np.testing.assert_allclose(eager[0][0], jitted[0][0], rtol=1e-9, atol=1e-9)
    for i in range(2):
        np.testing.assert_allclose(vm[0][i], jitted[i][0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(vm[1][i], jitted[i][1], rtol=1e-9)


def test_orthorhombic_minimum_image():
    table = _table(True)
    pos, species, mask = _cell(pad=0)
    energy = jax.jit(md.energy)
    e_cubic = energy(pos, BOX, species, mask, table)
    e_three = energy(pos, jnp.full(3, BOX), species, mask, table)
    np.testing.assert_allclose(e_three, e_cubic, rtol=1e-12)
    # a box stretched along z: forces are -grad in float64
    box = jnp.array([BOX, BOX, 1.5 * BOX])
    f, e = jax.jit(md.forces)(pos, box, species, mask, table)
    g = jax.jit(jax.grad(md.energy))(pos, box, species, mask, table)
    np.testing.assert_allclose(f, -g, rtol=1e-9, atol=1e-9)
    assert abs(float(e) - float(e_cubic)) > 1e-3  # the stretch is seen
    # two copies of the cell stacked along x in a (2L, L, L) box: twice the energy
    two = jnp.concatenate([pos, pos + jnp.array([BOX, 0.0, 0.0])])
    sp2 = jnp.concatenate([species, species])
    m2 = jnp.concatenate([mask, mask])
    e2 = energy(two, jnp.array([2 * BOX, BOX, BOX]), sp2, m2, table)
    np.testing.assert_allclose(e2, 2 * e_cubic, rtol=1e-9)
