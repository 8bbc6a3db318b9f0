"""The replacement model of a universal-circuit transcoder and the attribution of its
latents to class logits.

**Replacement model** (:func:`uc_replacement`). Every layer of every model is replaced by
the transcoder, depth by depth: with ``hr[m][0] = h[m][0]`` (the real input),

    z_s          = g_s * sparsify(b_enc[s] + sum_{(m, j): dep(m, j) = s} hr[m][j] W_enc[m][j])
    hr[m][j + 1] = b_dec[m][j] + sum_{s <= dep(m, j)} z_s W_dec[m][j][s] + e[m][j]
    logits_m     = head_m(hr[m][L_m])

for ``s = 0 .. D-1`` (a layer's input is computed at an earlier depth, since the depth
map is strictly increasing). ``g (D, F)`` gates the latents (1: active, 0: ablated; a
circuit is a 0/1 gate). ``e[m][j] = h[m][j + 1] - yhat[m][j]`` are the error terms of the
ordinary (open-loop) forward pass at the real activations, *held fixed*
(:func:`uc_errors`); with them and ``g = 1`` the replacement reproduces the model's
logits exactly, without them (``errors=None``) it is the transcoder alone.
BatchTopK runs as TopK with ``k`` per image here (its per-image inference form).

**Attribution** (:func:`uc_attribution`): activation times gradient of each latent on each
model's centred class logits ``logit_c - mean_j logit_j``, through the replacement model
(downstream latents included, errors fixed):

    A[b, m, c, s, f] = z[b, s, f] * d(centred logit_{m, c}) / d z[b, s, f]
                     = d(centred logit_{m, c}) / d g[s, f]   at g = 1,

one Jacobian per image (``jax.jacrev``), vmapped over images; :func:`class_attribution`
averages it over the images of each class. Reference: Ameisen et al. 2025, "Circuit
tracing" (attribution graphs with frozen error nodes); Universal Circuits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..checks import fail
from .activations import batch_topk, jumprelu, relu, sparsify
from .cross_model import (
    RestFn,
    Sites,
    UCParams,
    UCSpec,
    _check_act,
    check_sites,
    uc_decode,
    uc_encode,
)
from .params import DEFAULT_BANDWIDTH, Activation

__all__ = ["uc_errors", "uc_replacement", "uc_attribution", "class_attribution",
           "centred", "uc_accuracy"]


def centred(logits: Float[Array, "*B C"]) -> Float[Array, "*B C"]:
    """``logits - mean_c logits`` (softmax-invariant).

    Differentiable: yes, in logits.
    """
    return logits - jnp.mean(logits, axis=-1, keepdims=True)


def _act_one_depth(params: UCParams, pre, s: int, activation, k, bandwidth):
    if activation in ("topk", "batch_topk"):
        return sparsify(pre, None, "topk", k, None, bandwidth)[0]
    if activation == "jumprelu":
        return jumprelu(pre, params.log_threshold[s], bandwidth)
    if activation == "relu":
        return relu(pre)
    return batch_topk(pre, k)[0]  # pragma: no cover (checked above)


def uc_errors(params: UCParams, sites: Sites, spec: UCSpec, *, activation: Activation = "topk",
              k: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
              read: Float[Array, " M"] | None = None, live: Float[Array, "D F"] | None = None
              ) -> tuple:
    """``e[m][l] = h[m][l+1] - yhat[m][l]``: the open-loop errors at the real activations
    (BatchTopK as per-image TopK; ``read`` and ``live`` as in
    :func:`~.cross_model.uc_loss`), gradients stopped.

    Differentiable: no: constants by design (stop_gradient: the gradient is 0).

    Args:
      params: the :class:`~.cross_model.UCParams`.
      sites: ``sites[m][t]`` ``(B, d_sites[m][t])``, the recorded activations.
      spec: the :class:`~.cross_model.UCSpec` (static).
      activation, k, bandwidth, read: see :func:`~.cross_model.uc_encode` (BatchTopK runs
        as TopK per image).
      live: optional ``(D, F)`` 0/1 mask of the latents that decode.

    Returns:
      ``e[m][l]``: a tuple per model of tuples per layer of ``(B, d_sites[m][l+1])``
      arrays, with ``stop_gradient`` applied.
    """
    act = "topk" if activation == "batch_topk" else activation
    z = uc_encode(params, sites, spec, activation=act, k=k, bandwidth=bandwidth, read=read)
    yhat = uc_decode(params, z if live is None else z * live, spec)
    return tuple(tuple(jax.lax.stop_gradient(sites[m][j + 1] - yhat[m][j])
                       for j in range(len(dm))) for m, dm in enumerate(spec.depth_map))


def uc_replacement(params: UCParams, sites: Sites, spec: UCSpec, rest_fns: Sequence[RestFn],
                   model_params: Sequence[Any], *, gate: Float[Array, "*#B D F"] | None = None,
                   errors: tuple | None = None, activation: Activation = "topk",
                   k: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
                   read: Float[Array, " M"] | None = None, check: bool = True
                   ) -> tuple[Float[Array, "B D F"], tuple]:
    """The replacement model (module docstring).

    Differentiable: yes, in params, sites and model_params (as rest_fns are; errors are constants).

    Args:
      params: the transcoder.
      sites: ``sites[m][t]`` ``(B, d)``; only the inputs ``sites[m][0]`` are used (and the
        rest through ``errors``).
      spec: its shape.
      rest_fns: per model ``rest(model_params[m], t, h) -> logits``; called with
        ``t = L_m`` (the head).
      model_params: per model, the parameters handed to ``rest_fns``.
      gate: ``(D, F)`` or ``(B, D, F)`` latent gate (default all ones).
      errors: fixed error terms from :func:`uc_errors`, or None (transcoder only).
      activation, k, bandwidth, read: see :func:`~.cross_model.uc_encode`.
      check: check the sites' shapes and values.

    Returns:
      ``(z, logits)``: the gated codes ``(B, D, F)`` and per model ``(B, C_m)`` logits.
    """
    _check_act(activation, k, spec.n_latents)
    if check:
        sites = check_sites(spec, sites)
    if len(rest_fns) != spec.n_models or len(model_params) != spec.n_models:
        raise ValueError(f"`rest_fns` and `model_params` must give each of the "
                         f"{spec.n_models} models")
    B = sites[0][0].shape[0]
    hr = [[sites[m][0]] + [None] * len(dm) for m, dm in enumerate(spec.depth_map)]
    zs = []
    for s in range(spec.n_depths):
        pre = jnp.broadcast_to(params.b_enc[s], (B, spec.n_latents))
        here = [(m, j) for m, j, d in spec.layers() if d == s]
        for m, j in here:
            c = hr[m][j] @ params.W_enc[m][j]
            pre = pre + (c if read is None else read[m] * c)
        z = _act_one_depth(params, pre, s, activation, k, bandwidth)
        if gate is not None:
            z = z * gate[..., s, :]
        zs.append(z)
        for m, j in here:
            y = params.b_dec[m][j] + sum(zs[t] @ params.W_dec[m][j][t] for t in range(s + 1))
            hr[m][j + 1] = y if errors is None else y + errors[m][j]
    logits = tuple(rest_fns[m](model_params[m], len(dm), hr[m][-1])
                   for m, dm in enumerate(spec.depth_map))
    return jnp.stack(zs, axis=1), logits


def uc_attribution(params: UCParams, sites: Sites, spec: UCSpec, rest_fns: Sequence[RestFn],
                   model_params: Sequence[Any], *, activation: Activation = "topk",
                   k: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
                   with_errors: bool = True, read: Float[Array, " M"] | None = None,
                   live: Float[Array, "D F"] | None = None) -> Float[Array, "B M C D F"]:
    """Activation x gradient of every latent on every model's centred class logits, per
    image (module docstring). All models must have the same number of classes ``C``.

    Differentiable: yes, in params, sites and model_params with with_errors=False (the errors are
    constants).

    Args:
      params, sites, spec, rest_fns, model_params: see :func:`uc_replacement`.
      activation, k, bandwidth, read: see :func:`uc_replacement`.
      with_errors: hold the error terms fixed (True) or use the transcoder alone.
      live: optional ``(D, F)`` 0/1 mask of the latents that exist (see
        :func:`~.cross_model.uc_loss`); the attribution is taken at ``g = live``.

    Returns:
      ``A (B, M, C, D, F)``.
    """
    sites = check_sites(spec, sites)
    errors = uc_errors(params, sites, spec, activation=activation, k=k,
                       bandwidth=bandwidth, read=read, live=live) if with_errors else None

    def one(site_row, err_row):
        s1 = jax.tree.map(lambda a: a[None], site_row)
        e1 = None if err_row is None else jax.tree.map(lambda a: a[None], err_row)

        def f(g):
            _, logits = uc_replacement(params, s1, spec, rest_fns, model_params, gate=g,
                                       errors=e1, activation=activation, k=k,
                                       bandwidth=bandwidth, read=read, check=False)
            return jnp.stack([centred(lg)[0] for lg in logits])  # (M, C)

        g0 = jnp.ones((spec.n_depths, spec.n_latents), site_row[0][0].dtype)
        if live is None:
            return jax.jacrev(f)(g0)
        return jax.jacrev(f)(g0 * live) * live  # a latent that does not exist has none

    return jax.vmap(one)(sites, errors)


def class_attribution(attr: Float[Array, "B M C D F"], labels: Int[Array, " B"]
                      ) -> Float[Array, "M C D F"]:
    """Mean attribution to class ``c``'s logit over the images labelled ``c``.

    Differentiable: yes, in attr.

    Args:
      attr: from :func:`uc_attribution`.
      labels: ``(B,)`` integer labels in ``[0, C)``.

    Returns:
      ``S (M, C, D, F)``; an error naming ``labels`` when a class has no image.
    """
    C = attr.shape[2]
    if labels.shape != attr.shape[:1]:
        raise ValueError(f"`labels` must have shape ({attr.shape[0]},); got {labels.shape}")
    onehot = jax.nn.one_hot(labels, C, dtype=attr.dtype)  # (B, C)
    count = jnp.sum(onehot, axis=0)
    count = fail(count, count == 0, "`labels`: some class has no image (a class missing from "
                 "the data), so its circuit is undefined")
    return jnp.einsum("bc,bmcsf->mcsf", onehot, attr) / count[None, :, None, None]


def uc_accuracy(params: UCParams, sites: Sites, labels: Int[Array, " B"], spec: UCSpec,
                rest_fns: Sequence[RestFn], model_params: Sequence[Any],
                gates: Float[Array, "K D F"], *, errors: tuple | None = None,
                activation: Activation = "topk", k: int | None = None,
                bandwidth: float = DEFAULT_BANDWIDTH) -> Float[Array, "K M"]:
    """Accuracy of each model's replacement under each of ``K`` gates (vmapped).

    Differentiable: no: accuracies of argmax predictions (piecewise constant).

    Args:
      params: the transcoder.
      sites: ``sites[m][t]`` ``(B, d)``, as :func:`uc_replacement`.
      labels: ``(B,)`` integer class of each image.
      spec: its :class:`~.cross_model.UCSpec` (static).
      rest_fns: per model ``rest(model_params[m], t, h) -> logits``.
      model_params: per model, the parameters handed to ``rest_fns``.
      gates: ``(K, D, F)`` latent gates, one replacement per gate.
      errors: fixed error terms from :func:`uc_errors`, or None (transcoder only).
      activation, k, bandwidth: see :func:`~.cross_model.uc_encode`.

    Returns:
      ``(K, M)``: the fraction of images whose argmax logit is the label.
    """
    def acc(g):
        _, logits = uc_replacement(params, sites, spec, rest_fns, model_params, gate=g,
                                   errors=errors, activation=activation, k=k,
                                   bandwidth=bandwidth, check=False)
        return jnp.stack([jnp.mean((jnp.argmax(lg, -1) == labels).astype(jnp.float32))
                          for lg in logits])

    return jax.vmap(acc)(gates)
