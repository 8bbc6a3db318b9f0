"""kernels.belief.voi and kernels.belief.updates: closed forms against float64
definitions by enumeration, the three forms of the mutual information, coherence,
K-ary reduction, float32 accuracy, jit/vmap invariance without retracing, bad input."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import checks
from jaxkit.kernels.belief import (
    binary_entropy,
    cohere,
    realised_updates,
    update_between,
    voi,
    voi_categorical,
)

# compiled once per module: eager calls would compile every primitive per new shape
jvoi = jax.jit(voi)
jcat = jax.jit(voi_categorical)
jcohere = jax.jit(cohere, static_argnames="method")
jupdates = jax.jit(realised_updates, static_argnames=("horizon", "clip"))
RNG = np.random.default_rng(0)
Q, P1, P0 = RNG.uniform(size=(3, 200))
Q[:5], P1[:5], P0[:5] = [0, 1, 0.5, 0.5, 0.3], [1, 0, 1, 0, 0.7], [0, 1, 0, 0, 0.7]


def _h(p):
    p = np.asarray(p, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(np.where(p > 0, p * np.log(p), 0) + np.where(p < 1, (1 - p) * np.log1p(-p), 0))


def _enumerate(q, p1, p0):
    """E over (S, Y) of the shift, squared shift and log-score gain (float64)."""
    p = q * p1 + (1 - q) * p0
    abs_, sq, ls, kl = 0.0, 0.0, 0.0, 0.0
    for ws, ps in ((q, p1), (1 - q, p0)):
        abs_ = abs_ + ws * np.abs(ps - p)
        sq = sq + ws * (ps - p) ** 2
        for py_s, py in ((ps, p), (1 - ps, 1 - p)):
            with np.errstate(divide="ignore", invalid="ignore"):
                term = np.where(ws * py_s > 0, ws * py_s * (np.log(py_s) - np.log(py)), 0)
            ls = ls + term  # E_{S,Y} [log p_S(y) - log p(y)]
        with np.errstate(invalid="ignore"):
            kl = kl + np.where(ws > 0, ws * (_h_cross(ps, p) - _h(ps)), 0)
    return p, abs_, sq, ls, kl


def _h_cross(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(np.where(a > 0, a * np.log(b), 0) + np.where(a < 1, (1 - a) * np.log1p(-b), 0))


def test_closed_forms_against_enumeration():
    v = jvoi(Q, P1, P0)
    p, abs_, sq, ls, kl = _enumerate(Q, P1, P0)
    np.testing.assert_allclose(v.abs_shift, abs_, atol=1e-14)
    np.testing.assert_allclose(v.abs_shift, 2 * Q * (1 - Q) * np.abs(P1 - P0), atol=1e-14)
    np.testing.assert_allclose(v.sq_shift, sq, atol=1e-14)
    # expected squared shift = expected Brier improvement = p(1-p) - E[p_S(1-p_S)]
    np.testing.assert_allclose(v.sq_shift, p * (1 - p) - Q * P1 * (1 - P1)
                               - (1 - Q) * P0 * (1 - P0), atol=1e-14)
    np.testing.assert_allclose(v.discrimination, np.abs(P1 - P0), atol=0)


def test_three_forms_of_mutual_information_agree():
    v = jvoi(Q, P1, P0)
    p, _, _, ls, kl = _enumerate(Q, P1, P0)
    entropy_form = _h(p) - Q * _h(P1) - (1 - Q) * _h(P0)
    np.testing.assert_allclose(v.mutual_info, entropy_form, atol=1e-13)
    np.testing.assert_allclose(v.mutual_info, kl, atol=1e-13)       # E_S KL(p_S || p)
    np.testing.assert_allclose(v.mutual_info, ls, atol=1e-13)       # E log-score gain
    np.testing.assert_allclose(binary_entropy(p), _h(p), atol=1e-14)


def test_values_at_zero_and_one():
    v = jvoi(jnp.array([0.0, 1.0, 0.5, 0.5, 0.0]), jnp.array([1.0, 0.0, 1.0, 0.0, 0.0]),
            jnp.array([0.0, 1.0, 0.0, 0.0, 1.0]))
    for leaf in v:
        assert np.all(np.isfinite(leaf))
    np.testing.assert_allclose(v.mutual_info, [0, 0, np.log(2), 0, 0], atol=1e-15)
    np.testing.assert_allclose(v.abs_shift, [0, 0, 0.5, 0, 0])
    np.testing.assert_allclose(v.sq_shift, [0, 0, 0.25, 0, 0])
    g = jax.jit(jax.grad(lambda q: voi(q, 0.9, 0.1).mutual_info))(0.5)
    assert np.isfinite(g) and abs(float(g)) < 1e-12  # symmetric in q around 1/2


@settings(max_examples=20, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_inequalities(q, p1, p0):
    v = jvoi(q, p1, p0)
    p = q * p1 + (1 - q) * p0
    assert float(v.sq_shift) == pytest.approx(float(v.abs_shift) * abs(p1 - p0) / 2, abs=1e-15)
    assert float(v.abs_shift) <= float(v.discrimination) / 2 + 1e-15
    assert float(v.mutual_info) >= 2 * float(v.sq_shift) - 1e-12  # Pinsker
    assert float(v.mutual_info) <= min(_h(q), _h(p)) + 1e-12


def test_float32_accuracy_and_dtype():
    v32 = jvoi(Q.astype(np.float32), P1.astype(np.float32), P0.astype(np.float32))
    v64 = jvoi(Q, P1, P0)
    for a, b in zip(v32, v64, strict=True):
        assert a.dtype == jnp.float32
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4)
    # small updates: the expected-KL form keeps relative accuracy where the entropy
    # difference would cancel (MI ~ q(1-q) d^2 / (2 p (1-p)))
    q, p0 = np.float32(0.4), np.float32(0.3)
    p1 = np.float32(0.3 + 1e-3)
    p = 0.4 * (0.3 + 1e-3) + 0.6 * 0.3
    taylor = 0.4 * 0.6 * 1e-6 / (2 * p * (1 - p))
    assert float(jvoi(q, p1, p0).mutual_info) == pytest.approx(taylor, rel=2e-3)


def test_broadcasting_and_python_scalars():
    v = jvoi(0.3, np.full((3, 1), 0.8), np.linspace(0, 1, 4))
    assert all(leaf.shape == (3, 4) for leaf in v)
    assert jvoi(0.5, 0.9, 0.1).abs_shift.shape == ()


def test_jit_vmap_eager_agree_without_retracing():
    f = jax.jit(chex.assert_max_traces(voi, n=1))
    a = voi(Q, P1, P0)
    b = f(Q, P1, P0)
    c = f(Q[::-1].copy(), P1, P0)  # new values, same shapes: no retrace
    d = jax.jit(jax.vmap(voi))(Q, P1, P0)
    for x, y, z in zip(a, b, d, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-15)
        np.testing.assert_allclose(x, z, atol=1e-15)
    np.testing.assert_allclose(c.abs_shift, voi(Q[::-1], P1, P0).abs_shift, atol=1e-15)


def test_jvp_of_the_one_loop_outputs_matches_finite_differences():
    """The four outputs come from one variadic reduction with its own JVP: tangents in
    every input against central differences (float64, away from the kinks)."""
    q, p1, p0 = Q[5:25], P1[5:25], P0[5:25]
    rng = np.random.default_rng(7)
    dq, d1, d0 = (rng.normal(size=q.shape) for _ in range(3))
    _, tan = jax.jit(lambda a, b, c: jax.jvp(voi, (a, b, c), (dq, d1, d0)))(q, p1, p0)
    h = 1e-7
    hi, lo = jvoi(q + h * dq, p1 + h * d1, p0 + h * d0), jvoi(q - h * dq, p1 - h * d1,
                                                             p0 - h * d0)
    for t, a, b in zip(tan, hi, lo, strict=True):
        np.testing.assert_allclose(t, (a - b) / (2 * h), rtol=1e-5, atol=1e-7)


def _dirichlet(shape, k):
    x = RNG.gamma(1.0, size=(*shape, k))
    return x / x.sum(-1, keepdims=True)


def test_categorical_reduces_to_binary_and_matches_definitions():
    qk = np.stack([1 - Q, Q], -1)
    pc = np.stack([np.stack([1 - P0, P0], -1), np.stack([1 - P1, P1], -1)], -2)
    for a, b in zip(jcat(qk, pc), jvoi(Q, P1, P0), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-13)
    q, pc = _dirichlet((50,), 3), _dirichlet((50, 3), 4)
    v = jcat(q, pc)
    p = np.einsum("nm,nmk->nk", q, pc)
    hm = lambda x: -np.sum(x * np.log(x), -1)  # noqa: E731
    np.testing.assert_allclose(v.mutual_info, hm(p) - np.sum(q * hm(pc), -1), atol=1e-12)
    tv = 0.5 * np.abs(pc - p[:, None]).sum(-1)
    np.testing.assert_allclose(v.abs_shift, np.sum(q * tv, -1), atol=1e-14)
    pair = 0.5 * np.abs(pc[:, :, None] - pc[:, None]).sum(-1).max((-1, -2))
    np.testing.assert_allclose(v.discrimination, pair, atol=1e-14)
    # the expected posterior is the prior: sum_m q_m p_m = p
    np.testing.assert_allclose(np.einsum("nm,nmk->nk", q, pc).sum(-1), 1, atol=1e-12)


def _brute_projection(p, q, p1, p0, n=200001):
    """Nearest coherent (p1', p0') by enumerating the feasible segment."""
    if q == 0:
        return p1, p
    t = np.linspace(0, 1, n)
    s = (p - q * t) / (1 - q) if q < 1 else np.full(n, p0)
    ok = (s >= 0) & (s <= 1) if q < 1 else np.isclose(t, p, atol=1 / n)
    d = (t - p1) ** 2 + (s - p0) ** 2
    i = np.argmin(np.where(ok, d, np.inf))
    return t[i], s[i]


def test_cohere_is_the_nearest_coherent_point():
    rng = np.random.default_rng(3)
    for _ in range(25):
        p, q, p1, p0 = rng.uniform(size=4).tolist()  # Python floats: one compiled signature
        c = jcohere(p, q, p1, p0)
        assert float(c.q * c.p1 + (1 - c.q) * c.p0) == pytest.approx(p, abs=1e-12)
        b1, b0 = _brute_projection(p, q, p1, p0)
        assert float(c.p1) == pytest.approx(b1, abs=2e-5)
        assert float(c.p0) == pytest.approx(b0, abs=2e-5)
        cq = jcohere(p, q, p1, p0, method="q")
        assert 0 <= float(cq.q) <= 1
        assert float(cq.q * cq.p1 + (1 - cq.q) * cq.p0) == pytest.approx(p, abs=1e-12)
    # coherent input comes back unchanged; q = 0 or 1 moves only the relevant side
    c = jcohere(Q * P1 + (1 - Q) * P0, Q, P1, P0)
    np.testing.assert_allclose(c.p1, P1, atol=1e-12)
    np.testing.assert_allclose(c.p0, P0, atol=1e-12)
    assert np.max(c.gap) < 1e-12
    c = jcohere(0.3, 0.0, 0.9, 0.1)
    assert (float(c.p1), float(c.p0)) == pytest.approx((0.9, 0.3))
    c = jcohere(0.3, 1.0, 0.9, 0.1)
    assert (float(c.p1), float(c.p0), float(c.gap)) == pytest.approx((0.3, 0.1, 0.6))


@settings(max_examples=20, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
       st.sampled_from(["conditionals", "q"]))
def test_cohere_properties(p, q, p1, p0, method):
    c = jcohere(p, q, p1, p0, method=method)
    assert 0 <= float(c.q) <= 1 and 0 <= float(c.p1) <= 1 and 0 <= float(c.p0) <= 1
    assert float(c.q * c.p1 + (1 - c.q) * c.p0) == pytest.approx(p, abs=1e-12)
    again = jcohere(p, float(c.q), float(c.p1), float(c.p0), method=method)  # idempotent
    assert float(again.gap) < 1e-12
    assert (float(again.p1), float(again.p0)) == pytest.approx((float(c.p1), float(c.p0)),
                                                               abs=1e-12)
    c32 = jcohere(*np.float32([p, q, p1, p0]), method=method)
    assert c32.p1.dtype == jnp.float32
    assert float(c32.q * c32.p1 + (1 - c32.q) * c32.p0) == pytest.approx(p, abs=1e-6)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="`q` must hold probabilities"):
        voi(1.2, 0.5, 0.5)
    with pytest.raises(ValueError, match="`p1` must hold probabilities"):
        voi(0.5, np.nan, 0.5)
    cvoi = checks.checked_jit(voi)  # traced: one reduction, one check on a scalar
    for args, name in (((0.5, 0.5, -0.1), "p0"), ((1.2, 0.5, 0.5), "q"),
                       ((0.5, np.nan, 0.5), "p1"), ((np.nan, 0.5, -1.0), "q")):
        with pytest.raises(ValueError, match=f"`{name}` must hold probabilities"):
            jax.block_until_ready(cvoi(*args))
    with pytest.raises(ValueError, match="`p1` must hold probabilities"):
        jax.block_until_ready(checks.checked_jit(cohere)(0.5, 0.5, 1.5, 0.5))
    with pytest.raises(ValueError, match="`p_cond` must have shape"):
        voi_categorical(np.array([0.5, 0.5]), np.ones((3, 2)) / 2)
    with pytest.raises(ValueError, match="`q` must sum to 1"):
        voi_categorical(np.array([0.5, 0.6]), np.ones((2, 2)) / 2)
    with pytest.raises(ValueError, match="`p_cond` rows must sum to 1"):
        voi_categorical(np.array([0.5, 0.5]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="`method`"):
        cohere(0.5, 0.5, 0.5, 0.5, method="nearest")
    with pytest.raises(ValueError, match="`p` must hold probabilities"):
        cohere(2.0, 0.5, 0.5, 0.5)


# -- realised updates ----------------------------------------------------------------

PATH = np.array([[0.2, 0.5, 0.0, 0.9, 1.0], [0.5, 0.5, 0.6, 0.4, 0.3]])


def _logit(p):
    return np.log(p) - np.log1p(-p)


def test_realised_updates_closed_forms():
    u = jupdates(PATH, 2, outcome=np.array([1.0, 0.0]))
    p = np.clip(PATH, 0.01, 0.99)
    a, b = p[:, :3], p[:, 2:]
    np.testing.assert_allclose(u.abs_change[:, :3], np.abs(b - a), atol=1e-14)
    np.testing.assert_allclose(u.logit_change[:, :3], _logit(b) - _logit(a), atol=1e-12)
    y = np.array([[1.0], [0.0]])
    ls = y * np.log(b / a) + (1 - y) * np.log((1 - b) / (1 - a))
    np.testing.assert_allclose(u.log_score_gain[:, :3], ls, atol=1e-12)
    assert not np.any(u.valid[:, 3:]) and np.all(u.valid[:, :3])
    assert np.all(np.asarray(u.abs_change)[:, 3:] == 0)
    # no outcome: the last price stands in; a mask drops updates with an unseen end
    mask = np.ones_like(PATH, bool)
    mask[1, 3] = False
    v = jupdates(PATH, 1, mask=mask)
    np.testing.assert_allclose(v.log_score_gain[0, 0],
                               0.99 * np.log(0.5 / 0.2) + 0.01 * np.log(0.5 / 0.8), atol=1e-12)
    assert not v.valid[1, 2] and not v.valid[1, 3] and v.valid[1, 1]


def test_update_between_under_jit_and_vmap():
    f = jax.jit(chex.assert_max_traces(update_between, n=1))
    u = f(PATH, jnp.array([0, 4]), jnp.array([3, 1]))
    w = f(PATH, jnp.array([1, 2]), jnp.array([2, 3]))  # new indices: no retrace
    np.testing.assert_allclose(u.abs_change, [0.7, 0.2], atol=1e-14)
    np.testing.assert_allclose(w.abs_change, [0.49, 0.2], atol=1e-14)
    bad = f(PATH, jnp.array([-1, 0]), jnp.array([2, 9]))
    assert not np.any(bad.valid)
    r = jupdates(PATH, 1)
    rv = jax.jit(jax.vmap(lambda x: realised_updates(x, 1)))(PATH)
    np.testing.assert_allclose(r.abs_change, rv.abs_change, atol=1e-15)
    u32 = jax.jit(update_between)(PATH.astype(np.float32), 0, 3)
    assert u32.abs_change.dtype == jnp.float32


def test_updates_bad_input():
    with pytest.raises(ValueError, match="`horizon`"):
        realised_updates(PATH, 0)
    with pytest.raises(ValueError, match="`horizon`"):
        realised_updates(PATH, 5)
    with pytest.raises(ValueError, match="`prices` must be probabilities"):
        realised_updates(PATH + 0.5, 1)
    with pytest.raises(ValueError, match="`prices` must be probabilities"):
        jax.block_until_ready(checks.checked_jit(update_between)(PATH * np.nan, 0, 1))
    with pytest.raises(ValueError, match="`outcome`"):
        realised_updates(PATH, 1, outcome=np.array([2.0, 0.0]))
    with pytest.raises(ValueError, match="`clip"):
        realised_updates(PATH, 1, clip=(0.0, 0.99))
    with pytest.raises(ValueError, match="`prices` must have a time axis"):
        realised_updates(np.float64(0.5), 1)
