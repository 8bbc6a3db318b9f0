"""Tests for jaxkit.kernels.lingam: ICA-LiNGAM, DirectLiNGAM, causal order, pruning.

The NumPy / scikit-learn references below re-implement the lingam 1.13 logic
(``_estimate_causal_order``, DirectLiNGAM's ``pwling`` search, ``predict_adaptive_lasso``)
in plain loops; the ``lingam`` package itself is not installed (it pins scipy<=1.13.1).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels.graph import shd
from jaxkit.kernels.lingam import (
    LiNGAMResult,
    adaptive_lasso_prune,
    b_from_unmixing,
    causal_order_from_b,
    direct_lingam,
    ica_lingam,
)
from scipy.optimize import linear_sum_assignment
from sklearn.decomposition import FastICA
from sklearn.linear_model import LassoLarsIC, LinearRegression

D = 5
N = 300  # the recovery tests share the (300, 5) programs of the jit / vmap tests

# module-level jitted callables: each compiles once per input shape for the whole file
order_j = jax.jit(causal_order_from_b)
b_from_w_j = jax.jit(b_from_unmixing)
ica_j = jax.jit(lambda x, w: ica_lingam(None, x, w_init=w))
ica_sk_j = jax.jit(lambda x, w: ica_lingam(None, x, w_init=w, criterion="bic_sklearn"))
direct_j = jax.jit(direct_lingam)
prune_j = jax.jit(adaptive_lasso_prune)
prune_sk_j = jax.jit(lambda x, o: adaptive_lasso_prune(x, o, criterion="bic_sklearn"))
prune_aic_j = jax.jit(lambda x, o: adaptive_lasso_prune(x, o, criterion="aic"))


# ------------------------------------------------------------------------ data


def _true_b(seed=0):
    """5-variable DAG, causal order 3, 1, 4, 0, 2; b[i, j] = effect of j on i."""
    rng = np.random.default_rng(seed)
    b = np.zeros((D, D))
    for j, i in [(3, 1), (3, 4), (1, 0), (4, 0), (0, 2), (1, 2)]:
        b[i, j] = rng.choice([-1.0, 1.0]) * rng.uniform(0.6, 1.5)
    return b


def _simulate(b, seed, n=N, noise="laplace"):
    rng = np.random.default_rng(seed)
    d = b.shape[0]
    e = rng.laplace(size=(n, d)) if noise == "laplace" else rng.uniform(-1, 1, (n, d))
    e = e * rng.uniform(0.5, 1.5, d)
    return e @ np.linalg.inv(np.eye(d) - b).T  # x = b x + e


def _order_consistent(order, b):
    pos = np.empty(len(order), int)
    pos[np.asarray(order)] = np.arange(len(order))
    child, parent = np.nonzero(b)
    return bool(np.all(pos[parent] < pos[child]))


B_TRUE = _true_b()


# ----------------------------------------------------------- NumPy references


def _ref_order_from_b(b):
    """lingam's _estimate_causal_order (stable argsort for reproducible ties)."""
    m = np.array(b, dtype=float)
    d = m.shape[0]
    pos = np.argsort(np.abs(m), axis=None, kind="stable")
    cells = np.column_stack(np.unravel_index(pos, m.shape))

    def peel(mat):
        left, out = list(range(d)), []
        while left:
            free = np.flatnonzero(np.abs(mat[np.ix_(left, left)]).sum(axis=1) == 0)
            if free.size == 0:
                return None
            out.append(left.pop(free[0]))
        return out

    k0 = d * (d + 1) // 2
    for i, j in cells[:k0]:
        m[i, j] = 0.0
    for i, j in cells[k0:]:
        found = peel(m)
        if found is not None:
            return found
        m[i, j] = 0.0
    return peel(m)


def _entropy(u):
    return ((1 + np.log(2 * np.pi)) / 2
            - 79.047 * (np.mean(np.log(np.cosh(u))) - 0.37457) ** 2
            - 7.4129 * np.mean(u * np.exp(-u * u / 2)) ** 2)


