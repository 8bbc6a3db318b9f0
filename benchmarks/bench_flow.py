"""Flow matching: training and sampling throughput, jaxkit against torchcfm, Meta's
flow_matching, torchdiffeq and diffrax.

Run ``python benchmarks/bench_flow.py [--quick] [--json FILE] [--no-peers] [--only CASES]
[--dims 2,64] [--batches 256,1024] [--sample-batch B] [--lik-batch B] [--repeats R]
[--train-repeats R] [--fit-steps N] [--time-dim T] [--seed S]`` (or ``jaxkit bench flow``).
Cases (``--only`` takes a comma list):

* ``train`` -- jitted Adam steps (lr 1e-3) of the conditional flow-matching loss on the
  linear path, sigma = 0 (``jaxkit.kernels.flow.cfm_batch_loss``), timed two ways: one
  step per call (as the peers run: one Python call per step) and ``CHUNK`` (20) steps per
  call in one ``lax.scan`` (:func:`scan_steps`; how jaxkit trains, e.g. the ActFlow loop;
  the step's work is the same, the per-call dispatch is shared), both as a training loop
  runs (:func:`jaxkit.bench.time_jax_loop`: each call takes the state the previous one
  returned, donated, and a fresh key); the data batch drawn
  by random indices from a fixed set of 10,000 points, source ``x0 ~ N(0, I)``,
  ``t ~ U(0, 1)``: CFM, and OT-CFM (``flow_ot.ot_cfm_loss``) with the minibatch re-paired
  by the exact OT assignment (``coupling="exact"``: optax's Hungarian algorithm on the
  device; ``exact_solver="host"``: SciPy's ``linear_sum_assignment``, and
  ``exact_solver="emd"``: POT's network simplex, the solver torchcfm calls, and
  ``exact_solver="auction"``: jaxkit's host solver, auction prices then exact
  Jonker-Volgenant augmentation, each through a ``pure_callback``; and
  ``otcfm-exact-{emd,auction}-prefetch``: the same solvers run on 2 host threads (niceness
  19, as ``jaxkit.pairing.ot_paired_chunks``) that pair the next chunks' minibatches while
  the device trains on the current chunk,
  :func:`jaxkit.pairing.paired_chunks` and :func:`jaxkit.prefetch.prefetch`; one step
  per call takes one prefetched minibatch)
  and by
  entropic OT (``"sinkhorn"``, ott-jax, epsilon 0.05 of the mean cost, threshold 1e-3;
  ``otcfm-sinkhorn-scaling``: the same plan from ``flow_ot.scaling_sinkhorn_plan``; each
  x0 paired with an x1 drawn from its row of the plan, ``sampling="rows"``). Beside the
  times, the mean squared distance of the pairs each coupling draws on 8 minibatches of
  256, as the share of the gap between random pairs (0) and the exact OT pairs (1) it
  closes. Peers: torchcfm
  ``ConditionalFlowMatcher`` and ``ExactOptimalTransportConditionalFlowMatcher`` (POT's
  exact EMD plan on the CPU, pairs re-sampled from it), flow_matching
  ``AffineProbPath(CondOTScheduler())`` (CFM). Batches 256 and 1024, data in 2D (8
  Gaussians on a circle) and 64D (8 Gaussians at random centres); steps/s. The loss of
  the same exported net on a fixed check batch is computed on both sides (must be
  equal).
* ``assign`` -- the exact assignment alone, on the host, one thread: jaxkit's solver
  (``flow_ot.host_assignment(cost, "auction")``: auction prices, then Jonker-Volgenant
  augmentation) against POT's network simplex (``ot.emd``, torchcfm's) and SciPy's
  ``linear_sum_assignment`` on the same 12 OT-CFM minibatches (the training batch sizes;
  Gaussian noise against data points, squared Euclidean cost in float64); the total costs
  must agree (all three are exact).
* ``parity`` -- the SciPy / POT parity APIs on the same inputs, one thread:
  ``assignment.linear_sum_assignment`` on a rectangular ``B x 2B`` cost (the squared
  distances of ``B`` noise points to ``2B`` data points) with 30% of the pairs forbidden
  (``+inf``) against SciPy's ``linear_sum_assignment`` (optimal totals must agree), and
  ``wasserstein.wasserstein(x0, x1, 2, solver="auction")`` (jitted, float32 as the rest
  of this benchmark) against POT's ``ot.emd2`` (float64) on the Euclidean cost matrix
  squared (``W_2``; values agree to float32 rounding).
* ``sample`` -- samples/s at equal function evaluations: Euler 100 steps and RK4 25 steps
  (100 velocity evaluations each; counted), ``flow.integrate`` against
  ``torchdiffeq.odeint`` on the same grid and flow_matching's ``ODESolver.sample``, with
  the JAX weights exported to the peers: max |x_jaxkit - x_peer| over the final samples
  (Euler: float32 rounding; torchdiffeq's "rk4" is the 3/8-rule variant of RK4, so there
  the difference is the O(h^5) gap between two 4th-order methods).
* ``adaptive`` -- adaptive sampling, rtol = atol = 1e-5, initial step chosen by the
  solver: jaxkit ``flow.integrate_with_stats(method="tsit5", steps=None)`` against
  diffrax used directly (``diffeqsolve`` with ``Tsit5`` and ``Dopri5``,
  ``PIDController``) and torchdiffeq's ``dopri5``; the batch is one ODE state on every
  side (RMS error norm over all entries). The number of function evaluations (NFE) is
  counted on every side (JAX: an ``io_callback`` on an untimed run, :func:`count_nfe`;
  torchdiffeq: a counting wrapper); max |dx| against torchdiffeq.
* ``likelihood`` -- log-likelihood throughput: ``flow.log_likelihood`` vmapped over the
  points (exact divergence, ``jacfwd``, in 2D; Hutchinson with one Rademacher probe in
  64D) against flow_matching's ``ODESolver.compute_likelihood`` (exact: one autograd pass
  per dimension; Hutchinson: one probe), both Euler with 100 steps from t = 1 to 0, on
  ``--lik-batch`` (256) data points. In 2D both must give the same log p; in 64D the
  probes differ, so only the means are comparable.

Network (both sides, identical weights): jaxkit's ``kernels.nets.MLP(d, width=256,
depth=4, time_dim=0)``: ``[x, t] -> 4 x (Linear 256, SiLU) -> Linear d`` (``--time-dim
32`` adds nets.MLP's sinusoidal features ``sin/cos(1000 t w)``; see ``TIME_DIM``). Its
weights (and time frequencies) are exported to the torch worker (:func:`export_params`),
which builds the same function. float32 (x64 is switched off inside :func:`main`). Before
timing, the net is trained for ``--fit-steps`` (500) CFM steps, so that sampling and the
likelihoods run on a trained field.

Threads: the torch worker runs with ``torch.set_num_threads(2)`` (1 inter-op thread,
``OMP_NUM_THREADS=2``); XLA's CPU thread pool has one thread per core of the process's
CPU affinity (2 here). Workers run one at a time, never concurrently with JAX.

Peers run in their own virtual environment ``benchmarks/.peer-venv-flow`` (torch from
PyPI -- the Linux wheels pull the CUDA libraries, ~6 GB, there is no CPU-only wheel on
PyPI -- torchcfm 1.0.7, flow_matching 1.0.10, torchdiffeq 0.2.5), created on first use
(``peers/flow_worker.py``).

``--quick``: batch 64, 64 samples, 32 likelihood points, 2D only, 3-5 repeats, 50 fit
steps (about 20 s of CPU without peers; the peers add about 40 s).
Targets on a 2-core CPU: >= 1.5x the peers' training steps/s and sampling samples/s;
OT-CFM no more than 1.3x slower than CFM at batch 256 (checked for the exact couplings and
for the entropic ones separately).
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

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "flow_worker.py"
PEER_VENV = HERE / ".peer-venv-flow"
PEER_SPECS = ["torch==2.14.1", "torchcfm==1.0.7", "flow_matching==1.0.10",
              "torchdiffeq==0.2.5"]
PEER_CHECK = ("from importlib.metadata import version; import torch, torchcfm, torchdiffeq; "
              "import flow_matching.solver; assert version('torchcfm') == '1.0.7'; "
              "assert version('flow_matching') == '1.0.10'; "
              "assert version('torchdiffeq') == '0.2.5'")
CASES = ("train", "assign", "parity", "sample", "adaptive", "likelihood")
# host assignment solvers on OT-CFM minibatches ("assign"): jaxkit's, then the peers
ASSIGN_SOLVERS = {"jaxkit auction": "auction", "POT ot.emd": "emd",
                  "SciPy linear_sum_assignment": "host"}
ASSIGN_PROBLEMS = 12  # minibatches per (dim, batch); --quick: 3
WIDTH, DEPTH = 256, 4
# nets.MLP time input: t itself plus TIME_DIM sinusoidal features of 1000 t. We use
# TIME_DIM = 0 (t concatenated, as torchcfm's MLP): with the default 32 features the
# fastest one is sin(1000 t), so the (lightly trained) field oscillates in t on a 1e-3
# scale; fixed-step RK4 at h = 0.04 then is not in its asymptotic regime (jaxkit's
# classical RK4 and torchdiffeq's 3/8-rule RK4 differ by 0.2) and Tsit5/Dopri5 need
# ~1,000 evaluations. Pass --time-dim 32 to benchmark that net anyway.
TIME_DIM, TIME_SCALE = 0, 1000.0
LR = 1e-3
N_DATA = 10_000
THREADS = 2
RTOL = ATOL = 1e-5
FIXED = (("euler", 100), ("rk4", 25))
LIK_METHOD, LIK_STEPS = "euler", 100
EXACT_MAX_DIM = 2  # exact divergence up to this dimension, Hutchinson above
TARGETS = dict(train_vs_peers=1.5, sample_vs_peers=1.5, otcfm_over_cfm_256=1.3)
# Training is timed two ways: one jitted step per call (as the peers run, one Python call
# per step), and CHUNK steps per call in one lax.scan (how jaxkit trains: the ActFlow loop
# adapts in such chunks; per-step dispatch then disappears). Chunks are timed only when
# they fit in CHUNK_BUDGET_S (the device-side Hungarian at batch 1024 does not).
CHUNK, CHUNK_BUDGET_S = 20, 30.0
# host threads solving the exact assignments of the next chunks (PREFETCH_KINDS), at
# jaxkit.pairing.ot_paired_chunks's default niceness (they yield to XLA's threads)
PREFETCH_WORKERS, PREFETCH_NICE = 2, 19
TRAIN_MODES = ("call", "scan")
# Training kinds timed in the step: the keyword arguments of flow_ot.ot_cfm_loss (None:
# plain CFM). Sinkhorn pairs: one x1 per x0 drawn from the plan's row (exact conditional
# sampling, O(B^2)); "permutation" would add a Hungarian solve.
TRAIN_KINDS = {
    "cfm": None,
    "otcfm-exact": dict(coupling="exact"),  # the default: host auction on CPU, else Hungarian
    "otcfm-exact-hungarian": dict(coupling="exact", exact_solver="hungarian"),  # optax
    "otcfm-exact-host": dict(coupling="exact", exact_solver="host"),  # SciPy, host
    "otcfm-exact-emd": dict(coupling="exact", exact_solver="emd"),    # POT, host
    "otcfm-exact-auction": dict(coupling="exact", exact_solver="auction"),  # jaxkit, host
    "otcfm-sinkhorn": dict(coupling="sinkhorn", sampling="rows"),     # ott-jax
    "otcfm-sinkhorn-scaling": dict(coupling="sinkhorn", sampling="rows",
                                   sinkhorn_solver="scaling"),
}
# exact pairs made on host threads (kind -> jaxkit.pairing solver), one prefetched
# item per call: a chunk of CHUNK minibatches, or one minibatch for one step per call
PREFETCH_KINDS = {"otcfm-exact-emd-prefetch": "emd",
                  "otcfm-exact-auction-prefetch": "auction"}
EXACT_KINDS = (*(k for k in TRAIN_KINDS if k.startswith("otcfm-exact")), *PREFETCH_KINDS)
ENTROPIC_KINDS = tuple(k for k in TRAIN_KINDS if k.startswith("otcfm-sinkhorn"))
NFE_PER_STEP = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}


# ----------------------------------------------------------------------------- helpers


def mixture_data(n: int, dim: int, *, seed: int = 0, n_modes: int = 8,
                 scale: float = 0.5) -> np.ndarray:
    """Target data: a mixture of ``n_modes`` isotropic Gaussians (std ``scale``); in 2D the
    classic 8 Gaussians on a circle of radius 4, otherwise centres ~ N(0, 3^2 I)."""
    rng = np.random.default_rng(seed)
    if dim == 2:
        ang = 2 * np.pi * np.arange(n_modes) / n_modes
        centres = 4.0 * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    else:
        centres = 3.0 * rng.standard_normal((n_modes, dim))
    k = rng.integers(0, n_modes, size=n)
    return (centres[k] + scale * rng.standard_normal((n, dim))).astype(np.float32)


def nfe_fixed(method: str, steps: int) -> int:
    """Velocity evaluations of a fixed-step solve (``flow.integrate``; torchdiffeq's fixed
    grid solvers evaluate the same number)."""
    if method not in NFE_PER_STEP:
        raise ValueError(f"`method` must be one of {sorted(NFE_PER_STEP)}; got {method!r}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"`steps` must be a positive integer; got {steps!r}")
    return NFE_PER_STEP[method] * int(steps)


def count_nfe(solve, velocity, *args):
    """``(nfe, out)``: the velocity evaluations of one call ``solve(counted_velocity,
    *args)``, counted by an ordered ``io_callback`` in ``velocity(t, x)`` (a batched field:
    one count per call), and its output (the callback adds an exact 0, so ``out`` is the
    plain solve's). Used on an untimed run; the timed runs use the plain ``velocity``.
    (diffrax's step statistics do not give the count exactly: rejected steps and the
    automatic initial step cost solver-dependent extra evaluations, so we count.)"""
    import jax
    import jax.numpy as jnp
    from jax.experimental import io_callback

    n = [0]

    def bump():
        n[0] += 1
        return np.int32(0)

    def counted(t, x):
        z = io_callback(bump, jax.ShapeDtypeStruct((), jnp.int32), ordered=True)
        return jax.tree_util.tree_map(lambda a: a + z.astype(a.dtype), velocity(t, x))

    out = jax.block_until_ready(jax.jit(lambda *a: solve(counted, *a))(*args))
    return n[0], out


def mlp_flops(dim: int, width: int = WIDTH, depth: int = DEPTH,
              time_dim: int = TIME_DIM) -> int:
    """Multiply-add FLOPs (2 per MAC) of one velocity evaluation of one sample."""
    return 2 * ((dim + 1 + time_dim) * width + (depth - 1) * width * width + width * dim)


# --------------------------------------------------------------------- the velocity net


def make_net(key, dim: int, width: int = WIDTH, depth: int = DEPTH,
             time_dim: int = TIME_DIM):
    """jaxkit's velocity net ``kernels.nets.MLP(dim, width, depth)`` (an equinox Module:
    ``model(t, x)`` on one sample; time enters as ``t`` and ``TIME_DIM`` sinusoidal
    features, concatenated to ``x``)."""
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import nets

    model = nets.MLP(dim, width=width, depth=depth, time_dim=time_dim, key=key)
    # float32 weights even when x64 is on (equinox initialises in the default float type)
    return jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), model)


def apply_net(model, t, x):
    """``velocity_fn(params, t, x)`` for one sample with ``params = model``."""
    return model(t, x)


def time_freqs(time_dim: int, max_period: float = 10_000.0):
    """The frequencies ``w_k = max_period^(-k / (time_dim/2))`` of
    ``nets.sinusoidal_embedding`` (float32, computed as there), exported so that the torch
    side multiplies by the very same numbers."""
    import jax.numpy as jnp

    half = time_dim // 2
    return np.asarray(jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32)
                              / half))


def export_params(model) -> dict[str, np.ndarray]:
    """``nets.MLP`` -> arrays for the torch worker: ``net.{2i}.weight`` (out, in) and
    ``net.{2i}.bias`` (``nn.Sequential`` of Linear with SiLU between), ``time.freqs``
    (the sinusoidal-embedding frequencies) and ``time.scale`` (1000: ``t`` in [0, 1] to
    [0, 1000]). Input features, in order: ``[x, t, sin(s t w), cos(s t w)]``."""
    if getattr(model, "num_classes", None) is not None:
        raise ValueError("`model` must be an unconditional MLP (num_classes=None)")
    out = {}
    for i, layer in enumerate(model.layers):
        out[f"net.{2 * i}.weight"] = np.asarray(layer.weight, np.float32)
        out[f"net.{2 * i}.bias"] = np.asarray(layer.bias, np.float32)
    out["time.freqs"] = time_freqs(model.time_dim).astype(np.float32)
    out["time.scale"] = np.asarray(TIME_SCALE, np.float32)
    return out


def import_params(state: dict[str, np.ndarray], model):
    """Inverse of :func:`export_params`: ``model`` with its layers' weights from ``state``."""
    import equinox as eqx
    import jax.numpy as jnp

    idx = sorted(int(k.split(".")[1]) for k in state if k.endswith(".weight"))
    if idx != list(range(0, 2 * len(model.layers), 2)):
        raise ValueError(f"`state` must hold net.0, net.2, ..., net.{2 * len(model.layers) - 2}"
                         f"; got indices {idx}")
    ws = [jnp.asarray(state[f"net.{i}.weight"]) for i in idx]
    bs = [jnp.asarray(state[f"net.{i}.bias"]) for i in idx]
    for w, layer in zip(ws, model.layers, strict=True):
        if w.shape != layer.weight.shape:
            raise ValueError(f"`state` weight shape {w.shape} != the model's "
                             f"{layer.weight.shape}")
    model = eqx.tree_at(lambda m: [la.weight for la in m.layers], model, ws)
    return eqx.tree_at(lambda m: [la.bias for la in m.layers], model, bs)


