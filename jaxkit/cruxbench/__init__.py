"""CruxBench: grading proposed subquestions by their value of information (VOI).

The paper (seed paper 1) grades LLM-generated subquestions by how much their answers
move beliefs about a target outcome, measured against the prices of prediction markets,
and reports that VOI correlates with independent measures of model quality (r = 0.87
over eight models and 336 targets) and predicts downstream usefulness when the
questions are passed to a forecasting agent.

Modules: :mod:`~jaxkit.cruxbench.market` (latent-Gaussian market simulator with known
VOI, bivariate normal CDF), :mod:`~jaxkit.cruxbench.proposers` (simulated proposers,
the OpenAI-compatible :class:`~jaxkit.cruxbench.proposers.ChatProposer`),
:mod:`~jaxkit.cruxbench.simulate` (the simulated benchmark as a dataset),
:mod:`~jaxkit.cruxbench.text` (subquestions written by a language model, parsed,
validated and scored by content),
:mod:`~jaxkit.cruxbench.data` (the JSON Lines format), :mod:`~jaxkit.cruxbench.scoring`
(ex-ante and realised VOI, volatility control and sign check, the forecasting agent),
:mod:`~jaxkit.cruxbench.analysis`
(correlations, nested bootstrap, permutation, cross-fitted usefulness test),
:mod:`~jaxkit.cruxbench.results` (the typed results :mod:`~jaxkit.cruxbench.text` and
:mod:`~jaxkit.cruxbench.analysis` hand on),
:mod:`~jaxkit.cruxbench.report`, :mod:`~jaxkit.cruxbench.config`; ``jaxkit run
cruxbench`` is :mod:`~jaxkit.cruxbench.pipeline`; ``jaxkit cruxbench`` (score a file,
propose questions with a model) is :mod:`~jaxkit.cruxbench.cli`.
"""

from .config import FULL, QUICK, Config
from .data import Dataset, parse_records, read_jsonl, to_records, write_jsonl
from .market import bvn_cdf, question_probs, simulate_markets
from .proposers import ChatProposer, parse_questions
from .scoring import score
from .simulate import SimSettings, simulate

__all__ = ["Config", "QUICK", "FULL", "Dataset", "read_jsonl", "parse_records", "to_records",
           "write_jsonl", "bvn_cdf", "question_probs", "simulate_markets", "ChatProposer",
           "parse_questions", "score", "SimSettings", "simulate"]
