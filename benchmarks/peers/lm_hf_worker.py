"""Hugging Face ``transformers`` on a GGUF language model, CPU (peer worker of
``benchmarks/bench_lm.py``).

Runs inside ``benchmarks/.peer-venv-hf`` (made by ``benchmarks/peers/setup_lm_peers.sh``:
torch 2.13 CPU, transformers, gguf, accelerate), so it imports nothing from jaxkit or JAX.
Usage::

    python lm_hf_worker.py REQUEST.json OUT.json

``REQUEST.json`` (every key but ``gguf`` optional)::

    {"gguf": PATH, "threads": 2,
     "tokenize": [TEXT, ...],
     "logits": {"sequences": [[ID, ...], ...], "out": "logits.npz"},
     "generate": {"prompts": [[ID, ...], ...], "max_new_tokens": 16},
     "activations": {"tokens": [[ID, ...], ...], "layers": [3, 15], "out": "acts.npz"},
     "timings": {"cases": ["prefill", "prefill_all_logits", "decode", "capture",
                           "capture_truncated"],
                 "prefill_tokens": [ID x 512], "prompts": [[ID x P] x 32],
                 "new_tokens": 64, "batches": [1, 8, 32], "capture_tokens": [[ID x 128] x 8],
                 "capture_layers": [3, 15], "runs": 5, "warmup": 1}}

The model is ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=float32)``:
transformers dequantizes the GGUF tensors to float32 and un-permutes llama.cpp's query/key
rows (``LlamaTensorProcessor._reverse_permute_weights``), so its rotate-half RoPE applies.
Tokenizer: ``AutoTokenizer.from_pretrained(dir, gguf_file=name)``, encoded with
``add_special_tokens=False``. (transformers 5.25 builds it without the ``Digits`` split that
``tokenizer.ggml.pre = smollm`` names, GPT-2's byte-level regex alone: a run of spaces before
a digit then splits differently, ``"a  2"`` -> ``[81, 216, 216, 34]`` where llama.cpp and
the SmolLM2 tokenizer give ``[81, 256, 34]``; logits parity therefore feeds every side the
same ids.)

* ``tokenize``: ids of each text, and the decoded ids (round trip).
* ``logits``: float32 logits ``(len, vocab)`` of each sequence (one forward each, batch 1),
  written as ``logits_{i}`` to ``out``.
* ``generate``: greedy completions (``generate(do_sample=False)``, stops at EOS).
* ``activations``: the residual stream ``hidden_states[L]`` (``output_hidden_states=True``:
  index 0 the embeddings, index L the output of block L - 1, the last one after the final
  norm) for L in ``layers`` and ``L + 1``, as ``hs_{L}`` ``(batch, seq, d)``.
* ``timings`` (``torch.inference_mode``; medians over ``runs`` calls after ``warmup``):
  ``prefill``: one forward of the ``prefill_tokens`` with a fresh KV cache and the logits of
  the last position only (``logits_to_keep=1``, what ``generate`` does);
  ``prefill_all_logits``: the same forward with the logits of every position;
  ``decode``: for each batch size b, ``generate`` on the first b ``prompts`` (equal lengths,
  no padding), greedy, ``use_cache=True``, exactly ``new_tokens`` new tokens
  (``min_new_tokens``) and exactly 1; decode tokens/s = ``b (new_tokens - 1) / (t_new -
  t_1)`` (prefill and set-up cancel);
  ``capture``: ``model.model(tokens, output_hidden_states=True)`` over the
  ``capture_tokens`` batch (all 30 blocks, no LM head);
  ``capture_truncated``: the same with the blocks after block ``max(capture_layers)`` cut
  off (what a user who needs only those layers does; ``config.tie_last_hidden_states =
  False`` so that the last entry is that block's output, not the final norm's), checked
  equal to the full forward's ``hidden_states[L + 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import torch
from _common import timed_runs as _times
from _common import versions as peer_versions


def load(path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d, name = os.path.split(os.path.abspath(path))
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    model.eval()
    return tok, model, time.perf_counter() - t0


def _ids(seqs) -> torch.Tensor:
    return torch.as_tensor(np.asarray(seqs, dtype=np.int64))


@torch.inference_mode()
def run_timings(model, req: dict) -> dict:
    runs, warmup = int(req.get("runs", 5)), int(req.get("warmup", 1))
    cases = req.get("cases", ["prefill", "prefill_all_logits", "decode", "capture",
                              "capture_truncated"])
    out: dict = {}
    if "prefill" in cases or "prefill_all_logits" in cases:
        ids = _ids([req["prefill_tokens"]])
        n = ids.shape[1]
        if "prefill" in cases:
            t = _times(lambda: model(input_ids=ids, use_cache=True, logits_to_keep=1),
                       runs, warmup)
            out["prefill"] = dict(times_s=t, items=n, warmup=warmup)
            print(f"prefill {n}: {n / np.median(t):,.0f} tok/s", flush=True)
        if "prefill_all_logits" in cases:
            t = _times(lambda: model(input_ids=ids, use_cache=True), runs, warmup)
            out["prefill_all_logits"] = dict(times_s=t, items=n, warmup=warmup)
            print(f"prefill {n} (all logits): {n / np.median(t):,.0f} tok/s", flush=True)
    if "decode" in cases:
        new = int(req["new_tokens"])
        for b in req.get("batches", [1, 8, 32]):
            ids = _ids(req["prompts"][:b])
            if ids.shape[0] != b:
                raise SystemExit(f"decode batch {b}: only {ids.shape[0]} prompts given")
            mask = torch.ones_like(ids)

            def gen(k, ids=ids, mask=mask):
                return model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                      max_new_tokens=k, min_new_tokens=k, use_cache=True,
                                      pad_token_id=2)

            assert gen(new).shape == (b, ids.shape[1] + new)
            t_new = _times(lambda: gen(new), runs, warmup)
            t_1 = _times(lambda: gen(1), runs, warmup)
            dec = float(np.median(t_new) - np.median(t_1))
            out[f"decode_b{b}"] = dict(
                times_s=t_new, times_1_s=t_1, items=b * new, warmup=warmup, batch=b,
                prompt_tokens=int(ids.shape[1]), new_tokens=new,
                decode_s=dec, decode_tokens_per_s=b * (new - 1) / dec if dec > 0 else None)
            print(f"decode batch {b}: {b * (new - 1) / dec:,.1f} tok/s (generate {new} in "
                  f"{np.median(t_new):.3f} s, 1 in {np.median(t_1):.3f} s)", flush=True)
    if "capture" in cases or "capture_truncated" in cases:
        ids = _ids(req["capture_tokens"])
        n = int(ids.numel())
        layers = [int(v) for v in req.get("capture_layers", [3, 15])]
        base = model.model
        if "capture" in cases:
            t = _times(lambda: base(input_ids=ids, output_hidden_states=True, use_cache=False),
                       runs, warmup)
            out["capture"] = dict(times_s=t, items=n, warmup=warmup, layers=layers,
                                  blocks=len(base.layers))
            print(f"capture {tuple(ids.shape)} all blocks: {n / np.median(t):,.0f} tok/s",
                  flush=True)
        if "capture_truncated" in cases:
            # the residual stream after block L is hidden_states[L + 1]; cut after block
            # max(L), the last entry would be the final norm's output unless
            # tie_last_hidden_states is off
            keep = max(layers) + 1
            full, tie = base.layers, getattr(base.config, "tie_last_hidden_states", None)
            ref = base(input_ids=ids[:1], output_hidden_states=True,
                       use_cache=False).hidden_states
            try:
                base.layers = torch.nn.ModuleList(list(full)[:keep])
                base.config.tie_last_hidden_states = False
                hs = base(input_ids=ids[:1], output_hidden_states=True,
                          use_cache=False).hidden_states
                same = all(torch.equal(hs[L + 1], ref[L + 1]) for L in layers
                           if L + 1 < len(ref) - 1)
                t = _times(lambda: base(input_ids=ids, output_hidden_states=True,
                                        use_cache=False), runs, warmup)
            finally:
                base.layers = full
                base.config.tie_last_hidden_states = tie
            out["capture_truncated"] = dict(times_s=t, items=n, warmup=warmup, layers=layers,
                                            blocks=keep, equal_to_full=bool(same))
            print(f"capture {tuple(ids.shape)} first {keep} blocks: "
                  f"{n / np.median(t):,.0f} tok/s", flush=True)
    return out


@torch.inference_mode()
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("request")
    p.add_argument("out")
    a = p.parse_args(argv)
    with open(a.request) as f:
        req = json.load(f)
    threads = int(req.get("threads", 2))
    torch.set_num_threads(threads)
    tok, model, load_s = load(req["gguf"])
    out = {
        "versions": peer_versions(("torch", "transformers", "gguf", "accelerate", "numpy")),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "load_s": load_s,
        "dtype": str(next(model.parameters()).dtype),
        "config": {k: getattr(model.config, k, None) for k in (
            "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "vocab_size", "rms_norm_eps", "tie_word_embeddings")},
    }
    if "tokenize" in req:
        ids = [tok(t, add_special_tokens=False).input_ids for t in req["tokenize"]]
        out["tokenize"] = dict(ids=ids, decoded=[tok.decode(i) for i in ids])
    if "logits" in req:
        arrs = {}
        for i, seq in enumerate(req["logits"]["sequences"]):
            arrs[f"logits_{i}"] = model(input_ids=_ids([seq])).logits[0].float().numpy()
        np.savez(req["logits"]["out"], **arrs)
        out["logits"] = dict(n=len(arrs))
    if "generate" in req:
        g = req["generate"]
        comps = []
        for prompt in g["prompts"]:
            ids = _ids([prompt])
            o = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                               do_sample=False, max_new_tokens=int(g.get("max_new_tokens", 16)),
                               pad_token_id=2)
            comps.append(o[0, ids.shape[1]:].tolist())
        out["generate"] = dict(tokens=comps, texts=[tok.decode(c) for c in comps])
    if "activations" in req:
        r = req["activations"]
        hs = model.model(input_ids=_ids(r["tokens"]), output_hidden_states=True,
                         use_cache=False).hidden_states
        want = sorted({int(v) for L in r["layers"] for v in (L, L + 1) if v < len(hs)})
        np.savez(r["out"], **{f"hs_{L}": hs[L].float().numpy() for L in want})
        out["activations"] = dict(saved=want, n_hidden_states=len(hs))
    if "timings" in req:
        out["timings"] = run_timings(model, req["timings"])
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
