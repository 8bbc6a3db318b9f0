"""The CausalTab network's old import path. The network moved down into infrastructure,
:mod:`jaxkit.causal_model.model` (the causal audit runs the same model); this module
re-exports its public names for code written against ``jaxkit.causaltab.model``."""

from jaxkit.causal_model.model import (
    ModelConfig,
    acyclicity,
    edge_logits,
    forward,
    init_params,
    n_params,
    standardize_input,
)

__all__ = ["ModelConfig", "init_params", "forward", "edge_logits", "acyclicity",
           "n_params", "standardize_input"]
