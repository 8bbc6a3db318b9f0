"""LiNGAM options against lingam 1.13.0: prior knowledge (strong and soft), the kernel
measure, estimate_total_effect, get_error_independence_p_values and the bootstrap.

Cases ported from lingam's own tests (``tests/test_direct_lingam.py``,
``tests/test_bootstrap.py``) on the data they use, seeded here. ``PEER`` holds lingam
1.13.0's outputs on exactly these data, recorded with
``benchmarks/peers/lingam_worker.py --cases`` (lingam pins scipy<=1.13.1, so it runs in
its own venv); ``test_live_peer_parity`` (slow) recomputes them when that venv exists.
"""

import json
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import lingam as L

ROOT = Path(__file__).resolve().parents[2]
PEER_PY = ROOT / "benchmarks" / ".peer-venv-lingam" / "bin" / "python"
WORKER = ROOT / "benchmarks" / "peers" / "lingam_worker.py"


def lingam_test_data(n=1000, seed=0):
    """lingam's test data: x0 -> x1 -> x3 (weights 2, 4), x2 alone; uniform noise."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(size=n)
    x1 = 2.0 * x0 + rng.uniform(size=n)
    x2 = rng.uniform(size=n)
    x3 = 4.0 * x1 + rng.uniform(size=n)
    return np.c_[x0, x1, x2, x3]


def kernel_data(n=100, seed=1):
    """lingam's test_kernel_mode data: x0 -> x1 -> x2, x0 -> x2 (its 100-row fit)."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(size=n)
    x1 = 0.5 * x0 + rng.uniform(size=n)
    x2 = 0.5 * x0 + 0.5 * x1 + rng.uniform(size=n)
    return np.c_[x0, x1, x2]


def error_data():
    """Three error variables: 0 and 1 linearly, 1 and 2 non-linearly dependent."""
    e = np.random.default_rng(3).laplace(size=(300, 3))
    e[:, 1] += 0.8 * e[:, 0]
    e[:, 2] += e[:, 1] ** 2 * 0.3
    return e


# lingam's tests/test_direct_lingam.py::test_prior_knowledge_success matrices
PK = {
    "nothing": [[0, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1], [-1, -1, -1, 0]],
    "x1_exogenous": [[0, -1, -1, -1], [0, 0, 0, 0], [-1, -1, 0, -1], [-1, -1, -1, 0]],
    "x0_sink": [[0, -1, -1, -1], [0, 0, -1, -1], [0, -1, 0, -1], [0, -1, -1, 0]],
    "x2_to_x3": [[0, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, 0], [-1, -1, 1, 0]],
    "no_x1_to_x3": [[0, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1], [-1, 0, -1, 0]],
    "mixed": [[0, -1, -1, 0], [0, 0, -1, 0], [0, -1, 0, -1], [0, 0, 0, 0]],
}
# lingam 1.13.0 on these data (same causal order with and without the soft rule here)
PEER_ORDERS = {"nothing": [2, 0, 1, 3], "x1_exogenous": [1, 2, 0, 3], "x0_sink": [2, 3, 1, 0],
               "x2_to_x3": [2, 0, 1, 3], "no_x1_to_x3": [2, 0, 3, 1], "mixed": [3, 2, 1, 0]}
PEER_PLAIN_ADJ = [[0.0, 0.0, 0.0, 0.0], [1.9896475484426155, 0.0, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0], [0.0, 4.018450762490455, 0.0, 0.0]]
PEER_KERNEL_ORDER = [0, 1, 2]
PEER_KERNEL_ADJ = [[0.0, 0.0, 0.0], [0.518450044582162, 0.0, 0.0],
                   [0.2541155826424757, 0.8350106540012925, 0.0]]
PEER_TOTAL_EFFECT = {(0, 3): 8.002960579007299, (1, 3): 4.004329796867672,
                     (0, 2): 0.016312611685428226, (3, 0): 0.007636385373899785}
PEER_P_ADJ = [[0, 0, 0], [0.8, 0, 0], [0, 0.5, 0]]
PEER_P_VALUES = [[0.0, 0.6501625221615941, 0.042030988116289726],
                 [0.6501625221615941, 0.0, 3.3987414534157468e-12],
                 [0.042030988116289726, 3.3987414534157468e-12, 0.0]]

X = lingam_test_data()


def _fit(pk=None, soft=False, x=X, **kw):
    return L.direct_lingam(jnp.asarray(x), prior_knowledge=pk, apply_prior_knowledge_softly=soft,
                           criterion="bic_sklearn", **kw)


