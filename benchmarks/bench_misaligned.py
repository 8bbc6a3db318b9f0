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
  once with NumPy, so both sides do the same work; jaxkit draws its own with its keys,
  so predictions agree only for the deterministic baselines, which are compared).
  The peer loop runs ``--peer-seeds`` (default: all) seeds and its time is scaled to
  ``--seeds`` (it is linear in the seeds; the scale factor is printed). AddCarbon
  fingerprints (RDKit, host) are made once before timing and shared.
* ``tanimoto`` -- the ``--n-fps`` x ``--n-fps`` (10,000) similarity matrix of Morgan
  fingerprints (2048 bits) of RDKit's NCI ``first_5K.smi``, the three data sets and
  AddCarbon variants to make up the number: ``kernels.fingerprint.tanimoto_matrix``
  (float32 matmul) and ``tanimoto_matrix_packed`` (uint32 popcount) against
  ``DataStructs.BulkTanimotoSimilarity`` called once per row (RDKit's C++ loop);
  max |difference| reported.

``--quick``: 200 of the FreeSolv molecules, 10 seeds (peer 3), 512 bits, 1,500
fingerprints (about 1 minute on a quiet 2-core machine).
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
    base = ridge(x, y)
    out["ridge_fp"] = base.predict(x)
    ys = y.copy()
    idx = np.flatnonzero(train)
    ys[idx] = y[rng.permutation(idx)]
    out["label_scramble"] = ridge(x, ys).predict(x)
    shuffled, replaced = [], []
    density = x.mean()
    for p in FRACTIONS:
        chosen = np.flatnonzero(rng.random(n) < p)
        perm = np.arange(n)
        perm[chosen] = rng.permutation(chosen)
        shuffled.append(ridge(x[perm], y).predict(x[perm]))
        rep = rng.random(x.shape) < p
        xr = np.where(rep, (rng.random(x.shape) < density).astype(float), x)
        replaced.append(ridge(xr, y).predict(xr))
    out["shuffled_inputs"], out["replaced_bits"] = np.stack(shuffled), np.stack(replaced)
    xr = (rng.random(x.shape) < density).astype(float)
    out["random_features"] = ridge(xr, y).predict(xr)
    knn = KNeighborsRegressor(n_neighbors=1, metric="jaccard", algorithm="brute")
    out["nn_tanimoto"] = knn.fit(data.fp[train].astype(bool), y[train]).predict(
        data.fp.astype(bool))
    v = int(rng.integers(addc.shape[1]))
    out["add_carbon"] = np.stack([base.predict(addc[k, v].astype(float))
                                  for k in range(addc.shape[0])])
    out["noise_ceiling"] = y + sigma * rng.standard_normal(n)
    return out


def case_family(args, rows, results):
    import jax
    import jax.numpy as jnp

    from jaxkit import bench
    from jaxkit.misaligned import baselines as B
    from jaxkit.misaligned.evaluation import add_carbon_fingerprints
    from jaxkit.misaligned.features import random_split

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

    t0 = time.perf_counter()
    fd = jax.block_until_ready(B.family_data(data.y, data.desc, data.fp, addc, sigma))
    prep_s = time.perf_counter() - t0
    args_j = (jax.random.key(0), fd, jnp.asarray(splits.train))
    rec = bench.time_jax(jax.jit(fam), *args_j, n_runs=args.runs, warmup=1,
                         items=args.seeds, name="family")
    out_j = jax.jit(fam)(*args_j)
    results["family_data_s"] = prep_s
    peer = None
    acc_j = acc_p = ""
    if not args.no_peers:
        P = min(args.peer_seeds or args.seeds, args.seeds)
        prng = np.random.default_rng(1)
        times, outs = [], []
        for _ in range(args.peer_runs):
            t0 = time.perf_counter()
            outs = [sklearn_family(data, splits.train[s], splits.test[s], prng, addc, sigma)
                    for s in range(P)]
            times.append((time.perf_counter() - t0) * args.seeds / P)
        peer = bench.record_from_times("sklearn loop", times, items=args.seeds)
        diffs = {k: float(np.max(np.abs(np.asarray(out_j[k][:P]) - np.stack(
            [o[k] for o in outs])))) for k in ("train_mean", "size_only", "descriptors",
                                                "ridge_fp", "nn_tanimoto")}
        acc_j = "max |pred diff| " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
        acc_p = (f"peer timed on {P} seeds, scaled x{args.seeds / P:g}; jaxkit family_data "
                 f"{prep_s:.2f} s once")
        results["family_pred_max_diff"] = diffs
    results["family"] = dict(jax=rec, peer=peer, seeds=args.seeds, n=data.n, bits=args.n_bits)
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
    base = list(smi)
    i = 0
    while len(smi) < n:
        s = add_carbon(base[i % len(base)], rng, 1 + i // len(base))
        if s is not None:
            smi.append(s)
        i += 1
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=n_bits)
    mols = [m for m in (Chem.MolFromSmiles(s) for s in smi[:n * 2]) if m is not None][:n]
    arr = np.stack([gen.GetFingerprintAsNumPy(m) for m in mols]).astype(np.uint8)
    return arr, [gen.GetFingerprint(m) for m in mols]


def case_tanimoto(args, rows, results):
    import jax
    from jaxkit.kernels import fingerprint as kfp

    from jaxkit import bench

    arr, bitvects = _many_fps(args.n_fps, 2048)
    n = arr.shape[0]
    rec = bench.time_jax(jax.jit(kfp.tanimoto_matrix), np.float32(arr), n_runs=args.runs,
                         warmup=1, items=n * n, name="tanimoto dense")
    packed = np.asarray(kfp.pack_bits(arr))
    rec_p = bench.time_jax(jax.jit(kfp.tanimoto_matrix_packed), packed, n_runs=args.runs,
                           warmup=1, items=n * n, name="tanimoto packed")
    peer, acc = None, ""
    if not args.no_peers:
        from rdkit import DataStructs

        def rdkit_all():
            return np.array([DataStructs.BulkTanimotoSimilarity(b, bitvects) for b in bitvects],
                            np.float32)

        peer = bench.time_python(rdkit_all, n_runs=args.peer_runs, warmup=0, items=n * n,
                                 name="rdkit bulk")
        want = rdkit_all()
        got = np.asarray(jax.jit(kfp.tanimoto_matrix)(np.float32(arr)))
        acc = f"max |S - RDKit| {float(np.max(np.abs(got - want))):.1e}"
    results["tanimoto"] = dict(dense=rec, packed=rec_p, peer=peer, n=n)
    for r, label in ((rec, "matmul"), (rec_p, "packed popcount")):
        rows.append(dict(case=f"Tanimoto {n} x {n}, 2048 bits ({label})", dtype="float32",
                         jax=r, peer=peer, peer_name="RDKit BulkTanimotoSimilarity",
                         acc_jax=acc, acc_peer=""))


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_misaligned", __doc__, CASES,
                               quick_help="10 seeds, 512 bits, 1,500 fingerprints",
                               peers_help="skip scikit-learn and RDKit")
    p.add_argument("--seeds", type=int, default=None, help="seeds of the family (100)")
    p.add_argument("--peer-seeds", type=int, default=None,
                   help="seeds the peer loop runs (its time is scaled to --seeds)")
    p.add_argument("--n-bits", type=int, default=None, help="fingerprint bits (2048)")
    p.add_argument("--n-fps", type=int, default=None, help="fingerprints (10,000)")
    p.add_argument("--max-molecules", type=int, default=None,
                   help="subsample FreeSolv for the family (all 642; --quick 200)")
    p.add_argument("--runs", type=int, default=None, help="jaxkit timed runs (5)")
    p.add_argument("--peer-runs", type=int, default=None, help="peer timed runs (3)")
    args = p.parse_args(argv)
    q = args.quick
    args.seeds = args.seeds or (10 if q else 100)
    args.peer_seeds = args.peer_seeds or (3 if q else None)
    args.n_bits = args.n_bits or (512 if q else 2048)
    args.n_fps = args.n_fps or (1500 if q else 10_000)
    args.max_molecules = args.max_molecules or (200 if q else None)
    args.runs = args.runs or (2 if q else 5)
    args.peer_runs = args.peer_runs or (1 if q else 3)
    cases = bench.parse_cases(p, args.only, CASES)
    env = bench.environment()
    rows, results = [], {}
    t0 = time.perf_counter()
    if "family" in cases:
        case_family(args, rows, results)
        print(f"family done ({time.perf_counter() - t0:.0f} s)", flush=True)
    if "tanimoto" in cases:
        case_tanimoto(args, rows, results)
        print(f"tanimoto done ({time.perf_counter() - t0:.0f} s)", flush=True)
    bench.finish(rows, env, t0, title="misaligned baselines: jaxkit vs scikit-learn / RDKit "
                                      "(speed-up = peer / jaxkit)", json_path=args.json,
                 payload=dict(argv=sys.argv if argv is None else argv, quick=q,
                              results=results,
                              rows=[dict(r, case=r["case"].split(",")[0].split(" ")[0].lower())
                                    for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
