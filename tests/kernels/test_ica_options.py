"""FastICA options with scikit-learn's semantics: ``whiten`` ("unit-variance",
"arbitrary-variance", False), ``algorithm="deflation"``, a user contrast, ``tol=0``,
``transform`` / ``inverse_transform`` / ``fit_transform``, and the rank-deficiency
warning. Cases ported from scikit-learn's ``sklearn/decomposition/tests/test_fastica.py``
(1.9.1), with scikit-learn's own numbers computed in the same test."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import ica
from scipy import stats
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning

N, D = 400, 4


def _mixed(seed, n=N, d=D):
    rng = np.random.default_rng(seed)
    s = rng.laplace(size=(n, d))
    a = rng.normal(size=(d, d)) + 2 * np.eye(d)
    return s @ a.T, rng.normal(size=(d, d))


def g_cube(u):
    """scikit-learn's ``g_test``: a user contrast returning g and the mean of g'."""
    return u**3, (3 * u**2).mean(axis=-1)


def _white(x):
    """Data already white (what ``whiten=False`` expects): centred, identity covariance."""
    return np.asarray(ica.whiten(jnp.asarray(x)).z)


def _sk(x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = FastICA(**kw)
        s = m.fit_transform(x)
    return m, s


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() / np.abs(b).max()


_DEFAULT = {("deflation", "unit-variance", "logcosh"), ("deflation", False, "g_cube"),
            ("parallel", False, "logcosh"), ("parallel", "arbitrary-variance", "g_cube")}
_OPTIONS = [pytest.param(a, w, f, marks=() if (a, w, getattr(f, "__name__", f)) in _DEFAULT
                         else pytest.mark.slow)
            for a in ("parallel", "deflation") for w in ("unit-variance", "arbitrary-variance",
                                                         False)
            for f in ("logcosh", g_cube)]


@pytest.mark.parametrize("algorithm, whiten, fun", _OPTIONS)
def test_options_match_sklearn_float64(algorithm, whiten, fun):
    x, w0 = _mixed(1)
    if whiten is False:
        x = _white(x)
    sk, s_sk = _sk(x, algorithm=algorithm, whiten=whiten, fun=fun, w_init=w0, max_iter=200,
                   tol=1e-4)
    r = ica.fastica(None, jnp.asarray(x), algorithm=algorithm, whiten=whiten, fun=fun,
                    w_init=w0)
    assert _rel(r.components, sk.components_) < 1e-9
    assert _rel(r.sources, s_sk) < 1e-9
    assert _rel(r.mixing, sk.mixing_) < 1e-9
    assert int(r.n_iter) == sk.n_iter_ and bool(r.converged)
    if whiten is False:
        np.testing.assert_array_equal(np.asarray(r.mean), 0.0)
        np.testing.assert_allclose(np.asarray(r.components), np.asarray(r.unmixing))
    else:
        np.testing.assert_allclose(np.asarray(r.mean), sk.mean_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ica.transform(r, x)), sk.transform(x), rtol=1e-8,
                               atol=1e-10)


def _center_and_norm(x):
    x = x - x.mean(axis=0)
    return x / x.std(axis=0)


_SIMPLE_ALL = [(a, f, w) for a in ("parallel", "deflation")
               for f in ("logcosh", "exp", "cube", g_cube)
               for w in ("arbitrary-variance", "unit-variance", False)]
_SIMPLE_DEFAULT = [("parallel", g_cube, False), ("deflation", "logcosh", "unit-variance")]


@pytest.mark.parametrize("add_noise, combos", [
    (False, _SIMPLE_DEFAULT),
    pytest.param(False, _SIMPLE_ALL, marks=pytest.mark.slow),
    pytest.param(True, _SIMPLE_ALL, marks=pytest.mark.slow)])
def test_fastica_simple_port(add_noise, combos):
    """scikit-learn's ``test_fastica_simple`` (seed 0): a square wave and a Student-t(1)
    source mixed at angle 0.6 are recovered by every algorithm / contrast / whitening
    (two combinations in the default run, all 24 with and without noise under slow)."""
    rng = np.random.RandomState(0)
    n = 1000
    s1 = (2 * np.sin(np.linspace(0, 100, n)) > 0) - 1.0
    s2 = stats.t.rvs(1, size=n, random_state=0)
    s = _center_and_norm(np.c_[s1, s2])
    phi = 0.6
    mixing = np.array([[np.cos(phi), np.sin(phi)], [np.sin(phi), -np.cos(phi)]])
    m = s @ mixing.T
    if add_noise:
        m = m + 0.1 * rng.randn(n, 2)
    m = _center_and_norm(m)
    atol = 1e-1 if add_noise else 1e-2
    for algorithm, fun, whiten in combos:
        xin = m if whiten else _white(m)
        r = ica.fastica(jax.random.key(0), jnp.asarray(xin), algorithm=algorithm, fun=fun,
                        whiten=whiten)
        est = _center_and_norm(np.asarray(r.sources))
        c = est.T @ s / n  # (estimated, true) correlations
        # up to order and sign, each true source is recovered
        assert np.allclose(np.sort(np.abs(c).max(axis=0)), 1.0, atol=atol), (
            algorithm, fun, whiten, c)


def test_nowhiten_ignores_n_components_with_a_warning():
    """scikit-learn's ``test_fastica_nowhiten`` (issue #697)."""
    m = jnp.asarray([[0.0, 1.0], [1.0, 0.0]])
    with pytest.warns(UserWarning, match="Ignoring n_components with whiten=False"):
        r = ica.fastica(jax.random.key(0), m, n_components=1, whiten=False)
    assert r.components.shape == (2, 2) and r.mixing.shape == (2, 2)


