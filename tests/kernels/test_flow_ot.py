"""OT couplings for OT-CFM: the Hungarian permutation against scipy's
linear_sum_assignment, Sinkhorn plan marginals, the pair-sampling schemes (no duplicates
where promised), pytrees, jit/vmap, the OT-CFM loss and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import flow, flow_ot
from scipy.optimize import linear_sum_assignment

B, D = 8, 3


@pytest.fixture(scope="module")
def data():
    x0 = jax.random.normal(jax.random.key(0), (B, D))
    x1 = jax.random.normal(jax.random.key(1), (B, D)) * 0.5 + 1.5
    return x0, x1


@pytest.fixture(scope="module")
def exact_jit():
    return jax.jit(flow_ot.exact_coupling)


@pytest.fixture(scope="module")
def plan(data):
    return jax.jit(lambda a, b: flow_ot.sinkhorn_plan(a, b, epsilon=0.003, threshold=1e-6))(
        *data)


def _check_exact(exact_jit, x0, x1):
    i, j = exact_jit(x0, x1)
    c = np.sum((np.asarray(x0)[:, None] - np.asarray(x1)[None]) ** 2, axis=-1)
    r, s = linear_sum_assignment(c)
    np.testing.assert_array_equal(np.asarray(i), np.arange(len(x0)))
    assert sorted(np.asarray(j).tolist()) == list(range(len(x0)))  # a permutation
    np.testing.assert_allclose(c[np.asarray(i), np.asarray(j)].sum(), c[r, s].sum(),
                               rtol=1e-9)


def test_exact_coupling_matches_scipy(data, exact_jit):
    _check_exact(exact_jit, *data)
    np.testing.assert_allclose(flow_ot.sq_cost(*data),
                               np.sum((np.asarray(data[0])[:, None] - np.asarray(data[1])[None])
                                      ** 2, -1), rtol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_exact_coupling_property(exact_jit, seed):
    k0, k1 = jax.random.split(jax.random.key(seed))
    _check_exact(exact_jit, jax.random.normal(k0, (B, D)), jax.random.normal(k1, (B, D)))


def test_exact_coupling_recovers_known_permutation(exact_jit):
    # x1 is a permuted small perturbation of well-separated x0: OT recovers the permutation
    x0 = jnp.arange(B, dtype=jnp.float64)[:, None] * jnp.ones((1, D))
    perm = jnp.array([3, 0, 7, 1, 6, 2, 5, 4])
    x1 = x0[perm] + 0.01
    _, j = exact_jit(x0, x1)
    np.testing.assert_array_equal(np.asarray(perm)[np.asarray(j)], np.arange(B))


def test_exact_coupling_pytree_and_vmap(exact_jit):
    x0 = {"a": jax.random.normal(jax.random.key(2), (B, D)), "b": jnp.zeros((B, 1, 1))}
    x1 = {"a": jax.random.normal(jax.random.key(3), (B, D)), "b": jnp.ones((B, 1, 1))}
    i, j = jax.jit(flow_ot.exact_coupling)(x0, x1)
    i2, j2 = exact_jit(x0["a"], x1["a"])  # "b" adds a constant cost
    np.testing.assert_array_equal(j, j2)
    p0, p1 = flow_ot.apply_coupling(x0, x1, i, j)
    np.testing.assert_array_equal(p1["a"], x1["a"][j])
    # vmap over independent minibatches equals a loop
    xs0 = jax.random.normal(jax.random.key(4), (3, B, D))
    xs1 = jax.random.normal(jax.random.key(5), (3, B, D))
    _, jv = jax.jit(jax.vmap(flow_ot.exact_coupling))(xs0, xs1)
    for k in range(3):
        np.testing.assert_array_equal(jv[k], exact_jit(xs0[k], xs1[k])[1])


def test_sinkhorn_plan_marginals(data, plan, exact_jit):
    assert plan.shape == (B, B)
    assert np.all(np.asarray(plan) >= 0)
    np.testing.assert_allclose(np.sum(plan, axis=1), 1 / B, atol=1e-5)
    np.testing.assert_allclose(np.sum(plan, axis=0), 1 / B, atol=1e-5)
    # small epsilon: the plan concentrates on the exact OT permutation
    _, j = exact_jit(*data)
    assert float(jnp.sum(plan[jnp.arange(B), j])) > 0.85


def test_sample_plan_schemes(plan):
    key = jax.random.key(7)
    sample = jax.jit(flow_ot.sample_plan, static_argnames="sampling")
    for sampling in ("permutation", "rows"):
        i, j = sample(key, plan, sampling=sampling)
        np.testing.assert_array_equal(i, np.arange(B))  # each x0 exactly once
    _, j = sample(key, plan, sampling="permutation")
    assert sorted(np.asarray(j).tolist()) == list(range(B))  # and each x1 exactly once
    i, j = sample(key, plan, sampling="no_duplicates")
    pairs = set(zip(np.asarray(i).tolist(), np.asarray(j).tolist(), strict=True))
    assert len(pairs) == B  # distinct pairs
    # drawn pairs lie on the plan's support
    for sampling in flow_ot.SAMPLINGS:
        i, j = sample(key, plan, sampling=sampling)
        assert np.all(np.asarray(plan)[np.asarray(i), np.asarray(j)] > 1e-8)


def test_sample_plan_frequencies_match_plan():
    # a 2x2 plan with known entries: "rows" and "replace" reproduce it in frequency
    p = jnp.array([[0.3, 0.2], [0.1, 0.4]])
    keys = jax.random.split(jax.random.key(0), 4000)
    i, j = jax.vmap(lambda k: flow_ot.sample_plan(k, p, sampling="replace"))(keys)
    freq = np.zeros((2, 2))
    np.add.at(freq, (np.asarray(i).ravel(), np.asarray(j).ravel()), 1)
    np.testing.assert_allclose(freq / freq.sum(), p, atol=0.015)
    _, j = jax.vmap(lambda k: flow_ot.sample_plan(k, p, sampling="rows"))(keys)
    np.testing.assert_allclose(np.mean(np.asarray(j) == 1, axis=0), [0.4, 0.8], atol=0.025)


def test_sinkhorn_coupling_and_ot_cfm_loss(data, exact_jit):
    x0, x1 = data
    key = jax.random.key(3)
    i, j = jax.jit(lambda k: flow_ot.sinkhorn_coupling(k, x0, x1, epsilon=0.05))(key)
    assert sorted(np.asarray(j).tolist()) == list(range(B))
    # the OT-CFM loss equals the CFM loss on the re-paired batch (same key split)
    zero = lambda p, t, x: p * x  # noqa: E731
    loss = jax.jit(lambda p: flow_ot.ot_cfm_loss(zero, p, key, x0, x1))
    _, jj = exact_jit(x0, x1)
    _, kl = jax.random.split(key)
    ref = flow.cfm_batch_loss(zero, 0.0, kl, x0, x1[jj])
    assert float(loss(0.0)) == pytest.approx(float(ref), rel=1e-12)
    assert float(loss(0.0)) == pytest.approx(float(jnp.mean(jnp.square(x1[jj] - x0))))
    # minibatch OT shortens the pairing: lower loss for the zero field than random pairs
    assert float(loss(0.0)) < float(jnp.mean(jnp.square(x1 - x0)))
    assert np.isfinite(float(jax.jit(jax.grad(loss))(0.3)))
    # labels follow x1; sinkhorn coupling path
    y = jnp.arange(B)
    lab = lambda p, t, x, yy: jnp.broadcast_to(yy[:, None], x.shape).astype(x.dtype)  # noqa: E731
    val = jax.jit(lambda a, b: flow_ot.ot_cfm_loss(lab, None, key, a, b, y=y,
                                                   coupling="sinkhorn"))(
        jnp.zeros((B, 1)), y[:, None].astype(float))
    assert float(val) == pytest.approx(0.0, abs=1e-12)


def _clustered(seed, n=32, d=2):
    """Gaussian noise against 4 tight clusters (the flow benchmark's kind of minibatch)."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * rng.normal(size=(4, d))
    x1 = centres[rng.integers(0, 4, n)] + 0.2 * rng.normal(size=(n, d))
    return jnp.asarray(rng.normal(size=(n, d))), jnp.asarray(x1)


_scaling = jax.jit(flow_ot.scaling_sinkhorn_plan,
                   static_argnames=("epsilon", "threshold", "max_iterations"))
_ott = jax.jit(lambda a, b: flow_ot.sinkhorn_plan(a, b, epsilon=0.05, threshold=1e-7,
                                                  max_iterations=10_000))


def test_scaling_sinkhorn_matches_ott_and_marginals():
    """The scaling iterations reach ott-jax's converged log-domain plan (float64, epsilon
    0.05 of the mean cost); columns sum exactly to 1/B, rows to the threshold; at the
    default threshold the pairing cost is ott's to 1%."""
    x0, x1 = _clustered(0)
    n = x0.shape[0]
    ref = np.asarray(_ott(x0, x1))
    plan = np.asarray(_scaling(x0, x1, epsilon=0.05, threshold=1e-9))
    np.testing.assert_allclose(plan.sum(0), 1 / n, rtol=1e-12)
    np.testing.assert_allclose(plan.sum(1), 1 / n, rtol=1e-6)
    np.testing.assert_allclose(plan, ref, atol=1e-4 / n)
    cost = np.asarray(flow_ot.sq_cost(x0, x1))
    dflt = np.asarray(_scaling(x0, x1, epsilon=0.05, threshold=1e-3, max_iterations=1000))
    assert np.abs(dflt.sum(1) - 1 / n).sum() <= 1e-3
    dflt = dflt / dflt.sum(1, keepdims=True) / n  # the "rows" sampling's conditional plan
    indep = cost.mean()
    r, c = linear_sum_assignment(cost)
    assert (cost * ref).sum() < indep - 0.5 * (indep - cost[r, c].mean())  # real OT signal
    np.testing.assert_allclose((cost * dflt).sum(), (cost * ref).sum(), rtol=0.01)
    capped = np.asarray(_scaling(x0, x1, epsilon=0.05, threshold=1e-3, max_iterations=3))
    assert np.abs(capped.sum(1) - 1 / n).sum() > 1e-2  # max_iterations stops it early


def test_scaling_sinkhorn_coupling_jit_vmap_and_loss():
    x0, x1 = _clustered(1)
    pair = jax.jit(lambda k, a, b: flow_ot.sinkhorn_coupling(k, a, b, solver="scaling",
                                                             sampling="rows"))
    i, j = pair(jax.random.key(0), x0, x1)
    np.testing.assert_array_equal(np.asarray(i), np.arange(32))
    ib, jb = jax.vmap(pair, in_axes=(0, None, None))(
        jax.random.split(jax.random.key(0), 3), x0, x1)
    assert jb.shape == (3, 32)
    np.testing.assert_array_equal(np.asarray(jb[0]), np.asarray(
        pair(jax.random.split(jax.random.key(0), 3)[0], x0, x1)[1]))
    plan = np.asarray(_scaling(x0, x1, epsilon=0.05, threshold=1e-3, max_iterations=2000))
    assert np.all(plan[np.asarray(ib), np.asarray(jb)] > 0)  # pairs on the plan's support
    cost = np.asarray(flow_ot.sq_cost(x0, x1))
    assert cost[np.arange(32), np.asarray(j)].mean() < cost.diagonal().mean()
    zero = lambda p, t, x: p * x  # noqa: E731
    loss = jax.jit(lambda p: flow_ot.ot_cfm_loss(zero, p, jax.random.key(2), x0, x1,
                                                 coupling="sinkhorn", sampling="rows",
                                                 sinkhorn_solver="scaling"))
    assert float(loss(0.0)) < float(jnp.mean(jnp.square(x1 - x0)))
    assert np.isfinite(float(jax.jit(jax.grad(loss))(0.3)))


def test_scaling_sinkhorn_far_outlier_gets_no_mass_but_stays_finite():
    """The documented limit of the scaling form: in float32, an x1 farther than ~87
    epsilon (relative to the mean cost) from every x0 gets no mass; the plan stays finite
    (no 0/0) and the other columns keep their marginals."""
    x0, x1 = (x.astype(jnp.float32) for x in _clustered(2))
    x1 = x1.at[0].set(1e3)
    plan = np.asarray(_scaling(x0, x1, epsilon=0.05, threshold=1e-3, max_iterations=50))
    assert np.all(np.isfinite(plan)) and plan[:, 0].sum() == 0
    np.testing.assert_allclose(plan[:, 1:].sum(0), 1 / 32, rtol=1e-5)


def test_bad_input(data):
    x0, x1 = data
    with pytest.raises(ValueError, match="x1"):
        flow_ot.exact_coupling(x0, x1.at[0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="x0"):
        flow_ot.exact_coupling(x0[:4], x1)
    with pytest.raises(ValueError, match="sampling"):
        flow_ot.sample_plan(jax.random.key(0), jnp.eye(3), sampling="topk")
    with pytest.raises(ValueError, match="plan"):
        flow_ot.sample_plan(jax.random.key(0), jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="coupling"):
        flow_ot.ot_cfm_loss(lambda p, t, x: x, None, jax.random.key(0), x0, x1,
                            coupling="greedy")
    with pytest.raises(ValueError, match="`epsilon` must be > 0"):
        flow_ot.scaling_sinkhorn_plan(x0, x1, epsilon=0.0)
    with pytest.raises(ValueError, match="`max_iterations` must be a positive integer"):
        flow_ot.scaling_sinkhorn_plan(x0, x1, max_iterations=0)
    with pytest.raises(ValueError, match="`threshold` must be > 0"):
        flow_ot.scaling_sinkhorn_plan(x0, x1, threshold=0.0)
    with pytest.raises(ValueError, match="x1"):
        flow_ot.scaling_sinkhorn_plan(x0, x1.at[0, 0].set(jnp.inf))
    with pytest.raises(ValueError, match="solver must be one of"):
        flow_ot.sinkhorn_coupling(jax.random.key(0), x0, x1, solver="lbfgs")
    with pytest.raises(ValueError, match="scales the cost by its mean"):
        flow_ot.sinkhorn_coupling(jax.random.key(0), x0, x1, solver="scaling",
                                  scale_cost="max_cost")


@pytest.mark.parametrize("solver", ["host", "emd", "auction"])
def test_exact_coupling_host_solvers_match_scipy_under_jit_and_vmap(data, solver):
    exact = jax.jit(lambda a, b: flow_ot.exact_coupling(a, b, solver=solver))
    _check_exact(exact, *data)
    x0 = jax.random.normal(jax.random.key(3), (3, B, D))
    x1 = jax.random.normal(jax.random.key(4), (3, B, D))
    i, j = jax.jit(jax.vmap(lambda a, b: flow_ot.exact_coupling(a, b, solver=solver)))(x0, x1)
    for r in range(3):
        _check_exact(lambda a, b, r=r: (i[r], j[r]), x0[r], x1[r])
    with pytest.raises(ValueError, match="solver"):
        flow_ot.exact_coupling(*data, solver="lapjv")


def test_exact_coupling_emd_degenerate_costs_and_fallback(data):
    emd = jax.jit(lambda a, b: flow_ot.exact_coupling(a, b, solver="emd"))
    # every assignment is optimal (all costs equal): still a permutation
    z = jnp.zeros((B, D))
    _, j = emd(z, z)
    assert sorted(np.asarray(j).tolist()) == list(range(B))
    # a plan that is not a permutation (as an early-stopped solver could return) falls
    # back to SciPy's assignment
    from unittest import mock

    cost = np.asarray(flow_ot.sq_cost(*data), np.float64)
    with mock.patch("ot.emd", return_value=np.full((B, B), 1.0 / B ** 2)):
        perm = flow_ot._emd_assignment(cost)
    assert np.array_equal(perm, flow_ot._host_assignment(cost))


def test_replace_sampling_memory_is_quadratic_not_cubic():
    # B = 512: categorical(shape=(B,)) over B^2 logits would allocate B^3 Gumbel draws
    # (0.5 GB); inverse-CDF sampling needs O(B^2). Check the compiled temp memory.
    n = 512
    p = jnp.full((n, n), 1.0 / n ** 2)
    f = jax.jit(lambda k, p: flow_ot.sample_plan(k, p, sampling="replace"))
    mem = f.lower(jax.random.key(0), p).compile().memory_analysis()
    assert mem is not None and mem.temp_size_in_bytes < 64 * n * n
    i, j = f(jax.random.key(0), p)
    assert i.shape == j.shape == (n,) and int(i.max()) < n and int(j.max()) < n


def test_host_cost_and_assignment_match_scipy(data):
    x0, x1 = (np.asarray(a, np.float64) for a in data)
    c = flow_ot.host_sq_cost(x0, x1)
    np.testing.assert_allclose(c, ((x0[:, None] - x1[None]) ** 2).sum(-1), atol=1e-10)
    r, col = linear_sum_assignment(c)
    best = c[r, col].sum()
    for solver in ("emd", "host", "auction"):
        perm = flow_ot.host_assignment(c, solver)
        assert perm.dtype == np.int32 and sorted(perm.tolist()) == list(range(B))
        assert c[np.arange(B), perm].sum() == pytest.approx(best, rel=1e-12)
    with pytest.raises(ValueError, match="solver"):
        flow_ot.host_assignment(c, "hungarian")
    with pytest.raises(ValueError, match="square"):
        flow_ot.host_assignment(c[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        flow_ot.host_assignment(np.where(np.eye(B) > 0, np.nan, c))
    with pytest.raises(ValueError, match="sample size"):
        flow_ot.host_sq_cost(x0, x1[:, :1])


def test_cost_without_row_norms_differs_by_row_constants():
    rng = np.random.default_rng(2)
    x0, x1 = rng.normal(size=(20, 2, 3)), rng.normal(size=(20, 2, 3))  # samples flattened
    diff = flow_ot.host_sq_cost(x0, x1) - flow_ot.host_sq_cost(x0, x1, row_norms=False)
    np.testing.assert_allclose(diff, np.repeat(diff[:, :1], 20, axis=1), atol=1e-12)
    np.testing.assert_allclose(diff[:, 0], (x0.reshape(20, -1) ** 2).sum(1), atol=1e-12)


# ---------------------------------------------------------------- no silent garbage


@pytest.mark.parametrize("eps", [0.0, -0.05, float("nan")])
def test_sinkhorn_plan_refuses_bad_epsilon(data, eps):
    """ott-jax returned an all-zero plan for epsilon = 0 and a plan for epsilon < 0."""
    x0, x1 = data
    with pytest.raises(ValueError, match="`epsilon`"):
        flow_ot.sinkhorn_plan(x0, x1, epsilon=eps)
    with pytest.raises(ValueError, match="`epsilon`"):
        flow_ot.sinkhorn_coupling(jax.random.key(0), x0, x1, epsilon=eps)
    with pytest.raises(ValueError, match="`epsilon`"):
        flow_ot.scaling_sinkhorn_plan(x0, x1, epsilon=eps)


@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_huge_and_tiny_samples_are_coupled_as_the_unit_scale_ones(scale):
    """float32 samples of 1e20 overflowed the squared cost: NaN plans and the identity
    permutation as 'optimal'; 1e-25 underflowed it to zero. The samples are now rescaled
    by a power of two (exact), so the couplings equal those at unit scale."""
    rng = np.random.default_rng(0)
    x0 = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
    x1 = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
    ref = flow_ot.exact_coupling(x0, x1)[1]
    assert not np.array_equal(np.asarray(ref), np.arange(6))
    np.testing.assert_array_equal(flow_ot.exact_coupling(x0 * scale, x1 * scale)[1], ref)
    for plan in (flow_ot.sinkhorn_plan, flow_ot.scaling_sinkhorn_plan):
        p_ref, p = plan(x0, x1), plan(x0 * scale, x1 * scale)
        assert bool(jnp.all(jnp.isfinite(p)))
        np.testing.assert_allclose(np.asarray(p), np.asarray(p_ref), rtol=1e-4, atol=1e-7)


def test_failed_solves_are_errors_not_plans(data):
    """epsilon = 1e-30: ott-jax reported converged=True with a plan of total mass 8, the
    scaling solver a plan of mass 1/3; both are now errors naming epsilon."""
    from jaxkit.kernels.checks import clear_errors

    x0, x1 = data
    with pytest.raises(ValueError, match="`epsilon` is too small"):
        flow_ot.sinkhorn_plan(x0, x1, epsilon=1e-30)
    with pytest.raises(ValueError, match="`epsilon` is too small"):
        flow_ot.scaling_sinkhorn_plan(x0, x1, epsilon=1e-30)
    jitted = jax.jit(lambda a, b: flow_ot.scaling_sinkhorn_plan(a, b, epsilon=1e-30))
    with pytest.raises(ValueError, match="`epsilon` is too small"), clear_errors():
        jax.block_until_ready(jitted(x0, x1))


def test_sample_plan_refuses_nan_negative_and_empty_plans():
    key = jax.random.key(0)
    for plan in (jnp.full((3, 3), jnp.nan), -jnp.eye(3), jnp.zeros((3, 3))):
        with pytest.raises(ValueError, match="`plan`"):
            flow_ot.sample_plan(key, plan, sampling="rows")


def test_default_exact_solver_is_the_host_auction_on_cpu_and_optimal():
    """A call that names no solver uses the exact host auction on a CPU (several times
    faster than the device Hungarian there); its assignment is optimal (SciPy's cost) and
    W_2's gradient goes through it (the indices carry no tangent)."""
    from jaxkit.kernels.wasserstein import wasserstein
    assert flow_ot.default_exact_solver() == ("auction" if jax.default_backend() == "cpu"
                                              else "hungarian")
    k0, k1 = jax.random.split(jax.random.key(4))
    x0 = jax.random.normal(k0, (24, 3))
    x1 = jax.random.normal(k1, (24, 3)) + 1.0
    i, j = jax.jit(flow_ot.exact_coupling)(x0, x1)
    c = np.asarray(flow_ot.sq_cost(x0, x1), np.float64)
    r, s = linear_sum_assignment(c)
    assert c[np.asarray(i), np.asarray(j)].sum() == pytest.approx(c[r, s].sum(), rel=1e-6)
    w_default = wasserstein(x0, x1, 2)
    w_hung = wasserstein(x0, x1, 2, solver="hungarian")
    np.testing.assert_allclose(float(w_default), float(w_hung), rtol=1e-6)
    g = jax.grad(lambda a: wasserstein(a, x1, 2, solver="auction"))(x0)
    g_h = jax.grad(lambda a: wasserstein(a, x1, 2, solver="hungarian"))(x0)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_h), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="solver"):
        flow_ot.exact_coupling(x0, x1, solver="simplex")
