"""Expected information gain (EIG) of an experiment about K explanations, and greedy
EIG-per-cost selection of experiments under a budget.

An experiment ``x`` with outcomes ``y = 0 .. Y-1`` has the likelihood table
``log_lik[..., k, y] = log p(y | H_k, x)`` (each row a distribution over y). With the
belief ``pi`` over the explanations,

.. math:: p(y | x) = \\sum_k \\pi_k\\, p(y | H_k, x), \\qquad
          \\mathrm{EIG}(x) = \\sum_k \\pi_k \\sum_y p(y | H_k, x)
          \\log\\frac{p(y | H_k, x)}{p(y | x)}

the mutual information between the explanation and the outcome (nats), equal to
:math:`H(Y) - \\sum_k \\pi_k H(Y | H_k)` and to the expected KL of the posterior from the
prior, :math:`\\sum_y p(y | x)\\, KL(\\pi'_y \\| \\pi)` (Lindley 1956). The expected
posterior is the prior (:func:`outcome_posteriors`).

Greedy selection (:func:`greedy_eig`): with the budget left ``B``, choose the unused
candidate with the largest ``EIG(x) / c(x)`` among those with ``c(x) <= B`` (ties: lowest
index), observe its outcome, update the belief by Bayes' rule, recompute, until nothing
affordable is left. Greedy EIG has no identification guarantee (EC^2, Golovin, Krause &
Ray 2010, is the adaptive-submodular alternative); it is the contrastive-discovery rule.
Outcomes are given (``outcomes[x]``: what candidate ``x`` yields when run, drawn by the
caller from the true process), so the loop is a pure ``lax.scan`` of fixed length.
Masked candidates (padding) carry cost ``inf``; masked outcomes ``log_lik = -inf``.

Bad input raises ``ValueError`` naming the argument (concrete) or an
:func:`equinox.error_if` check (traced): NaN / +inf in the table, a table whose
explanation axis is not K, a row (with prior mass) not summing to one over y
(``|logsumexp| > tol``, 1e-3 float32 / 1e-6 float64), non-positive or NaN costs, a
budget below every cost, outcomes out of range.

Called on concrete arrays (outside ``jit``), :func:`eig` runs one jitted executable per
input shape (checks included), compiled on a CPU with AVX-512 with 512-bit vectors
(XLA:CPU's ``xla_cpu_prefer_vector_width``; its default is 256): 1.4-1.5x faster on a
1e4 x 16 x 100 float32 table, because 16 lanes cover the 100 outcomes in six vectors
and a 4-lane tail. A process-wide ``XLA_FLAGS=--xla_cpu_max_isa`` below AVX-512 turns
it off. Inside a user's own ``jax.jit`` the same gain needs
``jax.jit(f, compiler_options={"xla_cpu_prefer_vector_width": 512})``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .._xla_cpu import has_avx512
from ..checks import check_in_range, clear_errors, fail, fail_first, is_traced
from .posterior import _float, check_log_prior, check_log_probs, normalise_tol, posterior

__all__ = ["check_log_lik_table", "check_selection", "eig", "outcome_posteriors", "GreedyState",
           "GreedyInfo",
           "greedy_init", "eig_per_cost", "greedy_step", "greedy_eig"]

Array = jax.Array


def _check_table(log_prior, log_lik, name: str):
    """Shared part of :func:`check_log_lik_table` and :func:`eig`: ``(lp, ll, checks)``.

    Concrete inputs are checked at once in NumPy (``checks`` is empty). Traced, the
    checks of the table are ``(bad, msg)`` pairs for :func:`fail_first` built from ONE
    pass over it: a variadic reduction over the outcomes of ``(exp(ll), isnan(ll), ll
    == +inf)``, whose row sums ``s`` give the normalisation check ``|log s| <= tol`` in
    exp space (no max shift: a row with an entry above ``log(max float)`` overflows to
    ``s = inf`` and fails, as it should; a row of entries all below ``log(tiny)``
    underflows to ``s = 0`` and fails, as its logsumexp would). Separate NaN / +inf
    checks (each a conditional copying the table) and a logsumexp (two more passes)
    made the checked EIG of a 1e4 x 16 x 100 table 1.9x the unchecked one.
    """
    lp, ll, msgs = _table_prelude(log_prior, log_lik, name)
    if msgs is None:
        return lp, ll, []
    nan, pinf, rows = _row_checks(lp, ll, jnp.exp(ll))
    return lp, ll, list(zip((nan, pinf, rows), msgs, strict=True))


def _table_prelude(log_prior, log_lik, name: str):
    """``(lp, ll, msgs)``: the prior checked, the table's shape checked, and either the
    whole table checked in NumPy (concrete inputs; ``msgs`` None) or the three messages
    of the traced checks (NaN, +inf, rows not normalised) for :func:`_row_checks`."""
    lp = check_log_prior(log_prior)
    traced = is_traced(log_lik) or is_traced(lp)
    ll = check_log_probs(log_lik, name) if not traced else _float(log_lik)
    K = lp.shape[-1]
    if ll.ndim < 2 or ll.shape[-2] != K:
        raise ValueError(f"`{name}` must have shape (..., K, Y) = (..., {K}, n_outcomes) with "
                         f"K = {K} explanations as `log_prior`; got shape {ll.shape}")
    tol = normalise_tol(ll.dtype)
    msg = (f"`{name}` rows must be distributions over the outcomes (each logsumexp over "
           f"the last axis within {tol:g} of 0)")
    if not traced:  # concrete: check in NumPy
        a = np.asarray(ll, np.float64)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            m = np.max(a, axis=-1, keepdims=True)
            row = np.log(np.sum(np.exp(a - np.where(np.isfinite(m), m, 0.0)), axis=-1)) + m[..., 0]
        if np.any((np.asarray(lp) > -np.inf) & (np.abs(row) > tol)):
            raise ValueError(msg)
        return lp, ll, None
    return lp, ll, (f"`{name}` contains NaN",
                    f"`{name}` contains +inf (log probabilities are <= 0)", msg)


def _row_checks(lp, ll, e):
    """The traced table checks ``(nan, pinf, rows)`` from one variadic reduction over the
    outcomes of ``(e, isnan(ll), ll == +inf)`` with ``e = exp(ll)`` (:func:`_check_table`);
    ``rows`` is per row, NaN rows failing too. The checks carry no gradient: the inputs
    are stopped (JAX's JVP of a variadic reduce fails on the boolean operands' symbolic
    zero tangents, which made ``jax.grad`` of every checked traced call raise).
    """
    lp, ll, e = (jax.lax.stop_gradient(a) for a in (lp, ll, e))
    zero = jnp.zeros((), ll.dtype)
    s, nan, pinf = jax.lax.reduce(
        (e, jnp.isnan(ll), ll == jnp.inf), (zero, False, False),
        lambda a, b: (a[0] + b[0], a[1] | b[1], a[2] | b[2]), (ll.ndim - 1,))
    rows = (lp > -jnp.inf) & ~(jnp.abs(jnp.log(s)) <= normalise_tol(ll.dtype))
    return nan, pinf, rows


def check_log_lik_table(log_prior, log_lik, name: str = "log_lik"):
    """Validate a likelihood table ``(..., K, Y)`` against a log prior ``(..., K)``: the
    explanation axis is K, no NaN or +inf, each row whose explanation has prior mass sums
    to one over the outcomes.

    Differentiable: yes, in log_prior and log_lik (returned unchanged, the checks attached).

    Args:
        log_prior: ``(..., K)`` log prior over the K explanations.
        log_lik: ``(..., K, Y)`` log likelihood of each of Y outcomes under each
            explanation.
        name: the table's name in error messages (a Python ``str``).

    Returns:
        ``(log_prior, log_lik)`` as float arrays (traced: one pass over the table and one
        run-time check attached to ``log_lik``).

    Raises:
        ValueError: bad shapes, or concrete values that fail a check.
    """
    lp, ll, checks = _check_table(log_prior, log_lik, name)
    return lp, (fail_first(ll, checks) if checks else ll)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _sums(xs, axis: int):
    """``tuple(sum(x, axis) for x in xs)`` as ONE variadic reduction (one loop over the
    shared producer of the ``xs``; separate ``jnp.sum`` calls make XLA materialise the
    producer or recompute it per sum). The JVP is the plain sums (JAX's JVP of a variadic
    reduce fails on symbolic-zero tangents)."""
    zero = jnp.zeros((), xs[0].dtype)
    return jax.lax.reduce(tuple(xs), (zero,) * len(xs),
                          lambda a, b: tuple(u + v for u, v in zip(a, b, strict=True)),
                          (axis % xs[0].ndim,))


@_sums.defjvp
def _sums_jvp(axis, primals, tangents):
    (xs,), (ts,) = primals, tangents
    return _sums(xs, axis), tuple(jnp.sum(t, axis) for t in ts)


def _eig(lp: Array, ll: Array, e: Array | None = None) -> Array:
    """EIG in exp space from one pass over the table.

    With ``w_ky = pi_k p(y | k) = exp(lp_k + ll_ky)`` and ``p(y) = sum_k w_ky``,
    ``EIG = sum_ky w_ky (ll_ky - log p(y)) = sum_y [g_y - p(y) log p(y)]`` with ``g_y =
    sum_k w_ky ll_ky``: one variadic reduction over the explanations gives ``p(y)`` and
    ``g_y`` together (one exp per entry, no ``(..., K, Y)`` intermediate), then a small
    pass over the outcomes. No max shift is needed: ``lp + ll <= 0`` (up to the
    normalisation tolerance) for valid inputs, and terms that underflow (``w = 0``)
    carry no mass: ``w * max(ll, lowest)`` is 0 there, ``ll = -inf`` included, with
    finite gradients (a ``where`` on ``w > 0`` cost a compare and a select per entry
    and a NaN gradient through its untaken branch).

    On the CPU the outcomes are cut into a multiple of the vector width and the rest
    (:func:`_outcome_parts`): XLA:CPU vectorises this reduction over the outcome axis
    and runs the last ``Y mod lanes`` outcomes of every row as scalar code (for ``Y =
    100`` and 8 lanes, 4 of 100 outcomes cost about a quarter of the exps); as their
    own reduction the few tail outcomes are one short loop. The sums of the parts are
    added. ``e``: ``exp(ll)`` when the caller has it (:func:`_eig_blocks`), so that
    ``w = pi_k e_ky`` costs no second exp.
    """
    lo = jnp.finfo(ll.dtype).min
    total = 0.0
    for part in _outcome_parts(ll.shape[-1]):
        llp = ll[..., part]
        if e is None:
            w = jnp.exp(lp[..., :, None] + llp)  # pi_k p(y | k)
        else:
            w = e[..., part] * jnp.exp(lp)[..., :, None]
        py, g = _sums((w, w * jnp.maximum(llp, lo)), -2)
        t = g - jnp.where(py > 0, py * jnp.log(jnp.where(py > 0, py, 1.0)), 0.0)
        total = total + jnp.sum(t, axis=-1)
    return jnp.maximum(total, 0.0)


def _outcome_parts(n_outcomes: int) -> tuple[slice, ...]:
    """The outcome slices :func:`_eig` reduces separately: on the CPU ``[0, m)`` and
    ``[m, Y)`` with ``m`` the largest multiple of the vector width (16 float32 lanes
    where the CPU has AVX-512, else 8) when both are non-empty; elsewhere (another
    backend, ``Y`` a multiple of the width or below it) the whole axis."""
    if jax.default_backend() != "cpu":
        return (slice(None),)
    lanes = 16 if has_avx512() else 8
    m = n_outcomes // lanes * lanes
    if m in (0, n_outcomes):
        return (slice(None),)
    return slice(0, m), slice(m, n_outcomes)


@functools.lru_cache(maxsize=1)
def _cpu_compiler_options() -> tuple[tuple[str, object], ...]:
    """XLA:CPU options of the eager path: 512-bit vectors where the CPU has AVX-512
    (:func:`~jaxkit.kernels._xla_cpu.has_avx512`) and JAX's default backend is the CPU;
    otherwise none."""
    if jax.default_backend() != "cpu" or not has_avx512():
        return ()
    return (("xla_cpu_prefer_vector_width", 512),)


def _eig_checked(log_prior, log_lik, check: bool) -> Array:
    if not check:
        return _eig(_float(log_prior), _float(log_lik))
    lp, ll, msgs = _table_prelude(log_prior, log_lik, "log_lik")
    if msgs is None:  # checked in NumPy
        return _eig(lp, ll)
    lead = jnp.broadcast_shapes(lp.shape[:-1], ll.shape[:-2])
    if jax.default_backend() == "cpu" and lead == ll.shape[:-2]:
        out, bads = _eig_blocks(lp, ll)
    else:
        out, bads = _eig(lp, ll), _row_checks(lp, ll, jnp.exp(ll))
    return fail_first(out, list(zip(bads, msgs, strict=True)))


#: Table entries per block of :func:`_eig_blocks` (512 KB in float32: a block and its
#: exp stay in a core's L2 cache).
_BLOCK_ENTRIES = 2 ** 17


def _eig_blocks(lp: Array, ll: Array) -> tuple[Array, tuple[Array, Array, Array]]:
    """The checked EIG on the CPU: ``(eig, (nan, pinf, rows))`` over blocks of candidates.

    The row checks reduce over the outcomes and EIG over the explanations, and XLA does
    not fuse reductions over different axes into one loop, so checking a whole table
    costs a second exp pass over it (from memory: a 1e4 x 16 x 100 float32 table is 64
    MB). Here a ``fori_loop`` takes blocks of about :data:`_BLOCK_ENTRIES` entries; each
    block's ``exp(ll)`` is computed once and read by both reductions while it is still
    in cache (:func:`_row_checks`, :func:`_eig` with ``e``). The last block starts at
    ``N - block`` (it overlaps the one before, which computes the same values again).
    ``ll``'s leading axes are the candidates (``lp`` broadcasts to them).
    """
    lead, (K, Y) = ll.shape[:-2], ll.shape[-2:]
    n = math.prod(lead)
    ll2 = ll.reshape(n, K, Y)
    lp2 = jnp.broadcast_to(lp, (*lead, K)).reshape(n, K)
    size = max(1, min(n, _BLOCK_ENTRIES // max(1, K * Y)))

    def block(x, lpx):
        e = jnp.exp(x)
        nan, pinf, rows = _row_checks(lpx, x, e)
        return _eig(lpx, x, e), (jnp.any(nan), jnp.any(pinf), jnp.any(rows))

    if size >= n:  # one block (or no candidates)
        out, bads = block(ll2, lp2)
        return out.reshape(lead), bads

    def body(i, carry):
        out, bads = carry
        start = jnp.minimum(i * size, n - size)
        o, b = block(jax.lax.dynamic_slice_in_dim(ll2, start, size),
                     jax.lax.dynamic_slice_in_dim(lp2, start, size))
        return (jax.lax.dynamic_update_slice_in_dim(out, o, start, 0),
                tuple(u | v for u, v in zip(bads, b, strict=True)))

    no = jnp.zeros((), bool)
    out, bads = jax.lax.fori_loop(0, -(-n // size), body,
                                  (jnp.zeros((n,), ll.dtype), (no, no, no)))
    return out.reshape(lead), bads


@functools.lru_cache(maxsize=2)
def _compiled_eig(check: bool):
    """The jitted :func:`eig` of concrete calls (one executable per input shape), compiled
    with :func:`_cpu_compiler_options`."""
    opts = dict(_cpu_compiler_options()) or None
    return jax.jit(functools.partial(_eig_checked, check=check), compiler_options=opts)


def eig(log_prior, log_lik, *, check: bool = True) -> Array:
    """Expected information gain of an experiment (see the module docstring).

    Differentiable: yes, in log_prior and log_lik.

    Args:
        log_prior: ``(..., K)`` normalised log belief over the explanations.
        log_lik: ``(..., K, Y)`` ``log p(y | H_k, x)``; leading axes (e.g. candidate
            experiments) broadcast against ``log_prior``'s.
        check: validate the inputs (default; traced, one run-time check on the result,
            the row checks reading each block's exponentials with EIG on the CPU
            (:func:`_eig_blocks`) and one extra pass over the table elsewhere); ``False``
            skips the checks in a hot loop whose inputs are known to be valid.

    Returns:
        ``(...)`` EIG in nats, in ``[0, log min(K, Y)]`` (rounding below 0 clipped to 0).
        Concrete inputs run one compiled call (module docstring) that blocks until done;
        a failed check raises ``ValueError`` with its message.
    """
    if is_traced(log_prior) or is_traced(log_lik):
        return _eig_checked(log_prior, log_lik, check)
    lp, ll = _float(log_prior), _float(log_lik)
    with clear_errors():
        return jax.block_until_ready(_compiled_eig(bool(check))(lp, ll))


def outcome_posteriors(log_prior, log_lik) -> tuple[Array, Array]:
    """The posterior after each outcome and the outcome's predictive probability.

    Differentiable: yes, in log_prior and log_lik.

    Args:
        log_prior: ``(..., K)``.
        log_lik: ``(..., K, Y)``.

    Returns:
        ``(log_post, log_py)``: ``(..., Y, K)`` log posteriors (NaN for an outcome that
        no explanation allows) and ``(..., Y)`` :math:`\\log p(y | x)`.
    """
    lp, ll = check_log_lik_table(log_prior, log_lik)
    res = posterior(lp[..., None, :], jnp.swapaxes(ll, -1, -2))
    return res.log_post, res.log_evidence


class GreedyState(NamedTuple):
    """State of the greedy selection: belief ``log_post`` (K,), ``spent`` budget and the
    ``used`` candidates (X,) bool."""

    log_post: Array
    spent: Array
    used: Array


class GreedyInfo(NamedTuple):
    """One greedy step: ``choice`` (int32, -1 when nothing was affordable), its ``eig``,
    ``cost`` and observed ``outcome``, the belief after it ``log_post`` and the budget
    ``spent`` so far."""

    choice: Array
    eig: Array
    cost: Array
    outcome: Array
    log_post: Array
    spent: Array


def greedy_init(log_prior, n_candidates: int) -> GreedyState:
    """The state before any experiment: the prior, nothing spent, nothing used.

    Differentiable: yes, in log_prior (carried into the state).

    Args:
        log_prior: ``(K,)`` normalised log prior (checked as :func:`check_log_prior`).
        n_candidates: number X of candidate experiments (a static Python ``int``).

    Returns:
        A :class:`GreedyState` with ``log_post = log_prior``, ``spent = 0`` and ``used``
        all ``False`` of shape ``(X,)``.
    """
    lp = check_log_prior(log_prior)
    return GreedyState(lp, jnp.zeros((), lp.dtype), jnp.zeros((n_candidates,), bool))


def eig_per_cost(log_post, log_lik, costs, remaining, used) -> Array:
    """``EIG(x) / c(x)`` of every candidate, ``-inf`` where used or ``c(x) > remaining``.

    Differentiable: yes, in log_post, log_lik and costs.

    Args:
        log_post: ``(K,)`` current belief.
        log_lik: ``(X, K, Y)`` tables of the X candidates.
        costs: ``(X,)`` positive costs (``inf``: unavailable).
        remaining: scalar budget left.
        used: ``(X,)`` bool.

    Returns:
        ``(X,)`` scores.
    """
    e = _eig(log_post[None, :], log_lik)
    ok = (~used) & (costs <= remaining)
    return jnp.where(ok, e / jnp.where(ok, costs, 1.0), -jnp.inf)


def greedy_step(state: GreedyState, log_lik, costs, budget, outcomes
                ) -> tuple[GreedyState, GreedyInfo]:
    """One greedy step: choose, observe ``outcomes[choice]``, update (no-op when nothing
    affordable is left; an outcome with probability 0 under every explanation leaves the
    belief as it was). No input checks (the caller, :func:`greedy_eig`, checks once).

    Differentiable: yes, in state.log_post, log_lik and costs (almost everywhere: the choice is an
    argmax).

    Args:
        state: the :class:`GreedyState` so far (``log_post (K,)``, ``spent``, ``used (X,)``).
        log_lik: ``(X, K, Y)`` likelihood tables, as :func:`greedy_eig`.
        costs: ``(X,)`` positive costs (``inf`` for unavailable candidates).
        budget: the total budget (a scalar, may be traced).
        outcomes: ``(X,)`` integer outcome of each candidate when run.

    Returns:
        ``(state, info)``: the updated :class:`GreedyState` and this step's
        :class:`GreedyInfo` (``choice = -1`` when nothing affordable was left).
    """
    score = eig_per_cost(state.log_post, log_lik, costs, budget - state.spent, state.used)
    x = jnp.argmax(score).astype(jnp.int32)
    ok = score[x] > -jnp.inf
    y = outcomes[x]
    row = log_lik[x, :, y]
    joint = state.log_post + row
    log_z = logsumexp(joint)
    possible = jnp.isfinite(log_z)  # an outcome no explanation allows leaves the belief
    new = jnp.where(ok & possible, joint - jnp.where(possible, log_z, 0.0), state.log_post)
    c = jnp.where(ok, costs[x], 0.0).astype(state.spent.dtype)
    e = jnp.where(ok, _eig(state.log_post, log_lik[x]), 0.0)
    st = GreedyState(new, state.spent + c, state.used.at[x].set(state.used[x] | ok))
    info = GreedyInfo(jnp.where(ok, x, -1), e, c, jnp.where(ok, y, -1), new, st.spent)
    return st, info


def check_selection(log_prior, log_lik, costs, budget, outcomes):
    """Shared checks of a budgeted selection: table ``(X, K, Y)``, costs ``(X,)``
    positive (inf allowed), budget >= the cheapest cost, outcomes ``(X,)`` in
    ``[0, Y)``.

    Differentiable: yes, in log_prior, log_lik and costs (returned unchanged, the checks attached).

    Args:
        log_prior: ``(K,)`` normalised log prior.
        log_lik: ``(X, K, Y)`` likelihood tables of the X candidate experiments.
        costs: ``(X,)`` positive costs (``inf`` for unavailable candidates).
        budget: positive scalar budget (concrete: it is range-checked eagerly).
        outcomes: ``(X,)`` integer outcome of each candidate, in ``[0, Y)``.

    Returns:
        The checked ``(log_prior, log_lik, costs, budget, outcomes)``, floats in the
        prior's dtype (run-time checks attached where traced).

    Raises:
        ValueError: bad shapes or dtypes, or concrete values that fail a check.
    """
    lp, ll = check_log_lik_table(log_prior, log_lik)
    if lp.ndim != 1 or ll.ndim != 3:
        raise ValueError(f"`log_prior` must be (K,) and `log_lik` (X, K, Y); got shapes "
                         f"{lp.shape} and {ll.shape}")
    X, _, Y = ll.shape
    costs = jnp.asarray(costs, lp.dtype)
    outcomes = jnp.asarray(outcomes)
    if costs.shape != (X,):
        raise ValueError(f"`costs` must have shape ({X},) (one per candidate); got {costs.shape}")
    if outcomes.shape != (X,) or not jnp.issubdtype(outcomes.dtype, jnp.integer):
        raise ValueError(f"`outcomes` must be an integer array of shape ({X},); got "
                         f"{outcomes.dtype} {outcomes.shape}")
    check_in_range(budget, "budget", lo=0, lo_open=True)
    budget = jnp.asarray(budget, lp.dtype)
    costs = fail_first(costs, [
        (jnp.isnan(costs) | (costs <= 0), "`costs` must be positive (inf: unavailable)"),
        (jnp.min(costs) > budget, "`budget` is below every cost: no experiment is "
                                  "affordable")])
    outcomes = fail(outcomes, (outcomes < 0) | (outcomes >= Y),
                    f"`outcomes` must lie in [0, {Y})")
    return lp, ll, costs, budget, outcomes


def greedy_eig(log_prior, log_lik, costs, budget, outcomes, *, max_steps: int
               ) -> tuple[GreedyState, GreedyInfo]:
    """Greedy EIG-per-cost selection under a budget (see the module docstring).

    Differentiable: yes, in log_prior, log_lik and costs (almost everywhere: each choice is an
    argmax).

    Args:
        log_prior: ``(K,)`` normalised log prior.
        log_lik: ``(X, K, Y)`` likelihood tables of the X candidate experiments.
        costs: ``(X,)`` positive costs (``inf`` for masked candidates).
        budget: total budget, at least the cheapest cost.
        outcomes: ``(X,)`` int: the outcome each candidate yields when run.
        max_steps: static number of scan steps (at least the most experiments the budget
            buys; later steps are no-ops).

    Returns:
        ``(final_state, infos)``, ``infos`` a :class:`GreedyInfo` stacked over the steps.
    """
    check_in_range(max_steps, "max_steps", lo=1, integer=True)
    lp, ll, costs, budget, outcomes = check_selection(log_prior, log_lik, costs, budget,
                                                      outcomes)
    st = greedy_init(lp, ll.shape[0])

    def body(s, _):
        return greedy_step(s, ll, costs, budget, outcomes)

    return jax.lax.scan(body, st, None, length=int(max_steps))