def numpy_forward(state: dict[str, np.ndarray], t, x) -> np.ndarray:
    """The exported net in float64 NumPy, as the torch worker builds it: ``t`` (B,),
    ``x`` (B, d) -> (B, d)."""
    x = np.asarray(x, np.float64)
    t = np.asarray(t, np.float64).reshape(-1, 1)
    arg = float(state["time.scale"]) * t * state["time.freqs"].astype(np.float64)
    h = np.concatenate([x, t, np.sin(arg), np.cos(arg)], axis=1)
    idx = sorted(int(k.split(".")[1]) for k in state if k.endswith(".weight"))
    for j, i in enumerate(idx):
        h = h @ state[f"net.{i}.weight"].astype(np.float64).T + state[f"net.{i}.bias"]
        if j < len(idx) - 1:
            h = h / (1 + np.exp(-h))  # SiLU
    return h


# ----------------------------------------------------------------------------- jaxkit


def batch_apply(apply):
    """``apply(params, t, x)`` on one sample -> ``(params, t (B,), x (B, d))`` on a batch."""
    import jax

    return jax.vmap(apply, in_axes=(None, 0, 0))


def field(apply, params):
    """The batched velocity field ``v(t, x (B, d))`` (one time for the whole batch)."""
    import jax

    vel = jax.vmap(apply, in_axes=(None, None, 0))
    return lambda t, x: vel(params, t, x)


