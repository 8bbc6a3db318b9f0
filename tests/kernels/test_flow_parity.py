"""Parity with torchcfm 1.0.7 (and POT 0.9.7): its own test cases
(tests/test_conditional_flow_matcher.py, tests/test_optimal_transport.py of
atong01/conditional-flow-matching) ported, on the same inputs, with torchcfm's numbers.

The default tests compare against numbers recorded from torchcfm in its peer venv
(``benchmarks/.peer-venv-flow``) by ``benchmarks/peers/flow_worker.py --parity`` on the
inputs built by :func:`_inputs` (NumPy's default_rng(1994), B = 4, 2-D; recorded with
torch 2.14.1, torchcfm 1.0.7, POT 0.9.7.post1). The slow test reruns torchcfm live at
torchcfm's own batch size (128 x 2 x 2) when that venv exists.
"""

import math
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import ot
import pytest
from jaxkit.kernels import flow, flow_ot
from jaxkit.kernels.wasserstein import wasserstein

SIGMA = 0.5
REG = 2 * SIGMA ** 2  # SB-CFM's entropic regularisation (torchcfm: reg = 2 sigma^2)
ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "benchmarks" / ".peer-venv-flow" / "bin" / "python"
WORKER = ROOT / "benchmarks" / "peers" / "flow_worker.py"


def _inputs(shape=(4, 2), seed=1994):
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=shape)
    x1 = rng.normal(size=shape) + 2
    eps = rng.normal(size=shape)
    t = np.array([0.0, 0.25, 0.7, 1.0]) if shape[0] == 4 else rng.random(shape[0])
    return x0, x1, t, eps


# torchcfm's sample_xt / compute_conditional_flow on _inputs() (float64), sigma = 0.5
TORCHCFM = {
    "xt/icfm": [[0.09077114065866096, 0.04746577955000261],
                [1.7486319428489743, 1.6477560814060515],
                [2.660095598387217, 0.6803909078304367],
                [2.7349617493638974, 3.9287369639678977]],
    "ut/icfm": [[2.105765702808613, 4.4044864152959855],
                [0.8736988244789681, 2.3375364357113377],
                [2.8877169726834926, -0.5991292568616956],
                [3.0154293707346134, 3.533930638461874]],
    "xt/sbcfm": [[0.3304773135159272, 0.033046573656024016],
                 [1.606013519130866, 1.3058145161261492],
                 [2.277418951653599, 0.5276375365039097],
                 [2.426252258676592, 3.698126936163556]],
    "ut/sbcfm": [[2.105765702808613, 4.4044864152959855],
                 [1.018923917535009, 2.685727744680327],
                 [2.5794269669448546, -0.7221896477290597],
                 [3.0154293707346134, 3.533930638461874]],
    "xt/target": [[-0.47941234571453245, 0.028838411787957194],
                  [0.9782823849240114, 1.7548546830030942],
                  [2.8923161794144487, 0.519636562428611],
                  [2.7349617493638974, 3.9287369639678977]],
    "ut/target": [[2.6759491891818064, 4.423113783058031],
                  [1.9008315683789185, 2.194738300248614],
                  [2.113648369259388, -0.0632814388556103],
                  [2.1175427679892866, 3.467516908359214]],
    "xt/vp": [[0.09077114065866096, 0.04746577955000261],
              [2.256550165063477, 2.0990153614062357],
              [3.1883164138015623, 0.8480969150353637],
              [2.7349617493638974, 3.9287369639678977]],
    "ut/vp": [[3.8268415812223067, 6.970460519076994],
              [2.354943623682942, 3.783588979242411],
              [2.1057727499977377, -0.9886546169482429],
              [0.9254772434523652, -0.25791894130312293]],
    # OTPlanSampler(method="exact").get_map: a permutation / B
    "perm/exact": [2, 3, 0, 1],
    # OTPlanSampler(method="sinkhorn", reg=2 sigma^2).get_map (= SB-CFM's plan)
    "plan/sinkhorn": [[0.00239307120035288, 0.03230526643118649, 0.20288358088066213,
                       0.012418081487798513],
                      [0.08446315753553309, 0.023572904564149774, 0.022694821061996776,
                       0.11926911683832038],
                      [0.15233982916087194, 0.018797322909414157, 1.2421337086431415e-05,
                       0.07885042659262748],
                      [0.010803942097361826, 0.17532450609666883, 0.02440917672847448,
                       0.03946237507749485]],
    "w2": 3.6005895182348646,
    "w1": 3.4792837564549055,
}


