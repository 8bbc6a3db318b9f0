"""Tests of jaxkit.kernels.crosscoder against NumPy / SciPy references."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding, PartitionSpec
from jaxkit.kernels import crosscoder as cc

from jaxkit.distributed import make_mesh

F, D, T = 12, 5, 3


def _rng(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- references


def np_topk(pre, k):
    out = np.zeros_like(pre)
    for r in range(pre.shape[0]):
        order = sorted(range(pre.shape[1]), key=lambda j: (-pre[r, j], j))[:k]
        out[r, order] = np.maximum(pre[r, order], 0)
    return out


def np_batch_topk(pre, k):
    flat = pre.ravel()
    order = sorted(range(flat.size), key=lambda j: (-flat[j], j))[: k * pre.shape[0]]
    out = np.zeros_like(flat)
    out[order] = np.maximum(flat[order], 0)
    kept = flat[order]
    return out.reshape(pre.shape), kept[kept > 0].min()


def np_weiszfeld(x, iters, eps):
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    m = x.mean(0)
    for _ in range(iters):
        w = 1.0 / np.maximum(np.linalg.norm(x - m, axis=1), eps)
        m = (w[:, None] * x).sum(0) / w.sum()
    return m


def np_fvu(x, xh):
    x, xh = x.reshape(len(x), -1), xh.reshape(len(xh), -1)
    return ((x - xh) ** 2).sum() / ((x - x.mean(0)) ** 2).sum()


KEY = jax.random.key(1)  # the steps are deterministic: any key

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def params():
    x = jnp.asarray(_rng(1).normal(size=(64, T, D)), jnp.float32)
    return cc.init(jax.random.key(0), D, F, site=(T,), sample=x)


@pytest.fixture(scope="module")
def batch():
    return jnp.asarray(_rng(2).normal(size=(8, T, D)), jnp.float32)


@pytest.fixture(scope="module")
def topk_step():
    init_state, step = cc.make_train_step(activation="topk", k=3, optimizer=optax.adam(1e-2),
                                          k_aux=4, dead_steps=2)
    return init_state, jax.jit(step), step


# --------------------------------------------------------------------------- init / median


def test_init_shapes_unit_norm_and_tied(params):
    assert params.W_enc.shape == (T, D, F) and params.W_dec.shape == (F, T, D)
    assert params.b_dec.shape == (T, D) and params.log_threshold.shape == (F,)
    norms = np.linalg.norm(np.asarray(params.W_dec).reshape(F, -1), axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-6)
    np.testing.assert_array_equal(np.moveaxis(np.asarray(params.W_enc), -1, 0), params.W_dec)
    np.testing.assert_array_equal(params.b_enc, 0.0)
    np.testing.assert_allclose(np.exp(params.log_threshold), 1e-3, rtol=1e-5)
    p0 = cc.init(jax.random.key(0), D, F)
    assert p0.W_dec.shape == (F, D) and p0.W_enc.shape == (D, F)
    np.testing.assert_array_equal(p0.b_dec, 0.0)


def test_geometric_median_matches_numpy_weiszfeld():
    x = _rng(3).standard_t(2, size=(50, 2, 3))
    got = cc.geometric_median(jnp.asarray(x), iters=200, eps=1e-10)
    ref = np_weiszfeld(x, 200, 1e-10).reshape(2, 3)
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10)
    # it minimises the sum of distances (better than the mean and than perturbations)
    flat = x.reshape(50, -1)
    obj = lambda m: np.linalg.norm(flat - m, axis=1).sum()
    m = ref.ravel()
    assert obj(m) < obj(flat.mean(0))
    for dv in _rng(4).normal(size=(10, 6)) * 1e-3:
        assert obj(m) <= obj(m + dv) + 1e-12
    # epsilon guard: the median lands on a data point without producing NaN
    pts = jnp.asarray([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    med = cc.geometric_median(pts, iters=50)
    assert np.all(np.isfinite(med)) and np.linalg.norm(med) < 1e-3


# --------------------------------------------------------------------------- activations


def test_activations_match_numpy():
    pre = _rng(5).normal(size=(6, F)).astype(np.float32)
    pre[0, :4] = 0.7  # ties: the lower index wins
    np.testing.assert_array_equal(cc.relu(jnp.asarray(pre)), np.maximum(pre, 0))
    np.testing.assert_array_equal(cc.topk(jnp.asarray(pre), 3), np_topk(pre, 3))
    z, m = cc.batch_topk(jnp.asarray(pre), 3)
    z_ref, m_ref = np_batch_topk(pre, 3)
    np.testing.assert_array_equal(z, z_ref)
    assert float(m) == pytest.approx(m_ref)
    np.testing.assert_array_equal(cc.threshold(jnp.asarray(pre), 0.5), pre * (pre > 0.5))
    lt = np.log(np.abs(_rng(6).normal(size=F)) + 0.1).astype(np.float32)
    np.testing.assert_allclose(cc.jumprelu(jnp.asarray(pre), jnp.asarray(lt), 0.01),
                               pre * (pre > np.exp(lt)), rtol=1e-6)


def test_batch_topk_varies_per_row():
    pre = np.zeros((2, 6), np.float32)
    pre[0] = [5, 4, 3, 2, 1, 0.5]
    pre[1] = -1
    z, m = cc.batch_topk(jnp.asarray(pre), 2)
    assert int(jnp.sum(z[0] != 0)) == 4 and int(jnp.sum(z[1] != 0)) == 0
    assert float(m) == 2.0
    _, m_none = cc.batch_topk(-jnp.ones((2, 6)), 2)
    assert np.isinf(m_none)


_jtopk = jax.jit(cc.topk, static_argnums=1)
_jbtopk = jax.jit(cc.batch_topk, static_argnums=1)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31 - 1), st.floats(-1.0, 1.0))
def test_topk_property(k, seed, shift):
    pre = _rng(seed).normal(size=(4, 7)) + shift
    pre[:, :2] = pre[:, 1:3]  # create exact ties
    z = np.asarray(_jtopk(jnp.asarray(pre), k))
    assert np.all(z >= 0)
    n_pos = (pre > 0).sum(axis=1)
    np.testing.assert_array_equal((z != 0).sum(axis=1), np.minimum(k, n_pos))
    # every kept value is the original pre-activation
    np.testing.assert_array_equal(z[z != 0], pre[z != 0])
    zb, m = _jbtopk(jnp.asarray(pre), k)
    zb = np.asarray(zb)
    assert np.all(zb >= 0) and (zb != 0).sum() == min(4 * k, (pre > 0).sum())
    if (zb != 0).any():
        assert float(m) == zb[zb != 0].min() and np.all(pre[zb == 0] <= float(m))


# --------------------------------------------------------------------------- STE gradients


def test_jumprelu_ste_gradients_match_rectangle_kernel():
    rng = _rng(7)
    eps = 0.2
    lt = np.log(rng.uniform(0.3, 1.0, size=F))
    pre = rng.uniform(-0.5, 1.5, size=(9, F))
    g_out = rng.normal(size=(9, F))
    theta = np.exp(lt)
    K = (np.abs((pre - theta) / eps) < 0.5).astype(float)
    H = (pre > theta).astype(float)

    f = lambda p, lt_: jnp.sum(jnp.asarray(g_out) * cc.jumprelu(p, lt_, eps))
    d_pre, d_lt = jax.grad(f, argnums=(0, 1))(jnp.asarray(pre), jnp.asarray(lt))
    np.testing.assert_allclose(d_pre, g_out * H, rtol=1e-12)
    # d/dtheta = -(theta/eps) K, chained through theta = exp(log_threshold)
    ref = (g_out * -(theta / eps) * K).sum(0) * theta
    np.testing.assert_allclose(d_lt, ref, rtol=1e-10, atol=1e-12)
    assert np.any(ref != 0)

    s = lambda p, lt_: jnp.sum(jnp.asarray(g_out) * cc.step_ste(p, lt_, eps))
    d_pre, d_lt = jax.grad(s, argnums=(0, 1))(jnp.asarray(pre), jnp.asarray(lt))
    np.testing.assert_array_equal(d_pre, 0.0)
    np.testing.assert_allclose(d_lt, (g_out * -(1 / eps) * K).sum(0) * theta, rtol=1e-10)
    # the L0 penalty is the batch mean of the per-row step counts
    d_pen = jax.grad(cc.l0_penalty, argnums=1)(jnp.asarray(pre), jnp.asarray(lt), eps)
    np.testing.assert_allclose(d_pen, (-(1 / eps) * K).sum(0) * theta / 9, rtol=1e-10)


def test_l0_ste_matches_finite_difference_of_count():
    # On a dense uniform grid of pre-activations the STE gradient of the count
    # sum_i H(p_i - theta) wrt theta approximates its finite-difference slope (-1/h).
    h = 1e-3
    pre = jnp.arange(0.0, 2.0, h)[:, None]
    lt = jnp.log(jnp.asarray([1.0]))
    count = lambda lt_: jnp.sum(cc.step_ste(pre, lt_, 0.05))
    ste = float(jax.grad(count)(lt)[0])  # d/dlog theta = theta * d/dtheta, theta = 1
    delta = 0.1
    fd = float((count(jnp.log(jnp.asarray([1 + delta]))) - count(jnp.log(jnp.asarray([1 - delta]))))
               / (2 * delta))
    assert ste == pytest.approx(-1 / h, rel=0.03)
    assert ste == pytest.approx(fd, rel=0.03)


# --------------------------------------------------------------------------- penalties / loss


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_fvu_has_no_overflow_or_underflow_at_float32_extremes(scale):
    """FVU is scale-free: activations near float32's range give the float64 answer."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8))
    xh = x + 0.3 * rng.normal(size=x.shape)
    got = float(cc.fvu(jnp.asarray(x * scale, jnp.float32), jnp.asarray(xh * scale, jnp.float32)))
    assert np.isfinite(got) and got == pytest.approx(np_fvu(x, xh), rel=1e-4)