def test_tol_zero_runs_to_max_iter_and_flags_nonconvergence():
    """scikit-learn's ``test_fastica_convergence_fail``: ``tol=0`` never meets the
    tolerance, so the fit runs ``max_iter`` steps and says it did not converge (where
    scikit-learn warns ConvergenceWarning); the result equals scikit-learn's."""
    rng = np.random.RandomState(0)
    t = np.linspace(0, 100, 1000)
    s = _center_and_norm(np.c_[np.sin(t), np.ceil(np.sin(np.pi * t))])
    x = s @ rng.randn(6, 2).T
    w0 = rng.randn(2, 2)
    for algorithm, max_iter in (("parallel", 2), ("deflation", 3)):
        r = ica.fastica(None, jnp.asarray(x), n_components=2, w_init=w0, tol=0.0,
                        max_iter=max_iter, algorithm=algorithm)
        assert int(r.n_iter) == max_iter and not bool(r.converged)
        sk, _ = _sk(x, n_components=2, w_init=w0, tol=0.0, max_iter=max_iter,
                    algorithm=algorithm)
        assert sk.n_iter_ == max_iter
        assert _rel(r.components, sk.components_) < 1e-9
    with pytest.warns(ConvergenceWarning):  # what the flag stands for in scikit-learn
        FastICA(n_components=2, w_init=w0, tol=0.0, max_iter=2).fit(x)


def test_fit_transform_equals_transform_and_unit_variance():
    """scikit-learn's ``test_fit_transform`` and ``test_fastica_whiten_unit_variance``."""
    x = np.random.RandomState(0).random_sample((100, 10))
    for whiten, k in (("unit-variance", 5), (False, None)):
        res, xt = ica.fit_transform(jax.random.key(0), jnp.asarray(x), n_components=k,
                                    whiten=whiten, max_iter=300)
        kk = k or 10
        assert res.components.shape == (kk, 10) and xt.shape == (100, kk)
        np.testing.assert_allclose(np.asarray(xt), np.asarray(ica.transform(res, x)),
                                   rtol=1e-9, atol=1e-12)
        if whiten == "unit-variance":
            assert float(jnp.var(xt)) == pytest.approx(1.0)


@pytest.mark.parametrize("whiten, k, mixing_shape", [
    pytest.param("arbitrary-variance", 5, (10, 5), marks=pytest.mark.slow),
    ("arbitrary-variance", 10, (10, 10)), ("unit-variance", 5, (10, 5)),
    pytest.param("unit-variance", 10, (10, 10), marks=pytest.mark.slow),
    pytest.param(False, None, (10, 10), marks=pytest.mark.slow)])
def test_inverse_transform_port(whiten, k, mixing_shape):
    """scikit-learn's ``test_inverse_transform``: shapes, exact round trip when k = d,
    and the same reconstruction as scikit-learn's (same ``w_init``)."""
    rng = np.random.RandomState(0)
    x = rng.random_sample((100, 10))
    kk = k or 10
    w0 = rng.normal(size=(kk, kk))
    r = ica.fastica(None, jnp.asarray(x), n_components=k, whiten=whiten, w_init=w0)
    assert r.mixing.shape == mixing_shape
    x2 = np.asarray(ica.inverse_transform(r, r.sources))
    assert x2.shape == x.shape
    if kk == 10:
        np.testing.assert_allclose(x2, x, rtol=1e-9, atol=1e-12)
    sk, s_sk = _sk(x, n_components=k, whiten=whiten, w_init=w0)
    np.testing.assert_allclose(x2, sk.inverse_transform(s_sk), rtol=1e-7, atol=1e-9)


