"""AMGenC with an element of two oxidation states: iron is Fe2+ (FeO) or Fe3+ (Fe2O3), and
the final discrete projection picks each Fe atom's state so that the cell is balanced,
on cases whose answer is known by hand."""

import numpy as np

from jaxkit.amgenc import glass
from jaxkit.amgenc import model as M

FE2, FE3, OX = (glass.ELEMENTS.index(s) for s in ("Fe2+", "Fe3+", "O"))


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


def test_iron_glass_cells_hold_both_states_and_write_fe():
    counts = np.zeros(len(glass.OXIDES), int)
    for name, k in (("SiO2", 23), ("FeO", 6), ("Fe2O3", 4)):
        counts[glass.OXIDE_NAMES.index(name)] = k
    c = glass.cell_from_counts(counts, seed=0, steps=30, min_steps=10)
    assert (c.elements == FE2).sum() == 6 and (c.elements == FE3).sum() == 8
    assert int(c.charges.sum()) == 0
    assert set(c.symbols) == {"Si", "Fe", "O"}
    names, _ = M.species_charges()
    assert names[FE2] == "Fe2+" and names[FE3] == "Fe3+"
