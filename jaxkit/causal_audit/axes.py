"""The grid's axes: named, documented perturbations of a base SCM.

A grid cell is a :class:`CellSpec`, the base SCM with some axes moved. Each axis is an
:class:`Axis` in :data:`AXES` (its name, the meaning of its values, its default) and
:func:`cell` builds a spec from ``{axis: value}`` with a clear error for an unknown axis
or an out-of-domain value. How each value changes the data is implemented in
:mod:`jaxkit.causal_audit.scm`; the tests check that each perturbation does what its
documentation says.

Graph families are named too (:data:`GRAPHS`, :func:`register_graph`): a user's prior
(e.g. CausalTab's) joins the grid as one function ``(key, d) -> b``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from jaxkit.kernels.sem import graphs as prior_graphs
from jaxkit.kernels.sem.dags import edge_weights, random_dag

__all__ = ["Axis", "AXES", "CellSpec", "cell", "GRAPHS", "register_graph", "NOISES",
           "SCALES", "MECHANISMS", "FAITHFULNESS", "TARGETS", "INTERVENTIONS"]

NOISES = ("gaussian", "laplace", "uniform")
SCALES = ("raw", "standardised", "iscm")
MECHANISMS = ("linear", "nonlinear")
FAITHFULNESS = ("faithful", "near", "exact")
TARGETS = ("known", "unknown")
INTERVENTIONS = ("scale", "shift", "hard")


@dataclass(frozen=True)
class CellSpec:
    """One grid cell: the SCM family and the perturbations applied to it.

    Static (they fix shapes or the graph code): ``n`` rows, ``d`` observed variables,
    ``graph`` (a name in :data:`GRAPHS`), ``edges_per_node``, ``max_envs`` (slots for
    interventional environments). Everything else is a traced value, so every cell of
    the same shape runs through one compiled simulator. See :data:`AXES` for meanings.
    """

    n: int = 500
    d: int = 6
    graph: str = "er"
    edges_per_node: float = 1.5
    w_low: float = 0.5
    w_high: float = 2.0
    noise: str = "laplace"
    noise_hetero: float = 0.0
    mechanism: str = "linear"
    scale: str = "raw"
    faithfulness: str = "faithful"
    confounders: int = 0
    confounder_strength: float = 1.0
    meas_error: float = 0.0
    ar: float = 0.0
    n_envs: int = 0
    intervention: str = "scale"
    obs_fraction: float = 0.5
    strength: float = 3.0
    targets: str = "known"
    max_envs: int = 8

    def replace(self, **kw) -> CellSpec:
        return cell(self, **kw)

    def label(self, axes: tuple[str, ...]) -> str:
        return ", ".join(f"{a}={getattr(self, a)}" for a in axes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Axis:
    """A named perturbation: ``field`` of :class:`CellSpec`, what it does, its domain
    (``choices`` or a numeric ``lo``/``hi`` range), and the base value."""

    name: str
    doc: str
    choices: tuple | None = None
    lo: float | None = None
    hi: float | None = None
    integer: bool = False

    def check(self, value) -> Any:
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"axis {self.name!r}: value must be one of {self.choices}; "
                                 f"got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"axis {self.name!r}: value must be a number; got {value!r}")
        if self.integer and int(value) != value:
            raise ValueError(f"axis {self.name!r}: value must be an integer; got {value!r}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None
                                                         and value > self.hi):
            raise ValueError(f"axis {self.name!r}: value must lie in [{self.lo}, {self.hi}]; "
                             f"got {value!r}")
        return int(value) if self.integer else float(value)


AXES: dict[str, Axis] = {a.name: a for a in (
    Axis("noise", "noise family of every variable: 'gaussian' (LiNGAM unidentifiable), "
         "'uniform' (sub-Gaussian, excess kurtosis -1.2), 'laplace' (super-Gaussian, +3); "
         "unit variance before scaling", choices=NOISES),
    Axis("noise_hetero", "noise-scale heterogeneity h: the noise sd of each variable is "
         "exp(U[-h, h]) (0 = equal variances, where even a linear Gaussian SEM is "
         "identifiable, Peters & Buhlmann 2014)", lo=0.0, hi=3.0),
    Axis("mechanism", "'linear': x_i = sum_j b_ij x_j + e_i; 'nonlinear': x_i = sum_j "
         "b_ij tanh(x_j) + e_i (additive noise, bounded parent effects)", choices=MECHANISMS),
    Axis("scale", "'raw': the SCM's own scale; 'standardised': every column scaled to "
         "zero mean and unit variance after simulation (Reisach et al. 2021); 'iscm': each "
         "variable standardised right after its assignment, before its children read it "
         "(Ormaniec et al. 2025)", choices=SCALES),
    Axis("faithfulness", "'faithful': weights as drawn; 'exact': the direct edge a -> c "
         "from a root a is set to cancel every other directed path a ~> c (total effect "
         "0, so x_a and x_c are uncorrelated although adjacent); 'near': the same with "
         "10% of the path effect left", choices=FAITHFULNESS),
    Axis("confounders", "number of hidden confounders: each is an unobserved root with "
         "edges (weight +-confounder_strength) into two random observed variables, "
         "which become correlated without a causal link", lo=0, hi=8, integer=True),
    Axis("confounder_strength", "edge weight magnitude of each hidden confounder",
         lo=0.0, hi=10.0),
    Axis("meas_error", "measurement error gamma: every observed column gets independent "
         "Gaussian error of variance gamma * Var(x_j) (0 = none)", lo=0.0, hi=10.0),
    Axis("ar", "autoregressive (time) structure phi: rows are a time series and every "
         "noise term an AR(1) process e_t = phi e_{t-1} + sqrt(1 - phi^2) eta_t, so rows "
         "are not i.i.d. (0 = i.i.d.)", lo=0.0, hi=0.99),
    Axis("n_envs", "number of interventional environments (0 = observational only); each "
         "intervenes on one node (atomic), of the kind `intervention`",
         lo=0, hi=64, integer=True),
    Axis("intervention", "kind of every intervention: 'scale' (soft: the target's noise sd "
         "times `strength`, its mechanism kept), 'shift' (soft: the target's noise mean "
         "moved by `strength` noise sds, its mechanism kept), 'hard' (a stochastic "
         "do(): the target ignores its parents and any hidden confounder and is its own "
         "noise times `strength`; the perfect interventions GIES assumes)",
         choices=INTERVENTIONS),
    Axis("obs_fraction", "fraction of the rows that are observational when n_envs > 0",
         lo=0.0, hi=1.0),
    Axis("strength", "size of an intervention: the noise-sd factor ('scale', 'hard') or "
         "the mean shift in noise sds ('shift')", lo=1.0, hi=100.0),
    Axis("targets", "'known': methods that take interventions receive the environment "
         "labels and targets; 'unknown': they see one pooled environment",
         choices=TARGETS),
    Axis("n", "sample size (rows); a new value compiles a new shape", lo=10, hi=10**6,
         integer=True),
    Axis("d", "number of observed variables (static)", lo=2, hi=200, integer=True),
    Axis("graph", "graph family, a name in GRAPHS: 'er', 'sf', CausalTab's 'ws', 'sbm', "
         "'grg', or a registered one"),
    Axis("edges_per_node", "expected edges per node of the graph family", lo=0.0, hi=20.0),
    Axis("w_low", "smallest edge-weight magnitude", lo=0.0, hi=100.0),
    Axis("w_high", "largest edge-weight magnitude", lo=0.0, hi=100.0),
    Axis("max_envs", "slots for interventional environments (static, >= n_envs)", lo=1,
         hi=64, integer=True),
)}


# ------------------------------------------------------------------------ graph families

GraphFn = Callable[..., Any]


def _er(key, d, *, edges_per_node, w_low, w_high):
    return random_dag(key, d, graph="er", edges_per_node=edges_per_node, w_low=w_low,
                      w_high=w_high)


def _sf(key, d, *, edges_per_node, w_low, w_high):
    return random_dag(key, d, graph="sf", edges_per_node=edges_per_node, w_low=w_low,
                      w_high=w_high)


def _prior(fn):
    """A CausalTab prior family (``kernels/sem/graphs.py``: boolean, all ``d`` slots
    active) with the grid's weight law ``+-U[w_low, w_high]``."""
    def graph(key, d, *, edges_per_node, w_low, w_high):
        k_a, k_w = jax.random.split(key)
        a = fn(k_a, d, d, edges_per_node)
        return jnp.where(a, edge_weights(k_w, (d, d), w_low=w_low, w_high=w_high), 0.0)

    return graph


