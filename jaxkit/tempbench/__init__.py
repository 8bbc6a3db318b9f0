"""TempBench: synthetic tasks with temporal structure and the comparison of per-token
SAEs, stacked per-position SAEs, acausal and temporal crosscoders on them.

:mod:`jaxkit.tempbench.tasks` holds the generators (Markov features in superposition, HMM
denoising, ordered feature chains) and their ground truth; :mod:`jaxkit.tempbench.compare`
the budget-matched training and the metrics. ``jaxkit run tempbench`` is the pipeline.
"""

from . import compare, tasks
from .compare import METHODS, ChainSetting, HMMSetting, MarkovSetting, TrainConfig
from .tasks import (
    chain_atoms,
    hmm_denoising,
    hmm_posterior,
    markov_features,
    ordered_features,
    persistent_atoms,
    sliding_windows,
)

__all__ = [
    "tasks", "compare", "METHODS", "TrainConfig", "MarkovSetting", "HMMSetting",
    "ChainSetting", "markov_features", "hmm_denoising", "hmm_posterior", "ordered_features",
    "persistent_atoms", "chain_atoms", "sliding_windows",
]
