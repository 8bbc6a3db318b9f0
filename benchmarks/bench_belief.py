"""Belief-update kernels: value of information, expected information gain and the numpyro
evidence step, jaxkit against vectorised NumPy / SciPy code on the same inputs.

Run ``python benchmarks/bench_belief.py [--quick] [--json FILE] [--only CASES] [--runs N]
[--markets N] [--candidates N] [--outcomes N] [--explanations N] [--designs N]
[--draws N]`` (or ``jaxkit bench belief``). Cases (``--only`` takes a comma list):

* ``voi`` -- :func:`jaxkit.kernels.belief.voi.voi` on ``--markets`` (1e6) binary markets
  (q, p1, p0 uniform on [0, 1]), all four measures, jitted, with and without its input
  checks, against NumPy evaluating the same closed forms (expected absolute and squared
  shift, mutual information in its expected-KL form, discrimination) with six shared
  ``np.log`` / ``np.log1p`` calls and masks (:func:`voi_numpy`); a third row times the
  previous peer, eight ``scipy.special.xlogy`` calls (:func:`voi_numpy_xlogy`, 2.7x
  slower: SciPy's xlogy is not SIMD-vectorised).
* ``eig`` -- :func:`jaxkit.kernels.belief.eig.eig` of ``--candidates`` (1e4) experiments
  x ``--outcomes`` (100) outcomes x ``--explanations`` (16) explanations (Dirichlet rows,
  one shared prior), called on device arrays as a user calls it (``eig`` compiles itself:
  one executable per shape, 512-bit vectors where the CPU has AVX-512; the first call is
  the compile column), with and without the table checks, against NumPy in exp
  space (:func:`eig_numpy`: one ``np.exp`` of the table, ``p(y)`` by ``np.matmul``, the
  conditional entropies by ``np.einsum``); a third row times the previous peer, the
  logsumexp form with ``scipy.special.logsumexp`` (:func:`eig_numpy_logsumexp`, 4-5x
  slower).
* ``evidence`` -- the numpyro evidence step: :func:`jaxkit.kernels.belief.evidence.
  log_lik_table` of a logistic dose-response model with a latent slope
  (``theta ~ N(2, 1)``, ``y ~ Binomial(20, sigmoid(theta (d - 0.5)))``, 21 outcomes) over
  ``--designs`` (256) doses with ``--draws`` (1024) prior draws each (the prior Monte
  Carlo estimator), against the same model written in plain NumPy (draws, the binomial
  log pmf factored as ``log C(20, y) + y logit(p) + 20 log(1 - p)`` on a
  ``(designs, outcomes, draws)`` array, logsumexp over the contiguous draws:
  :func:`evidence_numpy`); a second row times the previous peer (``(designs, draws,
  outcomes)`` with ``scipy.special.logsumexp`` over the middle axis,
  :func:`evidence_numpy_naive`, about 4x slower). The draws differ (JAX and NumPy
  generators), so the tables agree to Monte Carlo error: both are compared with a
  4000-point quadrature over theta.

float32 on both sides (x64 off). jaxkit calls are compiled before timing (compile time
apart) and timed with ``block_until_ready``; medians over ``--runs``; the allocator is
settled first (:func:`_settle_malloc`: glibc's mmap threshold halves or doubles the
NumPy peers' time otherwise). After the table,
an interleaved comparison (jaxkit and peer calls alternating, ``--runs`` rounds) gives
each side's median CPU time per call (``time.process_time``: both cores for jaxkit, one
for NumPy) and wall time, with the load average: on a shared machine the wall medians
of the table move with the load, the interleaved ratios much less. Target: >= 5x the
NumPy code on this 2-core CPU for ``voi`` and ``eig``. ``--quick``: 1e4 markets, 500
candidates, 32 designs x 256 draws, 3 runs.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import sys
import time

import numpy as np

CASES = ("voi", "eig", "evidence")


# ----------------------------------------------------------------------------- NumPy peers


def voi_numpy(q, p1, p0):
    """The four VOI measures in vectorised NumPy: the expected-KL mutual information from
    six shared logarithms (``log p``, ``log(1 - p)`` and those of ``p1``, ``p0``), each
    ``0 log 0`` term masked, in the inputs' dtype."""
    d = p1 - p0
    qb = 1 - q
    w = q * qb
    p = q * p1 + qb * p0
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lpb = np.log(p), np.log1p(-p)

        def kl(a):  # KL(Bern(a) || Bern(p))
            return (np.where(a > 0, a * (np.log(a) - lp), 0)
                    + np.where(a < 1, (1 - a) * (np.log1p(-a) - lpb), 0))

        mi = np.where(q > 0, q * kl(p1), 0) + np.where(qb > 0, qb * kl(p0), 0)
    ad = np.abs(d)
    return 2 * w * ad, w * d * d, np.maximum(mi, 0), ad


