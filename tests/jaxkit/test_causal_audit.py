"""causal-audit: each perturbation does what it says, the ranking statistics on hand-made
cases, and every bad input gives a clear error or a reported failure."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels.sem import sortability as S

from jaxkit.causal_audit import analysis as A
from jaxkit.causal_audit import config as C
from jaxkit.causal_audit import methods as M
from jaxkit.causal_audit.axes import CellSpec, cell, register_graph
from jaxkit.causal_audit.grid import CellResult, Pair, run_cell
from jaxkit.causal_audit.scm import expected_confounded_corr, simulate

N, D, B = 3000, 5, 8
BASE = cell(n=N, d=D, noise="gaussian", noise_hetero=0.5, edges_per_node=2.0)
_sort = jax.jit(jax.vmap(lambda x, b: (S.var_sortability(x, b), S.r2_sortability(x, b))))


def sim(**kw):
    return simulate(jax.random.key(0), BASE.replace(**kw), B)


@pytest.fixture(scope="module")
def scales():
    out = {}
    for s in ("raw", "standardised", "iscm"):
        data = sim(scale=s)
        assert bool(data.valid.all())
        out[s] = (data, *map(np.asarray, _sort(data.x, data.b)))
    return out


# ------------------------------------------------------------------------ perturbations


def test_sortability_raw_standardised_iscm(scales):
    raw, std, iscm = scales["raw"], scales["standardised"], scales["iscm"]
    assert raw[1].mean() > 0.8  # raw linear SEMs are var-sortable
    assert abs(std[1].mean() - 0.5) < 0.15  # standardised: chance
    assert abs(iscm[1].mean() - 0.5) < 0.15  # iSCM: chance
    np.testing.assert_allclose(std[2], raw[2], atol=1e-9)  # R2 is scale-invariant
    assert raw[2].mean() > 0.6 and iscm[2].mean() < raw[2].mean() - 0.1
    np.testing.assert_allclose(np.asarray(std[0].x).std(1), 1.0, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(std[0].b), np.asarray(raw[0].b))  # same graphs


def test_iscm_standardises_every_variable_and_differs_from_post_hoc(scales):
    x = np.asarray(scales["iscm"][0].x)
    np.testing.assert_allclose(x.std(1), 1.0, atol=1e-9)  # every assignment standardised
    z = np.asarray(scales["standardised"][0].x)
    assert np.abs(x - z).max() > 0.1  # iSCM is not post-hoc standardisation


def test_exact_path_cancellation_gives_zero_marginal_dependence():
    exact, near, faithful = sim(faithfulness="exact"), sim(faithfulness="near"), sim()
    assert bool(exact.cancelled.all())

    def corr(data):
        x, (a, c) = np.asarray(data.x), np.asarray(data.cancel_pair).T
        return np.array([np.corrcoef(x[i][:, a[i]], x[i][:, c[i]])[0, 1] for i in range(B)])

    r_exact, r_near, r_faith = corr(exact), corr(near), corr(faithful)
    assert np.abs(r_exact).max() < 4 / math.sqrt(N)  # sampling noise only
    a, c = np.asarray(exact.cancel_pair).T
    assert all(np.asarray(exact.b)[i, c[i], a[i]] != 0 for i in range(B))  # still adjacent
    assert np.abs(r_near).mean() > np.abs(r_exact).mean() + 0.02  # 10% of the effect left
    assert np.abs(r_faith).mean() > 0.2


def test_confounders_induce_the_expected_correlation():
    spec = dict(edges_per_node=0.0, confounders=1, confounder_strength=1.5, noise_hetero=0.0)
    data = sim(**spec)
    assert np.all(np.asarray(data.b) == 0)  # no causal edge at all
    kids = np.asarray(data.confounded)[:, 0]
    x = np.asarray(data.x)
    want = expected_confounded_corr(1.5, 1.5)
    for i in range(B):
        r = np.corrcoef(x[i][:, kids[i, 0]], x[i][:, kids[i, 1]])[0, 1]
        assert abs(abs(r) - want) < 0.05
    others = np.corrcoef(np.asarray(sim(edges_per_node=0.0).x)[0].T)
    assert np.abs(others - np.eye(D)).max() < 0.1  # without the confounder: independent


def test_measurement_error_and_ar_and_nonlinear():
    raw = np.asarray(sim(edges_per_node=0.0).x)
    me = np.asarray(sim(edges_per_node=0.0, meas_error=1.0).x)
    np.testing.assert_allclose(me.var(1) / raw.var(1), 2.0, rtol=0.15)  # (1 + gamma)
    ar = np.asarray(sim(edges_per_node=0.0, ar=0.8).x)
    lag1 = np.mean([np.corrcoef(ar[0][1:, j], ar[0][:-1, j])[0, 1] for j in range(D)])
    assert abs(lag1 - 0.8) < 0.05
    iid = np.mean([np.corrcoef(raw[0][1:, j], raw[0][:-1, j])[0, 1] for j in range(D)])
    assert abs(iid) < 0.05
    nl, lin = sim(mechanism="nonlinear"), sim()
    x, b = np.asarray(nl.x)[0], np.asarray(nl.b)[0]
    resid = x - np.tanh(x) @ b.T  # the noise of x_i = sum_j b_ij tanh(x_j) + e_i
    lin_resid = np.asarray(lin.x)[0] - np.asarray(lin.x)[0] @ b.T
    np.testing.assert_allclose(resid, lin_resid, atol=1e-8)  # the same noise draws
    assert np.abs(x - np.asarray(lin.x)[0]).max() > 0.1


def test_interventions_environments_and_targets():
    data = sim(n_envs=4, obs_fraction=0.5, strength=3.0, edges_per_node=0.0, noise_hetero=0.0)
    env, tg, x = np.asarray(data.env[0]), np.asarray(data.targets[0]), np.asarray(data.x[0])
    assert (env == 0).sum() == N // 2 and set(env) == {0, 1, 2, 3, 4}
    assert not tg[0].any() and (tg[1:5].sum(1) == 1).all() and not tg[5:].any()
    for k in range(1, 5):
        j = int(np.argmax(tg[k]))  # empty graph: x_j is its own noise
        ratio = x[env == k, j].std() / x[env == 0, j].std()
        assert abs(ratio - 3.0) < 0.6


def _parent_corr(data):
    """``|corr(x_j, x_p)|`` inside each intervened environment, over every target ``j``
    with a parent ``p``; and the shift of the target's mean from the observational rows."""
    out, moved = [], []
    for i in range(B):
        x, b = np.asarray(data.x[i]), np.asarray(data.b[i])
        env, tg = np.asarray(data.env[i]), np.asarray(data.targets[i])
        for k in range(1, int(env.max()) + 1):
            j = int(np.argmax(tg[k]))
            rows = env == k
            moved.append(abs(x[rows, j].mean() - x[env == 0, j].mean()) / x[env == 0, j].std())
            out += [abs(np.corrcoef(x[rows, j], x[rows, p])[0, 1])
                    for p in np.nonzero(b[j])[0]]
    return np.array(out), np.array(moved)


