"""benchmarks/bench_crosscoder.py: the float64 NumPy port of the peers' equations
(``peers/torch_temporal.py``, SAELens/sparsify TopK) against jaxkit's crosscoder, the
like-for-like step-1 metrics, the kernel's sparse TopK step against its dense one, and a
quick end-to-end run without the peers (no virtual environment is created here)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import crosscoder as cc


@pytest.fixture(scope="module")
def bc(load_benchmark):
    return load_benchmark("crosscoder")


def _params(site, d=6, F=24, seed=0, dtype=jnp.float64):
    x = np.random.default_rng(seed).standard_normal((40, *site, d))
    x += np.linspace(-1, 1, d)  # a non-zero mean, so b_dec (geometric median) is not ~0
    p = cc.init(jax.random.key(seed), d, F, site=site, sample=jnp.asarray(x), dtype=dtype)
    # a non-zero encoder bias exercises b_enc everywhere
    p = p._replace(b_enc=jnp.asarray(np.random.default_rng(seed + 1).normal(0, 0.1, F), dtype))
    return p, x


def _np(p):
    return {n: np.asarray(getattr(p, n)) for n in ("W_enc", "b_enc", "W_dec", "b_dec")}


@pytest.mark.parametrize("site", [(), (3,)])
@pytest.mark.parametrize("activation", ["topk", "batch_topk"])
def test_numpy_forward_matches_jaxkit(bc, site, activation):
    p, x = _params(site)
    k = 4
    q = _np(p)
    pre, (rows, cols), vals, x_hat = bc.numpy_forward(q["W_enc"], q["b_enc"], q["W_dec"],
                                                      q["b_dec"], x, k,
                                                      batch=activation == "batch_topk")
    pre_j, z_j, x_hat_j = cc.forward(p, jnp.asarray(x), activation=activation, k=k)
    np.testing.assert_allclose(pre, np.asarray(pre_j), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x_hat, np.asarray(x_hat_j), rtol=1e-10, atol=1e-12)
    assert x_hat.shape == x.shape and rows.size == k * x.shape[0] == vals.size
    z = np.zeros_like(pre)
    z[rows, cols] = vals
    np.testing.assert_allclose(z, np.asarray(z_j), atol=1e-12)
    # the like-for-like FVU equals jaxkit's training loss (AuxK off, no penalty)
    loss, _ = cc.loss_fn(p, jnp.asarray(x), activation=activation, k=k)
    np.testing.assert_allclose(bc.recon_metrics(x, x_hat)["fvu"], float(loss), rtol=1e-10)


def test_recon_metrics_hand_computed(bc):
    x = np.array([[1.0, 2.0], [3.0, 6.0]])
    x_hat = np.array([[1.0, 1.0], [2.0, 6.0]])
    m = bc.recon_metrics(x, x_hat)
    # squared errors 0, 1, 1, 0; deviations from the batch mean (2, 4): 1, 4, 1, 4
    assert m["mse"] == pytest.approx(2 / 4)
    assert m["mse_sum_d"] == pytest.approx(2 / 2)
    assert m["fvu"] == pytest.approx(2 / 10)
    assert bc.recon_metrics(x, x)["fvu"] == 0.0
    assert bc.rel(1.1, 1.0) == pytest.approx(0.1)


@pytest.mark.parametrize("site", [(), (3,)])
def test_numpy_train_step_matches_jaxkit_step(bc, site):
    """The NumPy port of torch_temporal's step (analytic FVU gradient, parallel-gradient
    removal, first Adam step, unit-norm atoms) equals jaxkit's make_train_step."""
    p, x = _params(site, seed=3)
    k, lr = 5, 1e-2
    init_state, step = cc.make_train_step(activation="topk", k=k, optimizer=optax.adam(lr))
    state1, info = jax.jit(step)(jax.random.key(0), init_state(p), jnp.asarray(x))
    new, loss = bc.numpy_train_step(_np(p), x, k, lr)
    assert loss == pytest.approx(float(info.fvu), rel=1e-10)
    for n in ("W_enc", "b_enc", "W_dec", "b_dec"):
        got = np.asarray(getattr(state1.params, n))
        assert new[n].shape == got.shape
        # Adam's first step moves every entry by ~lr; agreement far below that
        np.testing.assert_allclose(new[n], got, atol=1e-9 * lr / 1e-2, rtol=0)
        assert bc.update_rel_diff(new[n], got, _np(p)[n]) < 1e-6
    norms = np.linalg.norm(new["W_dec"].reshape(new["W_dec"].shape[0], -1), axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)


