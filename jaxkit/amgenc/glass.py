"""Reproducible, charge-balanced amorphous oxide cells (the AMGenC data recipe).

No amorphous structure data set ships in any installable package, so jaxkit generates
its own with the recipe below. Every step is seeded, so ``generate(kind, n, seed=s)``
returns the same cells on every run of the same software stack.

1. **Composition** (:func:`draw_composition`). A cell is an integer number of oxide
   formula units (SiO2, B2O3, Al2O3, P2O5, Li2O, Na2O, K2O, CaO, MgO, ZnO, BaO). Each unit
   is neutral under the formal oxidation states of :data:`OXIDATION_STATES`, so every
   cell is *exactly* charge balanced. ``"silica"``: SiO2 only. ``"multi"``: 1-3 network
   formers (at least one of Si, B, P; Al joins only as a second or third former) and 1-3
   modifiers, mole fractions drawn from flat Dirichlet distributions, total modifier
   fraction uniform in [5, 40] mol%. Integer rounding moves the realised fractions a
   little (a unit has 2-7 atoms).
2. **Box** (:func:`additive_density`). Cubic, periodic; the edge ``L`` is set from an
   additive (ideal-mixing) density estimate ``rho = sum x_i M_i / sum x_i M_i / rho_i``,
   i.e. partial molar volumes ``M_i / rho_i`` add up. The ``rho_i`` of
   :data:`OXIDES` are effective partial densities of each oxide *in glass* (see there);
   they reproduce a-SiO2 (2.20 g/cm^3) exactly and common silicate and aluminosilicate
   glasses to within roughly 5-10 % (an estimate, not a measurement).
3. **Positions** (:func:`relax`). Random sequential addition (no pair closer than
   1.4 A), then an overdamped-Langevin melt-quench (``x += -eta grad E + sqrt(2 eta kT)
   xi`` with ``kT`` held at :data:`KT_MELT` and then lowered linearly to 0, one
   ``lax.scan``) and a FIRE energy minimisation (Bitzek et al., PRL 97, 170201, 2006),
   both in JAX on a dense N x N minimum-image distance matrix. Cells are padded to
   size buckets (:func:`padded_size`) with an atom mask, so cells of different N reuse
   one compiled program per bucket.

The pair potential (:func:`pair_energy`) is short ranged and has no Coulomb term:

* cation-O: Morse well ``D [(1 - exp(-a (r - r0)))^2 - 1]`` at the standard cation-oxygen
  bond length ``r0`` of :data:`BOND_LENGTHS`, ``a = 3 / A``, depth ``D = 3 eV x s`` with
  ``s = z / CN`` the Pauling bond strength (formal charge over a typical coordination
  number, :data:`TYPICAL_CN`) so that network formers bind much more strongly than
  modifiers;
* O-O: soft harmonic repulsion ``k/2 (sigma - r)^2`` for ``r < sigma = 2.6 A`` (the
  O-O edge of an SiO4 tetrahedron is 2.63 A, so four O fit around Si and five do not);
* cation-cation: the same repulsion with ``sigma = min(0.93 (r0_i + r0_j), 3.2 A)``
  (3.0 A for Si-Si, i.e. Si-O-Si angles above ~137 deg; 2.55 A for B-B so that B-O-B
  links remain possible);
* a cosine switch takes every term smoothly to zero between 4.5 and :data:`CUTOFF` A.

This gives tetrahedral, corner-sharing SiO4 networks for silica (Si-O peak at 1.61 A,
O-Si-O near 109.5 deg, Si four-coordinated). It is a recipe for *plausible* amorphous
cells, not a fitted force field: without Coulomb and three-body terms, modifier
environments and B/P coordination are only roughly right (B-O bonds are stretched by
the O-O repulsion; BO3/BO4 speciation is not modelled).

Units: Angstrom, eV (``kT``), g/cm^3, degrees.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "BOND_LENGTHS",
    "CUTOFF",
    "ELEMENTS",
    "FORMERS",
    "KINDS",
    "MODIFIERS",
    "N_ATOMS_RANGE",
    "OXIDATION_STATES",
    "OXIDES",
    "Cell",
    "Oxide",
    "mass_density",
    "additive_density",
    "angle_distribution",
    "bond_angles",
    "cell_from_counts",
    "coordination_numbers",
    "draw_composition",
    "generate",
    "load_cells",
    "distribution_l1",
    "min_distance",
    "minimize",
    "padded_size",
    "pair_energy",
    "rdf",
    "relax",
    "save_cells",
]

# ----------------------------------------------------------------------------- tables

#: Element vocabulary; a cell stores per-atom indices into this tuple. O is last.
ELEMENTS: tuple[str, ...] = (
    "Si", "B", "Al", "P", "Li", "Na", "K", "Ca", "Mg", "Zn", "Ba", "O",
)
_O = ELEMENTS.index("O")

#: Formal oxidation states used for the charge balance.
OXIDATION_STATES: dict[str, int] = {
    "Si": 4, "B": 3, "Al": 3, "P": 5, "Li": 1, "Na": 1, "K": 1,
    "Ca": 2, "Mg": 2, "Zn": 2, "Ba": 2, "O": -2,
}

# Standard atomic weights (IUPAC 2021 abridged/conventional values), g/mol.
_ATOMIC_MASS: dict[str, float] = {
    "Si": 28.085, "B": 10.81, "Al": 26.982, "P": 30.974, "Li": 6.94, "Na": 22.990,
    "K": 39.098, "Ca": 40.078, "Mg": 24.305, "Zn": 65.38, "Ba": 137.33, "O": 15.999,
}


@dataclass(frozen=True)
class Oxide:
    """One oxide formula unit: ``n_cation`` atoms of ``cation`` and ``n_oxygen`` O."""

    name: str
    cation: str
    n_cation: int
    n_oxygen: int
    partial_density: float  # g/cm^3, effective density of this oxide in glass
    former: bool

    @property
    def n_atoms(self) -> int:
        return self.n_cation + self.n_oxygen

    @property
    def molar_mass(self) -> float:
        """g/mol, from the standard atomic weights."""
        return self.n_cation * _ATOMIC_MASS[self.cation] + self.n_oxygen * _ATOMIC_MASS["O"]

    @property
    def molar_volume(self) -> float:
        """cm^3/mol: the partial molar volume used by :func:`additive_density`."""
        return self.molar_mass / self.partial_density


# Partial densities rho_i = M_i / V_i, with V_i an approximate partial molar volume of the
# oxide in glass (cm^3/mol). SiO2: vitreous silica, 2.20 g/cm^3 (V = 27.3). B2O3: vitreous
# B2O3, 1.84. The others are rounded Appen-style additive-model partial molar volumes for
# silicate glasses (order of magnitude literature values, not fitted here): Al2O3 ~40,
# P2O5 ~60, Li2O ~11, Na2O ~20, K2O ~34, CaO ~14.4, MgO ~12.5, ZnO ~14.5, BaO ~22 cm^3/mol.
# Check: Na2O.2SiO2 -> 2.44 (measured ~2.49); CaO.Al2O3.2SiO2 -> 2.55 (anorthite glass ~2.70).
# Multi draws span about 1.86-3.87 g/cm^3 (B2O3-rich to BaO-rich).
OXIDES: tuple[Oxide, ...] = (
    Oxide("SiO2", "Si", 1, 2, 2.20, True),
    Oxide("B2O3", "B", 2, 3, 1.84, True),
    Oxide("Al2O3", "Al", 2, 3, 2.55, True),
    Oxide("P2O5", "P", 2, 5, 2.37, True),
    Oxide("Li2O", "Li", 2, 1, 2.72, False),
    Oxide("Na2O", "Na", 2, 1, 3.10, False),
    Oxide("K2O", "K", 2, 1, 2.77, False),
    Oxide("CaO", "Ca", 1, 1, 3.89, False),
    Oxide("MgO", "Mg", 1, 1, 3.22, False),
    Oxide("ZnO", "Zn", 1, 1, 5.61, False),
    Oxide("BaO", "Ba", 1, 1, 6.97, False),
)
OXIDE_NAMES: tuple[str, ...] = tuple(o.name for o in OXIDES)
FORMERS: tuple[str, ...] = tuple(o.name for o in OXIDES if o.former)
MODIFIERS: tuple[str, ...] = tuple(o.name for o in OXIDES if not o.former)
KINDS: tuple[str, ...] = ("silica", "multi")
N_ATOMS_RANGE: tuple[int, int] = (100, 800)
MAX_MODIFIER_FRACTION = 0.40

#: Standard cation-oxygen bond lengths (A), the Morse minima of the pair potential.
BOND_LENGTHS: dict[str, float] = {
    "Si": 1.61, "B": 1.37, "Al": 1.75, "P": 1.53, "Li": 1.97, "Na": 2.35, "K": 2.80,
    "Ca": 2.35, "Mg": 2.05, "Zn": 1.96, "Ba": 2.75,
}
#: Typical O coordination of each cation, used only for the Pauling bond strength z/CN.
TYPICAL_CN: dict[str, int] = {
    "Si": 4, "B": 3, "Al": 4, "P": 4, "Li": 4, "Na": 6, "K": 8, "Ca": 6, "Mg": 6,
    "Zn": 4, "Ba": 8,
}
MORSE_DEPTH = 3.0  # eV per unit Pauling bond strength
MORSE_WIDTH = 3.0  # 1/A
SIGMA_OO = 2.6  # A
SIGMA_CC_SCALE, SIGMA_CC_MAX = 0.93, 3.2
K_REPULSION = 60.0  # eV/A^2
SWITCH_ON, CUTOFF = 4.5, 5.0  # A
KT_MELT = 0.4  # eV, melt temperature of the overdamped-Langevin stage
LANGEVIN_ETA = 0.001  # A^2/eV, mobility x time step
MAX_STEP = 0.1  # A, cap on one atom's displacement per step (both stages)
MIN_INIT_DISTANCE = 1.4  # A, random sequential addition
_AVOGADRO = 6.02214076e23


def _pair_tables() -> tuple[np.ndarray, ...]:
    """(K, K) tables of Morse (D, r0) and repulsion (sigma, on) between element kinds."""
    k = len(ELEMENTS)
    depth, r0, sigma, rep = (np.zeros((k, k)) for _ in range(4))
    for i, ei in enumerate(ELEMENTS):
        for j, ej in enumerate(ELEMENTS):
            if ei == "O" and ej == "O":
                sigma[i, j], rep[i, j] = SIGMA_OO, 1.0
            elif ei == "O" or ej == "O":
                c = ej if ei == "O" else ei
                depth[i, j] = MORSE_DEPTH * OXIDATION_STATES[c] / TYPICAL_CN[c]
                r0[i, j] = BOND_LENGTHS[c]
                sigma[i, j] = 1.0  # unused (rep = 0); keeps the table finite
            else:
                s = min(SIGMA_CC_SCALE * (BOND_LENGTHS[ei] + BOND_LENGTHS[ej]), SIGMA_CC_MAX)
                sigma[i, j], rep[i, j] = s, 1.0
    return depth, r0, sigma, rep


_DEPTH, _R0, _SIGMA, _REP = _pair_tables()
_MASS = np.array([_ATOMIC_MASS[e] for e in ELEMENTS])
_CHARGE = np.array([OXIDATION_STATES[e] for e in ELEMENTS], dtype=np.int64)
_OXIDE_ELEMENT = np.array([ELEMENTS.index(o.cation) for o in OXIDES])


# ------------------------------------------------------------------------ composition


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")


def _check_range(n_atoms: tuple[int, int]) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in n_atoms)
    except (TypeError, ValueError):
        raise ValueError(f"n_atoms must be a pair (lo, hi); got {n_atoms!r}") from None
    if not N_ATOMS_RANGE[0] <= lo <= hi <= N_ATOMS_RANGE[1]:
        raise ValueError(
            f"n_atoms must satisfy {N_ATOMS_RANGE[0]} <= lo <= hi <= {N_ATOMS_RANGE[1]}; "
            f"got {n_atoms!r}"
        )
    return lo, hi


def _n_atoms(counts: np.ndarray) -> int:
    return int(sum(int(c) * o.n_atoms for c, o in zip(counts, OXIDES, strict=True)))


def draw_composition(
    rng: np.random.Generator,
    kind: str,
    n_atoms_target: int,
    *,
    n_atoms: tuple[int, int] = N_ATOMS_RANGE,
) -> np.ndarray:
    """Draw a charge-balanced composition as integer numbers of oxide formula units.

    Returns an int array aligned with :data:`OXIDES`. The cell's atom count lies in
    ``n_atoms`` (default [100, 800]) and within ~10 atoms of ``n_atoms_target``.
    ``kind="silica"``: SiO2 only. ``kind="multi"``: 1-3 formers (at least one of SiO2,
    B2O3, P2O5) and 1-3 modifiers, Dirichlet(1) fractions within each group, modifier
    total uniform in [0.05, 0.40]. Every unit is neutral, so the cell charge is 0.
    """
    _check_kind(kind)
    lo, hi = _check_range(n_atoms)
    if not lo <= int(n_atoms_target) <= hi:
        raise ValueError(f"n_atoms_target must lie in n_atoms={n_atoms!r}; "
                         f"got {n_atoms_target!r}")
    counts = np.zeros(len(OXIDES), dtype=np.int64)
    if kind == "silica":
        u_lo, u_hi = math.ceil(lo / 3), hi // 3
        if u_lo > u_hi:
            raise ValueError(f"n_atoms={n_atoms!r} holds no multiple of 3 (SiO2 units)")
        counts[0] = min(max(round(n_atoms_target / 3), u_lo), u_hi)
        return counts
    true_formers = [OXIDE_NAMES.index(n) for n in ("SiO2", "B2O3", "P2O5")]
    first = int(rng.choice(true_formers))
    others = [OXIDE_NAMES.index(n) for n in FORMERS if OXIDE_NAMES.index(n) != first]
    n_f = int(rng.integers(1, 4))
    formers = [first, *rng.choice(others, size=n_f - 1, replace=False).tolist()]
    mods_all = [OXIDE_NAMES.index(n) for n in MODIFIERS]
    n_m = int(rng.integers(1, 4))
    mods = rng.choice(mods_all, size=n_m, replace=False).tolist()
    f_mod = rng.uniform(0.05, MAX_MODIFIER_FRACTION)
    x = np.zeros(len(OXIDES))
    x[formers] = (1.0 - f_mod) * rng.dirichlet(np.ones(n_f))
    x[mods] = f_mod * rng.dirichlet(np.ones(n_m))
    atoms_per_mol = float(sum(xi * o.n_atoms for xi, o in zip(x, OXIDES, strict=True)))
    units = n_atoms_target / atoms_per_mol
    present = np.flatnonzero(x > 0)
    counts[present] = np.maximum(np.rint(x[present] * units), 1).astype(np.int64)
    # Nudge into range with the smallest units present (2-7 atoms each).
    order = sorted(present.tolist(), key=lambda i: OXIDES[i].n_atoms)
    for _ in range(1000):
        total = _n_atoms(counts)
        if total > hi:
            i = max(present.tolist(), key=lambda i: (counts[i] > 1, counts[i]))
            if counts[i] <= 1:
                break
            counts[i] -= 1
        elif total < lo:
            counts[order[0]] += 1
        else:
            return counts
    raise ValueError(f"could not fit a multi composition into n_atoms={n_atoms!r}; "
                     "widen the range")


def mass_density(elements: np.ndarray, box: float) -> float:
    """Mass density (g/cm^3) of atoms with element indices ``elements`` (into
    :data:`ELEMENTS`) in a cubic box of edge ``box`` Angstrom."""
    return float(_MASS[np.asarray(elements)].sum() / _AVOGADRO / (box * 1e-8) ** 3)


def additive_density(counts: np.ndarray) -> float:
    """Ideal-mixing density estimate (g/cm^3): total mass over summed partial volumes."""
    counts = np.asarray(counts, dtype=np.float64)
    mass = sum(c * o.molar_mass for c, o in zip(counts, OXIDES, strict=True))
    vol = sum(c * o.molar_volume for c, o in zip(counts, OXIDES, strict=True))
    return float(mass / vol)


def _elements_from_counts(counts: np.ndarray) -> np.ndarray:
    parts = []
    for c, o, e in zip(counts, OXIDES, _OXIDE_ELEMENT, strict=True):
        parts.append(np.full(int(c) * o.n_cation, e, dtype=np.int64))
    n_o = sum(int(c) * o.n_oxygen for c, o in zip(counts, OXIDES, strict=True))
    parts.append(np.full(n_o, _O, dtype=np.int64))
    return np.concatenate(parts)


# -------------------------------------------------------------------------- the cell


@dataclass(frozen=True, eq=False)
class Cell:
    """One periodic cubic amorphous cell.

    ``elements``: (N,) int indices into :data:`ELEMENTS` (cations first, O last);
    ``positions``: (N, 3) Angstrom in [0, box); ``box``: cubic edge (A);
    ``oxide_counts``: formula units per oxide of :data:`OXIDES`;
    ``properties``: float descriptors (see :func:`cell_properties`).
    """

    elements: np.ndarray
    positions: np.ndarray
    box: float
    oxide_counts: np.ndarray
    properties: dict[str, float] = field(default_factory=dict)

    @property
    def n_atoms(self) -> int:
        return int(self.elements.shape[0])

    @property
    def symbols(self) -> list[str]:
        return [ELEMENTS[i] for i in self.elements]

    @property
    def charges(self) -> np.ndarray:
        """Formal oxidation charge per atom (Si +4 ... O -2); sums to 0."""
        return _CHARGE[self.elements]

    @property
    def density(self) -> float:
        """Mass density of the cell, g/cm^3."""
        return mass_density(self.elements, self.box)

    def mask(self, *symbols: str) -> np.ndarray:
        """Boolean (N,) mask of the atoms of the given element symbols."""
        idx = [ELEMENTS.index(s) for s in symbols]
        return np.isin(self.elements, idx)

    def formula(self) -> str:
        """Oxide formula units, e.g. ``"SiO2:40 Na2O:10"``."""
        return " ".join(f"{n}:{int(c)}" for n, c in zip(OXIDE_NAMES, self.oxide_counts,
                                                        strict=True) if c)


def cell_properties(elements: np.ndarray, positions: np.ndarray, box: float,
                    oxide_counts: np.ndarray) -> dict[str, float]:
    """Density and composition (and a few structural) descriptors of a cell.

    ``density`` (g/cm^3), ``number_density`` (1/A^3), ``n_atoms``, ``x_<oxide>`` (oxide
    mole fractions), ``modifier_former_ratio`` (mol modifier oxides / mol former
    oxides), ``o_cation_ratio`` (O atoms per cation), ``mean_cation_charge``,
    ``total_charge`` (0), ``former_cn`` (mean O coordination of former cations within
    1.3 x bond length), ``min_distance`` (A).
    """
    counts = np.asarray(oxide_counts, dtype=np.float64)
    x = counts / counts.sum()
    charges = _CHARGE[elements]
    cation = elements != _O
    formers = np.array([o.former for o in OXIDES])
    props: dict[str, float] = {
        "n_atoms": float(elements.shape[0]),
        "density": float(_MASS[elements].sum() / _AVOGADRO / (box * 1e-8) ** 3),
        "number_density": float(elements.shape[0] / box**3),
    }
    props.update({f"x_{n}": float(v) for n, v in zip(OXIDE_NAMES, x, strict=True)})
    props["modifier_former_ratio"] = float(x[~formers].sum() / x[formers].sum())
    props["o_cation_ratio"] = float((~cation).sum() / cation.sum())
    props["mean_cation_charge"] = float(charges[cation].mean())
    props["total_charge"] = float(charges.sum())
    fmask = np.isin(elements, _OXIDE_ELEMENT[formers])
    props["former_cn"] = float(coordination_numbers(positions, box, elements)[fmask].mean())
    props["min_distance"] = min_distance(positions, box)
    return props


# --------------------------------------------------------------------- the potential


def padded_size(n: int) -> int:
    """Size bucket for ``n`` atoms: the next multiple of 128, at most 800."""
    return min(-(-int(n) // 128) * 128, N_ATOMS_RANGE[1]) if n <= 800 else int(n)


def _min_image(pos: jax.Array, box: jax.Array) -> jax.Array:
    d = pos[:, None, :] - pos[None, :, :]
    return d - box * jnp.round(d / box)


def _switch(r: jax.Array) -> jax.Array:
    t = jnp.clip((r - SWITCH_ON) / (CUTOFF - SWITCH_ON), 0.0, 1.0)
    return 0.5 * (1.0 + jnp.cos(jnp.pi * t))


def _pair_params(elements: jax.Array, mask: jax.Array, dtype) -> tuple[jax.Array, ...]:
    """Dense (N, N) pair parameters: pair mask, Morse depth and minimum, repulsion
    strength (k, 0 where no repulsion) and radius. Built once per relaxation."""
    n = elements.shape[0]
    pair = mask[:, None] & mask[None, :] & ~jnp.eye(n, dtype=bool)
    ei, ej = elements[:, None], elements[None, :]
    depth = jnp.asarray(_DEPTH, dtype)[ei, ej]
    r0 = jnp.asarray(_R0, dtype)[ei, ej]
    k = K_REPULSION * jnp.asarray(_REP, dtype)[ei, ej]
    sigma = jnp.asarray(_SIGMA, dtype)[ei, ej]
    return pair, depth, r0, k, sigma


def _energy(pos: jax.Array, box: jax.Array, params: tuple[jax.Array, ...]) -> jax.Array:
    pair, depth, r0, k, sigma = params
    d = _min_image(pos, box)
    r2 = jnp.sum(d * d, axis=-1)
    r = jnp.sqrt(jnp.where(pair, r2, 1.0))  # safe gradient on the diagonal and padding
    morse = depth * (jnp.square(1.0 - jnp.exp(-MORSE_WIDTH * (r - r0))) - 1.0)
    soft = 0.5 * k * jnp.square(jnp.maximum(sigma - r, 0.0))
    e = (morse + soft) * _switch(r)
    return 0.5 * jnp.sum(jnp.where(pair, e, 0.0))


def pair_energy(pos: jax.Array, box: jax.Array, elements: jax.Array,
                mask: jax.Array) -> jax.Array:
    """Total short-range pair energy (eV) of the masked atoms; see the module docstring.

    ``pos`` (N, 3) A, ``box`` cubic edge, ``elements`` (N,) indices into :data:`ELEMENTS`,
    ``mask`` (N,) bool of real (non-padding) atoms. Differentiable with ``jax.grad``.
    """
    pos = jnp.asarray(pos)
    return _energy(pos, jnp.asarray(box, pos.dtype),
                   _pair_params(jnp.asarray(elements), jnp.asarray(mask), pos.dtype))


def _cap(step: jax.Array, max_step: float) -> jax.Array:
    norm = jnp.linalg.norm(step, axis=-1, keepdims=True)
    return step * jnp.minimum(1.0, max_step / jnp.maximum(norm, 1e-12))


@partial(jax.jit, static_argnames=("n_hold", "n_quench", "n_min"))
def _relax_padded(pos, box, elements, mask, key, *, n_hold, n_quench, n_min):
    m = mask[:, None].astype(pos.dtype)
    params = _pair_params(elements, mask, pos.dtype)
    grad = jax.grad(_energy)

    def langevin(x, inp):
        kt, k = inp
        noise = jax.random.normal(k, x.shape, x.dtype)
        step = -LANGEVIN_ETA * grad(x, box, params) + jnp.sqrt(
            2.0 * LANGEVIN_ETA * kt) * noise
        return jnp.mod(x + _cap(step, MAX_STEP) * m, box), None

    kts = jnp.concatenate([jnp.full((n_hold,), KT_MELT),
                           jnp.linspace(KT_MELT, 0.0, n_quench)]).astype(pos.dtype)
    keys = jax.random.split(key, n_hold + n_quench)
    pos, _ = jax.lax.scan(langevin, pos, (kts, keys))

    # FIRE (Bitzek et al. 2006) with unit masses and a per-atom displacement cap.
    dt0, dt_max, n_delay, f_inc, f_dec, a0, f_a = 0.02, 0.1, 5, 1.1, 0.5, 0.1, 0.99

    def fire(state, _):
        x, v, dt, a, n_pos = state
        f = -grad(x, box, params) * m
        p = jnp.sum(f * v)
        fn = jnp.linalg.norm(f) + 1e-12
        vn = jnp.linalg.norm(v)
        v = (1.0 - a) * v + a * vn * f / fn
        up = p > 0
        n_pos = jnp.where(up, n_pos + 1, 0)
        grow = up & (n_pos > n_delay)
        dt = jnp.where(grow, jnp.minimum(dt * f_inc, dt_max), jnp.where(up, dt, dt * f_dec))
        a = jnp.where(grow, a * f_a, jnp.where(up, a, a0))
        v = jnp.where(up, v, 0.0)
        v = v + dt * f
        x = jnp.mod(x + _cap(dt * v, MAX_STEP) * m, box)
        return (x, v, dt, a, n_pos), None

    zero = jnp.zeros((), pos.dtype)
    state = (pos, jnp.zeros_like(pos), zero + dt0, zero + a0, jnp.zeros((), jnp.int32))
    (pos, *_), _ = jax.lax.scan(fire, state, None, length=n_min)
    return pos, _energy(pos, box, params)


def relax(positions: np.ndarray, box: float, elements: np.ndarray, *, seed: int = 0,
          steps: int = 6000, min_steps: int = 500) -> tuple[np.ndarray, float]:
    """Melt-quench (``steps`` Langevin steps: 1/3 at :data:`KT_MELT`, 2/3 linear cooling
    to 0) then ``min_steps`` FIRE steps. Returns (positions in [0, box), energy in eV).
    """
    n = int(elements.shape[0])
    if steps < 2 or min_steps < 0:
        raise ValueError(f"steps must be >= 2 and min_steps >= 0; got {steps}, {min_steps}")
    size = padded_size(n)
    pos = np.zeros((size, 3), np.float32)
    pos[:n] = positions
    el = np.full(size, _O, np.int32)
    el[:n] = elements
    mask = np.arange(size) < n
    n_hold = steps // 3
    out, energy = _relax_padded(jnp.asarray(pos), jnp.float32(box), jnp.asarray(el),
                                jnp.asarray(mask), jax.random.PRNGKey(seed),
                                n_hold=n_hold, n_quench=steps - n_hold, n_min=int(min_steps))
    return np.asarray(out[:n], dtype=np.float64), float(energy)


def minimize(positions: np.ndarray, box: float, elements: np.ndarray, *,
             steps: int = 300) -> tuple[np.ndarray, float]:
    """FIRE energy minimisation alone (no melt-quench): ``steps`` FIRE steps of the pair
    potential from the given positions, species unchanged. Used to post-process
    generated cells. Returns (positions in [0, box), energy in eV)."""
    n = int(elements.shape[0])
    if steps < 1:
        raise ValueError(f"steps must be >= 1; got {steps}")
    size = padded_size(n)
    pos = np.zeros((size, 3), np.float32)
    pos[:n] = np.mod(positions, box)
    el = np.full(size, _O, np.int32)
    el[:n] = elements
    mask = np.arange(size) < n
    out, energy = _relax_padded(jnp.asarray(pos), jnp.float32(box), jnp.asarray(el),
                                jnp.asarray(mask), jax.random.PRNGKey(0),
                                n_hold=0, n_quench=0, n_min=int(steps))
    return np.asarray(out[:n], dtype=np.float64), float(energy)


def _random_packing(rng: np.random.Generator, n: int, box: float) -> np.ndarray:
    """Random sequential addition with no pair closer than MIN_INIT_DISTANCE (periodic)."""
    pos = np.empty((n, 3))
    k, tries = 0, 0
    while k < n:
        p = rng.uniform(0.0, box, 3)
        d = pos[:k] - p
        d -= box * np.rint(d / box)
        if k == 0 or np.min(np.einsum("ij,ij->i", d, d)) >= MIN_INIT_DISTANCE**2:
            pos[k] = p
            k += 1
        tries += 1
        if tries > 200 * n:  # pragma: no cover - only at unphysical densities
            raise RuntimeError("random packing failed; density too high")
    return pos


def cell_from_counts(counts: np.ndarray, *, seed: int = 0, steps: int = 6000,
                     min_steps: int = 500) -> Cell:
    """Build and relax one cell for the given oxide formula-unit counts."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (len(OXIDES),) or np.any(counts < 0) or counts.sum() == 0:
        raise ValueError(f"counts must be {len(OXIDES)} non-negative ints, not all 0")
    rng = np.random.default_rng(seed)
    elements = _elements_from_counts(counts)
    n = elements.shape[0]
    if not N_ATOMS_RANGE[0] <= n <= N_ATOMS_RANGE[1]:
        raise ValueError(f"counts give {n} atoms; need {N_ATOMS_RANGE}")
    rho = additive_density(counts)
    mass_g = _MASS[elements].sum() / _AVOGADRO
    box = float((mass_g / rho) ** (1.0 / 3.0) * 1e8)
    pos0 = _random_packing(rng, n, box)
    pos, energy = relax(pos0, box, elements, seed=int(rng.integers(2**31)), steps=steps,
                        min_steps=min_steps)
    props = cell_properties(elements, pos, box, counts)
    props["energy_per_atom"] = energy / n
    return Cell(elements, pos, box, counts, props)


