"""The temporal baselines the temporal-crosscoder paper compares with, as pure losses and
forward passes on :class:`~jaxkit.kernels.crosscoder.Params` (or :class:`TFAParams`).

* **Matryoshka SAE** (Nabeshima 2024; Bussmann et al. 2025, "Learning multi-level
  features with Matryoshka sparse autoencoders"): one TopK dictionary whose nested
  prefixes ``z[:m_1] ⊂ z[:m_2] ⊂ ... ⊂ z[:F]`` must each reconstruct the input,
  ``L = mean_j FVU(x, D z[:m_j] + b)``, so the first latents learn coarse features.
* **Multi-layer crosscoder (MLC)** (Lindsey et al. 2024): an acausal crosscoder whose
  views are the residual stream of ``L`` layers at one token, ``x (B, L, d)``, site
  ``(L,)``; it is the crosscoder of :mod:`.model` on :func:`layer_views`.
* **Temporal SAE (T-SAE)** (Bhalla et al. 2025, "Temporal sparse autoencoders:
  leveraging the sequential nature of language for interpretability"): a per-token TopK
  SAE on pairs of adjacent tokens whose first ``n_high`` ("high-level") latents are
  pulled together across the pair, either by a symmetric InfoNCE contrastive term
  (:func:`contrastive_loss`, cosine similarities over the batch at temperature ``tau``,
  the adjacent token the positive) or a smoothness term (:func:`smoothness_loss`):
  ``L = (FVU(x_t) + FVU(x_{t+1})) / 2 + alpha * C(h_t, h_{t+1})``.
* **Temporal feature analysis (TFA)** (Lubana et al. 2025, "Priors in time: missing
  inductive biases for language model interpretability", arXiv 2511.01836): each token is
  split into a part *predicted* from the earlier tokens of its window and a sparse
  *novel* part. With ``u = x - b`` and ``z_in = relu(lam u E)``, a causal attention over
  the shifted codes ``c_s = z_in[s - 1]`` (``c_0 = 0``) gives ``z_p = relu(attn(q=z_in
  W_q, k=c W_k, v=c W_v) W_o)``; its decoding ``D z_p`` is scaled onto ``u`` by the
  least-squares factor ``a = <D z_p, u> / ||D z_p||^2`` (``z_pred = a z_p``), the
  residual ``u - a D z_p`` is encoded by TopK (``z_novel``) and ``x_hat = (z_pred +
  z_novel) D + b``. The novel codes are the sparse features; the predicted codes are
  dense (a structural advantage on reconstruction, reported apart).

All functions are pure and jit/vmap-able with static ``k``, ``prefixes``, ``n_high``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .activations import (
    _topk as topk,  # unchecked: a loss reports non-finite values by the step flag
)
from .metrics import fvu_unchecked
from .model import decoder_product, encoder_product
from .params import TINY, Params, check_k

__all__ = ["matryoshka_loss", "layer_views", "contrastive_loss", "smoothness_loss",
           "tsae_loss", "TFAParams", "TFAOut", "tfa_init", "tfa_forward", "tfa_loss",
           "tfa_normalize"]


class _Out(NamedTuple):
    fvu: Float[Array, ""]
    l0: Float[Array, ""]


def _check_prefixes(prefixes, F: int) -> tuple[int, ...]:
    p = tuple(int(m) for m in prefixes)
    if not p or any(b <= a for a, b in zip(p, p[1:], strict=False)) or p[0] < 1 or p[-1] != F:
        raise ValueError(f"`prefixes` must increase strictly from >= 1 to n_latents ({F}); "
                         f"got {prefixes}")
    return p


def matryoshka_loss(params: Params, x: Float[Array, "B *site d"], *, k: int,
                    prefixes: tuple[int, ...]) -> tuple[Float[Array, ""], _Out]:
    """Matryoshka TopK loss ``mean_j FVU(x, decode(z * [f < m_j]))`` (module docstring).

    Differentiable: yes, in params and x (almost everywhere: TopK).

    Args:
      params: a dictionary over ``site`` (``(1,)`` for a per-token SAE).
      x: inputs ``(B, *site, d)``.
      k: kept latents (TopK over all ``F``).
      prefixes: the nested sizes ``m_1 < ... < m_J = F`` (static).

    Returns:
      ``(loss, out)``: ``out.fvu`` of the full dictionary and ``out.l0`` per input.
    """
    F = params.W_dec.shape[0]
    k = check_k(k, F)
    prefixes = _check_prefixes(prefixes, F)
    z = topk(encoder_product(params, x), k)
    idx = jnp.arange(F)
    losses = [fvu_unchecked(x, decoder_product(params, jnp.where(idx < m, z, 0.0)))
              for m in prefixes]
    return jnp.mean(jnp.stack(losses)), _Out(losses[-1], jnp.mean(jnp.sum(z != 0, -1)))


def layer_views(hidden: Float[Array, "L *B d"]) -> Float[Array, "*B L d"]:
    """The multi-layer crosscoder's input: the residual streams of ``L`` layers at each
    token as the views ``(*B, L, d)`` (the layer axis moved next to ``d``).

    Differentiable: yes, in hidden.
    """
    return jnp.moveaxis(hidden, 0, -2)


def _unit(h: Array) -> Array:
    """Rows of ``h`` over their norms (floored). The norm of an all-zero row (a token
    none of whose high-level codes fired) is 0 with a zero gradient: ``jnp.linalg.norm``'s
    derivative there is 0/0, which made the whole T-SAE gradient NaN."""
    sq = jnp.sum(h * h, axis=-1, keepdims=True)
    norm = jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)
    return h / jnp.maximum(norm, math.sqrt(TINY))


def contrastive_loss(h0: Float[Array, "B H"], h1: Float[Array, "B H"],
                     tau: float = 0.1) -> Float[Array, ""]:
    """Symmetric InfoNCE of adjacent tokens' high-level codes: with ``S_ij = cos(h0_i,
    h1_j) / tau``, ``(CE(S, diag) + CE(S^T, diag)) / 2`` (van den Oord et al. 2018;
    the T-SAE contrastive term).

    Differentiable: yes, in h0 and h1.

    Args:
      h0: ``(B, H)`` codes of the first tokens.
      h1: ``(B, H)`` codes of the adjacent tokens (row ``i`` pairs with ``h0[i]``).
      tau: the temperature (positive).

    Returns:
      The scalar loss.
    """
    s = _unit(h0) @ _unit(h1).T / tau
    lp0 = jax.nn.log_softmax(s, axis=1)
    lp1 = jax.nn.log_softmax(s, axis=0)
    return -0.5 * (jnp.mean(jnp.diagonal(lp0)) + jnp.mean(jnp.diagonal(lp1)))


def smoothness_loss(h0: Float[Array, "B H"], h1: Float[Array, "B H"]) -> Float[Array, ""]:
    """``sum ||h0 - h1||^2 / sum (||h0||^2 + ||h1||^2)`` (0 for equal codes, 1 for
    orthogonal ones of equal norm; scale-free).

    Differentiable: yes, in h0 and h1.

    Args:
      h0: ``(B, H)`` codes of the first tokens.
      h1: ``(B, H)`` codes of the adjacent tokens.

    Returns:
      The scalar loss.
    """
    num = jnp.sum((h0 - h1) ** 2)
    return num / jnp.maximum(jnp.sum(h0 ** 2) + jnp.sum(h1 ** 2), TINY)


def tsae_loss(params: Params, x: Float[Array, "B 2 d"], *, k: int, n_high: int,
              alpha: float = 0.1, tau: float = 0.1,
              term: str = "contrastive") -> tuple[Float[Array, ""], _Out]:
    """Temporal SAE loss on pairs of adjacent tokens (module docstring).

    Differentiable: yes, in params and x (almost everywhere: TopK).

    Args:
      params: a per-token dictionary (site ``(1,)``).
      x: adjacent pairs ``(B, 2, d)``.
      k: kept latents per token.
      n_high: the high-level latents (the first ``n_high``), ``1 <= n_high <= F``.
      alpha: weight of the temporal term.
      tau: InfoNCE temperature.
      term: ``"contrastive"`` or ``"smooth"``.

    Returns:
      ``(loss, out)`` with the mean per-token FVU and L0.
    """
    F = params.W_dec.shape[0]
    k = check_k(k, F)
    n_high = check_k(n_high, F, "n_high")
    if term not in ("contrastive", "smooth"):
        raise ValueError(f"`term` must be 'contrastive' or 'smooth'; got {term!r}")
    z = [topk(encoder_product(params, x[:, t:t + 1]), k) for t in (0, 1)]
    rec = 0.5 * sum(fvu_unchecked(x[:, t:t + 1], decoder_product(params, z[t]))
                    for t in (0, 1))
    h0, h1 = z[0][:, :n_high], z[1][:, :n_high]
    temporal = contrastive_loss(h0, h1, tau) if term == "contrastive" else \
        smoothness_loss(h0, h1)
    l0 = 0.5 * sum(jnp.mean(jnp.sum(zz != 0, -1)) for zz in z)
    return rec + alpha * temporal, _Out(rec, l0)


# ------------------------------------------------------------------------------- TFA


class TFAParams(NamedTuple):
    """TFA parameters: tied encoder ``E = D^T`` is not enforced (``E`` is its own
    parameter, initialised to ``D^T``).

    Attributes:
      E: encoder ``(d, F)``.
      D: decoder ``(F, d)``, unit-norm rows.
      b: bias ``(d,)``.
      W_q, W_k: attention query / key maps ``(F, a)``.
      W_v, W_o: attention value / output maps ``(F, F)``.
    """

    E: Float[Array, "d F"]
    D: Float[Array, "F d"]
    b: Float[Array, " d"]
    W_q: Float[Array, "F a"]
    W_k: Float[Array, "F a"]
    W_v: Float[Array, "F F"]
    W_o: Float[Array, "F F"]


class TFAOut(NamedTuple):
    z_novel: Float[Array, "B T F"]  # sparse (TopK) codes of the unpredicted part
    z_pred: Float[Array, "B T F"]  # dense codes predicted from the earlier tokens
    x_hat: Float[Array, "B T d"]


def tfa_init(key: PRNGKeyArray, d: int, n_latents: int, *, attn_dim: int | None = None,
             b: Float[Array, " d"] | None = None) -> TFAParams:
    """Random unit-norm decoder rows, ``E = D^T``, attention maps of norm ~1 per output.

    Differentiable: no: a draw from a key and static sizes.

    Args:
      key: PRNG key.
      d: feature size.
      n_latents: ``F``.
      attn_dim: query/key size ``a`` (default ``max(F // 8, 4)``).
      b: initial bias (default zeros; pass a data mean or median).

    Returns:
      :class:`TFAParams` (float32).
    """
    F = check_k(n_latents, None, "n_latents")
    a = attn_dim or max(F // 8, 4)
    kd, kq, kk, kv, ko = jax.random.split(key, 5)
    D = jax.random.normal(kd, (F, d))
    D = D / jnp.linalg.norm(D, axis=-1, keepdims=True)
    def nrm(k_, shape):
        return jax.random.normal(k_, shape) / math.sqrt(shape[0])
    return TFAParams(E=D.T, D=D, b=jnp.zeros((d,)) if b is None else jnp.asarray(b),
                     W_q=nrm(kq, (F, a)), W_k=nrm(kk, (F, a)), W_v=nrm(kv, (F, F)),
                     W_o=nrm(ko, (F, F)))


def tfa_forward(params: TFAParams, x: Float[Array, "B T d"], *, k: int,
                lam: float = 1.0) -> TFAOut:
    """TFA forward over windows ``x (B, T, d)`` (module docstring): the prediction at
    position ``t`` attends to the codes of positions ``0 .. t - 1`` only.

    Differentiable: yes, in params and x (almost everywhere: TopK).

    Args:
      params: :class:`TFAParams`.
      x: windows.
      k: kept novel latents per token.
      lam: input scale of the code maps ``relu(lam u E)``.

    Returns:
      :class:`TFAOut`.
    """
    p = params
    k = check_k(k, p.D.shape[0])
    u = x - p.b
    z_in = jax.nn.relu(lam * u @ p.E)
    ctx = jnp.concatenate([jnp.zeros_like(z_in[:, :1]), z_in[:, :-1]], axis=1)
    q, kk, v = z_in @ p.W_q, ctx @ p.W_k, ctx @ p.W_v
    T = x.shape[1]
    logits = jnp.einsum("bta,bsa->bts", q, kk) / math.sqrt(p.W_q.shape[-1])
    causal = jnp.tril(jnp.ones((T, T), bool))
    attn = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1)
    zp = jax.nn.relu(jnp.einsum("bts,bsf->btf", attn, v) @ p.W_o)
    dz = zp @ p.D
    a = jnp.sum(dz * u, -1, keepdims=True) / (jnp.sum(dz ** 2, -1, keepdims=True) + 1e-6)
    z_pred = zp * a
    z_novel = topk(jax.nn.relu(lam * (u - a * dz) @ p.E), k)
    return TFAOut(z_novel, z_pred, (z_pred + z_novel) @ p.D + p.b)


def tfa_loss(params: TFAParams, x: Float[Array, "B T d"], *, k: int,
             lam: float = 1.0) -> tuple[Float[Array, ""], _Out]:
    """FVU of the TFA reconstruction over the windows; ``out.l0`` counts the novel
    codes per window.

    Differentiable: yes, in params and x (almost everywhere: TopK).

    Args:
      params: :class:`TFAParams`.
      x: ``(B, T, d)`` windows.
      k: kept novel latents per token (a static Python ``int``).
      lam: input scale of the code maps, as :func:`tfa_forward`.

    Returns:
      ``(loss, out)``: the scalar FVU and the named terms ``(fvu, l0)``.
    """
    o = tfa_forward(params, x, k=k, lam=lam)
    rec = fvu_unchecked(x, o.x_hat)
    return rec, _Out(rec, jnp.mean(jnp.sum(o.z_novel != 0, (-2, -1))))


def tfa_normalize(params: TFAParams) -> TFAParams:
    """Decoder rows back to unit norm (the post-update projection).

    Differentiable: yes, in params.
    """
    return params._replace(D=params.D / jnp.maximum(
        jnp.linalg.norm(params.D, axis=-1, keepdims=True), math.sqrt(TINY)))
