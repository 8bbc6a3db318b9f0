"""The tables of the AMGenC glass recipe: elements (iron as two species, Fe2+ and Fe3+),
formal oxidation states, atomic masses, the oxide formula units with their partial
densities in glass, and the cation-oxygen bond lengths and typical coordination numbers.

Units: Angstrom, g/mol, g/cm^3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "BOND_LENGTHS",
    "ELEMENTS",
    "FORMERS",
    "KINDS",
    "MAX_MODIFIER_FRACTION",
    "MODIFIERS",
    "N_ATOMS_RANGE",
    "OXIDATION_STATES",
    "SYMBOLS",
    "OXIDES",
    "OXIDE_NAMES",
    "TYPICAL_CN",
    "Oxide",
    "box_edges",
    "box_volume",
    "is_cubic",
    "mass_density",
]


#: Species vocabulary; a cell stores per-atom indices into this tuple. Iron enters as two
#: species, Fe2+ (in FeO) and Fe3+ (in Fe2O3), so that a cell's charge balance depends on
#: which oxidation state each Fe atom takes; every other element has one. O is last.
ELEMENTS: tuple[str, ...] = (
    "Si", "B", "Al", "P", "Li", "Na", "K", "Ca", "Mg", "Zn", "Ba", "Fe2+", "Fe3+", "O",
)
#: Chemical symbol of every entry of :data:`ELEMENTS` (what XYZ / CIF files hold).
SYMBOLS: tuple[str, ...] = tuple("Fe" if e.startswith("Fe") else e for e in ELEMENTS)
_O = ELEMENTS.index("O")

#: Formal oxidation states used for the charge balance.
OXIDATION_STATES: dict[str, int] = {
    "Si": 4, "B": 3, "Al": 3, "P": 5, "Li": 1, "Na": 1, "K": 1,
    "Ca": 2, "Mg": 2, "Zn": 2, "Ba": 2, "Fe2+": 2, "Fe3+": 3, "O": -2,
}

# Standard atomic weights (IUPAC 2021 abridged/conventional values), g/mol.
_ATOMIC_MASS: dict[str, float] = {
    "Si": 28.085, "B": 10.81, "Al": 26.982, "P": 30.974, "Li": 6.94, "Na": 22.990,
    "K": 39.098, "Ca": 40.078, "Mg": 24.305, "Zn": 65.38, "Ba": 137.33, "Fe2+": 55.845,
    "Fe3+": 55.845, "O": 15.999,
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
# FeO ~13.7 and Fe2O3 ~42 cm^3/mol (silicate melts, order of magnitude).
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
    Oxide("FeO", "Fe2+", 1, 1, 5.24, False),
    Oxide("Fe2O3", "Fe3+", 2, 3, 3.80, False),
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
    "Ca": 2.35, "Mg": 2.05, "Zn": 1.96, "Ba": 2.75, "Fe2+": 2.10, "Fe3+": 1.95,
}
#: Typical O coordination of each cation, used only for the Pauling bond strength z/CN.
TYPICAL_CN: dict[str, int] = {
    "Si": 4, "B": 3, "Al": 4, "P": 4, "Li": 4, "Na": 6, "K": 8, "Ca": 6, "Mg": 6,
    "Zn": 4, "Ba": 8, "Fe2+": 6, "Fe3+": 5,
}
_AVOGADRO = 6.02214076e23
MASS = np.array([_ATOMIC_MASS[e] for e in ELEMENTS])
_CHARGE = np.array([OXIDATION_STATES[e] for e in ELEMENTS], dtype=np.int64)
_OXIDE_ELEMENT = np.array([ELEMENTS.index(o.cation) for o in OXIDES])


def box_edges(box) -> np.ndarray:
    """The three edges (A) of a cell's box: a cubic edge (a number) or the (3,) edges of
    an orthorhombic box."""
    b = np.asarray(box, np.float64)
    return np.full(3, float(b)) if b.ndim == 0 else b.reshape(3)


def box_volume(box) -> float:
    """Volume (A^3) of a cubic (edge) or orthorhombic ((3,) edges) box."""
    b = np.asarray(box, np.float64)
    return float(b**3) if b.ndim == 0 else float(np.prod(b))


def is_cubic(box) -> bool:
    """Whether a box is cubic (a number, or three equal edges)."""
    e = box_edges(box)
    return bool(np.ptp(e) <= 1e-9 * e.max())


def mass_density(elements: np.ndarray, box) -> float:
    """Mass density (g/cm^3) of atoms with element indices ``elements`` (into
    :data:`ELEMENTS`) in a cubic box of edge ``box`` Angstrom (or an orthorhombic box of
    (3,) edges)."""
    vol = (box * 1e-8) ** 3 if np.ndim(box) == 0 else box_volume(box) * 1e-24  # cm^3
    return float(MASS[np.asarray(elements)].sum() / _AVOGADRO / vol)

