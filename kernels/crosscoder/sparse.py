"""The TopK training loss computed sparsely, as EleutherAI's sparsify does.

Only the encoder product is dense. With ``v, i`` the top-``k`` values and latent indices
of each row, the decoder is ``x_hat_b = sum_j v_bj W_dec[i_bj] + b_dec`` (a sum of ``k``
gathered atoms, :func:`sparse_decode`), and the gradients of ``W_dec``, ``W_enc`` and
``b_enc`` are scatter-adds into the ``k B`` touched rows, instead of the three further
dense ``B x D x F`` products of the dense formulation. It is written by hand (custom
VJPs) because autodiff of the gathers gives one full-size scatter per atom slot. The
layout (see :class:`Blocks`):

* the decoder fuses each of the ``k`` gathers with its multiply-add (up to
  ``Blocks.unroll_k`` slots), instead of materialising one ``(B, k, D)`` gather;
* the backward products run over blocks of rows (``Blocks.slots // k`` of them) in a
  ``fori_loop``, so that a block's ``(rows, k, D)`` products stay in cache and their
  buffer is reused;
* the encoder product and its top-k run over blocks of ``Blocks.enc_rows`` rows, each
  block's pre-activations selected while in cache, so the ``(B, F)`` array is never
  formed; on CPU the selection is two-stage (the top-``k`` groups of 32 latents by their
  maxima, then the top-``k`` of those groups' latents: the same result as one
  ``lax.top_k``, without its sort over ``F``);
* the encoder gradient, scattered as rows of ``W^T``, is transposed in row blocks (when
  the backward is blocked), so the optimiser reads it contiguously;
* optimisation barriers keep the top-k a TopK op (otherwise its slices are fused into
  the gathers and XLA falls back to sorting every row) and keep the decoder output from
  being recomputed inside each of its consumers.

Block sizes are static arguments; ``None`` picks :func:`default_blocks` for the current
backend (blocked on CPU, one block elsewhere). Measurements: ``benchmarks/RESULTS.md``.

Reference: Gao et al. 2024, "Scaling and evaluating sparse autoencoders" (TopK, AuxK);
EleutherAI sparsify (the sparse decoder and its scatter-add gradients).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ..checks import is_traced
from .metrics import fvu_unchecked as fvu
from .params import Params, atom_norms, check_aux_norm, check_k, flat_decoder


class Blocks(NamedTuple):
    """Static blocking of the sparse TopK path.

    Attributes:
      unroll_k: decoder slots summed as unrolled fused gathers up to this ``k``; row
        blocks beyond it.
      slots: ``(row, slot)`` pairs per row block of the backward products (``None``:
        one block over the whole batch). When set, the encoder gradient (scattered as
        rows of ``W^T``) is also transposed in blocks of :data:`TRANSPOSE_ROWS` rows, each
        in cache, so that the optimiser reads a contiguous ``(D, F)`` gradient (with
        ``None``, one transpose that XLA on CPU fuses as strided reads into each of its
        consumers).
      enc_rows: rows per block of the encoder product and its top-k (``None``: one
        block). On CPU each block's top-k is also taken in two stages (see
        :func:`_top_k`).
    """

    unroll_k: int = 64
    slots: int | None = 2048
    enc_rows: int | None = 256


def default_blocks(backend: str | None = None) -> Blocks:
    """The blocking for ``backend`` (default: ``jax.default_backend()``): blocked rows on
    ``"cpu"``, one block over the batch on accelerators.

    Differentiable: no: a static blocking choice.

    Args:
      backend: a JAX backend name, or ``None`` for the default backend.

    Returns:
      The :class:`Blocks`.
    """
    backend = jax.default_backend() if backend is None else backend
    return Blocks() if backend == "cpu" else Blocks(slots=None, enc_rows=None)


def _check_blocks(blocks: Blocks | None) -> Blocks:
    if blocks is None:
        return default_blocks()
    if not isinstance(blocks, Blocks):
        raise ValueError(f"`blocks` must be a Blocks or None; got {type(blocks).__name__}")
    for name, v in zip(blocks._fields, blocks, strict=True):
        if (v is None and name != "unroll_k") or (isinstance(v, int) and v >= 1):
            continue
        what = "an int >= 1" + ("" if name == "unroll_k" else " or None")
        raise ValueError(f"`blocks.{name}` must be {what}; got {v!r}")
    return blocks


def _rows_at(W: Array, idx: Array) -> Array:
    """``W[idx]`` for in-range ``idx`` (no clamping code)."""
    return W.at[idx].get(mode="promise_in_bounds")


def _by_row_blocks(f, init, *arrays, block: int | None):
    """Fold ``acc = f(acc, start, *blocks)`` over row blocks of ``arrays`` (equal leading
    dims): a ``fori_loop`` over full blocks of ``block`` rows (``None``: one block), then
    the remainder."""
    n = arrays[0].shape[0]
    size = n if block is None else min(block, n)
    n_full, rem = divmod(n, max(size, 1))
    acc = init
    if n_full == 1:
        acc = f(acc, 0, *(a[:size] for a in arrays))
    elif n_full:
        def body(c, acc):
            start = c * size
            return f(acc, start, *(jax.lax.dynamic_slice_in_dim(a, start, size)
                                   for a in arrays))

        acc = jax.lax.fori_loop(0, n_full, body, acc)
    if rem:
        acc = f(acc, n_full * size, *(a[n_full * size:] for a in arrays))
    return acc


TRANSPOSE_ROWS = 128  # rows per block of the blocked transposition of the encoder gradient
TOPK_GROUP = 32  # latents per group of the two-stage top-k


def _top_k(pre: Array, k: int, group: int | None) -> tuple[Array, Array]:
    """``lax.top_k(pre, k)``, the same values and indices (ties to the lower index, as
    ``lax.top_k``), in two stages when ``group`` divides ``F`` and ``F // group >= 4 k``:
    the ``k`` groups of ``group`` consecutive latents with the largest maxima hold the top
    ``k`` of the row (a latent of another group is at most that group's maximum, which is
    at most each of the ``k`` maxima, and a tie with one of them goes to the lower index,
    a latent of the selected group), so the second stage selects among those ``k group``
    candidates, taken in index order. The full ``top_k`` over ``F`` sorts on CPU; here
    one max pass and two small selections."""
    R, F = pre.shape
    if group is None or F % group or F // group < 4 * k:
        return jax.lax.top_k(pre, k)
    grp = pre.reshape(R, F // group, group)
    _, gi = jax.lax.top_k(jnp.max(grp, axis=-1), k)
    gi = jnp.sort(gi, axis=-1)  # candidates in index order: ties go to the lower index
    cand = jnp.take_along_axis(grp, gi[:, :, None], axis=1, mode="promise_in_bounds")
    v, j = jax.lax.top_k(cand.reshape(R, k * group), k)
    i = jnp.take_along_axis(gi, j // group, axis=1, mode="promise_in_bounds") * group
    return v, i + j % group


def _transpose(a: Array, block: int | None) -> Array:
    """``a.T``, over blocks of ``block`` rows of ``a`` (``None``: one ``a.T``)."""
    if block is None:
        return a.T

    def f(out, start, a_c):
        return jax.lax.dynamic_update_slice_in_dim(out, a_c.T, start, 1)

    return _by_row_blocks(f, jnp.zeros(a.shape[::-1], a.dtype), a, block=block)


def _slot_block(kk: int, blocks: Blocks) -> int | None:
    return None if blocks.slots is None else max(1, blocks.slots // kk)


def _slot_sum(vals: Array, idx: Array, W: Array, blocks: Blocks) -> Array:
    """``sum_j vals[:, j, None] * W[idx[:, j]]``: one fused gather per slot (up to
    ``blocks.unroll_k`` slots), else per row block."""
    kk = idx.shape[1]
    if kk <= blocks.unroll_k:
        out = vals[:, 0, None] * _rows_at(W, idx[:, 0])
        for j in range(1, kk):
            out = out + vals[:, j, None] * _rows_at(W, idx[:, j])
        return out

    def f(out, start, v_c, i_c):
        s = jnp.einsum("bk,bkd->bd", v_c, _rows_at(W, i_c))
        return jax.lax.dynamic_update_slice_in_dim(out, s, start, 0)

    return _by_row_blocks(f, jnp.zeros((idx.shape[0], W.shape[1]), W.dtype), vals, idx,
                          block=_slot_block(kk, blocks))


def _slot_dots(e: Array, idx: Array, W: Array, blocks: Blocks) -> Array:
    """``out[:, j] = <e, W[idx[:, j]]>`` row-wise."""
    def f(out, start, e_c, i_c):
        d = jnp.einsum("bkd,bd->bk", _rows_at(W, i_c), e_c)
        return jax.lax.dynamic_update_slice_in_dim(out, d, start, 0)

    return _by_row_blocks(f, jnp.zeros(idx.shape, e.dtype), e, idx,
                          block=_slot_block(idx.shape[1], blocks))


def _row_scatter(n_rows: int, idx: Array, coef: Array, rows: Array, blocks: Blocks,
                 acc_shape: tuple[int, ...] | None = None) -> Array:
    """``(n_rows, D)`` zeros plus ``coef[b, j] * rows[b]`` added at row ``idx[b, j]``,
    accumulated in an array of ``acc_shape`` (the same elements; default ``(n_rows, D)``)
    and returned in that shape. Two accumulators of one shape start from one zero array
    that XLA copies for each; a second shape keeps them apart."""
    D = rows.shape[-1]
    acc_shape = (n_rows, D) if acc_shape is None else acc_shape

    def f(acc, start, i_c, c_c, r_c):
        upd = (c_c[:, :, None] * r_c[:, None, :]).reshape(-1, D)
        acc = acc.reshape(n_rows, D).at[i_c.reshape(-1)].add(upd, mode="promise_in_bounds")
        return acc.reshape(acc_shape)

    return _by_row_blocks(f, jnp.zeros(acc_shape, rows.dtype), idx, coef, rows,
                          block=_slot_block(idx.shape[1], blocks))


def sparse_decode(vals: Float[Array, "B k"], idx: Int[Array, "B k"],
                  W: Float[Array, "F D"], *, blocks: Blocks | None = None
                  ) -> Float[Array, "B D"]:
    """``sum_j vals[:, j] W[idx[:, j]]``: the decoder product ``z @ W`` of a code ``z``
    with ``k`` non-zeros per row, given as values and latent indices, with a sparse VJP
    (a scatter-add into the touched rows of ``W``).

    Differentiable: yes, in vals and W (a custom VJP).

    Args:
      vals: ``(B, k)`` values.
      idx: ``(B, k)`` latent indices in ``[0, F)`` (checked; at run time under ``jit``).
      W: ``(F, D)`` atoms, e.g. ``params.W_dec.reshape(F, -1)``.
      blocks: static blocking (``None``: :func:`default_blocks`).

    Returns:
      The ``(B, D)`` product.
    """
    blocks = _check_blocks(blocks)
    for name, a, nd in (("vals", vals, 2), ("idx", idx, 2), ("W", W, 2)):
        if getattr(a, "ndim", None) != nd:
            raise ValueError(f"`{name}` must be a 2-D array; got shape "
                             f"{tuple(getattr(a, 'shape', ()))}")
    if vals.shape != idx.shape:
        raise ValueError(f"`vals` and `idx` must have the same shape (B, k); got "
                         f"{tuple(vals.shape)} and {tuple(idx.shape)}")
    if not jnp.issubdtype(idx.dtype, jnp.integer):
        raise ValueError(f"`idx` must be an integer array; got dtype {idx.dtype}")
    bad = jnp.any((idx < 0) | (idx >= W.shape[0]))
    msg = f"`idx` holds latent indices outside [0, {W.shape[0]})"
    if is_traced(bad):
        idx = eqx.error_if(idx, bad, msg)
    elif bool(bad):
        raise ValueError(msg)
    return _sparse_decode(vals, idx, W, blocks)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _sparse_decode(vals, idx, W, blocks):
    return _slot_sum(vals, idx, W, blocks)


def _sparse_decode_fwd(vals, idx, W, blocks):
    return jax.lax.optimization_barrier(_slot_sum(vals, idx, W, blocks)), (vals, idx, W)


def _sparse_decode_bwd(blocks, res, g):
    vals, idx, W = res
    g = jax.lax.optimization_barrier(g)
    return (_slot_dots(g, idx, W, blocks), np.zeros(idx.shape, jax.dtypes.float0),
            _row_scatter(W.shape[0], idx, vals, g, blocks))


_sparse_decode.defvjp(_sparse_decode_fwd, _sparse_decode_bwd)


def _topk_select(x2, W, b, dead, k, k_aux, blocks):
    """The selections, over blocks of ``blocks.enc_rows`` rows: each block's
    pre-activations are selected while in cache and the ``(B, F)`` array is never
    formed."""
    n = x2.shape[0]
    kk = [k] if k_aux is None else [k, k_aux]
    group = None if blocks.enc_rows is None else TOPK_GROUP

    def f(acc, start, x_c):
        pre = x_c @ W + b
        out = [_top_k(pre, k, group)]
        if k_aux is not None:
            out.append(_top_k(jnp.where(dead, pre, -jnp.inf), k_aux, group))
        return [(jax.lax.dynamic_update_slice_in_dim(av, v, start, 0),
                 jax.lax.dynamic_update_slice_in_dim(ai, i, start, 0))
                for (av, ai), (v, i) in zip(acc, out, strict=True)]

    init = [(jnp.zeros((n, m), x2.dtype), jnp.zeros((n, m), jnp.int32)) for m in kk]
    sel = jax.lax.optimization_barrier(_by_row_blocks(f, init, x2, block=blocks.enc_rows))
    (v, i) = sel[0]
    if k_aux is None:
        return jnp.maximum(v, 0), i, None, None
    va, ia = sel[1]
    # a slot filled from a live latent (fewer dead latents than k_aux) is -inf: value 0
    return jnp.maximum(v, 0), i, jnp.where(jnp.isfinite(va), jnp.maximum(va, 0), 0), ia


def topk_encode(
    x2: Float[Array, "B D"],
    W: Float[Array, "D F"],
    b: Float[Array, " F"],
    dead: Bool[Array, " F"],
    k: int,
    k_aux: int | None = None,
    *,
    blocks: Blocks | None = None,
):
    """The sparse TopK encoder: the top-``k`` of each row of ``pre = x2 W + b`` and (with
    ``k_aux``) the top-``k_aux`` among the ``dead`` latents (AuxK, Gao et al. 2024), with
    a sparse VJP to ``x2``, ``W`` and ``b`` (scatter-adds into the selected columns).

    Differentiable: yes, in x2, W and b (a custom VJP; almost everywhere).

    Args:
      x2: flattened inputs ``(B, D)``.
      W: flattened encoder ``(D, F)``.
      b: encoder bias ``(F,)``.
      dead: boolean ``(F,)`` mask of dead latents (ignored without ``k_aux``).
      k: kept latents per row, ``1 <= k <= F``.
      k_aux: dead latents per row, ``1 <= k_aux <= F``, or ``None``.
      blocks: static blocking (``None``: :func:`default_blocks`).

    Returns:
      ``(relu(v), i, relu(v_aux), i_aux)``: ``(B, k)`` values and indices, and the AuxK
      ``(B, k_aux)`` values (0 where a slot holds a live latent) and indices (``None``
      without ``k_aux``).
    """
    F = W.shape[-1]
    k = check_k(k, F)
    if k_aux is not None:
        k_aux = check_k(k_aux, F, "k_aux")
    return _topk_encode(x2, W, b, dead, k, k_aux, _check_blocks(blocks))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _topk_encode(x2, W, b, dead, k, k_aux, blocks):
    return _topk_select(x2, W, b, dead, k, k_aux, blocks)


def _topk_encode_fwd(x2, W, b, dead, k, k_aux, blocks):
    out = _topk_select(x2, W, b, dead, k, k_aux, blocks)
    return out, (x2, W, dead, out)


def _topk_encode_bwd(k, k_aux, blocks, res, g):
    x2, W, dead, (v, i, va, ia) = res
    # the kept values are ReLU(pre) at the selected entries: the gradient reaches pre
    # only where the value is positive
    gpre = jnp.where(v > 0, g[0], 0)
    idx = i
    if va is not None:
        gpre = jnp.concatenate([gpre, jnp.where(va > 0, g[2], 0)], axis=1)
        idx = jnp.concatenate([i, ia], axis=1)
    gpre = jax.lax.optimization_barrier(gpre)
    F = W.shape[1]
    # scattered as rows of W^T (in an accumulator of its own shape, not a copy of the
    # decoder gradient's zeros), transposed
    dWT = _row_scatter(F, idx, gpre, x2, blocks, (1, F, x2.shape[1])).reshape(F, -1)
    dW = _transpose(dWT, None if blocks.slots is None else TRANSPOSE_ROWS)
    db = jnp.zeros((F,), gpre.dtype).at[idx.reshape(-1)].add(gpre.reshape(-1),
                                                             mode="promise_in_bounds")
    dx = _slot_sum(gpre, idx, W.T, blocks)  # dropped by XLA when x needs no gradient
    return dx, dW, db, np.zeros(dead.shape, jax.dtypes.float0)


_topk_encode.defvjp(_topk_encode_fwd, _topk_encode_bwd)


def sparse_topk_loss(params: Params, x, *, k: int, dead, sparsity_coef: float,
                     sparsity: str, tanh_c: float, k_aux: int | None, aux_coef: float,
                     blocks: Blocks | None = None, aux_norm: str = "gao",
                     apply_b_dec_to_input: bool = False):
    """:func:`~jaxkit.kernels.crosscoder.loss_fn` for ``activation="topk"`` with an
    ``"l1"`` or ``"tanh"`` penalty, computed sparsely (the same loss and gradients to
    float rounding).

    Differentiable: yes, in params and x (custom VJPs; AuxK's residual is a constant by design).

    Args:
      params: the parameters.
      x: ``(B, *site, d)``.
      k: kept latents per row.
      dead: boolean ``(F,)`` mask of dead latents, or ``None`` (no AuxK).
      sparsity_coef: penalty weight.
      sparsity: ``"l1"`` or ``"tanh"``.
      tanh_c: the tanh penalty's scale.
      k_aux: AuxK latents per row, or ``None``.
      aux_coef: AuxK weight.
      blocks: static blocking (``None``: :func:`default_blocks`).
      aux_norm: AuxK normalisation, ``"gao"`` or ``"sparsify"``
        (:func:`~jaxkit.kernels.crosscoder.auxk_loss`).
      apply_b_dec_to_input: encode ``x - b_dec`` (sparsify's convention).

    Returns:
      ``(loss, (fvu, aux, penalty, (vals, idx)))`` with the ``(B, k)`` kept values and
      latent indices.
    """
    blocks = _check_blocks(blocks)
    check_aux_norm(aux_norm)
    B, F = x.shape[0], params.W_enc.shape[-1]
    W = params.W_enc.reshape(-1, F)
    Wd = flat_decoder(params.W_dec)
    xf = x.reshape(B, -1).astype(W.dtype)
    use_aux = k_aux is not None and dead is not None
    kk_aux = check_k(k_aux, F, "k_aux") if use_aux else None
    dead_arg = dead if use_aux else jnp.zeros((F,), bool)
    xin = xf - params.b_dec.reshape(-1).astype(xf.dtype) if apply_b_dec_to_input else xf
    vals, idx, va, ia = _topk_encode(xin, W, params.b_enc, dead_arg, check_k(k, F), kk_aux,
                                     blocks)
    x_hat = _sparse_decode(vals, idx, Wd, blocks) + params.b_dec.reshape(-1)
    rec = fvu(xf, x_hat)
    # the penalty of the dense loss_fn from the k kept values (l1 or tanh)
    scaled = vals * _rows_at(atom_norms(params.W_dec).astype(vals.dtype), idx)
    if sparsity == "l1":
        pen = jnp.mean(jnp.sum(scaled, -1))
    else:
        pen = jnp.mean(jnp.sum(jnp.tanh(tanh_c * scaled), -1))
    if use_aux:
        e = jax.lax.stop_gradient(xf - x_hat)
        e_hat = _sparse_decode(va, ia, Wd, blocks)
        if aux_norm == "gao":
            a = fvu(e, e_hat)
        else:
            tv = jnp.sum((xf - jnp.mean(xf, axis=0)) ** 2)
            a = (jnp.minimum(jnp.sum(dead.astype(xf.dtype)) / kk_aux, 1.0)
                 * jnp.sum((e_hat - e) ** 2) / jnp.maximum(tv, 1e-30))
        aux = aux_coef * jnp.where(jnp.any(dead), a, 0.0)
    else:
        aux = jnp.zeros((), W.dtype)
    return rec + sparsity_coef * pen + aux, (rec, aux, pen, (vals, idx))
