"""Glass cells from published rigid-ion potentials: melt-quench molecular dynamics in JAX
(the ``dataset="published"`` option of AMGenC, :mod:`jaxkit.amgenc.data`).

Potentials (the kernels in :mod:`jaxkit.kernels.md`):

* **silica** (SiO2 only): BKS, van Beest, Kramer and van Santen, PRL 64, 1955 (1990):
  charges q_Si = 2.4, q_O = -1.2; Buckingham ``A exp(-b r) - C/r^6`` with Si-O
  A = 18003.7572 eV, b = 4.87318 1/A, C = 133.5381 eV A^6 and O-O A = 1388.7730 eV,
  b = 2.76 1/A, C = 175.0 eV A^6 (no Si-Si short-range term). BKS turns attractive
  without bound below about 1.2 A (Si-O) and 1.5 A (O-O), so at melt temperatures atoms
  can fuse; the usual fix adds a steep 30-6 wall ``4 eps [(s/r)^30 - (s/r)^6]``
  (Saika-Voivod, Sciortino, Grande and Poole, PRE 70, 061507, 2004), here with
  s_SiO = 1.313, s_OO = 1.779, s_SiSi = 0.4 A and eps_SiO = 3.0e-3, eps_OO = 1.2e-3,
  eps_SiSi = 1.277e-3 eV (values as recalled from that paper, not re-checked against
  it; the wall changes the pair energy by less than 0.2 eV above 1.2 A (Si-O) and
  1.5 A (O-O), i.e. it leaves the glass's bonded distances alone). One public
  implementation of the modified BKS (OpenMD's ``BKS.modified.frc``) lists
  (sigma 1.3136 A, eps 3.10e-3 eV) under O-O and (1.7792 A, 1.05e-3 eV) under Si-O,
  the other way round: a 30-6 wall at 1.78 A on Si-O would push on the 1.61 A bond
  (about 0.08 eV), so the assignment here keeps the tighter wall on Si-O; which one the
  paper prints is unverified;
* **every other composition**: Pedone, Malavasi, Menziani, Cormack and Segre, J. Phys.
  Chem. B 110, 11780 (2006): partial charges 0.6 x formal (O -1.2, Si 2.4, Al 1.8,
  P 3.0, Na/Li/K 0.6, Ca/Mg/Ba/Zn/Fe2+ 1.2, Fe3+ 1.8); cation-O Morse
  ``D [(1 - exp(-a (r - r0)))^2 - 1] + C/r^12`` and the O-O term of the same form, with
  the (D eV, a 1/A, r0 A, C eV A^12) of their Table 1 in :data:`PEDONE`; cation-cation
  pairs Coulomb only. Boron is not in that table, so B2O3 is not drawn here.

Coulomb is the damped shifted force (Fennell and Gezelter, J. Chem. Phys. 124, 234104,
2006) with ``alpha`` = :data:`ALPHA` = 0.2 1/A and ``Rc = min(`` :data:`R_COUL` ``= 10 A,
L/2)``; the short-range terms are truncated as a shifted force at
``min(`` :data:`R_SHORT` ``= 5.5 A, L/2)`` (Vollmayr, Kob and Binder, PRB 54, 15808,
1996, truncate BKS at 5.5 A). Pairs at their minimum image on the dense N x N matrix,
cells padded to :func:`jaxkit.amgenc.potential.padded_size` buckets with an atom mask
(one compiled program per bucket). Float32.

Protocol (:class:`Protocol`; NVT at a **fixed volume**: the cubic box is set from the
recipe's density, :func:`jaxkit.amgenc.glass.additive_density`, 2.20 g/cm^3 for
silica, so the density is imposed, not predicted; the pressure of the quenched cell is
reported instead, ``pressure_gpa``): random packing (no pair under 1.4 A),
Maxwell-Boltzmann velocities at the melt temperature, then velocity Verlet (dt 1 fs) with
the Berendsen thermostat (tau 50 fs): 1/4 of the steps held at ``t_melt`` (5000 K for
BKS silica, 4000 K for Pedone glasses), 1/2 cooled linearly to 300 K, 1/4 held at 300 K;
the cell is the last frame. With ``steps`` = 12,000 the quench runs at
(5000 - 300) K / 6 ps = 7.8e14 K/s (silica), far faster than experiment and faster
than the 1e12-1e13 K/s of production MD studies: the cells are small, fast-quenched
glasses.

Published structure of the glasses, the figures :func:`structure_summary` is checked
against (tests/jaxkit/test_amgenc_glass_md.py asserts the tiny-cell tolerances):

============================ ================ ============================================
quantity                      published        source
============================ ================ ============================================
Si-O bond length (a-SiO2)     1.608-1.62 A     Mozzi & Warren, J. Appl. Cryst. 2, 164
                                               (1969): 1.62; Grimley, Wright & Sinclair,
                                               JNCS 119, 49 (1990): 1.608
O-Si-O angle (a-SiO2)         109.4-109.5 deg  Grimley et al. (1990); the tetrahedral
                                               angle
Si coordination by O          4.0              all of the above
Si-O-Si angle peak (a-SiO2)   ~144-150 deg     Mozzi & Warren (1969): 144; Neuefeind &
                                               Liss, Ber. Bunsenges. 100, 1341 (1996): 147
density a-SiO2                2.20 g/cm^3      Brückner, JNCS 5, 123 (1970)
density Na2O.2SiO2 glass      ~2.49 g/cm^3     Shelby, Introduction to Glass Science and
                                               Technology (2005), tables
Si-O in sodium silicates      ~1.61-1.62 A     Pedone et al. (2006), their MD vs. neutron
                                               data
============================ ================ ============================================

Measured here (2026-12, default :class:`Protocol`, 12,000 steps, 300 K snapshots, two
seeds each): BKS a-SiO2 of 798 atoms: Si-O mode 1.61 A (mean within 2 A 1.622), Si
coordination 4.008 / 4.015, mean O-Si-O 109.3 deg, Si-O-Si mode (5-degree bins) 142.5 /
147.5 deg, pressure +0.26 / +0.33 GPa at 2.20 g/cm^3; 102 and 201 atoms: Si-O mode
1.61-1.63 A, coordination 4.00-4.06, O-Si-O 109.0-109.3 deg, Si-O-Si mode 142.5-162.5
deg (few angles per cell), -0.8 to +3.0 GPa. Pedone silicates of 104-201 atoms (Li, Na,
Ca, Al): Si-O mode 1.61-1.63 A, coordination 4.00, O-Si-O 109.3 deg, -0.1 to +2.1 GPa.

Tolerances of the tiny, fast-quenched test cell: Si-O peak in [1.55, 1.68] A, mean Si
coordination (O within 2.0 A) in [3.8, 4.3], mean O-Si-O in [104, 114] deg.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import md

from . import glass
from .analysis import bond_angles
from .potential import padded_size
from .tables import ELEMENTS, MASS, N_ATOMS_RANGE, OXIDE_NAMES, OXIDES

__all__ = ["ALPHA", "BKS", "PEDONE", "PEDONE_OXIDES", "R_COUL", "R_SHORT", "Protocol",
           "bks_table", "cell_from_counts", "generate", "melt_quench", "pedone_table",
           "structure_summary", "supports"]

ALPHA = 0.2  # 1/A, DSF damping
R_COUL = 10.0  # A
R_SHORT = 5.5  # A
BOND_CUTOFF = 2.0  # A, Si-O bonds for coordination and angles
DESCENT_STEPS = 300  # capped steepest-descent steps before the melt
_O = ELEMENTS.index("O")
_SI = ELEMENTS.index("Si")

#: BKS (van Beest et al. 1990): pair -> (A eV, b 1/A, C eV A^6), and the 30-6 wall
#: (eps eV, sigma A) of Saika-Voivod et al. (2004), values as recalled (module docstring)
BKS = {("Si", "O"): (18003.7572, 4.87318, 133.5381), ("O", "O"): (1388.7730, 2.76, 175.0)}
BKS_WALL = {("Si", "O"): (3.0e-3, 1.313), ("O", "O"): (1.2e-3, 1.779),
            ("Si", "Si"): (1.277e-3, 0.4)}
BKS_CHARGE = {"Si": 2.4, "O": -1.2}

#: Pedone et al. (2006), Table 1: species -> (charge e, D eV, a 1/A, r0 A, C eV A^12) of
#: its pair with O ("O": the O-O pair)
PEDONE: dict[str, tuple[float, float, float, float, float]] = {
    "Si": (2.4, 0.340554, 2.006700, 2.100000, 1.0),
    "Al": (1.8, 0.361581, 1.900442, 2.164818, 0.9),
    "P": (3.0, 0.831326, 2.585833, 1.800790, 1.0),
    "Li": (0.6, 0.001114, 3.429506, 2.681360, 1.0),
    "Na": (0.6, 0.023363, 1.763867, 3.006315, 5.0),
    "K": (0.6, 0.011612, 2.062605, 3.305308, 5.0),
    "Mg": (1.2, 0.038908, 2.281000, 2.586153, 5.0),
    "Ca": (1.2, 0.030211, 2.241334, 2.923245, 5.0),
    "Ba": (1.2, 0.065011, 1.547596, 3.393410, 5.0),
    "Zn": (1.2, 0.001221, 3.150679, 2.851850, 1.0),
    "Fe2+": (1.2, 0.078171, 1.822638, 2.658163, 2.0),
    "Fe3+": (1.8, 0.418981, 1.620376, 2.382183, 2.0),
    "O": (-1.2, 0.042395, 1.379316, 3.618701, 22.0),
}
#: oxides the published multi-component cells are drawn from (SiO2 always the former)
PEDONE_OXIDES = ("SiO2", "Al2O3", "Li2O", "Na2O", "K2O", "CaO", "MgO")
_MODIFIERS = ("Li2O", "Na2O", "K2O", "CaO", "MgO")


def _zeros() -> list[np.ndarray]:
    k = len(ELEMENTS)
    return [np.zeros((k, k)) for _ in range(9)]


def _table(charge, tabs, r_short: float, r_coul: float) -> md.PairTable:
    return md.PairTable(jnp.asarray(charge), *(jnp.asarray(t) for t in tabs),
                        r_short, r_coul, ALPHA)


def bks_table(r_short: float = R_SHORT, r_coul: float = R_COUL) -> md.PairTable:
    """The BKS silica :class:`jaxkit.kernels.md.PairTable` over :data:`ELEMENTS`
    (only Si and O have parameters), with the 30-6 wall.

    Args:
        r_short: short-range cutoff (A).
        r_coul: Coulomb cutoff (A).

    Returns:
        The table.
    """
    charge = np.array([BKS_CHARGE.get(e, 0.0) for e in ELEMENTS])
    a, b, c6, d, ma, r0, c12, eps, sig = _zeros()
    for (x, y), (pa, pb, pc) in BKS.items():
        i, j = ELEMENTS.index(x), ELEMENTS.index(y)
        a[i, j] = a[j, i] = pa
        b[i, j] = b[j, i] = pb
        c6[i, j] = c6[j, i] = pc
    for (x, y), (pe, ps) in BKS_WALL.items():
        i, j = ELEMENTS.index(x), ELEMENTS.index(y)
        eps[i, j] = eps[j, i] = pe
        sig[i, j] = sig[j, i] = ps
    return _table(charge, (a, b, c6, d, ma, r0, c12, eps, sig), r_short, r_coul)


def pedone_table(r_short: float = R_SHORT, r_coul: float = R_COUL) -> md.PairTable:
    """The Pedone (2006) :class:`jaxkit.kernels.md.PairTable` over :data:`ELEMENTS`
    (every species of :data:`PEDONE`; B has none).

    Args:
        r_short: short-range cutoff (A).
        r_coul: Coulomb cutoff (A).

    Returns:
        The table.
    """
    charge = np.array([PEDONE[e][0] if e in PEDONE else 0.0 for e in ELEMENTS])
    a, b, c6, d, ma, r0, c12, eps, sig = _zeros()
    for e, (_, pd, pa, pr, pc) in PEDONE.items():
        i = ELEMENTS.index(e)
        d[i, _O] = d[_O, i] = pd
        ma[i, _O] = ma[_O, i] = pa
        r0[i, _O] = r0[_O, i] = pr
        c12[i, _O] = c12[_O, i] = pc
    return _table(charge, (a, b, c6, d, ma, r0, c12, eps, sig), r_short, r_coul)


@dataclass(frozen=True)
class Protocol:
    """The melt-quench schedule (module docstring): ``steps`` velocity-Verlet steps of
    ``dt`` fs, 1/4 at ``t_melt`` (None: 5000 K for BKS silica, 4000 K otherwise), 1/2
    cooled linearly to ``t_final``, 1/4 at ``t_final``; Berendsen coupling ``tau`` fs."""

    steps: int = 12000
    dt: float = 1.0
    tau: float = 50.0
    t_melt: float | None = None
    t_final: float = 300.0

    def temperatures(self, silica: bool) -> np.ndarray:
        """(steps,) target temperature of every step (K)."""
        t_melt = self.t_melt if self.t_melt is not None else (5000.0 if silica else 4000.0)
        hold = self.steps // 4
        cool = self.steps // 2
        rest = self.steps - hold - cool
        return np.concatenate([np.full(hold, t_melt), np.linspace(t_melt, self.t_final, cool),
                               np.full(rest, self.t_final)])

    def quench_rate(self, silica: bool) -> float:
        """Cooling rate of the linear stage (K/s)."""
        t = self.temperatures(silica)
        return float((t[0] - self.t_final) / ((self.steps // 2) * self.dt * 1e-15))


@partial(jax.jit, static_argnames=("dt", "tau"))
def _md(pos, box, species, mask, masses, key, table, temps, *, dt, tau):
    def force_fn(x):
        return md.forces(x, box, species, mask, table)

    pos = md.descend(pos, box, mask, force_fn, DESCENT_STEPS)
    state = md.init_state(key, pos, masses, mask, temps[0], force_fn)
    out, trace = md.run(state, box, masses, mask, force_fn, temps, dt=dt, tau=tau)
    kin = md.kinetic_energy(out.vel, masses)
    pressure = (2.0 * kin + md.virial(out.pos, box, species, mask, table)) / (3.0 * box**3)
    return out.pos, out.energy, pressure, trace["temperature"]


def melt_quench(positions: np.ndarray, box: float, elements: np.ndarray, *, seed: int = 0,
                protocol: Protocol = Protocol()) -> tuple[np.ndarray, dict]:
    """Melt-quench one cell with the published potential of its composition (BKS for
    Si and O only, Pedone otherwise).

    Args:
        positions: (N, 3) starting positions (A), no pair closer than ~1.4 A.
        box: cubic edge (A).
        elements: (N,) indices into :data:`ELEMENTS`.
        seed: seed of the initial velocities.
        protocol: the :class:`Protocol`.

    Returns:
        ``(positions (N, 3) in [0, box), info)`` with ``energy_per_atom`` (eV),
        ``pressure_gpa``, ``final_temperature`` (K, mean of the last 10% of steps),
        ``seconds`` (wall time, compilation included) and ``potential`` ("bks"/"pedone").
    """
    elements = np.asarray(elements)
    n = int(elements.shape[0])
    if positions.shape != (n, 3):
        raise ValueError(f"positions must have shape ({n}, 3); got {positions.shape}")
    if protocol.steps < 4:
        raise ValueError(f"protocol.steps must be >= 4; got {protocol.steps}")
    silica = bool(np.all(np.isin(elements, [_SI, _O])))
    names = {ELEMENTS[i] for i in np.unique(elements)}
    if not silica and not names <= set(PEDONE):
        raise ValueError(f"elements: no Pedone parameters for {sorted(names - set(PEDONE))}")
    half = 0.5 * float(box)
    make = bks_table if silica else pedone_table
    table = make(min(R_SHORT, half), min(R_COUL, half))
    size = padded_size(n)
    pos = np.zeros((size, 3), np.float32)
    pos[:n] = np.mod(positions, box)
    pos[n:] = 0.5 * box
    el = np.full(size, _O, np.int32)
    el[:n] = elements
    mask = np.arange(size) < n
    masses = np.where(mask, MASS[el], 1.0).astype(np.float32)
    temps = protocol.temperatures(silica).astype(np.float32)
    table = jax.tree.map(lambda t: jnp.asarray(t, jnp.float32), table)
    t0 = time.perf_counter()
    out, energy, pressure, tt = _md(jnp.asarray(pos), jnp.float32(box), jnp.asarray(el),
                                    jnp.asarray(mask), jnp.asarray(masses),
                                    jax.random.key(seed), table, jnp.asarray(temps),
                                    dt=float(protocol.dt), tau=float(protocol.tau))
    out = np.asarray(out[:n], np.float64)
    tail = max(1, protocol.steps // 10)
    info = {"energy_per_atom": float(energy) / n,
            "pressure_gpa": float(pressure) * 160.21766,
            "final_temperature": float(np.mean(np.asarray(tt)[-tail:])),
            "seconds": time.perf_counter() - t0,
            "potential": "bks" if silica else "pedone"}
    return out, info


def supports(counts: np.ndarray) -> bool:
    """Whether every species of these oxide counts has a published potential here (BKS
    for SiO2 alone, Pedone otherwise; B2O3 has none)."""
    counts = np.asarray(counts)
    names = {OXIDES[i].cation for i in np.flatnonzero(counts)}
    return names <= set(PEDONE)


def cell_from_counts(counts: np.ndarray, *, seed: int = 0,
                     protocol: Protocol = Protocol()) -> glass.Cell:
    """One melt-quenched :class:`jaxkit.amgenc.glass.Cell` of the given oxide counts,
    in the box of the recipe's density (:func:`jaxkit.amgenc.glass.additive_density`).

    Args:
        counts: formula units per oxide of :data:`jaxkit.amgenc.tables.OXIDES`.
        seed: seed of the packing and the velocities.
        protocol: the :class:`Protocol`.

    Returns:
        The cell; its properties are those of the recipe's cells plus ``pressure_gpa``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (len(OXIDES),) or np.any(counts < 0) or counts.sum() == 0:
        raise ValueError(f"counts must be {len(OXIDES)} non-negative ints, not all 0")
    rng = np.random.default_rng(seed)
    elements = glass._elements_from_counts(counts)
    n = elements.shape[0]
    if not N_ATOMS_RANGE[0] <= n <= N_ATOMS_RANGE[1]:
        raise ValueError(f"counts give {n} atoms; need {N_ATOMS_RANGE}")
    rho = glass.additive_density(counts)
    box = float((MASS[elements].sum() / glass._AVOGADRO / rho) ** (1.0 / 3.0) * 1e8)
    pos0 = glass._random_packing(rng, n, box)
    pos, info = melt_quench(pos0, box, elements, seed=int(rng.integers(2**31)),
                            protocol=protocol)
    props = glass.cell_properties(elements, pos, box, counts)
    props["energy_per_atom"] = info["energy_per_atom"]
    props["pressure_gpa"] = info["pressure_gpa"]
    return glass.Cell(elements, pos, box, counts, props)


