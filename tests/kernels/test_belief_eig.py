"""kernels.belief.eig and kernels.belief.evidence: EIG against brute-force enumeration
in float64, the three forms of the mutual information, the expected posterior equal to
the prior, bounds and limiting cases, vmap over candidates without retracing, the greedy
selection against a brute-force step and its budget, the log evidence closed forms
against numpyro and the Monte Carlo estimator, the likelihood table of numpyro models,
and the bad inputs (eagerly and under jit)."""

from __future__ import annotations

import importlib
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jaxkit.kernels.checks import checked_jit
from scipy import stats

# the package re-exports the functions `eig` and `log_evidence`; import the modules
E = importlib.import_module("jaxkit.kernels.belief.eig")
V = importlib.import_module("jaxkit.kernels.belief.evidence")
K, Y, X = 4, 5, 6


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    lp = np.log(rng.dirichlet(np.ones(K)))
    ll = np.log(rng.dirichlet(np.ones(Y) * 0.7, size=(X, K)))
    return lp, ll


def _brute_eig(lp, ll):
    """Sum over every (explanation, outcome) pair, in float64 loops."""
    pi, L = np.exp(lp), np.exp(ll)
    py = [sum(pi[k] * L[k, y] for k in range(len(pi))) for y in range(L.shape[1])]
    return sum(pi[k] * L[k, y] * math.log(L[k, y] / py[y])
               for k in range(len(pi)) for y in range(L.shape[1]) if pi[k] * L[k, y] > 0)


def test_eig_matches_brute_force(problem):
    lp, ll = problem
    got = np.asarray(E.eig(lp, ll))
    np.testing.assert_allclose(got, [_brute_eig(lp, ll[x]) for x in range(X)], rtol=1e-10)


def test_three_forms_of_mutual_information_and_expected_posterior(problem):
    lp, ll = problem
    e = np.asarray(E.eig(lp, ll))
    pi, L = np.exp(lp), np.exp(ll)  # (K,), (X, K, Y)
    py = np.einsum("k,xky->xy", pi, L)
    H = lambda p, ax=-1: -np.sum(np.where(p > 0, p * np.log(p), 0), ax)  # noqa: E731
    np.testing.assert_allclose(e, H(py) - np.einsum("k,xk->x", pi, H(L)), rtol=1e-10)
    log_post, log_py = E.outcome_posteriors(lp, ll)  # (X, Y, K), (X, Y)
    post = np.exp(np.asarray(log_post))
    kl = np.sum(post * (np.asarray(log_post) - lp), -1)
    np.testing.assert_allclose(e, np.sum(np.exp(log_py) * kl, -1), rtol=1e-10)
    np.testing.assert_allclose(np.einsum("xy,xyk->xk", np.exp(log_py), post),
                               np.broadcast_to(pi, (X, K)), atol=1e-12)


def test_bounds_and_limiting_cases():
    lp = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    same = np.log(np.tile(np.array([0.2, 0.3, 0.5, 0.0]), (4, 1)) + 0.0)
    assert float(E.eig(lp, same)) == pytest.approx(0.0, abs=1e-12)
    ident = np.where(np.eye(4) > 0, 0.0, -np.inf)  # the outcome names the explanation
    H = -np.sum(np.exp(lp) * lp)
    assert float(E.eig(lp, ident)) == pytest.approx(H, rel=1e-12)
    rng = np.random.default_rng(3)
    ll = np.log(rng.dirichlet(np.ones(3), size=(50, 4)))
    e = np.asarray(E.eig(lp, ll))
    assert np.all(e >= 0) and np.all(e <= math.log(3) + 1e-12)


def test_masked_explanations_and_outcomes_drop_out():
    lp = np.log(np.array([0.5, 0.5, 0.0]))
    rng = np.random.default_rng(1)
    ll = np.log(rng.dirichlet(np.ones(3), size=(3,)))
    ll_pad = np.concatenate([ll, np.full((3, 1), -np.inf)], -1)  # an impossible outcome
    ll_pad[2] = 0.0  # the masked explanation's row: anything (not checked)
    np.testing.assert_allclose(E.eig(lp, ll_pad), _brute_eig(lp[:2], ll[:2]), rtol=1e-10)


