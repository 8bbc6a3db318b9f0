"""Charge-balance kernel: conditional-Gaussian noise (constraint and covariance), the soft
projection against KKT conditions and SLSQP, idempotence and masks, the exact discrete DP
against brute force (feasible and infeasible cells, allowed masks for Fe2+/Fe3+) and
against scipy's MILP (HiGHS) on larger cells, the Lagrangian route (balanced, never below
the optimum, dual bound below it), jit/vmap against a loop, bad input, and the
oxidation-state table."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import charge as ch
from scipy import optimize

from jaxkit.data import oxidation as ox

F64 = jnp.float64
GLASS = ["Si", "B", "Al", "P", "Li", "Na", "K", "Ca", "Mg", "Zn", "O"]  # 11 species
GLASS_Q = np.array([4, 3, 3, 5, 1, 1, 1, 2, 2, 2, -2])


# --------------------------------------------------------------------------- helpers


@functools.cache
def _soft(q: tuple, **kw):
    return jax.jit(lambda p, m: ch.project_soft(p, np.asarray(q, float), mask=m, **kw))


@functools.cache
def _exact(q: tuple, **kw):
    return jax.jit(lambda c, m, a: ch.project_discrete(c, np.asarray(q), mask=m, allowed=a,
                                                       **kw))


@functools.cache
def _approx(q: tuple):
    return jax.jit(lambda c, m, a: ch.project_discrete_approx(c, np.asarray(q), mask=m,
                                                              allowed=a))


@functools.cache
def _bound(q: tuple):
    return jax.jit(lambda c, m, a: ch.lagrangian_bound(c, np.asarray(q), mask=m, allowed=a))


def _ones(n, k=None):
    return np.ones(n if k is None else (n, k), bool)


def brute_force(cost, q, mask, allowed):
    """(optimal cost or inf, optimal assignment or None) by enumerating all assignments."""
    act = np.flatnonzero(mask)
    k = cost.shape[1]
    if len(act) == 0:
        return np.inf, None
    combos = np.array(list(itertools.product(range(k), repeat=len(act))))
    ok = (q[combos].sum(1) == 0) & allowed[act[None, :], combos].all(1)
    if not ok.any():
        return np.inf, None
    totals = cost[act[None, :], combos].sum(1)
    totals[~ok] = np.inf
    best = int(np.argmin(totals))
    return totals[best], combos[best]


def milp_optimum(cost, q, allowed):
    """Optimal balanced cost by scipy's MILP (HiGHS): x[i, k] binary, one per atom."""
    n, k = cost.shape
    c = np.where(allowed, cost, 0).ravel()
    one = np.kron(np.eye(n), np.ones(k))
    bal = np.tile(q, n)[None, :]
    cons = [optimize.LinearConstraint(one, 1, 1), optimize.LinearConstraint(bal, 0, 0)]
    bounds = optimize.Bounds(0, allowed.ravel().astype(float))
    res = optimize.milp(c, constraints=cons, integrality=np.ones(n * k), bounds=bounds,
                        options={"mip_rel_gap": 1e-12})
    return res.fun if res.status == 0 else np.inf


def check_kkt(y, q, mask, res, atol=1e-9):
    """Independent optimality check of a soft projection: primal feasibility, and for each
    unmasked row p = max(y - mu q - tau, 0) with one tau: equal shifted values on the
    support (stationarity with the simplex multiplier) and no larger value off it
    (dual feasibility / complementary slackness)."""
    p, mu = np.asarray(res.p), float(res.mu)
    assert np.all(p[mask] >= -atol)
    np.testing.assert_allclose(p[mask].sum(1), 1, atol=atol)
    assert abs(float(np.sum(p[mask] @ q))) <= atol * max(1, mask.sum())
    z = y - mu * q
    for i in np.flatnonzero(mask):
        sup = p[i] > atol
        tau = z[i, sup] - p[i, sup]
        np.testing.assert_allclose(tau, tau.mean(), atol=1e-8)
        assert np.all(z[i, ~sup] <= tau.mean() + 1e-8)
    np.testing.assert_array_equal(p[~mask], y[~mask])


# --------------------------------------------------------------------------- noise


def test_balanced_noise_constraint_and_masked_rows(key):
    q = np.array([4.0, -2.0, 1.0])
    mask = np.array([True, False, True, True])
    for dtype, tol in [(jnp.float32, 1e-5), (F64, 1e-13)]:
        x = ch.balanced_noise(key, (4, 3), q, mask=mask, dtype=dtype)
        assert x.dtype == dtype and x.shape == (4, 3)
        assert abs(float(jnp.sum(x @ jnp.asarray(q, dtype)))) < tol * float(jnp.sum(x * x))
        np.testing.assert_array_equal(np.asarray(x[1]), 0)


def test_balanced_noise_is_the_conditional_gaussian(key):
    q = np.array([2.0, -1.0, 3.0])
    mask = np.array([True, True, False])
    keys = jax.random.split(key, 40_000)
    draw = jax.jit(jax.vmap(lambda k: ch.balanced_noise(k, (3, 3), q, mask=mask, dtype=F64)))
    x = np.asarray(draw(keys)).reshape(len(keys), -1)
    v = (mask[:, None] * q[None, :]).ravel()
    act = np.repeat(mask, 3)
    want = np.diag(act.astype(float)) - np.outer(v, v) / (v @ v)
    np.testing.assert_allclose(x.mean(0), 0, atol=0.03)
    np.testing.assert_allclose(np.cov(x.T), want, atol=0.03)
    # variance along the charge direction is zero, along orthogonal directions one
    assert np.var(x @ v) < 1e-20
    w = np.where(act, np.arange(9.0) - 4, 0)
    w -= (w @ v) / (v @ v) * v
    w /= np.linalg.norm(w)
    assert abs(np.var(x @ w) - 1) < 0.03


# --------------------------------------------------------------------------- soft


@settings(max_examples=25, deadline=None)
@given(k=st.sampled_from([2, 3, 4]), seed=st.integers(0, 2**31 - 1),
       n_mask=st.integers(0, 2))
