"""jaxkit.misaligned: featurisation, splits, every baseline on a case with a known answer,
metrics against SciPy / scikit-learn, the bootstrap's coverage, audit and bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.io import DataError
from jaxkit.misaligned import baselines as B
from jaxkit.misaligned import evaluation as E
from jaxkit.misaligned import features as F
from jaxkit.misaligned import metrics as Me

SMILES = ["CCO", "CCCO", "CCCCO", "CCCCCO", "c1ccccc1", "c1ccccc1C", "c1ccccc1CC",
          "c1ccccc1O", "C1CCCCC1", "C1CCCCC1C", "C1CCCCC1O", "CC(=O)O", "CCC(=O)O",
          "c1ccncc1", "c1ccncc1C", "CC(C)O", "CC(C)CO", "OCCO", "c1ccc2ccccc2c1",
          "c1ccc2ccccc2c1C", "C1CCNCC1", "C1CCNCC1C", "CCN", "CCCN", "CCCCN", "c1ccoc1",
          "c1ccsc1", "c1ccsc1C", "CCOCC", "CCCOC", "C1CCOC1", "C1CCOC1C", "CC#N", "CCC#N",
          "ClCCl", "ClC(Cl)Cl", "BrCC", "FC(F)F", "CC(=O)C", "CCC(=O)C"]


pytestmark = pytest.mark.usefixtures("one_blas_thread")  # tests/jaxkit/conftest.py


@pytest.fixture(scope="module")
def mols():
    """40 small molecules, 128-bit fingerprints; the label is linear in the fingerprint
    bits plus noise (so the fingerprint ridge can learn it and its nulls cannot)."""
    rng = np.random.default_rng(0)
    d = F.featurise(SMILES, np.zeros(len(SMILES)), name="toy", n_bits=128,
                    info={"experimental_error": 0.3})
    y = d.fp @ rng.standard_normal(128) + 0.1 * rng.standard_normal(d.n)
    return F.replace(d, y=y)


SETTINGS = B.FamilySettings(lam=1.0, fractions=(0.0, 1.0))
SEEDS = 4


@pytest.fixture(scope="module")
def family_jit():
    """The family's jitted function that audit() uses (shared, so compiled once here)."""
    return E._family_jit(SETTINGS)


@pytest.fixture(scope="module")
def family_out(mols, family_jit):
    rng = np.random.default_rng(1)
    splits = F.random_split(rng, mols.n, SEEDS, 0.25)
    addc = E.add_carbon_fingerprints(mols, rng, (1, 2), 2)
    fd = B.family_data(mols.y, mols.desc, mols.fp, addc, 0.3)
    out = family_jit(jax.random.key(0), fd, jnp.asarray(splits.train))
    return splits, fd, {k: np.asarray(v, np.float64) for k, v in out.items()}


# -- featurisation and splits ---------------------------------------------------------

def test_featurise_descriptors_graph_and_fingerprints(mols):
    from rdkit import Chem
    from rdkit.Chem import Descriptors, rdFingerprintGenerator

    m = Chem.MolFromSmiles("c1ccccc1O")
    i = SMILES.index("c1ccccc1O")
    np.testing.assert_allclose(mols.desc[i], [Descriptors.MolWt(m), 7, Descriptors.TPSA(m),
                                              Descriptors.MolLogP(m)])
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=128)
    np.testing.assert_array_equal(mols.fp[i], gen.GetFingerprintAsNumPy(m))
    assert mols.atoms.shape == (40, 11, len(F.ATOM_FEATURES))  # padded to the largest
    assert mols.atom_mask[i].sum() == 7 and not mols.atom_mask[i, 7:].any()
    np.testing.assert_array_equal(mols.adj[i], mols.adj[i].T)
    assert mols.adj[i].sum() == 2 * m.GetNumBonds()
    # 4 one-hot groups (element, degree, charge, H) + aromatic + in-ring flags
    np.testing.assert_array_equal(mols.atoms[i, :7].sum(axis=1), [6, 6, 6, 6, 6, 6, 4])
    assert mols.scaffold[i] == "c1ccccc1" and mols.scaffold[0] == ""


