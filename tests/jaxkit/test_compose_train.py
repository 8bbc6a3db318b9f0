"""Candidate training: a killed training of candidates with the Mamba-2 block resumes to
the same parameters, bfloat16 activations train (float32 master weights, close to the
float32 run), a non-finite loss stops with a clear message and keeps the last finite
checkpoint, and candidates trained together are independent of each other."""

import jax
import numpy as np
import pytest

from jaxkit.compose import Arch, CandidateDiverged, TrainSettings, load_corpus, train_candidates
from jaxkit.compose import train as T

ARCH = Arch("AA", width=8, heads=2, d_state=2, context=8)
STRINGS = ["AD", "DA"]  # attention and the Mamba-2 block: a supernet of two letters
SET = TrainSettings(steps=4, batch=2, lr=3e-3, warmup=1, chunk=2, checkpoint_every=1,
                    n_val=4)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(max_bytes=20_000)


@pytest.fixture(scope="module")
def reference(corpus):
    return train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, SET)


def test_kill_and_resume_gives_the_same_parameters(corpus, reference, tmp_path, monkeypatch):
    real = T.sample_chunk
    calls = {"n": 0}

    def dying(*a):
        calls["n"] += 1
        if calls["n"] == 2:  # chunk 0 (the reference compiled the step), then killed
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(T, "sample_chunk", dying)
    with pytest.raises(KeyboardInterrupt):
        train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, SET,
                         checkpoint_dir=tmp_path)
    monkeypatch.setattr(T, "sample_chunk", real)
    assert any(tmp_path.iterdir())
    resumed = train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, SET,
                               checkpoint_dir=tmp_path)
    assert resumed.letters == "AD" and resumed.compile_s == 0.0  # compiled once, reused
    for a, b in zip(jax.tree.leaves(resumed.params), jax.tree.leaves(reference.params),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(resumed.val_bpb, reference.val_bpb)
    assert np.all(reference.val_bpb < 8.5)  # near-uniform bytes at worst


@pytest.mark.slow
def test_bfloat16_training_keeps_float32_weights_and_tracks_float32(corpus, reference):
    s16 = TrainSettings(**{**SET.__dict__, "dtype": "bfloat16"})
    r = train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, s16)
    assert all(a.dtype == np.float32 for a in jax.tree.leaves(r.params))
    losses = np.asarray([h["loss"] for h in r.history], float).reshape(-1)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]  # it learns
    # same initialisation and batches: bfloat16 activations stay within 0.05 bits/byte
    np.testing.assert_allclose(r.val_bpb, reference.val_bpb, atol=0.05)
    assert np.any(r.val_bpb != reference.val_bpb)  # and really ran in bfloat16


@pytest.mark.slow
def test_candidates_are_independent(corpus, reference):
    keys = jax.random.split(jax.random.split(jax.random.key(0), 3)[0], 2)
    alone = train_candidates(jax.random.key(0), ARCH, ["DA"], corpus, SET,
                             init_keys=keys[1:])
    np.testing.assert_allclose(alone.val_bpb[:, 0], reference.val_bpb[:, 1], rtol=1e-5)


@pytest.mark.slow
def test_divergence_stops_with_the_checkpoint_named(corpus, tmp_path):
    bad = TrainSettings(steps=4, batch=2, lr=1e30, warmup=1, chunk=2, checkpoint_every=1,
                        n_val=4, clip=1e30)
    with pytest.raises(CandidateDiverged, match=f"checkpoint is kept in {tmp_path}"):
        train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, bad,
                         checkpoint_dir=tmp_path)


def test_bad_candidate_lists(corpus):
    with pytest.raises(ValueError, match="at least one"):
        train_candidates(jax.random.key(0), ARCH, [], corpus, SET)
    with pytest.raises(ValueError, match="unknown letter"):
        train_candidates(jax.random.key(0), ARCH, ["AQ"], corpus, SET)
    with pytest.raises(ValueError, match="deeper"):
        train_candidates(jax.random.key(0), ARCH, ["AAA"], corpus, SET)


@pytest.mark.slow
def test_mesh_data_and_candidate_axes_give_the_same_losses(corpus, reference):
    from jaxkit.distributed import make_mesh
    mesh = make_mesh({"data": 2, "model": 2}, devices=jax.devices()[:4])
    r = train_candidates(jax.random.key(0), ARCH, STRINGS, corpus, SET, mesh=mesh)
    np.testing.assert_allclose(r.val_bpb, reference.val_bpb, rtol=1e-4)
    with pytest.raises(ValueError, match="'model' size"):
        train_candidates(jax.random.key(0), ARCH, ["MS"], corpus, SET, mesh=mesh)


