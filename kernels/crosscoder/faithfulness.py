"""Faithfulness of a replacement model and of its circuits: how well the transcoder's
replacement model reproduces the model's outputs, and how much of the full replacement
model's behaviour a circuit (a subset of its latents) keeps.

**Output fidelity of the replacement model** (:func:`output_fidelity`). With ``p_b`` the
model's logits on image ``b``, ``q_b`` the replacement model's (every layer replaced by
the transcoder, no error terms: :func:`~.attribution.uc_replacement`) and ``a_b`` the
logits of an ablation baseline (here the model with its last site mean-ablated,
``head(mean_b h_L)``)::

    agreement   = mean_b 1{argmax q_b = argmax p_b}
    kl          = mean_b KL(softmax p_b || softmax q_b)
    kl_fidelity = 1 - kl / mean_b KL(softmax p_b || softmax a_b)

``agreement`` is the measure Ameisen et al. 2025 ("Circuit tracing", the evaluation of
cross-layer transcoders) report for a CLT replacement model: the fraction of inputs on
which its top prediction is the model's. ``kl_fidelity`` is the KL form of the
"fraction of loss recovered" of sparse-dictionary evaluations (Bricken et al. 2023; Gao
et al. 2024): 1 when the replacement reproduces the model's output distribution, 0 when
it is no closer to it than the ablation baseline (negative when it is further).

**Circuit faithfulness** (:func:`circuit_faithfulness`). For a metric ``m(g)`` of the
replacement model under a latent gate ``g`` (here: the centred logit of the circuit's
class on that class's images, or its accuracy), ``1`` the full replacement and ``0``
the empty circuit (every latent ablated: the decoder biases alone)::

    F(C) = (m(C) - m(0)) / (m(1) - m(0))

the normalised faithfulness of Wang et al. 2023 (IOI) and Marks et al. 2024 ("Sparse
feature circuits"): 1 when the circuit does what the full replacement model does, 0
when it does no more than the empty circuit. Where ``|m(1) - m(0)|`` is below ``eps``
the ratio is undefined: ``valid`` is False there and ``F`` is 0.

Everything here is pure and runs eagerly, under ``jit`` and under ``vmap``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["Fidelity", "output_fidelity", "circuit_faithfulness", "kl_per_image"]


class Fidelity(NamedTuple):
    """Output fidelity of a replacement model (module docstring): ``agreement`` (top-1
    agreement with the model), ``kl`` (mean KL from the model's output distribution),
    ``baseline_agreement`` and ``baseline_kl`` (the same for the ablation baseline) and
    ``kl_fidelity`` (``1 - kl / baseline_kl``; 0 where ``baseline_kl`` is 0, with
    ``valid`` False)."""

    agreement: Float[Array, ""]
    kl: Float[Array, ""]
    baseline_agreement: Float[Array, ""]
    baseline_kl: Float[Array, ""]
    kl_fidelity: Float[Array, ""]
    valid: Array


def kl_per_image(p_logits: Float[Array, "B C"], q_logits: Float[Array, "B C"]
                 ) -> Float[Array, " B"]:
    """``KL(softmax(p_b) || softmax(q_b))`` for every row ``b``.

    Differentiable: yes, in p_logits and q_logits.

    Args:
      p_logits: ``(B, C)`` logits of ``p`` (the full model's).
      q_logits: ``(B, C)`` logits of ``q`` (e.g. a replacement's).

    Returns:
      ``(B,)`` divergences in nats.
    """
    lp = jax.nn.log_softmax(p_logits, axis=-1)
    lq = jax.nn.log_softmax(q_logits, axis=-1)
    return jnp.sum(jnp.exp(lp) * (lp - lq), axis=-1)


def _weighted_mean(v, w):
    if w is None:
        return jnp.mean(v)
    w = jnp.asarray(w, v.dtype)
    return jnp.sum(w * v) / jnp.maximum(jnp.sum(w), 1e-12)


def output_fidelity(model_logits: Float[Array, "B C"], replacement_logits: Float[Array, "B C"],
                    baseline_logits: Float[Array, "B C"], weights: Float[Array, " B"] | None = None,
                    eps: float = 1e-12) -> Fidelity:
    """Top-1 agreement and KL fidelity of a replacement model (module docstring).

    Differentiable: yes, in the logits and weights (the top-1 agreement is piecewise constant).

    Args:
      model_logits: the model's logits ``(B, C)``.
      replacement_logits: the replacement model's logits on the same inputs.
      baseline_logits: the ablation baseline's logits (``(B, C)``, or ``(C,)`` for a
        constant baseline such as a mean ablation).
      weights: optional ``(B,)`` weights of the rows (0: padding).
      eps: ``baseline_kl`` at or below this leaves ``kl_fidelity`` undefined (0,
        ``valid`` False).

    Returns:
      The :class:`Fidelity`.
    """
    p, q = model_logits, replacement_logits
    a = jnp.broadcast_to(baseline_logits, p.shape)
    top = jnp.argmax(p, axis=-1)
    agree = _weighted_mean((jnp.argmax(q, axis=-1) == top).astype(p.dtype), weights)
    base_agree = _weighted_mean((jnp.argmax(a, axis=-1) == top).astype(p.dtype), weights)
    kl = _weighted_mean(kl_per_image(p, q), weights)
    base = _weighted_mean(kl_per_image(p, a), weights)
    valid = base > eps
    fid = jnp.where(valid, 1.0 - kl / jnp.where(valid, base, 1.0), 0.0)
    return Fidelity(agree, kl, base_agree, base, fid, valid)


def circuit_faithfulness(metric_circuit: Float[Array, "*S"], metric_full: Float[Array, "*S"],
                         metric_empty: Float[Array, "*S"], eps: float = 1e-9
                         ) -> tuple[Float[Array, "*S"], Array]:
    """``F = (m(C) - m(0)) / (m(1) - m(0))`` elementwise (module docstring).

    Differentiable: yes, in metric_circuit, metric_full and metric_empty.

    Args:
      metric_circuit: the metric under the circuit's gate.
      metric_full: under the full replacement model (every latent on).
      metric_empty: under the empty circuit (every latent off).
      eps: ``|m(1) - m(0)| <= eps`` leaves ``F`` undefined there.

    Returns:
      ``(F, valid)``: ``F`` 0 where ``valid`` is False.
    """
    num = metric_circuit - metric_empty
    den = metric_full - metric_empty
    valid = jnp.abs(den) > eps
    return jnp.where(valid, num / jnp.where(valid, den, 1.0), 0.0), valid
