"""The scope-conditions table of the user-data audit (causal_audit.scope.condition_rows):
each condition measured on generated data where it is known to hold or not."""

import numpy as np
import pytest

from jaxkit.causal_audit import scope


def _chain(rng, n, noise, d=4):
    e = noise(rng, (n, d))
    x = np.zeros_like(e)
    x[:, 0] = e[:, 0]
    for j in range(1, d):
        x[:, j] = 1.5 * x[:, j - 1] + e[:, j]
    return x


def _row(rows, start):
    return next(r for r in rows if r[0].startswith(start))


METHODS = ("direct-lingam", "var-sort-regress", "r2-sort-regress", "pooled-ica-lingam",
           "gies")


def test_gaussian_noise_is_present_on_gaussian_data_and_absent_on_laplace():
    rng = np.random.default_rng(0)
    gau = scope.data_properties(_chain(rng, 3000, lambda r, s: r.standard_normal(s)))
    lap = scope.data_properties(_chain(rng, 3000, lambda r, s: r.laplace(size=s)))
    g = _row(scope.condition_rows(gau, METHODS), "Gaussian noise")
    la = _row(scope.condition_rows(lap, METHODS), "Gaussian noise")
    assert g[3] in ("present", "partly") and la[3] == "absent"
    assert g[1] == "direct-lingam, pooled-ica-lingam" and "0 of 4" in la[2]


def test_sortability_of_a_method_graph_flags_scale_artefacts():
    rng = np.random.default_rng(1)
    x = _chain(rng, 2000, lambda r, s: r.laplace(size=s))
    p = scope.data_properties(x)
    chain = np.diag(np.ones(3), -1)  # the variance order (a -> b -> c -> d)
    sort = {"var-sort-regress": scope.graph_sortability(x, chain),
            "direct-lingam": scope.graph_sortability(x, chain.T)}
    rows = scope.condition_rows(p, METHODS, sort)
    var = _row(rows, "graph follows the variance order")
    assert var[3] == "present (graphs of var-sort-regress)" and "direct-lingam 0.00" in var[2]
    none = _row(scope.condition_rows(p, METHODS, {"pc": (np.nan, np.nan)}),
                "graph follows the R^2 order")
    assert none[3] == "not measurable"
    assert _row(scope.condition_rows(p, METHODS, {"pc": scope.graph_sortability(
        x, chain.T)}), "graph follows the variance order")[3] == "absent"


def test_environment_conditions_few_rows_two_targets_and_coverage():
    rng = np.random.default_rng(2)
    x = rng.laplace(size=(1060, 3))
    env = np.repeat([0, 1, 2], [1000, 30, 30])
    two = np.array([[0, 0, 0], [1, 1, 0], [0, 0, 1]], bool)  # env 1 hits two variables
    p = scope.data_properties(x, env, targets=two)
    assert p["min_env_rows"] == 30 and p["max_targets"] == 2 and p["n_targeted"] == 3
    rows = scope.condition_rows(p, METHODS)
    assert _row(rows, "few rows per environment")[3] == "present"
    assert _row(rows, "more than one target")[3] == "present"
    assert _row(rows, "fewer intervened variables")[3] == "absent"
    atomic = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], bool)
    env = np.repeat([0, 1, 2], [400, 330, 330])
    rows = scope.condition_rows(scope.data_properties(x, env, targets=atomic), METHODS)
    assert _row(rows, "few rows per environment")[3] == "absent"
    assert _row(rows, "more than one target")[3] == "absent"
    assert _row(rows, "fewer intervened variables")[3] == "present"
    plain = scope.condition_rows(scope.data_properties(x), ("pc",))
    assert _row(plain, "more than one target")[3] == "not measurable"
    assert _row(plain, "few rows per environment")[3].startswith("not measurable")
    assert _row(plain, "few rows per variable")[3] == "absent"
    assert _row(plain, "more than one target")[1].startswith("none run here")


def test_the_conditions_table_is_in_the_markdown_and_bad_shapes_are_named():
    rng = np.random.default_rng(3)
    x = _chain(rng, 500, lambda r, s: r.laplace(size=s))
    p = scope.data_properties(x)
    md = scope.markdown(p, list("abcd"), ("direct-lingam",),
                        {"direct-lingam": np.diag(np.ones(3), -1)}, x)
    assert "| condition | methods it breaks |" in md and "few rows per variable" in md
    with pytest.raises(ValueError, match="`env`"):
        scope.data_properties(x, np.zeros(3))
    with pytest.raises(ValueError, match="`targets`"):
        scope.data_properties(x, np.zeros(500), targets=np.zeros((1, 2), bool))
