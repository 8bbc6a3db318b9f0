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
    m = env["machine"]
    assert m["cores"] >= 1 and m["isa"]["level"] in ("AMX", "AVX-512", "AVX2", "AVX", "SSE",
                                                      "unknown")
    for dt in ("float32", "bfloat16"):
        assert np.isfinite(m["roofline_gflops"][dt]) and m["roofline_gflops"][dt] > 0
    env["loadavg_at_start"] = None
    line = bench.environment_line(env, 12.0)
    assert "GFLOP/s at start" in line and line.endswith("wall 12 s")
    assert "roofline f32" in line
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
                           {"env": bench.environment(roofline=False), "rows": rows,
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


AVX2_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz
flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt avx f16c avx2 bmi1 bmi2

processor\t: 1
flags\t\t: fpu sse
"""
SPR_FLAGS = ("fpu sse sse4_2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl "
             "avx512_bf16 avx512_fp16 avx512_vnni amx_bf16 amx_tile amx_int8 avx_vnni")


def test_cpu_flags_and_isa_levels_from_fixed_cpuinfo():
    flags = bench.cpu_flags(AVX2_CPUINFO)
    assert "avx2" in flags and "fma" in flags and "avx512f" not in flags  # first CPU only
    ext = bench.isa_extensions(flags)
    assert ext["level"] == "AVX2" and ext["avx2"] and ext["fma"]
    assert ext["avx512"] == [] and ext["amx"] == [] and "bmi1" not in ext["flags"]
    spr = bench.isa_extensions(SPR_FLAGS.split())
    assert spr["level"] == "AMX" and spr["amx"] == ["bf16", "int8", "tile"]
    assert spr["avx512"] == ["bf16", "bw", "cd", "dq", "f", "fp16", "vl", "vnni"]
    zen4 = bench.isa_extensions(set(SPR_FLAGS.split()) - {"amx_bf16", "amx_tile", "amx_int8"})
    assert zen4["level"] == "AVX-512" and zen4["avx_vnni"]
    assert bench.isa_extensions(["sse", "sse2"])["level"] == "SSE"
    assert bench.isa_extensions([])["level"] == "unknown"
    assert bench.cpu_flags("model name : x\n") == set()


def test_machine_record_and_roofline_fraction_at_tiny_size():
    m = bench.machine_record(AVX2_CPUINFO, roofline_n=32)
    assert m["cpu_model"].startswith("Intel(R) Core(TM) i7-4770")
    assert m["isa"]["level"] == "AVX2" and m["cores"] >= 1
    for dt in ("float32", "bfloat16"):
        assert np.isfinite(m["roofline_gflops"][dt]) and m["roofline_gflops"][dt] > 0
    line = bench.machine_line(m)
    assert line.startswith("AVX2") and "cores" in line and "roofline f32" in line
    roof = m["roofline_gflops"]["float32"]
    assert bench.roofline_fraction(roof * 1e9 / 2, m) == pytest.approx(0.5)
    assert bench.roofline_fraction(None, m) is None
    assert bench.roofline_fraction(1e9, {"roofline_gflops": None}) is None
    assert bench.matmul_roofline("float32", n=16, reps=1, n_runs=1) > 0
    with pytest.raises(ValueError, match="n"):
        bench.matmul_roofline(n=0)
    # the table reports declared model FLOP/s against the roofline of the last record
    j = bench.record_from_times("j", [0.5], model_flops=roof * 1e9 * 0.25)
    assert j.model_flops_per_s == pytest.approx(roof * 1e9 * 0.5)
    md = bench.table_markdown([dict(case="c", dtype="float32", jax=j, peer=None)])
    assert "50% / -" in md
    with pytest.raises(ValueError, match="model_flops"):
        bench.record_from_times("j", [0.5], model_flops=float("nan"))


def test_isa_env_sets_both_sides(monkeypatch):
    env = bench.isa_env("avx2", "--xla_force_host_platform_device_count=8 "
                                "--xla_cpu_max_isa=AVX512")
    assert env["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=8",
                                        "--xla_cpu_max_isa=AVX2"]
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    with pytest.raises(ValueError, match="isa"):
        bench.isa_env("sse9")
    assert bench.apply_isa(None) == {}
    # the backend of this test process is running: a different limit cannot apply any more
    jnp.ones(1).block_until_ready()
    monkeypatch.setenv("XLA_FLAGS", "")
    with pytest.raises(RuntimeError, match="before JAX"):
        bench.apply_isa("avx2")
    m = bench.machine_record(AVX2_CPUINFO, roofline=False)
    assert m["roofline_gflops"] is None and m["xla_max_isa"] is None
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
    assert "emulated" in bench.machine_record(roofline=False)["effective_level"]


def test_parse_cases_and_finish(tmp_path, capsys):
    p = bench.benchmark_parser("b", "doc", ("a", "b"), quick_help="q")
    args = p.parse_args(["--only", "b, a"])
    assert bench.parse_cases(p, args.only, ("a", "b")) == ["b", "a"] and args.isa is None
    with pytest.raises(SystemExit):
        bench.parse_cases(p, "a,zz", ("a", "b"))
    assert "unknown case(s) ['zz']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        p.parse_args(["--isa", "sse9"])
    env = bench.environment(roofline=False)
    import time

    rows = [dict(case="c", dtype="float32", jax=bench.record_from_times("j", [0.1]),
                 peer=bench.record_from_times("p", [0.2]), peer_name="peer")]
    seen = []
    path = bench.finish(rows, env, time.perf_counter(), title="T", json_path=tmp_path / "o.json",
                        payload={"results": {"x": 1}}, after_table=lambda: seen.append(1))
    out = capsys.readouterr().out
    assert seen == [1] and "2.00x" in out and "environment: jax" in out and "wrote" in out
    data = json.loads(path.read_text())
    assert list(data)[:2] == ["environment", "results"] and "2.00x" in data["table_markdown"]
    assert bench.finish(rows, env, time.perf_counter(), title="T") is None


@pytest.mark.slow
def test_isa_limit_takes_effect_in_xla_codegen(tmp_path):
    """``--isa avx2`` reaches XLA: the object code of an elementwise kernel compiled under
    it has no AVX-512 instruction (zmm registers, ymm16-31, mask registers), where the
    default build on an AVX-512 machine has some. Needs objdump and an AVX-512 CPU."""
    import shutil
    import subprocess
    import sys

    if shutil.which("objdump") is None or "avx512f" not in bench.cpu_flags():
        pytest.skip("needs objdump and an AVX-512 machine")
    code = ("import sys, jax.numpy as jnp; from jaxkit import bench; "
            "bench.apply_isa(sys.argv[1] or None); "
            "x = jnp.linspace(0, 1, 4096); print(float(jnp.tanh(x * 3 + 1).sum()))")
    counts = {}
    for isa in ("", "avx2"):
        dump = tmp_path / (isa or "default")
        env = {k: v for k, v in __import__("os").environ.items() if k != "XLA_FLAGS"}
        env["XLA_FLAGS"] = f"--xla_dump_to={dump}"
        subprocess.run([sys.executable, "-c", code, isa], env=env, check=True,
                       capture_output=True, timeout=120)
        n = 0
        for obj in dump.glob("*.o"):
            asm = subprocess.run(["objdump", "-d", str(obj)], capture_output=True,
                                 text=True).stdout
            import re

            n += len(re.findall(r"zmm|ymm(1[6-9]|2\d|3[01])|\{k[1-7]\}", asm))
        counts[isa or "default"] = n
    assert counts["avx2"] == 0 < counts["default"], counts


def test_peer_check_ignores_the_callers_folder(tmp_path, monkeypatch):
    """A peer check runs from an empty folder: a module in the caller's working folder
    (as the repository's top-level ``kernels/`` is, beside HF's ``kernels`` package) is
    not importable there, while the standard library is; a failing check is False."""
    import sys

    (tmp_path / "shadowme.py").write_text("LEAKED = True\n")
    monkeypatch.chdir(tmp_path)
    py = sys.executable
    assert bench.peer_check(py, "import json")
    assert not bench.peer_check(py, "import shadowme")
    assert not bench.peer_check(py, "raise SystemExit(3)")
