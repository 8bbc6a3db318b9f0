"""Composed language models: a character-level GPT training step and the Mamba block,
jaxkit against PyTorch (nanoGPT-style GPT) and mambapy (pure-PyTorch Mamba).

Run ``python benchmarks/bench_compose.py [--quick] [--json FILE] [--no-peers] [--only
CASES] [--repeats R]`` (or ``jaxkit bench compose``). Cases (``--only`` takes a comma
list):

* ``gpt-small`` -- nanoGPT's CPU recipe: 4 layers, 4 heads, width 128, context 64,
  batch 12, byte vocabulary (256), AdamW (lr 1e-3, betas 0.9/0.95, weight decay 0.1,
  clip 1.0), fp32: jaxkit's ``build("AMAMAMAM")`` (``jaxkit.compose``: an A and an M
  layer per nanoGPT block; LayerNorm without bias, no biases, tied embedding, learned
  positions) trained by ``kernels.train.make_train_step``, one jitted step per call with
  the batch drawn inside it (as the peer draws its batch in its step), against
  ``peers/torch_nanogpt.py`` (nanoGPT's ``model.py`` layout). Both start from the same
  weights (exported); the loss of those weights on one check batch is compared. Where
  the time goes: jaxkit's forward alone, forward + backward (``value_and_grad``) and the
  whole step are timed separately, and the step with ``jax.nn.dot_product_attention``
  (``attn_impl="xla"``) beside the einsum path. The main step and the peer's are
  *alternated* in one run (the peer is a server process; rounds of ``ALT_ROUND`` jaxkit
  calls then as many torch calls), so both see the same machine load; the accuracy
  column gives the median of the per-round wall ratios, each side's CPU time per call
  and the load average. ``--profile`` traces the 1-device step and prints its time by
  operation with each product's rate (:mod:`jaxkit.op_profile`). ``--devices N`` (N > 1)
  adds the same step data parallel over N host CPU devices
  (``--xla_force_host_platform_device_count``; a ``{"data": N}`` mesh, parameters
  replicated, the drawn batch split, gradients all-reduced by the jitted step),
  alternated in the same rounds, with its loss checked against the 1-device step's on
  the same weights and batch. ``--onednn`` adds the same step compiled with its matrix
  products in oneDNN (XLA:CPU's experimental oneDNN fusions), alternated in the same
  rounds, its first step's loss checked against the default program's.
* ``gpt-medium`` -- the same at 6 layers, 6 heads, width 384, context 256, batch 16.
* ``mamba`` -- one Mamba mixer (width 128, expand 2, state 16, conv 4; batch 8, length
  256; ``--quick``: width 64, batch 4, length 64), forward + backward of
  ``sum(out * g)`` with respect to the weights and the input: jaxkit's
  ``kernels.seq.mamba_mixer`` with the sequential (``lax.scan``) and the associative
  selective scan against mambapy's ``MambaBlock`` (``pscan``), same weights; the
  outputs are compared.
* ``mamba2`` -- one Mamba-2 mixer (width 128, expand 2, state 16, head dim 16, chunk 32;
  batch 8, length 256; ``--quick``: width 64, chunk 16, batch 4, length 64), forward +
  backward of ``sum(out * g)``: ``kernels.seq.mamba2_mixer`` with the chunked SSD and
  with its step-by-step recurrence, against the same mixer in PyTorch around
  ``ssd_minimal_discrete`` (the pure-PyTorch chunked SSD listing of state-spaces/mamba;
  there is no CPU Mamba-2 library: mambapy's ``Mamba2`` and mamba-ssm need Triton/CUDA),
  same weights; the outputs are compared.
* ``attention`` -- causal attention alone, forward + backward of ``sum(out * g)`` with
  respect to q, k, v at the GPT shapes (batch 12, length 64, 4 heads of 32; batch 16,
  length 256, 6 heads of 64; ``--quick``: the first): ``kernels.seq.causal_attention``
  (heads-major row blocks, and ``dot_product_attention``) against torch's
  ``scaled_dot_product_attention``.

* ``products`` -- the large matrix products of the gpt-medium step alone (4,096 rows;
  K x N of 384 x 1536, 1536 x 384, 384 x 1152, 384 x 384), each in the forward, input-
  gradient and weight-gradient forms, against torch's ``@`` on the same shapes: whether
  the step's gap to torch lies in the products' rate (``--quick``: 512 rows).
* ``candidates`` -- AIRA-Compose's stage-1 training: all 64 strings of 3 layers over
  {A, M, S, D} (width 32, 2 heads, state 8, context 32, batch 16; ``--quick``: the 4
  strings of 2 layers over {A, M} at width 16, context 16, batch 4), one chunk of
  ``CAND_CHUNK`` AdamW steps of all candidates, jaxkit's routed training
  (:mod:`jaxkit.compose.train`: each layer's candidates gathered to their own block)
  against the same candidates as a ``vmap`` over candidates of the supernet's
  ``lax.switch`` (every block of every letter for every candidate, then a select: how
  the training ran before 516625b, there with the layers in a ``lax.scan``, here
  unrolled, the faster of the two), from the same weights and batches; their losses are
  compared. Both are jaxkit; no peer library trains candidate architectures.

Every case also reports each side's median process CPU time per call (all threads), the
steadier measure on a loaded machine (the accuracy column: ``cpu/call``).

Peers run in ``benchmarks/.peer-venv-torch`` (torch 2.14.1, mambapy 1.2.0; created on
first use by :func:`jaxkit.bench.ensure_peer_venv`), one at a time, with
``torch.set_num_threads(2)`` (``--peer-threads``). Targets (issue 23): GPT step >= 1.0x
PyTorch, Mamba block >= 1.5x mambapy, attention at parity with torch's; on a GPU, MFU of
the step >= 40% in bfloat16 (``--dtype bfloat16``).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / ".peer-venv-torch"
PEER_SPECS = ["torch==2.14.1", "mambapy==1.2.0"]
PEER_CHECK = "import torch, mambapy"
CASES = ("gpt-small", "gpt-medium", "mamba", "mamba2", "attention", "products", "candidates")
GPT = {"gpt-small": dict(n_layer=4, n_head=4, d=128, block_size=64, batch=12),
       "gpt-medium": dict(n_layer=6, n_head=6, d=384, block_size=256, batch=16)}
MAMBA = dict(d=128, d_state=16, expand=2, d_conv=4, batch=8, length=256)
MAMBA_QUICK = dict(d=64, d_state=16, expand=2, d_conv=4, batch=4, length=64)
MAMBA2 = dict(d=128, d_state=16, expand=2, head_dim=16, d_conv=4, chunk=32, batch=8,
              length=256)  # chunk: the composed models' (Arch.ssd_chunk), on both sides
MAMBA2_QUICK = dict(d=64, d_state=16, expand=2, head_dim=16, d_conv=4, chunk=16, batch=4,
                    length=64)
# The large products of gpt-medium's step, (rows, K, N): rows = batch 16 x context 256
PRODUCTS = tuple((4096, k, n) for k, n in ((384, 1536), (1536, 384), (384, 1152), (384, 384)))
ATTENTION = {"small": dict(batch=12, length=64, heads=4, head_dim=32),
             "medium": dict(batch=16, length=256, heads=6, head_dim=64)}
TARGETS = {"gpt-small": 1.0, "gpt-medium": 1.0, "mamba fwd": 1.5, "attention": 1.0}
CANDIDATES = dict(depth=3, letters="AMSD", width=32, heads=2, d_state=8, context=32, batch=16)
CANDIDATES_QUICK = dict(depth=2, letters="AM", width=16, heads=2, d_state=4, context=16,
                        batch=4)
CAND_CHUNK = 10  # training steps per timed call of the candidates case
THREADS = 2
ALT_ROUND = 2  # GPT step: jaxkit and torch calls per alternation round


def write_arrays(folder: Path, arrays: dict) -> Path:
    """Raw float32/int32 bytes plus a JSON index (the torch venv has no NumPy)."""
    raw = folder / "arrays.bin"
    index, offset, chunks = [], 0, []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a, np.int32 if np.issubdtype(np.asarray(a).dtype, np.integer)
                                 else np.float32)
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        index.append(dict(name=name, dtype=str(a.dtype), shape=list(a.shape), offset=offset,
                          count=int(a.size)))
        chunks.append(b)
        offset += len(b)
    raw.write_bytes(b"".join(chunks))
    path = folder / "arrays.json"
    path.write_text(json.dumps(dict(file=str(raw), arrays=index)))
    return path


# The peers run in the torch venv from these sources (the model and training step of
# peers/torch_nanogpt.py, the block of peers/torch_mamba.py, ``read_arrays`` of the
# former); each reply carries the wall and the process CPU time of every timed call.
# Mamba-2 has no CPU peer library (mambapy's Mamba2 and mamba-ssm call Triton kernels,
# CUDA only), so its peer is the pure-PyTorch ``ssd_minimal_discrete`` recurrence of
# state-spaces/mamba (the reference listing of the SSD paper) inside the same mixer,
# written here from the paper.
PEER_COMMON = """
import json, sys, time
from pathlib import Path
import torch
import torch.nn.functional as F
sys.path.insert(0, {peers!r})
from _common import versions
from torch_nanogpt import read_arrays

