"""jaxkit.lm's Llama against a float64 NumPy forward, and its cache, sampling, activations,
splicing, gradients and sharding on tiny random models."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxkit.lm import generate as gen
from jaxkit.lm import model as M
from jaxkit.lm.gguf_file import _hf_rows_to_gguf

CFG = M.LlamaConfig(n_layers=3, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=48,
                    vocab_size=97, rope_base=10000.0, norm_eps=1e-5, context_length=256)


def _weights(cfg, seed=0):
    m = M.Llama(cfg, rngs=nnx.Rngs(seed))
    return {n: np.asarray(a, np.float64) for n, a in m.weights().items()}


def ref_forward(w, cfg, tokens, pad=None, rope_style="adjacent"):
    """Float64 NumPy Llama forward; ``rope_style="half"`` is Hugging Face's rotate-half."""
    tokens = np.asarray(tokens)
    B, S = tokens.shape
    pad = np.zeros(B, int) if pad is None else np.asarray(pad)
    H, K, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.norm_eps) * g

    pos = np.maximum(np.arange(S)[None] - pad[:, None], 0).astype(np.float64)
    inv = cfg.rope_base ** (-np.arange(0, hd, 2) / hd)
    ang = pos[..., None, None] * inv                                   # (B, S, 1, hd/2)

    def rope(x):
        c, s = np.cos(ang), np.sin(ang)
        if rope_style == "adjacent":
            a, b = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2] = a * c - b * s
            out[..., 1::2] = a * s + b * c
            return out
        a, b = x[..., : hd // 2], x[..., hd // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    x = w["embed"][tokens]
    i = np.arange(S)
    allowed = (i[None, :] <= i[:, None])[None] & (i[None, None, :] >= pad[:, None, None])
    for layer in range(cfg.n_layers):
        n = norm(x, w["attn_norm"][layer])
        q = rope((n @ w["wq"][layer]).reshape(B, S, H, hd))
        k = rope((n @ w["wk"][layer]).reshape(B, S, K, hd))
        v = (n @ w["wv"][layer]).reshape(B, S, K, hd)
        k = np.repeat(k, H // K, axis=2)
        v = np.repeat(v, H // K, axis=2)
        s = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(hd)
        s = np.where(allowed[:, None], s, -np.inf)
        s = s - np.where(np.isfinite(s), s, -1e300).max(-1, keepdims=True)
        p = np.exp(s)
        p = np.nan_to_num(p / p.sum(-1, keepdims=True))
        a = np.einsum("bhst,bthd->bshd", p, v).reshape(B, S, H * hd) @ w["wo"][layer]
        h = x + a
        n2 = norm(h, w["mlp_norm"][layer])
        g = n2 @ w["w_gate"][layer]
        x = h + ((g / (1 + np.exp(-g))) * (n2 @ w["w_up"][layer])) @ w["w_down"][layer]
    n = norm(x, w["final_norm"])
    return n @ (w["embed"].T if cfg.tied else w["unembed"])


@pytest.fixture(scope="module")
def tiny():
    w = _weights(CFG)
    return w, M.Llama(CFG, w)


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(lambda m, t: M.forward(m, t)[0])


def test_forward_matches_float64_reference(tiny, fwd):
    w, m = tiny
    toks = np.random.default_rng(0).integers(0, CFG.vocab_size, (2, 11))
    ref = ref_forward(w, CFG, toks)
    got = np.asarray(fwd(m, jnp.asarray(toks)))
    assert got.dtype == np.float32 and got.shape == (2, 11, CFG.vocab_size)
    np.testing.assert_allclose(got, ref, atol=2e-4, rtol=1e-4)


def test_untied_output_projection_matches_reference():
    cfg = M.LlamaConfig(**{**CFG.__dict__, "tied": False, "n_layers": 1})
    w = _weights(cfg, seed=3)
    toks = np.arange(7)[None] % cfg.vocab_size
    got = np.asarray(M.forward(M.Llama(cfg, w), jnp.asarray(toks))[0])
    np.testing.assert_allclose(got, ref_forward(w, cfg, toks), atol=2e-4, rtol=1e-4)


def test_hf_rotate_half_weights_permuted_to_adjacent_pairs_give_the_same_logits():
    """A Hugging Face checkpoint (rotate-half RoPE) read through the row permutation that
    llama.cpp's converter applies equals the original model."""
    cfg = M.LlamaConfig(**{**CFG.__dict__, "n_layers": 2})
    w_hf = _weights(cfg, seed=5)
    toks = np.random.default_rng(1).integers(0, cfg.vocab_size, (1, 9))
    ref = ref_forward(w_hf, cfg, toks, rope_style="half")
    w = dict(w_hf)
    for name, heads in (("wq", cfg.n_heads), ("wk", cfg.n_kv_heads)):   # (L, in, out)
        w[name] = np.stack([_hf_rows_to_gguf(a.T, heads).T for a in w_hf[name]])
    np.testing.assert_allclose(ref_forward(w, cfg, toks), ref, atol=1e-10)
    assert not np.allclose(ref_forward(w_hf, cfg, toks), ref, atol=1e-3)  # the pairing matters
    got = np.asarray(M.forward(M.Llama(cfg, w), jnp.asarray(toks))[0])
    np.testing.assert_allclose(got, ref, atol=2e-4, rtol=1e-4)


def test_left_padding_and_vmap_match_one_row_at_a_time(tiny, fwd):
    w, m = tiny
    rng = np.random.default_rng(2)
    rows = [rng.integers(0, CFG.vocab_size, n) for n in (5, 9, 3)]
    S = 9
    toks = np.zeros((3, S), np.int64)
    pad = np.array([S - len(r) for r in rows])
    for b, r in enumerate(rows):
        toks[b, S - len(r):] = r
    got = np.asarray(jax.jit(lambda m, t, p: M.forward(m, t, pad=p)[0])(
        m, jnp.asarray(toks), jnp.asarray(pad)))
    ref = ref_forward(w, CFG, toks, pad)
    for b, r in enumerate(rows):  # pad slots' own outputs are never used
        np.testing.assert_allclose(got[b, pad[b]:], ref[b, pad[b]:], atol=2e-4, rtol=1e-4)
        one = np.asarray(fwd(m, jnp.asarray(r[None])))[0]
        np.testing.assert_allclose(got[b, pad[b]:], one, atol=1e-4)
    # vmap over single rows equals the batch
    vm = jax.jit(jax.vmap(lambda t: M.forward(m, t[None])[0][0]))(jnp.asarray(toks[:, :]))
    np.testing.assert_allclose(np.asarray(vm)[1], got[1], atol=1e-5)  # row 1 has no padding


def test_prefill_and_decode_equal_the_full_forward(tiny, fwd):
    """Each decode step's logits equal the full forward's at that position (left-padded
    rows of different lengths, cache longer than needed)."""
    _, m = tiny
    rng = np.random.default_rng(4)
    lens = (6, 2)
    P, n_steps, T = 6, 5, 16
    seqs = [rng.integers(0, CFG.vocab_size, n + n_steps) for n in lens]
    toks = np.zeros((2, P), np.int32)
    pad = np.array([P - n for n in lens], np.int32)
    for b, n in enumerate(lens):
        toks[b, P - n:] = seqs[b][:n]
    logits, cache = jax.jit(M.prefill, static_argnums=3)(m, toks, pad, T)
    step = jax.jit(M.decode_step)
    for s in range(n_steps):
        for b, n in enumerate(lens):
            full = np.asarray(fwd(m, jnp.asarray(seqs[b][None, :n + s])))[0, -1]
            np.testing.assert_allclose(np.asarray(logits)[b], full, atol=2e-4, rtol=1e-4)
        tok = np.array([seqs[b][n + s] for b, n in enumerate(lens)], np.int32)
        logits, cache = step(m, cache, tok, jnp.int32(P + s), pad)


def test_sampling_is_reproducible_from_a_key_and_greedy_is_argmax(tiny, fwd):
    _, m = tiny
    run = jax.jit(lambda key, t, p, lim, temp, tp: gen.decode(
        m, key, gen.start(m, key, t, p, lim, temp, tp, jnp.int32(-1), cache_len=32,
                          max_new=8), temp, tp, jnp.int32(-1), jnp.int32(100)))
    toks = jnp.asarray([[5, 6, 7, 8], [0, 1, 2, 3]], jnp.int32)
    pad = jnp.asarray([0, 2], jnp.int32)
    lim = jnp.asarray([8, 5], jnp.int32)
    k1, k2 = jax.random.key(1), jax.random.key(2)
    a = run(k1, toks, pad, lim, jnp.float32(1.0), jnp.float32(0.9))
    b = run(k1, toks, pad, lim, jnp.float32(1.0), jnp.float32(0.9))
    c = run(k2, toks, pad, lim, jnp.float32(1.0), jnp.float32(0.9))
    np.testing.assert_array_equal(a.out, b.out)
    assert not np.array_equal(a.out, c.out)
    np.testing.assert_array_equal(a.n_new, [8, 5])                 # per-row limits
    assert bool(a.finite)
    g = run(k1, toks, pad, lim, jnp.float32(0.0), jnp.float32(1.0))
    seq = [5, 6, 7, 8]
    for _ in range(8):
        seq.append(int(np.argmax(np.asarray(fwd(m, jnp.asarray([seq])))[0, -1])))
    np.testing.assert_array_equal(np.asarray(g.out)[0], seq[4:])
    # a tiny nucleus keeps only the top token: sampling at any temperature is greedy
    h = run(k2, toks, pad, lim, jnp.float32(2.0), jnp.float32(1e-6))
    np.testing.assert_array_equal(np.asarray(h.out), np.asarray(g.out))


def test_sample_top_p_keeps_the_smallest_set_reaching_the_mass():
    logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]], jnp.float32))
    keys = jax.random.split(jax.random.key(0), 4000)
    draws = np.asarray(jax.vmap(lambda k: gen.sample(k, logits, jnp.float32(1.0),
                                                     jnp.float32(0.7)))(keys))[:, 0]
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert freq[2] == 0 and freq[3] == 0                          # outside the 0.8 nucleus
    np.testing.assert_allclose(freq[:2], [0.5 / 0.8, 0.3 / 0.8], atol=0.03)


