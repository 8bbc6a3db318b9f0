"""AMGenC: charge-balanced generation of amorphous materials (``jaxkit run amgenc``).

The paper package:

* the data recipe: :mod:`~jaxkit.amgenc.glass` (charge-balanced oxide compositions,
  cubic periodic cells at additive-model densities, generation and .npz I/O; it
  re-exports the names of the three below), :mod:`~jaxkit.amgenc.tables` (elements,
  oxides, bond lengths), :mod:`~jaxkit.amgenc.potential` (the pair potential, JAX
  melt-quench and FIRE relaxation), :mod:`~jaxkit.amgenc.analysis` (RDF, bond angles,
  coordination);
* the experiment: :mod:`~jaxkit.amgenc.config` (``QUICK``/``FULL``),
  :mod:`~jaxkit.amgenc.data` (cells, twins, conditions, padding),
  :mod:`~jaxkit.amgenc.userdata` (your cells from extended XYZ / CIF),
  :mod:`~jaxkit.amgenc.model` (the periodic graph denoiser: wrapped-Gaussian position
  noise, element flow), :mod:`~jaxkit.amgenc.train` (through ``jaxkit.training.fit``),
  :mod:`~jaxkit.amgenc.sample` (the ablation arms and the separately trained
  unconstrained baseline's), :mod:`~jaxkit.amgenc.scale`
  (800-atom throughput), :mod:`~jaxkit.amgenc.evaluate` (metrics),
  :mod:`~jaxkit.amgenc.plausibility` (close pairs, partial RDFs and bond angles against
  twin cells), :mod:`~jaxkit.amgenc.design` (pressure, relaxation at the recipe's
  pressure, design accuracy), :mod:`~jaxkit.amgenc.melt_quench` (glasses from the
  published BKS and Pedone potentials, ``dataset="published"``, the default data);
* the independent judge: :mod:`~jaxkit.amgenc.judge` (a published potential that did not
  make the data, on :mod:`jaxkit.kernels.md` with FIRE; :mod:`~jaxkit.amgenc.teter`, the
  Teter potential with Deng & Du's boron, judges what Pedone cannot) and
  :mod:`~jaxkit.amgenc.judging` (plausibility before and after its relaxation against
  the twins, design accuracy at the target's judged pressure: the scores of the paper
  row on design accuracy);
* the existing methods: :mod:`~jaxkit.amgenc.baselines` (rejection sampling, a
  SMACT-like oxidation-state filter, post-hoc repair, on the unconstrained draws);
* :mod:`~jaxkit.amgenc.results` (the typed results the experiment modules hand to the
  report and the pipeline: :class:`~jaxkit.amgenc.results.Evaluation`,
  :class:`~jaxkit.amgenc.results.JudgeScores`, ...),
  :mod:`~jaxkit.amgenc.report` (figure, tables, claims),
  :mod:`~jaxkit.amgenc.cellfiles` (the generated cells as extended XYZ and CIF),
  :mod:`~jaxkit.amgenc.report_more` (the judge's and the methods' tables, the row on
  existing methods, the rewritten rows, rows withheld below ``min_cells``) and
  :mod:`~jaxkit.amgenc.pipeline` (the registered run).
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
