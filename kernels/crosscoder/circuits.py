"""Class circuits of a universal-circuit transcoder: pruning, cross-model intersections,
universal latents, decoder matching and model surgery.

**Pruning** (:func:`prune_sweep`). Latents are ranked by a score (their mean
attribution to the class, :func:`~.attribution.class_attribution`). The candidate
circuits are the prefixes of that ranking of sizes ``n_1 < ... < n_K``; their accuracies
are computed in one ``vmap`` over the ``K`` prefix gates, and the circuit is the smallest
prefix whose accuracy is at least ``frac * full`` (the full replacement model's
accuracy on the class). No Python loop over latents.

**Universal latents** (:func:`universal_latents`): with ``n_m(f)`` the norm of latent
``f``'s decoders into model ``m`` (all its target layers), ``f`` is universal when every
model's share ``n_m / sum_m' n_m'`` is at least ``tau`` (for two models: between
``tau`` and ``1 - tau``).

**Logit effects** (:func:`logit_effects`): the direct effect of latent ``f`` on model
``m``'s centred logits, ``W_dec[m][L_m - 1][s, f] @ (W_head - mean_c W_head)``; it puts the
decoders of models with different activation spaces in one (class) space, where
:func:`match_by_decoder` matches two independently trained dictionaries.

**Surgery** (:func:`surgery_head`): writes class ``c`` into a receiving model ``r`` from
a giving model ``g`` with no gradient step. With ``C`` the giver's circuit for ``c``,
``d_f`` the receiver's last-layer decoder of latent ``f`` and ``a_f`` the latent's effect
on the giver's centred logit ``c`` (above), the new read-out ``w`` solves the ridge
least-squares problem ``min_w sum_{f in C} (w . d_f - a_f)^2 + lam ||w||^2`` (a linear
solve in ``d_r`` unknowns, on transcoder weights only), and the receiver's head column
``c`` becomes ``mean_{j != c} W_r[:, j] + w`` with bias ``mean_{j != c} b_r[j] + a_0 -
w . b_dec_r`` (``a_0``: the giver's centred-logit offset from its decoder bias and head
bias), so that on the transcoder's reconstruction the receiver's centred logit ``c``
equals the giver's circuit-restricted one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ..checks import fail, is_traced
from .cross_model import UCParams, UCSpec, uc_source_mask

__all__ = ["PruneResult", "prefix_gates", "prune_sweep", "select_circuit", "universal_latents",
           "decoder_norms", "logit_effects", "match_by_decoder", "surgery_head",
           "check_circuit"]


class PruneResult(NamedTuple):
    """Outcome of :func:`prune_sweep`.

    Attributes:
      size: the circuit's size (latents kept); the largest size when none qualifies.
      gate: ``(N,)`` 0/1 gate of the circuit (flattened latents).
      accuracies: ``(K,)`` accuracy of every prefix size.
      found: whether some prefix reached ``frac * full``.
    """

    size: Int[Array, ""]
    gate: Float[Array, " N"]
    accuracies: Float[Array, " K"]
    found: Bool[Array, ""]


def prefix_gates(scores: Float[Array, " N"], sizes: Int[Array, " K"]) -> Float[Array, "K N"]:
    """0/1 gates of the ``sizes[k]`` highest-scoring latents (ties: lower index first).

    Differentiable: no: 0/1 gates from a ranking (piecewise constant).

    Args:
      scores: ``(N,)`` attribution score of each latent.
      sizes: ``(K,)`` integer prefix sizes.

    Returns:
      ``(K, N)`` gates in ``scores``' dtype, row ``k`` keeping ``sizes[k]`` latents.
    """
    order = jnp.argsort(-scores, stable=True)
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(scores.shape[0]))
    return (rank[None, :] < sizes[:, None]).astype(scores.dtype)


def _checked_frac(frac):
    """``frac`` in ``(0, 1]``: an error now when it is concrete, at run time when traced."""
    msg = "`frac` must lie in (0, 1]"
    if is_traced(frac):
        return fail(frac, ~((frac > 0) & (frac <= 1)), msg)
    if not 0 < float(frac) <= 1:
        raise ValueError(f"{msg}; got {frac}")
    return frac


def prune_sweep(scores: Float[Array, " N"], accuracy: Callable[[Array], Array],
                sizes: Int[Array, " K"], frac: float, full: Float[Array, ""]) -> PruneResult:
    """The smallest attribution-ordered prefix keeping ``frac`` of ``full`` (module
    docstring).

    Differentiable: no: a discrete selection (size, 0/1 gate, found).

    Args:
      scores: ``(N,)`` per-latent scores (higher is kept first).
      accuracy: ``accuracy(gate (N,)) -> scalar``, vmapped over the sizes.
      sizes: ``(K,)`` increasing prefix sizes in ``[1, N]``.
      frac: the kept fraction, in ``(0, 1]`` (a float, or a traced scalar: checked at
        run time, so one compiled sweep serves every fraction).
      full: the full replacement model's accuracy.

    Returns:
      A :class:`PruneResult`.
    """
    frac = _checked_frac(frac)
    if sizes.ndim != 1 or sizes.shape[0] < 1:
        raise ValueError(f"`sizes` must be a non-empty 1-D array; got shape {sizes.shape}")
    sizes = fail(sizes, (sizes < 1) | (sizes > scores.shape[0]) | jnp.any(jnp.diff(sizes) <= 0),
                 f"`sizes` must increase strictly within [1, {scores.shape[0]}]")
    gates = prefix_gates(scores, sizes)
    return select_circuit(sizes, gates, jax.vmap(accuracy)(gates), frac, full)


def select_circuit(sizes: Int[Array, " K"], gates: Float[Array, "K N"], accs: Float[Array, " K"],
                   frac: float, full: Float[Array, ""]) -> PruneResult:
    """The selection step of :func:`prune_sweep` on precomputed prefix accuracies (for a
    caller that batches the accuracies of many classes in one call; vmappable).

    Differentiable: no: a discrete selection (size, 0/1 gate, found); accs is returned as given.

    Args:
      sizes: ``(K,)`` increasing prefix sizes.
      gates: ``(K, N)`` their gates (:func:`prefix_gates`).
      accs: ``(K,)`` their accuracies.
      frac: the kept fraction, in ``(0, 1]`` (a float or a traced scalar, as in
        :func:`prune_sweep`).
      full: the full replacement model's accuracy.

    Returns:
      A :class:`PruneResult`.
    """
    frac = _checked_frac(frac)
    ok = accs >= frac * full - 1e-6
    first = jnp.argmax(ok)
    found = jnp.any(ok)
    idx = jnp.where(found, first, sizes.shape[0] - 1)
    return PruneResult(sizes[idx], gates[idx], accs, found)


def check_circuit(gate: Float[Array, "*S"], name: str = "gate"):
    """Error naming ``name`` when the 0/1 gate keeps no latent (an empty circuit).

    Differentiable: yes, in gate (returned unchanged, the checks attached).

    Args:
      gate: 0/1 gate, any shape.
      name: the argument's name in the error message.

    Returns:
      ``gate`` (a run-time check attached when traced).

    Raises:
      ValueError: a concrete ``gate`` with no positive entry.
    """
    return fail(gate, ~jnp.any(gate > 0), f"`{name}` is an empty circuit (it keeps no latent); "
                "an empty circuit has no accuracy to compare")


def decoder_norms(params: UCParams, spec: UCSpec) -> Float[Array, "M D F"]:
    """``n[m, s, f]``: the norm of latent ``(s, f)``'s decoders into model ``m``.

    Differentiable: yes, in params.

    Args:
      params: the :class:`~.cross_model.UCParams`.
      spec: its :class:`~.cross_model.UCSpec` (static).

    Returns:
      ``(M, D, F)`` norms, jointly over the layers of each model the latent writes to.
    """
    out = []
    for m, dm in enumerate(spec.depth_map):
        sq = 0.0
        for j in range(len(dm)):
            w = params.W_dec[m][j] * uc_source_mask(spec, m, j)[:, None, None]
            sq = sq + jnp.sum(w ** 2, axis=-1)
        # sqrt with a zero gradient where a latent writes nothing into model m (sqrt's
        # infinite derivative at 0 times the masked decoders' zeros gave NaN)
        out.append(jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0))
    return jnp.stack(out)


def universal_latents(params: UCParams, spec: UCSpec, tau: float = 0.1) -> Bool[Array, "D F"]:
    """Latents whose decoder-norm share is at least ``tau`` in every model.

    Differentiable: no: boolean output.

    Args:
      params: the :class:`~.cross_model.UCParams`.
      spec: its :class:`~.cross_model.UCSpec` (static).
      tau: the minimum share, a Python float in ``[0, 1 / M]``.

    Returns:
      ``(D, F)`` bool: the universal latents (never one that decodes nowhere).

    Raises:
      ValueError: ``tau`` out of range.
    """
    if not 0 <= tau <= 1 / spec.n_models:
        raise ValueError(f"`tau` must lie in [0, 1/{spec.n_models}]; got {tau}")
    n = decoder_norms(params, spec)
    share = n / jnp.maximum(jnp.sum(n, axis=0, keepdims=True), 1e-12)
    return jnp.all(share >= tau, axis=0) & (jnp.sum(n, axis=0) > 0)


def logit_effects(params: UCParams, spec: UCSpec, m: int, W_head: Float[Array, "d C"]
                  ) -> Float[Array, "D F C"]:
    """Direct effect of every latent on model ``m``'s centred logits (module docstring).

    Differentiable: yes, in params and W_head.

    Args:
      params, spec: the transcoder.
      m: the model.
      W_head: ``(d_sites[m][-1], C)``: its linear head.

    Returns:
      ``(D, F, C)``.
    """
    L = len(spec.depth_map[m])
    if W_head.ndim != 2 or W_head.shape[0] != spec.d_sites[m][-1]:
        raise ValueError(f"`W_head` must have shape ({spec.d_sites[m][-1]}, C); got "
                         f"{W_head.shape}")
    Wc = W_head - jnp.mean(W_head, axis=1, keepdims=True)
    W = params.W_dec[m][L - 1] * uc_source_mask(spec, m, L - 1)[:, None, None]
    return W @ Wc


def match_by_decoder(eff_a: Float[Array, "N C"], eff_b: Float[Array, "N2 C"],
                     gate_a: Float[Array, " N"], gate_b: Float[Array, " N2"],
                     threshold: float) -> tuple[Float[Array, " N"], Float[Array, " N2"]]:
    """Latents of circuit ``a`` whose best cosine match (of logit effects) inside circuit
    ``b`` is at least ``threshold``, and vice versa: the decoder-matched intersection of
    two independently trained dictionaries.

    Differentiable: no: 0/1 gates (thresholded cosines).

    Args:
      eff_a: ``(N, C)`` logit effects of dictionary ``a``'s latents.
      eff_b: ``(N2, C)`` logit effects of dictionary ``b``'s latents.
      gate_a: ``(N,)`` 0/1 circuit of ``a``.
      gate_b: ``(N2,)`` 0/1 circuit of ``b``.
      threshold: minimum cosine of a match.

    Returns:
      ``(shared_a, shared_b)``: 0/1 gates over each dictionary's latents.
    """
    def unit(e):
        return e / jnp.maximum(jnp.linalg.norm(e, axis=-1, keepdims=True), 1e-12)

    cos = unit(eff_a) @ unit(eff_b).T  # (N, N2)
    cos = jnp.where((gate_a[:, None] > 0) & (gate_b[None, :] > 0), cos, -jnp.inf)
    sa = (jnp.max(cos, axis=1) >= threshold) & (gate_a > 0)
    sb = (jnp.max(cos, axis=0) >= threshold) & (gate_b > 0)
    return sa.astype(gate_a.dtype), sb.astype(gate_b.dtype)


def surgery_head(params: UCParams, spec: UCSpec, giver: int, receiver: int, cls: int,
                 gate: Float[Array, "D F"], W_head_g: Float[Array, "dg C"],
                 b_head_g: Float[Array, " C"], W_head_r: Float[Array, "dr C"],
                 b_head_r: Float[Array, " C"], ridge: float = 1e-3
                 ) -> tuple[Float[Array, "dr C"], Float[Array, " C"]]:
    """The receiver's new head with class ``cls`` written in (module docstring).

    Differentiable: yes, in params and the four head arrays.

    Args:
      params, spec: the transcoder over (at least) the two models.
      giver, receiver: model indices.
      cls: the class to transfer.
      gate: ``(D, F)`` 0/1: the giver's circuit for ``cls`` (must keep a latent).
      W_head_g, b_head_g: the giver's linear head.
      W_head_r, b_head_r: the receiver's linear head.
      ridge: the ridge ``lam`` (> 0), relative to the mean squared decoder norm.

    Returns:
      ``(W_head_r', b_head_r')`` with column ``cls`` replaced; nothing else changes.
    """
    if giver == receiver:
        raise ValueError("`giver` and `receiver` must be different models")
    C = W_head_r.shape[1]
    if not 0 <= cls < C:
        raise ValueError(f"`cls` must lie in [0, {C}); got {cls}")
    if not ridge > 0:
        raise ValueError(f"`ridge` must be > 0; got {ridge}")
    gate = check_circuit(gate)
    g = gate.reshape(-1)
    others = jnp.arange(C) != cls
    Lr, Lg = len(spec.depth_map[receiver]), len(spec.depth_map[giver])
    # the giver's logit c relative to the mean of its other logits, as a linear read-out
    u = W_head_g[:, cls] - jnp.sum(W_head_g * others, axis=1) / (C - 1)
    u0 = b_head_g[cls] - jnp.sum(b_head_g * others) / (C - 1)
    Wg = params.W_dec[giver][Lg - 1] * uc_source_mask(spec, giver, Lg - 1)[:, None, None]
    a = (Wg @ u).reshape(-1) * g  # (N,) each circuit latent's effect on it
    Dr = (params.W_dec[receiver][Lr - 1] * uc_source_mask(spec, receiver, Lr - 1)[:, None, None]
          ).reshape(-1, W_head_r.shape[0]) * g[:, None]  # (N, dr)
    lam = ridge * jnp.maximum(jnp.sum(Dr ** 2) / jnp.maximum(jnp.sum(g), 1.0), 1e-12)
    w = jnp.linalg.solve(Dr.T @ Dr + lam * jnp.eye(Dr.shape[1], dtype=Dr.dtype), Dr.T @ a)
    a0 = params.b_dec[giver][Lg - 1] @ u + u0
    mean_W = jnp.sum(W_head_r * others, axis=1) / (C - 1)
    mean_b = jnp.sum(b_head_r * others) / (C - 1)
    col = mean_W + w
    bias = mean_b + a0 - w @ params.b_dec[receiver][Lr - 1]
    return W_head_r.at[:, cls].set(col), b_head_r.at[cls].set(bias)
