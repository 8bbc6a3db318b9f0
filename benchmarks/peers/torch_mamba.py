"""The Mamba block of ``mambapy`` (pure PyTorch, parallel ``pscan``; the CPU Mamba peer:
``mamba-ssm`` is CUDA-only), forward and backward, the peer of
``benchmarks/bench_compose.py``'s Mamba case.

Runs inside ``benchmarks/.peer-venv-torch`` (torch 2.14.1, mambapy 1.2.0; no NumPy:
arrays travel as raw bytes, :func:`torch_nanogpt.read_arrays`). Protocol: ``python
torch_mamba.py REQUEST.json``; the reply on stdout is one JSON line with the per-call
times of forward + backward of ``sum(out * g)``, and the output on the check input
(to compare with jaxkit's ``mamba_mixer`` on the same exported weights).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions  # noqa: E402
from torch_nanogpt import read_arrays  # noqa: E402


def mamba_block(req: dict, w: dict, pscan: bool = True):
    """mambapy's ``MambaBlock`` of the request's sizes with the weights jaxkit exported
    (its ``(in, out)`` matrices transposed)."""
    from mambapy.mamba import MambaBlock, MambaConfig

    cfg = MambaConfig(d_model=req["d"], n_layers=1, d_state=req["d_state"],
                      expand_factor=req["expand"], d_conv=req["d_conv"], pscan=pscan)
    blk = MambaBlock(cfg)
    with torch.no_grad():
        blk.in_proj.weight.copy_(w["w_in"].T)
        blk.conv1d.weight.copy_(w["conv_w"].T[:, None, :])
        blk.conv1d.bias.copy_(w["conv_b"])
        blk.x_proj.weight.copy_(w["w_x"].T)
        blk.dt_proj.weight.copy_(w["w_dt"].T)
        blk.dt_proj.bias.copy_(w["b_dt"])
        blk.A_log.copy_(w["A_log"])
        blk.D.copy_(w["D"])
        blk.out_proj.weight.copy_(w["w_out"].T)
    return blk


def main(req_path: str) -> None:
    req = json.loads(Path(req_path).read_text())
    torch.set_num_threads(int(req.get("threads", 2)))
    w = read_arrays(req["arrays"])
    blk = mamba_block(req, w, pscan=req.get("pscan", True))
    x, g = w["x"], w["g"]
    with torch.no_grad():
        out = blk(x)
    check = [float(out.abs().max()), float((out * g).sum())]
    xr = x.clone().requires_grad_(True)

    def call():
        for p in blk.parameters():
            p.grad = None
        xr.grad = None
        (blk(xr) * g).sum().backward()

    for _ in range(req["warmup"]):
        call()
    times = []
    for _ in range(req["n_runs"]):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    print(json.dumps(dict(times=times, check=check, threads=torch.get_num_threads(),
                          versions=versions(["torch", "mambapy"]))))


if __name__ == "__main__":
    main(sys.argv[1])
