"""AMGenC's user path (issue 64 part 5): the twin of a held-out user cell is another of
the user's cells of the same species counts when there is one (the recipe only
otherwise), and the report says where the twins came from."""

import numpy as np

from jaxkit.amgenc import glass
from jaxkit.amgenc.report import write_cells
from jaxkit.amgenc.report_more import twin_text


def _counts(**k):
    c = np.zeros(len(glass.OXIDES), int)
    for name, v in k.items():
        c[glass.OXIDE_NAMES.index(name)] = v
    return c


def test_user_twins_come_from_the_users_cells(tmp_path):
    from jaxkit.amgenc.config import QUICK
    from jaxkit.amgenc.data import make_data

    make = lambda seed, **k: glass.cell_from_counts(_counts(**k), seed=seed,  # noqa: E731
                                                    steps=20, min_steps=5)
    cells = [make(0, SiO2=34), make(1, SiO2=30, Na2O=4), make(2, SiO2=34)]
    stem = tmp_path / "mine"
    write_cells(stem, [(c.symbols, c.positions, c.box, "user") for c in cells])
    cfg = QUICK.override(["n_train=2", "relax_steps=20", "min_steps=5",
                          f"user_test={stem.with_suffix('.xyz')}"])
    data = make_data(cfg, np.random.default_rng(0))
    assert data.twin_source == ["user", "recipe", "user"]
    # the two silica cells are each other's twins: the same positions as read back
    np.testing.assert_allclose(data.twins[0].positions, data.test[2].positions)
    np.testing.assert_allclose(data.twins[2].positions, data.test[0].positions)
    # the sodium silicate has no mate among the user's cells: a recipe twin
    np.testing.assert_array_equal(data.twins[1].oxide_counts, data.test[1].oxide_counts)
    assert not np.allclose(data.twins[1].positions, data.test[1].positions)
    text = twin_text(data)
    assert text.startswith("Twins of the 3 held-out cells: 2 are other cells of yours")
    assert "1 were made by the toy recipe" in text


def test_the_pipelines_own_npz_is_a_user_format(tmp_path):
    import pytest

    from jaxkit.amgenc import userdata as U

    cells = [glass.cell_from_counts(_counts(SiO2=34), seed=s, steps=20, min_steps=5)
             for s in (0, 1)]
    path = tmp_path / "mine.npz"
    glass.save_cells(path, cells)
    back = U.read_cells(path)
    assert len(back) == 2
    for a, b in zip(cells, back, strict=True):
        np.testing.assert_array_equal(a.elements, b.elements)
        np.testing.assert_allclose(a.positions, b.positions)
        assert a.box == b.box
    # an unbalanced cell is named with the file and its index
    bad = glass.Cell(cells[1].elements[:-1], cells[1].positions[:-1], cells[1].box,
                     cells[1].oxide_counts, dict(cells[1].properties))
    glass.save_cells(tmp_path / "bad.npz", [cells[0], bad])
    with pytest.raises(U.UserDataError, match=r"bad\.npz: cell 1: total charge \+2"):
        U.read_cells(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(U.UserDataError, match=r"junk\.npz: not a jaxkit.amgenc cell file"):
        U.read_cells(tmp_path / "junk.npz")
