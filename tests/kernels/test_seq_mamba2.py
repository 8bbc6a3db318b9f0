"""The Mamba-2 mixer: the chunked SSD form against the step-by-step recurrence of the same
block (values and gradients, chunk sizes that do and do not divide the length), the
sequential SSD against a float64 recurrence, causality, bfloat16 inputs, one trace."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import seq

D, L = 8, 10


@pytest.fixture(scope="module")
def block():
    @jax.jit
    def make(k):
        p = seq.init_mamba2(k, D, d_state=4, head_dim=4)
        # larger weights and steps than at initialisation, so that the state path (not
        # only the D skip) carries the output and a wrong recurrence shows
        p = p._replace(w_in=p.w_in * 40, w_out=p.w_out * 10, b_dt=p.b_dt + 3.0)
        return p, jax.random.normal(jax.random.fold_in(k, 1), (2, L, D))

    return make(jax.random.key(0))


@pytest.fixture(scope="module")
def forms():
    """Jitted chunked (chunk 4: 10 = 2 * 4 + 2, padded) and sequential forms, values
    and input gradients."""
    def f(p, x, mode, chunk):
        return seq.mamba2_mixer(p, x, mode=mode, chunk=chunk)

    def vg(mode, chunk):
        return jax.jit(jax.value_and_grad(
            lambda p, x: jnp.sum(jnp.sin(f(p, x, mode, chunk))), argnums=(0, 1)))

    return {"chunked": vg("chunked", 4), "sequential": vg("sequential", 4)}


def test_chunked_block_equals_its_sequential_recurrence(block, forms):
    p, x = block
    (v1, (gp1, gx1)), (v2, (gp2, gx2)) = forms["chunked"](p, x), forms["sequential"](p, x)
    assert abs(float(v1)) > 1e-2
    np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx1, gx2, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(gp1), jax.tree.leaves(gp2), strict=True):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_output_is_causal_and_state_path_matters(block):
    p, x = block
    f = jax.jit(lambda p, x: seq.mamba2_mixer(p, x, chunk=4))
    y = f(p, x)
    y2 = f(p, x.at[:, 6:].set(0.0))
    np.testing.assert_allclose(y2[:, :6], y[:, :6], rtol=1e-5, atol=1e-6)
    # without the recurrence (D skip only) the output differs: the state path is used
    no_state = p._replace(b_dt=p.b_dt - 30.0)  # dt ~ 0: the state stays ~ 0
    assert float(jnp.abs(y - f(no_state, x)).max()) > 1e-3


def test_sequential_ssd_matches_float64_recurrence():
    rng = np.random.default_rng(0)
    b, n_t, h, pd, n = 2, 7, 2, 3, 4
    x, B, C = (rng.normal(size=s).astype(np.float32) for s in
               ((b, n_t, h, pd), (b, n_t, 1, n), (b, n_t, 1, n)))
    dt = np.log1p(np.exp(rng.normal(size=(b, n_t, h)))).astype(np.float32)
    A = -np.exp(rng.normal(size=h)).astype(np.float32)
    Dk = np.array([0.5, 2.0], np.float32)
    both = jax.jit(lambda *a: (seq.ssd_sequential(*a, D=Dk), seq.ssd_chunked(*a, chunk=3,
                                                                                D=Dk)))
    r, c = both(x, dt, A, B, C)
    x6, dt6, A6, B6, C6 = (np.asarray(v, np.float64) for v in (x, dt, A, B, C))
    H = np.zeros((b, h, pd, n))
    for t in range(n_t):
        H = np.exp(dt6[:, t] * A6)[..., None, None] * H + (
            dt6[:, t, :, None] * x6[:, t])[..., None] * B6[:, t, 0][:, None, None]
        y = np.einsum("bhpn,bn->bhp", H, C6[:, t, 0]) + np.asarray(Dk)[:, None] * x6[:, t]
        np.testing.assert_allclose(r.y[:, t], y, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(r.state, H, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(c.y, r.y, rtol=2e-5, atol=2e-5)


def test_bfloat16_inputs_one_trace_and_bad_input(block):
    p, x = block

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(x):
        return seq.mamba2_mixer(p, x, chunk=4)

    y32 = f(x)
    f(x + 1.0)  # new values, same shape: no retrace
    yb = jax.jit(f.__wrapped__.__wrapped__)(x.astype(jnp.bfloat16))
    assert yb.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(yb, np.float32), y32, rtol=0.1, atol=0.1)
    with pytest.raises(ValueError, match="`mode`"):
        seq.mamba2_mixer(p, x, mode="parallel")
    with pytest.raises(ValueError, match="`x`"):
        seq.mamba2_mixer(p, x[..., :3])
    with pytest.raises(ValueError, match="`head_dim`"):
        seq.init_mamba2(jax.random.key(0), 6, head_dim=5)
