"""Belief-update kernels: value of information, expected information gain and the numpyro
evidence step, jaxkit against vectorised NumPy / SciPy code on the same inputs.

Run ``python benchmarks/bench_belief.py [--quick] [--json FILE] [--only CASES] [--runs N]
[--markets N] [--candidates N] [--outcomes N] [--explanations N] [--designs N]
[--draws N]`` (or ``jaxkit bench belief``). Cases (``--only`` takes a comma list):

* ``voi`` -- :func:`jaxkit.kernels.belief.voi.voi` on ``--markets`` (1e6) binary markets
  (q, p1, p0 uniform on [0, 1]), all four measures, jitted, with and without its input
  checks, against NumPy evaluating the same closed forms (expected absolute and squared
  shift, mutual information in its expected-KL form, discrimination) with ``xlogy``.
* ``eig`` -- :func:`jaxkit.kernels.belief.eig.eig` of ``--candidates`` (1e4) experiments
  x ``--outcomes`` (100) outcomes x ``--explanations`` (16) explanations (Dirichlet rows,
  one shared prior), jitted, with and without the table checks, against NumPy with
  ``scipy.special.logsumexp`` (the marginal) and the same masked sum.
* ``evidence`` -- the numpyro evidence step: :func:`jaxkit.kernels.belief.evidence.
  log_lik_table` of a logistic dose-response model with a latent slope
  (``theta ~ N(2, 1)``, ``y ~ Binomial(20, sigmoid(theta (d - 0.5)))``, 21 outcomes) over
  ``--designs`` (256) doses with ``--draws`` (1024) prior draws each (the prior Monte
  Carlo estimator), against the same model written in plain NumPy (draws, binomial log
  pmf with precomputed coefficients, ``logsumexp`` over draws). The draws differ (JAX and
  NumPy generators), so the tables agree to Monte Carlo error: both are compared with a
  4000-point quadrature over theta.

float32 on both sides (x64 off). jaxkit calls are compiled ahead of time (compile time
apart) and timed with ``block_until_ready``; medians over ``--runs``. Target: >= 5x the
NumPy code on this 2-core CPU for ``voi`` and ``eig``. ``--quick``: 1e4 markets, 500
candidates, 32 designs x 256 draws, 3 runs.
"""

from __future__ import annotations

import functools
import math
import sys
import time

import numpy as np

CASES = ("voi", "eig", "evidence")


# ----------------------------------------------------------------------------- NumPy peers


def voi_numpy(q, p1, p0):
    """The four VOI measures in vectorised NumPy (expected-KL mutual information)."""
    from scipy.special import xlogy

    def kl(a, b):
        return xlogy(a, a) - xlogy(a, b) + xlogy(1 - a, 1 - a) - xlogy(1 - a, 1 - b)

    d = p1 - p0
    w = q * (1 - q)
    p = q * p1 + (1 - q) * p0
    mi = np.maximum(q * kl(p1, p) + (1 - q) * kl(p0, p), 0)
    return 2 * w * np.abs(d), w * d * d, mi, np.abs(d)


def eig_numpy(lp, ll):
    """EIG of every candidate: ``lp`` (K,), ``ll`` (C, K, Y), NumPy + SciPy."""
    from scipy.special import logsumexp

    log_py = logsumexp(lp[None, :, None] + ll, axis=1)  # (C, Y)
    w = np.exp(lp[None, :, None] + ll)
    return np.maximum(np.sum(w * (ll - log_py[:, None, :]), axis=(1, 2)), 0)


_LOG_CHOOSE = np.array([math.lgamma(21) - math.lgamma(y + 1) - math.lgamma(21 - y)
                        for y in range(21)])


def evidence_numpy(rng, doses, draws):
    """``log p(y | d)`` (D, 21) of the dose-response model by prior Monte Carlo."""
    from scipy.special import logsumexp

    y = np.arange(21, dtype=np.float32)
    theta = rng.normal(2.0, 1.0, size=(doses.shape[0], draws)).astype(np.float32)
    p = 1 / (1 + np.exp(-theta * (doses[:, None] - 0.5)))
    p = np.clip(p, 1e-6, 1 - 1e-6)
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