req = json.loads(Path(sys.argv[1]).read_text())
torch.set_num_threads(int(req.get("threads", 2)))
w = read_arrays(req["arrays"])


def timed(call):
    for _ in range(req["warmup"]):
        call()
    times, cpu = [], []
    for _ in range(req["n_runs"]):
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu
"""

PEER_MAMBA2 = """
def segsum(x):
    t = x.shape[-1]
    x = x[..., None].expand(*x.shape, t)
    x = x.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool), -1), 0)
    s = torch.cumsum(x, dim=-2)
    return s.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), -torch.inf)


def ssd(X, A, B, C, q):  # ssd_minimal_discrete: X (b,l,h,p), A (b,l,h), B, C (b,l,h,n)
    b, l, h, p = X.shape
    X, A, B, C = (v.reshape(b, l // q, q, *v.shape[2:]) for v in (X, A, B, C))
    A = A.permute(0, 3, 1, 2)                                      # (b, h, c, q)
    A_cum = torch.cumsum(A, dim=-1)
    L = torch.exp(segsum(A))
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay = torch.exp(A_cum[..., -1:] - A_cum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay, X)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segsum(F.pad(A_cum[..., -1], (1, 0))))
    states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, :-1]
    Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, torch.exp(A_cum))
    return (Y_diag + Y_off).reshape(b, l, h, p)


P = {k: w[k].clone().requires_grad_(True) for k in
     ("w_in", "conv_w", "conv_b", "b_dt", "A_log", "D", "gate_norm", "w_out")}
x, g = w["x"].clone().requires_grad_(True), w["g"]
e, n, q = req["expand"] * req["d"], req["d_state"], req["chunk"]
nh, K = e // req["head_dim"], req["d_conv"]


def mixer(x):
    b, l, _ = x.shape
    zxd = x @ P["w_in"]
    z, xbc, dt = zxd[..., :e], zxd[..., e:2 * e + 2 * n], zxd[..., 2 * e + 2 * n:]
    xbc = F.conv1d(xbc.transpose(1, 2), P["conv_w"].T[:, None, :], P["conv_b"],
                   padding=K - 1, groups=xbc.shape[-1])[..., :l].transpose(1, 2)
    xbc = F.silu(xbc)
    u, B, C = xbc[..., :e], xbc[..., e:e + n], xbc[..., e + n:]
    dt = F.softplus(dt + P["b_dt"])
    A = -torch.exp(P["A_log"])
    u = u.reshape(b, l, nh, e // nh)
    Bh, Ch = (v[:, :, None].expand(b, l, nh, n) for v in (B, C))
    y = ssd(u * dt[..., None], A * dt, Bh, Ch, q) + P["D"][:, None] * u
    y = y.reshape(b, l, e) * F.silu(z)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * P["gate_norm"]
    return y @ P["w_out"]


with torch.no_grad():
    check = float((mixer(x) * g).sum())


def call():
    for v in [x, *P.values()]:
        v.grad = None
    (mixer(x) * g).sum().backward()


times, cpu = timed(call)
print(json.dumps(dict(times=times, cpu=cpu, check=check, threads=torch.get_num_threads(),
                      versions=versions(["torch"]))))
"""

PEER_ATTENTION = """
q, k, v, g = (w[n].clone().requires_grad_(n != "g") for n in ("q", "k", "v", "g"))


def call():
    for t in (q, k, v):
        t.grad = None
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                       v.transpose(1, 2), is_causal=True).transpose(1, 2)
    (o * g).sum().backward()


with torch.no_grad():
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                       v.transpose(1, 2), is_causal=True).transpose(1, 2)
    check = float((o * g).sum())
times, cpu = timed(call)
print(json.dumps(dict(times=times, cpu=cpu, check=check, threads=torch.get_num_threads(),
                      versions=versions(["torch"]))))
