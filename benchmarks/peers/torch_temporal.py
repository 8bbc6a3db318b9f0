"""A PyTorch temporal crosscoder written from the equations (the reference peer).

No released package trains a temporal crosscoder (SAELens' ``TemporalSAE`` is a different
model: attention over the context plus an SAE on the residual), so this file is the peer
``benchmarks/bench_crosscoder.py`` compares jaxkit's ``site=(T,)`` crosscoder with. It
runs inside ``benchmarks/.peer-venv-crosscoder`` and imports only torch. The model, for
windows ``x (B, T, d)`` and ``F`` latents::

    pre   = einsum("btd,tdf->bf", x, W_enc) + b_enc          W_enc (T, d, F)
    z     = ReLU(TopK_k(pre))                                per window (row of pre)
    x_hat = einsum("bf,ftd->btd", z, W_dec) + b_dec          W_dec (F, T, d), b_dec (T, d)
    loss  = FVU = sum ||x - x_hat||^2 / sum ||x - mean_B(x)||^2

and one training step is: loss, backward, removal of the gradient component parallel to
each atom ``W_dec[f]`` (jointly over ``(T, d)``; Gao et al. 2024), ``torch.optim.Adam``,
then every atom is rescaled to unit norm over ``(T, d)``. That is jaxkit's
``make_train_step(activation="topk", ...)`` without AuxK (off on both sides). The TopK
layer is written as plain PyTorch the way SAELens does it (``torch.topk`` ->
``relu`` -> ``scatter`` into a dense ``(B, F)`` code; dense decoder matmul), i.e. the
idiomatic PyTorch formulation of the equations, no custom kernels.
"""

from __future__ import annotations

import torch
from torch import nn

_TINY = 1e-12


class TemporalCrosscoder(nn.Module):
    """Temporal TopK crosscoder with the parameter layout of ``jaxkit.kernels.crosscoder``
    (``W_enc (T, d, F)``, ``b_enc (F,)``, ``W_dec (F, T, d)``, ``b_dec (T, d)``)."""

    def __init__(self, T: int, d: int, n_latents: int, k: int, *, dtype=torch.float32):
        super().__init__()
        self.T, self.d, self.n_latents, self.k = int(T), int(d), int(n_latents), int(k)
        w = torch.randn(n_latents, T * d, dtype=dtype)
        w = w / w.norm(dim=-1, keepdim=True)
        self.W_dec = nn.Parameter(w.reshape(n_latents, T, d).clone())
        self.W_enc = nn.Parameter(w.T.reshape(T, d, n_latents).clone())
        self.b_enc = nn.Parameter(torch.zeros(n_latents, dtype=dtype))
        self.b_dec = nn.Parameter(torch.zeros(T, d, dtype=dtype))

    @torch.no_grad()
    def load(self, W_enc, b_enc, W_dec, b_dec) -> None:
        """Copy the given arrays (NumPy or tensors) into the parameters."""
        for p, v in ((self.W_enc, W_enc), (self.b_enc, b_enc), (self.W_dec, W_dec),
                     (self.b_dec, b_dec)):
            p.copy_(torch.as_tensor(v, dtype=p.dtype).reshape(p.shape))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``z = ReLU(TopK(einsum("btd,tdf->bf", x, W_enc) + b_enc))`` as a dense (B, F)."""
        pre = torch.einsum("btd,tdf->bf", x, self.W_enc) + self.b_enc
        vals, idx = torch.topk(pre, self.k, dim=-1, sorted=False)
        return torch.zeros_like(pre).scatter(-1, idx, vals.relu())

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``x_hat = einsum("bf,ftd->btd", z, W_dec) + b_dec``."""
        return torch.einsum("bf,ftd->btd", z, self.W_dec) + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encode(x)
        return z, self.decode(z)

    @staticmethod
    def fvu(x: torch.Tensor, x_hat: torch.Tensor) -> torch.Tensor:
        """``sum ||x - x_hat||^2 / sum ||x - mean_B(x)||^2`` (batch = leading axis)."""
        num = (x - x_hat).pow(2).sum()
        den = (x - x.mean(0)).pow(2).sum()
        return num / den.clamp_min(_TINY)

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        """``g_f <- g_f - <g_f, w_f> w_f / ||w_f||^2`` per atom, jointly over (T, d)."""
        w = self.W_dec.reshape(self.n_latents, -1)
        g = self.W_dec.grad.reshape(self.n_latents, -1)
        coef = (g * w).sum(-1, keepdim=True) / (w * w).sum(-1, keepdim=True).clamp_min(_TINY)
        g.sub_(coef * w)

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Rescale each atom ``W_dec[f]`` to unit norm over (T, d)."""
        w = self.W_dec.reshape(self.n_latents, -1)
        w.div_(w.norm(dim=-1, keepdim=True).clamp_min(_TINY))


def make_train_step(model: TemporalCrosscoder, lr: float):
    """``(optimizer, step(x) -> fvu tensor)``: one full training step as described above."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def step(x: torch.Tensor) -> torch.Tensor:
        _, x_hat = model(x)
        loss = model.fvu(x, x_hat)
        loss.backward()
        model.remove_parallel_grad()
        opt.step()
        opt.zero_grad(set_to_none=True)
        model.normalize_decoder()
        return loss.detach()

    return opt, step
