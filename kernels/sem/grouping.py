"""Apply one of several static branches per batch element without computing every branch
for every element (what ``vmap`` of ``lax.switch`` does: it becomes a select).

:func:`grouped_switch` computes ``out[b] = branches[codes[b]](inputs[b])``. The batch is
sorted by code (stable) and cut into *pure chunks* of ``chunk`` elements that each hold
one code only: code ``l`` with ``c_l`` elements fills ``ceil(c_l / chunk)`` chunks, and

.. math::
    \\sum_l \\lceil c_l / C \\rceil \\le \\lceil B / C \\rceil + L - 1

(since ``ceil(a) + ceil(b) <= ceil(a + b) + 1``), so ``K = ceil(B / C) + min(L, B) - 1``
static chunks always suffice, whatever the codes. A ``lax.map`` walks the chunks and a
``lax.switch`` on the chunk's (scalar) code runs the ``vmap`` of that one branch over the
chunk (a real branch, not a select); chunks past the last used one take a branch that
returns zeros. Slots of a chunk past its code's count compute on a copy of the chunk's
last element and are dropped when the results are gathered back (each element from its
one valid slot). The result is the same as ``vmap`` of ``lax.switch`` (each element's
output depends on its own inputs only) for ``B + (L - 1) C`` element-evaluations at most
instead of ``L B``.

Optionally the elements of a code are ordered by a ``sort_key`` (e.g. a size) and the
branches take whole chunks (``batched``): a branch can then do work shared by its chunk,
such as a loop that stops at the chunk's largest size, which sorting keeps close to each
element's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, Int

__all__ = ["grouped_switch", "n_chunks"]


def n_chunks(batch: int, n_codes: int, chunk: int) -> int:
    """The static number of pure chunks :func:`grouped_switch` uses (module docstring).

    Differentiable: no: a static Python int.

    Args:
        batch: number of tasks (a Python ``int``).
        n_codes: number of branches (a Python ``int``).
        chunk: tasks per chunk (a Python ``int``).

    Returns:
        A Python ``int``.
    """
    return -(-batch // chunk) + min(n_codes, batch) - 1


def grouped_switch(codes: Int[Array, " B"], branches: Sequence[Callable], inputs, *,
                   chunk: int, sort_key: Int[Array, " B"] | None = None,
                   batched: bool = False):
    """``out[b] = branches[codes[b]](inputs[b])`` with each branch computed only on the
    elements of its code (module docstring).

    Differentiable: yes, in inputs (as the branches are).

    Args:
        codes: int codes ``(B,)`` in ``[0, len(branches))`` (traced; clipped).
        branches: functions of one element's inputs (a pytree without the batch axis),
            all returning pytrees of the same structure, shapes and dtypes; with
            ``batched``, functions of a whole chunk (leading axis ``chunk``) returning
            outputs with that leading axis.
        inputs: pytree of arrays with a leading batch axis ``B``.
        chunk: elements per chunk (static, >= 1): larger chunks vectorise better, smaller
            ones waste fewer slots (at most ``(L - 1) chunk``).
        sort_key: optional int ``(B,)`` (traced): within a code the elements are taken in
            increasing ``sort_key`` (stable), so each chunk holds elements of similar
            keys (e.g. sizes, for a branch whose work follows the chunk's largest).
        batched: the branches take whole chunks (their own ``vmap``, or work shared by
            the chunk such as a loop to the chunk's largest size). Every slot of a chunk
            holds an element of the chunk's code: slots past the code's count hold
            copies of the chunk's last element (their outputs are dropped), so a
            chunk's keys stay sorted.

    Returns:
        The pytree of outputs with a leading batch axis ``B``.
    """
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"`chunk` must be a positive Python int; got {chunk!r}")
    n_codes = len(branches)
    if n_codes < 1:
        raise ValueError("`branches` must hold at least one function")
    batch = codes.shape[0]
    if n_codes == 1 and not batched:
        return jax.vmap(branches[0])(inputs)
    C = min(chunk, batch)
    K = n_chunks(batch, n_codes, C)
    codes = jnp.clip(codes.astype(jnp.int32), 0, n_codes - 1)
    if sort_key is None:
        order = jnp.argsort(codes, stable=True)
    else:
        order = jnp.lexsort((jnp.asarray(sort_key), codes))
    counts = jnp.sum(codes[:, None] == jnp.arange(n_codes)[None, :], axis=0)
    task_start = jnp.cumsum(counts) - counts
    per_code = (counts + C - 1) // C
    chunk_end = jnp.cumsum(per_code)
    chunk_start = chunk_end - per_code
    q = jnp.arange(K)
    law = jnp.sum(chunk_end[None, :] <= q[:, None], axis=1)  # n_codes: an unused chunk
    lc = jnp.minimum(law, n_codes - 1)
    j = (q - chunk_start[lc])[:, None] * C + jnp.arange(C)[None, :]
    valid = (law < n_codes)[:, None] & (j < counts[lc][:, None])
    src = order[jnp.clip(task_start[lc][:, None] + j, 0, batch - 1)]  # (K, C)
    last = jnp.clip(counts[lc] - (q - chunk_start[lc]) * C, 1, C) - 1
    src = jnp.where(valid, src, jnp.take_along_axis(src, last[:, None], axis=1))  # spares
    xs = jax.tree.map(lambda a: a[src], inputs)

    vb = list(branches) if batched else [jax.vmap(f) for f in branches]
    shapes = jax.eval_shape(vb[0], jax.tree.map(lambda a: a[0], xs))

    def zeros(_):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    out = jax.lax.map(lambda a: jax.lax.switch(a[0], [*vb, zeros], a[1]), (law, xs))
    # each element sits in exactly one valid slot: gather it back (a row gather, cheaper
    # on CPU than scattering every slot's rows)
    dst = jnp.where(valid, src, batch).reshape(-1)
    slot = jnp.zeros((batch,), jnp.int32).at[dst].set(jnp.arange(K * C, dtype=jnp.int32),
                                                       mode="drop")
    return jax.tree.map(lambda o: o.reshape((K * C, *o.shape[2:]))[slot], out)