def _pos(order):
    return {int(v): i for i, v in enumerate(order)}


@pytest.mark.parametrize("soft", [False, True])
def test_prior_knowledge_port_orders_match_lingam(soft):
    """lingam's test_prior_knowledge_success assertions, and lingam's exact orders."""
    got = {name: [int(v) for v in _fit(pk, soft).causal_order] for name, pk in PK.items()}
    assert got == PEER_ORDERS
    p = _pos(got["nothing"])
    assert p[0] < p[1] < p[3]
    p = _pos(got["x1_exogenous"])
    assert p[1] < min(p[0], p[2], p[3])
    p = _pos(got["x0_sink"])
    assert p[0] > max(p[1], p[2], p[3])
    p = _pos(got["x2_to_x3"])
    assert p[2] < p[3]


def test_forbidden_parent_never_enters_and_adjacency_matches_lingam():
    plain = _fit()
    np.testing.assert_allclose(np.asarray(plain.adjacency), PEER_PLAIN_ADJ, rtol=1e-6, atol=1e-9)
    r = _fit(PK["no_x1_to_x3"])  # x1 has no path to x3: the true edge 1 -> 3 is forbidden
    assert float(r.adjacency[3, 1]) == 0.0
    assert abs(float(plain.adjacency[3, 1])) > 3.5


def test_ica_lingam_prior_knowledge_constrains_order_and_edges():
    """lingam's ICALiNGAM takes no prior knowledge; jaxkit's applies DirectLiNGAM's
    semantics: the order respects it and forbidden parents never enter."""
    key = jax.random.key(0)
    for name in ("x1_exogenous", "x0_sink", "no_x1_to_x3"):
        r = L.ica_lingam(key, jnp.asarray(X), prior_knowledge=PK[name])
        p = _pos(r.causal_order)
        before = L.partial_order(L.check_prior_knowledge(PK[name], 4))
        for a, b in zip(*np.nonzero(before), strict=True):
            assert p[int(a)] < p[int(b)], (name, a, b)
        forbidden = np.asarray(PK[name]) == 0
        np.fill_diagonal(forbidden, False)
        assert np.all(np.asarray(r.adjacency)[forbidden] == 0.0)
    p = _pos(L.ica_lingam(key, jnp.asarray(X), prior_knowledge=PK["x1_exogenous"]).causal_order)
    assert p[1] == 0


@pytest.mark.parametrize("pk, match", [
    ([[0, -1, 1], [-1, 0, -1], [-1, -1, 0], [-1, -1, -1]], "The shape of `prior_knowledge`"),
    ([[0, 1, -1, -1], [1, 0, -1, -1], [-1, -1, 0, -1], [-1, -1, -1, 0]],
     r"inconsistencies at the following indices: \[\[0, 1\], \[1, 0\]\]"),
    ([[0, 2, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1], [-1, -1, -1, 0]], "entries must be"),
    # a known path from x0 to itself (lingam reports the diagonal pair too)
    ([[1, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1], [-1, -1, -1, 0]], "inconsistencies"),
    # known paths 1 -> 0, 2 -> 1, 0 -> 2: a cycle
    ([[-1, 1, -1, -1], [-1, -1, 1, -1], [1, -1, -1, -1], [-1, -1, -1, -1]], "cycle"),
])
def test_invalid_prior_knowledge(pk, match):
    """lingam's test_prior_knowledge_invalid (shape, inconsistency), plus values lingam
    would not catch and a cycle (lingam fails later with an empty candidate list)."""
    with pytest.raises(ValueError, match=match):
        L.direct_lingam(jnp.asarray(X), prior_knowledge=pk)
    with pytest.raises(ValueError, match=match):
        L.ica_lingam(jax.random.key(0), jnp.asarray(X), prior_knowledge=pk)


def test_kernel_measure_matches_lingam():
    """lingam's test_kernel_mode (its 100-row fit): the same order and adjacency; and the
    n x n form of the kernel mutual information equals lingam's 2n x 2n SVD form."""
    r = _fit(x=kernel_data(), measure="kernel")
    assert [int(v) for v in r.causal_order] == PEER_KERNEL_ORDER
    np.testing.assert_allclose(np.asarray(r.adjacency), PEER_KERNEL_ADJ, rtol=1e-6, atol=1e-9)
    rng = np.random.default_rng(4)
    a = rng.uniform(size=40)
    b = a**2 + 0.3 * rng.normal(size=40)
    kappa, sigma = 2e-2, 1.0
    n = 40

    def gram(v):
        return np.exp(-((v[:, None] - v[None, :]) ** 2) / (2 * sigma**2))

    k1, k2 = gram(a), gram(b)
    t1, t2 = k1 + n * kappa * np.eye(n) / 2, k2 + n * kappa * np.eye(n) / 2
    kk = np.block([[t1 @ t1, k1 @ k2], [k2 @ k1, t2 @ t2]])
    dk = np.block([[t1 @ t1, np.zeros((n, n))], [np.zeros((n, n)), t2 @ t2]])
    ref = -0.5 * (np.sum(np.log(np.linalg.svd(kk, compute_uv=False)))
                  - np.sum(np.log(np.linalg.svd(dk, compute_uv=False))))
    got = float(L.kernel_mutual_information(jnp.asarray(a), jnp.asarray(b)))
    assert got == pytest.approx(ref, rel=1e-8) and got > 0.05


