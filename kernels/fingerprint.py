"""Binary molecular fingerprints: the Tanimoto similarity matrix and nearest neighbours.

For binary fingerprints :math:`a, b \\in \\{0, 1\\}^d` the Tanimoto (Jaccard) similarity is

.. math::

    T(a, b) = \\frac{|a \\wedge b|}{|a| + |b| - |a \\wedge b|}

with :math:`T = 0` when both are empty (RDKit's convention,
``DataStructs.TanimotoSimilarity``). For whole sets :math:`A \\in \\{0,1\\}^{n \\times d}`,
:math:`B \\in \\{0,1\\}^{m \\times d}` the intersections are one matrix product,
:math:`I = A B^\\top`, and the union follows from the row counts, so the
:math:`n \\times m` matrix is one batched kernel (:func:`tanimoto_matrix`). The product is
exact in float32 for ``d < 2**24``. :func:`tanimoto_matrix_packed` computes the same
matrix from bit-packed ``uint32`` words with population counts (32x less memory for
the fingerprints), in row blocks.

:func:`nearest_neighbour` picks, for each query, the most similar candidate under a
mask (the 1-NN-by-Tanimoto baseline of Janela & Bajorath, Nat. Mach. Intell. 2022:
predict a test molecule's label by its most similar training molecule's label);
:func:`nearest_neighbour_predict` returns that label.

Reference: D. Rogers and M. Hahn, "Extended-connectivity fingerprints", J. Chem. Inf.
Model. 50:742 (2010); P. Willett, "Similarity-based virtual screening using 2D
fingerprints", Drug Discov. Today 11:1046 (2006).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Num, UInt32

from .checks import fail

__all__ = ["tanimoto_matrix", "tanimoto_matrix_packed", "pack_bits", "Neighbour",
           "nearest_neighbour", "nearest_neighbour_predict"]


def _check_pair(a, b, name_a: str, name_b: str):
    for x, name in ((a, name_a), (b, name_b)):
        if not hasattr(x, "ndim") or x.ndim != 2:
            raise ValueError(f"`{name}` must be a 2-D array (n_molecules, n_bits); got shape "
                             f"{getattr(x, 'shape', None)}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"`{name_a}` and `{name_b}` must have the same number of bits; got "
                         f"{a.shape[1]} and {b.shape[1]}")


def _as_bits(x, name: str) -> Float[Array, "n d"]:
    """``x`` as float32 0/1, with a check that every entry is 0 or 1."""
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        return x.astype(jnp.float32)
    x = fail(x, ~jnp.all((x == 0) | (x == 1)),
             f"`{name}` must be a binary fingerprint (every entry 0 or 1)")
    return x.astype(jnp.float32)


def _from_counts(inter, ca, cb) -> Float[Array, "n m"]:
    union = ca[:, None] + cb[None, :] - inter
    return jnp.where(union > 0, inter / jnp.where(union > 0, union, 1.0), 0.0)


def tanimoto_matrix(a: Num[Array, "n d"], b: Num[Array, "m d"] | None = None
                    ) -> Float[Array, "n m"]:
    """All pairwise Tanimoto similarities of two sets of binary fingerprints.

    :math:`S_{ij} = I_{ij} / (|a_i| + |b_j| - I_{ij})`, :math:`I = A B^\\top` (module
    docstring); 0 where both fingerprints are empty.

    Differentiable: no: binary fingerprints (every entry checked to be 0 or 1).

    Args:
        a: ``(n, d)`` fingerprints, entries 0/1 (bool, integer or float).
        b: ``(m, d)`` fingerprints; ``None`` for ``a`` against itself.

    Returns:
        ``(n, m)`` float32 similarities in [0, 1].
    """
    b_ = a if b is None else b
    _check_pair(a, b_, "a", "a" if b is None else "b")
    fa = _as_bits(a, "a")
    fb = fa if b is None else _as_bits(b, "b")
    inter = jnp.matmul(fa, fb.T, precision=jax.lax.Precision.HIGHEST)
    return _from_counts(inter, jnp.sum(fa, axis=1), jnp.sum(fb, axis=1))


def pack_bits(x: Num[Array, "n d"]) -> UInt32[Array, "n w"]:
    """Pack 0/1 fingerprints into ``uint32`` words (bit ``k`` of word ``j`` is column
    ``32 j + k``; the last word zero-padded).

    Differentiable: no: integer output.

    Args:
        x: ``(n, d)`` fingerprints, entries 0/1.

    Returns:
        ``(n, ceil(d / 32))`` uint32.
    """
    if not hasattr(x, "ndim") or x.ndim != 2:
        raise ValueError(f"`x` must be a 2-D array (n_molecules, n_bits); got shape "
                         f"{getattr(x, 'shape', None)}")
    bits = _as_bits(x, "x").astype(jnp.uint32)
    n, d = bits.shape
    w = -(-d // 32)
    bits = jnp.pad(bits, ((0, 0), (0, 32 * w - d))).reshape(n, w, 32)
    return jnp.sum(bits << jnp.arange(32, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)


def tanimoto_matrix_packed(a: UInt32[Array, "n w"], b: UInt32[Array, "m w"] | None = None,
                           *, block_rows: int = 64) -> Float[Array, "n m"]:
    """:func:`tanimoto_matrix` from bit-packed fingerprints (:func:`pack_bits`):
    :math:`I_{ij} = \\sum_w \\mathrm{popcount}(a_{iw} \\wedge b_{jw})`, computed
    ``block_rows`` rows of ``a`` at a time (a ``lax.map`` over row blocks, so memory is
    ``block_rows x m x w`` words).

    Differentiable: no: integer (uint32) inputs.

    Args:
        a: ``(n, w)`` uint32 words.
        b: ``(m, w)`` uint32 words; ``None`` for ``a`` against itself.
        block_rows: rows of ``a`` per block (static; ``n`` is padded to a multiple).

    Returns:
        ``(n, m)`` float32 similarities.
    """
    b_ = a if b is None else b
    _check_pair(a, b_, "a", "a" if b is None else "b")
    for x, name in ((a, "a"), (b_, "b")):
        if x.dtype != jnp.uint32:
            raise ValueError(f"`{name}` must be uint32 words from pack_bits; got {x.dtype}")
    if int(block_rows) < 1:
        raise ValueError(f"`block_rows` must be a positive integer; got {block_rows}")
    n = a.shape[0]
    blocks = -(-n // block_rows)
    ap = jnp.pad(a, ((0, blocks * block_rows - n), (0, 0))).reshape(blocks, block_rows, -1)
    cb = jnp.sum(jax.lax.population_count(b_), axis=1, dtype=jnp.int32).astype(jnp.float32)

    def block(rows):
        inter = jnp.sum(jax.lax.population_count(rows[:, None, :] & b_[None, :, :]),
                        axis=-1, dtype=jnp.int32).astype(jnp.float32)
        ca = jnp.sum(jax.lax.population_count(rows), axis=1, dtype=jnp.int32)
        return _from_counts(inter, ca.astype(jnp.float32), cb)

    return jax.lax.map(block, ap).reshape(blocks * block_rows, -1)[:n]


class Neighbour(NamedTuple):
    """The nearest candidate of each query: ``index`` (int32, into the candidates) and
    its ``similarity``; ``valid`` is False for a query with no candidate (index 0,
    similarity nan there)."""

    index: Int[Array, " n"]
    similarity: Float[Array, " n"]
    valid: Bool[Array, " n"]


def nearest_neighbour(sim: Float[Array, "n m"], candidates: Bool[Array, " m"] | None = None,
                      *, checked: bool = True) -> Neighbour:
    """The most similar candidate of each query row of ``sim`` (first index on ties).

    Differentiable: yes, in sim (the chosen neighbour's similarity; the index is an integer).

    Args:
        sim: ``(n, m)`` similarities (larger is more similar), e.g.
            :func:`tanimoto_matrix` of queries against a reference set.
        candidates: ``(m,)`` mask of the reference rows that may be chosen (the training
            molecules); ``None``: all. An all-False mask is an error naming it.
        checked: run the value checks (empty mask, NaN similarities); ``False`` leaves
            them to the caller (inside a loop body, where a run-time check costs a host
            callback per iteration); an empty mask then gives ``valid = False``.

    Returns:
        A :class:`Neighbour`.
    """
    if not hasattr(sim, "ndim") or sim.ndim != 2:
        raise ValueError(f"`sim` must be a 2-D (queries, candidates) array; got shape "
                         f"{getattr(sim, 'shape', None)}")
    m = sim.shape[1]
    if candidates is None:
        candidates = jnp.ones((m,), bool)
    candidates = jnp.asarray(candidates)
    if candidates.shape != (m,):
        raise ValueError(f"`candidates` must have shape ({m},) (one flag per column of "
                         f"`sim`); got {candidates.shape}")
    if checked:
        candidates = fail(candidates, ~jnp.any(candidates),
                          "`candidates` selects no reference molecule (empty training set)")
        sim = fail(sim, jnp.any(jnp.isnan(sim)), "`sim` contains NaN values")
    masked = jnp.where(candidates[None, :], sim, -jnp.inf)
    idx = jnp.argmax(masked, axis=1).astype(jnp.int32)
    best = jnp.take_along_axis(masked, idx[:, None], axis=1)[:, 0]
    valid = jnp.broadcast_to(jnp.any(candidates), idx.shape)
    return Neighbour(idx, jnp.where(valid, best, jnp.nan), valid)


def nearest_neighbour_predict(sim: Float[Array, "n m"], y: Float[Array, " m"],
                              candidates: Bool[Array, " m"] | None = None, *,
                              checked: bool = True) -> Float[Array, " n"]:
    """The label of each query's most similar candidate (1-NN regression by similarity).

    Differentiable: yes, in y (piecewise constant in sim, which picks the neighbour).

    Args:
        sim: ``(n, m)`` similarities of the queries to the reference set.
        y: ``(m,)`` labels of the reference set (non-candidate entries are ignored).
        candidates: ``(m,)`` mask of the reference rows that may be chosen.
        checked: as :func:`nearest_neighbour`.

    Returns:
        ``(n,)`` predictions, ``y[nearest]`` (NaN where no candidate exists).
    """
    y = jnp.asarray(y)
    if y.shape != (sim.shape[1],):
        raise ValueError(f"`y` must have shape ({sim.shape[1]},) (one label per column of "
                         f"`sim`); got {y.shape}")
    nb = nearest_neighbour(sim, candidates, checked=checked)
    return jnp.where(nb.valid, y[nb.index], jnp.nan)