def test_vmap_over_candidates_float32_no_retrace(problem):
    lp, ll = problem

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(a, b):
        return jax.vmap(E.eig, in_axes=(None, 0))(a, b)

    lp32, ll32 = lp.astype(np.float32), ll.astype(np.float32)
    got = f(lp32, ll32)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, E.eig(lp, ll), rtol=2e-4, atol=1e-6)
    f(lp32, (ll32 - 0.0))  # new values: no retrace


def test_greedy_matches_brute_force_steps_and_budget(problem):
    lp, ll = problem
    costs = np.array([1.0, 2.0, 0.5, 3.0, 1.5, 1.0])
    outcomes = np.array([0, 1, 2, 3, 4, 0])
    budget = 4.0
    final, info = E.greedy_eig(lp, ll, costs, budget, outcomes, max_steps=6)
    cur, left, used = lp.copy(), budget, set()
    for t in range(6):
        cand = [x for x in range(X) if x not in used and costs[x] <= left]
        if not cand:
            assert int(info.choice[t]) == -1
            continue
        scores = [_brute_eig(cur, ll[x]) / costs[x] for x in cand]
        x = cand[int(np.argmax(scores))]
        assert int(info.choice[t]) == x
        used.add(x)
        left -= costs[x]
        j = cur + ll[x, :, outcomes[x]]
        cur = j - np.log(np.exp(j).sum())
        np.testing.assert_allclose(info.log_post[t], cur, atol=1e-10)
    assert float(final.spent) <= budget and float(final.spent) == pytest.approx(budget - left)
    assert len(set(int(c) for c in info.choice if c >= 0)) == int(np.sum(info.choice >= 0))


def test_greedy_impossible_outcome_keeps_belief():
    lp = np.log(np.array([0.5, 0.5]))
    ll = np.log(np.array([[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0]]]))  # outcome 2 impossible
    final, info = E.greedy_eig(lp, ll, np.ones(1), 1.0, np.array([2]), max_steps=1)
    np.testing.assert_allclose(final.log_post, lp)
    assert int(info.choice[0]) == 0 and bool(np.all(np.isfinite(final.log_post)))


def test_greedy_bad_inputs(problem):
    lp, ll = problem
    costs, outs = np.ones(X), np.zeros(X, np.int32)
    with pytest.raises(ValueError, match="`budget` is below every cost"):
        E.greedy_eig(lp, ll, costs * 2, 1.0, outs, max_steps=2)
    with pytest.raises(ValueError, match="`budget` is below every cost"):
        checked_jit(lambda c: E.greedy_eig(lp, ll, c, 1.0, outs, max_steps=2))(costs * 2)
    with pytest.raises(ValueError, match="`costs` must be positive"):
        E.greedy_eig(lp, ll, -costs, 1.0, outs, max_steps=2)
    with pytest.raises(ValueError, match="`outcomes` must lie in"):
        E.greedy_eig(lp, ll, costs, 1.0, outs + Y, max_steps=2)
    with pytest.raises(ValueError, match=r"`costs` must have shape \(6,\)"):
        E.greedy_eig(lp, ll, costs[:3], 1.0, outs, max_steps=2)
    with pytest.raises(ValueError, match="`budget`"):
        E.greedy_eig(lp, ll, costs, float("nan"), outs, max_steps=2)


def test_table_bad_inputs(problem):
    lp, ll = problem
    with pytest.raises(ValueError, match=r"`log_lik` must have shape \(\.\.\., K, Y\)"):
        E.eig(lp, ll[:, :3])
    with pytest.raises(ValueError, match="rows must be distributions"):
        E.eig(lp, ll + 0.1)
    with pytest.raises(ValueError, match="rows must be distributions"):
        checked_jit(E.eig)(lp, ll + 0.1)
    with pytest.raises(ValueError, match="`log_lik` contains NaN"):
        E.eig(lp, np.where(ll < -2, np.nan, ll))
    with pytest.raises(ValueError, match="`log_prior` must sum to one"):
        E.eig(lp + 0.5, ll)