def _resid(a, b):
    return a - np.cov(a, b)[0, 1] / np.var(b) * b


def _ref_direct_order(x):
    x = np.array(x, dtype=float)
    left, out = list(range(x.shape[1])), []
    while len(left) > 1:
        scores = []
        for i in left:
            s = 0.0
            for j in left:
                if j != i:
                    zi = (x[:, i] - x[:, i].mean()) / x[:, i].std()
                    zj = (x[:, j] - x[:, j].mean()) / x[:, j].std()
                    rij, rji = _resid(zi, zj), _resid(zj, zi)
                    diff = (_entropy(zj) + _entropy(rij / rij.std())
                            - _entropy(zi) - _entropy(rji / rji.std()))
                    s += min(0.0, diff) ** 2
            scores.append(-s)
        m = left[int(np.argmax(scores))]
        for i in left:
            if i != m:
                x[:, i] = _resid(x[:, i], x[:, m])
        out.append(m)
        left.remove(m)
    return out + left


def _ref_prune(x, order):
    """lingam's predict_adaptive_lasso per node (gamma = 1, LassoLarsIC('bic'))."""
    x = np.asarray(x, float)
    xs = (x - x.mean(0)) / x.std(0)
    out = np.zeros((x.shape[1], x.shape[1]))
    for k in range(1, len(order)):
        t, p = order[k], list(order[:k])
        w = np.abs(LinearRegression().fit(xs[:, p], xs[:, t]).coef_)
        keep = np.abs(LassoLarsIC(criterion="bic").fit(xs[:, p] * w, xs[:, t]).coef_ * w) > 0
        if keep.any():
            par = np.asarray(p)[keep]
            out[t, par] = LinearRegression().fit(x[:, par], x[:, t]).coef_
    return out


def _ref_ica_order(x, w_init):
    """lingam ICALiNGAM steps 1-4 with scikit-learn FastICA and scipy's assignment."""
    w = FastICA(max_iter=1000, w_init=w_init, whiten="unit-variance").fit(x).components_
    _, col = linear_sum_assignment(1 / np.abs(w))
    pw = np.zeros_like(w)
    pw[col] = w
    return _ref_order_from_b(np.eye(len(w)) - pw / np.diag(pw)[:, None])


# --------------------------------------------------------------- causal order


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("noise_scale", [0.0, 0.05])
def test_causal_order_from_b_permuted_lower_triangular(seed, noise_scale):
    rng = np.random.default_rng(seed)
    lower = np.tril(rng.uniform(0.5, 2.0, (D, D)) * rng.choice([-1, 1], (D, D)), -1)
    perm = rng.permutation(D)
    b = lower[np.ix_(perm, perm)]  # the DAG with nodes relabelled
    noisy = b + noise_scale * rng.normal(size=(D, D)) * (b == 0)
    order = np.asarray(order_j(noisy))
    assert sorted(order.tolist()) == list(range(D))
    assert _order_consistent(order, b)
    assert order.tolist() == _ref_order_from_b(noisy)
    assert order.tolist() == np.argsort(perm).tolist()  # complete DAG: unique order


def test_causal_order_from_b_matches_reference_on_dense_matrices():
    rng = np.random.default_rng(7)
    bs = rng.normal(size=(40, D, D)) * (rng.random((40, D, D)) < 0.8)
    got = np.asarray(jax.jit(jax.vmap(causal_order_from_b))(bs))
    for b, g in zip(bs, got, strict=True):
        assert g.tolist() == _ref_order_from_b(b)
        assert g.tolist() == np.asarray(order_j(b)).tolist()  # vmap == loop


def test_causal_order_from_b_tie_break_and_zero_matrix():
    assert np.asarray(causal_order_from_b(np.zeros((D, D)))).tolist() == list(range(D))
    b = np.zeros((3, 3))
    b[0, 2] = 1.0  # 2 -> 0; nodes 1 and 2 are both roots; lowest index first
    assert np.asarray(causal_order_from_b(b)).tolist() == [1, 2, 0]