def voi_numpy_xlogy(q, p1, p0):
    """The previous VOI peer: the same measures with eight ``scipy.special.xlogy`` calls
    (SciPy's float32 xlogy loop is scalar: 2.7x :func:`voi_numpy`)."""
    from scipy.special import xlogy

    def kl(a, b):
        return xlogy(a, a) - xlogy(a, b) + xlogy(1 - a, 1 - a) - xlogy(1 - a, 1 - b)

    d = p1 - p0
    w = q * (1 - q)
    p = q * p1 + (1 - q) * p0
    mi = np.maximum(q * kl(p1, p) + (1 - q) * kl(p0, p), 0)
    return 2 * w * np.abs(d), w * d * d, mi, np.abs(d)


def eig_numpy(lp, ll):
    """EIG of every candidate in exp space: ``lp`` (K,), ``ll`` (C, K, Y).

    ``EIG = sum_k pi_k sum_y p(y|k) log p(y|k) - sum_y p(y) log p(y)`` with ``p(y) = pi @
    p(. | .)``: one ``np.exp`` of the table, ``np.matmul`` for the marginal and one
    ``np.einsum`` for the conditional entropies (``-inf`` log likelihoods clipped to the
    most negative float so that ``0 * log 0`` counts 0)."""
    e = np.exp(ll)  # p(y | k)
    pi = np.exp(lp)
    py = np.matmul(pi, e)  # (C, Y): p(y) per candidate
    h = np.einsum("k,cky,cky->c", pi, e, np.maximum(ll, np.finfo(ll.dtype).min),
                  optimize=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        hy = np.sum(np.where(py > 0, py * np.log(py), 0), axis=-1)
    return np.maximum(h - hy, 0)


def eig_numpy_logsumexp(lp, ll):
    """The previous EIG peer: the marginal by ``scipy.special.logsumexp`` (a max pass,
    an exp pass), another exp pass and the masked sum (4-5x :func:`eig_numpy`)."""
    from scipy.special import logsumexp

    log_py = logsumexp(lp[None, :, None] + ll, axis=1)  # (C, Y)
    w = np.exp(lp[None, :, None] + ll)
    return np.maximum(np.sum(w * (ll - log_py[:, None, :]), axis=(1, 2)), 0)


_LOG_CHOOSE = np.array([math.lgamma(21) - math.lgamma(y + 1) - math.lgamma(21 - y)
                        for y in range(21)])


def _dose_probs(rng, doses, draws):
    theta = rng.normal(2.0, 1.0, size=(doses.shape[0], draws)).astype(np.float32)
    p = 1 / (1 + np.exp(-theta * (doses[:, None] - 0.5)))
    return np.clip(p, 1e-6, 1 - 1e-6)


def evidence_numpy(rng, doses, draws):
    """``log p(y | d)`` (D, 21) of the dose-response model by prior Monte Carlo: the log
    pmf ``log C(20, y) + y logit(p) + 20 log(1 - p)`` on a ``(D, 21, S)`` array (draws
    contiguous), then an in-place logsumexp over the draws."""
    p = _dose_probs(rng, doses, draws)
    y = np.arange(21, dtype=np.float32)[:, None]
    a, b = np.log(p)[:, None, :], np.log1p(-p)[:, None, :]
    ll = y * (a - b) + 20 * b  # (D, 21, S)
    m = ll.max(axis=-1, keepdims=True)
    np.subtract(ll, m, out=ll)
    np.exp(ll, out=ll)
    return (_LOG_CHOOSE.astype(np.float32) + np.log(ll.sum(axis=-1)) + m[..., 0]
            - np.float32(math.log(draws)))


def evidence_numpy_naive(rng, doses, draws):
    """The previous evidence peer: ``(D, S, 21)`` log pmf, ``scipy.special.logsumexp``
    over the draws (the middle axis; about 4x :func:`evidence_numpy`)."""
    from scipy.special import logsumexp

    p = _dose_probs(rng, doses, draws)
    y = np.arange(21, dtype=np.float32)
    ll = (_LOG_CHOOSE.astype(np.float32) + y * np.log(p)[..., None]
          + (20 - y) * np.log1p(-p)[..., None])  # (D, S, 21)
    return logsumexp(ll, axis=1) - math.log(draws)


def evidence_quadrature(doses, n=4000):
    """The same table by quadrature over theta (float64), the accuracy reference."""
    from scipy import stats

    theta = np.linspace(-6, 10, n)
    w = stats.norm.pdf(theta, 2, 1) * (theta[1] - theta[0])
    p = np.clip(1 / (1 + np.exp(-theta[None] * (doses[:, None] - 0.5))), 1e-6, 1 - 1e-6)
    y = np.arange(21)
    pmf = np.exp(_LOG_CHOOSE + y * np.log(p)[..., None] + (20 - y) * np.log1p(-p)[..., None])
    return np.log(np.einsum("s,dsy->dy", w, pmf))


def _dose_model(d, y=None):
    import jax
    import numpyro
    import numpyro.distributions as dist

    theta = numpyro.sample("theta", dist.Normal(2.0, 1.0))
    p = jax.numpy.clip(jax.nn.sigmoid(theta * (d - 0.5)), 1e-6, 1 - 1e-6)
    numpyro.sample("y", dist.Binomial(20, p), obs=y)


# ----------------------------------------------------------------------------- cases


def _maxdiff(got, ref) -> float:
    """Largest absolute difference over a tuple of arrays (or one array)."""
    if not isinstance(got, tuple):
        got, ref = (got,), (ref,)
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - r)))
               for g, r in zip(got, ref, strict=True))


