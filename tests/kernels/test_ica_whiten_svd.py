"""The default ``svd`` whitening (two Gram passes in XLA products, LAPACK's SVD of the data
where those are not as accurate): agreement with scikit-learn's ``svd`` whitening on
well- and ill-conditioned data, the rank-deficient flag per dataset under ``vmap``, and
reverse-mode differentiation through ``fastica`` failing with a clear error."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import ica
from jaxkit.kernels._gram_svd import gram_svd
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning


def _graded(kappa, n=400, d=5, seed=0, dtype=np.float64):
    """Data whose centred singular values run geometrically from 1 to 1 / kappa."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, d)))
    v, _ = np.linalg.qr(rng.normal(size=(d, d)))
    u -= u.mean(0)
    return ((u * np.logspace(0, -np.log10(kappa), d)) @ v.T * 3 + 5).astype(dtype)


def _sk_whitening(x):
    """scikit-learn's svd whitening K (times sqrt(n), as jaxkit's ``whitening``)."""
    m = FastICA(whiten_solver="svd", max_iter=1, w_init=np.eye(x.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(x)
    return m.whitening_ * np.sqrt(x.shape[0])


@pytest.mark.parametrize("kappa, fast", [(10.0, True), (1e6, True), (1e11, False)])
def test_gram_svd_matches_lapack_svd_where_it_says_so(kappa, fast):
    x = _graded(kappa)
    xc = x - x.mean(0)
    u, s, accurate = jax.jit(gram_svd)(jnp.asarray(xc.T))
    assert bool(accurate) == fast
    s_ref = np.linalg.svd(xc, compute_uv=False)
    if fast:
        np.testing.assert_allclose(np.asarray(s), s_ref, rtol=1e-9 * kappa, atol=0)
        np.testing.assert_allclose(np.abs(np.asarray(u).T @ np.linalg.svd(xc)[2].T),
                                   np.eye(5), atol=1e-7)


def test_gram_svd_float32_falls_back_beyond_its_accuracy():
    xc = _graded(1e6, dtype=np.float32)
    xc = xc - xc.mean(0)
    assert not bool(gram_svd(jnp.asarray(xc.T))[2])
    assert bool(gram_svd(jnp.asarray(_graded(10.0, dtype=np.float32) - 5).T)[2])


@pytest.mark.parametrize("kappa", [3.0, 1e5, 1e11])
def test_svd_whitening_matches_sklearn(kappa):
    """Both branches (Gram passes at 3 and 1e5, LAPACK's SVD at 1e11) give scikit-learn's
    svd whitening, eagerly and under jit(vmap)."""
    x = _graded(kappa)
    ref = _sk_whitening(x)
    w = ica.whiten(jnp.asarray(x)).whitening
    np.testing.assert_allclose(np.asarray(w), ref, rtol=1e-6 * max(1.0, kappa / 1e5),
                               atol=1e-9 * np.abs(ref).max())
    wb = jax.jit(jax.vmap(lambda x: ica.whiten(x).whitening))(jnp.asarray(x)[None])
    np.testing.assert_allclose(np.asarray(wb[0]), np.asarray(w), rtol=1e-12,
                               atol=1e-12 * np.abs(ref).max())


def test_rank_flag_per_dataset_under_vmap_with_both_branches():
    """A collinear dataset, a well-conditioned one and an ill-conditioned but resolvable
    one (LAPACK branch) in one jit(vmap(fastica)): only the first is flagged."""
    rng = np.random.default_rng(1)
    good = rng.laplace(size=(400, 5)) @ (rng.normal(size=(5, 5)) + 2 * np.eye(5))
    ill = _graded(1e11, seed=2)
    bad = good.copy()
    bad[:, 4] = bad[:, 0] + 2 * bad[:, 1]
    xs = jnp.asarray(np.stack([bad, good, ill]))
    ws = jnp.asarray(np.stack([np.eye(5)] * 3))
    r = jax.jit(jax.vmap(lambda x, w: ica.fastica(None, x, w_init=w)))(xs, ws)
    assert r.rank_deficient.tolist() == [True, False, False]
    assert bool(r.converged[1])
    assert bool(jnp.all(jnp.isfinite(r.components)))
    one = ica.fastica(None, jnp.asarray(good), w_init=jnp.eye(5))
    np.testing.assert_allclose(np.asarray(r.components[1]), np.asarray(one.components),
                               rtol=1e-9, atol=1e-12)


def test_grad_through_fastica_is_a_clear_error_and_jvp_works():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.laplace(size=(200, 3)) @ rng.normal(size=(3, 3)))
    w = jnp.asarray(rng.normal(size=(3, 3)))

    def f(x):
        return jnp.sum(ica.fastica(None, x, w_init=w).sources[:, 0] ** 3)

    with pytest.raises(ValueError, match="reverse-mode differentiation.*fastica.*jax.jvp"):
        jax.grad(f)(x)
    dx = jnp.asarray(rng.normal(size=x.shape))
    _, tangent = jax.jvp(f, (x,), (dx,))
    eps = 1e-6
    fd = (f(x + eps * dx) - f(x - eps * dx)) / (2 * eps)
    np.testing.assert_allclose(float(tangent), float(fd), rtol=1e-4)


def _svd_calls(jaxpr, path=()):
    """(enclosing primitives, operand shape) of every ``svd`` in a jaxpr, nested ones too."""
    from jax.extend.core import jaxprs_in_params

    out = []
    for e in jaxpr.eqns:
        if e.primitive.name == "svd":
            out.append((path, e.invars[0].aval.shape))
        for sub in jaxprs_in_params(e.params):
            out += _svd_calls(sub, (*path, e.primitive.name))
    return out


def test_whiten_under_vmap_takes_each_datasets_own_branch():
    """jax.vmap(whiten) on the CPU maps the datasets one at a time: LAPACK's SVD of the data
    only inside the per-dataset branch (before, vmap turned that branch into a select and
    ran the batched SVD of every dataset: 4.6x slower for 128 x (2000, 10)), no batched
    LAPACK call; both rules give each dataset's own eager result."""
    rng = np.random.default_rng(3)
    good = rng.laplace(size=(400, 5)) @ (rng.normal(size=(5, 5)) + 2 * np.eye(5))
    xs = jnp.asarray(np.stack([good, _graded(1e11, seed=4), _graded(10.0, seed=5)]))
    eager = [ica.whiten(x) for x in xs]
    for seq in (True, False):
        f = jax.vmap(lambda x, seq=seq: ica.whiten(x, sequential_vmap=seq))
        calls = _svd_calls(jax.make_jaxpr(f)(xs).jaxpr)
        data_svds = [c for c in calls if c[1][-1] == 400]
        assert len(data_svds) == 1
        if seq:
            path, shape = data_svds[0]
            assert path[-3:] == ("scan", "cond", "jit") and shape == (5, 400)
            assert all(len(shape) == 2 for _, shape in calls)  # nothing batched
        else:
            assert data_svds[0][1] == (3, 5, 400)  # every dataset's SVD, batched
        r = jax.jit(f)(xs)
        for i, (e, kappa) in enumerate(zip(eager, (1.0, 1e11, 10.0), strict=True)):
            # LAPACK's SVD at condition 1e11: eager and compiled agree to eps * kappa
            tol = 1e-10 * max(1.0, kappa / 1e5)
            np.testing.assert_allclose(np.asarray(r.whitening[i]), np.asarray(e.whitening),
                                       rtol=tol, atol=1e-12 * float(np.abs(e.whitening).max()))
            if kappa < 1e5:  # at 1e11, z = xc K^T amplifies K's rounding: no check
                np.testing.assert_allclose(np.asarray(r.z[i]), np.asarray(e.z), rtol=1e-9,
                                           atol=1e-9)
    with pytest.raises(ValueError, match="sequential_vmap"):
        ica.whiten(xs[0], sequential_vmap="yes")


def test_whiten_keeps_reverse_mode_under_the_sequential_rule():
    """jax.grad through jax.vmap(whiten) on the sequential rule equals the plain rule's
    (the custom_jvp of map_over_batch(reverse=True) differentiates whiten itself)."""
    rng = np.random.default_rng(7)
    xs = jnp.asarray(rng.laplace(size=(3, 60, 4)) @ (rng.normal(size=(4, 4)) + 2 * np.eye(4)))
    probe = jnp.asarray(rng.normal(size=(3, 60, 4)))

    def loss(xs, seq):
        r = jax.vmap(lambda x: ica.whiten(x, sequential_vmap=seq))(xs)
        return jnp.sum(r.z * probe) + jnp.sum(r.whitening ** 2)

    g_seq = jax.jit(jax.grad(loss), static_argnums=1)(xs, True)
    g_plain = jax.jit(jax.grad(loss), static_argnums=1)(xs, False)
    assert np.all(np.isfinite(np.asarray(g_seq))) and float(jnp.abs(g_seq).max()) > 0
    np.testing.assert_allclose(np.asarray(g_seq), np.asarray(g_plain), rtol=1e-8, atol=1e-10)
    t = jnp.asarray(rng.normal(size=(3, 60, 4)))
    eps = 1e-6
    fd = (loss(xs + eps * t, True) - loss(xs - eps * t, True)) / (2 * eps)
    np.testing.assert_allclose(float(jnp.sum(g_seq * t)), float(fd), rtol=1e-5)
