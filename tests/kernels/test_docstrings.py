"""Every public kernel documents itself: an ``Args:`` section naming each parameter (for
every function of more than one argument) and a ``Differentiable:`` line, and every kernel
whose line says yes is checked by ``jax.grad`` against a central finite difference.

The public kernels are the functions that each public module of :mod:`jaxkit.kernels`
exports (its ``__all__``), the modules that the API reference renders
(``docs/hooks.py::public_modules``). The line reads ``Differentiable: yes, in x and w``
or ``Differentiable: no: <why>``. :data:`GRAD` holds one case per "yes" kernel: a tiny
function of float64 arrays (static choices closed over) and a builder of its arguments;
the test differentiates a fixed random linear functional of the function's float outputs
with respect to every float leaf of the arguments and compares its product with a random
direction with a central difference along that direction (relative tolerance 1e-4 in
float64; kernels that compute in float32 take a larger step and 2e-2). Inputs the
gradient is not meant for (a straight-through estimator's threshold, a residual that a
loss holds constant by ``stop_gradient``, a structure such as a DAG's zero pattern) are
closed over by the case; the kernel's line says so. Three compile-heavy cases are marked
``slow`` (``pytest -m slow``, 15, 8 and 3 s): ``simulate_scm`` (every mechanism and noise
law), diffrax's adaptive ``integrate`` and ``simulate_mechanism_batch``, which the default
case of ``simulate_mechanism`` runs through.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
import pytest
from jaxkit.kernels import (
    _xla_cpu,
    bandit,
    belief,
    charge,
    checks,
    crosscoder,
    fingerprint,
    flow,
    flow_discrete,
    flow_ot,
    ica,
    ica_transform,
    lingam,
    md,
    nets,
    sem,
    seq,
    train,
    wasserstein,
)

ROOT = Path(__file__).resolve().parents[2]
F64 = jnp.float64


# ------------------------------------------------------------------- the public kernels


def _public_modules() -> list[str]:
    """Dotted module names under ``kernels`` that the API reference renders."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from hooks import public_modules
    finally:
        sys.path.remove(str(ROOT / "docs"))
    import jaxkit.kernels as K

    return [m for f in K._families() for m in public_modules(f"kernels.{f}")]


def _public_functions() -> dict[str, Callable]:
    """``{"family.module.name": function}`` for every public kernel function, each once
    (keyed by the module that defines it)."""
    out: dict[str, Callable] = {}
    for mod_name in _public_modules():
        mod = importlib.import_module(f"jaxkit.{mod_name}")
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n, o in vars(mod).items() if not n.startswith("_")
                     and inspect.isfunction(o) and o.__module__ == mod.__name__]
        for n in names:
            o = getattr(mod, n)
            where = getattr(o, "__module__", "") or ""
            if inspect.isclass(o) or not callable(o) or not where.startswith("jaxkit.kernels."):
                continue  # classes, constants, type aliases
            out.setdefault(f"{where.removeprefix('jaxkit.kernels.')}.{o.__name__}", o)
    return out


PUBLIC = _public_functions()