def test_penalties_and_fvu_match_numpy(params, batch):
    rng = _rng(8)
    z = np.maximum(rng.normal(size=(8, F)), 0)
    W = np.asarray(params.W_dec, np.float64) * rng.uniform(0.5, 2, size=(F, 1, 1))
    norms = np.linalg.norm(W.reshape(F, -1), axis=1)
    assert float(cc.l1_penalty(jnp.asarray(z), jnp.asarray(W))) == pytest.approx(
        (z * norms).sum(1).mean())
    assert float(cc.tanh_penalty(jnp.asarray(z), jnp.asarray(W), 3.0)) == pytest.approx(
        np.tanh(3 * z * norms).sum(1).mean())
    x = np.asarray(batch, np.float64)
    xh = x + rng.normal(size=x.shape) * 0.3
    assert float(cc.fvu(jnp.asarray(x), jnp.asarray(xh))) == pytest.approx(np_fvu(x, xh))
    assert float(cc.explained_variance(x, xh)) == pytest.approx(1 - np_fvu(x, xh))
    cos = (x.reshape(8, -1) * xh.reshape(8, -1)).sum(1) / (
        np.linalg.norm(x.reshape(8, -1), axis=1) * np.linalg.norm(xh.reshape(8, -1), axis=1))
    assert float(cc.reconstruction_cosine(x, xh)) == pytest.approx(cos.mean())
    assert float(cc.l0(jnp.asarray([[0.0, 1, 2], [0, 0, 3]]))) == 1.5
    assert float(cc.dead_fraction(jnp.asarray([0, 5, 10, 3]), 5)) == 0.5


