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

from .eig import (
    GreedyInfo,
    GreedyState,
    check_log_lik_table,
    check_selection,
    eig,
    eig_per_cost,
    greedy_eig,
    greedy_init,
    greedy_step,
    outcome_posteriors,
)
from .evidence import (
    Evidence,
    beta_binomial_log_evidence,
    gamma_poisson_log_evidence,
    latent_sites,
    log_evidence,
    log_lik_table,
    normal_log_evidence,
    observed_log_lik,
)
from .posterior import (
    Posterior,
    Redistribution,
    bf_resolved,
    check_log_prior,
    check_log_probs,
    entropy,
    entropy_drop,
    kl,
    normalise_tol,
    posterior,
    redistribution,
    resolved,
    top_two_log_bf,
    total_variation,
)
from .updates import Updates, clip_prices, realised_updates, update_between
from .voi import VOI, Coherent, binary_entropy, check_probability, cohere, voi, voi_categorical

__all__ = [
    # voi
    "VOI", "Coherent", "voi", "voi_categorical", "cohere", "binary_entropy",
    "check_probability",
    # updates
    "Updates", "realised_updates", "update_between", "clip_prices",
    # posterior
    "Posterior", "Redistribution", "check_log_prior", "check_log_probs", "normalise_tol",
    "posterior", "entropy", "kl", "total_variation", "entropy_drop", "top_two_log_bf",
    "redistribution", "resolved", "bf_resolved",
    # eig
    "check_log_lik_table", "check_selection", "eig", "outcome_posteriors", "GreedyState",
    "GreedyInfo", "greedy_init", "eig_per_cost", "greedy_step", "greedy_eig",
    # evidence
    "Evidence", "latent_sites", "observed_log_lik", "log_evidence", "log_lik_table",
    "beta_binomial_log_evidence", "gamma_poisson_log_evidence", "normal_log_evidence",
]
