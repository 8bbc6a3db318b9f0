"""benchmarks/bench_compose.py: the raw-array export the torch peers read, and a quick
end-to-end run of the Mamba case without peers (slow: it compiles two gradients)."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bc(load_benchmark):
    return load_benchmark("compose")


def test_write_arrays_index_round_trips(bc, tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2, 3], np.int64)
    idx = json.loads(bc.write_arrays(tmp_path, {"a": a, "b": b}).read_text())
    raw = (tmp_path / "arrays.bin").read_bytes()
    got = {e["name"]: np.frombuffer(raw, np.dtype(e["dtype"]), e["count"], e["offset"])
           .reshape(e["shape"]) for e in idx["arrays"]}
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)
    assert got["b"].dtype == np.int32


@pytest.mark.slow
def test_quick_mamba_case_without_peers(bc, tmp_path):
    out = tmp_path / "b.json"
    assert bc.main(["--quick", "--no-peers", "--only", "mamba", "--repeats", "2",
                    "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 and all(r["jax"]["median_s"] > 0 for r in rows)


def test_inline_peers_compile_and_cpu_note(bc):
    for src in (bc.PEER_GPT, bc.PEER_MAMBA, bc.PEER_MAMBA2, bc.PEER_ATTENTION,
                bc.PEER_PRODUCTS):
        compile(bc.PEER_COMMON.format(peers="/x") + src, "peer_inline.py", "exec")
    assert bc.cpu_note(0.002, None) == "cpu/call 2 ms"
    assert bc.cpu_note(0.002, {"cpu": [0.003, 0.004, 0.005]}).endswith("(2.00x)")


@pytest.mark.slow
def test_quick_mamba2_and_attention_cases_without_peers(bc, tmp_path):
    out = tmp_path / "b.json"
    assert bc.main(["--quick", "--no-peers", "--only", "mamba2,attention", "--repeats", "2",
                    "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4 and all(r["jax"]["median_s"] > 0 for r in rows)
    # the chunked SSD and its recurrence agree on sum(out * g)
    chunked, recurrence = (float(r["acc_jax"].split(";")[0].split()[-1]) for r in rows[:2])
    assert chunked == pytest.approx(recurrence, rel=1e-4, abs=1e-4)


def test_alternate_interleaves_rounds_and_reports_pair_ratios(bc):
    """The GPT case alternates jaxkit and peer calls round by round; the per-round ratio
    is median(peer) / median(jaxkit) of that round's wall times."""
    log = []

    class FakePeer:
        def run(self, n):
            log.append(("peer", n))
            return {"times": [0.02] * n, "cpu": [0.03] * n}

    def call():
        log.append(("jax", 1))

    out = bc.alternate(call, FakePeer(), rounds=3, per_round=2)
    assert log == [("jax", 1), ("jax", 1), ("peer", 2)] * 3
    assert len(out["jax_times"]) == len(out["peer_times"]) == len(out["jax_cpu"]) == 6
    assert len(out["pair_ratios"]) == 3 and all(r > 1 for r in out["pair_ratios"])
    # the GPT peer source also compiles in its server form
    assert "serve" in bc.PEER_GPT


def test_alternate_runs_other_variants_each_round_without_a_peer(bc):
    """Other jaxkit variants (the data-parallel step) run in every round after the main
    call; without a peer there are no pair ratios."""
    log = []
    out = bc.alternate(lambda: log.append("one"), None, rounds=2, per_round=2,
                       others={"dp": lambda: log.append("dp")})
    assert log == ["one", "one", "dp", "dp"] * 2
    assert len(out["other"]["dp"]["times"]) == len(out["other"]["dp"]["cpu"]) == 4
    assert out["pair_ratios"] == [] and out["other"]["dp"]["pair_ratios"] == []


def _tiny_lm(opt, B, T, *, dtype):
    """``(step, train_step, state)``: a one-embedding-table language model trained by
    ``kernels.train.make_train_step`` with ``opt``, its batch of ``B`` windows of ``T``
    drawn inside the step (as the bench's GPT step); parameters in ``dtype`` (None: the
    default float)."""
    import jax
    import optax
    from jaxkit.kernels import train as ktrain

    from jaxkit.compose.data import sample_windows

    def loss(params, key, batch, aux):
        logits = params[0][batch[:, :-1]] @ params[1]
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean(), ()

    step = ktrain.make_train_step(loss, opt)

    def train_step(st, key, data):
        return step(key, st, sample_windows(key, data, B, T))

    k1, k2 = jax.random.split(jax.random.key(0))
    kw = {} if dtype is None else {"dtype": dtype}
    st0 = ktrain.init([jax.random.normal(k1, (256, 16), **kw),
                       jax.random.normal(k2, (16, 256), **kw)], opt)
    return step, train_step, st0