def test_unparseable_smiles_named_by_row_or_skipped():
    with pytest.raises(DataError, match=r"2 SMILES could not be parsed.*row 1 \('C1CC'\).*"
                                        r"row 3"):
        F.featurise(["CCO", "C1CC", "CCN", "xyz", "CCC", "CCCC"], np.arange(6.0))
    d = F.featurise(["CCO", "C1CC", "CCN", "xyz", "CCC", "CCCC"], np.arange(6.0),
                    skip_invalid=True, n_bits=64)
    assert d.info["skipped_rows"] == [1, 3] and d.n == 4
    np.testing.assert_array_equal(d.rows, [0, 2, 4, 5])
    np.testing.assert_array_equal(d.y, [0, 2, 4, 5])


def test_bad_labels_and_too_large_molecules():
    s = ["CCO", "CCN", "CCC", "CCCC"]
    with pytest.raises(DataError, match="NaN or inf values, first at rows \\[2\\]"):
        F.featurise(s, [1.0, 2.0, np.nan, 3.0])
    with pytest.raises(DataError, match="`labels` must be numbers"):
        F.featurise(s, ["a", "b", "c", "d"])
    with pytest.raises(DataError, match="3 values for 4 SMILES"):
        F.featurise(s, [1.0, 2.0, 3.0])
    with pytest.raises(DataError, match="more than max_atoms=3 heavy atoms, first at rows"):
        F.featurise(s, [1.0, 2.0, 3.0, 4.0], max_atoms=3)


def test_scaffold_split_keeps_scaffolds_apart(mols):
    sp = F.scaffold_split(np.random.default_rng(0), mols.scaffold, 5, 0.25)
    for s in range(5):
        tr = {mols.scaffold[i] for i in np.flatnonzero(sp.train[s])}
        te = {mols.scaffold[i] for i in np.flatnonzero(sp.test[s])}
        assert not tr & te
        assert 5 <= sp.test[s].sum() <= 15 and not (sp.train[s] & sp.test[s]).any()
    assert len({tuple(t) for t in sp.test}) > 1  # seeds give different splits
    rs = F.random_split(np.random.default_rng(0), 40, 3, 0.25)
    np.testing.assert_array_equal(rs.test.sum(1), 10)


def test_empty_split_and_duplicates_are_reported(mols):
    train = np.ones((1, mols.n), bool)
    with pytest.raises(ValueError, match="seed 0 leaves the test set empty"):
        F.check_splits(mols, F.Splits("user", train, ~train))
    with pytest.raises(ValueError, match="seed 0 leaves the training set empty"):
        F.check_splits(mols, F.Splits("user", ~train, train))
    d = F.featurise(["CCO", "OCC", "CCN", "CCC", "CCCC"], np.arange(5.0), n_bits=32)
    tr = np.array([[True, False, True, True, False]])
    with pytest.warns(UserWarning, match="1 test molecules over 1 seeds duplicate"):
        assert F.check_splits(d, F.Splits("user", tr, ~tr)) == [1]


def test_add_carbon_adds_one_carbon():
    from rdkit import Chem

    rng = np.random.default_rng(0)
    for s in ("c1ccccc1O", "CCN", "CC(=O)O"):
        new = F.add_carbon(s, rng, 1)
        m0, m1 = Chem.MolFromSmiles(s), Chem.MolFromSmiles(new)
        count = lambda m: sum(a.GetSymbol() == "C" for a in m.GetAtoms())  # noqa: E731
        assert count(m1) == count(m0) + 1 and m1.GetNumAtoms() == m0.GetNumAtoms() + 1
        assert new != Chem.MolToSmiles(m0)


# -- baselines with known answers -----------------------------------------------------

