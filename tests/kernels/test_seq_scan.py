"""Selective scans (Mamba-1 sequential / associative, Mamba-2 chunked SSD) against a
float64 step-by-step NumPy reference: values, gradients (finite differences), chunk
sizes, float32 and bfloat16 inputs, jit / vmap invariance and one trace."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import seq


def reference_scan(x, delta, A, B, C, D=None, z=None):
    """h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t; y_t = C_t h_t (+ D x_t) (* silu z),
    one step at a time in float64."""
    x, delta, A, B, C = (np.asarray(v, np.float64) for v in (x, delta, A, B, C))
    b, length, d = x.shape
    h = np.zeros((b, d, A.shape[1]))
    ys = []
    for t in range(length):
        h = np.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * x[:, t])[..., None] \
            * B[:, t, None, :]
        ys.append(np.einsum("bdn,bn->bd", h, C[:, t]))
    y = np.stack(ys, 1)
    if D is not None:
        y = y + np.asarray(D, np.float64) * x
    if z is not None:
        z = np.asarray(z, np.float64)
        y = y * z / (1 + np.exp(-z))
    return y, h


def make_inputs(key, b=2, length=12, d=5, n=3, dtype=jnp.float32):
    ks = jax.random.split(key, 6)
    x = jax.random.normal(ks[0], (b, length, d))
    delta = jax.nn.softplus(jax.random.normal(ks[1], (b, length, d)) - 1.0)
    A = -jnp.exp(jax.random.normal(ks[2], (d, n)) * 0.5)
    B = jax.random.normal(ks[3], (b, length, n))
    C = jax.random.normal(ks[4], (b, length, n))
    z = jax.random.normal(ks[5], (b, length, d))
    return tuple(v.astype(dtype) for v in (x, delta, A, B, C, z))


@pytest.mark.parametrize("mode,chunk", [("sequential", 16), ("sequential", 5),
                                        ("sequential", 1), ("associative", 16)])
def test_scan_matches_reference(key, mode, chunk):
    """chunk 16 > length 12 (one chunk), 5 (padded: 12 = 2 * 5 + 2), 1 (every step)."""
    x, delta, A, B, C, z = make_inputs(key)
    D = jnp.linspace(0.5, 1.5, x.shape[-1], dtype=jnp.float32)
    res = seq.selective_scan(x, delta, A, B, C, D, z, mode=mode, chunk=chunk)
    y_ref, h_ref = reference_scan(x, delta, A, B, C, D, z)
    assert res.y.dtype == jnp.float32 and res.state.dtype == jnp.float32
    np.testing.assert_allclose(res.y, y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(res.state, h_ref, rtol=2e-5, atol=2e-5)


def test_scan_bfloat16_inputs_keep_float32_state(key):
    x, delta, A, B, C, _ = make_inputs(key, dtype=jnp.bfloat16)
    for mode in ("sequential", "associative"):
        res = seq.selective_scan(x, delta, A, B, C, mode=mode)
        assert res.y.dtype == jnp.bfloat16 and res.state.dtype == jnp.float32
        y_ref, h_ref = reference_scan(x, delta, A, B, C)
        np.testing.assert_allclose(np.asarray(res.y, np.float64), y_ref, rtol=3e-2, atol=3e-2)
        np.testing.assert_allclose(res.state, h_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_scan_initial_state_continues_a_split_sequence(key):
    x, delta, A, B, C, _ = make_inputs(key, length=10)
    full = seq.selective_scan_sequential(x, delta, A, B, C)
    first = seq.selective_scan_sequential(x[:, :4], delta[:, :4], A, B[:, :4], C[:, :4])
    for fn in (seq.selective_scan_sequential, seq.selective_scan_associative,
               lambda *a, **k: seq.selective_scan_sequential(*a, **k, chunk=4)):
        rest = fn(x[:, 4:], delta[:, 4:], A, B[:, 4:], C[:, 4:], h0=first.state)
        np.testing.assert_allclose(rest.y, full.y[:, 4:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,chunk", [("sequential", 4),
                                        pytest.param("sequential", 16, marks=pytest.mark.slow),
                                        pytest.param("associative", 16,
                                                     marks=pytest.mark.slow)])
def test_scan_gradient_matches_finite_differences(key, mode, chunk):
    """chunk 4 of 6 steps: two rematerialised chunks, the second padded."""
    x, delta, A, B, C, z = make_inputs(key, b=1, length=6, d=3, n=2)
    args64 = [np.asarray(v, np.float64) for v in (x, delta, A, B, C, z)]
    w = np.asarray(jax.random.normal(jax.random.fold_in(key, 1), x.shape), np.float64)

    def loss(x, delta, A, B, C, z):
        return jnp.sum(seq.selective_scan(x, delta, A, B, C, None, z, mode=mode,
                                          chunk=chunk).y * w)

    grads = jax.grad(loss, argnums=(0, 1, 2, 3, 4))(*[jnp.asarray(a, jnp.float32)
                                                      for a in args64])
    eps = 1e-6
    for i, g in enumerate(grads):
        flat = args64[i].ravel()
        for j in range(0, flat.size, max(1, flat.size // 5)):
            up, dn = [a.copy() for a in args64], [a.copy() for a in args64]
            up[i].ravel()[j] += eps
            dn[i].ravel()[j] -= eps
            fd = (np.sum(reference_scan(*up[:5], None, up[5])[0] * w)
                  - np.sum(reference_scan(*dn[:5], None, dn[5])[0] * w)) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g).ravel()[j], fd, rtol=1e-3, atol=1e-4)


def ssd_inputs(key, b=2, length=13, h=4, p=3, g=2, n=5, dtype=jnp.float32):
    ks = jax.random.split(key, 5)
    x = jax.random.normal(ks[0], (b, length, h, p))
    dt = jax.nn.softplus(jax.random.normal(ks[1], (b, length, h)) - 1.0)
    A = -jnp.exp(jax.random.normal(ks[2], (h,)) * 0.5)
    B = jax.random.normal(ks[3], (b, length, g, n))
    C = jax.random.normal(ks[4], (b, length, g, n))
    return tuple(v.astype(dtype) for v in (x, dt, A, B, C))


def ssd_reference(x, dt, A, B, C):
    """SSD as a Mamba-1 scan over H*P channels (A and dt shared within a head, B and C
    within a group), in float64."""
    x, dt, A, B, C = (np.asarray(v, np.float64) for v in (x, dt, A, B, C))
    b, length, h, p = x.shape
    g, n = B.shape[2:]
    rep = h // g
    ys, hs = [], []
    for head in range(h):
        grp = head // rep
        xa = x[:, :, head]
        de = np.repeat(dt[:, :, head, None], p, axis=2)
        Am = np.full((p, n), A[head])
        y, hh = reference_scan(xa, de, Am, B[:, :, grp], C[:, :, grp])
        ys.append(y)
        hs.append(hh)
    return np.stack(ys, 2), np.stack(hs, 1)


# the default run's SSD check against a float64 recurrence is jitted, in test_seq_mamba2.py
# (chunk 3 of 7 steps, padded); these eager cases (22 s under load for chunk 4) run slow
@pytest.mark.parametrize("chunk", [pytest.param(1, marks=pytest.mark.slow),
                                   pytest.param(4, marks=pytest.mark.slow),  # 13 = 3*4+1
                                   pytest.param(5, marks=pytest.mark.slow),
                                   pytest.param(13, marks=pytest.mark.slow),
                                   pytest.param(16, marks=pytest.mark.slow)])
def test_ssd_matches_reference_for_chunk_sizes(key, chunk):
    x, dt, A, B, C = ssd_inputs(key)
    res = seq.ssd_chunked(x, dt, A, B, C, chunk=chunk)
    y_ref, h_ref = ssd_reference(x, dt, A, B, C)
    np.testing.assert_allclose(res.y, y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(res.state, h_ref, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_ssd_bfloat16_and_gradient(key):
    x, dt, A, B, C = ssd_inputs(key, dtype=jnp.bfloat16)
    res = seq.ssd_chunked(x, dt, A, B, C, chunk=4)
    assert res.y.dtype == jnp.bfloat16 and res.state.dtype == jnp.float32
    y_ref, _ = ssd_reference(x, dt, A, B, C)
    np.testing.assert_allclose(np.asarray(res.y, np.float64), y_ref, rtol=3e-2, atol=5e-2)
    # gradients of SSD equal those of the sequential scan on the same problem
    x, dt, A, B, C = ssd_inputs(key, b=1, length=7, h=2, p=2, g=1, n=3)

    def via_ssd(x, dt, A, B, C):
        return jnp.sum(jnp.sin(seq.ssd_chunked(x, dt, A, B, C, chunk=3).y))

    def via_scan(x, dt, A, B, C):
        b, length, h, p = x.shape
        de = jnp.repeat(dt[..., None], p, -1).reshape(b, length, h * p)
        Am = jnp.repeat(A, p)[:, None] * jnp.ones((1, B.shape[-1]))
        y = seq.selective_scan_sequential(x.reshape(b, length, h * p), de, Am, B[:, :, 0],
                                          C[:, :, 0]).y
        return jnp.sum(jnp.sin(y))

    g1 = jax.grad(via_ssd, argnums=(0, 1, 2, 3, 4))(x, dt, A, B, C)
    g2 = jax.grad(via_scan, argnums=(0, 1, 2, 3, 4))(x, dt, A, B, C)
    for a, b_ in zip(g1, g2, strict=True):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-5)


def test_segsum_is_stable_and_exact(key):
    x = jax.random.normal(key, (6,))
    s = np.asarray(seq.segsum(x))
    xs = np.asarray(x, np.float64)
    for i in range(6):
        for j in range(6):
            if i >= j:
                assert s[i, j] == pytest.approx(xs[j + 1:i + 1].sum(), abs=1e-5)
            else:
                assert s[i, j] == -np.inf
    # long decays: exp(segsum) stays in [0, 1], no NaN (cumsum differences would overflow)
    big = -50.0 * jnp.ones((64,), jnp.float32)
    e = jnp.exp(seq.segsum(big))
    assert np.all(np.isfinite(e)) and float(e.max()) == 1.0


def test_jit_vmap_invariance_and_one_trace(key):
    x, delta, A, B, C, z = make_inputs(key)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(x, delta, B, C):
        return seq.selective_scan(x, delta, A, B, C, z=z, mode="associative").y

    eager = seq.selective_scan(x, delta, A, B, C, z=z, mode="associative").y
    np.testing.assert_allclose(f(x, delta, B, C), eager, rtol=1e-6, atol=1e-6)
    f(x + 1.0, delta, B, C)  # new values, same shapes: no retrace
    v = jax.vmap(lambda a, d_, b_, c_: seq.selective_scan_sequential(
        a[None], d_[None], A, b_[None], c_[None]).y[0])(x, delta, B, C)
    np.testing.assert_allclose(v, seq.selective_scan_sequential(x, delta, A, B, C).y,
                               rtol=1e-5, atol=1e-5)


def test_bad_shapes_name_the_argument(key):
    x, delta, A, B, C, _ = make_inputs(key)
    with pytest.raises(ValueError, match="`delta`"):
        seq.selective_scan(x, delta[:, :3], A, B, C)
    with pytest.raises(ValueError, match="`A`"):
        seq.selective_scan(x, delta, A[:2], B, C)
    with pytest.raises(ValueError, match="`mode`"):
        seq.selective_scan(x, delta, A, B, C, mode="parallel")
    with pytest.raises(ValueError, match="`chunk`"):
        seq.selective_scan(x, delta, A, B, C, chunk=0)
    xs, dt, As, Bs, Cs = ssd_inputs(key)
    with pytest.raises(ValueError, match="`chunk`"):
        seq.ssd_chunked(xs, dt, As, Bs, Cs, chunk=0)
    with pytest.raises(ValueError, match="groups"):
        seq.ssd_chunked(xs, dt, As, Bs[:, :, :1].repeat(3, 2), Cs[:, :, :1].repeat(3, 2))
