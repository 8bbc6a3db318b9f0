"""AMGenC user data: extended XYZ and CIF cells read back with their species (iron's
oxidation states chosen by the exact projection), errors that name the file and line,
and the data stage reading held-out cells from a file."""

import numpy as np
import pytest

from jaxkit.amgenc import glass
from jaxkit.amgenc import userdata as U
from jaxkit.amgenc.report import write_cells

FE2, FE3 = glass.ELEMENTS.index("Fe2+"), glass.ELEMENTS.index("Fe3+")


def _counts(**k):
    c = np.zeros(len(glass.OXIDES), int)
    for name, v in k.items():
        c[glass.OXIDE_NAMES.index(name)] = v
    return c


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    cells = [glass.cell_from_counts(_counts(SiO2=23, FeO=6, Fe2O3=4), seed=0, steps=30,
                                    min_steps=10),
             glass.cell_from_counts(_counts(SiO2=30, Na2O=4), seed=1, steps=30,
                                    min_steps=10)]
    stem = tmp_path_factory.mktemp("user") / "mine"
    write_cells(stem, [(c.symbols, c.positions, c.box, "user") for c in cells])
    return cells, stem


@pytest.mark.parametrize("suffix", [".xyz", ".cif"])
def test_round_trip_recovers_species_and_iron_states(written, suffix):
    cells, stem = written
    back = U.read_cells(stem.with_suffix(suffix))
    assert len(back) == 2
    for a, b in zip(cells, back, strict=True):
        assert b.box == pytest.approx(a.box, rel=1e-5)
        np.testing.assert_allclose(b.positions, a.positions, atol=2e-3)
        # the file says only "Fe": the projection recovers 6 Fe2+ and 8 Fe3+
        assert np.bincount(b.elements, minlength=len(glass.ELEMENTS)).tolist() == \
            np.bincount(a.elements, minlength=len(glass.ELEMENTS)).tolist()
        assert int(b.charges.sum()) == 0
        np.testing.assert_array_equal(b.oxide_counts, a.oxide_counts)
    assert (back[0].elements == FE2).sum() == 6 and (back[0].elements == FE3).sum() == 8


def test_errors_name_the_file_and_line(tmp_path, written):
    _, stem = written
    lines = stem.with_suffix(".xyz").read_text().splitlines()
    lines[5] = "O 1.0 oops 2.0"
    bad = tmp_path / "bad.xyz"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(U.UserDataError, match=r"bad\.xyz:6: frame 0"):
        U.read_cells(bad)
    cif = stem.with_suffix(".cif").read_text().splitlines()
    row = next(i for i, ln in enumerate(cif) if ln.split()[:1] == ["Si"])
    cif[row] = cif[row].replace(cif[row].split()[3], "zz", 1)
    bad_cif = tmp_path / "bad.cif"
    bad_cif.write_text("\n".join(cif) + "\n")
    with pytest.raises(U.UserDataError, match=rf"bad\.cif:{row + 1}: _atom_site_fract"):
        U.read_cells(bad_cif)


def test_frames_that_cannot_be_used_are_named(tmp_path):
    from ase import Atoms
    from ase.io import write

    rng = np.random.default_rng(0)
    cases = {
        "tilted": (Atoms("SiO2" * 40, positions=rng.uniform(0, 9, (120, 3)),
                         cell=[9, 10, 9], pbc=True), "cubic and periodic"),
        "alien": (Atoms("UO2" * 40, positions=rng.uniform(0, 9, (120, 3)), cell=[9, 9, 9],
                        pbc=True), r"\['U'\]"),
        "charged": (Atoms("SiO" * 60, positions=rng.uniform(0, 9, (120, 3)),
                          cell=[9, 9, 9], pbc=True), "no charge-balanced"),
        "small": (Atoms("SiO2" * 3, positions=rng.uniform(0, 9, (9, 3)), cell=[9, 9, 9],
                        pbc=True), "9 atoms"),
    }
    for name, (atoms, msg) in cases.items():
        path = tmp_path / f"{name}.xyz"
        write(path, [atoms], format="extxyz")
        with pytest.raises(U.UserDataError, match=rf"{name}\.xyz: frame 0: .*{msg}"):
            U.read_cells(path)
    with pytest.raises(U.UserDataError, match="no such file"):
        U.read_cells(tmp_path / "missing.xyz")
    (tmp_path / "x.pdb").write_text("")
    with pytest.raises(U.UserDataError, match="unknown format"):
        U.read_cells(tmp_path / "x.pdb")


@pytest.mark.slow
def test_data_stage_reads_held_out_cells_from_a_file(written):
    from jaxkit.amgenc.config import QUICK
    from jaxkit.amgenc.data import make_data

    cells, stem = written
    cfg = QUICK.override(["n_train=2", "relax_steps=20", "min_steps=5",
                          f"user_test={stem.with_suffix('.xyz')}"])
    data = make_data(cfg, np.random.default_rng(0))
    assert len(data.train) == 2 and len(data.test) == 2 and len(data.twins) == 2
    np.testing.assert_array_equal(np.sort(data.test[0].elements), np.sort(cells[0].elements))
    # the twins are recipe cells of the same formula units, other positions
    for c, t in zip(data.test, data.twins, strict=True):
        np.testing.assert_array_equal(t.oxide_counts, c.oxide_counts)
        assert not np.allclose(t.positions, c.positions)