def _args_section(doc: str) -> list[str] | None:
    """The parameter names of the Google-style ``Args:`` section of ``doc`` (``a, b: ...``
    names two), or ``None`` when it has none."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "Args:":
            continue
        indent = len(line) - len(line.lstrip())
        body = [x for x in lines[i + 1:] if x.strip()]
        if not body:
            return []
        first = len(body[0]) - len(body[0].lstrip())
        names: list[str] = []
        for x in body:
            ind = len(x) - len(x.lstrip())
            if ind <= indent:
                break
            m = re.match(r"\s*(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?:\([^)]*\))?:(\s|$)", x)
            if ind == first and m:
                names += [s.strip().lstrip("*") for s in m.group(1).split(",")]
        return names
    return None


def _differentiable(doc: str) -> str | None:
    m = re.search(r"^Differentiable: (.*)$", doc, re.M)
    return m.group(1) if m else None


def test_every_multi_argument_kernel_has_args():
    missing, incomplete = [], []
    for name, fn in PUBLIC.items():
        params = list(inspect.signature(fn).parameters.values())
        if len(params) < 2:
            continue
        names = _args_section(inspect.getdoc(fn) or "")
        if names is None:
            missing.append(name)
            continue
        absent = [p.name for p in params if p.name not in names]
        if absent:
            incomplete.append(f"{name}: {absent}")
    assert not missing, f"public kernels without an Args: section: {missing}"
    assert not incomplete, f"Args: sections missing parameters: {incomplete}"


def test_args_parser():
    doc = ("Sum.\n\nArgs:\n    x: a.\n        more.\n    a, b (int): c.\n    **kw: d.\n\n"
           "Returns:\n    e.")
    assert _args_section(doc) == ["x", "a", "b", "kw"]
    assert _args_section("No args.") is None


def test_every_kernel_says_whether_it_is_differentiable():
    bad = {}
    for name, fn in PUBLIC.items():
        line = _differentiable(inspect.getdoc(fn) or "")
        if line is None or not re.match(r"(yes, in \S.*|no: \S.*)$", line):
            bad[name] = line
    assert not bad, f"public kernels without a 'Differentiable: yes, in ... / no: ...' line: {bad}"


def _says_yes() -> set[str]:
    return {n for n, fn in PUBLIC.items()
            if (_differentiable(inspect.getdoc(fn) or "") or "").startswith("yes")}


# ------------------------------------------------------------------------ gradient cases


class G(NamedTuple):
    """``fn(*make(rng))`` is differentiated in every float leaf of the arguments (the
    others, integers, booleans and keys, held fixed); ``rng`` is a NumPy generator, so
    that building the arguments compiles nothing."""

    fn: Callable
    make: Callable
    eps: float = 1e-6  # finite-difference step along a standard normal direction
    rtol: float = 1e-4  # |fd - <grad, v>| <= rtol * max(|fd|, |<grad, v>|, 1e-3)
    slow: str = ""


def _n(r, *shape, scale=1.0):
    return jnp.asarray(scale * r.standard_normal(shape))


def _u(r, *shape, lo=0.0, hi=1.0):
    return jnp.asarray(r.uniform(lo, hi, shape))


def _mixed(r, n=24, d=3):
    """Laplace sources through a well-conditioned mixing: an ICA-friendly data matrix."""
    s = r.laplace(size=(n, d))
    return jnp.asarray(s @ (r.standard_normal((d, d)) + 3 * np.eye(d)).T)


def _K0():
    return jax.random.key(3)  # a fixed key: the draws it makes are held fixed


F32 = dict(eps=1e-3, rtol=2e-2)  # kernels that compute in float32 (a coarser difference)

#: ``{"family.module.name": case}``; ``"name[variant]"`` for a second case of a kernel.
GRAD: dict[str, G] = {}


def case(name: str, fn, make, **kw):
    assert name not in GRAD, name
    GRAD[name] = G(fn, make, **kw)


# --- checks: identities with run-time checks attached
case("checks.check_finite", lambda x: checks.check_finite(x, "x"), lambda r: (_n(r, 3),))
case("checks.check_data_matrix", checks.check_data_matrix, lambda r: (_n(r, 5, 2),))
case("checks.fail", lambda x: checks.fail(x, jnp.any(x > 10), "big"), lambda r: (_n(r, 3),))
case("checks.fail_first", lambda x: checks.fail_first(x, [(jnp.any(x > 10), "big")]),
     lambda r: (_n(r, 3),))

# --- ICA
_W = lambda r: _n(r, 3, 3) + 2 * jnp.eye(3)  # noqa: E731


def _fit(r):
    """A FastICA result with random arrays (transform reads the mean and the matrices)."""
    nan = jnp.zeros((), bool)
    return ica.FastICAResult(_W(r), _W(r), _n(r, 3), _n(r, 4, 3), _W(r), _W(r),
                             jnp.zeros((), jnp.int32), nan, nan)


case("ica_whiten.whiten", lambda x: ica.whiten(x)[:3], lambda r: (_mixed(r),))
case("ica.sym_decorrelation", ica.sym_decorrelation, lambda r: (_W(r),))
case("ica.fixed_point_update", lambda w, x: ica.fixed_point_update(w, ica.whiten(x).z),
     lambda r: (ica.sym_decorrelation(_W(r)), _mixed(r)))
case("ica_metrics.amari_distance", ica.amari_distance, lambda r: (_W(r), _W(r)))
case("ica_transform.transform", ica_transform.transform, lambda r: (_fit(r), _n(r, 4, 3)))
case("ica_transform.inverse_transform", ica_transform.inverse_transform,
     lambda r: (_fit(r), _n(r, 4, 3)))

# --- fingerprints, transport
case("fingerprint.nearest_neighbour", lambda s: fingerprint.nearest_neighbour(s).similarity,
     lambda r: (_n(r, 3, 4),))
case("fingerprint.nearest_neighbour_predict",
     lambda s, y: fingerprint.nearest_neighbour_predict(jax.lax.stop_gradient(s), y),
     lambda r: (_n(r, 3, 4), _n(r, 4)))
case("wasserstein.wasserstein", wasserstein.wasserstein, lambda r: (_n(r, 4, 2), _n(r, 4, 2)))

# --- molecular dynamics: a BKS-like two-species table (Buckingham + wall + DSF Coulomb)
_MD_SYM = lambda v: jnp.asarray(np.asarray(v) + np.asarray(v).T - np.diag(np.diag(v)))  # noqa: E731
_MD_Z = jnp.zeros((2, 2))
_MD_TABLE = md.PairTable(
    jnp.array([2.4, -1.2]), _MD_SYM([[0.0, 18003.7572], [0, 1388.773]]),
    _MD_SYM([[0.0, 4.87318], [0, 2.76]]), _MD_SYM([[0.0, 133.5381], [0, 175.0]]),
    _MD_Z, _MD_Z, _MD_Z, _MD_Z, _MD_SYM([[1.277e-3, 3e-3], [0, 1.2e-3]]),
    _MD_SYM([[0.4, 1.313], [0, 1.779]]), 5.5, 6.0, 0.2)
_MD_BOX, _MD_SPECIES = 12.5, jnp.array([0, 0, 1, 1, 1, 1, 1])
_MD_MASK = jnp.array([True] * 6 + [False])


def _md_pos(r):
    """Six atoms on a jittered 3 A lattice (no close pairs) and one padding atom."""
    g = np.array([[0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 1, 0], [2, 2, 2]])
    return jnp.asarray(3.0 * g + 2.0 + 0.1 * r.standard_normal((7, 3)))


case("md.pair.pair_terms", lambda d: md.pair_terms(d, _MD_SPECIES[:3], _MD_SPECIES[3:6],
                                                  _MD_TABLE), lambda r: (_u(r, 3, lo=1.6, hi=5.0),))
case("md.pair.energy", lambda x: md.energy(x, _MD_BOX, _MD_SPECIES, _MD_MASK, _MD_TABLE),
     lambda r: (_md_pos(r),))
case("md.pair.forces", lambda x: md.forces(x, _MD_BOX, _MD_SPECIES, _MD_MASK, _MD_TABLE)[0],
     lambda r: (_md_pos(r),))
case("md.pair.virial", lambda x: md.virial(x, _MD_BOX, _MD_SPECIES, _MD_MASK, _MD_TABLE),
     lambda r: (_md_pos(r),))
case("md.verlet.kinetic_energy", md.kinetic_energy,
     lambda r: (_n(r, 7, 3, scale=0.01), _u(r, 7, lo=10.0, hi=30.0)))
case("md.verlet.temperature", lambda v, m: md.temperature(v, m, _MD_MASK),
     lambda r: (_n(r, 7, 3, scale=0.01), _u(r, 7, lo=10.0, hi=30.0)))


# --- belief: probabilities inside (0, 1); log probabilities normalised by the case
_p = lambda r, *shape: _u(r, *shape, lo=0.1, hi=0.9)  # noqa: E731
_lsm = lambda x: jax.nn.log_softmax(x, axis=-1)  # noqa: E731
case("belief.voi.voi", belief.voi, lambda r: (_p(r, 3), _p(r, 3), _p(r, 3)))
case("belief.voi.voi_categorical", lambda q, pc: belief.voi_categorical(
    jax.nn.softmax(q), jax.nn.softmax(pc, axis=-1)), lambda r: (_n(r, 3), _n(r, 3, 4)))
case("belief.voi.cohere", belief.cohere, lambda r: (_p(r, 3), _p(r, 3), _p(r, 3), _p(r, 3)))
case("belief.voi.binary_entropy", belief.binary_entropy, lambda r: (_p(r, 3),))
case("belief.voi.check_probability", lambda x: belief.check_probability(x, "x"),
     lambda r: (_p(r, 3),))
case("belief.updates.realised_updates", lambda x, y: belief.realised_updates(
    x, 2, outcome=y)[:3], lambda r: (_p(r, 2, 5), _p(r, 2)))
case("belief.updates.update_between", lambda x, y: belief.update_between(
    x, jnp.array([0, 3]), jnp.array([4, 1]), outcome=y)[:3], lambda r: (_p(r, 2, 5), _p(r, 2)))
case("belief.updates.clip_prices", belief.clip_prices, lambda r: (_u(r, 4, lo=0.05, hi=0.95),))
case("belief.posterior.check_log_prior", lambda x: belief.check_log_prior(_lsm(x)),
     lambda r: (_n(r, 4),))
case("belief.posterior.check_log_probs", lambda x: belief.check_log_probs(x, "x"),
     lambda r: (_n(r, 4),))
case("belief.posterior.posterior", lambda lp, ll: belief.posterior(_lsm(lp), ll),
     lambda r: (_n(r, 4), _n(r, 2, 4)))
case("belief.posterior.entropy", lambda x: belief.entropy(_lsm(x)), lambda r: (_n(r, 2, 4),))
for _f in ("kl", "total_variation", "entropy_drop", "top_two_log_bf", "redistribution"):
    case(f"belief.posterior.{_f}", lambda a, b, f=getattr(belief, _f): f(_lsm(a), _lsm(b)),
         lambda r: (_n(r, 2, 4), _n(r, 2, 4)))
case("belief.eig.check_log_lik_table", lambda lp, ll: belief.check_log_lik_table(
    _lsm(lp), _lsm(ll)), lambda r: (_n(r, 3), _n(r, 3, 2)))
case("belief.eig.check_selection", lambda lp, ll, c: belief.check_selection(
    _lsm(lp), _lsm(ll), c, 3.0, jnp.array([0, 1]))[:4],
     lambda r: (_n(r, 3), _n(r, 2, 3, 2), _u(r, 2, lo=0.5, hi=1.5)))
case("belief.eig.eig", lambda lp, ll: belief.eig(_lsm(lp), _lsm(ll)),
     lambda r: (_n(r, 3), _n(r, 2, 3, 4)))
case("belief.eig.outcome_posteriors", lambda lp, ll: belief.outcome_posteriors(_lsm(lp), _lsm(ll)),
     lambda r: (_n(r, 3), _n(r, 3, 4)))
case("belief.eig.greedy_init", lambda lp: belief.greedy_init(_lsm(lp), 2), lambda r: (_n(r, 3),))
case("belief.eig.eig_per_cost", lambda lp, ll, c: belief.eig_per_cost(
    _lsm(lp), _lsm(ll), c, 3.0, jnp.array([False, True, False])),
     lambda r: (_n(r, 3), _n(r, 3, 3, 2), _u(r, 3, lo=0.5, hi=1.5)))
case("belief.eig.greedy_step", lambda lp, ll, c: belief.greedy_step(
    belief.greedy_init(_lsm(lp), 3), _lsm(ll), c, 3.0, jnp.array([0, 1, 1])),
     lambda r: (_n(r, 3), _n(r, 3, 3, 2), _u(r, 3, lo=0.5, hi=1.5)))
case("belief.eig.greedy_eig", lambda lp, ll, c: belief.greedy_eig(
    _lsm(lp), _lsm(ll), c, 3.0, jnp.array([0, 1, 1]), max_steps=3),
     lambda r: (_n(r, 3), _n(r, 3, 3, 2), _u(r, 3, lo=0.5, hi=1.5)))


def _model(x, y=None):
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(theta * x, 1.0), obs=y)


def _model_exact(x, y=None):
    numpyro.sample("y", dist.Normal(0.5 * x, 1.0), obs=y)


case("belief.evidence.observed_log_lik", lambda x, y: belief.observed_log_lik(
    jax.random.key(0), _model, x, y=y), lambda r: (_n(r, 3), _n(r, 3)))
case("belief.evidence.log_evidence", lambda x, y: belief.log_evidence(
    jax.random.key(0), _model, x, y=y, n_samples=8).log_evidence, lambda r: (_n(r, 3), _n(r, 3)))
case("belief.evidence.log_lik_table", lambda xs, ys: belief.log_lik_table(
    jax.random.key(0), [_model, _model_exact], xs, ys, n_samples=4),
     lambda r: (_n(r, 2, 3), _n(r, 2, 3)))
case("belief.evidence.beta_binomial_log_evidence", lambda a, b: belief.beta_binomial_log_evidence(
    jnp.array([1, 3]), jnp.array([4, 5]), a, b),
     lambda r: (_u(r, lo=0.5, hi=2), _u(r, lo=0.5, hi=2)))
case("belief.evidence.gamma_poisson_log_evidence",
     lambda sh, ra, ex: belief.gamma_poisson_log_evidence(jnp.array([0, 2, 5]), sh, ra, ex),
     lambda r: (_u(r, lo=0.5, hi=2), _u(r, lo=0.5, hi=2), _u(r, 3, lo=0.5, hi=2)))
case("belief.evidence.normal_log_evidence", belief.normal_log_evidence,
     lambda r: (_n(r, 4), _n(r), _u(r, lo=0.5, hi=2), _u(r, lo=0.5, hi=2)))


# --- SEM simulators and statistics (the mechanisms simulate in float32)
_dag = lambda r, d=3: jnp.tril(_n(r, d, d), -1)  # noqa: E731
case("sem.dags.edge_weights", lambda lo, hi: sem.edge_weights(_K0(), (4,), w_low=lo, w_high=hi),
     lambda r: (_u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2)))
for _f in ("erdos_renyi_dag", "scale_free_dag", "random_dag"):
    case(f"sem.dags.{_f}", lambda lo, hi, f=getattr(sem, _f): f(_K0(), 4, w_low=lo, w_high=hi,
                                                                 dtype=F64),
         lambda r: (_u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2)))
case("sem.dags.dag_inverse", sem.dag_inverse, lambda r: (_dag(r),))
case("sem.pooling.simulate_pooled", lambda b, st, ns: sem.simulate_pooled(
    _K0(), jnp.tril(b, -1), n_envs=2, n_per_env=3, strength=st, noise_scale=ns).x,
     lambda r: (_dag(r), _u(r, lo=2, hi=3), _u(r, lo=0.5, hi=1.5)))
case("sem.stats.excess_kurtosis", sem.excess_kurtosis, lambda r: (_n(r, 8, 2),))
case("sem.stats.square_correlation", sem.square_correlation, lambda r: (_n(r, 8, 3),))
case("sem.stats.mean_offdiag", sem.mean_offdiag, lambda r: (_n(r, 3, 3),))
case("sem.stats.hsic", sem.hsic, lambda r: (_n(r, 8), _n(r, 8)))
case("sem.stats.atomic_scale_theory", lambda st: sem.atomic_scale_theory(4, st),
     lambda r: (_u(r, lo=1.5, hi=3),))


def _adj():
    return jnp.array([[0, 0, 0], [1, 0, 0], [1, 1, 0]], bool)


_SCM = dict(active=jnp.ones(3, bool), rows=jnp.ones(6, bool), env=jnp.array([-1, -1, 0, 0, 1, 1]),
            targets=jnp.array([[True, False, False], [False, False, True]]),
            itype=jnp.asarray(1))
case("sem.mechanisms.init_mechanisms", lambda a, b, c, d: sem.init_mechanisms(
    _K0(), _adj(), w_low=a, w_high=b, scale_low=c, scale_high=d),
     lambda r: (_u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2), _u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2)),
     **F32)
case("sem.mechanisms.init_mechanism", lambda a, b, c, d: sem.mechanisms.init_mechanism(
    _K0(), _adj(), 1, w_low=a, w_high=b, scale_low=c, scale_high=d),
     lambda r: (_u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2), _u(r, lo=0.2, hi=0.5), _u(r, lo=1, hi=2)),
     **F32)
case("sem.mechanisms.simulate_scm", lambda p: sem.simulate_scm(
    _K0(), _adj(), p, mechanism=jnp.asarray(1), noise=jnp.asarray(0), **_SCM),
     lambda r: (sem.init_mechanisms(_K0(), _adj()),), **F32,
     slow="compiles every mechanism and noise law; simulate_mechanism covers one")
case("sem.mechanisms.simulate_mechanism", lambda p, e: PUBLIC["sem.mechanisms.simulate_mechanism"](
    1, _K0(), _adj(), p, e.astype(jnp.float32), **_SCM),  # the MLP: NaN gradients before
     lambda r: (sem.init_mechanisms(_K0(), _adj()), _n(r, 6, 3)), **F32)
case("sem.mechanisms.simulate_mechanism_batch", lambda p, e: PUBLIC[
    "sem.mechanisms.simulate_mechanism_batch"](
    4, _K0()[None], _adj()[None], p, e.astype(jnp.float32), iscm=jnp.array([False]),
    **{k: jnp.asarray(v)[None] for k, v in _SCM.items()}),
     lambda r: (jax.tree.map(lambda a: a[None], sem.init_mechanisms(_K0(), _adj())),
                _n(r, 1, 6, 3)), **F32, slow="simulate_mechanism runs through it")
case("sem.mechanisms.masked_moments", sem.mechanisms.masked_moments,
     lambda r: (_n(r, 6), jnp.array([1, 1, 0, 1, 0, 1], bool)))
case("sem.mechanisms.fast_cos", sem.mechanisms.fast_cos, lambda r: (_n(r, 6, scale=3),), **F32)
case("sem.prior.mix_priors", sem.mix_priors, lambda r: (sem.make_prior(), sem.make_prior(
    graphs={"er": 1.0}, w_range=(1.0, 3.0)), _u(r, lo=0.2, hi=0.8)), **F32)
case("sem.prior.standardize_columns", sem.prior.standardize_columns,
     lambda r: (_n(r, 6, 2), jnp.array([1, 1, 0, 1, 0, 1], bool)))
case("sem.grouping.grouped_switch", lambda x: sem.grouping.grouped_switch(
    jnp.array([1, 0, 1]), [jnp.sin, jnp.cos], x, chunk=2), lambda r: (_n(r, 3, 2),))
case("sem.notears.expm_taylor", PUBLIC["sem.notears.expm_taylor"],
     lambda r: (_n(r, 3, 3, scale=0.5),))
case("sem.notears.notears_h", PUBLIC["sem.notears.notears_h"], lambda r: (_n(r, 3, 3, scale=0.5),))


# --- LiNGAM pieces with closed forms (the fits themselves are not differentiable)
case("lingam.order.b_from_unmixing", lingam.b_from_unmixing, lambda r: (_W(r),))
case("lingam.effects.estimate_total_effect", lambda x: lingam.estimate_total_effect(
    x, jnp.array([[0, 0, 0], [0.5, 0, 0], [1.0, 0.3, 0]]), jnp.array([0, 1, 2]), 0, 2)[0],
     lambda r: (_mixed(r, 12),))
case("lingam.effects.total_effects_from_adjacency", lingam.total_effects_from_adjacency,
     lambda r: (_dag(r, 4),))
case("lingam.effects.hsic_test_gamma", lingam.hsic_test_gamma, lambda r: (_n(r, 10), _n(r, 10)))
case("lingam.effects.error_independence_p_values", lingam.error_independence_p_values,
     lambda r: (_mixed(r, 10), _dag(r)))
case("lingam.kernel_measure.standardise", PUBLIC["lingam.kernel_measure.standardise"],
     lambda r: (_n(r, 6, 2),))

# --- nets, the training step's state
case("nets.sinusoidal_embedding", lambda t: nets.sinusoidal_embedding(t, 4, scale=1.0),
     lambda r: (_u(r),), **F32)
case("nets.apply_batch", lambda w, t, x, y: nets.apply_batch(
    lambda t, x, y: jnp.tanh(x @ w) * t + y, t, x, y),
     lambda r: (_n(r, 2, 2), _u(r, 3), _n(r, 3, 2), _n(r, 3, 2)))
case("train.init", lambda p: train.init(p, optax.adam(1e-3)),
     lambda r: ({"w": _n(r, 2, 2)},))


# --- flows: paths, losses, integrators (a linear velocity field)
def _vel(p, t, x, y=None):
    out = jnp.tanh(x @ p["w"]) + jnp.asarray(t)[..., None] * p["b"]
    return out if y is None else out + jnp.where(y < 0, 0.0, 1.0)[..., None] * p["c"]


_vp = lambda r: {"w": _n(r, 2, 2, scale=0.5), "b": _n(r, 2), "c": _n(r, 2)}  # noqa: E731
_pair = lambda r: (_n(r, 3, 2), _n(r, 3, 2), _u(r, 3, lo=0.1, hi=0.9))  # noqa: E731
case("flow.paths.linear_path", lambda a, b, t, s: flow.linear_path(
    a, b, t[:, None], sigma=s, key=_K0()), lambda r: (*_pair(r), _u(r, lo=0.1, hi=0.5)))
case("flow.paths.cond_ot_path", lambda a, b, t: flow.cond_ot_path(a, b, t[:, None], 0.01),
     _pair)
case("flow.paths.vp_path", lambda a, b, t: flow.vp_path(a, b, t[:, None]), _pair)
case("flow.paths.sb_path", lambda a, b, t, s: flow.sb_path(_K0(), a, b, t[:, None], s),
     lambda r: (*_pair(r), _u(r, lo=0.2, hi=1)))
case("flow.paths.sample_path", lambda a, b, t: flow.sample_path("vp", _K0(), a, b, t[:, None]),
     _pair)
case("flow.losses.cfm_loss", lambda p, a, b: flow.cfm_loss(
    lambda p, t, x: _vel(p, t, x), p, _K0(), a, b), lambda r: (_vp(r), _n(r, 2), _n(r, 2)))
case("flow.losses.cfm_batch_loss", lambda p, a, b, w: flow.cfm_batch_loss(
    _vel, p, _K0(), a, b, path="sb", sigma=0.2, y=jnp.array([0, 1, 2]), p_uncond=0.3,
    weights=w), lambda r: (_vp(r), _n(r, 3, 2), _n(r, 3, 2), _u(r, 3)))
case("flow.losses.cfg_velocity", lambda p, t, x: flow.cfg_velocity(
    _vel, p, t, x, jnp.array([0, 1, 2]), 1.5), lambda r: (_vp(r), _u(r, 3), _n(r, 3, 2)))
case("flow.integrators.integrate", lambda p, x, t0, t1: flow.integrate(
    lambda t, x: _vel(p, t, x), x, method="rk4", steps=3, t0=t0, t1=t1),
     lambda r: (_vp(r), _n(r, 3, 2), _u(r, hi=0.2), _u(r, lo=0.8, hi=1.2)))
case("flow.integrators.integrate_with_stats", lambda p, x, t0, t1: flow.integrate_with_stats(
    lambda t, x: _vel(p, t, x), x, method="heun", steps=3, t0=t0, t1=t1)[0],
     lambda r: (_vp(r), _n(r, 3, 2), _u(r, hi=0.2), _u(r, lo=0.8, hi=1.2)))
case("flow.integrators.integrate[adaptive]", lambda p, x: flow.integrate(
    lambda t, x: _vel(p, t, x), x, method="tsit5", steps=None, rtol=1e-6, atol=1e-6),
     lambda r: (_vp(r), _n(r, 3, 2)), rtol=1e-3, slow="diffrax's adaptive solve compiles slowly")
case("flow.likelihood.log_likelihood", lambda p, x: flow.log_likelihood(
    lambda t, x: _vel(p, t, x), x, steps=3), lambda r: (_vp(r), _n(r, 2)))
case("flow.likelihood.gaussian_logp", flow.gaussian_logp, lambda r: (_n(r, 3),))
case("flow_discrete.kappa", lambda t, e: flow_discrete.kappa(
    t, scheduler="polynomial", exponent=e), lambda r: (_u(r, 3, lo=0.1, hi=0.9), _u(r, lo=1, hi=3)))
case("flow_discrete.kappa_dot", lambda t, e: flow_discrete.kappa_dot(
    t, scheduler="polynomial", exponent=e), lambda r: (_u(r, 3, lo=0.1, hi=0.9), _u(r, lo=1, hi=3)))


def _logits(p, t, x):
    return p["table"][x] + jnp.asarray(t).reshape(-1, 1, 1) * p["bias"]


case("flow_discrete.dfm_loss", lambda p: flow_discrete.dfm_loss(
    _logits, p, _K0(), jnp.array([[0, 1, 2], [3, 1, 0]]), vocab_size=4),
     lambda r: ({"table": _n(r, 5, 4), "bias": _n(r, 4)},), **F32)
case("flow_ot.sq_cost", flow_ot.sq_cost, lambda r: (_n(r, 3, 2), _n(r, 3, 2)))
case("flow_ot.sinkhorn_plan", lambda a, b: flow_ot.sinkhorn_plan(  # implicit differentiation
    a, b, epsilon=0.5, threshold=1e-6), lambda r: (_n(r, 3, 2), _n(r, 3, 2)), rtol=1e-2)
case("flow_ot.apply_coupling", lambda a, b: flow_ot.apply_coupling(
    a, b, jnp.array([2, 0, 1]), jnp.array([0, 0, 2])), lambda r: (_n(r, 3, 2), _n(r, 3, 2)))
case("flow_ot.ot_cfm_loss", lambda p, a, b: flow_ot.ot_cfm_loss(_vel, p, _K0(), a, b),
     lambda r: (_vp(r), _n(r, 3, 2), _n(r, 3, 2)))


# --- bandits: the credit arithmetic (the policies choose integer arms)
case("bandit.genealogy.ballad_add_roots", lambda sc: bandit.ballad_add_roots(
    bandit.ballad(3, capacity=4).init(), sc), lambda r: (_u(r, 2),), **F32)
case("bandit.genealogy.propagate_credit", lambda g: bandit.propagate_credit(
    jnp.array([[-1, -1], [0, -1], [0, 1], [2, -1]]), g, decay=0.5), lambda r: (_n(r, 4),))
case("bandit.genealogy.credit_per_arm", lambda c: bandit.credit_per_arm(
    c, jnp.array([0, 1, 1, 2]), n_arms=3, node_time=jnp.array([0, 1, 2, 3]), now=4, gamma=0.9),
     lambda r: (_n(r, 4),))

# --- charge balance: the noise, the simplex projection, the optimal costs
case("charge.noise.balanced_noise", lambda q: charge.balanced_noise(_K0(), (4, 3), q, dtype=F64),
     lambda r: (_n(r, 3),))
case("charge.simplex.simplex_rows", lambda z: charge.simplex_rows(z), lambda r: (_n(r, 3, 4),))
for _m in ("fixing", "dp"):  # the optimal cost sum_i cost[i, a_i] at the fixed assignment
    case(f"charge.discrete.project_discrete[{_m}]", lambda c, m=_m: charge.project_discrete(
        c, np.array([-1, 1, 2]), method=m).cost, lambda r: (_n(r, 4, 3),))
case("charge.lagrangian.project_discrete_approx", lambda c: charge.project_discrete_approx(
    c, np.array([-1, 1, 2])).cost, lambda r: (_n(r, 4, 3),))
case("charge.composition.project_composition", lambda c: charge.project_composition(
    c, np.array([-1, 1, 2]), np.array([0, 1, 1]), np.array([2, 2])).cost,
     lambda r: (_n(r, 4, 3),))
case("charge.composition.project_splits", lambda c: charge.project_splits(
    c, np.array([-1, 1, 2]), np.array([[2, 2, 0], [3, 0, 1]])).cost, lambda r: (_n(r, 4, 3),))


# --- crosscoders: SAE / crosscoder parameters built in NumPy (float64)
cc = crosscoder
_CC = PUBLIC  # submodule functions that the package does not re-export


def _sae(r, d=4, f=6, site=()):
    w = r.standard_normal((f, *site, d))
    w = w / np.sqrt(np.sum(w ** 2, axis=tuple(range(1, w.ndim)), keepdims=True))
    return cc.Params(jnp.asarray(np.moveaxis(w, 0, -1).copy() + 0.1 * r.standard_normal(
        (*site, d, f))), _n(r, f, scale=0.3), jnp.asarray(w), _n(r, *site, d, scale=0.1),
                     jnp.asarray(np.log(r.uniform(0.05, 0.2, f))))


_x = lambda r, *s: _n(r, 5, *s)  # noqa: E731
case("crosscoder.faithfulness.output_fidelity", lambda a, b, c: cc.output_fidelity(a, b, c),
     lambda r: (_n(r, 4, 3), _n(r, 4, 3), _n(r, 4, 3)))
case("crosscoder.faithfulness.circuit_faithfulness", cc.circuit_faithfulness,
     lambda r: (_n(r, 3), _n(r, 3) + 5, _n(r, 3) - 5))
case("crosscoder.faithfulness.kl_per_image", cc.kl_per_image, lambda r: (_n(r, 4, 3), _n(r, 4, 3)))
case("crosscoder.params.init", lambda x: cc.init(_K0(), 4, 6, sample=x, dtype=F64),
     lambda r: (_x(r, 4),), **F32)  # the median is computed in float32
case("crosscoder.params.geometric_median", lambda x: cc.geometric_median(x, iters=8),
     lambda r: (_x(r, 3),))
case("crosscoder.params.log_threshold_from", cc.log_threshold_from, lambda r: (_u(r, 4, lo=0.1),))
case("crosscoder.model.apply_activation", lambda p: cc.apply_activation(
    p, None, "topk", 2, None, 1e-3)[0], lambda r: (_n(r, 3, 6),))
case("crosscoder.params.check_x", lambda p, x: cc.check_x(p, x), lambda r: (_sae(r), _x(r, 4)))
case("crosscoder.params.flat_decoder", cc.flat_decoder, lambda r: (_n(r, 6, 2, 3),))
case("crosscoder.params.atom_norms", cc.atom_norms, lambda r: (_n(r, 6, 2, 3),))
case("crosscoder.activations.relu", cc.relu, lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.topk", lambda p: cc.topk(p, 2), lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.batch_topk", lambda p: cc.batch_topk(p, 2)[0],  # min_kept: stopped
     lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.threshold", lambda p: cc.threshold(p, 0.2), lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.jumprelu", lambda p: cc.jumprelu(p, jnp.full(6, -1.5)),
     lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.sparsify", lambda p: cc.sparsify(
    p, None, "batch_topk", 2, None, 1e-3)[0], lambda r: (_n(r, 3, 6),))
case("crosscoder.activations.scatter_last", lambda v: _CC["crosscoder.activations.scatter_last"](
    (3, 6), jnp.array([[0, 2], [1, 5], [4, 3]]), v, F64), lambda r: (_n(r, 3, 2),))
case("crosscoder.losses.l1_penalty", cc.l1_penalty, lambda r: (_u(r, 3, 6), _n(r, 6, 4)))
case("crosscoder.losses.tanh_penalty", cc.tanh_penalty, lambda r: (_u(r, 3, 6), _n(r, 6, 4)))
case("crosscoder.model.pre_activation", cc.pre_activation, lambda r: (_sae(r), _x(r, 4)))
case("crosscoder.model.encode", lambda p, x: cc.encode(p, x, k=2), lambda r: (_sae(r), _x(r, 4)))
case("crosscoder.model.decode", cc.decode, lambda r: (_sae(r), _u(r, 5, 6)))
case("crosscoder.model.forward", lambda p, x: cc.forward(p, x, activation="relu"),
     lambda r: (_sae(r), _x(r, 4)))
case("crosscoder.model.steer", lambda p, x, a: cc.steer(p, x, 2, a),
     lambda r: (_sae(r, site=(2,)), _x(r, 2, 4), _u(r)))
case("crosscoder.model.encoder_input", lambda p, x: _CC["crosscoder.model.encoder_input"](
    p, x, True), lambda r: (_sae(r, site=(2,)), _x(r, 2, 4)))
case("crosscoder.model.encoder_product", lambda p, x: _CC["crosscoder.model.encoder_product"](
    p, x, True), lambda r: (_sae(r, site=(2,)), _x(r, 2, 4)))
case("crosscoder.model.decoder_product", _CC["crosscoder.model.decoder_product"],
     lambda r: (_sae(r, site=(2,)), _u(r, 5, 6)))
case("crosscoder.losses.loss_fn", lambda p, x: cc.loss_fn(  # AuxK: its residual is stopped
    p, x, activation="topk", k=2, sparsity_coef=0.1)[0], lambda r: (_sae(r), _x(r, 4)))
case("crosscoder.losses.auxk_loss", lambda pre, w, res=_n(np.random.default_rng(1), 5, 4):
     cc.auxk_loss(pre, res, w, jnp.array([0, 1, 0, 0, 1, 0.0]), 1),  # the residual: stopped
     lambda r: (_n(r, 5, 6), _n(r, 6, 4)))
case("crosscoder.losses.aux_normalised", lambda e, eh: _CC["crosscoder.losses.aux_normalised"](
    e, eh, jnp.array([0, 1, 0, 0, 1, 0.0]), 1, "gao"), lambda r: (_n(r, 5, 4), _n(r, 5, 4)))
case("crosscoder.losses.remove_parallel_grad", cc.remove_parallel_grad,
     lambda r: (_n(r, 6, 4), _n(r, 6, 4)))
case("crosscoder.losses.normalize_decoder", cc.normalize_decoder, lambda r: (_sae(r),))
case("crosscoder.sparse.sparse_decode", lambda v, w: cc.sparse_decode(
    v, jnp.array([[0, 2], [1, 5], [4, 3]]), w), lambda r: (_n(r, 3, 2), _n(r, 6, 4)))
case("crosscoder.sparse.topk_encode", lambda x, w, b: cc.topk_encode(
    x, w, b, jnp.zeros(6, bool), 2)[0], lambda r: (_n(r, 3, 4), _n(r, 4, 6), _n(r, 6)))
case("crosscoder.sparse.sparse_topk_loss", lambda p, x: cc.sparse_topk_loss(
    p, x, k=2, dead=None, sparsity_coef=0.1, sparsity="l1", tanh_c=4.0, k_aux=None,
    aux_coef=0.0)[0], lambda r: (_sae(r), _x(r, 4)))


def _clt(r, L=2, di=3, do=3, f=4):
    return cc.CLTParams(_n(r, L, di, f), _n(r, L, f, scale=0.3), _n(r, L, f, L, do, scale=0.5),
                        _n(r, L, do, scale=0.1))


case("crosscoder.clt.clt_forward", lambda p, x: cc.clt_forward(p, x, k=2),
     lambda r: (_clt(r), _n(r, 5, 2, 3)))
case("crosscoder.clt.clt_loss", lambda p, x, y: cc.clt_loss(p, x, y, k=2, sparsity_coef=0.1),
     lambda r: (_clt(r), _n(r, 5, 2, 3), _n(r, 5, 2, 3)))
case("crosscoder.metrics.fvu", cc.fvu, lambda r: (_x(r, 4), _x(r, 4)))
case("crosscoder.metrics.fvu_unchecked", _CC["crosscoder.metrics.fvu_unchecked"],
     lambda r: (_x(r, 4), _x(r, 4)))
case("crosscoder.metrics.explained_variance", cc.explained_variance,
     lambda r: (_x(r, 4), _x(r, 4)))
case("crosscoder.metrics.reconstruction_cosine", cc.reconstruction_cosine,
     lambda r: (_x(r, 4), _x(r, 4)))
case("crosscoder.metrics.cosine_matrix", cc.cosine_matrix, lambda r: (_n(r, 6, 4), _n(r, 3, 4)))
case("crosscoder.metrics.mmcs", cc.mmcs, lambda r: (_n(r, 6, 4), _n(r, 3, 4)))
case("crosscoder.metrics.mcc_hungarian", cc.mcc_hungarian, lambda r: (_n(r, 6, 4), _n(r, 3, 4)))

# the universal-circuit transcoder: two models, sites (4, 3) and (4, 5, 2)
_SPEC = cc.uc_spec(((4, 3), (4, 5, 2)), ((0,), (0, 1)), 4)


def _ucp(r):
    D, F = _SPEC.n_depths, _SPEC.n_latents
    return cc.UCParams(
        tuple(tuple(_n(r, ds[j], F, scale=0.5) for j in range(len(dm)))
              for ds, dm in zip(_SPEC.d_sites, _SPEC.depth_map, strict=True)),
        _n(r, D, F, scale=0.3), _n(r, D, F, scale=0.1) - 2,
        tuple(tuple(_n(r, D, F, ds[j + 1], scale=0.5) for j in range(len(dm)))
              for ds, dm in zip(_SPEC.d_sites, _SPEC.depth_map, strict=True)),
        tuple(tuple(_n(r, ds[j + 1], scale=0.1) for j in range(len(dm)))
              for ds, dm in zip(_SPEC.d_sites, _SPEC.depth_map, strict=True)))


def _sites(r, B=5):
    return tuple(tuple(_n(r, B, d) for d in ds) for ds in _SPEC.d_sites)


def _rest(m):
    def rest(mp, t, h):
        for j in range(t, len(_SPEC.depth_map[m])):
            h = jnp.tanh(h @ mp["layers"][j])
        return h @ mp["head"]
    return rest


_RESTS = (_rest(0), _rest(1))


def _models(r, C=3):
    return tuple({"layers": [_n(r, ds[j], ds[j + 1], scale=0.5) for j in range(len(ds) - 1)],
                  "head": _n(r, ds[-1], C)} for ds in _SPEC.d_sites)


case("crosscoder.cross_model.uc_encode", lambda p, s: cc.uc_encode(p, s, _SPEC, k=2),
     lambda r: (_ucp(r), _sites(r)))
case("crosscoder.cross_model.uc_decode", lambda p, z: cc.uc_decode(p, z, _SPEC),
     lambda r: (_ucp(r), _u(r, 5, 2, 4)))
case("crosscoder.cross_model.uc_forward", lambda p, s: cc.uc_forward(p, s, _SPEC, k=2),
     lambda r: (_ucp(r), _sites(r)))
case("crosscoder.cross_model.uc_loss", lambda p: cc.uc_loss(  # the KL's reference: stopped
    p, _sites(np.random.default_rng(1)), _SPEC, rest_fns=_RESTS, k=2, fidelity_coef=1.0,
    model_params=_models(np.random.default_rng(2)), sparsity_coef=0.1)[0],
     lambda r: (_ucp(r),))
case("crosscoder.cross_model.check_sites", lambda s: cc.check_sites(_SPEC, s),
     lambda r: (_sites(r),))
case("crosscoder.cross_model.kl_logits", cc.kl_logits, lambda r: (_n(r, 4, 3), _n(r, 4, 3)))
case("crosscoder.attribution.centred", cc.centred, lambda r: (_n(r, 4, 3),))
case("crosscoder.attribution.uc_replacement", lambda p, s, mp: cc.uc_replacement(
    p, s, _SPEC, _RESTS, mp, k=2), lambda r: (_ucp(r), _sites(r), _models(r)))
case("crosscoder.attribution.uc_attribution", lambda p, s, mp: cc.uc_attribution(
    p, s, _SPEC, _RESTS, mp, k=2, with_errors=False), lambda r: (_ucp(r), _sites(r), _models(r)))
case("crosscoder.attribution.class_attribution", lambda a: cc.class_attribution(
    a, jnp.array([0, 2, 1, 0, 2])), lambda r: (_n(r, 5, 2, 3, 2, 4),))
case("crosscoder.circuits.check_circuit", cc.check_circuit, lambda r: (_u(r, 2, 4) + 0.1,))
case("crosscoder.circuits.decoder_norms", lambda p: cc.decoder_norms(p, _SPEC),
     lambda r: (_ucp(r),))
case("crosscoder.circuits.logit_effects", lambda p, w: cc.logit_effects(p, _SPEC, 1, w),
     lambda r: (_ucp(r), _n(r, 2, 3)))
case("crosscoder.circuits.surgery_head", lambda p, wg, bg, wr, br: cc.surgery_head(
    p, _SPEC, 0, 1, 2, jnp.array([[1.0, 0, 1, 1], [0, 1, 1, 0]]), wg, bg, wr, br),
     lambda r: (_ucp(r), _n(r, 3, 3), _n(r, 3), _n(r, 2, 3), _n(r, 3)))

# temporal baselines
_tfa = lambda r: cc.TFAParams(_n(r, 4, 6), _n(r, 6, 4), _n(r, 4, scale=0.1), _n(r, 6, 3),  # noqa: E731
                              _n(r, 6, 3), _n(r, 6, 6, scale=0.3), _n(r, 6, 6, scale=0.3))
case("crosscoder.temporal_baselines.tfa_forward", lambda p, x: cc.tfa_forward(p, x, k=2),
     lambda r: (_tfa(r), _n(r, 2, 3, 4)))
case("crosscoder.temporal_baselines.tfa_loss", lambda p, x: cc.tfa_loss(p, x, k=2)[0],
     lambda r: (_tfa(r), _n(r, 2, 3, 4)))
case("crosscoder.temporal_baselines.tfa_normalize", cc.tfa_normalize, lambda r: (_tfa(r),))
case("crosscoder.temporal_baselines.matryoshka_loss", lambda p, x: cc.matryoshka_loss(
    p, x, k=2, prefixes=(3, 6))[0], lambda r: (_sae(r, site=(1,)), _x(r, 1, 4)))
case("crosscoder.temporal_baselines.layer_views", cc.layer_views, lambda r: (_n(r, 2, 3, 4),))
case("crosscoder.temporal_baselines.contrastive_loss", cc.contrastive_loss,
     lambda r: (_n(r, 4, 3), _n(r, 4, 3)))
case("crosscoder.temporal_baselines.smoothness_loss", cc.smoothness_loss,
     lambda r: (_n(r, 4, 3), _n(r, 4, 3)))
case("crosscoder.temporal_baselines.tsae_loss", lambda p, x: cc.tsae_loss(
    p, x, k=2, n_high=3)[0], lambda r: (_sae(r, site=(1,)), _n(r, 5, 2, 4)))


# --- sequence models (they compute in float32 and return the input dtype)
case("seq.attention.causal_attention", lambda q, k, v: seq.causal_attention(q, k, v),
     lambda r: (_n(r, 1, 4, 2, 3), _n(r, 1, 4, 2, 3), _n(r, 1, 4, 2, 3)), **F32)
case("seq.attention.causal_attention_heads", lambda q, k, v: seq.causal_attention_heads(
    q, k, v, block=2), lambda r: (_n(r, 1, 2, 4, 3), _n(r, 1, 2, 4, 3), _n(r, 1, 2, 4, 3)), **F32)
case("seq.attention.self_attention", lambda p, x: seq.self_attention(p, x, 2),
     lambda r: (seq.AttentionParams(_n(r, 4, 12, scale=0.5), _n(r, 4, 4, scale=0.5)),
                _n(r, 1, 3, 4)), **F32)
case("seq.mlp.mlp", seq.mlp, lambda r: (seq.MLPParams(_n(r, 4, 6), _n(r, 6, 4)), _n(r, 2, 4)),
     **F32)
case("seq.mlp.gelu", seq.gelu, lambda r: (_n(r, 5),), **F32)
case("seq.norm.layer_norm", seq.layer_norm, lambda r: (_n(r, 2, 4), _n(r, 4), _n(r, 4)), **F32)
case("seq.norm.rms_norm", seq.rms_norm, lambda r: (_n(r, 2, 4), _n(r, 4)), **F32)
case("seq.conv.causal_conv1d", seq.causal_conv1d, lambda r: (_n(r, 1, 5, 2), _n(r, 3, 2), _n(r, 2)),
     **F32)
case("seq.linear.linear", seq.linear, lambda r: (_n(r, 2, 3, 4), _n(r, 4, 2)), **F32)
_scan_args = lambda r: (_n(r, 1, 5, 3), _u(r, 1, 5, 3, lo=0.1, hi=0.5),  # noqa: E731
                        -_u(r, 3, 2, lo=0.5, hi=1.5), _n(r, 1, 5, 2), _n(r, 1, 5, 2), _n(r, 3),
                        _n(r, 1, 5, 3), _n(r, 1, 3, 2))
case("seq.scan.selective_scan", lambda *a: seq.selective_scan(*a, chunk=2), _scan_args, **F32)
case("seq.scan.selective_scan_sequential", lambda *a: seq.selective_scan_sequential(*a, chunk=2),
     _scan_args, **F32)
case("seq.scan.selective_scan_associative", seq.selective_scan_associative, _scan_args, **F32)
case("seq.ssd.segsum", seq.segsum, lambda r: (_n(r, 2, 4),), **F32)
_ssd_args = lambda r: (_n(r, 1, 4, 2, 3), _u(r, 1, 4, 2, lo=0.1, hi=0.5),  # noqa: E731
                       -_u(r, 2, lo=0.5, hi=1.5), _n(r, 1, 4, 1, 2), _n(r, 1, 4, 1, 2))
case("seq.ssd.ssd_chunked", lambda x, dt, A, B, C, D, h0: seq.ssd_chunked(
    x, dt, A, B, C, chunk=2, D=D, h0=h0), lambda r: (*_ssd_args(r), _n(r, 2), _n(r, 1, 2, 3, 2)),
     **F32)
case("seq.ssd.ssd_sequential", lambda x, dt, A, B, C, D, h0: seq.ssd_sequential(
    x, dt, A, B, C, D=D, h0=h0), lambda r: (*_ssd_args(r), _n(r, 2), _n(r, 1, 2, 3, 2)), **F32)
case("seq.mamba.mamba_mixer", seq.mamba_mixer, lambda r: (seq.MambaParams(
    _n(r, 4, 16, scale=0.5), _n(r, 3, 8, scale=0.5), _n(r, 8, scale=0.1), _n(r, 8, 10, scale=0.5),
    _n(r, 2, 8, scale=0.5), _n(r, 8, scale=0.1) - 2, _n(r, 8, 4, scale=0.1), _n(r, 8),
    _n(r, 8, 4, scale=0.5)), _n(r, 1, 5, 4)), **F32)
case("seq.mamba2.mamba2_mixer", lambda p, x: seq.mamba2_mixer(p, x, chunk=2),
     lambda r: (seq.Mamba2Params(
         _n(r, 4, 26, scale=0.5), _n(r, 3, 16, scale=0.5), _n(r, 16, scale=0.1),
         _n(r, 2, scale=0.1) - 2, _n(r, 2, scale=0.1), _n(r, 2), 1 + _n(r, 8, scale=0.1),
         _n(r, 8, 4, scale=0.5)), _n(r, 1, 4, 4)), **F32)


# ------------------------------------------------------------------------------ harness


def _split(args):
    """The float leaves of ``args`` and a function putting new ones back."""
    leaves, tree = jax.tree.flatten(args, is_leaf=lambda x: x is None)
    is_float = [isinstance(x, jax.Array | np.ndarray) and jnp.issubdtype(x.dtype, jnp.floating)
                for x in leaves]

    def rebuild(floats):
        it = iter(floats)
        return jax.tree.unflatten(tree, [next(it) if f else x
                                         for x, f in zip(leaves, is_float, strict=True)])

    return [x for x, f in zip(leaves, is_float, strict=True) if f], rebuild


#: Compilation is nearly all of this file's time. XLA:CPU's loop emitters instead of its
#: fusion emitters, and the LLVM module compiled in one piece instead of split over
#: threads, compile these tiny programs about 4x faster in CPU time (measured on 2 busy
#: cores: 9.5 -> 2.3 s for 40 cases); ``None`` where the jaxlib or backend lacks them.
FAST_COMPILE = _xla_cpu.cpu_options((("xla_cpu_use_fusion_emitters", False),
                                     ("xla_cpu_parallel_codegen_split_count", 1)))


def check_grad(c: G, seed: int = 0) -> tuple[float, float]:
    """``(<grad, v>, central difference along v)`` for a random direction ``v``: one
    compiled program per case (inputs, directions and output weights drawn in NumPy:
    JAX's random draws and eager operations would each compile on their own, which
    dominated these tiny cases)."""
    r = np.random.default_rng(seed)
    floats, rebuild = _split(c.make(r))
    assert floats, "no float argument to differentiate"
    dirs = [jnp.asarray(r.standard_normal(x.shape), x.dtype) for x in floats]

    def loss(fl):
        total = 0.0
        for i, o in enumerate(jax.tree.leaves(c.fn(*rebuild(fl)))):
            if jnp.issubdtype(o.dtype, jnp.floating):  # weights fixed by (seed, i)
                w = np.random.default_rng([seed, i]).standard_normal(o.shape).astype(o.dtype)
                total = total + jnp.sum(jnp.where(jnp.isfinite(o), w * o, 0.0))
        return total

    @jax.jit(compiler_options=FAST_COMPILE)
    def run(fl):
        g = jax.grad(loss)(fl)
        plus = loss([x + c.eps * v for x, v in zip(fl, dirs, strict=True)])
        minus = loss([x - c.eps * v for x, v in zip(fl, dirs, strict=True)])
        gv = sum(jnp.vdot(gi, v) for gi, v in zip(g, dirs, strict=True))
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(gi)) for gi in g]))
        nonzero = jnp.any(jnp.stack([jnp.any(gi != 0) for gi in g]))
        return gv, (plus - minus) / (2 * c.eps), finite, nonzero

    gv, fd, finite, nonzero = jax.device_get(run(floats))
    assert finite, "non-finite gradient"
    assert nonzero, "the gradient is zero everywhere"
    assert abs(fd - gv) <= c.rtol * max(abs(fd), abs(gv), 1e-3), (gv, fd)
    return float(gv), float(fd)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if c.slow else n
                                  for n, c in GRAD.items()])
def test_grad_matches_finite_difference(name):
    check_grad(GRAD[name])


def test_grad_cases_are_the_kernels_that_say_yes():
    yes, cases = _says_yes(), {n.split("[")[0] for n in GRAD}  # "name[variant]"
    assert cases - set(PUBLIC) == set(), "GRAD names kernels that are not public"
    assert yes - cases == set(), "kernels saying yes without a gradient case"
    assert cases - yes == set(), "gradient cases of kernels not saying yes"