def test_project_soft_satisfies_kkt_with_both_solvers(k, seed, n_mask):
    """KKT conditions hold for the default semismooth Newton solver, which agrees with
    the bracketed root search (also on rows with ties)."""
    rng = np.random.default_rng(seed)
    qs = {2: (2, -1), 3: (4, -2, 1), 4: (3, 0, -2, 1)}[k]
    y = rng.normal(size=(5, k)) * rng.choice([0.3, 1.0, 5.0])
    if rng.random() < 0.3:  # ties and repeated rows
        y = np.round(y)
    mask = np.ones(5, bool)
    mask[rng.choice(5, n_mask, replace=False)] = False
    a = _soft(qs)(jnp.asarray(y), mask)
    b = _soft(qs, method="bracketed")(jnp.asarray(y), mask)
    assert bool(a.feasible) and bool(b.feasible)
    check_kkt(y, np.asarray(qs, float), mask, a)
    np.testing.assert_allclose(np.asarray(a.p), np.asarray(b.p), atol=1e-9)


def test_many_species_two_support_words_and_sorted_simplex():
    """40 species: the semismooth supports span two bit-mask words and the simplex rows
    take the sort-based path; both solvers still agree and the simplex rows equal the
    unrolled path's."""
    rng = np.random.default_rng(11)
    q = tuple(int(v) for v in rng.integers(-3, 4, 40))
    y = jnp.asarray(rng.normal(size=(6, 40)))
    a = _soft(q)(y, _ones(6))
    b = _soft(q, method="bracketed")(y, _ones(6))
    assert bool(a.feasible) and bool(b.feasible)
    np.testing.assert_allclose(np.asarray(a.p), np.asarray(b.p), atol=1e-10)
    check_kkt(np.asarray(y), np.asarray(q, float), _ones(6), a)
    p_sort, _ = ch.simplex_rows(y)
    p_unrolled = jnp.concatenate([ch.simplex_rows(y[:, :20])[0], ch.simplex_rows(y[:, 20:])[0]],
                                 axis=1)
    np.testing.assert_allclose(np.asarray(p_sort).sum(1), 1, atol=1e-12)
    for lo in (0, 20):  # unrolled rule on 20 species == sort rule on the same 20
        z = y[:, lo:lo + 20]
        pad = jnp.concatenate([z, jnp.full((6, 20), -1e3)], axis=1)  # 40 -> sort path
        np.testing.assert_allclose(np.asarray(ch.simplex_rows(pad)[0][:, :20]),
                                   np.asarray(p_unrolled[:, lo:lo + 20]), atol=1e-12)


def test_simplex_rows_gradient_matches_finite_differences():
    rng = np.random.default_rng(12)
    z0 = jnp.asarray(rng.normal(size=(3, 4)))
    w = jnp.arange(4.0)

    def f(z):
        return jnp.sum(ch.simplex_rows(z)[0] ** 2 * w)

    g = np.asarray(jax.grad(f)(z0))
    eps = 1e-6
    for i, j in itertools.product(range(3), range(4)):
        d = np.zeros((3, 4))
        d[i, j] = eps
        assert abs(g[i, j] - (f(z0 + d) - f(z0 - d)) / (2 * eps)) < 1e-7


def test_semismooth_falls_back_on_a_flat_start():
    """Scaled one-hot rows: at the start every support is a single species, the charge
    does not move with ``mu`` and semismooth Newton stops; the bracketed search must take
    over, also for that cell alone inside a vmapped batch."""
    q = (4, -2, 1)
    flat = 10 * np.eye(3)[[0, 1, 1, 2, 0]]
    ssn = ch.semismooth_newton(jnp.asarray(flat), jnp.asarray(q, F64), mask=jnp.ones(5, bool),
                               max_iter=50)
    assert not bool(ssn.converged)
    ref = _soft(q, method="bracketed")(jnp.asarray(flat), _ones(5))
    got = _soft(q)(jnp.asarray(flat), _ones(5))
    assert bool(got.feasible)
    np.testing.assert_allclose(np.asarray(got.p), np.asarray(ref.p), atol=1e-12)
    other = np.random.default_rng(9).normal(size=(5, 3))
    batch = jax.jit(jax.vmap(_soft(q)))(jnp.asarray(np.stack([flat, other])),
                                       np.ones((2, 5), bool))
    for b, y in enumerate((flat, other)):
        one = _soft(q, method="bracketed")(jnp.asarray(y), _ones(5))
        np.testing.assert_allclose(np.asarray(batch.p[b]), np.asarray(one.p), atol=1e-10)
        assert bool(batch.feasible[b])
    with pytest.raises(ValueError, match="method"):
        ch.project_soft(jnp.asarray(flat), q, method="newton")


def test_project_soft_matches_slsqp():
    rng = np.random.default_rng(1)
    q = np.array([4.0, -2.0, 1.0, 3.0])
    for _ in range(3):
        y = rng.normal(size=(4, 4))
        res = _soft(tuple(q))(jnp.asarray(y), _ones(4))
        cons = [{"type": "eq", "fun": lambda x: x.reshape(4, 4).sum(1) - 1},
                {"type": "eq", "fun": lambda x: np.array([x.reshape(4, 4).sum(0) @ q])}]
        yv = y.ravel()
        ref = optimize.minimize(lambda x, yv=yv: 0.5 * np.sum((x - yv) ** 2), np.full(16, .25),
                                jac=lambda x, yv=yv: x - yv, method="SLSQP", constraints=cons,
                                bounds=[(0, None)] * 16, options={"ftol": 1e-14, "maxiter": 500})
        assert ref.success
        np.testing.assert_allclose(np.asarray(res.p).ravel(), ref.x, atol=1e-6)
        np.testing.assert_allclose(0.5 * np.sum((np.asarray(res.p) - y) ** 2), ref.fun,
                                   rtol=1e-8, atol=1e-10)


