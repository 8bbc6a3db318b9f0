"""Causal benchmarks as epistemic standards: an assumption stress-test grid.

The position paper (Paper 6) argues that causal-discovery methods are compared through
identifiability, consistency and benchmarks, each resting on untestable assumptions, and
that benchmarks quietly fix which regimes matter. This package turns the argument into a
tool: every causal method in jaxkit (and the CPU peers) is registered with the
assumptions under which it is identifiable (:mod:`.methods`), a grid of named
perturbations of a base SCM (:mod:`.axes`, simulated by :mod:`.scm`) stress-tests them
in one vmapped batch per cell (:mod:`.grid`), and the report (:mod:`.report`) shows
where each method fails inside its scope and succeeds outside it, how rankings move
with the benchmark choice, where a sort-and-regress floor beats a method, and the
consistency rates. The position paper's arguments are tests that can fail
(:mod:`.falsify`: ranking instability against a null cell, the identifiability swap as a
rank correlation, a uniform-consistency family, a placebo negative control), and a user's
table gets a scope table (:mod:`.scope`). It reproduces the Reisach et al. (2021)
headline: Var-SortnRegress is competitive on raw linear SEMs and falls to chance after
standardisation.

Entry points: ``jaxkit run causal-audit [--quick]``; for a user's method,
:func:`.methods.register_method` with a :class:`.methods.MethodRecord`, then
:func:`.grid.run_grid` (or add its name to ``methods``).
"""

from .axes import AXES, GRAPHS, CellSpec, cell, register_graph
from .grid import CellResult, Pair, run_cell, run_grid
from .methods import (
                      METHODS,
                      Assumption,
                      Method,
                      MethodRecord,
                      get_method,
                      in_scope,
                      register_method,
)

__all__ = ["AXES", "GRAPHS", "CellSpec", "cell", "register_graph", "CellResult", "Pair",
           "run_cell", "run_grid", "METHODS", "Assumption", "Method", "MethodRecord",
           "get_method", "in_scope", "register_method"]