def test_data_parallel_step_matches_one_device_step(bc):
    """The GPT step's data-parallel form over a {"data": 2} mesh of the simulated host
    devices gives the 1-device step's loss and update (a tiny model: one embedding
    table, AdamW as the bench's)."""
    import argparse

    import jax.numpy as jnp
    import optax

    B, T = 6, 8
    data = jnp.asarray(np.random.default_rng(0).integers(0, 256, 500), jnp.int32)
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(1e-2, b1=0.9, b2=0.95, weight_decay=0.1))
    step, train_step, st0 = _tiny_lm(opt, B, T, dtype=None)
    args = argparse.Namespace(devices=2, repeats=1)
    (call, _, _, _), check = bc.data_parallel_step(step, st0, data, args, B, T, train_step)
    assert "= 1-device" in check
    call()  # one more step of the donated data-parallel loop runs
    args.devices = 4
    with pytest.raises(ValueError, match="divide the batch"):
        bc.data_parallel_step(step, st0, data, args, B, T, train_step)


def test_profile_step_reports_products_and_cores(bc, capsys):
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x, w: jnp.tanh(x @ w))
    x, w = jnp.ones((64, 32)), jnp.ones((32, 48))
    compiled = f.lower(x, w).compile()
    got = bc.profile_step("tiny", lambda: jax.block_until_ready(compiled(x, w)), compiled)
    assert got["product_gflop"] == 2 * 64 * 32 * 48 / 1e9
    assert got["cores"] >= 1 and got["product_s"] > 0
    assert "tiny step by operation" in capsys.readouterr().out


def test_step_loop_calls_past_its_key_count(bc):
    """--profile calls the timed loop after its n_calls timed calls: the keys are reused
    in turn instead of running out (a StopIteration ended the first --profile run)."""
    import jax
    import jax.numpy as jnp

    def step(st, key, x):
        return st + x, jax.random.uniform(key)

    call, compile_s, _, compiled = bc.step_loop(step, jnp.zeros(3), jax.random.key(0),
                                                jnp.ones(3), n_calls=1)
    for _ in range(4):
        call()
    assert compile_s > 0 and "ENTRY" in compiled.as_text()


def test_quick_products_case_without_peers(bc, tmp_path):
    """The products case: three forms of each of the four shapes, each with its rate."""
    out = tmp_path / "p.json"
    assert bc.main(["--quick", "--no-peers", "--only", "products", "--repeats", "1",
                    "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 3 * len(bc.PRODUCTS)
    assert {r["case"].split(",")[0] for r in rows} == {
        "product forward", "product input grad", "product weight grad"}
    assert all(float(r["acc_jax"].split()[0]) > 0 for r in rows)


@pytest.mark.slow  # ~15 s; the routing's equivalence is tested in test_compose_train
def test_quick_candidates_case_routed_matches_the_switch(bc, tmp_path):
    """The candidates case: the routed training and the vmapped switch give the same
    losses from the same weights and batches, each with its throughput."""
    out = tmp_path / "c.json"
    assert bc.main(["--quick", "--no-peers", "--only", "candidates", "--repeats", "1",
                    "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["case"].startswith("candidates 4 x 2 layers over AM")
    assert row["loss_gap"] < 1e-4
    assert float(row["acc_jax"].split()[0].replace(",", "")) > 0
    assert row["peer_name"] == "jaxkit vmapped lax.switch"


def test_onednn_options_route_products_to_onednn_with_the_same_loss(bc):
    """``--onednn``'s options put a product in a oneDNN fusion (both options are needed:
    the fusion type alone is ignored), and ``same_loss`` passes a step whose loss they
    do not change."""
    import jax
    import jax.numpy as jnp
    import optax
    from jaxkit.kernels import _xla_cpu

    opts = _xla_cpu.cpu_options(_xla_cpu.ONEDNN_DOTS)
    if opts is None:
        pytest.skip("not the CPU, or this jaxlib lacks the oneDNN options")
    x, w = jnp.ones((64, 32), jnp.float32), jnp.ones((32, 48), jnp.float32)

    def hlo(o):
        return jax.jit(lambda a, b: jnp.tanh(a @ b), compiler_options=o).lower(
            x, w).compile().as_text()

    assert "onednn_fusion" in hlo(opts)
    alone = dict(_xla_cpu.ONEDNN_DOTS[1:])
    assert "onednn_fusion" not in hlo(alone) and "onednn_fusion" not in hlo(None)
    data = jnp.asarray(np.random.default_rng(0).integers(0, 256, 300), jnp.int32)
    _, train_step, st0 = _tiny_lm(optax.adamw(1e-2), 4, 8, dtype=jnp.float32)
    key = jax.random.key(1)
    default, other = (bc.step_loop(train_step, st0, key, data, n_calls=1,
                                   compiler_options=o)[3] for o in (None, opts))
    assert "= default" in bc.same_loss(default, other, st0, key, data)
    # a program whose loss differs (its windows drawn from the reversed text) is caught
    other_data = bc.step_loop(lambda st, k, d: train_step(st, k, d[::-1]), st0, key, data,
                              n_calls=1)[3]
    with pytest.raises(RuntimeError, match="!= default program's loss"):
        bc.same_loss(default, other_data, st0, key, data)
