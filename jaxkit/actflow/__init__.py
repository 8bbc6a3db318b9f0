"""ActFlow (Active Flow Expansion): verifier-guided expansion of a flow model's
generable set. See :mod:`jaxkit.actflow.loop` for the continuous algorithm,
:mod:`jaxkit.actflow.discrete` for the discrete one (masking discrete flow matching,
exploration by re-masking verified anchors), :mod:`jaxkit.actflow.metrics` for the
coverage metrics, :mod:`jaxkit.actflow.domains`, :mod:`jaxkit.actflow.peptides`,
:mod:`jaxkit.actflow.molecules` (SELFIES + RDKit verifier),
:mod:`jaxkit.actflow.druglike` (MOSES drug-like molecules, read by
:mod:`jaxkit.actflow.moses` from the molsets wheel when it is installed, with the strict
verifier of :mod:`jaxkit.actflow.verify_mol`: sanitised, neutral, no radicals, ring
strain, PAINS/Brenk/MCF, SA score and QED windows) and :mod:`jaxkit.actflow.proteins`
for the tasks, :mod:`jaxkit.actflow.seqprops` (net charge, hydrophobic moment,
instability index, GRAVY, aggregation) and :mod:`jaxkit.actflow.peptide_verifier`
(antimicrobial-peptide-like and soluble-protein-like windows) for the peptide and
protein verifiers, :mod:`jaxkit.actflow.user` for your own
sequences and verifier, :mod:`jaxkit.actflow.config` for the settings, and
``jaxkit run actflow`` (:mod:`jaxkit.actflow.pipeline`) for the pipeline."""

from . import config, discrete, domains, loop, metrics, peptides, verifiers
from .config import ActFlowConfig, Config
from .loop import METHODS, run_method
from .verifiers import Verifier

__all__ = ["config", "discrete", "domains", "loop", "metrics", "peptides", "verifiers",
           "METHODS", "ActFlowConfig", "Config", "run_method", "Verifier"]