def test_b_from_unmixing_inverts_a_permuted_scaled_model():
    rng = np.random.default_rng(3)
    w_true = np.eye(D) - B_TRUE  # unmixing with unit diagonal
    perm = rng.permutation(D)
    w = (rng.uniform(0.5, 2.0, D) * rng.choice([-1, 1], D))[:, None] * w_true[perm]
    assert np.sum(w == 0) > 0  # exact zeros: 1/|w| must stay finite in the assignment
    np.testing.assert_allclose(np.asarray(b_from_w_j(w)), B_TRUE, atol=1e-12)
    np.testing.assert_allclose(np.asarray(b_from_unmixing(w)), B_TRUE, atol=1e-12)


# ---------------------------------------------------------------- recovery


def test_ica_lingam_recovers_dag_laplace():
    x = _simulate(B_TRUE, seed=1)
    w0 = np.random.default_rng(11).normal(size=(D, D))
    res = ica_j(x, w0)
    assert isinstance(res, LiNGAMResult)
    assert bool(res.converged) and 0 < int(res.n_iter) < 1000
    assert _order_consistent(res.causal_order, B_TRUE)
    assert int(shd(B_TRUE, res.adjacency)) <= 1
    np.testing.assert_allclose(np.asarray(res.adjacency), B_TRUE, atol=0.15)
    assert res.causal_order.dtype == jnp.int32


def test_ica_lingam_matches_lingam_pipeline():
    """Same w_init: order equals sklearn FastICA + scipy Hungarian + lingam's order
    search, and with the scikit-learn criterion the pruned matrix equals the
    LassoLarsIC-based reference."""
    for seed in (2, 3):
        x = _simulate(B_TRUE, seed=seed, n=500)
        w0 = np.random.default_rng(seed).normal(size=(D, D))
        res = ica_sk_j(x, w0)
        ref_order = _ref_ica_order(x, w0)
        assert np.asarray(res.causal_order).tolist() == ref_order
        np.testing.assert_allclose(np.asarray(res.adjacency), _ref_prune(x, ref_order),
                                   atol=1e-8)


def test_direct_lingam_recovers_dag_uniform():
    x = _simulate(B_TRUE, seed=4, noise="uniform")
    res = direct_j(x)
    assert bool(res.converged) and int(res.n_iter) == 0
    assert _order_consistent(res.causal_order, B_TRUE)
    assert int(shd(B_TRUE, res.adjacency)) <= 1
    np.testing.assert_allclose(np.asarray(res.adjacency), B_TRUE, atol=0.15)


def test_direct_lingam_order_matches_reference():
    for seed in (5, 6):
        x = _simulate(B_TRUE, seed=seed, n=300, noise="laplace" if seed % 2 else "uniform")
        x = x[:, ::-1]  # relabel nodes
        got = np.asarray(direct_j(x).causal_order).tolist()  # (300, 5): compiled once
        assert got == _ref_direct_order(x)


# ----------------------------------------------------------------- pruning


def test_prune_drops_zero_edge_and_keeps_strong_ones():
    rng = np.random.default_rng(8)
    n = 400
    x0, x1 = rng.laplace(size=n), rng.laplace(size=n)
    x2 = 1.5 * x0 + 0.0 * x1 + 0.5 * rng.laplace(size=n)
    x3 = -0.8 * x2 + 0.7 * x1 + 0.5 * rng.laplace(size=n)
    x = np.column_stack([x0, x1, x2, x3])
    order = np.array([0, 1, 2, 3])
    pruned, unpruned = prune_j(x, order)
    pruned, unpruned = np.asarray(pruned), np.asarray(unpruned)
    assert pruned[2, 1] == 0.0 and unpruned[2, 1] != 0.0  # zero edge dropped
    assert pruned[3, 0] == 0.0  # x0 -> x3 only through x2
    np.testing.assert_allclose(pruned[2, 0], 1.5, atol=0.1)
    np.testing.assert_allclose(pruned[3, [1, 2]], [0.7, -0.8], atol=0.1)
    assert np.all(np.triu(pruned) == 0) and np.all(np.triu(unpruned) == 0)
    # unpruned = OLS on all predecessors
    ols = np.linalg.lstsq(np.column_stack([x[:, :3], np.ones(n)]), x[:, 3], rcond=None)[0]
    np.testing.assert_allclose(unpruned[3, :3], ols[:3], atol=1e-10)
    # the scikit-learn criterion reproduces lingam's LassoLarsIC pruning exactly
    np.testing.assert_allclose(np.asarray(prune_sk_j(x, order)[0]), _ref_prune(x, order),
                               atol=1e-10)


