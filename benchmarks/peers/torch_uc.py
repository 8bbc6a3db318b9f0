"""A PyTorch universal-circuit (cross-model cross-layer transcoder) training step, written
from the equations of ``jaxkit.kernels.crosscoder.cross_model`` (the reference peer: no
released package has cross-model CLTs).

Runs inside ``benchmarks/.peer-venv-torch`` (torch only; that venv has no NumPy, so
arrays travel as raw little-endian float32 files described by a JSON header). Models are
chains of dense ReLU layers ``h_{t+1} = relu(h_t W_t + b_t)`` with a linear head. For
models ``m``, layers ``l`` of depth ``dep(m, l)`` and ``F`` latents per depth::

    pre[b, s]     = b_enc[s] + sum_{dep(m, l) = s} h[m][l] @ W_enc[m][l]
    z[b, s]       = relu(TopK_k(pre[b, s]))                       (per image and depth)
    yhat[m][l]    = b_dec[m][l] + sum_{s <= dep(m, l)} z[:, s] @ W_dec[m][l][s]
    loss          = mean_{(m, l)} FVU(h[m][l+1], yhat[m][l])
                    + fidelity * mean_{(m, l)} KL(p_m || softmax(rest_m(l + 1, yhat[m][l])))

and one step is: loss, backward (through the frozen models' remaining layers), global
gradient-norm clipping to 1, ``torch.optim.Adam``. That is jaxkit's
``make_train_step(uc_loss, optax.adam, clip_norm=1.0)``.

Usage: ``python torch_uc.py DIR --warmup W --runs R --threads N`` with ``DIR/meta.json``
and the arrays it names; writes ``DIR/out.json`` (step times, step-1 loss and gradient
norm).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

_TINY = 1e-12


def load(dir_: Path, meta: dict, name: str) -> torch.Tensor:
    shape = meta["arrays"][name]
    raw = bytearray((dir_ / f"{name}.f32").read_bytes())
    return torch.frombuffer(raw, dtype=torch.float32).reshape(shape).clone()


class UC(torch.nn.Module):
    """Parameters in the layout of ``UCParams``."""

    def __init__(self, dir_: Path, meta: dict):
        super().__init__()
        self.depth_map = [tuple(d) for d in meta["depth_map"]]
        self.D = meta["n_depths"]
        P = torch.nn.Parameter
        self.W_enc = torch.nn.ParameterList()
        self.W_dec = torch.nn.ParameterList()
        self.b_dec = torch.nn.ParameterList()
        self.index = []
        for m, dm in enumerate(self.depth_map):
            for j, _ in enumerate(dm):
                self.index.append((m, j))
                self.W_enc.append(P(load(dir_, meta, f"W_enc_{m}_{j}")))
                self.W_dec.append(P(load(dir_, meta, f"W_dec_{m}_{j}")))
                self.b_dec.append(P(load(dir_, meta, f"b_dec_{m}_{j}")))
        self.b_enc = P(load(dir_, meta, "b_enc"))
        self.masks = [(torch.arange(self.D) <= self.depth_map[m][j]).float()
                      for m, j in self.index]

    def forward(self, sites, k: int):
        B = sites[0][0].shape[0]
        pre = [self.b_enc[s].expand(B, -1) for s in range(self.D)]
        for i, (m, j) in enumerate(self.index):
            s = self.depth_map[m][j]
            pre[s] = pre[s] + sites[m][j] @ self.W_enc[i]
        pre = torch.stack(pre, 1)  # (B, D, F)
        vals, idx = torch.topk(pre, k, dim=-1)
        z = torch.zeros_like(pre).scatter(-1, idx, vals.relu())
        yhat = {}
        for i, (m, j) in enumerate(self.index):
            W = self.W_dec[i] * self.masks[i][:, None, None]
            yhat[(m, j)] = torch.einsum("bsf,sfd->bd", z, W) + self.b_dec[i]
        return z, yhat


def rest(model: list, t: int, h: torch.Tensor) -> torch.Tensor:
    """Model layers ``t..`` then the head; ``model`` = [(W, b), ...] with the head last."""
    for W, b in model[t:-1]:
        h = torch.relu(h @ W + b)
    W, b = model[-1]
    return h @ W + b


def fvu(y, yhat):
    return (y - yhat).pow(2).sum() / (y - y.mean(0)).pow(2).sum().clamp_min(_TINY)


def loss_fn(uc: UC, sites, models, k: int, fidelity: float):
    _, yhat = uc(sites, k)
    recon = torch.stack([fvu(sites[m][j + 1], yhat[(m, j)]) for m, j in uc.index]).mean()
    kls = []
    for m, dm in enumerate(uc.depth_map):
        with torch.no_grad():
            ref = torch.log_softmax(rest(models[m], len(dm), sites[m][len(dm)]), -1)
        for j in range(len(dm)):
            lq = torch.log_softmax(rest(models[m], j + 1, yhat[(m, j)]), -1)
            kls.append((ref.exp() * (ref - lq)).sum(-1).mean())
    return recon + fidelity * torch.stack(kls).mean()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    d = Path(a.dir)
    meta = json.loads((d / "meta.json").read_text())
    uc = UC(d, meta)
    sites = [[load(d, meta, f"site_{m}_{t}") for t in range(len(dm) + 1)]
             for m, dm in enumerate(meta["depth_map"])]
    models = [[(load(d, meta, f"model_{m}_W{j}"), load(d, meta, f"model_{m}_b{j}"))
               for j in range(len(dm) + 1)] for m, dm in enumerate(meta["depth_map"])]
    opt = torch.optim.Adam(uc.parameters(), lr=meta["lr"])
    k, fid = meta["k"], meta["fidelity"]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(uc, sites, models, k, fid)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(uc.parameters(), 1.0)
        opt.step()
        return float(loss), float(gn)

    loss1, gn1 = step()
    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    (d / "out.json").write_text(json.dumps(dict(times=times, loss_step1=loss1,
                                                grad_norm_step1=gn1, threads=a.threads,
                                                torch=torch.__version__)))


if __name__ == "__main__":
    main()
