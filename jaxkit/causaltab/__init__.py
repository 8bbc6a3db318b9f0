"""CausalTab: an amortised causal-discovery model trained on broad, vmapped causal priors
(CausalTab, arXiv 2605.31156), against classical baselines, on synthetic and semantic
environments.

Claims under test: CausalTab recovers structure better than classical methods on
synthetic benchmarks, in and out of distribution, especially with interventional data,
and on domain-grounded (expert-network) environments.

* :mod:`jaxkit.causal_model`: the alternating-attention network, its shipped weights and
  :func:`~jaxkit.causal_model.predict.predict`, edge probabilities for the user's data
  (infrastructure: the causal audit runs the same model; the old names
  ``jaxkit.causaltab.model`` / ``.predict`` still import);
  :mod:`~jaxkit.causaltab.train`: training on tasks drawn on the device each step from
  :mod:`jaxkit.kernels.sem.prior`; :mod:`~jaxkit.causaltab.make_weights`: retrains the
  shipped weights from scratch by replaying the training segments their ``model.json``
  lists; :mod:`~jaxkit.causaltab.longtrain`: the long
  training (curriculum over d and n, narrow-to-broad prior, warm-up cosine, segmented
  :func:`jaxkit.training.fit` with exact resume) with its validation curve against
  DirectLiNGAM, NOTEARS, PC and GES on the fixed set of :mod:`~jaxkit.causaltab.validation`;
  :mod:`~jaxkit.causaltab.ship`: scoring and writing such weights in the shipped format.
  ``jaxkit causaltab predict data.csv`` (:mod:`~jaxkit.causaltab.cli`).
* :mod:`~jaxkit.causaltab.evaluate` (methods, metrics), :mod:`~jaxkit.causaltab.semantic`
  (expert networks), :mod:`~jaxkit.causaltab.experiments`, :mod:`~jaxkit.causaltab.report`,
  ``jaxkit run causaltab`` (:mod:`~jaxkit.causaltab.pipeline`).
"""

from jaxkit.causal_model import ModelConfig, forward, init_params, predict

from .config import FULL, QUICK, Config

__all__ = ["Config", "QUICK", "FULL", "ModelConfig", "init_params", "forward", "predict"]