"""


PEER_PRODUCTS = """
out = {}
for m, k, n in req["shapes"]:
    x, wt, dy = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
    for form, call in (("forward", lambda: x @ wt), ("input grad", lambda: dy @ wt.T),
                       ("weight grad", lambda: x.T @ dy)):
        out[f"{m},{k},{n},{form}"] = timed(call)[0]
print(json.dumps(dict(times=out, threads=torch.get_num_threads(), versions=versions(["torch"]))))
"""


PEER_GPT = """
from torch_nanogpt import GPT, train_step

torch.manual_seed(0)
model = GPT(req["n_layer"], req["n_head"], req["d"], req["block_size"])
model.load_jaxkit(w)
with torch.no_grad():
    check = float(model(w["check_x"].long(), w["check_y"].long()))
step = train_step(model, w["data"].long(), req["batch"], req["block_size"])
if req.get("serve"):  # alternated with jaxkit: one line "n" on stdin -> n timed steps
    for _ in range(req["warmup"]):
        step()
    print(json.dumps(dict(check_loss=check, threads=torch.get_num_threads(),
                          versions=versions(["torch"]))), flush=True)
    for line in sys.stdin:
        n = int(line)
        if n <= 0:
            break
        times, cpu = [], []
        for _ in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        print(json.dumps(dict(times=times, cpu=cpu)), flush=True)
    sys.exit(0)
times, cpu = timed(step)
print(json.dumps(dict(times=times, cpu=cpu, check_loss=check, threads=torch.get_num_threads(),
                      versions=versions(["torch"]))))
"""


PEER_MAMBA = """
from torch_mamba import mamba_block

blk = mamba_block(req, w)  # pscan
x, g = w["x"].clone().requires_grad_(True), w["g"]
with torch.no_grad():
    check = float((blk(x) * g).sum())


def call():
    for p in blk.parameters():
        p.grad = None
    x.grad = None
    (blk(x) * g).sum().backward()


times, cpu = timed(call)
print(json.dumps(dict(times=times, cpu=cpu, check=[0.0, check],
                      threads=torch.get_num_threads(), versions=versions(["torch", "mambapy"]))))
