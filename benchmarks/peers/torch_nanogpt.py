"""A PyTorch nanoGPT (Karpathy's ``model.py`` layout, written from it: no biases,
LayerNorm without bias, learned positions, tied embedding, GELU MLP, causal
``scaled_dot_product_attention``) and its training step, the peer of
``benchmarks/bench_compose.py``'s character-level GPT case.

Runs inside ``benchmarks/.peer-venv-torch`` (torch only; that venv has no NumPy, so
arrays travel as raw float32/int32 bytes described by a JSON index, see
:func:`read_arrays`). Protocol: ``python torch_nanogpt.py REQUEST.json``; the request
names the shapes, the weights file (jaxkit's initial weights, exported) and the timing
counts; the reply on stdout is one JSON line: per-step times, the loss of the exported
weights on the check batch (to compare with jaxkit's) and the versions.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions  # noqa: E402

DTYPES = {"float32": torch.float32, "int32": torch.int32}


def read_arrays(index_path: str) -> dict:
    """``{name: tensor}`` from an index JSON ``{"file", "arrays": [{name, dtype, shape,
    offset, count}]}`` and its raw little-endian data file."""
    idx = json.loads(Path(index_path).read_text())
    data = bytearray(Path(idx["file"]).read_bytes())
    out = {}
    for a in idx["arrays"]:
        t = torch.frombuffer(data, dtype=DTYPES[a["dtype"]], count=a["count"],
                             offset=a["offset"])
        out[a["name"]] = t.reshape(a["shape"]).clone()
    return out


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class Attention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.n_head = n_head

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (u.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
                   for u in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.c_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.ln_1, self.attn = LayerNorm(d), Attention(d, n_head)
        self.ln_2, self.mlp = LayerNorm(d), MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, d, block_size, vocab=256):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block_size, d)
        self.h = nn.ModuleList([Block(d, n_head) for _ in range(n_layer)])
        self.ln_f = LayerNorm(d)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    @torch.no_grad()
    def load_jaxkit(self, w: dict) -> None:
        """Weights exported by bench_compose (jaxkit's (in, out) matrices transposed)."""
        self.wte.weight.copy_(w["tok"])
        self.wpe.weight.copy_(w["pos"])
        self.ln_f.weight.copy_(w["norm_f"])
        for i, b in enumerate(self.h):
            a, m = 2 * i, 2 * i + 1
            b.ln_1.weight.copy_(w[f"{a}.norm"])
            b.attn.c_attn.weight.copy_(w[f"{a}.w_qkv"].T)
            b.attn.c_proj.weight.copy_(w[f"{a}.w_o"].T)
            b.ln_2.weight.copy_(w[f"{m}.norm"])
            b.mlp.c_fc.weight.copy_(w[f"{m}.w_in"].T)
            b.mlp.c_proj.weight.copy_(w[f"{m}.w_out"].T)


def train_step(model: GPT, data, batch: int, block_size: int, seed: int = 1):
    """nanoGPT's training step on ``data`` (a 1-D token tensor): a batch of random
    windows, AdamW (lr 1e-3, betas (0.9, 0.95), weight decay 0.1), gradient clipping at
    1. Returns ``step()`` (returns the loss)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95),
                            weight_decay=0.1)
    g = torch.Generator().manual_seed(seed)
    t = block_size

    def step():
        ix = torch.randint(len(data) - t - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + t] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + t] for i in ix])
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return step


def main(req_path: str) -> None:
    req = json.loads(Path(req_path).read_text())
    torch.set_num_threads(int(req.get("threads", 2)))
    torch.manual_seed(0)
    w = read_arrays(req["arrays"])
    model = GPT(req["n_layer"], req["n_head"], req["d"], req["block_size"])
    model.load_jaxkit(w)
    idx, tgt = w["check_x"].long(), w["check_y"].long()
    with torch.no_grad():
        check = float(model(idx, tgt))
    step = train_step(model, w["data"].long(), req["batch"], req["block_size"])

    for _ in range(req["warmup"]):
        step()
    times = []
    for _ in range(req["n_runs"]):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps(dict(times=times, check_loss=check, threads=torch.get_num_threads(),
                          versions=versions(["torch"]),
                          params=sum(p.numel() for p in model.parameters()),
                          log2=math.log(2))))


if __name__ == "__main__":
    main(sys.argv[1])