def case_voi(args, rows, results):
    import jax
    from jaxkit.kernels.belief.voi import voi

    from jaxkit import bench

    rng = np.random.default_rng(args.seed)
    n = args.markets
    q, p1, p0 = (rng.uniform(size=n).astype(np.float32) for _ in range(3))
    ref = voi_numpy(q, p1, p0)
    peer = bench.time_python(voi_numpy, q, p1, p0, n_runs=args.runs, items=n,
                             name="numpy voi")
    for check in (False, True):
        fn = jax.jit(lambda a, b, c, check=check: tuple(voi(a, b, c, check=check)))
        rec = bench.time_jax(fn, q, p1, p0, n_runs=args.runs, items=n,
                             name=f"voi check={check}")
        got = fn(q, p1, p0)
        err = max(float(np.max(np.abs(np.asarray(g) - r))) for g, r in zip(got, ref,
                                                                            strict=True))
        case = f"voi {n:.0e} markets" + ("" if not check else " (checked)")
        rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer, peer_name="NumPy",
                         acc_jax=f"max|diff| {err:.1e}", acc_peer=""))
        results[case] = dict(jax=rec, peer=peer, max_abs_diff=err)


def case_eig(args, rows, results):
    import jax
    from jaxkit.kernels.belief.eig import eig

    from jaxkit import bench

    rng = np.random.default_rng(args.seed + 1)
    C, K, Y = args.candidates, args.explanations, args.outcomes
    lp = np.log(rng.dirichlet(np.ones(K))).astype(np.float32)
    # Dirichlet rows by normalised gammas (fast for 1.6e7 entries)
    g = rng.standard_gamma(0.5, size=(C, K, Y)).astype(np.float32) + 1e-30
    ll = np.log(g / g.sum(-1, keepdims=True))
    del g
    ref = eig_numpy(lp, ll)
    peer = bench.time_python(eig_numpy, lp, ll, n_runs=args.runs, items=C,
                             name="numpy/scipy eig")
    for check in (False, True):
        fn = jax.jit(functools.partial(eig, check=check))
        rec = bench.time_jax(fn, lp, ll, n_runs=args.runs, items=C, name=f"eig check={check}")
        err = float(np.max(np.abs(np.asarray(fn(lp, ll)) - ref)))
        case = f"eig {C}x{Y}x{K}" + ("" if not check else " (checked)")
        rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer,
                         peer_name="NumPy+SciPy", acc_jax=f"max|diff| {err:.1e}",
                         acc_peer=f"EIG mean {ref.mean():.3f}"))
        results[case] = dict(jax=rec, peer=peer, max_abs_diff=err)


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
    quad = evidence_quadrature(doses.astype(np.float64))
    tv = lambda t: float(np.max(0.5 * np.abs(np.exp(t) - np.exp(quad)).sum(-1)))  # noqa: E731
    tv_j = tv(np.asarray(fn(key, doses), np.float64))
    tv_n = tv(evidence_numpy(np.random.default_rng(0), doses, args.draws))
    case = f"evidence {args.designs} designs x {args.draws} draws"
    rows.append(dict(case=case, dtype="float32", jax=rec, peer=peer, peer_name="NumPy",
                     acc_jax=f"max TV to quadrature {tv_j:.3f}",
                     acc_peer=f"max TV to quadrature {tv_n:.3f}"))
    results[case] = dict(jax=rec, peer=peer, tv_jax=tv_j, tv_numpy=tv_n)


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
    env = bench.environment()
    rows, results = [], {}
    t0 = time.perf_counter()
    for c in cases:
        globals()[f"case_{c}"](args, rows, results)
    bench.finish(rows, env, t0, title="jaxkit belief kernels vs NumPy/SciPy (speed-up = peer "
                                      "/ jaxkit)", json_path=args.json,
                 payload=dict(argv=sys.argv if argv is None else argv, quick=args.quick,
                              results=results, rows=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
