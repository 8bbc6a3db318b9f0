"""Bandit parity with MABWiser 2.7.4 (adding and removing arms on a running policy) and
SMPyBandits 0.9.7 (the exploration-constant conventions).

* ``dynamic_arms``: MABWiser's ``MAB.add_arm`` / ``MAB.remove_arm`` on ``UCB1(alpha)``
  through a schedule of additions and removals; the default test compares with the arm
  sequence and final expectations recorded from MABWiser in its peer venv
  (``benchmarks/.peer-venv-mabwiser``) by ``benchmarks/peers/bandit_worker.py --arms``
  on the schedule :func:`_schedule` builds; the slow test reruns MABWiser live on a longer
  schedule when that venv exists.
* Conventions: jaxkit's ``alpha`` is SMPyBandits' ``alpha / 4`` for discounted UCB,
  ``alpha / 2`` for sliding-window UCB and ``sqrt(alpha) / 2`` for UCBalpha, checked
  against NumPy reimplementations of SMPyBandits' index formulas
  (``DiscountedUCB.computeIndex``, ``SWUCB.computeIndex``, ``UCBalpha.computeIndex``).
"""

import json
import subprocess
from math import log, sqrt
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import bandit

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "benchmarks" / ".peer-venv-mabwiser" / "bin" / "python"
WORKER = ROOT / "benchmarks" / "peers" / "bandit_worker.py"
KEY = jax.random.key(0)


def _schedule(seed=30, n_steps=80, n_arms=6, events=None):
    rng = np.random.default_rng(seed)
    p = np.linspace(0.2, 0.6, n_arms)[rng.permutation(n_arms)] if seed != 30 else \
        np.array([0.2, 0.5, 0.35, 0.6, 0.45, 0.3])
    table = (rng.random((n_steps, n_arms)) < p).astype(int)
    if events is None:
        events = [[20, "add", 3], [35, "remove", 1], [50, "add", 4], [60, "remove", 3],
                  [65, "add", 1]]
    return dict(alpha=1.0, initial=[0, 1, 2], table=table.tolist(), events=events)


# MABWiser 2.7.4 UCB1(alpha=1) through _schedule() (bandit_worker.py --arms)
MABWISER_ARMS = [0, 1, 2, 1, 1, 0, 2, 0, 1, 1, 0, 1, 1, 2, 1, 1, 1, 1, 0, 2, 3, 3, 3, 3, 3,
                 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 3, 3, 3, 3, 3, 3, 2, 0, 0, 3, 3, 3, 3, 3, 3,
                 4, 4, 4, 4, 4, 4, 2, 2, 2, 2, 2, 0, 4, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                 1, 1, 2, 1, 1]
MABWISER_EXPECTATIONS = {0: 1.2966645397014605, 2: 1.2977090380470018,
                         4: 1.2966645397014605, 1: 1.2912040223314158}


def _run_jaxkit(sched, n_arms):
    pol = bandit.dynamic_arms(bandit.ucb1(n_arms, alpha=sched["alpha"], dtype=jnp.float64),
                              initial=sched["initial"])
    table = np.asarray(sched["table"], float)
    events: dict = {}
    for step, op, arm in sched["events"]:
        events.setdefault(step, []).append((op, arm))
    add, remove = jax.jit(pol.add_arm), jax.jit(pol.remove_arm)
    step = jax.jit(lambda s, r: (lambda a: (a, pol.update(s, a, r[a])))(pol.select(KEY, s)))
    state, seq = pol.init(), []
    for t in range(table.shape[0]):
        for op, arm in events.get(t, []):
            state = (add if op == "add" else remove)(state, jnp.int32(arm))
        a, state = step(state, jnp.asarray(table[t]))
        seq.append(int(a))
    return seq, np.asarray(pol.index(KEY, state)), state


def test_add_and_remove_arms_match_mabwiser_recorded():
    seq, idx, state = _run_jaxkit(_schedule(), 6)
    assert seq == MABWISER_ARMS
    assert state.active.tolist() == [True, True, True, False, True, False]
    for arm, e in MABWISER_EXPECTATIONS.items():
        assert idx[arm] == pytest.approx(e, rel=1e-12)
    assert np.isneginf(idx[[3, 5]]).all()


@pytest.mark.slow
@pytest.mark.skipif(not PEER.exists(), reason="benchmarks/.peer-venv-mabwiser not built")
def test_add_and_remove_arms_match_mabwiser_live(tmp_path):
    events = [[40, "add", 3], [41, "add", 5], [90, "remove", 0], [120, "add", 6],
              [150, "remove", 3], [151, "remove", 5], [200, "add", 0], [240, "add", 7]]
    sched = _schedule(seed=7, n_steps=300, n_arms=8, events=events)
    (tmp_path / "s.json").write_text(json.dumps(sched))
    subprocess.run([str(PEER), str(WORKER), "--arms", str(tmp_path / "s.json"),
                    str(tmp_path / "o.json")], check=True, timeout=600, capture_output=True,
                   cwd=WORKER.parent)
    ref = json.loads((tmp_path / "o.json").read_text())
    seq, idx, _ = _run_jaxkit(sched, 8)
    assert seq == ref["arms"]
    for arm, e in ref["expectations"].items():
        assert idx[int(arm)] == pytest.approx(e, rel=1e-12)