def test_encode_decode_match_einsum(params, batch):
    x = np.asarray(batch, np.float64)
    Wp = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    pre = np.einsum("btd,tdf->bf", x, Wp.W_enc) + Wp.b_enc
    np.testing.assert_allclose(cc.pre_activation(params, batch), pre, rtol=1e-5, atol=1e-5)
    z = cc.encode(params, batch, k=3)
    np.testing.assert_allclose(z, np_topk(pre, 3), rtol=1e-5, atol=1e-5)
    xh = np.einsum("bf,ftd->btd", np.asarray(z, np.float64), Wp.W_dec) + Wp.b_dec
    np.testing.assert_allclose(cc.decode(params, z), xh, rtol=1e-5, atol=1e-5)
    _, z2, xh2 = cc.forward(params, batch, k=3)
    np.testing.assert_array_equal(z2, z)
    np.testing.assert_allclose(xh2, xh, rtol=1e-5, atol=1e-5)


def test_auxk_zero_without_dead_and_positive_with_dead(params, batch):
    pre = cc.pre_activation(params, batch)
    xf = batch.reshape(8, -1)
    res = xf - cc.decode(params, cc.topk(pre, 3)).reshape(8, -1)
    Wf = params.W_dec.reshape(F, -1)
    none = jnp.zeros(F, bool)
    some = jnp.arange(F) < 6
    allv = jnp.ones(F, bool)
    assert float(cc.auxk_loss(pre, res, Wf, none, 4)) == 0.0
    a = float(jax.jit(cc.auxk_loss, static_argnums=4)(pre, res, Wf, some, 4))
    assert np.isfinite(a) and a > 0
    # reference: top-4 among latents 0..5 reconstruct the residual
    p = np.asarray(pre, np.float64)
    masked = np.where(np.asarray(some), p, -np.inf)
    za = np_topk(np.where(np.isfinite(masked), masked, -1e30), 4)
    za[~np.isfinite(masked)] = 0
    e = np.asarray(res, np.float64)
    assert a == pytest.approx(np_fvu(e, za @ np.asarray(Wf, np.float64)), rel=1e-4)
    grad = jax.jit(jax.grad(lambda p_, m: cc.auxk_loss(p_, res, Wf, m, 8)))
    for dead in (none, some, allv):  # NaN-free gradients, also with k_aux > #dead
        g = grad(pre, dead)
        assert np.all(np.isfinite(g))


# --------------------------------------------------------------------------- train step


