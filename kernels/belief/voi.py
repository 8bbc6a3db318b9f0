"""Value of information (VOI) of a question about a target outcome, in closed form.

Binary target ``Y`` with price (current belief) ``p = P(Y)``, binary subquestion ``S``
with ``q = P(S)``, ``p1 = P(Y | S)``, ``p0 = P(Y | not S)``; coherence requires
``p = q p1 + (1 - q) p0``. Learning the answer to ``S`` moves the price to ``p1``
(probability ``q``) or ``p0``. The expected shifts (Cover & Thomas ch. 2; Brier 1950;
Raiffa & Schlaifer 1961 for the value of sample information):

- expected absolute shift ``E|dp| = q |p1 - p| + (1 - q) |p0 - p| = 2 q (1 - q) |p1 - p0|``;
- expected squared shift ``E dp^2 = q (1 - q) (p1 - p0)^2`` = the variance of the
  posterior price = the expected improvement of the Brier score ``(p - y)^2``
  = ``p (1 - p) - E[p_S (1 - p_S)]``;
- mutual information ``I(S; Y) = H(p) - q H(p1) - (1 - q) H(p0)`` (nats)
  = ``E_S KL(Bern(p_S) || Bern(p))`` = the expected gain of the log score
  ``log p_S(y) - log p(y)``;
- discrimination ``|p1 - p0|``, an upper bound on every shift.

K-ary generalisation (:func:`voi_categorical`): ``S`` has M answers with probabilities
``q_m`` and ``Y`` has K outcomes with conditionals ``P(Y | S = m) = p_m``; the prior is
``p = sum_m q_m p_m``. Shifts are measured by total variation ``TV = 1/2 ||p_m - p||_1``
(abs_shift = ``E TV``), half the squared Euclidean distance (sq_shift =
``1/2 E ||p_m - p||^2``, half the expected improvement of the multi-class Brier score
``sum_k (p_k - y_k)^2``), ``E KL(p_m || p)`` (mutual_info) and the largest pairwise TV
(discrimination). For M = K = 2 these equal the binary quantities.

Coherence (:func:`cohere`): inputs that violate ``p = q p1 + (1 - q) p0`` (a market
price and separately elicited conditionals) are projected: with ``method="conditionals"``
``(p1, p0)`` move to the nearest point (Euclidean) of the box ``[0, 1]^2`` on the line
``q p1 + (1 - q) p0 = p`` (the KKT point ``clip(x + lambda a)``, solved exactly:
``a . x`` is piecewise linear in lambda); with ``method="q"`` first
``q = clip((p - p0) / (p1 - p0), 0, 1)``, then the remaining gap (when
``p`` lies outside ``[min(p0, p1), max(p0, p1)]``) is closed the same way.

Every function broadcasts over leading batch axes, is pure and works under ``jit`` and
``vmap`` in float32 and float64. Probabilities 0 and 1 are allowed (``0 log 0 = 0``).
Probabilities outside ``[0, 1]`` or NaN raise ``ValueError`` naming the argument
(an :func:`equinox.error_if` run-time error under ``jit``); pass ``check=False`` to skip
the checks in a hot loop whose inputs are already valid.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from ..checks import fail_first, is_traced

__all__ = ["VOI", "Coherent", "voi", "voi_categorical", "cohere", "binary_entropy",
           "check_probability"]


class VOI(NamedTuple):
    """Value-of-information measures of a question (arrays of the batch shape).

    Attributes:
        abs_shift: expected absolute change of the price (expected total variation).
        sq_shift: expected squared change (= expected Brier improvement).
        mutual_info: mutual information between question and target, in nats.
        discrimination: ``|p1 - p0|`` (largest pairwise total variation for K-ary).
    """

    abs_shift: jax.Array
    sq_shift: jax.Array
    mutual_info: jax.Array
    discrimination: jax.Array


class Coherent(NamedTuple):
    """Coherent inputs from :func:`cohere`.

    Attributes:
        q: ``P(S)`` after projection.
        p1: ``P(Y | S)`` after projection.
        p0: ``P(Y | not S)`` after projection.
        gap: the incoherence of the inputs, ``|p - (q p1 + (1 - q) p0)|``.
    """

    q: jax.Array
    p1: jax.Array
    p0: jax.Array
    gap: jax.Array


def _float(*xs):
    dtype = jnp.result_type(float, *xs)
    return [jnp.asarray(x, dtype) for x in xs]


def check_probability(x, name: str):
    """Error naming ``name`` unless every entry of ``x`` is in ``[0, 1]`` (NaN fails).

    Differentiable: yes, in x (returned unchanged, the checks attached).

    Args:
        x: array of probabilities.
        name: the argument's name, for the message.

    Returns:
        ``x`` (with a run-time check attached when traced).
    """
    ok = (x >= 0) & (x <= 1)  # False for NaN
    return fail_first(x, [(~jnp.all(ok), f"`{name}` must hold probabilities in [0, 1] "
                                         f"(no NaN)")])


def _probability_guard(named, dtype):
    """One run-time check of several probability arrays, as a scalar ``0`` to add to the
    outputs (not a copy of the inputs).

    Traced, the predicates of all the arguments go into ONE pass (a variadic ``or``
    reduction over their common shape) and one :func:`equinox.branched_error_if` on a
    scalar, whose result (0, or NaN under ``EQX_ON_ERROR=nan``) the caller adds to its
    outputs: the check then costs one read of the inputs and no copy. Attaching the
    check to the inputs instead (``fail_first((q, p1, p0), ...)``) makes XLA copy every
    input through the conditional, and per-argument ``jnp.all`` reductions become
    separate reduce-window chains (together 2.4x the unchecked call at 1e6 markets).
    Concrete inputs raise ``ValueError`` at once. The message names the first argument
    (in ``named`` order) that holds a value outside ``[0, 1]`` or NaN.

    Args:
        named: a sequence of ``(array, name)`` pairs (broadcastable shapes).
        dtype: the float dtype of the returned zero.

    Returns:
        A scalar zero of ``dtype`` (with the check attached when traced).
    """
    xs = [x for x, _ in named]
    msgs = [f"`{name}` must hold probabilities in [0, 1] (no NaN)" for _, name in named]
    zero = jnp.zeros((), dtype)
    if not any(is_traced(x) for x in xs):
        for x, msg in zip(xs, msgs, strict=True):
            a = np.asarray(x)
            if not np.all((a >= 0) & (a <= 1)):  # False for NaN
                raise ValueError(msg)
        return zero
    bads = jnp.broadcast_arrays(*[~((x >= 0) & (x <= 1)) for x in xs])  # True for NaN
    anys = jax.lax.reduce(tuple(bads), (False,) * len(bads),
                          lambda a, b: tuple(u | v for u, v in zip(a, b, strict=True)),
                          tuple(range(bads[0].ndim)))
    bad = jnp.stack(anys)
    return eqx.branched_error_if(zero, jnp.any(bad), jnp.argmax(bad), msgs)


def binary_entropy(p):
    """Entropy of ``Bernoulli(p)`` in nats, ``-p log p - (1 - p) log(1 - p)``; 0 at 0 and 1.

    Differentiable: yes, in p (inside (0, 1)).

    Args:
        p: probabilities, any shape.

    Returns:
        Array of ``p``'s shape.
    """
    (p,) = _float(p)
    return -(xlogy(p, p) + xlogy(1 - p, 1 - p))


def _log_ratio(w, den, r):
    """``log(w / den)`` given ``r = (w - den) / den``: ``log1p(r)`` for ``r >= -1/2``
    (accurate near 0), ``log(w / den)`` below (no rounding of ``r`` to -1)."""
    far = r < -0.5
    return jnp.where(far, jnp.log(jnp.where(far, w / den, 1.0)),
                     jnp.log1p(jnp.where(far, 0.0, r)))


def _log_ratio_shared(w, inv_den, r):
    """``log(w / den)`` from the shared reciprocal ``inv_den = 1 / den`` and ``r = w / den
    - 1`` (built from shared subterms by the caller), with ONE logarithm: ``log(w *
    inv_den)`` where ``r < -1/2`` (``w << den``, where ``r`` would round to -1), else
    ``log1p(r)`` as the compensated ``log(u) - ((u - 1) - r)`` with ``u = 1 + r`` rounded.

    ``u - 1`` is exact for ``u`` in ``[1/2, 2]`` (Sterbenz), so ``e = (u - 1) - r`` is the
    rounding error of ``u`` and ``log1p(r) = log(u - e) = log(u) - e / u + O(e^2)``.
    Dropping the ``/ u`` costs at most ``|e| |r| / u <= 2^-24 |r|`` (float32), below
    ``eps |log1p(r)|`` for ``r`` in ``[-1/2, 1]``; above ``r = 1`` the correction is
    skipped (``|e| / u <= 2^-24`` against ``log u >= log 2``). The relative accuracy is
    that of ``log1p`` (what keeps the O(d) terms of :func:`_mutual_info` cancelling to
    O(d^2)) at the cost of one ``log`` instead of ``log`` + ``log1p`` (XLA:CPU's
    ``log1p`` costs about two ``log``)."""
    far = r < -0.5
    u = jnp.where(far, w * inv_den, 1 + r)
    e = jnp.where(far | (r > 1), 0.0, (u - 1) - r)
    return jnp.log(u) - e


def _mutual_info(q, p1, p0, d, p):
    """``q KL(p1 || p) + (1 - q) KL(p0 || p)`` (Bernoulli KLs, ``0 log 0 = 0``) in one pass.

    The four ratios of the KL terms share two reciprocals: with ``d = p1 - p0``,
    ``p1 - p = (1 - q) d`` and ``p0 - p = -q d``, so ``p1 / p = 1 + (1 - q) d / p``,
    ``(1 - p1) / (1 - p) = 1 - (1 - q) d / (1 - p)``, ``p0 / p = 1 - q d / p`` and
    ``(1 - p0) / (1 - p) = 1 + q d / (1 - p)``. Each term is ``w log1p(r)`` with ``r``
    from ``d / p`` or ``d / (1 - p)`` (no cancellation of ``p1 - p`` near ``p1 = p0``,
    where the O(d) terms cancel to O(d^2)), or ``w log(w / den)`` where ``r < -1/2``
    (``w << den``, where ``r`` would round to -1). Two divisions and four logarithms per
    market (:func:`_log_ratio_shared`), no intermediate arrays: an earlier form with
    one division per term made XLA materialise four ratio arrays (five loops; 2.3x
    NumPy), and one with ``log`` and ``log1p`` per term (eight transcendentals) spent
    80% of the call in this loop. Where ``q > 0`` (``q < 1``), ``p1 > 0`` implies
    ``p > 0`` (``p0 > 0`` likewise), the mixture property that keeps every selected
    ratio finite.
    """
    qb = 1 - q
    pb = 1 - p
    ip = 1 / jnp.where(p > 0, p, 1.0)
    ipb = 1 / jnp.where(pb > 0, pb, 1.0)
    u = d * ip
    v = d * ipb
    t1 = (jnp.where(p1 > 0, p1 * _log_ratio_shared(p1, ip, qb * u), 0.0)
          + jnp.where(p1 < 1, (1 - p1) * _log_ratio_shared(1 - p1, ipb, -qb * v), 0.0))
    t0 = (jnp.where(p0 > 0, p0 * _log_ratio_shared(p0, ip, -q * u), 0.0)
          + jnp.where(p0 < 1, (1 - p0) * _log_ratio_shared(1 - p0, ipb, q * v), 0.0))
    return jnp.where(q > 0, q * t1, 0.0) + jnp.where(q < 1, qb * t0, 0.0)


def voi(q, p1, p0, *, check: bool = True) -> VOI:
    """Value of information of a binary subquestion about a binary target.

    With ``p = q p1 + (1 - q) p0``: ``abs_shift = 2 q (1 - q) |p1 - p0|``,
    ``sq_shift = q (1 - q) (p1 - p0)^2``, ``mutual_info = q KL(p1 || p) + (1 - q)
    KL(p0 || p)`` (the expected-KL form of ``H(p) - q H(p1) - (1 - q) H(p0)``, accurate
    when ``p1`` is close to ``p0``), ``discrimination = |p1 - p0|``. See the module
    docstring for the identities and references.

    Differentiable: yes, in q, p1 and p0.

    Args:
        q: ``P(S)``, any shape broadcastable with ``p1`` and ``p0``.
        p1: ``P(Y | S)``.
        p0: ``P(Y | not S)``.
        check: check that the inputs are probabilities (default).

    Returns:
        :class:`VOI` of the broadcast shape, in the inputs' float dtype (float32 by
        default).
    """
    q, p1, p0 = _float(q, p1, p0)
    q, p1, p0 = jnp.broadcast_arrays(q, p1, p0)
    # the check rides on a scalar zero added to each output (fused into the output loops)
    z = _probability_guard([(q, "q"), (p1, "p1"), (p0, "p0")], q.dtype) if check else None
    d = p1 - p0
    w = q * (1 - q)
    p = q * p1 + (1 - q) * p0
    mi = _mutual_info(q, p1, p0, d, p)
    return VOI(*_one_loop((2 * w * jnp.abs(d), w * d * d, jnp.maximum(mi, 0.0), jnp.abs(d)),
                          z))


def _one_loop(outs, z=None):
    """``outs`` (same shape and dtype), each plus the scalar ``z`` (0, or NaN from a failed
    check under ``EQX_ON_ERROR=nan``; ``None``: nothing added), emitted from ONE loop.

    XLA:CPU puts sibling elementwise outputs into separate loops, each reading every
    input again (four loops over 12 MB of inputs at 1e6 markets); one variadic sum over
    a trailing pair axis ``(x, z)`` is a single multi-output loop fusion instead (about
    20% less time for :func:`voi`). The pair sum is exact: ``x + 0 = x``. The JVP is
    the plain sum (JAX's JVP of a variadic reduce fails on symbolic-zero tangents).
    """
    pad = jnp.zeros_like(outs[0]) if z is None else jnp.broadcast_to(z, outs[0].shape)
    return _pair_sum(tuple(outs), pad)


@jax.custom_jvp
def _pair_sum(outs, pad):
    """``tuple(x + pad for x in outs)`` as one variadic reduction (see :func:`_one_loop`)."""
    pairs = tuple(jnp.stack([x, pad], axis=-1) for x in outs)
    zero = jnp.zeros((), pad.dtype)
    return jax.lax.reduce(pairs, (zero,) * len(pairs),
                          lambda a, b: tuple(u + v for u, v in zip(a, b, strict=True)),
                          (pad.ndim,))


@_pair_sum.defjvp
def _pair_sum_jvp(primals, tangents):
    t_outs, t_pad = tangents
    return _pair_sum(*primals), tuple(t + t_pad for t in t_outs)


def voi_categorical(q, p_cond, *, check: bool = True, atol: float = 1e-4) -> VOI:
    """Value of information of an M-answer question about a K-outcome target.

    With ``p = sum_m q_m p_m``: ``abs_shift = sum_m q_m TV(p_m, p)``, ``sq_shift =
    1/2 sum_m q_m ||p_m - p||^2``, ``mutual_info = sum_m q_m KL(p_m || p)``,
    ``discrimination = max_{m, m'} TV(p_m, p_m')``. For M = K = 2 these equal
    :func:`voi` of ``(q_1, p_1[1], p_0[1])``.

    Differentiable: yes, in q and p_cond.

    Args:
        q: ``(..., M)`` answer probabilities (each row sums to 1 within ``atol``).
        p_cond: ``(..., M, K)`` conditionals ``P(Y = k | S = m)`` (rows sum to 1).
        check: check ranges and sums (default).
        atol: tolerance of the sums.

    Returns:
        :class:`VOI` of the batch shape ``broadcast(q.shape[:-1], p_cond.shape[:-2])``.

    Raises:
        ValueError: ``p_cond`` has fewer than 2 axes, or the answer axes differ.
    """
    q, p_cond = _float(q, p_cond)
    if q.ndim < 1 or p_cond.ndim < 2 or q.shape[-1] != p_cond.shape[-2]:
        raise ValueError(f"`p_cond` must have shape (..., M, K) with M = q.shape[-1]; got "
                         f"q {q.shape}, p_cond {p_cond.shape}")
    if check:
        q = check_probability(q, "q")
        p_cond = check_probability(p_cond, "p_cond")
        q = fail_first(q, [(jnp.any(jnp.abs(q.sum(-1) - 1) > atol),
                            "`q` must sum to 1 over its last axis (the answers)")])
        p_cond = fail_first(p_cond, [(jnp.any(jnp.abs(p_cond.sum(-1) - 1) > atol),
                                      "`p_cond` rows must sum to 1 over the outcomes")])
    p = jnp.einsum("...m,...mk->...k", q, p_cond)[..., None, :]
    dev = p_cond - p
    tv = 0.5 * jnp.sum(jnp.abs(dev), -1)
    sq = 0.5 * jnp.sum(dev * dev, -1)
    # KL(p_m || p) as in _mutual_info: p_mk > 0 implies p_k >= q_m p_mk > 0 where q_m > 0
    safe = jnp.where(p > 0, p, 1.0)
    terms = p_cond * _log_ratio(p_cond, safe, dev / safe)
    kl = jnp.sum(jnp.where(p_cond > 0, terms, 0.0), -1)
    kl = jnp.where(q > 0, kl, 0.0)
    pair = 0.5 * jnp.sum(jnp.abs(p_cond[..., :, None, :] - p_cond[..., None, :, :]), -1)
    return VOI(abs_shift=jnp.sum(q * tv, -1), sq_shift=jnp.sum(q * sq, -1),
               mutual_info=jnp.maximum(jnp.sum(q * kl, -1), 0.0),
               discrimination=jnp.max(pair, axis=(-2, -1)))


def _project_conditionals(p, q, p1, p0):
    """Nearest ``(p1', p0')`` in ``[0, 1]^2`` with ``q p1' + (1 - q) p0' = p``.

    KKT: ``x(lambda) = clip(x + lambda a)`` with ``a = (q, 1 - q)``; ``g(lambda) =
    a . x(lambda)`` is piecewise linear and non-decreasing with breakpoints where a
    coordinate reaches 0 or 1 (``g = 0`` at the first, 1 at the last), so ``g = p`` is
    solved exactly by linear interpolation on the segment that holds ``p``.
    """
    a1, a0 = q, 1 - q
    s1, s0 = jnp.where(a1 > 0, a1, 1.0), jnp.where(a0 > 0, a0, 1.0)
    b0 = jnp.stack([-p0 / s0, (1 - p0) / s0])
    b1 = jnp.where(a1 > 0, jnp.stack([-p1 / s1, (1 - p1) / s1]), b0)
    b0 = jnp.where(a0 > 0, b0, b1)
    bs = jnp.sort(jnp.concatenate([b1, b0]), axis=0)

    def g(lam):
        return a1 * jnp.clip(p1 + lam * a1, 0, 1) + a0 * jnp.clip(p0 + lam * a0, 0, 1)

    gs = g(bs)
    # g is 0 at the first breakpoint and 1 at the last (exactly, not as rounded); the
    # segment holding p is found by counting interior breakpoints below p, which stays
    # consistent under rounding (g is monotone)
    gs = jnp.stack([jnp.zeros_like(p), gs[1], gs[2], jnp.ones_like(p)])
    j = (gs[1] < p).astype(jnp.int32) + (gs[2] < p).astype(jnp.int32)
    lo_b = jnp.where(j == 0, bs[0], jnp.where(j == 1, bs[1], bs[2]))
    hi_b = jnp.where(j == 0, bs[1], jnp.where(j == 1, bs[2], bs[3]))
    lo_g = jnp.where(j == 0, gs[0], jnp.where(j == 1, gs[1], gs[2]))
    hi_g = jnp.where(j == 0, gs[1], jnp.where(j == 1, gs[2], gs[3]))
    width = hi_g - lo_g
    frac = jnp.clip((p - lo_g) / jnp.where(width > 0, width, 1.0), 0, 1)
    lam = lo_b + frac * (hi_b - lo_b)
    return jnp.clip(p1 + lam * a1, 0, 1), jnp.clip(p0 + lam * a0, 0, 1)


def cohere(p, q, p1, p0, *, method: str = "conditionals", check: bool = True) -> Coherent:
    """Make ``(q, p1, p0)`` coherent with the price ``p``: ``p = q p1 + (1 - q) p0``.

    ``method="conditionals"`` keeps ``q`` and moves ``(p1, p0)`` to the nearest
    (Euclidean) coherent point in ``[0, 1]^2``; ``method="q"`` first sets ``q =
    clip((p - p0) / (p1 - p0), 0, 1)`` (kept where ``|p1 - p0| < 1e-6``) and closes any
    remaining gap as ``"conditionals"``. Coherent inputs are returned unchanged (up to
    rounding).

    Differentiable: yes, in p, q, p1 and p0 (almost everywhere: the projection clips).

    Args:
        p: the target's price ``P(Y)``.
        q: ``P(S)``.
        p1: ``P(Y | S)``.
        p0: ``P(Y | not S)``; all four broadcast together.
        method: ``"conditionals"`` or ``"q"`` (static).
        check: check that the inputs are probabilities.

    Returns:
        :class:`Coherent` ``(q, p1, p0, gap)`` of the broadcast shape.
    """
    if method not in ("conditionals", "q"):
        raise ValueError(f"`method` must be 'conditionals' or 'q'; got {method!r}")
    p, q, p1, p0 = _float(p, q, p1, p0)
    p, q, p1, p0 = jnp.broadcast_arrays(p, q, p1, p0)
    if check:  # one scalar guard added to the outputs (see :func:`_probability_guard`)
        z = _probability_guard([(p, "p"), (q, "q"), (p1, "p1"), (p0, "p0")], p.dtype)
        return Coherent(*(x + z for x in _cohere(p, q, p1, p0, method)))
    return _cohere(p, q, p1, p0, method)


def _cohere(p, q, p1, p0, method):
    """:func:`cohere` of broadcast, checked float inputs."""
    gap = jnp.abs(p - (q * p1 + (1 - q) * p0))
    if method == "q":
        d = p1 - p0
        ok = jnp.abs(d) >= 1e-6
        q = jnp.where(ok, jnp.clip((p - p0) / jnp.where(ok, d, 1.0), 0, 1), q)
    n1, n0 = _project_conditionals(p, q, p1, p0)
    return Coherent(q=q, p1=n1, p0=n0, gap=gap)
