"""CausalTab inference's old import path. ``predict`` and its helpers moved down into
infrastructure, :mod:`jaxkit.causal_model.predict` (the causal audit runs the same model);
this module re-exports them for code written against ``jaxkit.causaltab.predict``."""

from jaxkit.causal_model.predict import (
    dag_projection,
    edge_probabilities,
    load_model,
    predict,
    read_data,
    variable_subsets,
)

__all__ = ["predict", "load_model", "read_data", "variable_subsets", "edge_probabilities",
           "dag_projection"]