def test_decoder_parallel_grad_removed_and_unit_norm(params, batch, topk_step):
    g = jnp.asarray(_rng(9).normal(size=params.W_dec.shape), jnp.float32)
    gp = cc.remove_parallel_grad(params.W_dec, g)
    dots = np.sum(np.asarray(gp).reshape(F, -1) * np.asarray(params.W_dec).reshape(F, -1), 1)
    np.testing.assert_allclose(dots, 0.0, atol=1e-5)
    init_state, step, _ = topk_step
    state, info = step(KEY, init_state(params), batch)
    norms = np.linalg.norm(np.asarray(state.params.W_dec).reshape(F, -1), axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)
    assert not np.allclose(state.params.W_dec, params.W_dec)
    assert int(state.step) == 1 and np.isfinite(float(info.loss))
    # SGD step: W_dec moves only orthogonally to the atoms before renormalisation
    init2, step2 = cc.make_train_step(activation="topk", k=3, optimizer=optax.sgd(1e-3))
    s2, _ = jax.jit(step2)(KEY, init2(params), batch)
    delta = (np.asarray(s2.params.W_dec) - np.asarray(params.W_dec)).reshape(F, -1)
    par = np.sum(delta * np.asarray(params.W_dec).reshape(F, -1), 1)
    assert np.max(np.abs(par)) < 1e-3 * np.max(np.abs(delta)) + 1e-7


def test_step_dead_latents_aux_and_fired_counter(params, batch, topk_step):
    init_state, step, _ = topk_step
    state = init_state(params)
    state, info = step(KEY, state, batch)
    assert float(info.aux_loss) == 0.0  # nothing dead yet
    fired = np.any(np.asarray(cc.encode(params, batch, k=3)) != 0, axis=0)
    np.testing.assert_array_equal(np.asarray(state.aux.steps_since_fired), np.where(fired, 0, 1))
    ssf = jnp.where(jnp.arange(F) < 4, 5, 0).astype(jnp.int32)
    state = state._replace(aux=state.aux._replace(steps_since_fired=ssf))
    state, info = step(KEY, state, batch)
    assert float(info.aux_loss) > 0 and np.isfinite(float(info.loss))
    assert float(info.loss) == pytest.approx(float(info.fvu + info.aux_loss), rel=1e-6)


def test_step_jit_and_vmap_invariance(params, batch, topk_step):
    init_state, jstep, _ = topk_step
    s0 = init_state(params)
    xs = jnp.stack([batch, batch[::-1] * 0.5])
    vs, vi = jax.jit(jax.vmap(jstep, in_axes=(None, None, 0)))(KEY, s0, xs)
    for i, x in enumerate(xs):
        si, ii = jstep(KEY, s0, x)
        jax.tree.map(lambda u, v, i=i: np.testing.assert_allclose(u[i], v, rtol=1e-5, atol=1e-6),
                     vs.params, si.params)
        assert float(vi.loss[i]) == pytest.approx(float(ii.loss), rel=1e-5)
    # the jitted step equals a float64 NumPy evaluation of the loss it reports
    z = np_topk(np.asarray(cc.pre_activation(params, xs[1]), np.float64), 3)
    xh = z @ np.asarray(params.W_dec, np.float64).reshape(F, -1) + np.ravel(params.b_dec)
    assert float(vi.fvu[1]) == pytest.approx(np_fvu(np.asarray(xs[1]), xh), rel=1e-4)


def test_encode_jit_and_vmap_invariance(params, batch):
    for act, kw in (("topk", dict(k=3)), ("jumprelu", {}), ("batch_topk", dict(k=3))):
        ref = cc.encode(params, batch, activation=act, **kw)
        enc = jax.jit(lambda p, x, act=act, kw=kw: cc.encode(p, x, activation=act, **kw))
        np.testing.assert_allclose(enc(params, batch), ref, rtol=1e-6, atol=1e-6)
        xs = jnp.stack([batch, 2 * batch])
        v = jax.vmap(enc, in_axes=(None, 0))(params, xs)
        np.testing.assert_allclose(v[1], cc.encode(params, 2 * batch, activation=act, **kw),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activation,sparsity", [("relu", "l1"), ("jumprelu", "l0"),
                                                 ("batch_topk", "tanh")])
def test_other_activations_train(params, batch, activation, sparsity):
    init_state, step = cc.make_train_step(activation=activation, k=3,
                                          optimizer=optax.adam(1e-2), sparsity=sparsity,
                                          sparsity_coef=1e-2, bandwidth=0.5, clip_norm=1.0)
    state = init_state(params)
    step = jax.jit(step)
    losses = []
    for _ in range(15):
        state, info = step(KEY, state, batch)
        losses.append(float(info.loss))
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    if activation == "jumprelu":  # the STE moves the thresholds
        assert not np.allclose(state.params.log_threshold, params.log_threshold)
    if activation == "batch_topk":  # EMA of the smallest kept activation
        assert float(state.aux.threshold) > 0
        pre = cc.pre_activation(state.params, batch)
        assert float(state.aux.threshold) < float(jnp.max(pre))


