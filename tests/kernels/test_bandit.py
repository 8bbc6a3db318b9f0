"""Bandit kernel: deterministic policies replay a float64 NumPy reference step by step,
hand-computed discounted Thompson updates, Thompson posteriors, DAG credit against a dense
solve, Ballad's index and ablations, cost-aware wrapping, the simulator (jit/vmap/loop,
regret, change points), bad input, and 8 devices against one."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import bandit as bd
from scipy import stats

from jaxkit import distributed as jd

K, T = 5, 200
MEANS = np.array([0.5, 0.8, 0.2, 0.65, 0.35])  # best arm is 1 (not the first or the last)
F64, F32 = jnp.float64, jnp.float32


def _tables():
    """(2, T, K) pre-drawn rewards: Bernoulli and clipped Gaussian (float32-exact)."""
    rng = np.random.default_rng(0)
    bern = (rng.random((T, K)) < MEANS).astype(np.float64)
    gauss = np.clip(rng.normal(MEANS, 0.15, size=(T, K)), 0, 1)
    return np.stack([bern, gauss.astype(np.float32).astype(np.float64)])


TABLES = _tables()


# --------------------------------------------------------------------------- references
# Each reference computes a policy's index from the whole history (arms, rewards) so far,
# in float64, straight from the docstring formula (closed forms, not the kernel's
# incremental updates). Ties go to the lowest arm (np.argmax).


def _pulled(arms, k=K):
    return np.bincount(arms, minlength=k).astype(np.float64)


def _ucb(mean, counts, n, scale):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts > 0, mean + np.sqrt(scale * np.log(n) / counts), np.inf)


def ref_ucb1(arms, rewards, *, alpha):
    n_k = _pulled(arms)
    x_k = np.bincount(arms, weights=rewards, minlength=K)
    n = max(n_k.sum(), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n_k > 0, x_k / n_k + alpha * np.sqrt(2 * np.log(n) / n_k), np.inf)


def _discounted_stats(arms, rewards, gamma):
    """N_k = sum_s gamma^(t-1-s) [a_s = k], X_k likewise with r_s: the closed form of
    N <- gamma N + [a = k] applied to every arm every step."""
    t = len(arms)
    w = gamma ** (t - 1 - np.arange(t, dtype=np.float64))
    return (np.bincount(arms, weights=w, minlength=K),
            np.bincount(arms, weights=w * rewards, minlength=K))


def ref_discounted_ucb(arms, rewards, *, gamma, alpha):
    n_k, x_k = _discounted_stats(arms, rewards, gamma)
    n = max(n_k.sum(), 1.0)
    idx = _ucb(np.divide(x_k, n_k, out=np.zeros(K), where=n_k > 0), n_k, n, 2 * alpha)
    return np.where(_pulled(arms) > 0, idx, np.inf)


def ref_sliding_window_ucb(arms, rewards, *, window, alpha):
    t = len(arms)
    a, r = arms[-window:], rewards[-window:]
    n_k = _pulled(a)
    x_k = np.bincount(a, weights=r, minlength=K)
    n = max(min(t, window), 1)
    return _ucb(np.divide(x_k, n_k, out=np.zeros(K), where=n_k > 0), n_k, n, 2 * alpha)


def ref_qomax(arms, rewards, *, n_batches, batch_size, q, alpha):
    size = n_batches * batch_size
    t = len(arms)
    out = np.full(K, np.inf)
    for k in range(K):
        r = rewards[arms == k]
        f = len(r)
        if f < size:
            continue
        buf = np.empty(size)
        js = np.arange(f - size, f)  # the most recent `size` rewards, slot j % size
        buf[js % size] = r[js]
        maxima = buf.reshape(n_batches, batch_size).max(1)
        out[k] = (np.quantile(maxima, q, method="lower")
                  + alpha * np.sqrt(np.log(max(t, 1)) / f))
    return out


def ref_threshold_ascent(arms, rewards, *, horizon, s, delta):
    t = len(arms)
    a, r = arms[:horizon], rewards[:horizon]  # updates beyond the horizon are not stored
    thr = np.sort(r)[::-1][s - 1] if t >= s else -np.inf
    n_k = _pulled(a)
    s_k = np.bincount(a[r > thr], minlength=K).astype(np.float64)
    mu = np.divide(s_k, n_k, out=np.zeros(K), where=n_k > 0)
    al = np.log(2 * max(t, 1) * K / delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        idx = mu + (al + np.sqrt(2 * n_k * mu * al + al * al)) / n_k
    return np.where(n_k > 0, idx, np.inf)


def _wquantile(values, weights, q):
    """Weighted inverted-CDF quantile: the smallest value whose cumulative weight reaches
    q * total (only values with positive weight)."""
    m = weights > 0
    if not m.any():
        return 0.0
    order = np.argsort(values[m], kind="stable")
    v, cw = values[m][order], np.cumsum(weights[m][order])
    return v[np.searchsorted(cw, q * cw[-1] * (1 - 1e-9))]


def _dense_credit(parents, gain, decay):
    """c = solve(I - decay A^T, gain), A[v, u] = 1/|parents(v)|."""
    n = len(gain)
    a = np.zeros((n, n))
    for v in range(n):
        ps = [int(p) for p in parents[v] if p >= 0]
        for u in ps:
            a[v, u] = 1.0 / len(ps)
    return np.linalg.solve(np.eye(n) - decay * a.T, gain)


def _gains(parents, score):
    return np.array([max(0.0, score[v] - max([score[p] for p in parents[v] if p >= 0],
                                             default=0.0)) for v in range(len(score))])


def ballad_terms(parents, score, arm, time, t, pulls, *, gamma, alpha, decay, q,
                 credit=True, discount=True, n_arms=K):
    """Ballad's index split into (credit mean, quantile, bonus), each (K,); inf where the
    arm has no data."""
    gain = _gains(parents, score)
    has_edges = any(p >= 0 for row in parents for p in row)
    c = _dense_credit(parents, gain, decay) if credit and has_edges else gain
    w = (gamma if discount else 1.0) ** (t - np.asarray(time, np.float64))
    n_k = np.array([w[arm == k].sum() for k in range(n_arms)])
    n = max(n_k.sum(), 1.0)
    mean, quant, bonus = (np.full(n_arms, np.inf) for _ in range(3))
    for k in range(n_arms):
        m = arm == k
        if pulls[k] == 0 or n_k[k] == 0:
            continue
        mean[k] = (w[m] * c[m]).sum() / n_k[k]
        quant[k] = _wquantile(score[m], w[m], q)
        bonus[k] = np.sqrt(2 * alpha * np.log(n) / n_k[k])
    return mean, quant, bonus


def ref_ballad(arms, rewards, *, gamma, alpha, q):
    t = len(arms)
    mean, quant, bonus = ballad_terms(np.full((t, 1), -1), rewards, arms, np.arange(t), t,
                                      _pulled(arms), gamma=gamma, alpha=alpha, decay=0.5, q=q)
    return mean + quant + bonus


# name -> (factory(dtype), reference index)
POLICIES = {
    "ucb1": (lambda d: bd.ucb1(K, alpha=0.7, dtype=d),
             functools.partial(ref_ucb1, alpha=0.7)),
    "discounted_ucb": (lambda d: bd.discounted_ucb(K, gamma=0.9, alpha=0.6, dtype=d),
                       functools.partial(ref_discounted_ucb, gamma=0.9, alpha=0.6)),
    "sliding_window_ucb": (lambda d: bd.sliding_window_ucb(K, window=40, alpha=0.8, dtype=d),
                           functools.partial(ref_sliding_window_ucb, window=40, alpha=0.8)),
    "qomax": (lambda d: bd.qomax(K, n_batches=4, batch_size=2, q=0.5, alpha=0.3, dtype=d),
              functools.partial(ref_qomax, n_batches=4, batch_size=2, q=0.5, alpha=0.3)),
    "threshold_ascent": (lambda d: bd.threshold_ascent(K, horizon=150, s=5, delta=0.1, dtype=d),
                         functools.partial(ref_threshold_ascent, horizon=150, s=5, delta=0.1)),
    "ballad": (lambda d: bd.ballad(K, capacity=T, gamma=0.9, alpha=0.5, q=0.8, dtype=d),
               functools.partial(ref_ballad, gamma=0.9, alpha=0.5, q=0.8)),
}
POL64 = {name: f(F64) for name, (f, _) in POLICIES.items()}
POL32 = {name: f(F32) for name, (f, _) in POLICIES.items()}


def ref_run(index_fn, table):
    arms, rewards, index = [], [], None
    for t in range(table.shape[0] + 1):
        index = index_fn(np.asarray(arms, np.int64), np.asarray(rewards, np.float64))
        if t == table.shape[0]:
            break
        a = int(np.argmax(index))
        arms.append(a)
        rewards.append(table[t, a])
    return np.asarray(arms), np.asarray(rewards), index


# One jitted program per policy (the policy is static: hashable NamedTuple of functions).
@functools.partial(jax.jit, static_argnums=0)
def _replay(pol, tables):
    def one(table):
        state, trace = bd.simulate(jax.random.key(0), pol, lambda k, t, a: table[t, a],
                                   table.shape[0])
        return state, trace, pol.index(None, state)

    return jax.vmap(one)(tables)


@functools.partial(jax.jit, static_argnums=0)
def _forced(pol, arms, rewards):
    """Update along a given (arm, reward) sequence; returns the final index."""
    def one(a, r):
        state = jax.lax.scan(lambda s, ar: (pol.update(s, ar[0], ar[1]), None), pol.init(),
                             (a, r))[0]
        return pol.index(None, state)

    return jax.vmap(one)(arms, rewards)


@functools.partial(jax.jit, static_argnums=0)
def _fold(pol, arms, rewards):
    """The state after updating along (arms, rewards) from ``pol.init()``."""
    return jax.lax.scan(lambda s, ar: (pol.update(s, ar[0], ar[1]), None), pol.init(),
                        (jnp.asarray(arms, jnp.int32), rewards))[0]


def _assert_index_close(got, want, rtol):
    got, want = np.asarray(got, np.float64), np.asarray(want)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=0)


@pytest.mark.parametrize("name", list(POLICIES))
def test_deterministic_policy_replays_numpy_reference(name):
    pol, ref = POL64[name], POLICIES[name][1]
    state, trace, index = _replay(pol, jnp.asarray(TABLES))
    refs = [ref_run(ref, table) for table in TABLES]
    for b, (arms, rewards, ref_index) in enumerate(refs):
        np.testing.assert_array_equal(np.asarray(trace.arms[b]), arms)  # exact sequence
        np.testing.assert_array_equal(np.asarray(trace.rewards[b]), rewards)
        _assert_index_close(index[b], ref_index, 1e-9)
        assert len(np.unique(arms)) == K  # every arm explored: the test is not vacuous
    # final state statistics
    if name in ("ucb1", "discounted_ucb"):
        gamma = 1.0 if name == "ucb1" else 0.9
        for b, (arms, rewards, _) in enumerate(refs):
            n_k, x_k = _discounted_stats(arms, rewards, gamma)
            np.testing.assert_allclose(np.asarray(state.counts[b]), n_k, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(state.sums[b]), x_k, rtol=1e-12, atol=1e-15)
            np.testing.assert_array_equal(np.asarray(state.pulls[b]), _pulled(arms))
    elif name == "qomax":
        for b, (arms, _, _) in enumerate(refs):
            np.testing.assert_array_equal(np.asarray(state.filled[b]), _pulled(arms))
    elif name == "ballad":
        for b, (arms, rewards, _) in enumerate(refs):
            np.testing.assert_array_equal(np.asarray(state.arm[b]), arms)
            np.testing.assert_array_equal(np.asarray(state.score[b]), rewards)
            np.testing.assert_array_equal(np.asarray(state.gain[b]), np.maximum(rewards, 0))
            np.testing.assert_array_equal(np.asarray(state.time[b]), np.arange(T))
    np.testing.assert_array_equal(np.asarray(state.t), [T, T])
    # float32 kernels along the same sequence: the same index to float32 accuracy
    arms = jnp.asarray(np.stack([r[0] for r in refs]), jnp.int32)
    rewards = jnp.asarray(np.stack([r[1] for r in refs]), F32)
    index32 = _forced(POL32[name], arms, rewards)
    assert index32.dtype == F32
    for b in range(2):
        _assert_index_close(index32[b], refs[b][2], 1e-5)


def test_ties_go_to_the_lowest_arm_and_unpulled_arms_are_inf():
    pol = POL64["ucb1"]
    index, select = jax.jit(pol.index), jax.jit(pol.select)
    s = pol.init()
    assert np.all(np.isposinf(np.asarray(index(None, s))))
    assert int(select(None, s)) == 0
    s = _fold(pol, [0], jnp.asarray([0.5]))
    assert int(select(None, s)) == 1
    s = _fold(pol, np.arange(K), jnp.full(K, 0.5))
    idx = np.asarray(index(None, s))
    assert np.all(idx == idx[0]) and np.isfinite(idx[0])
    assert int(select(None, s)) == 0


# --------------------------------------------------------------------------- Thompson


def test_discounted_thompson_beta_hand_computed():
    pol = bd.thompson_beta(3, gamma=0.5)
    s = pol.init()
    for _ in range(3):
        s = pol.update(s, 0, 1.0)
    # 1 -> 0.5 + 1 -> 0.75 + 1 (the pulled arm decays once per step, not K-1 times)
    np.testing.assert_array_equal(np.asarray(s.successes), [1.75, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(s.failures), [0.0, 0.0, 0.0])
    s = pol.init()
    s = pol.update(s, 1, 1.0)
    for _ in range(4):
        s = pol.update(s, 0, 0.0)
    # every arm decays every step, not only the pulled one
    np.testing.assert_array_equal(np.asarray(s.successes), [0.0, 0.5**4, 0.0])
    np.testing.assert_array_equal(np.asarray(s.failures), [1.875, 0.0, 0.0])
    assert int(s.t) == 5
    # fractional reward updates both
    s = pol.update(pol.init(), 2, 0.25)
    np.testing.assert_array_equal(np.asarray(s.successes), [0, 0, 0.25])
    np.testing.assert_array_equal(np.asarray(s.failures), [0, 0, 0.75])


def _random_history(seed, n=30, k=K):
    rng = np.random.default_rng(seed)
    return rng.integers(0, k, n), rng.random(n)


def test_thompson_beta_index_is_the_documented_posterior_draw():
    gamma, prior = 0.9, (1.0, 2.0)
    pol = bd.thompson_beta(K, gamma=gamma, prior=prior, dtype=F64)
    arms, rewards = _random_history(1)
    s = _fold(pol, arms, jnp.asarray(rewards))
    # S <- gamma S + r [a = k], F <- gamma F + (1 - r) [a = k], every arm every step
    succ = _discounted_stats(arms, rewards, gamma)[1]
    fail = _discounted_stats(arms, 1 - rewards, gamma)[1]
    np.testing.assert_allclose(np.asarray(s.successes), succ, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(s.failures), fail, rtol=1e-12)
    key = jax.random.key(7)
    want = jax.random.beta(key, prior[0] + jnp.asarray(succ), prior[1] + jnp.asarray(fail),
                           dtype=F64)
    np.testing.assert_allclose(np.asarray(pol.index(key, s)), np.asarray(want), rtol=1e-10)
    assert int(pol.select(key, s)) == int(jnp.argmax(want))


def test_thompson_gaussian_index_is_the_documented_posterior_draw():
    gamma, sigma, m0, c0 = 0.95, 0.5, 0.3, 2.0
    pol = bd.thompson_gaussian(K, gamma=gamma, sigma=sigma, prior_mean=m0, prior_count=c0,
                               dtype=F64)
    arms, rewards = _random_history(2)
    s = _fold(pol, arms, jnp.asarray(rewards))
    n_k, x_k = _discounted_stats(arms, rewards, gamma)
    key = jax.random.key(3)
    z = np.asarray(jax.random.normal(key, (K,), F64))
    want = (x_k + c0 * m0) / (n_k + c0) + sigma / np.sqrt(n_k + c0) * z
    np.testing.assert_allclose(np.asarray(pol.index(key, s)), want, rtol=1e-10)
    assert int(pol.select(key, s)) == int(np.argmax(want))


_KEYS = jax.random.split(jax.random.key(11), 1000)


@functools.partial(jax.jit, static_argnums=0)
def _select_many(pol, state):
    return jax.vmap(lambda k: pol.select(k, state))(_KEYS)


def test_thompson_selection_frequencies():
    # Beta: a huge count gap between a good and a bad arm: the good arm almost always
    beta2 = bd.thompson_beta(2)
    s = bd.BetaState(jnp.asarray([100.0, 900.0], F32), jnp.asarray([900.0, 100.0], F32),
                     jnp.asarray(2000, jnp.int32))
    assert np.mean(np.asarray(_select_many(beta2, s)) == 1) > 0.995
    # moderate evidence: frequency matches the exact P(Beta(9, 3) > Beta(4, 5))
    s = bd.BetaState(jnp.asarray([8.0, 3.0], F32), jnp.asarray([2.0, 4.0], F32),
                     jnp.asarray(17, jnp.int32))
    x = np.linspace(0, 1, 20001)
    p = np.trapezoid(stats.beta.pdf(x, 9, 3) * stats.beta.cdf(x, 4, 5), x)
    freq = np.mean(np.asarray(_select_many(beta2, s)) == 0)
    assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(_KEYS))
    # Gaussian: same check with P = Phi((m0 - m1) / sqrt(v0 + v1))
    gauss = bd.thompson_gaussian(2, sigma=1.0, prior_count=1.0)
    s = bd.CountState(jnp.asarray([3.0, 1.0], F32), jnp.asarray([2.4, 0.5], F32),
                      jnp.asarray([3, 1], jnp.int32), jnp.asarray(4, jnp.int32))
    p = stats.norm.cdf((2.4 / 4 - 0.5 / 2) / np.sqrt(1 / 4 + 1 / 2))
    freq = np.mean(np.asarray(_select_many(gauss, s)) == 0)
    assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(_KEYS))
    s = bd.CountState(jnp.asarray([1000.0, 1000.0], F32), jnp.asarray([300.0, 700.0], F32),
                      jnp.asarray([1000, 1000], jnp.int32), jnp.asarray(2000, jnp.int32))
    assert np.mean(np.asarray(_select_many(gauss, s)) == 1) > 0.995


def test_discounted_ucb_float32_count_underflow_keeps_bonus_large():
    arms = np.r_[1, np.zeros(160, np.int64)]
    rewards = np.r_[0.0, np.ones(160)]
    for dtype in (F64, F32):
        pol = bd.discounted_ucb(2, gamma=0.5, dtype=dtype)
        s = _fold(pol, arms, jnp.asarray(rewards, dtype))
        # N_1 = 0.5**160 ~ 7e-49: index_1 = sqrt(2 ln(n) / N_1) ~ 1e24 > index_0 ~ 1.8
        assert int(pol.select(None, s)) == 1, dtype


# --------------------------------------------------------------------------- credit

NMAX, PMAX = 12, 3
_credit = jax.jit(bd.propagate_credit)


@st.composite
def dags(draw):
    """A random genealogy of n <= 12 nodes, each with at most p <= 3 distinct parents drawn
    from earlier nodes; padded with -1 (in any position) to a fixed (12, 3)."""
    n = draw(st.integers(1, NMAX))
    p = draw(st.integers(1, PMAX))
    parents = np.full((NMAX, PMAX), -1, np.int32)
    for v in range(1, n):
        ps = draw(st.lists(st.integers(0, v - 1), max_size=min(p, v), unique=True))
        parents[v, :p] = draw(st.permutations(ps + [-1] * (p - len(ps))))
    gain = np.zeros(NMAX)
    gain[:n] = draw(st.lists(st.floats(-2, 2, allow_nan=False), min_size=n, max_size=n))
    return n, parents, gain, draw(st.floats(0, 1))


@settings(max_examples=60, deadline=None)
@given(dag=dags())
def test_propagate_credit_matches_dense_solve(dag):
    n, parents, gain, decay = dag
    c = np.asarray(_credit(jnp.asarray(parents), jnp.asarray(gain), decay=decay))
    want = _dense_credit(parents[:n], gain[:n], decay)
    np.testing.assert_allclose(c[:n], want, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(c[n:], 0.0)  # padding nodes carry nothing


def _random_dags(seed, b=6, n=NMAX, p=PMAX):
    rng = np.random.default_rng(seed)
    parents = np.full((b, n, p), -1, np.int32)
    for i in range(b):
        for v in range(1, n):
            k = rng.integers(0, min(p, v) + 1)
            parents[i, v, :k] = rng.choice(v, size=k, replace=False)
    return parents, rng.normal(size=(b, n)), rng.random(b)


_credit_batched = jax.jit(jax.vmap(lambda p, g, d: bd.propagate_credit(p, g, decay=d)))


def test_propagate_credit_jit_and_vmap_equal_the_loop():
    parents, gain, decay = _random_dags(3)
    batched = np.asarray(_credit_batched(jnp.asarray(parents), jnp.asarray(gain),
                                         jnp.asarray(decay)))
    for i in range(len(gain)):
        one = np.asarray(_credit(jnp.asarray(parents[i]), jnp.asarray(gain[i]),
                                 decay=float(decay[i])))
        np.testing.assert_allclose(batched[i], one, rtol=1e-12)
        np.testing.assert_allclose(one, _dense_credit(parents[i], gain[i], decay[i]),
                                   rtol=1e-9, atol=1e-12)
    eager = bd.propagate_credit(parents[0], jnp.asarray(gain[0]), decay=float(decay[0]))
    np.testing.assert_allclose(np.asarray(eager), batched[0], rtol=1e-12)
    # a hand case: a diamond 0 -> {1, 2} -> 3; c_3 = 1 split between its two parents
    c = bd.propagate_credit(jnp.asarray([[-1, -1], [0, -1], [0, -1], [1, 2]]),
                            jnp.asarray([0.0, 0.0, 0.0, 1.0]), decay=0.5)
    np.testing.assert_allclose(np.asarray(c), [0.25, 0.25, 0.25, 1.0])


def test_credit_per_arm_matches_numpy():
    rng = np.random.default_rng(4)
    n, k, now, gamma = 20, 4, 30, 0.9
    credit = rng.normal(size=n)
    node_arm = rng.integers(-1, k, n)
    node_time = rng.integers(0, now + 1, n)
    got = bd.credit_per_arm(jnp.asarray(credit), jnp.asarray(node_arm), n_arms=k,
                            node_time=jnp.asarray(node_time), now=now, gamma=gamma)
    w = credit * gamma ** (now - node_time)
    want = np.array([w[node_arm == a].sum() for a in range(k)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    # arm -1 nodes count for no arm: the total misses exactly their share
    np.testing.assert_allclose(float(np.sum(got)), w[node_arm >= 0].sum(), rtol=1e-12)
    plain = bd.credit_per_arm(jnp.asarray(credit), jnp.asarray(node_arm), n_arms=k)
    np.testing.assert_allclose(np.asarray(plain),
                               [credit[node_arm == a].sum() for a in range(k)], rtol=1e-12)


# --------------------------------------------------------------------------- Ballad

K3 = 3
ROOTS = [0.3, 0.5, 0.1]
# (arm, reward, parents); node ids continue after the 3 roots
STEPS = ((0, 0.6, (0, -1)), (1, 0.4, (1, -1)), (0, 0.9, (3, 1)), (2, 0.7, (4, 2)),
         (1, 0.55, (0, 5)), (0, 0.2, (-1, -1)), (1, 0.95, (4, -1)))
BALLAD = dict(gamma=0.8, alpha=0.5, decay=0.5, q=0.7)


@functools.cache
def _ballad_state(capacity=12, steps=STEPS):
    pol = bd.ballad(K3, capacity=capacity, **BALLAD, dtype=F64)
    s = bd.ballad_add_roots(pol.init(), jnp.asarray(ROOTS))
    for a, r, ps in steps:
        s = pol.update(s, a, r, jnp.asarray(ps, jnp.int32))
    return s


def _ballad_reference(n_stored, t, pulls, **flags):
    parents = [(-1, -1)] * 3 + [ps for _, _, ps in STEPS]
    score = np.array(ROOTS + [r for _, r, _ in STEPS])
    arm = np.array([-1] * 3 + [a for a, _, _ in STEPS])
    time = np.r_[0, 0, 0, np.arange(len(STEPS))]
    return ballad_terms(np.array(parents)[:n_stored], score[:n_stored], arm[:n_stored],
                        time[:n_stored], t, pulls, n_arms=K3, **{**BALLAD, **flags})


def test_ballad_genealogy_gain_and_index():
    s = _ballad_state()
    assert int(s.n_nodes) == 10 and int(s.t) == len(STEPS)
    np.testing.assert_array_equal(np.asarray(s.pulls), [3, 3, 1])
    # gain = max(0, reward - best parent score); roots: their own score
    np.testing.assert_allclose(np.asarray(s.gain[:10]),
                               [0.3, 0.5, 0.1, 0.3, 0.0, 0.3, 0.3, 0.0, 0.2, 0.55], atol=1e-15)
    np.testing.assert_array_equal(np.asarray(s.arm[:10]), [-1, -1, -1, 0, 1, 0, 2, 1, 0, 1])
    np.testing.assert_array_equal(np.asarray(s.time[:10]), [0, 0, 0, 0, 1, 2, 3, 4, 5, 6])
    mean, quant, bonus = _ballad_reference(10, len(STEPS), [3, 3, 1])
    full = np.asarray(bd.ballad(K3, capacity=12, **BALLAD, dtype=F64).index(None, s))
    np.testing.assert_allclose(full, mean + quant + bonus, rtol=1e-10)
    # ablations change exactly their own term
    idx = {f: np.asarray(bd.ballad(K3, capacity=12, **BALLAD, dtype=F64, **{f: False})
                         .index(None, s)) for f in ("extreme", "credit", "discount")}
    np.testing.assert_allclose(full - idx["extreme"], quant, rtol=1e-10)
    m_nc, _, _ = _ballad_reference(10, len(STEPS), [3, 3, 1], credit=False)
    np.testing.assert_allclose(idx["credit"] - full, m_nc - mean, rtol=1e-9, atol=1e-12)
    assert not np.allclose(m_nc, mean)  # credit flows: the ablation is not vacuous
    np.testing.assert_allclose(idx["discount"],
                               sum(_ballad_reference(10, len(STEPS), [3, 3, 1],
                                                     discount=False)), rtol=1e-10)
    assert not np.allclose(idx["discount"], full)


def test_ballad_q0_quantile_is_the_arms_minimum():
    pol = bd.ballad(K3, capacity=12, **{**BALLAD, "q": 0.0}, dtype=F64)
    mean, quant, bonus = _ballad_reference(10, len(STEPS), [3, 3, 1], q=0.0)
    np.testing.assert_allclose(quant, [0.2, 0.4, 0.7])  # each arm's lowest score
    np.testing.assert_allclose(np.asarray(pol.index(None, _ballad_state())),
                               mean + quant + bonus, rtol=1e-10)


def test_ballad_capacity_overflow_drops_nodes():
    # 3 roots + 3 stored updates; the 4 later ones (parents among the stored) are dropped
    s = _ballad_state(capacity=6)
    assert int(s.n_nodes) == 6 and int(s.t) == len(STEPS)
    np.testing.assert_array_equal(np.asarray(s.pulls), [3, 3, 1])  # pulls still counted
    np.testing.assert_array_equal(np.asarray(s.arm), [-1, -1, -1, 0, 1, 0])
    mean, quant, bonus = _ballad_reference(6, len(STEPS), [3, 3, 1])
    idx = np.asarray(bd.ballad(K3, capacity=6, **BALLAD, dtype=F64).index(None, s))
    assert np.isposinf(idx[2]) and np.isposinf(mean[2])  # arm 2's only node was dropped
    np.testing.assert_allclose(idx[:2], (mean + quant + bonus)[:2], rtol=1e-10)


# --------------------------------------------------------------------------- cost


def test_cost_aware_scales_rewards_per_unit_cost():
    costs = np.array([2.0, 1.0, 4.0])
    arms, rewards = [0, 1, 2, 0], [1.0, 0.5, 0.8, 0.3]
    for per_unit in (True, False):
        pol = bd.cost_aware(bd.ucb1(3, dtype=F64), costs, per_unit_cost=per_unit)
        s = pol.init()
        for a, r in zip(arms, rewards, strict=True):
            s = pol.update(s, a, r)
        scale = costs.min() / costs if per_unit else np.ones(3)
        want = np.bincount(arms, weights=np.array(rewards) * scale[arms], minlength=3)
        np.testing.assert_allclose(np.asarray(s.inner.sums), want, rtol=1e-7)
        np.testing.assert_array_equal(np.asarray(s.inner.pulls), [2, 1, 1])
        assert float(s.spent) == 9.0
        # no budget: the index is the inner policy's
        np.testing.assert_array_equal(np.asarray(pol.index(None, s)),
                                      np.asarray(bd.ucb1(3, dtype=F64).index(None, s.inner)))


def test_cost_aware_budget_masks_unaffordable_arms():
    costs, budget = np.array([2.0, 1.0, 4.0]), 10.0
    pol = bd.cost_aware(bd.ucb1(3, dtype=F64), costs, budget=budget)
    select, update = jax.jit(pol.select), jax.jit(pol.update)
    s, broke = pol.init(), 0
    for t in range(12):
        left = budget - float(s.spent)
        arm = int(select(None, s))
        if costs.min() <= left:
            assert costs[arm] <= left
            idx = np.asarray(pol.index(None, s))
            assert np.all(np.isneginf(idx[costs > left]))
            assert np.all(idx[costs <= left] > -np.inf)  # cost == what is left: affordable
        else:
            assert arm == 1  # nothing affordable: the cheapest arm
            broke += 1
        s = update(s, arm, TABLES[0, t, arm])
    assert broke > 0 and float(s.spent) > budget


def test_cost_aware_non_integer_arm_is_a_value_error():
    pol = bd.cost_aware(bd.ucb1(3), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="`arm` must be an integer scalar"):
        pol.update(pol.init(), 1.5, 1.0)


# --------------------------------------------------------------------------- simulate


def _bernoulli(means):
    means = jnp.asarray(means)
    return lambda k, t, a: jax.random.bernoulli(k, means[a]).astype(F32)


TS = bd.thompson_beta(K)
TG = bd.thompson_gaussian(K, gamma=0.95, sigma=0.5)  # cheap sampler: key-driven selection
REWARD = _bernoulli(MEANS)
N_LOOP = 20
_sim_batched = jax.jit(jax.vmap(lambda k: bd.simulate(k, TG, REWARD, N_LOOP)))
_tg_select, _tg_update, _reward = jax.jit(TG.select), jax.jit(TG.update), jax.jit(REWARD)


def test_simulate_vmap_equals_python_loop():
    keys = jax.random.split(jax.random.key(5), 8)
    state, trace = _sim_batched(keys)
    for i in range(8):
        s, arms, rewards = TG.init(), [], []
        for t, k in enumerate(jax.random.split(keys[i], N_LOOP)):
            k_sel, k_rew = jax.random.split(k)
            a = _tg_select(k_sel, s)
            r = _reward(k_rew, t, a)
            s = _tg_update(s, a, r)
            arms.append(a)
            rewards.append(r)
        np.testing.assert_array_equal(np.asarray(trace.arms[i]), np.asarray(arms))
        np.testing.assert_array_equal(np.asarray(trace.rewards[i]), np.asarray(rewards))
        for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(s), strict=True):
            np.testing.assert_allclose(np.asarray(got[i]), np.asarray(want), rtol=1e-6)
    assert len({tuple(np.asarray(a)) for a in trace.arms}) > 1  # keys differ, runs differ


# --------------------------------------------------------------------------- runs last


def _table_reward(tables):
    """reward_fn for simulate_runs: run r's arm a at step t pays tables[r, t, a]."""
    runs = jnp.arange(tables.shape[0])
    return lambda k, t, arms: tables[runs, t, arms]


