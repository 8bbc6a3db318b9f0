"""SAE parity with SAELens and EleutherAI sparsify (issue 30): the float BatchTopK ``k``,
``k`` equal to the number of latents, ``apply_b_dec_to_input``, sparsify's AuxK
normalisation and thresholds <= 0.

The closed-form cases are ported from SAELens' ``tests/saes/test_batchtopk_sae.py``
(``test_BatchTopK_with_same_number_of_top_features_per_batch`` and the float-``k`` fix of
SAELens #547) and from the formulas of sparsify's ``SparseCoder.forward``; the last test
(``slow``) runs the peers themselves (``benchmarks/.peer-venv-crosscoder``: sae-lens
6.54.12, eai-sparsify 1.3.3) on the same weights and compares their numbers.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import crosscoder as cc

ROOT = Path(__file__).resolve().parents[2]
PEER_PY = ROOT / "benchmarks" / ".peer-venv-crosscoder" / "bin" / "python"
BW = cc.DEFAULT_BANDWIDTH

X_SAELENS = jnp.array([[1.0, -2.0, 3.0, -4.0], [-5.0, 6.0, -7.0, 8.0]])


def _act(pre, activation, k=None, theta=None, log_threshold=None):
    lt = jnp.zeros(pre.shape[-1]) if log_threshold is None else log_threshold
    return cc.apply_activation(pre, lt, activation, k, theta, BW)


def test_batchtopk_saelens_cases_int_and_float_k():
    # SAELens: k=2, batch 2 -> the top 4 of relu(x) = [8, 6, 3, 1]
    z, min_kept = _act(X_SAELENS, "batch_topk", k=2)
    np.testing.assert_array_equal(z, [[1, 0, 3, 0], [0, 6, 0, 8]])
    assert float(min_kept) == 1.0
    # float k (SAELens #547): int(1.5 * 2) = 3 kept
    z, min_kept = _act(X_SAELENS, "batch_topk", k=1.5)
    np.testing.assert_array_equal(z, [[0, 0, 3, 0], [0, 6, 0, 8]])
    assert float(min_kept) == 3.0
    # int(0.75 * 2) = 1: rounded down, as SAELens' int(k * num_samples)
    z, _ = _act(X_SAELENS, "batch_topk", k=0.75)
    np.testing.assert_array_equal(z, [[0, 0, 0, 0], [0, 0, 0, 8]])
    # a float k equal to an int gives the int result
    np.testing.assert_array_equal(_act(X_SAELENS, "batch_topk", k=2.0)[0],
                                  _act(X_SAELENS, "batch_topk", k=2)[0])
    assert cc.batch_count(2, 3, 10) == 6 and cc.batch_count(2.5, 3, 10) == 7
    assert cc.batch_count(4.0, 3, 4) == 12
    with pytest.raises(ValueError, match="at least 1"):
        cc.batch_count(0.4, 2, 4)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="`k`"):
            cc.check_batch_k(bad)
    with pytest.raises(ValueError, match="n_latents"):
        cc.check_batch_k(4.5, 4)
    with pytest.raises(ValueError, match="Python int"):
        cc.check_k(1.5, 4)  # TopK keeps an int k per row


@pytest.fixture(scope="module")
def tiny():
    key = jax.random.key(3)
    x = jax.random.normal(key, (16, 6), jnp.float32) + 0.3
    p = cc.init(jax.random.key(4), 6, 12, sample=x)
    p = p._replace(b_enc=0.1 * jax.random.normal(jax.random.key(5), (12,), jnp.float32),
                   b_dec=p.b_dec + 0.2)
    return p, x


def test_float_k_batchtopk_through_encode_and_the_train_step(tiny):
    p, x = tiny
    z = cc.encode(p, x, activation="batch_topk", k=2.5)
    assert int(jnp.sum(z != 0)) <= int(2.5 * 16) and int(jnp.sum(z != 0)) >= 30
    init_state, step = cc.make_train_step(activation="batch_topk", k=2.5,
                                          optimizer=optax.adam(1e-3))
    state, info = jax.jit(step)(jax.random.key(0), init_state(p), x)
    assert bool(info.finite) and float(info.l0) <= 2.5
    assert float(state.aux.threshold) > 0  # the EMA sample of the smallest kept value
    with pytest.raises(ValueError, match="n_latents"):
        init_state(p._replace(W_enc=p.W_enc[:, :2], W_dec=p.W_dec[:2], b_enc=p.b_enc[:2],
                              log_threshold=p.log_threshold[:2]))


def test_k_equal_to_n_latents_keeps_every_positive_entry(tiny):
    p, x = tiny
    F = p.W_enc.shape[-1]
    pre = cc.pre_activation(p, x)
    np.testing.assert_allclose(cc.encode(p, x, activation="topk", k=F), jnp.maximum(pre, 0))
    np.testing.assert_allclose(cc.encode(p, x, activation="batch_topk", k=F),
                               jnp.maximum(pre, 0))
    # the sparse TopK step (k = F > the unrolled slots) matches the dense step
    outs = []
    for decoder in ("sparse", "dense"):
        init_state, step = cc.make_train_step(activation="topk", k=F, decoder=decoder,
                                              optimizer=optax.adam(1e-2),
                                              blocks=cc.Blocks(unroll_k=4, slots=16,
                                                               enc_rows=8))
        s, info = step(jax.random.key(0), init_state(p), x)
        outs.append((s.params, info))
    (ps, i_s), (pd, i_d) = outs
    assert float(i_s.fvu) == pytest.approx(float(i_d.fvu), rel=1e-5)
    for a, b in zip(ps, pd, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5)


def _dense_reference_loss(p, x, k, dead, k_aux, aux_norm, apply_b_dec):
    """The equations in float64 NumPy-style jnp (sparsify's forward for
    aux_norm='sparsify' and apply_b_dec=True)."""
    xf = x.astype(jnp.float64)
    W, b, Wd, bd = (a.astype(jnp.float64) for a in (p.W_enc, p.b_enc, p.W_dec, p.b_dec))
    xin = xf - bd if apply_b_dec else xf
    pre = xin @ W + b
    v, i = jax.lax.top_k(pre, k)
    z = jnp.zeros_like(pre).at[jnp.arange(len(x))[:, None], i].set(jnp.maximum(v, 0))
    x_hat = z @ Wd + bd
    tv = jnp.sum((xf - xf.mean(0)) ** 2)
    e = xf - x_hat
    fvu = jnp.sum(e ** 2) / tv
    va, ia = jax.lax.top_k(jnp.where(dead, pre, -jnp.inf), k_aux)
    va = jnp.where(jnp.isfinite(va), jnp.maximum(va, 0), 0)
    za = jnp.zeros_like(pre).at[jnp.arange(len(x))[:, None], ia].set(va)
    e_hat = za @ Wd
    n_dead = jnp.sum(dead)
    if aux_norm == "sparsify":
        aux = min(float(n_dead) / k_aux, 1.0) * jnp.sum((e_hat - e) ** 2) / tv
    else:
        aux = jnp.sum((e - e_hat) ** 2) / jnp.sum((e - e.mean(0)) ** 2)
    return fvu, aux


@pytest.mark.parametrize("aux_norm", ["gao", "sparsify"])
@pytest.mark.parametrize("apply_b_dec", [False, True])
def test_auxk_norms_and_b_dec_input_sparse_equals_dense_equals_reference(tiny, aux_norm,
                                                                         apply_b_dec):
    p, x = tiny
    F, k, k_aux = 12, 3, 3  # k_aux = d // 2, sparsify's choice
    dead = jnp.arange(F) % 6 == 0  # 2 dead latents < k_aux: sparsify scales by 2/3
    ref_fvu, ref_aux = _dense_reference_loss(p, x, k, dead, k_aux, aux_norm, apply_b_dec)
    kw = dict(k=k, dead=dead, sparsity_coef=0.0, sparsity="l1", tanh_c=4.0, k_aux=k_aux,
              aux_coef=1.0, aux_norm=aux_norm, apply_b_dec_to_input=apply_b_dec)
    sparse = lambda p_: cc.sparse_topk_loss(p_, x, **kw)  # noqa: E731
    dense = lambda p_: cc.loss_fn(  # noqa: E731
        p_, x, activation="topk", k=k, dead=dead, k_aux=k_aux, aux_coef=1.0,
        aux_norm=aux_norm, apply_b_dec_to_input=apply_b_dec)
    (ls, (fs, as_, _, _)), gs = jax.value_and_grad(sparse, has_aux=True)(p)
    (ld, (fd, ad, _, _, _)), gd = jax.value_and_grad(dense, has_aux=True)(p)
    assert float(fs) == pytest.approx(float(ref_fvu), rel=1e-5)
    assert float(as_) == pytest.approx(float(ref_aux), rel=1e-5)
    assert float(ad) == pytest.approx(float(ref_aux), rel=1e-5)
    assert float(ls) == pytest.approx(float(ld), rel=1e-5)
    for a, b in zip(gs, gd, strict=True):  # b_dec's gradient through the encoder too
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    if apply_b_dec:  # encoding x - b_dec is the default with b_enc - b_dec W_enc
        p2 = p._replace(b_enc=p.b_enc - p.b_dec @ p.W_enc)
        np.testing.assert_allclose(cc.encode(p, x, k=k, apply_b_dec_to_input=True),
                                   cc.encode(p2, x, k=k), atol=1e-5)
        assert float(jnp.abs(gs.b_dec - jax.grad(lambda q: sparse(
            q._replace(b_dec=jax.lax.stop_gradient(q.b_dec)))[0])(p).b_dec).max()) > 0


def test_auxk_norm_checks_and_no_dead_latents(tiny):
    p, x = tiny
    pre = cc.pre_activation(p, x)
    Wf = cc.flat_decoder(p.W_dec)
    none = jnp.zeros(12, bool)
    assert float(cc.auxk_loss(pre, x, Wf, none, 3, aux_norm="sparsify",
                              total_variance=jnp.ones(()))) == 0.0
    with pytest.raises(ValueError, match="aux_norm"):
        cc.auxk_loss(pre, x, Wf, none, 3, aux_norm="openai")
    with pytest.raises(ValueError, match="total_variance"):
        cc.auxk_loss(pre, x, Wf, none, 3, aux_norm="sparsify")
    with pytest.raises(ValueError, match="aux_norm"):
        cc.make_train_step(activation="topk", k=2, optimizer=optax.sgd(1.0), aux_norm="x")


def test_negative_thresholds_give_relu_codes_as_saelens():
    pre = jnp.array([[-1.0, -0.2, 0.0, 0.3, 2.0]])
    saelens = lambda t: np.maximum(pre, 0) * (pre > t)  # noqa: E731  JumpReLUSAE.encode
    for theta in (-0.5, -2.0, 0.0, 0.25):
        np.testing.assert_array_equal(_act(pre, "threshold", theta=theta)[0],
                                      saelens(theta))
        assert float(jnp.min(_act(pre, "threshold", theta=theta)[0])) >= 0
    lt = cc.log_threshold_from(jnp.array([-1.0, 0.0, 0.5, 0.5, 0.5]))
    assert np.isneginf(np.asarray(lt[:2])).all() and float(lt[2]) == pytest.approx(
        math.log(0.5))
    z = _act(pre, "jumprelu", log_threshold=lt)[0]
    np.testing.assert_array_equal(z, saelens(np.array([-1.0, 0.0, 0.5, 0.5, 0.5])))
    g = jax.grad(lambda l_: jnp.sum(cc.jumprelu(pre, l_, BW)))(lt)
    assert bool(jnp.all(jnp.isfinite(g)))  # no NaN from the -inf thresholds
    with pytest.raises(ValueError, match="init_threshold"):
        cc.init(jax.random.key(0), 4, 8, init_threshold=-0.1)  # trained thresholds are > 0


PEER_SCRIPT = r"""
import json, sys, os
os.environ["SPARSIFY_DISABLE_TRITON"] = "1"
import numpy as np, torch
from sae_lens.saes.batchtopk_sae import BatchTopK
from sparsify import SparseCoder, SparseCoderConfig
d = dict(np.load(sys.argv[1]))
t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)
out = {}
pre = t(d["pre"])
out["batchtopk"] = {str(k): BatchTopK(k)(pre).numpy().tolist() for k in (2, 1.5, 0.75, 2.5)}
W_enc = d["W_enc"]
D, F = W_enc.shape
sae = SparseCoder(D, SparseCoderConfig(num_latents=F, k=int(d["k"]), normalize_decoder=True),
                  device="cpu", dtype=torch.float32)