def test_prune_false_and_aic():
    x = _simulate(B_TRUE, seed=12, n=300)
    res = direct_lingam(x, prune=False)  # eager
    np.testing.assert_array_equal(np.asarray(res.adjacency), np.asarray(res.adjacency_unpruned))
    pruned, unpruned = prune_aic_j(x, res.causal_order)
    np.testing.assert_allclose(np.asarray(unpruned), np.asarray(res.adjacency_unpruned))
    # pruning only removes parents: the support is within the predecessors
    assert np.all((np.asarray(pruned) != 0) <= (np.asarray(unpruned) != 0))
    assert _order_consistent(res.causal_order, B_TRUE)


def test_prune_matches_lassolarsic_on_weak_edges():
    """Exact LARS path + scikit-learn criterion = LassoLarsIC, also near the boundary."""
    rng = np.random.default_rng(9)
    order = np.array([2, 0, 3, 1, 4])
    for _ in range(4):
        b = np.tril(rng.uniform(0.02, 0.4, (D, D)) * (rng.random((D, D)) < 0.7), -1)
        b = b[np.ix_(np.argsort(order), np.argsort(order))]
        x = _simulate(b, seed=int(rng.integers(1 << 30)), n=150)
        np.testing.assert_allclose(np.asarray(prune_sk_j(x, order)[0]), _ref_prune(x, order),
                                   atol=1e-10)


# ------------------------------------------------------ jit / vmap / eager


def test_jit_equals_eager():
    x = _simulate(B_TRUE, seed=10, n=300)
    w0 = np.random.default_rng(0).normal(size=(D, D))
    for eager, jitted in [(ica_lingam(None, x, w_init=w0), ica_j(x, w0)),
                          (direct_lingam(x), direct_j(x))]:
        for a, b in zip(eager, jitted, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-10)


def test_vmap_equals_loop():
    xs = np.stack([_simulate(B_TRUE, seed=s, n=300) for s in (20, 21, 22)])
    w0s = np.random.default_rng(1).normal(size=(3, D, D))
    batched = jax.jit(jax.vmap(lambda x, w: ica_lingam(None, x, w_init=w)))(xs, w0s)
    batched_d = jax.jit(jax.vmap(direct_lingam))(xs)
    for k in range(3):
        for got, want in [(batched, ica_j(xs[k], w0s[k])), (batched_d, direct_j(xs[k]))]:
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b), atol=1e-10)
    orders = np.stack([np.asarray(batched_d.causal_order[k]) for k in range(3)])
    pb = jax.jit(jax.vmap(adaptive_lasso_prune))(xs, orders)
    for k in range(3):
        for a, b in zip(pb, prune_j(xs[k], orders[k]), strict=True):
            np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b), atol=1e-10)


def test_key_draws_w_init():
    x = _simulate(B_TRUE, seed=1, n=300)
    res = ica_lingam(jax.random.key(0), x)
    assert _order_consistent(res.causal_order, B_TRUE)


# ------------------------------------------------------------------- checks


def _bad_inputs():
    good = _simulate(B_TRUE, seed=0, n=50)
    nan = good.copy()
    nan[3, 1] = np.nan
    const = good.copy()
    const[:, 2] = 1.0
    return {"nan": nan, "constant": const, "n<d": good[:3], "1-D": good[:, 0]}