"""


def run_peer_source(source: str, request: dict, tmp: Path) -> dict:
    """Run ``PEER_COMMON + source`` in the torch venv: the request as JSON, the arrays as
    raw bytes (:func:`write_arrays`), the reply one JSON line on stdout."""
    script = Path(tmp) / "peer_inline.py"
    script.write_text(PEER_COMMON.format(peers=str(HERE / "peers")) + source)
    from jaxkit import bench

    py = bench.ensure_peer_venv(PEER_VENV, PEER_SPECS, PEER_CHECK)
    req = Path(tmp) / "request.json"
    req.write_text(json.dumps(request))
    env = dict(bench.peer_env(), OMP_NUM_THREADS=str(request.get("threads", THREADS)))
    p = subprocess.run([str(py), str(script), str(req)], env=env, capture_output=True,
                       text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"inline peer failed: {p.stderr.strip().splitlines()[-3:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


class PeerServer:
    """``PEER_COMMON + source`` running in the torch venv as a server (the request with
    ``serve=True``): ``first`` is its ready line, ``run(n)`` times ``n`` more peer calls
    and returns ``{"times", "cpu"}``. Lets jaxkit and the peer alternate in one run."""

    def __init__(self, source: str, request: dict, tmp: Path):
        from jaxkit import bench

        script = Path(tmp) / "peer_server.py"
        script.write_text(PEER_COMMON.format(peers=str(HERE / "peers")) + source)
        py = bench.ensure_peer_venv(PEER_VENV, PEER_SPECS, PEER_CHECK)
        req = Path(tmp) / "request_server.json"
        req.write_text(json.dumps(dict(request, serve=True)))
        env = dict(bench.peer_env(), OMP_NUM_THREADS=str(request.get("threads", THREADS)))
        self.proc = subprocess.Popen([str(py), str(script), str(req)], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.first = self._reply()

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read().strip().splitlines()[-3:]
            raise RuntimeError(f"peer server failed: {err}")
        return json.loads(line)

    def run(self, n: int) -> dict:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("0\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def timed_calls(call, n: int) -> tuple[list[float], list[float]]:
    """Wall and process CPU times of ``n`` blocking calls of ``call()``."""
    wt, ct = [], []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        wt.append(time.perf_counter() - t0)
        ct.append(time.process_time() - c0)
    return wt, ct


def alternate(jax_call, peer: PeerServer | None, *, rounds: int, per_round: int,
              others: dict | None = None) -> dict:
    """``rounds`` rounds of ``per_round`` jaxkit calls (``jax_call()``, blocking), then
    ``per_round`` calls of each of ``others`` (name -> call: other jaxkit variants), then
    ``per_round`` peer calls (none when ``peer`` is None): all sides see the same machine
    load. Returns the per-call wall and process CPU times of every side (``others`` under
    ``other[name]``) and the per-round ratios ``median(peer) / median(jaxkit)`` (wall;
    ``other[name]["pair_ratios"]`` for each variant)."""
    others = others or {}
    out = dict(jax_times=[], jax_cpu=[], peer_times=[], peer_cpu=[], pair_ratios=[],
               other={k: dict(times=[], cpu=[], pair_ratios=[]) for k in others})
    for _ in range(rounds):
        wt, ct = timed_calls(jax_call, per_round)
        out["jax_times"] += wt
        out["jax_cpu"] += ct
        ot = {}
        for k, call in others.items():
            ot[k], oc = timed_calls(call, per_round)
            out["other"][k]["times"] += ot[k]
            out["other"][k]["cpu"] += oc
        if peer is None:
            continue
        r = peer.run(per_round)
        out["peer_times"] += r["times"]
        out["peer_cpu"] += r["cpu"]
        out["pair_ratios"].append(float(np.median(r["times"]) / np.median(wt)))
        for k in others:
            out["other"][k]["pair_ratios"].append(
                float(np.median(r["times"]) / np.median(ot[k])))
    return out


def cpu_per_call(fn, *args, n_runs: int) -> float:
    """Median process CPU time (all threads) of one call of the already compiled ``fn``,
    to set beside the wall-clock medians: on a loaded machine the CPU time each side
    spends is the steadier measure."""
    import jax

    jax.block_until_ready(fn(*args))
    cpu = []
    for _ in range(n_runs):
        c0 = time.process_time()
        jax.block_until_ready(fn(*args))
        cpu.append(time.process_time() - c0)
    return float(np.median(cpu))


def cpu_note(jax_cpu: float, peer: dict | None) -> str:
    """``cpu/call`` of both sides and their ratio, for the accuracy column."""
    if peer is None or "cpu" not in peer:
        return f"cpu/call {jax_cpu * 1e3:.3g} ms"
    pc = float(np.median(peer["cpu"]))
    return (f"cpu/call {jax_cpu * 1e3:.3g} ms vs peer {pc * 1e3:.3g} ms "
            f"({pc / jax_cpu:.2f}x)")


def step_loop(step, state, key, *args, n_calls: int, sharding=None, compiler_options=None):
    """``(call, compile_s, flops, compiled)``: ``call()`` runs one more step of the training loop
    ``state, info = step(state, key_i, *args)`` (jitted with the state donated, as
    :func:`jaxkit.bench.time_jax_loop`; a fresh key per call) and blocks on the result.
    ``sharding``: where the state and the step's outputs live (a replicated
    ``NamedSharding`` on a mesh for the data-parallel step; None: the default device);
    ``compiled`` is the executable (its ``as_text()`` feeds ``--profile``);
    ``compiler_options``: XLA options of the jitted step (None: the defaults)."""
    import jax
    import jax.numpy as jnp

    from jaxkit import bench

    state = jax.tree.map(lambda a: jnp.array(a, copy=True), state)
    if sharding is None:
        jitted = jax.jit(step, donate_argnums=0, compiler_options=compiler_options)
    else:
        state = jax.device_put(state, sharding)
        jitted = jax.jit(step, donate_argnums=0, out_shardings=sharding,
                         compiler_options=compiler_options)
    t0 = time.perf_counter()
    compiled = jitted.lower(state, key, *args).compile()
    compile_s = time.perf_counter() - t0
    flops = bench._xla_flops(compiled)
    # split ahead (no key op per call); reused in turn past n_calls (--profile's calls)
    keys = itertools.cycle(list(jax.random.split(key, n_calls + 1)))
    carry = [state]

    def call():
        carry[0] = jitted(carry[0], next(keys), *args)[0]
        jax.block_until_ready(carry[0])

    return call, compile_s, flops, compiled


def same_loss(default, other, st0, key, *args) -> str:
    """A note that one step from ``st0`` of the executable ``other`` gives the loss of
    ``default`` (both compiled by :func:`step_loop`, state donated: each gets a copy);
    relative tolerance 1e-5, float32; raises otherwise."""
    import jax
    import jax.numpy as jnp

    l0, l1 = (float(c(jax.tree.map(jnp.copy, st0), key, *args)[1].loss)
              for c in (default, other))
    if not np.isclose(l1, l0, rtol=1e-5, atol=0):
        raise RuntimeError(f"loss {l1!r} != default program's loss {l0!r}")
    return f"loss {l1:.6f} = default {l0:.6f} (rel. {abs(l1 - l0) / abs(l0):.1e}, tol 1e-5)"


def data_parallel_step(step, st0, data_dev, args, B: int, T: int, train_step):
    """The GPT step data parallel over ``args.devices`` host devices: the parameters and
    optimiser state replicated, the drawn batch split over a ``{"data": N}`` mesh
    (``jaxkit.distributed``) by a sharding constraint, so the one jitted step runs each
    device's share of the batch on its own and all-reduces the gradients. Returns
    ``((call, compile_s, flops, compiled), check)``: the loop as :func:`step_loop`'s, and a note
    that one step from the same state and key gives the 1-device step's loss (relative
    tolerance 1e-5, float32; raises otherwise)."""
    import jax

    from jaxkit import distributed as dist
    from jaxkit.compose.data import sample_windows

    n = args.devices
    if jax.device_count() < n:
        raise RuntimeError(f"--devices {n}: JAX sees {jax.device_count()} devices (XLA_FLAGS "
                           f"was set after the backend started?)")
    if B % n:
        raise ValueError(f"--devices {n} must divide the batch {B}")
    mesh = dist.make_mesh({dist.DATA: n}, devices=jax.devices()[:n])
    rep, rows = dist.replicated(mesh), dist.data_sharding(mesh, 2)

    def dp_train_step(st, key, data):
        batch = jax.lax.with_sharding_constraint(sample_windows(key, data, B, T), rows)
        return step(key, st, batch)

    data_rep = jax.device_put(data_dev, rep)
    key = jax.random.key(1)
    s1, i1 = jax.jit(train_step)(st0, key, data_dev)
    sn, i_n = jax.jit(dp_train_step, out_shardings=rep)(jax.device_put(st0, rep), key,
                                                        data_rep)
    l1, ln = float(i1.loss), float(i_n.loss)
    dmax = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in
               zip(jax.tree.leaves(s1.params), jax.tree.leaves(sn.params), strict=True))
    if not np.isclose(ln, l1, rtol=1e-5, atol=0):
        raise RuntimeError(f"{n}-device step loss {ln!r} != 1-device loss {l1!r}")
    check = (f"loss {ln:.6f} = 1-device {l1:.6f} (rel. {abs(ln - l1) / abs(l1):.1e}, "
             f"tol 1e-5); params after 1 step max|diff| {dmax:.1e}")
    loop = step_loop(dp_train_step, st0, key, data_rep, n_calls=args.repeats + 2,
                     sharding=rep)
    return loop, check


def profile_step(name: str, call, compiled) -> dict:
    """``--profile``: where one call of the 1-device step goes, by operation
    (:mod:`jaxkit.op_profile`: traced seconds, product FLOPs and rates; two traced
    calls). Printed, and returned for the JSON rows."""
    from jaxkit import op_profile

    s = op_profile.summarize(op_profile.op_profile(call, compiled.as_text(), n_calls=2))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    print(f"\n{name} step by operation ({cores} cores in this process's affinity; on more "
          f"than one, a library product's traced time is its wall time):")
    print(op_profile.summary_markdown(s))
    return dict(s, cores=cores)


def gpt_case(name: str, args, data: np.ndarray, tmp: Path) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx
    from jaxkit.kernels import _xla_cpu
    from jaxkit.kernels import train as ktrain

    from jaxkit import bench
    from jaxkit.compose import build, lm_loss
    from jaxkit.compose.data import sample_windows
    from jaxkit.compose.train import peak_flops

    c = GPT[name]
    L, H, D, T, B = c["n_layer"], c["n_head"], c["d"], c["block_size"], c["batch"]
    dtype = jnp.bfloat16 if args.dtype == "bfloat16" else jnp.float32
    data_dev = jnp.asarray(data)
    check = sample_windows(jax.random.key(7), data_dev, B, T)
    rows, recs, cpus, loops = [], {}, {}, {}
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(1e-3, b1=0.9, b2=0.95, weight_decay=0.1))
    for impl in ("einsum", "xla"):
        model = build("AM" * L, jax.random.key(0), width=D, heads=H, context=T,
                      dtype=dtype, attn_impl=impl)
        graphdef, nstate = nnx.split(model)
        # the parameters travel as a flat list of arrays (the pipeline's trainer passes
        # pure dicts): nnx Variables in the carried state cost ~7 ms of Python flattening
        # per call at gpt-small
        state, treedef = jax.tree.flatten(nstate)

        def merged(params, graphdef=graphdef, treedef=treedef):
            return nnx.merge(graphdef, jax.tree.unflatten(treedef, params))

        def loss(params, key, batch, aux, merged=merged):
            del key, aux
            logits = merged(params)(batch[:, :-1])
            return lm_loss(logits, batch[:, 1:]), ()

        step = ktrain.make_train_step(loss, opt)

        def train_step(st, key, data, step=step):
            return step(key, st, sample_windows(key, data, B, T))

        st0 = ktrain.init(state, opt)
        if impl == "einsum":
            loops[impl] = step_loop(train_step, st0, jax.random.key(1), data_dev,
                                    n_calls=args.repeats + 2)
            onednn = _xla_cpu.cpu_options(_xla_cpu.ONEDNN_DOTS) if args.onednn else None
            if onednn is not None:  # the same step with its products in oneDNN
                loops["onednn"] = step_loop(train_step, st0, jax.random.key(1), data_dev,
                                            n_calls=args.repeats + 2, compiler_options=onednn)
                onednn_check = same_loss(loops["einsum"][3], loops["onednn"][3], st0,
                                         jax.random.key(1), data_dev)
            if args.devices > 1:
                dp_call, dp_check = data_parallel_step(step, st0, data_dev, args, B, T,
                                                       train_step)
        else:
            recs[impl] = bench.time_jax_loop(train_step, st0, jax.random.key(1), data_dev,
                                             n_runs=args.repeats, warmup=2, items=B * T,
                                             name=f"{name} step ({impl})")
            cpus[impl] = cpu_per_call(jax.jit(train_step), st0, jax.random.key(1), data_dev,
                                      n_runs=args.repeats)
        if impl == "einsum":
            arch = model.arch
            fwd = jax.jit(lambda p, b, merged=merged: lm_loss(merged(p)(b[:, :-1]), b[:, 1:]))
            vg = jax.jit(jax.value_and_grad(lambda p, b, merged=merged: lm_loss(
                merged(p)(b[:, :-1]), b[:, 1:])))
            r_f = bench.time_jax(fwd, state, check, n_runs=args.repeats, items=B * T,
                                 name=f"{name} forward")
            r_g = bench.time_jax(vg, state, check, n_runs=args.repeats, items=B * T,
                                 name=f"{name} forward+backward")
            check_loss = float(fwd(state, check))
            flat = {"/".join(map(str, k)): np.asarray(v[...]) for k, v in
                    nnx.to_flat_state(nnx.state(model, nnx.Param))}
            arrays = {"tok": flat["embed/tok"], "pos": flat["embed/pos"],
                      "norm_f": flat["embed/norm_f"], "data": data.astype(np.int32),
                      "check_x": np.asarray(check[:, :-1]), "check_y": np.asarray(check[:, 1:])}
            for k, v in flat.items():
                if k.startswith("blocks/"):
                    _, i, f = k.split("/")
                    arrays[f"{i}.{f}"] = v
    peer, acc_peer, r, alt = None, "", None, None
    call, compile_s, flops, compiled = loops["einsum"]
    for _ in range(2):  # warm-up
        call()
    others = {}
    if "onednn" in loops:
        for _ in range(2):
            loops["onednn"][0]()
        others["onednn"] = loops["onednn"][0]
    if args.devices > 1:
        for _ in range(2):
            dp_call[0]()
        others["dp"] = dp_call[0]
    rounds = max(1, -(-args.repeats // ALT_ROUND))
    if not args.no_peers:
        # peers/torch_nanogpt.py's model and step in a server process, alternated with
        # jaxkit's step in rounds of ALT_ROUND calls (both see the same load)
        srv = PeerServer(PEER_GPT, dict(c, arrays=str(write_arrays(tmp, arrays)),
                                        n_runs=0, warmup=2, threads=args.peer_threads), tmp)
        try:
            alt = alternate(call, srv, rounds=rounds, per_round=ALT_ROUND, others=others)
            last_other = alt["other"]
        finally:
            srv.close()
        r = dict(srv.first, times=alt["peer_times"], cpu=alt["peer_cpu"])
        peer = bench.record_from_times(f"{name} torch", r["times"], warmup=2, items=B * T)
        recs["einsum"] = bench.record_from_times(
            f"{name} step (einsum)", alt["jax_times"], warmup=2, items=B * T,
            compile_s=compile_s, flops=flops)
        cpus["einsum"] = float(np.median(alt["jax_cpu"]))
        acc_peer = f"check loss {r['check_loss']:.5f}"
    else:
        alt = alternate(call, None, rounds=rounds, per_round=ALT_ROUND, others=others)
        recs["einsum"] = bench.record_from_times(f"{name} step (einsum)", alt["jax_times"],
                                                 warmup=2, items=B * T,
                                                 compile_s=compile_s, flops=flops)
        cpus["einsum"] = float(np.median(alt["jax_cpu"]))
        last_other, alt = alt["other"], None
    fl = arch.flops_per_token() * B * T
    pk = peak_flops()
    mfu = "" if pk is None else f", MFU {fl / recs['einsum'].median_s / pk:.1%}"
    pairs = "" if alt is None else (
        f"; alternated with the peer, median pair ratio "
        f"{np.median(alt['pair_ratios']):.2f}x [{min(alt['pair_ratios']):.2f}-"
        f"{max(alt['pair_ratios']):.2f}], load {os.getloadavg()[0]:.1f}")
    acc = (f"check loss {check_loss:.5f}; {B * T / recs['einsum'].median_s:,.0f} tok/s{mfu}; "
           f"{cpu_note(cpus['einsum'], r)}{pairs}")
    rows.append(dict(case=f"{name} train step", dtype=args.dtype, jax=recs["einsum"],
                     peer=peer, peer_name="torch nanoGPT" if peer else "-", acc_jax=acc,
                     acc_peer=acc_peer))
    if args.profile:
        rows[-1]["profile"] = profile_step(name, call, compiled)
    if "onednn" in loops:
        od = last_other["onednn"]
        rec = bench.record_from_times(f"{name} step (oneDNN products)", od["times"],
                                      warmup=2, items=B * T, compile_s=loops["onednn"][1],
                                      flops=loops["onednn"][2])
        opairs = "" if not od["pair_ratios"] else (
            f"; alternated with the peer, median pair ratio "
            f"{np.median(od['pair_ratios']):.2f}x [{min(od['pair_ratios']):.2f}-"
            f"{max(od['pair_ratios']):.2f}]")
        rows.append(dict(
            case=f"{name} train step, oneDNN products", dtype=args.dtype, jax=rec, peer=peer,
            peer_name="torch nanoGPT" if peer else "-",
            acc_jax=(f"{onednn_check}; vs YNNPACK products: wall "
                     f"{recs['einsum'].median_s / rec.median_s:.2f}x; "
                     f"{cpu_note(float(np.median(od['cpu'])), r)}{opairs}"),
            acc_peer=""))
    if args.devices > 1:
        dp = last_other["dp"]
        rec = bench.record_from_times(f"{name} step ({args.devices} devices)", dp["times"],
                                      warmup=2, items=B * T, compile_s=dp_call[1],
                                      flops=dp_call[2])
        dpairs = "" if not dp["pair_ratios"] else (
            f"; alternated with the peer, median pair ratio "
            f"{np.median(dp['pair_ratios']):.2f}x [{min(dp['pair_ratios']):.2f}-"
            f"{max(dp['pair_ratios']):.2f}]")
        w1 = recs["einsum"].median_s
        rows.append(dict(
            case=f"{name} train step, {args.devices} host devices (data parallel)",
            dtype=args.dtype, jax=rec, peer=peer,
            peer_name="torch nanoGPT" if peer else "-",
            acc_jax=(f"{dp_check}; vs 1 device: wall {w1 / rec.median_s:.2f}x, CPU "
                     f"{cpus['einsum'] / float(np.median(dp['cpu'])):.2f}x; "
                     f"{cpu_note(float(np.median(dp['cpu'])), r)}{dpairs}"),
            acc_peer=""))
    rows.append(dict(case=f"{name} step, xla attention", dtype=args.dtype, jax=recs["xla"],
                     peer=peer, peer_name="torch nanoGPT" if peer else "-",
                     acc_jax=cpu_note(cpus["xla"], r), acc_peer=""))
    rows.append(dict(case=f"{name} forward only", dtype=args.dtype, jax=r_f, peer=None,
                     acc_jax="", acc_peer=""))
    rows.append(dict(case=f"{name} forward+backward", dtype=args.dtype, jax=r_g, peer=None,
                     acc_jax="", acc_peer=""))
    return rows


def mamba_case(args, tmp: Path) -> list[dict]:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import seq

    from jaxkit import bench

    c = MAMBA_QUICK if args.quick else MAMBA
    k = jax.random.key(0)
    p = seq.init_mamba(k, c["d"], expand=c["expand"], d_state=c["d_state"], d_conv=c["d_conv"])
    x = jax.random.normal(jax.random.fold_in(k, 1), (c["batch"], c["length"], c["d"]))
    g = jax.random.normal(jax.random.fold_in(k, 2), x.shape)
    recs, outs, cpus = {}, {}, {}
    for mode in ("sequential", "associative"):
        def f(p, x, mode=mode):
            return jnp.sum(seq.mamba_mixer(p, x, mode=mode) * g)
        vg = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
        recs[mode] = bench.time_jax(vg, p, x, n_runs=args.repeats, items=c["batch"] * c["length"],
                                    name=f"mamba fwd+bwd ({mode})")
        cpus[mode] = cpu_per_call(vg, p, x, n_runs=args.repeats)
        outs[mode] = float(f(p, x))
    peer, acc_peer, r = None, "", None
    if not args.no_peers:
        arrays = {f: np.asarray(v) for f, v in zip(p._fields, p, strict=True)}
        arrays.update(x=np.asarray(x), g=np.asarray(g))
        # peers/torch_mamba.py's block and call, timed with each call's CPU time
        r = run_peer_source(PEER_MAMBA, dict(c, arrays=str(write_arrays(tmp, arrays)),
                                             n_runs=args.repeats, warmup=2,
                                             threads=args.peer_threads), tmp)
        peer = bench.record_from_times("mambapy fwd+bwd", r["times"], warmup=2,
                                       items=c["batch"] * c["length"])
        acc_peer = f"sum(out*g) {r['check'][1]:.5f}"
    shape = f"B{c['batch']} L{c['length']} D{c['d']} N{c['d_state']}"
    return [dict(case=f"mamba fwd+bwd {mode} {shape}", dtype="float32", jax=recs[mode],
                 peer=peer, peer_name="mambapy pscan" if peer else "-",
                 acc_jax=f"sum(out*g) {outs[mode]:.5f}; {cpu_note(cpus[mode], r)}",
                 acc_peer=acc_peer)
            for mode in ("sequential", "associative")]


def mamba2_case(args, tmp: Path) -> list[dict]:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import seq

    from jaxkit import bench

    c = MAMBA2_QUICK if args.quick else MAMBA2
    k = jax.random.key(0)
    p = seq.init_mamba2(k, c["d"], expand=c["expand"], d_state=c["d_state"],
                        head_dim=c["head_dim"], d_conv=c["d_conv"])
    x = jax.random.normal(jax.random.fold_in(k, 1), (c["batch"], c["length"], c["d"]))
    g = jax.random.normal(jax.random.fold_in(k, 2), x.shape)
    items = c["batch"] * c["length"]
    recs, outs, cpus = {}, {}, {}
    for mode in ("chunked", "sequential"):
        def f(p, x, mode=mode):
            return jnp.sum(seq.mamba2_mixer(p, x, mode=mode, chunk=c["chunk"]) * g)
        vg = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
        recs[mode] = bench.time_jax(vg, p, x, n_runs=args.repeats, items=items,
                                    name=f"mamba2 fwd+bwd ({mode})")
        cpus[mode] = cpu_per_call(vg, p, x, n_runs=args.repeats)
        outs[mode] = float(vg(p, x)[0])
    peer, acc_peer, r = None, "", None
    if not args.no_peers:
        arrays = {f: np.asarray(v) for f, v in zip(p._fields, p, strict=True)}
        arrays.update(x=np.asarray(x), g=np.asarray(g))
        r = run_peer_source(PEER_MAMBA2, dict(c, arrays=str(write_arrays(tmp, arrays)),
                                              n_runs=args.repeats, warmup=2,
                                              threads=args.peer_threads), tmp)
        peer = bench.record_from_times("torch ssd_minimal fwd+bwd", r["times"], warmup=2,
                                       items=items)
        acc_peer = f"sum(out*g) {r['check']:.5f}"
    shape = (f"B{c['batch']} L{c['length']} D{c['d']} N{c['d_state']} "
             f"P{c['head_dim']} Q{c['chunk']}")
    return [dict(case=f"mamba2 fwd+bwd {mode} {shape}", dtype="float32", jax=recs[mode],
                 peer=peer, peer_name="torch ssd_minimal (same mixer)" if peer else "-",
                 acc_jax=f"sum(out*g) {outs[mode]:.5f}; {cpu_note(cpus[mode], r)}",
                 acc_peer=acc_peer)
            for mode in ("chunked", "sequential")]


def attention_case(args, tmp: Path) -> list[dict]:
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import seq

    from jaxkit import bench

    rows = []
    for size, c in ATTENTION.items():
        if args.quick and size != "small":
            continue
        shape = (c["batch"], c["length"], c["heads"], c["head_dim"])
        k = jax.random.key(0)
        q, kk, v, g = (jax.random.normal(jax.random.fold_in(k, i), shape) for i in range(4))
        items = c["batch"] * c["length"]
        recs, outs, cpus = {}, {}, {}
        for impl in ("einsum", "xla"):
            def f(q, kk, v, impl=impl, g=g):
                return jnp.sum(seq.causal_attention(q, kk, v, impl=impl) * g)
            vg = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2)))
            recs[impl] = bench.time_jax(vg, q, kk, v, n_runs=args.repeats, items=items,
                                        name=f"attention {size} fwd+bwd ({impl})")
            cpus[impl] = cpu_per_call(vg, q, kk, v, n_runs=args.repeats)
            outs[impl] = float(vg(q, kk, v)[0])
        peer, acc_peer, r = None, "", None
        if not args.no_peers:
            arrays = dict(q=np.asarray(q), k=np.asarray(kk), v=np.asarray(v), g=np.asarray(g))
            r = run_peer_source(PEER_ATTENTION, dict(arrays=str(write_arrays(tmp, arrays)),
                                                     n_runs=args.repeats, warmup=2,
                                                     threads=args.peer_threads), tmp)
            peer = bench.record_from_times("torch sdpa fwd+bwd", r["times"], warmup=2,
                                           items=items)
            acc_peer = f"sum(out*g) {r['check']:.4f}"
        dims = f"B{c['batch']} T{c['length']} H{c['heads']} E{c['head_dim']}"
        label = {"einsum": "heads-major, row blocks", "xla": "dot_product_attention"}
        rows += [dict(case=f"attention fwd+bwd {dims} {label[impl]}", dtype="float32",
                      jax=recs[impl], peer=peer,
                      peer_name="torch scaled_dot_product_attention" if peer else "-",
                      acc_jax=f"sum(out*g) {outs[impl]:.4f}; {cpu_note(cpus[impl], r)}",
                      acc_peer=acc_peer) for impl in ("einsum", "xla")]
    return rows


def products_case(args, tmp: Path) -> list[dict]:
    """The large matrix products of the gpt-medium step alone, in the three forms a
    linear layer's training runs: forward ``x W``, input gradient ``dy W^T`` and weight
    gradient ``x^T dy`` (a contraction over the rows of both operands), jaxkit's ``jax.jit``
    against torch's ``@`` on the same shapes (random float32 inputs on each side;
    ``--quick``: 512 rows). The accuracy columns give each side's GFLOP/s."""
    import jax

    from jaxkit import bench

    shapes = [(512 if args.quick else m, k, n) for m, k, n in PRODUCTS]
    forms = {"forward": lambda x, w, dy: x @ w, "input grad": lambda x, w, dy: dy @ w.T,
             "weight grad": lambda x, w, dy: x.T @ dy}
    r = None
    if not args.no_peers:
        r = run_peer_source(PEER_PRODUCTS, dict(
            arrays=str(write_arrays(tmp, {"none": np.zeros(1)})), shapes=shapes,
            n_runs=args.repeats, warmup=2, threads=args.peer_threads), tmp)
    rows = []
    for m, k, n in shapes:
        ks = jax.random.split(jax.random.key(0), 3)
        x, w, dy = (jax.random.normal(kk, s) for kk, s in zip(ks, ((m, k), (k, n), (m, n)),
                                                              strict=True))
        gflop = 2 * m * k * n / 1e9
        for form, f in forms.items():
            rec = bench.time_jax(jax.jit(f), x, w, dy, n_runs=args.repeats,
                                 name=f"{form} {m}x{k}x{n}", model_flops=gflop * 1e9)
            peer = None if r is None else bench.record_from_times(
                f"torch {form}", r["times"][f"{m},{k},{n},{form}"], warmup=2,
                model_flops=gflop * 1e9)
            rows.append(dict(case=f"product {form}, ({m}, {k}) x ({k}, {n})",
                             dtype="float32", jax=rec, peer=peer,
                             peer_name="torch @" if peer else "-",
                             acc_jax=f"{gflop / rec.median_s:.1f} GFLOP/s",
                             acc_peer="" if peer is None else
                             f"{gflop / peer.median_s:.1f} GFLOP/s"))
    return rows