with torch.no_grad():
    sae.encoder.weight.copy_(t(W_enc.T)); sae.encoder.bias.copy_(t(d["b_enc"]))
    sae.W_dec.copy_(t(d["W_dec"])); sae.b_dec.copy_(t(d["b_dec"]))
fo = sae(t(d["x"]), dead_mask=torch.as_tensor(d["dead"]))
out["sparsify"] = dict(fvu=float(fo.fvu), auxk_loss=float(fo.auxk_loss),
                       sae_out=fo.sae_out.detach().numpy().tolist())
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.slow
def test_against_the_peers_in_their_venv(tiny, tmp_path):
    """SAELens' BatchTopK (int and float k) and sparsify's SparseCoder forward (FVU,
    AuxK with a dead mask, b_dec subtracted before the encoder) on the same weights."""
    if not PEER_PY.exists():
        pytest.skip("benchmarks/.peer-venv-crosscoder not built (python "
                    "benchmarks/bench_crosscoder.py builds it)")
    p, x = tiny
    pre = np.asarray(cc.pre_activation(p, x))
    dead = np.arange(12) % 6 == 0
    np.savez(tmp_path / "in.npz", pre=pre, x=np.asarray(x), W_enc=np.asarray(p.W_enc),
             b_enc=np.asarray(p.b_enc), W_dec=np.asarray(p.W_dec), b_dec=np.asarray(p.b_dec),
             dead=dead, k=np.int64(3))
    from jaxkit.bench import peer_env

    r = subprocess.run([str(PEER_PY), "-c", PEER_SCRIPT, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.json")], env=peer_env(), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    for k, ref in out["batchtopk"].items():
        kk = float(k) if "." in k else int(k)
        np.testing.assert_allclose(_act(jnp.asarray(pre), "batch_topk", k=kk)[0], ref,
                                   rtol=1e-6, atol=1e-6)
    # sparsify: k_aux = d // 2 = 3, 2 dead latents -> scale 2/3, normalised by Var(x)
    _, (fvu, aux, _, _) = cc.sparse_topk_loss(
        p, x, k=3, dead=jnp.asarray(dead), sparsity_coef=0.0, sparsity="l1", tanh_c=4.0,
        k_aux=3, aux_coef=1.0, aux_norm="sparsify", apply_b_dec_to_input=True)
    sp = out["sparsify"]
    assert float(fvu) == pytest.approx(sp["fvu"], rel=1e-5)
    assert float(aux) == pytest.approx(sp["auxk_loss"], rel=1e-5)
    _, _, x_hat = cc.forward(p, x, activation="topk", k=3, apply_b_dec_to_input=True)
    np.testing.assert_allclose(x_hat, sp["sae_out"], rtol=1e-5, atol=1e-5)
