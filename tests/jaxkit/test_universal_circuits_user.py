"""Universal Circuits on a user's own labelled activations (jaxkit.universal_circuits
.usercircuits): labels.npy used for circuits, intersections, universality and surgery;
the user's own safetensors head; one-line errors for bad labels and heads."""

import jax
import numpy as np
import pytest
from jaxkit.kernels import crosscoder as cc

from jaxkit.io import DataError
from jaxkit.universal_circuits import usercircuits as UC
from jaxkit.universal_circuits import userdata


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two "models" of 3 classes: a shared input site and one hidden site each, whose
    last site separates the classes."""
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    n = 240
    y = np.arange(n) % 3
    x = (3 * np.eye(6)[y] + 0.3 * rng.standard_normal((n, 6))).astype(np.float32)
    root = tmp_path_factory.mktemp("user")
    for name, w in (("alpha", 5), ("beta", 7)):
        (root / name).mkdir()
        h = np.maximum(x @ rng.standard_normal((6, w)), 0).astype(np.float32)
        st.save_file({"act": x}, root / name / "site_0.safetensors")
        st.save_file({"act": h}, root / name / "site_1.safetensors")
    np.save(root / "labels.npy", y.astype(np.int32))
    return root


def _sites(folder):
    from safetensors.numpy import load_file

    return tuple(tuple(load_file(str(folder / m / f"site_{t}.safetensors"))["act"]
                       for t in range(2)) for m in ("alpha", "beta"))


def test_circuits_and_surgery_use_the_labels(folder):
    sites = _sites(folder)
    y = UC.check_labels(folder, np.load(folder / "labels.npy"), 240)
    spec = cc.uc_spec([(6, 5), (6, 7)], [(0,), (0,)], 16)
    params = cc.uc_init(jax.random.key(0), spec)
    res = UC.user_circuits(jax.random.key(1), folder, ["alpha", "beta"], spec, params, sites, y,
                           k=4, keep_frac=0.9, n_sizes=6, n_random=2, tau=0.1, alpha=0.05,
                           test_every=5, per_class=20, classes=(7, 1), ridge=1e-2)
    assert res.heads == ["fitted", "fitted"] and min(res.head_acc) > 0.9
    assert res.ratio.shape == (2, 3) and res.circuit_sizes.shape == (2, 3)
    assert list(res.surgery) == [1]  # class 7 is not among the user's 3 classes
    s = res.surgery[1]
    assert s.before.recall < 0.5  # the head without the class forgets it
    assert set(s.as_dict()) == {"size", "before", "after", "random"}
    assert set(s.as_dict()["after"]) == {"recall", "other"} and s.size > 0
    assert 0 <= res.universality.valid_universal_fraction <= 1
    assert "universal" not in res.as_dict()["universality"]
    md = UC.markdown(res, ["alpha", "beta"])
    assert "labels.npy" in md and "alpha fitted" in md


def test_the_users_own_head_is_loaded(folder, tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(1)
    W = rng.standard_normal((3, 7)).astype(np.float32)  # torch layout (C, d)
    st.save_file({"weight": W, "bias": np.ones(3, np.float32)}, tmp_path / "h.safetensors")
    head = UC.load_head(tmp_path / "h.safetensors", 7, 3)
    np.testing.assert_array_equal(head["W"], W.T)
    st.save_file({"kernel": W.T.copy()}, tmp_path / "k.safetensors")  # flax layout (d, C)
    np.testing.assert_array_equal(UC.load_head(tmp_path / "k.safetensors", 7, 3)["W"], W.T)
    with pytest.raises(DataError, match=r"h.safetensors: head of shape \(7, 3\).*want \(5, 3\)"):
        UC.load_head(tmp_path / "h.safetensors", 5, 3)
    st.save_file({"w": W}, tmp_path / "bad.safetensors")
    with pytest.raises(DataError, match="no 'kernel'"):
        UC.load_head(tmp_path / "bad.safetensors", 7, 3)
    # in the user's folder it replaces the fitted read-out of that model
    import shutil

    user = tmp_path / "acts"
    shutil.copytree(folder, user)
    shutil.copy(tmp_path / "h.safetensors", user / "beta_head.safetensors")
    y = UC.check_labels(user, np.load(user / "labels.npy"), 240)
    spec = cc.uc_spec([(6, 5), (6, 7)], [(0,), (0,)], 8)
    res = UC.user_circuits(jax.random.key(1), user, ["alpha", "beta"], spec,
                           cc.uc_init(jax.random.key(0), spec), _sites(folder), y, k=2,
                           keep_frac=0.9, n_sizes=4, n_random=2, tau=0.1, alpha=0.05,
                           test_every=5, per_class=10, classes=(), ridge=1e-2)
    assert res.heads == ["fitted", "user"]


def test_bad_labels_and_heads_are_one_line_before_any_work(folder, tmp_path):
    import shutil

    bad = tmp_path / "short"
    shutil.copytree(folder, bad)
    np.save(bad / "labels.npy", np.zeros(100, np.int32))
    with pytest.raises(DataError, match=r"short: .*labels hold 100 entries for 240 "
                                        r"activations"):
        userdata.check_user(bad, tmp_path / "o1", batch=16)
    np.save(bad / "labels.npy", np.r_[np.zeros(239), 1].astype(np.int32))
    with pytest.raises(DataError, match=r"every class 0..1 needs at least 2 rows"):
        userdata.check_user(bad, tmp_path / "o2", batch=16)
    np.save(bad / "labels.npy", np.arange(240) % 3)
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"kernel": np.zeros((4, 3), np.float32)}, bad / "alpha_head.safetensors")
    with pytest.raises(DataError, match=r"alpha_head.safetensors: head of shape"):
        userdata.check_user(bad, tmp_path / "o3", batch=16)


@pytest.mark.slow
def test_pipeline_runs_circuits_on_labelled_activations(folder, tmp_path):
    from jaxkit.registry import RunContext, get
    from jaxkit.universal_circuits.config import QUICK

    cfg = QUICK.override([f"activations={folder}", "uc.latents=8", "uc.k=2", "uc.steps=100",
                          "uc.lr=0.02", "uc.batch=32", "log_every=50", "user_eval_rows=128",
                          "n_sizes=4", "n_random=2", "discovery_per_class=10"])
    res = get("universal-circuits").run(RunContext(out_dir=tmp_path, config=cfg, quick=True))
    c = res.metrics["circuits"]
    assert c["heads"] == ["fitted", "fitted"] and np.asarray(c["ratio"]).shape == (2, 3)
    assert "Class circuits on your activations (labels.npy)" in res.markdown
    assert "params" not in res.metrics["aligned"]