def test_size_only_equals_least_squares_on_size(mols, family_out):
    splits, _, out = family_out
    for s in range(splits.seeds):
        t = splits.train[s]
        X = np.c_[np.ones(mols.n), mols.desc[:, :2]]
        beta, *_ = np.linalg.lstsq(X[t], mols.y[t], rcond=None)
        np.testing.assert_allclose(out["size_only"][s], X @ beta, atol=2e-3)
        np.testing.assert_allclose(out["train_mean"][s], mols.y[t].mean(), rtol=1e-5)


def test_physics_references_with_and_without_logp(mols, family_out):
    """The physics-aligned references: ridge (penalty 1e-3 on the columns standardised on
    the training rows, in float64 here) on all four descriptors, on size and TPSA
    without Crippen logP, and on logP alone; all of them aligned references, none
    misaligned."""
    splits, _, out = family_out
    cols = {"descriptors": [0, 1, 2, 3], "descriptors_no_logp": [0, 1, 2], "logp_only": [3]}
    for name, c in cols.items():
        assert name in B.PHYSICS and name in B.ALIGNED and name not in B.MISALIGNED
        for s in range(splits.seeds):
            t = splits.train[s]
            x = mols.desc[:, c]
            x = (x - x[t].mean(0)) / x[t].std(0)
            lam = 1e-3 + 1e-6 * t.sum()
            beta = np.linalg.solve(x[t].T @ x[t] + lam * np.eye(len(c)),
                                   x[t].T @ (mols.y[t] - mols.y[t].mean()))
            np.testing.assert_allclose(out[name][s], x @ beta + mols.y[t].mean(), atol=2e-3,
                                       err_msg=name)
    assert not set(B.MISALIGNED) & set(B.ALIGNED)


def test_kernel_ridge_equals_primal_and_sklearn(mols):
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(2)
    t = rng.random(mols.n) < 0.7
    x = mols.fp.astype(np.float64)
    g = jnp.asarray(x @ x.T)  # float64 (the test suite enables x64)
    both = jax.jit(lambda g, x, y, t: (B.kernel_ridge(g, y, t, 2.0),  # one compilation
                                       B.linear_ridge(x, y, t, 2.0, standardise=False)))
    got, primal = map(np.asarray, both(g, jnp.asarray(x), jnp.asarray(mols.y), jnp.asarray(t)))
    want = Ridge(alpha=2.0).fit(x[t], mols.y[t]).predict(x)
    np.testing.assert_allclose(got, want, atol=1e-8)
    np.testing.assert_allclose(primal, want, atol=1e-4)  # primal adds a 1e-6 n jitter


def test_label_scrambling_gives_chance_and_strength_zero_is_the_ridge(mols, family_out):
    splits, _, out = family_out
    w = jnp.asarray(splits.test, jnp.float32)
    y = jnp.asarray(mols.y, jnp.float32)
    r2 = lambda p: np.asarray(jax.vmap(Me.r2, (None, 0, 0))(y, jnp.asarray(p), w))  # noqa
    assert r2(out["ridge_fp"]).mean() > 0.3
    assert r2(out["label_scramble"]).mean() < 0.1  # chance: R2 <= 0 in expectation
    assert r2(out["random_features"]).mean() < 0.1
    assert r2(out["shuffled_inputs"][:, -1]).mean() < 0.1
    np.testing.assert_allclose(out["shuffled_inputs"][:, 0], out["ridge_fp"], atol=1e-4)
    np.testing.assert_allclose(out["replaced_bits"][:, 0], out["ridge_fp"], atol=1e-4)
    assert out["carbon_inserted"].shape == (4, 2, mols.n)


def test_nn_tanimoto_and_noise_ceiling(mols, family_out):
    splits, fd, out = family_out
    f = mols.fp.astype(float)
    inter = f @ f.T
    sim = inter / (f.sum(1)[:, None] + f.sum(1)[None, :] - inter)
    for s in range(splits.seeds):
        cand = np.flatnonzero(splits.train[s])
        want = mols.y[cand[np.argmax(sim[:, cand], axis=1)]]
        np.testing.assert_allclose(out["nn_tanimoto"][s], want, rtol=1e-6)
    resid = out["noise_ceiling"] - mols.y[None, :]
    assert 0.2 < resid.std() < 0.4  # sigma = 0.3


