"""benchmarks/bench_charge.py: the NumPy references (soft projection, DP) and the MILP
against brute force, and a quick end-to-end run without cvxpy (no virtual environment is
created here; the MILP runs in this environment through scipy)."""

import itertools
import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bc(load_benchmark):
    return load_benchmark("charge")


def test_element_probs_rows_on_simplex(bc):
    p = bc.element_probs(3, 40, seed=1)
    assert p.shape == (3, 40, 11)
    assert np.all(p > 0)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-14)
    np.testing.assert_array_equal(p, bc.element_probs(3, 40, seed=1))


def test_simplex_projection_hand_computed(bc):
    got = bc.simplex_project_np(np.array([[0.5, 0.5, 0.5], [2.0, 0.0, 0.0], [0.6, 0.5, -1.0]]))
    np.testing.assert_allclose(got, [[1 / 3] * 3, [1.0, 0.0, 0.0], [0.55, 0.45, 0.0]],
                               atol=1e-15)


def test_numpy_soft_projection_constraints_and_kkt(bc):
    q = bc.CHARGES.astype(float)
    y = bc.element_probs(4, 60, seed=2)
    p, mu, n_iter = bc.project_soft_np(y, q)
    c = bc.soft_constraints(p, q)
    assert c["min_entry"] >= 0.0 and c["row_sum_err"] < 1e-13 and c["charge_abs"] < 1e-11
    assert 1 <= n_iter <= 100 and mu.shape == (4,)
    # KKT: p_i is the simplex projection of y_i - mu q for the returned scalar mu per cell
    np.testing.assert_allclose(p, bc.simplex_project_np(y - mu[:, None, None] * q),
                               atol=1e-12)
    # batched over cells == cell by cell
    for i in range(4):
        np.testing.assert_allclose(bc.project_soft_np(y[i], q)[0], p[i], atol=1e-12)
    # optimality against random feasible points: moving towards them never helps
    rng = np.random.default_rng(0)
    f0 = bc.soft_objective(p[0], y[0])
    for _ in range(20):
        z = bc.project_soft_np(rng.dirichlet(np.ones(11), size=60), q)[0]
        for t in (1e-3, 0.1, 1.0):
            assert bc.soft_objective((1 - t) * p[0] + t * z, y[0]) >= f0 - 1e-12


def test_numpy_semismooth_reference_equals_bisection(bc):
    q = bc.CHARGES.astype(float)
    y = bc.element_probs(4, 60, seed=3)
    p, mu, n_iter = bc.project_soft_np_ssn(y, q)
    ref, mu_ref, _ = bc.project_soft_np(y, q)
    np.testing.assert_allclose(p, ref, atol=1e-12)
    np.testing.assert_allclose(mu, mu_ref, atol=1e-10)
    assert 1 <= n_iter < 50
    # a flat start (scaled one-hot rows) is handed to the bisection reference
    q3 = np.array([4.0, -2.0, 1.0])
    flat = 10 * np.eye(3)[[[0, 1, 1, 2, 0], [2, 2, 1, 0, 1]]]
    np.testing.assert_allclose(bc.project_soft_np_ssn(flat, q3)[0],
                               bc.project_soft_np(flat, q3)[0], atol=1e-12)


def test_numpy_soft_projection_two_species(bc):
    # one atom, charges +1 / -1: the only neutral point is (1/2, 1/2)
    p, _, _ = bc.project_soft_np(np.array([[0.9, 0.1]]), np.array([1.0, -1.0]))
    np.testing.assert_allclose(p, [[0.5, 0.5]], atol=1e-12)


def _brute(cost, q, allowed=None):
    n, k = cost.shape
    best, arg = np.inf, None
    for a in itertools.product(range(k), repeat=n):
        a = np.array(a)
        if q[a].sum() == 0 and (allowed is None or allowed[a].all()):
            c = cost[np.arange(n), a].sum()
            if c < best:
                best, arg = c, a
    return best, arg


