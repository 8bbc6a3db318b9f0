"""Universal Circuits: universality calibrated against a shuffled null, the misaligned pair
(negative control), the intersection's baselines and both ends of the paper's band."""

import dataclasses

import jax
import numpy as np
import pytest
from jaxkit.kernels import crosscoder as cc

from jaxkit.crosscoder.store import SiteStore
from jaxkit.universal_circuits import circuits as C
from jaxkit.universal_circuits import data as D
from jaxkit.universal_circuits import report
from jaxkit.universal_circuits import universality as U
from jaxkit.universal_circuits.config import QUICK
from jaxkit.universal_circuits.models import Arch, Classifier
from jaxkit.universal_circuits.results import stack
from jaxkit.universal_circuits.transcoder import model_sites, record, train_uc
from tests.jaxkit.uc_fakes import fake_pair, fake_universality


def _shared_readings(n=400, d=6, F=32, shared=12, seed=0):
    """Two 1-layer "models" whose inputs are two noisy views of one latent signal; the
    first ``shared`` latents read the same direction of it in both models, the others
    read unrelated directions."""
    rng = np.random.default_rng(seed)
    spec = cc.uc_spec([(d, 3), (d, 3)], [(0,), (0,)], F)
    params = cc.uc_init(jax.random.key(seed), spec)
    s = rng.standard_normal((n, d))
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]  # model 1 sees s rotated
    x0 = s + 0.3 * rng.standard_normal((n, d))
    x1 = s @ Q + 0.3 * rng.standard_normal((n, d))
    W0 = rng.standard_normal((d, F))
    W1 = rng.standard_normal((d, F))
    W1[:, :shared] = Q.T @ W0[:, :shared]  # x1 @ W1 = s @ W0 + noise: the same reading
    params = params._replace(W_enc=((np.float32(W0),), (np.float32(W1),)))
    sites = ((x0, np.zeros((n, 3))), (x1, np.zeros((n, 3))))
    return spec, params, sites


def test_calibrated_universality_against_the_shuffled_null():
    spec, params, sites = _shared_readings()
    R, valid = U.read_correlation(params, spec, sites)
    assert R.shape == (1, 32, 32) and valid.tolist() == [True]
    r = U.calibrated_universal(R, valid, 0.01, np.random.default_rng(0))
    univ = r.universal
    assert univ[:12].all() and univ[12:].mean() < 0.15  # the shared readings, about no other
    assert r.null_fraction <= 0.1
    # the misaligned pair: model 1's rows from other inputs -> about none universal
    perm = np.random.default_rng(1).permutation(400)
    mis = (sites[0], tuple(a[perm] for a in sites[1]))
    rm = U.calibrated_universal(*U.read_correlation(params, spec, mis), 0.01,
                                np.random.default_rng(0))
    assert rm.universal.mean() <= 0.1
    # the uncalibrated decoder share calls every latent of both universal
    assert np.asarray(cc.universal_latents(params, spec, 0.1)).all()


def test_a_depth_one_model_does_not_read_has_no_universal_latent():
    spec = cc.uc_spec([(4, 3, 2), (4, 2)], [(0, 1), (0,)], 8)
    params = cc.uc_init(jax.random.key(0), spec)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4))
    sites = ((x, rng.standard_normal((50, 3)), np.zeros((50, 2))), (x, np.zeros((50, 2))))
    R, valid = U.read_correlation(params, spec, sites)
    assert valid.tolist() == [True, False]
    r = U.calibrated_universal(R, valid, 0.05, np.random.default_rng(0))
    assert not r.universal[8:].any() and np.isinf(r.threshold[1])
    # identical inputs and encoders at depth 0: every latent there is universal
    W = params.W_enc[0][0]
    p2 = params._replace(W_enc=((W, params.W_enc[0][1]), (W,)))
    r2 = U.calibrated_universal(*U.read_correlation(p2, spec, sites), 0.05,
                                np.random.default_rng(0))
    assert r2.universal[:8].all() and r2.valid_universal_fraction == 1.0
    with pytest.raises(ValueError, match="`alpha`"):
        U.calibrated_universal(R, valid, 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="`inputs` must hold at least 3 rows"):
        U.read_correlation(params, spec, tuple(tuple(a[:2] for a in m) for m in sites))


@pytest.fixture(scope="module")
def misaligned(tmp_path_factory):
    """A tiny MLP and CNN (random weights) and 3 transcoder seeds trained 4 steps on the
    misaligned pair (the CNN's rows from other images)."""
    d = D.load_digits(8, 5)
    clfs = [Classifier(Arch("mlp", 8, widths=(6, 5))),
            Classifier(Arch("cnn", 8, channels=(2, 3), hidden=5))]
    ps = [c.init(jax.random.key(i)) for i, c in enumerate(clfs)]
    x, y = d.x_train[:256], d.y_train[:256]
    perm = np.random.default_rng(0).permutation(len(x))
    folder = record(tmp_path_factory.mktemp("mis") / "store", ["mlp", "cnn"], clfs, ps, x, y,
                    misalign=perm)
    store = SiteStore(folder, batch_size=32, seed=0)
    np.testing.assert_array_equal(store.read(np.arange(4))[0][1][0],
                                  model_sites(clfs[1:], ps[1:], x[perm[:4]])[0][0])
    spec, params, _ = train_uc(jax.random.key(3), store, clfs, ps, n_latents=64, k=4, steps=4,
                               lr=1e-2, fidelity_coef=1.0, chunk=2, checkpoint_dir=None,
                               n_seeds=3)
    return d, clfs, ps, spec, params


