"""The Mamba-2 state-space dual (SSD) in chunked form.

Per head ``h`` with a scalar decay (Dao & Gu 2024, "Transformers are SSMs", Sec. 6):

.. math::

    H_t = e^{\\Delta_t A_h} H_{t-1} + \\Delta_t\\, x_t B_t^\\top, \\qquad y_t = H_t C_t
    \\quad (H_t \\in \\mathbb{R}^{P \\times N})

Within a chunk of ``Q`` steps the output is a masked matrix product,
``Y = (C B^T \\circ L) (\\Delta x)`` with ``L_{ij} = \\exp(\\sum_{k=j+1}^{i} \\Delta_k A)``
for ``i >= j`` (0 above the diagonal), computed by the stable segment sum (each entry
the sum of its own terms, as one product with a constant 0/1 matrix, masked to ``-inf``
above the diagonal afterwards; never as differences of cumsums); the chunks then exchange
their final states by a short recurrence over ``L / Q`` chunk states, and each chunk adds
the decayed incoming state ``C_t^T H``. This follows ``ssd_minimal.py`` of
state-spaces/mamba. A length not divisible by ``Q`` is padded at the end with
``Delta = 0`` (the identity step), which leaves every earlier output unchanged.
``Delta A``, the segment sums, exponentials and states are float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["SSDResult", "segsum", "ssd_chunked", "ssd_sequential"]

F32 = jnp.float32


class SSDResult(NamedTuple):
    """Output ``y`` (B, L, H, P) in ``x``'s dtype; final state (B, H, P, N), float32."""

    y: Array
    state: Array


def segsum(x: Float[Array, "... T"]) -> Float[Array, "... T T"]:
    """Stable segment sums ``S_ij = sum_{k=j+1}^{i} x_k`` for ``i >= j``, ``-inf`` above
    the diagonal (so ``exp(S)`` is the lower-triangular decay matrix).

    Differentiable: yes, in x.

    Args:
      x: values along the last axis.

    Returns:
      The (..., T, T) segment sums.
    """
    t = x.shape[-1]
    lower = jnp.tril(jnp.ones((t, t), bool))                  # [k <= i] (rows i, columns k)
    # S_ij = sum_k x_k [k <= i] [k > j]: one matrix product with a constant 0/1 matrix, so
    # every entry is a sum of exactly its own terms (no differences of cumsums); a cumsum
    # over the (T, T) axis lowers to a reduce-window of T-fold work on XLA:CPU
    xi = jnp.where(lower, x[..., None, :], 0)
    after = jnp.tril(jnp.ones((t, t), x.dtype), -1)          # [k > j] (rows k, columns j)
    s = jnp.matmul(xi, after, precision=jax.lax.Precision.HIGHEST)
    return jnp.where(lower, s, -jnp.inf)


def _check(x, dt, A, B, C):
    if x.ndim != 4:
        raise ValueError(f"`x` must be (batch, length, heads, head_dim); got {x.shape}")
    b, length, nh, _ = x.shape
    if dt.shape != (b, length, nh):
        raise ValueError(f"`dt` must be (batch, length, heads) = {(b, length, nh)}; "
                         f"got {dt.shape}")
    if A.shape != (nh,):
        raise ValueError(f"`A` must be (heads,) = ({nh},); got {A.shape}")
    if B.ndim != 4 or B.shape[:2] != (b, length) or C.shape != B.shape:
        raise ValueError(f"`B` and `C` must be (batch, length, groups, state) with batch "
                         f"{b} and length {length}; got {B.shape} and {C.shape}")
    if nh % B.shape[2]:
        raise ValueError(f"heads ({nh}) must be divisible by the groups of `B` "
                         f"({B.shape[2]})")