@pytest.mark.parametrize("site", [(), (2,)])
def test_sparse_topk_step_matches_dense_float64(site):
    # the benchmark times both formulations of the kernel's TopK step: in float64 they
    # take the same step to rounding
    p, x = _params(site, seed=5)
    opt = optax.adam(1e-2)
    out = []
    for decoder in ("sparse", "dense"):
        init_state, step = cc.make_train_step(activation="topk", k=3, optimizer=opt,
                                              decoder=decoder)
        out.append(jax.jit(step)(jax.random.key(0), init_state(p), jnp.asarray(x)))
    (t1, ti), (s1, si) = out
    assert float(ti.fvu) == pytest.approx(float(si.fvu), rel=1e-10)
    for n in ("W_enc", "b_enc", "W_dec", "b_dec"):
        np.testing.assert_allclose(getattr(t1.params, n), getattr(s1.params, n),
                                   rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(t1.aux.steps_since_fired),
                                  np.asarray(s1.aux.steps_since_fired))


def test_model_flops_and_synthetic_batch(bc):
    B, D, F, k = 8, 10, 100, 4
    assert bc.model_flops(B, D, F, k, "dense") == 3 * (2 * B * D * F + 2 * B * F * D)
    assert bc.model_flops(B, D, F, k, "sparse") == 3 * (2 * B * D * F + 2 * B * k * D)
    with pytest.raises(ValueError, match="decoder"):
        bc.model_flops(B, D, F, k, "csr")
    x = bc.synthetic_batch(16, (3,), 5, seed=1)
    assert x.shape == (16, 3, 5) and x.dtype == np.float32 and np.isfinite(x).all()
    np.testing.assert_array_equal(x, bc.synthetic_batch(16, (3,), 5, seed=1))


def test_bad_arguments(bc):
    with pytest.raises(SystemExit):
        bc.main(["--only", "nope", "--no-peers"])
    with pytest.raises(SystemExit):
        bc.main(["--k", "600", "--latents", "512", "--no-peers"])
    with pytest.raises(SystemExit):  # this process's JAX has started: no ISA limit now
        jnp.ones(1).block_until_ready()
        bc.main(["--isa", "avx2", "--no-peers", "--quick"])


@pytest.mark.slow  # the whole benchmark script end to end; its parts are tested above
def test_quick_run_without_peers(bc, tmp_path):
    out = tmp_path / "crosscoder.json"
    assert bc.main(["--quick", "--no-peers", "--runs", "2", "--warmup", "1", "--profile",
                    "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert len(d["rows"]) == 3 and d["table_markdown"]
    assert d["environment"]["threads"] == 2
    m = d["environment"]["machine"]  # the machine record: ISA, cores, roofline
    assert m["isa"]["level"] and m["cores"] >= 1 and m["roofline_gflops"]["float32"] > 0
    assert "roofline jaxkit / peer" in d["table_markdown"]
    parts = d["results"]["topk"]["implementations"]["profile"]["parts"]
    assert len(parts) == 5 and parts[-1]["median_s"] > 0
    assert sum(p["increment_s"] for p in parts) == pytest.approx(parts[-1]["median_s"])
    for case, tokens in (("topk", 256), ("batchtopk", 256), ("temporal", 255)):
        res = d["results"][case]
        cfg = res["config"]
        assert (cfg["d"], cfg["F"], cfg["k"], cfg["tokens"]) == (64, 512, 32, tokens)
        impls = ({"jaxkit"} if case == "batchtopk" else {"jaxkit", "jaxkit_dense"}) | {
            "encoder_product"} | ({"profile"} if case != "batchtopk" else set())
        assert set(res["implementations"]) == impls
        enc = res["implementations"]["encoder_product"]
        assert enc["step_over_encoder"] > 0 and enc["record"]["model_flops"] > 0
        for name, impl in res["implementations"].items():
            if name == "profile":
                continue
            assert impl["tokens_per_s"] > 0 and impl["record"]["median_s"] > 0
            assert impl["record"]["items"] == tokens and impl["model_gflops_per_s"] > 0
        assert res["implementations"]["jaxkit"]["record"]["compile_s"] > 0
        if case != "batchtopk":
            dense = res["implementations"]["jaxkit_dense"]
            assert max(dense["params_after_step1_rel_to_sparse_update"].values()) < 1e-3
            assert res["implementations"]["jaxkit"]["decoder"] == "sparse"
        s1 = res["step1"]
        assert s1["jaxkit"]["fvu_rel_to_reference"] < 1e-4
        assert s1["jaxkit"]["loss_rel_to_reference"] < 1e-4
        assert math.isfinite(s1["reference_float64"]["fvu"])
        assert "peers skipped" in res["peer_note"]
        assert "vs_fastest_peer" not in res
