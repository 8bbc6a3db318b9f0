"""causal-audit: one grid cell as one vmapped batch, against the same work dataset by
dataset and against the CausalDisco peer.

Run ``python benchmarks/bench_causal_audit.py [--quick] [--json FILE] [--no-peers]
[--only CASES] [--batch B] [--n N] [--d D] [--runs R]`` (or ``jaxkit bench
causal-audit``). Cases:

* ``sortability`` -- var- and R^2-sortability of ``B`` simulated datasets:
  ``jit(vmap(...))`` over the batch against CausalDisco 0.2.4's ``var_sortability`` and
  ``r2_sortability`` (NumPy) in a Python loop; the values must agree (max abs diff).
* ``floors`` -- Var-SortnRegress and R^2-SortnRegress on the batch: jaxkit vmapped
  against CausalDisco's ``var_sort_regress`` / ``r2_sort_regress`` (scikit-learn
  ``LinearRegression`` + ``LassoLarsIC``) looped; accuracy is the share of adjacency
  entries on which the two supports agree (the pruning differs, see
  ``jaxkit.kernels.sem.sortability.sort_regress``).
* ``pc`` -- PC-stable (Fisher z, alpha 0.01, unrestricted depth) on the batch:
  ``jit(vmap(jaxkit.kernels.sem.pc))`` against causal-learn's ``pc`` (``fisherz``,
  ``stable=True``, ``uc_priority=1``) in a Python loop; accuracy is the share of datasets
  whose skeleton and arrowhead marks are identical (a dataset with conflicting
  orientations may differ: causal-learn applies Meek's rules one edge at a time).
* ``cell`` -- the jax part of one grid cell (simulate ``B`` datasets, both
  sortabilities, the three floors and DirectLiNGAM, F1 scores): one vmapped call against
  the same jitted per-dataset function called ``B`` times (compile time apart).

Times are medians of ``--runs`` calls after a warm-up, ``block_until_ready`` on every
JAX call; the peer runs single-threaded (``threadpool_limits(1)``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

CASES = ("sortability", "floors", "pc", "cell")
PC_ALPHA = 0.01


def _data(batch, n, d, seed=0):
    import jax

    from jaxkit.causal_audit.axes import cell
    from jaxkit.causal_audit.scm import simulate

    spec = cell(n=n, d=d, noise="gaussian", noise_hetero=0.5, edges_per_node=2.0)
    data = simulate(jax.random.key(seed), spec, batch)
    return spec, data


def _peer_sortability(xs, ws):
    from CausalDisco.analytics import r2_sortability, var_sortability
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return np.array([(var_sortability(x, w), r2_sortability(x, w))
                         for x, w in zip(xs, ws, strict=True)])


def _peer_floors(xs):
    from CausalDisco.baselines import r2_sort_regress, var_sort_regress
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return [(var_sort_regress(x), r2_sort_regress(x)) for x in xs]


def case_sortability(args, rows, results, data):
    import jax
    from jaxkit.kernels.sem import sortability as S

    from jaxkit import bench

    fn = jax.jit(jax.vmap(lambda x, b: (S.var_sortability(x, b), S.r2_sortability(x, b))))
    rec = bench.time_jax(fn, data.x, data.b, n_runs=args.runs, items=args.batch,
                         name="jaxkit vmap")
    v, r = map(np.asarray, fn(data.x, data.b))
    row = dict(case=f"var+R2 sortability x{args.batch} (n={args.n}, d={args.d})",
               dtype=str(data.x.dtype), jax=rec)
    if not args.no_peers:
        xs, ws = np.asarray(data.x, np.float64), np.swapaxes(np.asarray(data.b), 1, 2)
        prec = bench.time_python(_peer_sortability, xs, ws, n_runs=args.peer_runs,
                                 items=args.batch, name="CausalDisco loop")
        ref = _peer_sortability(xs, ws)
        diff = float(np.max(np.abs(np.stack([v, r], 1) - ref)))
        row.update(peer=prec, peer_name="CausalDisco loop, 1 thread",
                   acc_jax=f"max |diff| to peer {diff:.1e}")
    rows.append(row)
    results["sortability"] = row


def case_floors(args, rows, results, data):
    import jax
    from jaxkit.kernels.sem import sortability as S

    from jaxkit import bench

    fn = jax.jit(jax.vmap(lambda x: (S.var_sort_regress(x).adjacency,
                                     S.r2_sort_regress(x).adjacency)))
    rec = bench.time_jax(fn, data.x, n_runs=args.runs, items=args.batch, name="jaxkit vmap")
    va, ra = map(np.asarray, fn(data.x))
    row = dict(case=f"Var+R2-SortnRegress x{args.batch} (n={args.n}, d={args.d})",
               dtype=str(data.x.dtype), jax=rec)
    if not args.no_peers:
        xs = np.asarray(data.x, np.float64)
        prec = bench.time_python(_peer_floors, xs, n_runs=args.peer_runs, items=args.batch,
                                 name="CausalDisco loop")
        ref = _peer_floors(xs)
        agree = np.mean([((np.abs(va[i]) > 0) == (np.abs(ref[i][0].T) > 0)).mean()
                         for i in range(args.batch)]
                        + [((np.abs(ra[i]) > 0) == (np.abs(ref[i][1].T) > 0)).mean()
                           for i in range(args.batch)])
        row.update(peer=prec, peer_name="CausalDisco loop, 1 thread",
                   acc_jax=f"support agreement with peer {agree:.1%}")
    rows.append(row)
    results["floors"] = row


def _peer_pc(xs):
    from causallearn.search.ConstraintBased.PC import pc
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return [pc(x, PC_ALPHA, "fisherz", True, 0, 1, show_progress=False).G.graph
                for x in xs]


def case_pc(args, rows, results, data):
    import importlib.util

    import jax
    from jaxkit.kernels.sem import pc

    from jaxkit import bench

    fn = jax.jit(jax.vmap(lambda x: pc(x, alpha=PC_ALPHA)))
    rec = bench.time_jax(fn, data.x, n_runs=args.runs, items=args.batch, name="jaxkit vmap")
    out = jax.tree.map(np.asarray, fn(data.x))
    row = dict(case=f"PC-stable (Fisher z) x{args.batch} (n={args.n}, d={args.d})",
               dtype=str(data.x.dtype), jax=rec)
    if not args.no_peers and importlib.util.find_spec("causallearn") is not None:
        xs = np.asarray(data.x, np.float64)
        prec = bench.time_python(_peer_pc, xs, n_runs=args.peer_runs, items=args.batch,
                                 name="causal-learn loop")
        same = [bool((out.skeleton[i] == (g != 0)).all() and (out.arrowheads[i] == (g == 1)).all())
                for i, g in enumerate(_peer_pc(xs))]
        row.update(peer=prec, peer_name="causal-learn pc loop, 1 thread",
                   acc_jax=f"identical CPDAG marks on {np.mean(same):.0%} of datasets")
    rows.append(row)
    results["pc"] = row


def case_cell(args, rows, results, spec):
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import graph as gm
    from jaxkit.kernels import lingam
    from jaxkit.kernels.sem import sortability as S

    from jaxkit import bench
    from jaxkit.causal_audit.scm import params_of, simulate_one

    p = params_of(spec)
    kw = dict(n=spec.n, d=spec.d, graph=spec.graph, max_envs=spec.max_envs)

    def one(key):
        data = simulate_one(key, p, **kw)
        x, b = data.x, data.b
        k2 = jax.random.fold_in(key, 1)
        ests = (S.var_sort_regress(x).adjacency, S.r2_sort_regress(x).adjacency,
                S.random_sort_regress(k2, x).adjacency, lingam.direct_lingam(x).adjacency)
        f1 = jnp.stack([gm.edge_metrics(b, a)["f1"] for a in ests])
        return S.var_sortability(x, b), S.r2_sortability(x, b), f1

    keys = jax.random.split(jax.random.key(0), args.batch)
    batched = jax.jit(jax.vmap(one))
    rec = bench.time_jax(batched, keys, n_runs=args.runs, items=args.batch,
                         name="jaxkit one vmapped cell")
    single = jax.jit(one)
    jax.block_until_ready(single(keys[0]))
    t0 = time.perf_counter()
    single.lower(keys[0]).compile()
    compile_1 = time.perf_counter() - t0

    def loop(ks):
        return [jax.block_until_ready(single(k)) for k in ks]

    lrec = bench.time_python(loop, keys, n_runs=max(1, args.runs // 2), items=args.batch,
                             name="jaxkit dataset by dataset")
    lrec.compile_s = compile_1
    _, _, f1 = batched(keys)
    ref = np.stack([np.asarray(o[2]) for o in loop(keys)])
    diff = float(np.max(np.abs(np.asarray(f1) - ref)))
    row = dict(case=f"grid cell x{args.batch} (simulate, sortabilities, 3 floors, "
               f"DirectLiNGAM, F1; n={args.n}, d={args.d})", dtype=str(keys.dtype), jax=rec,
               peer=lrec, peer_name="same jitted fn, dataset by dataset",
               acc_jax=f"max |F1 diff| batched vs looped {diff:.1e}")
    rows.append(row)
    results["cell"] = row


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_causal_audit", __doc__, CASES,
                               quick_help="small sizes (smoke test)",
                               peers_help="skip the CausalDisco peer")
    p.add_argument("--batch", type=int, default=None, help="datasets per cell (default 256)")
    p.add_argument("--n", type=int, default=None, help="rows per dataset (default 1000)")
    p.add_argument("--d", type=int, default=None, help="variables (default 10)")
    p.add_argument("--runs", type=int, default=None, help="timed runs of jaxkit (default 10)")
    p.add_argument("--peer-runs", type=int, default=3, help="timed runs of a peer (default 3)")
    args = p.parse_args(argv)
    cases = bench.parse_cases(p, args.only, CASES)
    q = args.quick
    args.batch = args.batch or (8 if q else 256)
    args.n = args.n or (100 if q else 1000)
    args.d = args.d or (4 if q else 10)
    args.runs = args.runs or (2 if q else 10)
    if args.quick:
        args.peer_runs = 1
    if min(args.batch, args.n, args.d, args.runs, args.peer_runs) < 1 or args.n < args.d:
        p.error("--batch, --n, --d, --runs, --peer-runs must be >= 1 and n >= d")
    bench.configure_cpu_devices(x64=True)
    env = bench.environment(peers=("CausalDisco", "scikit-learn", "gies",
                                             "causal-learn"))
    rows, results = [], {}
    t0 = time.perf_counter()
    spec, data = _data(args.batch, args.n, args.d)
    if "sortability" in cases:
        case_sortability(args, rows, results, data)
    if "floors" in cases:
        case_floors(args, rows, results, data)
    if "pc" in cases:
        case_pc(args, rows, results, data)
    if "cell" in cases:
        case_cell(args, rows, results, spec)
    bench.finish(rows, env, t0, title="causal-audit (speed-up = peer / jaxkit)",
                 json_path=args.json,
                 payload=dict(argv=sys.argv if argv is None else argv, quick=args.quick,
                              results=results, rows=rows))
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
