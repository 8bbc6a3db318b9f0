"""Language-model loss recovered: a dictionary's reconstruction spliced back into the
residual stream of the model it was trained on.

For documents of ``S = L + 1`` tokens (position 0 is context only, as recorded) the
residual stream after block ``layer`` at positions ``p >= 1 + start`` is replaced by the
reconstruction of token ``p`` from the window of ``T`` tokens ending at it (the window's
last slot; per-token methods decode the token itself, ``sae_kT`` with ``k T`` latents),
in recorded units times ``scale``; the model runs on. Over the next-token predictions
made at those positions:

* ``ce_clean``, ``ce_spliced``, ``ce_zero``: mean cross-entropy (nats) of the clean model,
  the spliced one, and with the stream zero-ablated at the same positions;
* ``kl``: mean ``KL(p_clean || p_spliced)`` per prediction;
* ``loss_recovered = (ce_zero - ce_spliced) / (ce_zero - ce_clean)`` (1: the splice costs
  nothing; 0: as bad as deleting the stream).

These are SAELens' "CE loss score" and sparsify's spliced cross-entropy and KL. The
multi-layer crosscoder reads the stream of other layers, which a single splice does not
give it; it is left out (structural). ``start`` is the same for every window, so each
method is scored on the same predictions.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import crosscoder as cc
from jaxkit.lm import model as M

from . import baselines as B
from .results import SpliceLoss

__all__ = ["token_reconstruction", "splice_losses", "loss_recovered", "SPLICE_METHODS"]

SPLICE_METHODS = ("sae", "stacked", "acausal", "tc", "sae_kT", "matryoshka", "tsae", "tfa")


def token_reconstruction(method: str, params, x: jax.Array, cfg) -> jax.Array:
    """``(B, L, d)``: token ``t``'s reconstruction from the window of ``cfg.window``
    tokens ending at it (its last slot); tokens ``t < T - 1`` keep ``x``."""
    Bn, L, d = x.shape
    T = cfg.window
    if method not in SPLICE_METHODS:
        raise ValueError(f"`method` must be one of {SPLICE_METHODS}; got {method!r}")
    idx = jnp.arange(L - T + 1)[:, None] + jnp.arange(T)
    win = x[:, idx].reshape(-1, T, d)
    z, xh = B.window_codes(method, params, win, cfg)
    if xh is None:  # sae_kT: the token's own code
        last = cc.decode(params, z)[:, 0]
    else:
        last = xh[:, -1]
    last = last.reshape(Bn, L - T + 1, d)
    return jnp.concatenate([x[:, :T - 1], last.astype(x.dtype)], 1)


@functools.partial(jax.jit, static_argnames=("method", "cfg", "layer", "start"))
def _sums(module, tokens, w, params, scale, *, method, cfg, layer, start):
    S = tokens.shape[1]
    keep = (jnp.arange(S) >= 1 + start)[None, :, None]

    def fn(r):
        x = r[:, 1:].astype(jnp.float32) / scale
        new = (jnp.zeros_like(x) if method == "zero"
               else token_reconstruction(method, params, x, cfg) * scale)
        full = jnp.concatenate([r[:, :1], new.astype(r.dtype)], 1)
        return jnp.where(keep, full, r)

    clean, _ = M.forward(module, tokens)
    spliced, _ = M.forward(module, tokens, replace={layer: fn})
    lc = jax.nn.log_softmax(clean[:, :-1].astype(jnp.float32), -1)
    ls = jax.nn.log_softmax(spliced[:, :-1].astype(jnp.float32), -1)
    tgt = tokens[:, 1:, None]
    m = (jnp.arange(S - 1) >= 1 + start)[None, :] * w[:, None]
    nc = -jnp.take_along_axis(lc, tgt, -1)[..., 0]
    ns = -jnp.take_along_axis(ls, tgt, -1)[..., 0]
    kl = jnp.sum(jnp.exp(lc) * (lc - ls), -1)
    return jnp.stack([jnp.sum(nc * m), jnp.sum(ns * m), jnp.sum(kl * m),
                      jnp.sum(m).astype(jnp.float32)])


def splice_losses(lm, layer: int, scale: float, tokens: np.ndarray, method: str, params,
                  cfg, *, start: int, batch: int = 4) -> SpliceLoss:
    """The :class:`~jaxkit.tempbench.results.SpliceLoss` (``ce_clean``, ``ce_spliced``,
    ``kl``; module docstring) of one dictionary on
    documents ``tokens (n, L + 1)`` (``method="zero"``: zero ablation, ``params`` unused).

    Args:
      lm: the :class:`jaxkit.lm.LanguageModel` whose stream was recorded.
      layer: the recorded block.
      scale: recorded units -> model units.
      tokens: documents with their context token first.
      method: a method of :data:`SPLICE_METHODS`, or ``"zero"``.
      params: the dictionary.
      cfg: its :class:`jaxkit.tempbench.train.TrainConfig` (window and k).
      start: positions ``1 + start ..`` are replaced (``start >= cfg.window - 1``).
      batch: documents per call (the last batch padded: one compiled shape).
    """
    tokens = np.asarray(tokens, np.int32)
    if tokens.ndim != 2 or tokens.shape[1] < start + 3:
        raise ValueError(f"`tokens` must be (n, L + 1) with L > start + 1; got "
                         f"{tokens.shape} and start {start}")
    if method != "zero" and start < cfg.window - 1:
        raise ValueError(f"`start` ({start}) must be >= window - 1 ({cfg.window - 1})")
    tot = np.zeros(4)
    for i in range(0, len(tokens), batch):
        rows = tokens[i:i + batch]
        w = np.ones(batch)  # padded rows weigh 0
        if len(rows) < batch:
            w[len(rows):] = 0
            rows = np.concatenate([rows, np.repeat(rows[-1:], batch - len(rows), 0)])
        tot += np.asarray(_sums(lm.module, jnp.asarray(rows), jnp.asarray(w, jnp.float32),
                                params, jnp.float32(scale), method=method, cfg=cfg,
                                layer=int(layer), start=int(start)), np.float64)
    n = max(tot[3], 1.0)
    return SpliceLoss(ce_clean=tot[0] / n, ce_spliced=tot[1] / n, kl=tot[2] / n)


def loss_recovered(ce_clean: float, ce_spliced: float, ce_zero: float) -> float:
    """``(ce_zero - ce_spliced) / (ce_zero - ce_clean)`` (nan when ablation costs
    nothing)."""
    den = ce_zero - ce_clean
    return float((ce_zero - ce_spliced) / den) if den > 0 else float("nan")