def test_project_soft_idempotent_and_masked_rows_excluded():
    rng = np.random.default_rng(2)
    q = (4, -2, 1)
    y = rng.normal(size=(6, 3))
    y[4] = np.nan  # padding may hold anything
    mask = np.array([True, True, True, False, False, True])
    res = _soft(q)(jnp.asarray(y), mask)
    assert bool(res.feasible)
    again = _soft(q)(res.p, mask)
    np.testing.assert_allclose(np.asarray(again.p), np.asarray(res.p), atol=1e-12)
    assert abs(float(again.mu)) < 1e-9
    # masked rows unchanged, and the unmasked rows equal the projection of those rows alone
    np.testing.assert_array_equal(np.asarray(res.p)[~mask], y[~mask])
    alone = _soft(q)(jnp.asarray(y[mask]), _ones(4))
    np.testing.assert_allclose(np.asarray(res.p)[mask], np.asarray(alone.p), atol=1e-12)


def test_project_soft_float32_and_large_cell():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(800, 11)) * 2
    logits[:, -1] += 3
    p = jax.nn.softmax(jnp.asarray(logits, jnp.float32), -1)
    res = jax.jit(lambda p: ch.project_soft(p, GLASS_Q))(p)
    assert res.p.dtype == jnp.float32 and bool(res.feasible)
    assert abs(float(res.residual)) <= 16 * np.finfo(np.float32).eps * 800 * 5
    assert int(res.n_iter) < 30


def test_semismooth_float32_batch_needs_no_fallback():
    """float32 rows on the simplex with many exact zeros (what a sampler hands over):
    supports that flip at rounding level must not make the semismooth solver cycle
    into the (much slower) bracketed fallback."""
    rng = np.random.default_rng(13)
    h = rng.normal(size=(64, 40, 11)).astype(np.float32)
    h[..., -1] += 0.5
    s, _ = jax.vmap(ch.simplex_rows)(jnp.asarray(h))
    mask = np.ones((64, 40), bool)
    mask[:, 30:] = False
    res = jax.jit(jax.vmap(lambda p, m: ch.project_soft(p, GLASS_Q, mask=m)))(s, mask)
    assert np.all(np.asarray(res.feasible))
    assert int(np.max(np.asarray(res.n_iter))) <= 15  # semismooth alone; no fallback
    p = np.asarray(res.p)
    np.testing.assert_allclose(p[:, :30].sum(-1), 1, atol=1e-5)


@functools.cache
def _soft_warm():
    return jax.jit(jax.vmap(lambda p, m, w: ch.project_soft(p, GLASS_Q, mask=m, warm_start=w)))


def test_project_soft_warm_start_same_projection_fewer_iterations():
    """A sampler carries the duals from one step to the next: starting the semismooth
    solver from the previous projection's ``(mu, tau)`` gives the same projection of the
    nearby matrix, in fewer iterations; a stale or broken warm start changes nothing."""
    rng = np.random.default_rng(21)
    logits = rng.normal(size=(6, 60, 11)) * 2
    logits[..., -1] += 2
    y0 = jnp.asarray(jax.nn.softmax(logits, -1))
    mask = np.ones((6, 60), bool)
    mask[:, 50:] = False
    cold = jax.jit(jax.vmap(lambda p, m: ch.project_soft(p, GLASS_Q, mask=m)))
    prev = cold(y0, mask)
    y1 = y0 + 0.01 * rng.normal(size=y0.shape)  # a nearby matrix (the next step's)
    ref = cold(y1, mask)
    warm = _soft_warm()(y1, mask, prev)
    assert np.all(np.asarray(warm.feasible))
    np.testing.assert_allclose(np.asarray(warm.p), np.asarray(ref.p), atol=1e-12)
    np.testing.assert_allclose(np.asarray(warm.mu), np.asarray(ref.mu), atol=1e-10)
    np.testing.assert_allclose(np.asarray(warm.tau), np.asarray(ref.tau), atol=1e-10)
    assert np.all(np.asarray(warm.tau)[:, 50:] == 0)
    assert np.sum(np.asarray(warm.n_iter)) < np.sum(np.asarray(ref.n_iter))
    # the returned duals reproduce p: p_i = max(y_i - mu q - tau_i, 0) on unmasked rows
    rebuilt = np.maximum(np.asarray(y1) - np.asarray(warm.mu)[:, None, None] * GLASS_Q
                         - np.asarray(warm.tau)[..., None], 0)
    np.testing.assert_allclose(rebuilt[:, :50], np.asarray(warm.p)[:, :50], atol=1e-12)
    # a far-off or non-finite warm start (as a (mu, tau) pair) still lands on the projection
    for mu0, tau0 in ((np.full(6, 40.0), np.full((6, 60), -3.0)),
                      (np.full(6, np.nan), np.zeros((6, 60)))):
        res = _soft_warm()(y1, mask, (jnp.asarray(mu0), jnp.asarray(tau0)))
        assert np.all(np.asarray(res.feasible))
        np.testing.assert_allclose(np.asarray(res.p), np.asarray(ref.p), atol=1e-12)
    with pytest.raises(ValueError, match="warm_start"):
        ch.project_soft(y1[0], GLASS_Q, warm_start=(0.0, np.zeros(7)))
    with pytest.raises(ValueError, match="warm_start"):
        ch.project_soft(y1[0], GLASS_Q, warm_start=1.0)


def test_relax_interpolates():
    rng = np.random.default_rng(4)
    q = (4, -2, 1)
    y = jnp.asarray(rng.normal(size=(5, 3)))
    mask = np.array([True, True, False, True, True])
    proj = _soft(q)(y, mask).p
    step = jax.jit(lambda p, e: ch.relax(p, np.asarray(q, float), e, mask=mask))
    np.testing.assert_allclose(step(y, 0.0), y)
    np.testing.assert_allclose(step(y, 1.0), proj, atol=1e-14)
    half = step(y, 0.5)
    np.testing.assert_allclose(half, 0.5 * (y + proj), atol=1e-14)
    np.testing.assert_array_equal(np.asarray(half)[2], np.asarray(y)[2])
    with pytest.raises(ValueError, match="eta"):
        ch.relax(y, q, 1.5)