def cfm_step(opt, loss_fn):
    """``step(key, state, (x0, x1)) -> (state, info)``: jaxkit's one training step
    (:func:`jaxkit.kernels.train.make_train_step`) of ``opt`` on ``loss_fn(params, key,
    x0, x1)`` (shared by :func:`make_train_step` and :func:`make_paired_steps`; the
    callers keep only the loss, so the step's gradient norm and finiteness flag are
    dead code that XLA removes)."""
    from jaxkit.kernels import train

    return train.make_train_step(
        lambda params, key, batch, aux: (loss_fn(params, key, *batch), ()), opt)


def make_train_step(apply, batch: int, *, kind: str = "cfm"):
    """``init(params) -> state`` and ``step(state, key, data) -> (state, loss)``: one Adam
    step of ``flow.cfm_batch_loss`` (linear path, sigma = 0) on ``batch`` data points
    (random indices into ``data``) and Gaussian sources; for an OT-CFM ``kind`` (a key of
    :data:`TRAIN_KINDS`), ``flow_ot.ot_cfm_loss`` with that kind's coupling."""
    import jax
    import optax
    from jaxkit.kernels import flow, train

    opt = optax.adam(LR)
    vel = batch_apply(apply)
    ot_kwargs = TRAIN_KINDS[kind]
    if ot_kwargs is None:
        def loss_fn(params, key, x0, x1):
            return flow.cfm_batch_loss(vel, params, key, x0, x1)
    else:
        from jaxkit.kernels import flow_ot

        def loss_fn(params, key, x0, x1):
            return flow_ot.ot_cfm_loss(vel, params, key, x0, x1, **ot_kwargs)

    one = cfm_step(opt, loss_fn)

    def step(state, key, data):
        k_idx, k_x0, k_loss = jax.random.split(key, 3)
        x1 = data[jax.random.randint(k_idx, (batch,), 0, data.shape[0])]
        x0 = jax.random.normal(k_x0, x1.shape, x1.dtype)
        state, info = one(k_loss, state, (x0, x1))
        return state, info.loss

    def init(params):
        return train.init(params, opt)

    return init, step


def scan_steps(step, n: int):
    """``run(state, key, data) -> (state, losses (n,))``: ``n`` training steps of ``step``
    in one ``lax.scan`` (keys ``split(key, n)``): one dispatch for ``n`` steps, as jaxkit's
    ActFlow loop trains."""
    import jax

    def run(state, key, data):
        return jax.lax.scan(lambda st, k: step(st, k, data), state, jax.random.split(key, n))

    return run


def pairing_quality(data, batch: int, *, n_batches: int = 8, seed: int = 0) -> dict:
    """Mean squared distance ``|x0_i - x1_j|^2`` of the pairs each coupling draws on
    ``n_batches`` minibatches (``batch`` points of ``data`` against N(0, I) sources):
    random pairs, the exact OT assignment, and the two entropic couplings of the training
    benchmark (ott-jax and scaling Sinkhorn, ``sampling="rows"``); ``gap_closed`` is the
    share of the random-to-exact gap each closes (exact 1, random 0)."""
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import flow_ot

    rng = np.random.default_rng(seed)
    data = np.asarray(data)
    pair = {name: jax.jit(lambda k, a, b, solver=solver: flow_ot.sinkhorn_coupling(
        k, a, b, sampling="rows", solver=solver))
        for name, solver in (("sinkhorn", "ott"), ("sinkhorn-scaling", "scaling"))}
    dist: dict[str, list[float]] = {k: [] for k in ("random", "exact", *pair)}
    for b in range(n_batches):
        x1 = data[rng.integers(0, len(data), batch)]
        x0 = rng.normal(size=x1.shape).astype(x1.dtype)
        cost = flow_ot.host_sq_cost(x0, x1)
        dist["random"].append(float(cost.diagonal().mean()))
        perm = flow_ot.host_assignment(cost)
        dist["exact"].append(float(cost[np.arange(batch), perm].mean()))
        for name, f in pair.items():
            i, j = f(jax.random.key(b), jnp.asarray(x0), jnp.asarray(x1))
            dist[name].append(float(cost[np.asarray(i), np.asarray(j)].mean()))
    mean = {k: float(np.mean(v)) for k, v in dist.items()}
    gap = mean["random"] - mean["exact"]
    return dict(batch=batch, n_batches=n_batches, mean_sq_dist=mean,
                gap_closed={k: (mean["random"] - v) / gap if gap > 0 else None
                            for k, v in mean.items()})


