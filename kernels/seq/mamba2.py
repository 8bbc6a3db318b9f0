"""The Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs", Sec. 7, Fig. 6), as in
``mamba2_simple.py`` of state-spaces/mamba (one group, no bias):

.. math::

    [z, \\xi, \\delta] = x W_{in}, \\quad [u, B, C] = \\mathrm{silu}(\\mathrm{conv}(\\xi)),
    \\quad \\Delta = \\mathrm{softplus}(\\delta + b_{\\Delta}) \\in \\mathbb{R}^{H},

    y = \\mathrm{SSD}(u, \\Delta, -e^{A_{log}}, B, C, D), \\quad
    \\mathrm{out} = \\mathrm{RMSNorm}(y \\odot \\mathrm{silu}(z))\\, W_{out}

with ``u`` split into ``H`` heads of ``P`` channels, a scalar decay per head and ``B``,
``C`` shared by the heads (:mod:`jaxkit.kernels.seq.ssd`). ``mode="chunked"`` runs the
chunked SSD (matrix products within chunks of ``chunk`` steps, a short recurrence
between them); ``mode="sequential"`` the same recurrence one step at a time (the
reference). Initialisation (``mamba2_simple.py``): ``A`` uniform in [1, 16] stored as
``A_log``, ``D = 1``, ``dt`` log-uniform in ``[dt_min, dt_max]`` floored at 1e-4 and
stored as the inverse-softplus bias.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .conv import causal_conv1d
from .linear import linear
from .norm import rms_norm
from .ssd import ssd_chunked, ssd_sequential

__all__ = ["Mamba2Params", "mamba2_mixer", "init_mamba2"]


class Mamba2Params(NamedTuple):
    """Weights of one Mamba-2 mixer (E inner channels in H heads, state size N)."""

    w_in: Array     # (D, 2E + 2N + H): z, then u | B | C, then dt
    conv_w: Array   # (K, E + 2N)
    conv_b: Array   # (E + 2N,)
    b_dt: Array     # (H,)
    A_log: Array    # (H,)
    D: Array        # (H,)
    gate_norm: Array  # (E,) gated RMSNorm scale
    w_out: Array    # (E, D)


def mamba2_mixer(params: Mamba2Params, x: Float[Array, "B L D"], *,
                 mode: Literal["chunked", "sequential"] = "chunked", chunk: int = 64
                 ) -> Float[Array, "B L D"]:
    """The Mamba-2 mixer (module docstring); ``mode`` and ``chunk`` are static (a chunk
    longer than the sequence is cut to its length).

    Differentiable: yes, in params and x.

    Args:
      params: the :class:`Mamba2Params`.
      x: inputs (batch, length, width).
      mode: "chunked" (SSD) or "sequential" (step-by-step recurrence).
      chunk: SSD chunk length.

    Returns:
      (batch, length, width) in ``x``'s dtype.
    """
    if x.ndim != 3 or x.shape[-1] != params.w_in.shape[0]:
        raise ValueError(f"`x` must be (batch, length, {params.w_in.shape[0]}); got {x.shape}")
    if mode not in ("chunked", "sequential"):
        raise ValueError(f"`mode` must be 'chunked' or 'sequential'; got {mode!r}")
    b, length, _ = x.shape
    e, nh = params.w_out.shape[0], params.A_log.shape[0]
    n = (params.conv_w.shape[1] - e) // 2
    zxd = linear(x, params.w_in)
    z, xbc, dt = zxd[..., :e], zxd[..., e:2 * e + 2 * n], zxd[..., 2 * e + 2 * n:]
    xbc = jax.nn.silu(causal_conv1d(xbc, params.conv_w, params.conv_b))
    u, B, C = xbc[..., :e], xbc[..., e:e + n], xbc[..., e + n:]
    dt = jax.nn.softplus(dt.astype(jnp.float32) + params.b_dt.astype(jnp.float32))
    A = -jnp.exp(params.A_log.astype(jnp.float32))
    u = u.reshape(b, length, nh, e // nh)
    B, C = B[:, :, None], C[:, :, None]
    if mode == "chunked":
        y = ssd_chunked(u, dt, A, B, C, chunk=min(chunk, length), D=params.D).y
    else:
        y = ssd_sequential(u, dt, A, B, C, D=params.D).y
    y = rms_norm(y.reshape(b, length, e) * jax.nn.silu(z), params.gate_norm)
    return linear(y, params.w_out)


def init_mamba2(key: PRNGKeyArray, d: int, *, expand: int = 2, d_state: int = 16,
                head_dim: int = 16, d_conv: int = 4, dt_min: float = 1e-3,
                dt_max: float = 0.1, n_layers: int = 1, dtype=jnp.float32) -> Mamba2Params:
    """Initial Mamba-2 weights (module docstring).

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
      key: PRNG key.
      d: model width.
      expand, d_state, head_dim, d_conv: inner width factor, state size, channels per
        head (``expand * d`` must be divisible by it), convolution width.
      dt_min, dt_max: range of the initial step sizes.
      n_layers: depth, for the ``1 / sqrt(2 n_layers)`` output scaling.
      dtype: parameter dtype.

    Returns:
      :class:`Mamba2Params`.
    """
    e = expand * d
    if head_dim < 1 or e % head_dim:
        raise ValueError(f"`head_dim` ({head_dim}) must divide the inner width "
                         f"expand * d = {e}")
    nh, c = e // head_dim, e + 2 * d_state
    ks = jax.random.split(key, 5)
    dt = jnp.exp(jax.random.uniform(ks[2], (nh,), jnp.float32) * (math.log(dt_max)
                 - math.log(dt_min)) + math.log(dt_min))
    dt = jnp.maximum(dt, 1e-4)
    b_dt = dt + jnp.log(-jnp.expm1(-dt))  # inverse softplus
    A = jax.random.uniform(ks[3], (nh,), jnp.float32, 1.0, 16.0)
    bound = 1 / math.sqrt(d_conv)
    return Mamba2Params(
        w_in=0.02 * jax.random.normal(ks[0], (d, 2 * e + 2 * d_state + nh), dtype),
        conv_w=jax.random.uniform(ks[1], (d_conv, c), dtype, -bound, bound),
        conv_b=jnp.zeros((c,), dtype),
        b_dt=b_dt.astype(dtype),
        A_log=jnp.log(A).astype(dtype),
        D=jnp.ones((nh,), dtype),
        gate_norm=jnp.ones((e,), dtype),
        w_out=0.02 / math.sqrt(2 * n_layers) * jax.random.normal(ks[4], (e, d), dtype))