@functools.partial(jax.jit, static_argnums=0)
def _replay_runs(pol, tables):
    return bd.simulate_runs(jax.random.key(0), pol, _table_reward(tables), tables.shape[1],
                            tables.shape[0])


@pytest.mark.parametrize("name", ["ucb1", "discounted_ucb", "sliding_window_ucb"])
def test_simulate_runs_equals_vmap_simulate(name):
    """Runs in lockstep pick the same arms as vmap(simulate): natively with the runs on the
    last axis (ucb1, discounted_ucb) or through the vmap fallback (sliding window)."""
    pol = POL64[name]
    assert pol.runs_last == (name != "sliding_window_ucb")
    tables = jnp.asarray(TABLES)
    state_v, trace_v, _ = _replay(pol, tables)
    state_r, trace_r = _replay_runs(pol, tables)
    assert trace_r.arms.shape == (T, 2) and trace_r.rewards.shape == (T, 2)
    np.testing.assert_array_equal(np.asarray(trace_r.arms).T, np.asarray(trace_v.arms))
    np.testing.assert_array_equal(np.asarray(trace_r.rewards).T, np.asarray(trace_v.rewards))
    for got, want in zip(jax.tree.leaves(state_r), jax.tree.leaves(state_v), strict=True):
        got = np.asarray(got)
        if pol.runs_last and got.ndim == 2:  # (K, R) against vmap's (R, K)
            got = got.T
        if got.ndim == 0:  # one step counter for runs in lockstep
            got = np.full(2, got)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=0)


