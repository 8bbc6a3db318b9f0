"""Rigid-ion pair potentials of oxide glasses: Buckingham, Morse, inverse-power walls and
damped shifted-force Coulomb, on a dense minimum-image pair matrix with masks.

The energy of a periodic cubic cell of edge ``L`` (or an orthorhombic one of edges
``(Lx, Ly, Lz)``, the minimum image taken per axis) is a sum over distinct pairs ``i < j``
at minimum-image distance ``r`` (padding atoms masked out):

``E = sum_{i<j} [phi_sr(r) + phi_c(r)] + E_self``

* **short range** ``phi(r) = A exp(-b r) - C6 / r^6`` (Buckingham; BKS: van Beest, Kramer
  and van Santen, PRL 64, 1955, 1990) ``+ D [(1 - exp(-a (r - r0)))^2 - 1]`` (Morse;
  Pedone et al., J. Phys. Chem. B 110, 11780, 2006) ``+ C12 / r^12`` (Pedone's wall)
  ``+ 4 eps [(s / r)^30 - (s / r)^6]`` (the 30-6 wall that keeps BKS atoms from fusing
  at high temperature, in the style of Saika-Voivod et al., PRE 70, 061507, 2004),
  truncated at ``r_short`` as a shifted force:
  ``phi_sr(r) = phi(r) - phi(rs) - (r - rs) phi'(rs)`` for ``r < rs`` (energy and force
  continuous at the cutoff, which an NVE run needs);
* **Coulomb** by the damped shifted force of Fennell and Gezelter (J. Chem. Phys. 124,
  234104, 2006) with damping ``alpha`` and cutoff ``Rc``:
  ``phi_c(r) = k qi qj [erfc(a r)/r - erfc(a Rc)/Rc + (erfc(a Rc)/Rc^2
  + 2a/sqrt(pi) exp(-a^2 Rc^2)/Rc) (r - Rc)]`` for ``r < Rc``, ``k`` =
  :data:`COULOMB` eV A; the self term ``E_self = -(erfc(a Rc)/(2 Rc) + a/sqrt(pi)) k sum
  qi^2`` is a constant of the charges.

Both cutoffs must be at most ``L / 2`` (half the shortest edge; each pair is counted
once, at its minimum image); the caller checks that. Forces are written in closed form
(:func:`forces`: ``F_i = -sum_j phi'(r_ij) (r_i - r_j) / r_ij``); the tests check them against
``jax.grad`` of :func:`energy` in float64. Units: Angstrom, eV, elementary charges.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import erfc

__all__ = ["COULOMB", "PairTable", "energy", "forces", "pair_terms", "virial"]

#: e^2 / (4 pi eps0) in eV A
COULOMB = 14.399645
_SQRT_PI = 1.7724538509055159


class PairTable(NamedTuple):
    """Parameters of a rigid-ion potential over ``K`` species (all (K, K) tables
    symmetric; a zero entry switches that term off for the pair).

    Attributes:
        charge: (K,) partial charges (e).
        buck_a, buck_b, buck_c6: Buckingham ``A`` (eV), ``b`` (1/A), ``C6`` (eV A^6).
        morse_d, morse_a, morse_r0: Morse depth (eV), width (1/A), minimum (A).
        c12: inverse-12 wall (eV A^12).
        wall_eps, wall_sigma: the 30-6 wall ``4 eps [(s/r)^30 - (s/r)^6]`` (eV, A).
        r_short: short-range cutoff (A).
        r_coul: Coulomb cutoff ``Rc`` (A).
        alpha: Coulomb damping (1/A).
    """

    charge: jax.Array
    buck_a: jax.Array
    buck_b: jax.Array
    buck_c6: jax.Array
    morse_d: jax.Array
    morse_a: jax.Array
    morse_r0: jax.Array
    c12: jax.Array
    wall_eps: jax.Array
    wall_sigma: jax.Array
    r_short: jax.Array | float
    r_coul: jax.Array | float
    alpha: jax.Array | float


def _short(r, a, b, c6, d, ma, r0, c12, eps, sig):
    """phi(r) and phi'(r) of the short-range terms (closed form)."""
    ex = a * jnp.exp(-b * r)
    inv = 1.0 / r
    inv6 = inv**6
    m = jnp.exp(-ma * (r - r0))
    s = sig * inv
    s6 = s**6
    s30 = s6**5
    e = ex - c6 * inv6 + d * (jnp.square(1.0 - m) - 1.0) + c12 * inv6 * inv6 \
        + 4.0 * eps * (s30 - s6)
    de = -b * ex + 6.0 * c6 * inv6 * inv + 2.0 * d * ma * m * (1.0 - m) \
        - 12.0 * c12 * inv6 * inv6 * inv + 4.0 * eps * (-30.0 * s30 + 6.0 * s6) * inv
    return e, de


