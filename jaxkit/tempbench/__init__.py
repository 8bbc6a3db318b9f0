"""TempBench: synthetic tasks with temporal structure and the comparison of per-token
SAEs, stacked per-position SAEs, acausal and temporal crosscoders on them.

:mod:`~jaxkit.tempbench.tasks` holds the generators (Markov features in superposition,
HMM denoising, ordered feature chains) and their ground truth;
:mod:`~jaxkit.tempbench.train` the training of the four dictionaries;
:mod:`~jaxkit.tempbench.compare` the budget-matched comparison and the metrics;
:mod:`~jaxkit.tempbench.report` the tables, figures and claims;
:mod:`~jaxkit.tempbench.config` the ``QUICK`` / ``FULL`` configurations; ``jaxkit run
tempbench`` is :mod:`~jaxkit.tempbench.pipeline`.
"""

from . import compare, config, tasks, train
from .compare import ChainSetting, HMMSetting, MarkovSetting
from .config import FULL, QUICK, Config
from .tasks import (
    chain_atoms,
    hmm_denoising,
    hmm_posterior,
    markov_features,
    ordered_features,
    persistent_atoms,
    sliding_windows,
)
from .train import METHODS, TrainConfig, Trainer

__all__ = [
    "tasks", "compare", "config", "train", "METHODS", "TrainConfig", "Trainer", "Config",
    "QUICK", "FULL", "MarkovSetting", "HMMSetting", "ChainSetting", "markov_features",
    "hmm_denoising", "hmm_posterior", "ordered_features", "persistent_atoms", "chain_atoms",
    "sliding_windows",
]