def test_family_seeds_are_independent_and_compiled_once(mols, family_out, family_jit):
    """Reversing the seeds' masks reverses the deterministic baselines' outputs (each
    seed sees only its own mask), with no new trace of the compiled family."""
    splits, fd, out = family_out
    rev = family_jit(jax.random.key(0), fd, jnp.asarray(splits.train[::-1]))
    assert family_jit._cache_size() == 1
    for k in ("size_only", "descriptors", "nn_tanimoto", "ridge_fp", "train_mean"):
        np.testing.assert_allclose(np.asarray(rev[k])[::-1], out[k], atol=1e-4)
    assert not np.allclose(np.asarray(rev["label_scramble"])[::-1], out["label_scramble"])


@pytest.mark.slow  # a second compilation of the family (about 6 s of CPU)
def test_family_on_eight_devices_equals_one(family_out):
    """Seeds split over a mesh of the 8 simulated devices (padded from 4 to 8) give the
    one-device predictions: seed s draws from fold_in(key, s) wherever it runs."""
    from jaxkit import distributed as jd

    splits, fd, out = family_out
    mesh = jd.make_mesh({"data": -1})
    assert mesh.devices.size == 8
    got = E._family_sharded(SETTINGS, mesh)(jax.random.key(0), fd, jnp.asarray(splits.train))
    for k, v in out.items():
        np.testing.assert_allclose(np.asarray(got[k]), v, atol=2e-4, err_msg=k)


def _reference_family(key, fd, train, settings):
    """The curves and ridge-based baselines as first written (every strength its own
    kernel ridge from its own Gram matrix, ``jax.random.uniform`` draws, one solve per
    carbon-insertion strength): what :func:`B.baseline_family` must reproduce."""
    n, lam = fd.y.shape[0], settings.lam
    ks = jax.random.split(key, 6)
    fr = jnp.asarray(settings.fractions, jnp.float32)
    kr = lambda g, y=fd.y, q=None: B.kernel_ridge(g, y, train, lam, query_gram=q)  # noqa
    each = lambda f, *xs: jax.lax.map(lambda a: f(*a), xs)  # noqa: E731
    out = {"ridge_fp": kr(fd.gram),
           "label_scramble": kr(fd.gram, B._scramble_labels(ks[0], fd.y, train))}

    def shuffled(k, p):
        perm = B._permute_fraction(k, n, p)
        return kr(fd.gram[perm][:, perm])

    out["shuffled_inputs"] = each(shuffled, jax.random.split(ks[1], fr.shape[0]), fr)
    density = jnp.mean(fd.fp)

    def replaced(k, p):
        k1, k2 = jax.random.split(k)
        rep = jax.random.uniform(k1, fd.fp.shape) < p
        noise = (jax.random.uniform(k2, fd.fp.shape) < density).astype(fd.fp.dtype)
        x = jnp.where(rep, noise, fd.fp)
        return kr(x @ x.T)

    out["replaced_bits"] = each(replaced, jax.random.split(ks[2], fr.shape[0]), fr)
    out["random_features"] = replaced(ks[3], jnp.float32(1.0))
    v = jax.random.randint(ks[4], (), 0, fd.addc_gram.shape[1])
    out["carbon_inserted"] = jnp.stack([kr(fd.gram, q=fd.addc_gram[k, v])
                                        for k in range(fd.addc_gram.shape[0])])
    return out


