"""A tiny random Llama written to a GGUF file, for tests of :mod:`jaxkit.lm` that must not
load the real model.

:func:`write_tiny_gguf` writes a complete llama-architecture GGUF file with the ``gguf``
package's ``GGUFWriter``: every hyperparameter field :mod:`jaxkit.lm.gguf_file` reads, a
byte-level BPE vocabulary (three control tokens, the 256 byte tokens in GPT-2's byte-to-unicode
alphabet, then one token per merge), a ChatML chat template, and random weights (float32;
any tensor named in ``q8_0`` is stored block-quantized as Q8_0, which exercises
dequantization). It returns the path as a :class:`TinyGGUF` (a ``pathlib.Path``) that also
carries what was written: ``.weights`` (NumPy arrays in GGUF layout, i.e. keyed by GGUF tensor
name, matrices ``(out, in)``; Q8_0 tensors as the values the file dequantizes to),
``.hparams`` and ``.tokenizer``. :func:`tiny_gguf_weights` gives the same record from a path
written earlier in the process.

    >>> path = write_tiny_gguf(tmp_path / "tiny.gguf")
    >>> model = jaxkit.lm.load(path, use_cache=False)
    >>> path.weights["blk.0.attn_q.weight"].shape        # (n_heads * head_dim, d_model)
    (32, 32)

Token ids: 0 ``<|endoftext|>``, 1 ``<|im_start|>`` (BOS), 2 ``<|im_end|>`` (EOS and pad), then
bytes 0..255 at ids 3..258, then the merges (:data:`MERGES`) in order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_tiny_gguf", "tiny_gguf_weights", "TinyGGUF", "CHATML_TEMPLATE",
           "SPECIAL_TOKENS", "MERGES", "byte_tokens"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# SmolLM2's template (ChatML with a default system prompt)
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# a few byte-level merges (each one's parts are in the vocabulary before it); "Ġ" is space
MERGES = (
    "Ġ t", "h e", "Ġ a", "i n", "e r", "o n", "r e", "Ġt he", "a t", "e n", "Ġ s", "o u",
    "Ġ o", "i s", "Ġ c", "e s", "Ġ w", "a n", "Ġ f", "o r", "l l", "Ġ p", "Ġ i", "a l",
    "s t", "Ġ m", "Ġa n", "Ġan d", "i t", "Ġo f", "Ġ h", "Ġ d", "a s", "Ġ b", "u s", "Ġi s",
    "Ċ Ċ", "y s", "ys t", "e m", "yst em",
)

_LAYER = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
          "ffn_up", "ffn_down")

_WRITTEN: dict[str, TinyGGUF] = {}


def byte_tokens() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


class TinyGGUF(type(Path())):  # PosixPath / WindowsPath, whichever Path() is here
    """The written file's path, with what was written: ``weights`` (GGUF layout),
    ``hparams`` (as :class:`jaxkit.lm.gguf_file.RawModel` names them) and ``tokenizer``
    (``tokens``, ``token_types``, ``merges``, ``bos_id``, ``eos_id``, ``pad_id``,
    ``chat_template``, ``pre``)."""

    weights: dict[str, np.ndarray]
    hparams: dict[str, Any]
    tokenizer: dict[str, Any]


def _vocab() -> tuple[list[str], list[int]]:
    tokens = list(SPECIAL_TOKENS) + byte_tokens()
    types = [3] * len(SPECIAL_TOKENS) + [1] * 256
    have = set(tokens)
    for m in MERGES:
        a, b = m.split(" ")
        assert a in have and b in have, m
        tokens.append(a + b)
        types.append(1)
        have.add(a + b)
    return tokens, types


def write_tiny_gguf(
    path: str | os.PathLike,
    *,
    seed: int = 0,
    n_layers: int = 2,
    d_model: int = 32,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    d_ff: int = 64,
    context_length: int = 512,
    rope_base: float = 10000.0,
    norm_eps: float = 1e-5,
    tied: bool = True,
    q8_0: tuple[str, ...] | list[str] = (),
    chat_template: str | None = CHATML_TEMPLATE,
    scale: float = 1.0,
    embed_std: float = 0.3,
) -> TinyGGUF:
    """Write a tiny random llama GGUF file.

    Args:
      path: the file to write (its folder must exist).
      seed: NumPy seed of the weights.
      n_layers, d_model, n_heads, n_kv_heads, d_ff: the architecture (``head_dim =
        d_model // n_heads``, even).
      context_length, rope_base, norm_eps: the matching GGUF fields.
      tied: without ``output.weight`` (the output projection is the embedding).
      q8_0: GGUF tensor names stored as Q8_0 (their row length must be a multiple of 32),
        e.g. ``("blk.0.ffn_down.weight",)``.
      chat_template: ``tokenizer.chat_template`` (None leaves the field out).
      scale: multiplies the random matrices (``N(0, scale^2 / fan_in)`` entries).
      embed_std: the embeddings' standard deviation (with tied embeddings a large one makes
        the model repeat its last token; 0.3 gives next-token entropies near 4.4 nats of
        the 5.7 possible, so sampling with different keys differs).

    Returns:
      :class:`TinyGGUF`: the path, with ``.weights`` / ``.hparams`` / ``.tokenizer``.
    """
    import gguf
    from gguf.quants import dequantize, quantize

    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError("d_model must split into n_heads heads of even size")
    path = Path(path)
    rng = np.random.default_rng(seed)
    tokens, types = _vocab()
    V = len(tokens)
    hd = d_model // n_heads

    def mat(out: int, inp: int) -> np.ndarray:
        return (scale * rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "token_embd.weight": (embed_std * rng.standard_normal((V, d_model))).astype(np.float32),
        "output_norm.weight": norm(d_model),
    }
    if not tied:
        w["output.weight"] = mat(V, d_model)
    for i in range(n_layers):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm(d_model)
        w[p + "attn_q.weight"] = mat(n_heads * hd, d_model)
        w[p + "attn_k.weight"] = mat(n_kv_heads * hd, d_model)
        w[p + "attn_v.weight"] = mat(n_kv_heads * hd, d_model)
        w[p + "attn_output.weight"] = mat(d_model, n_heads * hd)
        w[p + "ffn_norm.weight"] = norm(d_model)
        w[p + "ffn_gate.weight"] = mat(d_ff, d_model)
        w[p + "ffn_up.weight"] = mat(d_ff, d_model)
        w[p + "ffn_down.weight"] = mat(d_model, d_ff)
    for name in q8_0:
        if name not in w:
            raise ValueError(f"q8_0: no tensor {name!r}")

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-random-llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(d_model)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(d_ff)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_kv_heads)
    writer.add_rope_dimension_count(hd)
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(norm_eps)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8_0 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(list(MERGES))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for name in _tensor_order(n_layers, tied):
        arr = w[name]
        if name in q8_0:
            q = quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w[name] = np.asarray(dequantize(q, gguf.GGMLQuantizationType.Q8_0),
                                 np.float32).reshape(arr.shape)
            writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, arr)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    out = TinyGGUF(path)
    out.weights = w
    out.hparams = {"n_layers": n_layers, "d_model": d_model, "n_heads": n_heads,
                   "n_kv_heads": n_kv_heads, "head_dim": hd, "d_ff": d_ff, "vocab_size": V,
                   "rope_base": float(rope_base), "norm_eps": float(norm_eps),
                   "context_length": context_length}
    out.tokenizer = {"tokens": tokens, "token_types": types, "merges": list(MERGES),
                     "bos_id": 1, "eos_id": 2, "pad_id": 2, "chat_template": chat_template,
                     "pre": "smollm", "add_bos": False}
    _WRITTEN[str(path.resolve())] = out
    return out


def _tensor_order(n_layers: int, tied: bool) -> list[str]:
    names = ["token_embd.weight", "output_norm.weight"] + ([] if tied else ["output.weight"])
    for i in range(n_layers):
        names += [f"blk.{i}.{t}.weight" for t in _LAYER]
    return names


def tiny_gguf_weights(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The weights (GGUF layout) :func:`write_tiny_gguf` wrote to ``path`` in this process."""
    return _WRITTEN[str(Path(path).resolve())].weights