GRAPHS: dict[str, GraphFn] = {
    "er": _er, "sf": _sf,
    "ws": _prior(prior_graphs.ws_graph),  # Watts-Strogatz small world (CausalTab prior)
    "sbm": _prior(prior_graphs.sbm_graph),  # stochastic block model (CausalTab prior)
    "grg": _prior(prior_graphs.geometric_graph),  # random geometric (CausalTab prior)
}


def register_graph(name: str, fn: GraphFn) -> None:
    """Add a graph family: ``fn(key, d, *, edges_per_node, w_low, w_high) -> b`` with
    ``b[i, j]`` the weight of ``j -> i`` (traceable; the simulator flags a cyclic result
    as an invalid SCM, it never silently simulates it)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"graph `name` must be a non-empty string; got {name!r}")
    if not callable(fn):
        raise ValueError(f"graph family {name!r}: `fn` must be callable")
    GRAPHS[name] = fn


def cell(base: CellSpec | None = None, **values) -> CellSpec:
    """``base`` (default :class:`CellSpec`) with the named axes set to ``values``.

    Raises:
        ValueError: an unknown axis name, a value outside the axis's domain, an unknown
            graph family, or ``n_envs > max_envs``.
    """
    base = CellSpec() if base is None else base
    out = {}
    for k, v in values.items():
        if k not in AXES:
            raise ValueError(f"unknown axis {k!r}; known axes: {', '.join(AXES)}")
        out[k] = v if k == "graph" else AXES[k].check(v)
    spec = dataclasses.replace(base, **out)
    if spec.graph not in GRAPHS:
        raise ValueError(f"axis 'graph': unknown graph family {spec.graph!r}; known: "
                         f"{', '.join(GRAPHS)} (add one with register_graph)")
    if spec.n_envs > spec.max_envs:
        raise ValueError(f"axis 'n_envs': {spec.n_envs} exceeds max_envs={spec.max_envs}")
    if spec.w_low > spec.w_high:
        raise ValueError(f"axis 'w_low' ({spec.w_low}) must not exceed w_high "
                         f"({spec.w_high})")
    if spec.n < spec.d:
        raise ValueError(f"axis 'n': need at least d={spec.d} rows; got {spec.n}")
    return spec
