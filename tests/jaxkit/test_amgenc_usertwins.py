"""AMGenC's user path (issue 64 part 5): the twin of a held-out user cell is another of
the user's cells of the same species counts when there is one (the recipe only
otherwise), and the report says where the twins came from."""

import numpy as np
import pytest

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
    cfg = QUICK.override(["dataset=recipe", "n_train=2", "relax_steps=20", "min_steps=5",
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


def _stretched(cell, f=1.2):
    """A cubic cell stretched along x by ``f`` and shrunk along y, z (same volume): an
    orthorhombic cell of the same density."""
    s = np.array([f, f ** -0.5, f ** -0.5])
    return glass.Cell(cell.elements, cell.positions * s, cell.box * s, cell.oxide_counts,
                      dict(cell.properties))


def test_orthorhombic_cells_read_measure_and_pad(tmp_path):
    import jax.numpy as jnp

    from jaxkit.amgenc import model as M
    from jaxkit.amgenc import userdata as U
    from jaxkit.amgenc.analysis import rdf
    from jaxkit.amgenc.data import conditioning, pad_cells

    cubic = glass.cell_from_counts(_counts(SiO2=34), seed=0, steps=20, min_steps=5)
    ortho = _stretched(cubic)
    assert not glass.is_cubic(ortho.box) and abs(ortho.density - cubic.density) < 1e-9
    # extended XYZ with an orthorhombic lattice reads back as (3,) edges
    stem = tmp = tmp_path / "o"
    write_cells(stem, [(ortho.symbols, ortho.positions, ortho.box, "o"),
                       (cubic.symbols, cubic.positions, cubic.box, "c")])
    back = U.read_cells(stem.with_suffix(".xyz"))
    np.testing.assert_allclose(back[0].box, ortho.box, rtol=1e-6)
    assert np.ndim(back[1].box) == 0  # a cubic cell stays one edge
    glass.save_cells(tmp.with_suffix(".npz"), back)
    again = glass.load_cells(tmp.with_suffix(".npz"))
    np.testing.assert_allclose(again[0].box, back[0].box)
    assert np.ndim(again[1].box) == 0
    # the RDF of the stretched cell uses its volume: g -> 1 far out, as for the cube
    r, g = rdf(ortho.positions, ortho.box, r_max=4.0, n_bins=20)
    assert 0.6 < g[-5:].mean() < 1.4
    # the model's neighbours use each edge: equal to brute force on Cartesian distances
    b = pad_cells([ortho], 128, len(glass.ELEMENTS), conditioning([cubic], 14))
    assert b.box.shape == (1, 3)
    idx, disp, valid = M.neighbours(jnp.asarray(b.x[0]), jnp.asarray(b.box[0]),
                                    jnp.asarray(b.mask[0]), 4)
    d = ortho.positions[:, None] - ortho.positions[None]
    d -= ortho.box * np.rint(d / ortho.box)
    r = np.sqrt((d * d).sum(-1))
    np.fill_diagonal(r, np.inf)
    n = ortho.n_atoms
    np.testing.assert_allclose(np.sort(np.linalg.norm(np.asarray(disp)[:n], axis=-1), 1),
                               np.sort(r, 1)[:, :4], atol=1e-3)


@pytest.mark.slow  # a tiny pipeline run: about 3 minutes on a loaded 2-core machine
def test_tiny_pipeline_on_orthorhombic_user_cells(tmp_path):
    from jaxkit.amgenc import pipeline
    from jaxkit.distributed import make_mesh
    from jaxkit.registry import RunContext

    from .test_amgenc_pipeline import TINY_SETS

    make = lambda seed, **k: _stretched(glass.cell_from_counts(  # noqa: E731
        _counts(**k), seed=seed, steps=20, min_steps=5), 1.1 + 0.05 * (seed % 3))
    train = [make(s, SiO2=34) for s in range(4)]
    test = [make(10, SiO2=34), make(11, SiO2=36)]
    for name, cells in (("train", train), ("test", test)):
        write_cells(tmp_path / name, [(c.symbols, c.positions, c.box, name) for c in cells])
    from jaxkit.amgenc.config import QUICK

    cfg = QUICK.override(TINY_SETS + ["dataset=recipe", "kind=silica", "scale.cells=0",
                                      f"user_train={tmp_path / 'train.xyz'}",
                                      f"user_test={tmp_path / 'test.xyz'}"])
    res = pipeline.run(RunContext(out_dir=tmp_path / "out", config=cfg, quick=True,
                                  mesh=make_mesh()))
    m = res.metrics
    assert m["arms"]["all three (AMGenC)"]["balanced"] == 1.0
    assert np.isfinite(m["arms"]["none"]["rdf_l1"])
    assert m["judge"]["name"] == "bks" and m["judge"]["rows"]["twin"]["judged"] == 1.0
    assert "from your file" in res.markdown
    # the written cells keep the orthorhombic boxes of their targets
    from ase.io import read

    frames = read(tmp_path / "out" / "amgenc_all_three.xyz", index=":")
    lengths = frames[0].cell.lengths()
    np.testing.assert_allclose(lengths, glass.box_edges(test[0].box), rtol=1e-5)