def _jaxkit_paths(x0, x1, t, eps, sigma=SIGMA):
    """jaxkit's counterpart of each torchcfm matcher, with torchcfm's noise ``eps``."""
    x0, x1, t, eps = (jnp.asarray(a) for a in (x0, x1, t, eps))
    out = {}
    out["icfm"] = flow.linear_path(x0, x1, t, sigma=sigma, noise=eps)
    out["sbcfm"] = flow.sb_path(None, x0, x1, t, sigma, noise=eps)
    # Lipman's path starts from the noise: torchcfm's TargetConditionalFlowMatcher
    # ignores x0 and uses eps as the source sample
    out["target"] = flow.cond_ot_path(eps, x1, t, sigma)
    out["vp"] = flow.vp_path(x0, x1, t, sigma=sigma, noise=eps)
    return out


def _check_paths(ref, x0, x1, t, eps):
    for name, (xt, ut) in _jaxkit_paths(x0, x1, t, eps).items():
        np.testing.assert_allclose(xt, ref[f"xt/{name}"], rtol=1e-12, atol=1e-12,
                                   err_msg=name)
        # SB-CFM: u_t amplifies rounding of x_t - mu_t near the endpoints (torchcfm forms
        # the difference, jaxkit the noise term directly)
        tol = 1e-7 if name == "sbcfm" else 1e-12
        np.testing.assert_allclose(ut, ref[f"ut/{name}"], rtol=tol, atol=tol, err_msg=name)


def test_paths_match_torchcfm_recorded():
    # test_I_CFM_class, test_SB_CFM_class, test_FM_class, test_VPCFM_class: x_t, u_t
    _check_paths(TORCHCFM, *_inputs())


def test_sb_velocity_at_the_endpoints_is_x1_minus_x0():
    # torchcfm: (1 - 2t) / (2 t (1 - t) + 1e-8) (x_t - mu_t) + x1 - x0, with x_t = mu_t
    # at t in {0, 1}; jaxkit used to clamp t and return ~158 sigma eps there
    x0, x1, _, eps = _inputs()
    for t in (0.0, 1.0):
        xt, ut = flow.sb_path(jax.random.key(0), jnp.asarray(x0), jnp.asarray(x1), t, 2.0)
        np.testing.assert_array_equal(ut, x1 - x0)
        np.testing.assert_allclose(xt, (1 - t) * x0 + t * x1, rtol=0, atol=0)
    # and exact interior velocity with offset = 0
    t = jnp.full((4,), 0.3)
    xt, ut = flow.sb_path(None, jnp.asarray(x0), jnp.asarray(x1), t, 2.0, offset=0.0,
                          noise=jnp.asarray(eps))
    mu = 0.7 * x0 + 0.3 * x1
    np.testing.assert_allclose(ut, (1 - 0.6) / (2 * 0.21) * (np.asarray(xt) - mu) + x1 - x0,
                               rtol=1e-12)
    # its largest value near the endpoints is sigma / (2 sqrt(2 offset)) |eps|
    s = np.logspace(-12, -4, 400)
    tt = jnp.asarray((1 - np.sqrt(1 - 4 * s)) / 2)  # t (1 - t) = s
    _, ut = flow.sb_path(None, jnp.zeros((400, 1)), jnp.zeros((400, 1)), tt, 1.0,
                         noise=jnp.ones((400, 1)))
    assert float(jnp.max(ut)) <= 1 / (2 * math.sqrt(2e-8)) * (1 + 1e-6)
    assert float(jnp.max(ut)) > 0.95 / (2 * math.sqrt(2e-8))


