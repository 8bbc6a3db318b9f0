"""The Mamba-1 mixer (Gu & Dao 2023, Fig. 3), as in mambapy and ``mamba_simple.py``:

.. math::

    [u, z] = x W_{in}, \\quad u \\leftarrow \\mathrm{silu}(\\mathrm{conv}(u)), \\quad
    [\\delta, B, C] = u W_x, \\quad \\Delta = \\mathrm{softplus}(\\delta W_{dt} + b_{dt}),

    y = \\mathrm{scan}(u, \\Delta, -e^{A_{log}}, B, C, D) \\odot \\mathrm{silu}(z), \\quad
    \\mathrm{out} = y W_{out}

with the selective scan of :mod:`jaxkit.kernels.seq.scan`. Initialisation (mambapy,
``mamba_simple.py``): ``A_log = log(1..N)`` (S4D-real), ``D = 1``, ``dt`` log-uniform
in ``[dt_min, dt_max]`` floored at 1e-4 and stored as the inverse-softplus bias.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .conv import causal_conv1d
from .linear import linear
from .scan import selective_scan

__all__ = ["MambaParams", "mamba_mixer", "init_mamba"]


class MambaParams(NamedTuple):
    """Weights of one Mamba mixer (E = expand * D inner channels, R the dt rank)."""

    w_in: Array     # (D, 2E)
    conv_w: Array   # (K, E)
    conv_b: Array   # (E,)
    w_x: Array      # (E, R + 2N)
    w_dt: Array     # (R, E)
    b_dt: Array     # (E,)
    A_log: Array    # (E, N)
    D: Array        # (E,)
    w_out: Array    # (E, D)


def mamba_mixer(params: MambaParams, x: Float[Array, "B L D"], *,
                mode: Literal["sequential", "associative"] = "sequential"
                ) -> Float[Array, "B L D"]:
    """The Mamba mixer (module docstring); ``mode`` picks the scan form (static).

    Differentiable: yes, in params and x.

    Args:
      params: the :class:`MambaParams`.
      x: inputs (batch, length, width).
      mode: "sequential" or "associative".

    Returns:
      (batch, length, width) in ``x``'s dtype.
    """
    if x.ndim != 3 or x.shape[-1] != params.w_in.shape[0]:
        raise ValueError(f"`x` must be (batch, length, {params.w_in.shape[0]}); got {x.shape}")
    e = params.w_out.shape[0]
    r, n = params.w_dt.shape[0], params.A_log.shape[1]
    uz = linear(x, params.w_in)
    u, z = uz[..., :e], uz[..., e:]
    u = jax.nn.silu(causal_conv1d(u, params.conv_w, params.conv_b))
    dbc = linear(u, params.w_x)
    d_low, B, C = dbc[..., :r], dbc[..., r:r + n], dbc[..., r + n:]
    delta = jax.nn.softplus(linear(d_low, params.w_dt).astype(jnp.float32)
                            + params.b_dt.astype(jnp.float32))
    A = -jnp.exp(params.A_log.astype(jnp.float32))
    y = selective_scan(u, delta, A, B, C, params.D, z, mode=mode).y
    return linear(y, params.w_out)


def init_mamba(key: PRNGKeyArray, d: int, *, expand: int = 2, d_state: int = 16,
               d_conv: int = 4, dt_rank: int | None = None, dt_min: float = 1e-3,
               dt_max: float = 0.1, n_layers: int = 1, dtype=jnp.float32) -> MambaParams:
    """Initial Mamba weights (module docstring); ``dt_rank`` defaults to ``ceil(d / 16)``.

    Differentiable: no: a draw from a key and static sizes (no float inputs).

    Args:
      key: PRNG key.
      d: model width.
      expand, d_state, d_conv, dt_rank: inner width factor, state size, convolution
        width, rank of the step-size projection.
      dt_min, dt_max: range of the initial step sizes.
      n_layers: depth, for the ``1 / sqrt(2 n_layers)`` output scaling.
      dtype: parameter dtype.

    Returns:
      :class:`MambaParams`.
    """
    e = expand * d
    r = dt_rank or math.ceil(d / 16)
    ks = jax.random.split(key, 6)

    def uni(k, shape, bound):
        return jax.random.uniform(k, shape, dtype, -bound, bound)

    dt = jnp.exp(jax.random.uniform(ks[4], (e,), jnp.float32) * (math.log(dt_max)
                 - math.log(dt_min)) + math.log(dt_min))
    dt = jnp.maximum(dt, 1e-4)
    b_dt = dt + jnp.log(-jnp.expm1(-dt))  # inverse softplus
    return MambaParams(
        w_in=0.02 * jax.random.normal(ks[0], (d, 2 * e), dtype),
        conv_w=uni(ks[1], (d_conv, e), 1 / math.sqrt(d_conv)),
        conv_b=jnp.zeros((e,), dtype),
        w_x=0.02 * jax.random.normal(ks[2], (e, r + 2 * d_state), dtype),
        w_dt=uni(ks[3], (r, e), r ** -0.5),
        b_dt=b_dt.astype(dtype),
        A_log=jnp.log(jnp.broadcast_to(jnp.arange(1, d_state + 1, dtype=jnp.float32),
                                       (e, d_state))).astype(dtype),
        D=jnp.ones((e,), dtype),
        w_out=0.02 / math.sqrt(2 * n_layers) * jax.random.normal(ks[5], (e, d), dtype))
