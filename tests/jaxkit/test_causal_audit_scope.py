"""The scope table of ``jaxkit run causal-audit --set data=FILE`` (causal_audit.scope): the
measured properties of a known CSV (Gaussianity per variable, variance spread, row
dependence, nonlinearity, n/d, sortability of a graph) and the statuses they give each
method's assumptions."""

import numpy as np
import pytest

from jaxkit.causal_audit import scope, userdata

NAMES = ["a", "b", "c", "d"]


def _chain(rng, n, noise):
    e = noise(rng, (n, 4))
    x = np.zeros_like(e)
    x[:, 0] = e[:, 0]
    for j in range(1, 4):
        x[:, j] = 1.5 * x[:, j - 1] + e[:, j]
    return x


def _write(path, x):
    path.write_text(",".join(NAMES) + "\n" + "".join(
        ",".join(f"{v:.10g}" for v in r) + "\n" for r in x))
    return path


def _status(rows, method, assumption):
    return next(r[4] for r in rows if r[0] == method and r[1] == assumption)


@pytest.fixture(scope="module")
def csvs(tmp_path_factory):
    rng = np.random.default_rng(0)
    d = tmp_path_factory.mktemp("scope")
    lap = _chain(rng, 2000, lambda r, s: r.laplace(size=s))
    gau = _chain(rng, 2000, lambda r, s: r.standard_normal(s))
    return (_write(d / "laplace.csv", lap), _write(d / "gauss.csv", gau),
            _write(d / "std.csv", lap / lap.std(0)))


def test_gaussianity_and_scope_statuses_of_known_csvs(csvs):
    lap, gau, std = (userdata.read_audit_table(p) for p in csvs)
    pl, pg, ps = (scope.data_properties(t.x, t.env) for t in (lap, gau, std))
    assert pl["n_non_gaussian"] == 4 and pg["n_non_gaussian"] <= 1
    assert (pl["excess_kurtosis"] > 0.5).all() and (np.abs(pg["excess_kurtosis"]) < 0.5).all()
    assert pl["n_over_d"] == 500 and pl["n_envs"] == 1
    assert pl["variance_ratio"] > 10 and ps["variance_ratio"] == pytest.approx(1, abs=1e-6)
    assert pl["lag1"] < 0.1 and pl["nonlinear_gain"] < 0.05
    ms = ("direct-lingam", "var-sort-regress", "pc")
    rl, rg, rs = (scope.scope_rows(p, ms) for p in (pl, pg, ps))
    assert _status(rl, "direct-lingam", "non-Gaussian") == "consistent"
    assert _status(rg, "direct-lingam", "non-Gaussian") in ("violated", "doubtful")
    assert _status(rl, "var-sort-regress", "raw scale") == "consistent"
    assert _status(rs, "var-sort-regress", "raw scale").startswith("violated")
    assert _status(rl, "pc", "faithfulness") == "not checkable from data (assumed)"
    assert rl[-1][:2] == ["(all)", "enough rows"] and rl[-1][4] == "consistent"
    # every row carries a failure symptom
    assert all(r[5] for r in rl)


def test_time_dependence_nonlinearity_and_environments_are_flagged():
    rng = np.random.default_rng(1)
    n = 1500
    x = rng.laplace(size=(n, 3))
    for t in range(1, n):  # AR(1) rows
        x[t] += 0.8 * x[t - 1]
    p = scope.data_properties(x)
    assert p["lag1"] > 0.7
    rows = scope.scope_rows(p, ("direct-lingam",))
    assert _status(rows, "direct-lingam", "i.i.d.") == "violated"
    z = rng.standard_normal((n, 3))
    z[:, 2] = z[:, 0] ** 2 + 0.1 * rng.standard_normal(n)
    env = np.repeat([0, 1], n // 2)
    p = scope.data_properties(z, env)
    assert p["nonlinear_gain"] > 0.5 and p["n_envs"] == 2
    rows = scope.scope_rows(p, ("direct-lingam", "gies"), targets_given=True)
    assert _status(rows, "direct-lingam", "linear") == "doubtful"
    assert _status(rows, "direct-lingam", "one distribution") == "violated"
    assert _status(rows, "gies", "known targets") == "consistent"


def test_graph_sortability_and_markdown(csvs):
    t = userdata.read_audit_table(csvs[0])
    true = np.diag(np.ones(3), -1)  # a -> b -> c -> d, [i, j]: j -> i
    vs, r2 = scope.graph_sortability(t.x, true)
    assert vs == 1.0 and r2 > 0.5
    vs_rev, _ = scope.graph_sortability(t.x, true.T)
    assert vs_rev == 0.0
    assert np.isnan(scope.graph_sortability(t.x, true + true.T)[0])  # undirected only
    p = scope.data_properties(t.x)
    md = scope.markdown(p, t.names, ("direct-lingam",), {"direct-lingam": true}, t.x)
    assert "## Scope conditions on your data" in md and "Jarque-Bera p" in md
    assert "| direct-lingam | non-Gaussian |" in md and "failure symptom" in md


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match="`x` must be a table"):
        scope.data_properties(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`alpha`"):
        scope.data_properties(np.ones((5, 3)), alpha=2)
