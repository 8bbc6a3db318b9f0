"""The benchmark harness (jaxkit.bench): record fields, table and JSON output.

Nothing here asserts anything about speed; the timed functions are tiny."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit import bench


def _tiny(x):
    return jnp.tanh(x @ x.T).sum()


def test_time_jax_record_fields():
    x = np.ones((8, 8), np.float32)
    r = bench.time_jax(_tiny, x, n_runs=5, warmup=1, items=3, name="tiny")
    assert r.name == "tiny"
    assert r.n_runs == 5 and len(r.times_s) == 5 and r.warmup == 1
    assert r.compile_s is not None and r.compile_s > 0
    assert r.median_s > 0 and r.min_s > 0
    assert r.p10_s <= r.median_s <= r.p90_s
    assert r.items == 3 and r.items_per_s == pytest.approx(3 / r.median_s)
    assert r.flops is None or r.flops >= 0
    if r.flops is not None:
        assert r.flops_per_s == pytest.approx(r.flops / r.median_s)


def test_time_jax_accepts_jitted_and_pytrees():
    f = jax.jit(lambda p: p["a"] * 2 + p["b"])
    r = bench.time_jax(f, {"a": jnp.ones(3), "b": np.zeros(3)}, n_runs=3)
    assert r.n_runs == 3 and r.compile_s > 0


def test_time_python_record_and_errors():
    calls = []

    def peer(v):
        calls.append(v)
        return v + 1

    r = bench.time_python(peer, 1, n_runs=4, warmup=2, items=2, name="peer")
    assert len(calls) == 6  # warm-up + timed runs
    assert r.compile_s is None and r.flops is None
    assert r.n_runs == 4 and r.p10_s <= r.median_s <= r.p90_s
    with pytest.raises(ValueError, match="n_runs"):
        bench.time_python(peer, 1, n_runs=0)
    with pytest.raises(ValueError, match="warmup"):
        bench.time_jax(_tiny, np.ones((2, 2)), warmup=-1)


def test_record_from_times_and_speedup():
    r = bench.record_from_times("x", [3.0, 1.0, 2.0], items=4)
    assert r.median_s == 2.0 and r.min_s == 1.0 and r.items_per_s == 2.0
    fast = bench.record_from_times("fast", [0.5])
    assert bench.speedup(fast, r) == pytest.approx(4.0)
    assert bench.speedup(fast.to_dict(), r.to_dict()) == pytest.approx(4.0)
    assert bench.speedup(fast, None) is None


def test_environment_fields():
    env = bench.environment()
    for k in ("jax", "backend", "device_kind", "device_count", "process_count", "cpu_count",
              "peers", "date_utc"):
        assert k in env
    assert env["jax"] == jax.__version__
    assert env["device_count"] >= 1 and env["process_count"] >= 1
    assert "numpy" in env["peers"]
    assert env["matmul_gflops_at_start"] > 0
    env["loadavg_at_start"] = None
    line = bench.environment_line(env, 12.0)
    assert "GFLOP/s at start" in line and line.endswith("wall 12 s")
    assert env["matmul_gflops_at_end"] > 0 and "loadavg_at_end" in env


def test_table_and_json(tmp_path):
    j = bench.record_from_times("jaxkit", [0.01, 0.02], compile_s=0.5)
    p = bench.record_from_times("peer", [0.1])
    rows = [
        dict(case="case [1 device]", dtype="float64", jax=j, peer=p, peer_name="sklearn",
             acc_jax="Amari 0.01", acc_peer="Amari 0.01"),
        dict(case="missing peer", dtype="float64", skipped="offline"),
    ]
    from rich.console import Console

    console = Console(record=True, width=250)
    table = bench.print_table(rows, title="t", console=console)
    text = console.export_text()
    assert table.row_count == 2
    assert "case [1 device]" in text  # brackets are not eaten as rich markup
    assert "6.67x" in text and "skipped" in text and "offline" in text
    md = bench.table_markdown(rows)
    assert md.count("\n") == 3 and "6.67x" in md

    out = bench.write_json(tmp_path / "sub" / "r.json",
                           {"env": bench.environment(), "rows": rows,
                            "arr": np.arange(3), "scalar": np.float64(1.5),
                            "nan": float("nan")})
    data = json.loads(out.read_text())
    assert data["rows"][0]["jax"]["median_s"] == pytest.approx(0.015)
    assert data["arr"] == [0, 1, 2] and data["scalar"] == 1.5 and data["nan"] is None


def test_time_jax_loop_chains_and_donates_a_copy():
    seen = []

    def step(state, key, x):
        jax.debug.callback(lambda n: seen.append(int(n)), state["n"], ordered=True)
        return {"n": state["n"] + 1, "w": state["w"] + x}, jax.random.uniform(key)

    state = {"n": jnp.zeros((), jnp.int32), "w": jnp.ones(3)}
    r = bench.time_jax_loop(step, state, jax.random.key(0), np.full(3, 2.0), n_runs=4,
                            warmup=2, items=5, name="loop")
    assert r.n_runs == 4 and r.warmup == 2 and r.items == 5 and len(r.times_s) == 4
    assert r.compile_s is not None and r.compile_s > 0 and r.items_per_s == 5 / r.median_s
    jax.effects_barrier()
    assert seen == list(range(7))  # each call took the previous call's state
    # the caller's state was copied, not donated: still readable and unchanged
    assert int(state["n"]) == 0 and np.array_equal(np.asarray(state["w"]), np.ones(3))
    with pytest.raises(ValueError, match="n_runs"):
        bench.time_jax_loop(step, state, jax.random.key(0), np.ones(3), n_runs=0)
