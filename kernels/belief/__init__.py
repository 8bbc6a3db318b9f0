"""Belief updates as pure functions: value of information of a question about a binary
(or K-ary) target, realised updates of a price path, posteriors over mutually exclusive
and collectively exhaustive (MECE) explanations, expected information gain of
experiments, and log evidence of models as explanations.

Modules (every public name is re-exported here):

- ``voi``: value of information of a binary subquestion S about a target Y with price
  ``p = q p1 + (1 - q) p0`` (expected absolute and squared shift, mutual information,
  discrimination), the K-ary generalisation and the coherence projection.
- ``updates``: realised updates of a price path over a horizon (absolute change, logit
  change, log-score gain) with clipped prices.
- ``posterior``, ``eig``, ``evidence``: posteriors over K explanations, redistribution
  scores and resolution rules; expected information gain and budgeted selection; log
  evidence of numpyro models.

All functions broadcast over leading batch axes, work under ``jit`` and ``vmap`` in
float32 and float64, and are safe at probabilities 0 and 1. Bad input (probabilities
outside [0, 1] or NaN, tables of the wrong shape) raises ``ValueError`` naming the
argument on concrete values and an :func:`equinox.error_if` run-time error under ``jit``.
"""

from .updates import Updates, clip_prices, realised_updates, update_between
from .voi import VOI, Coherent, binary_entropy, check_probability, cohere, voi, voi_categorical

__all__ = [
    "VOI",
    "Coherent",
    "voi",
    "voi_categorical",
    "cohere",
    "binary_entropy",
    "check_probability",
    "Updates",
    "realised_updates",
    "update_between",
    "clip_prices",
]
