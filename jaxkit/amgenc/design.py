"""Design accuracy measured on the generated structure: the cell is relaxed at the data
recipe's pressure and its density, composition and network-former coordination are
compared with the target's.

Pressure of the pair potential at zero temperature (virial form, affine strain):
``P = -dE/dV = -(1 / (3 V)) dE(s)/ds`` at ``s = 1``, where ``E(s)`` is the energy with
positions and box scaled by ``s`` (eV / A^3; 1 eV/A^3 = 160.2 GPa).

Relaxation at a pressure ``P*`` (:func:`relax_at_pressure`): ``iters`` rounds of FIRE at
fixed box (:func:`jaxkit.amgenc.potential.minimize`'s kernel) followed by an isotropic
rescaling of the box and positions by ``s = 1 + (P - P*) / (3 B)`` (clipped to
[0.97, 1.03] per round), with ``B`` :data:`BULK_MODULUS`, a fixed estimate of the
recipe's bulk modulus; the density is that of the last box. The recipe's pressure of a
target is the pressure of the held-out cell itself (quenched at its additive-model box).
The twin of a target (same recipe, other seed) gives the noise floor of this density.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import potential as P
from .analysis import coordination_numbers
from .results import CellProperties
from .tables import ELEMENTS, box_edges, mass_density

__all__ = ["BULK_MODULUS", "pressure", "relax_at_pressure", "former_cn", "properties"]

BULK_MODULUS = 0.25  # eV/A^3 (40 GPa, of the order of silicate glasses)
_FORMERS = [ELEMENTS.index(s) for s in ("Si", "B", "Al", "P")]
_O = ELEMENTS.index("O")


def _pressure(pos, box, params):
    e = lambda s: P._energy(pos * s, box * s, params)  # noqa: E731
    vol = box ** 3 if jnp.ndim(box) == 0 else jnp.prod(box)  # cubic or orthorhombic
    return -jax.grad(e)(jnp.asarray(1.0, pos.dtype)) / (3.0 * vol)


def pressure(pos: np.ndarray, box: float, elements: np.ndarray) -> float:
    """Zero-temperature virial pressure (eV/A^3) of one cell under the recipe's
    potential."""
    el = np.asarray(elements, np.int32)
    n = el.size
    size = P.padded_size(n)  # padded (masked) to a size bucket: one compilation per bucket
    x = np.zeros((size, 3), np.float32)
    x[:n] = np.asarray(pos, np.float32)
    e = np.full(size, _O, np.int32)
    e[:n] = el
    return float(_pressure_padded(jnp.asarray(x), jnp.float32(box), jnp.asarray(e),
                                  jnp.asarray(np.arange(size) < n)))


@jax.jit
def _pressure_padded(pos, box, elements, mask):
    return _pressure(pos, box, P._pair_params(elements, mask, pos.dtype))


@partial(jax.jit, static_argnames=("iters", "steps", "capacity"))
def _relax_batch(pos, box, elements, mask, p_target, *, iters, steps, capacity):
    def one(x, b, el, m, pt):
        params = P._pair_params(el, m, x.dtype)

        def round_(carry, _):
            x, b, cnt = carry
            x, _, c = P._relax_core(x, b, el, m, jax.random.key(0), n_hold=0, n_quench=0,
                                    n_min=steps, capacity=capacity)
            p = _pressure(x, b, params)
            s = jnp.clip(1.0 + (p - pt) / (3.0 * BULK_MODULUS), 0.97, 1.03)
            return (x * s, b * s, jnp.maximum(cnt, c)), p

        (x, b, cnt), ps = jax.lax.scan(round_, (x, b, jnp.zeros((), jnp.int32)), None,
                                       length=iters)
        return x, b, ps[-1], cnt

    return jax.vmap(one)(pos, box, elements, mask, p_target)


def relax_at_pressure(cells: list[tuple[np.ndarray, float, np.ndarray]],
                      p_target: np.ndarray, *, iters: int = 4, steps: int = 50):
    """Relax cells ((positions A, box A, elements) each) at the pressures ``p_target``
    (eV/A^3). Returns a list of (positions, box, last measured pressure).

    The cells are grouped by size bucket (:func:`jaxkit.amgenc.potential.padded_size`),
    one batched call per bucket (its batch padded to a multiple of 4, so calls with the
    same bucket counts share a compiled program); large buckets use the potential's
    neighbour list, and a bucket whose list overflows is relaxed again densely."""
    if not cells:
        return []
    p_target = np.asarray(p_target, np.float32)
    sizes = np.array([P.padded_size(len(el)) for _, _, el in cells])
    out: list = [None] * len(cells)
    for size in np.unique(sizes):
        members = np.flatnonzero(sizes == size)
        b = -(-len(members) // 4) * 4
        rows = [members[i % len(members)] for i in range(b)]
        pos = np.zeros((b, size, 3), np.float32)
        el = np.full((b, size), _O, np.int32)
        mask = np.zeros((b, size), bool)
        for i, j in enumerate(rows):
            p, _, e = cells[j]
            pos[i, :len(e)], el[i, :len(e)], mask[i, :len(e)] = p, e, True
        box = (np.array([cells[j][1] for j in rows], np.float32)
               if all(np.ndim(cells[j][1]) == 0 for j in rows)
               else np.stack([box_edges(cells[j][1]) for j in rows]).astype(np.float32))
        args = (jnp.asarray(pos), jnp.asarray(box), jnp.asarray(el), jnp.asarray(mask),
                jnp.asarray(p_target[rows]))
        cap = P.list_capacity(int(size))
        x, bx, pr, cnt = _relax_batch(*args, iters=int(iters), steps=int(steps), capacity=cap)
        if cap and int(np.max(cnt)) > cap:  # the list overflowed: the dense sum
            x, bx, pr, _ = _relax_batch(*args, iters=int(iters), steps=int(steps), capacity=0)
        x, bx, pr = np.asarray(x, np.float64), np.asarray(bx, np.float64), np.asarray(pr)
        for i, j in enumerate(members):
            out[j] = (x[i, :len(cells[j][2])], float(bx[i]) if bx.ndim == 1 else bx[i],
                      float(pr[i]))
    return out


def former_cn(pos: np.ndarray, box: float, elements: np.ndarray) -> float:
    """Mean O coordination of the network-former cations (NaN without formers)."""
    el = np.asarray(elements)
    f = np.isin(el, _FORMERS)
    if not f.any():
        return float("nan")
    return float(coordination_numbers(pos, box, el)[f].mean())


def properties(pos: np.ndarray, box: float, elements: np.ndarray) -> CellProperties:
    """``density`` (g/cm^3) and ``former_cn`` of a cell."""
    el = np.asarray(elements)
    dens = mass_density(el, box)
    return CellProperties(density=dens, former_cn=former_cn(pos, box, el))
