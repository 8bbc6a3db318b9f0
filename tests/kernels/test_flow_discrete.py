"""Discrete flow matching: schedulers, mixture-path marginals, the loss against a
hand-computed cross-entropy, the CTMC Euler sampler (perfect denoiser -> x1 exactly, a
uniform-posterior denoiser -> uniform tokens), jit/vmap, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import flow_discrete as fd

V, L, B = 5, 6, 4


@pytest.fixture(scope="module")
def x1():
    return jax.random.randint(jax.random.key(0), (B, L), 0, V)


@pytest.mark.parametrize("scheduler,exponent", [("linear", 1.0), ("polynomial", 2.0),
                                                ("polynomial", 3.0)])
def test_schedulers(scheduler, exponent):
    t = jnp.linspace(0.0, 1.0, 7)
    k = fd.kappa(t, scheduler=scheduler, exponent=exponent)
    np.testing.assert_allclose(k, np.asarray(t) ** exponent, rtol=1e-12)
    _, dk = jax.jvp(lambda s: fd.kappa(s, scheduler=scheduler, exponent=exponent), (t,),
                    (jnp.ones_like(t),))
    np.testing.assert_allclose(fd.kappa_dot(t, scheduler=scheduler, exponent=exponent), dk,
                               rtol=1e-12)


@pytest.mark.parametrize("source", ["mask", "uniform"])
def test_mixture_path_marginals(source):
    n, length = 400, 50
    x1 = jax.random.randint(jax.random.key(1), (n, length), 0, V)
    x0 = (fd.mask_source(x1.shape, V) if source == "mask"
          else fd.uniform_source(jax.random.key(2), x1.shape, V))
    t = jnp.full((n,), 0.3)
    xt, from_x1 = jax.jit(lambda k: fd.mixture_path(k, x0, x1, t, scheduler="polynomial"))(
        jax.random.key(3))
    np.testing.assert_array_equal(np.where(from_x1, x1, x0), xt)
    # fraction of positions taken from x1 ~ kappa(0.3) = 0.09 (n * length Bernoullis)
    se = np.sqrt(0.09 * 0.91 / (n * length))
    assert abs(float(jnp.mean(from_x1)) - 0.09) < 5 * se
    if source == "mask":
        assert float(jnp.mean(xt == x1)) == pytest.approx(float(jnp.mean(from_x1)))
    else:  # x_t == x1 also when x0 happens to equal x1: kappa + (1 - kappa) / V
        assert float(jnp.mean(xt == x1)) == pytest.approx(0.09 + 0.91 / V, abs=5 * 0.005)
    # per-sequence t: t = 0 keeps x0, t = 1 gives x1
    t01 = jnp.array([0.0, 1.0] * (n // 2))
    xt, _ = fd.mixture_path(jax.random.key(4), x0, x1, t01)
    np.testing.assert_array_equal(xt[0::2], x0[0::2])
    np.testing.assert_array_equal(xt[1::2], x1[1::2])


def _ref_ce(logits, x1, w):
    lp = jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1)
    ce = -np.take_along_axis(np.asarray(lp), np.asarray(x1)[..., None], -1)[..., 0]
    return np.sum(ce * w) / max(np.sum(w), 1.0)


def test_dfm_loss_matches_reference(x1):
    key = jax.random.key(5)
    seen = {}
    table = jax.random.normal(jax.random.key(6), (V + 1, V))

    def logits_fn(params, t, xt):
        seen["t"], seen["xt"] = t, xt
        return params[xt] * (1 + t[:, None, None])

    for positions in ("corrupted", "all"):
        loss = fd.dfm_loss(logits_fn, table, key, x1, vocab_size=V, positions=positions)
        logits = logits_fn(table, seen["t"], seen["xt"])
        masked = np.asarray(seen["xt"]) == V
        w = masked if positions == "corrupted" else np.ones_like(masked)
        assert float(loss) == pytest.approx(_ref_ce(logits, x1, w), rel=1e-5)
    # the uniform source, with a padding mask
    valid = jnp.arange(L)[None, :] < jnp.array([6, 3, 2, 5])[:, None]
    loss = fd.dfm_loss(logits_fn, table, key, x1, vocab_size=V, source="uniform",
                       positions="all", valid=valid)
    logits = logits_fn(table, seen["t"], seen["xt"])
    assert float(loss) == pytest.approx(_ref_ce(logits, x1, np.asarray(valid)), rel=1e-5)
    # a perfect denoiser has ~zero loss; jit invariance and gradient
    perfect = lambda p, t, xt: 30.0 * jax.nn.one_hot(x1, V)  # noqa: E731
    assert float(fd.dfm_loss(perfect, None, key, x1, vocab_size=V)) < 1e-10
    f = lambda p: fd.dfm_loss(logits_fn, p, key, x1, vocab_size=V)  # noqa: E731
    np.testing.assert_allclose(jax.jit(f)(table), f(table), rtol=1e-6)
    assert np.all(np.isfinite(np.asarray(jax.grad(f)(table))))


@pytest.mark.parametrize("source", ["mask", "uniform"])
def test_ctmc_sampler_perfect_denoiser_returns_x1(x1, source):
    def logits_fn(t, x):
        return 40.0 * jax.nn.one_hot(x1, V)

    x0 = (fd.mask_source(x1.shape, V) if source == "mask"
          else fd.uniform_source(jax.random.key(2), x1.shape, V))
    mask_token = V if source == "mask" else None
    sample = jax.jit(lambda k: fd.ctmc_euler_sample(k, logits_fn, x0, steps=7,
                                                    scheduler="polynomial",
                                                    mask_token=mask_token))
    np.testing.assert_array_equal(sample(jax.random.key(8)), x1)
    if source == "uniform":
        return
    # padding positions never change
    valid = jnp.arange(L)[None, :] < 3
    out = fd.ctmc_euler_sample(jax.random.key(8), logits_fn, x0, steps=4, valid=valid)
    np.testing.assert_array_equal(out[:, :3], x1[:, :3])
    np.testing.assert_array_equal(out[:, 3:], x0[:, 3:])


def test_ctmc_sampler_distribution_and_partial_time():
    # a denoiser with a fixed posterior p gives i.i.d. samples from p at t = 1
    p = jnp.array([0.5, 0.2, 0.2, 0.1, 0.0])
    logits = jnp.log(jnp.maximum(p, 1e-30))
    x0 = fd.mask_source((200, 20), V)
    out = fd.ctmc_euler_sample(jax.random.key(0), lambda t, x: jnp.broadcast_to(
        logits, x.shape + (V,)), x0, steps=5, mask_token=V)
    freq = np.bincount(np.asarray(out).ravel(), minlength=V + 1) / out.size
    np.testing.assert_allclose(freq[:V], p, atol=0.02)
    assert freq[V] == 0  # no mask left
    # stopping at t1 = 0.5 on the linear schedule: about half the positions unmasked
    half = fd.ctmc_euler_sample(jax.random.key(1), lambda t, x: jnp.broadcast_to(
        logits, x.shape + (V,)), x0, steps=50, t1=0.5, mask_token=V)
    assert float(jnp.mean(half != V)) == pytest.approx(0.5, abs=0.05)


def test_ctmc_sampler_vmap_matches_loop(x1):
    def logits_fn(t, x):
        return jnp.where(x[..., None] == V, 0.0, 0.0) + jax.nn.one_hot(x1, V)

    x0 = fd.mask_source(x1.shape, V)
    keys = jax.random.split(jax.random.key(3), 3)
    fn = lambda k: fd.ctmc_euler_sample(k, logits_fn, x0, steps=3)  # noqa: E731
    batched = jax.jit(jax.vmap(fn))(keys)
    for i in range(3):
        np.testing.assert_array_equal(batched[i], jax.jit(fn)(keys[i]))


def test_bad_input(x1):
    key = jax.random.key(0)
    lf = lambda p, t, x: jnp.zeros(x.shape + (V,))  # noqa: E731
    with pytest.raises(ValueError, match="x1"):
        fd.dfm_loss(lf, None, key, x1.astype(jnp.float32), vocab_size=V)
    with pytest.raises(ValueError, match="x1"):
        fd.dfm_loss(lf, None, key, x1[0], vocab_size=V)
    with pytest.raises(ValueError, match="x1"):
        fd.dfm_loss(lf, None, key, x1.at[0, 0].set(V), vocab_size=V)
    with pytest.raises(ValueError, match="logits_fn"):
        fd.dfm_loss(lambda p, t, x: jnp.zeros(x.shape + (V + 1,)), None, key, x1, vocab_size=V)
    with pytest.raises(ValueError, match="source"):
        fd.dfm_loss(lf, None, key, x1, vocab_size=V, source="absorbing")
    with pytest.raises(ValueError, match="scheduler"):
        fd.kappa(0.5, scheduler="cosine")
    with pytest.raises(ValueError, match="`t`"):
        fd.mixture_path(key, x1, x1, jnp.zeros(3))
    with pytest.raises(ValueError, match="x0"):
        fd.mixture_path(key, x1[:, :2], x1, 0.5)
    slf = lambda t, x: jnp.zeros(x.shape + (V,))  # noqa: E731
    with pytest.raises(ValueError, match="steps"):
        fd.ctmc_euler_sample(key, slf, x1, steps=0)
    with pytest.raises(ValueError, match="t0"):
        fd.ctmc_euler_sample(key, slf, x1, steps=2, t0=1.0, t1=0.0)
    with pytest.raises(ValueError, match="logits_fn"):
        fd.ctmc_euler_sample(key, lambda t, x: jnp.zeros((3, V)), x1, steps=2)
