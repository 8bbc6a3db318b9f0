"""ActFlow (Active Flow Expansion): verifier-guided expansion of a flow model's
generable set. See :mod:`jaxkit.actflow.loop` for the algorithm,
:mod:`jaxkit.actflow.metrics` for coverage metrics, :mod:`jaxkit.actflow.domains` and
:mod:`jaxkit.actflow.peptides` for the tasks, and ``jaxkit run actflow`` for the
pipeline."""

from . import domains, loop, metrics, peptides, verifiers
from .loop import METHODS, ActFlowConfig, run_method
from .verifiers import Verifier

__all__ = ["domains", "loop", "metrics", "peptides", "verifiers", "METHODS", "ActFlowConfig",
           "run_method", "Verifier"]