def test_dynamic_arms_errors_as_mabwiser_and_under_jit():
    pol = bandit.dynamic_arms(bandit.ucb1(4), initial=2)
    s = pol.init()
    with pytest.raises(ValueError, match="already an active arm"):
        pol.add_arm(s, 1)
    with pytest.raises(ValueError, match="not an active arm"):
        pol.remove_arm(s, 3)
    with pytest.raises(ValueError, match="not an active arm"):
        pol.update(s, jnp.int32(2), 1.0)
    with pytest.raises(ValueError, match="out of range"):
        pol.add_arm(s, 4)
    with pytest.raises(ValueError, match="initial"):
        bandit.dynamic_arms(bandit.ucb1(4), initial=[0, 0])
    empty = bandit.dynamic_arms(bandit.ucb1(4), initial=0)
    with pytest.raises(ValueError, match="no active arm"):
        empty.select(KEY, empty.init())
    with pytest.raises(Exception, match="already an active arm"):
        jax.block_until_ready(jax.jit(pol.add_arm)(s, jnp.int32(0)))
    with pytest.raises(TypeError, match="does not support"):
        bandit.dynamic_arms(bandit.cost_aware(bandit.ucb1(3), jnp.ones(3))).add_arm(
            bandit.dynamic_arms(bandit.cost_aware(bandit.ucb1(3), jnp.ones(3)),
                                initial=1).init(), 2)


def test_dynamic_arms_reset_fresh_and_no_retrace():
    pol = bandit.dynamic_arms(bandit.ucb1(5), initial=3)
    s = pol.init()
    for a, r in [(0, 1.0), (1, 0.0), (2, 1.0), (1, 1.0)]:
        s = pol.update(s, jnp.int32(a), r)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def cycle(state, arm):
        return pol.add_arm(pol.remove_arm(state, arm), arm)

    s2 = cycle(s, jnp.int32(1))
    s2 = cycle(s2, jnp.int32(2))  # a new arm value, no retrace
    # removed and re-added: fresh statistics, +inf index (played next); t keeps counting
    assert s2.inner.counts.tolist() == [1, 0, 0, 0, 0] and int(s2.inner.t) == 4
    idx = np.asarray(pol.index(KEY, s2))
    assert np.isinf(idx[[1, 2]]).all() and idx[1] > 0 and np.isneginf(idx[[3, 4]]).all()
    assert int(pol.select(KEY, s2)) == 1
    # runs on the last axis: (K, R) statistics, one arm mask
    pr = bandit.dynamic_arms(bandit.discounted_ucb(4, gamma=0.9), initial=[0, 2])
    st = pr.init(3)
    st = pr.update(st, jnp.array([0, 2, 2], jnp.int32), jnp.array([1.0, 0.5, 0.0]))
    st = pr.add_arm(pr.remove_arm(st, 2), 1)
    assert pr.index(KEY, st).shape == (4, 3)
    assert np.all(st.inner.counts[2] == 0) and np.isneginf(np.asarray(pr.index(KEY, st))[2]).all()
    # fresh arm 1 is +inf; runs 1 and 2 never pulled arm 0 (+inf too, the lower arm)
    assert pr.select(KEY, st).tolist() == [1, 0, 0]
    # buffered states drop the arm's entries; Beta and QoMax reset their rows
    pw = bandit.dynamic_arms(bandit.sliding_window_ucb(3, window=4))
    sw = pw.init()
    for a in (0, 1, 1, 2):
        sw = pw.update(sw, jnp.int32(a), 1.0)
    sw = pw.remove_arm(sw, 1)
    assert sw.inner.arms.tolist() == [0, -1, -1, 2]
    pb = bandit.dynamic_arms(bandit.thompson_beta(3))
    sb = pb.update(pb.init(), jnp.int32(1), 1.0)
    assert pb.remove_arm(sb, 1).inner.successes.tolist() == [0, 0, 0]
    pq = bandit.dynamic_arms(bandit.qomax(2, n_batches=1, batch_size=1))
    sq = pq.update(pq.init(), jnp.int32(0), 3.0)
    assert pq.remove_arm(sq, 0).inner.filled.tolist() == [0, 0]
    # simulate runs a dynamic-arm policy in one scan
    _, trace = bandit.simulate(KEY, pol, lambda k, t, a: jnp.float32(a == 2), 12)
    assert set(np.asarray(trace.arms).tolist()) <= {0, 1, 2}


# ------------------------------------------------------------ SMPyBandits conventions


