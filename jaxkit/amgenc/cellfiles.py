"""The generated cells as files: extended XYZ and CIF written with ase, atomically, one
file pair per sampled arm (:func:`cell_files`), each frame's comment naming its arm,
target, total charge and whether the target lies outside the training range."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxkit.io import atomic_open

from . import glass
from . import model as M
from .evaluate import box_of
from .results import Evaluation
from .sample import Samples

__all__ = ["write_cells", "cell_files"]


def write_cells(stem: Path, frames: list[tuple[list[str], np.ndarray, float, str]]
                ) -> list[Path]:
    """Write cells with ase, atomically: ``STEM.xyz`` (extended XYZ, one frame per cell,
    periodic cubic or orthorhombic lattice) and ``STEM.cif`` (one data block per cell).
    ``frames``: (symbols, Cartesian positions, box edge or (3,) edges, comment) per
    cell."""
    from ase import Atoms
    from ase.io import write

    atoms = [Atoms(symbols=symbols, positions=pos, cell=glass.box_edges(box), pbc=True,
                   info={"comment": comment}) for symbols, pos, box, comment in frames]
    paths = [stem.with_suffix(".xyz"), stem.with_suffix(".cif")]
    for path, fmt, mode in zip(paths, ("extxyz", "cif"), ("w", "wb"), strict=True):
        with atomic_open(path, mode) as fh:  # ase writes CIF as bytes
            write(fh, atoms, format=fmt)
    return paths


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name.split(" (")[0]).strip("_")


def cell_files(out: Path, samples: Samples, ev: Evaluation, prefix: str = "amgenc"
               ) -> list[Path]:
    """The cells of every arm as ``out/<prefix>_<arm>.{xyz,cif}``; each frame's comment
    gives the arm, the target, the total charge and whether the target lies outside the
    training range (``extrapolated=1``)."""
    _, q = M.species_charges()
    out_set = set(ev.baselines.outside_targets)
    files = []
    for name, arm in samples.arms.items():
        frames = []
        for i, t in enumerate(samples.target_index):
            m = samples.mask[i]
            sp = arm.species[i][m]
            box = box_of(samples.box[i])
            frames.append(([glass.SYMBOLS[s] if s >= 0 else "X" for s in sp],
                           arm.x[i][m] * box, box,
                           f"arm={_slug(name)} target={int(t)} "
                           f"charge={int(q[np.maximum(sp, 0)].sum())} "
                           f"extrapolated={int(t in out_set)}"))
        files += write_cells(out / f"{prefix}_{_slug(name)}", frames)
    return files
