"""CausalTab's network: permutation equivariance (variables) and invariance (samples),
padding masks, the acyclicity penalty, and resumed training equal to uninterrupted."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.causal_model.model import ModelConfig, acyclicity, forward, init_params
from jaxkit.causaltab.train import TrainSettings, narrow_prior, train_model

CFG = ModelConfig(dim=8, heads=2, layers=1, ffn=2, max_vars=6)
N, D = 12, 5


@functools.cache
def _fwd():
    return jax.jit(lambda p, x, i, vm, sm: forward(p, CFG, x, i, vm, sm))


@functools.cache
def _data():
    params = init_params(jax.random.key(0), CFG)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    x[:, 1] += 2 * x[:, 0]
    ind = (rng.random((N, D)) < 0.2).astype(np.float32)
    return params, x, ind


def test_equivariant_in_variables_invariant_in_samples():
    params, x, ind = _data()
    f = _fwd()
    ones_d, ones_n = jnp.ones(D, bool), jnp.ones(N, bool)
    p = np.asarray(f(params, x, ind, ones_d, ones_n))
    perm = np.random.default_rng(1).permutation(D)
    pv = np.asarray(f(params, x[:, perm], ind[:, perm], ones_d, ones_n))
    assert np.allclose(pv, p[np.ix_(perm, perm)], atol=1e-5)
    rows = np.random.default_rng(2).permutation(N)
    ps = np.asarray(f(params, x[rows], ind[rows], ones_d, ones_n))
    assert np.allclose(ps, p, atol=1e-5)
    assert np.all(np.diag(p) == 0) and np.all((p >= 0) & (p <= 1))
    assert not np.allclose(p, p[0, 1])  # not a constant output


def test_padding_does_not_change_the_active_block():
    params, x, ind = _data()
    f = _fwd()
    p = np.asarray(f(params, x, ind, jnp.ones(D, bool), jnp.ones(N, bool)))
    xp = np.zeros((N + 3, D + 1), np.float32)
    xp[:N, :D] = x
    xp[N:] = 7.0  # junk in the padding must be ignored
    xp[:, D] = 5.0
    ip = np.zeros_like(xp)
    ip[:N, :D] = ind
    vm = jnp.arange(D + 1) < D
    sm = jnp.arange(N + 3) < N
    pp = np.asarray(jax.jit(lambda *a: forward(params, CFG, *a))(xp, ip, vm, sm))
    assert np.allclose(pp[:D, :D], p, atol=1e-5)
    assert np.all(pp[D, :] == 0) and np.all(pp[:, D] == 0)


def test_acyclicity_zero_on_dag_probabilities_positive_on_cycles():
    dag = jnp.asarray(np.tril(np.full((4, 4), 0.9), -1), jnp.float32)
    assert abs(float(acyclicity(dag))) < 1e-5
    assert float(acyclicity(dag.at[0, 3].set(0.9))) > 0.1


ST = TrainSettings(steps=4, batch=8, lr=3e-3, d_max=5, n_max=8, chunk=2,
                   checkpoint_every=1, warmup=1)


class _Kill(Exception):
    pass


@pytest.mark.slow
def test_killed_training_resumes_to_the_same_parameters(tmp_path):
    prior = narrow_prior(5, 8)
    key = jax.random.key(3)
    full, hist, thr = train_model(key, CFG, ST, end=prior, checkpoint_dir=tmp_path / "a")
    assert len(hist) == 2 and np.isfinite(hist[-1]["loss"])

    def kill(done, rec):
        if done == 2:  # after the checkpoint of chunk 1, before chunk 2's
            raise _Kill
    with pytest.raises(_Kill):
        train_model(key, CFG, ST, end=prior, checkpoint_dir=tmp_path / "b", on_log=kill)
    resumed, hist_b, _ = train_model(key, CFG, ST, end=prior, checkpoint_dir=tmp_path / "b")
    # only chunk 2 ran again; chunk 1's record came back with the checkpoint
    assert [h["step"] for h in hist_b] == [h["step"] for h in hist] == [2, 4]
    assert [h["loss"] for h in hist_b] == [h["loss"] for h in hist]
    for a, b in zip(jax.tree.leaves(full), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    moved = [np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in zip(
        jax.tree.leaves(full), jax.tree.leaves(init_params(jax.random.split(key)[0], CFG)),
        strict=True)]
    assert max(moved) > 0  # training changed the parameters
