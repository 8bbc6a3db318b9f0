"""Linear structural equation models (SEMs) with pooled interventional data.

The simulator behind the pooled-LiNGAM experiments (Paper 7: ICA-LiNGAM on simply pooled
observational + interventional data, without environment labels).

Conventions
-----------
* Adjacency matrices follow the LiNGAM convention: ``b[i, j]`` is the weight of the edge
  ``j -> i`` (so ``b[i, j] != 0`` means "j is a parent of i"), and a sample is
  ``x = b @ x + e``, i.e. ``x = (I - b)^{-1} e``; row-wise for a data matrix,
  ``x = e @ (I - b)^{-T}``.
* Every function is pure: PRNG keys are explicit arguments, shapes depend only on static
  (Python) arguments, and everything runs eagerly, under ``jit`` and under ``vmap`` (e.g.
  over a batch of keys). Arguments documented as *static* must be Python values (use
  ``functools.partial`` or ``static_argnames`` when jitting); numeric knobs such as
  ``strength`` and ``noise_scale`` may be traced arrays, so sweeping them does not
  recompile.

Contents
--------
* random DAGs: :func:`erdos_renyi_dag`, :func:`scale_free_dag`, :func:`random_dag`, with
  a random topological order and weights ``+-U[w_low, w_high]``; :func:`is_acyclic`.
* noise: :func:`sample_noise` (Gaussian, Laplace, uniform; unit variance).
* environments: :func:`intervention_targets`, :func:`simulate_pooled` (observational +
  atomic / multi-node / all-node noise interventions: variance scaling, mean shift,
  replacement of the noise distribution), returning pooled data *and* the labels.
* theory checks: :func:`excess_kurtosis`, :func:`square_correlation`,
  :func:`mean_offdiag`, :func:`hsic`, and the closed form :func:`atomic_scale_theory`.

Causal priors (CausalTab, amortised causal discovery): padded graph families
:mod:`.graphs` (ER, scale-free, Watts-Strogatz, SBM, geometric), noise laws
:mod:`.prior_noise`, mechanisms and ancestral sampling with interventions and iSCM
standardisation :mod:`.mechanisms`, and the task sampler :mod:`.prior`
(:func:`make_prior`, :func:`sample_tasks`, its standalone jit :func:`jit_sample_tasks`);
the continuous-optimisation baseline :func:`notears` (:mod:`.notears`).

Modules: ``dags`` (graphs, weights, acyclicity, ``(I - b)^{-1}``), ``noise``,
``interventions`` (targets), ``pooling`` (:func:`simulate_pooled`), ``stats`` (theory
checks); every public name is re-exported here.
"""

from .dags import (
    GraphKind,
    dag_inverse,
    edge_weights,
    erdos_renyi_dag,
    is_acyclic,
    random_dag,
    scale_free_dag,
)
from .graphs import (
    GRAPHS,
    er_graph,
    geometric_graph,
    sample_graph,
    sbm_graph,
    sf_graph,
    ws_graph,
)
from .interventions import intervention_targets
from .mechanisms import (
    INTERVENTION_TYPES,
    MECHANISMS,
    MechParams,
    init_mechanisms,
    simulate_scm,
    topological_order,
)
from .noise import NoiseKind, sample_noise
from .notears import NotearsResult, notears
from .pc import PCResult, dag_to_cpdag, pc
from .pooling import InterventionKind, SEMData, simulate_pooled
from .prior import (
    REGIMES,
    Prior,
    Task,
    TaskSpec,
    jit_sample_tasks,
    make_prior,
    mix_priors,
    sample_task,
    sample_tasks,
)
from .prior_noise import PRIOR_NOISES, prior_noise
from .sortability import (
    SortRegressResult,
    order_alignment,
    r2_coefficients,
    r2_sort_regress,
    r2_sortability,
    random_sort_regress,
    sort_regress,
    var_sort_regress,
    var_sortability,
)
from .stats import atomic_scale_theory, excess_kurtosis, hsic, mean_offdiag, square_correlation

__all__ = [
    "SEMData",
    "GraphKind",
    "NoiseKind",
    "InterventionKind",
    "edge_weights",
    "erdos_renyi_dag",
    "scale_free_dag",
    "random_dag",
    "is_acyclic",
    "dag_inverse",
    "sample_noise",
    "intervention_targets",
    "simulate_pooled",
    "excess_kurtosis",
    "square_correlation",
    "mean_offdiag",
    "hsic",
    "atomic_scale_theory",
    "GRAPHS", "er_graph", "sf_graph", "ws_graph", "sbm_graph", "geometric_graph", "sample_graph",
    "PRIOR_NOISES", "prior_noise",
    "MECHANISMS", "INTERVENTION_TYPES", "MechParams", "init_mechanisms", "simulate_scm",
    "topological_order",
    "REGIMES", "Prior", "TaskSpec", "Task", "make_prior", "mix_priors", "sample_task",
    "sample_tasks",
    "jit_sample_tasks",
    "NotearsResult", "notears",
    "PCResult", "pc", "dag_to_cpdag",
    "SortRegressResult", "order_alignment", "var_sortability", "r2_coefficients",
    "r2_sortability", "sort_regress", "var_sort_regress", "r2_sort_regress",
    "random_sort_regress",
]