def test_decode_loop_stops_in_chunks_with_the_same_tokens(tiny):
    """Splitting the loop into calls of 3 steps gives the same draws as one call."""
    _, m = tiny
    key = jax.random.key(7)
    toks = jnp.asarray([[3, 4, 5]], jnp.int32)
    args = (jnp.float32(0.7), jnp.float32(1.0), jnp.int32(-1))
    st = gen.start(m, key, toks, jnp.zeros(1, jnp.int32), jnp.asarray([9]), *args,
                   cache_len=16, max_new=9)
    one = gen.decode(m, key, st, *args, jnp.int32(100))
    dec = jax.jit(gen.decode)
    s = st
    while not bool(s.done.all()):
        s = dec(m, key, s, *args, jnp.int32(3))
    np.testing.assert_array_equal(np.asarray(s.out), np.asarray(one.out))


def test_activations_and_splicing(tiny):
    _, m = tiny
    toks = jnp.asarray(np.random.default_rng(3).integers(0, CFG.vocab_size, (2, 7)))
    logits, acts = M.forward(m, toks, capture={"resid": (0, 2), "attn": (1,), "mlp": (1,)})
    _, part = M.forward(m, toks, capture={"resid": (1,)}, stop_layer=2, logits=False)
    _, full = M.forward(m, toks, capture={"resid": (1,), "attn": (2,), "mlp": (2,)})
    # residual after block 1 = after block 0 + what block 1 adds
    np.testing.assert_allclose(part["resid.1"], acts["resid.0"] + acts["attn.1"] + acts["mlp.1"],
                               atol=1e-5)
    np.testing.assert_allclose(full["resid.1"], part["resid.1"], atol=1e-6)
    np.testing.assert_allclose(acts["resid.2"], full["resid.1"] + full["attn.2"] + full["mlp.2"],
                               atol=1e-5)
    # the last residual stream gives the logits
    np.testing.assert_allclose(M.unembed(m, acts["resid.2"]), logits, atol=1e-5)
    same, _ = M.forward(m, toks, replace={1: lambda x: x})
    np.testing.assert_allclose(same, logits, atol=1e-6)
    zeroed, cap = M.forward(m, toks, replace={1: jnp.zeros_like}, capture={"resid": (1,)})
    assert float(jnp.abs(cap["resid.1"]).max()) == 0.0
    # zeroing the stream after the last block leaves only the norm of zero: uniform logits
    flat, _ = M.forward(m, toks, replace={2: jnp.zeros_like})
    np.testing.assert_allclose(flat, 0.0, atol=1e-6)
    assert not np.allclose(zeroed, logits, atol=1e-2)