def _interleaved(calls, runs: int) -> dict:
    """Median CPU time (``time.process_time``) and wall time per call of each callable,
    the calls alternating for ``runs`` rounds after one warm-up round (JAX results are
    waited for with ``block_until_ready``). On a loaded machine both sides see the same
    load, so the ratio of the CPU times (and, less so, of the walls) is stable where the
    table's wall medians are not."""
    import jax

    for fn in calls.values():
        jax.block_until_ready(fn())
    cpu = {k: [] for k in calls}
    wall = {k: [] for k in calls}
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            for k, fn in calls.items():
                c0, t0 = time.process_time(), time.perf_counter()
                jax.block_until_ready(fn())
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
    finally:
        gc.enable()
    return {k: dict(cpu_s=float(np.median(cpu[k])), wall_s=float(np.median(wall[k])))
            for k in calls}


def _time_eager(fn, args, *, runs: int, items: int, name: str, warmup: int = 2):
    """Time a jaxkit function that compiles itself on concrete arrays (``args`` already on
    the device): the first call (trace, compile, run) is the compile time; then ``warmup``
    untimed calls and the median of ``runs`` calls, each ended by ``block_until_ready``."""
    import jax

    from jaxkit import bench

    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - t0
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return bench.record_from_times(name, times, warmup=warmup, items=items,
                                   compile_s=compile_s)


def _jax_args(*args):
    import jax

    out = jax.device_put(args)
    jax.block_until_ready(out)
    return out


def case_voi(args, rows, results):
    import jax
    from jaxkit.kernels.belief.voi import voi

    from jaxkit import bench

    rng = np.random.default_rng(args.seed)
    n = args.markets
    q, p1, p0 = (rng.uniform(size=n).astype(np.float32) for _ in range(3))
    ref = voi_numpy(*(x.astype(np.float64) for x in (q, p1, p0)))  # float64 reference
    peer = bench.time_python(voi_numpy, q, p1, p0, n_runs=args.runs, items=n,
                             name="numpy voi")
    prev = bench.time_python(voi_numpy_xlogy, q, p1, p0, n_runs=args.runs, items=n,
                             name="scipy xlogy voi")
    err_peer = _maxdiff(voi_numpy(q, p1, p0), ref)
    err_prev = _maxdiff(voi_numpy_xlogy(q, p1, p0), ref)
    case0 = f"voi {n:.0e} markets"
    fns = {}
    for check in (False, True):
        fn = jax.jit(lambda a, b, c, check=check: tuple(voi(a, b, c, check=check)))
        fns[check] = fn
        rec = bench.time_jax(fn, q, p1, p0, n_runs=args.runs, items=n,
                             name=f"voi check={check}")
        err = _maxdiff(tuple(fn(q, p1, p0)), ref)
        case = case0 + ("" if not check else " (checked)")
        rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer,
                         peer_name="NumPy (np.log)", acc_jax=f"max|diff| f64 {err:.1e}",
                         acc_peer=f"max|diff| f64 {err_peer:.1e}"))
        results[case] = dict(jax=rec, peer=peer, max_abs_diff=err, peer_max_abs_diff=err_peer)
    rec, err = results[case0]["jax"], results[case0]["max_abs_diff"]
    rows.append(dict(case=case0, dtype="float32", jax=rec, peer=prev,
                     peer_name="SciPy xlogy (previous peer)", acc_jax=f"max|diff| f64 {err:.1e}",
                     acc_peer=f"max|diff| f64 {err_prev:.1e}"))
    results[case0 + " vs xlogy peer"] = dict(jax=rec, peer=prev, peer_max_abs_diff=err_prev)
    a = _jax_args(q, p1, p0)
    results[case0 + " interleaved"] = _interleaved(
        {"jaxkit": lambda: fns[False](*a), "jaxkit checked": lambda: fns[True](*a),
         "NumPy": lambda: voi_numpy(q, p1, p0)}, args.runs)


