"""CausalTab: the vmapped causal prior, inference against baselines, and the training step.

Run ``python benchmarks/bench_causaltab.py [--quick] [--json FILE] [--only CASES]`` (or
``jaxkit bench causaltab``). Cases:

* ``prior``     -- tasks/s of ``sem.jit_sample_tasks`` (one jitted call draws a batch of
  heterogeneous padded tasks: 5 graph families, 5 mechanisms, 5 noise laws,
  interventions, iSCM; compiled on the CPU without YNNPACK's elementwise fusions)
  against a NumPy loop drawing the same tasks (the same laws, parameter ranges and
  padding, one task at a time, as AVICI's host generators do); without ``--quick`` a
  second row times plain ``jax.jit(sample_tasks)`` (XLA's default fusions).
* ``inference`` -- seconds per dataset of CausalTab (shipped weights) and each baseline
  at its accuracy on the same in-distribution datasets (d=10, half interventional):
  NOTEARS, DirectLiNGAM, var/R2-sort-regress, GIES, random (jaxkit), and PC and GES
  from causal-learn in ``benchmarks/.peer-venv-causallearn`` (``--no-peers`` skips them).
  One table: method, SHD, AUROC, seconds per dataset (after compilation).
* ``train``     -- the training step (batch of tasks drawn on the device + forward +
  backward + AdamW): tasks/s, samples/s, XLA flops and, on a GPU, MFU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peer-venv-causallearn"
WORKER = HERE / "peers" / "causallearn_worker.py"
SPEC = "causal-learn==0.1.4.8"
CASES = ("prior", "inference", "train")
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense bf16/tf32 peaks


# --------------------------------------------------------------- NumPy reference prior


def _np_graph(rng, fam, d_max, d, k):
    a = np.zeros((d_max, d_max), bool)
    if fam == 1:  # scale-free
        m = int(np.clip(round(k), 1, 4))
        deg = np.zeros(d)
        for i in range(1, d):
            w = (deg[:i] + 1.0) / (deg[:i] + 1.0).sum()
            pa = rng.choice(i, size=min(m, i), replace=False, p=w)
            a[i, pa] = True
            deg[pa] += 1
            deg[i] += len(pa)
    else:
        u = np.zeros((d, d), bool)
        if fam == 0:
            p = min(1.0, 2 * k / (d - 1))
            u = np.triu(rng.random((d, d)) < p, 1)
        elif fam == 2:
            h = int(np.clip(round(k), 1, 4))
            for i in range(d):
                for s in range(1, h + 1):
                    if 2 * s > d or (2 * s == d and i >= d // 2):
                        continue
                    j = (i + s) % d
                    if rng.random() < rng.uniform(0.1, 0.5):
                        j = (i + 1 + rng.integers(d - 1)) % d
                    u[i, j] = True
        elif fam == 3:
            b = rng.integers(2, 5)
            blk = rng.integers(b, size=d)
            ratio = rng.uniform(4, 20)
            p_out = 2 * k / ((d - 1) * (ratio / b + 1 - 1 / b))
            p = np.where(blk[:, None] == blk[None, :], min(1, p_out * ratio), min(1, p_out))
            u = np.triu(rng.random((d, d)) < p, 1)
        else:
            pts = rng.random((d, 2))
            diff = np.abs(pts[:, None] - pts[None])
            diff = np.minimum(diff, 1 - diff)
            u = np.triu((diff ** 2).sum(-1) < min(2 * k / (np.pi * (d - 1)), 0.25), 1)
        u = u | u.T
        rank = rng.random(d)
        a[:d, :d] = u & (rank[None, :] < rank[:, None])
    perm = rng.permutation(d)
    out = np.zeros_like(a)
    out[np.ix_(perm, perm)] = a[:d, :d]
    return out


def _np_noise(rng, shape, code):
    if code == 0:
        return rng.normal(size=shape)
    if code == 1:
        return rng.laplace(scale=1 / np.sqrt(2), size=shape)
    if code == 2:
        return rng.standard_t(5, size=shape) * np.sqrt(3 / 5)
    if code == 3:
        return rng.uniform(-np.sqrt(3), np.sqrt(3), size=shape)
    return (rng.gumbel(size=shape) - 0.5772156649) * np.sqrt(6) / np.pi


def numpy_task(rng, d_max=20, n_max=200):
    """One task of the uniform prior (``make_prior()``), drawn on the host."""
    d = rng.integers(5, min(20, d_max) + 1)
    n = rng.integers(100, min(200, n_max) + 1)
    k = rng.uniform(1, 3)
    fam, mech, noise, regime, itype = rng.integers(5), rng.integers(5), rng.integers(5), \
        rng.integers(3), rng.integers(3)
    adj = _np_graph(rng, fam, d_max, d, k)
    n_obs = n if regime == 0 else int(round(rng.uniform(0.5, 1.0) * n))
    n_env = rng.integers(1, d + 1)
    env = np.full(n_max, -1)
    env[n_obs:n] = np.arange(n - n_obs) % n_env
    order = rng.permutation(d)
    tg = np.zeros((n_env, d_max), bool)
    for e in range(n_env):
        if regime == 1:
            tg[e, order[e % d]] = True
        else:
            tg[e, :d] = rng.random(d) < 0.2
            if not tg[e].any():
                tg[e, order[e % d]] = True
    hit = np.zeros((n_max, d_max), bool)
    hit[env >= 0] = tg[env[env >= 0]]
    x = np.zeros((n_max, d_max))
    eps = _np_noise(rng, (n_max, d_max), noise) * rng.uniform(0.5, 1.5, d_max)
    depth = np.zeros(d_max, int)
    for _ in range(d):
        depth = np.max(np.where(adj, depth[None, :] + 1, 0), axis=1)
    iscm, stdz = rng.random() < 0.25, rng.random() < 0.5
    rows = np.arange(n_max) < n
    for v in np.argsort(np.where(np.arange(d_max) < d, depth, d_max + 1), kind="stable")[:d]:
        pa = adj[v]
        xp = x * pa
        w = pa * rng.uniform(0.5, 2, d_max) * rng.choice([-1, 1], d_max)
        if mech == 0:
            f = xp @ w
        elif mech in (1, 4):
            f = np.tanh(xp @ (rng.normal(size=(d_max, 8)) * pa[:, None])
                        + 0.5 * rng.normal(size=8)) @ rng.normal(size=8)
        elif mech == 2:
            om = rng.normal(size=(d_max, 16)) / rng.uniform(0.5, 2) * pa[:, None]
            f = np.sqrt(2 / 16) * np.cos(xp @ om + rng.uniform(0, 2 * np.pi, 16)) \
                @ rng.normal(size=16)
        else:
            f = (2 / (1 + np.exp(-xp * rng.uniform(1, 3, d_max))) - 1) @ w
        ref = rows & ~hit[:, v]
        if mech != 0 and pa.any():
            f = (f - f[ref].mean()) / max(f[ref].std(), 1e-6)
        sig = np.log1p(np.exp(xp @ (rng.normal(size=d_max) * pa) + 0.5)) / np.log1p(np.exp(0.5)) \
            if mech == 4 else 1.0
        e = eps[:, v].copy()
        z = rng.uniform(1, 3, n_env) * rng.choice([-1, 1], n_env)
        ze = z[np.clip(env, 0, n_env - 1)]
        if itype == 1:
            e = np.where(hit[:, v], e + ze, e)
        elif itype == 2:
            e = np.where(hit[:, v], e * rng.uniform(2, 4), e)
        val = f + sig * e
        mu, sd = val[ref].mean(), max(val[ref].std(), 1e-6)
        if itype == 0:
            val = np.where(hit[:, v], mu + ze * sd, val)
        if iscm:
            val = (val - mu) / sd
        x[:, v] = np.where(rows, val, 0.0)
    if stdz:
        mu, sd = x[rows].mean(0), np.maximum(x[rows].std(0), 1e-6)
        x = np.where(rows[:, None], (x - mu) / sd, 0.0)
    x[:, d:] = 0
    return x, hit, adj


# ---------------------------------------------------------------------------- cases


def case_prior(args, rows, results):
    import jax
    from jaxkit.kernels import sem

    from jaxkit import bench

    batch = 16 if args.quick else 128
    d_max, n_max = 20, 200
    prior = sem.make_prior()
    rng = np.random.default_rng(0)
    prec = bench.time_python(lambda: [numpy_task(rng, d_max, n_max) for _ in range(batch)],
                             n_runs=2 if args.quick else 3, warmup=0, items=batch,
                             name="numpy loop")
    samplers = [("prior", f"prior: {batch} tasks (d<=20, n<=200)", "sample_tasks",
                 sem.jit_sample_tasks(batch, d_max=d_max, n_max=n_max))]
    if not args.quick:  # the same sampler under plain jax.jit (XLA's default fusions)
        samplers.append(("prior_default_jit", f"prior: {batch} tasks, plain jax.jit",
                         "sample_tasks (jax.jit defaults)",
                         jax.jit(lambda k, p: sem.sample_tasks(k, p, batch, d_max=d_max,
                                                               n_max=n_max))))
    for key, case, name, fn in samplers:
        rec = bench.time_jax(fn, jax.random.key(0), prior, n_runs=3 if args.quick else 10,
                             warmup=1, items=batch, name=name)
        results[key] = {"jax": rec.to_dict(), "numpy": prec.to_dict(), "batch": batch}
        rows.append(dict(case=case, dtype="float32", jax=rec, peer=prec,
                         peer_name="NumPy loop", acc_jax=f"{rec.items_per_s:.0f} tasks/s",
                         acc_peer=f"{prec.items_per_s:.1f} tasks/s"))


def _peer_fits(x, methods):
    from jaxkit.bench import ensure_peer_venv, peer_env

    py = ensure_peer_venv(VENV, [SPEC], "import causallearn")
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "x.npz", Path(tmp) / "out.json"
        np.savez(data, x=x)
        p = subprocess.run([str(py), str(WORKER), str(data), str(out), "--methods",
                            ",".join(methods)], env=peer_env(), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr else "failed")
        return json.loads(out.read_text())


def case_inference(args, rows, results):
    import jax
    from jaxkit.kernels import graph as gm

    from jaxkit.causal_model.weights_io import shipped_weights
    from jaxkit.causaltab import evaluate as ev
    from jaxkit.causaltab import experiments as ex

    w = shipped_weights()
    if w is None:
        rows.append(dict(case="inference", skipped="no shipped weights"))
        return
    params, cfg, _ = w
    B = 4 if args.quick else 12
    bench_ = ev.make_bench(jax.random.key(5), ex.cell_prior(ex.id_prior(), 0.5), B, 10, 64)
    methods = [m for m in ev.METHODS if not (args.quick and m == "gies")]
    res = ev.evaluate(bench_, methods, model=(params, cfg))
    table = []
    for m in methods:
        r = res[m]
        table.append({"method": m, "shd": float(np.nanmean(r["shd"])),
                      "auroc": float(np.nanmean(r["auroc"])),
                      "s_per_dataset": float(np.nanmedian(r["seconds"])),
                      "compile_s": float(r["compile_seconds"][0])})
    if not args.no_peers:
        try:
            peer = _peer_fits(bench_.x, ["pc", "ges"])
            for m, r in peer["methods"].items():
                shd = [float(gm.shd(bench_.adj[b].astype(float), np.asarray(g)))
                       for b, g in enumerate(r["graphs"])]
                auc = [float(gm.auroc(bench_.adj[b].astype(float), np.asarray(g, float)))
                       for b, g in enumerate(r["graphs"])]
                table.append({"method": f"{m} (causal-learn)", "shd": float(np.mean(shd)),
                              "auroc": float(np.mean(auc)),
                              "s_per_dataset": float(np.median(r["seconds"])),
                              "compile_s": None})
        except RuntimeError as e:
            table.append({"method": "pc/ges (causal-learn)", "skipped": str(e)})
    results["inference"] = {"datasets": B, "d": 10, "n": 64, "table": table}
    for t in table:
        if "skipped" in t:
            rows.append(dict(case=f"inference {t['method']}", skipped=t["skipped"]))
            continue
        rec = {"median_s": t["s_per_dataset"], "p10_s": None, "p90_s": None,
               "compile_s": t["compile_s"]}
        rows.append(dict(case=f"inference {t['method']}", dtype="-", jax=rec, peer=None,
                         acc_jax=f"SHD {t['shd']:.1f} AUROC {t['auroc']:.3f}"))


def case_train(args, rows, results):
    import jax
    import optax
    from jaxkit.kernels import sem
    from jaxkit.kernels import train as ktrain

    from jaxkit import bench
    from jaxkit.causal_model.model import ModelConfig, init_params
    from jaxkit.causaltab.train import task_loss, train_prior

    batch, d_max, n_max = (8, 10, 32) if args.quick else (32, 20, 100)
    cfg = ModelConfig(max_vars=d_max)
    opt = optax.adamw(1e-3)
    prior = train_prior(d_max, n_max)

    def loss(p, key, pr, aux):
        t = sem.sample_tasks(key, pr, batch, d_max=d_max, n_max=n_max)
        return task_loss(p, cfg, t, 0.01)

    step = ktrain.make_train_step(loss, opt)
    state = ktrain.init(init_params(jax.random.key(0), cfg), opt)
    rec = bench.time_jax_loop(lambda s, k, p: step(k, s, p), state, jax.random.key(1), prior,
                              n_runs=3 if args.quick else 10, warmup=1, items=batch,
                              name="train step")
    dev = jax.devices()[0]
    peak = next((v for k, v in PEAK_FLOPS.items() if k in dev.device_kind), None)
    mfu = (rec.flops_per_s / peak) if (peak and rec.flops_per_s) else None
    results["train"] = {**rec.to_dict(), "tasks_per_s": rec.items_per_s,
                        "samples_per_s": rec.items_per_s * 0.75 * n_max, "mfu": mfu,
                        "device": dev.device_kind}
    rows.append(dict(case=f"train step: {batch} tasks d<={d_max} n<={n_max}", dtype="float32",
                     jax=rec, peer=None,
                     acc_jax=f"{rec.items_per_s:.1f} tasks/s"
                             + (f", MFU {mfu:.1%}" if mfu is not None else "")))


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_causaltab", __doc__, CASES, quick_help="small sizes",
                               peers_help="skip causal-learn's PC and GES")
    args = p.parse_args(argv)
    cases = bench.parse_cases(p, args.only, CASES)
    bench.configure_cpu_devices(x64=False)
    env = bench.environment()
    rows, results = [], {}
    t0 = time.perf_counter()
    for c in cases:
        {"prior": case_prior, "inference": case_inference, "train": case_train}[c](
            args, rows, results)
    bench.finish(rows, env, t0, title="CausalTab (speed-up = peer / jaxkit)",
                 json_path=args.json,
                 payload=dict(quick=args.quick, argv=sys.argv if argv is None else argv,
                              results=results, rows=rows))
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