RUNS_LAST = {"ucb1": POL64["ucb1"], "discounted_ucb": POL64["discounted_ucb"],
             "thompson_beta": bd.thompson_beta(K, gamma=0.9, dtype=F64),
             "thompson_gaussian": bd.thompson_gaussian(K, gamma=0.9, dtype=F64)}


@functools.partial(jax.jit, static_argnums=0)
def _fold_runs(pol, arms, rewards):
    """The (K, R) state after updating R runs in lockstep along (T, R) arms and rewards."""
    return jax.lax.scan(lambda s, ar: (pol.update(s, *ar), None), pol.init(arms.shape[1]),
                        (arms, rewards))[0]


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(list(RUNS_LAST)), seed=st.integers(0, 2**32 - 1),
       binary=st.booleans())
def test_runs_last_update_and_index_equal_per_run(name, seed, binary):
    """A (K, R) state updated with (R,) arms and rewards holds each run's own state; for
    the deterministic policies its index and selected arms (ties included: 0/1 rewards
    over 12 steps tie often) are the per-run ones."""
    pol = RUNS_LAST[name]
    rng = np.random.default_rng(seed)
    arms = jnp.asarray(rng.integers(0, K, (3, 12)), jnp.int32)  # (R, T)
    rewards = jnp.asarray(rng.integers(0, 2, (3, 12)) if binary else rng.random((3, 12)),
                          F64)
    per_run = [_fold(pol, arms[r], rewards[r]) for r in range(3)]
    state = _fold_runs(pol, arms.T, rewards.T)
    for leaf, *want in zip(jax.tree.leaves(state), *map(jax.tree.leaves, per_run),
                           strict=True):
        if leaf.ndim == 0:
            assert all(int(w) == int(leaf) for w in want)
        else:
            np.testing.assert_allclose(np.asarray(leaf), np.stack(want, axis=-1), rtol=1e-12)
    assert pol.index(jax.random.key(0), state).shape == (K, 3)
    assert pol.select(jax.random.key(0), state).shape == (3,)
    if name in ("ucb1", "discounted_ucb"):
        index = pol.index(None, state)
        for r in range(3):
            _assert_index_close(index[:, r], pol.index(None, per_run[r]), 1e-12)
        np.testing.assert_array_equal(np.asarray(pol.select(None, state)),
                                      [int(pol.select(None, s)) for s in per_run])


