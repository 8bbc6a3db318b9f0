"""The sparse TopK step's CPU layout: the two-stage top-k and the blocked transposition of
the encoder gradient give exactly what one ``lax.top_k`` and one ``.T`` give."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import crosscoder as cc
from jaxkit.kernels.crosscoder import sparse


def _rows(seed, shape, ties):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape).astype(np.float32)
    if ties:  # few distinct values: many ties, inside and across groups
        a = np.round(a * 2).astype(np.float32)
    return a


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("F,k,group", [(1024, 8, 32), (512, 4, 16), (4096, 32, 32)])
def test_two_stage_top_k_is_lax_top_k(F, k, group, ties):
    pre = _rows(F + k, (37, F), ties)
    pre[3, : F // 2] = -np.inf  # AuxK-style masked rows: -inf ties
    pre[4] = -np.inf
    pre[5, 7] = np.inf
    v0, i0 = jax.lax.top_k(jnp.asarray(pre), k)
    v1, i1 = jax.jit(sparse._top_k, static_argnums=(1, 2))(jnp.asarray(pre), k, group)
    np.testing.assert_array_equal(np.asarray(v1), np.asarray(v0))
    np.testing.assert_array_equal(np.asarray(i1), np.asarray(i0))


def test_two_stage_top_k_falls_back():
    pre = jnp.asarray(_rows(0, (5, 100), False))
    for k, group in ((3, 32), (10, 5), (2, None)):  # group not dividing F, too few groups
        v0, i0 = jax.lax.top_k(pre, k)
        v1, i1 = sparse._top_k(pre, k, group)
        np.testing.assert_array_equal(np.asarray(v1), np.asarray(v0))
        np.testing.assert_array_equal(np.asarray(i1), np.asarray(i0))


@pytest.mark.parametrize("n,block", [(300, 128), (256, 128), (7, 3), (5, None)])
def test_blocked_transpose(n, block):
    a = jnp.asarray(_rows(1, (n, 9), False))
    np.testing.assert_array_equal(np.asarray(jax.jit(sparse._transpose, static_argnums=1)(
        a, block)), np.asarray(a).T)


def test_sparse_step_cpu_layout_matches_one_block():
    # F large enough for the two-stage top-k (F // 32 >= 4 k), AuxK on: the CPU layout
    # (two-stage selection, blocked transpose) against one block everywhere
    d, F, k, B = 16, 1024, 8, 40
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(B, d)), jnp.float32)
    params = cc.init(jax.random.key(0), d, F, sample=x)
    kw = dict(activation="topk", k=k, optimizer=optax.adam(1e-2), k_aux=16, dead_steps=1)
    out = []
    for blocks in (cc.Blocks(slots=64, enc_rows=16),
                   cc.Blocks(slots=None, enc_rows=None)):
        init_state, step = cc.make_train_step(**kw, blocks=blocks)
        s = init_state(params)
        for _ in range(3):  # dead latents from step 2: the AuxK selection runs
            s, info = jax.jit(step)(jax.random.key(1), s, x)
        out.append((s, info))
    (a, ia), (b, ib) = out
    jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6),
                 a.params, b.params)
    assert float(ia.loss) == pytest.approx(float(ib.loss), rel=1e-6)
    assert float(ia.aux_loss) == pytest.approx(float(ib.aux_loss), rel=1e-5, abs=1e-7)
    x2 = x.reshape(B, -1)
    dead = jnp.arange(F) % 3 == 0
    ref, res = (cc.topk_encode(x2, params.W_enc, params.b_enc, dead, k, 16, blocks=blocks)
                for blocks in (cc.Blocks(enc_rows=16), cc.Blocks(enc_rows=None)))
    for j in (0, 2):  # blocked products may differ by rounding
        np.testing.assert_allclose(np.asarray(res[j]), np.asarray(ref[j]), rtol=1e-5,
                                   atol=1e-6)
        assert np.mean(np.asarray(res[j + 1]) == np.asarray(ref[j + 1])) > 0.99
