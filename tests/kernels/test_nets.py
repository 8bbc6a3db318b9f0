"""Velocity / denoiser networks: shapes, dtypes, time embedding values, jit/vmap
invariance of the batched form, the null class for classifier-free guidance, padding
masks in the transformer, and gradients through the flow-matching losses."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import flow, flow_discrete, nets

V, L = 5, 6


@eqx.filter_jit
def one(model, t, x, *extra):
    """A single-sample call, jitted once per model (eager equinox calls are slow)."""
    return model(t, x, *extra)


@pytest.fixture(scope="module")
def mlp():
    return nets.MLP(3, width=16, depth=2, time_dim=8, num_classes=4, key=jax.random.key(0))


@pytest.fixture(scope="module")
def tr():
    return nets.SeqTransformer(V + 1, L, dim=16, depth=1, heads=2, time_dim=8, out_size=V,
                               key=jax.random.key(1))


def test_sinusoidal_embedding():
    e = nets.sinusoidal_embedding(0.25, 8, scale=1.0)
    w = 10_000.0 ** (-np.arange(4) / 4)
    np.testing.assert_allclose(e, np.concatenate([np.sin(0.25 * w), np.cos(0.25 * w)]),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="dim"):
        nets.sinusoidal_embedding(0.1, 7)


def test_mlp_shapes_batching_and_null_class(mlp):
    x = jax.random.normal(jax.random.key(2), (5, 3), jnp.float32)
    t = jnp.linspace(0.1, 0.9, 5, dtype=jnp.float32)
    y = jnp.array([0, 1, 2, 3, -1])
    out = eqx.filter_jit(nets.apply_batch)(mlp, t, x, y)
    assert out.shape == (5, 3) and out.dtype == jnp.float32
    # float32 weights by default (also under x64); the output follows the input dtype
    assert all(a.dtype == jnp.float32 for a in jax.tree_util.tree_leaves(eqx.filter(
        mlp, eqx.is_inexact_array)))
    assert one(mlp, 0.5, x[0].astype(jnp.float64)).dtype == jnp.float64
    loop = np.stack([one(mlp, t[i], x[i], y[i]) for i in range(5)])
    np.testing.assert_allclose(out, loop, rtol=1e-5, atol=1e-6)
    # negative labels and y=None both select the null class; labels matter
    np.testing.assert_allclose(one(mlp, t[0], x[0], y[4]), mlp(t[0], x[0]), rtol=1e-6)
    assert not np.allclose(loop[0], one(mlp, t[0], x[0], y[1]))
    # scalar t is broadcast over the batch
    np.testing.assert_allclose(nets.apply_batch(mlp, 0.3, x, y),
                               nets.apply_batch(mlp, jnp.full(5, 0.3), x, y), rtol=1e-6)
    # unconditional MLP on matrix-shaped samples
    m2 = nets.MLP((2, 3), width=8, depth=1, key=jax.random.key(3))
    assert nets.apply_batch(m2, 0.5, jnp.ones((4, 2, 3))).shape == (4, 2, 3)
    with pytest.raises(ValueError, match="`x`"):
        m2(0.5, jnp.ones(6))


def test_mlp_with_losses_sampler_and_cfg(mlp):
    key = jax.random.key(4)
    x0 = jax.random.normal(key, (6, 3))
    x1 = x0 + 2.0
    y = jnp.arange(6) % 4

    @eqx.filter_jit
    def loss_and_grad(model):
        return eqx.filter_value_and_grad(
            lambda m: flow.cfm_batch_loss(nets.apply_batch, m, key, x0, x1, y=y,
                                          p_uncond=0.2))(model)

    val, g = loss_and_grad(mlp)
    assert np.isfinite(float(val))
    norms = [float(jnp.linalg.norm(a)) for a in jax.tree_util.tree_leaves(g)]
    assert all(np.isfinite(norms)) and max(norms) > 0
    # a few Adam steps on a fixed batch lower the loss (the net can fit)
    opt = optax.adam(3e-3)
    params, static = eqx.partition(mlp, eqx.is_array)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        v, g = loss_and_grad(eqx.combine(params, static))
        upd, state = opt.update(eqx.filter(g, eqx.is_array), state)
        return optax.apply_updates(params, upd), state, v

    first = None
    for _ in range(30):
        params, state, v = step(params, state)
        first = float(v) if first is None else first
    assert float(v) < first
    # guided sampling through integrate
    model = eqx.combine(params, static)
    vel = lambda t, x: flow.cfg_velocity(nets.apply_batch, model, t, x, y, 1.5)  # noqa: E731
    out = flow.integrate(vel, x0, method="heun", steps=4)
    assert out.shape == x0.shape and np.all(np.isfinite(np.asarray(out)))


def test_transformer_shapes_mask_and_dfm(tr):
    x = jax.random.randint(jax.random.key(5), (3, L), 0, V + 1)
    t = jnp.array([0.1, 0.5, 0.9])
    logits = eqx.filter_jit(nets.apply_batch)(tr, t, x)
    assert logits.shape == (3, L, V) and logits.dtype == jnp.float32
    full = jnp.ones(L, bool)
    np.testing.assert_allclose(logits[1], one(tr, t[1], x[1], full), rtol=1e-5, atol=1e-5)
    # padding: tokens at masked positions do not change the logits of valid positions
    valid = jnp.arange(L) < 4
    x5 = x[0].at[5].set((x[0, 5] + 1) % V)
    a, b = one(tr, 0.3, x[0], valid), one(tr, 0.3, x5, valid)
    np.testing.assert_allclose(a[:4], b[:4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(one(tr, 0.3, x[0], full), one(tr, 0.3, x5, full))
    # time matters
    assert not np.allclose(one(tr, 0.1, x[0], full), one(tr, 0.9, x[0], full))
    # gradient through the discrete flow-matching loss
    x1 = jax.random.randint(jax.random.key(6), (3, L), 0, V)
    g = eqx.filter_jit(eqx.filter_grad(
        lambda m: flow_discrete.dfm_loss(nets.apply_batch, m, jax.random.key(7), x1,
                                         vocab_size=V)))(tr)
    assert float(jnp.linalg.norm(g.head.weight)) > 0
    with pytest.raises(ValueError, match="heads"):
        nets.SeqTransformer(V, L, dim=10, heads=3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`x`"):
        tr(0.1, jnp.zeros(L + 1, jnp.int32))


@pytest.mark.slow
def test_end_to_end_ot_cfm_learns_gaussian_shift():
    """Train an MLP with OT-CFM from N(0, I) to N((2, -1), 0.25 I) and sample (slow)."""
    from jaxkit.kernels import flow_ot
    model = nets.MLP(2, width=64, depth=2, key=jax.random.key(0))
    params, static = eqx.partition(model, eqx.is_array)
    opt = optax.adam(3e-3)
    state = opt.init(params)
    mu = jnp.array([2.0, -1.0])

    @jax.jit
    def step(params, state, key):
        k0, k1, kl = jax.random.split(key, 3)
        x0 = jax.random.normal(k0, (64, 2))
        x1 = mu + 0.5 * jax.random.normal(k1, (64, 2))
        loss = lambda p: flow_ot.ot_cfm_loss(nets.apply_batch, eqx.combine(p, static), kl,  # noqa: E731
                                             x0, x1)
        v, g = jax.value_and_grad(loss)(params)
        upd, state = opt.update(g, state)
        return optax.apply_updates(params, upd), state, v

    for k in jax.random.split(jax.random.key(1), 600):
        params, state, _ = step(params, state, k)
    m = eqx.combine(params, static)
    x = flow.integrate(lambda t, x: nets.apply_batch(m, t, x),
                       jax.random.normal(jax.random.key(2), (2000, 2)), method="rk4", steps=20)
    np.testing.assert_allclose(jnp.mean(x, 0), mu, atol=0.1)
    np.testing.assert_allclose(jnp.std(x, 0), 0.5, atol=0.1)


def test_mlp_time_scale_controls_adaptive_cost():
    # high-frequency time features (DDPM scale 1000) make a random field oscillate in t:
    # Tsit5 needs many more evaluations than with t features of scale 1
    x0 = jax.random.normal(jax.random.key(1), (16, 2))
    nfe = {}
    for s in (1000.0, 1.0):
        m = nets.MLP(2, width=32, depth=2, time_scale=s, key=jax.random.key(0))
        assert m.time_scale == s
        _, st = flow.integrate_with_stats(lambda t, x, m=m: nets.apply_batch(m, t, x), x0,
                                          method="tsit5", rtol=1e-5, atol=1e-5)
        nfe[s] = int(st["nfe"])
    assert nfe[1000.0] > 5 * nfe[1.0]