def test_simulate_runs_thompson_learns_and_runs_differ():
    _, trace = jax.jit(lambda k: bd.simulate_runs(
        k, TS, lambda k, t, a: jax.random.bernoulli(k, jnp.asarray(MEANS)[a]).astype(F32),
        1000, 8))(jax.random.key(4))
    best = np.asarray(trace.arms) == 1
    assert best[500:].mean() > 0.6 and best[500:].mean() > best[:500].mean()
    assert len({tuple(a) for a in np.asarray(trace.arms).T}) == 8  # runs are independent


def _run_arms(pol, reward_fn, n_steps, n_keys=8):
    """(n_keys, n_steps) arms of jit(vmap(simulate)) over fixed keys."""
    keys = jax.random.split(jax.random.key(1), n_keys)
    _, trace = jax.jit(jax.vmap(lambda k: bd.simulate(k, pol, reward_fn, n_steps)))(keys)
    return np.asarray(trace.arms)


@pytest.mark.parametrize("pol", [bd.ucb1(K), bd.discounted_ucb(K, gamma=0.999, alpha=0.5), TS],
                         ids=["ucb1", "discounted_ucb", "thompson_beta"])
def test_stationary_bernoulli_best_arm_dominates(pol):
    best = _run_arms(pol, REWARD, 2000) == 1  # means 0.2 .. 0.8, arm 1 best
    assert best.mean() > 0.7
    # sub-linear regret: the second half pulls the best arm more often than the first
    assert best[:, 1000:].mean() > best[:, :1000].mean()


