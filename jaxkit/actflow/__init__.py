"""ActFlow (Active Flow Expansion): verifier-guided expansion of a flow model's
generable set. See :mod:`jaxkit.actflow.loop` for the algorithm,
:mod:`jaxkit.actflow.metrics` for coverage metrics, :mod:`jaxkit.actflow.domains` and
:mod:`jaxkit.actflow.peptides` for the tasks, :mod:`jaxkit.actflow.config` for the
settings, and ``jaxkit run actflow`` (:mod:`jaxkit.actflow.pipeline`) for the
pipeline."""

from . import config, domains, loop, metrics, peptides, verifiers
from .config import ActFlowConfig, Config
from .loop import METHODS, run_method
from .verifiers import Verifier

__all__ = ["config", "domains", "loop", "metrics", "peptides", "verifiers", "METHODS",
           "ActFlowConfig", "Config", "run_method", "Verifier"]