@pytest.mark.parametrize("sparsity,coef", [("l1", 0.0), ("l1", 1e-2), ("tanh", 1e-2)])
def test_sparse_topk_step_equals_dense(params, batch, sparsity, coef):
    # the sparse TopK step (default for topk) against the dense formulation: same loss,
    # metrics, counters and parameters over several steps, with AuxK on dead latents
    kw = dict(activation="topk", k=3, optimizer=optax.adam(1e-2), k_aux=4, dead_steps=2,
              sparsity=sparsity, sparsity_coef=coef)
    init_s, step_s = cc.make_train_step(**kw, decoder="sparse")
    init_d, step_d = cc.make_train_step(**kw, decoder="dense")
    step_s, step_d = jax.jit(step_s), jax.jit(step_d)
    ss, sd = init_s(params), init_d(params)
    saw_aux = False
    for i in range(4):
        x = batch * (1.0 + 0.25 * i)
        ss, a = step_s(KEY, ss, x)
        sd, b = step_d(KEY, sd, x)
        for name in a._fields:
            assert float(getattr(a, name)) == pytest.approx(float(getattr(b, name)),
                                                            rel=1e-4, abs=1e-6), name
        np.testing.assert_array_equal(np.asarray(ss.aux.steps_since_fired),
                                      np.asarray(sd.aux.steps_since_fired))
        jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5),
                     ss.params, sd.params)
        saw_aux |= float(a.aux_loss) > 0
    assert saw_aux  # some latents went dead (dead_steps=2) and AuxK was exercised


def _dense_decode(vals, idx, W):
    z = jnp.zeros((idx.shape[0], W.shape[0]), W.dtype).at[
        jnp.arange(idx.shape[0])[:, None], idx].add(vals)
    return z @ W


# k=70 exceeds the unrolled limit (the decoder's fori_loop); B=150 runs the backward
# products over two full row blocks of 64 and a remainder of 22 (B=5: the remainder only)
@pytest.mark.parametrize("k,B", [(3, 5), (70, 5), (3, 150)])
def test_sparse_decode_and_its_vjp_match_dense(k, B):
    rng = _rng(11)
    n_lat, d = 96, 4
    W = jnp.asarray(rng.normal(size=(n_lat, d)))
    idx = jnp.asarray(np.stack([rng.choice(n_lat, k, replace=False) for _ in range(B)]),
                      jnp.int32)
    vals = jnp.asarray(rng.normal(size=(B, k)))
    g = jnp.asarray(rng.normal(size=(B, d)))
    np.testing.assert_allclose(cc.sparse_decode(vals, idx, W), _dense_decode(vals, idx, W),
                               rtol=1e-12)
    _, vjp_s = jax.vjp(lambda v, w: cc.sparse_decode(v, idx, w), vals, W)
    _, vjp_d = jax.vjp(lambda v, w: _dense_decode(v, idx, w), vals, W)
    for a, b in zip(vjp_s(g), vjp_d(g), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # the encoder side: the gradient of W_enc, b_enc and x through the sparse TopK step
    x = jnp.asarray(rng.normal(size=(B, d)))
    We = jnp.asarray(rng.normal(size=(d, n_lat)))
    be = jnp.asarray(rng.normal(size=(n_lat,)))
    dead = jnp.zeros((n_lat,), bool)

    def sparse(x, We, be):
        v, i, _, _ = cc.topk_encode(x, We, be, dead, k, None)
        return jnp.sum(cc.sparse_decode(v, i, W) ** 2)

    def dense(x, We, be):
        return jnp.sum((cc.topk(x @ We + be, k) @ W) ** 2)

    for a, b in zip(jax.grad(sparse, (0, 1, 2))(x, We, be), jax.grad(dense, (0, 1, 2))(x, We, be),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_sparse_decode_bad_input():
    W = jnp.ones((6, 3))
    v, i = jnp.ones((2, 2)), jnp.zeros((2, 2), jnp.int32)
    with pytest.raises(ValueError, match="`vals` and `idx` must have the same shape"):
        cc.sparse_decode(v, i[:, :1], W)
    with pytest.raises(ValueError, match="`W` must be a 2-D array"):
        cc.sparse_decode(v, i, jnp.ones((6, 3, 1)))
    with pytest.raises(ValueError, match="`idx` must be an integer array"):
        cc.sparse_decode(v, i.astype(jnp.float32), W)
    with pytest.raises(ValueError, match=r"outside \[0, 6\)"):
        cc.sparse_decode(v, i.at[1, 0].set(6), W)
    with pytest.raises(Exception, match=r"outside \[0, 6\)"):
        jax.block_until_ready(jax.jit(cc.sparse_decode)(v, i.at[0, 1].set(-1), W))


def test_decoder_option_errors():
    opt = optax.adam(1e-3)
    with pytest.raises(ValueError, match="`decoder` must be"):
        cc.make_train_step(activation="topk", k=3, optimizer=opt, decoder="fast")
    with pytest.raises(ValueError, match="activation='topk'"):
        cc.make_train_step(activation="batch_topk", k=3, optimizer=opt, decoder="sparse")
    with pytest.raises(ValueError, match="sparsity 'l1' or 'tanh'"):
        cc.make_train_step(activation="topk", k=3, optimizer=opt, sparsity="l0",
                           decoder="sparse")


def test_step_sharded_over_data_and_model(params, batch, topk_step):
    init_state, jstep, step = topk_step
    mesh = make_mesh({"data": 4, "model": 2})
    s0 = init_state(params)
    rep = NamedSharding(mesh, PartitionSpec())
    model_spec = cc.Params(
        W_enc=NamedSharding(mesh, PartitionSpec(None, None, "model")),
        b_enc=NamedSharding(mesh, PartitionSpec("model")),
        W_dec=NamedSharding(mesh, PartitionSpec("model", None, None)),
        b_dec=rep, log_threshold=NamedSharding(mesh, PartitionSpec("model")))
    s_sh = jax.device_put(s0, rep)._replace(params=jax.device_put(params, model_spec))
    x_sh = jax.device_put(batch, NamedSharding(mesh, PartitionSpec("data", None, None)))
    b, ib = jax.jit(step)(KEY, s_sh, x_sh)
    a, ia = jstep(KEY, s0, batch)
    jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6),
                 a.params, b.params)
    assert float(ia.loss) == pytest.approx(float(ib.loss), rel=1e-5)