def test_nonstationary_policies_adapt_after_a_change_point():
    # arm 0 is best (0.9 vs 0.5) for 1000 steps, then arm 1 (0.8 vs 0.6)
    table = jnp.asarray([[0.9, 0.5], [0.6, 0.8]])
    reward = lambda k, t, a: jax.random.bernoulli(k, table[(t >= 1000).astype(int), a]
                                                  ).astype(F32)
    frac = {name: np.mean(_run_arms(pol, reward, 2000)[:, 1000:] == 1) for name, pol in [
        ("ucb1", bd.ucb1(2, alpha=0.5)),
        ("discounted", bd.discounted_ucb(2, gamma=0.99, alpha=0.5)),
        ("window", bd.sliding_window_ucb(2, window=200, alpha=0.5))]}
    assert frac["discounted"] > frac["ucb1"] + 0.08, frac
    assert frac["window"] > frac["ucb1"] + 0.1, frac


# --------------------------------------------------------------------------- bad input


BAD = [
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), 3, 1.0), "`arm` out of range"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), -1, 1.0), "`arm` out of range"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), 0, float("nan")), "`reward` is NaN or inf"),
    (lambda: TS.update(TS.init(), 0, float("inf")), "`reward` is NaN or inf"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), 1.5, 1.0), "`arm` must be an integer scalar"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), jnp.asarray([0, 1]), 1.0),
     "`arm` must be an integer scalar"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(), 0, jnp.ones(2)), "`reward` must be a scalar"),
    (lambda: TS.update(TS.init(), 0, 1.5), r"must be in \[0, 1\] for thompson_beta"),
    (lambda: TS.update(TS.init(), 0, -0.1), r"must be in \[0, 1\] for thompson_beta"),
    (lambda: bd.propagate_credit(jnp.asarray([[-1], [2], [1]]), jnp.zeros(3), decay=0.5),
     "cycle or is not in topological order"),
    (lambda: bd.propagate_credit(jnp.asarray([[0]]), jnp.zeros(1), decay=0.5),
     "earlier node"),
    (lambda: bd.propagate_credit(jnp.asarray([[-1], [-2]]), jnp.zeros(2), decay=0.5),
     "earlier node"),
    (lambda: bd.propagate_credit(jnp.asarray([[-1.0]]), jnp.zeros(1), decay=0.5),
     "`parents` must be an integer array"),
    (lambda: bd.propagate_credit(jnp.asarray([[-1], [0]]), jnp.zeros(3), decay=0.5),
     r"`gain` must have shape \(2,\)"),
    (lambda: bd.propagate_credit(jnp.asarray([[-1], [0]]), jnp.asarray([0.0, np.nan]),
                                 decay=0.5), "`gain` contains NaN"),
    (lambda: bd.credit_per_arm(jnp.zeros(3), jnp.zeros(2, int), n_arms=2),
     "`node_arm` must have shape"),
    (lambda: bd.credit_per_arm(jnp.zeros(3), jnp.zeros(3, int), n_arms=2,
                               node_time=jnp.zeros(3, int)), "`now` is required"),
    (lambda: bd.ucb1(0), "`n_arms` must be a positive integer"),
    (lambda: bd.thompson_beta(2.5), "`n_arms` must be a positive integer"),
    (lambda: bd.discounted_ucb(3, gamma=0.0), r"`gamma` must be in \(0, 1\]"),
    (lambda: bd.discounted_ucb(3, gamma=1.5), r"`gamma` must be in \(0, 1\]"),
    (lambda: bd.thompson_beta(3, gamma=-0.5), r"`gamma` must be in \(0, 1\]"),
    (lambda: bd.ballad(3, capacity=4, gamma=2.0), r"`gamma` must be in \(0, 1\]"),
    (lambda: bd.ballad(3, capacity=0), "`capacity` must be a positive integer"),
    (lambda: bd.sliding_window_ucb(3, window=0), "`window` must be a positive integer"),
    (lambda: bd.qomax(3, n_batches=0), "`n_batches` must be a positive integer"),
    (lambda: bd.threshold_ascent(3, horizon=0), "`horizon` must be a positive integer"),
    (lambda: bd.ucb1(3, alpha=-1.0), "`alpha` must be >= 0"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, 2.0]), r"`costs` must have shape \(3,\)"),
    (lambda: bd.cost_aware(bd.ucb1(3), [[1.0, 2.0, 3.0]]), r"`costs` must have shape \(3,\)"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, 0.0, 2.0]), "`costs` must be finite and > 0"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, -1.0, 2.0]), "`costs` must be finite and > 0"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, np.nan, 2.0]), "`costs` must be finite and > 0"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, 1.0, 2.0], budget=0.0), "`budget` must be > 0"),
    (lambda: bd.cost_aware(bd.ucb1(3), [1.0, 1.0, 2.0]).update(
        bd.cost_aware(bd.ucb1(3), [1.0, 1.0, 2.0]).init(), 5, 1.0), "`arm` out of range"),
    (lambda: _ballad_state(steps=((0, 0.5, (3, -1)),)), "existing node"),
    (lambda: _ballad_state(steps=((0, 0.5, (0, -1, -1)),)),
     r"`parents` must be an integer array of shape \(2,\)"),
    (lambda: bd.ballad_add_roots(bd.ballad(2, capacity=4).init(), jnp.zeros((2, 2))),
     "`scores` must be 1-D"),
    (lambda: bd.ucb1(3).init(0), "`n_runs` must be a positive integer or None"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(4), jnp.zeros(3, int), jnp.zeros(4)),
     r"`arm` must be an integer array of shape \(4,\) \(one per run\)"),
    (lambda: TS.update(TS.init(2), jnp.zeros(2, int), jnp.zeros(())),
     r"`reward` must be an array of shape \(2,\)"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(2), jnp.asarray([0, 3]), jnp.zeros(2)),
     "`arm` out of range"),
    (lambda: bd.ucb1(3).update(bd.ucb1(3).init(2), jnp.asarray([0, 1]),
                               jnp.asarray([0.0, np.inf])), "`reward` is NaN or inf"),
    (lambda: bd.simulate_runs(jax.random.key(0), bd.ucb1(3), lambda k, t, a: a * 0.0, 5, 0),
     "`n_runs` must be a positive integer"),
    (lambda: bd.simulate_runs(jax.random.key(0), bd.ucb1(3), lambda k, t, a: 0.0, 5, 4),
     r"`reward_fn` must return one reward per run, shape \(4,\)"),
]