def switch_chunk(arch, settings, letters: str):
    """The candidates' training chunk as a ``vmap`` over candidates of the
    :class:`~jaxkit.compose.model.SuperLM`'s ``lax.switch`` (the baseline of the
    candidates case): ``(chunk, to_state)``, ``to_state(routed_state, kinds)`` the same
    weights and fresh AdamW states in this layout."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jaxkit.kernels import train as ktrain

    from jaxkit.compose import train as T
    from jaxkit.compose.model import SuperLM, lm_loss

    gd, abstract = nnx.split(nnx.eval_shape(lambda: SuperLM(arch, rngs=nnx.Rngs(0),
                                                            letters=letters)))
    opt = T._optimizer(settings)

    def loss_fn(params, key, batch, kinds):
        del key
        return lm_loss(T._merge(gd, abstract, params)(batch[:, :-1], kinds), batch[:, 1:]), ()

    scan = ktrain.scan_steps(jax.vmap(ktrain.make_train_step(loss_fn, opt),
                                      in_axes=(None, 0, None)))

    def chunk(key, state, batches):
        state, info = scan(key, state, batches)
        return state, info.loss.mean(-1)

    def to_state(routed, kinds):
        params = T.to_supernet_params(routed.params, arch.depth)
        return jax.vmap(lambda p, k: ktrain.init(p, opt, k))(params, jnp.asarray(kinds))

    return chunk, to_state


def candidates_case(args, tmp: Path) -> list[dict]:
    """AIRA-Compose's candidates trained together, routed against the vmapped switch
    (module docstring)."""
    import itertools

    import jax
    import jax.numpy as jnp

    from jaxkit import bench
    from jaxkit.compose import Arch, TrainSettings, load_corpus
    from jaxkit.compose import train as T
    from jaxkit.compose.data import sample_windows
    from jaxkit.compose.model import identity_kinds

    c = CANDIDATES_QUICK if args.quick else CANDIDATES
    strings = ["".join(p) for p in itertools.product(c["letters"], repeat=c["depth"])]
    arch = Arch("A" * c["depth"], width=c["width"], heads=c["heads"], d_state=c["d_state"],
                context=c["context"])
    s = TrainSettings(steps=CAND_CHUNK, batch=c["batch"], chunk=CAND_CHUNK, warmup=1)
    letters = c["letters"]
    init, routed, _ = T._programs(arch, s, "float32", letters)
    state = init(jax.random.split(jax.random.key(0), len(strings)),
                 T.routes(strings, c["depth"], letters))
    kinds = [identity_kinds(st, c["depth"], letters) for st in strings]
    data = jnp.asarray(load_corpus(max_bytes=200_000).train)
    batches = jax.vmap(lambda k: sample_windows(k, data, c["batch"], c["context"]))(
        jax.random.split(jax.random.key(1), CAND_CHUNK))
    switch, to_state = switch_chunk(arch, s, letters)
    tokens = len(strings) * CAND_CHUNK * c["batch"] * c["context"]
    recs, losses = {}, {}
    for name, fn, st in (("routed", routed, state), ("switch", jax.jit(switch),
                                                     to_state(state, kinds))):
        out = fn(jax.random.key(2), jax.tree.map(jnp.copy, st), batches)[1]
        losses[name] = np.asarray(getattr(out, "loss", out))  # mean over candidates, per step

        def step(st, key, b, fn=fn):
            return fn(key, st, b)
        recs[name] = bench.time_jax_loop(step, st, jax.random.key(2), batches,
                                         n_runs=args.repeats, items=tokens,
                                         name=f"candidates ({name})")
    gap = float(np.max(np.abs(losses["routed"] - losses["switch"])))
    shape = (f"{len(strings)} x {c['depth']} layers over {letters}, D{c['width']} "
             f"T{c['context']} B{c['batch']}, {CAND_CHUNK} steps")
    return [dict(case=f"candidates {shape}", dtype="float32", jax=recs["routed"],
                 peer=recs["switch"], peer_name="jaxkit vmapped lax.switch",
                 acc_jax=(f"{tokens / recs['routed'].median_s:,.0f} tokens/s; max loss gap "
                          f"{gap:.1e}"),
                 acc_peer=f"{tokens / recs['switch'].median_s:,.0f} tokens/s",
                 loss_gap=gap)]


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser(
        "bench_compose", __doc__, CASES,
        quick_help="gpt-small and a small Mamba block only, 5 timed calls",
        peers_help="skip the PyTorch peers (no virtual environment)")
    p.add_argument("--repeats", type=int, default=None, help="timed calls (default 20)")
    p.add_argument("--peer-threads", type=int, default=THREADS,
                   help="torch.set_num_threads of the peers (default 2)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                   help="activation dtype of jaxkit's GPT (bfloat16 pays on GPUs)")
    p.add_argument("--devices", type=int, default=1,
                   help="also time the GPT step data parallel over this many host CPU "
                        "devices (XLA_FLAGS --xla_force_host_platform_device_count, set "
                        "here before JAX starts its backend; default 1: not timed)")
    p.add_argument("--profile", action="store_true",
                   help="also trace the 1-device GPT step and print where its time goes "
                        "by operation (jaxkit.op_profile; pin to one core with taskset -c "
                        "0 for a CPU-time breakdown)")
    p.add_argument("--onednn", action="store_true",
                   help="also time the GPT step with its matrix products in oneDNN "
                        "(XLA:CPU's experimental oneDNN fusions, kernels/_xla_cpu.ONEDNN_DOTS; "
                        "not a default anywhere: the same options abort the AIRA-Compose "
                        "candidates' program with heap corruption, benchmarks/RESULTS.md)")
    args = p.parse_args(argv)
    if args.devices < 1:
        p.error("--devices must be >= 1")
    if args.devices > 1:
        # before the backend starts (importing jax does not start it; the first
        # jax.devices() / computation does): a later flag would be ignored
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = (
                flags + f" --xla_force_host_platform_device_count={args.devices}").strip()
    cases = bench.parse_cases(p, args.only, CASES)
    if args.quick and "gpt-medium" in cases and args.only == ",".join(CASES):
        cases.remove("gpt-medium")
    args.repeats = args.repeats or (5 if args.quick else 20)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    os.environ.setdefault("XLA_FLAGS", "")
    t0 = time.perf_counter()
    env = bench.environment()
    from jaxkit.compose import load_corpus

    data = load_corpus(max_bytes=200_000 if args.quick else None).train
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            if c.startswith("gpt"):
                rows += gpt_case(c, args, data, Path(tmp))
            elif c == "mamba2":
                rows += mamba2_case(args, Path(tmp))
            elif c == "attention":
                rows += attention_case(args, Path(tmp))
            elif c == "products":
                rows += products_case(args, Path(tmp))
            elif c == "candidates":
                rows += candidates_case(args, Path(tmp))
            else:
                rows += mamba_case(args, Path(tmp))
    ratios = {r["case"]: bench.speedup(r["jax"], r.get("peer")) for r in rows
              if r.get("peer") is not None}
    bench.finish(rows, env, t0, title="jaxkit compose vs PyTorch peers",
                 after_table=lambda: print(bench.table_markdown(rows)), json_path=args.json,
                 payload=dict(rows=[{k: (v.to_dict() if hasattr(v, "to_dict") else v)
                                     for k, v in r.items()} for r in rows],
                              speedups=ratios, log2=math.log(2)), markdown=False)
    load, ncpu = os.getloadavg()[0], os.cpu_count() or 1
    if load > ncpu:
        print(f"WARNING: load average {load:.1f} > {ncpu} cores: the peers' multi-threaded "
              f"times (OpenMP under oversubscription) are not valid; rerun on a quiet "
              f"machine before comparing with the targets")
    for case, su in ratios.items():
        tgt = next((v for k, v in TARGETS.items() if case.startswith(k)), None)
        if su is not None and tgt is not None:
            print(f"{case}: {su:.2f}x the peer (target >= {tgt}x): "
                  f"{'met' if su >= tgt else 'NOT met'}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    sys.exit(main())