def ssd_sequential(x: Float[Array, "B L H P"], dt: Float[Array, "B L H"],
                   A: Float[Array, " H"], B: Float[Array, "B L G N"],
                   C: Float[Array, "B L G N"], *, D: Float[Array, " H"] | None = None,
                   h0: Float[Array, "B H P N"] | None = None) -> SSDResult:
    """The SSD recurrence one step at a time (``lax.scan``; module docstring):
    ``H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T``, ``y_t = H_t C_t (+ D x_t)``. The
    reference of :func:`ssd_chunked` and the form for step-by-step decoding.

    Differentiable: yes, in x, dt, A, B, C, D and h0.

    Args:
      x, dt, A, B, C, D, h0: as :func:`ssd_chunked`.

    Returns:
      An :class:`SSDResult`.
    """
    _check(x, dt, A, B, C)
    b, _, nh, p = x.shape
    g, n = B.shape[2], B.shape[3]
    xf, dtf = x.astype(F32), dt.astype(F32)
    Bf = jnp.repeat(B.astype(F32), nh // g, axis=2)
    Cf = jnp.repeat(C.astype(F32), nh // g, axis=2)
    a = jnp.exp(dtf * A.astype(F32))                                       # (b, l, h)

    def step(h, inp):
        a_t, dx_t, b_t, c_t = inp
        h = a_t[..., None, None] * h + dx_t[..., None] * b_t[:, :, None, :]
        return h, jnp.einsum("bhpn,bhn->bhp", h, c_t)

    init = jnp.zeros((b, nh, p, n), F32) if h0 is None else h0.astype(F32)
    seqs = (a, xf * dtf[..., None], Bf, Cf)
    final, ys = jax.lax.scan(step, init, tuple(jnp.moveaxis(v, 1, 0) for v in seqs))
    y = jnp.moveaxis(ys, 0, 1)
    if D is not None:
        y = y + D.astype(F32)[:, None] * xf
    return SSDResult(y.astype(x.dtype), final)


def ssd_chunked(x: Float[Array, "B L H P"], dt: Float[Array, "B L H"], A: Float[Array, " H"],
                B: Float[Array, "B L G N"], C: Float[Array, "B L G N"], *, chunk: int = 64,
                D: Float[Array, " H"] | None = None,
                h0: Float[Array, "B H P N"] | None = None) -> SSDResult:
    """Mamba-2 SSD in chunks of ``chunk`` steps (module docstring).

    Differentiable: yes, in x, dt, A, B, C, D and h0.

    Args:
      x: inputs (batch, length, heads, head dim).
      dt: positive step sizes (batch, length, heads) (already through softplus).
      A: the negative scalar decay per head (heads,).
      B, C: projections (batch, length, groups, state); heads are split evenly over the
        groups (``heads % groups == 0``).
      chunk: chunk length ``Q`` (static, >= 1).
      D: skip weight per head, or None.
      h0: initial state (batch, heads, head dim, state), zeros when None.

    Returns:
      An :class:`SSDResult`.
    """
    _check(x, dt, A, B, C)
    b, length, nh, p = x.shape
    g, n = B.shape[2], B.shape[3]
    if not (isinstance(chunk, int) and chunk >= 1):
        raise ValueError(f"`chunk` must be an int >= 1; got {chunk!r}")
    q = chunk
    pad = (-length) % q
    xf, dtf = x.astype(F32), dt.astype(F32)
    Bf = jnp.repeat(B.astype(F32), nh // g, axis=2)
    Cf = jnp.repeat(C.astype(F32), nh // g, axis=2)
    if pad:
        widths = ((0, 0), (0, pad))
        xf = jnp.pad(xf, widths + ((0, 0), (0, 0)))
        dtf = jnp.pad(dtf, widths + ((0, 0),))
        Bf = jnp.pad(Bf, widths + ((0, 0), (0, 0)))
        Cf = jnp.pad(Cf, widths + ((0, 0), (0, 0)))
    nc = (length + pad) // q
    X = (xf * dtf[..., None]).reshape(b, nc, q, nh, p)
    Bc = Bf.reshape(b, nc, q, nh, n)
    Cc = Cf.reshape(b, nc, q, nh, n)
    a = jnp.moveaxis((dtf * A.astype(F32)).reshape(b, nc, q, nh), -1, 1)   # (b, h, c, q)
    a_cum = jnp.cumsum(a, axis=-1)
    # 1. intra-chunk outputs
    Lm = jnp.exp(segsum(a))                                                # (b, h, c, q, q)
    y_diag = jnp.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cc, Bc, Lm, X)
    # 2. each chunk's final state from its own inputs
    decay = jnp.exp(a_cum[..., -1:] - a_cum)                               # (b, h, c, q)
    states = jnp.einsum("bclhn,bhcl,bclhp->bchpn", Bc, decay, X)
    if nc == 1 and h0 is None:  # one chunk from a zero state: nothing to pass on
        y = y_diag.reshape(b, q, nh, p)[:, :length]
        if D is not None:
            y = y + D.astype(F32)[:, None] * x.astype(F32)
        return SSDResult(y.astype(x.dtype), states[:, 0])
    # 3. states passed between chunks
    init = jnp.zeros((b, 1, nh, p, n), F32) if h0 is None else h0.astype(F32)[:, None]
    states = jnp.concatenate([init, states], axis=1)
    chunk_decay = jnp.exp(segsum(jnp.pad(a_cum[..., -1], ((0, 0), (0, 0), (1, 0)))))
    states = jnp.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)
    prev, final = states[:, :-1], states[:, -1]
    # 4. the incoming state's contribution
    y_off = jnp.einsum("bclhn,bchpn,bhcl->bclhp", Cc, prev, jnp.exp(a_cum))
    y = (y_diag + y_off).reshape(b, nc * q, nh, p)[:, :length]
    if D is not None:
        y = y + D.astype(F32)[:, None] * x.astype(F32)
    return SSDResult(y.astype(x.dtype), final)
