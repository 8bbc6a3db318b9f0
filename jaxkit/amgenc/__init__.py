"""AMGenC: charge-balanced generation of amorphous materials.

``glass`` holds the data recipe: charge-balanced oxide compositions, cubic periodic
cells at additive-model densities, and a JAX melt-quench + FIRE relaxation with a
short-range pair potential, plus RDF / bond-angle analysis and .npz I/O.
"""

from jaxkit.amgenc.glass import (
    ELEMENTS,
    OXIDES,
    Cell,
    bond_angles,
    draw_composition,
    generate,
    load_cells,
    min_distance,
    rdf,
    save_cells,
)

__all__ = [
    "ELEMENTS",
    "OXIDES",
    "Cell",
    "bond_angles",
    "draw_composition",
    "generate",
    "load_cells",
    "min_distance",
    "rdf",
    "save_cells",
]
