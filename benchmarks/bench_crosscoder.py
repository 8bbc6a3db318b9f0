"""Crosscoder / SAE training-step throughput: jaxkit against SAELens and eai-sparsify (CPU).

Run ``python benchmarks/bench_crosscoder.py [--quick] [--json FILE] [--no-peers]
[--only CASES] [--runs R] [--warmup W] [--threads N]`` (or ``jaxkit bench crosscoder``).
Cases (``--only`` takes a comma list):

* ``topk`` -- TopK SAE (Gao et al. 2024): jaxkit ``make_train_step(activation="topk")``
  against SAELens ``TopKTrainingSAE`` and eai-sparsify ``SparseCoder`` (TopK).
* ``batchtopk`` -- BatchTopK SAE (Bussmann et al. 2024): jaxkit ``activation="batch_topk"``
  against SAELens ``BatchTopKTrainingSAE`` (sparsify has no BatchTopK).
* ``temporal`` -- temporal crosscoder, ``site=(T,)`` with T = 5: jaxkit against
  ``benchmarks/peers/torch_temporal.py`` (PyTorch, written from the equations; no released
  package trains one).

Config (the defaults; ``--quick``: d 64, F 512, batch 256): d_in 768, F = 16,384 latents,
k 32, batch 4,096 tokens (temporal: 819 windows of T = 5 positions, 4,095 tokens, the
same d and F per window, so the encoder and decoder are 5x larger), float32, Adam
(lr 2e-4, betas 0.9/0.999, eps 1e-8), unit-norm decoder atoms, AuxK off on every side.
jaxkit's step is FVU loss, gradients, decoder-parallel gradient removal, Adam, decoder
renormalisation, dead-latent counters (and the BatchTopK threshold EMA); for TopK and the
temporal crosscoder ``make_train_step``'s default sparse step (one dense encoder product,
``sparse_decode``, scatter-add gradients), timed beside its dense formulation
(``decoder="dense"``; skip with ``--no-dense``). Each peer runs the
step its own trainer runs (see ``benchmarks/peers/crosscoder_worker.py``): SAELens
``SAETrainer._train_step`` (MSE summed over d, mean over the batch; its way of keeping
unit-norm atoms is ``rescale_acts_by_decoder_norm``; gradient-norm clipping at 1.0, hard
coded in its trainer; firing bookkeeping), sparsify ``Trainer`` (decoder renormalised,
FVU, parallel-gradient removal, Adam; its Triton decoder disabled, so it runs its eager
``embedding_bag`` sparse decoder and its index_add encoder backward), torch_temporal
(exactly jaxkit's step in PyTorch, dense decoder).

Data: one synthetic batch from a fixed seed (a sparse combination of random unit
directions plus an offset and noise); every side trains on the same batch. jaxkit's
initial parameters (``jaxkit.kernels.crosscoder.init``: unit-norm decoder, tied encoder,
``b_dec`` = geometric median of the batch) are exported to the peers, which load them.

Measured: the median of ``--runs`` timed steps (default 5; ``--quick`` 5) after
``--warmup`` untimed ones (default 2) on the same batch; jaxkit's AOT compile time apart
(``block_until_ready`` after each call). jaxkit's steps are timed as a training loop
(:func:`jaxkit.bench.time_jax_loop`: each call takes the state the previous one returned,
donated to it, so parameters and Adam moments are updated in place, as
``jaxkit.crosscoder``'s fit runs and as the peers' in-place torch Adam does); the encoder
product and the ``--profile`` parts by :func:`jaxkit.bench.time_jax`. Rates are
tokens/s; "speed-up" = peer time / jaxkit time = jaxkit tokens/s / peer tokens/s. GFLOP/s
are model FLOPs / median time, with model FLOPs = 3 x forward FLOPs, forward = encoder
matmul ``2 B D F`` + decoder as the side implements it: dense ``2 B F D`` (SAELens,
torch_temporal, jaxkit's BatchTopK and ``decoder="dense"`` rows) or sparse ``2 B k D``
(sparsify's embedding_bag, jaxkit's sparse TopK step); ``D = T d``. XLA's
cost-analysis FLOPs of the jaxkit step are in the JSON too. Threads: both sides get
``--threads`` (default 2) -- torch by ``torch.set_num_threads``, XLA by the process's CPU
affinity (this script pins itself to the first N cores when it has more; the peer process
inherits it).

Step-1 agreement: each peer's reconstruction of the batch from the shared initial weights
is compared with jaxkit's like for like -- plain MSE and FVU computed in float64 NumPy
from each side's ``x_hat`` (:func:`recon_metrics`) -- and with a float64 NumPy reference
(:func:`numpy_forward`); the parameters after one step are compared too (relative to the
size of the update), which checks the whole step, not only the loss.

The peers live in ``benchmarks/.peer-venv-crosscoder`` (created on first use with
:data:`PEER_SPECS`), which takes torch from the shared PyTorch peer venv
``benchmarks/.peer-venv-torch`` (``torch==2.14.1``, through a ``.pth`` file, so no second
6 GB torch is installed; pip is constrained to that torch). Targets (issues 31 and 30):
jaxkit >= 1.5x the fastest peer's tokens/s for TopK, BatchTopK and temporal, and the TopK
step within 1.25x of its encoder product alone (``encoder product`` row: ``x @ W_enc +
b_enc`` for the same batch, its roofline), on each instruction set.

Machine and instruction set: the JSON's ``environment.machine`` and the table title
record the ISA extensions, cores and the in-run float32 / bfloat16 matmul roofline, and
every row gives each side's model FLOP/s as a percentage of it. ``--isa avx2`` limits
both sides (:func:`jaxkit.bench.apply_isa`: XLA's ``--xla_cpu_max_isa=AVX2`` here,
``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` / ``MKL_ENABLE_INSTRUCTIONS`` in the peer
process, which reports the capability torch runs at). ``--profile`` times the parts of
the jaxkit TopK step as increments (encoder product; + top-k; + sparse decoder and loss;
+ backward; + parallel-gradient removal, Adam, renormalisation and counters).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "crosscoder_worker.py"
CASES = ("topk", "batchtopk", "temporal")
PEER_VENV = HERE / ".peer-venv-crosscoder"
TORCH_VENV = HERE / ".peer-venv-torch"  # the shared PyTorch peer venv (exactly these specs)
TORCH_SPECS = ["torch==2.14.1", "mambapy==1.2.0"]
PEER_SPECS = ["sae-lens==6.54.12", "eai-sparsify==1.3.3", "numpy"]
PEER_CHECK = ("from importlib.metadata import version as v; import torch, sae_lens, sparsify; "
              "assert v('sae-lens') == '6.54.12' and v('eai-sparsify') == '1.3.3' "
              "and torch.__version__.startswith('2.14.1')")
PEERS = {  # case -> [(worker impl, display name, decoder kind for model FLOPs)]
    "topk": [("saelens-topk", "SAELens TopKTrainingSAE", "dense"),
             ("sparsify-topk", "eai-sparsify SparseCoder (TopK)", "sparse")],
    "batchtopk": [("saelens-batchtopk", "SAELens BatchTopKTrainingSAE", "dense")],
    "temporal": [("torch-temporal", "torch_temporal (PyTorch reference)", "dense")],
}
LR = 2e-4
TARGET = 1.5
ENCODER_TARGET = 1.25  # TopK step time / encoder product time


# ------------------------------------------------------------------------------ data


def synthetic_batch(n: int, site: tuple[int, ...], d: int, *, seed: int = 0,
                    n_true: int = 1024, k_true: int = 8) -> np.ndarray:
    """A float32 batch ``(n, *site, d)``: each row is ``k_true`` of ``n_true`` random unit
    directions (over ``(*site, d)``) with exponential weights, plus a fixed offset and
    small Gaussian noise."""
    rng = np.random.default_rng(seed)
    D = math.prod(site) * d
    dirs = rng.standard_normal((n_true, D)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    idx = np.argsort(rng.random((n, n_true)), axis=1)[:, :k_true]
    w = rng.exponential(1.0, (n, k_true)).astype(np.float32)
    x = np.einsum("nk,nkd->nd", w, dirs[idx])
    x += rng.standard_normal(D).astype(np.float32) / math.sqrt(D)  # offset, norm ~1
    x += 0.02 * rng.standard_normal((n, D)).astype(np.float32)
    return x.reshape(n, *site, d).astype(np.float32)


# ------------------------------------------------------------------ NumPy reference


def numpy_forward(W_enc, b_enc, W_dec, b_dec, x, k: int, *, batch: bool = False):
    """Float64 forward pass of the (temporal) TopK crosscoder, the equations of
    ``peers/torch_temporal.py`` (and of SAELens / sparsify for ``site = ()``)::

        pre   = einsum("b...,...f->bf", x, W_enc) + b_enc
        z     = ReLU(TopK_k(pre)) per row   (batch=True: the k*B largest of the batch)
        x_hat = einsum("bf,f...->b...", z, W_dec) + b_dec

    Returns ``(pre, idx, vals, x_hat)`` with the kept (row, latent) pairs as ``idx``
    (rows, latents) and their ReLU'd values ``vals``; the decoder is applied as a sparse
    (scipy CSR) product, so no dense ``(B, F)`` code is made in float64."""
    x = np.asarray(x, np.float64)
    B, F = x.shape[0], W_enc.shape[-1]
    We = np.asarray(W_enc, np.float64).reshape(-1, F)
    Wd = np.asarray(W_dec, np.float64).reshape(F, -1)
    pre = x.reshape(B, -1) @ We + np.asarray(b_enc, np.float64)
    if batch:
        n = min(k * B, pre.size)
        flat = np.argpartition(pre.ravel(), pre.size - n)[pre.size - n:]
        rows, cols = np.divmod(flat, F)
    else:
        cols = np.argpartition(pre, F - k, axis=1)[:, F - k:]
        rows = np.repeat(np.arange(B), k)
        cols = cols.ravel()
    vals = np.maximum(pre[rows, cols], 0.0)
    z = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(B, F))
    x_hat = z @ Wd + np.asarray(b_dec, np.float64).reshape(1, -1)
    return pre, (rows, cols), vals, x_hat.reshape(x.shape)


def recon_metrics(x, x_hat) -> dict:
    """Like-for-like reconstruction metrics in float64 from any side's ``x_hat``:
    ``mse`` = mean of ``(x - x_hat)^2`` over all elements, ``mse_sum_d`` = the batch mean of
    ``||x - x_hat||^2`` (SAELens' ``mse_loss``), ``fvu`` = ``sum ||x - x_hat||^2 /
    sum ||x - mean_B(x)||^2`` (jaxkit's and sparsify's loss)."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    e = x - np.asarray(x_hat, np.float64).reshape(x.shape)
    sq = float(np.sum(e * e))
    den = float(np.sum((x - x.mean(axis=0)) ** 2))
    return dict(mse=sq / e.size, mse_sum_d=sq / x.shape[0], fvu=sq / max(den, 1e-300))


def numpy_train_step(params: dict, x, k: int, lr: float, *, b1: float = 0.9,
                     b2: float = 0.999, eps: float = 1e-8) -> tuple[dict, float]:
    """One float64 training step of ``peers/torch_temporal.py`` from fresh Adam moments:
    FVU loss, its gradient for the kept latents (TopK + ReLU), decoder-parallel gradient
    removal (jointly over ``(*site, d)``), the first Adam update
    ``-lr * ghat / (sqrt(vhat) + eps)`` and unit-norm atoms. Returns ``(params, fvu)``."""
    W_enc, b_enc = np.asarray(params["W_enc"], np.float64), np.asarray(params["b_enc"],
                                                                       np.float64)
    W_dec, b_dec = np.asarray(params["W_dec"], np.float64), np.asarray(params["b_dec"],
                                                                       np.float64)
    B, F = x.shape[0], W_enc.shape[-1]
    xf = np.asarray(x, np.float64).reshape(B, -1)
    We, Wd = W_enc.reshape(-1, F), W_dec.reshape(F, -1)
    pre = xf @ We + b_enc
    keep = np.zeros_like(pre, bool)
    np.put_along_axis(keep, np.argpartition(pre, F - k, axis=1)[:, F - k:], True, axis=1)
    keep &= pre > 0
    z = np.where(keep, pre, 0.0)
    x_hat = z @ Wd + b_dec.reshape(-1)
    den = np.sum((xf - xf.mean(0)) ** 2)
    e = x_hat - xf
    loss = float(np.sum(e * e) / den)
    g_xhat = 2 * e / den
    g = {"W_dec": z.T @ g_xhat, "b_dec": g_xhat.sum(0)}
    g_pre = np.where(keep, g_xhat @ Wd.T, 0.0)
    g["W_enc"], g["b_enc"] = xf.T @ g_pre, g_pre.sum(0)
    Gd = g["W_dec"]
    Gd -= np.sum(Gd * Wd, 1, keepdims=True) / np.sum(Wd * Wd, 1, keepdims=True) * Wd
    cur = {"W_enc": We, "b_enc": b_enc, "W_dec": Wd, "b_dec": b_dec.reshape(-1)}
    new = {}
    for name, p in cur.items():
        m = (1 - b1) * g[name] / (1 - b1)  # bias-corrected first moment at step 1
        v = (1 - b2) * g[name] ** 2 / (1 - b2)
        new[name] = p - lr * m / (np.sqrt(v) + eps)
    new["W_dec"] /= np.linalg.norm(new["W_dec"], axis=1, keepdims=True)
    shapes = {n: np.shape(params[n]) for n in cur}
    return {n: v.reshape(shapes[n]) for n, v in new.items()}, loss


def model_flops(tokens_or_rows: int, D: int, F: int, k: int, decoder: str) -> float:
    """Model FLOPs of one training step: 3 x (encoder ``2 B D F`` + decoder ``2 B F D``
    dense or ``2 B k D`` sparse). ``B`` counts rows (windows for the temporal case)."""
    if decoder not in ("dense", "sparse"):
        raise ValueError(f"`decoder` must be 'dense' or 'sparse'; got {decoder!r}")
    B = tokens_or_rows
    dec = 2.0 * B * F * D if decoder == "dense" else 2.0 * B * k * D
    return 3.0 * (2.0 * B * D * F + dec)


def rel(a: float, b: float) -> float:
    """``|a - b| / |b|``."""
    return abs(a - b) / max(abs(b), 1e-300)


def update_rel_diff(after: np.ndarray, ref_after: np.ndarray, before: np.ndarray) -> float:
    """``||after - ref_after|| / ||ref_after - before||``: how far one side's parameters
    after step 1 are from the reference's, relative to the size of the update."""
    a, r, b = (np.asarray(v, np.float64).ravel() for v in (after, ref_after, before))
    return float(np.linalg.norm(a - r) / max(np.linalg.norm(r - b), 1e-300))


# --------------------------------------------------------------------------- config


def case_config(case: str, args) -> dict:
    T = args.T if case == "temporal" else 1
    site = (T,) if case == "temporal" else ()
    rows = args.batch // T
    return dict(case=case, d=args.d, F=args.latents, k=args.k, site=site, T=T, rows=rows,
                tokens=rows * T, D=T * args.d, lr=LR,
                activation="batch_topk" if case == "batchtopk" else "topk")


def _pin_threads(n: int):
    """Restrict this process (and the peers it starts) to ``n`` cores; returns the old
    affinity (to restore) or None when nothing changed."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    old = os.sched_getaffinity(0)
    if len(old) <= n:
        return None
    os.sched_setaffinity(0, sorted(old)[:n])
    return old


# ----------------------------------------------------------------------------- peers


def ensure_peer_venv(timeout: float = 1800) -> Path:
    """Create (once) ``benchmarks/.peer-venv-crosscoder`` and return its python: a venv
    whose ``_peer_torch.pth`` puts the site-packages of ``benchmarks/.peer-venv-torch``
    (made by :func:`jaxkit.bench.ensure_peer_venv` with :data:`TORCH_SPECS`) on its path,
    with :data:`PEER_SPECS` installed under the constraint ``torch==2.14.1`` (so pip
    keeps that torch). Raises ``RuntimeError`` with the reason when it cannot be made."""
    from jaxkit.bench import ensure_peer_venv as ensure
    from jaxkit.bench import peer_check, peer_env

    py = PEER_VENV / "bin" / "python"
    env = peer_env()
    ok = lambda: py.exists() and peer_check(py, PEER_CHECK)  # noqa: E731
    if ok():
        return py
    torch_py = ensure(TORCH_VENV, TORCH_SPECS, "import torch, mambapy", timeout=timeout)
    site = subprocess.run([str(torch_py), "-c", "import sysconfig; print(sysconfig."
                           "get_paths()['purelib'])"], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()
    print(f"creating {PEER_VENV} on top of {TORCH_VENV}'s torch (one-off) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cons = Path(tmp) / "constraints.txt"
        cons.write_text("torch==2.14.1\n")
        steps = [[sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], None,
                 [str(py), "-m", "pip", "install", "--quiet", "-c", str(cons), *PEER_SPECS]]
        for cmd in steps:
            if cmd is None:
                purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig."
                                          "get_paths()['purelib'])"], env=env,
                                         capture_output=True, text=True).stdout.strip()
                (Path(purelib) / "_peer_torch.pth").write_text(site + "\n")
                continue
            try:
                p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                   timeout=timeout)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise RuntimeError(f"`{' '.join(cmd[:4])} ...` failed: {e}") from e
            if p.returncode != 0:
                raise RuntimeError(f"`{' '.join(cmd[:4])} ...` exited {p.returncode}: "
                                   + " | ".join((p.stderr or p.stdout).strip()
                                                .splitlines()[-3:]))
    if not ok():
        raise RuntimeError(f"{PEER_VENV} was created but the peer check fails: {PEER_CHECK}")
    return py


def run_worker(py: Path, data: dict, impls: list[str], *, warmup: int, runs: int,
               threads: int, timeout: float = 3600) -> tuple[dict, dict]:
    """Run ``peers/crosscoder_worker.py`` on ``data`` (x, params, k, lr); returns its
    JSON and ``{impl: arrays}`` (x_hat0, parameters after step 1)."""
    from jaxkit.bench import peer_env

    env = peer_env()
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               SPARSIFY_DISABLE_TRITON="1")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.savez(tmp / "data.npz", **data)
        cmd = [str(py), str(WORKER), str(tmp / "data.npz"), str(tmp / "out.json"), str(tmp),
               "--impls", ",".join(impls), "--warmup", str(warmup), "--runs", str(runs),
               "--threads", str(threads)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"crosscoder worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        for line in p.stdout.splitlines():
            if line.split(":")[0] in impls:
                print("  peer " + line, flush=True)
        out = json.loads((tmp / "out.json").read_text())
        arrays = {i: dict(np.load(tmp / f"{i}.npz")) for i in impls}
    return out, arrays


# ----------------------------------------------------------------------------- cases


def _fmt_rate(r: float) -> str:
    return f"{r:,.0f} tok/s"


def profile_topk(args, cc, params, x_dev, k: int, erec, rec) -> dict:
    """Where the sparse TopK step's time goes, as increments of nested jitted functions
    on the same batch (each median of ``--runs`` calls): the encoder product; + top-k
    (``topk_encode``: blocked product and selection); + the sparse decoder and the FVU
    (``sparse_topk_loss`` forward); + the backward pass (``value_and_grad``: the
    gathered-decoder and scatter-add gradients); + the rest of the step (parallel-gradient
    removal, Adam, renormalisation, counters)."""
    import jax
    import jax.numpy as jnp

    from jaxkit import bench

    B, F = x_dev.shape[0], params.W_enc.shape[-1]
    x2 = x_dev.reshape(B, -1)
    W2 = params.W_enc.reshape(-1, F)
    dead = jnp.zeros((F,), bool)
    kw = dict(k=k, dead=None, sparsity_coef=0.0, sparsity="l1", tanh_c=4.0, k_aux=None,
              aux_coef=0.0)
    loss = lambda p, a: cc.sparse_topk_loss(p, a, **kw)[0]  # noqa: E731
    parts = [("encoder product", erec)]
    for name, fn, fargs in (
            ("+ top-k (topk_encode)", lambda a, w, b: cc.topk_encode(a, w, b, dead, k),
             (x2, W2, params.b_enc)),
            ("+ sparse decoder and FVU (loss forward)", loss, (params, x_dev)),
            ("+ backward (value_and_grad)", jax.value_and_grad(loss), (params, x_dev))):
        parts.append((name, bench.time_jax(jax.jit(fn), *fargs, n_runs=args.runs,
                                           warmup=args.warmup, name=name)))
    parts.append(("+ gradient removal, Adam, renormalisation, counters (the step)", rec))
    out, prev = [], 0.0
    print("  profile of the TopK step (medians; increments over the previous line):")
    for name, r in parts:
        inc = r.median_s - prev
        prev = r.median_s
        out.append(dict(part=name, median_s=r.median_s, increment_s=inc,
                        share=inc / rec.median_s))
        print(f"    {name:<66} {r.median_s * 1e3:8.1f} ms  (+{inc * 1e3:7.1f} ms, "
              f"{100 * inc / rec.median_s:4.0f}% of the step)", flush=True)
    return dict(parts=out)


def _loop(step):
    """``step(key, state, x)`` as :func:`jaxkit.bench.time_jax_loop` calls it."""
    return lambda state, key, x: step(key, state, x)


def run_case(args, case: str, rows: list, results: dict, summary: list, peer_py) -> None:
    import jax
    import optax

    from jaxkit import bench

    try:
        from jaxkit.kernels import crosscoder as cc
    except ImportError as e:  # the kernel is not there
        rows.append(dict(case=case, dtype="", skipped=f"jaxkit.kernels.crosscoder: {e}"))
        results[case] = dict(skipped=str(e))
        return
    cfg = case_config(case, args)
    B, D, F, k = cfg["rows"], cfg["D"], cfg["F"], cfg["k"]
    x = synthetic_batch(B, cfg["site"], cfg["d"], seed=args.seed)
    params = cc.init(jax.random.key(args.seed), cfg["d"], F, site=cfg["site"],
                     sample=x[: min(B, 1024)])
    init_state, step = cc.make_train_step(activation=cfg["activation"], k=k,
                                          optimizer=optax.adam(LR))
    state = init_state(params)
    key = jax.random.key(args.seed + 1)  # the step is deterministic; it takes a key
    label = {"topk": "TopK SAE", "batchtopk": "BatchTopK SAE",
             "temporal": f"temporal crosscoder T={cfg['T']}"}[case]
    desc = (f"{label}, d {cfg['d']}, F {F}, k {k}, "
            + (f"{B} windows x {cfg['T']} = {cfg['tokens']} tokens" if case == "temporal"
               else f"batch {B}"))
    print(f"{desc} ...", flush=True)

    jstep = jax.jit(step)
    x_dev = jax.device_put(x)
    # make_train_step's default (decoder="auto") is the sparse step for TopK
    jdec = "sparse" if cfg["activation"] == "topk" else "dense"
    jflops = model_flops(B, D, F, k, jdec)
    # timed as a training loop: the state donated call to call (updated in place, as
    # jaxkit.crosscoder's fit runs it and as the torch peers' in-place Adam does)
    rec = bench.time_jax_loop(_loop(step), state, key, x_dev, n_runs=args.runs,
                              warmup=args.warmup, items=cfg["tokens"], name=f"jaxkit {case}",
                              model_flops=jflops)  # compiles afresh
    jgflops = jflops / rec.median_s / 1e9
    impls = {"jaxkit": dict(kind="jaxkit", record=rec, tokens_per_s=rec.items_per_s,
                            model_flops=jflops, model_gflops_per_s=jgflops, decoder=jdec,
                            xla_flops=rec.flops)}
    summary.append(dict(case=case, impl=f"jaxkit make_train_step (jit, {jdec} decoder)",
                        record=rec, rate=rec.items_per_s, gflops=jgflops, decoder=jdec))
    # the encoder product alone, the same batch: the floor of the step (issue 31)
    W2, b2 = params.W_enc.reshape(-1, F), params.b_enc
    x2 = x_dev.reshape(B, -1)
    eflops = 2.0 * B * D * F
    erec = bench.time_jax(jax.jit(lambda a, w, b: a @ w + b), x2, W2, b2, n_runs=args.runs,
                          warmup=args.warmup, items=cfg["tokens"],
                          name=f"encoder product {case}", model_flops=eflops)
    impls["encoder_product"] = dict(kind="jaxkit", record=erec, model_flops=eflops,
                                    tokens_per_s=erec.items_per_s, decoder="-",
                                    model_gflops_per_s=eflops / erec.median_s / 1e9,
                                    step_over_encoder=rec.median_s / erec.median_s)
    summary.append(dict(case=case, impl="encoder product x @ W_enc + b_enc alone (jit)",
                        record=erec, rate=erec.items_per_s,
                        gflops=eflops / erec.median_s / 1e9, decoder="-"))
    if getattr(args, "profile", False) and jdec == "sparse":
        impls["profile"] = profile_topk(args, cc, params, x_dev, k, erec, rec)

    # step 1 from the shared initial weights (jaxkit side)
    names = ("W_enc", "b_enc", "W_dec", "b_dec")
    x_hat0_j = np.asarray(cc.forward(params, x_dev, activation=cfg["activation"], k=k)[2])
    state1, info1 = jstep(key, state, x_dev)
    after_j = {n: np.asarray(getattr(state1.params, n)) for n in names}
    p0 = {n: np.asarray(getattr(params, n)) for n in names}
    del state1
    ref = numpy_forward(p0["W_enc"], p0["b_enc"], p0["W_dec"], p0["b_dec"], x, k,
                        batch=case == "batchtopk")[3]
    m_ref = recon_metrics(x, ref)
    m_j = recon_metrics(x, x_hat0_j)
    step1 = {"reference_float64": m_ref,
             "jaxkit": dict(m_j, loss_step1=float(info1.fvu),
                            fvu_rel_to_reference=rel(m_j["fvu"], m_ref["fvu"]),
                            loss_rel_to_reference=rel(float(info1.fvu), m_ref["fvu"]))}
    acc_j = (f"FVU@1 {m_j['fvu']:.5f} (rel. to f64 ref "
             f"{step1['jaxkit']['fvu_rel_to_reference']:.1e}); {_fmt_rate(rec.items_per_s)}; "
             f"{jgflops:.0f} GFLOP/s")

    if args.dense and jdec == "sparse":  # the same step, dense formulation
        _, dstep = cc.make_train_step(activation=cfg["activation"], k=k,
                                      optimizer=optax.adam(LR), decoder="dense")
        dflops = model_flops(B, D, F, k, "dense")
        drec = bench.time_jax_loop(_loop(dstep), state, key, x_dev, n_runs=args.runs,
                                   warmup=args.warmup, items=cfg["tokens"],
                                   name=f"jaxkit dense {case}", model_flops=dflops)
        dstep = jax.jit(dstep)
        st1d, _ = dstep(key, state, x_dev)
        agree = {n: update_rel_diff(np.asarray(getattr(st1d.params, n)), after_j[n], p0[n])
                 for n in names}
        del st1d
        impls["jaxkit_dense"] = dict(
            kind="jaxkit", record=drec, tokens_per_s=drec.items_per_s, model_flops=dflops,
            model_gflops_per_s=dflops / drec.median_s / 1e9, decoder="dense",
            xla_flops=drec.flops, params_after_step1_rel_to_sparse_update=agree,
            sparse_speedup=drec.median_s / rec.median_s)
        summary.append(dict(case=case, impl="jaxkit make_train_step (jit, decoder='dense')",
                            record=drec, rate=drec.items_per_s,
                            gflops=dflops / drec.median_s / 1e9, decoder="dense"))
    del state
    res = dict(config=dict(cfg, dtype="float32", runs=args.runs, warmup=args.warmup,
                           threads=args.threads, optimizer="adam", auxk="off"),
               description=desc, implementations=impls, step1=step1)
    results[case] = res

    if peer_py is None or isinstance(peer_py, str):
        note = "peers skipped: " + (peer_py or "--no-peers")
        res["peer_note"] = note
        rows.append(dict(case=desc, dtype="float32", jax=rec, peer=None, peer_name="-",
                         acc_jax=acc_j, acc_peer=note))
        return
    data = dict(x=x, k=np.int64(k), lr=np.float64(LR), **p0)
    peer_list = PEERS[case]
    try:
        out, arrays = run_worker(peer_py, data, [p[0] for p in peer_list], warmup=args.warmup,
                                 runs=args.runs, threads=args.threads)
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        note = f"peers failed: {e}"
        res["peer_note"] = note
        rows.append(dict(case=desc, dtype="float32", jax=rec, peer=None, peer_name="-",
                         acc_jax=acc_j, acc_peer=note))
        return
    res["peer_versions"] = out["versions"]
    res["peer_torch_threads"] = out["torch_threads"]
    res["peer_torch_cpu_capability"] = out.get("torch_cpu_capability")
    res["peer_isa_env"] = out.get("isa_env")
    for impl, name, decoder in peer_list:
        r = out["results"][impl]
        prec = bench.record_from_times(name, r["times_s"], warmup=r["warmup"],
                                       items=cfg["tokens"],
                                       flops=model_flops(B, D, F, k, decoder),
                                       model_flops=model_flops(B, D, F, k, decoder))
        arr = arrays[impl]
        m_p = recon_metrics(x, arr["x_hat0"])
        own_ref = m_ref["mse_sum_d"] if impl.startswith("saelens") else m_ref["fvu"]
        after = {n: update_rel_diff(arr[f"after1_{n}"], after_j[n], p0[n])
                 for n in ("W_enc", "W_dec", "b_enc", "b_dec")}
        s1 = dict(m_p, fvu_rel_to_jaxkit=rel(m_p["fvu"], m_j["fvu"]),
                  mse_rel_to_jaxkit=rel(m_p["mse"], m_j["mse"]),
                  fvu_rel_to_reference=rel(m_p["fvu"], m_ref["fvu"]),
                  own_loss_step1=r["loss_step1"], own_loss_definition=r["loss_definition"],
                  own_loss_rel_to_reference=rel(r["loss_step1"], own_ref),
                  params_after_step1_rel_to_jaxkit_update=after)
        step1[impl] = s1
        gf = prec.flops_per_s / 1e9
        impls[impl] = dict(kind="peer", name=name, record=prec, tokens_per_s=prec.items_per_s,
                           model_flops=prec.flops, model_gflops_per_s=gf, decoder=decoder,
                           first_step_s=r["first_step_s"])
        summary.append(dict(case=case, impl=name, record=prec, rate=prec.items_per_s,
                            gflops=gf, decoder=decoder))
        rows.append(dict(
            case=desc, dtype="float32", jax=rec, peer=prec, peer_name=name, acc_jax=acc_j,
            acc_peer=(f"FVU@1 {m_p['fvu']:.5f} (rel. diff to jaxkit {s1['fvu_rel_to_jaxkit']:.1e},"
                      f" MSE {s1['mse_rel_to_jaxkit']:.1e}); W_dec after step 1 off by "
                      f"{after['W_dec']:.1e} of the update; {_fmt_rate(prec.items_per_s)}; "
                      f"{gf:.0f} GFLOP/s ({decoder} decoder)")))
    peer_rates = {i: impls[i]["tokens_per_s"] for i, _, _ in peer_list}
    fastest = max(peer_rates, key=peer_rates.get)
    ratio = rec.items_per_s / peer_rates[fastest]
    res["vs_fastest_peer"] = dict(peer=fastest, ratio=ratio, target=TARGET,
                                  met=bool(ratio >= TARGET))
    if jdec == "sparse":
        soe = impls["encoder_product"]["step_over_encoder"]
        res["vs_encoder_product"] = dict(step_over_encoder=soe, target=ENCODER_TARGET,
                                         met=bool(soe <= ENCODER_TARGET))
    if "jaxkit_dense" in impls:
        res["vs_fastest_peer"]["dense_ratio"] = (
            impls["jaxkit_dense"]["tokens_per_s"] / peer_rates[fastest])


# ----------------------------------------------------------------------------- main


def print_summary(summary, console=None):
    """Tokens/s, model GFLOP/s and the ratio to jaxkit, one line per implementation."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="training-step throughput (ratio = jaxkit tokens/s / this tokens/s)")
    for col in ("case", "implementation", "median step", "p10-p90", "compile", "tokens/s",
                "model GFLOP/s", "decoder", "jaxkit / this"):
        t.add_column(col, justify="left" if col in ("case", "implementation", "decoder")
                     else "right", overflow="fold")
    jrate = {s["case"]: s["rate"] for s in summary if s["impl"].startswith("jaxkit")}

    for s in summary:
        r = s["record"]
        t.add_row(*(escape(c) for c in (
            s["case"], s["impl"], f"{r.median_s:.3g} s", f"{r.p10_s:.3g}-{r.p90_s:.3g} s",
            "-" if r.compile_s is None else f"{r.compile_s:.2g} s", f"{s['rate']:,.0f}",
            f"{s['gflops']:.0f}", s["decoder"], f"{jrate[s['case']] / s['rate']:.2f}x")))
    (console or Console(width=200)).print(t)
    return t


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser(
        "bench_crosscoder", __doc__, CASES, quick_help="small sizes: d 64, F 512, batch 256",
        peers_help="skip SAELens / sparsify / torch_temporal (no virtual environment)")
    p.add_argument("--d", type=int, default=None, help="input width (default 768; quick 64)")
    p.add_argument("--latents", type=int, default=None,
                   help="latents F (default 16384; quick 512)")
    p.add_argument("--k", type=int, default=32, help="active latents per row (default 32)")
    p.add_argument("--batch", type=int, default=None,
                   help="tokens per step (default 4096; quick 256); temporal: batch // T "
                        "windows")
    p.add_argument("--T", type=int, default=5, help="temporal window (default 5)")
    p.add_argument("--runs", type=int, default=5, help="timed steps per side (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--threads", type=int, default=2,
                   help="threads for both sides (torch threads; XLA via CPU affinity)")
    p.add_argument("--no-dense", dest="dense", action="store_false",
                   help="skip timing jaxkit's dense formulation (decoder='dense') beside "
                        "its default sparse TopK step")
    p.add_argument("--profile", action="store_true",
                   help="time the parts of the jaxkit TopK step (increments)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    q = args.quick
    args.d = args.d or (64 if q else 768)
    args.latents = args.latents or (512 if q else 16384)
    args.batch = args.batch or (256 if q else 4096)
    cases = bench.parse_cases(p, args.only, CASES)
    if min(args.d, args.latents, args.k, args.batch, args.T, args.runs, args.threads) < 1:
        p.error("--d, --latents, --k, --batch, --T, --runs, --threads must be >= 1")
    if args.warmup < 1:
        p.error("--warmup must be >= 1 (the first step is the step-1 check)")
    if args.k > args.latents:
        p.error(f"--k must be <= --latents ({args.latents}); got {args.k}")
    if "temporal" in cases and args.batch < args.T:
        p.error(f"--batch must be >= --T ({args.T}) for the temporal case")

    old_affinity = _pin_threads(args.threads)
    try:
        from jaxkit import bench

        env = bench.environment(peers=("numpy", "jaxlib", "optax", "rich"))
        env["loadavg_at_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
        env["threads"] = args.threads
        t0 = time.perf_counter()
        peer_py = "--no-peers" if args.no_peers else None
        venv_note = None
        if not args.no_peers:
            tv = time.perf_counter()
            try:
                peer_py = ensure_peer_venv()
                venv_note = f"peer venv ready in {time.perf_counter() - tv:.1f} s"
            except RuntimeError as e:
                peer_py = f"peer venv unavailable: {e}"
                venv_note = peer_py
            print(venv_note, flush=True)
        env["peer_venv"] = dict(path=str(PEER_VENV), specs=PEER_SPECS, note=venv_note)
        rows, results, summary = [], {}, []
        for c in CASES:
            if c in cases:
                run_case(args, c, rows, results, summary, peer_py)
        bench.print_table(rows, title="jaxkit crosscoder training step vs PyTorch peers, CPU "
                                      "(speed-up = peer time / jaxkit time for the same tokens)")
        if summary:
            print_summary(summary)
        for c in cases:
            v = results.get(c, {}).get("vs_fastest_peer")
            if v:
                dense = (f"; jaxkit decoder='dense' {v['dense_ratio']:.2f}x"
                         if "dense_ratio" in v else "")
                print(f"{c}: jaxkit / fastest peer ({v['peer']}) = {v['ratio']:.2f}x "
                      f"(target {TARGET}x: {'met' if v['met'] else 'NOT met'}){dense}")
            e = results.get(c, {}).get("vs_encoder_product") or (
                {"step_over_encoder": results[c]["implementations"]["encoder_product"][
                    "step_over_encoder"], "met": None}
                if "implementations" in results.get(c, {}) and c != "batchtopk" else None)
            if e:
                met = "" if e["met"] is None else (
                    f" (target <= {ENCODER_TARGET}x: {'met' if e['met'] else 'NOT met'})")
                print(f"{c}: step / encoder product alone = {e['step_over_encoder']:.2f}x"
                      + met)
        print(bench.environment_line(env, time.perf_counter() - t0))
        if args.json:
            path = bench.write_json(args.json, dict(
                environment=env, argv=sys.argv if argv is None else argv, quick=q,
                results=results, rows=rows, summary=summary,
                table_markdown=bench.table_markdown(rows)))
            print(f"wrote {path}")
    finally:
        if old_affinity is not None:
            os.sched_setaffinity(0, old_affinity)
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