# --------------------------------------------------------------------------- metrics


def test_metrics_perfect_for_permuted_sign_flipped_copy():
    rng = _rng(10)
    true = rng.normal(size=(7, 2, 4))
    perm = rng.permutation(7)
    signs = rng.choice([-1.0, 1.0], size=(7, 1, 1))
    scale = rng.uniform(0.5, 2.0, size=(7, 1, 1))
    W = np.concatenate([true[perm] * signs * scale, rng.normal(size=(3, 2, 4))])
    assert float(cc.mmcs(jnp.asarray(W), jnp.asarray(true))) == pytest.approx(1.0)
    assert float(cc.mcc_hungarian(jnp.asarray(W), jnp.asarray(true))) == pytest.approx(1.0)
    assert float(cc.recovery(W, true, 0.99)) == 1.0
    assert float(cc.recovery(W, true, 0.99, matched=True)) == 1.0
    assert float(cc.recovery_auc(W, true, n=11)) == pytest.approx(1.0)
    C = np.asarray(cc.cosine_matrix(W, true))
    assert C.shape == (7, 10)
    np.testing.assert_allclose(np.abs(C[np.arange(7), np.argsort(perm)]), 1.0, rtol=1e-12)


@pytest.mark.parametrize("shape", [(6, 6), (5, 8), (8, 5)])
def test_mcc_hungarian_matches_scipy(shape):
    G, Fn = shape
    rng = _rng(G * 10 + Fn)
    true, W = rng.normal(size=(G, 3)), rng.normal(size=(Fn, 3))
    C = np.abs((true / np.linalg.norm(true, axis=1, keepdims=True))
               @ (W / np.linalg.norm(W, axis=1, keepdims=True)).T)
    r, c = scipy.optimize.linear_sum_assignment(C, maximize=True)
    assert float(cc.mcc_hungarian(jnp.asarray(W), jnp.asarray(true))) == pytest.approx(
        C[r, c].mean(), rel=1e-10)
    best = C.max(1)
    assert float(cc.mmcs(W, true)) == pytest.approx(best.mean())
    for thr in (0.9, 0.8, 0.5):
        assert float(cc.recovery(W, true, thr)) == pytest.approx((best >= thr).mean())
        matched = np.zeros(G)
        matched[r] = C[r, c]
        assert float(cc.recovery(W, true, thr, matched=True)) == pytest.approx(
            (matched >= thr).mean())
    ts = np.linspace(0, 1, 51)
    frac = (best[None] >= ts[:, None] - 1e-6).mean(1)
    auc = np.sum((frac[1:] + frac[:-1]) / 2 * np.diff(ts))
    assert float(cc.recovery_auc(W, true, n=51)) == pytest.approx(auc)
    assert abs(float(cc.recovery_auc(W, true, n=2001)) - best.mean()) < 2e-3


# --------------------------------------------------------------------------- CLT, steering