def test_hard_intervention_cuts_the_parents_and_shift_does_not():
    kw = dict(n_envs=D, obs_fraction=0.5, strength=3.0)
    hard, hard_moved = _parent_corr(sim(intervention="hard", **kw))
    shift, shift_moved = _parent_corr(sim(intervention="shift", **kw))
    assert hard.size >= 10 and hard.size == shift.size  # the same graphs and targets
    n_env = N // 2 // D
    assert hard.max() < 4 / math.sqrt(n_env) and hard.mean() < 0.1  # do(): independent
    assert shift.mean() > 0.3  # a soft intervention keeps the mechanism
    assert np.median(shift_moved) > 0.5 > np.median(hard_moved)  # shift moves the mean


# ------------------------------------------------------------------- ranking statistics


def test_kendall_tau_hand_made_and_against_scipy():
    from scipy.stats import kendalltau

    assert A.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert A.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert A.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert math.isnan(A.kendall_tau([1, 1, 1], [1, 2, 3]))
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.integers(0, 4, 7), rng.integers(0, 4, 7)
        assert A.kendall_tau(a, b) == pytest.approx(kendalltau(a, b).statistic, nan_ok=True)


def _hand_cell(f1: dict, n=500) -> CellResult:
    k = len(next(iter(f1.values())))
    shd = {m: np.zeros(k) for m in f1}
    return CellResult(cell(n=n), {m: np.asarray(v, float) for m, v in f1.items()}, shd,
                      np.full(k, 0.5), np.full(k, 0.5), np.ones(k, bool))


