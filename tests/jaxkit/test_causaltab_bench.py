"""benchmarks/bench_causaltab.py: its NumPy reference prior draws valid tasks with the
laws of the JAX sampler (edge counts, masks, interventions), and a quick end-to-end run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from jaxkit.kernels.sem.dags import is_acyclic


@pytest.fixture(scope="module")
def bc(load_benchmark):
    return load_benchmark("causaltab")


def test_numpy_prior_draws_valid_padded_tasks(bc):
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, hit, adj = bc.numpy_task(rng, 20, 200)
        assert x.shape == (200, 20) and adj.shape == (20, 20)
        assert np.isfinite(x).all() and bool(is_acyclic(adj.astype(float)))
        d = int(np.flatnonzero(np.abs(x).sum(axis=0) > 0).max()) + 1 if x.any() else 0
        assert not adj[d:].any() and not adj[:, d:].any()
        assert not hit[:, d:].any()


def test_numpy_sf_graph_edge_count(bc):
    rng = np.random.default_rng(1)
    a = bc._np_graph(rng, 1, 12, 10, 2.0)
    assert a.sum() == 2 * 10 - 3 and bool(is_acyclic(a.astype(float)))


@pytest.mark.slow  # compiles the JAX sampler
def test_numpy_and_jax_priors_agree_on_edge_counts(bc):
    import jax
    from jaxkit.kernels import sem

    rng = np.random.default_rng(2)
    e_np = [bc.numpy_task(rng, 20, 200)[2].sum() for _ in range(200)]
    t = sem.sample_tasks(jax.random.key(0), sem.make_prior(), 200, d_max=20, n_max=200)
    e_jax = np.asarray(t.adj).sum(axis=(1, 2))
    se = np.sqrt(np.var(e_np) / 200 + np.var(e_jax) / 200)
    assert abs(np.mean(e_np) - np.mean(e_jax)) < 4 * se


@pytest.mark.slow  # the whole benchmark script end to end
def test_quick_run_without_peers(bc, tmp_path):
    out = tmp_path / "b.json"
    assert bc.main(["--quick", "--no-peers", "--only", "prior", "--json", str(out)]) == 0
    res = json.loads(out.read_text())["results"]["prior"]
    assert res["jax"]["items_per_s"] > 0 and res["numpy"]["items_per_s"] > 0