def _coulomb(r, qq, alpha, rc):
    """DSF phi_c(r), phi_c'(r) for r < rc (closed form, without the cutoff mask)."""
    g = 2.0 * alpha / _SQRT_PI
    erc = erfc(alpha * rc)
    shift = erc / rc**2 + g * jnp.exp(-(alpha * rc) ** 2) / rc
    er = erfc(alpha * r)
    e = COULOMB * qq * (er / r - erc / rc + shift * (r - rc))
    de = COULOMB * qq * (-er / r**2 - g * jnp.exp(-(alpha * r) ** 2) / r + shift)
    return e, de


def pair_terms(r: jax.Array, si: jax.Array, sj: jax.Array,
               table: PairTable) -> tuple[jax.Array, jax.Array]:
    """Pair energy ``phi(r)`` and its derivative ``phi'(r)`` (eV, eV/A) of pairs of
    species ``si``, ``sj`` at distances ``r`` (any matching shapes; zero beyond the
    cutoffs).

    Args:
        r: distances (A), > 0.
        si, sj: species indices into the table.
        table: the :class:`PairTable`.

    Returns:
        ``(phi, dphi)`` of the shape of ``r``.

    Differentiable: yes, in r (piecewise smooth: the cutoffs are the kinks).
    """
    dt = r.dtype
    p = [jnp.asarray(t, dt)[si, sj] for t in (table.buck_a, table.buck_b, table.buck_c6,
                                               table.morse_d, table.morse_a, table.morse_r0,
                                               table.c12, table.wall_eps, table.wall_sigma)]
    rs = jnp.asarray(table.r_short, dt)
    rc = jnp.asarray(table.r_coul, dt)
    e, de = _short(r, *p)
    e_rs, de_rs = _short(rs, *p)
    inside = r < rs
    e_sr = jnp.where(inside, e - e_rs - (r - rs) * de_rs, 0.0)
    de_sr = jnp.where(inside, de - de_rs, 0.0)
    q = jnp.asarray(table.charge, dt)
    ec, dec = _coulomb(r, q[si] * q[sj], jnp.asarray(table.alpha, dt), rc)
    inc = r < rc
    return e_sr + jnp.where(inc, ec, 0.0), de_sr + jnp.where(inc, dec, 0.0)


def _pairs(pos, box, mask):
    """Minimum-image differences (3 (N, N) planes), distances (N, N) and the pair mask."""
    n = pos.shape[0]
    pair = mask[:, None] & mask[None, :] & ~jnp.eye(n, dtype=bool)
    d = []
    edges = box if box.ndim else jnp.broadcast_to(box, (3,))  # cubic or orthorhombic
    for c in range(3):
        x = pos[:, None, c] - pos[None, :, c]
        d.append(x - edges[c] * jnp.round(x / edges[c]))
    r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    r = jnp.sqrt(jnp.where(pair, r2, 1.0))  # safe on the diagonal and the padding
    return d, r, pair


