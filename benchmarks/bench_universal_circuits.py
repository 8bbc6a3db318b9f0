"""Benchmark: the universal-circuit transcoder training step (forward, backward including
the output-fidelity term through the rest of both models, clipped Adam) of jaxkit
against a PyTorch implementation of the same step (``peers/torch_uc.py``, run in the
shared ``benchmarks/.peer-venv-torch``), on the same shapes and weights in one run; plus
the time of one attribution sweep (activation x gradient of every latent on every class
logit of both models, per image, errors held fixed) and of one pruning sweep.

Cases: ``step`` (jaxkit vs torch) and ``attribution`` (jaxkit only; no peer has it).
The two models are dense ReLU chains of different depth (2 and 3 layers; depth map
``((0, 2), (0, 1, 2))``) with random weights; the recorded sites are their activations
on Gaussian inputs. ``jaxkit bench universal-circuits [--quick] [--json FILE]``.
Speed-up = torch time / jaxkit time (target 1.5x on the 2-core CPU); compile time is
reported apart; medians of ``--runs`` steps after ``--warmup``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "torch_uc.py"
CASES = ("step", "attribution")
PEER_VENV = HERE / ".peer-venv-torch"
PEER_SPECS = ["torch==2.14.1", "mambapy==1.2.0"]
PEER_CHECK = "import torch, mambapy"
LR = 1e-3
TARGET = 1.5
DEPTH_MAP = ((0, 2), (0, 1, 2))


def shapes(quick: bool) -> dict:
    s = 4 if quick else 1
    return dict(d_sites=((256 // s, 256 // s, 256 // s), (256 // s, 512 // s, 256 // s,
                                                           128 // s)),
                n_latents=128 if quick else 1024, k=8 if quick else 32,
                batch=256 if quick else 1024, n_classes=10, attr_images=32 if quick else 128)


def make_problem(cfg: dict, seed: int = 0):
    """Random models (dense ReLU chains + head) and their sites on Gaussian inputs."""
    rng = np.random.default_rng(seed)
    models, sites = [], []
    for ds in cfg["d_sites"]:
        layers = [(rng.standard_normal((a, b)).astype(np.float32) * np.sqrt(2.0 / a),
                   0.01 * rng.standard_normal(b).astype(np.float32))
                  for a, b in zip(ds[:-1], ds[1:], strict=True)]
        head = (rng.standard_normal((ds[-1], cfg["n_classes"])).astype(np.float32)
                / np.sqrt(ds[-1]), np.zeros(cfg["n_classes"], np.float32))
        models.append(layers + [head])
        h = [rng.standard_normal((cfg["batch"], ds[0])).astype(np.float32)]
        for W, b in layers:
            h.append(np.maximum(h[-1] @ W + b, 0).astype(np.float32))
        sites.append(h)
    return models, sites


def rest_fns(n_models: int):
    import jax.numpy as jnp

    def rest(mp, t, h):
        for W, b in mp[t:-1]:
            h = jnp.maximum(h @ W + b, 0)
        W, b = mp[-1]
        return h @ W + b

    return tuple(rest for _ in range(n_models))


def jax_step(cfg: dict, seed: int = 0):
    """``(step, state, sites, models, spec, params)`` of the jaxkit UC step."""
    import jax
    import optax
    from jaxkit.kernels import crosscoder as cc
    from jaxkit.kernels import train as ktrain

    models, sites = make_problem(cfg, seed)
    spec = cc.uc_spec(cfg["d_sites"], DEPTH_MAP, cfg["n_latents"])
    params = cc.uc_init(jax.random.key(seed), spec)
    rest = rest_fns(len(models))
    mp = jax.tree.map(jax.numpy.asarray, models)

    def loss(p, key, batch, aux):
        s, m = batch
        return cc.uc_loss(p, s, spec, rest_fns=rest, model_params=m, k=cfg["k"],
                          fidelity_coef=1.0)

    step = ktrain.make_train_step(loss, optax.adam(LR), clip_norm=1.0, check_params=False)
    state = ktrain.init(params, optax.adam(LR))
    sites_t = tuple(tuple(jax.numpy.asarray(h) for h in row) for row in sites)
    return step, state, sites_t, mp, spec, params, models, sites


def _write(dir_: Path, name: str, a: np.ndarray, meta: dict) -> None:
    a = np.ascontiguousarray(a, dtype="<f4")
    (dir_ / f"{name}.f32").write_bytes(a.tobytes())
    meta["arrays"][name] = list(a.shape)


def run_peer(py: Path, cfg: dict, params, models, sites, *, warmup: int, runs: int,
             threads: int, timeout: float = 3600) -> dict:
    """Run ``peers/torch_uc.py`` on the same weights and sites; returns its JSON."""
    from jaxkit.bench import peer_env

    env = peer_env()
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        meta = dict(arrays={}, depth_map=DEPTH_MAP, n_depths=3, k=cfg["k"], lr=LR,
                    fidelity=1.0)
        for m, dm in enumerate(DEPTH_MAP):
            for j in range(len(dm)):
                _write(d, f"W_enc_{m}_{j}", np.asarray(params.W_enc[m][j]), meta)
                _write(d, f"W_dec_{m}_{j}", np.asarray(params.W_dec[m][j]), meta)
                _write(d, f"b_dec_{m}_{j}", np.asarray(params.b_dec[m][j]), meta)
            for t, h in enumerate(sites[m]):
                _write(d, f"site_{m}_{t}", h, meta)
            for j, (W, b) in enumerate(models[m]):
                _write(d, f"model_{m}_W{j}", W, meta)
                _write(d, f"model_{m}_b{j}", b, meta)
        _write(d, "b_enc", np.asarray(params.b_enc), meta)
        (d / "meta.json").write_text(json.dumps(meta))
        cmd = [str(py), str(WORKER), str(d), "--warmup", str(warmup), "--runs", str(runs),
               "--threads", str(threads)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"torch_uc worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        return json.loads((d / "out.json").read_text())


def _pin_threads(n: int):
    if not hasattr(os, "sched_getaffinity"):
        return None
    old = os.sched_getaffinity(0)
    if len(old) <= n:
        return None
    os.sched_setaffinity(0, sorted(old)[:n])
    return old


def case_step(args, cfg, rows, results, peer_py) -> None:
    import jax

    from jaxkit import bench

    step, state, sites_t, mp, spec, params, models, sites = jax_step(cfg, args.seed)
    key = jax.random.key(1)
    B = cfg["batch"]
    jstep = jax.jit(step)
    rec = bench.time_jax(jstep, key, state, (sites_t, mp), n_runs=args.runs,
                         warmup=args.warmup, items=B, name="jaxkit uc step")  # compiles afresh
    _, info1 = jstep(key, state, (sites_t, mp))  # step 1 from the shared weights
    res = dict(jaxkit=dict(record=rec, images_per_s=rec.items_per_s,
                           loss_step1=float(info1.loss), grad_norm_step1=float(info1.grad_norm)))
    row = dict(case=f"uc step B={B} F={cfg['n_latents']}x3 k={cfg['k']}", dtype="float32",
               jax=rec, peer=None, acc_jax=f"loss1 {float(info1.loss):.6f}")
    rows.append(row)
    if isinstance(peer_py, Path):
        out = run_peer(peer_py, cfg, params, models, sites, warmup=args.warmup, runs=args.runs,
                       threads=args.threads)
        prec = bench.record_from_times("torch uc step", out["times"], warmup=args.warmup,
                                       items=B)
        ratio = bench.speedup(rec, prec)
        row.update(peer=prec, peer_name=f"torch {out['torch']} (peers/torch_uc.py)",
                   acc_peer=f"loss1 {out['loss_step1']:.6f}")
        res["torch"] = dict(record=prec, images_per_s=prec.items_per_s,
                            loss_step1=out["loss_step1"], grad_norm_step1=out["grad_norm_step1"])
        res["loss_step1_rel_diff"] = abs(out["loss_step1"] - float(info1.loss)) / abs(
            float(info1.loss))
        res["speedup_vs_torch"] = ratio
        res["target_met"] = bool(ratio is not None and ratio >= TARGET)
        print(f"step: jaxkit / torch = {ratio:.2f}x (target {TARGET}x: "
              f"{'met' if res['target_met'] else 'NOT met'}); step-1 loss jaxkit "
              f"{float(info1.loss):.6f}, torch {out['loss_step1']:.6f}", flush=True)
    else:
        res["peer"] = str(peer_py)
    results["step"] = res


def case_attribution(args, cfg, rows, results) -> None:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import crosscoder as cc

    from jaxkit import bench

    _, _, sites_t, mp, spec, params, models, _ = jax_step(cfg, args.seed)
    n = cfg["attr_images"]
    sub = jax.tree.map(lambda a: a[:n], sites_t)
    labels = jnp.arange(n) % cfg["n_classes"]
    rest = rest_fns(2)

    def sweep(p, s, m, y):
        A = cc.uc_attribution(p, s, spec, rest, m, k=cfg["k"])
        return cc.class_attribution(A, y)

    rec = bench.time_jax(jax.jit(sweep), params, sub, mp, labels, n_runs=args.runs,
                         warmup=args.warmup, items=n, name="jaxkit attribution sweep")
    rows.append(dict(case=f"attribution sweep ({n} images x 2 models x {cfg['n_classes']} "
                     f"classes x {3 * cfg['n_latents']} latents)", dtype="float32", jax=rec,
                     peer=None, peer_name="- (none has it)"))
    N = 3 * cfg["n_latents"]
    sizes = jnp.asarray(np.unique(np.geomspace(1, N, 16).astype(np.int32)))

    def prune(p, s, m, scores):
        def acc(g):
            _, lg = cc.uc_replacement(p, s, spec, rest, m, gate=g.reshape(3, -1), k=cfg["k"],
                                      check=False)
            return jnp.mean(jnp.argmax(lg[0], -1) == 0)
        return cc.prune_sweep(scores, acc, sizes, 0.9, acc(jnp.ones(N)))

    scores = jnp.asarray(np.random.default_rng(0).random(N), jnp.float32)
    prec = bench.time_jax(jax.jit(prune), params, sub, mp, scores, n_runs=args.runs,
                          warmup=args.warmup, items=len(sizes), name="jaxkit prune sweep")
    rows.append(dict(case=f"prune sweep ({len(sizes)} prefix sizes vmapped, {n} images)",
                     dtype="float32", jax=prec, peer=None, peer_name="- (none has it)"))
    results["attribution"] = dict(attribution=rec, prune=prec, images=n)


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser("bench_universal_circuits", __doc__, CASES,
                               quick_help="small sizes (widths / 4, F 128, batch 256)",
                               peers_help="skip the PyTorch peer (no virtual environment)")
    p.add_argument("--runs", type=int, default=5, help="timed steps per side (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--threads", type=int, default=2, help="threads for both sides")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    cases = bench.parse_cases(p, args.only, CASES)
    if min(args.runs, args.warmup, args.threads) < 1:
        p.error("--runs, --warmup and --threads must be >= 1")
    cfg = shapes(args.quick)
    old = _pin_threads(args.threads)
    try:
        env = bench.environment(peers=("numpy", "jaxlib", "optax"))
        env["loadavg_at_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
        t0 = time.perf_counter()
        peer_py: Path | str = "--no-peers"
        if not args.no_peers and "step" in cases:
            try:
                peer_py = bench.ensure_peer_venv(PEER_VENV, PEER_SPECS, PEER_CHECK)
            except RuntimeError as e:
                peer_py = f"peer venv unavailable: {e}"
                print(peer_py, flush=True)
        rows, results = [], {}
        if "step" in cases:
            case_step(args, cfg, rows, results, peer_py)
        if "attribution" in cases:
            case_attribution(args, cfg, rows, results)
        bench.finish(rows, env, t0, title="universal-circuit transcoder: training step vs "
                                          "PyTorch, attribution and pruning sweeps (CPU)",
                     json_path=args.json,
                     payload=dict(shapes=cfg, argv=sys.argv if argv is None else argv,
                                  quick=args.quick, results=results, rows=rows))
    finally:
        if old is not None:
            os.sched_setaffinity(0, old)
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
