"""Universal latents calibrated against a null: a latent is universal when both models'
encoders evoke it on the same images, more than a shuffled pairing of latents does.

The decoder-norm share (``kernels.crosscoder.universal_latents``: a share >= tau of the
latent's decoder norm in every model) is passed by every latent of a jointly trained
transcoder, also by one trained on a deliberately misaligned pair (each model's rows
from different images), because every latent is trained to write to both models. This
module asks what the misaligned pair cannot fake: whether the latent's two *readings*
agree on the same inputs.

For a transcoder over models 0 and 1 and inputs ``x_b`` (rows aligned: image ``b`` in
both models), model ``m``'s contribution to the pre-activation of latent ``(s, f)`` is
``e_m[b, s, f] = sum_{j: dep(m, j) = s} h[m][j][b] @ W_enc[m][j][:, f]``. The matched
correlation is ``rho(s, f) = corr_b(e_0[:, s, f], e_1[:, s, f])``; the null is the
*shuffled transcoder*: latent ``f`` of model 0 paired with a different latent ``g != f``
of the same depth of model 1, ``corr_b(e_0[:, s, f], e_1[:, s, g])`` over every such
pair. Latent ``(s, f)`` is universal when ``rho(s, f)`` exceeds the ``1 - alpha`` quantile
of its depth's null, so a transcoder whose two readings are unrelated (the misaligned
pair, random encoders) has about ``alpha`` of its latents universal, and a depth that
only one model reads has none. The shuffled null's own rate (a fresh random pairing per
depth, counted against the same threshold) is reported beside it.

Reference: the Universal Circuits paper (cross-model CLTs; "universal" features shared by
two models); the null construction is jaxkit's own (issue 60).
"""

from __future__ import annotations

import numpy as np

from .results import Universality

__all__ = ["encoder_readings", "read_correlation", "calibrated_universal"]


def encoder_readings(params, spec, inputs) -> list[np.ndarray]:
    """Each model's contribution to every latent's pre-activation.

    Args:
        params: one transcoder's :class:`~jaxkit.kernels.crosscoder.UCParams` (no seed
            axis).
        spec: its :class:`~jaxkit.kernels.crosscoder.UCSpec`.
        inputs: ``inputs[m][j]`` ``(B, d_sites[m][j])``, the layer inputs of model ``m``
            (its sites without the last; extra trailing sites are ignored), the same
            ``B`` rows in every model.

    Returns:
        ``[e_m (B, D, F)]`` per model (zeros at depths the model does not read).
    """
    B = np.asarray(inputs[0][0]).shape[0]
    out = [np.zeros((B, spec.n_depths, spec.n_latents)) for _ in range(spec.n_models)]
    for m, j, s in spec.layers():
        out[m][:, s] += np.asarray(inputs[m][j], np.float64) @ np.asarray(params.W_enc[m][j],
                                                                          np.float64)
    return out


def _standardise(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = e - e.mean(0, keepdims=True)
    sd = np.sqrt((c ** 2).mean(0))
    ok = sd > 1e-9 * np.maximum(np.abs(e).max(0), 1e-30)
    return np.where(ok, c / np.where(ok, sd, 1.0), 0.0), ok


def read_correlation(params, spec, inputs) -> tuple[np.ndarray, np.ndarray]:
    """Per depth, the correlation of model 0's reading of every latent with model 1's
    reading of every latent (module docstring).

    Args:
        params, spec, inputs: as :func:`encoder_readings` (exactly 2 models).

    Returns:
        ``(R (D, F, F), valid (D,))``: ``R[s, f, g] = corr(e_0[:, s, f], e_1[:, s, g])``
        (0 where either reading is constant); ``valid[s]`` is False at a depth that one
        of the models does not read.

    Raises:
        ValueError: naming ``spec`` unless it has 2 models, ``inputs`` with fewer than 3
            rows.
    """
    if spec.n_models != 2:
        raise ValueError(f"`spec` must describe 2 models; got {spec.n_models}")
    B = np.asarray(inputs[0][0]).shape[0]
    if B < 3:
        raise ValueError(f"`inputs` must hold at least 3 rows; got {B}")
    e0, e1 = encoder_readings(params, spec, inputs)
    z0, ok0 = _standardise(e0)
    z1, ok1 = _standardise(e1)
    R = np.einsum("bsf,bsg->sfg", z0, z1) / B
    valid = np.array([s in spec.depth_map[0] and s in spec.depth_map[1]
                      for s in range(spec.n_depths)])
    R = R * (ok0[:, :, None] & ok1[:, None, :])
    return R, valid


def calibrated_universal(R: np.ndarray, valid: np.ndarray, alpha: float, rng
                         ) -> Universality:
    """The universal latents of one transcoder, calibrated on its shuffled null.

    Args:
        R, valid: :func:`read_correlation`.
        alpha: the null's nominal rate, in ``(0, 1)``: the threshold of depth ``s`` is the
            ``1 - alpha`` quantile of ``R[s, f, g]`` over ``f != g``.
        rng: a NumPy generator (the fresh shuffled pairing).

    Returns:
        A :class:`.results.Universality`: ``universal`` (D * F,) bool, ``rho`` (D, F)
        matched correlations, ``threshold`` (D,) (inf at a depth one model does not
        read), ``fraction`` universal over all latents, ``null_fraction`` (the shuffled
        pairing's rate against the same thresholds, over the latents of the depths both
        models read, so comparable with ``alpha``), ``valid_fraction`` (latents at such
        depths) and ``valid_universal_fraction`` (universal among them).

    Raises:
        ValueError: naming ``alpha`` outside ``(0, 1)``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must lie in (0, 1); got {alpha}")
    D, F, _ = R.shape
    rho = np.einsum("sff->sf", R)
    off = ~np.eye(F, dtype=bool)
    thr = np.array([np.quantile(R[s][off], 1 - alpha) if valid[s] and F > 1 else np.inf
                    for s in range(D)])
    univ = (rho > thr[:, None]) & valid[:, None]
    null = []
    for s in np.flatnonzero(valid):
        if F < 2:
            continue
        order = rng.permutation(F)  # pair order[i] with order[i - 1]: never itself
        null.append(np.mean(R[s, order, np.roll(order, 1)] > thr[s]))
    nv = int(valid.sum())
    return Universality(universal=univ.reshape(-1), rho=rho, threshold=thr,
                        fraction=float(univ.mean()),
                        null_fraction=float(np.mean(null)) if null else 0.0,
                        valid_fraction=nv / max(D, 1),
                        valid_universal_fraction=float(univ[valid].mean()) if nv else 0.0)
