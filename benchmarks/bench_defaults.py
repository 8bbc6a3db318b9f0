"""The default call beside the benchmarked one, where a family's benchmark timed another path.

Run ``python benchmarks/bench_defaults.py [--quick] [--rounds N] [--only CASES] [--json FILE]``.
Issue 71's audit found four benchmarks whose timed call was not what a user writes with
default arguments (FastICA is covered by ``bench_ica.py --only default``):

* ``w2``     -- ``wasserstein.wasserstein(x0, x1, 2)``, whose default solver is now
  ``flow_ot.default_exact_solver()`` (the exact host auction on a CPU, what
  ``bench_flow.py --only parity`` times), against ``solver="hungarian"`` (the device
  solver, the default before) and POT's ``ot.emd2`` (B = 256 and 1024 points, 2-D and
  64-D, float32; POT in float64).
* ``mamba2`` -- ``seq.mamba2_mixer`` forward + backward at its default ``chunk=64`` against
  the ``chunk=32`` (the composed models' ``Arch.ssd_chunk``) that ``bench_compose.py``
  times (width 128, expand 2, state 16, head dim 16, batch 8, length 256). jaxkit only: the
  torch peer of ``bench_compose.py`` runs in a peer environment.
* ``lingam`` -- ``lingam.ica_lingam`` and ``lingam.direct_lingam`` with the default
  ``criterion="bic"`` against ``"bic_sklearn"`` (``bench_ica.py``'s default, which
  reproduces the ``lingam`` package's LassoLarsIC), 64 datasets (1000, 10), float64,
  ``jit(vmap)`` on one device. jaxkit only: the ``lingam`` peer runs in its own
  environment (``bench_ica.py --only lingam``).
* ``pc``     -- ``sem.pc(x)`` at its default ``alpha=0.05`` against the ``alpha=0.01`` that
  ``bench_causal_audit.py --only pc`` times, each against causal-learn's ``pc`` loop (1
  BLAS thread) at the same alpha; 8 datasets (1000, 10) of the causal-audit cell.

The forms of a case run **interleaved**: each round calls every form once (``--rounds``
rounds after one warm-up round), so machine load hits them alike; the medians, their
ratios and the load average before and after are printed and written with ``--json``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CASES = ("w2", "mamba2", "lingam", "pc")


def interleaved(forms: dict, rounds: int) -> dict:
    """Median seconds of each ``forms[label]()`` (blocking calls), interleaved in rounds."""
    times = {label: [] for label in forms}
    for r in range(rounds + 1):
        for label, fn in forms.items():
            t = time.perf_counter()
            fn()
            if r:
                times[label].append(time.perf_counter() - t)
    return {label: dict(median_s=float(np.median(v)), times_s=v) for label, v in times.items()}


def _report(title: str, res: dict, base: str, out: dict) -> None:
    print(f"\n{title}")
    for label, r in res.items():
        ratio = res[base]["median_s"] / r["median_s"]
        print(f"  {label:58s} {r['median_s'] * 1e3:9.2f} ms   {base} / this: {ratio:6.2f}x")
    out[title] = res


def case_w2(args, out):
    import jax
    import jax.numpy as jnp
    import ot
    from jaxkit.kernels import wasserstein
    from jaxkit.kernels.flow_ot import default_exact_solver

    rng = np.random.default_rng(0)
    sizes = [(256, 2)] if args.quick else [(256, 2), (256, 64), (1024, 2), (1024, 64)]
    for b, dim in sizes:
        x0 = rng.standard_normal((b, dim)).astype(np.float32)
        x1 = (rng.standard_normal((b, dim)) + 1).astype(np.float32)
        a0, a1 = jnp.asarray(x0), jnp.asarray(x1)
        hung = jax.jit(lambda a, c: wasserstein.wasserstein(a, c, 2, solver="hungarian"))
        auct = jax.jit(lambda a, c: wasserstein.wasserstein(a, c, 2))  # the default
        unif = ot.unif(b)

        def pot(x0=x0, x1=x1, unif=unif):
            m = ot.dist(x0.astype(float), x1.astype(float), metric="euclidean")
            return float(np.sqrt(ot.emd2(unif, unif, m * m)))

        vals = [float(hung(a0, a1)), float(auct(a0, a1)), pot()]
        res = interleaved({
            f"jaxkit wasserstein(x0, x1, 2) [default: {default_exact_solver()}]":
                lambda f=auct, a=a0, c=a1: f(a, c).block_until_ready(),
            "jaxkit wasserstein(..., solver='hungarian') [device solver]":
                lambda f=hung, a=a0, c=a1: f(a, c).block_until_ready(),
            "POT ot.emd2": pot}, args.rounds)
        res["values"] = dict(hungarian=vals[0], auction=vals[1], pot=vals[2])
        print(f"  W2 values: hungarian {vals[0]:.6f}, auction {vals[1]:.6f}, POT {vals[2]:.6f}")
        _report(f"exact W_2, B = {b}, {dim}-D, float32", {k: v for k, v in res.items()
                                                          if k != "values"}, "POT ot.emd2", out)


def case_mamba2(args, out):
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import seq

    c = dict(d=64, batch=4, length=64) if args.quick else dict(d=128, batch=8, length=256)
    k = jax.random.key(0)
    p = seq.init_mamba2(k, c["d"], expand=2, d_state=16, head_dim=16, d_conv=4)
    x = jax.random.normal(jax.random.fold_in(k, 1), (c["batch"], c["length"], c["d"]))
    g = jax.random.normal(jax.random.fold_in(k, 2), x.shape)

    def vg(**kw):
        f = jax.jit(jax.value_and_grad(
            lambda p, x: jnp.sum(seq.mamba2_mixer(p, x, **kw) * g), argnums=(0, 1)))
        jax.block_until_ready(f(p, x))
        return lambda: jax.block_until_ready(f(p, x))

    res = interleaved({"jaxkit mamba2_mixer(p, x) [default: chunked, chunk 64]": vg(),
                       "jaxkit mamba2_mixer(..., chunk=32) [benchmarked]": vg(chunk=32),
                       "jaxkit mamba2_mixer(..., mode='sequential')": vg(mode="sequential")},
                      args.rounds)
    _report(f"Mamba-2 mixer fwd+bwd, B{c['batch']} L{c['length']} D{c['d']}", res,
            "jaxkit mamba2_mixer(..., chunk=32) [benchmarked]", out)


def case_lingam(args, out):
    import jax
    from jaxkit.kernels import lingam

    sys.path.insert(0, str(HERE))
    from bench_ica import lingam_w_init, sem_data

    n_sets, n, d = (8, 300, 5) if args.quick else (64, 1000, 10)
    x, _ = sem_data(n_sets, n, d, seed=3)
    w0 = lingam_w_init(range(n_sets), d)
    xj, wj = jax.device_put(x), jax.device_put(w0)
    forms = {}
    for crit, tag in (("bic", "default"), ("bic_sklearn", "benchmarked")):
        ica = jax.jit(jax.vmap(lambda x, w, c=crit: lingam.ica_lingam(
            None, x, w_init=w, max_iter=1000, criterion=c).adjacency))
        direct = jax.jit(jax.vmap(lambda x, c=crit: lingam.direct_lingam(
            x, criterion=c).adjacency))
        jax.block_until_ready((ica(xj, wj), direct(xj)))
        forms[f"ICA-LiNGAM criterion={crit!r} [{tag}]"] = (
            lambda f=ica: jax.block_until_ready(f(xj, wj)))
        forms[f"DirectLiNGAM criterion={crit!r} [{tag}]"] = (
            lambda f=direct: jax.block_until_ready(f(xj)))
    res = interleaved(forms, args.rounds)
    _report(f"ICA-LiNGAM x{n_sets} (n={n}, d={d}), float64, 1 device",
            {k: v for k, v in res.items() if k.startswith("ICA")},
            "ICA-LiNGAM criterion='bic_sklearn' [benchmarked]", out)
    _report(f"DirectLiNGAM x{n_sets} (n={n}, d={d}), float64, 1 device",
            {k: v for k, v in res.items() if k.startswith("Direct")},
            "DirectLiNGAM criterion='bic_sklearn' [benchmarked]", out)


def case_pc(args, out):
    import jax
    from jaxkit.kernels.sem import pc

    sys.path.insert(0, str(HERE))
    from bench_causal_audit import _data
    from causallearn.search.ConstraintBased.PC import pc as cl_pc
    from threadpoolctl import threadpool_limits

    batch = 2 if args.quick else 8
    _, data = _data(batch, 1000, 10)
    xj = data.x
    xs = np.asarray(xj, np.float64)

    def peer(alpha):
        with threadpool_limits(1):
            return [cl_pc(x, alpha, "fisherz", True, 0, 1, show_progress=False).G.graph
                    for x in xs]

    forms = {}
    for alpha, tag in ((0.05, "default"), (0.01, "benchmarked")):
        fn = jax.jit(jax.vmap(lambda x, a=alpha: pc(x, alpha=a)))
        res = jax.tree.map(np.asarray, fn(xj))
        same = [bool((res.skeleton[i] == (g != 0)).all() and (res.arrowheads[i] == (g == 1)
                                                                 ).all())
                for i, g in enumerate(peer(alpha))]
        print(f"  alpha {alpha}: identical CPDAG marks on {np.mean(same):.0%} of datasets")
        forms[f"jaxkit pc(x), alpha={alpha} [{tag}]"] = (
            lambda f=fn: jax.block_until_ready(f(xj)))
        forms[f"causal-learn pc loop, alpha={alpha}"] = lambda a=alpha: peer(a)
    res = interleaved(forms, args.rounds)
    for alpha in (0.05, 0.01):
        sub = {k: v for k, v in res.items() if f"alpha={alpha}" in k}
        _report(f"PC-stable x{batch} (n=1000, d=10), alpha {alpha}", sub,
                f"causal-learn pc loop, alpha={alpha}", out)


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_defaults", __doc__, CASES,
                               quick_help="small sizes (smoke test)")
    p.add_argument("--rounds", type=int, default=9, help="interleaved timed rounds (9)")
    args = p.parse_args(argv)
    cases = bench.parse_cases(p, args.only, CASES)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    bench.configure_cpu_devices()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    out: dict = {}
    for name in cases:
        globals()[f"case_{name}"](args, out)
    load1 = os.getloadavg()
    print(f"\nload average before {load0}, after {load1}; wall {time.perf_counter() - t0:.0f} s")
    if args.json:
        env = bench.environment(roofline=False)
        path = bench.write_json(args.json, dict(environment=env, results=out,
                                                loadavg_before=load0, loadavg_after=load1))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