@pytest.mark.parametrize("case", ["nan", "constant", "n<d", "1-D"])
def test_bad_input_raises_naming_x(case):
    x = _bad_inputs()[case]
    with pytest.raises(ValueError, match="`x`"):
        direct_lingam(x)
    with pytest.raises(ValueError, match="`x`"):
        ica_lingam(jax.random.key(0), x)
    with pytest.raises(ValueError, match="`x`"):
        adaptive_lasso_prune(x, np.arange(D))


def test_bad_arguments_raise():
    x = _simulate(B_TRUE, seed=0, n=50)
    with pytest.raises(ValueError, match="criterion"):
        direct_lingam(x, criterion="mdl")
    with pytest.raises(ValueError, match="gamma"):
        adaptive_lasso_prune(x, np.arange(D), gamma=-1.0)
    with pytest.raises(ValueError, match="causal_order"):
        adaptive_lasso_prune(x, np.array([0, 0, 1, 2, 3]))
    with pytest.raises(ValueError, match="causal_order"):
        adaptive_lasso_prune(x, np.arange(D - 1))


def test_nan_under_jit_raises_at_run_time():
    x = _bad_inputs()["nan"]
    with pytest.raises(Exception, match="`x` contains NaN"):
        jax.block_until_ready(direct_j(x))


def test_one_trace_for_same_shapes():
    traces = []

    def fit(x):
        traces.append(1)
        res = direct_lingam(x)
        return res.adjacency, causal_order_from_b(res.adjacency_unpruned)

    fit_j = jax.jit(fit)
    for seed in range(3):
        adj, order = fit_j(_simulate(B_TRUE[:3, :3], seed=seed, n=60))
        assert sorted(np.asarray(order).tolist()) == [0, 1, 2]
    assert len(traces) == 1


# ---------------------------------------------------------------- no silent garbage


def _collinear_x(dtype=jnp.float64, n=300):
    e = np.random.default_rng(0).laplace(size=(n, 3))
    x = np.c_[e[:, 0], 2 * e[:, 0] + e[:, 1], 2 * e[:, 0] + e[:, 1], e[:, 2] + e[:, 0]]
    return jnp.asarray(x, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_collinear_columns_raise_eagerly_and_flag_under_jit(dtype):
    """Duplicated columns used to give NaN rows in adjacency_unpruned that pruning
    silently turned into zeros (the real edge 0 -> 3 dropped)."""
    from jaxkit.kernels.lingam import adaptive_lasso_prune

    x = _collinear_x(dtype)
    fits = {"ica": lambda x: ica_lingam(jax.random.key(0), x), "direct": direct_lingam}
    for fit in fits.values():
        with pytest.raises(ValueError, match=r"`x` is rank-deficient.*columns \[1, 2\]"):
            fit(x)
    # both fits in one compiled program
    for res in jax.jit(lambda x: [fit(x) for fit in fits.values()])(x):
        assert bool(res.rank_deficient) and not bool(res.converged)
        assert bool(jnp.all(jnp.isfinite(res.adjacency_unpruned)))
        assert bool(jnp.all(jnp.isfinite(res.adjacency)))
    with pytest.raises(ValueError, match="`x` is rank-deficient"):
        adaptive_lasso_prune(x, jnp.arange(4))
    from jaxkit.kernels.checks import checked_jit
    with pytest.raises(ValueError, match="`x` is rank-deficient"):
        checked_jit(lambda x: adaptive_lasso_prune(x, jnp.arange(4)))(x)


def test_full_rank_data_are_not_flagged():
    x = _collinear_x()[:, [0, 1, 3]]  # correlated columns, full rank
    e = np.random.default_rng(1).laplace(size=(x.shape[0], 2))
    x = jnp.c_[x, x[:, 0] + e[:, 0], e[:, 1]]  # (300, 5): the program test_jit_equals_eager ran
    res = direct_lingam(x)
    assert not bool(res.rank_deficient) and bool(res.converged)


@pytest.mark.parametrize("gamma", [-1.0, float("nan"), float("inf")])
def test_gamma_out_of_domain(gamma):
    with pytest.raises(ValueError, match="`gamma`"):
        direct_lingam(_collinear_x()[:, [0, 1, 3]], gamma=gamma)