def test_clt_masking_and_forward():
    L, din, dout, Fl = 3, 4, 2, 6
    p = cc.clt_init(jax.random.key(0), L, din, dout, Fl)
    for s in range(L):
        for t in range(s):
            np.testing.assert_array_equal(p.W_dec[s, :, t], 0.0)
    x = jnp.asarray(_rng(11).normal(size=(5, L, din)))
    # even non-zero weights below the mask have no effect
    junk = p._replace(W_dec=p.W_dec + 10.0 * (1 - cc.clt_mask(L))[:, None, :, None])
    fwd = jax.jit(partial(cc.clt_forward, activation="topk", k=2))
    z, y = fwd(p, x)
    z2, y2 = fwd(junk, x)
    np.testing.assert_allclose(y, y2, rtol=1e-12)
    # no decoder path from a later layer to an earlier one: d y[:, t] / d x[:, s] = 0, s > t
    J = jax.jit(jax.jacobian(lambda x_: cc.clt_forward(p, x_, activation="relu")[1]))(x)
    for s in range(L):
        for t in range(L):
            blk = np.asarray(J[:, t, :, :, s, :])
            if s > t:
                np.testing.assert_array_equal(blk, 0.0)
    assert np.any(np.asarray(J[:, 2, :, :, 0, :]) != 0)
    # reference forward
    pre = np.einsum("bld,ldf->blf", np.asarray(x), p.W_enc) + p.b_enc
    zr = np.stack([np_topk(pre[:, s], 2) for s in range(L)], 1)
    np.testing.assert_allclose(z, zr, rtol=1e-6)
    Wm = np.asarray(p.W_dec) * np.triu(np.ones((L, L)))[:, None, :, None]
    np.testing.assert_allclose(y, np.einsum("bsf,sftd->btd", zr, Wm) + p.b_dec, rtol=1e-5,
                               atol=1e-6)
    y_true = jnp.asarray(_rng(12).normal(size=(5, L, dout)))
    loss, g = jax.jit(jax.value_and_grad(partial(cc.clt_loss, activation="topk", k=2)))(
        p, x, y_true)
    assert float(loss) == pytest.approx(np_fvu(np.asarray(y_true), np.asarray(y)), rel=1e-6)
    for s in range(L):
        for t in range(s):
            np.testing.assert_array_equal(g.W_dec[s, :, t], 0.0)


def test_steer(params, batch):
    out = cc.steer(params, batch, 4, 2.5)
    np.testing.assert_allclose(out, batch + 2.5 * params.W_dec[4][None], rtol=1e-6)
    z_before = cc.pre_activation(params, batch)[:, 4]
    z_after = cc.pre_activation(params, out)[:, 4]
    np.testing.assert_allclose(z_after - z_before, 2.5, rtol=1e-4)  # tied init, unit atom


# --------------------------------------------------------------------------- bad inputs