def test_gradient_through_forward_matches_finite_differences(tiny):
    _, m = tiny
    toks = jnp.asarray([[1, 2, 3, 4, 5]])

    def loss(wo):
        mm = M.Llama(CFG, {**m.weights(), "wo": wo})
        lg = M.forward(mm, toks)[0]
        return jax.nn.logsumexp(lg[0, -1]) - lg[0, -1, 7]

    wo = m.weights()["wo"]
    g = jax.grad(loss)(wo)
    assert bool(jnp.all(jnp.isfinite(g)))
    d = jax.random.normal(jax.random.key(0), wo.shape) * 1e-2
    fd = (loss(wo + d) - loss(wo - d)) / 2
    np.testing.assert_allclose(float(jnp.vdot(g, d)), float(fd), rtol=2e-2, atol=1e-5)


def test_bfloat16_weights_track_float32(tiny):
    w, m = tiny
    toks = jnp.asarray([[1, 2, 3, 4, 5, 6]])
    lo = M.forward(M.Llama(CFG, w, dtype=jnp.bfloat16), toks)[0]
    hi = M.forward(m, toks)[0]
    assert lo.dtype == jnp.float32
    np.testing.assert_allclose(lo, hi, atol=0.1)
    assert (np.argmax(lo, -1) == np.argmax(hi, -1)).mean() >= 0.8