def test_vp_path_with_sigma_is_the_mean_path_plus_noise():
    x0, x1, t, eps = (jnp.asarray(a) for a in _inputs())
    mean, u0 = flow.vp_path(x0, x1, t)
    xt, ut = flow.vp_path(x0, x1, t, sigma=0.3, noise=eps)
    np.testing.assert_allclose(xt, mean + 0.3 * eps, rtol=1e-12)
    np.testing.assert_array_equal(ut, u0)
    key = jax.random.key(3)
    xk, _ = flow.sample_path("vp", key, x0, x1, t, sigma=0.3)
    xl, _ = flow.linear_path(x0, x1, t, sigma=1.0, key=key)  # the same draw of eps
    ml, _ = flow.linear_path(x0, x1, t)
    np.testing.assert_allclose(xk - mean, 0.3 * (xl - ml), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="key"):
        flow.vp_path(x0, x1, t, sigma=0.3)


def test_exact_plan_matches_pot_and_torchcfm():
    # test_get_map: OTPlanSampler("exact").get_map == ot.emd on the squared cdist
    x0, x1, _, _ = _inputs()
    _, perm = flow_ot.exact_coupling(jnp.asarray(x0), jnp.asarray(x1))
    assert perm.tolist() == TORCHCFM["perm/exact"]
    m = ((x0[:, None] - x1[None]) ** 2).sum(-1)
    plan = ot.emd(ot.unif(4), ot.unif(4), m)
    assert np.argmax(plan, 1).tolist() == perm.tolist()


def test_exact_coupling_with_replacement_is_torchcfm_sampling():
    # test_sample_plan / test_sample_map: pairs drawn i.i.d. from the exact plan
    rng = np.random.default_rng(1980)
    x0 = jnp.asarray(rng.normal(size=(128, 2, 2, 2)))
    x1 = jnp.asarray(rng.normal(size=(128, 2, 2, 2)))
    _, perm = flow_ot.exact_coupling(x0, x1, solver="auction")
    f = jax.jit(lambda k: flow_ot.exact_coupling(x0, x1, solver="auction", sampling="replace",
                                                 key=k))
    i, j = f(jax.random.key(0))
    np.testing.assert_array_equal(j, perm[i])  # every pair on the plan's support
    # with replacement: duplicates, ~B/e samples left out (binomial: 47.1 +- 5.4)
    left_out = 128 - np.unique(np.asarray(i)).size
    assert 25 < left_out < 70
    counts = np.zeros(128)
    for s in range(20):
        np.add.at(counts, np.asarray(f(jax.random.key(s))[0]), 1)
    # each x0 drawn 20 times in expectation (Poisson ~ sd 4.5): no x0 is favoured
    assert counts.min() > 2 and counts.max() < 45
    i2, j2 = flow_ot.exact_coupling(x0, x1, solver="auction", sampling="rows")  # = perm
    np.testing.assert_array_equal(j2, perm)
    with pytest.raises(ValueError, match="key"):
        flow_ot.exact_coupling(x0, x1, sampling="replace")


def test_sinkhorn_absolute_epsilon_is_torchcfm_reg():
    # SB-CFM's coupling: reg = 2 sigma^2 on the raw squared cost = jaxkit epsilon with
    # scale_cost = 1.0
    x0, x1, _, _ = (jnp.asarray(a) for a in _inputs())
    plan = flow_ot.sinkhorn_plan(x0, x1, epsilon=REG, scale_cost=1.0, threshold=1e-9,
                                 max_iterations=10_000)
    np.testing.assert_allclose(plan, TORCHCFM["plan/sinkhorn"], rtol=1e-5, atol=1e-8)
    # (the relative, default "mean" epsilon r / mean(C) is the same plan: checked through
    # ot_cfm_loss below)
    # (against POT directly on a bigger batch: the slow live test)


