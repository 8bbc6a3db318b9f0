"""Time one PyTorch sparse-autoencoder training step on CPU (peer worker).

Runs inside ``benchmarks/.peer-venv-crosscoder`` (made by ``benchmarks/bench_crosscoder.py``
with pinned torch, sae-lens and eai-sparsify), so it imports nothing from jaxkit or JAX.
Usage::

    python crosscoder_worker.py DATA.npz OUT.json ARRAYS_DIR --impls IMPL[,IMPL...]
        [--warmup 2] [--runs 5] [--threads 2]

``DATA.npz`` holds the batch ``x`` (B, d) or (B, T, d), jaxkit's initial parameters
``W_enc`` (*site, d, F), ``b_enc`` (F,), ``W_dec`` (F, *site, d), ``b_dec`` (*site, d), and
``k``, ``lr``. Each ``IMPL`` (run one after the other in this process) is one of

* ``saelens-topk`` / ``saelens-batchtopk`` -- SAELens ``TopKTrainingSAE`` /
  ``BatchTopKTrainingSAE`` (``apply_b_dec_to_input=False``, ``rescale_acts_by_decoder_norm
  =True``: its way of treating the decoder as unit-norm; AuxK off: ``dead_neuron_mask=None``).
  One step is ``SAETrainer._train_step`` without logging and LR schedule:
  ``training_forward_pass`` (loss = MSE summed over d, mean over the batch), the firing
  bookkeeping, ``backward``, ``clip_grad_norm_(1.0)`` (hard-coded in its trainer), Adam.
* ``sparsify-topk`` -- eai-sparsify ``SparseCoder`` (TopK, ``normalize_decoder=True``,
  ``SPARSIFY_DISABLE_TRITON=1``, i.e. its eager ``embedding_bag`` sparse decoder and the
  index_add backward of its fused encoder). One step is its ``Trainer``'s: decoder set to
  unit norm, forward (loss = FVU), firing bookkeeping, backward,
  ``remove_gradient_parallel_to_decoder_directions``, Adam. sparsify subtracts ``b_dec``
  from the input before encoding, so the encoder bias is loaded as
  ``b_enc + b_dec @ W_enc``: the same pre-activations as jaxkit from the same weights.
* ``torch-temporal`` -- :mod:`torch_temporal` (this folder), T = x.shape[1].

The worker loads the parameters, writes the reconstruction of ``x`` before any update
(``x_hat0``) and the parameters after one training step on ``x`` (jaxkit layout; sparsify's
decoder renormalised as its next step would) to ``ARRAYS_DIR/IMPL.npz``, runs
``warmup - 1`` more untimed steps, then ``runs`` timed steps on the same batch. Times,
versions, the thread count and the library's own step-1 loss go to ``OUT.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time

os.environ.setdefault("SPARSIFY_DISABLE_TRITON", "1")  # before sparsify is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import versions as peer_versions  # noqa: E402

IMPLS = ("saelens-topk", "saelens-batchtopk", "sparsify-topk", "torch-temporal")


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float32)


def build_saelens(data, batch: bool, lr: float):
    from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
    from sae_lens.saes.sae import TrainStepInput
    from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig

    W_enc = data["W_enc"]
    d, F = W_enc.shape
    k = int(data["k"])
    common = dict(d_in=d, d_sae=F, dtype="float32", device="cpu", apply_b_dec_to_input=False,
                  rescale_acts_by_decoder_norm=True)
    if batch:
        sae = BatchTopKTrainingSAE(BatchTopKTrainingSAEConfig(k=float(k), **common))
    else:
        sae = TopKTrainingSAE(TopKTrainingSAEConfig(k=k, **common))
    with torch.no_grad():
        sae.W_enc.copy_(_t(W_enc))
        sae.b_enc.copy_(_t(data["b_enc"]))
        sae.W_dec.copy_(_t(data["W_dec"]))
        sae.b_dec.copy_(_t(data["b_dec"]))
    opt = torch.optim.Adam(sae.parameters(), lr=lr, betas=(0.9, 0.999))
    since_fired = torch.zeros(F)
    act_freq = torch.zeros(F)
    n_steps = [0]

    def step(x):  # sae_lens.training.sae_trainer.SAETrainer._train_step, minus logging
        sae.train()
        out = sae.training_forward_pass(TrainStepInput(
            sae_in=x, coefficients={}, dead_neuron_mask=None,
            n_training_steps=n_steps[0], is_logging_step=False))
        with torch.no_grad():
            firing = out.feature_acts.bool().float()
            did_fire = firing.sum(-2).bool()
            since_fired.add_(1)
            since_fired[did_fire] = 0
            act_freq.add_(firing.sum(0))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        n_steps[0] += 1
        return out.loss.detach()

    @torch.no_grad()
    def reconstruct(x):
        feats, _ = sae.encode_with_hidden_pre(x)
        return sae.decode(feats)

    def params():
        return dict(W_enc=_np(sae.W_enc), b_enc=_np(sae.b_enc), W_dec=_np(sae.W_dec),
                    b_dec=_np(sae.b_dec))

    return step, reconstruct, params, "saelens: mse_loss = sum_d (x - x_hat)^2, mean over B"


def build_sparsify(data, lr: float):
    from sparsify import SparseCoder, SparseCoderConfig

    W_enc = data["W_enc"]
    d, F = W_enc.shape
    k = int(data["k"])
    sae = SparseCoder(d, SparseCoderConfig(num_latents=F, k=k, normalize_decoder=True),
                      device="cpu", dtype=torch.float32)
    b_enc_folded = data["b_enc"].astype(np.float64) + data["b_dec"].astype(np.float64) @ W_enc
    with torch.no_grad():
        sae.encoder.weight.copy_(_t(W_enc.T))
        sae.encoder.bias.copy_(_t(b_enc_folded))
        sae.W_dec.copy_(_t(data["W_dec"]))
        sae.b_dec.copy_(_t(data["b_dec"]))
    opt = torch.optim.Adam(sae.parameters(), lr=lr)
    since_fired = torch.zeros(F, dtype=torch.long)

    def step(x):  # sparsify.trainer.Trainer.fit, loss_fn="fvu", one SAE, no AuxK
        sae.set_decoder_norm_to_unit_norm()
        out = sae(x, dead_mask=None)
        did_fire = torch.zeros(F, dtype=torch.bool)
        did_fire[out.latent_indices.flatten()] = True
        loss = out.fvu + out.multi_topk_fvu / 8  # auxk_alpha = 0
        loss.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        opt.step()
        opt.zero_grad()
        since_fired.add_(x.shape[0])
        since_fired[did_fire] = 0
        return out.fvu.detach()

    @torch.no_grad()
    def reconstruct(x):
        return sae(x).sae_out

    @torch.no_grad()
    def params():
        W = sae.encoder.weight
        W_dec = sae.W_dec / (sae.W_dec.norm(dim=1, keepdim=True) + torch.finfo(W.dtype).eps)
        return dict(W_enc=_np(W.T), b_enc=_np(sae.encoder.bias - sae.b_dec @ W.T),
                    W_dec=_np(W_dec), b_dec=_np(sae.b_dec))

    return step, reconstruct, params, "sparsify: fvu = sum (x - x_hat)^2 / sum (x - mean_B x)^2"


def build_temporal(data, lr: float):
    from torch_temporal import TemporalCrosscoder, make_train_step

    T, d, F = data["W_enc"].shape
    model = TemporalCrosscoder(T, d, F, int(data["k"]))
    model.load(data["W_enc"], data["b_enc"], data["W_dec"], data["b_dec"])
    _, step = make_train_step(model, lr)

    @torch.no_grad()
    def reconstruct(x):
        return model(x)[1]

    def params():
        return dict(W_enc=_np(model.W_enc), b_enc=_np(model.b_enc), W_dec=_np(model.W_dec),
                    b_dec=_np(model.b_dec))

    return step, reconstruct, params, "torch_temporal: fvu over (B, T, d)"


def run_impl(impl: str, data: dict, x: torch.Tensor, arrays: str, warmup: int,
             runs: int) -> dict:
    lr = float(data["lr"])
    if impl.startswith("saelens"):
        step, reconstruct, params, loss_def = build_saelens(data, impl.endswith("batchtopk"), lr)
    elif impl == "sparsify-topk":
        step, reconstruct, params, loss_def = build_sparsify(data, lr)
    else:
        step, reconstruct, params, loss_def = build_temporal(data, lr)
    x_hat0 = _np(reconstruct(x))
    t0 = time.perf_counter()
    loss1 = float(step(x))  # step 1, from jaxkit's initial weights
    first_s = time.perf_counter() - t0
    np.savez(arrays, x_hat0=x_hat0, **{f"after1_{k}": v for k, v in params().items()})
    for _ in range(warmup - 1):
        step(x)
    gc.collect()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step(x)
        times.append(time.perf_counter() - t0)
    print(f"{impl}: median step {np.median(times):.3f} s over {runs} runs "
          f"({torch.get_num_threads()} threads)", flush=True)
    return {"warmup": warmup, "first_step_s": first_s, "times_s": times, "loss_step1": loss1,
            "loss_definition": loss_def}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("arrays_dir")
    p.add_argument("--impls", required=True, help=f"comma list out of {', '.join(IMPLS)}")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    impls = [s.strip() for s in a.impls.split(",") if s.strip()]
    if not impls or any(i not in IMPLS for i in impls):
        raise SystemExit(f"--impls must list some of {IMPLS}; got {a.impls!r}")
    if a.warmup < 1 or a.runs < 1:
        raise SystemExit("--warmup and --runs must be >= 1")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    data = dict(np.load(a.data))
    x = _t(data["x"])
    out = {
        "versions": peer_versions(("torch", "sae-lens", "eai-sparsify", "numpy")),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "isa_env": {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                               "MKL_ENABLE_INSTRUCTIONS") if k in os.environ},
        "results": {},
    }
    for impl in impls:
        out["results"][impl] = run_impl(impl, data, x, os.path.join(a.arrays_dir, f"{impl}.npz"),
                                        a.warmup, a.runs)
        gc.collect()
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