def test_project_soft_infeasible_is_reported():
    y = jnp.asarray(np.random.default_rng(5).normal(size=(3, 2)))
    with pytest.raises(ValueError, match="all charges in `q` are > 0"):
        ch.project_soft(y, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="all charges in `q` are < 0"):
        ch.project_soft(y, np.array([-1.0, -2.0]))
    # traced q: no eager error, feasible=False, rows still on the simplex
    res = jax.jit(ch.project_soft)(y, jnp.array([1.0, 2.0]))
    assert not bool(res.feasible)
    np.testing.assert_allclose(np.asarray(res.p).sum(1), 1)
    # no unmasked atom: infeasible, nothing changed
    res = _soft((1, -1))(y, np.zeros(3, bool))
    assert not bool(res.feasible)
    np.testing.assert_array_equal(np.asarray(res.p), np.asarray(y))
    # neutral species only balance: feasible, all mass on the neutral species
    res = _soft((0, 2))(y, _ones(3))
    assert bool(res.feasible)
    np.testing.assert_allclose(np.asarray(res.p), [[1, 0]] * 3, atol=1e-12)


# --------------------------------------------------------------------------- discrete


Q_SMALL = [(4, -2), (-2, 1, 3), (2, -1, 0, 3), (5, -3, 1, -2)]


@pytest.mark.parametrize("q", Q_SMALL)
def test_project_discrete_matches_brute_force(q):
    rng = np.random.default_rng(sum(q) + 10 * len(q))
    qa = np.asarray(q)
    k = len(q)
    n_feasible = n_infeasible = 0
    for trial in range(25):
        cost = rng.exponential(size=(6, k))
        if trial % 5 == 0:
            cost = np.round(cost)  # ties
        mask = rng.random(6) < 0.75
        allowed = rng.random((6, k)) < 0.85 if trial % 3 == 0 else _ones(6, k)
        want, _ = brute_force(cost, qa, mask, allowed)
        res = _exact(q)(jnp.asarray(cost), mask, allowed)
        a = np.asarray(res.assignment)
        np.testing.assert_array_equal(a[~mask], -1)
        # the full DP and the fixing route forced onto its fallback (window 0) agree
        for other in (_exact(q, method="dp"), _exact(q, window=0)):
            o = other(jnp.asarray(cost), mask, allowed)
            assert bool(o.feasible) == bool(res.feasible)
            if np.isfinite(want):
                np.testing.assert_allclose(float(o.cost), want, rtol=1e-12)
        if np.isfinite(want):
            n_feasible += 1
            assert bool(res.feasible)
            assert qa[a[mask]].sum() == 0 and allowed[mask, a[mask]].all()
            np.testing.assert_allclose(float(res.cost), want, rtol=1e-12)
            np.testing.assert_allclose(cost[mask, a[mask]].sum(), want, rtol=1e-12)
            appr = _approx(q)(jnp.asarray(cost), mask, allowed)
            if bool(appr.feasible):
                b = np.asarray(appr.assignment)
                assert qa[b[mask]].sum() == 0 and allowed[mask, b[mask]].all()
                assert float(appr.cost) >= want - 1e-12
            bound = _bound(q)(jnp.asarray(cost), mask, allowed)
            assert float(bound.bound) <= want + 1e-9
        else:
            n_infeasible += 1
            assert not bool(res.feasible)
            assert not bool(_approx(q)(jnp.asarray(cost), mask, allowed).feasible)
            # the documented fallback: unconstrained argmin over allowed species
            c = np.where(allowed, cost, np.inf)
            for i in np.flatnonzero(mask):
                if np.isfinite(c[i]).any():
                    assert c[i, a[i]] == c[i].min()
    assert n_feasible >= 5
    if q == (4, -2):
        assert n_infeasible >= 1


def test_project_discrete_sio2_divisibility():
    q = (4, -2)  # Si4+, O2-: balanced iff #Si : #O = 1 : 2, i.e. N divisible by 3
    cost = jnp.asarray(np.random.default_rng(6).random((7, 2)))
    for n_active, ok in [(6, True), (5, False), (4, False), (3, True), (7, False)]:
        mask = np.arange(7) < n_active
        res = _exact(q)(cost, mask, _ones(7, 2))
        assert bool(res.feasible) == ok, n_active
        a = np.asarray(res.assignment)[:n_active]
        if ok:
            assert (a == 0).sum() * 2 == (a == 1).sum()
        else:
            np.testing.assert_array_equal(a, np.argmin(np.asarray(cost)[:n_active], 1))
            np.testing.assert_allclose(float(res.cost),
                                       np.asarray(cost)[:n_active].min(1).sum())


def test_allowed_fixes_elements_and_chooses_fe_oxidation_state():
    names, q = ox.species(["Si", "O", "Fe"])
    assert names == ["Si4+", "O2-", "Fe2+", "Fe3+"]
    cells = [["Fe", "Fe", "Fe", "O", "O", "O", "O"],  # Fe3O4: one Fe2+, two Fe3+
             ["Fe", "O", "Fe", "O", "O"],  # Fe2O3 (+ 2 padding atoms)
             ["Si", "O", "Fe", "O", "O"],  # FeSiO3: Fe2+
             ["Fe", "Fe", "O", "O", "O", "O", "O"]]  # infeasible (needs 10 from 2 Fe)
    rng = np.random.default_rng(7)
    fe2 = fe3 = 0
    for trial in range(16):
        atoms = list(rng.permutation(cells[trial % 4]))
        mask = np.arange(7) < len(atoms)
        atoms += ["O"] * (7 - len(atoms))
        allowed = ox.species_allowed(atoms, ["Si", "O", "Fe"])
        cost = rng.exponential(size=(7, 4))
        want, _ = brute_force(cost, q, mask, allowed)
        res = _exact(tuple(q))(jnp.asarray(cost), mask, allowed)
        assert bool(res.feasible) == bool(np.isfinite(want)) == (trial % 4 != 3)
        if np.isfinite(want):
            a = np.asarray(res.assignment)[mask]
            np.testing.assert_allclose(float(res.cost), want, rtol=1e-12)
            assert [names[j].rstrip("0123456789+-") for j in a] == atoms[:mask.sum()]
            fe2 += int(np.sum(a == 2))
            fe3 += int(np.sum(a == 3))
            if trial % 4 == 0:
                assert (a == 2).sum() == 1 and (a == 3).sum() == 2
    assert fe2 > 0 and fe3 > 0


