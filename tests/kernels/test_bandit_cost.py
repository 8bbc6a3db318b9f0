"""The cost-aware Ballad index (kernels/bandit/ballad_cost.py) against a float64 NumPy
reference written from its docstring: index per unit cost, the budget's pacing reserve,
the plain index at cost_weight 0, one compilation for runs with different prices
(vmap = loop), and bad input eagerly and under jit."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import bandit as bd

F64 = jnp.float64
K = 3
KW = dict(gamma=0.8, alpha=0.5, decay=0.5, q=0.7)


def _np_ballad_index(parents, score, arm, time, t, pulls, *, gamma, alpha, decay, q):
    """Ballad's index from its docstring, dense float64 (inf for an arm with no data)."""
    n = len(score)
    best_parent = np.array([max([score[p] for p in parents[v] if p >= 0], default=0.0)
                            for v in range(n)])
    gain = np.maximum(score - best_parent, 0)
    a = np.zeros((n, n))
    for v in range(n):
        ps = [p for p in parents[v] if p >= 0]
        for u in ps:
            a[v, u] = 1 / len(ps)
    c = np.linalg.solve(np.eye(n) - decay * a.T, gain)
    w = gamma ** (t - time.astype(np.float64))
    n_k = np.array([w[arm == k].sum() for k in range(K)])
    out = np.full(K, np.inf)
    for k in range(K):
        m = arm == k
        if pulls[k] == 0 or n_k[k] == 0:
            continue
        order = np.argsort(score[m], kind="stable")
        cw = np.cumsum(w[m][order])
        quant = score[m][order][np.searchsorted(cw, q * cw[-1] * (1 - 1e-9))]
        out[k] = ((w[m] * c[m]).sum() / n_k[k] + quant
                  + np.sqrt(2 * alpha * np.log(max(n_k.sum(), 1)) / n_k[k]))
    return out


def _np_cost_index(plain, costs, pulls, t, *, cost_weight, budget, horizon):
    costs = np.asarray(costs, np.float64)
    rel = (costs.min() / costs) ** cost_weight
    idx = np.where(np.isinf(plain), plain, plain * rel)
    left = max(horizon - t - 1, 0)
    ok = pulls @ costs + costs + left * costs.min() <= budget
    return np.where(ok, idx, -np.inf)


@functools.cache
def _random_run(seed, steps=9):
    """``steps`` random (arm, reward, parents) updates of one Ballad genealogy (the inner
    state does not depend on the prices); returns the inner states after each and the
    NumPy genealogy."""
    rng = np.random.default_rng(seed)
    roots = rng.random(2)
    pol = bd.ballad(K, capacity=16, dtype=F64, **KW)
    update = jax.jit(pol.update)
    state = bd.ballad_add_roots(pol.init(), jnp.asarray(roots))
    parents, score, arm, time = [(-1, -1)] * 2, list(roots), [-1, -1], [0, 0]
    states = []
    for t in range(steps):
        ps = sorted(rng.choice(len(score), size=2, replace=False).tolist())
        ps = (ps[0], ps[1] if rng.random() < 0.5 else -1)
        a, r = int(rng.integers(K)), float(rng.random())
        state = update(state, jnp.int32(a), jnp.float64(r), jnp.asarray(ps, jnp.int32))
        parents.append(ps)
        score.append(r)
        arm.append(a)
        time.append(t)
        states.append((state, (np.array(parents), np.array(score), np.array(arm),
                               np.array(time), t + 1)))
    return states


@pytest.mark.parametrize("cost_weight,budget,horizon", [
    (1.0, np.inf, 0), (0.5, 6.0, 12), (2.0, 3.5, 10), (0.0, np.inf, 0)])
def test_index_matches_numpy_reference(cost_weight, budget, horizon):
    costs = np.array([1.0, 0.25, 0.05])
    pol = bd.ballad_cost(K, capacity=16, cost_weight=cost_weight, dtype=F64, **KW)
    start = pol.init(costs, budget, horizon)
    index, select = jax.jit(pol.index), jax.jit(pol.select)
    for inner, (par, sc, arm, tm, t) in _random_run(1):
        state = start._replace(inner=inner)
        pulls = np.bincount(arm[arm >= 0], minlength=K)
        np.testing.assert_array_equal(np.asarray(state.inner.pulls), pulls)
        plain = _np_ballad_index(par, sc, arm, tm, t, pulls, **KW)
        want = _np_cost_index(plain, costs, pulls, t, cost_weight=cost_weight,
                              budget=budget, horizon=horizon)
        got = np.asarray(index(None, state))
        np.testing.assert_allclose(got, want, rtol=1e-10)
        sel = int(select(None, state))
        if np.any(want > -np.inf):
            assert sel == int(np.argmax(want))
        else:
            assert sel == int(np.argmin(costs))  # nothing affordable: the cheapest