def test_ot_cfm_loss_threads_scale_cost_and_exact_sampling():
    x0, x1, _, _ = (jnp.asarray(a) for a in _inputs((16, 2)))
    v = lambda p, t, x: p * x  # noqa: E731
    key = jax.random.key(5)

    def loss(**kw):
        return float(jax.jit(lambda a, b: flow_ot.ot_cfm_loss(v, 0.5, key, a, b, **kw))(
            x0, x1))

    # SB-CFM as torchcfm: sinkhorn coupling with absolute reg = 2 sigma^2, resampled; the
    # equivalent relative epsilon gives the same loss (were scale_cost dropped, the
    # absolute call would use epsilon = reg relative to the mean cost: another plan)
    sb = dict(coupling="sinkhorn", sampling="replace", path="sb", sigma=SIGMA)
    m = float(jnp.mean(flow_ot.sq_cost(x0, x1)))
    absolute = loss(**sb, epsilon=REG, scale_cost=1.0)
    np.testing.assert_allclose(absolute, loss(**sb, epsilon=REG / m), rtol=1e-4)
    # exact with replacement: the loss on the resampled pairs, by hand
    kc, kl = jax.random.split(key)
    i, j = flow_ot.exact_coupling(x0, x1, solver="auction", sampling="replace", key=kc)
    assert np.unique(np.asarray(i)).size < 16  # duplicates
    ref = flow.cfm_batch_loss(v, 0.5, kl, x0[i], x1[j])
    np.testing.assert_allclose(loss(sampling="replace", exact_solver="auction"), float(ref),
                               rtol=1e-12)


def test_wasserstein_matches_pot_emd2_and_torchcfm():
    # test_wasserstein: W2 and W1 against ot.emd2 (and torchcfm's recorded values)
    x0, x1, _, _ = _inputs()
    w = jax.jit(wasserstein, static_argnums=2)  # optax's Hungarian on the device
    assert float(w(jnp.asarray(x0), jnp.asarray(x1), 2)) == pytest.approx(
        TORCHCFM["w2"], rel=1e-12)
    assert float(w(jnp.asarray(x0), jnp.asarray(x1), 1)) == pytest.approx(
        TORCHCFM["w1"], rel=1e-12)
    wa = jax.jit(lambda a, b: wasserstein(a, b, solver="auction"))
    rng = np.random.default_rng(1980)
    a, b = rng.normal(size=(128, 2, 2, 2)), rng.normal(size=(128, 2, 2, 2))
    m = np.sqrt(((a.reshape(128, -1)[:, None] - b.reshape(128, -1)[None]) ** 2).sum(-1))
    for p in (1, 2, 3):
        ref = ot.emd2(ot.unif(128), ot.unif(128), m ** p) ** (1 / p)
        got = jax.jit(lambda a, b, p=p: wasserstein(a, b, p, solver="auction"))(a, b)
        assert float(got) == pytest.approx(ref, rel=1e-10)
    # unequal sizes (exact by replication), float32, jit, and a huge scale
    c = rng.normal(size=(6, 3)) * 2
    d = rng.normal(size=(4, 3))
    mm = np.sqrt(((c[:, None] - d[None]) ** 2).sum(-1))
    ref = ot.emd2(ot.unif(6), ot.unif(4), mm ** 2) ** 0.5
    assert float(wa(jnp.asarray(c), jnp.asarray(d))) == pytest.approx(ref, rel=1e-10)
    assert float(wa(jnp.float32(c), jnp.float32(d))) == pytest.approx(ref, rel=1e-5)
    assert float(wa(jnp.float32(c * 1e30), jnp.float32(d * 1e30))) == \
        pytest.approx(ref * 1e30, rel=1e-5)
    assert float(wa(jnp.asarray(c), jnp.asarray(c))) == 0.0
    with pytest.raises(ValueError, match="p"):
        wasserstein(jnp.asarray(c), jnp.asarray(d), 0.5)
    with pytest.raises(ValueError, match="sample size"):
        wasserstein(jnp.asarray(c), jnp.asarray(d[:, :2]))
    with pytest.raises(ValueError, match="lcm"):
        wasserstein(jnp.zeros((4099, 1)), jnp.zeros((4097, 1)))