# ------------------------------------------------------------ fixed composition

# Si4+ Na+ Fe2+ Fe3+ Mn2+ Mn3+ Mn4+ O2- (the shipped table lists Mn2+ only; the kernel
# takes any species list): two multivalent elements give several balanced splits
COMP_ELEMENTS = ["Si", "Na", "Fe", "Mn", "O"]
COMP_Q = np.array([4, 1, 2, 3, 2, 3, 4, -2])
COMP_EL = np.array([0, 1, 2, 2, 3, 3, 3, 4])


def _counts(formula):
    return np.array([formula.get(e, 0) for e in COMP_ELEMENTS])


@functools.cache
def _composition(q: tuple, element: tuple, counts: tuple):
    return jax.jit(lambda c, m, a: ch.project_composition(
        c, np.asarray(q), np.asarray(element), np.asarray(counts), mask=m, allowed=a))


def milp_composition(cost, q, element, counts):
    """The same problem by scipy's MILP (HiGHS)."""
    n, k = cost.shape
    rows = [np.kron(np.eye(n), np.ones(k)), np.tile(q, n)[None, :]]
    rows += [np.tile((element == e).astype(float), n)[None, :] for e in range(len(counts))]
    bounds = np.concatenate([np.ones(n), [0], counts])
    res = optimize.milp(cost.ravel(), integrality=np.ones(n * k),
                        constraints=optimize.LinearConstraint(np.vstack(rows), bounds, bounds),
                        bounds=optimize.Bounds(0, 1), options={"mip_rel_gap": 1e-12})
    return res.fun if res.status == 0 else np.inf


def test_composition_splits_enumerate_balanced_oxidation_states():
    q, element = COMP_Q, COMP_EL
    counts = _counts({"Na": 1, "Fe": 2, "Mn": 2, "O": 6})
    splits = ch.composition_splits(q, element, counts)
    # by hand: Na+ and O2- leave +11 for 2 Fe (4..6) and 2 Mn (4..8)
    want = set()
    for f3 in range(3):
        for m3, m4 in itertools.product(range(3), repeat=2):
            if m3 + m4 <= 2 and 2 * 2 + f3 + 2 * 2 + m3 + 2 * m4 == 11:
                want.add((0, 1, 2 - f3, f3, 2 - m3 - m4, m3, m4, 6))
    assert {tuple(int(v) for v in s) for s in splits} == want and len(want) == 4
    assert np.all(splits @ q == 0)
    assert ch.composition_splits(q, element, [0, 1, 1, 0, 1]).shape == (0, 8)  # NaFeO
    with pytest.raises(ValueError, match="max_splits"):
        ch.composition_splits(q, element, [0, 0, 40, 40, 100], max_splits=8)


def _multiset_permutations(items):
    """Distinct orderings of a multiset (a sorted list)."""
    if not items:
        yield ()
        return
    for i, v in enumerate(items):
        if i and items[i - 1] == v:
            continue
        for rest in _multiset_permutations(items[:i] + items[i + 1:]):
            yield (v, *rest)


def brute_force_by_element(cost, q, element, counts, allowed):
    """Optimal cost (inf if none) for up to ~10 atoms: every distinct placement of the
    element multiset, then the best oxidation states by an exhaustive charge table."""
    best = np.inf
    for perm in _multiset_permutations(np.repeat(np.arange(len(counts)), counts).tolist()):
        states = {0: 0.0}
        for i, e in enumerate(perm):
            nxt = {}
            for s in np.flatnonzero((element == e) & allowed[i]):
                for tot, v in states.items():
                    key = tot + int(q[s])
                    nxt[key] = min(nxt.get(key, np.inf), v + cost[i, s])
            states = nxt
        best = min(best, states.get(0, np.inf))
    return best


def test_project_composition_matches_brute_force():
    q, element = COMP_Q, COMP_EL
    rng = np.random.default_rng(31)
    cases = [({"Fe": 2, "Mn": 2, "O": 5}, 10),  # 4 balanced splits, one padding slot
             ({"Si": 1, "Fe": 2, "O": 4}, 7),  # Fe2+ Fe2+ only
             ({"Fe": 3, "O": 4}, 8),  # Fe3O4 (one Fe2+, two Fe3+), one padding slot
             ({"Na": 1, "Fe": 1, "O": 1}, 3)]  # cannot balance (+3..4 - 2)
    assert len(ch.composition_splits(q, element, _counts(cases[0][0]))) == 4
    for t in range(8):
        formula, n_slots = cases[t % 4]
        counts = _counts(formula)
        mask = np.arange(n_slots) < counts.sum()
        cost = rng.exponential(size=(n_slots, len(q)))
        allowed = np.ones(cost.shape, bool)
        if t == 6:  # Fe3+ allowed on one atom only: Fe3O4 then cannot balance
            allowed[1:, 3] = False
        res = _composition(tuple(q), tuple(element), tuple(counts))(
            jnp.asarray(cost), mask, allowed)
        want = brute_force_by_element(cost[mask], q, element, counts, allowed[mask])
        assert bool(res.feasible) == bool(np.isfinite(want)) == (t % 4 != 3 and t != 6)
        a = np.asarray(res.assignment)
        assert np.all(a[~mask] == -1)
        if np.isfinite(want):
            np.testing.assert_allclose(float(res.cost), want, rtol=1e-12)
            assert int(q[a[mask]].sum()) == 0 and np.all(allowed[mask, a[mask]])
            np.testing.assert_array_equal(np.bincount(element[a[mask]], minlength=5), counts)
        else:  # the documented fallback: the unconstrained per-atom argmin
            np.testing.assert_array_equal(
                a[mask], np.argmin(np.where(allowed, cost, np.inf), 1)[mask])
    # the helper itself against plain enumeration of every assignment (4 atoms)
    counts = _counts({"Fe": 2, "O": 2})
    cost = rng.exponential(size=(4, len(q)))
    combos = np.array(list(itertools.product(range(len(q)), repeat=4)))
    ok = (q[combos].sum(1) == 0) & np.all(
        [(element[combos] == e).sum(1) == c for e, c in enumerate(counts)], axis=0)
    plain = np.where(ok, cost[np.arange(4), combos].sum(1), np.inf).min()
    assert np.isfinite(plain)
    np.testing.assert_allclose(
        brute_force_by_element(cost, q, element, counts, np.ones(cost.shape, bool)), plain)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=6), st.integers(0, 2**31 - 1))