def test_low_rank_eigh_warns_outside_jit_and_flags_inside():
    """scikit-learn's ``test_fastica_eigh_low_rank_warning`` for the case the whitening
    clamps: float32 ``eigh`` cannot resolve a 1e-5 singular-value ratio, so the fit
    warns (jaxkit: RankDeficientWarning, with scikit-learn's words) and, under jit,
    sets the flag. Exactly collinear columns raise instead (test_ica.py)."""
    rng = np.random.default_rng(8)
    s = rng.laplace(size=(2000, 4))
    u, _, vt = np.linalg.svd(rng.normal(size=(4, 4)))
    x = jnp.asarray(s[:500] @ (u @ np.diag([100.0, 30.0, 10.0, 1e-3]) @ vt).T, jnp.float32)
    w0 = jnp.asarray(rng.normal(size=(4, 4)), jnp.float32)
    with pytest.warns(ica.RankDeficientWarning, match="There are some small singular values"):
        r = ica.fastica(None, x, w_init=w0, whiten_solver="eigh", max_iter=5)
    assert bool(r.rank_deficient) and not bool(r.converged)
    with pytest.warns(ica.RankDeficientWarning):
        ica.whiten(x, solver="eigh")
    fit = jax.jit(lambda x, w: ica.fastica(None, x, w_init=w, whiten_solver="eigh",
                                           max_iter=5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ica.RankDeficientWarning)
        rj = fit(x, w0)  # inside jit: no Python warning, the flag
    assert bool(rj.rank_deficient) and not bool(rj.converged)


def test_deflation_and_whiten_false_under_jit_and_vmap():
    data = [_mixed(s) for s in range(3)]
    xs = jnp.stack([jnp.asarray(d[0]) for d in data])
    ws = jnp.stack([jnp.asarray(d[1]) for d in data])
    for kw in ({"algorithm": "deflation"}, {"whiten": False}):
        f = jax.jit(jax.vmap(lambda x, w, kw=kw: ica.fastica(None, x, w_init=w, **kw)))
        out = f(xs, ws)
        for b in range(3):
            one = ica.fastica(None, xs[b], w_init=ws[b], **kw)
            np.testing.assert_allclose(np.asarray(out.components[b]),
                                       np.asarray(one.components), rtol=1e-9, atol=1e-12)
            assert int(out.n_iter[b]) == int(one.n_iter)


@pytest.mark.parametrize("kw, match", [
    ({"whiten": True}, "`whiten` must be"), ({"whiten": "pca"}, "`whiten` must be"),
    ({"algorithm": "fast"}, "`algorithm` must be"),
    ({"whiten": False, "whiten_mode": "unit-variance"}, "disagree"),
    ({"fun": lambda u: np.tanh(u)}, "callable `fun` must return a pair"),
    ({"fun": lambda u: (u, u)}, "mean of g'"),
    ({"fun_args": [1.0]}, "`fun_args`"),
    ({"alpha": 0.0}, "`alpha` must lie in \\[1, 2\\]"),
    ({"w_init": np.eye(4)}, "`w_init` must have shape \\(3, 3\\)"),
])
def test_option_errors(kw, match):
    """scikit-learn's ``test_fastica_errors`` and its parameter constraints (a bare
    ``np.tanh`` contrast is rejected there too)."""
    x = jnp.asarray(np.random.RandomState(0).random_sample((10, 3)))
    with pytest.raises(ValueError, match=match):
        ica.fastica(jax.random.key(0), x, **kw)


def test_transform_shape_errors():
    z = jnp.zeros((D, D))
    r = ica.FastICAResult(z, z, jnp.zeros(D), jnp.zeros((5, D)), z, z, 0, True, False)
    with pytest.raises(ValueError, match="`x` must have shape"):
        ica.transform(r, np.zeros((5, D + 1)))
    with pytest.raises(ValueError, match="`s` must have shape"):
        ica.inverse_transform(r, np.zeros((5, D - 1)))


def test_screened_input_check_agrees_with_check_data_matrix_under_jit():
    """Inside jit the fit checks its input from the moments it computes anyway (an exact
    max/min pass only when that screen fails): the same verdicts as check_data_matrix
    on clean, NaN, inf, constant, huge and tiny data."""
    from jaxkit.kernels import checks
    from jaxkit.kernels._ica_checks import screened_check

    def screened(x):
        mean = jnp.mean(x, axis=0)
        return screened_check(x, mean, jnp.sum((x - mean) ** 2, axis=0), jnp.zeros(()))

    f = checks.checked_jit(screened)
    ref = checks.checked_jit(lambda x: checks.check_data_matrix(x, "x"))
    base = np.random.default_rng(0).laplace(size=(50, 3))
    cases = {"clean": base, "huge": base * 1e150, "tiny": base * 1e-150}
    for name, bad in (("nan", np.nan), ("inf", np.inf)):
        x = base.copy()
        x[7, 1] = bad
        cases[name] = x
    x = base.copy()
    x[:, 2] = 3.0
    cases["const"] = x
    for name, x in cases.items():
        outcomes = []
        for fn in (f, ref):
            try:
                jax.block_until_ready(fn(jnp.asarray(x)))
                outcomes.append(None)
            except ValueError as e:
                outcomes.append(str(e).split(";")[0])
        assert outcomes[0] == outcomes[1], (name, outcomes)
        assert (outcomes[0] is None) == (name in ("clean", "huge")), (name, outcomes)