def test_rank_comparison_stable_and_reversed():
    rng = np.random.default_rng(1)
    noise = lambda: rng.normal(0, 0.01, 20)  # noqa: E731
    a = _hand_cell({"m1": 0.9 + noise(), "m2": 0.6 + noise(), "m3": 0.3 + noise()})
    same = _hand_cell({"m1": 0.8 + noise(), "m2": 0.5 + noise(), "m3": 0.2 + noise()})
    flip = _hand_cell({"m1": 0.2 + noise(), "m2": 0.5 + noise(), "m3": 0.8 + noise()})
    key = jax.random.key(0)
    s = A.rank_comparison(key, a, same, ["m1", "m2", "m3"], n_boot=100)
    f = A.rank_comparison(key, a, flip, ["m1", "m2", "m3"], n_boot=100)
    assert s.tau.estimate == 1.0 and s.tau.verdict == "no"
    assert f.tau.estimate == -1.0 and f.tau.verdict == "yes"
    assert f.rank_a == ["m1", "m2", "m3"] and f.rank_b == ["m3", "m2", "m1"]
    # metrics.json's "rankings" entry
    assert f.as_dict() == dict(tau=-1.0, lo=f.tau.lo, hi=f.tau.hi, rank_a=f.rank_a,
                               rank_b=f.rank_b)


def test_floor_wins_and_consistency_rate():
    rng = np.random.default_rng(2)
    c = _hand_cell({"vsr": 0.9 + rng.normal(0, 0.02, 12), "m": 0.5 + rng.normal(0, 0.02, 12),
                    "m2": 0.95 + rng.normal(0, 0.02, 12)})
    wins = A.floor_wins({c.spec: c}, ["m", "m2"], ["vsr"])
    assert [(w.method, w.floor, w.spec) for w in wins] == [("m", "vsr", c.spec)]
    assert wins[0].lo <= wins[0].diff <= wins[0].hi and wins[0].lo > 0
    cells = []
    for n in (100, 400, 1600):
        r = _hand_cell({"m": np.zeros(10)}, n=n)
        r.shd["m"] = np.full(10, 64.0 / math.sqrt(n)) - 1.0  # log(SHD + 1) = c - 0.5 log n
        cells.append(r)
    out = A.consistency(cells, "m")
    np.testing.assert_allclose(out.slopes, -0.5, atol=1e-12)
    assert out.falls.verdict == "yes" and out.falls.estimate == pytest.approx(0.5)
    assert out.ns == [100, 400, 1600] and out.pooled_rate == pytest.approx(-0.5)
    rec = out.as_dict()  # metrics.json's "consistency" entry: plain lists, this order
    assert list(rec) == ["ns", "mean_shd", "mean_f1", "pooled_rate"]
    assert rec["mean_shd"] == out.mean_shd.tolist() and rec["mean_f1"] == [0.0] * 3


def test_scope_outlines():
    ica = M.get_method("ica-lingam")
    assert M.in_scope(ica, cell(noise="laplace"))
    assert not M.in_scope(ica, cell(noise="gaussian"))
    assert not M.in_scope(ica, cell(noise="laplace", confounders=1))
    assert M.in_scope(M.get_method("pooled-ica-lingam"), cell(noise="gaussian", n_envs=3))
    assert not M.in_scope(M.get_method("random-sort-regress"), cell())
    assert M.in_scope(M.get_method("gies"), cell(n_envs=3, targets="known", intervention="hard"))
    ct = M.get_method("causaltab")  # amortised: scope = its prior, minus what it excludes
    assert ct.kind == "host" and ct.uses_targets
    assert M.in_scope(ct, cell(noise="gaussian", mechanism="nonlinear"))
    assert not M.in_scope(ct, cell(confounders=2))
    assert not M.in_scope(M.get_method("notears"), cell(noise_hetero=0.0, scale="iscm"))
    assert not M.in_scope(M.get_method("gies"), cell(n_envs=3, targets="unknown"))
    # GIES assumes perfect interventions: a soft one is outside its scope
    assert M.in_scope(M.get_method("gies"), cell(n_envs=3, intervention="hard"))
    assert not M.in_scope(M.get_method("gies"), cell(n_envs=3, intervention="shift"))
    pc = M.get_method("pc")  # the jax peer: the Markov equivalence class, observational
    assert pc.kind == "jax" and "CPDAG" in pc.record.identifies
    assert M.in_scope(pc, cell(noise="gaussian")) and not M.in_scope(pc, cell(n_envs=2))
    assert not M.in_scope(pc, cell(faithfulness="near"))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kw, match", [
    ({"colour": 1}, "unknown axis 'colour'"),
    ({"noise": "cauchy"}, "axis 'noise'"),
    ({"confounders": 1.5}, "axis 'confounders'"),
    ({"ar": 1.5}, "axis 'ar'"),
    ({"graph": "nope"}, "unknown graph family"),
    ({"n_envs": 20}, "max_envs"),
    ({"intervention": "soft"}, "axis 'intervention'"),
])
def test_unknown_axis_or_value(kw, match):
    with pytest.raises(ValueError, match=match):
        cell(**kw)