def test_project_composition_property(elements, seed):
    """Any element multiset (balanced or not): feasible iff brute force finds a balanced
    assignment, and then the cost is optimal and the counts and charge are met."""
    q, element = COMP_Q, COMP_EL
    counts = np.bincount(elements, minlength=5)
    n = len(elements)
    cost = np.random.default_rng(seed).exponential(size=(n + 1, len(q)))
    cost[:, 2] = cost[:, 3]  # ties between Fe2+ and Fe3+
    mask = np.arange(n + 1) < n
    res = _composition(tuple(q), tuple(element), tuple(counts))(
        jnp.asarray(cost), mask, np.ones(cost.shape, bool))
    want = brute_force_by_element(cost[:n], q, element, counts, np.ones((n, len(q)), bool))
    assert bool(res.feasible) == bool(np.isfinite(want))
    if np.isfinite(want):
        a = np.asarray(res.assignment)[:n]
        np.testing.assert_allclose(float(res.cost), want, rtol=1e-12)
        assert int(q[a].sum()) == 0
        np.testing.assert_array_equal(np.bincount(element[a], minlength=5), counts)


@pytest.mark.parametrize("n_fe", [4, 12])
def test_project_composition_matches_milp_and_vmaps(n_fe):
    """Glass-like cells with fixed composition: the cost equals the MILP's, and a vmapped
    batch (padded cells) equals cell-by-cell solves."""
    elements = ["Si", "Na", "Fe", "O"]
    _, q = ox.species(elements)
    element = ox.species_element(elements)
    # Na 2 Fe n_fe Si s O o with Fe3+ share fixed by the balance
    counts = ox.element_counts({"Si": 8, "Na": 6, "Fe": n_fe, "O": 20 + n_fe}, elements)
    assert len(ch.composition_splits(q, element, counts)) == 1
    n_act = int(counts.sum())
    rng = np.random.default_rng(n_fe)
    costs = -np.log(rng.dirichlet(np.ones(len(q)), size=(3, n_act + 2)))
    mask = np.ones((3, n_act + 2), bool)
    mask[:, -2:] = False
    allowed = np.ones(costs.shape, bool)
    f = _composition(tuple(q), tuple(element), tuple(counts))
    batch = jax.jit(jax.vmap(f))(jnp.asarray(costs), mask, allowed)
    for b in range(3):
        one = f(jnp.asarray(costs[b]), mask[b], allowed[b])
        np.testing.assert_array_equal(np.asarray(batch.assignment[b]), np.asarray(one.assignment))
        want = milp_composition(costs[b, :n_act], q, element, counts)
        np.testing.assert_allclose(float(one.cost), want, rtol=1e-9)
        assert bool(one.feasible)


def test_project_splits_traced_rows_match_brute_force():
    """The splits as a traced (S, K) array: padded rows (repeats) change nothing, targets
    of different compositions share one compiled program, and each result is the brute
    force optimum at its composition; an unbalanced row or one that does not sum to the
    atoms is never chosen."""
    import chex

    q, element = COMP_Q, COMP_EL
    rng = np.random.default_rng(5)
    n_slots = 8
    forms = [{"Fe": 2, "Mn": 2, "O": 4}, {"Fe": 3, "O": 4}, {"Si": 1, "Fe": 2, "O": 4}]
    rows = [ch.composition_splits(q, element, _counts(f)) for f in forms]
    s = max(r.shape[0] for r in rows)
    fn = jax.jit(chex.assert_max_traces(n=1)(
        lambda c, m, sp: ch.project_splits(c, q, sp, mask=m)))
    for f, r in zip(forms, rows, strict=True):
        counts = _counts(f)
        mask = np.arange(n_slots) < counts.sum()
        cost = rng.exponential(size=(n_slots, len(q)))
        got = fn(jnp.asarray(cost), mask, jnp.asarray(r[np.arange(s) % r.shape[0]]))
        want = brute_force_by_element(cost[mask], q, element, counts,
                                      np.ones((int(mask.sum()), len(q)), bool))
        assert bool(got.feasible) and np.isfinite(want)
        np.testing.assert_allclose(float(got.cost), want, rtol=1e-12)
        a = np.asarray(got.assignment)
        assert np.all(a[~mask] == -1) and int(q[a[mask]].sum()) == 0
        np.testing.assert_array_equal(np.bincount(element[a[mask]], minlength=5), counts)
    # rows whose charge is not zero, or whose counts miss the atoms: infeasible (the same
    # compiled program: same shapes)
    bad = np.zeros((s, len(q)), np.int32)
    bad[0, [2, 7]] = 1, 1  # Fe2+ O2- is balanced but 2 atoms of 3
    bad[1:, 3], bad[1:, 7] = 1, 2  # Fe3+ 2 O2-: 3 atoms, charge -1
    res = fn(jnp.ones((n_slots, len(q))), np.arange(n_slots) < 3, jnp.asarray(bad))
    assert not bool(res.feasible)
    with pytest.raises(ValueError, match="`splits`"):
        ch.project_splits(jnp.ones((3, len(q))), q, np.zeros((0, len(q)), np.int32))


