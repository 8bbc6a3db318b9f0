"""The one training step and loop: closed-form steps, checkpoints, exact resume after a
kill, the divergence guard, and restore onto a mesh."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxkit.kernels import train

from jaxkit import training
from jaxkit.checkpoint import Checkpointer, abstract_like


def _loss(params, key, batch, aux):
    x, y = batch
    noise = 0.01 * jax.random.normal(key, y.shape)
    r = x @ params["w"] + params["b"] - (y + noise)
    return jnp.mean(r**2), {"mse": jnp.mean(r**2)}


def _batch(i):
    rng = np.random.default_rng(i)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    return x, x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3


def _state():
    return train.init({"w": jnp.zeros(3), "b": jnp.zeros(())}, optax.sgd(0.1),
                      aux=jnp.zeros((), jnp.int32))


STEP = jax.jit(train.make_train_step(
    _loss, optax.sgd(0.1), update_aux=lambda a, out, st: a + 1))


def test_step_is_sgd_in_closed_form():
    st = _state()
    key = jax.random.key(0)
    x, y = _batch(0)
    new, info = STEP(key, st, (x, y))
    g = jax.grad(lambda p: _loss(p, key, (x, y), ())[0])(st.params)
    np.testing.assert_allclose(new.params["w"], -0.1 * g["w"], rtol=1e-6)
    assert int(new.step) == 1 and int(new.aux) == 1 and bool(info.finite)
    np.testing.assert_allclose(info.grad_norm, optax.tree.norm(g), rtol=1e-6)


def test_transforms_and_clipping():
    step = train.make_train_step(
        _loss, optax.sgd(1.0), clip_norm=1e-3,
        grad_transform=lambda p, g, out, aux: jax.tree.map(lambda v: 2 * v, g),
        post_update=lambda p: {"w": p["w"] / jnp.maximum(jnp.linalg.norm(p["w"]), 1.0),
                               "b": p["b"]})
    new, info = step(jax.random.key(0), _state(), _batch(0))
    moved = jnp.sqrt(jnp.sum(new.params["w"] ** 2) + new.params["b"] ** 2)
    assert float(moved) <= 1e-3 * (1 + 1e-5)  # clipped to the global norm
    assert float(info.grad_norm) > 1e-3  # reported before clipping
    with pytest.raises(ValueError, match="clip_norm"):
        train.make_train_step(_loss, optax.sgd(1.0), clip_norm=0.0)


def test_scan_steps_equals_a_loop():
    chunk = jax.jit(train.scan_steps(STEP))
    xs, ys = zip(*[_batch(i) for i in range(4)], strict=True)
    key = jax.random.key(3)
    st_c, infos = chunk(key, _state(), (jnp.stack(xs), jnp.stack(ys)))
    st = _state()
    for k, b in zip(jax.random.split(key, 4), zip(xs, ys, strict=True), strict=True):
        st, _ = STEP(k, st, b)
    np.testing.assert_allclose(st_c.params["w"], st.params["w"], rtol=1e-6)
    assert infos.loss.shape == (4,)


def test_killed_run_resumes_to_the_same_parameters(tmp_path):
    key = jax.random.key(1)
    full = training.fit(key, _state(), STEP, _batch, steps=10)

    class Kill(Exception):
        pass

    def killing_batch(i):
        if i == 7:
            raise Kill
        return _batch(i)

    with pytest.raises(Kill):
        training.fit(key, _state(), STEP, killing_batch, steps=10, checkpoint_dir=tmp_path,
                     checkpoint_every=3, meta_fn=lambda i: {"pos": i})
    seen = {}
    res = training.fit(key, _state(), STEP, _batch, steps=10, checkpoint_dir=tmp_path,
                       checkpoint_every=3, on_restore=seen.update)
    assert res.resumed_from == 6 and seen == {"pos": 6}
    np.testing.assert_array_equal(res.state.params["w"], full.state.params["w"])
    assert int(res.state.aux) == 10
    assert res.history[-1]["step"] == 10 and "mse" in res.history[-1]


def test_divergence_stops_before_saving(tmp_path):
    step = jax.jit(train.make_train_step(_loss, optax.sgd(jnp.inf)))
    with pytest.raises(training.TrainingDiverged, match="step 1"):
        training.fit(jax.random.key(0), _state(), step, _batch, steps=5,
                     checkpoint_dir=tmp_path, checkpoint_every=2)
    with Checkpointer(tmp_path) as c:
        assert c.latest_step() is None


def test_corrupt_latest_checkpoint_falls_back(tmp_path):
    st = _state()
    with Checkpointer(tmp_path, keep=3) as c:
        c.save(1, st, {"n": 1})
        c.save(2, st._replace(step=jnp.asarray(2, jnp.int32)), {"n": 2})
    for f in (tmp_path / "2").rglob("*"):
        if f.is_file() and f.stat().st_size > 0:
            f.write_bytes(b"garbage")
    with Checkpointer(tmp_path) as c, pytest.warns(UserWarning, match="unreadable"):
        restored, meta, s = c.restore(abstract_like(st))
    assert s == 1 and meta == {"n": 1}


def test_keys_round_trip_and_restore_onto_a_mesh(tmp_path):
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    tree = {"key": jax.random.split(jax.random.key(5), 8), "x": jnp.arange(8.0)}
    with Checkpointer(tmp_path) as c:
        c.save(0, tree)
        mesh = Mesh(np.array(jax.devices()), ("data",))
        target = abstract_like(tree, NamedSharding(mesh, P("data")))
        got, _, _ = c.restore(target)
    assert jnp.issubdtype(got["key"].dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(got["key"]),
                                  jax.random.key_data(tree["key"]))
    assert got["x"].sharding.spec == P("data")


def test_a_resumed_fit_is_placed_like_a_fresh_one(tmp_path):
    """A restore comes back committed to its device; ``fit`` hands the loop arrays placed
    as the fresh state was (uncommitted), so a jitted step does not compile again."""
    from jaxkit.checkpoint import uncommitted

    st = _state()
    assert not st.params["w"].committed
    key = jax.random.key(2)
    training.fit(key, st, STEP, _batch, steps=2, checkpoint_dir=tmp_path, checkpoint_every=1)
    with Checkpointer(tmp_path) as c:
        raw, _, _ = c.restore(abstract_like(st))
    assert raw.params["w"].committed  # what orbax returns
    n = STEP._cache_size()
    res = training.fit(key, st, STEP, _batch, steps=3, checkpoint_dir=tmp_path,
                       checkpoint_every=1)
    assert res.resumed_from == 2 and not res.state.params["w"].committed
    assert STEP._cache_size() == n  # the resumed steps reused the fresh run's program
    free = uncommitted({"k": jax.random.key(3), "x": raw.params["w"]})
    assert not free["x"].committed and not free["k"].committed
    np.testing.assert_array_equal(jax.random.key_data(free["k"]),
                                  jax.random.key_data(jax.random.key(3)))
    np.testing.assert_array_equal(free["x"], raw.params["w"])


def test_resume_never_restores_a_step_beyond_the_request(tmp_path):
    """A folder holding a longer run's checkpoints: fit(steps=4) restores step 3 (at or
    below 4), not step 9, and ends where an uninterrupted 4-step run ends."""
    key = jax.random.key(2)
    training.fit(key, _state(), STEP, _batch, steps=9, checkpoint_dir=tmp_path,
                 checkpoint_every=3, keep=5)
    short = training.fit(key, _state(), STEP, _batch, steps=4)
    res = training.fit(key, _state(), STEP, _batch, steps=4, checkpoint_dir=tmp_path,
                       checkpoint_every=3, keep=5)
    assert res.resumed_from == 3 and int(res.state.aux) == 4
    np.testing.assert_array_equal(res.state.params["w"], short.state.params["w"])
    # nothing at or below the request: a fresh start, not a state from the future
    with Checkpointer(tmp_path / "only-late", keep=2) as c:
        c.save(9, _state(), {})
    res2 = training.fit(key, _state(), STEP, _batch, steps=2,
                        checkpoint_dir=tmp_path / "only-late", checkpoint_every=5)
    assert res2.resumed_from == 0 and int(res2.state.aux) == 2


def test_a_finished_training_resumed_keeps_its_history(tmp_path):
    """Killed after its last checkpoint (before the caller saved its result), a rerun has
    nothing left to train and still returns the whole loss history."""
    key = jax.random.key(3)
    first = training.fit(key, _state(), STEP, _batch, steps=6, checkpoint_dir=tmp_path,
                         checkpoint_every=2, log_every=1)
    again = training.fit(key, _state(), STEP, _batch, steps=6, checkpoint_dir=tmp_path,
                         checkpoint_every=2, log_every=1)
    assert again.resumed_from == 6 and again.history == []
    assert again.full_history == first.history and len(first.history) == 6


def test_a_changed_configuration_does_not_resume(tmp_path):
    """Checkpoints written under another fingerprint (configuration, seed or version) are
    removed and the run starts from step 0, saying so; the same fingerprint resumes."""
    key = jax.random.key(4)
    with training.use_fingerprint("config-a"):
        training.fit(key, _state(), STEP, _batch, steps=4, checkpoint_dir=tmp_path,
                     checkpoint_every=2)
        same = training.fit(key, _state(), STEP, _batch, steps=6, checkpoint_dir=tmp_path,
                            checkpoint_every=2)
    assert same.resumed_from == 4 and same.restarted == ""
    with training.use_fingerprint("config-b"), pytest.warns(UserWarning, match="another"):
        other = training.fit(key, _state(), STEP, _batch, steps=6, checkpoint_dir=tmp_path,
                             checkpoint_every=2)
    assert other.resumed_from == 0 and "removed" in other.restarted
    assert int(other.state.aux) == 6
    with Checkpointer(tmp_path) as c:
        assert c.read_meta()["_jaxkit_fingerprint"] == "config-b"


def test_a_checkpoint_with_flipped_bits_falls_back_to_the_previous_one(tmp_path):
    """Bytes changed inside the saved arrays (which the storage may decode without error)
    fail the checksum: the previous checkpoint is restored."""
    st = _state()
    st2 = st._replace(params={"w": jnp.asarray([1.0, 2.0, 3.0]), "b": jnp.asarray(0.5)})
    import orbax.checkpoint as ocp

    with Checkpointer(tmp_path, keep=3) as c:
        c.save(1, st, {"n": 1})
        c.save(2, st2, {"n": 2})
        meta = c.read_meta(2)
    # the same checkpoint re-saved with the checksum of other values: what a flipped bit
    # in the data looks like from the restore's side
    forged = dict(meta, _jaxkit_digest="0" * 64)
    with Checkpointer(tmp_path, keep=3) as c:
        c._mngr.delete(2)
        c._mngr.save(2, args=ocp.args.Composite(
            state=ocp.args.StandardSave(st2), meta=ocp.args.JsonSave(forged)), force=True)
        c._mngr.wait_until_finished()
    with Checkpointer(tmp_path) as c, pytest.warns(UserWarning, match="checksum"):
        restored, meta, s = c.restore(abstract_like(st))
    assert s == 1 and meta == {"n": 1}
    np.testing.assert_array_equal(restored.params["w"], st.params["w"])


def test_a_full_disk_is_one_line(tmp_path, monkeypatch):
    import errno

    from jaxkit.checkpoint import CheckpointError

    c = Checkpointer(tmp_path)

    def full(*a, **k):
        raise RuntimeError("orbax failed") from OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(c._mngr, "save", full)
    with pytest.raises(CheckpointError, match="no space left on the device") as e:
        c.save(1, _state(), {})
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)
    c.close()