@pytest.mark.parametrize("x64", [False, True])
def test_family_equals_the_per_strength_reference(mols, family_out, x64):
    """The shared Cholesky factor, the skipped strength-0 fits and p = 1 masks, the
    fused draws and the block Gram matrix give the per-strength reference's numbers
    (with float32 draws, x64 off, as the pipeline runs; and with x64 on, where the
    draws are jax.random.uniform's float64 ones as before). Fractions 0, 0.3, 1 and an
    interior 0.6 cover every branch."""
    splits, fd, _ = family_out
    settings = B.FamilySettings(lam=1.0, fractions=(0.0, 0.3, 1.0, 0.6))
    with jax.enable_x64(x64):
        both = jax.jit(lambda k, t: (B.baseline_family(k, fd, t, settings),
                                     _reference_family(k, fd, t, settings)))
        for s in range(2):
            got, want = both(jax.random.fold_in(jax.random.key(5), s),
                             jnp.asarray(splits.train[s]))
            for k, v in want.items():
                np.testing.assert_allclose(np.asarray(got[k]), np.asarray(v), rtol=0,
                                           atol=2e-5, err_msg=k)
            # the replaced bits moved the curve (not the ridge at every strength)
            assert not np.allclose(got["replaced_bits"][1], got["ridge_fp"], atol=1e-3)


def test_bit_gram_equals_the_float64_product():
    """The block-triangle Gram matrix of 0/1 rows is x @ x.T exactly (integer counts),
    for row counts that do not divide into the blocks and fewer rows than blocks."""
    rng = np.random.default_rng(4)
    for n, d, dens in [(1, 7, 0.5), (3, 9, 0.5), (41, 128, 0.1), (130, 2048, 0.01),
                       (642, 2048, 0.007)]:
        x = (rng.random((n, d)) < dens).astype(np.float32)
        want = x.astype(np.float64) @ x.T.astype(np.float64)
        for blocks in (1, 2, 4, 7):
            got = np.asarray(jax.jit(B._bit_gram, static_argnums=1)(jnp.asarray(x), blocks))
            np.testing.assert_array_equal(got, want, err_msg=f"{n} x {d}, {blocks} blocks")


# -- metrics and the bootstrap --------------------------------------------------------

def test_metrics_against_numpy_scipy_sklearn():
    from scipy.stats import spearmanr
    from sklearn.metrics import r2_score, roc_auc_score

    rng = np.random.default_rng(0)
    y = np.round(rng.standard_normal(30), 1)  # ties
    p = np.round(y + rng.standard_normal(30), 1)
    m = rng.random(30) < 0.6
    w = jnp.asarray(m, jnp.float32)
    yj, pj = jnp.asarray(y), jnp.asarray(p)
    lab = (y > 0).astype(float)
    # one compiled call for all five (eagerly, each metric is dozens of dispatches)
    got = jax.jit(lambda y, p, w, lab: dict(Me.all_metrics(y, p, w, ("rmse", "mae", "r2",
                                                                      "spearman")),
                                            auroc=Me.auroc(lab, p, w)))(yj, pj, w,
                                                                         jnp.asarray(lab))
    np.testing.assert_allclose(got["rmse"], np.sqrt(np.mean((p[m] - y[m]) ** 2)), rtol=1e-6)
    np.testing.assert_allclose(got["mae"], np.mean(np.abs(p[m] - y[m])), rtol=1e-6)
    np.testing.assert_allclose(got["r2"], r2_score(y[m], p[m]), rtol=1e-6)
    np.testing.assert_allclose(got["spearman"], spearmanr(y[m], p[m])[0], rtol=1e-6)
    np.testing.assert_allclose(got["auroc"], roc_auc_score(lab[m], p[m]), rtol=1e-6)