def make_paired_steps(apply):
    """``run(state, key, x0s, x1s) -> (state, losses)``: one CFM Adam step per leading
    index of the already paired minibatches ``x0s, x1s`` (``(n, B, d)``), in one
    ``lax.scan``: OT-CFM with the coupling computed outside the step."""
    import jax
    import optax
    from jaxkit.kernels import flow

    opt = optax.adam(LR)
    vel = batch_apply(apply)

    def loss_fn(params, key, x0, x1):
        return flow.cfm_batch_loss(vel, params, key, x0, x1)

    step = cfm_step(opt, loss_fn)

    def one(state, inp):
        state, info = step(inp[0], state, inp[1:])
        return state, info.loss

    def run(state, key, x0s, x1s):
        return jax.lax.scan(one, state, (jax.random.split(key, x0s.shape[0]), x0s, x1s))

    return run


def time_prefetched_loop(run, state, make, *, n_runs: int, warmup: int, workers: int,
                         depth: int, name: str, nice: int | None = None):
    """Per-call times of ``state = run(state, key_i, *make(i))`` with ``make`` (e.g.
    :func:`jaxkit.pairing.paired_chunks`) prefetched on ``workers`` host threads
    (:func:`jaxkit.prefetch.prefetch`, ``depth`` ahead), as throughput: each of the
    ``n_runs`` times is the mean interval between the ends of ``depth`` consecutive calls,
    waiting for the host's chunks included. Chunks arrive in bursts (a queue of ``depth``),
    so single intervals would mix queued chunks and waits; ``warmup`` calls first (more
    than ``depth``: past the chunks made ahead while compiling). BLAS runs on one thread
    meanwhile, as in :func:`jaxkit.pairing.ot_paired_chunks`; ``nice``: the threads'
    niceness (:func:`jaxkit.prefetch.prefetch`). Returns a record (compile
    time from an AOT compile, the state donated)."""
    import jax
    import jax.numpy as jnp

    from jaxkit import bench
    from jaxkit.pairing import limit_blas
    from jaxkit.prefetch import prefetch

    total = 1 + warmup + n_runs * depth
    state = jax.tree.map(lambda a: jnp.array(a, copy=True), state)
    keys = list(jax.random.split(jax.random.key(3), total))
    jitted = jax.jit(run, donate_argnums=0)
    ends = []
    with limit_blas(1):  # BLAS threads would spin on XLA's cores (see limit_blas)
        it = prefetch(make, total, depth=depth, workers=workers, nice=nice)
        first = next(it)
        t0 = time.perf_counter()
        jitted.lower(state, keys[0], *first).compile()
        compile_s = time.perf_counter() - t0
        state, out = jitted(state, keys[0], *first)
        jax.block_until_ready((state, out))
        for i, chunk in enumerate(it, start=1):
            state, out = jitted(state, keys[i], *chunk)
            jax.block_until_ready((state, out))
            if i >= warmup:
                ends.append(time.perf_counter())
    times = np.diff(ends[::depth])  # n_runs windows of depth calls each
    return bench.record_from_times(name, times / depth, warmup=warmup, compile_s=compile_s)


def time_assignments(data: np.ndarray, batch: int, n_problems: int, *, seed: int = 0):
    """Each host solver of :data:`ASSIGN_SOLVERS` (``flow_ot.host_assignment``) on the same
    ``n_problems`` exact OT-CFM minibatches (``batch`` rows of ``data`` against Gaussian
    noise, the squared Euclidean cost in float64), one thread: a record per solver (one
    time per problem, after one untimed warm-up solve) and the largest relative gap of a
    total cost to SciPy's optimum (all three are exact)."""
    from jaxkit.kernels import flow_ot

    from jaxkit import bench
    from jaxkit.pairing import limit_blas

    rng = np.random.default_rng([seed, batch, data.shape[1]])
    costs = [flow_ot.host_sq_cost(rng.standard_normal((batch, data.shape[1])),
                                  data[rng.choice(len(data), batch, replace=False)])
             for _ in range(n_problems)]
    out, totals = dict(problems=n_problems), {}
    with limit_blas(1):
        for name, solver in ASSIGN_SOLVERS.items():
            flow_ot.host_assignment(costs[0], solver)  # numba compiles / loads its cache
            times, tot = [], []
            for c in costs:
                t0 = time.perf_counter()
                perm = flow_ot.host_assignment(c, solver)
                times.append(time.perf_counter() - t0)
                tot.append(c[np.arange(batch), perm].sum())
            out[name] = dict(record=bench.record_from_times(f"{name}, B = {batch}", times))
            totals[name] = np.asarray(tot)
    ref = totals["SciPy linear_sum_assignment"]
    out["max_rel_gap"] = float(max(np.max(np.abs(t - ref) / ref) for t in totals.values()))
    return out


def time_parity(data: np.ndarray, batch: int, n_problems: int, *, seed: int = 0) -> dict:
    """The ``parity`` case: jaxkit's SciPy-style assignment (rectangular, forbidden pairs)
    and exact ``W_2`` against SciPy and POT on the same ``n_problems`` inputs, one
    thread; a record per side and the largest relative disagreement."""
    import jax
    import ot
    from jaxkit.kernels import assignment, flow_ot, wasserstein
    from scipy.optimize import linear_sum_assignment

    from jaxkit import bench
    from jaxkit.pairing import limit_blas

    rng = np.random.default_rng([seed, batch, data.shape[1], 7])
    dim = data.shape[1]
    costs, pairs = [], []
    for _ in range(n_problems):
        x0 = rng.standard_normal((batch, dim))
        x1 = data[rng.choice(len(data), 2 * batch, replace=False)].astype(np.float64)
        c = flow_ot.host_sq_cost(x0, x1)
        c[rng.random(c.shape) < 0.3] = np.inf
        costs.append(c)
        pairs.append((x0, data[rng.choice(len(data), batch, replace=False)].astype(float)))
    w_jax = jax.jit(lambda a, b: wasserstein.wasserstein(a, b, 2, solver="auction"))
    unif = ot.unif(batch)

    def w_pot(a, b):
        m = ot.dist(a, b, metric="euclidean")
        return float(np.sqrt(ot.emd2(unif, unif, m * m)))

    calls = {
        "jaxkit linear_sum_assignment": lambda i: assignment.linear_sum_assignment(
            costs[i]).cost,
        "SciPy linear_sum_assignment": lambda i: (lambda r: costs[i][r].sum())(
            linear_sum_assignment(costs[i])),
        "jaxkit wasserstein": lambda i: float(w_jax(*pairs[i])),
        "POT ot.emd2": lambda i: w_pot(*pairs[i]),
    }
    out, vals = dict(problems=n_problems), {}
    with limit_blas(1):
        for name, call in calls.items():
            call(0)  # compiles (jit, numba) / warms caches
            times, got = [], []
            for i in range(n_problems):
                t0 = time.perf_counter()
                got.append(call(i))
                times.append(time.perf_counter() - t0)
            out[name] = dict(record=bench.record_from_times(f"{name}, B = {batch}", times))
            vals[name] = np.asarray(got)

    def gap(a, b):
        return float(np.max(np.abs(vals[a] - vals[b]) / np.abs(vals[b])))

    out["lsa_max_rel_gap"] = gap("jaxkit linear_sum_assignment", "SciPy linear_sum_assignment")
    out["w2_max_rel_gap"] = gap("jaxkit wasserstein", "POT ot.emd2")
    return out