@pytest.mark.parametrize(("fn", "match"), BAD, ids=[m for _, m in BAD])
def test_bad_input_raises_value_error(fn, match):
    with pytest.raises(ValueError, match=match):
        fn()


_upd3 = jax.jit(bd.ucb1(3).update)
_ts_upd = jax.jit(TS.update)
_upd3_runs = jax.jit(bd.ucb1(3).update)  # a (K, R) state: another trace of the same policy


@pytest.mark.parametrize(("fn", "match"), [
    (lambda: _upd3(bd.ucb1(3).init(), 7, 1.0), "`arm` out of range"),
    (lambda: _upd3(bd.ucb1(3).init(), 0, jnp.nan), "`reward` is NaN or inf"),
    (lambda: _ts_upd(TS.init(), 0, 2.0), r"must be in \[0, 1\] for thompson_beta"),
    (lambda: _credit(jnp.asarray([[-1], [2], [1]]), jnp.zeros(3), decay=0.5),
     "cycle or is not in topological order"),
    (lambda: _credit_batched(jnp.asarray([[[-1], [0]], [[1], [-1]]]), jnp.zeros((2, 2)),
                             jnp.ones(2)), "cycle or is not in topological order"),
    (lambda: _upd3_runs(bd.ucb1(3).init(2), jnp.asarray([1, 5]), jnp.zeros(2)),
     "`arm` out of range"),
    (lambda: _upd3_runs(bd.ucb1(3).init(2), jnp.asarray([1, 2]), jnp.asarray([0.0, np.nan])),
     "`reward` is NaN or inf"),
], ids=["arm", "nan", "beta-range", "cycle-jit", "cycle-vmap", "runs-arm", "runs-nan"])
def test_bad_input_under_jit_raises_at_run_time(fn, match):
    with pytest.raises(Exception, match=match):
        jax.block_until_ready(fn())