def _smpy_ducb_index(x, n, alpha):
    """SMPyBandits DiscountedUCB.computeIndex on float, all-arm discounted counts."""
    total = n.sum()
    return np.array([x[k] / n[k] + sqrt(alpha * log(total) / (2 * n[k])) if n[k] > 0
                     else np.inf for k in range(n.size)])


def _smpy_sw_index(choices, rewards, t, tau, alpha, n_arms):
    """SMPyBandits SWUCB.computeIndex (ring buffers of the last tau steps)."""
    out = []
    for k in range(n_arms):
        m = np.count_nonzero(choices == k)
        out.append(np.inf if m < 1 else rewards[choices == k].sum() / m
                   + sqrt(alpha * log(min(t, tau)) / m))
    return np.array(out)


@pytest.mark.parametrize("alpha_s", [1.0, 4.0])
def test_discounted_ucb_alpha_is_smpybandits_alpha_over_4(alpha_s):
    k, gamma, steps = 4, 0.9, 60
    table = (np.random.default_rng(1).random((steps, k)) < [0.2, 0.4, 0.6, 0.5]).astype(float)
    pol = bandit.discounted_ucb(k, gamma=gamma, alpha=alpha_s / 4, dtype=jnp.float64)
    wrong = bandit.discounted_ucb(k, gamma=gamma, alpha=alpha_s, dtype=jnp.float64)
    s, x, n, err_wrong = pol.init(), np.zeros(k), np.zeros(k), 0.0
    for t in range(steps):
        ref = _smpy_ducb_index(x, n, alpha_s)
        got = np.asarray(pol.index(KEY, s))
        fin = np.isfinite(ref)
        assert (np.isinf(got) == ~fin).all()
        np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12)
        if fin.all() and t > 10:
            err_wrong = max(err_wrong, np.abs(np.asarray(wrong.index(KEY, s)) - ref).max())
        a = int(np.argmax(got))
        s = pol.update(s, jnp.int32(a), table[t, a])
        n, x = gamma * n, gamma * x
        n[a] += 1
        x[a] += table[t, a]
    assert err_wrong > 0.1  # the unconverted alpha is a different index


def test_sliding_window_alpha_is_smpybandits_alpha_over_2_and_ucb1_conversion():
    k, tau, steps, alpha_s = 3, 7, 40, 1.0
    table = np.random.default_rng(2).random((steps, k))
    pol = bandit.sliding_window_ucb(k, window=tau, alpha=alpha_s / 2, dtype=jnp.float64)
    s = pol.init()
    choices, rewards = np.full(tau, -1), np.zeros(tau)
    for t in range(steps):
        ref = _smpy_sw_index(choices, rewards, t, tau, alpha_s, k)
        got = np.asarray(pol.index(KEY, s))
        if t > 0:  # SMPyBandits' log(min(0, tau)) at t = 0: every index is +inf anyway
            np.testing.assert_allclose(got, ref, rtol=1e-12)
        a = int(np.argmax(got))
        s = pol.update(s, jnp.int32(a), table[t, a])
        choices[t % tau], rewards[t % tau] = a, table[t, a]
    wrong = bandit.sliding_window_ucb(k, window=tau, alpha=alpha_s, dtype=jnp.float64)
    assert np.abs(np.asarray(wrong.index(KEY, s)) - ref).max() > 0.1
    # UCBalpha(alpha=a): mean + sqrt(a ln t / (2 N)) is ucb1 with alpha = sqrt(a) / 2
    a_s = 4.0
    u = bandit.ucb1(2, alpha=sqrt(a_s) / 2, dtype=jnp.float64)
    su = u.init()
    for a, r in [(0, 1.0), (1, 0.0), (1, 1.0), (0, 0.0), (0, 1.0)]:
        su = u.update(su, jnp.int32(a), r)
    ref = [2 / 3 + sqrt(a_s * log(5) / 6), 1 / 2 + sqrt(a_s * log(5) / 4)]
    np.testing.assert_allclose(u.index(KEY, su), ref, rtol=1e-12)


def test_bench_dynamic_arms_segments_equal_the_step_loop():
    # benchmarks/bench_bandit.py "arms": the scanned segments with events between them
    bb = _load_benchmark("bandit")
    T = 30
    events = [(int(f * T), op, arm) for f, op, arm in bb.ARM_EVENTS]
    table = (np.random.default_rng(4).random((2, T, bb.N_ARMS)) < 0.5).astype(np.uint8)
    got = np.asarray(jax.jit(jax.vmap(bb._jax_dynamic_arms(events, T)))(table))
    for r in range(2):
        sched = dict(alpha=bb.ALPHA, initial=list(range(5)), table=table[r].tolist(),
                     events=[list(e) for e in events])
        assert got[r].tolist() == _run_jaxkit(sched, bb.N_ARMS)[0]


def _load_benchmark(name: str):
    """``benchmarks/bench_NAME.py`` (not a package) as a module."""
    import importlib.util

    path = ROOT / "benchmarks" / f"bench_{name}.py"
    spec = importlib.util.spec_from_file_location(f"jaxkit_bench_{name}_parity", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