def test_bootstrap_interval_covers_the_true_gap():
    """Simulated case with a known population gap: per-molecule errors of the model
    N(0, 1), of the baseline N(0, 1.2^2) (independent), so the RMSE gap is 0.2; 3 seeds
    with their own test sets of 40. The 95% interval must cover 0.2 in about 95% of
    200 replications (binomial sd 1.5%)."""
    S, n, reps = 3, 40, 200
    y = jnp.zeros(n)
    test = jnp.ones((S, n), bool)

    def rep(k):
        k1, k2, k3 = jax.random.split(k, 3)
        pm = jax.random.normal(k1, (S, n))
        pb = 1.2 * jax.random.normal(k2, (S, n))
        _, gaps = Me.boot_gaps(k3, y, pm, pb, test, metric="rmse", n_boot=200)
        lo, hi = jnp.quantile(gaps, jnp.array([0.025, 0.975]))
        return (lo <= 0.2) & (0.2 <= hi)

    covered = jax.jit(jax.vmap(rep))(jax.random.split(jax.random.key(0), reps))
    assert 0.88 <= float(jnp.mean(covered)) <= 0.99


# -- audit and bad inputs -------------------------------------------------------------

def test_audit_oracle_beats_baselines_and_bad_models_are_named(mols):
    splits = F.random_split(np.random.default_rng(3), mols.n, SEEDS, 0.25)

    def oracle(data, tr, te):
        return data.y[te] + 0.01

    res = E.audit(oracle, mols, splits, key=jax.random.key(1), n_boot=200, settings=SETTINGS,
                  carbon_inserted_strengths=(1, 2), carbon_inserted_variants=2)
    g = res.gaps["model"]
    assert g.boot.lo > 0 and not g.flag and g.test.verdict == "yes"
    assert g.best in B.MISALIGNED
    np.testing.assert_allclose(res.metrics["model"]["rmse"], 0.01, rtol=1e-3)
    with pytest.raises(ValueError, match=r"`fit_predict` must return one prediction per test "
                                         r"molecule, shape \(10,\); got shape \(9,\) on seed 0"):
        E.audit(lambda d, tr, te: d.y[te][:-1], mols, splits)
    with pytest.raises(ValueError, match="NaN or inf predictions on seed 0"):
        E.audit(lambda d, tr, te: np.full(te.size, np.nan), mols, splits)
    with pytest.raises(ValueError, match="`baselines` must name baselines"):
        E.audit(oracle, mols, splits, baselines=("astrology",), n_boot=200, settings=SETTINGS,
                carbon_inserted_strengths=(1, 2), carbon_inserted_variants=2)
    empty = F.Splits("user", splits.train, np.zeros_like(splits.test))
    with pytest.raises(ValueError, match="leaves the test set empty"):
        E.audit(oracle, mols, empty)


def test_validation_splits_stay_inside_the_training_sets(mols):
    """The inner splits that choose the best baseline never touch the test molecules, and
    a scaffold split's validation set shares no scaffold with its inner training set."""
    rng = np.random.default_rng(2)
    for kind in ("random", "scaffold"):
        sp = F.make_splits(mols, kind, rng, 3, 0.25)
        v = F.validation_splits(mols, sp, rng, 0.25)
        assert v.train.shape == sp.train.shape and v.kind == f"{kind}-validation"
        assert not (v.train & sp.test).any() and not (v.test & sp.test).any()
        assert not (v.train & v.test).any() and ((v.train | v.test) == sp.train).all()
        assert v.test.any(axis=1).all() and v.train.any(axis=1).all()
        if kind == "scaffold":
            for s in range(3):
                a = {mols.scaffold[i] for i in np.flatnonzero(v.train[s])}
                b = {mols.scaffold[i] for i in np.flatnonzero(v.test[s])}
                assert not a & b


