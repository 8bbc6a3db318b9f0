"""jaxkit.kernels.md: closed-form forces and virial against jax.grad of the energy
(float64), energy conservation of NVE velocity Verlet, the Berendsen thermostat and the
capped descent."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import md

BOX = 12.0


def _table(all_terms: bool) -> md.PairTable:
    """Two species (0: cation +2.4, 1: anion -1.2). ``all_terms``: every short-range term
    on for every pair (so each closed-form derivative is checked); otherwise BKS-like
    values (Buckingham + 30-6 wall, van Beest et al. 1990)."""
    def sym(v):
        v = np.asarray(v, float)
        return jnp.asarray(v + v.T - np.diag(np.diag(v)))
    z = jnp.zeros((2, 2))
    if all_terms:
        return md.PairTable(jnp.array([2.4, -1.2]), sym([[50.0, 900.0], [0, 1300.0]]),
                            sym([[3.0, 4.5], [0, 2.8]]), sym([[5.0, 30.0], [0, 60.0]]),
                            sym([[0.1, 0.34], [0, 0.04]]), sym([[2.0, 2.0], [0, 1.4]]),
                            sym([[2.5, 2.1], [0, 3.6]]), sym([[1.0, 1.0], [0, 22.0]]),
                            sym([[1e-3, 3e-3], [0, 1.2e-3]]), sym([[0.4, 1.3], [0, 1.8]]),
                            5.5, 6.0, 0.2)
    return md.PairTable(jnp.array([2.4, -1.2]), sym([[0.0, 18003.7572], [0, 1388.773]]),
                        sym([[0.0, 4.87318], [0, 2.76]]), sym([[0.0, 133.5381], [0, 175.0]]),
                        z, z, z, z, sym([[1.277e-3, 3e-3], [0, 1.2e-3]]),
                        sym([[0.4, 1.313], [0, 1.779]]), 5.5, 6.0, 0.2)


def _cell(n_cat=16, pad=4, seed=0):
    """Cations and twice as many anions on a jittered simple-cubic lattice (no close
    pairs), plus ``pad`` padding atoms (mask False)."""
    n = 3 * n_cat
    g = np.stack(np.meshgrid(*[np.arange(5)] * 3, indexing="ij"), -1).reshape(-1, 3)
    rng = np.random.default_rng(seed)
    pos = g[rng.permutation(len(g))[:n]] * (BOX / 5) + rng.normal(0, 0.15, (n, 3))
    pos = np.concatenate([np.mod(pos, BOX), np.full((pad, 3), 1.0)])
    species = np.r_[np.zeros(n_cat, int), np.ones(2 * n_cat + pad, int)]
    mask = np.arange(n + pad) < n
    return jnp.asarray(pos), jnp.asarray(species), jnp.asarray(mask)


@pytest.mark.parametrize("all_terms", [True, False])
def test_closed_form_forces_and_virial_equal_jax_grad_in_float64(all_terms):
    table = _table(all_terms)
    pos, species, mask = _cell()
    assert pos.dtype == jnp.float64
    f, e = jax.jit(md.forces)(pos, BOX, species, mask, table)
    e_ref = jax.jit(md.energy)(pos, BOX, species, mask, table)
    g = jax.jit(jax.grad(md.energy))(pos, BOX, species, mask, table)
    np.testing.assert_allclose(e, e_ref, rtol=1e-12)
    np.testing.assert_allclose(f, -g, rtol=1e-9, atol=1e-9)
    assert float(jnp.abs(f).max()) > 0.1  # the check is not of zeros
    assert np.all(np.asarray(f)[~np.asarray(mask)] == 0.0)  # padding feels nothing
    # the pair derivative itself, at distances around every term's range
    r = jnp.linspace(0.9, 5.9, 41)
    for a, b in ((0, 0), (0, 1), (1, 1)):
        si, sj = jnp.full(r.shape, a), jnp.full(r.shape, b)
        _, de = md.pair_terms(r, si, sj, table)
        de_ref = jax.jit(jax.vmap(jax.grad(
            lambda x, i, j: md.pair_terms(x, i, j, table)[0])))(r, si, sj)
        np.testing.assert_allclose(de, de_ref, rtol=1e-9, atol=1e-9)
    # continuity at both cutoffs: energy and force go to zero
    e_c, de_c = md.pair_terms(jnp.array([6.0 - 1e-7]), jnp.array([0]), jnp.array([1]), table)
    assert abs(float(e_c[0])) < 1e-5 and abs(float(de_c[0])) < 1e-5
    # virial = -3 V dE/dV under a uniform scaling of the cell (cutoffs fixed)
    w = jax.jit(md.virial)(pos, BOX, species, mask, table)
    de_ds = jax.jit(jax.grad(lambda s: md.energy(pos * s, BOX * s, species, mask, table)))(1.0)
    np.testing.assert_allclose(w, -de_ds, rtol=1e-9)


def _equilibrated(table, temp, seed=0):
    pos, species, mask = _cell(pad=0, seed=seed)
    masses = jnp.where(species == 0, 28.085, 15.999)

    def force_fn(x):
        return md.forces(x, BOX, species, mask, table)

    pos = md.descend(pos, BOX, mask, force_fn, 200)
    state = md.init_state(jax.random.key(seed), pos, masses, mask, temp, force_fn)
    return state, masses, mask, force_fn


def test_nve_velocity_verlet_conserves_energy_over_300_steps():
    table = _table(False)
    state, masses, mask, force_fn = _equilibrated(table, 1500.0)
    e0 = state.energy + md.kinetic_energy(state.vel, masses)
    temps = jnp.zeros(300)
    run = jax.jit(lambda s, dt: md.run(s, BOX, masses, mask, force_fn, temps, dt=dt,
                                       tau=jnp.inf), static_argnums=1)
    out, trace = run(state, 1.0)
    total = trace["potential"] + trace["kinetic"]
    drift = float(jnp.max(jnp.abs(total - e0)))
    k_mean = float(trace["kinetic"].mean())
    assert k_mean > 1.0  # the atoms really move (about 1500 K)
    assert drift < 2e-3 * k_mean, (drift, k_mean)
    # halving the step shrinks the error about fourfold (second order), the net
    # momentum stays zero
    _, trace2 = run(state, 0.5)
    drift2 = float(jnp.max(jnp.abs(trace2["potential"][:300] + trace2["kinetic"][:300]
                                   - e0)))
    assert drift2 < 0.5 * drift
    p = jnp.sum(masses[:, None] * out.vel, axis=0)
    assert float(jnp.abs(p).max()) < 1e-8


def test_berendsen_reaches_the_target_and_descend_lowers_the_energy():
    table = _table(False)
    pos, species, mask = _cell(pad=0)

    def force_fn(x):
        return md.forces(x, BOX, species, mask, table)

    e_start = float(force_fn(pos)[1])
    down = md.descend(pos, BOX, mask, force_fn, 100)
    assert float(force_fn(down)[1]) < e_start - 1.0
    state, masses, mask, force_fn = _equilibrated(table, 3000.0)
    out, trace = jax.jit(lambda s: md.run(s, BOX, masses, mask, force_fn,
                                          jnp.full(1500, 800.0), dt=1.0, tau=20.0))(state)
    t_end = float(trace["temperature"][-500:].mean())
    assert float(trace["temperature"][:20].mean()) > 1500.0  # it started hot
    assert abs(t_end - 800.0) < 80.0, t_end
    assert float(md.temperature(out.vel, masses, mask)) > 0
