"""AMGenC with an element of two oxidation states, and user data.

Iron is Fe2+ (FeO) or Fe3+ (Fe2O3): the final discrete projection picks each Fe atom's
state so that the cell is balanced, on cases whose answer is known by hand. User data:
extended XYZ and CIF cells read back with their species (iron's oxidation states chosen
by the exact projection), errors that name the file and line, and the data stage reading
held-out cells from a file.

Test time: one module (the iron glass cell of the oxidation test is the first cell the
user-data tests write; one relaxation, one compiled schedule)."""

import numpy as np
import pytest

from jaxkit.amgenc import glass
from jaxkit.amgenc import model as M
from jaxkit.amgenc import userdata as U
from jaxkit.amgenc.report import write_cells

FE2, FE3, OX = (glass.ELEMENTS.index(s) for s in ("Fe2+", "Fe3+", "O"))


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


# ------------------------------------------------- iron: two oxidation states of one element


def _channels(fe_rows, n_o, n=8):
    """Channels (1, n, K): Fe atoms with the given (p(Fe2+), p(Fe3+)), then O atoms, then
    padding (one size for every case: one compiled projection)."""
    _, q = M.species_charges()
    h = np.zeros((1, n, q.size), np.float32)
    for i, (p2, p3) in enumerate(fe_rows):
        h[0, i, FE2], h[0, i, FE3] = p2, p3
    h[0, len(fe_rows):len(fe_rows) + n_o, OX] = 1.0
    mask = np.arange(n)[None] < len(fe_rows) + n_o
    return h, mask, q


def test_magnetite_takes_one_fe2_and_two_fe3():
    # Fe3O4: charge balance needs exactly one Fe2+ and two Fe3+; the model leans to Fe3+
    # everywhere, least on atom 1, so atom 1 must become Fe2+
    h, mask, q = _channels([(0.40, 0.60), (0.45, 0.55), (0.40, 0.60)], 4)
    arg, ok = M.final_species(h, mask, q, discrete=False)
    assert arg[0, :3].tolist() == [FE3] * 3 and not ok[0]  # argmax: +1 e, unbalanced
    sp, ok = M.final_species(h, mask, q, discrete=True)
    assert ok[0] and sp[0, :3].tolist() == [FE3, FE2, FE3]
    assert sp[0, 3:7].tolist() == [OX] * 4 and sp[0, 7] == -1
    assert int(q[sp[0, :7]].sum()) == 0


def test_wustite_and_hematite_states_follow_the_oxygen_count():
    # FeO: two Fe with two O -> both Fe2+, even though the channels prefer Fe3+
    h, mask, q = _channels([(0.3, 0.7), (0.3, 0.7)], 2)
    sp, ok = M.final_species(h, mask, q, discrete=True)
    assert ok[0] and sp[0, :2].tolist() == [FE2, FE2]
    # Fe2O3: two Fe with three O -> both Fe3+, even though the channels prefer Fe2+
    h, mask, q = _channels([(0.8, 0.2), (0.7, 0.3)], 3)
    sp, ok = M.final_species(h, mask, q, discrete=True)
    assert ok[0] and sp[0, :2].tolist() == [FE3, FE3]


def test_iron_glass_cells_hold_both_states_and_write_fe(written):
    # the cell of 23 SiO2, 6 FeO and 4 Fe2O3 (seed 0, 30 + 10 steps) the user-data tests
    # write
    c = written[0][0]
    assert c.oxide_counts.tolist() == _counts(SiO2=23, FeO=6, Fe2O3=4).tolist()
    assert (c.elements == FE2).sum() == 6 and (c.elements == FE3).sum() == 8
    assert int(c.charges.sum()) == 0
    assert set(c.symbols) == {"Si", "Fe", "O"}
    names, _ = M.species_charges()
    assert names[FE2] == "Fe2+" and names[FE3] == "Fe3+"


# ------------------------------------------------------------------------------ user data


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
                         cell=[[9, 0, 0], [2, 10, 0], [0, 0, 9]], pbc=True), "triclinic"),
        "open": (Atoms("SiO2" * 40, positions=rng.uniform(0, 9, (120, 3)),
                       cell=[9, 10, 9], pbc=[True, True, False]), "periodic"),
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
