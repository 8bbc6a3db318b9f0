"""kernels.fingerprint: Tanimoto matrices against RDKit and a float64 NumPy reference,
packed = dense, 1-NN by similarity, jit/vmap invariance, no retracing, clear errors."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxkit.kernels import fingerprint as fp

SMILES = ["CCO", "CCN", "c1ccccc1", "c1ccccc1O", "CC(=O)Oc1ccccc1C(=O)O", "CCCCCCCC",
          "C1CCCCC1", "O=C(O)CCC(=O)O", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "Clc1ccc(Cl)cc1"]


def _numpy_tanimoto(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    inter = a @ b.T
    union = a.sum(1)[:, None] + b.sum(1)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


@pytest.fixture(scope="module")
def rdkit_fps():
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=1024)
    mols = [Chem.MolFromSmiles(s) for s in SMILES]
    bitvects = [gen.GetFingerprint(m) for m in mols]
    arr = np.stack([gen.GetFingerprintAsNumPy(m) for m in mols]).astype(np.uint8)
    return bitvects, arr


def test_matches_rdkit_bulk_tanimoto(rdkit_fps):
    from rdkit import DataStructs

    bitvects, arr = rdkit_fps
    want = np.array([DataStructs.BulkTanimotoSimilarity(b, bitvects) for b in bitvects])
    got = np.asarray(fp.tanimoto_matrix(arr))
    np.testing.assert_allclose(got, want, atol=1e-6)
    packed = np.asarray(fp.tanimoto_matrix_packed(fp.pack_bits(arr), block_rows=3))
    np.testing.assert_allclose(packed, want, atol=1e-6)
    assert got.dtype == np.float32 and np.allclose(np.diag(got), 1.0)


def test_empty_fingerprints_are_zero_as_rdkit():
    from rdkit import DataStructs

    z = np.zeros((2, 40), np.uint8)
    e = DataStructs.ExplicitBitVect(40)
    assert DataStructs.TanimotoSimilarity(e, e) == 0.0
    np.testing.assert_array_equal(np.asarray(fp.tanimoto_matrix(z)), 0.0)
    np.testing.assert_array_equal(np.asarray(fp.tanimoto_matrix_packed(fp.pack_bits(z))), 0.0)


_DENSE = jax.jit(fp.tanimoto_matrix)
_PACKED = jax.jit(lambda a, b: fp.tanimoto_matrix_packed(fp.pack_bits(a), fp.pack_bits(b),
                                                         block_rows=4))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_property_float64_reference_packed_and_symmetry(seed, pa, pb):
    rng = np.random.default_rng(seed)  # fixed shapes (one compilation), random contents
    a = (rng.random((7, 70)) < pa).astype(np.float32)
    b = (rng.random((6, 70)) < pb).astype(np.float32)
    want = _numpy_tanimoto(a, b)
    np.testing.assert_allclose(np.asarray(_DENSE(a, b)), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(_PACKED(a, b)), want, atol=1e-6)
    s = np.asarray(_DENSE(a, a))
    np.testing.assert_allclose(s, s.T, atol=0)
    assert np.all((s >= 0) & (s <= 1))


@pytest.mark.parametrize("d", [1, 32, 33])
def test_word_boundaries(d):
    rng = np.random.default_rng(d)
    a = (rng.random((4, d)) < 0.5).astype(bool)
    want = _numpy_tanimoto(a, a)
    np.testing.assert_allclose(np.asarray(fp.tanimoto_matrix_packed(fp.pack_bits(a))), want,
                               atol=1e-6)


def test_pack_bits_layout():
    x = np.zeros((1, 35), np.uint8)
    x[0, [0, 3, 33]] = 1
    w = np.asarray(fp.pack_bits(x))
    assert w.shape == (1, 2) and w.dtype == np.uint32
    assert w[0, 0] == 1 + 8 and w[0, 1] == 2


def test_nearest_neighbour_masks_and_ties():
    sim = jnp.array([[0.2, 0.9, 0.9, 0.1], [0.5, 0.4, 0.3, 0.95]])
    nb = fp.nearest_neighbour(sim)
    np.testing.assert_array_equal(np.asarray(nb.index), [1, 3])  # first index on a tie
    cand = jnp.array([True, False, True, False])
    nb = fp.nearest_neighbour(sim, cand)
    np.testing.assert_array_equal(np.asarray(nb.index), [2, 0])
    np.testing.assert_allclose(np.asarray(nb.similarity), [0.9, 0.5])
    y = jnp.array([10.0, 20.0, 30.0, 40.0])
    np.testing.assert_allclose(np.asarray(fp.nearest_neighbour_predict(sim, y, cand)),
                               [30.0, 10.0])


def test_one_nn_equals_brute_force_loop():
    rng = np.random.default_rng(3)
    a = (rng.random((9, 50)) < 0.3).astype(np.uint8)
    b = (rng.random((12, 50)) < 0.3).astype(np.uint8)
    y = rng.standard_normal(12)
    cand = rng.random(12) < 0.6
    s = _numpy_tanimoto(a, b)
    want = [y[np.flatnonzero(cand)[np.argmax(s[i, cand])]] for i in range(9)]
    got = fp.nearest_neighbour_predict(fp.tanimoto_matrix(a, b), jnp.asarray(y), cand)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_jit_vmap_and_no_retrace():
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.random((3, 5, 40)) < 0.4, jnp.float32)
    y = jnp.asarray(rng.standard_normal((3, 5)), jnp.float32)
    cand = jnp.array([True, True, False, True, True])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(a, y):
        s = fp.tanimoto_matrix(a)
        return s, fp.nearest_neighbour_predict(s - 2 * jnp.eye(5), y, cand)

    s0, p0 = f(a[0], y[0])
    s1, _ = f(a[1], y[1])  # new values, same shapes: no retrace
    eager = fp.tanimoto_matrix(a[1])
    np.testing.assert_allclose(np.asarray(s1), np.asarray(eager), atol=1e-7)
    sv, pv = jax.vmap(f)(a, y)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(sv[i]), np.asarray(fp.tanimoto_matrix(a[i])),
                                   atol=1e-7)
    np.testing.assert_allclose(np.asarray(pv[0]), np.asarray(p0), atol=1e-7)
    packed = jax.jit(fp.tanimoto_matrix_packed, static_argnames="block_rows")
    np.testing.assert_allclose(np.asarray(packed(fp.pack_bits(a[2]), block_rows=2)),
                               np.asarray(fp.tanimoto_matrix(a[2])), atol=1e-7)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="`a` must be a 2-D"):
        fp.tanimoto_matrix(np.zeros(5))
    with pytest.raises(ValueError, match="same number of bits"):
        fp.tanimoto_matrix(np.zeros((2, 5)), np.zeros((2, 6)))
    with pytest.raises(ValueError, match="`b` must be a binary fingerprint"):
        fp.tanimoto_matrix(np.zeros((2, 5)), np.full((2, 5), 0.5))
    with pytest.raises(ValueError, match="`a` must be uint32"):
        fp.tanimoto_matrix_packed(np.zeros((2, 5), np.int32))
    with pytest.raises(ValueError, match="`candidates` selects no reference"):
        fp.nearest_neighbour(jnp.ones((2, 3)), jnp.zeros(3, bool))
    with pytest.raises(ValueError, match="`candidates` must have shape"):
        fp.nearest_neighbour(jnp.ones((2, 3)), jnp.ones(4, bool))
    with pytest.raises(ValueError, match="`y` must have shape"):
        fp.nearest_neighbour_predict(jnp.ones((2, 3)), jnp.ones(2))
    from jaxkit.kernels.checks import clear_errors

    with pytest.raises(ValueError, match="`candidates` selects no"), clear_errors():
        nb = jax.jit(fp.nearest_neighbour)(jnp.ones((2, 3)), jnp.zeros(3, bool))
        nb.index.block_until_ready()


def test_unchecked_nearest_neighbour_flags_an_empty_mask():
    nb = fp.nearest_neighbour(jnp.ones((2, 3)), jnp.zeros(3, bool), checked=False)
    assert not np.asarray(nb.valid).any() and np.isnan(np.asarray(nb.similarity)).all()
    p = fp.nearest_neighbour_predict(jnp.ones((2, 3)), jnp.ones(3), jnp.zeros(3, bool),
                                     checked=False)
    assert np.isnan(np.asarray(p)).all()