def generate(kind: str, n_cells: int, *, seed: int, n_atoms: tuple[int, int] = N_ATOMS_RANGE,
             steps: int = 6000, min_steps: int = 500) -> list[Cell]:
    """Generate ``n_cells`` relaxed, charge-balanced cells; deterministic for ``seed``.

    ``kind``: ``"silica"`` or ``"multi"``; ``n_atoms``: (lo, hi) inclusive range of the
    atom-count target, within [100, 800]; ``steps``/``min_steps``: melt-quench and FIRE
    step counts (see :func:`relax`).
    """
    _check_kind(kind)
    lo, hi = _check_range(n_atoms)
    if int(n_cells) < 1:
        raise ValueError(f"n_cells must be >= 1; got {n_cells!r}")
    if steps < 2 or min_steps < 0:
        raise ValueError(f"steps must be >= 2 and min_steps >= 0; got {steps}, {min_steps}")
    rng = np.random.default_rng(seed)
    cells = []
    for _ in range(int(n_cells)):
        target = int(rng.integers(lo, hi + 1))
        counts = draw_composition(rng, kind, target, n_atoms=(lo, hi))
        cells.append(cell_from_counts(counts, seed=int(rng.integers(2**31)), steps=steps,
                                      min_steps=min_steps))
    return cells


