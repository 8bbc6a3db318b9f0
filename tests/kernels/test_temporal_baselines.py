"""The temporal baselines' forward passes and losses on hand cases with known answers,
plus jit/vmap invariance and one trace per shape."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels.crosscoder import temporal_baselines as tb

# jitted once per shape (eager op-by-op dispatch compiles every primitive separately)
TFA = jax.jit(tb.tfa_forward, static_argnames=("k", "lam"))
TFA_LOSS = jax.jit(tb.tfa_loss, static_argnames=("k", "lam"))
MATRYOSHKA = jax.jit(tb.matryoshka_loss, static_argnames=("k", "prefixes"))
TSAE = jax.jit(tb.tsae_loss, static_argnames=("k", "n_high", "alpha", "tau", "term"))


def RBG(seed: int):
    return jax.random.key(seed, impl="rbg")  # compiles much faster than threefry


def _identity_sae(d: int, site=(1,)) -> cc.Params:
    """Tied identity dictionary: latent f reads and writes basis vector f."""
    eye = jnp.eye(d)
    W_enc = eye.reshape(*(1,) * len(site), d, d) if site else eye
    return cc.Params(W_enc=W_enc, b_enc=jnp.zeros(d), W_dec=eye.reshape(d, *site, d),
                     b_dec=jnp.zeros((*site, d)), log_threshold=jnp.zeros(d))


def test_matryoshka_prefix_losses_by_hand():
    # x = (3, 1, 0) and (0, 2, 1): TopK(2) keeps the two largest coordinates; the prefix
    # m=1 reconstructs only coordinate 0, m=3 (= F) everything kept.
    p = _identity_sae(3)
    x = jnp.asarray([[[3.0, 1.0, 0.0]], [[0.0, 2.0, 1.0]]])
    loss, out = MATRYOSHKA(p, x, k=2, prefixes=(1, 3))
    den = float(jnp.sum((x - x.mean(0)) ** 2))
    fvu_1 = (1.0 + 4.0 + 1.0) / den  # prefix 1 misses 1 (row 0), 2 and 1 (row 1)
    fvu_3 = 0.0
    assert float(out.fvu) == pytest.approx(fvu_3, abs=1e-6)
    assert float(loss) == pytest.approx((fvu_1 + fvu_3) / 2, rel=1e-5)
    assert float(out.l0) == 2.0
    with pytest.raises(ValueError, match="prefixes"):
        tb.matryoshka_loss(p, x, k=2, prefixes=(2, 2, 3))
    with pytest.raises(ValueError, match="prefixes"):
        tb.matryoshka_loss(p, x, k=2, prefixes=(1, 2))  # must end at F


def test_layer_views_and_mlc_forward():
    # two layers, d=2: an MLC atom spanning both layers reconstructs both views at once.
    hidden = jnp.asarray([[[1.0, 0.0]], [[0.0, 2.0]]])  # (L=2, B=1, d=2)
    views = tb.layer_views(hidden)
    assert views.shape == (1, 2, 2)
    np.testing.assert_allclose(views[0], [[1.0, 0.0], [0.0, 2.0]])
    atom = jnp.asarray([[1.0, 0.0], [0.0, 2.0]]) / math.sqrt(5.0)
    p = cc.Params(W_enc=atom[..., None], b_enc=jnp.zeros(1), W_dec=atom[None],
                  b_dec=jnp.zeros((2, 2)), log_threshold=jnp.zeros(1))
    _, z, xh = cc.forward(p, views, k=1)
    assert float(z[0, 0]) == pytest.approx(math.sqrt(5.0), rel=1e-6)
    np.testing.assert_allclose(xh, views, atol=1e-6)


def test_contrastive_and_smoothness_closed_forms():
    tau = 0.5
    h = jnp.eye(2)  # two pairs with orthogonal codes, each its own positive
    want = math.log1p(math.exp(-1 / tau))  # -log(e^{1/tau} / (e^{1/tau} + e^0))
    assert float(tb.contrastive_loss(h, h, tau)) == pytest.approx(want, rel=1e-5)
    swapped = h[::-1]  # positives now orthogonal, negatives aligned: the loss grows
    assert float(tb.contrastive_loss(h, swapped, tau)) == pytest.approx(
        math.log1p(math.exp(1 / tau)), rel=1e-5)
    assert float(tb.smoothness_loss(h, h)) == 0.0
    assert float(tb.smoothness_loss(h, swapped)) == pytest.approx(1.0)


def test_tsae_loss_by_hand():
    p = _identity_sae(2)
    x = jnp.asarray([[[2.0, 0.0], [2.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])  # (B=2, 2, d)
    loss, out = TSAE(p, x, k=1, n_high=2, alpha=1.0, tau=0.5, term="contrastive")
    assert float(out.fvu) == pytest.approx(0.0, abs=1e-6)
    assert float(loss) == pytest.approx(math.log1p(math.exp(-2.0)), rel=1e-5)
    loss_s, _ = TSAE(p, x, k=1, n_high=2, alpha=1.0, term="smooth")
    assert float(loss_s) == pytest.approx(0.0, abs=1e-6)  # identical pair codes
    with pytest.raises(ValueError, match="term"):
        tb.tsae_loss(p, x, k=1, n_high=1, term="nope")
    with pytest.raises(ValueError, match="n_high"):
        tb.tsae_loss(p, x, k=1, n_high=3)


def _tfa_hand(**kw) -> tb.TFAParams:
    eye = jnp.eye(2)
    base = dict(E=eye, D=eye, b=jnp.zeros(2), W_q=jnp.zeros((2, 2)), W_k=jnp.zeros((2, 2)),
                W_v=eye, W_o=eye)
    base.update(kw)
    return tb.TFAParams(**base)


def test_tfa_predicts_a_repeated_token_by_hand():
    # x_0 = x_1 = e_0. Position 0 has no context: prediction 0, novel code e_0. Position 1
    # attends uniformly to c_0 = 0 and c_1 = z_in[0] = e_0: z_p = e_0 / 2, rescaled by
    # a = 2 onto u, so z_pred = e_0 and nothing is left for the novel codes.
    p = _tfa_hand()
    x = jnp.asarray([[[1.0, 0.0], [1.0, 0.0]]])
    o = TFA(p, x, k=1)
    np.testing.assert_allclose(o.z_pred[0], [[0.0, 0.0], [1.0, 0.0]], atol=1e-5)
    np.testing.assert_allclose(o.z_novel[0], [[1.0, 0.0], [0.0, 0.0]], atol=1e-5)
    np.testing.assert_allclose(o.x_hat, x, atol=1e-5)
    loss, _ = TFA_LOSS(p, x[:, :1].repeat(3, 0) * jnp.arange(1.0, 4.0)[:, None, None],
                          k=1)
    assert float(loss) == pytest.approx(0.0, abs=1e-8)  # single tokens: exact TopK SAE


def test_tfa_without_values_is_a_tied_topk_sae():
    p = _tfa_hand(W_v=jnp.zeros((2, 2)), b=jnp.asarray([0.5, -0.5]))
    x = jnp.asarray([[[3.0, 1.0], [0.0, 2.0], [1.0, 1.0]]])
    o = TFA(p, x, k=1)
    np.testing.assert_allclose(o.z_pred, 0.0)
    u = x - p.b
    sae = jnp.where(u == u.max(-1, keepdims=True), jax.nn.relu(u), 0.0)
    np.testing.assert_allclose(o.z_novel, sae, atol=1e-6)
    np.testing.assert_allclose(o.x_hat, sae + p.b, atol=1e-6)


def test_tfa_prediction_is_causal():
    p = tb.tfa_init(RBG(0), 4, 8)
    x = jax.random.normal(RBG(1), (2, 5, 4))
    o = TFA(p, x, k=2)
    x2 = x.at[:, 3:].set(7.0)  # changing later tokens leaves earlier outputs alone
    o2 = TFA(p, x2, k=2)
    np.testing.assert_allclose(o.x_hat[:, :3], o2.x_hat[:, :3], atol=1e-5)
    np.testing.assert_allclose(o.z_pred[:, 0], 0.0, atol=1e-6)  # no context at t=0
    n = jax.jit(tb.tfa_normalize)(p._replace(D=3.0 * p.D))
    np.testing.assert_allclose(np.linalg.norm(n.D, axis=-1), 1.0, atol=1e-5)


def test_baselines_jit_vmap_one_trace_and_gradients():
    key = RBG(2)
    p = cc.init(key, 4, 8, site=(1,))
    pt = tb.tfa_init(key, 4, 8)
    x = jax.random.normal(RBG(3), (3, 6, 2, 4))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def all_losses(p, pt, x):
        return (tb.matryoshka_loss(p, x[:, :1], k=2, prefixes=(2, 8))[0],
                tb.tsae_loss(p, x, k=2, n_high=4)[0], tb.tfa_loss(pt, x, k=2)[0])

    batched = jax.vmap(all_losses, in_axes=(None, None, 0))(p, pt, x)
    for i in range(2):
        one = all_losses(p, pt, x[i] + 0.0 * i)  # same shapes: no retrace
        for a, b in zip(one, batched, strict=True):
            assert float(a) == pytest.approx(float(b[i]), rel=1e-4, abs=1e-6)
    g = jax.jit(jax.grad(lambda pt: tb.tfa_loss(pt, x[0], k=2)[0]))(pt)
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in g)
    assert float(jnp.abs(g.W_v).sum()) > 0  # the prediction path is trained