def _draw_counts(rng: np.random.Generator, kind: str, target: int) -> np.ndarray:
    """Oxide counts near ``target`` atoms: SiO2 only (silica), or SiO2 with 1-2 of
    :data:`_MODIFIERS` (10-35 mol% in all) and, half the time, 0-10 mol% Al2O3."""
    counts = np.zeros(len(OXIDES), np.int64)
    x = np.zeros(len(OXIDES))
    if kind == "silica":
        x[OXIDE_NAMES.index("SiO2")] = 1.0
    else:
        mods = rng.choice(len(_MODIFIERS), size=int(rng.integers(1, 3)), replace=False)
        f_mod = rng.uniform(0.10, 0.35)
        f_al = rng.uniform(0.0, 0.10) if rng.random() < 0.5 else 0.0
        for i, w in zip(mods, rng.dirichlet(np.ones(len(mods))), strict=True):
            x[OXIDE_NAMES.index(_MODIFIERS[i])] = f_mod * w
        x[OXIDE_NAMES.index("Al2O3")] = f_al
        x[OXIDE_NAMES.index("SiO2")] = 1.0 - f_mod - f_al
    per_mol = float(sum(xi * o.n_atoms for xi, o in zip(x, OXIDES, strict=True)))
    present = np.flatnonzero(x > 0)
    counts[present] = np.maximum(np.rint(x[present] * target / per_mol), 1)
    si = OXIDE_NAMES.index("SiO2")
    while glass._n_atoms(counts) > N_ATOMS_RANGE[1]:
        counts[si] -= 1
    while glass._n_atoms(counts) < N_ATOMS_RANGE[0]:
        counts[si] += 1
    return counts


