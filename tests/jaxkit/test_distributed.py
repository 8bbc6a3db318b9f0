"""jaxkit.distributed: meshes, padding, 1-vs-8-device agreement, and a 2-process run."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels.ica import fastica

from jaxkit import distributed as jd

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from mp_data import datasets  # noqa: E402


def test_eight_simulated_devices():
    assert jax.device_count() == 8


def test_make_mesh_shapes_and_errors():
    assert dict(jd.make_mesh().shape) == {"data": 8}
    assert dict(jd.make_mesh({"data": -1, "model": 2}).shape) == {"data": 4, "model": 2}
    assert dict(jd.make_mesh({"data": 1}, devices=jax.devices()[:1]).shape) == {"data": 1}
    with pytest.raises(ValueError, match="need 6 devices"):
        jd.make_mesh({"data": 3, "model": 2})
    with pytest.raises(ValueError, match="at most one -1"):
        jd.make_mesh({"data": -1, "model": -1})
    with pytest.raises(ValueError, match="cannot be split"):
        jd.make_mesh({"data": -1, "model": 3})


def test_pad_batch_repeats_last_entry():
    x = jnp.arange(10.0).reshape(5, 2)
    p, n = jd.pad_batch({"x": x}, 4)
    assert n == 5 and p["x"].shape == (8, 2)
    np.testing.assert_array_equal(np.asarray(p["x"][5:]), np.tile(np.asarray(x[-1]), (3, 1)))


def _fit(x, w):
    r = fastica(None, x, w_init=w)
    return r.components, r.n_iter


def test_one_device_and_eight_devices_agree():
    xs, ws = datasets(n_sets=10)  # 10 is not a multiple of 8: exercises padding
    xs, ws = jnp.asarray(xs), jnp.asarray(ws)
    one = jd.sharded_vmap(_fit, jd.make_mesh({"data": 1}, devices=jax.devices()[:1]))
    eight = jd.sharded_vmap(_fit, jd.make_mesh({"data": 8}))
    c1, it1 = one(xs, ws)
    c8, it8 = eight(xs, ws)
    assert c8.shape == (10, 3, 3)
    np.testing.assert_allclose(np.asarray(c8), np.asarray(c1), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(it8), np.asarray(it1))


def test_shard_batch_spreads_datasets_over_devices():
    xs, _ = datasets(n_sets=10)
    (placed,), n = jd.shard_batch((jnp.asarray(xs),), jd.make_mesh())
    assert n == 10 and placed.shape[0] == 16
    assert len(placed.sharding.device_set) == 8
    assert {s.data.shape[0] for s in placed.addressable_shards} == {2}


def test_global_batch_single_process_is_sharded_device_put():
    xs, _ = datasets()
    mesh = jd.make_mesh()
    g = jd.global_batch(xs, mesh)
    assert g.shape == xs.shape
    assert g.sharding.spec == jax.sharding.PartitionSpec("data", None, None)
    np.testing.assert_array_equal(np.asarray(g), xs)


def test_initialize_is_noop_unless_asked(monkeypatch):
    for k in ("JAXKIT_COORDINATOR", "JAXKIT_DISTRIBUTED"):
        monkeypatch.delenv(k, raising=False)
    assert jd.initialize() is False
    with pytest.raises(ValueError, match="num_processes"):
        jd.initialize("localhost:1234")


def test_initialize_auto_off_a_cluster_is_a_clear_error(monkeypatch):
    """JAXKIT_DISTRIBUTED=auto where JAX detects no cluster: JAX's bare 'coordinator_address
    should be defined' becomes an error that says what to set."""
    for k in ("JAXKIT_COORDINATOR", "JAX_COORDINATOR_ADDRESS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("JAXKIT_DISTRIBUTED", "auto")

    def no_cluster(**kw):
        assert kw["coordinator_address"] is None
        raise ValueError("coordinator_address should be defined.")

    monkeypatch.setattr(jax.distributed, "initialize", no_cluster)
    monkeypatch.setattr(jax.config, "update", lambda *a: None)  # keep this process's config
    with pytest.raises(ValueError, match="detected no cluster.*JAXKIT_COORDINATOR"):
        jd.initialize()
    monkeypatch.delenv("JAXKIT_DISTRIBUTED")
    monkeypatch.setenv("JAXKIT_COORDINATOR", "localhost:1")
    monkeypatch.setenv("JAXKIT_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="JAXKIT_NUM_PROCESSES must be an integer; got 'two'"):
        jd.initialize()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_single_process(tmp_path):
    """jax.distributed on localhost (gloo CPU collectives): 2 processes x 2 devices fit
    a global batch assembled from per-process rows; equals one process fitting all."""
    port, out = _free_port(), tmp_path / "comps.npy"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen([sys.executable, str(HERE / "mp_worker.py"), str(i), "2",
                               str(port), str(out)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for i in range(2)]
    logs = [p.communicate(timeout=240)[0].decode() for p in procs]
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    xs, ws = datasets()
    ref = jax.vmap(lambda x, w: fastica(None, x, w_init=w).components)(jnp.asarray(xs),
                                                                      jnp.asarray(ws))
    np.testing.assert_allclose(np.load(out), np.asarray(ref), rtol=1e-10, atol=1e-12)


def test_sharded_vmap_is_local_per_device():
    """Each device fits its own datasets: the compiled program has no collectives."""
    mesh = jd.make_mesh()
    fit = jd.sharded_vmap(_fit, mesh)
    xs, ws = datasets(n_sets=8)
    placed, _ = jd.shard_batch((jnp.asarray(xs), jnp.asarray(ws)), mesh)
    hlo = fit.global_fn.lower(*placed).compile().as_text()
    for op in ("all-gather", "all-reduce", "all-to-all", "collective-permute"):
        assert op not in hlo, op


def _scaled_sums(x, w, key):
    """(3, R) runs on the last axis, a (3,) replicated weight, a 0-d key: per-run sums,
    a per-run draw folded with the device index, and a 0-d output."""
    k = jax.random.fold_in(key, jax.lax.axis_index("data"))
    return {"sum": w @ x, "both": x * w[:, None], "n": jnp.asarray(x.shape[-1]),
            "draw": jax.random.uniform(k, x.shape[-1:])}


def test_sharded_runs_splits_the_runs_axis_and_cuts_the_padding():
    x = jnp.arange(33.0).reshape(3, 11)  # 11 runs, padded to 16 over 8 devices
    w = jnp.asarray([1.0, -2.0, 0.5])
    fn = jd.sharded_runs(_scaled_sums, jd.make_mesh(), in_axes=(-1, None, None))
    out = fn(x, w, jax.random.key(0))
    np.testing.assert_allclose(np.asarray(out["sum"]), np.asarray(w @ x))
    np.testing.assert_allclose(np.asarray(out["both"]), np.asarray(x * w[:, None]))
    assert int(out["n"]) == 2  # each device saw its own 2 runs; 0-d output from the first
    draw = np.asarray(out["draw"])
    assert draw.shape == (11,) and len(np.unique(draw[:2])) == 2
    assert not np.array_equal(draw[0:2], draw[2:4])  # the devices drew different numbers
    out2 = fn(x + 1, w, jax.random.key(0))  # same signature: the compiled program is reused
    np.testing.assert_allclose(np.asarray(out2["sum"]), np.asarray(w @ (x + 1)))


def _noisy_runs(keys, x):
    """Runs on the last axis of x (3, R); ``keys`` (R,) one key per run, as sharded_runs
    gives them from one key."""
    noise = jax.vmap(lambda k: jax.random.normal(k, (3,)), out_axes=-1)(keys)
    return {"x": x + noise, "u": jax.vmap(jax.random.uniform)(keys)}


def test_sharded_runs_one_key_gives_every_run_its_own_stream_on_any_mesh():
    """One key in: run r gets fold_in(key, r) whatever the mesh, so 1 and 8 devices give
    the same runs and no two runs (on one device or across devices) are copies."""
    x = jnp.zeros((3, 11))  # 11 runs: padded to 16 over 8 devices
    key = jax.random.key(3)
    one = jd.sharded_runs(_noisy_runs, jd.make_mesh({"data": 1}, devices=jax.devices()[:1]))
    eight = jd.sharded_runs(_noisy_runs, jd.make_mesh())
    r1, r8 = one(key, x), eight(key, x)
    assert r8["x"].shape == (3, 11) and r8["u"].shape == (11,)
    for name in ("x", "u"):
        np.testing.assert_array_equal(np.asarray(r8[name]), np.asarray(r1[name]))
    assert len(np.unique(np.asarray(r8["u"]))) == 11
    assert len({tuple(c) for c in np.asarray(r8["x"]).T}) == 11
    np.testing.assert_array_equal(np.asarray(r8["u"]), np.asarray(
        jax.vmap(jax.random.uniform)(jd.run_keys(key, 11))))
    # already placed (16 runs): the same keys for the first 11
    placed = jax.device_put(jnp.zeros((3, 16)), jax.sharding.NamedSharding(
        jd.make_mesh(), jax.sharding.PartitionSpec(None, "data")))
    g = eight.global_fn(key, placed)
    np.testing.assert_array_equal(np.asarray(g["u"][:11]), np.asarray(r1["u"]))
    with pytest.raises(ValueError, match="not a lone PRNG key"):
        jd.sharded_runs(lambda k: jax.vmap(jax.random.uniform)(k), jd.make_mesh())(key)


def test_sharded_runs_bad_input():
    fn = jd.sharded_runs(lambda a, b: a + b, jd.make_mesh())
    with pytest.raises(ValueError, match="same number of runs"):
        fn(jnp.zeros((2, 5)), jnp.zeros((2, 6)))
    with pytest.raises(ValueError, match="`in_axes` has 1 entries for 2 arguments"):
        jd.sharded_runs(lambda a, b: a + b, jd.make_mesh(), in_axes=(-1,))(
            jnp.zeros(4), jnp.zeros(4))
    with pytest.raises(ValueError, match="runs axis 2 is out of range"):
        jd.sharded_runs(lambda a: a, jd.make_mesh(), in_axes=2)(jnp.zeros((2, 4)))


def test_data_mesh_normalises_and_checks():
    assert jd.data_mesh(None) is None
    assert jd.data_mesh(jd.make_mesh({"data": 1}, devices=jax.devices()[:1])) is None
    explicit = jax.make_mesh((8,), ("data",))  # Explicit axis types on jax 0.10
    m = jd.data_mesh(explicit)
    assert m.axis_types == (jax.sharding.AxisType.Auto,) and dict(m.shape) == {"data": 8}
    mine = jd.make_mesh()
    assert jd.data_mesh(mine) is mine
    with pytest.raises(ValueError, match="'data' axis"):
        jd.data_mesh(jax.make_mesh((8,), ("batch",)))
    assert jd.mesh_size(None) == 1 and jd.mesh_size(mine) == 8


def test_chunk_size_fits_the_budget_and_the_mesh():
    assert jd.chunk_size(10, 1.0) == 10
    assert jd.chunk_size(10, 1.0, jd.make_mesh()) == 16  # a multiple of 8
    assert jd.chunk_size(10, 400.0, budget_bytes=1000.0) == 2
    assert jd.chunk_size(10, 1e12) == 1
    with pytest.raises(ValueError, match="n_items"):
        jd.chunk_size(0, 1.0)


def test_pad_to_a_size_and_place_once():
    x = jnp.arange(6.0).reshape(3, 2)
    p, n = jd.pad_batch(x, size=5)
    assert n == 3 and p.shape == (5, 2)
    np.testing.assert_array_equal(np.asarray(p[3:]), np.tile(np.asarray(x[-1]), (2, 1)))
    with pytest.raises(ValueError, match="smaller than the batch"):
        jd.pad_batch(x, size=2)
    same, n = jd.shard_batch(x, None, size=4)  # no mesh: padded, default placement
    assert n == 3 and same.shape == (4, 2)
    placed, n = jd.shard_batch(x, jd.make_mesh(), size=16)
    assert placed.shape == (16, 2) and len(placed.sharding.device_set) == 8
    with pytest.raises(ValueError, match="multiple of the mesh"):
        jd.shard_batch(x, jd.make_mesh(), size=12)


def _double(x):
    return 2.0 * x


def test_batched_compiles_once_and_does_not_pad_again():
    mesh = jd.make_mesh()
    x = jnp.arange(16.0).reshape(16, 1)
    placed, _ = jd.shard_batch(x, mesh)
    f = jd.batched(_double, mesh)
    y = f(placed)
    assert y.shape == (16, 1)  # already a multiple of 8: no second padding
    size = jd._sharded_vmap_jit._cache_size()
    for _ in range(3):  # fresh wrappers of the same function and mesh: no new compile
        jd.batched(_double, jd.make_mesh())(placed + 1.0)
        jd.sharded_vmap(_double, mesh).global_fn(placed)
    assert jd._sharded_vmap_jit._cache_size() == size
    np.testing.assert_allclose(np.asarray(jd.batched(_double, None)(x)), 2.0 * np.asarray(x))


def test_pad_and_place_a_partly_batched_tree_on_another_axis():
    """An optimizer-like tree: a seed axis on most leaves, a scalar counter; and per-step
    indices batched on axis 1. Counters stay as they are (padding) and replicated
    (placement); the batched axis is split over the mesh wherever it sits."""
    tree = {"w": np.arange(6.0).reshape(3, 2), "count": np.zeros(())}
    pad, n = jd.pad_batch(tree, size=8)
    assert n == 3 and pad["count"] is tree["count"]
    np.testing.assert_array_equal(np.asarray(pad["w"][3:]), np.tile([4.0, 5.0], (5, 1)))
    mesh = jd.make_mesh()
    placed = jd.place_batch(pad, mesh, 8)
    assert placed["w"].sharding.spec == jax.sharding.PartitionSpec("data", None)
    assert placed["count"].sharding.is_fully_replicated
    idx, n = jd.pad_batch(np.arange(24).reshape(2, 3, 4), 4, batch_axis=1)
    assert n == 3 and idx.shape == (2, 4, 4)
    np.testing.assert_array_equal(np.asarray(idx[:, 3]), np.arange(24).reshape(2, 3, 4)[:, 2])
    idx = jd.place_batch(jd.pad_batch(idx, size=8, batch_axis=1)[0], mesh, 8, batch_axis=1)
    assert idx.sharding.spec == jax.sharding.PartitionSpec(None, "data", None)
    assert jd.place_batch(tree, None, 8) is tree
    with pytest.raises(ValueError, match="batch axis 1"):
        jd.pad_batch({"count": np.zeros(())}, 2, batch_axis=1)
