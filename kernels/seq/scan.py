"""The Mamba-1 selective scan (S6), sequential and parallel (associative) forms.

For channels ``d`` and state index ``n`` (Gu & Dao 2023, "Mamba", Alg. 2):

.. math::

    \\bar A_{t,d,n} = \\exp(\\Delta_{t,d} A_{d,n}), \\qquad
    h_{t,d,n} = \\bar A_{t,d,n} h_{t-1,d,n} + \\Delta_{t,d} B_{t,n} x_{t,d}, \\qquad
    y_{t,d} = \\sum_n C_{t,n} h_{t,d,n} + D_d x_{t,d}

optionally gated, ``y * silu(z)``. The recurrence is the composition of affine maps
``h -> a h + b``, associative under ``(a_1, b_1) . (a_2, b_2) = (a_2 a_1, a_2 b_1 + b_2)``,
so it also runs as ``lax.associative_scan`` (depth ``O(log L)``, but it materialises the
``(B, L, D, N)`` state several times). The sequential form runs as an outer ``lax.scan``
over chunks of ``chunk`` steps, each an inner ``lax.scan`` under ``jax.checkpoint``: the
values are those of one scan over time, but reverse-mode autodiff keeps only the state at
chunk boundaries and recomputes a chunk's steps when its backward runs, so the backward
works on cache-sized ``(chunk, B, D, N)`` residuals instead of writing and reading the
whole ``(L, B, D, N)`` trajectory (benchmarks/RESULTS.md). States, ``Delta A`` and the
exponentials are float32 whatever the input dtype; ``y`` is returned in ``x``'s dtype.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["ScanResult", "selective_scan", "selective_scan_sequential",
           "selective_scan_associative"]

F32 = jnp.float32
CHUNK = 16  # steps per rematerialised chunk of the sequential form on CPU (RESULTS.md)


class ScanResult(NamedTuple):
    """Output ``y`` (B, L, D) in the input dtype and the final state (B, D, N), float32."""

    y: Array
    state: Array


def _check(x, delta, A, B, C):
    if x.ndim != 3:
        raise ValueError(f"`x` must be (batch, length, channels); got shape {x.shape}")
    b, length, d = x.shape
    if delta.shape != x.shape:
        raise ValueError(f"`delta` must have the shape of `x` {x.shape}; got {delta.shape}")
    if A.ndim != 2 or A.shape[0] != d:
        raise ValueError(f"`A` must be (channels={d}, state); got shape {A.shape}")
    n = A.shape[1]
    for name, v in (("B", B), ("C", C)):
        if v.shape != (b, length, n):
            raise ValueError(f"`{name}` must be (batch, length, state) = {(b, length, n)}; "
                             f"got {v.shape}")


def _finish(x, y, D, z):
    if D is not None:
        y = y + D.astype(F32) * x.astype(F32)
    if z is not None:
        y = y * jax.nn.silu(z.astype(F32))
    return y.astype(x.dtype)


def selective_scan_sequential(x: Float[Array, "B L D"], delta: Float[Array, "B L D"],
                              A: Float[Array, "D N"], B: Float[Array, "B L N"],
                              C: Float[Array, "B L N"], D: Float[Array, " D"] | None = None,
                              z: Float[Array, "B L D"] | None = None,
                              h0: Float[Array, "B D N"] | None = None, *,
                              chunk: int = CHUNK) -> ScanResult:
    """The selective scan step by step over time, in rematerialised chunks of ``chunk``
    steps (module docstring).

    Differentiable: yes, in x, delta, A, B, C, D, z and h0.

    Args:
      x: inputs (batch, length, channels).
      delta: positive step sizes, same shape (already through softplus).
      A: state matrix (channels, state), normally negative.
      B, C: input and output projections (batch, length, state).
      D: skip weights (channels,), or None.
      z: gate (batch, length, channels), or None.
      h0: initial state (batch, channels, state), zeros when None.
      chunk: steps per rematerialised chunk (static, >= 1; cut to the length). A length
        not divisible by it is padded at the end with ``delta = 0`` (the identity step).

    Returns:
      A :class:`ScanResult`.
    """
    _check(x, delta, A, B, C)
    if not (isinstance(chunk, int) and chunk >= 1):
        raise ValueError(f"`chunk` must be an int >= 1; got {chunk!r}")
    b, length, d = x.shape
    n = A.shape[1]
    q = min(chunk, length)
    pad = (-length) % q
    h = jnp.zeros((b, d, n), F32) if h0 is None else h0.astype(F32)
    Af = A.astype(F32)

    def body(h, inp):
        xt, dt, bt, ct = inp
        h = jnp.exp(dt[:, :, None] * Af) * h + (dt * xt)[:, :, None] * bt[:, None, :]
        return h, jnp.einsum("bdn,bn->bd", h, ct)

    @jax.checkpoint
    def chunk_body(h, inp):
        return jax.lax.scan(body, h, inp)

    seq = tuple(jnp.pad(jnp.swapaxes(v.astype(F32), 0, 1), ((0, pad), (0, 0), (0, 0)))
                .reshape(-1, q, b, v.shape[2]) for v in (x, delta, B, C))
    h, ys = jax.lax.scan(chunk_body, h, seq)
    ys = ys.reshape(-1, b, d)[:length]
    return ScanResult(_finish(x, jnp.swapaxes(ys, 0, 1), D, z), h)


def selective_scan_associative(x: Float[Array, "B L D"], delta: Float[Array, "B L D"],
                               A: Float[Array, "D N"], B: Float[Array, "B L N"],
                               C: Float[Array, "B L N"], D: Float[Array, " D"] | None = None,
                               z: Float[Array, "B L D"] | None = None,
                               h0: Float[Array, "B D N"] | None = None) -> ScanResult:
    """The selective scan as ``lax.associative_scan`` over time (the result of
    :func:`selective_scan_sequential`).

    Differentiable: yes, in x, delta, A, B, C, D, z and h0.

    Args:
      x: inputs (batch, length, channels).
      delta: positive step sizes, same shape (already through softplus).
      A: state matrix (channels, state), normally negative.
      B, C: input and output projections (batch, length, state).
      D: skip weights (channels,), or None.
      z: gate (batch, length, channels), or None.
      h0: initial state (batch, channels, state), zeros when None.

    Returns:
      A :class:`ScanResult`.
    """
    _check(x, delta, A, B, C)
    xf, dtf = x.astype(F32), delta.astype(F32)
    a = jnp.exp(dtf[..., None] * A.astype(F32))                      # (B, L, D, N)
    u = (dtf * xf)[..., None] * B.astype(F32)[:, :, None, :]         # (B, L, D, N)
    if h0 is not None:
        u = u.at[:, 0].add(a[:, 0] * h0.astype(F32))

    def op(left, right):
        a1, b1 = left
        a2, b2 = right
        return a2 * a1, a2 * b1 + b2

    _, h = jax.lax.associative_scan(op, (a, u), axis=1)
    y = jnp.einsum("bldn,bln->bld", h, C.astype(F32))
    return ScanResult(_finish(x, y, D, z), h[:, -1])


def selective_scan(x, delta, A, B, C, D=None, z=None, h0=None, *,
                   mode: Literal["sequential", "associative"] = "sequential",
                   chunk: int = CHUNK) -> ScanResult:
    """:func:`selective_scan_sequential` (in chunks of ``chunk`` steps) or
    :func:`selective_scan_associative` by ``mode`` (static). On CPU the sequential form
    is usually faster (see benchmarks/RESULTS.md); the associative form has logarithmic
    depth.

    Differentiable: yes, in x, delta, A, B, C, D, z and h0.

    Args:
      x: inputs (batch, length, channels).
      delta: positive step sizes, same shape (already through softplus).
      A: state matrix (channels, state), normally negative.
      B, C: input and output projections (batch, length, state).
      D: skip weights (channels,), or None.
      z: gate (batch, length, channels), or None.
      h0: initial state (batch, channels, state), zeros when None.
      mode: ``"sequential"`` or ``"associative"`` (static).
      chunk: steps per rematerialised chunk of the sequential form (static, >= 1).

    Returns:
      A :class:`ScanResult`.
    """
    if mode == "sequential":
        return selective_scan_sequential(x, delta, A, B, C, D, z, h0, chunk=chunk)
    if mode == "associative":
        return selective_scan_associative(x, delta, A, B, C, D, z, h0)
    raise ValueError(f"`mode` must be 'sequential' or 'associative'; got {mode!r}")