def test_table_checks_under_jit_name_the_failure(problem):
    """Traced, the checks are one pass over the table and one run-time check on the
    result: each failure still gets its own message (NaN before +inf before rows)."""
    lp, ll = problem
    f = checked_jit(E.eig)
    np.testing.assert_allclose(f(lp, ll), E.eig(lp, ll), rtol=1e-12)
    for bad, msg in ((np.where(ll < -2, np.nan, ll), "`log_lik` contains NaN"),
                     (np.where(ll < -2, np.inf, ll), r"`log_lik` contains \+inf"),
                     (ll + 0.1, "rows must be distributions"),
                     (ll - 200.0, "rows must be distributions")):  # underflows: still caught
        with pytest.raises(ValueError, match=msg):
            jax.block_until_ready(f(lp, bad))
    masked = np.log(np.array([0.5, 0.5, 0.0, 0.0]))
    loose = ll.copy()
    loose[:, 2:] = 0.0  # rows of explanations without prior mass are not checked
    np.testing.assert_allclose(f(masked, loose), E.eig(masked, loose), rtol=1e-12)
    g = checked_jit(lambda a, b: E.check_log_lik_table(a, b)[1])
    with pytest.raises(ValueError, match="rows must be distributions"):
        jax.block_until_ready(g(lp, ll + 0.1))


def test_checked_eig_in_blocks_matches_and_names_the_failure(monkeypatch):
    """On the CPU the checked EIG walks blocks of candidates (each block's exp read by
    the row checks and by EIG): with blocks of 2 of 7 candidates (the last one
    overlapping) it equals the float64 brute force and the unchecked EIG, with a
    leading batch of two axes and a per-candidate prior, and a bad row in any block,
    the overlapped last one included, fails with its message."""
    monkeypatch.setattr(E, "_BLOCK_ENTRIES", 2 * K * Y)
    rng = np.random.default_rng(9)
    lp = np.log(rng.dirichlet(np.ones(K)))
    ll = np.log(rng.dirichlet(np.ones(Y) * 0.7, size=(7, K)))
    f = checked_jit(E.eig)
    want = [_brute_eig(lp, ll[x]) for x in range(7)]
    np.testing.assert_allclose(f(lp, ll), want, rtol=1e-10)
    np.testing.assert_allclose(f(lp, ll), E.eig(lp, ll, check=False), rtol=1e-12)
    assert np.asarray(f(lp, ll[:0])).shape == (0,)  # no candidates: no block
    lps = np.log(rng.dirichlet(np.ones(K), size=(2, 7)))
    lls = np.broadcast_to(ll, (2, 7, K, Y))
    np.testing.assert_allclose(
        f(lps, lls), [[_brute_eig(lps[i, x], ll[x]) for x in range(7)] for i in range(2)],
        rtol=1e-10)
    for x, change, msg in ((1, np.nan, "contains NaN"), (4, np.inf, r"contains \+inf"),
                           (6, 0.1, "rows must be distributions"),
                           (5, 0.1, "rows must be distributions")):
        bad = ll.copy()
        if change == 0.1:
            bad[x, 1] += 0.1
        else:
            bad[x, 2, 3] = change
        with pytest.raises(ValueError, match=msg):
            jax.block_until_ready(f(lp, bad))


def test_eager_eig_compile_options_follow_the_isa_limit(monkeypatch):
    """Concrete calls compile with 512-bit vectors only on an AVX-512 CPU backend without a
    lower ``--xla_cpu_max_isa``."""
    from jaxkit.kernels import _xla_cpu

    def clear():
        E._cpu_compiler_options.cache_clear()
        _xla_cpu.has_avx512.cache_clear()

    clear()
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
    assert E._cpu_compiler_options() == ()
    assert E._outcome_parts(100) == (slice(0, 96), slice(96, 100))  # 8 lanes
    clear()
    monkeypatch.delenv("XLA_FLAGS")
    want = (("xla_cpu_prefer_vector_width", 512),) if (
        "avx512f" in _xla_cpu.cpu_flags() and jax.default_backend() == "cpu") else ()
    assert E._cpu_compiler_options() == want
    clear()


