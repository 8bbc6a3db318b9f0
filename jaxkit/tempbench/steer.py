"""Steering a language model with a dictionary latent: its decoder atom written into the
residual stream over the window ending at a position, and the change in the model's
log-probability of a target token there.

:func:`atom_of` is a latent's write direction as a ``(T, d)`` window pattern (zeros at the
positions it does not write to); :func:`steer_deltas` rescales atoms to a fixed norm and
places them; :func:`target_logprob` runs a :class:`jaxkit.lm.LanguageModel`'s module with
the deltas added to the output of block ``layer`` (:func:`jaxkit.lm.model.forward`'s
``replace``) and reads ``log p(target | x_{<=pos})``. The backtracking test
(:mod:`jaxkit.tempbench.backtracking`) steers towards the correction token (" Wait").

Reference: the steering experiment of "Crosscoding Through Time" (inducing backtracking
by adding a latent), activation addition (Turner et al. 2023).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.lm import model as M

__all__ = ["STEER_METHODS", "atom_of", "steer_deltas", "target_logprob"]

STEER_METHODS = ("sae", "stacked", "acausal", "tc", "sae_kT", "matryoshka", "tsae", "tfa")


def atom_of(method: str, params, column: int, window: int) -> np.ndarray:
    """The write direction ``(T, d)`` of representation column ``column`` of ``method``
    (:func:`jaxkit.tempbench.baselines.window_codes`), zeros at the positions it does
    not write to."""
    T = window
    if method in ("tc", "acausal"):
        return np.asarray(params.W_dec[column], np.float32)
    if method == "tfa":
        d = params.D.shape[-1]
        p, f = divmod(column, params.D.shape[0])
        out = np.zeros((T, d), np.float32)
        out[p] = np.asarray(params.D[f])
        return out
    W = np.asarray(params.W_dec, np.float32)
    out = np.zeros((T, W.shape[-1]), np.float32)
    if method == "sae_kT":
        out[-1] = W[column, 0]
    elif method == "stacked":  # W (T, F, 1, d)
        p, f = divmod(column, W.shape[1])
        out[p] = W[p, f, 0]
    elif method in ("sae", "matryoshka", "tsae"):
        p, f = divmod(column, W.shape[0])
        out[p] = W[f, 0]
    else:
        raise ValueError(f"`method` must be one of {STEER_METHODS}; got {method!r}")
    return out


def steer_deltas(atom: np.ndarray, where: list[tuple[int, int]], L: int, norm: float
                 ) -> np.ndarray:
    """``(N, L, d)``: ``atom (T, d)`` rescaled to Frobenius norm ``norm`` and placed on
    the window ending at position ``t`` for each ``(row, t)`` of ``where`` (``t >= T - 1``)."""
    T, d = atom.shape
    a = atom / max(float(np.linalg.norm(atom)), 1e-12) * norm
    out = np.zeros((len(where), L, d), np.float32)
    for n, (_, t) in enumerate(where):
        if t < T - 1:
            raise ValueError(f"`where`: position {t} has no full window of {T} tokens")
        out[n, t - T + 1:t + 1] = a
    return out


@functools.partial(jax.jit, static_argnames=("layer",))
def _target_logprob(module, tokens, delta, pos, target, *, layer):
    def add(r):
        return r + delta.astype(r.dtype)

    logits, _ = M.forward(module, tokens, replace={layer: add})
    lp = jax.nn.log_softmax(logits[jnp.arange(tokens.shape[0]), pos].astype(jnp.float32), -1)
    return lp[jnp.arange(tokens.shape[0]), target]


def target_logprob(lm, layer: int, tokens: np.ndarray, delta: np.ndarray, pos: np.ndarray,
                   target: np.ndarray, batch: int = 8) -> np.ndarray:
    """``log p(target_i | tokens_i[:pos_i + 1])`` with ``delta (N, S, d)`` (model units)
    added to block ``layer``'s output of ``lm`` (a :class:`jaxkit.lm.LanguageModel`):
    ``(N,)`` float64, ``batch`` rows per call (the last padded: one compiled shape)."""
    tokens, delta = np.asarray(tokens, np.int32), np.asarray(delta, np.float32)
    pos, target = np.asarray(pos, np.int32), np.asarray(target, np.int32)
    N = len(tokens)
    out = []
    for i in range(0, N, batch):
        sl = slice(i, i + batch)
        m = len(tokens[sl])
        pad = batch - m

        def fill(a, pad=pad):
            return np.concatenate([a, np.repeat(a[-1:], pad, 0)]) if pad else a
        out.append(np.asarray(_target_logprob(
            lm.module, jnp.asarray(fill(tokens[sl])), jnp.asarray(fill(delta[sl])),
            jnp.asarray(fill(pos[sl])), jnp.asarray(fill(target[sl])), layer=int(layer)),
            np.float64)[:m])
    return np.concatenate(out) if out else np.zeros(0)