def test_negative_control_the_misaligned_pair_says_no(misaligned):
    """The misaligned pair's transcoders, read on aligned test images: about alpha of the
    latents are universal, so the control row ("universal above the null by the margin")
    says no; by the uncalibrated decoder share every latent would be universal."""
    d, clfs, ps, spec, params = misaligned
    sites = model_sites(clfs, ps, d.x_test)
    per, dec = [], []
    rng = np.random.default_rng(0)
    for s in range(3):
        p = jax.tree.map(lambda a, s=s: a[s], params)
        per.append(U.calibrated_universal(*U.read_correlation(p, spec, sites),
                                          QUICK.universal_alpha, rng))
        dec.append(float(np.mean(np.asarray(cc.universal_latents(p, spec, 0.1)))))
    mis = dataclasses.replace(stack(per), decoder_fraction=np.asarray(dec))
    assert mis.universal.shape == (3, spec.n_depths * 64) and mis.rho.shape[0] == 3
    assert np.all(mis.valid_universal_fraction < 0.06) and min(dec) > 0.9
    assert mis.control_dict() == dict(universal_fraction=mis.valid_universal_fraction,
                                      decoder_fraction=mis.decoder_fraction)
    row = report.misaligned_claim(QUICK, mis)
    assert row.verdict == "no" and row.kind == "extension"
    # the same fractions as a pair's universality: the paper's complement row says no
    pa = _fake_pa(0.95)
    pa = dataclasses.replace(pa, univ=dataclasses.replace(
        pa.univ, valid_universal_fraction=mis.valid_universal_fraction))
    assert report.complement_claim(QUICK, {"mlp-cnn": (["mlp", "cnn"], pa)}).verdict == "no"


def test_top_attribution_subset_is_the_circuit_prefix(misaligned):
    d, clfs, ps, spec, params = misaligned
    p = jax.tree.map(lambda a: a[0], params)
    circ = C.find_circuits(p, spec, clfs, ps, d.x_train[:200], d.y_train[:200], k=4,
                           keep_frac=0.9, n_sizes=5, cap=6)
    st = C.intersection_stats(jax.random.key(0), p, spec, clfs, ps, circ, d.x_test, d.y_test,
                              k=4, n_random=2, tau=0.1,
                              universal=np.zeros(spec.n_depths * 64, bool))
    assert st.top_ratio.shape == (2, 10) and np.all(st.one_only == 0)
    assert np.all(st.xor >= st.one_only) and st.decoder_universal.mean() > 0.9
    # a class whose intersection is a whole circuit: its top-|I| subset is that circuit
    for m in range(2):
        full = st.shared == circ.sizes[m]
        np.testing.assert_allclose(st.top_ratio[m][full & ~st.empty],
                                   st.ratio[m][full & ~st.empty])


def _fake_pa(level, S=3, univ=0.3, top=None):
    rng = np.random.default_rng(0)
    ratio = level + 0.005 * rng.standard_normal((S, 2, 10))
    return fake_pair(S, ratio=ratio, random_ratio=ratio - 0.3,
                     top_ratio=ratio - 0.2 if top is None else top, f1=ratio, precision=ratio,
                     one_only=np.full((S, 2, 10), 3), xor=np.full((S, 2, 10), 6),
                     xor_valid=np.full((S, 2, 10), 6),
                     univ=fake_universality(S, valid_universal_fraction=univ
                                            + 0.01 * np.arange(S),
                                            null_fraction=np.full(S, 0.01)))


def test_intersection_band_has_two_ends():
    """Inside the band (0.95): yes; at the circuit itself (1.0, the intersection is the
    whole circuit): the high end says no; below 0.89: the low end says no."""
    for level, want in ((0.95, "yes"), (1.0, "no"), (0.6, "no")):
        row = report.intersection_claims(QUICK, {"mlp-cnn": (["mlp", "cnn"],
                                                              _fake_pa(level))})[0]
        assert row.verdict == want, (level, row.note)
    row = report.intersection_claims(QUICK, {"mlp-cnn": (["mlp", "cnn"], _fake_pa(1.0))})[0]
    assert "mlp yes/no" in row.note and "top-|I| 0.80" in row.note
    assert "Holm over the run's 4 (pair, model, end) tests" in row.test


def test_complement_and_top_subset_rows_can_say_yes_and_no():
    pairs = {"mlp-cnn": (["mlp", "cnn"], _fake_pa(0.95))}
    assert report.complement_claim(QUICK, pairs).verdict == "yes"
    # universal, but never kept by one model only
    pa = dataclasses.replace(_fake_pa(0.95), one_only=np.zeros((3, 2, 10)))
    assert report.complement_claim(QUICK, {"p": (["a", "b"], pa)}).verdict == "no"
    ext = []
    report._extension_pair(QUICK, "p", ["a", "b"], _fake_pa(0.95), ext)
    assert [c.verdict for c in ext if "top-|I|" in c.claim] == ["yes"]
    ext = []
    report._extension_pair(QUICK, "p", ["a", "b"], _fake_pa(0.6, top=np.full((3, 2, 10), 0.9)),
                           ext)
    assert [c.verdict for c in ext if "top-|I|" in c.claim] == ["no"]