def test_eig_outcome_tail_split_matches_brute_force():
    """On the CPU the outcome axis is reduced as a multiple of the vector width plus a
    tail: against the float64 brute force (impossible outcomes and an explanation
    without mass in both parts), its JVP against central differences, and the parts."""
    assert E._outcome_parts(37) == ((slice(0, 32), slice(32, 37))
                                    if jax.default_backend() == "cpu" else (slice(None),))
    assert E._outcome_parts(32) == (slice(None),) and E._outcome_parts(5) == (slice(None),)
    rng = np.random.default_rng(7)
    lp = np.log(np.array([0.5, 0.3, 0.2, 0.0]))
    p = rng.dirichlet(np.ones(37) * 0.5, size=(3, 4))
    p[..., [3, 35]] = 0.0  # impossible in the main part and in the tail
    ll = np.log(p / p.sum(-1, keepdims=True))
    got = np.asarray(E.eig(lp, ll))
    np.testing.assert_allclose(got, [_brute_eig(lp, ll[x]) for x in range(3)], rtol=1e-10)
    d_ll = np.where(np.isfinite(ll), rng.normal(size=ll.shape), 0.0)
    f = jax.jit(lambda b: E.eig(lp, b, check=False))
    _, tangent = jax.jit(lambda b: jax.jvp(f, (b,), (d_ll,)))(ll)
    assert np.all(np.isfinite(tangent))
    h = 1e-6
    fd = (f(ll + h * d_ll) - f(ll - h * d_ll)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-9)