def case_eig(args, rows, results):
    from jaxkit.kernels.belief.eig import eig

    from jaxkit import bench

    rng = np.random.default_rng(args.seed + 1)
    C, K, Y = args.candidates, args.explanations, args.outcomes
    lp = np.log(rng.dirichlet(np.ones(K))).astype(np.float32)
    # Dirichlet rows by normalised gammas (fast for 1.6e7 entries)
    g = rng.standard_gamma(0.5, size=(C, K, Y)).astype(np.float32) + 1e-30
    ll = np.log(g / g.sum(-1, keepdims=True))
    del g
    ref = eig_numpy(lp.astype(np.float64), ll.astype(np.float64))
    peer = bench.time_python(eig_numpy, lp, ll, n_runs=args.runs, items=C,
                             name="numpy eig (exp space)")
    prev = bench.time_python(eig_numpy_logsumexp, lp, ll, n_runs=args.runs, items=C,
                             name="numpy/scipy eig (logsumexp)")
    err_peer = _maxdiff(eig_numpy(lp, ll), ref)
    err_prev = _maxdiff(eig_numpy_logsumexp(lp, ll), ref)
    case0 = f"eig {C}x{Y}x{K}"
    fns = {}
    a = _jax_args(lp, ll)
    for check in (False, True):
        # called as a user calls it on arrays: eig compiles itself (module docstring of
        # kernels/belief/eig.py: one executable per shape, 512-bit vectors on AVX-512)
        fn = functools.partial(eig, check=check)
        fns[check] = fn
        rec = _time_eager(fn, a, runs=args.runs, items=C, name=f"eig check={check}")
        err = _maxdiff(fn(*a), ref)
        case = case0 + ("" if not check else " (checked)")
        rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer,
                         peer_name="NumPy (exp, matmul, einsum)",
                         acc_jax=f"max|diff| f64 {err:.1e}",
                         acc_peer=f"max|diff| f64 {err_peer:.1e}; EIG mean {ref.mean():.3f}"))
        results[case] = dict(jax=rec, peer=peer, max_abs_diff=err, peer_max_abs_diff=err_peer)
    rec, err = results[case0]["jax"], results[case0]["max_abs_diff"]
    rows.append(dict(case=case0, dtype="float32", jax=rec, peer=prev,
                     peer_name="NumPy+SciPy logsumexp (previous peer)",
                     acc_jax=f"max|diff| f64 {err:.1e}", acc_peer=f"max|diff| f64 {err_prev:.1e}"))
    results[case0 + " vs logsumexp peer"] = dict(jax=rec, peer=prev, peer_max_abs_diff=err_prev)
    results[case0 + " interleaved"] = _interleaved(
        {"jaxkit": lambda: fns[False](*a), "jaxkit checked": lambda: fns[True](*a),
         "NumPy": lambda: eig_numpy(lp, ll)}, args.runs)