def test_total_effect_matches_lingam_and_flags_reversed_order():
    r = _fit()
    for (fr, to), ref in PEER_TOTAL_EFFECT.items():
        te, ok = L.estimate_total_effect(jnp.asarray(X), r.adjacency, r.causal_order, fr, to)
        assert float(te) == pytest.approx(ref, rel=1e-8)
        # lingam warns when `to` precedes `from` in the order: (0, 2) and (3, 0) here
        assert bool(ok) == ((fr, to) in ((0, 3), (1, 3)))
    # the path sum of the fitted weights (lingam's calculate_total_effect): 2 * 4 = 8
    t = np.asarray(L.total_effects_from_adjacency(jnp.asarray(PEER_PLAIN_ADJ)))
    assert t[3, 0] == pytest.approx(PEER_PLAIN_ADJ[1][0] * PEER_PLAIN_ADJ[3][1], rel=1e-12)
    assert t[0, 3] == 0.0 and np.all(np.diag(t) == 0)


def test_error_independence_p_values_match_lingam():
    pv = np.asarray(L.error_independence_p_values(jnp.asarray(error_data()),
                                                  jnp.asarray(PEER_P_ADJ, jnp.float64)))
    np.testing.assert_allclose(pv, PEER_P_VALUES, rtol=1e-8, atol=1e-14)
    assert pv[0, 1] > 0.5 and pv[1, 2] < 1e-6  # the linear part removed, the square left


def _dummy_bootstrap():
    """lingam's tests/test_bootstrap.py DummyBoostrapMixin adjacency matrices."""
    z = np.zeros((4, 4))
    a = [z.copy() for _ in range(5)]
    a[0][1, 0] = a[0][2, 1] = a[0][3, 2] = 1.0
    a[1][2, 1], a[1][3, 2] = 0.1, 1.0
    a[2][3, 2] = 1.0
    a[4][1, 0], a[4][2, 1], a[4][3, 2] = 2.0, 2.0, -0.5
    adj = jnp.asarray(np.stack(a))
    return L.BootstrapResult(adj, jnp.zeros_like(adj), jnp.tile(jnp.arange(4), (5, 1)),
                             jnp.zeros((5, 3), jnp.int32), jnp.ones(5, bool))


def test_causal_direction_counts_port():
    """lingam's test_bootstrap_success: get_causal_direction_counts with every option."""
    r = _dummy_bootstrap()
    assert L.causal_direction_counts(r) == {"from": [2, 1, 0], "to": [3, 2, 1],
                                            "count": [4, 3, 2]}
    assert L.causal_direction_counts(r, n_directions=2) == {"from": [2, 1], "to": [3, 2],
                                                            "count": [4, 3]}
    assert L.causal_direction_counts(r, min_causal_effect=0.2) == {
        "from": [2, 0, 1], "to": [3, 1, 2], "count": [4, 2, 2]}
    assert L.causal_direction_counts(r, min_causal_effect=0.6) == {
        "from": [2, 0, 1], "to": [3, 1, 2], "count": [3, 2, 2]}
    assert L.causal_direction_counts(r, split_by_causal_effect_sign=True) == {
        "from": [1, 2, 0, 2], "to": [2, 3, 1, 3], "count": [3, 3, 2, 1], "sign": [1, 1, 1, -1]}
    p = np.asarray(L.bootstrap_probabilities(r, min_causal_effect=0.6))
    assert p.shape == (4, 4)
    assert p[3, 2] == pytest.approx(0.6) and p[2, 1] == pytest.approx(0.4)
    for bad in ({"n_directions": -1}, {"n_directions": "3"}, {"min_causal_effect": -1.0}):
        with pytest.raises(ValueError):
            L.causal_direction_counts(r, **bad)
    with pytest.raises(ValueError):
        L.bootstrap_probabilities(r, min_causal_effect=-1.0)