def test_eig_jvp_matches_finite_differences(problem):
    """The one-pass reduction has its own JVP (JAX's variadic-reduce JVP fails on
    symbolic zeros): against central differences in float64."""
    lp, ll = problem
    rng = np.random.default_rng(4)
    d_lp, d_ll = rng.normal(size=lp.shape), rng.normal(size=ll.shape)
    f = jax.jit(lambda a, b: E.eig(a, b, check=False))
    _, tangent = jax.jit(lambda a, b: jax.jvp(f, (a, b), (d_lp, d_ll)))(lp, ll)
    h = 1e-6
    fd = (f(lp + h * d_lp, ll + h * d_ll) - f(lp - h * d_lp, ll - h * d_ll)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ evidence


def _bb_latent(n, y=None):
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    numpyro.sample("y", dist.Binomial(n, p), obs=y)


def _bb_marginal(n, y=None):
    numpyro.sample("y", dist.BetaBinomial(2.0, 3.0, n), obs=y)


def test_beta_binomial_closed_form_against_numpyro_and_scipy():
    from scipy.special import betaln, comb

    k, n = np.array([3, 5, 1]), np.array([10, 8, 4])
    exact = float(V.beta_binomial_log_evidence(k, n, 2.0, 3.0))
    ref = np.log(comb(n, k)).sum() + betaln(2 + 9, 3 + 13) - betaln(2, 3)
    assert exact == pytest.approx(ref, abs=1e-5)
    # one observation: the beta-binomial pmf itself
    one = float(V.beta_binomial_log_evidence(k[:1], n[:1], 2.0, 3.0))
    assert one == pytest.approx(stats.betabinom.logpmf(3, 10, 2.0, 3.0), abs=1e-5)
    ev = V.log_evidence(jax.random.key(0), _bb_marginal, 10, y=jnp.asarray(3))
    assert bool(ev.exact) and float(ev.stderr) == 0.0
    assert float(ev.log_evidence) == pytest.approx(one, abs=1e-5)


@pytest.mark.slow  # compile-heavy; the estimator also runs by default in test_contrastive
def test_prior_monte_carlo_estimator_within_its_stderr():
    k, n = np.array([3, 5, 1]), np.array([10, 8, 4])
    exact = float(V.beta_binomial_log_evidence(k, n, 2.0, 3.0))

    def shared(y=None):
        p = numpyro.sample("p", dist.Beta(2.0, 3.0))
        numpyro.sample("y", dist.Binomial(jnp.asarray(n), p), obs=y)

    mc = jax.jit(lambda key: V.log_evidence(key, shared, n_samples=8000, y=jnp.asarray(k)))(
        jax.random.key(1))
    assert not bool(mc.exact) and 500 < float(mc.ess) <= 8000
    assert abs(float(mc.log_evidence) - exact) < 4 * float(mc.stderr) + 1e-3


def test_gamma_poisson_and_normal_closed_forms():
    c, t = np.array([3, 0, 5]), np.array([1.0, 0.5, 2.0])
    got = float(V.gamma_poisson_log_evidence(c, 2.0, 1.5, t))
    lam = np.linspace(1e-6, 40, 400_001)  # numerical integral over the rate
    dens = stats.gamma.pdf(lam, 2.0, scale=1 / 1.5) * np.prod(
        [stats.poisson.pmf(ci, ti * lam) for ci, ti in zip(c, t, strict=True)], 0)
    assert got == pytest.approx(math.log(np.trapezoid(dens, lam)), abs=1e-6)
    y = np.array([0.3, -0.2, 1.1, 0.4])
    cov = 0.5 ** 2 * np.eye(4) + 0.8 ** 2 * np.ones((4, 4))
    ref = stats.multivariate_normal(np.full(4, 0.1), cov).logpdf(y)
    assert float(V.normal_log_evidence(y, 0.1, 0.8, 0.5)) == pytest.approx(ref, abs=1e-10)


def test_closed_form_bad_inputs():
    with pytest.raises(ValueError, match="`k` must be integer counts"):
        V.beta_binomial_log_evidence(np.array([5]), np.array([3]), 1.0, 1.0)
    with pytest.raises(ValueError, match="`a` must be > 0"):
        V.beta_binomial_log_evidence(np.array([1]), np.array([3]), -1.0, 1.0)
    with pytest.raises(ValueError, match="`counts` must be non-negative"):
        V.gamma_poisson_log_evidence(np.array([-1]), 1.0, 1.0)
    with pytest.raises(ValueError, match="`y` contains NaN"):
        V.normal_log_evidence(np.array([np.nan]), 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="`n_samples`"):
        V.log_evidence(jax.random.key(0), _bb_latent, 10, n_samples=0, y=jnp.asarray(3))


@pytest.mark.slow  # compile-heavy; test_contrastive checks exact and estimated tables too
def test_log_lik_table_rows_normalised_and_exact_where_no_latent():
    designs, outcomes = jnp.asarray([4, 10]), jnp.arange(11)
    tab = jax.jit(lambda k: V.log_lik_table(k, [_bb_latent, _bb_marginal], designs, outcomes,
                                            n_samples=2000))(jax.random.key(2))
    assert tab.shape == (2, 2, 11)
    np.testing.assert_allclose(jax.scipy.special.logsumexp(tab, -1), 0.0, atol=1e-5)
    ref = np.exp(np.asarray(dist.BetaBinomial(2.0, 3.0, 10).log_prob(np.arange(11))))
    np.testing.assert_allclose(np.exp(tab[1, 1]), ref, atol=1e-5)  # exact
    np.testing.assert_allclose(np.exp(tab[1, 0]), ref, atol=0.03)  # prior Monte Carlo
    assert np.all(np.exp(tab[0, :, 5:]) < 1e-6)  # n = 4: at most 4 successes
    assert V.latent_sites(_bb_latent, 10, y=3) == ["p"]
    assert V.latent_sites(_bb_marginal, 10, y=3) == []


def test_unrolled_threefry_leaves_the_estimate_unchanged(monkeypatch):
    """The prior draws run on the unrolled Threefry (tests/kernels/test_threefry.py: the
    same bits): an estimated log evidence equals the one drawn with the caller's key."""

    def model(y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 0.5), obs=y)

    def ev():
        return jax.jit(lambda k: V.log_evidence(k, model, n_samples=16, y=jnp.asarray(0.3)))(
            jax.random.key(2))

    fast = ev()
    monkeypatch.setattr(V, "unrolled_key", lambda k: k)
    for a, b in zip(fast, ev(), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
