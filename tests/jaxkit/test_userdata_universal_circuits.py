"""Universal-circuit transcoders on a user's activation folder
(jaxkit.universal_circuits.userdata): one subfolder of safetensors / npy site files per
model, read through jaxkit.crosscoder.store."""

import json

import numpy as np
import pytest

from jaxkit.crosscoder.store import SiteStore
from jaxkit.io import DataError
from jaxkit.registry import RunContext, get
from jaxkit.universal_circuits import userdata
from jaxkit.universal_circuits.config import QUICK
from jaxkit.universal_circuits.results import UserFit, UserTranscoder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 6)).astype(np.float32)
    root = tmp_path_factory.mktemp("acts")
    (root / "alpha").mkdir()
    (root / "beta").mkdir()
    h = np.tanh(x @ rng.standard_normal((6, 5))).astype(np.float32)
    st.save_file({"act": x}, root / "alpha" / "site_0.safetensors")
    st.save_file({"act": h}, root / "alpha" / "site_1.safetensors")
    np.save(root / "beta" / "s0.npy", x)
    np.save(root / "beta" / "s1.npy", np.tanh(x @ rng.standard_normal((6, 7))).astype(
        np.float32))
    np.save(root / "labels.npy", (x[:, 0] > 0).astype(np.int32))
    return root


def test_manifest_points_at_the_users_files(folder, tmp_path):
    out = userdata.site_manifest(folder, tmp_path / "m")
    man = json.loads((out / "sites.json").read_text())
    assert list(man["models"]) == ["alpha", "beta"]
    assert all(p.startswith("/") for ps in man["models"].values() for p in ps)
    store = SiteStore(out, batch_size=16)
    assert store.d_sites == ((6, 5), (6, 7)) and store.n == 256
    sites, labels, _ = store.batch((0, 0))
    np.testing.assert_array_equal(sites[0][0], sites[1][0])  # the same inputs, aligned
    assert labels.shape == (16,)
    only = userdata.site_manifest(folder, tmp_path / "b", ("beta",))
    assert list(json.loads((only / "sites.json").read_text())["models"]) == ["beta"]


def test_bad_folders_are_named(folder, tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        userdata.site_manifest(tmp_path / "nope", tmp_path / "m")
    with pytest.raises(DataError, match=r"no model folder\(s\) \['gamma'\]; it holds alpha"):
        userdata.site_manifest(folder, tmp_path / "m", ("gamma",))
    (tmp_path / "u" / "m1").mkdir(parents=True)
    np.save(tmp_path / "u" / "m1" / "only.npy", np.zeros((4, 2)))
    with pytest.raises(DataError, match=r"m1: 1 activation file\(s\)"):
        userdata.site_manifest(tmp_path / "u", tmp_path / "m")


def _fit(aligned, misaligned) -> UserFit:
    """A :class:`UserFit` with these universal latents per depth."""
    def tc(per_depth):
        return UserTranscoder(fvu=[0.1, 0.2], recon=0.1, universal_per_depth=per_depth,
                              history=[], params=None)

    return UserFit(models=["a", "b"], d_sites=[[2, 3], [2, 3]], n=10, aligned=tc(aligned),
                   misaligned=tc(misaligned), spec=None, layers=["a/1", "b/1"])


def test_claim_compares_aligned_with_misaligned():
    res = _fit([5, 6, 7], [0, 1, 1])
    assert userdata.claims(res, 0.1)[0].verdict == "yes"
    assert userdata.claims(res, 0.1)[0].kind == "extension"  # not a sentence of the paper
    assert userdata.claims(_fit([0, 1, 1], [5, 6, 8]), 0.1)[0].verdict == "no"
    m = res.as_dict()  # what metrics.json records: no spec, no parameters
    assert list(m) == ["models", "d_sites", "n", "aligned", "misaligned", "layers"]
    assert list(m["aligned"]) == ["fvu", "recon", "universal_per_depth", "history"]


@pytest.mark.slow
def test_pipeline_on_the_users_activations(folder, tmp_path):
    cfg = QUICK.override([f"activations={folder}", "uc.latents=8", "uc.k=2", "uc.steps=100",
                          "uc.lr=0.02", "uc.batch=32", "log_every=50", "user_eval_rows=128"])
    res = get("universal-circuits").run(RunContext(out_dir=tmp_path, config=cfg, quick=True))
    m = res.metrics
    assert m["models"] == ["alpha", "beta"] and m["d_sites"] == [[6, 5], [6, 7]]
    assert len(m["aligned"]["fvu"]) == 2 and all(0 <= f < 1 for f in m["aligned"]["fvu"])
    assert res.claims and "alpha/1" in res.markdown
