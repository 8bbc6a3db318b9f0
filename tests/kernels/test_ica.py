"""FastICA and whitening: scikit-learn parity, jit/vmap invariance, convergence masks,
float32 accuracy against a float64 reference, and bad input."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import ica
from sklearn.decomposition import FastICA

N, D = 400, 4


def _mixed(seed, n=N, d=D, dist="laplace"):
    rng = np.random.default_rng(seed)
    s = rng.laplace(size=(n, d)) if dist == "laplace" else rng.uniform(-1, 1, size=(n, d))
    a = rng.normal(size=(d, d)) + 2 * np.eye(d)
    return s @ a.T, a, rng.normal(size=(d, d))


# One jitted callable per configuration, shared by the tests below (compile once).
_fit = jax.jit(functools.partial(ica.fastica, None), static_argnames=("fun", "whiten_solver"))
_fit_batched = jax.jit(jax.vmap(lambda x, w: ica.fastica(None, x, w_init=w, tol=1e-6)))


@pytest.mark.parametrize("fun", ["logcosh", "exp", "cube"])
@pytest.mark.parametrize("solver", ["svd", "eigh"])
def test_matches_sklearn_float64(fun, solver):
    x, _, w0 = _mixed(1)
    sk = FastICA(fun=fun, w_init=w0, whiten_solver=solver, max_iter=200, tol=1e-4).fit(x)
    r = _fit(jnp.asarray(x), w_init=jnp.asarray(w0), fun=fun, whiten_solver=solver)
    assert r.components.dtype == jnp.float64
    rel = np.abs(np.asarray(r.components) - sk.components_).max() / np.abs(sk.components_).max()
    assert rel < 1e-6
    np.testing.assert_allclose(np.asarray(r.mixing), sk.mixing_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(r.mean), sk.mean_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(r.sources), sk.transform(x), rtol=1e-6, atol=1e-7)
    assert int(r.n_iter) == sk.n_iter_
    assert bool(r.converged)


def test_n_components_and_arbitrary_variance_match_sklearn():
    x, _, w0 = _mixed(2)
    w0 = w0[:2, :2]
    sk = FastICA(n_components=2, w_init=w0, whiten="arbitrary-variance").fit(x)
    r = ica.fastica(None, jnp.asarray(x), n_components=2, w_init=w0,
                    whiten_mode="arbitrary-variance")
    assert r.components.shape == (2, D) and r.mixing.shape == (D, 2)
    np.testing.assert_allclose(np.asarray(r.components), sk.components_, rtol=1e-6, atol=1e-9)


def test_recovers_sources_amari():
    x, a, _ = _mixed(3, n=2000)
    r = _fit(jnp.asarray(x), w_init=jnp.eye(D))
    assert float(ica.amari_distance(r.components, jnp.asarray(a))) < 0.05
    # unit-variance sources, and x = sources @ mixing.T + mean
    np.testing.assert_allclose(np.std(np.asarray(r.sources), axis=0), 1.0, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(r.sources @ r.mixing.T + r.mean), x, atol=1e-8)


def test_float32_close_to_float64_reference():
    x, a, w0 = _mixed(4, n=2000)
    r64 = _fit(jnp.asarray(x), w_init=jnp.asarray(w0))
    r32 = _fit(jnp.asarray(x, jnp.float32), w_init=jnp.asarray(w0, jnp.float32))
    assert r32.components.dtype == jnp.float32
    # same fixed point to float32 precision (tol 1e-4 stop rule)
    err = np.abs(np.asarray(r32.components, np.float64) - np.asarray(r64.components)).max()
    assert err / np.abs(np.asarray(r64.components)).max() < 1e-3
    assert float(ica.amari_distance(r32.components.astype(jnp.float64), jnp.asarray(a))) < 0.05


def test_jit_equals_eager_and_vmap_equals_loop():
    data = [_mixed(s) for s in range(3)]
    xs = jnp.stack([jnp.asarray(d[0]) for d in data])
    ws = jnp.stack([jnp.asarray(d[2]) for d in data])
    eager = [ica.fastica(None, xs[i], w_init=ws[i], tol=1e-6) for i in range(3)]
    batched = _fit_batched(xs, ws)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(batched.components[i]),
                                   np.asarray(eager[i].components), rtol=1e-9, atol=1e-12)
        # each dataset stops at its own tolerance: same n_iter as fitted alone
        assert int(batched.n_iter[i]) == int(eager[i].n_iter)


def test_nonconvergence_is_a_flag_per_dataset():
    # a Gaussian dataset next to a non-Gaussian one, with a tiny iteration budget
    rng = np.random.default_rng(5)
    xg = rng.normal(size=(N, D))
    xl, _, _ = _mixed(5)
    fit = jax.jit(jax.vmap(
        lambda x: ica.fastica(None, x, w_init=jnp.eye(D), max_iter=3, tol=1e-12)))
    r = fit(jnp.stack([jnp.asarray(xg), jnp.asarray(xl)]))
    assert r.converged.shape == (2,) and not bool(jnp.any(r.converged))
    assert np.all(np.asarray(r.n_iter) == 3)
    assert bool(jnp.all(jnp.isfinite(r.components)))


def test_key_draws_w_init(key):
    x, _, _ = _mixed(6)
    r1 = ica.fastica(key, jnp.asarray(x))
    r2 = ica.fastica(key, jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(r1.components), np.asarray(r2.components))
    w0 = jax.random.normal(key, (D, D), jnp.float64)
    r3 = ica.fastica(None, jnp.asarray(x), w_init=w0)
    np.testing.assert_allclose(np.asarray(r1.components), np.asarray(r3.components))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_whitening_and_decorrelation_properties(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(50, 3)) @ rng.normal(size=(3, 3)) + rng.normal(size=3)
    w = ica.whiten(jnp.asarray(x))
    cov = np.asarray(w.z.T @ w.z) / 50
    np.testing.assert_allclose(cov, np.eye(3), atol=1e-8)
    # sign convention: each singular vector's first entry is non-negative
    assert np.all(np.asarray(w.whitening)[:, 0] >= 0)
    m = ica.sym_decorrelation(jnp.asarray(rng.normal(size=(3, 3))))
    np.testing.assert_allclose(np.asarray(m @ m.T), np.eye(3), atol=1e-8)


def test_step_layouts_agree():
    # the float64 fit uses a row-major copy of the whitened data, the float32 fit the
    # sample-last data alone (a transposed contraction): the same step either way
    x, _, w0 = _mixed(8)
    @jax.jit  # one program per dtype instead of op-by-op dispatch
    def steps(x, w0):
        z = ica.whiten(x).z
        w = ica.sym_decorrelation(w0)
        g = ica._g("logcosh", 1.0, None)
        return w, ica._step(w, z.T, z, g), ica._step(w, z.T, None, g)

    for dtype, rtol in ((jnp.float64, 1e-12), (jnp.float32, 1e-5)):
        w, (a, lim_a), (b, lim_b) = steps(jnp.asarray(x, dtype), jnp.asarray(w0, dtype))
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=rtol)
        np.testing.assert_allclose(float(lim_b), float(lim_a), rtol=rtol, atol=rtol)
        assert not np.allclose(np.asarray(a), np.asarray(w))  # the step moved


def test_grad_through_fixed_point_update():
    x, _, w0 = _mixed(7)
    z = ica.whiten(jnp.asarray(x)).z

    def loss(w):
        w1, _ = ica.fixed_point_update(w, z)
        return jnp.sum(w1[0] ** 2 * jnp.arange(D))

    g = jax.jit(jax.grad(loss))(jnp.asarray(w0))
    assert g.shape == (D, D) and bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (np.full((20, 3), np.nan), {}, "`x` contains NaN or inf"),
        (np.r_[np.ones((1, 3)) * np.inf, np.random.default_rng(0).normal(size=(19, 3))], {},
         "`x` contains NaN or inf"),
        (np.c_[np.random.default_rng(0).normal(size=(20, 2)), np.ones(20)], {},
         "`x` has a constant column"),
        (np.random.default_rng(0).normal(size=(3, 5)), {}, "fewer samples"),
        (np.zeros(10), {}, "2-D array"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"n_components": 4},
         "`n_components` \\(4\\) is larger"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"w_init": np.eye(2)},
         "`w_init` must have shape"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"fun": "tanh"}, "`fun` must be"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"max_iter": 0}, "`max_iter`"),
    ],
)
def test_bad_input(x, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ica.fastica(jax.random.key(0), jnp.asarray(x), **kwargs)


def test_nan_inside_jit_is_a_flag_not_an_error():
    """Traced NaN / inf data: a NaN fit with finite=False and converged=False (it used to
    leak equinox's 'INTERNAL: CpuCallback error'); under vmap only that dataset."""
    x = np.random.default_rng(0).normal(size=(20, 3))
    x[3, 1] = np.nan
    r = jax.block_until_ready(_fit(jnp.asarray(x), w_init=jnp.eye(3)))
    assert not bool(r.finite) and not bool(r.converged) and not bool(r.rank_deficient)
    assert np.all(np.isnan(np.asarray(r.components)))
    xs = np.stack([_mixed(s)[0] for s in range(3)])
    ws = np.stack([_mixed(s)[2] for s in range(3)])
    xs[1, 5, 2] = np.inf
    rb = jax.block_until_ready(_fit_batched(jnp.asarray(xs), jnp.asarray(ws)))
    assert rb.finite.tolist() == [True, False, True]
    assert rb.converged.tolist() == [True, False, True]
    one = _fit_batched(jnp.asarray(xs[:1]), jnp.asarray(ws[:1]))
    np.testing.assert_allclose(np.asarray(rb.components[0]), np.asarray(one.components[0]),
                               rtol=1e-9, atol=1e-12)
    w_only = jax.jit(lambda x: ica.fastica(None, x, w_init=jnp.eye(3), whiten=False))
    assert not bool(w_only(jnp.asarray(x)).finite)


def test_accelerator_batching_rule_gives_the_same_fits(monkeypatch):
    """On GPU/TPU vmap batches the while_loop instead of mapping; same results."""
    data = [_mixed(s) for s in range(3)]
    xs = jnp.stack([jnp.asarray(d[0]) for d in data])
    ws = jnp.stack([jnp.asarray(d[2]) for d in data])
    mapped = _fit_batched(xs, ws)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    plain = jax.jit(jax.vmap(lambda x, w: ica.fastica(None, x, w_init=w, tol=1e-6)))(xs, ws)
    np.testing.assert_allclose(np.asarray(plain.components), np.asarray(mapped.components),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(plain.n_iter), np.asarray(mapped.n_iter))


def test_float32_eigh_whitening_of_ill_conditioned_data_stays_finite():
    """Rounding makes the scatter matrix's smallest eigenvalue negative in float32; the
    relative clamp keeps every whitened component bounded (an absolute clamp at 10 eps
    blew one up by ~1e3 and the iteration diverged to NaN)."""
    rng = np.random.default_rng(8)
    s = rng.laplace(size=(2000, 4))
    u, _, vt = np.linalg.svd(rng.normal(size=(4, 4)))
    a = u @ np.diag([100.0, 30.0, 10.0, 1e-3]) @ vt
    x = jnp.asarray(s @ a.T, jnp.float32)
    with pytest.warns(ica.RankDeficientWarning):  # float32 eigh cannot resolve 1e-5
        w = ica.whiten(x, solver="eigh")
    assert float(jnp.max(jnp.std(w.z, axis=0))) < 1.5
    r = _fit(x, w_init=jnp.asarray(rng.normal(size=(4, 4)), jnp.float32), whiten_solver="eigh")
    assert bool(jnp.all(jnp.isfinite(r.components))) and bool(jnp.all(jnp.isfinite(r.sources)))


def test_mixing_inverse_and_pinv_fallback():
    """Square, invertible components: the LU inverse (= pinv); a singular one falls back
    to pinv instead of returning inf; k < d uses pinv."""
    rng = np.random.default_rng(3)
    c = rng.normal(size=(4, 4))
    np.testing.assert_allclose(np.asarray(jax.jit(ica._mixing)(jnp.asarray(c))),
                               np.linalg.pinv(c), rtol=1e-10, atol=1e-12)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    got = np.asarray(jax.jit(ica._mixing)(jnp.asarray(sing)))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, np.linalg.pinv(sing), rtol=1e-10, atol=1e-12)
    wide = rng.normal(size=(2, 5))
    np.testing.assert_allclose(np.asarray(ica._mixing(jnp.asarray(wide))), np.linalg.pinv(wide),
                               rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- no silent garbage


def _collinear(dtype, n=300):
    """Columns 1 and 2 duplicated: rank 3 of 4."""
    e = np.random.default_rng(0).laplace(size=(n, 3))
    x = np.c_[e[:, 0], 2 * e[:, 0] + e[:, 1], 2 * e[:, 0] + e[:, 1], e[:, 2] + e[:, 0]]
    return jnp.asarray(x, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("solver", ["svd", "eigh"])
def test_collinear_columns_raise_eagerly_and_flag_under_jit(dtype, solver):
    """Duplicated columns used to give components of 1e7-1e15 and converged=False with
    no word why; now a ValueError naming `x` and the columns, or (traced) a finite
    result with rank_deficient set."""
    x = _collinear(dtype)
    with pytest.raises(ValueError, match=r"`x` is rank-deficient.*columns \[1, 2\]"):
        ica.fastica(None, x, w_init=jnp.eye(4), whiten_solver=solver)
    with pytest.raises(ValueError, match=r"`x` is rank-deficient.*columns \[1, 2\]"):
        ica.whiten(x, solver=solver)
    r = _fit(x, w_init=jnp.eye(4, dtype=dtype), whiten_solver=solver)
    assert bool(r.rank_deficient) and not bool(r.converged)
    for leaf in (r.components, r.mixing, r.sources, r.whitening):
        assert bool(jnp.all(jnp.isfinite(leaf)))
    # fewer components than the rank is fine
    ok = ica.fastica(None, x, n_components=3, w_init=jnp.eye(3))
    assert not bool(ok.rank_deficient)


def test_rank_flag_is_per_dataset_under_vmap():
    x_bad = _collinear(jnp.float64, n=N)
    x_ok, _, _ = _mixed(5)
    r = _fit_batched(jnp.stack([x_bad, jnp.asarray(x_ok)]), jnp.stack([jnp.eye(D)] * 2))
    assert r.rank_deficient.tolist() == [True, False]
    assert r.converged.tolist() == [False, True]


@pytest.mark.parametrize("kw, name", [({"tol": -1e-4}, "tol"), ({"tol": float("nan")}, "tol"),
                                      ({"max_iter": 2.5}, "max_iter"),
                                      ({"alpha": 3.0}, "alpha")])
def test_out_of_domain_hyperparameters(kw, name):
    x, _, w0 = _mixed(0, n=50)
    with pytest.raises(ValueError, match=f"`{name}`"):
        ica.fastica(None, jnp.asarray(x), w_init=w0, **kw)