def test_negative_control_no_paper_claim_says_yes(mols):
    """A model that has learned what the labels hold (the labels plus small noise) cannot
    be exposed by a misaligned baseline: through audit() and the pipeline's report.claims,
    the paper claim ("misaligned baselines are competitive") must not say yes; it says
    no (the model leads by far more than the margin). The best baseline is chosen on the
    validation sets, and is never the physics descriptors."""
    from jaxkit.misaligned import report
    from jaxkit.misaligned.config import QUICK

    splits = F.random_split(np.random.default_rng(3), mols.n, SEEDS, 0.25)
    noise = np.random.default_rng(4)

    def learned(data, tr, te):
        return data.y[te] + 0.05 * noise.standard_normal(te.size)

    res = E.audit(learned, mols, splits, key=jax.random.key(1), n_boot=50, settings=SETTINGS,
                  carbon_inserted_strengths=(1, 2), carbon_inserted_variants=2)
    g = res.gaps["model"]
    assert g.selected_on == "validation" and g.best in B.MISALIGNED
    summary = res.summarise(experimental_error=mols.info["experimental_error"],
                            label_std=float(np.std(mols.y)), n=mols.n)
    d = summary.as_dict()  # what metrics.json records: the plain summary and the extras
    assert set(d) == set(res.summary()) | {"experimental_error", "label_std", "n"}
    assert d["n"] == mols.n and d["gaps"]["model"]["best"] == g.best
    assert d["gaps"]["model"]["per_seed"] == pytest.approx(list(g.per_seed))
    assert d["metrics"]["model"]["rmse"]["mean"] == summary.rmse("model").mean
    claims = report.claims(QUICK, {("toy", "random"): summary})
    paper = [c for c in claims if c.kind == "paper"]
    assert len(paper) == 2 and not [c.claim for c in paper if c.verdict == "yes"], paper
    assert paper[0].verdict == "no"


def test_read_molecule_csv_errors(tmp_path):
    from jaxkit.misaligned.userdata import read_molecule_csv

    p = tmp_path / "d.csv"
    p.write_text("smiles,y\nCCO,1.0\nCCN,abc\nCCC,\nCCCC,2\n")
    with pytest.raises(DataError, match=r"column 'y': 2 labels are not finite numbers: "
                                        r"line 3 \('abc'\), line 4 \(''\)"):
        read_molecule_csv(p, "smiles", "y")
    with pytest.raises(DataError, match="no column 'smi' \\(--smiles-column\\); the header "
                                        "has 'smiles', 'y'"):
        read_molecule_csv(p, "smi", "y")
    with pytest.raises(DataError, match="no such file"):
        read_molecule_csv(tmp_path / "missing.csv", "smiles", "y")
    p.write_text("smiles,y\nCCO,1.0\nCCN,2\n")
    s, y = read_molecule_csv(p, "smiles", "y")
    assert s == ["CCO", "CCN"] and y.tolist() == [1.0, 2.0]


def test_shipped_data_load():
    from jaxkit.data import molecules

    for name, n in (("solubility", 1282), ("freesolv", 642), ("chembl", 1017)):
        s, y, info = molecules.load(name)
        assert len(s) == n == y.size and np.all(np.isfinite(y))
        assert info["experimental_error"] > 0
    with pytest.raises(ValueError, match="`name` must be one of"):
        molecules.load("tox21")


def test_classification_metrics_and_gap_on_known_cases():
    """Train mean scores AUROC 1/2 exactly; a perfect score 1; accuracy at 1/2 matches
    NumPy; the gap is the model's AUROC minus the best baseline's, tested per seed."""
    from jaxkit.misaligned import classification as C

    rng = np.random.default_rng(0)
    classes = ["(A) low", "(B) medium", "(C) high"] * 10
    y = C.class_labels(classes)
    assert y.sum() == 10 and y[0] == 1 and y[1] == 0
    with pytest.raises(ValueError, match="both"):
        C.class_labels(["(B) medium"] * 4)
    S, n = 3, y.size
    test = np.zeros((S, n), bool)
    for s in range(S):
        test[s, rng.permutation(n)[:12]] = True
        test[s, [0, 1]] = True  # both classes in every test set
    noisy = y + 0.8 * rng.standard_normal((S, n))
    base = {"train_mean": np.full((S, n), 0.3), "size_only": noisy,
            "shuffled_inputs": np.stack([rng.random((S, n)), noisy], axis=1)}
    res = C.evaluate_classes(y, test, {"mlp": np.broadcast_to(y, (S, n))}, base)
    m = res.metrics
    assert m["train_mean"]["auroc"].mean == pytest.approx(0.5)
    assert m["mlp"]["auroc"].mean == pytest.approx(1.0)
    acc = [np.mean((noisy[s, test[s]] > 0.5) == (y[test[s]] > 0.5)) for s in range(S)]
    np.testing.assert_allclose(m["size_only"]["accuracy"].seeds, acc, rtol=1e-6)
    g = res.gaps["mlp"]
    assert g.best in ("size_only", "shuffled_inputs")
    np.testing.assert_allclose(g.per_seed, 1.0 - np.asarray(m[g.best]["auroc"].seeds),
                               rtol=1e-6)
    bad = test.copy()
    bad[0] = False
    bad[0, 1] = True  # a test set with one class only
    with pytest.raises(ValueError, match="both classes"):
        C.evaluate_classes(y, bad, {"mlp": np.zeros((S, n))}, base)