def test_routes_send_each_layer_to_its_letter():
    strings = ["AMS", "MA", "SSS", "AAS"]
    want = {(c, i): x for c, st in enumerate(strings) for i, x in enumerate(st)}
    for groups, shapes in ((1, [(3, 1, 2), (3, 1, 1), (3, 1, 3)]),  # most per layer
                           (2, [(3, 2, 1), (3, 2, 1), (3, 2, 2)])):  # and group
        idx_valid = T.routes(strings, 3, "AMS", groups=groups)
        got = {}
        for j, (idx, valid) in enumerate(idx_valid):
            for i in range(3):
                for g in range(groups):
                    for c in idx[i, g][valid[i, g]]:  # numbered within the group
                        got[(int(c) + g * 4 // groups, i)] = "AMS"[j]
        assert got == want  # candidate 1's third layer (padding): none
        assert [i.shape for i, _ in idx_valid] == shapes
    with pytest.raises(ValueError, match="must divide"):
        T.routes(strings, 3, "AMS", groups=3)


def test_routed_step_equals_each_candidate_trained_alone():
    """Two routed steps of three candidates (one padded with an identity layer; two share
    a block at the first layer) give each candidate's blocks the parameters of two plain
    optax steps on its own model."""
    import chex
    import optax
    from flax import nnx

    from jaxkit.compose.model import extract, lm_loss, supernet_from_params

    arch = Arch("AA", width=8, heads=2, d_state=2, context=8)
    strings, letters = ["AM", "MA", "A"], "AM"
    s = TrainSettings(steps=2, batch=2, lr=1e-2, warmup=1, chunk=2, n_val=4, clip=0.5)
    init, chunk, _ = T._programs(arch, s, "float32", letters)
    state = init(jax.random.split(jax.random.key(1), 3), T.routes(strings, 2, letters))
    p0 = T.to_supernet_params(jax.device_get(state.params), 2)
    batches = jax.random.randint(jax.random.key(2), (2, 2, 9), 0, 256)
    new, info = chunk(jax.random.key(3), state, batches)
    p1 = T.to_supernet_params(jax.device_get(new.params), 2)

    def model_of(p, c, st):
        one = jax.tree.map(lambda a: a[c], p)
        return extract(supernet_from_params(arch, one, letters=letters), st)

    opt = T._optimizer(s)
    first = []
    for c, st in enumerate(strings):
        gd, params, rest = nnx.split(model_of(p0, c, st), nnx.Param, ...)

        @jax.jit
        def step(params, o, b, gd=gd, rest=rest):
            val, g = jax.value_and_grad(
                lambda p: lm_loss(nnx.merge(gd, p, rest)(b[:, :-1]), b[:, 1:]))(params)
            u, o = opt.update(g, o, params)
            return optax.apply_updates(params, u), o, val

        o = opt.init(params)
        for i, b in enumerate(batches):
            params, o, val = step(params, o, b)
            if i == 0:
                first.append(val)
        want = nnx.state(nnx.merge(gd, params, rest), nnx.Param)
        got = nnx.state(model_of(p1, c, st), nnx.Param)
        chex.assert_trees_all_close(got, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(info.loss[0], np.mean(first), rtol=1e-5)
    assert bool(info.finite)


def test_candidates_over_the_model_axis_route_without_traffic(corpus):
    """On a "model" axis each device routes its own group of candidates: the compiled
    step moves no activations between devices (no all-gather, all-to-all or permute);
    its only collectives are scalars (the loss, the gradient norm, finiteness)."""
    import re

    from jaxkit.distributed import make_mesh
    mesh = make_mesh({"data": 1, "model": 2}, devices=jax.devices()[:2])
    one = TrainSettings(steps=1, batch=2, lr=3e-3, warmup=1, chunk=1, n_val=2)
    T._COMPILED.clear()
    r = train_candidates(jax.random.key(0), Arch("AA", width=8, heads=2, context=8),
                         ["AM", "MA", "AA", "MM"], corpus, one, mesh=mesh)
    assert np.all(np.isfinite(r.val_bpb))
    ((compiled, _),) = T._COMPILED.values()
    hlo = compiled.as_text()
    assert not re.search(r"\b(all-gather|all-to-all|collective-permute|reduce-scatter)", hlo)
    operands = [ln.split("=", 1)[1].split("all-reduce")[0] for ln in hlo.splitlines()
                if re.search(r"all-reduce(-start)?\(", ln)]
    shapes = [d for op in operands for d in re.findall(r"\w+\[([\d,]*)\]", op)]
    assert shapes and all(d == "" or ("," not in d and int(d) <= 8) for d in shapes), shapes
