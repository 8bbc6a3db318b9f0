"""Misaligned baselines: the whole baseline family over many seeds, jaxkit (vmapped, one
compiled call) against the same baselines with scikit-learn in a Python loop; and the
Tanimoto similarity matrix of 10,000 fingerprints against RDKit's bulk similarity.

Run ``python benchmarks/bench_misaligned.py [--quick] [--json FILE] [--only CASES]
[--seeds S] [--peer-seeds P] [--n-bits D] [--n-fps N]`` (or ``jaxkit bench misaligned``).
Cases:

* ``family`` -- FreeSolv (642 molecules or ``--max-molecules``, ``--n-bits`` 2048 Morgan
  bits), ``--seeds``
  (100) random 80/20 splits; per seed every baseline of
  :data:`jaxkit.misaligned.baselines.BASELINES`: train mean, size only, descriptors,
  label scrambling, shuffled inputs and replaced bits at 5 strengths each, random
  features, 1-NN Tanimoto, AddCarbon test inputs at 3 strengths, the noise ceiling and
  the fingerprint ridge (lambda 3). jaxkit: ``run_family`` in one jitted call (seeds
  mapped one at a time, as the pipeline: 4 at a time hangs XLA:CPU at random) on
  ``family_data`` (the Gram and Tanimoto matrices, computed once
  per data set, eagerly, before timing; its time is printed and stored as
  ``family_data_s``).
  Peer: the same computations with scikit-learn 1 seed at a time (``LinearRegression``,
  ``StandardScaler`` + ``Ridge``, ``Ridge(alpha=3)`` on the fingerprints, which solves
  in the dual when bits > molecules, ``KNeighborsRegressor(n_neighbors=1,
  metric="jaccard")``), on the same splits, permutations and perturbed inputs (drawn
  with NumPy; jaxkit draws its own with its keys, so predictions agree only for the
  deterministic baselines, which are compared). Both sides skip the same redundant
  work: the ridge on the true and on the scrambled labels is one fit (jaxkit: one
  Cholesky factor; scikit-learn: one ``Ridge`` with two targets), AddCarbon queries
  that fit, the fraction-0 points of both curves are that ridge (nothing moves), and
  at fraction 1 no replacement mask is drawn (every bit is replaced). Per seed that is
  10 fingerprint-ridge fits, 5 Gram matrices of perturbed fingerprints, the 1-NN
  search and the small fits (before this change jaxkit solved 16 ridges and 6 Gram
  matrices per seed, the peer fitted 13 ridges).
  The peer loop runs ``--peer-seeds`` (4) seeds after a run on half as many (a Python
  loop's time is linear in the seeds: both per-seed times and their ratio are printed
  and stored), and its time is scaled to ``--seeds``; the speed-up is the ratio at
  equal work (per seed), in wall and in CPU time. jaxkit's LAPACK calls (jaxlib's CPU
  Cholesky and triangular solves, in scipy's OpenBLAS) run with ``--blas-threads`` (1,
  as the pipeline): OpenBLAS's idle threads spin, which cost the family 5x its CPU time
  (2.75 s instead of 0.5 s per seed at 642 molecules, under load 13). AddCarbon
  fingerprints (RDKit, host) are made once before timing and shared.
* ``tanimoto`` -- the ``--n-fps`` x ``--n-fps`` (10,000) similarity matrix of Morgan
  fingerprints (2048 bits) of RDKit's NCI ``first_5K.smi``, the three data sets and
  AddCarbon variants to make up the number: ``kernels.fingerprint.tanimoto_matrix``
  (float32 matmul) and ``tanimoto_matrix_packed`` (uint32 popcount) against
  ``DataStructs.BulkTanimotoSimilarity`` called once per row (RDKit's C++ loop) on
  ``--rdkit-rows`` rows (all), its time scaled to the whole matrix (linear in rows; the
  per-row time is printed); max |difference| on those rows reported.

Every case's numbers are appended as one JSON line to ``--lines`` (default next to
``--json``) as soon as they are measured, so a run cut short keeps what it finished.

``--quick``: 200 of the FreeSolv molecules, 10 seeds (peer 1 and 3), 512 bits, 1,500
fingerprints (about 1 minute on a quiet 2-core machine). Full size: 3 timed runs of
each jaxkit case, 1 of each peer.
Target on a 2-core CPU: family >= 10x the scikit-learn loop.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

CASES = ("family", "tanimoto")
LAM = 3.0
FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
ADDC = (1, 2, 3)


def _dataset(n_bits: int, max_molecules: int | None):
    from jaxkit.data import molecules
    from jaxkit.misaligned.features import featurise

    s, y, info = molecules.load("freesolv")
    if max_molecules is not None and max_molecules < len(s):
        keep = np.sort(np.random.default_rng(0).permutation(len(s))[:max_molecules])
        s, y = [s[i] for i in keep], y[keep]
    return featurise(s, y, name="freesolv", n_bits=n_bits, info=info)


def sklearn_family(data, train, test, rng, addc, sigma):
    """The baseline family for one seed with scikit-learn / NumPy: ``{name: pred}``
    (curves as ``(strengths, n)``)."""
    from sklearn.linear_model import LinearRegression, Ridge
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y, n = data.fp.astype(np.float64), data.y, data.n
    ridge = lambda xx, yy: Ridge(alpha=LAM).fit(xx[train], yy[train])  # noqa: E731
    out = {"train_mean": np.full(n, y[train].mean())}
    out["size_only"] = LinearRegression().fit(data.desc[train, :2], y[train]).predict(
        data.desc[:, :2])
    out["descriptors"] = make_pipeline(StandardScaler(), Ridge(alpha=1e-3)).fit(
        data.desc[train], y[train]).predict(data.desc)
    # the true and the scrambled labels in one fit (two targets share the dual solve's
    # Gram matrix and factorisation, as jaxkit's one Cholesky factor)
    ys = y.copy()
    idx = np.flatnonzero(train)
    ys[idx] = y[rng.permutation(idx)]
    base = ridge(x, np.stack([y, ys], axis=1))
    both = base.predict(x)
    out["ridge_fp"], out["label_scramble"] = both[:, 0], both[:, 1]
    shuffled, replaced = [], []
    density = x.mean()
    for p in FRACTIONS:
        if p <= 0:  # nothing moves: the ridge itself (jaxkit skips this fit too)
            shuffled.append(out["ridge_fp"])
            replaced.append(out["ridge_fp"])
            continue
        chosen = np.flatnonzero(rng.random(n) < p)
        perm = np.arange(n)
        perm[chosen] = rng.permutation(chosen)
        shuffled.append(ridge(x[perm], y).predict(x[perm]))
        noise = (rng.random(x.shape) < density).astype(float)
        # every bit replaced at p >= 1: no mask drawn (as jaxkit)
        xr = noise if p >= 1 else np.where(rng.random(x.shape) < p, noise, x)
        replaced.append(ridge(xr, y).predict(xr))
    out["shuffled_inputs"], out["replaced_bits"] = np.stack(shuffled), np.stack(replaced)
    xr = (rng.random(x.shape) < density).astype(float)
    out["random_features"] = ridge(xr, y).predict(xr)
    knn = KNeighborsRegressor(n_neighbors=1, metric="jaccard", algorithm="brute")
    out["nn_tanimoto"] = knn.fit(data.fp[train].astype(bool), y[train]).predict(
        data.fp.astype(bool))
    v = int(rng.integers(addc.shape[1]))
    out["add_carbon"] = np.stack([base.predict(addc[k, v].astype(float))[:, 0]
                                  for k in range(addc.shape[0])])
    out["noise_ceiling"] = y + sigma * rng.standard_normal(n)
    return out


def _peer_loop(data, splits, addc, sigma, seeds: int, rng):
    """The scikit-learn family on the first ``seeds`` splits: (wall s, CPU s, outputs)."""
    t0, c0 = time.perf_counter(), time.process_time()
    outs = [sklearn_family(data, splits.train[s], splits.test[s], rng, addc, sigma)
            for s in range(seeds)]
    return time.perf_counter() - t0, time.process_time() - c0, outs


def case_family(args, rows, results, emit):
    import jax
    import jax.numpy as jnp

    from jaxkit import bench
    from jaxkit.misaligned import baselines as B
    from jaxkit.misaligned.evaluation import add_carbon_fingerprints
    from jaxkit.misaligned.features import random_split
    from jaxkit.pairing import limit_blas

    data = _dataset(args.n_bits, args.max_molecules)
    rng = np.random.default_rng(0)
    splits = random_split(rng, data.n, args.seeds, 0.2)
    addc = add_carbon_fingerprints(data, rng, ADDC, 2)
    sigma = 0.6
    settings = B.FamilySettings(lam=LAM, fractions=FRACTIONS)

    def fam(key, fd, train):
        # one seed at a time, as the pipeline: batched LAPACK calls under vmap hang
        # XLA:CPU at random on 2 cores (kernels/_batching.py)
        return B.run_family(key, fd, train, settings, seed_batch=1)

    fam_j = jax.jit(fam)
    t0 = time.perf_counter()
    fd = jax.block_until_ready(B.family_data(data.y, data.desc, data.fp, addc, sigma))
    prep_s = time.perf_counter() - t0
    args_j = (jax.random.key(0), fd, jnp.asarray(splits.train))
    # jaxlib's CPU Cholesky / triangular solves run in scipy's OpenBLAS, whose idle worker
    # threads spin: with its default 2 threads the family cost 5x the CPU (2.75 s instead
    # of 0.5 s per seed under load 13); the pipeline runs it under limit_blas(1) too.
    # Timed here rather than by bench.time_jax: every call is a minute of CPU at full
    # size, so no untimed warm-up call (the compiled program needs none) and the last
    # timed call's output is the one compared with scikit-learn; CPU time per call too.
    with limit_blas(args.blas_threads):
        t0 = time.perf_counter()
        compiled = fam_j.lower(*args_j).compile()
        compile_s = time.perf_counter() - t0
        times, cpus = [], []
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            out_j = jax.block_until_ready(compiled(*args_j))
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    rec = bench.record_from_times("family", times, items=args.seeds, compile_s=compile_s,
                                  flops=bench._xla_flops(compiled))
    cpu_j = float(np.median(cpus))
    results["family_data_s"] = prep_s
    fam_res = dict(jax=rec, seeds=args.seeds, n=data.n, bits=args.n_bits,
                   jax_per_seed_s=rec.median_s / args.seeds,
                   jax_cpu_per_seed_s=cpu_j / args.seeds, blas_threads=args.blas_threads,
                   family_data_s=prep_s)
    emit("family-jax", fam_res)
    print(f"jaxkit family: {rec.median_s:.2f} s for {args.seeds} seeds "
          f"({rec.median_s / args.seeds * 1e3:.0f} ms wall, {cpu_j / args.seeds * 1e3:.0f} ms "
          f"CPU per seed; compile {rec.compile_s:.1f} s)", flush=True)
    peer = None
    acc_j = acc_p = ""
    if not args.no_peers:
        P = min(args.peer_seeds or args.seeds, args.seeds)
        P1 = max(1, P // 2)
        prng = np.random.default_rng(1)
        with limit_blas(args.peer_blas_threads):
            # linearity check: the loop on P1 and on P seeds, per-seed times compared
            w1, c1, _ = _peer_loop(data, splits, addc, sigma, P1, prng)
            times, cpus = [], []
            for _ in range(args.peer_runs):
                w, c, outs = _peer_loop(data, splits, addc, sigma, P, prng)
                times.append(w * args.seeds / P)
                cpus.append(c)
        peer = bench.record_from_times("sklearn loop", times, items=args.seeds)
        per_seed = float(np.median(times)) / args.seeds
        lin = (w / P) / (w1 / P1)
        diffs = {k: float(np.max(np.abs(np.asarray(out_j[k][:P]) - np.stack(
            [o[k] for o in outs])))) for k in ("train_mean", "size_only", "descriptors",
                                                "ridge_fp", "nn_tanimoto")}
        acc_j = "max |pred diff| " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
        acc_p = (f"peer timed on {P} seeds ({per_seed:.2f} s wall, "
                 f"{np.median(cpus) / P:.2f} s CPU per seed), scaled x{args.seeds / P:g} "
                 f"(a Python loop is linear in the seeds; per-seed time on {P1} vs {P} "
                 f"seeds: {w1 / P1:.2f} vs {w / P:.2f} s, ratio {lin:.2f}); jaxkit "
                 f"family_data {prep_s:.2f} s once")
        results["family_pred_max_diff"] = diffs
        fam_res.update(peer=peer, peer_seeds=P, peer_per_seed_s=per_seed,
                       peer_cpu_per_seed_s=float(np.median(cpus)) / P,
                       linearity=dict(seeds=[P1, P], per_seed_s=[w1 / P1, w / P],
                                      ratio=lin),
                       speedup_equal_work=per_seed / (rec.median_s / args.seeds),
                       cpu_speedup_equal_work=(float(np.median(cpus)) / P)
                       / (cpu_j / args.seeds),
                       peer_blas_threads=args.peer_blas_threads, pred_max_diff=diffs)
        emit("family", fam_res)
        print(f"scikit-learn loop: {acc_p}; speed-up at equal work "
              f"{fam_res['speedup_equal_work']:.1f}x wall, "
              f"{fam_res['cpu_speedup_equal_work']:.1f}x CPU", flush=True)
    results["family"] = fam_res
    rows.append(dict(case=f"family, {args.seeds} seeds, n={data.n}, {args.n_bits} bits",
                     dtype="float32 / float64", jax=rec, peer=peer,
                     peer_name="scikit-learn loop", acc_jax=acc_j, acc_peer=acc_p))


def _many_fps(n: int, n_bits: int) -> tuple[np.ndarray, list]:
    from rdkit import Chem, RDConfig
    from rdkit.Chem import rdFingerprintGenerator

    from jaxkit.data import molecules
    from jaxkit.misaligned.features import add_carbon

    smi = [line.split()[0] for line in
           (Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi").read_text().splitlines()
           if line.strip()]
    for name in molecules.NAMES:
        smi += molecules.load(name)[0]
    rng = np.random.default_rng(0)
    base = [s for s in smi if Chem.MolFromSmiles(s) is not None]  # add_carbon parses its input
    i = 0
    while len(smi) < n + n // 50:  # a few fail to parse
        s = add_carbon(base[i % len(base)], rng, 1 + i // len(base))
        if s is not None:
            smi.append(s)
        i += 1
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    mols = [m for m in (Chem.MolFromSmiles(s) for s in smi[:n * 2]) if m is not None][:n]
    arr = np.stack([gen.GetFingerprintAsNumPy(m) for m in mols]).astype(np.uint8)
    return arr, [gen.GetFingerprint(m) for m in mols]


def case_tanimoto(args, rows, results, emit):
    import jax
    from jaxkit.kernels import fingerprint as kfp

    from jaxkit import bench

    arr, bitvects = _many_fps(args.n_fps, 2048)
    n = arr.shape[0]
    dense = jax.jit(kfp.tanimoto_matrix)
    rec = bench.time_jax(dense, np.float32(arr), n_runs=args.runs, warmup=0, items=n * n,
                         name="tanimoto dense")
    emit("tanimoto-dense", dict(jax=rec, n=n))
    packed = np.asarray(kfp.pack_bits(arr))
    rec_p = bench.time_jax(jax.jit(kfp.tanimoto_matrix_packed), packed, n_runs=args.runs,
                           warmup=0, items=n * n, name="tanimoto packed")
    emit("tanimoto-packed", dict(jax=rec_p, n=n))
    print(f"jaxkit Tanimoto {n} x {n}: matmul {rec.median_s:.2f} s, packed "
          f"{rec_p.median_s:.2f} s", flush=True)
    peer, acc, acc_p = None, "", ""
    if not args.no_peers:
        from rdkit import DataStructs

        R = min(args.rdkit_rows or n, n)
        want = np.empty((R, n), np.float32)

        def rdkit_rows():
            for i in range(R):  # RDKit's C++ loop over all n per row
                want[i] = DataStructs.BulkTanimotoSimilarity(bitvects[i], bitvects)

        times, cpus = [], []
        for _ in range(args.peer_runs):
            t0, c0 = time.perf_counter(), time.process_time()
            rdkit_rows()
            times.append((time.perf_counter() - t0) * n / R)
            cpus.append((time.process_time() - c0) / R)
        peer = bench.record_from_times("rdkit bulk", times, items=n * n)
        got = np.asarray(dense(np.float32(arr)))[:R]
        acc = f"max |S - RDKit| {float(np.max(np.abs(got - want))):.1e} on {R} rows"
        acc_p = (f"RDKit timed on {R} of {n} rows ({float(np.median(times)) / n * 1e3:.2f} ms "
                 f"wall, {float(np.median(cpus)) * 1e3:.2f} ms CPU per row of {n}), "
                 f"scaled x{n / R:g} (linear in rows)")
        emit("tanimoto-rdkit", dict(peer=peer, rows=R, n=n,
                                    per_row_s=float(np.median(times)) / n,
                                    cpu_per_row_s=float(np.median(cpus)), accuracy=acc))
        print(f"RDKit: {acc_p}; {acc}", flush=True)
    results["tanimoto"] = dict(dense=rec, packed=rec_p, peer=peer, n=n)
    for r, label in ((rec, "matmul"), (rec_p, "packed popcount")):
        rows.append(dict(case=f"Tanimoto {n} x {n}, 2048 bits ({label})", dtype="float32",
                         jax=r, peer=peer, peer_name="RDKit BulkTanimotoSimilarity",
                         acc_jax=acc, acc_peer=acc_p))


def _emitter(path: str | None, env: dict):
    """``emit(case, record)``: appends one JSON line (the case, its numbers, the load
    average and the seconds since start) to ``path`` at once, so a run cut short keeps
    every case it finished."""
    import json
    import os

    from jaxkit import bench

    t0 = time.perf_counter()
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(bench._to_jsonable(dict(case="environment", env=env))) + "\n")

    def emit(case: str, record: dict) -> None:
        line = dict(case=case, loadavg=os.getloadavg(), elapsed_s=time.perf_counter() - t0,
                    **record)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(bench._to_jsonable(line)) + "\n")

    return emit


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_misaligned", __doc__, CASES,
                               quick_help="10 seeds, 512 bits, 1,500 fingerprints",
                               peers_help="skip scikit-learn and RDKit")
    p.add_argument("--seeds", type=int, default=None, help="seeds of the family (100)")
    p.add_argument("--peer-seeds", type=int, default=None,
                   help="seeds the peer loop runs (its time is scaled to --seeds; half as "
                        "many run first, to check the loop is linear in the seeds; 4)")
    p.add_argument("--n-bits", type=int, default=None, help="fingerprint bits (2048)")
    p.add_argument("--n-fps", type=int, default=None, help="fingerprints (10,000)")
    p.add_argument("--rdkit-rows", type=int, default=None,
                   help="rows of the similarity matrix RDKit computes (scaled to --n-fps; "
                        "all)")
    p.add_argument("--max-molecules", type=int, default=None,
                   help="subsample FreeSolv for the family (all 642; --quick 200)")
    p.add_argument("--runs", type=int, default=None, help="jaxkit timed runs (3)")
    p.add_argument("--peer-runs", type=int, default=None, help="peer timed runs (1)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="OpenBLAS threads for jaxkit's LAPACK calls (1, as the pipeline)")
    p.add_argument("--peer-blas-threads", type=int, default=None,
                   help="BLAS threads of the scikit-learn loop (library default)")
    p.add_argument("--lines", metavar="FILE", default=None,
                   help="append each case's numbers as a JSON line as soon as measured "
                        "(default: the --json path with .cases.jsonl)")
    args = p.parse_args(argv)
    q = args.quick
    args.seeds = args.seeds or (10 if q else 100)
    args.peer_seeds = args.peer_seeds or (3 if q else 4)
    args.n_bits = args.n_bits or (512 if q else 2048)
    args.n_fps = args.n_fps or (1500 if q else 10_000)
    args.max_molecules = args.max_molecules or (200 if q else None)
    args.runs = args.runs or (2 if q else 3)
    args.peer_runs = args.peer_runs or 1
    if args.lines is None and args.json:
        args.lines = str(Path(args.json).with_suffix("")) + ".cases.jsonl"
    cases = bench.parse_cases(p, args.only, CASES)
    env = bench.environment()
    emit = _emitter(args.lines, env)
    rows, results = [], {}
    t0 = time.perf_counter()
    if "family" in cases:
        case_family(args, rows, results, emit)
        print(f"family done ({time.perf_counter() - t0:.0f} s)", flush=True)
    if "tanimoto" in cases:
        case_tanimoto(args, rows, results, emit)
        print(f"tanimoto done ({time.perf_counter() - t0:.0f} s)", flush=True)
    bench.finish(rows, env, t0, title="misaligned baselines: jaxkit vs scikit-learn / RDKit "
                                      "(speed-up = peer / jaxkit)", json_path=args.json,
                 payload=dict(argv=sys.argv if argv is None else argv, quick=q,
                              results=results,
                              rows=[dict(r, case=r["case"].split(",")[0].split(" ")[0].lower())
                                    for r in rows]))
    if args.lines:
        print(f"per-case lines: {args.lines}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
