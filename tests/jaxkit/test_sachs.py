"""The shipped Sachs et al. (2005) data and its loader."""

from importlib import resources

import numpy as np

from jaxkit.data.sachs import SACHS_CHANGE_POINTS, load_sachs

NAMES = ["praf", "pmek", "plcg", "PIP2", "PIP3", "p44/42", "pakts473", "PKA", "PKC", "P38",
         "pjnk"]


def test_shape_names_dtype():
    x, names, truth = load_sachs()
    assert x.shape == (7466, 11) and x.dtype == np.float64
    assert names == NAMES
    assert np.all(np.isfinite(x)) and np.all(x > 0)  # raw concentrations: log is safe
    np.testing.assert_allclose(x[0, :3], [26.4, 13.2, 8.82])
    assert SACHS_CHANGE_POINTS[-1] == x.shape[0]


def test_consensus_graph_convention():
    _, names, truth = load_sachs()
    assert truth.shape == (11, 11) and truth.dtype == np.float64
    assert 17 <= truth.sum() <= 18 and set(np.unique(truth)) <= {0.0, 1.0}
    assert np.all(np.diag(truth) == 0)
    i = names.index
    # lingam convention: truth[effect, cause] = 1
    assert truth[i("pmek"), i("praf")] == 1 and truth[i("praf"), i("pmek")] == 0
    assert truth[i("PKC"), i("PIP2")] == 1
    assert truth[i("p44/42"), i("pmek")] == 1
    assert truth[:, i("PKA")].sum() == 6  # PKA -> praf, pmek, p44/42, pakts473, P38, pjnk
    # the consensus is NOT acyclic: PIP3 -> plcg -> PIP2 -> PIP3 (a DAG method cannot
    # recover all 18 edges)
    assert truth[i("plcg"), i("PIP3")] and truth[i("PIP2"), i("plcg")]
    assert truth[i("PIP3"), i("PIP2")]
    assert np.trace(np.linalg.matrix_power(truth, 3)) > 0


def test_package_files_present():
    pkg = resources.files("jaxkit.data")
    for name in ("sachs.csv.gz", "sachs_consensus.csv", "SACHS.md"):
        assert (pkg / name).is_file()
    assert "Science" in (pkg / "SACHS.md").read_text()
