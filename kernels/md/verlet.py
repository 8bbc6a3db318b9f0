"""Velocity-Verlet molecular dynamics with the Berendsen thermostat, in one ``lax.scan``.

One step of length ``dt`` (Swope et al., J. Chem. Phys. 76, 637, 1982):

``v += dt/2 F/m;  x += dt v (wrapped into the cell);  F = F(x);  v += dt/2 F/m``

then, when a target temperature ``T_k`` is given, the Berendsen weak coupling (Berendsen
et al., J. Chem. Phys. 81, 3684, 1984) rescales the velocities by
``lambda = sqrt(1 + dt/tau (T_k / T - 1))`` (clipped to [0.8, 1.25]), ``T`` the
instantaneous kinetic temperature ``2 K / (3 N kB)``. A melt-quench is one scan over a
schedule of target temperatures (hold at the melt, linear cooling, hold at the final
temperature); ``tau = inf`` (``nve``) leaves the dynamics microcanonical, which conserves
``K + E`` to ``O(dt^2)``.

A random packing of ions starts far above the glass's energy (eV per atom), which a
thermostat cannot remove as fast as the first steps release it; :func:`descend` (capped
steepest descent, ``x += clip(eta F, max_step)`` per atom) takes the packing down first.

Units: Angstrom, eV, atomic mass units, femtoseconds, kelvin. Padding atoms (mask
False) keep zero velocity and do not count in the temperature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["KB", "ACCEL", "MDState", "init_state", "kinetic_energy", "temperature", "run",
           "descend"]

#: Boltzmann constant, eV/K
KB = 8.617333262e-5
#: 1 eV / (A amu) in A / fs^2
ACCEL = 9.64853321e-3


class MDState(NamedTuple):
    """Positions (N, 3) A, velocities (N, 3) A/fs, forces (N, 3) eV/A, potential energy
    (eV)."""

    pos: jax.Array
    vel: jax.Array
    force: jax.Array
    energy: jax.Array


def kinetic_energy(vel: jax.Array, masses: jax.Array) -> jax.Array:
    """``K = sum m v^2 / 2`` in eV.

    Args:
        vel: (N, 3) velocities (A/fs).
        masses: (N,) masses (amu), zero for padding.

    Returns:
        The scalar kinetic energy.

    Differentiable: yes, in vel and masses.
    """
    return 0.5 * jnp.sum(masses[:, None] * vel * vel) / ACCEL


def temperature(vel: jax.Array, masses: jax.Array, mask: jax.Array) -> jax.Array:
    """Kinetic temperature ``2 K / (3 N kB)`` (K) over the ``N`` masked atoms.

    Args:
        vel: (N, 3) velocities (A/fs).
        masses: (N,) masses (amu), zero for padding.
        mask: (N,) bool, real atoms.

    Returns:
        The scalar temperature.

    Differentiable: yes, in vel and masses.
    """
    n = jnp.maximum(jnp.sum(mask), 1)
    return 2.0 * kinetic_energy(vel, masses) / (3.0 * n * KB)


def init_state(key: jax.Array, pos: jax.Array, masses: jax.Array, mask: jax.Array,
               temp: float | jax.Array,
               force_fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]]) -> MDState:
    """Maxwell-Boltzmann velocities at ``temp`` (net momentum removed), forces and energy.

    Args:
        key: PRNG key of the velocities.
        pos: (N, 3) positions (A).
        masses: (N,) masses (amu); any positive value for padding atoms.
        mask: (N,) bool, real atoms.
        temp: initial temperature (K).
        force_fn: ``x -> (forces, energy)``.

    Returns:
        The :class:`MDState`.

    Differentiable: no: it draws random velocities (differentiate the energy instead).
    """
    m = jnp.where(mask, masses, 1.0).astype(pos.dtype)
    sd = jnp.sqrt(KB * temp * ACCEL / m)[:, None]
    v = jax.random.normal(key, pos.shape, pos.dtype) * sd * mask[:, None]
    p = jnp.sum(m[:, None] * v, axis=0) / jnp.maximum(jnp.sum(m * mask), 1e-12)
    v = (v - p) * mask[:, None]
    f, e = force_fn(pos)
    return MDState(pos, v, f, e)


def run(state: MDState, box: jax.Array | float, masses: jax.Array, mask: jax.Array,
        force_fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]], temps: jax.Array,
        *, dt: float = 1.0, tau: float = 100.0) -> tuple[MDState, dict]:
    """``len(temps)`` velocity-Verlet steps, each followed by a Berendsen rescaling
    towards ``temps[k]`` (``tau = jnp.inf``: none, NVE).

    Args:
        state: the starting :class:`MDState` (from :func:`init_state`).
        box: cubic edge (A); positions are wrapped into [0, box).
        masses: (N,) masses (amu).
        mask: (N,) bool, real atoms.
        force_fn: ``x -> (forces, energy)``, e.g. a closure over
            :func:`jaxkit.kernels.md.pair.forces`.
        temps: (S,) target temperature of every step (K).
        dt: time step (fs).
        tau: thermostat coupling time (fs).

    Returns:
        ``(final state, trace)``; the trace holds the per-step ``potential``,
        ``kinetic`` (eV) and ``temperature`` (K), each (S,).

    Differentiable: no: not supported (the wrap into the cell and the thermostat's
    clipped rescaling make trajectory gradients piecewise and chaotic over long runs).
    """
    dtype = state.pos.dtype
    box = jnp.asarray(box, dtype)
    mk = mask[:, None].astype(dtype)
    inv_m = jnp.where(mask, ACCEL / jnp.where(mask, masses, 1.0), 0.0).astype(dtype)[:, None]
    m = jnp.where(mask, masses, 0.0).astype(dtype)
    coupling = jnp.asarray(dt / tau, dtype)

    def step(s: MDState, target):
        v = s.vel + 0.5 * dt * s.force * inv_m
        x = jnp.mod(s.pos + dt * v * mk, box)
        f, e = force_fn(x)
        v = v + 0.5 * dt * f * inv_m
        t = temperature(v, m, mask)
        lam = jnp.sqrt(jnp.clip(1.0 + coupling * (target / jnp.maximum(t, 1e-6) - 1.0),
                                0.64, 1.5625))
        v = v * lam
        ke = kinetic_energy(v, m)
        return MDState(x, v, f, e), (e, ke, t)

    out, (pot, kin, tt) = jax.lax.scan(step, state, jnp.asarray(temps, dtype))
    return out, {"potential": pot, "kinetic": kin, "temperature": tt}


def descend(pos: jax.Array, box: jax.Array | float, mask: jax.Array,
            force_fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]], steps: int,
            *, eta: float = 0.01, max_step: float = 0.05) -> jax.Array:
    """``steps`` capped steepest-descent steps ``x += clip(eta F(x), max_step)`` (each
    atom's displacement at most ``max_step`` A), wrapped into the cell.

    Args:
        pos: (N, 3) positions (A).
        box: cubic edge (A).
        mask: (N,) bool, real atoms (padding does not move).
        force_fn: ``x -> (forces, energy)``.
        steps: number of steps (static).
        eta: step per unit force (A^2/eV).
        max_step: cap on one atom's displacement per step (A).

    Returns:
        (N, 3) positions.

    Differentiable: no: not supported (capped steps and the wrap into the cell).
    """
    box = jnp.asarray(box, pos.dtype)
    mk = mask[:, None].astype(pos.dtype)

    def step(x, _):
        d = eta * force_fn(x)[0]
        norm = jnp.sqrt(jnp.sum(d * d, axis=-1, keepdims=True))
        d = d * jnp.minimum(1.0, max_step / jnp.maximum(norm, 1e-12))
        return jnp.mod(x + d * mk, box), None

    return jax.lax.scan(step, pos, None, length=steps)[0]