def test_bad_inputs(params, batch):
    with pytest.raises(ValueError, match="`k`"):
        cc.encode(params, batch, k=F + 1)
    with pytest.raises(ValueError, match="`k`"):
        cc.encode(params, batch, k=0)
    with pytest.raises(ValueError, match="`k`"):
        cc.encode(params, batch)  # k missing for topk
    with pytest.raises(ValueError, match="`x`.*NaN"):
        cc.encode(params, batch.at[0, 0, 0].set(jnp.nan), k=3)
    with pytest.raises(ValueError, match="`x`.*inf"):
        cc.pre_activation(params, batch.at[1, 1, 1].set(jnp.inf))
    with pytest.raises(ValueError, match="`x`.*shape"):
        cc.encode(params, batch[:, 0], k=3)
    with pytest.raises(ValueError, match="`x`.*shape"):
        cc.encode(params, batch[:, :, :-1], k=3)
    with pytest.raises(ValueError, match="`activation`"):
        cc.encode(params, batch, activation="gelu", k=3)
    with pytest.raises(ValueError, match="`theta`"):
        cc.encode(params, batch, activation="threshold")
    with pytest.raises(ValueError, match="`z`"):
        cc.decode(params, jnp.zeros((2, F + 1)))
    with pytest.raises(ValueError, match="`activation`"):
        cc.make_train_step(activation="softmax", k=3, optimizer=optax.sgd(1.0))
    with pytest.raises(ValueError, match="`k`"):
        cc.make_train_step(activation="topk", k=0, optimizer=optax.sgd(1.0))
    with pytest.raises(ValueError, match="`sparsity`"):
        cc.make_train_step(activation="relu", k=None, optimizer=optax.sgd(1.0), sparsity="l2")
    init_state, step = cc.make_train_step(activation="topk", k=F + 1, optimizer=optax.sgd(1.0))
    with pytest.raises(ValueError, match=r"`k` must be <= n_latents"):
        init_state(params)
    init_state, step = cc.make_train_step(activation="topk", k=3, k_aux=F + 1,
                                          optimizer=optax.sgd(1.0))
    with pytest.raises(ValueError, match=r"`k_aux` must be <= n_latents"):
        init_state(params)
    for bad in (dict(sparsity_coef=-1.0), dict(aux_coef=-0.1), dict(tanh_c=0.0),
                dict(dead_steps=0), dict(threshold_momentum=1.0), dict(bandwidth=0.0)):
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}`"):
            cc.make_train_step(activation="topk", k=3, optimizer=optax.sgd(1.0), **bad)
    with pytest.raises(ValueError, match=r"`k_aux` must be <= n_latents"):
        cc.auxk_loss(jnp.zeros((2, F)), jnp.zeros((2, 3)), jnp.zeros((F, 3)),
                     jnp.ones((F,), bool), F + 1)
    with pytest.raises(ValueError, match="`sample`"):
        cc.init(jax.random.key(0), D, F, site=(T,), sample=jnp.zeros((4, D)))
    with pytest.raises(ValueError, match="`x`.*NaN"):
        cc.geometric_median(jnp.asarray([[0.0, jnp.nan]]))
    with pytest.raises(ValueError, match="`latent`"):
        cc.steer(params, batch, F, 1.0)
    with pytest.raises(ValueError, match="`W_dec`"):
        cc.mmcs(jnp.zeros((3, 4)), jnp.zeros((3, 5)))
    p = cc.clt_init(jax.random.key(0), 2, 3, 3, 4)
    with pytest.raises(ValueError, match="`x`"):
        cc.clt_forward(p, jnp.zeros((2, 3, 3)), k=2)
    with pytest.raises(ValueError, match="`y`"):
        cc.clt_loss(p, jnp.zeros((2, 2, 3)), jnp.zeros((2, 3, 3)), k=2)
    # inside jit the NaN check becomes a run-time error
    enc = jax.jit(lambda x: cc.encode(params, x, k=3))
    with pytest.raises(Exception, match="NaN"):
        jax.block_until_ready(enc(batch.at[0, 0, 0].set(jnp.nan)))


def test_k_equal_to_n_latents_is_accepted_everywhere(params, batch):
    # k == n_latents keeps every latent: TopK is then ReLU, in topk, encode and forward
    pre = cc.pre_activation(params, batch)
    relu = np.asarray(cc.relu(pre))
    np.testing.assert_allclose(cc.topk(pre, F), relu, rtol=1e-6)
    np.testing.assert_allclose(cc.encode(params, batch, k=F), relu, rtol=1e-6)
    np.testing.assert_allclose(cc.forward(params, batch, k=F)[1], relu, rtol=1e-6)
    np.testing.assert_allclose(cc.encode(params, batch, activation="batch_topk", k=F), relu,
                               rtol=1e-6)
    init_state, step = cc.make_train_step(activation="topk", k=F, k_aux=F,
                                          optimizer=optax.sgd(1e-2))
    _, info = jax.jit(step)(KEY, init_state(params), batch)
    assert np.isfinite(float(info.loss)) and bool(info.finite)
    for fn in (lambda: cc.topk(pre, F + 1), lambda: cc.encode(params, batch, k=F + 1),
               lambda: cc.forward(params, batch, k=F + 1)):
        with pytest.raises(ValueError, match=rf"`k` must be <= n_latents \({F}\)"):
            fn()


def test_sparse_blocks_are_static_arguments(params, batch):
    # the blocking of the sparse step is an explicit argument; one block and tiny blocks
    # give the default's result
    assert cc.default_blocks("cpu") == cc.Blocks()
    assert cc.default_blocks("gpu") == cc.Blocks(slots=None, enc_rows=None)
    kw = dict(activation="topk", k=3, optimizer=optax.adam(1e-2), k_aux=4, dead_steps=1)
    init_state, ref = cc.make_train_step(**kw)
    s0 = init_state(params)
    a, ia = jax.jit(ref)(KEY, s0, batch)
    for blocks in (cc.Blocks(slots=None, enc_rows=None), cc.Blocks(unroll_k=1, slots=6,
                                                                   enc_rows=3)):
        _, step = cc.make_train_step(**kw, blocks=blocks)
        b, ib = jax.jit(step)(KEY, s0, batch)
        jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6),
                     a.params, b.params)
        assert float(ia.loss) == pytest.approx(float(ib.loss), rel=1e-6)
    with pytest.raises(ValueError, match="`blocks.slots`"):
        cc.sparse_decode(jnp.ones((2, 1)), jnp.zeros((2, 1), jnp.int32), jnp.ones((3, 2)),
                         blocks=cc.Blocks(slots=0))


def test_step_reports_non_finite_and_check_params(params, batch):
    # Info.finite is the generic step's flag; check_params also looks at the parameters
    poison = optax.scale_by_schedule(lambda c: jnp.where(c == 0, jnp.nan, 1.0))
    for check in (False, True):
        init_state, step = cc.make_train_step(activation="topk", k=3, check_params=check,
                                              optimizer=optax.chain(optax.sgd(1e-2), poison))
        _, info = jax.jit(step)(KEY, init_state(params), batch)
        assert np.isfinite(float(info.loss)) and bool(info.finite) is (not check)