def test_project_composition_bad_input():
    _, q = ox.species(["Si", "O"])
    el = np.array([0, 1])
    cost = np.ones((3, 2))
    with pytest.raises(ValueError, match="counts. sum to 4 atoms but the cell has 3"):
        ch.project_composition(cost, q, el, [1, 3])
    with pytest.raises(ValueError, match="`element` must be"):
        ch.project_composition(cost, q, [0, 1, 2], [1, 2])
    with pytest.raises(ValueError, match="`counts` must be"):
        ch.project_composition(cost, q, el, [1, -2])
    with pytest.raises(ValueError, match="`counts` must be"):
        ch.project_composition(cost, q, el, [1.5, 1.5])
    with pytest.raises(ValueError, match="not in `elements`"):
        ox.element_counts({"Fe": 1}, ["Si", "O"])
    with pytest.raises(ValueError, match="`counts` must be concrete"):
        jax.jit(lambda c, n: ch.project_composition(c, q, el, n))(cost, np.array([1, 2]))
    res = ch.project_composition(cost, q, el, [1, 2])  # SiO2: balanced
    assert bool(res.feasible) and res.assignment.tolist().count(1) == 2
    res = ch.project_composition(np.ones((2, 2)), q, el, [1, 1])  # SiO: +2, infeasible
    assert not bool(res.feasible)


@pytest.mark.parametrize("n, k", [(40, 5), (100, 11)])
def test_project_discrete_matches_milp(n, k):
    rng = np.random.default_rng(n + k)
    q = tuple(int(v) for v in GLASS_Q[np.r_[0:k - 1, 10]])
    qa = np.asarray(q)
    for trial in range(2):
        logits = rng.normal(size=(n, k)) * 2
        logits[:, -1] += 2
        cost = -np.asarray(jax.nn.log_softmax(jnp.asarray(logits), -1))
        allowed = rng.random((n, k)) < 0.8 if trial else _ones(n, k)
        allowed[:, -1] |= rng.random(n) < 0.5
        want = milp_optimum(cost, qa, allowed)
        res = _exact(q)(jnp.asarray(cost), _ones(n), allowed)
        assert np.isfinite(want) and bool(res.feasible)
        a = np.asarray(res.assignment)
        assert qa[a].sum() == 0 and allowed[np.arange(n), a].all()
        np.testing.assert_allclose(float(res.cost), want, rtol=1e-9)
        appr = _approx(q)(jnp.asarray(cost), _ones(n), allowed)
        assert bool(appr.feasible)
        assert qa[np.asarray(appr.assignment)].sum() == 0
        assert float(appr.cost) >= want - 1e-9
        assert float(_bound(q)(jnp.asarray(cost), _ones(n), allowed).bound) <= want + 1e-9


def test_fixing_certifies_glass_cells_and_vmaps_with_fallback_cells():
    """On glass-like cells the reduced-cost fixing route certifies its answer (the linear
    path is the one that runs); in a vmapped batch a cell without a certificate (SiO2 with
    an atom count not divisible by 3) takes the full DP without disturbing the others."""
    rng = np.random.default_rng(14)
    qa = GLASS_Q
    logits = rng.normal(size=(3, 120, 11)) * 1.5 + np.log(
        [0.2, .04, .04, .01, .02, .04, .01, .02, .01, .01, .6])
    cost = -np.asarray(jax.nn.log_softmax(jnp.asarray(logits), -1))
    fix = jax.jit(lambda c: ch.reduced_cost_fixing(jnp.asarray(c), qa, mask=jnp.ones(120, bool),
                                                   window=56))
    dp = jax.jit(lambda c: ch.project_discrete(c, qa, method="dp"))
    for c in cost:
        assign, certified = fix(c)
        assert bool(certified)
        a = np.asarray(assign)
        assert qa[a].sum() == 0
        np.testing.assert_allclose(c[np.arange(120), a].sum(), float(dp(c).cost), rtol=1e-12)
    q2 = (4, -2)
    c2 = rng.random((2, 7, 2))
    masks = np.array([np.arange(7) < 6, np.arange(7) < 5])  # 6 atoms feasible, 5 not
    batch = jax.jit(jax.vmap(_exact(q2), in_axes=(0, 0, None)))(jnp.asarray(c2), masks,
                                                                 _ones(7, 2))
    for b in range(2):
        one = _exact(q2, method="dp")(jnp.asarray(c2[b]), masks[b], _ones(7, 2))
        assert bool(batch.feasible[b]) == bool(one.feasible) == (b == 0)
        np.testing.assert_allclose(float(batch.cost[b]), float(one.cost), rtol=1e-12)
    with pytest.raises(ValueError, match="method"):
        ch.project_discrete(c2[0], q2, method="milp")
    with pytest.raises(ValueError, match="window"):
        ch.project_discrete(c2[0], q2, window=-1)


def test_approx_handles_ties_everywhere():
    # uniform probabilities: every species ties at lam = 0, the argmin charge is far from 0
    q = tuple(int(v) for v in GLASS_Q)
    cost = jnp.zeros((30, 11))
    appr = _approx(q)(cost, _ones(30), _ones(30, 11))
    exact = _exact(q)(cost, _ones(30), _ones(30, 11))
    assert bool(appr.feasible) and bool(exact.feasible)
    assert float(appr.cost) == float(exact.cost) == 0.0
    assert GLASS_Q[np.asarray(appr.assignment)].sum() == 0


def test_dp_width_bounds_the_state_space():
    assert ch.dp_width(800, GLASS_Q) < 800 * 7 + 1
    assert ch.dp_width(800, GLASS_Q) == 1601
    assert ch.dp_width(5, [4, -2]) <= 5 * 6 + 1
    assert ch.dp_width(3, [0, 2]) == 1


