"""Molecular dynamics of rigid-ion oxide glasses: pair potentials with damped
shifted-force Coulomb (:mod:`.pair`) and velocity Verlet with a Berendsen thermostat
(:mod:`.verlet`), for melt-quench generation of glass cells, and FIRE energy
minimisation (:mod:`.fire`) for relaxing a cell before it is scored. Dense
minimum-image pairs (cubic or orthorhombic cells) with an atom mask (fixed shapes, no
neighbour list)."""

from .fire import fire
from .pair import COULOMB, PairTable, energy, forces, pair_terms, virial
from .verlet import ACCEL, KB, MDState, descend, init_state, kinetic_energy, run, temperature

__all__ = ["ACCEL", "COULOMB", "KB", "MDState", "PairTable", "descend", "energy", "fire",
           "forces", "init_state", "kinetic_energy", "pair_terms", "run", "temperature", "virial"]
