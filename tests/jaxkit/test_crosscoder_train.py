"""jaxkit.crosscoder.train: sharded top-k, 1 vs 8 devices, checkpoints and resume,
kill-and-resume, 2-process jax.distributed, divergence, refused resumes, the CLI
(jaxkit.crosscoder.cli) and its reliability (refused runs, kills, corrupt checkpoints)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxkit.kernels import crosscoder as cc

from jaxkit import distributed as jd
from jaxkit.crosscoder import sharding as sh
from jaxkit.crosscoder.store import ActivationStore
from jaxkit.crosscoder.train import TrainingDiverged, read_checkpoint_meta, restore, train

WORKERS = Path(__file__).parent / "crosscoder_workers"
sys.path.insert(0, str(WORKERS))
from cc_common import BATCH, N_LATENTS, SEED, WINDOW, D, train_kwargs, write_store  # noqa: E402

STEPS = 12
TOL = dict(rtol=1e-5, atol=1e-6)


def mesh_of(axes):
    n = int(np.prod(list(axes.values())))
    return jd.make_mesh(axes, devices=jax.devices()[:n])


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cc_store")
    write_store(d)
    return d


def run(store_dir, mesh_axes, steps=STEPS, **kw):
    store = ActivationStore(store_dir, batch_size=BATCH, window=WINDOW, seed=SEED)
    return train(jax.random.key(SEED), store, steps=steps, mesh=mesh_of(mesh_axes),
                 **train_kwargs(**kw))


@pytest.fixture(scope="module")
def reference(store_dir):
    """The uninterrupted single-device run every other run is compared with."""
    return run(store_dir, {"data": 1})


def assert_params_close(a, b, **tol):
    for f in cc.Params._fields:
        np.testing.assert_allclose(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)),
                                   err_msg=f, **(tol or TOL))


# --------------------------------------------------------------------------- top-k


def _hlo(fn, x):
    return fn.lower(x).compile().as_text()


def test_xla_topk_gathers_everything_and_ours_does_not():
    """What XLA does with lax.top_k on a (data, model)-sharded (B, F) array (jax 0.10,
    CPU): all-gathers the full array and takes the top-k everywhere. Ours gathers only
    the k candidates per row over `model`."""
    mesh = mesh_of({"data": 4, "model": 2})
    B, F, k = 16, 64, 4
    x = jax.ShapeDtypeStruct((B, F), jnp.float32, sharding=NamedSharding(mesh, P("data", "model")))
    xla = _hlo(jax.jit(lambda p: cc.topk(p, k)), x)
    assert f"f32[{B},{F}]" in "".join(ln for ln in xla.splitlines() if "all-gather(" in ln)
    ours = _hlo(jax.jit(lambda p: sh.topk_mask(p, k, mesh)), x)
    gathers = [ln for ln in ours.splitlines() if "all-gather(" in ln]
    assert gathers and all(f"[{B // 4},{2 * k}]" in ln for ln in gathers), gathers


@pytest.mark.parametrize("axes", [{"data": 8}, {"data": 4, "model": 2}, {"data": 1, "model": 8}])
def test_sharded_topk_equals_lax_top_k(axes):
    mesh = mesh_of(axes)
    x = jax.random.normal(jax.random.key(3), (16, 64))
    x = x.at[0, :10].set(5.0)  # ties: lax.top_k keeps the lowest indices
    for k in (1, 5):
        ref = np.zeros((16, 64), bool)
        np.put_along_axis(ref, np.asarray(jax.lax.top_k(x, k)[1]), True, axis=1)
        got = jax.jit(lambda p, k=k: sh.topk_mask(p, k, mesh))(x)
        np.testing.assert_array_equal(np.asarray(got), ref)
    x = x.at[0, :10].add(jnp.arange(10.0) * 1e-3)  # BatchTopK by threshold: no exact ties
    z_ref, m_ref = cc.batch_topk(x, 3)
    t, m = jax.jit(lambda p: sh.batch_topk_threshold(p, 3 * 16, mesh))(x)
    np.testing.assert_array_equal(np.asarray(x) >= float(t), np.asarray(z_ref) != 0)
    assert float(m) == pytest.approx(float(m_ref))


@pytest.mark.parametrize("activation", ["topk", pytest.param("batch_topk",
                                                               marks=pytest.mark.slow)])
def test_sharded_step_equals_kernel_step_on_one_device(activation):
    key = jax.random.key(0)
    x = jax.random.normal(jax.random.key(1), (4, WINDOW, D))
    params = cc.init(key, D, N_LATENTS, site=(WINDOW,))
    kw = dict(activation=activation, k=1, optimizer=optax.adam(1e-2), k_aux=4, dead_steps=1)
    # the shard-local selections (the sharded trainer's `select`) on one device against
    # the kernel's own; with `select` the kernel takes its dense formulation, so compare
    # with that (the sparse TopK step equals it only to float32 rounding, which Adam's
    # first steps amplify on this test's near-zero encoder gradients)
    i0, s0 = cc.make_train_step(**kw, decoder="dense")
    _, s1 = cc.make_train_step(**kw, select=sh.selector(mesh_of({"data": 1})))
    s0, s1 = jax.jit(s0), jax.jit(s1)
    a = b = i0(params)
    for _ in range(3):
        a, ia = s0(key, a, x)
        b, ib = s1(key, b, x)
    assert_params_close(a.params, b.params, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(float(ia.aux_loss), float(ib.aux_loss), rtol=1e-6)
    assert float(ia.aux_loss) > 0  # AuxK active (dead_steps=1)
    np.testing.assert_array_equal(np.asarray(a.aux.steps_since_fired),
                                  np.asarray(b.aux.steps_since_fired))
    np.testing.assert_allclose(float(a.aux.threshold), float(b.aux.threshold), rtol=1e-6)
    # a one-device mesh trains with the kernel's own step (for TopK: the sparse one)
    _, s2 = sh.make_train_step(mesh_of({"data": 1}), **kw)
    _, s3 = cc.make_train_step(**kw)
    c, _ = jax.jit(s2)(key, i0(params), x)
    d, _ = jax.jit(s3)(key, i0(params), x)
    assert_params_close(c.params, d.params, rtol=0, atol=0)


# --------------------------------------------------------------------------- 1 vs 8


@pytest.mark.parametrize("axes", [{"data": 8}, {"data": 4, "model": 2}])
def test_one_and_eight_devices_give_the_same_params(store_dir, reference, axes):
    res = run(store_dir, axes)
    assert_params_close(res.params, reference.params)
    assert_sharded_like_params(res, axes)
    assert [h["step"] for h in res.history] == list(range(1, STEPS + 1))
    assert all(np.isfinite(h["loss"]) for h in res.history)


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["batch_topk", "jumprelu"])
def test_one_and_eight_devices_other_activations(store_dir, activation):
    kw = dict(activation=activation, sparsity="l0", sparsity_coef=1e-3)
    if activation == "jumprelu":
        kw.update(k=None, k_aux=None)
    one = run(store_dir, {"data": 1}, **kw)
    eight = run(store_dir, {"data": 4, "model": 2}, **kw)
    assert_params_close(eight.params, one.params)
    assert_sharded_like_params(eight, {"model": 2})


def assert_sharded_like_params(res, axes):
    spec = res.state.params.W_dec.sharding.spec
    assert spec[0] == ("model" if "model" in axes else None)
    assert res.state.opt_state[0].mu.W_enc.sharding.spec == res.state.params.W_enc.sharding.spec


# --------------------------------------------------------------------------- checkpoints


def test_resume_onto_another_mesh_equals_uninterrupted_run(store_dir, reference, tmp_path):
    ck = tmp_path / "ck"
    first = run(store_dir, {"data": 4, "model": 2}, steps=6, checkpoint_dir=ck,
                checkpoint_every=3)
    assert first.resumed_from is None and sorted(int(p.name) for p in ck.iterdir()) == [3, 6]
    meta = read_checkpoint_meta(ck)
    assert meta["step"] == 6 and meta["position"] == [0, 6]  # 6 of 11 batches of epoch 0
    st, pos, cfg = restore(ck, mesh=mesh_of({"data": 2, "model": 4}))
    assert st.params.W_enc.sharding.spec[-1] == "model" and len(st.params.W_enc.sharding
                                                                  .device_set) == 8
    assert int(st.step) == 6 and tuple(pos) == (0, 6) and cfg["n_latents"] == N_LATENTS
    assert_params_close(sh.to_host(st.params), first.params, rtol=0, atol=0)
    second = run(store_dir, {"data": 8}, checkpoint_dir=ck, checkpoint_every=3, resume=True)
    assert second.resumed_from == 6 and second.history[0]["step"] == 7
    assert_params_close(second.params, reference.params)

    with pytest.raises(ValueError, match=r"`checkpoint_dir`.*incompatible.*n_latents: "
                                         r"checkpoint 16, this run 32.*k: checkpoint 3"):
        run(store_dir, {"data": 1}, n_latents=32, k=4, checkpoint_dir=ck, resume=True)
    with pytest.raises(ValueError, match=r"`checkpoint_dir`.*incompatible.*activation"):
        run(store_dir, {"data": 1}, activation="batch_topk", checkpoint_dir=ck, resume=True)
    with pytest.raises(ValueError, match="already holds checkpoints.*resume=True"):
        run(store_dir, {"data": 1}, checkpoint_dir=ck)


def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(store_dir, tmp_path):
    poison = optax.scale_by_schedule(lambda c: jnp.where(c == 6, jnp.nan, 1.0))
    opt = optax.chain(optax.adam(1e-2), poison)  # the 7th update is NaN
    ck = tmp_path / "ck"
    with pytest.raises(TrainingDiverged, match=r"diverged at step 7.*latest checkpoint: step 5"):
        run(store_dir, {"data": 1}, optimizer=opt, checkpoint_dir=ck, checkpoint_every=5,
            log_every=5)
    assert sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) == [5]
    st, _, _ = restore(ck, mesh=mesh_of({"data": 1}), optimizer=opt)
    assert all(np.isfinite(np.asarray(v)).all() for v in st.params)


def test_bad_arguments(store_dir, tmp_path):
    store = ActivationStore(store_dir, batch_size=BATCH, window=WINDOW, seed=SEED)
    with pytest.raises(ValueError, match="`window` 3 differs from the store's window 2"):
        train(0, store, n_latents=16, k=3, steps=2, window=3, mesh=mesh_of({"data": 1}))
    odd = ActivationStore(store_dir, batch_size=12, window=WINDOW)
    with pytest.raises(ValueError, match="`batch_size` 12 must be a multiple of the mesh's "
                                         "data axis \\(8\\)"):
        train(0, odd, n_latents=16, k=3, steps=2, window=WINDOW, mesh=mesh_of({"data": 8}))
    with pytest.raises(ValueError, match="`n_latents` 17 must be a multiple of the mesh's "
                                         "model axis"):
        train(0, store, n_latents=17, k=3, steps=2, window=WINDOW,
              mesh=mesh_of({"data": 4, "model": 2}))
    with pytest.raises(ValueError, match="`resume=True` needs a `checkpoint_dir`"):
        train(0, store, n_latents=16, k=3, steps=2, window=WINDOW, resume=True,
              mesh=mesh_of({"data": 1}))
    with pytest.raises(ValueError, match="`k` must be <= n_latents"):
        train(0, store, n_latents=16, k=17, steps=2, window=WINDOW, mesh=mesh_of({"data": 1}))
    with pytest.raises(ValueError, match="`k_aux` must be <= n_latents"):
        train(0, store, n_latents=16, k=3, k_aux=17, steps=2, window=WINDOW,
              mesh=mesh_of({"data": 1}))
    with pytest.raises(ValueError, match="`steps` must be a positive integer"):
        train(0, store, n_latents=16, k=3, steps=0, window=WINDOW)


# --------------------------------------------------------------------------- subprocesses


def _worker(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, str(WORKERS / "cc_worker.py"), *map(str, args)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finished_steps(ck: Path) -> list[int]:
    return sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) if ck.exists() else []


def test_kill_and_resume_matches_uninterrupted_run(store_dir, reference, tmp_path):
    """SIGKILL a checkpointing run after its first checkpoint; resume=True finishes it
    with the same params as the uninterrupted run."""
    ck, out = tmp_path / "ck", tmp_path / "params.npz"
    p = _worker(store_dir, out, STEPS, "--ckpt", ck, "--every", 3, "--sleep", 0.25)
    deadline = time.monotonic() + 120
    while not _finished_steps(ck) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    log = p.communicate(timeout=30)[0].decode()
    assert p.returncode == -signal.SIGKILL, log[-2000:]  # killed, not finished
    assert "done" not in log and not out.exists()
    killed_at = _finished_steps(ck)[-1]
    assert 3 <= killed_at < STEPS
    q = _worker(store_dir, out, STEPS, "--ckpt", ck, "--every", 3, "--resume")
    log = q.communicate(timeout=120)[0].decode()
    assert q.returncode == 0, log[-3000:]
    got = np.load(out)
    assert int(got["resumed_from"]) >= killed_at
    assert_params_close(cc.Params(*(got[f] for f in cc.Params._fields)), reference.params)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_single_process(store_dir, reference, tmp_path):
    """jax.distributed on localhost (gloo): 2 processes x 4 CPU devices, mesh data=4 x
    model=2, each process reading its own rows of every batch, orbax checkpoints on a
    shared folder; the params equal the single-process run."""
    port, out, ck = _free_port(), tmp_path / "mp.npz", tmp_path / "ck"
    procs = [_worker(store_dir, out, STEPS, "--ckpt", ck, "--every", 6, "--devices", 4,
                     "--mesh", "data=4,model=2", "--mp", i, 2, port) for i in range(2)]
    logs = [p.communicate(timeout=240)[0].decode() for p in procs]
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    assert _finished_steps(ck) == [6, 12]
    got = np.load(out)
    assert_params_close(cc.Params(*(got[f] for f in cc.Params._fields)), reference.params)


def test_resume_refuses_changed_training_settings(store_dir, tmp_path):
    ck = tmp_path / "ck"
    run(store_dir, {"data": 1}, steps=4, checkpoint_dir=ck, checkpoint_every=2)
    for over, name in ((dict(lr=2 * 1e-2), "lr"), (dict(dead_steps=4), "dead_steps"),
                       (dict(k_aux=2), "k_aux"), (dict(sparsity_coef=0.1), "sparsity_coef")):
        with pytest.raises(ValueError, match=rf"incompatible run \({name}: checkpoint"):
            run(store_dir, {"data": 1}, steps=6, checkpoint_dir=ck, resume=True, **over)
    with pytest.raises(ValueError, match=r"`steps` 3 is below the step of the checkpoint"):
        run(store_dir, {"data": 1}, steps=3, checkpoint_dir=ck, resume=True)
    assert _finished_steps(ck) == [2, 4]  # nothing was written by the refused runs


# --------------------------------------------------------------------------- CLI


def _cli(store_dir, out, *extra):
    from typer.testing import CliRunner

    from jaxkit.crosscoder.cli import app

    base = ["train", "--activations", str(store_dir), "--n-latents", str(N_LATENTS), "--k",
            "3", "--window", str(WINDOW), "--batch-size", str(BATCH), "--lr", "0.01",
            "--k-aux", "4", "--dead-steps", "3", "--out", str(out), "--checkpoint-every", "4",
            "--log-every", "2", "--mesh", "data=4,model=2"]
    return CliRunner().invoke(app, [*base, *map(str, extra)])


def _metric_steps(out):
    return [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]


def test_cli_train_writes_metrics_params_and_resumes(store_dir, reference, tmp_path):
    from safetensors.numpy import load_file

    out = tmp_path / "run"
    r = _cli(store_dir, out, "--steps", 8)
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [2, 4, 6, 8]
    assert {"fvu", "l0", "dead_fraction", "loss", "epoch", "cursor"} <= set(lines[0])
    r = _cli(store_dir, out, "--steps", STEPS, "--resume")
    assert r.exit_code == 0, r.output
    assert "resumed from step 8" in r.output
    assert _metric_steps(out) == [2, 4, 6, 8, 10, 12]
    params = load_file(str(out / "params.safetensors"))
    assert_params_close(cc.Params(**params), reference.params)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["resumed_from"] == 8 and cfg["window"] == WINDOW and cfg["steps"] == STEPS
    r = _cli(tmp_path / "missing", out, "--steps", 2)
    assert r.exit_code == 2 and "does not exist" in " ".join(r.output.split())


def test_cli_refused_runs_leave_the_output_alone(store_dir, tmp_path):
    out = tmp_path / "run"
    assert _cli(store_dir, out, "--steps", 4).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert set(before) == {"metrics.jsonl", "params.safetensors", "config.json"}
    r = _cli(store_dir, out, "--steps", 4)  # checkpoints there, no --resume
    assert r.exit_code == 2 and "already holds checkpoints" in " ".join(r.output.split())
    for extra, name in ((("--lr", 0.02), "lr"), (("--dead-steps", 5), "dead_steps")):
        r = _cli(store_dir, out, "--steps", 8, "--resume", *extra)
        assert r.exit_code == 2 and f"({name}: checkpoint" in " ".join(r.output.split())
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_cli_resume_after_a_kill_logs_each_step_once_and_skips_a_corrupt_checkpoint(
        store_dir, reference, tmp_path):
    """A run killed after logging step 8 but whose checkpoint 8 is unreadable (a kill
    during the save, or a damaged disk): --resume restores checkpoint 4, drops the lines
    logged after it, and ends with the uninterrupted run's parameters."""
    from safetensors.numpy import load_file

    out = tmp_path / "run"
    assert _cli(store_dir, out, "--steps", 8).exit_code == 0
    (out / "params.safetensors").unlink()
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 10, "loss": 1.0')  # a line cut by the kill
    for p in (out / "checkpoints" / "8").rglob("*"):
        if p.is_file() and "meta" not in p.parts:
            p.write_bytes(b"not a checkpoint")
    with pytest.warns(UserWarning, match="checkpoint 8 .* unreadable"):
        r = _cli(store_dir, out, "--steps", STEPS, "--resume")
    assert r.exit_code == 0, r.output
    assert "resumed from step 4" in r.output
    assert _metric_steps(out) == [2, 4, 6, 8, 10, 12]
    assert_params_close(cc.Params(**load_file(str(out / "params.safetensors"))),
                        reference.params)