def test_config_and_weight_shapes_are_checked():
    with pytest.raises(ValueError, match="n_kv_heads"):
        M.LlamaConfig(2, 16, 3, 2, 8, 8, 10)
    w = _weights(CFG)
    w["wq"] = w["wq"][:, :, :-1]
    with pytest.raises(ValueError, match="'wq' has shape"):
        M.Llama(CFG, w)
    m = M.Llama(CFG, _weights(CFG))
    with pytest.raises(ValueError, match="layer 5 is outside"):
        M.forward(m, jnp.zeros((1, 3), jnp.int32), capture={"resid": (5,)})
    with pytest.raises(ValueError, match="unknown site"):
        M.forward(m, jnp.zeros((1, 3), jnp.int32), capture={"mlp_in": (0,)})


def test_eight_devices_equal_one(tiny):
    """Weights split over a model axis and batches over a data axis give the logits and
    the greedy tokens of one device."""
    from jaxkit.distributed import make_mesh
    from jaxkit.lm.language_model import LanguageModel

    if jax.device_count() < 8:
        pytest.skip("needs 8 (simulated) devices")
    w, _ = tiny

    class _Tok:  # the minimum LanguageModel.generate needs from a tokenizer
        pad_id, eos_id = 0, -1

        @staticmethod
        def decode(ids):
            return " ".join(map(str, ids))

    one = LanguageModel(M.Llama(CFG, w), _Tok())
    many = LanguageModel(M.Llama(CFG, w), _Tok()).shard(
        make_mesh({"data": 4, "model": 2}))
    assert len(many.module.blocks[0].w_gate[...].sharding.device_set) == 8
    toks = np.random.default_rng(9).integers(0, CFG.vocab_size, (8, 12))
    np.testing.assert_allclose(np.asarray(many.logits(toks)), np.asarray(one.logits(toks)),
                               atol=2e-5)
    prompts = [list(r[: 4 + b % 5]) for b, r in enumerate(toks)]
    a = one.generate(prompts, max_new_tokens=6)
    b = many.generate(prompts, max_new_tokens=6)
    assert a.tokens == b.tokens