@pytest.mark.parametrize("text, match", [
    ("noise=gaussian", "AXIS=v1/v2;AXIS=v1/v2"),
    ("colour=red;scale=raw", "unknown axis 'colour'"),
    ("noise=gaussian;noise=laplace", "two different axes"),
    ("ar=0/x;noise=gaussian", "axis 'ar'"),
])
def test_bad_pairs(text, match):
    with pytest.raises(ValueError, match=match):
        C.parse_pair(text)


def test_config_rejects_unknown_method():
    with pytest.raises(ValueError, match="unknown method"):
        C.Config(methods=("var-sort-regress", "random-sort-regress", "magic"))
    with pytest.raises(ValueError, match="AXIS"):
        C.Config(pairs=("noise=gaussian",))


def test_unknown_method_and_missing_record():
    with pytest.raises(ValueError, match="unknown method 'magic'"):
        M.get_method("magic")
    with pytest.raises(ValueError, match="no assumption record"):
        M.register_method(M.Method("bare", M.fit_var_sort, None))
    with pytest.raises(ValueError, match="unknown method"):
        run_cell(jax.random.key(0), cell(n=50, d=3), ["magic"], batch=2)
    with pytest.raises(ValueError, match="unknown axis"):
        Pair("colour", (1,), "noise", ("gaussian",))


def _nan_fit(key, x, env, targets):
    return jnp.full((x.shape[1], x.shape[1]), jnp.nan)


def _raising_fit(x, env, targets):
    raise RuntimeError("boom")


def _corr_fit(key, x, env, targets):  # a cheap jax "method": thresholded correlations
    c = jnp.corrcoef(x.T)
    return jnp.tril(jnp.abs(c) > 0.3, -1).astype(x.dtype)


SMALL = BASE  # the shape the module's simulator is compiled for


def _cyclic(key, d, *, edges_per_node, w_low, w_high):
    return jnp.roll(jnp.eye(d), 1, axis=1) * 0.5  # a directed cycle through every node


def test_failures_are_reported_not_dropped():
    rec = M.MethodRecord("test", "none", (M.LINEAR,))
    nan_m = M.register_method(M.Method("nan-method", _nan_fit, rec))
    bad_m = M.register_method(M.Method("raising-method", _raising_fit, rec, kind="host"))
    ok_m = M.register_method(M.Method("corr-method", _corr_fit, rec))
    try:
        r = run_cell(jax.random.key(0), SMALL, [nan_m, bad_m, ok_m], batch=B, host_datasets=2)
        assert "non-finite" in r.failures["nan-method"]
        assert np.isnan(r.f1["nan-method"]).all()
        assert "boom" in r.failures["raising-method"]
        assert np.isfinite(r.f1["corr-method"]).all() and "corr-method" not in r.failures
        register_graph("cyclic-test", _cyclic)
        r = run_cell(jax.random.key(0), SMALL.replace(graph="cyclic-test"), [ok_m], batch=B)
        assert f"{B} of {B} datasets are invalid SCMs" in r.failures["(simulator)"]
        assert np.isnan(r.f1["corr-method"]).all() and r.n_invalid == B
    finally:
        for name in ("nan-method", "raising-method", "corr-method"):
            M.METHODS.pop(name, None)


