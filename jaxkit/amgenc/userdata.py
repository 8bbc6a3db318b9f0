"""Your own amorphous cells for AMGenC: extended XYZ or CIF files read with ase (or the
pipeline's own ``.npz`` of :func:`jaxkit.amgenc.glass.save_cells`), turned into
:class:`jaxkit.amgenc.glass.Cell` objects for training (``user_train``) or as
held-out targets (``user_test``).

Requirements of a frame: a periodic cubic or orthorhombic cell (three orthogonal
lattice vectors along x, y, z; a triclinic cell is a one-line error naming the file),
elements of the glass vocabulary (:data:`jaxkit.amgenc.glass.SYMBOLS`), an atom count
within [100, 800], and a charge-balanced assignment of oxidation states: iron (Fe2+ or
Fe3+) gets its states from the exact discrete projection
(:func:`jaxkit.kernels.charge.project_discrete` over the species each atom's element
allows), every other element has one state. The formula units of the cell (its
``oxide_counts``) follow from the species when they are whole numbers; the twin of a
held-out user cell (the plausibility yardstick) is another of your cells of the same
species counts and box, else a cell the data recipe builds
(:func:`jaxkit.amgenc.data.make_data`).

Errors name the file and, for extended XYZ and CIF atom-site rows, the line
(``cells.xyz:14: ...``); a frame-level problem names the frame.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from jaxkit.io import DataError
from jaxkit.kernels import charge

from . import glass
from .potential import padded_size
from .tables import ELEMENTS, N_ATOMS_RANGE, OXIDATION_STATES, OXIDES, SYMBOLS

__all__ = ["UserDataError", "read_cells", "assign_species", "oxide_counts"]

_Q = np.array([OXIDATION_STATES[e] for e in ELEMENTS], np.int64)


class UserDataError(DataError):
    """A user structure file that cannot be used; the message names file and line (a
    :class:`jaxkit.io.DataError`, which ``jaxkit run`` prints as one line)."""


def _check_xyz(path: Path, text: str) -> None:
    lines = text.splitlines()
    i, frame = 0, 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        try:
            n = int(lines[i].split()[0])
        except ValueError:
            raise UserDataError(f"{path}:{i + 1}: frame {frame}: expected the atom count, "
                                f"got {lines[i].strip()[:40]!r}") from None
        if i + 1 >= len(lines) or "Lattice=" not in lines[i + 1]:
            raise UserDataError(f"{path}:{i + 2}: frame {frame}: the comment line must give "
                                'Lattice="ax ay az bx by bz cx cy cz" (a periodic cell)')
        for j in range(i + 2, i + 2 + n):
            if j >= len(lines):
                raise UserDataError(f"{path}:{j + 1}: frame {frame}: file ends after "
                                    f"{j - i - 2} of {n} atom lines")
            parts = lines[j].split()
            try:
                if len(parts) < 4:
                    raise ValueError
                [float(v) for v in parts[1:4]]
            except ValueError:
                raise UserDataError(f"{path}:{j + 1}: frame {frame}: expected 'symbol x y "
                                    f"z', got {lines[j].strip()[:60]!r}") from None
        i += 2 + n
        frame += 1


def _check_cif(path: Path, text: str) -> None:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "loop_":
            heads, j = [], i + 1
            while j < len(lines) and lines[j].strip().startswith("_"):
                heads.append(lines[j].split()[0])
                j += 1
            cols = [k for k, h in enumerate(heads) if h.startswith(("_atom_site_fract_",
                                                                   "_atom_site_Cartn_"))]
            while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith(
                    ("_", "loop_", "data_")):
                parts = lines[j].split()
                for k in cols:
                    try:
                        float(parts[k].split("(")[0])
                    except (ValueError, IndexError):
                        raise UserDataError(f"{path}:{j + 1}: {heads[k]}: not a number in "
                                            f"{lines[j].strip()[:60]!r}") from None
                j += 1
            i = j
        else:
            i += 1


def assign_species(symbols: list[str], where: str) -> np.ndarray:
    """Species indices (into :data:`ELEMENTS`) of atoms with chemical ``symbols``:
    the element's only species, or for Fe the state the exact discrete projection picks
    for a balanced cell (ties: the lowest-index solution of the DP)."""
    unknown = sorted(set(symbols) - set(SYMBOLS))
    if unknown:
        raise UserDataError(f"{where}: elements {unknown} are not in the glass vocabulary "
                            f"{sorted(set(SYMBOLS))}")
    sym = np.array(SYMBOLS)
    n = len(symbols)
    size = padded_size(n)  # one compiled projection per size bucket
    allowed = np.ones((size, len(SYMBOLS)), bool)
    allowed[:n] = [sym == s for s in symbols]
    res = _project(np.zeros(allowed.shape, np.float32), allowed, np.arange(size) < n)
    if not bool(res.feasible):
        raise UserDataError(f"{where}: no charge-balanced assignment of oxidation states "
                            "exists for this composition")
    return np.asarray(res.assignment, np.int64)[:n]


@jax.jit
def _project(cost, allowed, mask):
    return charge.project_discrete(cost, _Q, allowed=allowed, mask=mask)


def oxide_counts(elements: np.ndarray) -> np.ndarray | None:
    """Formula units per oxide of :data:`OXIDES` when the cations and O make whole units,
    else None."""
    counts = np.zeros(len(OXIDES), np.int64)
    n_o = 0
    for k, o in enumerate(OXIDES):
        n = int((elements == ELEMENTS.index(o.cation)).sum())
        if n % o.n_cation:
            return None
        counts[k] = n // o.n_cation
        n_o += counts[k] * o.n_oxygen
    return counts if n_o == int((elements == ELEMENTS.index("O")).sum()) else None


def _read_npz(path: Path) -> list[glass.Cell]:
    """Cells of the pipeline's own format (:func:`jaxkit.amgenc.glass.save_cells`), with
    the checks of the text formats (atom count, balanced species, a positive box)."""
    try:
        cells = glass.load_cells(path)
    except (ValueError, KeyError, OSError, IndexError) as e:
        raise UserDataError(f"{path}: not a jaxkit.amgenc cell file ({e})") from None
    if not cells:
        raise UserDataError(f"{path}: no structure in the file")
    out = []
    for f, c in enumerate(cells):
        where = f"{path}: cell {f}"
        if not N_ATOMS_RANGE[0] <= c.n_atoms <= N_ATOMS_RANGE[1]:
            raise UserDataError(f"{where}: {c.n_atoms} atoms; the model handles "
                                f"{N_ATOMS_RANGE}")
        if not (np.all(np.isfinite(c.box)) and np.all(np.asarray(c.box) > 0)
                and np.all(np.isfinite(c.positions))):
            raise UserDataError(f"{where}: the box and positions must be finite, box > 0")
        if np.any(c.elements < 0) or np.any(c.elements >= len(ELEMENTS)):
            raise UserDataError(f"{where}: species outside the glass vocabulary")
        if int(_Q[c.elements].sum()) != 0:
            raise UserDataError(f"{where}: total charge {int(_Q[c.elements].sum()):+d} with "
                                "the formal oxidation states; the cells must be balanced")
        out.append(glass.Cell(c.elements, np.mod(c.positions, c.box), c.box,
                              c.oxide_counts, dict(c.properties)))
    return out


def read_cells(path: str | Path) -> list[glass.Cell]:
    """Every frame of an extended XYZ (``.xyz``/``.extxyz``) or CIF (``.cif``) file, or
    every cell of the pipeline's own ``.npz`` (:func:`jaxkit.amgenc.glass.save_cells`),
    as a :class:`jaxkit.amgenc.glass.Cell` (see the module docstring for the
    requirements)."""
    from ase.io import read

    path = Path(path)
    if not path.is_file():
        raise UserDataError(f"{path}: no such file")
    fmt = {".xyz": "extxyz", ".extxyz": "extxyz", ".cif": "cif",
           ".npz": "npz"}.get(path.suffix.lower())
    if fmt is None:
        raise UserDataError(f"{path}: unknown format; use .xyz / .extxyz, .cif or the "
                            "pipeline's own .npz (jaxkit.amgenc.glass.save_cells)")
    if fmt == "npz":
        return _read_npz(path)
    text = path.read_text(errors="replace")
    (_check_xyz if fmt == "extxyz" else _check_cif)(path, text)
    try:
        frames = read(path, index=":", format=fmt)
    except Exception as e:  # ase raises many types; keep the file name
        raise UserDataError(f"{path}: ase could not read it: {type(e).__name__}: {e}") from e
    if not frames:
        raise UserDataError(f"{path}: no structure in the file")
    cells = []
    for f, atoms in enumerate(frames):
        where = f"{path}: frame {f}"
        lat = np.asarray(atoms.cell.array, float)
        edges = np.diag(lat).copy()
        scale = max(float(np.abs(lat).max()), 1.0)
        if not atoms.pbc.all() or np.any(edges <= 0):
            raise UserDataError(f"{where}: the cell must be periodic with positive edges "
                                f"(lattice {np.round(lat, 3).tolist()}, pbc "
                                f"{atoms.pbc.tolist()})")
        if not np.allclose(lat, np.diag(edges), atol=1e-4 * scale):
            raise UserDataError(f"{where}: a triclinic (non-orthogonal) cell is not supported: "
                                "the minimum image of jaxkit.kernels.md and of the model is "
                                "orthorhombic (lattice "
                                f"{np.round(lat, 3).tolist()}); give a cubic or orthorhombic cell")
        box = float(edges[0]) if np.ptp(edges) <= 1e-4 * scale else edges
        n = len(atoms)
        if not N_ATOMS_RANGE[0] <= n <= N_ATOMS_RANGE[1]:
            raise UserDataError(f"{where}: {n} atoms; the model handles {N_ATOMS_RANGE}")
        el = assign_species(atoms.get_chemical_symbols(), where)
        pos = np.mod(atoms.get_positions(), box)
        counts = oxide_counts(el)
        props = {"density": glass.mass_density(el, box)}
        cells.append(glass.Cell(el, pos, box, counts if counts is not None
                                else np.zeros(len(OXIDES), np.int64), props))
    return cells
