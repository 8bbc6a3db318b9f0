"""Bandit simulation and heuristic evaluation throughput: jaxkit against CPU peers.

Run ``python benchmarks/bench_bandit.py [--quick] [--json FILE] [--runs R] [--steps T]
[--no-peers] [--only CASES]`` (or ``jaxkit bench bandit``). Cases (``--only`` takes a
comma list):

* ``ucb1`` -- UCB1, ``index_k = X_k/N_k + alpha sqrt(2 ln n / N_k)``, alpha = 1, on
  stationary Bernoulli arms (K = 10, means ~ U(0, 1) per run).
* ``ducb`` -- discounted UCB (Garivier & Moulines), gamma = 0.99, alpha = 1,
  ``index_k = X_k/N_k + sqrt(2 alpha ln(sum N) / N_k)``, on piecewise-stationary
  Bernoulli arms: the K means are re-drawn from U(0, 1) at 4 change points (T/5, 2T/5, ...).
* ``arms`` -- arms entering and leaving a running UCB1 (alpha = 1):
  ``bandit.dynamic_arms(bandit.ucb1(10), initial=5)`` (a fixed maximum of 10 arms, a
  mask) through :data:`ARM_EVENTS` (adds and removes at fixed fractions of the horizon),
  ``jax.jit(jax.vmap(...))`` over the runs in float64, against MABWiser 2.7.4's
  ``MAB.add_arm`` / ``MAB.remove_arm`` on the same schedule and reward tables
  (``bandit_worker.py --arms``: a new arm is fitted once when it enters, as jaxkit's +inf
  index plays it); the arm sequences are equal up to exact ties of the index after a
  re-addition (jaxkit: lowest arm id; MABWiser: first in its arm list, where a re-added
  arm goes last), after which a run diverges.
* ``binpack`` -- heuristic evaluation: online bin packing with best fit on Weibull
  instances (``jaxkit.ballad.problems``, "binpacking_weibull": 5,000 items, capacity 100;
  ``--quick``: 1,000 items), ``problems.score(baseline theta)`` (vmapped ``lax.scan``) on
  32 instances (16 quick), on one device and sharded over the CPU devices, against the
  NumPy evaluator ``jaxkit.ballad.reference.online_binpack`` with ``best_fit_priority`` on
  the first 8 (4 quick) of the same instances; instances/s, the bins used must be equal.
  Skipped, with the reason, when those modules are not importable.

Bandit setup (the defaults; ``--quick``: 256 runs x 200 steps, peers on 3 runs):

* R = 10,000 independent runs x T = 1,000 steps x K = 10 arms. Every run's rewards are
  pre-drawn on the host from one seed into a table (R, T, K) of 0/1 (uint8): the reward
  arm k pays at step t of run r is ``table[r, t, k]``, whichever implementation pulls it,
  so all implementations see the same reward streams and identical index formulas give
  identical arm sequences.
* jaxkit: ``jax.jit(jax.vmap(bandit.simulate))`` over the runs (reward_fn =
  ``table[t, arm]``), on one CPU device and, with several cores,
  ``jaxkit.distributed.sharded_vmap`` (one shard of runs per CPU device); and
  ``bandit.simulate_runs``, all runs in lockstep with the runs on the last axis (state
  (K, R), reward_fn = ``table[t, arms, runs]`` on a (T, K, R) copy of the table made
  before timing; its arms must equal the vmap version's), on one CPU device and split
  over the CPU devices with ``jaxkit.distributed.sharded_runs``. float32 (the kernel's default)
  and float64.
* NumPy (written here, :func:`numpy_ucb1`, :func:`numpy_ducb`): state arrays (R, K),
  vectorised over the R runs, a Python loop over the T steps; the same index formulas in
  the same operation order, first-argmax ties (lowest arm). It reads a (T, R, K) copy of
  the table made before timing. (NumPy with jaxkit's runs-last layout, state (K, R), was
  slower: 21.5M against 29.9M steps/s for UCB1 in float32, an ad-hoc run, so the
  comparison uses this one.)
* Peers, one bandit object per run and a Python loop over steps, each in its own virtual
  environment created on first use (``benchmarks/peers/bandit_worker.py``):
  MABWiser 2.7.4 ``UCB1(alpha=1)`` (``.peer-venv-mabwiser``; the bandit is started with
  ``fit`` on one pull per arm, since MABWiser scores never-pulled arms 0, not +inf) and
  SMPyBandits 0.9.7 ``DiscountedUCB(alpha=4, gamma=0.99)`` (``.peer-venv-smpybandits``,
  with scipy 1.13.1: 0.9.7 needs ``scipy<1.14``). SMPyBandits writes the bonus
  ``sqrt(alpha ln n / (2 N))``, so its ``alpha = 4 x`` jaxkit's gives the same formula.
  Its shipped class differs from Garivier & Moulines in bookkeeping (integer discounted
  counts, lazy discounting, random ties; see the worker's docstring), so its arms are not
  expected to match; a "matched" 3-method subclass with jaxkit's bookkeeping is run too.
  Peers run ``--peer-runs`` runs (default 50) of the same table (its first runs); their
  time is extrapolated linearly to R runs in the comparison table (the runs are
  independent objects, so the cost is linear in R), and rates are total bandit steps / s.

Reported per implementation: steady-state median time (jaxkit compile time separately),
steps/s, the ratio jaxkit steps/s / its steps/s, the mean cumulative pseudo-regret at T
(``sum_t max_k mu_t,k - mu_t,a_t``) with a 95% normal interval over runs, and the fraction
of steps (and of whole runs) whose arm equals jaxkit's (float64 jaxkit for float64
implementations, float32 for float32). In float64 the NumPy and matched peer sequences are
identical to jaxkit's; in float32, XLA's ``log`` and its fused multiply-add for
``gamma N + [a=k]`` can round the last bit differently from NumPy, so a near-tie breaks
the other way in a few runs (the rest of such a run then diverges). Peers' regret is also
shown for jaxkit on the same runs. Targets: >= 100x the peers, >= 5x NumPy.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "bandit_worker.py"
CASES = ("ucb1", "ducb", "arms", "binpack")
N_ARMS = 10
ALPHA = 1.0
GAMMA = 0.99
N_CHANGES = 4  # piecewise-stationary case: change points at T/5, 2T/5, 3T/5, 4T/5

PEER_ENVS = {
    "mabwiser": dict(
        venv=HERE / ".peer-venv-mabwiser", specs=["mabwiser==2.7.4"],
        check="from importlib.metadata import version; import mabwiser.mab; "
              "assert version('mabwiser') == '2.7.4'"),
    "smpybandits": dict(
        venv=HERE / ".peer-venv-smpybandits", specs=["SMPyBandits==0.9.7", "scipy==1.13.1"],
        check="from importlib.metadata import version; "
              "import SMPyBandits.Policies.DiscountedUCB; "
              "assert version('SMPyBandits') == '0.9.7'"),
}


def _configure_jax() -> int:
    from jaxkit.bench import configure_cpu_devices

    return configure_cpu_devices()


# ----------------------------------------------------------------------------- data


def reward_tables(n_runs: int, n_steps: int, n_arms: int = N_ARMS, *, seed: int = 0,
                  n_changes: int = 0):
    """Bernoulli reward tables from one seed.

    The means of the K arms are drawn from U(0, 1) per run and per segment; with
    ``n_changes`` change points the horizon is cut into ``n_changes + 1`` equal segments
    and the means are re-drawn in each (piecewise-stationary). Returns ``table`` (R, T, K)
    uint8 (``table[r, t, k]`` = reward of arm k at step t of run r), ``means`` (R, S, K)
    and ``segment`` (T,) (the segment of each step)."""
    rng = np.random.default_rng(seed)
    n_seg = n_changes + 1
    means = rng.uniform(0.0, 1.0, size=(n_runs, n_seg, n_arms))
    segment = (np.arange(n_steps) * n_seg) // n_steps
    table = np.empty((n_runs, n_steps, n_arms), np.uint8)
    chunk = max(1, 2_000_000 // max(1, n_steps * n_arms))
    for lo in range(0, n_runs, chunk):
        hi = min(n_runs, lo + chunk)
        u = rng.random((hi - lo, n_steps, n_arms))
        table[lo:hi] = u < means[lo:hi][:, segment, :]
    return table, means, segment


def pseudo_regret(arms: np.ndarray, means: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Cumulative pseudo-regret at T per run: ``sum_t max_k mu_tk - mu_t,a_t``.
    ``arms`` (R, T), ``means`` (R, S, K), ``segment`` (T,)."""
    arms = np.asarray(arms)
    n_runs, n_arms = arms.shape[0], means.shape[2]
    gap = means.max(axis=2, keepdims=True) - means  # (R, S, K)
    total = np.zeros(n_runs)
    rows = np.arange(n_runs)[:, None] * n_arms
    for s in range(means.shape[1]):
        a = arms[:, segment == s]
        counts = np.bincount((rows + a).ravel(), minlength=n_runs * n_arms)
        total += (counts.reshape(n_runs, n_arms) * gap[:, s]).sum(axis=1)
    return total


