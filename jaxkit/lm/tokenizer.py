"""The byte-level BPE tokenizer and chat template stored in a model file.

The BPE itself is Hugging Face ``tokenizers`` (Rust), rebuilt from the vocabulary and merges
the file holds, with the pre-tokenizer GGUF names in ``tokenizer.ggml.pre``: for SmolLM2
(``smollm``) single digits, then GPT-2's byte-level split without a prefix space. Control
tokens (``<|im_start|>``, ...) are special tokens: a chat prompt's markers encode to their
ids, and :meth:`Tokenizer.decode` drops them unless asked. The chat template (Jinja) is
rendered in Jinja's immutable sandbox, as ``transformers`` renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Tokenizer"]

_PRE_DIGITS = {"smollm", "starcoder", "llama3", "llama-bpe", "qwen2", "deepseek-llm"}


class Tokenizer:
    """Byte-level BPE from a model file's vocabulary and merges.

    Args:
      fields: the ``tokenizer`` dict of :class:`jaxkit.lm.gguf_file.RawModel`.

    Attributes: ``vocab_size``, ``bos_id``, ``eos_id``, ``pad_id``, ``chat_template``,
    ``special_ids`` (the control tokens' ids).
    """

    def __init__(self, fields: dict[str, Any]):
        from tokenizers import AddedToken, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as _HFTokenizer

        tokens: list[str] = fields["tokens"]
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = [tuple(m.split(" ", 1)) for m in fields["merges"]]
        bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
        tok = _HFTokenizer(bpe)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if fields.get("pre", "default") in _PRE_DIGITS:
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
        types = fields.get("token_types") or [1] * len(tokens)
        special = [tokens[i] for i, t in enumerate(types) if t == 3]
        user = [tokens[i] for i, t in enumerate(types) if t == 4]
        if special:
            tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                                    for s in special])
        if user:
            tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in user])
        self._tok = tok
        self.vocab_size = len(tokens)
        self.bos_id = fields.get("bos_id")
        self.eos_id = fields.get("eos_id")
        self.pad_id = fields.get("pad_id") if fields.get("pad_id") is not None else self.eos_id
        self.add_bos = bool(fields.get("add_bos", False))
        self.chat_template = fields.get("chat_template")
        self.special_ids = frozenset(i for i, t in enumerate(types) if t == 3)
        self._tokens = tokens

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, eos_id={self.eos_id})"

    def encode(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """Token ids of ``text`` (special-token markers in the text become their ids).

        Args:
          text: the string.
          add_bos: prepend the BOS id (default: as the file says, usually not).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = self._tok.encode(text, add_special_tokens=False).ids
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids = [int(self.bos_id), *ids]
        return ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` of each text (in parallel threads inside ``tokenizers``)."""
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """The text of ``ids`` (control tokens dropped unless ``skip_special=False``)."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids: {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        return self._tok.decode(ids, skip_special_tokens=skip_special)

    def token(self, i: int) -> str:
        """The vocabulary entry of id ``i`` (byte-level form)."""
        return self._tokens[int(i)]

    def chat_prompt(self, messages: Sequence[dict[str, str]], *,
                    add_generation_prompt: bool = True) -> str:
        """The prompt text the file's chat template makes of ``messages``.

        Args:
          messages: ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``.
          add_generation_prompt: end with the assistant header, so the model answers.
        """
        if not self.chat_template:
            raise ValueError("this model file has no chat template (tokenizer.chat_template)")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) \
                    or not isinstance(m.get("content"), str):
                raise ValueError(f"messages[{i}] must be a dict with str 'role' and 'content'")
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(msg):
            raise TemplateError(msg)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        tmpl = env.from_string(self.chat_template)
        bos = self._tokens[self.bos_id] if self.bos_id is not None else ""
        eos = self._tokens[self.eos_id] if self.eos_id is not None else ""
        return tmpl.render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                           bos_token=bos, eos_token=eos)
