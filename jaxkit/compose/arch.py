"""Architectures as strings over {A, M, S, D}, their validation, extrapolation and
mutation.

An :class:`Arch` is a layer string, one letter per layer -- ``A`` causal self-attention,
``M`` an MLP, ``S`` a Mamba-1 (selective state-space) mixer, ``D`` a Mamba-2 mixer (the
state-space dual, chunked SSD) -- plus the width, heads, state size and context. Every
layer is a pre-normalised residual block ``x + f(norm(x))``
(:mod:`jaxkit.compose.model`). Composer (Acun et al. 2025) and AIRA-Compose search this
space; the extrapolation operators scale a small find up:

* :func:`stack`: repeat the whole string until it reaches ``depth`` layers (the last
  copy cut short);
* :func:`stretch`: repeat each layer ``factor`` times in place ("AMS" -> "AAMMSS").

The mutation operators of :data:`MUTATIONS` (for a search alphabet:
:func:`mutation_ops`) are the arms of the bandit search (:mod:`jaxkit.compose.search`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

__all__ = ["LETTERS", "KIND", "Arch", "parse", "stack", "stretch", "MUTATIONS", "mutate",
           "mutation_ops", "llama_style", "nemotron_style", "random_string", "letters_of"]

LETTERS = "AMSD"
KIND = {c: i for i, c in enumerate(LETTERS)}  # A=0, M=1, S=2, D=3
IDENTITY = len(LETTERS)  # the identity (padding) kind of a supernet over all letters


def letters_of(strings) -> str:
    """The letters used by ``strings``, in :data:`LETTERS` order (a supernet's blocks)."""
    used = set("".join(strings))
    return "".join(c for c in LETTERS if c in used)


@dataclass(frozen=True)
class Arch:
    """A composed language model.

    Attributes:
      layers: the layer string over {A, M, S, D}.
      width: residual width ``D``.
      heads: attention heads (``width % heads == 0``).
      d_state: Mamba (1 and 2) state size ``N``.
      context: the longest sequence the model takes (learned positions).
      mlp_ratio: MLP hidden width / ``D``.
      expand: Mamba inner width / ``D``.
      d_conv: Mamba convolution width.
      vocab: vocabulary size (256 bytes).
      ssd_head_dim: channels per Mamba-2 head ``P`` (``expand * width % P == 0`` when
        the string has a ``D``).
      ssd_chunk: Mamba-2 SSD chunk length ``Q``.
    """

    layers: str
    width: int = 32
    heads: int = 2
    d_state: int = 8
    context: int = 32
    mlp_ratio: int = 4
    expand: int = 2
    d_conv: int = 4
    vocab: int = 256
    ssd_head_dim: int = 16
    ssd_chunk: int = 32

    def __post_init__(self):
        if not isinstance(self.layers, str) or not self.layers:
            raise ValueError(f"`layers` must be a non-empty string over {{A, M, S, D}}; got "
                             f"{self.layers!r}")
        bad = sorted(set(self.layers) - set(LETTERS))
        if bad:
            raise ValueError(f"`layers` {self.layers!r} has unknown letter(s) {bad}: use A "
                             f"(attention), M (MLP), S (Mamba-1) or D (Mamba-2)")
        for f in ("width", "heads", "d_state", "context", "mlp_ratio", "expand", "d_conv",
                  "vocab", "ssd_head_dim", "ssd_chunk"):
            v = getattr(self, f)
            if not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"`{f}` must be an int >= 1; got {v!r}")
        if self.width % self.heads:
            raise ValueError(f"`width` ({self.width}) must be divisible by `heads` "
                             f"({self.heads})")
        if "D" in self.layers and (self.expand * self.width) % self.ssd_head_dim:
            raise ValueError(f"`ssd_head_dim` ({self.ssd_head_dim}) must divide the Mamba-2 "
                             f"inner width expand * width = {self.expand * self.width}")

    @property
    def depth(self) -> int:
        return len(self.layers)

    @property
    def kinds(self) -> tuple[int, ...]:
        """The layer kinds as ints (A=0, M=1, S=2, D=3)."""
        return tuple(KIND[c] for c in self.layers)

    def with_layers(self, layers: str) -> Arch:
        return dataclasses.replace(self, layers=layers)

    def block_params(self, letter: str) -> int:
        """Parameters of one block of kind ``letter`` (with its norm)."""
        d = self.width
        if letter == "A":
            return 4 * d * d + d
        if letter == "M":
            return 2 * self.mlp_ratio * d * d + d
        if letter == "D":
            e, n = self.expand * d, self.d_state
            h = max(1, e // self.ssd_head_dim)
            c = e + 2 * n
            return d * (2 * e + 2 * n + h) + self.d_conv * c + c + 3 * h + e + e * d + d
        e, r = self.expand * d, -(-d // 16)
        return (d * 2 * e + self.d_conv * e + e + e * (r + 2 * self.d_state) + r * e + e
                + e * self.d_state + e + e * d + d)

    def n_params(self, *, embedding: bool = False) -> int:
        """Parameter count: the blocks and the final norm (``embedding``: plus the tied
        byte embedding and the positions)."""
        n = sum(self.block_params(c) for c in self.layers) + self.width
        return n + (self.vocab + self.context) * self.width if embedding else n

    def flops_per_token(self) -> float:
        """Training FLOPs per token, ``6 N`` plus attention's ``12 D T`` per A layer
        (Kaplan et al. 2020), N counting the output projection onto the bytes."""
        n = self.n_params() + self.vocab * self.width
        return 6.0 * n + 12.0 * self.width * self.context * self.layers.count("A")


def parse(layers: str, **kw) -> Arch:
    """``Arch(layers.strip().upper(), **kw)``; errors name the argument."""
    if not isinstance(layers, str):
        raise ValueError(f"`layers` must be a string; got {type(layers).__name__}")
    return Arch(layers.strip().upper(), **kw)


def stack(layers: str, depth: int) -> str:
    """Repeat ``layers`` to ``depth`` letters (the last copy cut short)."""
    if depth < 1:
        raise ValueError(f"`depth` must be >= 1; got {depth}")
    return (layers * (-(-depth // len(layers))))[:depth]


def stretch(layers: str, factor: int) -> str:
    """Repeat each letter ``factor`` times in place."""
    if factor < 1:
        raise ValueError(f"`factor` must be >= 1; got {factor}")
    return "".join(c * factor for c in layers)


def llama_style(depth: int) -> str:
    """A Transformer (Llama 3.2) as a string: attention and MLP alternating, "AMAM..."."""
    return stack("AM", depth)


def nemotron_style(depth: int, mamba: str = "S") -> str:
    """A Nemotron-H-like hybrid: Mamba (``mamba``: "S" Mamba-1, "D" Mamba-2 as in
    Nemotron-H) and MLP alternating, "SMSM...", with about one mixer in four (at least
    one) an attention layer, spread evenly."""
    if mamba not in ("S", "D"):
        raise ValueError(f"`mamba` must be 'S' or 'D'; got {mamba!r}")
    s = list(stack(mamba + "M", depth))
    mixers = [i for i, c in enumerate(s) if c == mamba] or [0]
    n_attn = max(1, len(mixers) // 4)
    for j in range(n_attn):
        s[mixers[(2 * j + 1) * len(mixers) // (2 * n_attn)]] = "A"
    return "".join(s)


def random_string(rng: np.random.Generator, depth: int, alphabet: str = LETTERS) -> str:
    return "".join(rng.choice(list(alphabet), size=depth))


def _point(letter):
    def op(rng, s, alphabet):
        if letter not in alphabet:
            letter_ = rng.choice(list(alphabet))
        else:
            letter_ = letter
        i = int(rng.integers(len(s)))
        return s[:i] + letter_ + s[i + 1:]
    return op


def _swap(rng, s, alphabet):
    if len(s) < 2:
        return s
    i = int(rng.integers(len(s) - 1))
    return s[:i] + s[i + 1] + s[i] + s[i + 2:]


def _copy(rng, s, alphabet):
    """Duplicate one layer over its right neighbour (a local 'stretch')."""
    if len(s) < 2:
        return s
    i = int(rng.integers(len(s) - 1))
    return s[:i + 1] + s[i] + s[i + 2:]


def _block(rng, s, alphabet):
    """Re-tile: copy a prefix block of 2-4 layers over the whole string (a 'stack')."""
    k = int(rng.integers(2, min(4, len(s)) + 1)) if len(s) >= 2 else 1
    return stack(s[:k], len(s))


# The mutation operators (the bandit's arms): point mutations to each letter, a swap of
# neighbours, a local copy, a re-tiling by a prefix block.
MUTATIONS = {**{f"to-{c}": _point(c) for c in LETTERS}, "swap": _swap, "copy": _copy,
             "tile": _block}


def mutation_ops(alphabet: str = LETTERS) -> list[str]:
    """The operators of a search over ``alphabet``: a point mutation to each of its
    letters, then the swap, copy and tile operators."""
    bad = sorted(set(alphabet) - set(LETTERS))
    if not alphabet or bad:
        raise ValueError(f"`alphabet` must be a non-empty string over {LETTERS}; got "
                         f"{alphabet!r}")
    return [f"to-{c}" for c in LETTERS if c in alphabet] + ["swap", "copy", "tile"]


def mutate(rng: np.random.Generator, s: str, op: str, alphabet: str = LETTERS) -> str:
    """Apply mutation ``op`` (a key of :data:`MUTATIONS`) to ``s``; letters outside
    ``alphabet`` are never introduced."""
    if op not in MUTATIONS:
        raise ValueError(f"`op` must be one of {list(MUTATIONS)}; got {op!r}")
    return MUTATIONS[op](rng, s, alphabet)
