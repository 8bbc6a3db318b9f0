"""The amortised causal-discovery network CausalTab trains (arXiv 2605.31156) and jaxkit
ships, as infrastructure two papers use: CausalTab trains and benchmarks it
(:mod:`jaxkit.causaltab`), the causal-assumption audit runs it as one of its methods
(:mod:`jaxkit.causal_audit`). Neither paper imports the other; both import this.

* :mod:`~jaxkit.causal_model.model`: the alternating-attention network (pure functions of
  a parameter pytree, :class:`ModelConfig` the static sizes).
* :mod:`~jaxkit.causal_model.weights_io`: saving and loading weights, and the weights
  shipped in ``jaxkit/causal_model/weights/``.
* :mod:`~jaxkit.causal_model.predict`: edge probabilities ``p[i, j] = P(j -> i)`` for a
  user's ``(n, d)`` data (:func:`predict`, chunked over rows and variable subsets) and
  the greedy DAG projection of such probabilities (:func:`dag_projection`).
"""

from .model import ModelConfig, forward, init_params
from .predict import dag_projection, predict
from .weights_io import load_weights, save_weights, shipped_weights

__all__ = ["ModelConfig", "init_params", "forward", "predict", "dag_projection",
           "load_weights", "save_weights", "shipped_weights"]
