"""Reproducible, charge-balanced amorphous oxide cells (the AMGenC data recipe).

No amorphous structure data set ships in any installable package, so jaxkit generates
its own with the recipe below. Every step is seeded, so ``generate(kind, n, seed=s)``
returns the same cells on every run of the same software stack.

1. **Composition** (:func:`draw_composition`). A cell is an integer number of oxide
   formula units (SiO2, B2O3, Al2O3, P2O5, Li2O, Na2O, K2O, CaO, MgO, ZnO, BaO). Each unit
   is neutral under the formal oxidation states of :data:`OXIDATION_STATES`, so every
   cell is *exactly* charge balanced. Iron enters as FeO (Fe2+) and Fe2O3 (Fe3+), two
   species of one element. ``"silica"``: SiO2 only. ``"multi"``: 1-3 network
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

Layout: the tables live in :mod:`jaxkit.amgenc.tables`, the potential and the
relaxations in :mod:`jaxkit.amgenc.potential`, the structure analysis (RDF, angles,
coordination) in :mod:`jaxkit.amgenc.analysis`; this module holds compositions, cells,
generation and the .npz I/O, and re-exports the public names of the other three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from jaxkit.io import atomic_open

from . import analysis, potential, tables
from .analysis import angle_distribution as angle_distribution
from .analysis import bond_angles as bond_angles
from .analysis import coordination_numbers, min_distance
from .analysis import distribution_l1 as distribution_l1
from .analysis import rdf as rdf
from .potential import CUTOFF as CUTOFF
from .potential import KT_MELT as KT_MELT
from .potential import minimize as minimize
from .potential import padded_size as padded_size
from .potential import pair_energy as pair_energy
from .potential import relax
from .tables import (
    _AVOGADRO,
    _CHARGE,
    _OXIDE_ELEMENT,
    ELEMENTS,
    FORMERS,
    KINDS,
    MASS,
    MAX_MODIFIER_FRACTION,
    MODIFIERS,
    N_ATOMS_RANGE,
    OXIDE_NAMES,
    OXIDES,
    SYMBOLS,
    box_edges,
    box_volume,
    is_cubic,
    mass_density,
)
from .tables import BOND_LENGTHS as BOND_LENGTHS
from .tables import OXIDATION_STATES as OXIDATION_STATES
from .tables import TYPICAL_CN as TYPICAL_CN
from .tables import Oxide as Oxide

# the public names of the three modules this one re-exports, then its own
__all__ = [
    *tables.__all__,
    *potential.__all__,
    *analysis.__all__,
    "Cell",
    "additive_density",
    "cell_from_counts",
    "draw_composition",
    "generate",
    "load_cells",
    "save_cells",
]

_O = ELEMENTS.index("O")
MIN_INIT_DISTANCE = 1.4  # A, random sequential addition


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
    ``positions``: (N, 3) Angstrom in [0, box); ``box``: cubic edge (A), or the (3,)
    edges of an orthorhombic box (your own cells only; :func:`box_edges`);
    ``oxide_counts``: formula units per oxide of :data:`OXIDES`;
    ``properties``: float descriptors (see :func:`cell_properties`).
    """

    elements: np.ndarray
    positions: np.ndarray
    box: float | np.ndarray
    oxide_counts: np.ndarray
    properties: dict[str, float] = field(default_factory=dict)

    @property
    def n_atoms(self) -> int:
        return int(self.elements.shape[0])

    @property
    def symbols(self) -> list[str]:
        return [SYMBOLS[i] for i in self.elements]

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
        "density": mass_density(elements, box),
        "number_density": float(elements.shape[0] / box_volume(box)),
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
    mass_g = MASS[elements].sum() / _AVOGADRO
    box = float((mass_g / rho) ** (1.0 / 3.0) * 1e8)
    pos0 = _random_packing(rng, n, box)
    pos, energy = relax(pos0, box, elements, seed=int(rng.integers(2**31)), steps=steps,
                        min_steps=min_steps)
    props = cell_properties(elements, pos, box, counts)
    props["energy_per_atom"] = energy / n
    return Cell(elements, pos, box, counts, props)


def generate(kind: str, n_cells: int, *, seed: int | None = None,
             rng: np.random.Generator | None = None,
             n_atoms: tuple[int, int] = N_ATOMS_RANGE, steps: int = 6000,
             min_steps: int = 500) -> list[Cell]:
    """Generate ``n_cells`` relaxed, charge-balanced cells; deterministic for ``seed``
    (or for the state of ``rng``).

    Args:
        kind: ``"silica"`` or ``"multi"``.
        n_cells: number of cells (>= 1).
        seed: seed of the NumPy stream that draws compositions, packings and the
            melt-quench keys; give this or ``rng``.
        rng: that stream itself (e.g. ``RunContext.rng("data")``); give this or ``seed``.
        n_atoms: (lo, hi) inclusive range of the atom-count target, within [100, 800].
        steps: melt-quench steps (see :func:`jaxkit.amgenc.potential.relax`).
        min_steps: FIRE steps after the quench.

    Returns:
        The cells, in drawing order.
    """
    _check_kind(kind)
    lo, hi = _check_range(n_atoms)
    if int(n_cells) < 1:
        raise ValueError(f"n_cells must be >= 1; got {n_cells!r}")
    if steps < 2 or min_steps < 0:
        raise ValueError(f"steps must be >= 2 and min_steps >= 0; got {steps}, {min_steps}")
    if (seed is None) == (rng is None):
        raise ValueError("give exactly one of `seed` and `rng`")
    rng = np.random.default_rng(seed) if rng is None else rng
    cells = []
    for _ in range(int(n_cells)):
        target = int(rng.integers(lo, hi + 1))
        counts = draw_composition(rng, kind, target, n_atoms=(lo, hi))
        cells.append(cell_from_counts(counts, seed=int(rng.integers(2**31)), steps=steps,
                                      min_steps=min_steps))
    return cells


# -------------------------------------------------------------------------------- I/O

_FORMAT = 1


def save_cells(path: str | Path, cells: list[Cell]) -> None:
    """Write cells to one .npz, atomically (:func:`jaxkit.io.atomic_open`)."""
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
        # cubic edges (n,), or (n, 3) edges when a cell is orthorhombic
        "box": (np.array([c.box for c in cells], dtype=np.float64)
                if all(np.ndim(c.box) == 0 for c in cells)
                else np.stack([box_edges(c.box) for c in cells])),
        "oxide_counts": np.stack([c.oxide_counts for c in cells]).astype(np.int64),
        "property_names": np.array(keys),
        "properties": np.array([[c.properties[k] for k in keys] for c in cells],
                               dtype=np.float64).reshape(len(cells), len(keys)),
    }
    with atomic_open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _box_of(row: np.ndarray):
    """A stored box: the cubic edge as a float, or the (3,) orthorhombic edges."""
    row = np.asarray(row, np.float64)
    if row.ndim == 0:
        return float(row)
    return float(row[0]) if is_cubic(row) else row.copy()


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
                 _box_of(z["box"][i]), z["oxide_counts"][i].copy(),
                 {k: float(v) for k, v in zip(names, z["properties"][i], strict=True)})
            for i in range(len(off) - 1)
        ]
