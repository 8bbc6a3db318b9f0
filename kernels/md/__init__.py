"""Molecular dynamics of rigid-ion oxide glasses: pair potentials with damped
shifted-force Coulomb (:mod:`.pair`) and velocity Verlet with a Berendsen thermostat
(:mod:`.verlet`), for melt-quench generation of glass cells. Dense minimum-image pairs
with an atom mask (fixed shapes, no neighbour list)."""

from .pair import COULOMB, PairTable, energy, forces, pair_terms, virial
from .verlet import ACCEL, KB, MDState, descend, init_state, kinetic_energy, run, temperature

__all__ = ["ACCEL", "COULOMB", "KB", "MDState", "PairTable", "descend", "energy", "forces",
           "init_state", "kinetic_energy", "pair_terms", "run", "temperature", "virial"]