def test_weight_zero_no_budget_is_the_plain_index_and_weight_one_divides_by_price():
    costs = np.array([2.0, 1.0, 0.5])
    plain = bd.ballad(K, capacity=16, dtype=F64, **KW)
    zero = bd.ballad_cost(K, capacity=16, cost_weight=0.0, dtype=F64, **KW)
    one = bd.ballad_cost(K, capacity=16, cost_weight=1.0, dtype=F64, **KW)
    i_zero, i_one, i_plain_ = jax.jit(zero.index), jax.jit(one.index), jax.jit(plain.index)
    start = zero.init(costs)
    for inner, _ in _random_run(1)[::3]:
        state = start._replace(inner=inner)
        i_plain = np.asarray(i_plain_(None, inner))
        np.testing.assert_array_equal(np.asarray(i_zero(None, state)), i_plain)
        np.testing.assert_allclose(np.asarray(i_one(None, state)),
                                   i_plain * 0.5 / costs, rtol=1e-12)


def test_budget_pacing_never_overspends_and_keeps_the_reserve():
    """Simulated run: rewards favour the expensive arm; with a budget of 40% of always
    calling it, the policy never spends past the budget over the whole horizon."""
    costs = np.array([1.0, 0.2, 0.01])
    horizon, budget = 30, 12.0
    pol = bd.ballad_cost(K, capacity=64, cost_weight=0.0, **KW)
    state = pol.init(costs, budget, horizon)
    select, update = jax.jit(pol.select), jax.jit(pol.update)
    rng = np.random.default_rng(0)
    spent, arms = 0.0, []
    for t in range(horizon):
        a = int(select(None, state))
        spent += costs[a]
        arms.append(a)
        # the reserve for the remaining calls is always there
        assert spent + (horizon - t - 1) * costs.min() <= budget + 1e-6
        r = float(np.clip(rng.normal([0.9, 0.5, 0.2][a], 0.05), 0, 1))
        state = update(state, a, r, jnp.array([-1, -1], jnp.int32))
    assert spent <= budget
    assert arms.count(0) >= 8  # it still buys the best arm while the money lasts
    assert float(np.asarray(state.inner.pulls) @ costs) == pytest.approx(spent, rel=1e-5)


def test_runs_with_different_prices_share_one_compilation_and_vmap_equals_loop():
    pol = bd.ballad_cost(K, capacity=12, **KW)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, arm, reward, parents):
        state = pol.update(state, arm, reward, parents)
        return state, pol.index(None, state)

    prices = np.array([[1.0, 0.3, 0.1], [0.1, 0.3, 1.0], [0.5, 0.5, 0.5], [2.0, 0.01, 0.2]])
    arms = np.array([0, 1, 2, 0, 2, 1])
    rewards = np.array([0.2, 0.9, 0.5, 0.6, 0.1, 0.7])
    par = jnp.array([-1, -1], jnp.int32)
    loop = []
    for c in prices:
        s = pol.init(c, 5.0, 6)
        for a, r in zip(arms, rewards, strict=True):
            s, idx = step(s, jnp.int32(a), jnp.float32(r), par)
        loop.append(np.asarray(idx))
    states = jax.vmap(lambda c: pol.init(c, 5.0, 6))(jnp.asarray(prices))
    vstep = jax.jit(jax.vmap(lambda s, a, r: (lambda s2: (s2, pol.index(None, s2)))(
        pol.update(s, a, r, par)), in_axes=(0, None, None)))
    for a, r in zip(arms, rewards, strict=True):
        states, vidx = vstep(states, jnp.int32(a), jnp.float32(r))
    np.testing.assert_allclose(np.asarray(vidx), np.stack(loop), rtol=1e-6)
    # the prices change the index: the same history ranks arms differently
    assert len({tuple(np.argsort(-x)) for x in loop}) > 1


@pytest.mark.parametrize("make,match", [
    (lambda p: p.init([1.0, -1.0, 0.5]), "`costs` must be finite and > 0"),
    (lambda p: p.init([1.0, np.nan, 0.5]), "`costs` must be finite and > 0"),
    (lambda p: p.init([1.0, 0.5]), r"`costs` must have shape \(3,\)"),
    (lambda p: p.init([1.0, 1.0, 0.5], budget=0.0), "`budget` must be > 0"),
    (lambda p: p.init([1.0, 1.0, 0.5], horizon=-2), "`horizon` must be >= 0"),
    (lambda p: jax.jit(p.init)(jnp.array([1.0, 0.0, 0.5])), "`costs` must be finite"),
])
def test_bad_input_names_the_argument(make, match):
    pol = bd.ballad_cost(K, capacity=4)
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(make(pol))


def test_bad_cost_weight():
    with pytest.raises(ValueError, match="`cost_weight` must be >= 0"):
        bd.ballad_cost(K, capacity=4, cost_weight=-1.0)
