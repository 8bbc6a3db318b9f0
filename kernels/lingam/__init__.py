"""ICA-LiNGAM and DirectLiNGAM, with adaptive-lasso pruning, as pure JAX functions.

References:
    S. Shimizu, P. O. Hoyer, A. Hyvarinen, A. Kerminen, "A linear non-Gaussian acyclic
    model for causal discovery", JMLR 7, 2006 (ICA-LiNGAM).
    S. Shimizu et al., "DirectLiNGAM: a direct method for learning a linear non-Gaussian
    structural equation model", JMLR 12, 2011; A. Hyvarinen, S. M. Smith, "Pairwise
    likelihood ratios for estimation of non-Gaussian structural equation models",
    JMLR 14, 2013 (the ``'pwling'`` measure).

Beyond the fits: prior knowledge (:mod:`.prior`), total effects and the HSIC test of the
error variables (:mod:`.effects`), DirectLiNGAM's kernel measure (:mod:`.kernel_measure`)
and a vmapped bootstrap (:mod:`.bootstrap`).

The algorithms follow the ``lingam`` package (1.13, ``cdt15/lingam``) step by step;
the places where a fixed-shape JAX formulation differs are stated in each docstring.
Convention (``lingam``'s): ``adjacency[i, j]`` is the direct effect of ``x_j`` on
``x_i``, so row ``i`` holds the parents of ``i``.

Every function is fixed-shape with no Python control flow on data values: it runs
eagerly, under ``jit`` and under ``vmap`` over a batch of same-shaped datasets. Under
``vmap`` the fits run one dataset after another on CPU by default (``sequential_vmap``,
see :func:`jaxkit.kernels.ica.fastica`).
"""

from .bootstrap import BootstrapResult, bootstrap, bootstrap_probabilities, causal_direction_counts
from .effects import (
    error_independence_p_values,
    estimate_total_effect,
    hsic_test_gamma,
    total_effects_from_adjacency,
)
from .fit import LiNGAMResult, direct_lingam, ica_lingam
from .kernel_measure import kernel_mutual_information
from .order import b_from_unmixing, causal_order_from_b
from .prior import check_prior_knowledge, partial_order
from .prune import adaptive_lasso_prune

__all__ = [
    "LiNGAMResult",
    "ica_lingam",
    "direct_lingam",
    "causal_order_from_b",
    "b_from_unmixing",
    "adaptive_lasso_prune",
    "check_prior_knowledge",
    "partial_order",
    "estimate_total_effect",
    "total_effects_from_adjacency",
    "hsic_test_gamma",
    "error_independence_p_values",
    "kernel_mutual_information",
    "BootstrapResult",
    "bootstrap",
    "bootstrap_probabilities",
    "causal_direction_counts",
]
