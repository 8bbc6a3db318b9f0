"""ActFlow metrics and verifiers against hand-computed cases; the peptide loader."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxkit.actflow import metrics as M
from jaxkit.actflow import peptides as P
from jaxkit.actflow import seqprops as S
from jaxkit.actflow.verifiers import Verifier, ring_band, sphere_band, torus_band

_circles = jax.jit(M.circles, static_argnames="metric")
_dist = jax.jit(M.pairwise_distances, static_argnames="metric")


def test_vendi_identical_and_orthogonal():
    n = 5
    assert float(M.vendi_from_kernel(jnp.ones((n, n)))) == pytest.approx(1.0, abs=1e-6)
    assert float(M.vendi_from_kernel(jnp.eye(n))) == pytest.approx(n, rel=1e-6)
    x = jnp.zeros((n, 3))
    assert float(M.vendi_score(x)) == pytest.approx(1.0, abs=1e-6)
    far = 100.0 * jnp.eye(n)  # RBF kernel ~ identity
    assert float(M.vendi_score(far)) == pytest.approx(n, rel=1e-6)
    # mask: only 2 of the far points count
    mask = jnp.array([True, True, False, False, False])
    assert float(M.vendi_score(far, mask)) == pytest.approx(2.0, rel=1e-6)


def test_vendi_two_clusters_matches_numpy():
    # 2 groups of identical points, sizes 3 and 1: eigenvalues 3/4, 1/4
    K = np.zeros((4, 4))
    K[:3, :3] = 1
    K[3, 3] = 1
    expect = np.exp(-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)))
    assert float(M.vendi_from_kernel(jnp.asarray(K))) == pytest.approx(expect, rel=1e-6)


def test_circles_on_a_line():
    x = jnp.array([[0.0], [1.0], [2.0], [3.0], [3.2]])
    count, kept = M.circles(x, 1.5)
    assert int(count) == 2 and kept.tolist() == [True, False, True, False, False]
    count, kept = M.circles(x, 0.5)
    assert int(count) == 4 and kept.tolist() == [True, True, True, True, False]
    count, _ = M.circles(x, 0.5, mask=jnp.array([False, True, True, True, True]))
    assert int(count) == 3
    # square of side 1: threshold 1.2 keeps one per diagonal pair (diag = 1.414)
    sq = jnp.array([[0.0, 0], [1, 0], [1, 1], [0, 1]])
    assert int(M.circles(sq, 1.2)[0]) == 2


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.05, 1.0))
def test_circles_kept_points_are_separated(seed, thr):
    x = jax.random.uniform(jax.random.key(seed), (20, 2))
    count, kept = _circles(x, thr)
    dist = np.asarray(_dist(x, x))
    d = dist[np.ix_(np.asarray(kept), np.asarray(kept))]
    assert np.all(d[~np.eye(int(count), dtype=bool)] > thr)
    # maximality: every point is within thr of a kept one
    assert np.all(dist[:, np.asarray(kept)].min(1) <= thr)


def test_exact_and_knn_coverage():
    ref = jnp.array([[0.0, 0], [1, 0], [2, 0], [3, 0]])
    w = jnp.array([1.0, 1, 1, 5])
    x = jnp.array([[0.1, 0], [2.9, 0], [10, 10]])
    assert float(M.exact_coverage(ref, x, 0.2)) == pytest.approx(0.5)
    assert float(M.exact_coverage(ref, x, 0.2, weights=w)) == pytest.approx(6 / 8)
    mask = jnp.array([True, False, True])
    assert float(M.exact_coverage(ref, x, 0.2, mask, w)) == pytest.approx(1 / 8)
    # k=1: every reference ball has radius 1; x covers ref 0,1 (first) and 2,3 (second)
    assert float(M.knn_coverage(ref, x, k=1)) == pytest.approx(1.0)
    assert float(M.knn_coverage(ref, x[2:], k=1)) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="`k`"):
        M.knn_coverage(ref, x, k=4)


def test_rates_and_hamming():
    tok = jnp.array([[0, 1, 2], [0, 1, 2], [0, 1, 3], [5, 5, 5]])
    d = M.pairwise_distances(tok, tok, "hamming")
    assert d[0, 2] == 1 and d[0, 3] == 3 and d[0, 1] == 0
    assert float(M.uniqueness(tok, metric="hamming")) == pytest.approx(3 / 4)
    train = jnp.array([[0, 1, 2]])
    assert float(M.novelty(tok, train, 0.0, metric="hamming")) == pytest.approx(2 / 4)
    assert float(M.novelty(tok, train, 1.0, metric="hamming")) == pytest.approx(1 / 4)
    assert float(M.validity(jnp.array([True, False, True, True]))) == 0.75
    with pytest.raises(ValueError, match="`mask`"):
        M.uniqueness(tok, mask=jnp.ones(4))
    with pytest.raises(ValueError, match="metric"):
        M.pairwise_distances(tok, tok, "cosine")


def test_distance_gradients_are_finite_at_coincident_rows():
    """A sample that lands on a known point (the Gram form rounds its squared distance
    to <= 0) gives finite gradients: the steering step of the FULL rings run had turned
    them into NaN source noise (`x0` contains NaN)."""
    b = jax.random.normal(jax.random.key(3), (6, 12)) * 3.0
    a = b[:3] + jnp.array([0.0, 1e-4, 1.0])[:, None]  # equal, within rounding, apart
    sq = M.squared_distances(a, b)
    np.testing.assert_allclose(sq, np.square(M.pairwise_distances(a, b)), rtol=1e-5,
                               atol=1e-3)
    np.testing.assert_allclose(sq, ((np.asarray(a)[:, None] - np.asarray(b)[None]) ** 2)
                               .sum(-1), rtol=1e-4, atol=1e-3)
    for f in (lambda x: jnp.sum(M.pairwise_distances(x, b)),
              lambda x: -jax.nn.logsumexp(-M.squared_distances(x, b), axis=1).sum()):
        g = jax.grad(f)(a)
        assert np.all(np.isfinite(np.asarray(g)))
    assert float(M.pairwise_distances(b[:1], b[:1])[0, 0]) == 0.0


def test_metrics_jit_vmap_invariance():
    x = jax.random.normal(jax.random.key(1), (3, 16, 2))
    ref = jax.random.normal(jax.random.key(2), (30, 2))
    f = lambda a: M.exact_coverage(ref, a, 0.5)  # noqa: E731
    eager = np.array([float(f(a)) for a in x])
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(f))(x)), eager, rtol=1e-6)
    g = lambda a: M.vendi_score(a, bandwidth=0.7)  # noqa: E731
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(g))(x)),
                               [float(g(a)) for a in x], rtol=1e-4)


def test_band_verifiers():
    ring = Verifier(ring_band(jnp.zeros((2, 2)), jnp.array([1.0, 2.0]), 0.1), "r")
    x = jnp.array([[1.05, 0.0], [0.0, 1.5], [0.0, -1.95], [3.0, 0.0]])
    assert ring(x).tolist() == [True, False, True, False]
    tor = Verifier(torus_band(2.0, 0.7, 0.1), "t")
    assert tor(jnp.array([[2.7, 0, 0], [0, 2.0, 0.7], [2.0, 0, 0]])).tolist() == [True, True,
                                                                               False]
    F = jnp.eye(5)[:, :3]
    sph = Verifier(sphere_band(F, 0.1), "s")
    y = jnp.array([[1.0, 0, 0, 0, 0], [0, 0.6, 0.8, 0.05, 0], [0, 0, 1.0, 0.3, 0]])
    assert sph(y).tolist() == [True, True, False]


def test_verifier_mask_validation():
    x = jnp.zeros((4, 2))
    with pytest.raises(ValueError, match="'ints'.*boolean"):
        Verifier(lambda a: jnp.ones(a.shape[0], jnp.int32), "ints")(x)
    with pytest.raises(ValueError, match="'short'.*shape \\(4,\\)"):
        Verifier(lambda a: jnp.ones(3, bool), "short")(x)
    with pytest.raises(ValueError, match="'host-float'.*boolean"):
        Verifier(lambda a: np.ones(a.shape[0]), "host-float", host=True)(x)
    with pytest.raises(ValueError, match="'host-2d'"):
        Verifier(lambda a: np.ones((a.shape[0], 1), bool), "host-2d", host=True)(x)
    with pytest.raises(ValueError, match="'traced'"):
        jax.jit(Verifier(lambda a: a[:, 0], "traced"))(x)


def test_host_verifier_inside_jit():
    calls = []

    def fn(a):
        calls.append(type(a))
        return np.asarray(a)[:, 0] > 0

    v = Verifier(fn, "positive", host=True)
    x = jnp.array([[1.0, 0], [-1.0, 0], [2.0, 1]])
    assert jax.jit(v)(x).tolist() == [True, False, True]
    assert v(x).tolist() == [True, False, True]
    assert all(c is np.ndarray for c in calls)


def test_peptide_encoding_and_novelty_radius():
    assert P.net_charge("") != P.net_charge("")  # NaN for an empty sequence
    assert P.net_charge("KKRDEH") == pytest.approx(S.net_charge("KKRDEH"))
    assert P.mean_hydrophobicity("IL") == pytest.approx((1.38 + 1.06) / 2)
    assert P.novelty_radius(0.4, 20) == 8 and P.novelty_radius(0.4, 48) == 19
    assert P.novelty_radius(0.01, 9) == 1
    with pytest.raises(ValueError, match="`share`"):
        P.novelty_radius(1.0, 20)
    tok = P.encode(["GIGK", "KL"], 6)
    assert tok.shape == (2, 6) and tok[1, 2] == P.PAD
    assert P.decode(tok) == ["GIGK", "KL"]
    with pytest.raises(ValueError, match="seqs\\[0\\]"):
        P.encode(["ABCZ"], 6)


def test_peptide_loader_reads_shipped_file():
    d = P.load_peptides()
    assert len(d["sequence"]) == 6110
    assert set(d["cls"]) == {"AMP", "ACP", "UniProt", "TM", "Random"}
    amp = P.load_peptides(("AMP",))
    assert len(amp["sequence"]) == 2563
    assert all(s.isalpha() and s.isupper() for s in amp["sequence"][:200])
    from jaxkit.actflow.peptide_verifier import amp_like

    n_valid = sum(amp_like(amp["sequence"]))
    assert 100 < n_valid < 2563  # the verifier accepts a part of the real AMPs