def per_step_record(rec, n: int):
    """The record of a call of ``n`` steps as a per-step record (times divided by
    ``n``; ``items`` 1), so that it compares with one-step-per-call records."""
    from jaxkit import bench

    return bench.record_from_times(rec.name, np.asarray(rec.times_s) / n, warmup=rec.warmup,
                                   items=1, compile_s=rec.compile_s,
                                   flops=None if rec.flops is None else rec.flops / n)


def fixed_solver(method: str, steps: int):
    """``solve(velocity, x0) -> x1``: jaxkit's ``flow.integrate`` with fixed steps."""
    from jaxkit.kernels import flow

    return lambda velocity, x0: flow.integrate(velocity, x0, method=method, steps=steps)


def jaxkit_adaptive_solver(method: str = "tsit5", rtol: float = RTOL, atol: float = ATOL):
    """``solve(velocity, x0) -> (x1, stats)``: ``flow.integrate_with_stats`` adaptive
    (automatic initial step), or ``None`` when the kernel has no such method."""
    from jaxkit.kernels import flow

    if method not in getattr(flow, "ADAPTIVE_METHODS", ()):
        return None
    return lambda velocity, x0: flow.integrate_with_stats(
        velocity, x0, method=method, steps=None, rtol=rtol, atol=atol)


def diffrax_solver(solver: str, rtol: float = RTOL, atol: float = ATOL):
    """diffrax used directly: ``solve(velocity, x0) -> x1`` from 0 to 1, ``Tsit5`` or
    ``Dopri5`` with ``PIDController(rtol, atol)``, ``dt0=None`` (diffrax picks it), the
    batch as one state (RMS error norm over all entries, as torchdiffeq)."""
    import diffrax

    cls = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5}[solver]

    def solve(velocity, x0):
        term = diffrax.ODETerm(lambda t, y, args: velocity(t, y))
        sol = diffrax.diffeqsolve(term, cls(), 0.0, 1.0, None, x0,
                                  stepsize_controller=diffrax.PIDController(rtol=rtol,
                                                                            atol=atol),
                                  max_steps=4096)
        return sol.ys[-1]

    return solve


def jaxkit_likelihood(apply, dim: int, method: str = LIK_METHOD, steps: int = LIK_STEPS):
    """``loglik(params, x1 (B, d), key) -> (B,)``: ``flow.log_likelihood`` vmapped over
    the samples; exact divergence for ``dim <= EXACT_MAX_DIM``, else Hutchinson with one
    Rademacher probe per sample. ``None`` when the kernel has no ``log_likelihood``."""
    import jax
    from jaxkit.kernels import flow

    if not hasattr(flow, "log_likelihood"):
        return None
    div = "exact" if dim <= EXACT_MAX_DIM else "hutchinson"

    def loglik(params, x1, key):
        keys = jax.random.split(key, x1.shape[0])

        def one(x, k):
            return flow.log_likelihood(lambda t, z: apply(params, t, z), x, method=method,
                                       steps=steps, divergence=div,
                                       key=None if div == "exact" else k)

        return jax.vmap(one)(x1, keys)

    return loglik


# ---------------------------------------------------------------------------- peers


def ensure_flow_venv(timeout: float = 1800) -> Path:
    """Create (once) ``benchmarks/.peer-venv-flow`` and return its python."""
    from jaxkit.bench import ensure_peer_venv

    return ensure_peer_venv(PEER_VENV, PEER_SPECS, PEER_CHECK, timeout=timeout)


def run_flow_worker(py: Path, cfg: dict, arrays: dict[str, np.ndarray],
                    timeout: float = 3600) -> tuple[dict, dict[str, np.ndarray]]:
    """Run ``peers/flow_worker.py`` in the peer venv; returns (meta, arrays)."""
    from jaxkit.bench import peer_env

    env = peer_env()
    env.update(OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inp, config=json.dumps(cfg), **arrays)
        try:
            p = subprocess.run([str(py), str(WORKER), str(inp), str(out)], env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"flow worker timed out after {timeout:.0f} s") from e
        if p.returncode != 0:
            raise RuntimeError(f"flow worker exited {p.returncode}: "
                               + " | ".join(p.stderr.strip().splitlines()[-3:]))
        for line in p.stdout.splitlines():
            if line.startswith("flow worker"):
                print(line, flush=True)
        with np.load(out) as d:
            meta = json.loads(str(d["meta"]))
            arrs = {k.removeprefix("arr/"): np.asarray(d[k]) for k in d.files
                    if k.startswith("arr/")}
    return meta, arrs


# ----------------------------------------------------------------------------- main


def _rate(rec, unit: str) -> str:
    return f"{rec.items_per_s:,.0f} {unit}"


def _target(targets, name, want, value, ok):
    targets.append(dict(target=name, want=want,
                        measured="-" if value is None else f"{value:.2f}x",
                        ok=None if value is None else bool(ok)))


