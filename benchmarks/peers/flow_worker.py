"""Time flow-matching training, sampling and likelihoods with PyTorch peers (peer worker).

Runs inside the isolated virtual environment ``benchmarks/.peer-venv-flow`` made by
``benchmarks/bench_flow.py`` (torch, torchcfm 1.0.7, flow_matching 1.0.10, torchdiffeq
0.2.5), so it imports neither jaxkit nor jax. Usage::

    python flow_worker.py IN.npz OUT.npz
    python flow_worker.py --parity IN.npz OUT.npz

``--parity`` (for ``tests/kernels/test_flow_parity.py``): ``IN.npz`` holds ``x0``, ``x1``
(B, ...), ``t`` (B,), ``eps`` (B, ...) in float64 and the scalars ``sigma``, ``reg``;
``OUT.npz`` gets torchcfm's ``sample_xt`` and ``compute_conditional_flow`` for each
matcher on exactly those inputs (``xt/<name>``, ``ut/<name>``; names ``icfm``, ``otcfm``,
``sbcfm``, ``target``, ``vp``, all with ``sigma``), the plans of
``OTPlanSampler(method="exact").get_map`` (``plan/exact``) and ``OTPlanSampler("sinkhorn",
reg).get_map`` (``plan/sinkhorn``; ``SchrodingerBridgeConditionalFlowMatcher(sigma,
"sinkhorn")`` uses ``reg = 2 sigma^2``), and ``torchcfm.optimal_transport.wasserstein`` with
``method="exact"`` and ``power`` 1 and 2 (``w1``, ``w2``).

``IN.npz`` holds ``config`` (a JSON string: threads, seed, learning rate, the cases and
their sizes) and, per dimension ``d``, the data set ``data_{d}`` (N, d), the exported
velocity-net weights ``param_{d}/<name>`` (torch ``nn.Linear`` layout: ``net.{2i}.weight``
(out, in), ``net.{2i}.bias``) and the sampling start points ``x0_{d}`` (B, d) (plus the
points ``x1_{d}`` whose log-likelihood is evaluated), with ``param_{d}/time.freqs`` and
``time.scale``. The net is jaxkit's ``nets.MLP``: features ``[x, t, sin(s t w),
cos(s t w)]`` -> Linear -> SiLU -> ... -> Linear, so with the same weights both sides
integrate the same ODE.

Cases (times per call with ``time.perf_counter``, after untimed warm-up calls):

* ``train``: one Adam step of the conditional flow-matching loss on the linear path
  (sigma = 0), with torchcfm's ``ConditionalFlowMatcher`` (CFM) and
  ``ExactOptimalTransportConditionalFlowMatcher`` (OT-CFM: POT's exact EMD plan on the
  minibatch, pairs re-sampled from the plan) and with flow_matching's
  ``AffineProbPath(CondOTScheduler())`` (CFM); each step draws the data batch (random
  indices), the Gaussian source batch and t, as the JAX step does. The loss of the
  exported net on a fixed check batch (given ``t``) is returned for comparison.
* ``sample``: ``torchdiffeq.odeint`` with ``method="euler"`` / ``"rk4"`` on the grid
  ``linspace(0, 1, steps + 1)`` (fixed steps: 1 and 4 evaluations per step; note
  torchdiffeq's "rk4" is the 3/8-rule variant of RK4) and flow_matching's
  ``ODESolver.sample`` on the same grid; final samples are returned.
* ``adaptive``: ``torchdiffeq.odeint(method="dopri5", rtol, atol)`` from 0 to 1, the
  number of function evaluations counted by a wrapper.
* ``likelihood``: flow_matching's ``ODESolver.compute_likelihood`` (exact divergence in
  2D, Hutchinson with one Rademacher/Gaussian probe in 64D), integrating from t = 1 to 0
  on a fixed grid with the given method and steps, standard-normal source.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
from _common import versions as peer_versions


def _torch(threads: int):
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set
        pass
    return torch


def build_net(torch, params: dict, dim: int):
    """The velocity net from exported weights: ``v(t (B,), x (B, d))``."""
    nn = torch.nn
    idx = sorted(int(k.split(".")[1]) for k in params if k.endswith(".weight"))
    layers = []
    for j, i in enumerate(idx):
        w = params[f"net.{i}.weight"]
        lin = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            lin.bias.copy_(torch.from_numpy(np.ascontiguousarray(params[f"net.{i}.bias"])))
        layers.append(lin)
        if j < len(idx) - 1:
            layers.append(nn.SiLU())
    return Net(torch, nn.Sequential(*layers), params["time.freqs"],
               float(params["time.scale"]), dim)


class Net:
    """``[x, t, sin(s t w), cos(s t w)] -> MLP`` (jaxkit's ``nets.MLP`` features)."""

    def __init__(self, torch, seq, freqs, scale, dim):
        self.torch, self.seq = torch, seq
        self.freqs = torch.from_numpy(np.asarray(freqs, np.float32))
        self.scale = scale
        n_in = seq[0].in_features
        if n_in != dim + 1 + 2 * self.freqs.shape[0]:
            raise SystemExit(f"net input {n_in} != d + 1 + 2 x {self.freqs.shape[0]}")

    def parameters(self):
        return self.seq.parameters()

    def __call__(self, t, x):
        t = t.reshape(-1, 1).to(x.dtype).expand(x.shape[0], 1)
        arg = (self.scale * t) * self.freqs
        return self.seq(self.torch.cat([x, t, self.torch.sin(arg), self.torch.cos(arg)],
                                       dim=-1))


class Velocity:
    """``v(t, x)`` for torchdiffeq / flow_matching, counting evaluations."""

    def __init__(self, torch, net):
        self.torch, self.net, self.nfe = torch, net, 0

    def __call__(self, t, x):
        self.nfe += 1
        return self.net(self.torch.as_tensor(t, dtype=x.dtype), x)


def _time(fn, n_runs: int, warmup: int):
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(n_runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def case_train(torch, cfg, data, params, res):
    from flow_matching.path import AffineProbPath
    from flow_matching.path.scheduler import CondOTScheduler
    from torchcfm.conditional_flow_matching import (
        ConditionalFlowMatcher,
        ExactOptimalTransportConditionalFlowMatcher,
    )

    dim = data.shape[1]
    x = torch.from_numpy(data)
    n = x.shape[0]
    chk = cfg["check"][str(dim)]
    for batch in cfg["train"]["batches"]:
        for impl in ("torchcfm-cfm", "torchcfm-otcfm", "flow_matching-cfm"):
            torch.manual_seed(cfg["seed"])
            net = build_net(torch, params, dim)
            opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"])
            fm = path = None
            if impl == "torchcfm-cfm":
                fm = ConditionalFlowMatcher(sigma=0.0)
            elif impl == "torchcfm-otcfm":
                fm = ExactOptimalTransportConditionalFlowMatcher(sigma=0.0)
            else:
                path = AffineProbPath(scheduler=CondOTScheduler())

            def step(batch=batch, impl=impl, fm=fm, path=path, net=net, opt=opt):
                x1 = x[torch.randint(0, n, (batch,))]
                x0 = torch.randn_like(x1)
                if impl.startswith("torchcfm"):
                    t, xt, ut = fm.sample_location_and_conditional_flow(x0, x1)
                else:
                    t = torch.rand(batch)
                    ps = path.sample(t=t, x_0=x0, x_1=x1)
                    xt, ut = ps.x_t, ps.dx_t
                vt = net(t, xt)
                loss = torch.mean((vt - ut) ** 2)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                return float(loss)

            times, _ = _time(step, cfg["train"]["n_runs"], cfg["train"]["warmup"])
            res[f"train/{dim}/{batch}/{impl}"] = dict(times_s=times, warmup=cfg["train"]["warmup"])
    # the loss of the exported (untrained) net on a fixed batch, both sides the same inputs
    net = build_net(torch, params, dim)
    with torch.no_grad():
        x0c, x1c = torch.from_numpy(chk["x0"]), torch.from_numpy(chk["x1"])
        t = torch.from_numpy(chk["t"]).reshape(-1, 1)
        xt = (1 - t) * x0c + t * x1c
        vt = net(t, xt)
        res[f"check_loss/{dim}"] = float(torch.mean((vt - (x1c - x0c)) ** 2))


def _time_solve(v, call, key: str, c: dict, res: dict, arrays: dict) -> None:
    """Time ``call`` (``c["n_runs"]`` after ``c["warmup"]``) and record the velocity
    evaluations per call (every call does the same, deterministic work) and the output."""
    v.nfe = 0
    times, out = _time(call, c["n_runs"], c["warmup"])
    res[key] = dict(times_s=times, warmup=c["warmup"], nfe=v.nfe // (c["n_runs"] + c["warmup"]))
    arrays[key] = out.numpy()


def case_sample(torch, cfg, params, x0, res, arrays):
    from flow_matching.solver import ODESolver
    from torchdiffeq import odeint

    dim = x0.shape[1]
    net = build_net(torch, params, dim)
    v = Velocity(torch, net)
    y0 = torch.from_numpy(x0)
    sc = cfg["sample"]
    for method, steps in sc["methods"]:
        grid = torch.linspace(0.0, 1.0, steps + 1)
        for impl in ("torchdiffeq", "flow_matching"):
            if impl == "torchdiffeq":
                def call(method=method, grid=grid):
                    with torch.no_grad():
                        return odeint(v, y0, grid, method=method)[-1]
            else:
                solver = ODESolver(velocity_model=lambda x, t: v(t, x))

                def call(method=method, grid=grid, solver=solver):
                    with torch.no_grad():
                        return solver.sample(x_init=y0, step_size=None, method=method,
                                             time_grid=grid)
            _time_solve(v, call, f"sample/{dim}/{method}{steps}/{impl}", sc, res, arrays)


def case_adaptive(torch, cfg, params, x0, res, arrays):
    from torchdiffeq import odeint

    dim = x0.shape[1]
    net = build_net(torch, params, dim)
    v = Velocity(torch, net)
    y0 = torch.from_numpy(x0)
    ac = cfg["adaptive"]
    grid = torch.tensor([0.0, 1.0])

    def call():
        with torch.no_grad():
            return odeint(v, y0, grid, method="dopri5", rtol=ac["rtol"], atol=ac["atol"])[-1]

    _time_solve(v, call, f"adaptive/{dim}/torchdiffeq-dopri5", ac, res, arrays)


def case_likelihood(torch, cfg, params, x1, res, arrays):
    from flow_matching.solver import ODESolver

    dim = x1.shape[1]
    net = build_net(torch, params, dim)
    v = Velocity(torch, net)
    lc = cfg["likelihood"]
    solver = ODESolver(velocity_model=lambda x, t: v(t, x))
    if not hasattr(solver, "compute_likelihood"):
        res[f"likelihood/{dim}/skipped"] = "flow_matching ODESolver has no compute_likelihood"
        return
    y1 = torch.from_numpy(x1)
    exact = dim <= lc["exact_max_dim"]
    grid = torch.linspace(1.0, 0.0, lc["steps"] + 1)

    def log_p0(z):
        return -0.5 * (z ** 2).sum(-1) - 0.5 * z.shape[-1] * math.log(2 * math.pi)

    def call():
        torch.manual_seed(cfg["seed"])
        _, logp = solver.compute_likelihood(x_1=y1, log_p0=log_p0, step_size=None,
                                            method=lc["method"], time_grid=grid,
                                            exact_divergence=exact)
        return logp.detach()

    key = f"likelihood/{dim}/flow_matching"
    _time_solve(v, call, key, lc, res, arrays)
    res[key]["exact"] = exact


def parity(inp: str, out: str) -> int:
    """torchcfm's paths, plans and Wasserstein distances on given inputs (see the module
    docstring); float64 throughout."""
    torch = _torch(1)
    from torchcfm import conditional_flow_matching as cfm
    from torchcfm.optimal_transport import OTPlanSampler, wasserstein

    d = np.load(inp)
    x0, x1, t, eps = (torch.from_numpy(np.asarray(d[k], np.float64)) for k in
                      ("x0", "x1", "t", "eps"))
    sigma, reg = float(d["sigma"]), float(d["reg"])
    res = {}
    matchers = {"icfm": cfm.ConditionalFlowMatcher(sigma),
                "otcfm": cfm.ExactOptimalTransportConditionalFlowMatcher(sigma),
                "sbcfm": cfm.SchrodingerBridgeConditionalFlowMatcher(sigma, "sinkhorn"),
                "target": cfm.TargetConditionalFlowMatcher(sigma),
                "vp": cfm.VariancePreservingConditionalFlowMatcher(sigma)}
    for name, fm in matchers.items():
        xt = fm.sample_xt(x0, x1, t, eps)
        res[f"xt/{name}"] = xt.numpy()
        res[f"ut/{name}"] = fm.compute_conditional_flow(x0, x1, t, xt).numpy()
    res["plan/exact"] = OTPlanSampler(method="exact").get_map(x0, x1)
    res["plan/sinkhorn"] = OTPlanSampler(method="sinkhorn", reg=reg).get_map(x0, x1)
    res["plan/sbcfm"] = matchers["sbcfm"].ot_sampler.get_map(x0, x1)
    res["w2"] = np.float64(wasserstein(x0, x1, "exact", power=2))
    res["w1"] = np.float64(wasserstein(x0, x1, "exact", power=1))
    np.savez(out, meta=json.dumps(dict(versions=peer_versions(("torch", "torchcfm", "POT")))),
             **res)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "--parity":
        return parity(*argv[1:3])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inp")
    p.add_argument("out")
    a = p.parse_args(argv)
    d = np.load(a.inp)
    cfg = json.loads(str(d["config"]))
    for dim in list(cfg["check"]):
        cfg["check"][dim] = {k: d[f"check_{dim}_{k}"] for k in ("x0", "x1", "t")}
    torch = _torch(int(cfg["threads"]))
    res: dict = {}
    arrays: dict = {}
    for dim in cfg["dims"]:
        params = {k.split("/", 1)[1]: d[k] for k in d.files if k.startswith(f"param_{dim}/")}
        data = np.ascontiguousarray(d[f"data_{dim}"])
        t0 = time.perf_counter()
        if "train" in cfg["cases"]:
            case_train(torch, cfg, data, params, res)
        if "sample" in cfg["cases"]:
            case_sample(torch, cfg, params, np.ascontiguousarray(d[f"x0_{dim}"]), res, arrays)
        if "adaptive" in cfg["cases"]:
            case_adaptive(torch, cfg, params, np.ascontiguousarray(d[f"x0_{dim}"]), res,
                          arrays)
        if "likelihood" in cfg["cases"]:
            case_likelihood(torch, cfg, params, np.ascontiguousarray(d[f"x1_{dim}"]), res,
                            arrays)
        print(f"flow worker: {dim}D done in {time.perf_counter() - t0:.1f} s", flush=True)
    meta = dict(versions=peer_versions(("torch", "torchcfm", "flow_matching", "torchdiffeq",
                                        "POT", "numpy")),
                python=sys.version.split()[0], platform=platform.platform(),
                torch_threads=torch.get_num_threads(),
                torch_interop_threads=torch.get_num_interop_threads(), results=res)
    np.savez(a.out, meta=json.dumps(meta), **{f"arr/{k}": v for k, v in arrays.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
