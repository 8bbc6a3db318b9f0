"""Tests of jaxkit.crosscoder.fit / encode / decode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import crosscoder as cc

from jaxkit import crosscoder as C
from jaxkit import training
from jaxkit.distributed import make_mesh

G, D = 32, 16


def synthetic(seed: int, window: int, n: int = 4096, p: float = 0.06):
    """``n`` examples ``x = sum_g a_g f_g`` of ``G`` unit-norm ground-truth atoms
    ``f_g (window, d)``, each active with probability ``p`` with magnitude U(0.5, 1.5)."""
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(G, window, D))
    true /= np.linalg.norm(true.reshape(G, -1), axis=1)[:, None, None]
    act = (rng.random((n, G)) < p) * rng.uniform(0.5, 1.5, (n, G))
    return np.einsum("ng,gwd->nwd", act, true).astype(np.float32), true


@pytest.fixture(scope="module")
def fit_w1():
    x, true = synthetic(0, 1)
    return C.fit(jax.random.key(0), x[:, 0], n_latents=48, k=3, steps=400, batch_size=128,
                 lr=5e-3, log_every=100), x, true


@pytest.fixture(scope="module")
def small():
    x = np.random.default_rng(5).normal(size=(64, 3, 4)).astype(np.float32)
    kw = dict(n_latents=8, k=2, window=2, steps=12, batch_size=16, lr=1e-2, log_every=6)
    return x, kw, C.fit(jax.random.key(1), x, **kw)


def test_recovers_ground_truth_sae(fit_w1):
    res, x, true = fit_w1
    assert res.params.W_dec.shape == (48, 1, D) and res.params.W_enc.shape == (1, D, 48)
    m = float(cc.mmcs(res.params.W_dec, true))
    assert m > 0.9, m
    assert float(cc.recovery(res.params.W_dec, true, 0.8)) > 0.8
    h = res.history
    assert set(h) >= {"step", "loss", "fvu", "l0", "dead_fraction", "aux_loss"}
    np.testing.assert_array_equal(h["step"], [100, 200, 300, 400])
    assert h["fvu"][-1] < 0.5 * h["fvu"][0] and h["fvu"][-1] < 0.3
    assert np.all(h["l0"] <= 3.0 + 1e-6)
    # encode/decode in data units, (B, d) accepted for window 1
    z = C.encode(res.params, x[:512, 0], k=3)
    assert z.shape == (512, 48) and float(cc.l0(z)) <= 3
    xh = C.decode(res.params, z)
    assert xh.shape == (512, 1, D)
    assert float(cc.fvu(x[:512], xh)) < 0.3


def test_recovers_ground_truth_temporal_window2():
    x, true = synthetic(1, 2)  # (N, T=2, d): one window per sequence
    res = C.fit(jax.random.key(2), x, n_latents=48, k=3, window=2, steps=400, batch_size=128,
                lr=5e-3, log_every=200)
    assert res.params.W_dec.shape == (48, 2, D)
    m = float(cc.mmcs(res.params.W_dec, true))
    assert m > 0.9, m
    assert float(cc.mcc_hungarian(res.params.W_dec, true)) > 0.8


@pytest.mark.slow
@pytest.mark.parametrize("activation,kw", [
    ("batch_topk", dict(k=3)),
    ("relu", dict(k=None, sparsity_coef=3e-2)),
    ("jumprelu", dict(k=None, sparsity_coef=0.1, bandwidth=0.05, init_threshold=0.1)),
])
def test_recovers_ground_truth_other_activations(activation, kw):
    x, true = synthetic(0, 1)
    res = C.fit(jax.random.key(0), x[:, 0], n_latents=48, activation=activation, steps=1000,
                batch_size=128, lr=5e-3, log_every=250, **kw)
    m = float(cc.mmcs(res.params.W_dec, true))
    assert m > 0.9, m


def test_make_windows_matches_numpy():
    seqs = jnp.arange(2 * 5 * 3, dtype=jnp.float32).reshape(2, 5, 3)
    idx = jnp.arange(8)  # P = 4 start positions per sequence
    got = np.asarray(C.make_windows(seqs, idx, 2))
    ref = np.stack([np.asarray(seqs)[i // 4, i % 4: i % 4 + 2] for i in range(8)])
    np.testing.assert_array_equal(got, ref)


def test_mesh_matches_no_mesh(small):
    x, kw, ref = small
    res = C.fit(jax.random.key(1), x, mesh=make_mesh({"data": 8}), **kw)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                 ref.params, res.params)
    np.testing.assert_allclose(ref.history["loss"], res.history["loss"], rtol=1e-5)
    assert res.params.W_dec.shape == (8, 2, 4)
    assert res.config["window"] == 2 and res.config["mesh"] == {"data": 8}


def test_scale_folded_into_params(small):
    # normalize=True trains on data / RMS: fitting 10 * x gives the same model in 10x units
    x, kw, ref = small
    res = C.fit(jax.random.key(1), 10 * x, **kw)
    assert res.config["scale"] == pytest.approx(10 * ref.config["scale"], rel=1e-5)
    w = jnp.asarray(x[:, :2])
    z, z10 = C.encode(ref.params, w, k=2), C.encode(res.params, 10 * w, k=2)
    np.testing.assert_allclose(z10, 10 * z, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(C.decode(res.params, z10), 10 * C.decode(ref.params, z),
                               rtol=1e-3, atol=1e-3)


def test_sliding_windows_and_batch_topk_threshold():
    x, _ = synthetic(3, 1, n=512)
    res = C.fit(jax.random.key(0), x[:, 0], n_latents=24, k=3, window=3,
                activation="batch_topk", steps=60, batch_size=32, lr=5e-3, log_every=30)
    assert res.params.W_dec.shape == (24, 3, D)
    assert res.threshold > 0 and np.all(np.isfinite(res.history["loss"]))
    w = C.make_windows(jnp.asarray(x[None, :, 0]), jnp.arange(256), 3)
    z = C.encode(res.params, w, activation="threshold", theta=res.threshold)
    zb = C.encode(res.params, w, activation="batch_topk", k=3)
    # the inference threshold gives about the training sparsity
    assert 1.0 < float(cc.l0(z)) < 6.0, float(cc.l0(z))
    assert float(cc.l0(zb)) == pytest.approx(3.0)


def test_bad_inputs():
    x = np.random.default_rng(0).normal(size=(16, 3, 4)).astype(np.float32)
    kw = dict(n_latents=8, k=2, steps=2, batch_size=4, lr=1e-3)
    bad = x.copy()
    bad[2, 1, 0] = np.nan
    with pytest.raises(ValueError, match="`data`.*NaN"):
        C.fit(jax.random.key(0), bad, **kw)
    bad[2, 1, 0] = np.inf
    with pytest.raises(ValueError, match="`data`.*inf"):
        C.fit(jax.random.key(0), bad, **kw)
    with pytest.raises(ValueError, match="`data`.*shape"):
        C.fit(jax.random.key(0), x[None], **kw)
    with pytest.raises(ValueError, match="`data`.*shape"):
        C.fit(jax.random.key(0), x[:, 0, 0], **kw)
    with pytest.raises(ValueError, match="`window`"):
        C.fit(jax.random.key(0), x, window=4, **kw)
    with pytest.raises(ValueError, match="`window`"):
        C.fit(jax.random.key(0), x[:3, 0], window=4, **kw)
    with pytest.raises(ValueError, match="`k` must be <= n_latents"):
        C.fit(jax.random.key(0), x, **{**kw, "k": 9})
    with pytest.raises(ValueError, match="`k_aux` must be <= n_latents"):
        C.fit(jax.random.key(0), x, k_aux=9, **kw)
    with pytest.raises(ValueError, match="`resume=True` needs a `checkpoint_dir`"):
        C.fit(jax.random.key(0), x, resume=True, **kw)
    with pytest.raises(ValueError, match="`activation`"):
        C.fit(jax.random.key(0), x, activation="gelu", **kw)
    with pytest.raises(ValueError, match="`batch_size`"):
        C.fit(jax.random.key(0), x, mesh=make_mesh({"data": 8}), **{**kw, "batch_size": 12})
    with pytest.raises(ValueError, match="`steps`"):
        C.fit(jax.random.key(0), x, **{**kw, "steps": 0})
    p = cc.init(jax.random.key(0), 4, 8, site=(1,))
    with pytest.raises(ValueError, match="`x`"):
        C.encode(p, np.zeros((2, 5)), k=2)
    with pytest.raises(ValueError, match="`k`"):
        C.encode(p, np.zeros((2, 4)), k=9)
    assert C.encode(p, np.zeros((2, 4)), k=8).shape == (2, 8)  # k == n_latents, as in fit


def test_k_equal_to_n_latents_trains(small):
    x, kw, _ = small
    res = C.fit(jax.random.key(1), x, **{**kw, "k": kw["n_latents"]})
    assert np.all(np.isfinite(res.history["loss"])) and res.config["k_aux"] == kw["n_latents"]


def test_divergence_guard():
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    poison = optax.scale_by_schedule(lambda c: jnp.where(c == 4, jnp.nan, 1.0))
    with pytest.raises(C.TrainingDiverged, match="diverged at step 5"):
        C.fit(jax.random.key(0), x, n_latents=8, k=2, steps=10, batch_size=8, log_every=5,
              optimizer=optax.chain(optax.adam(1e-2), poison))


def test_kill_then_resume_equals_uninterrupted(small, tmp_path, monkeypatch):
    """A fit stopped by a kill between checkpoints (step 9 of 12, last checkpoint at 8)
    and started again with resume=True ends with the uninterrupted run's parameters and
    history (the points before the checkpoint travel in it; chunk means included: they
    are carried in the checkpointed state)."""
    x, kw, ref = small
    kw = {**kw, "log_every": 4}
    ref = C.fit(jax.random.key(1), x, **kw)
    ck = tmp_path / "ck"
    real = training.step_key

    def killed_at_9(key, i):
        if i == 9:
            raise KeyboardInterrupt  # what a SIGKILL leaves: checkpoints up to step 8
        return real(key, i)

    monkeypatch.setattr(training, "step_key", killed_at_9)
    with pytest.raises(KeyboardInterrupt):
        C.fit(jax.random.key(1), x, checkpoint_dir=ck, checkpoint_every=4, **kw)
    monkeypatch.setattr(training, "step_key", real)
    assert sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) == [4, 8]
    with pytest.raises(ValueError, match="already holds checkpoints"):
        C.fit(jax.random.key(1), x, checkpoint_dir=ck, **kw)
    with pytest.raises(ValueError, match=r"incompatible run \(lr: checkpoint 0.01"):
        C.fit(jax.random.key(1), x, checkpoint_dir=ck, resume=True, **{**kw, "lr": 0.02})
    res = C.fit(jax.random.key(1), x, checkpoint_dir=ck, checkpoint_every=4, resume=True, **kw)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
                 ref.params, res.params)
    np.testing.assert_array_equal(res.history["step"], [4, 8, 12])  # restored ones too
    np.testing.assert_allclose(res.history["loss"], ref.history["loss"], rtol=1e-6)
    assert res.threshold == ref.threshold
