"""llama.cpp (through ``llama-cpp-python``) on a GGUF language model, CPU (peer worker of
``benchmarks/bench_lm.py``).

Runs inside ``benchmarks/.peer-venv-llamacpp`` (made by
``benchmarks/peers/setup_lm_peers.sh``: llama.cpp compiled for this CPU,
``GGML_NATIVE=ON``), so it imports nothing from jaxkit or JAX. Usage::

    python lm_llamacpp_worker.py REQUEST.json OUT.json

``REQUEST.json`` (every key but ``gguf`` optional)::

    {"gguf": PATH, "threads": 2,
     "tokenize": [TEXT, ...],
     "logits": {"sequences": [[ID, ...], ...], "out": "logits.npz"},
     "generate": {"prompts": [[ID, ...], ...], "max_new_tokens": 16},
     "timings": {"cases": ["prefill", "decode"], "prefill_tokens": [ID x 512],
                 "prompts": [[ID x P], ...], "new_tokens": 64, "runs": 5, "warmup": 1,
                 "flash_attn": [false, true]}}

llama.cpp computes with the quantized weights as stored (Q4_1 / Q8_0 blocks; the
activations are quantized to 8 bits for those products), with its own RoPE on the
permuted query/key rows of the GGUF file. Tokenizer: llama.cpp's own
(``Llama.tokenize(text, add_bos=False, special=True)``: control-token markers in the text
become their ids, as jaxkit and transformers parse them; ``detokenize(ids, special=True)``
for the round trip).

* ``tokenize``: ids of each text, and the decoded ids.
* ``logits``: a context with ``logits_all=True``; each sequence evaluated from an empty
  KV cache; float32 ``(len, vocab)`` written as ``logits_{i}``.
* ``generate``: greedy (argmax of the last logits, as a temperature-0 sampler), stops at
  EOS or ``max_new_tokens``.
* ``timings`` (medians over ``runs`` after ``warmup``; ``n_threads = n_threads_batch =
  threads``, ``n_batch = n_ubatch = 512``; each setting of ``flash_attn`` in turn, a fresh
  context each): ``prefill``: ``reset()`` then ``eval(prefill_tokens)`` (one ubatch of 512
  tokens, logits of the last position only); ``decode``: ``eval(prompt)`` untimed, then
  ``new_tokens`` steps of argmax-of-the-last-logits + ``eval([token])``, timed as a whole:
  decode tokens/s = ``new_tokens / time`` (a single sequence; the Python wrapper has no
  batched multi-sequence decode).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time

import llama_cpp
import numpy as np
from _common import timed_runs as _times
from _common import versions as peer_versions
from llama_cpp import Llama


def _last_logits(llm: Llama) -> np.ndarray:
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1),
                                 shape=(llm.n_vocab(),))


def _open(path: str, threads: int, n_ctx: int, **kw) -> Llama:
    return Llama(path, n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=threads,
                 n_threads_batch=threads, verbose=False, **kw)


def greedy(llm: Llama, prompt, n: int, *, stop_at_eos: bool = True) -> list[int]:
    llm.reset()
    llm.eval(prompt)
    eos = llm.token_eos()
    out: list[int] = []
    for _ in range(n):
        t = int(np.argmax(_last_logits(llm)))
        if stop_at_eos and t == eos:
            break
        out.append(t)
        llm.eval([t])
    return out


def run_timings(path: str, threads: int, req: dict) -> dict:
    cases = req.get("cases", ["prefill", "decode"])
    new = int(req.get("new_tokens", 64))
    need = max(len(req.get("prefill_tokens", [])),
               max((len(p) for p in req.get("prompts", [[]])), default=0) + new)
    n_ctx = max(512, -(-need // 256) * 256)
    out: dict = {}
    for fa in req.get("flash_attn", [False, True]):
        out.update(time_context(_open(path, threads, n_ctx, flash_attn=bool(fa)), bool(fa),
                                req, cases, new))
        gc.collect()
    return out


def time_context(llm: Llama, fa: bool, req: dict, cases, new: int) -> dict:
    """The timed cases on one context (``fa``: its flash-attention setting)."""
    runs, warmup = int(req.get("runs", 5)), int(req.get("warmup", 1))
    tag = "fa_on" if fa else "fa_off"
    out: dict = {}
    if "prefill" in cases:
        toks = list(req["prefill_tokens"])
        t = _times(lambda: llm.eval(toks), runs, warmup, setup=llm.reset)
        out[f"prefill_{tag}"] = dict(times_s=t, items=len(toks), warmup=warmup, flash_attn=fa)
        print(f"prefill {len(toks)} ({tag}): {len(toks) / np.median(t):,.0f} tok/s",
              flush=True)
    if "decode" in cases:
        prompt = list(req["prompts"][0])
        t = _times(lambda: greedy_steps(llm, new), runs, warmup,
                   setup=lambda: (llm.reset(), llm.eval(prompt)))
        out[f"decode_b1_{tag}"] = dict(times_s=t, items=new, warmup=warmup, batch=1,
                                       prompt_tokens=len(prompt), new_tokens=new,
                                       flash_attn=fa)
        print(f"decode batch 1 ({tag}): {new / np.median(t):,.1f} tok/s", flush=True)
    return out


def greedy_steps(llm: Llama, n: int) -> None:
    """``n`` decode steps after the prompt: argmax of the last logits, then eval it (EOS
    not treated specially, so every run makes exactly ``n`` tokens)."""
    for _ in range(n):
        llm.eval([int(np.argmax(_last_logits(llm)))])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("request")
    p.add_argument("out")
    a = p.parse_args(argv)
    with open(a.request) as f:
        req = json.load(f)
    path, threads = req["gguf"], int(req.get("threads", 2))
    out = {
        "versions": peer_versions(("llama-cpp-python", "numpy")),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "threads": threads,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
    }
    if "tokenize" in req or "logits" in req or "generate" in req:
        seqs = req.get("logits", {}).get("sequences", [])
        gen = req.get("generate", {})
        need = max([len(s) for s in seqs]
                   + [len(q) + int(gen.get("max_new_tokens", 16)) for q in
                      gen.get("prompts", [])] + [1])
        t0 = time.perf_counter()
        llm = _open(path, threads, max(512, -(-need // 256) * 256), logits_all=True)
        out["load_s"] = time.perf_counter() - t0
        if "tokenize" in req:
            ids = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)
                   for t in req["tokenize"]]
            out["tokenize"] = dict(ids=ids, decoded=[
                llm.detokenize(i, special=True).decode("utf-8", errors="replace")
                for i in ids])
        if seqs:
            arrs = {}
            for i, seq in enumerate(seqs):
                llm.reset()
                llm.eval(list(seq))
                arrs[f"logits_{i}"] = np.array(llm.scores[: len(seq)], dtype=np.float32)
            np.savez(req["logits"]["out"], **arrs)
            out["logits"] = dict(n=len(arrs))
        if gen:
            toks = [greedy(llm, list(q), int(gen.get("max_new_tokens", 16)))
                    for q in gen["prompts"]]
            out["generate"] = dict(tokens=toks, texts=[
                llm.detokenize(t).decode("utf-8", errors="replace") for t in toks])
        del llm
        gc.collect()
    if "timings" in req:
        out["timings"] = run_timings(path, threads, req["timings"])
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
