"""CausalTab: an amortised causal-discovery model trained on broad, vmapped causal priors
(CausalTab, arXiv 2605.31156), against classical baselines, on synthetic and semantic
environments.

Claims under test: CausalTab recovers structure better than classical methods on
synthetic benchmarks, in and out of distribution, especially with interventional data,
and on domain-grounded (expert-network) environments.

* :mod:`~jaxkit.causaltab.model`: the alternating-attention network (pure functions of a
  parameter pytree); :mod:`~jaxkit.causaltab.train`: training on tasks drawn on the
  device each step from :mod:`jaxkit.kernels.sem.prior`, the shipped weights;
  :mod:`~jaxkit.causaltab.make_weights`: the command that trained them.
* :func:`~jaxkit.causaltab.predict.predict`: edge probabilities for the user's data;
  ``jaxkit causaltab predict data.csv`` (:mod:`~jaxkit.causaltab.cli`).
* :mod:`~jaxkit.causaltab.evaluate` (methods, metrics), :mod:`~jaxkit.causaltab.semantic`
  (expert networks), :mod:`~jaxkit.causaltab.experiments`, :mod:`~jaxkit.causaltab.report`,
  ``jaxkit run causaltab`` (:mod:`~jaxkit.causaltab.pipeline`).
"""

from .config import FULL, QUICK, Config
from .model import ModelConfig, forward, init_params
from .predict import predict

__all__ = ["Config", "QUICK", "FULL", "ModelConfig", "init_params", "forward", "predict"]