@pytest.mark.slow
@pytest.mark.skipif(not PEER.exists(), reason="benchmarks/.peer-venv-flow not built")
def test_paths_plans_and_distances_match_torchcfm_live(tmp_path):
    # torchcfm's own sizes: batch 128 of 2 x 2 samples, sigma = 0.5, random t
    x0, x1, t, eps = _inputs((128, 2, 2), seed=7)
    np.savez(tmp_path / "in.npz", x0=x0, x1=x1, t=t, eps=eps, sigma=SIGMA, reg=REG)
    subprocess.run([str(PEER), str(WORKER), "--parity", str(tmp_path / "in.npz"),
                    str(tmp_path / "out.npz")], check=True, timeout=600,
                   capture_output=True)
    ref = dict(np.load(tmp_path / "out.npz"))
    _check_paths(ref, x0, x1, t, eps)
    _, perm = flow_ot.exact_coupling(jnp.asarray(x0), jnp.asarray(x1), solver="auction")
    np.testing.assert_allclose(ref["plan/exact"][np.arange(128), np.asarray(perm)], 1 / 128)
    plan = flow_ot.sinkhorn_plan(jnp.asarray(x0), jnp.asarray(x1), epsilon=REG,
                                 scale_cost=1.0, threshold=1e-9, max_iterations=10_000)
    np.testing.assert_allclose(plan, ref["plan/sbcfm"], rtol=1e-4, atol=1e-9)
    for p in (1, 2):
        assert float(wasserstein(jnp.asarray(x0), jnp.asarray(x1), p, solver="auction")) \
            == pytest.approx(float(ref[f"w{p}"]), rel=1e-10)
    # POT's own Sinkhorn on 8-D samples (absolute reg = jaxkit's epsilon, scale_cost=1)
    rng = np.random.default_rng(1980)
    a, b = rng.normal(size=(32, 8)), rng.normal(size=(32, 8))
    pot_plan = ot.sinkhorn(ot.unif(32), ot.unif(32), ((a[:, None] - b[None]) ** 2).sum(-1),
                           reg=2.0, stopThr=1e-10, numItermax=10_000)
    got = flow_ot.sinkhorn_plan(jnp.asarray(a), jnp.asarray(b), epsilon=2.0,
                                scale_cost=1.0, threshold=1e-9, max_iterations=10_000)
    np.testing.assert_allclose(got, pot_plan, rtol=1e-4, atol=1e-9)


def test_bench_parity_case_agrees_with_scipy_and_pot():
    # benchmarks/bench_flow.py "parity", tiny: the optimal totals and W_2 must agree
    bf = _load_benchmark("flow")
    data = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    out = bf.time_parity(data, 8, 2)
    assert out["lsa_max_rel_gap"] < 1e-12 and out["w2_max_rel_gap"] < 1e-5
    assert all(out[k]["record"].median_s > 0 for k in (
        "jaxkit linear_sum_assignment", "SciPy linear_sum_assignment", "jaxkit wasserstein",
        "POT ot.emd2"))


def _load_benchmark(name: str):
    """``benchmarks/bench_NAME.py`` (not a package) as a module."""
    import importlib.util

    path = ROOT / "benchmarks" / f"bench_{name}.py"
    spec = importlib.util.spec_from_file_location(f"jaxkit_bench_{name}_parity", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
