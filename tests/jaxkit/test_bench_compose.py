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
    for src in (bc.PEER_GPT, bc.PEER_MAMBA, bc.PEER_MAMBA2, bc.PEER_ATTENTION):
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
