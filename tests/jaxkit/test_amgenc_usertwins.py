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
