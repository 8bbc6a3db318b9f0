"""TempBench baselines: one training step of TFA, the temporal SAE and the Matryoshka
SAE, jaxkit against a PyTorch reference of the same equations.

Run ``python benchmarks/bench_tempbench.py [--quick] [--json FILE] [--no-peers]
[--only tfa,tsae,matryoshka] [--repeats R]`` (or ``jaxkit bench tempbench``).

One step = forward, backward and an Adam update (lr 1e-3, optax / torch defaults
otherwise) plus the post-update decoder renormalisation, on a fixed batch:

* ``tfa`` -- :func:`jaxkit.kernels.crosscoder.temporal_baselines.tfa_loss` on windows
  ``(B, T, d)`` (causal attention over the shifted codes, least-squares scaling of the
  prediction, TopK novel codes);
* ``tsae`` -- ``tsae_loss`` on adjacent pairs ``(B, 2, d)`` (TopK per token, symmetric
  InfoNCE on the first F/2 latents);
* ``matryoshka`` -- ``matryoshka_loss`` on tokens ``(B, 1, d)`` (prefixes F/4, F/2, F).

jaxkit: the step of :func:`jaxkit.kernels.train.make_train_step` under ``jax.jit``
(:func:`jaxkit.bench.time_jax_loop`: the state donated call to call; compile time
apart). Peer: there is no released PyTorch package of these three architectures, so the
reference is an in-house PyTorch transcription of the same equations (torch.topk /
scatter, ``torch.optim.Adam``), run in the shared peer venv ``benchmarks/.peer-venv-torch``
(torch 2.14.1) by this same file with ``--worker``; weights and batch are exported as raw
float32 bytes (that venv has no NumPy). Both sides start from identical weights and must
give the same loss at step 1 (reported). Threads: torch ``set_num_threads(2)``
(``--peer-threads``); XLA's CPU pool uses the process's cores. On a loaded host torch's
OpenMP threads spin-wait and its times blow up (seen at load 25 on 2 cores): compare
runs at the same load, and try ``--peer-threads 1``.

Sizes: d 256, F 2048, T 5, batch 512 windows (``--quick``: d 64, F 256, T 3, batch 64;
5 timed calls). Speed is reported, never asserted.
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

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / ".peer-venv-torch"
PEER_SPECS = ["torch==2.14.1", "mambapy==1.2.0"]
PEER_CHECK = "import torch, mambapy"
CASES = ("tfa", "tsae", "matryoshka")
THREADS = 2
LR = 1e-3


# ----------------------------------------------------------------------------- torch side

def _worker(folder: str) -> None:  # runs in the peer venv: torch only, no NumPy
    import torch

    spec = json.loads((Path(folder) / "spec.json").read_text())
    torch.set_num_threads(spec["threads"])
    torch.set_num_interop_threads(1)

    def load(name):
        shape = spec["shapes"][name]
        raw = bytearray((Path(folder) / f"{name}.bin").read_bytes())
        return torch.frombuffer(raw, dtype=torch.float32).reshape(shape).clone()

    case, k = spec["case"], spec["k"]
    x = load("x")
    names = [n for n in spec["shapes"] if n != "x"]
    P = {n: load(n).requires_grad_(True) for n in names}
    opt = torch.optim.Adam(list(P.values()), lr=LR)

    def topk(pre, kk):
        vals, idx = torch.topk(pre, kk, dim=-1)
        return torch.zeros_like(pre).scatter(-1, idx, torch.relu(vals))

    def fvu(a, b):
        a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
        return ((a - b) ** 2).sum() / ((a - a.mean(0)) ** 2).sum().clamp_min(1e-12)

    def sae_codes(xt):  # cc.Params with site (1,): W_enc (1, d, F), W_dec (F, 1, d)
        return xt.reshape(xt.shape[0], -1) @ P["W_enc"].reshape(-1, P["W_enc"].shape[-1]) \
            + P["b_enc"]

    def sae_decode(z):
        return (z @ P["W_dec"].reshape(P["W_dec"].shape[0], -1) + P["b_dec"].reshape(-1))

    def loss_fn():
        if case == "tfa":
            u = x - P["b"]
            z_in = torch.relu(u @ P["E"])
            ctx = torch.cat([torch.zeros_like(z_in[:, :1]), z_in[:, :-1]], 1)
            q, kk_, v = z_in @ P["W_q"], ctx @ P["W_k"], ctx @ P["W_v"]
            T = x.shape[1]
            logits = q @ kk_.transpose(1, 2) / math.sqrt(P["W_q"].shape[-1])
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
            attn = torch.softmax(logits.masked_fill(~mask, float("-inf")), -1)
            zp = torch.relu((attn @ v) @ P["W_o"])
            dz = zp @ P["D"]
            a = (dz * u).sum(-1, keepdim=True) / ((dz ** 2).sum(-1, keepdim=True) + 1e-6)
            z_nov = topk(torch.relu((u - a * dz) @ P["E"]), k)
            return fvu(x, (zp * a + z_nov) @ P["D"] + P["b"])
        if case == "tsae":
            F = P["W_dec"].shape[0]
            z = [topk(sae_codes(x[:, t:t + 1]), k) for t in (0, 1)]
            rec = 0.5 * sum(fvu(x[:, t], sae_decode(z[t])) for t in (0, 1))

            def unit(h):
                return h / h.norm(dim=-1, keepdim=True).clamp_min(1e-6)
            s = unit(z[0][:, :F // 2]) @ unit(z[1][:, :F // 2]).T / 0.1
            c = -0.5 * (torch.log_softmax(s, 1).diagonal().mean()
                        + torch.log_softmax(s, 0).diagonal().mean())
            return rec + 0.1 * c
        F = P["W_dec"].shape[0]
        z = topk(sae_codes(x), k)
        idx = torch.arange(F)
        return torch.stack([fvu(x[:, 0], sae_decode(torch.where(idx < m, z, 0.0)))
                            for m in spec["prefixes"]]).mean()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        with torch.no_grad():
            W = P["D"] if case == "tfa" else P["W_dec"]
            flat = W.reshape(W.shape[0], -1)
            W.copy_((flat / flat.norm(dim=-1, keepdim=True).clamp_min(1e-6)).reshape(W.shape))
        return float(loss)

    with torch.no_grad():
        loss0 = float(loss_fn())
    for _ in range(spec["warmup"]):
        step()
    times = []
    for _ in range(spec["repeats"]):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"times": times, "loss0": loss0, "torch": torch.__version__}))


# ------------------------------------------------------------------------------- jax side

def _sizes(quick: bool) -> dict:
    return dict(d=64, F=256, T=3, B=64) if quick else dict(d=256, F=2048, T=5, B=512)


def _case(case: str, sz: dict, key):
    """(params, batch, loss(params, x) -> (loss, out), post_update)."""
    import jax
    from jaxkit.kernels import crosscoder as cc
    from jaxkit.kernels.crosscoder import temporal_baselines as tb

    d, F, T, B = sz["d"], sz["F"], sz["T"], sz["B"]
    k_p, k_x = jax.random.split(key)
    if case == "tfa":
        x = jax.random.normal(k_x, (B, T, d))
        return (tb.tfa_init(k_p, d, F), x, lambda p, x: tb.tfa_loss(p, x, k=4),
                tb.tfa_normalize, 4)
    window = 2 if case == "tsae" else 1
    x = jax.random.normal(k_x, (B, window, d))
    p = cc.init(k_p, d, F, site=(1,))
    if case == "tsae":
        return p, x, lambda p, x: tb.tsae_loss(p, x, k=8, n_high=F // 2, alpha=0.1,
                                               tau=0.1), cc.normalize_decoder, 8
    prefixes = (F // 4, F // 2, F)
    return (p, x, lambda p, x: tb.matryoshka_loss(p, x, k=8, prefixes=prefixes),
            cc.normalize_decoder, 8)


def _peer(py, case, params, x, k, prefixes, repeats, warmup, threads):
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        shapes = {}
        arrays = {"x": x, **params._asdict()}
        for n, a in arrays.items():
            if n == "log_threshold":
                continue
            a = np.ascontiguousarray(np.asarray(a, np.float32))
            (Path(tmp) / f"{n}.bin").write_bytes(a.tobytes())
            shapes[n] = list(a.shape)
        (Path(tmp) / "spec.json").write_text(json.dumps(dict(
            case=case, k=k, prefixes=list(prefixes), shapes=shapes, repeats=repeats,
            warmup=warmup, threads=threads)))
        from jaxkit.bench import peer_env

        env = {**peer_env(), "OMP_NUM_THREADS": str(threads)}
        out = subprocess.run([str(py), __file__, "--worker", tmp], env=env,
                             capture_output=True, text=True, timeout=1800)
        if out.returncode:
            raise RuntimeError(out.stderr.strip().splitlines()[-1])
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker(argv[1])
        return 0
    from jaxkit import bench

    p = bench.benchmark_parser("bench_tempbench", __doc__, CASES,
                               quick_help="d 64, F 256, T 3, batch 64, 5 timed calls",
                               peers_help="skip the PyTorch reference (no peer venv)")
    p.add_argument("--repeats", type=int, default=None, help="timed calls (default 20)")
    p.add_argument("--peer-threads", type=int, default=THREADS,
                   help="torch.set_num_threads of the reference (default 2)")
    args = p.parse_args(argv)
    cases = bench.parse_cases(p, args.only, CASES)
    repeats = args.repeats or (5 if args.quick else 20)
    warmup = 2
    import jax
    import jax.numpy as jnp
    import optax
    from jaxkit.kernels import train as ktrain

    t0 = time.perf_counter()
    env = bench.environment(peers=("torch",))
    sz = _sizes(args.quick)
    py = None
    if not args.no_peers:
        try:
            py = bench.ensure_peer_venv(PEER_VENV, PEER_SPECS, PEER_CHECK)
        except RuntimeError as e:
            print(f"peers skipped: {e}")
    rows = []
    for case in cases:
        params, x, loss, post, k = _case(case, sz, jax.random.key(0))
        opt = optax.adam(LR)
        step = ktrain.make_train_step(lambda p, key, b, aux, loss=loss: loss(p, b), opt,
                                      post_update=post)
        state = ktrain.init(params, opt)
        loss0 = float(jax.jit(loss)(params, x)[0])

        def run(state, key, x, step=step):
            st, info = step(key, state, x)
            return st, info.loss

        rec = bench.time_jax_loop(run, state, jax.random.key(1), x, n_runs=repeats,
                                  warmup=warmup, items=int(x.shape[0]), name=case)
        row = dict(case=f"{case} d{sz['d']} F{sz['F']} T{sz['T']} B{sz['B']}",
                   dtype="float32", jax=rec, acc_jax=f"loss@1 {loss0:.6f}")
        if py is not None:
            prefixes = (sz["F"] // 4, sz["F"] // 2, sz["F"])
            got = _peer(py, case, jax.device_get(params), jax.device_get(x), k, prefixes,
                        repeats, warmup, args.peer_threads)
            row.update(peer=bench.record_from_times("torch", got["times"], warmup=warmup,
                                                    items=int(x.shape[0])),
                       peer_name=f"PyTorch {got['torch']} reference, "
                                 f"{args.peer_threads} thread(s)",
                       acc_peer=f"loss@1 {got['loss0']:.6f} (rel. diff "
                                f"{abs(got['loss0'] - loss0) / max(abs(loss0), 1e-12):.1e})")
        rows.append(row)
        del state
        jnp.zeros(()).block_until_ready()
    ratios = {r["case"]: bench.speedup(r["jax"], r.get("peer")) for r in rows
              if r.get("peer") is not None}
    bench.finish(rows, env, t0, title="TempBench baselines: one training step",
                 after_table=lambda: print(bench.table_markdown(rows)), json_path=args.json,
                 payload=dict(rows=[{k_: (v.to_dict() if hasattr(v, "to_dict") else v)
                                     for k_, v in r.items()} for r in rows],
                              speedups=ratios, sizes=sz), markdown=False)
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    os.environ.setdefault("XLA_FLAGS", "")
    raise SystemExit(main())