def test_numpy_dp_and_milp_match_brute_force(bc):
    rng = np.random.default_rng(3)
    q = np.array([2, 1, -1, -3])
    for n in range(1, 6):
        for _ in range(3):
            c = rng.random((n, 4))
            best, _ = _brute(c, q)
            a, cn, f = bc.project_discrete_np(c, q)
            am, cm, fm, _ = bc.milp_discrete(c, q)
            assert f == fm == np.isfinite(best)
            if f:
                assert bc.discrete_ok(a, q) and bc.discrete_ok(am, q)
                assert cn == pytest.approx(best, rel=1e-12)
                assert cm == pytest.approx(best, rel=1e-9)
    # Si4+ / O2- only: balanced iff the atom count is a multiple of 3
    q11 = bc.CHARGES
    allowed = np.zeros(11, bool)
    allowed[[0, 10]] = True
    for n, feasible in ((5, False), (6, True)):
        c = rng.random((n, 11))
        a, cn, f = bc.project_discrete_np(c, q11, allowed)
        _, cm, fm, _ = bc.milp_discrete(c, q11, allowed)
        assert f == fm == feasible
        if feasible:
            assert bc.discrete_ok(a, q11, allowed) and np.bincount(a)[[0, 10]].tolist() == [2, 4]
            assert cn == pytest.approx(cm, rel=1e-9)


@pytest.mark.slow  # the whole benchmark script end to end; its parts are tested above
def test_quick_run_without_peers(bc, tmp_path):
    pytest.importorskip("jaxkit.kernels.charge")
    out = tmp_path / "charge.json"
    assert bc.main(["--quick", "--no-peers", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["rows"] and d["table_markdown"] and d["targets"]
    assert all(r["time_s"] > 0 and r["per_cell_s"] > 0 for r in d["summary"])

    soft = d["results"]["soft"]
    assert "cvxpy skipped" in soft["peer_note"]
    assert set(soft["single"]) == {"50", "100"}
    for res in [*soft["single"].values(), soft["batch"]]:
        assert res["numpy"]["items_per_s"] > 0
        for c in (res["constraints_jaxkit"], res["constraints_numpy"]):
            assert c["min_entry"] >= 0 and c["row_sum_err"] < 1e-12 and c["charge_abs"] < 1e-9
        a = res["agreement_numpy"]  # the same projection: equal up to rounding
        assert a["max_abs_diff"] < 1e-8 and a["obj_rel_diff_max"] < 1e-10
        assert not res["cvxpy"]
    for r in [*(v["jaxkit"] for v in soft["single"].values()),
              *soft["batch"]["jaxkit"].values()]:
        assert r["items_per_s"] > 0 and r["compile_s"] > 0
    assert soft["batch"]["cells"] == 16

    disc = d["results"]["discrete"]
    assert disc["all_costs_equal_milp"] and disc["feasibility_agrees"]
    for res in disc["sizes"].values():
        assert res["jaxkit"]["items_per_s"] > 0 and res["milp"]["median_s"] > 0
        assert len(res["instances"]) == 3
        for inst in res["instances"]:
            assert inst["feasible_jaxkit"] and inst["feasible_milp"] and inst["valid_jaxkit"]
            assert inst["equal_cost"] and inst["equal_numpy_dp"]
            assert abs(inst["rel_diff_milp"]) <= 1e-9
            if "gap_approx" in inst:
                assert inst["gap_approx"] >= -1e-12  # never below the exact optimum
    inf = disc["infeasible"]
    assert {k: v["feasible_milp"] for k, v in inf.items()} == {"20": False, "21": True}
    assert all(v["agree"] for v in inf.values())

    ov = d["results"]["overhead"]
    assert "STAND-IN" in ov["description"]
    for k in ("step", "projection", "sampler_plain", "sampler_projected"):
        assert ov[k]["median_s"] > 0
    assert ov["final_constraints"]["charge_abs"] < 1e-9
