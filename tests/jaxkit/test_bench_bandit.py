"""benchmarks/bench_bandit.py: the NumPy baselines' index formulas, regret, and a quick
end-to-end run without the peer libraries (no virtual environments are created here)."""

import json
import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bb(load_benchmark):
    return load_benchmark("bandit")


def test_ucb1_index_hand_computed(bb):
    sums = np.array([1.0, 0.0, 3.0])
    counts = np.array([1.0, 2.0, 4.0])
    n = 7  # total pulls
    got = bb.ucb1_index_np(sums, counts, n, alpha=1.0)
    ln7 = math.log(7)
    want = [1 + math.sqrt(2 * ln7), 0 + math.sqrt(2 * ln7 / 2), 0.75 + math.sqrt(2 * ln7 / 4)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, [2.972770, 1.394959, 1.736385], atol=1e-6)
    # alpha scales the bonus; a never-pulled arm is +inf
    got = bb.ucb1_index_np(np.array([1.0, 0.0, 1.0]), np.array([1.0, 0.0, 2.0]), 3, alpha=0.5)
    assert got[1] == np.inf
    np.testing.assert_allclose(got[[0, 2]], [1 + 0.5 * math.sqrt(2 * math.log(3)),
                                             0.5 + 0.5 * math.sqrt(math.log(3))], rtol=1e-12)


def test_ducb_index_hand_computed(bb):
    sums = np.array([0.99, 0.5, 1.2])
    counts = np.array([1.5, 0.8, 2.0])
    got = bb.ducb_index_np(sums, counts, alpha=1.0)
    ln_n = math.log(4.3)  # n = sum of the discounted counts
    want = [0.99 / 1.5 + math.sqrt(2 * ln_n / 1.5), 0.5 / 0.8 + math.sqrt(2 * ln_n / 0.8),
            1.2 / 2.0 + math.sqrt(2 * ln_n / 2.0)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = bb.ducb_index_np(np.array([0.5, 0.0, 0.0]), np.array([1.0, 0.0, 0.99]), alpha=2.0)
    assert got[1] == np.inf
    np.testing.assert_allclose(got[[0, 2]], [0.5 + math.sqrt(4 * math.log(1.99)),
                                             math.sqrt(4 * math.log(1.99) / 0.99)], rtol=1e-12)


def _scalar_reference(table, gamma):
    """One run, pure Python floats: jaxkit's UCB1 (gamma None) or D-UCB definition; with
    alpha = 1 both indices are ``X/N + sqrt(2 ln(sum N) / N)`` (undiscounted for UCB1)."""
    n_steps, k = table.shape
    x, n, pulled, arms = [0.0] * k, [0.0] * k, [False] * k, []
    for t in range(n_steps):
        tot = max(sum(n), 1.0)
        idx = []
        for j in range(k):
            if not pulled[j]:
                idx.append(math.inf)
            else:
                idx.append(x[j] / n[j] + math.sqrt(2 * math.log(tot) / n[j]))
        a = idx.index(max(idx))  # first maximum
        arms.append(a)
        g = 1.0 if gamma is None else gamma
        x = [g * v for v in x]
        n = [g * v for v in n]
        x[a] += float(table[t, a])
        n[a] += 1.0
        pulled[a] = True
    return np.array(arms)


@pytest.mark.parametrize("gamma", [None, 0.9])
def test_numpy_batched_matches_scalar_loop(bb, gamma):
    table, _, _ = bb.reward_tables(4, 60, 3, seed=3, n_changes=2)
    trk = np.ascontiguousarray(table.transpose(1, 0, 2))
    if gamma is None:
        arms = bb.numpy_ucb1(trk, alpha=1.0)
    else:
        arms = bb.numpy_ducb(trk, alpha=1.0, gamma=gamma)
    assert arms.shape == (60, 4)
    np.testing.assert_array_equal(arms[:3], [[0] * 4, [1] * 4, [2] * 4])  # round robin
    for r in range(4):
        np.testing.assert_array_equal(arms[:, r], _scalar_reference(table[r], gamma))


def test_reward_tables_and_regret(bb):
    table, means, seg = bb.reward_tables(3, 50, 4, seed=1, n_changes=4)
    assert table.shape == (3, 50, 4) and table.dtype == np.uint8
    assert means.shape == (3, 5, 4) and seg.shape == (50,)
    np.testing.assert_array_equal(np.bincount(seg), [10] * 5)
    again, _, _ = bb.reward_tables(3, 50, 4, seed=1, n_changes=4)
    np.testing.assert_array_equal(table, again)  # one seed -> one table
    means = np.array([[[0.2, 0.8], [0.6, 0.1]]])  # 1 run, 2 segments, 2 arms
    seg = np.array([0, 0, 1, 1])
    arms = np.array([[0, 1, 0, 1]])  # gaps 0.6, 0, 0, 0.5
    np.testing.assert_allclose(bb.pseudo_regret(arms, means, seg), [1.1])
    ci = bb.mean_ci([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0 and ci["lo"] < 2.0 < ci["hi"]


@pytest.mark.slow  # the whole benchmark script end to end; its parts are tested above
def test_quick_run_without_peers(bb, tmp_path):
    out = tmp_path / "bandit.json"
    assert bb.main(["--quick", "--no-peers", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["rows"] and d["table_markdown"]
    for case in ("ucb1", "ducb"):
        res = d["results"][case]
        assert res["config"]["runs"] == 256 and res["config"]["steps"] == 200
        impls = res["implementations"]
        kinds = {v["kind"] for v in impls.values()}
        assert kinds == {"jaxkit", "numpy"}
        for v in impls.values():
            assert v["steps_per_s"] > 0 and v["record"]["median_s"] > 0
            assert math.isfinite(v["regret"]["mean"])
        for v in impls.values():
            if v["kind"] == "numpy":
                # same formulas, same rewards: identical arm sequences
                if v["dtype"] == "float64":
                    assert v["agreement"]["steps"] == 1.0 and v["agreement"]["runs"] == 1.0
                else:  # float32 log/sqrt may differ by an ulp between XLA and NumPy
                    assert v["agreement"]["steps"] >= 0.99
        assert "peers skipped" in res["peer_note"]
    bp = d["results"]["binpack"]
    if "skipped" not in bp:
        assert all(r["items_per_s"] > 0 for r in bp["jaxkit"].values())
        assert bp["numpy"]["items_per_s"] > 0
        assert bp["bins_equal_fraction"] == 1.0