def mean_ci(x) -> dict:
    """Mean with a 95% normal interval (1.96 standard errors)."""
    x = np.asarray(x, np.float64)
    m = float(x.mean())
    h = 1.96 * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else float("nan")
    return dict(mean=m, lo=m - h, hi=m + h, n=int(x.size))


def agreement(arms: np.ndarray, ref: np.ndarray) -> dict:
    """Fraction of steps, and of whole runs, whose arm equals ``ref`` (both (R, T))."""
    same = np.asarray(arms) == np.asarray(ref)
    return dict(steps=float(same.mean()), runs=float(same.all(axis=1).mean()),
                first_diff_median=(None if same.all() else
                                   float(np.median(np.argmin(same, axis=1)[~same.all(1)]))))


# ---------------------------------------------------------------------- NumPy versions


def ucb1_index_np(sums, counts, n, alpha: float = ALPHA) -> np.ndarray:
    """UCB1 index as jaxkit computes it: ``X/N + alpha sqrt(2 ln n * (1/N))``, +inf for
    arms never pulled (``N == 0``). ``sums``, ``counts`` (..., K); ``n`` total pulls
    (scalar or (...,))."""
    sums, counts = np.asarray(sums), np.asarray(counts)
    dt = counts.dtype.type
    n = np.maximum(np.asarray(n, counts.dtype), dt(1))[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        idx = sums / counts + dt(alpha) * np.sqrt(dt(2) * np.log(n) * (dt(1) / counts))
    return np.where(counts > 0, idx, np.inf).astype(counts.dtype)


def ducb_index_np(sums, counts, alpha: float = ALPHA) -> np.ndarray:
    """Discounted UCB index as jaxkit computes it: ``X/N + sqrt(2 alpha ln(sum N) * (1/N))``
    with the discounted ``X, N`` (..., K); +inf for arms never pulled."""
    sums, counts = np.asarray(sums), np.asarray(counts)
    dt = counts.dtype.type
    n = np.maximum(counts.sum(axis=-1), dt(1))[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        idx = sums / counts + np.sqrt(dt(2 * alpha) * np.log(n) * (dt(1) / counts))
    return np.where(counts > 0, idx, np.inf).astype(counts.dtype)


def _numpy_run(table_trk: np.ndarray, gamma: float | None, alpha: float, dtype):
    """Batched-over-runs simulation; ``gamma=None`` is UCB1. Returns arms (T, R) int32."""
    n_steps, n_runs, n_arms = table_trk.shape
    dt = np.dtype(dtype).type
    sums = np.zeros((n_runs, n_arms), dtype)
    counts = np.zeros((n_runs, n_arms), dtype)
    sums_f, counts_f = sums.reshape(-1), counts.reshape(-1)
    base = np.arange(n_runs) * n_arms
    arms = np.empty((n_steps, n_runs), np.int32)
    a_, two, one, g = dt(alpha), dt(2), dt(1), dt(gamma if gamma is not None else 1.0)
    c2a = dt(2 * alpha)
    for t in range(n_steps):
        if t < n_arms:  # some arm may still be unpulled: the masked (+inf) form
            if gamma is None:
                idx = ucb1_index_np(sums, counts, t, alpha)
            else:
                idx = ducb_index_np(sums, counts, alpha)
        elif gamma is None:  # every arm pulled once (+inf ties -> arm t at step t < K)
            idx = sums / counts + a_ * np.sqrt(two * np.log(dt(t)) * (one / counts))
        else:  # sum_k N_k = sum_{i<t} gamma^i: one scalar for every run (as in jaxkit)
            n = (one - g ** dt(t)) / (one - g)
            idx = sums / counts + np.sqrt(c2a * np.log(n) * (one / counts))
        a = idx.argmax(axis=1)
        flat = base + a
        r = table_trk[t].reshape(-1)[flat]
        if gamma is not None:
            sums *= g
            counts *= g
        sums_f[flat] += r
        counts_f[flat] += one
        arms[t] = a
    return arms


def numpy_ucb1(table_trk: np.ndarray, alpha: float = ALPHA, dtype=np.float64) -> np.ndarray:
    """UCB1 over all runs at once. ``table_trk`` (T, R, K); returns arms (T, R)."""
    return _numpy_run(table_trk, None, alpha, dtype)


def numpy_ducb(table_trk: np.ndarray, alpha: float = ALPHA, gamma: float = GAMMA,
               dtype=np.float64) -> np.ndarray:
    """Discounted UCB over all runs at once (every arm decays every step:
    ``N <- gamma N + [a=k]``, ``X <- gamma X + r [a=k]``). Returns arms (T, R)."""
    return _numpy_run(table_trk, gamma, alpha, dtype)


# ----------------------------------------------------------------------------- jaxkit


def _policy(name: str, dtype):
    from jaxkit.kernels import bandit

    if name == "ucb1":
        return bandit.ucb1(N_ARMS, alpha=ALPHA, dtype=dtype)
    return bandit.discounted_ucb(N_ARMS, gamma=GAMMA, alpha=ALPHA, dtype=dtype)


def _jax_one_run(name: str, dtype, n_steps: int):
    """``(key, table (T, K)) -> arms (T,)`` for one run. Like the NumPy version it returns
    the arm sequence only (not the reward trace or the final state, which XLA then need
    not write)."""
    from jaxkit.kernels import bandit

    pol = _policy(name, dtype)

    def one(key, table):
        def reward_fn(key, t, arm):
            return table[t, arm].astype(dtype)

        return bandit.simulate(key, pol, reward_fn, n_steps)[1].arms

    return one


def _jax_runs(name: str, dtype, n_steps: int):
    """``(key, table (T, K, R)) -> arms (T, R)``: all runs in lockstep with
    the runs on the last axis (:func:`jaxkit.kernels.bandit.simulate_runs`); R is read from
    the table, so the same function runs on a device's slice of the runs."""
    import jax.numpy as jnp
    from jaxkit.kernels import bandit

    pol = _policy(name, dtype)

    def runs(key, table_tkr):
        def reward_fn(key, t, arms):
            return jnp.take_along_axis(table_tkr[t], arms[None], axis=0)[0].astype(dtype)

        return bandit.simulate_runs(key, pol, reward_fn, n_steps, table_tkr.shape[-1])[1].arms

    return runs


# ---------------------------------------------------------------------------- peers


def ensure_peer_venv(name: str, timeout: float = 1800) -> Path:
    """Create (once) the isolated venv of peer ``name`` ("mabwiser" or "smpybandits") and
    return its python (see :func:`jaxkit.bench.ensure_peer_venv`)."""
    from jaxkit.bench import ensure_peer_venv as ensure

    cfg = PEER_ENVS[name]
    return ensure(cfg["venv"], cfg["specs"], cfg["check"], timeout=timeout)


def run_bandit_worker(py: Path, table: np.ndarray, policy: str, variants: list[str]) -> dict:
    """Run ``peers/bandit_worker.py`` in a peer venv on ``table`` (P, T, K)."""
    from jaxkit.bench import peer_env

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.npz", Path(tmp) / "out.json"
        np.savez(data, table=table, alpha=ALPHA, gamma=GAMMA)
        cmd = [str(py), str(WORKER), str(data), str(out), "--policy", policy,
               "--variants", ",".join(variants)]
        p = subprocess.run(cmd, env=peer_env(), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{policy} worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        for line in p.stdout.splitlines():  # SMPyBandits prints import notices; keep ours
            if line.startswith(policy):
                print(line, flush=True)
        return json.loads(out.read_text())


# ---------------------------------------------------------------------------- cases


def _fmt_regret(r: dict) -> str:
    return f"regret {r['mean']:.1f} [{r['lo']:.1f}, {r['hi']:.1f}]"


def _fmt_agree(a: dict | None) -> str:
    if a is None:
        return ""
    return f"arms = jaxkit: {a['steps']:.2%} of steps, {a['runs']:.1%} of runs"


def case_bandit(args, name: str, rows, results, summary):
    import jax

    from jaxkit import bench

    try:
        from jaxkit.kernels import bandit  # noqa: F401
    except ImportError as e:  # the kernel is not there yet
        rows.append(dict(case=name, dtype="", skipped=f"jaxkit.kernels.bandit: {e}"))
        results[name] = dict(skipped=str(e))
        return

    R, T = args.runs, args.steps
    piecewise = name == "ducb"
    label = ("UCB1, Bernoulli" if name == "ucb1" else
             f"D-UCB gamma={GAMMA}, piecewise Bernoulli ({N_CHANGES} changes)")
    case = f"{label}, {R} runs x {T} steps, K={N_ARMS}"
    table, means, segment = reward_tables(R, T, seed=args.seed + (1 if piecewise else 0),
                                          n_changes=N_CHANGES if piecewise else 0)
    keys = jax.random.split(jax.random.key(args.seed), R)
    items = R * T
    impls: dict[str, dict] = {}
    jarms: dict[str, np.ndarray] = {}
    ndev = jax.device_count()
    # simulate_runs reads a (T, K, R) copy of the table, made once before any timing, and
    # (several devices) that copy split over them along the runs
    table_tkr = jax.numpy.asarray(np.ascontiguousarray(table.transpose(1, 2, 0)))
    shard_runs = ndev > 1 and R % ndev == 0
    if shard_runs:
        from jaxkit import distributed as jd

        mesh = jd.make_mesh()
        placed_tkr = jax.device_put(table_tkr, jax.sharding.NamedSharding(
            mesh, jax.sharding.PartitionSpec(None, None, "data")))
    for dtype in args.dtypes:
        tag = np.dtype(dtype).name
        one = _jax_one_run(name, dtype, T)
        batched = jax.vmap(one)
        rec = bench.time_jax(batched, keys, table, n_runs=args.repeats, items=items,
                             name=f"jaxkit vmap, 1 device, {tag}")
        recs = [(f"jaxkit vmap, 1 CPU device, {tag}", rec)]
        jarms[tag] = np.asarray(jax.jit(batched)(keys, table))
        if ndev > 1 and R % ndev == 0:
            from jaxkit import distributed as jd

            mesh = jd.make_mesh()
            placed, _ = jd.shard_batch((keys, table), mesh)
            sharded = jd.sharded_vmap(one, mesh).global_fn
            rec_n = bench.time_jax(sharded, *placed, n_runs=args.repeats, items=items,
                                   name=f"jaxkit sharded_vmap, {ndev} devices, {tag}")
            recs.append((f"jaxkit sharded_vmap, {ndev} CPU devices, {tag}", rec_n))
            if not np.array_equal(np.asarray(sharded(*placed)), jarms[tag]):
                print(f"warning: sharded and unsharded jaxkit arms differ ({tag})",
                      file=sys.stderr)
        # all runs in lockstep, runs on the last axis
        runs = _jax_runs(name, dtype, T)
        rec_r = bench.time_jax(runs, keys[0], table_tkr, n_runs=args.repeats, items=items,
                               name=f"jaxkit simulate_runs, 1 device, {tag}")
        recs.append((f"jaxkit simulate_runs (runs last), 1 CPU device, {tag}", rec_r))
        arms_r = {"1 device": jax.jit(runs)(keys[0], table_tkr)}
        if shard_runs:
            sharded_r = jd.sharded_runs(runs, mesh, in_axes=(None, -1))
            rec_rn = bench.time_jax(sharded_r.global_fn, keys[0], placed_tkr,
                                    n_runs=args.repeats, items=items,
                                    name=f"jaxkit sharded_runs, {ndev} devices, {tag}")
            recs.append((f"jaxkit sharded_runs (runs last), {ndev} CPU devices, {tag}", rec_rn))
            arms_r[f"{ndev} devices"] = sharded_r(keys[0], placed_tkr)
        for where, arms in arms_r.items():
            if not np.array_equal(np.asarray(arms).T, jarms[tag]):
                print(f"warning: simulate_runs ({where}) and vmap(simulate) arms differ "
                      f"({tag})", file=sys.stderr)
        reg = mean_ci(pseudo_regret(jarms[tag], means, segment))
        for lbl, r in recs:
            impls[lbl] = dict(kind="jaxkit", dtype=tag, runs=R, steps=T, record=r,
                              steps_per_s=r.items_per_s, regret=reg, agreement=None)

    del table_tkr
    if shard_runs:
        del placed_tkr
    # NumPy, batched over runs (float64 and float32)
    table_trk = np.ascontiguousarray(table.transpose(1, 0, 2))
    np_fn = numpy_ucb1 if name == "ucb1" else numpy_ducb
    for dtype in args.dtypes:
        tag = np.dtype(dtype).name
        lbl = f"NumPy batched over runs, {tag}"
        rec = bench.time_python(functools.partial(np_fn, dtype=dtype), table_trk,
                                n_runs=args.numpy_repeats,
                                warmup=1 if args.quick else 0, items=items, name=lbl)
        arms = np_fn(table_trk, dtype=dtype).T
        impls[lbl] = dict(kind="numpy", dtype=tag, runs=R, steps=T, record=rec,
                          steps_per_s=rec.items_per_s,
                          regret=mean_ci(pseudo_regret(arms, means, segment)),
                          agreement=agreement(arms, jarms[tag]))
    del table_trk

    # peers in their own venvs, on the first P runs (compared with float64 jaxkit)
    ref_tag = "float64" if "float64" in jarms else next(iter(jarms))
    peer_note = None
    if args.no_peers:
        peer_note = "peers skipped (--no-peers)"
    else:
        P = min(args.peer_runs, R)
        pname, policy, variants = (("mabwiser", "ucb1", ["stock"]) if name == "ucb1" else
                                   ("smpybandits", "ducb", ["stock", "matched"]))
        try:
            py = ensure_peer_venv(pname)
            out = run_bandit_worker(py, table[:P], policy, variants)
        except RuntimeError as e:
            peer_note = f"{pname} peer unavailable: {e}"
            print(peer_note, file=sys.stderr)
        else:
            ref64 = jarms[ref_tag]
            sub_reg = mean_ci(pseudo_regret(ref64[:P], means[:P], segment))
            for variant, res in out["results"].items():
                vname = ("MABWiser 2.7.4 UCB1" if pname == "mabwiser" else
                         f"SMPyBandits 0.9.7 DiscountedUCB ({variant})")
                run_t = np.asarray(res["run_times_s"])
                # extrapolated to the R runs jaxkit simulates (independent objects)
                rec = bench.record_from_times(f"{vname}, {P} runs, extrapolated to {R}",
                                              run_t * R, items=items, warmup=1)
                arms = np.asarray(res["arms"])
                impls[f"{vname}, {P} runs"] = dict(
                    kind="peer", dtype="float64", runs=P, steps=T, record=rec,
                    steps_per_s=P * T / float(run_t.sum()), per_run_times_s=run_t.tolist(),
                    regret=mean_ci(pseudo_regret(arms, means[:P], segment)),
                    agreement=agreement(arms, ref64[:P]), versions=out["versions"],
                    jaxkit_regret_same_runs=sub_reg)

    # rows of the comparison table: every jaxkit record against every other impl
    for jl, jimpl in impls.items():
        if jimpl["kind"] != "jaxkit":
            continue
        for ol, oimpl in impls.items():
            if oimpl["kind"] == "jaxkit" or (oimpl["kind"] == "numpy"
                                            and oimpl["dtype"] != jimpl["dtype"]):
                continue
            if oimpl["kind"] == "peer" and jimpl["dtype"] != ref_tag:
                continue
            rows.append(dict(
                case=f"{case} [{jl.removeprefix('jaxkit ')}]", dtype=jimpl["dtype"],
                jax=jimpl["record"], peer=oimpl["record"],
                peer_name=(ol if oimpl["kind"] != "peer" else
                           f"{ol}, time x{R / oimpl['runs']:g} (extrapolated to {R} runs)"),
                acc_jax=f"{jimpl['steps_per_s'] / 1e6:.3g}M steps/s; "
                        f"{_fmt_regret(jimpl['regret'])}",
                acc_peer=f"{oimpl['steps_per_s'] / 1e6:.3g}M steps/s; "
                         f"{_fmt_regret(oimpl['regret'])}; {_fmt_agree(oimpl['agreement'])}"))
    if peer_note:
        rows.append(dict(case=case, dtype="float64", skipped=peer_note))
    best = max((v for v in impls.values() if v["kind"] == "jaxkit"),
               key=lambda v: v["steps_per_s"])
    one_dev: dict[str, dict] = {}  # the fastest one-device jaxkit record per dtype
    for k, v in impls.items():
        if "1 CPU device" in k and v["steps_per_s"] > one_dev.get(
                v["dtype"], {"steps_per_s": -1.0})["steps_per_s"]:
            one_dev[v["dtype"]] = v
    for lbl, v in impls.items():
        ref1 = one_dev.get(v["dtype"], one_dev[ref_tag])
        own = (float(np.sum(v["per_run_times_s"])) if v["kind"] == "peer"
               else v["record"].median_s)
        summary.append(dict(case=name, impl=lbl, runs=v["runs"], steps=v["steps"],
                            dtype=v["dtype"], record=v["record"], time_s=own,
                            rate=v["steps_per_s"], same_runs=v.get("jaxkit_regret_same_runs"),
                            ratio_best=best["steps_per_s"] / v["steps_per_s"],
                            ratio_1dev=ref1["steps_per_s"] / v["steps_per_s"],
                            regret=v["regret"], agreement=v["agreement"], unit="steps/s"))
    results[name] = dict(
        config=dict(runs=R, steps=T, arms=N_ARMS, alpha=ALPHA,
                    gamma=GAMMA if piecewise else None,
                    change_points=N_CHANGES if piecewise else 0, seed=args.seed,
                    peer_runs=None if args.no_peers else min(args.peer_runs, R),
                    smpybandits_alpha=4 * ALPHA if piecewise else None),
        implementations={k: {kk: vv for kk, vv in v.items()} for k, v in impls.items()},
        peer_note=peer_note,
        targets=dict(
            vs_numpy_best=min((best["steps_per_s"] / v["steps_per_s"] for v in impls.values()
                               if v["kind"] == "numpy"), default=None),
            vs_peers_best=min((best["steps_per_s"] / v["steps_per_s"] for v in impls.values()
                               if v["kind"] == "peer"), default=None)))


# "arms": (fraction of the horizon, "add" | "remove", arm); arms 0..4 start active
ARM_EVENTS = ((0.2, "add", 5), (0.2, "add", 6), (0.4, "remove", 0), (0.6, "add", 7),
              (0.6, "remove", 5), (0.8, "add", 0), (0.8, "add", 8), (0.8, "remove", 2))


def _jax_dynamic_arms(events, n_steps: int):
    """``table (T, K) -> arms (T,)``: UCB1 on :func:`bandit.dynamic_arms` with the static
    ``events`` ``(step, op, arm)`` applied between ``lax.scan`` segments (float64)."""
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import bandit

    pol = bandit.dynamic_arms(bandit.ucb1(N_ARMS, alpha=ALPHA, dtype=jnp.float64), initial=5)
    key = jax.random.key(0)  # UCB1 draws nothing

    def one(table):
        def body(state, t):
            arm = pol.select(key, state)
            return pol.update(state, arm, table[t, arm].astype(jnp.float64)), arm

        state, out, start = pol.init(), [], 0
        for stop in sorted({s for s, _, _ in events} | {n_steps}):
            state, arms = jax.lax.scan(body, state, jnp.arange(start, stop))
            out.append(arms)
            for s, op, arm in events:
                if s == stop:
                    state = (pol.add_arm if op == "add" else pol.remove_arm)(state, arm)
            start = stop
        return jnp.concatenate(out)

    return one


def case_arms(args, rows, results):
    import jax

    from jaxkit import bench
    from jaxkit.bench import peer_env

    R, T = args.runs, args.steps
    table, means, segment = reward_tables(R, T, seed=args.seed + 2)
    events = [(int(f * T), op, arm) for f, op, arm in ARM_EVENTS]
    one = jax.vmap(_jax_dynamic_arms(events, T))
    rec = bench.time_jax(one, table, n_runs=args.repeats, items=R * T,
                         name="jaxkit dynamic_arms(ucb1), vmap, float64")
    jarms = np.asarray(jax.jit(one)(table))
    case = f"UCB1 with arms added / removed ({len(events)} events), {R} runs x {T} steps"
    res = dict(config=dict(runs=R, steps=T, max_arms=N_ARMS, initial=5, events=events),
               jaxkit=dict(record=rec, steps_per_s=rec.items_per_s))
    if args.no_peers:
        rows.append(dict(case=case, dtype="float64", skipped="peers skipped (--no-peers)"))
        results["arms"] = res
        return
    P = min(args.peer_runs, R)
    try:
        py = ensure_peer_venv("mabwiser")
        with tempfile.TemporaryDirectory() as tmp:
            sched = dict(alpha=ALPHA, initial=list(range(5)), events=events,
                         tables=[table[0].tolist()] + [t.tolist() for t in table[:P]])
            (Path(tmp) / "s.json").write_text(json.dumps(sched))
            p = subprocess.run([str(py), str(WORKER), "--arms", str(Path(tmp) / "s.json"),
                                str(Path(tmp) / "o.json")], env=peer_env(),
                               capture_output=True, text=True, cwd=WORKER.parent)
            if p.returncode != 0:
                raise RuntimeError(" | ".join(p.stderr.strip().splitlines()[-3:]))
            out = json.loads((Path(tmp) / "o.json").read_text())
    except RuntimeError as e:
        rows.append(dict(case=case, dtype="float64", skipped=f"mabwiser peer unavailable: {e}"))
        results["arms"] = res
        return
    peer_arms = np.asarray(out["arms"][1:])
    run_t = np.asarray(out["run_times_s"])
    prec = bench.record_from_times(f"MABWiser 2.7.4, {P} runs, extrapolated to {R}",
                                   run_t * R, items=R * T, warmup=0)
    agree = agreement(peer_arms, jarms[:P])
    res["mabwiser"] = dict(record=prec, steps_per_s=P * T / float(run_t.sum()),
                           agreement=agree, versions=out["versions"])
    rows.append(dict(case=case, dtype="float64", jax=rec, peer=prec,
                     peer_name=f"MABWiser 2.7.4 add_arm/remove_arm, {P} runs, time "
                               f"x{R / P:g}",
                     acc_jax=f"{rec.items_per_s / 1e6:.3g}M steps/s",
                     acc_peer=f"{res['mabwiser']['steps_per_s'] / 1e3:.3g}k steps/s; "
                              f"{_fmt_agree(agree)}"))
    results["arms"] = res


BINPACK_CAPACITY = 100.0  # FunSearch / LLM4AD Weibull instances


def case_binpack(args, rows, results, summary):
    import jax

    from jaxkit import bench

    try:
        from jaxkit.ballad import problems, reference
    except ImportError as e:
        reason = f"jaxkit.ballad.problems/reference not available yet: {e}"
        print(f"binpack skipped: {reason}", file=sys.stderr)
        rows.append(dict(case="online bin packing, best fit", dtype="", skipped=reason))
        results["binpack"] = dict(skipped=reason)
        return

    n = 16 if args.quick else 32
    n_np = 4 if args.quick else 8
    p = problems.get("binpacking_weibull", quick=args.quick)
    inst = p.generate(jax.random.key(args.seed), n)
    theta = np.asarray(p.baseline)
    items = np.asarray(inst["items"])
    n_items = items.shape[1]
    tag = str(items.dtype)
    case = f"online bin packing, best fit, Weibull {n_items} items, capacity 100"
    rec = bench.time_jax(p.score, theta, inst, n_runs=3, items=n,
                         name=f"jaxkit problems.score x{n}")
    score = np.asarray(p.score(theta, inst))
    lb = np.ceil(items.sum(axis=1) / BINPACK_CAPACITY)
    bins_j = np.rint(lb * (1 - score / 100.0)).astype(int)

    def numpy_eval(xs):
        return np.array([reference.online_binpack(reference.best_fit_priority, x,
                                                  BINPACK_CAPACITY) for x in xs])

    sub = items[:n_np]
    rec_np = bench.time_python(numpy_eval, sub, n_runs=args.numpy_repeats, warmup=0,
                               items=n_np, name=f"NumPy reference x{n_np}")
    # the same instance count as jaxkit, extrapolated (instances are independent)
    rec_np_x = bench.record_from_times(f"NumPy reference, {n_np} inst. extrapolated to {n}",
                                       np.asarray(rec_np.times_s) * n / n_np, items=n)
    bins_np = numpy_eval(sub)
    same = float(np.mean(bins_np == bins_j[:n_np]))
    excess_j = float(np.mean(100 * (bins_j - lb) / lb))
    excess_np = float(np.mean(100 * (bins_np - lb[:n_np]) / lb[:n_np]))
    jrecs = [("problems.score, 1 CPU device", rec)]
    ndev = jax.device_count()
    if ndev > 1 and n % ndev == 0:
        from jaxkit import distributed as jd

        def one(x):
            return p.score(theta, {"items": x[None]})[0]

        mesh = jd.make_mesh()
        placed, _ = jd.shard_batch((items,), mesh)
        sharded = jd.sharded_vmap(one, mesh).global_fn
        rec_n = bench.time_jax(sharded, *placed, n_runs=3, items=n,
                               name=f"jaxkit problems.score sharded over {ndev} devices")
        jrecs.append((f"sharded_vmap, {ndev} CPU devices", rec_n))
        if not np.allclose(np.asarray(sharded(*placed)), score):
            print("warning: sharded and unsharded bin-packing scores differ", file=sys.stderr)
    for jl, jr in jrecs:
        rows.append(dict(case=f"{case} [jaxkit {jl}, x{n}]", dtype=tag, jax=jr, peer=rec_np_x,
                         peer_name=f"NumPy online_binpack, {n_np} inst. (x{n / n_np:g})",
                         acc_jax=f"{jr.items_per_s:.3g} inst/s; excess over L1 {excess_j:.3f}%",
                         acc_peer=f"{rec_np.items_per_s:.3g} inst/s; excess {excess_np:.3f}%; "
                                  f"bins = jaxkit on {same:.0%} of instances"))
    best = max(r.items_per_s for _, r in jrecs)
    entries = [(f"jaxkit {jl} (vmap of lax.scan)", jr, n, None) for jl, jr in jrecs]
    entries.append(("NumPy reference.online_binpack + best_fit_priority", rec_np, n_np,
                    dict(steps=same, runs=same)))
    for lbl, r, k, agree in entries:
        summary.append(dict(case="binpack", impl=lbl, runs=k, steps=n_items, dtype=tag,
                            record=r, time_s=r.median_s, rate=r.items_per_s, same_runs=None,
                            ratio_best=best / r.items_per_s,
                            ratio_1dev=rec.items_per_s / r.items_per_s, regret=None,
                            agreement=agree, unit="instances/s"))
    results["binpack"] = dict(
        config=dict(problem="binpacking_weibull", n_items=n_items, capacity=BINPACK_CAPACITY,
                    instances_jaxkit=n, instances_numpy=n_np, theta=theta, dtype=tag),
        jaxkit={jl: jr for jl, jr in jrecs}, numpy=rec_np, numpy_extrapolated=rec_np_x,
        speedup_1device=rec.items_per_s / rec_np.items_per_s,
        speedup_best=best / rec_np.items_per_s,
        bins_equal_fraction=same, excess_percent_jaxkit=excess_j,
        excess_percent_numpy=excess_np)


# ----------------------------------------------------------------------------- main


def print_summary(summary, console=None):
    """Rates, ratios, regret and agreement, one line per implementation."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="throughput (ratio = jaxkit rate / this rate), regret at T with 95% CI, "
                    "arm agreement with jaxkit")
    for col in ("case", "implementation", "runs x steps", "dtype", "time", "compile",
                "rate", "x best jaxkit", "x jaxkit 1 dev", "regret [95% CI]", "arms = jaxkit"):
        t.add_column(col, justify="left" if col in ("case", "implementation", "dtype")
                     else "right", overflow="fold")
    for s in summary:
        r = s["record"]
        reg, ag, same = s["regret"], s["agreement"], s.get("same_runs")
        reg_s = "-" if reg is None else f"{reg['mean']:.2f} [{reg['lo']:.2f}, {reg['hi']:.2f}]"
        if same is not None:
            reg_s += f" (jaxkit, same runs: {same['mean']:.2f})"
        t.add_row(*(escape(c) for c in (
            s["case"], s["impl"], f"{s['runs']} x {s['steps']}", s["dtype"],
            f"{s['time_s']:.3g} s", "-" if r.compile_s is None else f"{r.compile_s:.2g} s",
            f"{s['rate']:,.0f} {s['unit']}", f"{s['ratio_best']:.3g}x",
            f"{s['ratio_1dev']:.3g}x",
            reg_s,
            "(ref)" if ag is None else (f"bins equal on {ag['runs']:.0%} of instances"
                                        if s["case"] == "binpack" else
                                        f"{ag['steps']:.4%} steps / {ag['runs']:.2%} runs"))))
    (console or Console(width=220)).print(t)
    return t


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser(
        "bench_bandit", __doc__, CASES,
        quick_help="small sizes: 256 runs x 200 steps, peers on 3 runs",
        peers_help="skip MABWiser / SMPyBandits (no virtual environments)")
    p.add_argument("--runs", type=int, default=None,
                   help="independent bandit runs (default 10,000; --quick 256)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps per run (default 1,000; --quick 200)")
    p.add_argument("--peer-runs", type=int, default=None,
                   help="runs simulated by each peer library (default 50; --quick 3)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed calls of each jaxkit function (default 10; --quick 5)")
    p.add_argument("--numpy-repeats", type=int, default=None,
                   help="timed calls of each NumPy version (default 3; --quick 2)")
    p.add_argument("--dtypes", default="float32,float64",
                   help="comma list of float dtypes for jaxkit and NumPy")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    q = args.quick
    args.runs = args.runs or (256 if q else 10_000)
    args.steps = args.steps or (200 if q else 1_000)
    args.peer_runs = args.peer_runs or (3 if q else 50)
    args.repeats = args.repeats or (5 if q else 10)
    args.numpy_repeats = args.numpy_repeats or (2 if q else 3)
    args.dtypes = [np.dtype(d.strip()).type for d in args.dtypes.split(",") if d.strip()]
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = sorted(set(cases) - set(CASES))
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    if min(args.runs, args.steps, args.peer_runs, args.repeats, args.numpy_repeats) < 1:
        p.error("--runs, --steps, --peer-runs, --repeats, --numpy-repeats must be >= 1")
    if args.steps < N_ARMS:
        p.error(f"--steps must be >= the number of arms ({N_ARMS})")
    if not args.dtypes or any(d not in (np.float32, np.float64) for d in args.dtypes):
        p.error("--dtypes must list float32 and/or float64")

    _configure_jax()
    from jaxkit import bench

    env = bench.environment(peers=("numpy", "jaxlib", "rich"))
    env["loadavg_at_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    rows, results, summary = [], {}, []
    t0 = time.perf_counter()
    for c in ("ucb1", "ducb"):
        if c in cases:
            case_bandit(args, c, rows, results, summary)
    if "arms" in cases:
        case_arms(args, rows, results)
    if "binpack" in cases:
        case_binpack(args, rows, results, summary)
    bench.print_table(rows, title="jaxkit bandits / heuristic evaluation vs CPU peers "
                                  "(speed-up = peer time / jaxkit time for the same work)")
    if summary:
        print_summary(summary)
    print(bench.environment_line(env, time.perf_counter() - t0))
    if args.json:
        path = bench.write_json(args.json, dict(
            environment=env, argv=sys.argv if argv is None else argv, quick=args.quick,
            results=results, rows=rows,
            summary=[{k: v for k, v in s.items()} for s in summary],
            table_markdown=bench.table_markdown(rows)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