# ------------------------------------------------------------------------- analysis


def _distances(positions: np.ndarray, box: float) -> np.ndarray:
    p = np.asarray(positions, dtype=np.float64)
    d = p[:, None, :] - p[None, :, :]
    d -= box * np.rint(d / box)
    return np.sqrt(np.einsum("ijk,ijk->ij", d, d))


def min_distance(positions: np.ndarray, box: float) -> float:
    """Smallest minimum-image distance between two distinct atoms (A)."""
    r = _distances(positions, box)
    np.fill_diagonal(r, np.inf)
    return float(r.min())


def rdf(positions: np.ndarray, box: float, species_a_mask: np.ndarray | None = None,
        species_b_mask: np.ndarray | None = None, r_max: float | None = None,
        n_bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Partial radial distribution function g_ab(r) of a periodic cubic cell.

    ``g_ab(r) = V / n_pairs * (pairs i in a, j in b, i != j, at r) / (4 pi r^2 dr)`` with
    ``n_pairs = N_a N_b - |a & b|``, so g -> 1 for an uncorrelated system. ``None`` masks
    mean all atoms (the total g(r)); ``r_max`` defaults to and may not exceed ``box/2``.
    Returns (bin centres, g).
    """
    n = len(positions)
    a = np.ones(n, bool) if species_a_mask is None else np.asarray(species_a_mask, bool)
    b = np.ones(n, bool) if species_b_mask is None else np.asarray(species_b_mask, bool)
    if a.shape != (n,) or b.shape != (n,):
        raise ValueError("species masks must have one entry per atom")
    r_max = box / 2 if r_max is None else float(r_max)
    if not 0 < r_max <= box / 2 + 1e-9:
        raise ValueError(f"r_max must lie in (0, box/2 = {box / 2:.3f}]; got {r_max}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1; got {n_bins}")
    r = _distances(positions, box)[np.ix_(a, b)]
    same = np.flatnonzero(a)[:, None] == np.flatnonzero(b)[None, :]
    hist, edges = np.histogram(r[~same], bins=n_bins, range=(0.0, r_max))
    n_pairs = a.sum() * b.sum() - (a & b).sum()
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    g = hist * box**3 / max(n_pairs, 1) / shell
    return 0.5 * (edges[1:] + edges[:-1]), g


def coordination_numbers(positions: np.ndarray, box: float, elements: np.ndarray,
                         scale: float = 1.3) -> np.ndarray:
    """O neighbours of each cation within ``scale`` x its bond length (0 for O atoms)."""
    elements = np.asarray(elements)
    r = _distances(positions, box)
    cut = np.array([BOND_LENGTHS.get(e, 0.0) for e in ELEMENTS])[elements] * scale
    is_o = elements == _O
    return ((r < cut[:, None]) & is_o[None, :] & ~is_o[:, None]).sum(axis=1)


def bond_angles(positions: np.ndarray, box: float, center_mask: np.ndarray,
                neighbor_mask: np.ndarray, cutoff: float) -> np.ndarray:
    """Angles (degrees) neighbour-centre-neighbour for all neighbour pairs within
    ``cutoff`` of each centre atom, e.g. O-Si-O with centre Si, neighbour O, 2.0 A."""
    p = np.asarray(positions, dtype=np.float64)
    center_mask = np.asarray(center_mask, bool)
    neighbor_mask = np.asarray(neighbor_mask, bool)
    out = []
    for c in np.flatnonzero(center_mask):
        d = p[neighbor_mask] - p[c]
        d -= box * np.rint(d / box)
        r = np.linalg.norm(d, axis=1)
        v = d[(r < cutoff) & (r > 0)]
        if len(v) < 2:
            continue
        u = v / np.linalg.norm(v, axis=1, keepdims=True)
        cos = np.clip(u @ u.T, -1.0, 1.0)
        iu = np.triu_indices(len(u), 1)
        out.append(np.degrees(np.arccos(cos[iu])))
    return np.concatenate(out) if out else np.zeros(0)


def angle_distribution(cells, center: tuple[str, ...], neighbour: tuple[str, ...], *,
                       cutoff: float = 2.0, bins: int = 36) -> tuple[np.ndarray, np.ndarray, int]:
    """Pooled bond-angle distribution neighbour-centre-neighbour over ``cells`` (each
    ``(positions, box, elements)``), e.g. O-T-O with centres the network formers and
    neighbours O within ``cutoff`` A. Returns (bin centres in degrees, probability density
    per degree over [0, 180], number of angles); the density is zero when no angle exists."""
    c_idx = [ELEMENTS.index(e) for e in center]
    n_idx = [ELEMENTS.index(e) for e in neighbour]
    angles = [bond_angles(pos, box, np.isin(el, c_idx), np.isin(el, n_idx), cutoff)
              for pos, box, el in cells]
    a = np.concatenate(angles) if angles else np.zeros(0)
    edges = np.linspace(0.0, 180.0, bins + 1)
    hist, _ = np.histogram(a, bins=edges)
    dens = hist / max(hist.sum(), 1) / (edges[1] - edges[0])
    return 0.5 * (edges[1:] + edges[:-1]), dens, int(a.size)


def distribution_l1(x: np.ndarray, p: np.ndarray, q: np.ndarray) -> float:
    """``integral |p - q|`` on the uniform grid ``x`` (0 for equal densities, 2 for
    disjoint ones)."""
    return float(np.sum(np.abs(p - q)) * (x[1] - x[0]))


# -------------------------------------------------------------------------------- I/O

_FORMAT = 1


def save_cells(path: str | Path, cells: list[Cell]) -> None:
    """Write cells to one .npz (atomically: a temporary file, then ``os.replace``)."""
    path = Path(path)
    if not cells:
        raise ValueError("cells must be a non-empty list")
    keys = sorted(cells[0].properties)
    if any(sorted(c.properties) != keys for c in cells):
        raise ValueError("all cells must carry the same property names")
    arrays = {
        "format": np.array(_FORMAT),
        "elements_vocab": np.array(ELEMENTS),
        "oxide_names": np.array(OXIDE_NAMES),
        "offsets": np.cumsum([0] + [c.n_atoms for c in cells]),
        "elements": np.concatenate([c.elements for c in cells]).astype(np.int64),
        "positions": np.concatenate([c.positions for c in cells]).astype(np.float64),
        "box": np.array([c.box for c in cells], dtype=np.float64),
        "oxide_counts": np.stack([c.oxide_counts for c in cells]).astype(np.int64),
        "property_names": np.array(keys),
        "properties": np.array([[c.properties[k] for k in keys] for c in cells],
                               dtype=np.float64).reshape(len(cells), len(keys)),
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_cells(path: str | Path) -> list[Cell]:
    """Read cells written by :func:`save_cells`."""
    with np.load(Path(path), allow_pickle=False) as z:
        if int(z["format"]) != _FORMAT or tuple(z["elements_vocab"]) != ELEMENTS or tuple(
                z["oxide_names"]) != OXIDE_NAMES:
            raise ValueError(f"{path}: not a jaxkit.amgenc cell file of format {_FORMAT}")
        off = z["offsets"]
        names = [str(k) for k in z["property_names"]]
        return [
            Cell(z["elements"][off[i]:off[i + 1]].copy(), z["positions"][off[i]:off[i + 1]].copy(),
                 float(z["box"][i]), z["oxide_counts"][i].copy(),
                 {k: float(v) for k, v in zip(names, z["properties"][i], strict=True)})
            for i in range(len(off) - 1)
        ]
