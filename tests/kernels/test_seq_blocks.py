"""Attention, MLP, norms, causal convolution and the Mamba mixer against NumPy
references; jit/vmap invariance; bfloat16 inputs; bad input."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import seq


def np_attention(q, k, v):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, t, h, e = q.shape
    logits = np.einsum("bthe,bshe->bhts", q, k) / np.sqrt(e)
    logits = np.where(np.tril(np.ones((t, t), bool)), logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return np.einsum("bhts,bshe->bthe", w, v)


def test_attention_matches_reference_both_paths(key):
    q, k, v = jax.random.normal(key, (3, 2, 7, 2, 4))
    ref = np_attention(q, k, v)
    for impl in ("einsum", "xla"):
        np.testing.assert_allclose(seq.causal_attention(q, k, v, impl=impl), ref,
                                   rtol=1e-5, atol=1e-5)
    out = seq.causal_attention(q.astype(jnp.bfloat16), k.astype(jnp.bfloat16),
                               v.astype(jnp.bfloat16))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, atol=5e-2)


def test_attention_row_blocks_match_reference_and_xla_gradients(key):
    """The heads-major path in query blocks that do and do not divide T (3 of 7, and one
    block) against the float64 reference; its gradients against the independent
    ``dot_product_attention`` path; self_attention's one-transpose layout against the
    (batch, time, heads) path."""
    q, k, v = jax.random.normal(key, (3, 2, 7, 2, 4))
    w = jax.random.normal(jax.random.fold_in(key, 1), q.shape)
    ref = np_attention(q, k, v)
    for block in (3, 7):
        np.testing.assert_allclose(seq.causal_attention(q, k, v, block=block), ref,
                                   rtol=1e-5, atol=1e-5)

    def loss(q, k, v, impl, block=64):
        return jnp.sum(seq.causal_attention(q, k, v, impl=impl, block=block) * w)

    g_blk = jax.grad(loss, argnums=(0, 1, 2))(q, k, v, "einsum", 3)
    g_xla = jax.grad(loss, argnums=(0, 1, 2))(q, k, v, "xla")
    for a, b in zip(g_blk, g_xla, strict=True):
        assert float(jnp.abs(a).max()) > 1e-3
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    p = seq.init_attention(key, 8)
    x = jax.random.normal(jax.random.fold_in(key, 2), (2, 7, 8))
    np.testing.assert_allclose(seq.self_attention(p, x, 2, block=3),
                               seq.self_attention(p, x, 2, impl="xla"), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="`block`"):
        seq.causal_attention(q, k, v, block=0)


def test_attention_is_causal(key):
    p = seq.init_attention(key, 8)
    x = jax.random.normal(jax.random.fold_in(key, 1), (1, 6, 8))
    y1 = seq.self_attention(p, x, 2)
    y2 = seq.self_attention(p, x.at[:, 4:].set(9.0), 2)
    np.testing.assert_allclose(y1[:, :4], y2[:, :4], rtol=1e-6, atol=1e-6)
    assert not np.allclose(y1[:, 4:], y2[:, 4:])
    with pytest.raises(ValueError, match="n_heads"):
        seq.self_attention(p, x, 3)


def test_norms_and_mlp_match_numpy(key):
    x = jax.random.normal(key, (3, 5)) * 3 + 1
    w = jnp.linspace(0.5, 2.0, 5)
    xn = np.asarray(x, np.float64)
    ln = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(seq.layer_norm(x, w), ln, rtol=1e-5, atol=1e-5)
    rms = xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(seq.rms_norm(x, w), rms, rtol=1e-5, atol=1e-5)
    assert seq.layer_norm(x.astype(jnp.bfloat16), w).dtype == jnp.bfloat16
    p = seq.init_mlp(key, 5, 7)
    from scipy.special import erf
    h = xn @ np.asarray(p.w_in, np.float64)
    ref = (0.5 * h * (1 + erf(h / np.sqrt(2)))) @ np.asarray(p.w_out, np.float64)
    np.testing.assert_allclose(seq.mlp(p, x), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="`x`"):
        seq.mlp(p, x[:, :4])
    # GELU's custom derivative: Phi(x) + x phi(x), in float64
    z = np.linspace(-6.0, 6.0, 25)
    slope = 0.5 * (1 + erf(z / np.sqrt(2))) + z * np.exp(-z ** 2 / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(jax.vmap(jax.grad(seq.gelu))(jnp.asarray(z, jnp.float32)),
                               slope, rtol=1e-5, atol=1e-6)
    # linear flattens the leading axes: same values as the 3-D product
    x3 = jax.random.normal(key, (2, 3, 5))
    np.testing.assert_allclose(seq.linear(x3, p.w_in), np.asarray(x3, np.float64)
                               @ np.asarray(p.w_in, np.float64), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="`x`"):
        seq.linear(x3[..., :4], p.w_in)


def test_causal_conv_matches_numpy(key):
    x = jax.random.normal(key, (2, 9, 3))
    w = jax.random.normal(jax.random.fold_in(key, 1), (4, 3))
    b = jnp.array([0.1, -0.2, 0.3])
    y = seq.causal_conv1d(x, w, b)
    xn, wn = np.asarray(x, np.float64), np.asarray(w, np.float64)
    for c in range(3):
        for bb in range(2):
            ref = np.convolve(xn[bb, :, c], wn[::-1, c])[:9] + float(b[c])
            np.testing.assert_allclose(y[bb, :, c], ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="`w`"):
        seq.causal_conv1d(x, w[:, :2])


@pytest.fixture(scope="module")
def mamba():
    k = jax.random.key(3)
    p = seq.init_mamba(k, 8, d_state=4)
    x = jax.random.normal(jax.random.fold_in(k, 1), (2, 10, 8))
    return p, x


def test_mamba_mixer_forms_agree_and_are_causal(mamba):
    p, x = mamba
    fs = jax.jit(lambda p, x: seq.mamba_mixer(p, x, mode="sequential"))
    fa = jax.jit(lambda p, x: seq.mamba_mixer(p, x, mode="associative"))
    ys, ya = fs(p, x), fa(p, x)
    np.testing.assert_allclose(ys, ya, rtol=1e-4, atol=1e-5)
    y2 = fs(p, x.at[:, 6:].set(5.0))
    np.testing.assert_allclose(ys[:, :6], y2[:, :6], rtol=1e-5, atol=1e-6)
    g = jax.jit(jax.grad(lambda p: jnp.sum(seq.mamba_mixer(p, x) ** 2)))(p)
    assert all(np.all(np.isfinite(v)) for v in jax.tree.leaves(g))
    assert float(jnp.abs(g.A_log).sum()) > 0
    # init: A = -(1..N), dt in [1e-3, 0.1]
    np.testing.assert_allclose(-np.exp(np.asarray(p.A_log))[0], -np.arange(1, 5))
    dt = np.log1p(np.exp(np.asarray(p.b_dt)))
    assert dt.min() >= 1e-3 * 0.99 and dt.max() <= 0.1 * 1.01


@pytest.mark.slow
def test_mamba_jit_vmap_one_trace(mamba):
    p, x = mamba

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(x):
        return seq.mamba_mixer(p, x)

    y = f(x)
    f(x * 2.0)
    v = jax.vmap(lambda xi: seq.mamba_mixer(p, xi[None])[0])(x)
    np.testing.assert_allclose(v, y, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="`x`"):
        seq.mamba_mixer(p, x[..., :5])
