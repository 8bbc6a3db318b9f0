"""FIRE energy minimisation (Bitzek, Koskinen, Gaehler, Moseler and Gumbsch, PRL 97,
170201, 2006) of a periodic cell, in one ``lax.scan``.

With unit masses, per step (``F`` the force, ``v`` the velocity, ``P = F . v``):

``v <- (1 - a) v + a |v| F / |F|``; if ``P > 0`` for more than ``n_delay`` steps in a
row, ``dt <- min(f_inc dt, dt_max)`` and ``a <- f_a a``; if ``P <= 0``, ``v <- 0``,
``dt <- f_dec dt``, ``a <- a0``; then ``v <- v + dt F`` and ``x <- x + cap(dt v)``,
each atom's displacement capped at ``max_step`` A and the result wrapped into the cell.

Where :func:`jaxkit.kernels.md.descend` (capped steepest descent) takes a random packing
down from eV per atom above the glass, FIRE is the minimiser of a structure that is
already near a basin: the relaxation before scoring a generated cell with a potential.
The box may be a cubic edge or three orthorhombic edges (the wrap is per axis); the
forces are whatever ``force_fn`` computes. Units: Angstrom, eV.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["fire"]


def fire(pos: jax.Array, box: jax.Array | float, mask: jax.Array,
         force_fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]], steps: int, *,
         dt0: float = 0.02, dt_max: float = 0.1, n_delay: int = 5, f_inc: float = 1.1,
         f_dec: float = 0.5, a0: float = 0.1, f_a: float = 0.99,
         max_step: float = 0.1) -> tuple[jax.Array, jax.Array]:
    """``steps`` FIRE steps from ``pos`` (module docstring), padding atoms held still.

    Args:
        pos: (N, 3) positions (A).
        box: cubic edge (A), or (3,) orthorhombic edges.
        mask: (N,) bool, real atoms.
        force_fn: ``x -> (forces (N, 3), energy)``, e.g. a closure over
            :func:`jaxkit.kernels.md.forces`.
        steps: number of steps (static).
        dt0, dt_max: initial and largest time step (unit masses).
        n_delay: positive-power steps before the time step may grow.
        f_inc, f_dec: growth and cut of the time step.
        a0, f_a: initial mixing and its decay.
        max_step: cap on one atom's displacement per step (A).

    Returns:
        ``(positions (N, 3) in the cell, energy at them)``.

    Differentiable: no: not supported (the branches on ``P`` and the wrap make the path
    piecewise; differentiate the energy at the minimum instead).
    """
    dtype = pos.dtype
    box = jnp.asarray(box, dtype)
    mk = mask[:, None].astype(dtype)

    def step(state, _):
        x, v, f, dt, a, n_pos = state
        p = jnp.sum(f * v)
        fn = jnp.sqrt(jnp.sum(f * f)) + 1e-12
        vn = jnp.sqrt(jnp.sum(v * v))
        v = (1.0 - a) * v + a * vn * f / fn
        up = p > 0
        n_pos = jnp.where(up, n_pos + 1, 0)
        grow = up & (n_pos > n_delay)
        dt = jnp.where(grow, jnp.minimum(dt * f_inc, dt_max), jnp.where(up, dt, dt * f_dec))
        a = jnp.where(grow, a * f_a, jnp.where(up, a, a0))
        v = jnp.where(up, v, 0.0)
        v = v + dt * f
        d = dt * v
        norm = jnp.sqrt(jnp.sum(d * d, axis=-1, keepdims=True))
        d = d * jnp.minimum(1.0, max_step / jnp.maximum(norm, 1e-12))
        x = jnp.mod(x + d * mk, box)
        f_new, _ = force_fn(x)
        return (x, v, f_new * mk, dt, a, n_pos), None

    f0, _ = force_fn(pos)
    zero = jnp.zeros((), dtype)
    state = (pos, jnp.zeros_like(pos), f0 * mk, zero + dt0, zero + a0,
             jnp.zeros((), jnp.int32))
    (x, *_), _ = jax.lax.scan(step, state, None, length=steps)
    return x, force_fn(x)[1]
