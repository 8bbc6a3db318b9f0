"""FastICA / ICA-LiNGAM / DirectLiNGAM: jaxkit against scikit-learn and lingam on CPU.

Run ``python benchmarks/bench_ica.py [--quick] [--json FILE] [--runs N] [--only CASES]``
(or ``jaxkit bench ica``). Cases (``--only`` takes a comma list):

* ``default``   -- the headline: the call a user writes, ``jit(vmap(fastica(key, x)))`` with
  the kernel's defaults on 128 float32 datasets (2000, 10), interleaved with
  scikit-learn's ``FastICA()`` defaults in a loop (``benchmarks/_ica_default_case.py``).
* ``batched``   -- 256 datasets (n=2000, d=10, Laplace/uniform sources, random mixing):
  ``jit(vmap(fastica))`` on one CPU device and ``sharded_vmap`` over the CPU devices;
  against scikit-learn's ``FastICA`` loop (same ``w_init``, ``--solver``, ``tol``,
  ``max_iter``) at 1 BLAS thread, default threads, and joblib (a process per core).
* ``batched32`` -- the same in float32 on both sides.
* ``large``     -- one dataset n=200,000, d=50: ``fastica`` vs ``FastICA``.
* ``lingam``    -- ICA-LiNGAM and DirectLiNGAM end to end (64 ER graphs, d=10, n=1000,
  ~2 edges/node, Laplace noise, weights +-U[0.5, 2]), per dataset and batched, against
  ``lingam`` in ``benchmarks/.peer-venv-lingam`` via ``peers/lingam_worker.py``.
* ``bootstrap`` -- DirectLiNGAM bootstrap, 100 resamples of (1000, 6): ``lingam.bootstrap``
  (one ``jit(vmap)``; and sharded) against ``DirectLiNGAM().bootstrap`` (1 BLAS thread).

Both sides get the same data; float64 unless the case says float32. Accuracy (Amari
distance, n_iter, SHD/F1) is printed next to the times.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peer-venv-lingam"
WORKER = HERE / "peers" / "lingam_worker.py"
LINGAM_SPEC = "lingam==1.13.0"
CASES = ("default", "batched", "batched32", "large", "lingam", "bootstrap")


def _configure_jax() -> int:
    from jaxkit.bench import configure_cpu_devices

    return configure_cpu_devices()


# ----------------------------------------------------------------------------- data


def ica_data(n_sets: int, n: int, d: int, seed: int, dtype=np.float64):
    """Sources alternate Laplace / uniform (unit variance); mixing ~ N(0, 1);
    ``w_init`` ~ N(0, 1) per dataset. Returns x (B, n, d), mixing (B, d, d), w0 (B, d, d).
    """
    rng = np.random.default_rng(seed)
    s = np.empty((n_sets, n, d))
    for j in range(d):
        if j % 2 == 0:
            s[:, :, j] = rng.laplace(scale=1 / np.sqrt(2), size=(n_sets, n))
        else:
            s[:, :, j] = rng.uniform(-np.sqrt(3), np.sqrt(3), size=(n_sets, n))
    a = rng.normal(size=(n_sets, d, d))
    x = np.einsum("bnj,bij->bni", s, a)
    w0 = rng.normal(size=(n_sets, d, d))
    return x.astype(dtype), a, w0.astype(dtype)


def sem_data(n_sets: int, n: int, d: int, seed: int, edges_per_node: float = 2.0):
    """Linear SEMs on Erdos-Renyi DAGs (expected ``edges_per_node * d`` edges), Laplace
    noise, weights +-U[0.5, 2]. ``b[i, j]`` = effect of j on i (lingam's convention).
    Returns x (B, n, d), b (B, d, d)."""
    rng = np.random.default_rng(seed)
    p = min(1.0, 2 * edges_per_node / (d - 1))
    xs, bs = [], []
    for _ in range(n_sets):
        lower = np.tril(rng.random((d, d)) < p, k=-1)
        w = rng.uniform(0.5, 2.0, size=(d, d)) * rng.choice([-1.0, 1.0], size=(d, d))
        perm = rng.permutation(d)
        b = (lower * w)[np.ix_(perm, perm)]
        e = rng.laplace(scale=1 / np.sqrt(2), size=(n, d))
        x = np.linalg.solve(np.eye(d) - b, e.T).T
        xs.append(x)
        bs.append(b)
    return np.stack(xs), np.stack(bs)


def lingam_w_init(seeds, d: int) -> np.ndarray:
    """The ``w_init`` scikit-learn's FastICA draws inside ``ICALiNGAM(random_state=s)``."""
    return np.stack([np.random.RandomState(int(s)).normal(size=(d, d)) for s in seeds])


# ---------------------------------------------------------------------------- peers


def _sk_fastica(x, w0, solver, max_iter, tol):
    import warnings

    from sklearn.decomposition import FastICA
    from sklearn.exceptions import ConvergenceWarning

    m = FastICA(n_components=x.shape[1], w_init=w0, whiten_solver=solver, max_iter=max_iter,
                tol=tol, whiten="unit-variance")
    with warnings.catch_warnings():  # non-convergence is reported through n_iter
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(x)
    return m.components_, m.n_iter_


def _sk_loop(xs, w0s, solver, max_iter, tol):
    out = [_sk_fastica(x, w, solver, max_iter, tol) for x, w in zip(xs, w0s, strict=True)]
    return np.stack([o[0] for o in out]), np.array([o[1] for o in out])


def _sk_loop_1thread(xs, w0s, solver, max_iter, tol):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _sk_loop(xs, w0s, solver, max_iter, tol)


def _sk_joblib(xs, w0s, solver, max_iter, tol, n_jobs):
    """One worker process per core, each limited to 1 BLAS thread (joblib/loky)."""
    import cloudpickle  # what joblib's loky backend pickles with
    from joblib import Parallel, delayed

    module = sys.modules[__name__]
    if __name__ != "__main__":  # imported by path (e.g. `jaxkit bench ica`): workers
        cloudpickle.register_pickle_by_value(module)  # cannot import it by name
    chunks = np.array_split(np.arange(len(xs)), n_jobs)
    out = Parallel(n_jobs=n_jobs)(
        delayed(_sk_loop_1thread)(xs[c], w0s[c], solver, max_iter, tol) for c in chunks)
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


# ---------------------------------------------------------------------------- cases


def _amari(comps, mixing) -> np.ndarray:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels.ica import amari_distance

    return np.asarray(jax.vmap(amari_distance)(jnp.asarray(comps, jnp.float64),
                                               jnp.asarray(mixing)))


def _amari_median(comps, mixing) -> float:
    """Median Amari distance over the datasets with a finite result."""
    d = _amari(comps, mixing)
    return float(np.median(d[np.isfinite(d)])) if np.isfinite(d).any() else float("nan")


def _n_bad(comps) -> int:
    """Datasets whose components contain NaN/inf."""
    c = np.asarray(comps, np.float64)
    return int(np.sum(~np.all(np.isfinite(c.reshape(c.shape[0], -1)), axis=1)))


def _rel_diffs(a, b) -> np.ndarray:
    """Per dataset: max |a - b| / max |b| (a, b of shape (B, k, d))."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.max(np.abs(a - b), axis=(1, 2)) / np.max(np.abs(b), axis=(1, 2))


def _sharded(one, data):
    """``vmap(one)`` split over all CPU devices (:func:`jaxkit.distributed.sharded_vmap`):
    the jitted global function and the inputs placed (padded if needed) on the mesh."""
    from jaxkit import distributed as jd

    mesh = jd.make_mesh()
    placed, _ = jd.shard_batch(tuple(data), mesh)
    return jd.sharded_vmap(one, mesh).global_fn, placed


def case_batched(args, dtype, rows, results):
    import jax
    from jaxkit.kernels.ica import fastica

    from jaxkit import bench

    n_sets, n, d = (16, 500, 6) if args.quick else (256, 2000, 10)
    solver, max_iter, tol = args.solver, 200, 1e-4
    tag = "float64" if dtype == np.float64 else "float32"
    name = f"FastICA x{n_sets} (n={n}, d={d}, {solver})"
    x, a, w0 = ica_data(n_sets, n, d, seed=0, dtype=dtype)

    def one(x, w0):
        r = fastica(None, x, w_init=w0, whiten_solver=solver, max_iter=max_iter, tol=tol)
        return r.components, r.mixing, r.n_iter, r.converged

    batched = jax.vmap(one)
    rec1 = bench.time_jax(batched, x, w0, n_runs=args.runs, items=n_sets,
                          name="jaxkit vmap, 1 device")
    comps, _, n_iter, conv = jax.jit(batched)(x, w0)
    jax_recs = [("1 CPU device", rec1)]
    ndev = jax.device_count()
    if ndev > 1:
        sharded, placed = _sharded(one, (x, w0))
        rec_n = bench.time_jax(sharded, *placed, n_runs=args.runs, items=n_sets,
                               name=f"jaxkit sharded_vmap over {ndev} devices")
        jax_recs.append((f"{ndev} CPU devices", rec_n))

    peer_args = (x, w0, solver, max_iter, tol)
    prun = args.peer_runs
    sk1 = bench.time_python(_sk_loop_1thread, *peer_args, n_runs=prun, items=n_sets,
                            name="sklearn loop, 1 thread")
    skd = bench.time_python(_sk_loop, *peer_args, n_runs=prun, items=n_sets,
                            name="sklearn loop, default threads")
    sk_comps, sk_iter = _sk_loop_1thread(*peer_args)
    peers = [("sklearn loop, 1 thread", sk1), ("sklearn loop, default threads", skd)]
    if ndev > 1:
        label = f"sklearn joblib {ndev} procs x 1 thread"
        try:
            skj = bench.time_python(_sk_joblib, *peer_args, ndev, n_runs=prun, items=n_sets,
                                    name=label)
            peers.append((label, skj))
        except Exception as e:  # noqa: BLE001 - a broken process pool must not end the run
            print(f"{label} skipped: {type(e).__name__}: {e}", file=sys.stderr)

    am_j, am_s = _amari_median(comps, a), _amari_median(sk_comps, a)
    bad_j, bad_s = _n_bad(comps), _n_bad(sk_comps)
    n_iter, conv = np.asarray(n_iter), np.asarray(conv)
    rd = _rel_diffs(comps, sk_comps)
    ok = np.isfinite(rd)
    nan_j = f"; NaN in {bad_j} sets" if bad_j else ""
    nan_s = f"; NaN in {bad_s} sets" if bad_s else ""
    acc_j = (f"Amari med {am_j:.1e}{nan_j}; n_iter mean/max {n_iter.mean():.2f}/{n_iter.max()}; "
             f"conv {conv.mean():.1%}; rel diff to sklearn med {np.median(rd[ok]):.0e}, "
             f"max {rd[ok].max():.0e}, > 1e-6 in {int(np.sum(rd[ok] > 1e-6))} sets")
    acc_s = (f"Amari med {am_s:.1e}{nan_s}; n_iter mean/max {sk_iter.mean():.2f}/"
             f"{sk_iter.max()}")
    for jlabel, jrec in jax_recs:
        for plabel, prec in peers:
            rows.append(dict(case=f"{name} [{jlabel}]", dtype=tag, jax=jrec, peer=prec,
                             peer_name=plabel, acc_jax=acc_j, acc_peer=acc_s))
    results[f"batched_{tag}"] = dict(
        config=dict(n_sets=n_sets, n=n, d=d, solver=solver, max_iter=max_iter, tol=tol,
                    dtype=tag),
        jaxkit={k: r for k, r in jax_recs}, peers={k: r for k, r in peers},
        accuracy=dict(amari_median_jaxkit=am_j, amari_median_sklearn=am_s,
                      n_iter_mean_jaxkit=float(n_iter.mean()), n_iter_max_jaxkit=int(n_iter.max()),
                      n_iter_mean_sklearn=float(sk_iter.mean()),
                      n_iter_max_sklearn=int(sk_iter.max()),
                      n_iter_equal_fraction=float(np.mean(n_iter == sk_iter)),
                      converged_fraction=float(conv.mean()),
                      nonfinite_sets_jaxkit=bad_j, nonfinite_sets_sklearn=bad_s,
                      rel_diff_components_median=float(np.median(rd[ok])),
                      rel_diff_components_max=float(rd[ok].max()),
                      rel_diff_components_gt_1e6=int(np.sum(rd[ok] > 1e-6))))


def case_large(args, rows, results):
    import jax
    from jaxkit.kernels.ica import fastica

    from jaxkit import bench

    n, d = (20_000, 20) if args.quick else (200_000, 50)
    solver, max_iter, tol = args.solver, 200, 1e-4
    x, a, w0 = ica_data(1, n, d, seed=1)
    x, a, w0 = x[0], a[0], w0[0]

    def one(x, w0):
        r = fastica(None, x, w_init=w0, whiten_solver=solver, max_iter=max_iter, tol=tol)
        return r.components, r.mixing, r.n_iter, r.converged

    runs = max(3, args.runs // 4)
    rec = bench.time_jax(one, x, w0, n_runs=runs, items=1, name="jaxkit fastica")
    comps, _, n_iter, conv = jax.jit(one)(x, w0)
    skd = bench.time_python(lambda: _sk_fastica(x, w0, solver, max_iter, tol),
                            n_runs=args.peer_runs, name="sklearn, default threads")
    from threadpoolctl import threadpool_limits

    def sk1():
        with threadpool_limits(1):
            return _sk_fastica(x, w0, solver, max_iter, tol)

    sk1r = bench.time_python(sk1, n_runs=args.peer_runs, name="sklearn, 1 thread")
    sk_comps, sk_iter = _sk_fastica(x, w0, solver, max_iter, tol)
    am_j, am_s = _amari_median(comps[None], a[None]), _amari_median(sk_comps[None], a[None])
    acc_j = (f"Amari {am_j:.1e}; n_iter {int(n_iter)}; conv {bool(conv)}; "
             f"rel diff to sklearn {float(_rel_diffs(comps[None], sk_comps[None])[0]):.0e}")
    acc_s = f"Amari {am_s:.1e}; n_iter {int(sk_iter)}"
    name = f"FastICA 1 dataset (n={n}, d={d}, {solver})"
    for plabel, prec in (("sklearn, default threads", skd), ("sklearn, 1 thread", sk1r)):
        rows.append(dict(case=name, dtype="float64", jax=rec, peer=prec, peer_name=plabel,
                         acc_jax=acc_j, acc_peer=acc_s))
    results["large"] = dict(
        config=dict(n=n, d=d, solver=solver, max_iter=max_iter, tol=tol, dtype="float64"),
        jaxkit=rec, peers={"sklearn, default threads": skd, "sklearn, 1 thread": sk1r},
        accuracy=dict(amari_jaxkit=am_j, amari_sklearn=am_s, n_iter_jaxkit=int(n_iter),
                      n_iter_sklearn=int(sk_iter), converged=bool(conv),
                      max_rel_diff_components=float(_rel_diffs(comps[None], sk_comps[None])[0])))


def ensure_lingam_venv(venv: Path = VENV, timeout: float = 1800) -> Path:
    """Create (once) the isolated venv with ``lingam==1.13.0``; return its python.
    Raises ``RuntimeError`` with the reason when that is impossible (e.g. offline)."""
    from jaxkit.bench import ensure_peer_venv

    return ensure_peer_venv(
        venv, [LINGAM_SPEC, "threadpoolctl"],
        "import lingam, threadpoolctl; assert lingam.__version__ == '1.13.0'", timeout=timeout)


def run_lingam_worker(py: Path, x, seeds, methods, runs: int) -> dict:
    import json

    from jaxkit.bench import peer_env

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.npz", Path(tmp) / "out.json"
        np.savez(data, x=x, seeds=seeds)
        cmd = [str(py), str(WORKER), str(data), str(out), "--methods", ",".join(methods),
               "--runs", str(runs)]
        p = subprocess.run(cmd, env=peer_env(), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"lingam worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        print(p.stdout.strip(), flush=True)
        return json.loads(out.read_text())


def _edge_summary(true, est) -> dict:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels.graph import edge_metrics

    m = jax.vmap(edge_metrics)(jnp.asarray(true), jnp.asarray(est))
    return dict(shd_median=float(np.median(np.asarray(m["shd"]))),
                shd_mean=float(np.mean(np.asarray(m["shd"]))),
                f1_median=float(np.median(np.asarray(m["f1"]))),
                f1_mean=float(np.mean(np.asarray(m["f1"]))))


def _fmt_edges(s: dict) -> str:
    return (f"SHD med/mean {s['shd_median']:.0f}/{s['shd_mean']:.2f}; "
            f"F1 med/mean {s['f1_median']:.3f}/{s['f1_mean']:.3f}")


def _peer_record(times, items, name):
    from jaxkit import bench

    return bench.record_from_times(name, times, warmup=1, items=items)


def case_lingam(args, rows, results):
    import jax
    import jax.numpy as jnp

    from jaxkit import bench

    try:
        from jaxkit.kernels.lingam import direct_lingam, ica_lingam
    except ImportError as e:  # the kernel is not there yet
        for c in ("ICA-LiNGAM", "DirectLiNGAM"):
            rows.append(dict(case=c, dtype="float64", skipped=f"jaxkit.kernels.lingam: {e}"))
        return

    n_sets, n, d = (8, 500, 6) if args.quick else (64, 1000, 10)
    x, b_true = sem_data(n_sets, n, d, seed=2)
    seeds = np.arange(n_sets) + 1000
    w0 = lingam_w_init(seeds, d)
    crit = args.criterion
    cfg = dict(n_sets=n_sets, n=n, d=d, graph="ER ~2 edges/node", noise="laplace",
               weights="+-U[0.5,2]", criterion=crit, dtype="float64")

    def ica_one(x, w):
        r = ica_lingam(None, x, w_init=w, prune=True, max_iter=1000, criterion=crit)
        return r.adjacency, r.n_iter, r.converged

    def direct_one(x):
        return direct_lingam(x, prune=True, criterion=crit).adjacency

    methods = {
        "ica": ("ICA-LiNGAM", ica_one, (x, w0)),
        "direct": ("DirectLiNGAM", direct_one, (x,)),
    }
    jres = {}
    for key, (label, one, data) in methods.items():
        single = bench.time_jax(one, *(v[0] for v in data), n_runs=args.runs, items=1,
                                name=f"jaxkit {label}, 1 dataset")
        batched_fn = jax.vmap(one)
        batched = bench.time_jax(batched_fn, *data, n_runs=max(3, args.runs // 2),
                                 items=n_sets, name=f"jaxkit {label}, vmap x{n_sets}")
        recs = {"1 dataset": single, f"vmap x{n_sets}, 1 device": batched}
        ndev = jax.device_count()
        if ndev > 1:
            sharded, placed = _sharded(one, data)
            recs[f"sharded x{n_sets}, {ndev} devices"] = bench.time_jax(
                sharded, *placed, n_runs=max(3, args.runs // 2), items=n_sets,
                name=f"jaxkit {label}, sharded_vmap x{n_sets} over {ndev} devices")
        out = jax.jit(batched_fn)(*(jnp.asarray(v) for v in data))
        adj = np.asarray(out[0] if isinstance(out, tuple) else out)
        extra = ""
        if isinstance(out, tuple):
            extra = (f"; ICA n_iter mean/max {np.mean(np.asarray(out[1])):.1f}/"
                     f"{int(np.max(np.asarray(out[1])))}")
        jres[key] = dict(recs=recs, edges=_edge_summary(b_true, adj), extra=extra)

    try:
        py = ensure_lingam_venv()
        peer = run_lingam_worker(py, x, seeds, list(methods), runs=args.peer_runs_lingam)
    except RuntimeError as e:
        reason = f"lingam peer unavailable: {e}"
        print(reason, file=sys.stderr)
        for key, (label, _, _) in methods.items():
            r = jres[key]
            for jl, jrec in r["recs"].items():
                rows.append(dict(case=f"{label} [{jl}]", dtype="float64", jax=jrec, peer=None,
                                 peer_name="lingam: skipped", acc_jax=_fmt_edges(r["edges"])
                                 + r["extra"], acc_peer=reason))
        results["lingam"] = dict(config=cfg, skipped=reason,
                                 jaxkit={k: v["recs"] for k, v in jres.items()})
        return

    results["lingam"] = dict(config=cfg, peer_versions=peer["versions"],
                             peer_threadpools=peer.get("threadpools"), methods={})
    for key, (label, _, _) in methods.items():
        r = jres[key]
        pr = peer["results"][key]
        p_recs, p_edges = {}, {}
        for threads, tlabel in (("1", "1 thread"), ("default", "default threads")):
            loop = pr[threads]["loop_times_s"]
            per_fit = [t for run in pr[threads]["fit_times_s"] for t in run]
            p_recs[f"loop, {tlabel}"] = _peer_record(loop, n_sets, f"lingam loop, {tlabel}")
            p_recs[f"per fit, {tlabel}"] = _peer_record(per_fit, 1,
                                                        f"lingam per fit, {tlabel}")
            p_edges[threads] = _edge_summary(b_true, np.asarray(pr[threads]["adjacency"]))
        acc_j = _fmt_edges(r["edges"]) + r["extra"]
        acc_p = _fmt_edges(p_edges["1"])
        for jl, jrec in r["recs"].items():
            kind = "per fit" if jl == "1 dataset" else "loop"
            for tlabel in ("1 thread", "default threads"):
                rows.append(dict(case=f"{label} [{jl}]", dtype="float64", jax=jrec,
                                 peer=p_recs[f"{kind}, {tlabel}"],
                                 peer_name=f"lingam {kind}, {tlabel}",
                                 acc_jax=acc_j, acc_peer=acc_p))
        results["lingam"]["methods"][key] = dict(
            jaxkit=r["recs"], peers=p_recs,
            accuracy=dict(jaxkit=r["edges"], lingam_1thread=p_edges["1"],
                          lingam_default=p_edges["default"]))


def run_bootstrap_worker(py: Path, x, n_sampling: int, runs: int) -> dict:
    import json

    from jaxkit.bench import peer_env

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.npz", Path(tmp) / "out.json"
        np.savez(data, x=x)
        cmd = [str(py), str(WORKER), "--bootstrap", str(data), str(out), "--n-sampling",
               str(n_sampling), "--runs", str(runs), "--methods", "direct"]
        p = subprocess.run(cmd, env=peer_env(), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"lingam worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        print(p.stdout.strip(), flush=True)
        return json.loads(out.read_text())


def case_bootstrap(args, rows, results):
    import jax
    from jaxkit.kernels.lingam import bootstrap

    from jaxkit import bench

    n_samp, n, d = (10, 300, 4) if args.quick else (100, 1000, 6)
    x, b_true = sem_data(1, n, d, seed=4)
    x, b_true = x[0], b_true[0]
    crit = args.criterion
    key = jax.random.key(0)

    def boot(x):
        r = bootstrap(key, x, n_samp, method="direct", criterion=crit)
        return r.adjacency_matrices

    runs = max(3, args.runs // 4)
    rec = bench.time_jax(boot, x, n_runs=runs, items=n_samp,
                         name=f"jaxkit bootstrap x{n_samp} (vmap, 1 device)")
    adj = np.asarray(jax.jit(boot)(x))
    p_j = np.mean(adj != 0, axis=0)
    recs = {"vmap, 1 device": rec}
    ndev = jax.device_count()
    if ndev > 1 and n_samp % ndev == 0:
        from jaxkit.kernels.lingam import direct_lingam

        from jaxkit import distributed as jd

        mesh = jd.make_mesh()
        idx = jax.random.randint(key, (n_samp, n), 0, n)
        placed, _ = jd.shard_batch((idx,), mesh)

        xj = jax.numpy.asarray(x)

        def one(rows):
            return direct_lingam(xj[rows], criterion=crit).adjacency

        sharded = jd.sharded_vmap(one, mesh).global_fn
        recs[f"sharded over {ndev} devices"] = bench.time_jax(
            sharded, *placed, n_runs=runs, items=n_samp,
            name=f"jaxkit bootstrap x{n_samp} (sharded_vmap, {ndev} devices)")
    true_edges = b_true != 0
    acc_j = (f"edge prob. on true edges mean {p_j[true_edges].mean():.3f}, on absent "
             f"{p_j[~true_edges & ~np.eye(d, dtype=bool)].mean():.3f}")
    cfg = dict(n_sampling=n_samp, n=n, d=d, method="direct", criterion=crit, dtype="float64")
    try:
        py = ensure_lingam_venv()
        peer = run_bootstrap_worker(py, x, n_samp, runs=1 if args.quick else 2)
    except RuntimeError as e:
        reason = f"lingam peer unavailable: {e}"
        for jl, jrec in recs.items():
            rows.append(dict(case=f"DirectLiNGAM bootstrap x{n_samp} [{jl}]", dtype="float64",
                             jax=jrec, peer=None, peer_name="lingam: skipped", acc_jax=acc_j,
                             acc_peer=reason))
        results["bootstrap"] = dict(config=cfg, skipped=reason, jaxkit=recs)
        return
    pr = peer["direct"]
    p_p = np.asarray(pr["probabilities"])
    prec = _peer_record(pr["times_s"], n_samp, "lingam DirectLiNGAM().bootstrap, 1 thread")
    acc_p = (f"edge prob. on true edges mean {p_p[true_edges].mean():.3f}, on absent "
             f"{p_p[~true_edges & ~np.eye(d, dtype=bool)].mean():.3f}; max |p_jaxkit - "
             f"p_lingam| {np.abs(p_j - p_p).max():.2f}")
    for jl, jrec in recs.items():
        rows.append(dict(case=f"DirectLiNGAM bootstrap x{n_samp} [{jl}]", dtype="float64",
                         jax=jrec, peer=prec, peer_name="lingam bootstrap, 1 thread",
                         acc_jax=acc_j, acc_peer=acc_p))
    results["bootstrap"] = dict(config=cfg, peer_versions=peer["versions"], jaxkit=recs,
                                peer=prec, probabilities_jaxkit=p_j.tolist(),
                                probabilities_lingam=p_p.tolist())


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_ica", __doc__, CASES,
                               quick_help="small sizes (smoke test)")
    p.add_argument("--runs", type=int, default=20,
                   help="steady-state runs for jaxkit (default 20; fewer for the slow cases)")
    p.add_argument("--peer-runs", type=int, default=5, help="timed runs per peer (default 5)")
    p.add_argument("--peer-runs-lingam", type=int, default=3,
                   help="timed loops per lingam configuration (default 3)")
    p.add_argument("--solver", choices=("eigh", "svd"), default="svd",
                   help="whitening solver of the other cases, both sides (default svd, the "
                        "kernel's and scikit-learn's default)")
    p.add_argument("--sets", type=int, default=128, help="datasets of the default case")
    p.add_argument("--criterion", choices=("bic", "bic_sklearn"), default="bic_sklearn",
                   help="jaxkit LiNGAM pruning criterion (bic_sklearn = lingam's LassoLarsIC)")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = sorted(set(cases) - set(CASES))
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    if args.runs < 1 or args.peer_runs < 1 or args.sets < 1:
        p.error("--runs, --peer-runs and --sets must be >= 1")

    _configure_jax()
    from jaxkit import bench

    env = bench.environment()
    rows, results = [], {}
    t0 = time.perf_counter()
    if "default" in cases:
        sys.path.insert(0, str(HERE))  # also when imported by path (`jaxkit bench ica`)
        from _ica_default_case import case_default

        case_default(args, rows, results, ica_data, _amari_median, _sharded)
    if "batched" in cases:
        case_batched(args, np.float64, rows, results)
    if "batched32" in cases:
        case_batched(args, np.float32, rows, results)
    if "large" in cases:
        case_large(args, rows, results)
    if "lingam" in cases:
        case_lingam(args, rows, results)
    if "bootstrap" in cases:
        case_bootstrap(args, rows, results)
    bench.print_table(rows, title="jaxkit ICA family vs CPU peers (speed-up = peer / jaxkit)")
    print(f"environment: jax {env['jax']} {env['backend']} x{env['device_count']} devices, "
          f"{env['cpu_count']} CPUs ({env['cpu_model']}); wall {time.perf_counter() - t0:.0f} s")
    if args.json:
        path = bench.write_json(args.json, dict(
            environment=env, argv=sys.argv if argv is None else argv, quick=args.quick,
            results=results, rows=rows, table_markdown=bench.table_markdown(rows)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