def test_user_method_joins_with_one_function_and_one_record():
    M.register_method(M.Method("mine", _corr_fit, M.MethodRecord("mine", "me", (M.LINEAR,))))
    try:
        assert M.in_scope(M.get_method("mine"), SMALL)
        assert not M.in_scope(M.get_method("mine"), SMALL.replace(mechanism="nonlinear"))
        r = run_cell(jax.random.key(1), SMALL, ["mine"], batch=B)
        assert np.isfinite(r.f1["mine"]).all() and not r.failures
    finally:
        M.METHODS.pop("mine", None)


def _complete_fit(key, x, env, targets):  # every edge both ways: differs by the truth
    return 1.0 - jnp.eye(x.shape[1], dtype=x.dtype)


def test_cpdag_methods_are_scored_against_the_true_equivalence_class():
    """A method declaring a CPDAG (or I-essential graph) output is scored against the
    true DAG's CPDAG (or I-essential graph): returning exactly that scores F1 = 1 and
    SHD = 0 (in the host and the batched path); the true DAG itself, declared a CPDAG,
    does not where the class has reversible edges, and a CPDAG declared a DAG is the old
    convention's false shortfall."""
    from jaxkit.kernels import graph as gm
    from jaxkit.kernels.sem import dag_to_cpdag

    spec = SMALL.replace(n_envs=2, targets="known", intervention="hard")
    data = simulate(jax.random.key(4), spec, B)
    assert bool(data.valid.all())
    xs, bs = np.asarray(data.x), np.asarray(data.b)
    cp = np.asarray(jax.vmap(dag_to_cpdag)(data.b))
    ess = np.asarray(jax.vmap(dag_to_cpdag)(data.b, data.targets))
    assert (cp != ess).any()  # the targets orient more edges than the CPDAG has

    def oracle(graphs):
        def fit(x, env, targets):
            return graphs[int(np.flatnonzero((xs == x).all(axis=(1, 2)))[0])]
        return fit

    rec = M.MethodRecord("oracle", "none", (M.LINEAR,))
    ms = [M.Method("cp-as-cpdag", oracle(cp), rec, kind="host", output="cpdag"),
          M.Method("ess-as-essential", oracle(ess), rec, kind="host", uses_targets=True,
                   output="essential"),
          M.Method("dag-as-cpdag", oracle(bs), rec, kind="host", output="cpdag"),
          M.Method("cp-as-dag", oracle(cp), rec, kind="host"),
          M.Method("complete-as-cpdag", _complete_fit, rec, output="cpdag")]
    r = run_cell(jax.random.key(0), spec, ms, batch=B, host_datasets=B, data=data)
    assert not r.failures
    for name in ("cp-as-cpdag", "ess-as-essential"):
        np.testing.assert_array_equal(r.f1[name], 1.0)
        np.testing.assert_array_equal(r.shd[name], 0.0)
    undirected = (cp * cp.transpose(0, 2, 1)).sum(axis=(1, 2)) > 0
    assert undirected.any()
    assert (r.f1["dag-as-cpdag"][undirected] < 1).all()
    assert (r.f1["cp-as-dag"][undirected] < 1).all()
    # the batched path: the complete graph's F1 against the CPDAG, not the DAG
    want = np.asarray(jax.vmap(lambda t: gm.edge_metrics(t, 1.0 - jnp.eye(D))["f1"])(cp))
    np.testing.assert_allclose(r.f1["complete-as-cpdag"], want, rtol=1e-6)
    old = np.asarray(jax.vmap(lambda t: gm.edge_metrics(t, 1.0 - jnp.eye(D))["f1"])(bs))
    assert (want[undirected] > old[undirected]).all()
    with pytest.raises(ValueError, match="output"):
        M.register_method(M.Method("bad-output", _complete_fit, rec, output="pag"))


@pytest.mark.slow
def test_joint_floor_fit_equals_the_three_separate_fits():
    data = sim()
    key, x = jax.random.key(3), data.x[0]
    joint = np.asarray(jax.jit(M.fit_floors)(key, x, None, None))
    for i, f in enumerate((M.fit_var_sort, M.fit_r2_sort, M.fit_random_sort)):
        np.testing.assert_allclose(joint[i], np.asarray(jax.jit(f)(key, x, None, None)),
                                   atol=1e-9)


def test_cellspec_defaults_are_a_valid_cell():
    assert cell() == CellSpec()
    assert cell(CellSpec(), n=100).n == 100