def case_evidence(args, rows, results):
    import jax
    from jaxkit.kernels.belief.evidence import log_lik_table

    from jaxkit import bench

    doses = np.linspace(0, 1, args.designs).astype(np.float32)
    outcomes = np.arange(21)
    fn = jax.jit(lambda k, d: log_lik_table(k, [_dose_model], d, outcomes,
                                            n_samples=args.draws)[:, 0])
    key = jax.random.key(args.seed)
    rec = bench.time_jax(fn, key, doses, n_runs=args.runs, items=args.designs,
                         name="numpyro log_lik_table")
    rng = np.random.default_rng(args.seed + 2)
    peer = bench.time_python(evidence_numpy, rng, doses, args.draws, n_runs=args.runs,
                             items=args.designs, name="numpy evidence")
    prev = bench.time_python(evidence_numpy_naive, rng, doses, args.draws, n_runs=args.runs,
                             items=args.designs, name="numpy evidence (previous)")
    quad = evidence_quadrature(doses.astype(np.float64))
    tv = lambda t: float(np.max(0.5 * np.abs(np.exp(t) - np.exp(quad)).sum(-1)))  # noqa: E731
    tv_j = tv(np.asarray(fn(key, doses), np.float64))
    tv_n = tv(evidence_numpy(np.random.default_rng(0), doses, args.draws))
    tv_p = tv(evidence_numpy_naive(np.random.default_rng(0), doses, args.draws))
    case = f"evidence {args.designs} designs x {args.draws} draws"
    rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer,
                     peer_name="NumPy (factored pmf, draws minor)",
                     acc_jax=f"max TV to quadrature {tv_j:.3f}",
                     acc_peer=f"max TV to quadrature {tv_n:.3f}"))
    rows.append(dict(case=case, dtype="float32", jax=rec, peer=prev,
                     peer_name="NumPy+SciPy logsumexp (previous peer)",
                     acc_jax=f"max TV to quadrature {tv_j:.3f}",
                     acc_peer=f"max TV to quadrature {tv_p:.3f}"))
    results[case] = dict(jax=rec, peer=peer, tv_jax=tv_j, tv_numpy=tv_n)
    results[case + " vs previous peer"] = dict(jax=rec, peer=prev, tv_numpy=tv_p)
    a = _jax_args(key, doses)
    results[case + " interleaved"] = _interleaved(
        {"jaxkit": lambda: fn(*a),
         "NumPy": lambda: evidence_numpy(np.random.default_rng(args.seed), doses, args.draws)},
        args.runs)


def _print_interleaved(results):
    """The interleaved comparison of each case: CPU and wall medians, both ratios."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print("interleaved (calls alternating; CPU = process_time, jaxkit on both cores, "
          "NumPy on one); load average " + (" ".join(f"{x:.2f}" for x in load)
                                             if load else "n/a"))
    for case, res in results.items():
        if not case.endswith(" interleaved"):
            continue
        peer = res["NumPy"]
        cells = []
        for k, v in res.items():
            if k == "NumPy":
                continue
            cells.append(f"{k} {v['cpu_s'] * 1e3:.3g} ms CPU ({peer['cpu_s'] / v['cpu_s']:.2f}x),"
                         f" {v['wall_s'] * 1e3:.3g} ms wall ({peer['wall_s'] / v['wall_s']:.2f}x)")
        print(f"  {case[:-len(' interleaved')]}: NumPy {peer['cpu_s'] * 1e3:.3g} ms CPU, "
              f"{peer['wall_s'] * 1e3:.3g} ms wall; " + "; ".join(cells))


def _settle_malloc() -> None:
    """Allocate and free one 30 MB array, as any process that has held a large array has.

    glibc serves big blocks with fresh ``mmap`` s (page-faulted on first touch) until a
    freed mmapped block raises its threshold (dynamically, up to 32 MB); after that,
    blocks of up to 32 MB come from the heap. The NumPy peers' temporaries (4 MB at 1e6
    markets) and XLA's buffers go through the same allocator, so without this the timings
    depend on what ran before in the process: on this machine the NumPy VOI peer took 46
    or 23 ms CPU per call and the checked jaxkit VOI 13 or 5 ms, in the two states. Both
    sides are timed in the settled state."""
    np.ones(7_500_000, np.float32).sum()


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_belief", __doc__, CASES,
                               quick_help="small sizes (smoke test)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per side (default 10)")
    p.add_argument("--markets", type=int, default=None, help="VOI markets (1e6)")
    p.add_argument("--candidates", type=int, default=None, help="EIG candidates (1e4)")
    p.add_argument("--outcomes", type=int, default=100, help="EIG outcomes (100)")
    p.add_argument("--explanations", type=int, default=16, help="EIG explanations (16)")
    p.add_argument("--designs", type=int, default=None, help="evidence designs (256)")
    p.add_argument("--draws", type=int, default=None, help="evidence prior draws (1024)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    q = args.quick
    for name, full, quick in (("runs", 10, 3), ("markets", 1_000_000, 10_000),
                              ("candidates", 10_000, 500), ("designs", 256, 32),
                              ("draws", 1024, 256)):
        if getattr(args, name) is None:
            setattr(args, name, quick if q else full)
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    cases = bench.parse_cases(p, args.only, CASES)

    bench.configure_cpu_devices(x64=False)
    _settle_malloc()
    env = bench.environment()
    rows, results = [], {}
    t0 = time.perf_counter()
    for c in cases:
        globals()[f"case_{c}"](args, rows, results)
    bench.finish(rows, env, t0, title="jaxkit belief kernels vs NumPy/SciPy (speed-up = peer "
                                      "/ jaxkit)", json_path=args.json,
                 after_table=lambda: _print_interleaved(results),
                 payload=dict(argv=sys.argv if argv is None else argv, quick=args.quick,
                              results=results, rows=rows))
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
