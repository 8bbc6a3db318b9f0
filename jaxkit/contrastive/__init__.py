"""Contrastive discovery (NeurIPS 2026): a scientific question together with its
mutually exclusive and collectively exhaustive (MECE) explanations is the unit of
discovery; an experiment is scored by how its evidence redistributes belief across them.

Claims tested by ``jaxkit run contrastive``:

1. Under the same evaluation budget, contrastive selection (greedy expected information
   gain per cost over the MECE set) resolves more questions than pointwise baselines that
   score one hypothesis at a time (Shannon surprisal and Bayesian surprise, the
   AutoDiscovery style; an e-value sequential test, the POPPER style). Tested against
   the pointwise agents that spend the same budget (no early stopping); the paper-style
   agents that stop when they accept get an extension row ("same budget cap"), and so do
   a random design spending the budget and three misspecified arms (the true explanation
   missing from the set, nuisance parameters under their prior, noisy likelihood tables)
   in which the method is no longer Bayes-optimal by construction.
2. High-surprisal pointwise candidates are overwhelmingly rejections, yet many become
   resolved alternatives when the same evidence is evaluated contrastively.

Modules: ``domains`` (six synthetic domains, explanations as numpyro models, candidate
experiments with costs), ``simulate`` (questions, likelihood tables, outcomes),
``methods`` (contrastive and pointwise agents), ``experiment`` (one domain, per-seed
rates; the misspecified arms), ``report``, ``pipeline``, ``user`` (your own numpyro models
as the MECE set), ``real`` (the Sachs signalling data with a known answer, explanations
proposed by a language model).

Kernels: :mod:`jaxkit.kernels.belief.posterior`, :mod:`jaxkit.kernels.belief.eig`,
:mod:`jaxkit.kernels.belief.evidence`.
"""