# vmap invariance of the default run: test_fixing_certifies_glass_cells_and_vmaps_with_
# fallback_cells (discrete) and test_project_composition_matches_milp_and_vmaps
@pytest.mark.slow  # six compilations (exact, approx, soft, noise; batched and one by one)
def test_jit_vmap_equals_loop():
    rng = np.random.default_rng(8)
    q = (4, -2, 1, 3)
    cost = rng.exponential(size=(5, 12, 4))
    mask = rng.random((5, 12)) < 0.8
    allowed = _ones(12, 4)
    for fn in (_exact(q), _approx(q)):
        batch = jax.jit(jax.vmap(fn, in_axes=(0, 0, None)))(jnp.asarray(cost), mask, allowed)
        for b in range(5):
            one = fn(jnp.asarray(cost[b]), mask[b], allowed)
            for got, want in zip(batch, one, strict=True):
                np.testing.assert_array_equal(np.asarray(got[b]), np.asarray(want))
    y = rng.normal(size=(5, 12, 4))
    soft = jax.jit(jax.vmap(_soft(q)))(jnp.asarray(y), mask)
    for b in range(5):
        one = _soft(q)(jnp.asarray(y[b]), mask[b])
        np.testing.assert_allclose(np.asarray(soft.p[b]), np.asarray(one.p), atol=1e-12)
        assert bool(soft.feasible[b]) == bool(one.feasible)
    noise = jax.vmap(lambda k, m: ch.balanced_noise(k, (12, 4), q, mask=m, dtype=F64))
    keys = jax.random.split(jax.random.key(1), 5)
    out = jax.jit(noise)(keys, mask)
    np.testing.assert_allclose(out[3], ch.balanced_noise(keys[3], (12, 4), q, mask=mask[3],
                                                         dtype=F64), atol=1e-14)


# --------------------------------------------------------------------------- bad input


def test_discrete_bad_input():
    cost = jnp.ones((4, 2))
    with pytest.raises(ValueError, match="all charges in `q` are > 0"):
        ch.project_discrete(cost, [1, 2])
    with pytest.raises(ValueError, match="all charges in `q` are < 0"):
        ch.project_discrete_approx(cost, [-1, -2])
    with pytest.raises(ValueError, match="integer charges"):
        ch.project_discrete(cost, [1.5, -1])
    with pytest.raises(ValueError, match="must be concrete"):
        jax.jit(ch.project_discrete)(cost, jnp.array([1, -1]))
    with pytest.raises(ValueError, match=r"`cost` must be a 2-D array of shape \(N, 2\)"):
        ch.project_discrete(jnp.ones((4, 3)), [1, -1])
    with pytest.raises(ValueError, match="`mask` must have shape"):
        ch.project_discrete(cost, [1, -1], mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="`allowed` must have shape"):
        ch.project_discrete(cost, [1, -1], allowed=np.ones((4, 3), bool))
    nan = cost.at[1, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="`cost` contains NaN"):
        ch.project_discrete(nan, [1, -1])
    with pytest.raises(Exception, match="`cost` contains NaN"):
        _exact((1, -1))(nan, _ones(4), _ones(4, 2))
    # NaN on a masked (padding) row is ignored; +inf forbids a species
    res = _exact((1, -1))(nan, np.array([True, False, True, False]), _ones(4, 2))
    assert bool(res.feasible)
    res = _exact((1, -1))(cost.at[:, 1].set(jnp.inf), _ones(4), _ones(4, 2))
    assert not bool(res.feasible)
    # no unmasked atom
    for fn in (_exact((1, -1)), _approx((1, -1))):
        res = fn(cost, np.zeros(4, bool), _ones(4, 2))
        assert not bool(res.feasible)
        np.testing.assert_array_equal(np.asarray(res.assignment), -1)
    # an atom with no allowed species
    allowed = _ones(4, 2)
    allowed[2] = False
    res = _exact((1, -1))(cost, _ones(4), allowed)
    assert not bool(res.feasible) and int(res.assignment[2]) == -1


def test_soft_and_noise_bad_input(key):
    with pytest.raises(ValueError, match="`p` contains NaN"):
        ch.project_soft(jnp.array([[0.5, jnp.nan]]), [1.0, -1.0])
    with pytest.raises(Exception, match="`p` contains NaN"):
        _soft((1, -1))(jnp.array([[0.5, jnp.nan]]), _ones(1))
    with pytest.raises(ValueError, match="`p` has 2 species columns but `q` has 3"):
        ch.project_soft(jnp.ones((3, 2)), [1.0, -1.0, 0.0])
    with pytest.raises(ValueError, match="`p` must be a 2-D array"):
        ch.project_soft(jnp.ones(3), [1.0, -1.0, 0.0])
    with pytest.raises(ValueError, match="`q` contains NaN"):
        ch.project_soft(jnp.ones((3, 2)), [np.nan, -1.0])
    with pytest.raises(ValueError, match="shape"):
        ch.balanced_noise(key, (3, 2), [1.0, -1.0, 2.0])


# --------------------------------------------------------------------------- table


def test_oxidation_table():
    table = ox.oxidation_table()
    assert table["Fe"] == (2, 3)
    assert all(len(v) == 1 for el, v in table.items() if el != "Fe")
    names, q = ox.species(GLASS + ["Ba", "Ti", "Fe"])
    assert names[:11] == ["Si4+", "B3+", "Al3+", "P5+", "Li+", "Na+", "K+", "Ca2+", "Mg2+",
                          "Zn2+", "O2-"]
    assert names[11:] == ["Ba2+", "Ti4+", "Fe2+", "Fe3+"]
    np.testing.assert_array_equal(q[:11], GLASS_Q)
    assert q.dtype == np.int64
    assert ox.species(["F"])[0] == ["F-"]
    with pytest.raises(ValueError, match="unknown element symbol 'Xx'"):
        ox.species(["Si", "Xx"])
    with pytest.raises(ValueError, match="did you mean 'Fe'"):
        ox.species(["fe"])
    with pytest.raises(ValueError, match="listed twice"):
        ox.species(["O", "O"])
    with pytest.raises(ValueError, match="sequence of element symbols"):
        ox.species("SiO")
    with pytest.raises(ValueError, match="not in `elements`"):
        ox.species_allowed(["Si", "Na"], ["Si", "O"])
    # species -> element index, and the allowed mask built from it
    np.testing.assert_array_equal(ox.species_element(["Si", "Fe", "O"]), [0, 1, 1, 2])
    np.testing.assert_array_equal(ox.species_allowed(["Fe", "O"], ["Si", "Fe", "O"]),
                                  [[False, True, True, False], [False, False, False, True]])
    np.testing.assert_array_equal(ox.element_counts({"Fe": 3, "O": 4}, ["Si", "Fe", "O"]),
                                  [0, 3, 4])
    with pytest.raises(ValueError, match="non-negative integer"):
        ox.element_counts({"Fe": 1.5}, ["Fe", "O"])