# --------------------------------------------------------------------------- devices


def _sim_tg(key):
    state, trace = bd.simulate(key, TG, REWARD, 40)
    return trace.arms, state.sums


def test_sharded_vmap_on_8_devices_equals_vmap():
    keys = jax.random.split(jax.random.key(9), 16)
    arms1, sums1 = jax.jit(jax.vmap(_sim_tg))(keys)
    arms8, sums8 = jd.sharded_vmap(_sim_tg, jd.make_mesh({"data": 8}))(keys)
    assert arms8.shape == (16, 40)
    np.testing.assert_array_equal(np.asarray(arms8), np.asarray(arms1))
    np.testing.assert_allclose(np.asarray(sums8), np.asarray(sums1), rtol=1e-6)
    assert len({tuple(np.asarray(a)) for a in arms8}) > 1


def _runs_ducb(key, tables):
    """D-UCB runs in lockstep on ``tables`` (T, K, R): runs on the last axis."""
    reward = _table_reward(jnp.moveaxis(tables, -1, 0))
    return bd.simulate_runs(key, POL64["discounted_ucb"], reward, tables.shape[0],
                            tables.shape[-1])


def test_sharded_runs_on_8_devices_equals_one_device():
    """20 runs (padded to 24) split over 8 devices on their last axis give the one-device
    arms and states."""
    rng = np.random.default_rng(6)
    tables = jnp.asarray((rng.random((60, K, 20)) < MEANS[:, None]).astype(np.float64))
    state1, trace1 = jax.jit(_runs_ducb)(jax.random.key(0), tables)
    # the key is shared by every device (in_axes None): a table reward uses no randomness
    state8, trace8 = jd.sharded_runs(_runs_ducb, jd.make_mesh({"data": 8}),
                                     in_axes=(None, -1))(jax.random.key(0), tables)
    assert trace8.arms.shape == (60, 20) and state8.counts.shape == (K, 20)
    np.testing.assert_array_equal(np.asarray(trace8.arms), np.asarray(trace1.arms))
    for got, want in zip(jax.tree.leaves(state8), jax.tree.leaves(state1), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    assert len({tuple(a) for a in np.asarray(trace8.arms).T}) > 1
