"""Misaligned baselines for AI drug discovery: does a model beat the baselines that rely
on signals misaligned with the learning objective?

Position paper: "AI for Drug Discovery Models Often Do Not Learn as Expected"
(ICML 2026 FM4LS): models often learn dataset biases rather than chemistry; baselines
built on reductionist information (molecular size), heavily perturbed inputs (scrambled
labels, shuffled or random features, carbons inserted into the test inputs) or
heuristics (train mean, 1-nearest-neighbour by Tanimoto similarity) expose this when
they are competitive. The physics-aligned references (the descriptor ridge with and
without Crippen logP, logP alone) and the fingerprint ridge are a separate family beside
them; the best misaligned baseline is chosen on validation sets. Renz et al.'s AddCarbon
is a generative baseline (:mod:`~jaxkit.misaligned.addcarbon`).

* :mod:`~jaxkit.misaligned.features`: RDKit featurisation (descriptors, Morgan
  fingerprints, padded graphs), random and scaffold splits, carbon insertion.
* :mod:`~jaxkit.misaligned.baselines`: the baseline family, one pure function vmapped
  over seeds and strengths.
* :mod:`~jaxkit.misaligned.models`: the MLP on fingerprints and the MPNN, trained for all
  seeds at once through the one training step and loop.
* :mod:`~jaxkit.misaligned.metrics`: masked metrics and the two-level bootstrap.
* :mod:`~jaxkit.misaligned.branches`: the other branches of drug discovery,
  drug-target interaction (:mod:`~jaxkit.misaligned.dti`: Davis, cold-drug and
  cold-target splits, node-degree and one-side-only baselines) and virtual screening
  (:mod:`~jaxkit.misaligned.screening`: DUD-E actives against property-matched decoys).
* :func:`audit` (:mod:`~jaxkit.misaligned.evaluation`): a user's ``fit_predict`` against the family;
  ``jaxkit misaligned audit data.csv --smiles-column S --label-column Y``
  (:mod:`~jaxkit.misaligned.cli`); ``jaxkit run misaligned`` is
  :mod:`~jaxkit.misaligned.pipeline`.
"""

from . import baselines, evaluation, features, metrics, models
from .baselines import ALIGNED, BASELINES, MISALIGNED, baseline_family, run_family
from .config import FULL, QUICK, Config
from .evaluation import AuditResult, audit, baseline_predictions, evaluate, family_on_masks
from .features import MolDataset, Splits, featurise, make_splits, validation_splits

__all__ = ["audit", "AuditResult", "evaluate", "baseline_predictions", "family_on_masks",
           "BASELINES", "MISALIGNED", "ALIGNED", "baseline_family", "run_family", "MolDataset",
           "Splits", "featurise", "make_splits", "validation_splits", "Config", "QUICK",
           "FULL", "features", "baselines", "metrics", "models", "evaluation"]
