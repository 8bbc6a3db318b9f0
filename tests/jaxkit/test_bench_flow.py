"""benchmarks/bench_flow.py: the weight export to the torch worker (against a float64 NumPy
forward pass), NFE accounting, the data, and a quick end-to-end run without the peers
(no virtual environment is created here)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest


@pytest.fixture(scope="module")
def bf(load_benchmark):
    return load_benchmark("flow")


@pytest.fixture(scope="module")
def tiny(bf):
    """Two tiny nets (t only; t + 4 sinusoidal features) and a batch."""
    m0 = bf.make_net(jax.random.key(0), 3, width=8, depth=2, time_dim=0)
    m4 = bf.make_net(jax.random.key(1), 3, width=8, depth=2, time_dim=4)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    t = np.linspace(0.05, 0.95, 5).astype(np.float32)
    return m0, m4, x, t


def test_export_matches_numpy_forward_and_round_trips(bf, tiny):
    m0, m4, x, t = tiny
    for m, tol in ((m0, 1e-5), (m4, 1e-4)):
        state = bf.export_params(m)
        assert set(state) == {"net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias",
                              "net.4.weight", "net.4.bias", "time.freqs", "time.scale"}
        assert state["net.0.weight"].shape == (8, 3 + 1 + m.time_dim)  # torch (out, in)
        assert state["net.4.weight"].shape == (3, 8)
        assert all(v.dtype == np.float32 for v in state.values())
        want = bf.numpy_forward(state, t, x)  # float64, as the torch worker builds the net
        got = np.asarray(jax.vmap(m)(jnp.asarray(t), jnp.asarray(x)))
        np.testing.assert_allclose(got, want, atol=tol)
        # import into a differently initialised net of the same shape: same function
        other = bf.make_net(jax.random.key(9), 3, width=8, depth=2, time_dim=m.time_dim)
        back = bf.import_params(state, other)
        np.testing.assert_allclose(np.asarray(jax.vmap(back)(t, x)),
                                   np.asarray(jax.vmap(m)(t, x)), atol=1e-6)
        for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(m),
                        strict=True):
            np.testing.assert_array_equal(a, b)  # the very same weights
    freqs = bf.export_params(m4)["time.freqs"]
    np.testing.assert_allclose(freqs, [1.0, 1e-2], rtol=1e-6)  # 10000^(-k/2), k = 0, 1


def test_import_rejects_wrong_layout(bf, tiny):
    m0, m4, _, _ = tiny
    state = bf.export_params(m0)
    with pytest.raises(ValueError, match="net.0, net.2"):
        bf.import_params({k: v for k, v in state.items() if not k.startswith("net.4")}, m0)
    with pytest.raises(ValueError, match="weight shape"):
        bf.import_params(bf.export_params(m4), m0)  # 4 more time features


def test_fixed_sampler_matches_numpy_euler(bf, tiny):
    m0, _, x, _ = tiny
    state = bf.export_params(m0)
    steps = 6
    got = np.asarray(bf.fixed_solver("euler", steps)(bf.field(bf.apply_net, m0),
                                                     jnp.asarray(x)))
    y = x.astype(np.float64)
    for i in range(steps):
        y = y + bf.numpy_forward(state, np.full(len(y), i / steps), y) / steps
    np.testing.assert_allclose(got, y, atol=1e-5)


def test_nfe_accounting(bf, tiny):
    assert bf.nfe_fixed("euler", 100) == 100
    assert bf.nfe_fixed("rk4", 25) == 100 == bf.nfe_fixed("midpoint", 50)
    with pytest.raises(ValueError, match="method"):
        bf.nfe_fixed("tsit5", 10)
    with pytest.raises(ValueError, match="steps"):
        bf.nfe_fixed("euler", 0)
    m0, _, x, _ = tiny
    vel = bf.field(bf.apply_net, m0)
    x = jnp.asarray(x)
    # counted by the io_callback: equal to the fixed-step formula ...
    n, out = bf.count_nfe(bf.fixed_solver("rk4", 3), vel, x)
    assert n == 12
    np.testing.assert_allclose(out, bf.fixed_solver("rk4", 3)(vel, x), atol=1e-6)
    assert bf.count_nfe(bf.fixed_solver("euler", 7), vel, x)[0] == 7
    # ... and, for an adaptive FSAL solver, 6 evaluations per attempted step plus a few
    # at the start (diffrax's statistics give the attempted steps)
    sol = bf.jaxkit_adaptive_solver("tsit5")
    n, _ = bf.count_nfe(lambda v, y: sol(v, y)[0], vel, x)
    _, stats = jax.jit(lambda y: sol(vel, y))(x)
    steps = int(stats["num_steps"])
    assert steps >= 1 and 6 * steps + 1 <= n <= 6 * steps + 3 + 6 * int(
        stats["num_rejected_steps"])


def test_mixture_data_and_flops(bf):
    a = bf.mixture_data(4000, 2, seed=3)
    assert a.shape == (4000, 2) and a.dtype == np.float32
    np.testing.assert_array_equal(a, bf.mixture_data(4000, 2, seed=3))
    r = np.linalg.norm(a, axis=1)
    assert abs(np.median(r) - 4.0) < 0.2  # 8 Gaussians on the radius-4 circle
    b = bf.mixture_data(100, 64, seed=3)
    assert b.shape == (100, 64) and np.isfinite(b).all()
    # 2 FLOPs per multiply-add: (d+1+T) w + (L-1) w^2 + w d
    assert bf.mlp_flops(2, width=4, depth=2, time_dim=0) == 2 * (3 * 4 + 16 + 8)
    assert bf.mlp_flops(64) == 2 * (65 * 256 + 3 * 256 * 256 + 256 * 64)


def test_train_step_reduces_loss(bf):
    from jaxkit.kernels import flow

    m = bf.make_net(jax.random.key(2), 2, width=16, depth=2, time_dim=0)
    data = bf.mixture_data(512, 2, seed=0)
    init, step = bf.make_train_step(bf.apply_net, 64)
    step = jax.jit(step)
    x0 = np.random.default_rng(1).standard_normal(data.shape).astype(np.float32)

    @jax.jit
    def held_out(params):  # fixed t, x0, x1: a deterministic loss
        return flow.cfm_batch_loss(bf.batch_apply(bf.apply_net), params, jax.random.key(5),
                                   x0, data)

    state = init(m)
    before = float(held_out(state.params))
    for i in range(100):
        state, loss = step(state, jax.random.key(i), data)
        assert np.isfinite(float(loss))
    assert float(held_out(state.params)) < 0.8 * before


def test_scan_steps_equals_sequential_steps(bf):
    m = bf.make_net(jax.random.key(3), 2, width=8, depth=1, time_dim=0)
    data = bf.mixture_data(64, 2, seed=1)
    init, step = bf.make_train_step(bf.apply_net, 16)
    key = jax.random.key(7)
    state, losses = jax.jit(bf.scan_steps(step, 3))(init(m), key, data)
    seq, want = init(m), []
    for k in jax.random.split(key, 3):
        seq, loss = jax.jit(step)(seq, k, data)
        want.append(float(loss))
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(seq.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    from jaxkit import bench

    rec = bench.record_from_times("r", [0.2, 0.4, 0.6], items=4, flops=8.0)
    per = bf.per_step_record(rec, 4)
    assert per.median_s == pytest.approx(0.1) and per.items == 1 and per.flops == 2.0


def test_paired_steps_train_on_prefetched_pairs(bf):
    from jaxkit.pairing import paired_chunks

    x0, x1 = paired_chunks(bf.mixture_data(200, 3, seed=2), 16, 3, seed=5)(0)
    run = jax.jit(bf.make_paired_steps(bf.apply_net))
    init, _ = bf.make_train_step(bf.apply_net, 16)
    m = bf.make_net(jax.random.key(0), 3, width=8, depth=1, time_dim=0)
    state, losses = run(init(m), jax.random.key(1), x0, x1)
    assert losses.shape == (3,) and np.all(np.isfinite(np.asarray(losses)))
    assert not np.array_equal(np.asarray(state.params.layers[0].weight),
                              np.asarray(m.layers[0].weight))


@pytest.mark.slow  # the whole benchmark script end to end; its parts are tested above
def test_quick_run_without_peers(bf, tmp_path):
    out = tmp_path / "flow.json"
    x64 = jax.config.read("jax_enable_x64")
    assert bf.main(["--quick", "--no-peers", "--fit-steps", "10", "--json", str(out)]) == 0
    assert jax.config.read("jax_enable_x64") == x64  # restored after the float32 run
    d = json.loads(out.read_text())
    assert d["quick"] and d["table_markdown"]
    assert d["config"]["dims"] == [2] and d["config"]["batches"] == [64]
    res = d["results"]["2D"]
    assert d["results"]["peer_note"] == "peers skipped (--no-peers)"
    for kind in ("cfm", "otcfm-exact", "otcfm-exact-hungarian", "otcfm-exact-host",
                 "otcfm-exact-emd", "otcfm-exact-auction", "otcfm-sinkhorn",
                 "otcfm-sinkhorn-scaling"):
        r = res["train"][f"64/{kind}"]
        assert r["steps_per_s"] > 0 and r["record"]["compile_s"] > 0
    pq = res["pairing"]  # exact pairs are the shortest; the entropic ones close most of the gap
    assert pq["gap_closed"]["exact"] == pytest.approx(1) and pq["gap_closed"]["random"] == 0
    for name in ("sinkhorn", "sinkhorn-scaling"):
        assert 0.5 < pq["gap_closed"][name] < 1
    assert any("OT-CFM (entropic" in t["target"] for t in d["targets"])
    for key, nfe in (("euler100", 100), ("rk425", 100)):
        s = res["sample"][key]
        assert s["nfe"] == s["nfe_counted"] == nfe and s["samples_per_s"] > 0
    for name in ("jaxkit flow.integrate tsit5", "diffrax tsit5 (direct)",
                 "diffrax dopri5 (direct)"):
        a = res["adaptive"][name]
        assert a["nfe"] > 6 and a["samples_per_s"] > 0
    a = res["adaptive"]["jaxkit flow.integrate tsit5"]
    assert a["nfe"] >= 6 * a["num_steps"] + 1
    lk = res["likelihood"]["jaxkit"]
    assert lk["samples_per_s"] > 0 and math.isfinite(lk["mean_logp"])
    cases = [r["case"] for r in d["rows"]]
    assert any(c.startswith("train cfm, 2D, batch 64") for c in cases)
    assert any(c.startswith("sample rk4 x25 (NFE 100)") for c in cases)
    assert any(c.startswith("log-likelihood") for c in cases)
    a = res["assign"]["64"]  # the host solvers on the same minibatches: all optimal
    assert a["problems"] == 3 and a["max_rel_gap"] < 1e-12
    assert all(a[name]["record"]["median_s"] > 0 for name in bf.ASSIGN_SOLVERS)
    assert sum(c.startswith("exact assignment B = 64, 2D") for c in cases) == 2  # 2 peers
    for kind in ("cfm", "otcfm-exact-emd"):  # chunked steps: per-step records
        r = res["train"][f"64/{kind}/scan"]
        assert r["steps_per_call"] == bf.CHUNK and r["record"]["items"] == 1
        assert r["steps_per_s"] == pytest.approx(1 / r["record"]["median_s"])
    assert any(c == f"train cfm, 2D, batch 64, {bf.CHUNK} steps per call (lax.scan)"
               for c in cases)
    for kind in bf.PREFETCH_KINDS:
        r = res["train"][f"64/{kind}/scan"]
        assert r["host_workers"] == bf.PREFETCH_WORKERS and r["steps_per_s"] > 0
        assert r["steps_per_call"] == bf.CHUNK
        assert res["train"][f"64/{kind}"]["steps_per_call"] == 1  # one minibatch a call
    tg = {t["target"]: t for t in d["targets"]}
    for mode in ("1 step per call", f"{bf.CHUNK} steps per call"):
        ot = tg[f"OT-CFM (exact, faster solver) time / CFM time, 2D, batch 64, {mode}"]
        assert ot["ok"] in (True, False) and ot["measured"].endswith("x")
    train = [t for t in d["targets"] if t["target"].startswith("training steps/s")]
    assert len(train) == 4 and all(t["ok"] is None for t in train)  # no peers


def test_cfm_call_overhead_probe(tmp_path):
    """benchmarks/cfm_call_overhead.py at a tiny size: the identity step returns the state
    unchanged, and the JSON's gap is the per-call time minus the scan's per-step time."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "cfm_call_overhead.py"
    spec = importlib.util.spec_from_file_location("jaxkit_cfm_call_overhead_test", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    state = {"w": jnp.arange(3.0), "n": jnp.int32(2)}
    new, loss = probe.identity_step(state, jax.random.key(0), None)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), new, state))
    assert float(loss) == 0.0
    out = tmp_path / "o.json"
    assert probe.main(["--dim", "3", "--batch", "8", "--rounds", "2", "--calls", "2",
                       "--chunk", "2", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert len(d["rounds"]) == 2 and d["environment"]["machine"]
    for r in d["rounds"]:
        assert r["per_call_ms"] > 0 and r["scan_per_step_ms"] > 0 and r["identity_call_ms"] > 0
        assert r["gap_ms"] == pytest.approx(r["per_call_ms"] - r["scan_per_step_ms"])
        assert r["flops_per_step"] > 0
    assert d["medians"]["per_call_ms"] == pytest.approx(
        np.median([r["per_call_ms"] for r in d["rounds"]]))
    with pytest.raises(SystemExit):
        probe.main(["--rounds", "0"])