def test_bootstrap_is_the_fits_on_the_resamples():
    """The vmapped bootstrap equals the single fits on its resampled rows; the total
    effects are the path sums over each fit's order; bad n_sampling raises (lingam's
    test_bootstrap_invalid_data)."""
    x = jnp.asarray(X[:200])
    r = L.bootstrap(jax.random.key(0), x, 3, criterion="bic_sklearn")
    assert r.adjacency_matrices.shape == (3, 4, 4) and r.resampled_indices.shape == (3, 200)
    nonzero = []
    for b in range(3):
        one = _fit(x=np.asarray(x)[np.asarray(r.resampled_indices[b])])
        nonzero.append(np.asarray(one.adjacency) != 0)
        np.testing.assert_allclose(np.asarray(r.adjacency_matrices[b]),
                                   np.asarray(one.adjacency), rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(r.causal_orders[b]),
                                      np.asarray(one.causal_order))
    te = np.asarray(r.total_effects)
    b0 = np.asarray(r.adjacency_matrices[0])
    assert te[0, 3, 0] == pytest.approx(b0[1, 0] * b0[3, 1] + b0[3, 0], rel=1e-9)
    probs = np.asarray(L.bootstrap_probabilities(r))
    np.testing.assert_allclose(probs, np.mean(nonzero, axis=0), rtol=1e-12)
    assert probs[1, 0] == 1.0  # the strong edge x0 -> x1 in every resample
    # a NumPy array, as read from a user's file, gives the same (it failed with a
    # TracerArrayConversionError: rows drawn under vmap indexed a host array)
    rn = L.bootstrap(jax.random.key(0), np.asarray(x), 3, criterion="bic_sklearn")
    np.testing.assert_array_equal(np.asarray(rn.adjacency_matrices),
                                  np.asarray(r.adjacency_matrices))
    for bad in (0, -1, "3", 2.0):
        with pytest.raises(ValueError, match="n_sampling"):
            L.bootstrap(jax.random.key(0), x, bad)


@pytest.mark.slow
def test_live_peer_parity(tmp_path):
    """Recompute PEER's numbers with lingam itself (skipped without its venv)."""
    if not PEER_PY.exists():
        pytest.skip("benchmarks/.peer-venv-lingam not built (python benchmarks/bench_ica.py "
                    "--only lingam builds it)")
    spec = [{"name": f"{n}_{s}", "data": "X", "kind": "direct", "prior_knowledge": pk,
             "soft": s}
            for n, pk in PK.items() for s in (False, True)]
    spec += [{"name": "kernel", "data": "K", "kind": "direct", "measure": "kernel"},
             {"name": "pv", "data": "E", "kind": "p_values", "adjacency": PEER_P_ADJ}]
    spec += [{"name": f"te{a}{b}", "data": "X", "kind": "total_effect", "from": a, "to": b}
             for a, b in PEER_TOTAL_EFFECT]
    np.savez(tmp_path / "c.npz", x_X=X, x_K=kernel_data(), x_E=error_data(),
             spec=json.dumps(spec))
    subprocess.run([str(PEER_PY), str(WORKER), "--cases", str(tmp_path / "c.npz"),
                    str(tmp_path / "o.json")], check=True, capture_output=True)
    out = json.loads((tmp_path / "o.json").read_text())
    for n in PK:
        assert out[f"{n}_False"]["causal_order"] == PEER_ORDERS[n]
        assert out[f"{n}_True"]["causal_order"] == PEER_ORDERS[n]
    assert out["kernel"]["causal_order"] == PEER_KERNEL_ORDER
    np.testing.assert_allclose(out["pv"]["p_values"], PEER_P_VALUES, rtol=1e-10)
    for (a, b), ref in PEER_TOTAL_EFFECT.items():
        assert out[f"te{a}{b}"]["effect"] == pytest.approx(ref, rel=1e-10)


@pytest.mark.slow
def test_bench_ica_bootstrap_smoke(tmp_path):
    """`benchmarks/bench_ica.py --quick --only bootstrap` runs and records the case (the
    lingam side is skipped with its reason when the peer venv cannot be built)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("jaxkit_bench_ica_smoke",
                                                  ROOT / "benchmarks" / "bench_ica.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--only", "bootstrap", "--runs", "3", "--json", str(out)]) == 0
    res = json.loads(out.read_text())["results"]["bootstrap"]
    assert res["config"]["n_sampling"] == 10
    assert res["jaxkit"]["vmap, 1 device"]["median_s"] > 0