def _self_energy(species, mask, table: PairTable, dtype) -> jax.Array:
    """The DSF self term ``-(erfc(alpha rc) / (2 rc) + alpha / sqrt(pi)) k sum_i q_i^2``
    over the masked atoms (Fennell & Gezelter 2006)."""
    q = jnp.asarray(table.charge, dtype)[species]
    a = jnp.asarray(table.alpha, dtype)
    rc = jnp.asarray(table.r_coul, dtype)
    return -(erfc(a * rc) / (2.0 * rc) + a / _SQRT_PI) * COULOMB * jnp.sum(
        jnp.where(mask, q * q, 0.0))


def energy(pos: jax.Array, box: jax.Array | float, species: jax.Array, mask: jax.Array,
           table: PairTable) -> jax.Array:
    """Potential energy (eV) of the masked atoms of a periodic cubic cell.

    Args:
        pos: (N, 3) positions (A).
        box: cubic edge (A), or (3,) orthorhombic edges; each at least twice both
            cutoffs.
        species: (N,) int species indices into ``table``.
        mask: (N,) bool, real (non-padding) atoms.
        table: the :class:`PairTable`.

    Returns:
        Scalar energy: pair sum plus the DSF self term.

    Differentiable: yes, in pos (``-grad`` is :func:`forces`).
    """
    box = jnp.asarray(box, pos.dtype)
    _, r, pair = _pairs(pos, box, mask)
    e, _ = pair_terms(r, species[:, None], species[None, :], table)
    self_e = _self_energy(species, mask, table, pos.dtype)
    return 0.5 * jnp.sum(jnp.where(pair, e, 0.0)) + self_e


def forces(pos: jax.Array, box: jax.Array | float, species: jax.Array, mask: jax.Array,
           table: PairTable) -> tuple[jax.Array, jax.Array]:
    """Closed-form forces ``F_i = -dE/dr_i`` (eV/A) and the energy, in one pass.

    Args:
        pos: (N, 3) positions (A).
        box: cubic edge (A), or (3,) orthorhombic edges; each at least twice both
            cutoffs.
        species: (N,) int species indices into ``table``.
        mask: (N,) bool, real (non-padding) atoms.
        table: the :class:`PairTable`.

    Returns:
        ``(forces (N, 3), energy)``; padding atoms get zero force.

    Differentiable: yes, in pos (the Hessian of the energy, for normal modes).
    """
    box = jnp.asarray(box, pos.dtype)
    d, r, pair = _pairs(pos, box, mask)
    e, de = pair_terms(r, species[:, None], species[None, :], table)
    w = jnp.where(pair, de / r, 0.0)
    f = jnp.stack([-jnp.sum(w * dc, axis=1) for dc in d], axis=-1)
    self_e = _self_energy(species, mask, table, pos.dtype)
    return f, 0.5 * jnp.sum(jnp.where(pair, e, 0.0)) + self_e


def virial(pos: jax.Array, box: jax.Array | float, species: jax.Array, mask: jax.Array,
           table: PairTable) -> jax.Array:
    """The pair virial ``W = -sum_{i<j} r phi'(r)`` (eV); the pressure of the cell is
    ``P = (2 K + W) / (3 V)`` with ``K`` the kinetic energy (``W = -3 V dE/dV`` under a
    uniform scaling of the cell, the potential's cutoffs held fixed).

    Args:
        pos: (N, 3) positions (A).
        box: cubic edge (A), or (3,) orthorhombic edges; each at least twice both
            cutoffs.
        species: (N,) int species indices into ``table``.
        mask: (N,) bool, real (non-padding) atoms.
        table: the :class:`PairTable`.

    Returns:
        Scalar virial (eV).

    Differentiable: yes, in pos.
    """
    box = jnp.asarray(box, pos.dtype)
    _, r, pair = _pairs(pos, box, mask)
    _, de = pair_terms(r, species[:, None], species[None, :], table)
    return -0.5 * jnp.sum(jnp.where(pair, r * de, 0.0))