def run(args):
    import jax

    from jaxkit import bench

    rows, results, summary, targets = [], {}, [], []
    peer_arrays: dict[str, np.ndarray] = {}
    peer_cfg = dict(threads=THREADS, seed=args.seed, lr=LR, dims=args.dims,
                    cases=list(args.cases),
                    train=dict(batches=args.batches, n_runs=args.peer_repeats_train,
                               warmup=3),
                    sample=dict(methods=[list(m) for m in FIXED], n_runs=args.peer_repeats,
                                warmup=1),
                    adaptive=dict(rtol=RTOL, atol=ATOL, n_runs=args.peer_repeats, warmup=1),
                    likelihood=dict(method=LIK_METHOD, steps=LIK_STEPS,
                                    exact_max_dim=EXACT_MAX_DIM,
                                    n_runs=args.peer_repeats_lik,
                                    warmup=0 if args.quick else 1),
                    check={})
    jax_side: dict = {}
    key = jax.random.key(args.seed)
    for dim in args.dims:
        kd = jax.random.fold_in(key, dim)
        net = make_net(jax.random.fold_in(kd, 0), dim, time_dim=args.time_dim)
        data = mixture_data(N_DATA, dim, seed=args.seed + dim)
        rng = np.random.default_rng(args.seed + 1000 + dim)
        x0 = rng.standard_normal((args.sample_batch, dim)).astype(np.float32)
        # a short real training run so that sampling / likelihood use a trained field
        init, step = make_train_step(apply_net, args.batches[0])
        state = init(net)
        jstep = jax.jit(step)
        for i in range(args.fit_steps):
            state, loss = jstep(state, jax.random.fold_in(kd, 10_000 + i), data)
        params = state.params
        fit_loss = float(loss) if args.fit_steps else None
        x1 = mixture_data(args.lik_batch, dim, seed=args.seed + 2000 + dim)
        for k, v in export_params(params).items():
            peer_arrays[f"param_{dim}/{k}"] = v
        peer_arrays[f"data_{dim}"] = data
        peer_arrays[f"x0_{dim}"] = x0
        peer_arrays[f"x1_{dim}"] = x1
        chk = dict(x0=rng.standard_normal((64, dim)).astype(np.float32),
                   x1=data[:64], t=rng.uniform(size=64).astype(np.float32))
        for k, v in chk.items():
            peer_arrays[f"check_{dim}_{k}"] = v
        peer_cfg["check"][str(dim)] = {}
        chk_loss = float(jax.numpy.mean(jax.vmap(
            lambda a, b, t, m=params: (apply_net(m, t, (1 - t) * a + t * b) - (b - a)) ** 2)(
                chk["x0"], chk["x1"], chk["t"])))
        jax_side[dim] = dict(net=net, params=params, data=data, x0=x0, x1=x1,
                             check_loss=chk_loss, fit_loss=fit_loss)
        results[f"{dim}D"] = dict(
            net=f"jaxkit.kernels.nets.MLP({dim}, width={WIDTH}, depth={DEPTH}, "
                f"time_dim={args.time_dim})",
            fit_steps=args.fit_steps, fit_final_loss=fit_loss, check_loss_jaxkit=chk_loss,
            mlp_flops_per_eval=mlp_flops(dim, time_dim=args.time_dim), train={}, assign={},
            parity={}, sample={}, adaptive={}, likelihood={})

    # ---- jaxkit timings
    for dim in args.dims:
        js, res = jax_side[dim], results[f"{dim}D"]
        net, params = js["net"], js["params"]
        if "train" in args.cases:
            res["pairing"] = pq = pairing_quality(js["data"], min(args.batches),
                                                  seed=args.seed)
            print(f"pairing, {dim}D, batch {pq['batch']}: mean |x0 - x1|^2 " + ", ".join(
                f"{k} {v:.4g} ({pq['gap_closed'][k]:.0%} of the gap)"
                for k, v in pq["mean_sq_dist"].items()), flush=True)
            for batch in args.batches:
                for kind in TRAIN_KINDS:
                    try:
                        init, step = make_train_step(apply_net, batch, kind=kind)
                    except ImportError as e:  # flow_ot / ott-jax missing
                        res["train"][f"{batch}/{kind}"] = dict(skipped=f"ImportError: {e}")
                        continue
                    rec = bench.time_jax_loop(step, init(params), jax.random.key(1),
                                              js["data"], n_runs=args.repeats_train, warmup=3,
                                              name=f"jaxkit {kind}, {dim}D, batch {batch}")
                    res["train"][f"{batch}/{kind}"] = dict(record=rec,
                                                           steps_per_s=rec.items_per_s)
                    n_chunk = max(3, args.repeats_train // 5)
                    if rec.median_s * CHUNK * (n_chunk + 3) > CHUNK_BUDGET_S:
                        res["train"][f"{batch}/{kind}/scan"] = dict(
                            skipped=f"{CHUNK}-step chunks skipped: over the "
                                    f"{CHUNK_BUDGET_S:g} s budget at {rec.median_s:.3g} s/step")
                        continue
                    crec = bench.time_jax_loop(scan_steps(step, CHUNK), init(params),
                                               jax.random.key(1), js["data"], n_runs=n_chunk,
                                               warmup=1, items=CHUNK,
                                               name=f"jaxkit {kind}, {dim}D, batch {batch}, "
                                                    f"{CHUNK} steps per call")
                    crec = per_step_record(crec, CHUNK)
                    res["train"][f"{batch}/{kind}/scan"] = dict(
                        record=crec, steps_per_s=crec.items_per_s, steps_per_call=CHUNK)
                # exact OT-CFM with the assignment solved on host threads while the device
                # trains on the previous chunk (jaxkit.prefetch)
                n_chunk = max(3, args.repeats_train // 5)
                from jaxkit.pairing import paired_chunks

                for (pkind, solver), mode in [(ks, m) for ks in PREFETCH_KINDS.items()
                                              for m in TRAIN_MODES]:
                    # a call trains on one prefetched item: a chunk of CHUNK minibatches
                    # ("scan"), or a single minibatch ("call", one step per Python call)
                    n = CHUNK if mode == "scan" else 1
                    make = paired_chunks(js["data"], batch, n, seed=args.seed + batch,
                                         solver=solver)
                    # warm-up past the items made ahead during the compile (a queue of
                    # depth 2 * workers), so that every timed call waits at the host's rate
                    rec = time_prefetched_loop(
                        make_paired_steps(apply_net), init(params), make,
                        n_runs=max(3, n_chunk // 2) if n > 1 else args.repeats_train,
                        warmup=2 * PREFETCH_WORKERS + 1, workers=PREFETCH_WORKERS,
                        depth=2 * PREFETCH_WORKERS, nice=PREFETCH_NICE,
                        name=f"jaxkit {pkind}, {dim}D, batch {batch}")
                    rec = per_step_record(rec, n)
                    res["train"][f"{batch}/{pkind}" + ("/scan" if n > 1 else "")] = dict(
                        record=rec, steps_per_s=rec.items_per_s, steps_per_call=n,
                        host_workers=PREFETCH_WORKERS)
        if "assign" in args.cases:
            for batch in args.batches:
                res["assign"][batch] = time_assignments(
                    np.asarray(js["data"]), batch, 3 if args.quick else ASSIGN_PROBLEMS,
                    seed=args.seed)
        if "parity" in args.cases:
            for batch in args.batches:
                res["parity"][batch] = time_parity(
                    np.asarray(js["data"]), batch, 3 if args.quick else ASSIGN_PROBLEMS,
                    seed=args.seed)
        if "sample" in args.cases:
            for method, steps in FIXED:
                solve = fixed_solver(method, steps)
                fn = jax.jit(lambda p, x, solve=solve: solve(field(apply_net, p), x))
                rec = bench.time_jax(fn, params, js["x0"], n_runs=args.repeats, warmup=1,
                                     items=args.sample_batch, name=f"jaxkit {method} {steps}")
                nfe, out = count_nfe(solve, field(apply_net, params), js["x0"])
                res["sample"][f"{method}{steps}"] = dict(
                    record=rec, samples_per_s=rec.items_per_s, nfe=nfe_fixed(method, steps),
                    nfe_counted=nfe, out=np.asarray(out))
        if "adaptive" in args.cases:
            solvers = [("jaxkit flow.integrate tsit5", jaxkit_adaptive_solver("tsit5"))]
            solvers += [(f"diffrax {s} (direct)", diffrax_solver(s)) for s in ("tsit5", "dopri5")]
            for name, solve in solvers:
                if solve is None:
                    res["adaptive"][name] = dict(skipped="flow.integrate has no tsit5")
                    continue
                fn = jax.jit(lambda p, x, solve=solve: solve(field(apply_net, p), x))
                rec = bench.time_jax(fn, params, js["x0"], n_runs=args.repeats, warmup=1,
                                     items=args.sample_batch, name=name)
                nfe, out = count_nfe(solve, field(apply_net, params), js["x0"])
                entry = dict(record=rec, samples_per_s=rec.items_per_s, nfe=nfe)
                if isinstance(out, tuple):  # jaxkit: (x, stats)
                    out, stats = out
                    entry["nfe_kernel_stats"] = int(stats["nfe"])
                    entry["num_steps"] = int(stats["num_steps"])
                entry["out"] = np.asarray(out)
                res["adaptive"][name] = entry
        if "likelihood" in args.cases:
            fn = jaxkit_likelihood(apply_net, dim)
            if fn is None:
                res["likelihood"]["jaxkit"] = dict(skipped="flow has no log_likelihood")
            else:
                fn = jax.jit(fn)
                k = jax.random.key(args.seed + 7)
                rec = bench.time_jax(fn, params, js["x1"], k, n_runs=args.repeats, warmup=1,
                                     items=args.lik_batch,
                                     name="jaxkit flow.log_likelihood")
                res["likelihood"]["jaxkit"] = dict(
                    record=rec, samples_per_s=rec.items_per_s,
                    divergence="exact" if dim <= EXACT_MAX_DIM else "hutchinson (1 probe)",
                    nfe=nfe_fixed(LIK_METHOD, LIK_STEPS),
                    out=np.asarray(fn(params, js["x1"], k)))

    # ---- peers
    peer_meta, peer_out, peer_note = None, {}, None
    if args.no_peers:
        peer_note = "peers skipped (--no-peers)"
    else:
        try:
            t0 = time.perf_counter()
            py = ensure_flow_venv()
            venv_s = time.perf_counter() - t0
            peer_meta, peer_out = run_flow_worker(py, peer_cfg, peer_arrays)
            peer_meta["venv_ready_s"] = venv_s
        except RuntimeError as e:
            peer_note = f"peers unavailable: {e}"
            print(peer_note, file=sys.stderr)
    results["peer_note"] = peer_note
    results["peer_meta"] = ({k: v for k, v in peer_meta.items() if k != "results"}
                            if peer_meta else None)
    pres = peer_meta["results"] if peer_meta else {}

    def prec(key, name, items=1):
        r = pres.get(key)
        if r is None:
            return None
        return bench.record_from_times(name, r["times_s"], warmup=r["warmup"], items=items)

    # ---- rows
    ratios_train = {(m, f): [] for m in TRAIN_MODES for f in ("cfm", "otcfm")}
    ratios_sample, best_exact = [], {}
    for dim in args.dims:
        res = results[f"{dim}D"]
        if peer_meta and f"check_loss/{dim}" in pres:
            res["check_loss_peer"] = pres[f"check_loss/{dim}"]
        for batch, kind, mode in [(b, k, m) for b in args.batches
                                  for k in (*TRAIN_KINDS, *PREFETCH_KINDS)
                                  for m in TRAIN_MODES] if "train" in args.cases else []:
            j = res["train"].get(f"{batch}/{kind}" + ("/scan" if mode == "scan" else ""),
                                 {})
            case = (f"train {kind}, {dim}D, batch {batch}, "
                    + ("1 step per call" if mode == "call" else
                       f"{CHUNK} steps per call (lax.scan)"))
            if "skipped" in j:
                rows.append(dict(case=case, dtype="float32", skipped=j["skipped"]))
                continue
            peers = (["torchcfm-cfm", "flow_matching-cfm"] if kind == "cfm" else
                     ["torchcfm-otcfm"])
            shown = False
            for impl in peers:
                p = prec(f"train/{dim}/{batch}/{impl}", impl)
                if p is None:
                    continue
                shown = True
                ratio = p.median_s / j["record"].median_s
                if kind == "cfm":
                    ratios_train[mode, "cfm"].append(ratio)
                elif kind.startswith("otcfm-exact"):  # the fastest exact solver per case
                    best_exact[mode, dim, batch] = max(best_exact.get((mode, dim, batch), 0),
                                                       ratio)
                j.setdefault("peers", {})[impl] = dict(record=p, steps_per_s=p.items_per_s,
                                                       ratio=ratio)
                rows.append(dict(case=case, dtype="float32", jax=j["record"], peer=p,
                                 peer_name=impl, acc_jax=_rate(j["record"], "steps/s"),
                                 acc_peer=_rate(p, "steps/s")))
            if not shown:
                rows.append(dict(case=case, dtype="float32", jax=j["record"], peer=None,
                                 peer_name="-", acc_jax=_rate(j["record"], "steps/s"),
                                 acc_peer=peer_note or ""))
        for batch, a in res["assign"].items():
            ours = a["jaxkit auction"]
            for name in list(ASSIGN_SOLVERS)[1:]:
                p = a[name]
                rows.append(dict(
                    case=f"exact assignment B = {batch}, {dim}D ({a['problems']} minibatches)",
                    dtype="float64", jax=ours["record"], peer=p["record"], peer_name=name,
                    acc_jax=f"optimal: total cost within {a['max_rel_gap']:.1e} of SciPy's",
                    acc_peer=f"{p['record'].median_s * 1e3:.3g} ms a problem"))
                p["ratio"] = p["record"].median_s / ours["record"].median_s
        for batch, a in res["parity"].items():
            for ours, peer, what, gap, dtype in (
                    ("jaxkit linear_sum_assignment", "SciPy linear_sum_assignment",
                     f"assignment {batch} x {2 * batch}, 30% forbidden", "lsa_max_rel_gap",
                     "float64"),
                    ("jaxkit wasserstein", "POT ot.emd2", f"exact W_2, B = {batch}",
                     "w2_max_rel_gap", "float32 (POT float64)")):
                j, p = a[ours]["record"], a[peer]["record"]
                rows.append(dict(
                    case=f"{what}, {dim}D ({a['problems']} problems)", dtype=dtype,
                    jax=j, peer=p, peer_name=peer,
                    acc_jax=f"within {a[gap]:.1e} of {peer.split()[0]}",
                    acc_peer=f"{p.median_s * 1e3:.3g} ms a problem"))
                a[peer]["ratio"] = p.median_s / j.median_s
        for method, steps in FIXED if "sample" in args.cases else []:
            j = res["sample"][f"{method}{steps}"]
            case = f"sample {method} x{steps} (NFE {j['nfe']}), {dim}D, {args.sample_batch}"
            shown = False
            for impl in ("torchdiffeq", "flow_matching"):
                key = f"sample/{dim}/{method}{steps}/{impl}"
                p = prec(key, impl, items=args.sample_batch)
                if p is None:
                    continue
                shown = True
                diff = float(np.max(np.abs(peer_out[key] - j["out"])))
                ratio = p.median_s / j["record"].median_s
                ratios_sample.append(ratio)
                j.setdefault("peers", {})[impl] = dict(record=p, samples_per_s=p.items_per_s,
                                                       nfe=pres[key]["nfe"], ratio=ratio,
                                                       max_abs_diff=diff)
                rows.append(dict(case=case, dtype="float32", jax=j["record"], peer=p,
                                 peer_name=impl, acc_jax=_rate(j["record"], "samples/s"),
                                 acc_peer=f"{_rate(p, 'samples/s')}; NFE {pres[key]['nfe']}; "
                                          f"max|dx| {diff:.2g}"))
            if not shown:
                rows.append(dict(case=case, dtype="float32", jax=j["record"], peer=None,
                                 peer_name="-", acc_jax=_rate(j["record"], "samples/s"),
                                 acc_peer=peer_note or ""))
        if "adaptive" in args.cases:
            ad = res["adaptive"]
            key = f"adaptive/{dim}/torchdiffeq-dopri5"
            p = prec(key, "torchdiffeq dopri5", items=args.sample_batch)
            peer = None
            if p is not None:
                peer = dict(record=p, samples_per_s=p.items_per_s, nfe=pres[key]["nfe"])
                ad["torchdiffeq dopri5"] = peer
            for name, v in ad.items():
                if "skipped" in v:
                    rows.append(dict(case=f"adaptive {name}, {dim}D", dtype="float32",
                                     skipped=v["skipped"]))
                    continue
                if name.startswith("torchdiffeq"):
                    continue
                case = (f"adaptive {name} rtol=atol={RTOL:g}, {dim}D, {args.sample_batch} "
                        "samples")
                acc_peer = ""
                if peer is not None:
                    diff = float(np.max(np.abs(peer_out[key] - v["out"])))
                    v.setdefault("max_abs_diff", {})["torchdiffeq dopri5"] = diff
                    acc_peer = (f"{_rate(peer['record'], 'samples/s')}; NFE {peer['nfe']}; "
                                f"max|dx| {diff:.2g}")
                rows.append(dict(case=case, dtype="float32", jax=v["record"],
                                 peer=None if peer is None else peer["record"],
                                 peer_name="torchdiffeq dopri5" if peer else "-",
                                 acc_jax=f"{_rate(v['record'], 'samples/s')}; NFE {v['nfe']}",
                                 acc_peer=acc_peer or (peer_note or "")))
        if "likelihood" in args.cases:
            lk = res["likelihood"]
            j = lk.get("jaxkit", {})
            case = (f"log-likelihood euler x{LIK_STEPS}, "
                    f"{'exact' if dim <= EXACT_MAX_DIM else 'Hutchinson'} divergence, "
                    f"{dim}D, {args.lik_batch} points")
            if "skipped" in j:
                rows.append(dict(case=case, dtype="float32", skipped=j["skipped"]))
            else:
                key = f"likelihood/{dim}/flow_matching"
                p = prec(key, "flow_matching compute_likelihood", items=args.lik_batch)
                acc_jax = (f"{_rate(j['record'], 'samples/s')}; mean log p "
                           f"{float(np.mean(j['out'])):.4g}")
                acc_peer = peer_note or ""
                if p is not None:
                    po = peer_out[key]
                    diff = float(np.max(np.abs(po - j["out"])))
                    lk["flow_matching"] = dict(record=p, samples_per_s=p.items_per_s,
                                               nfe=pres[key]["nfe"],
                                               mean_logp=float(np.mean(po)),
                                               max_abs_diff=diff)
                    acc_peer = (f"{_rate(p, 'samples/s')}; mean log p {float(np.mean(po)):.4g}"
                                f"; max|dlogp| {diff:.2g}"
                                + (" (different probes)" if dim > EXACT_MAX_DIM else ""))
                j["mean_logp"] = float(np.mean(j["out"]))
                rows.append(dict(case=case, dtype="float32", jax=j["record"], peer=p,
                                 peer_name="flow_matching ODESolver.compute_likelihood"
                                 if p else "-", acc_jax=acc_jax, acc_peer=acc_peer))
        # arrays are for the comparisons only
        for group in ("sample", "adaptive", "likelihood"):
            for v in res[group].values():
                v.pop("out", None)
    if peer_note:
        rows.append(dict(case="peers", dtype="", skipped=peer_note))

    # ---- targets
    for (mode, _, _), r in best_exact.items():
        ratios_train[mode, "otcfm"].append(r)
    for fam, mode in [(f, m) for f in ("cfm", "otcfm") for m in ("scan", "call")]:
        label = (f"{CHUNK} steps per call, as jaxkit trains" if mode == "scan" else
                 "1 step per call")
        what = ("CFM" if fam == "cfm" else "OT-CFM exact (fastest solver per case) vs "
                "torchcfm's exact OT-CFM")
        rt = ratios_train[mode, fam]
        _target(targets, f"training steps/s vs peers, {what} (min over cases; jaxkit "
                f"{label})", f">= {TARGETS['train_vs_peers']}x", min(rt) if rt else None,
                rt and min(rt) >= TARGETS["train_vs_peers"])
    _target(targets, "sampling samples/s vs peers (min over cases)", f">= "
            f"{TARGETS['sample_vs_peers']}x", min(ratios_sample) if ratios_sample else None,
            ratios_sample and min(ratios_sample) >= TARGETS["sample_vs_peers"])
    b0 = 256 if 256 in args.batches else args.batches[0]
    for dim, mode in [(d, m) for d in args.dims for m in TRAIN_MODES]:
        tr = results[f"{dim}D"]["train"]
        sfx = "/scan" if mode == "scan" else ""
        c = tr.get(f"{b0}/cfm{sfx}", {})
        for family, kinds in (("exact", EXACT_KINDS), ("entropic", ENTROPIC_KINDS)):
            ot = [tr.get(f"{b0}/{kind}{sfx}", {}) for kind in kinds]
            ot = [o["record"].median_s for o in ot if "record" in o]
            val = (min(ot) / c["record"].median_s if "record" in c and ot else None)
            _target(targets, f"OT-CFM ({family}, faster solver) time / CFM time, {dim}D, "
                    f"batch {b0}, " + ("1 step per call" if mode == "call" else
                                       f"{CHUNK} steps per call"),
                    f"<= {TARGETS['otcfm_over_cfm_256']}x", val,
                    val is not None and val <= TARGETS["otcfm_over_cfm_256"])
    return rows, results, summary, targets


def print_targets(targets, console=None):
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="targets (2-core CPU)")
    for col in ("target", "want", "measured", "met"):
        t.add_column(col, justify="left" if col == "target" else "right")
    for g in targets:
        met = "-" if g["ok"] is None else ("yes" if g["ok"] else "NO")
        t.add_row(*(escape(v) for v in (g["target"], g["want"], g["measured"], met)))
    (console or Console(width=200)).print(t)
    return t


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser(
        "bench_flow", __doc__, CASES, quick_help="small sizes: batch 64, 2D only, few repeats",
        peers_help="skip the torch peers (no virtual environment)")
    p.add_argument("--dims", type=bench.int_list, default=None, help="data dimensions (2,64)")
    p.add_argument("--batches", type=bench.int_list, default=None,
                   help="training batch sizes (256,1024; --quick 64)")
    p.add_argument("--sample-batch", type=int, default=None,
                   help="samples per sampling / likelihood call (1024; --quick 64)")
    p.add_argument("--lik-batch", type=int, default=None,
                   help="points per log-likelihood call (256; --quick 32)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed calls per sampling case (default 7; --quick 3)")
    p.add_argument("--train-repeats", type=int, default=None,
                   help="timed training steps per case (default 30; --quick 5)")
    p.add_argument("--fit-steps", type=int, default=None,
                   help="training steps before sampling (default 500; --quick 50)")
    p.add_argument("--time-dim", type=int, default=TIME_DIM,
                   help=f"sinusoidal time features of nets.MLP (default {TIME_DIM}: t only)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    q = args.quick
    args.dims = args.dims or ([2] if q else [2, 64])
    args.batches = args.batches or ([64] if q else [256, 1024])
    args.sample_batch = args.sample_batch or (64 if q else 1024)
    args.lik_batch = args.lik_batch or (32 if q else 256)
    args.repeats = args.repeats or (3 if q else 7)
    args.repeats_train = args.train_repeats or (5 if q else 30)
    args.peer_repeats = min(args.repeats, 2) if q else args.repeats
    args.peer_repeats_lik = 1 if q else 3  # the peers' exact divergence is slow
    args.peer_repeats_train = args.repeats_train
    args.fit_steps = args.fit_steps if args.fit_steps is not None else (50 if q else 500)
    args.cases = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = sorted(set(args.cases) - set(CASES))
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    if min(*args.dims, *args.batches, args.sample_batch, args.lik_batch, args.repeats,
           args.repeats_train) < 1 or args.fit_steps < 0:
        p.error("dimensions, batch sizes and repeats must be >= 1")
    if args.time_dim < 0 or args.time_dim % 2:
        p.error("--time-dim must be an even number >= 0")

    from jaxkit.bench import configure_cpu_devices

    configure_cpu_devices()
    import jax

    from jaxkit import bench

    env = bench.environment(peers=("numpy", "jaxlib", "optax", "diffrax", "equinox",
                                   "ott-jax", "rich"))
    env["loadavg_at_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    env["threads"] = (f"torch: set_num_threads({THREADS}), 1 inter-op thread, "
                      f"OMP_NUM_THREADS={THREADS}; XLA: one CPU thread pool of "
                      f"{env['cpu_affinity']} threads (the process's cores)")
    t0 = time.perf_counter()
    # float32 benchmark: jaxkit's kernels draw t with the default float type, so x64 stays
    # off inside (restored afterwards, e.g. for the tests, which run with x64 on).
    with jax.enable_x64(False):
        rows, results, summary, targets = run(args)
    bench.print_table(rows, title="jaxkit flow matching vs torchcfm / flow_matching / "
                                  "torchdiffeq / diffrax (speed-up = peer time / jaxkit "
                                  "time for the same work)")
    print_targets(targets)
    print(f"threads: {env['threads']}")
    print(bench.environment_line(env, time.perf_counter() - t0))
    if args.json:
        path = bench.write_json(args.json, dict(
            environment=env, argv=sys.argv if argv is None else argv, quick=args.quick,
            config=dict(width=WIDTH, depth=DEPTH, lr=LR, n_data=N_DATA, rtol=RTOL, atol=ATOL,
                        fixed=FIXED, likelihood=(LIK_METHOD, LIK_STEPS),
                        dims=args.dims, batches=args.batches,
                        sample_batch=args.sample_batch, targets=TARGETS,
                        peer_specs=PEER_SPECS),
            results=results, rows=rows, summary=summary, targets=targets,
            table_markdown=bench.table_markdown(rows)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