def generate(kind: str, n_cells: int, *, rng: np.random.Generator,
             n_atoms: tuple[int, int] = N_ATOMS_RANGE,
             protocol: Protocol = Protocol()) -> list[glass.Cell]:
    """``n_cells`` melt-quenched cells of ``kind`` (``"silica"``: BKS a-SiO2;
    ``"multi"``: Pedone silicate glasses of :data:`PEDONE_OXIDES`), drawn from ``rng``.

    Args:
        kind: ``"silica"`` or ``"multi"``.
        n_cells: number of cells (>= 1).
        rng: the NumPy stream of compositions, packings and velocity seeds.
        n_atoms: (lo, hi) range of the atom-count target, within [100, 800].
        protocol: the :class:`Protocol`.

    Returns:
        The cells, in drawing order.
    """
    glass._check_kind(kind)
    lo, hi = glass._check_range(n_atoms)
    if int(n_cells) < 1:
        raise ValueError(f"n_cells must be >= 1; got {n_cells!r}")
    cells = []
    for _ in range(int(n_cells)):
        counts = _draw_counts(rng, kind, int(rng.integers(lo, hi + 1)))
        cells.append(cell_from_counts(counts, seed=int(rng.integers(2**31)),
                                      protocol=protocol))
    return cells


def structure_summary(cell: glass.Cell) -> dict[str, float]:
    """The validation figures of a cell (module docstring table): ``si_o_bond`` (A, mean
    Si-O distance within :data:`BOND_CUTOFF`), ``si_o_peak`` (A, mode of those distances,
    0.02 A bins), ``si_cn`` (mean O neighbours of Si within
    it), ``o_si_o`` (mean angle, deg), ``si_o_si_peak`` (mode of the Si-O-Si angles,
    5-degree bins), ``density`` (g/cm^3)."""
    pos, box, el = cell.positions, cell.box, cell.elements
    si, ox = el == _SI, el == _O
    d = pos[si][:, None, :] - pos[ox][None, :, :]
    d -= box * np.rint(d / box)
    r = np.sqrt(np.sum(d * d, axis=-1))
    bonded = r < BOND_CUTOFF
    o_si_o = bond_angles(pos, box, si, ox, BOND_CUTOFF)
    si_o_si = bond_angles(pos, box, ox, si, BOND_CUTOFF)
    hist, edges = np.histogram(si_o_si, bins=np.arange(90.0, 181.0, 5.0))
    peak = float(0.5 * (edges[np.argmax(hist)] + edges[np.argmax(hist) + 1])) \
        if si_o_si.size else float("nan")
    h, e = np.histogram(r[bonded], bins=np.arange(1.4, 2.0001, 0.02))
    return {"si_o_bond": float(r[bonded].mean()) if bonded.any() else float("nan"),
            "si_o_peak": float(0.5 * (e[np.argmax(h)] + e[np.argmax(h) + 1]))
            if bonded.any() else float("nan"),
            "si_cn": float(bonded.sum(1).mean()) if si.any() else float("nan"),
            "o_si_o": float(np.mean(o_si_o)) if o_si_o.size else float("nan"),
            "si_o_si_peak": peak, "density": cell.density}