def test_classification_stages_end_to_end_on_a_small_slice(mols, family_jit, tmp_path):
    """The pipeline's classification stages (run_classes: the family and the MLP fitted
    to 0/1 labels, AUROC and accuracy per split and seed) on the 40 toy molecules, with
    random classes and the molecular-weight column set to the class: size only then
    separates the classes perfectly (AUROC 1, accuracy 1), label scrambling is at chance
    and train mean at 1/2 exactly. The family's shapes are the fixture's (compiled
    once)."""
    from types import SimpleNamespace

    from jaxkit.misaligned import classification as C
    from jaxkit.misaligned import models as Mo
    from jaxkit.registry import RunContext

    rng = np.random.default_rng(5)
    pos = rng.permutation(mols.n) < mols.n // 2
    desc = mols.desc.copy()
    desc[:, 0] = 100.0 + 50.0 * pos  # "MolWt" = the class
    classes = [C.POSITIVE if p else "(B) medium" for p in pos]
    data = F.replace(mols, desc=desc, info={**mols.info, "classes": classes})
    splits = {k: F.make_splits(data, k, rng, 2, 0.25) for k in ("random", "scaffold")}
    both = F.Splits("both", np.concatenate([splits[k].train for k in splits]),
                    np.concatenate([splits[k].test for k in splits]))
    cfg = SimpleNamespace(seeds=2, carbon_inserted_strengths=(1, 2), carbon_inserted_variants=2)
    ts = Mo.TrainSettings(steps=10, log_every=10, checkpoint_every=1, batch_size=8,
                          mlp_width=8, mlp_depth=1)
    val = F.validation_splits(data, both, rng, 0.25)
    out = C.run_classes(RunContext(out_dir=tmp_path, quick=True), cfg, ts, SETTINGS, data,
                        splits, both, val)
    assert family_jit._cache_size() == 1  # the fixture's compiled family, reused
    assert set(out) == {"random", "scaffold"}
    for kind, res in out.items():
        m = res.metrics
        assert set(m) == {"mlp", *B.ALIGNED, *C.CLS_BASELINES}
        for name, d in m.items():
            for metric in ("auroc", "accuracy"):
                v = np.asarray(d[metric].seeds)
                assert v.shape == (2,) and np.all((v >= 0) & (v <= 1)), (kind, name)
        assert m["size_only"]["auroc"].seeds == pytest.approx([1.0, 1.0])
        assert m["size_only"]["accuracy"].seeds == pytest.approx([1.0, 1.0])
        assert m["train_mean"]["auroc"].seeds == pytest.approx([0.5, 0.5])
        assert abs(m["label_scramble"]["auroc"].mean - 0.5) < 0.3, kind
        g = res.gaps["mlp"]
        assert g.selected_on == "validation"
        assert m[g.best]["auroc"].mean == pytest.approx(1.0)  # size only (or tied)
        np.testing.assert_allclose(g.per_seed,
                                   np.asarray(m["mlp"]["auroc"].seeds) - 1.0, atol=1e-6)
        assert res.positive_rate == pytest.approx(0.5)
