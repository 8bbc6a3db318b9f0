"""Cross-model cross-layer transcoders ("Universal Circuits", UCs): one dictionary whose
latents read from the activations of several models and write to later layers of all
of them.

Models ``m = 0..M-1`` are chains of layers. Model ``m`` has ``L_m`` layers and
``L_m + 1`` sites ``h[m][0..L_m]``: ``h[m][0]`` is its input, layer ``l`` maps site
``l`` to site ``l + 1``, and the model's logits are ``head_m(h[m][L_m])``.

**Depth map.** The dictionary has ``D`` depths of ``F`` latents each. ``depth_map[m][l]``
is the depth of layer ``l`` of model ``m``: strictly increasing in ``l`` (so a model
never reads and writes one depth with two of its layers), values in ``[0, D)``, and every
depth is the depth of some layer of some model. Models of different depth are aligned
by this explicit map, e.g. a 2-layer and a 3-layer model with ``((0, 2), (0, 1, 2))``.

**Map.** With ``dep(m, l) = depth_map[m][l]``::

    pre[b, s]      = b_enc[s] + sum_{(m, j): dep(m, j) = s} h[m][j][b] @ W_enc[m][j]
    z[b, s]        = sparsify(pre[b, s])                    (TopK / BatchTopK / JumpReLU)
    yhat[m][j][b]  = b_dec[m][j] + sum_{s <= dep(m, j)} z[b, s] @ W_dec[m][j][s]

so the latents of depth ``s`` read the inputs of both models' layers of depth ``s`` and
write to the outputs of every layer of depth ``>= s`` of both models (the source mask
``s <= dep(m, l)`` is applied in the forward pass).

**Loss** (:func:`uc_loss`)::

    recon    = mean_{(m, j)} FVU(h[m][j+1], yhat[m][j])                 (per target site)
    sparsity = mean_b sum_{s, f} penalty(z[b, s, f]) ||W_dec[., ., s, f]||  (all targets)
    fidelity = mean_{(m, j)} mean_b KL(softmax(logits_m) || softmax(rest_m(j+1, yhat[m][j])))

where ``rest_m(t, h)`` runs model ``m`` from site ``t`` to its logits (gradients flow
through the rest of the model). ``penalty`` is ``z`` (L1), ``tanh(c z)`` or, for JumpReLU,
the straight-through step (L0).

References: Ameisen et al. 2025, "Circuit tracing" (CLTs); Lindsey et al. 2024
(crosscoders across models); the Universal Circuits paper (cross-model CLTs, fidelity).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ..checks import check_finite
from .activations import batch_topk, sparsify, step_ste
from .metrics import fvu_unchecked
from .params import DEFAULT_BANDWIDTH, Activation, check_activation, check_k

__all__ = ["UCSpec", "UCParams", "UCOut", "uc_spec", "uc_init", "uc_source_mask",
           "uc_encode", "uc_decode", "uc_forward", "uc_loss", "check_sites", "kl_logits"]

Sites = Sequence[Sequence[Array]]  # sites[m][t], t = 0..L_m, each (B, d)


class UCSpec(NamedTuple):
    """The static shape of a universal-circuit transcoder (hashable).

    Attributes:
      d_sites: per model, the widths of its sites ``h[m][0..L_m]``.
      depth_map: per model, the depth of each of its ``L_m`` layers.
      n_depths: ``D``.
      n_latents: ``F``, latents per depth.
    """

    d_sites: tuple[tuple[int, ...], ...]
    depth_map: tuple[tuple[int, ...], ...]
    n_depths: int
    n_latents: int

    @property
    def n_models(self) -> int:
        return len(self.d_sites)

    def layers(self) -> list[tuple[int, int, int]]:
        """``(m, l, depth)`` of every layer, models in order."""
        return [(m, j, s) for m, dm in enumerate(self.depth_map) for j, s in enumerate(dm)]


def uc_spec(d_sites: Sequence[Sequence[int]], depth_map: Sequence[Sequence[int]], n_latents: int,
            n_depths: int | None = None) -> UCSpec:
    """Check and build a :class:`UCSpec`.

    Differentiable: no: a static shape from Python values.

    Args:
      d_sites: per model, widths of its ``L_m + 1`` sites (input first).
      depth_map: per model, ``L_m`` depths, strictly increasing, in ``[0, n_depths)``.
      n_latents: ``F`` per depth (>= 1).
      n_depths: ``D`` (default: one more than the largest depth).

    Returns:
      The spec.

    Raises:
      ValueError: naming ``depth_map`` (not monotone, out of range, a depth no layer has,
        length not ``L_m``), ``d_sites`` or ``n_latents``.
    """
    d_sites = tuple(tuple(int(d) for d in ds) for ds in d_sites)
    depth_map = tuple(tuple(int(s) for s in dm) for dm in depth_map)
    if not d_sites or any(len(ds) < 2 for ds in d_sites) or any(d < 1 for ds in d_sites
                                                                  for d in ds):
        raise ValueError("`d_sites` must give each model >= 2 site widths (input and at least "
                         f"one layer output), all >= 1; got {d_sites}")
    if len(depth_map) != len(d_sites):
        raise ValueError(f"`depth_map` must have one entry per model ({len(d_sites)}); got "
                         f"{len(depth_map)}")
    for m, (ds, dm) in enumerate(zip(d_sites, depth_map, strict=True)):
        if len(dm) != len(ds) - 1:
            raise ValueError(f"`depth_map`[{m}] must give a depth to each of the model's "
                             f"{len(ds) - 1} layers; got {dm}")
        if any(b <= a for a, b in zip(dm, dm[1:], strict=False)):
            raise ValueError(f"`depth_map`[{m}] must be strictly increasing (monotone: later "
                             f"layers at later depths); got {dm}")
    D = max(max(dm) for dm in depth_map) + 1 if n_depths is None else int(n_depths)
    used = {s for dm in depth_map for s in dm}
    if min(used) < 0 or max(used) >= D:
        raise ValueError(f"`depth_map` depths must lie in [0, {D}); got {depth_map}")
    if used != set(range(D)):
        raise ValueError(f"`depth_map` leaves depths {sorted(set(range(D)) - used)} without a "
                         f"layer (their latents would read nothing); got {depth_map}")
    if int(n_latents) < 1:
        raise ValueError(f"`n_latents` must be >= 1; got {n_latents}")
    return UCSpec(d_sites, depth_map, D, int(n_latents))


class UCParams(NamedTuple):
    """Parameters of a universal-circuit transcoder.

    Attributes:
      W_enc: ``W_enc[m][l]`` of shape ``(d_sites[m][l], F)``: layer ``l``'s input read
        by the latents of depth ``depth_map[m][j]``.
      b_enc: ``(D, F)``.
      log_threshold: ``(D, F)`` JumpReLU ``log(theta)`` (unused by other activations).
      W_dec: ``W_dec[m][l]`` of shape ``(D, F, d_sites[m][l + 1])``: every source depth
        to layer ``l``'s output (sources deeper than the layer are masked out).
      b_dec: ``b_dec[m][j]`` of shape ``(d_sites[m][j + 1],)``.
    """

    W_enc: tuple
    b_enc: Float[Array, "D F"]
    log_threshold: Float[Array, "D F"]
    W_dec: tuple
    b_dec: tuple


class UCOut(NamedTuple):
    """Loss terms of one batch: ``recon`` (mean FVU over target sites), ``fvu`` per
    target site (layers in :meth:`UCSpec.layers` order), ``kl`` (mean fidelity KL),
    ``sparsity`` (the penalty) and ``l0`` (active latents per image, all depths)."""

    recon: Float[Array, ""]
    fvu: Float[Array, " n_layers"]
    kl: Float[Array, ""]
    sparsity: Float[Array, ""]
    l0: Float[Array, ""]


def uc_source_mask(spec: UCSpec, m: int, j: int) -> Float[Array, " D"]:
    """``1{s <= depth_map[m][l]}`` over source depths ``s``.

    Differentiable: no: a constant 0/1 mask of the static spec.

    Args:
      spec: the transcoder's :class:`UCSpec` (static).
      m: model index (a Python ``int``).
      j: layer index ``l`` within model ``m`` (a Python ``int``).

    Returns:
      ``(D,)`` float32 0/1 mask over the source depths.
    """
    return (jnp.arange(spec.n_depths) <= spec.depth_map[m][j]).astype(jnp.float32)


def uc_init(key: PRNGKeyArray, spec: UCSpec, *, threshold: float = 0.03,
            dtype=jnp.float32) -> UCParams:
    """Gaussian encoders (std ``1/sqrt(sum of the widths a depth reads)``), decoders (std
    ``1/sqrt(D F)``, zero on masked sources), zero biases, JumpReLU threshold
    ``threshold``.

    Differentiable: no: a draw from a key and a static spec.

    Args:
      key: PRNG key.
      spec: the shape.
      threshold: initial JumpReLU threshold (> 0).
      dtype: parameter dtype.

    Returns:
      The :class:`UCParams`.
    """
    if not threshold > 0:
        raise ValueError(f"`threshold` must be > 0; got {threshold}")
    D, F = spec.n_depths, spec.n_latents
    fan = [0] * D
    for m, j, s in spec.layers():
        fan[s] += spec.d_sites[m][j]
    # one standard-normal draw cut into every matrix (one random-bits program to compile)
    shapes = [((spec.d_sites[m][j], F), (D, F, spec.d_sites[m][j + 1]))
              for m, j, _ in spec.layers()]
    total = sum(math.prod(a) + math.prod(b) for a, b in shapes)
    noise, off = jax.random.normal(key, (total,)), 0

    def take(shape):
        nonlocal off
        n = math.prod(shape)
        out = noise[off:off + n].reshape(shape)
        off += n
        return out

    W_enc, W_dec, b_dec = [], [], []
    i = 0
    for m, dm in enumerate(spec.depth_map):
        we, wd, bd = [], [], []
        for j, s in enumerate(dm):
            (enc_shape, dec_shape), i = shapes[i], i + 1
            we.append((take(enc_shape) / math.sqrt(fan[s])).astype(dtype))
            w = take(dec_shape) / math.sqrt(D * F)
            wd.append((w * uc_source_mask(spec, m, j)[:, None, None]).astype(dtype))
            bd.append(jnp.zeros((dec_shape[-1],), dtype))
        W_enc.append(tuple(we))
        W_dec.append(tuple(wd))
        b_dec.append(tuple(bd))
    return UCParams(tuple(W_enc), jnp.zeros((D, F), dtype),
                    jnp.full((D, F), math.log(threshold), dtype), tuple(W_dec), tuple(b_dec))


def check_sites(spec: UCSpec, sites: Sites, name: str = "sites", *, finite: bool = True):
    """Check ``sites[m][t]`` against ``spec``: one entry per model and site, each
    ``(B, d_sites[m][t])`` with the same ``B`` everywhere (activation counts that differ
    between models or sites are an error naming the site), optionally finite.

    Differentiable: yes, in sites (returned unchanged, the checks attached).

    Args:
      spec: the :class:`UCSpec` (static).
      sites: ``sites[m][t]`` ``(B, d_sites[m][t])`` arrays.
      name: the argument's name in error messages.
      finite: also check that every entry is finite.

    Returns:
      ``sites`` as a tuple of tuples (with run-time checks when traced).
    """
    if len(sites) != spec.n_models:
        raise ValueError(f"`{name}` must hold {spec.n_models} models' sites; got {len(sites)}")
    out, B = [], None
    for m, (sm, ds) in enumerate(zip(sites, spec.d_sites, strict=True)):
        if len(sm) != len(ds):
            raise ValueError(f"`{name}`[{m}] must hold {len(ds)} sites; got {len(sm)}")
        row = []
        for t, (h, d) in enumerate(zip(sm, ds, strict=True)):
            shape = tuple(getattr(h, "shape", ()))
            if len(shape) != 2 or shape[1] != d:
                raise ValueError(f"`{name}`[{m}][{t}] must have shape (B, {d}); got {shape}")
            if B is None:
                B = shape[0]
            elif shape[0] != B:
                raise ValueError(f"`{name}`[{m}][{t}] has {shape[0]} activations but "
                                 f"`{name}`[0][0] has {B}: every model and site must hold "
                                 f"the same images in the same order")
            row.append(check_finite(h, f"{name}[{m}][{t}]") if finite else h)
        out.append(tuple(row))
    return tuple(out)


def _check_act(activation, k, F):
    check_activation(activation)
    if activation in ("topk", "batch_topk"):
        check_k(k, F)
    if activation == "threshold":
        raise ValueError("`activation`='threshold' is not supported by the UC; use 'jumprelu'")


def _sparsify(params: UCParams, pre, activation, k, bandwidth):
    if activation == "batch_topk":  # top k * B per depth over the batch
        return jax.vmap(lambda p: batch_topk(p, k)[0], in_axes=1, out_axes=1)(pre)
    return sparsify(pre, params.log_threshold, activation, k, None, bandwidth)[0]


def uc_pre(params: UCParams, inputs: Sequence[Sequence[Array]], spec: UCSpec,
           read: Float[Array, " M"] | None = None) -> Float[Array, "B D F"]:
    """Pre-activations from the layer inputs ``inputs[m][l]`` (``read[m]`` scales model
    ``m``'s contribution: 0 drops it). Arguments unchecked."""
    B = inputs[0][0].shape[0]
    pre = [jnp.broadcast_to(params.b_enc[s], (B, spec.n_latents)) for s in range(spec.n_depths)]
    for m, j, s in spec.layers():
        c = inputs[m][j] @ params.W_enc[m][j]
        pre[s] = pre[s] + (c if read is None else read[m] * c)
    return jnp.stack(pre, axis=1)


def uc_encode(params: UCParams, sites: Sites, spec: UCSpec, *, activation: Activation = "topk",
              k: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
              read: Float[Array, " M"] | None = None, check: bool = True
              ) -> Float[Array, "B D F"]:
    """Latent codes ``z (B, D, F)`` (module docstring) from the recorded sites.

    Differentiable: yes, in params and sites (almost everywhere; straight-through pseudo-gradient in
    JumpReLU's log_threshold, by design).

    Args:
      params: the parameters.
      sites: ``sites[m][t]`` ``(B, d_sites[m][t])`` (only the layer inputs are read).
      spec: the shape.
      activation: ``"topk"`` (k per depth and image), ``"batch_topk"`` (k B per depth
        over the batch), ``"jumprelu"`` or ``"relu"``.
      k: TopK / BatchTopK ``k`` (``1 <= k <= F``).
      bandwidth: JumpReLU straight-through kernel width.
      read: optional ``(M,)`` weights of each model's encoder contribution (``[0, 1]``
        reads model 1 only).
      check: check shapes and finiteness (off inside training losses).

    Returns:
      The codes.
    """
    _check_act(activation, k, spec.n_latents)
    if check:
        sites = check_sites(spec, sites)
    pre = uc_pre(params, [s[:-1] for s in sites], spec, read)
    return _sparsify(params, pre, activation, k, bandwidth)


def uc_decode(params: UCParams, z: Float[Array, "B D F"], spec: UCSpec) -> tuple:
    """``yhat[m][l] (B, d_sites[m][l+1])`` from the codes (module docstring).

    Differentiable: yes, in params and z.

    Args:
      params: the :class:`UCParams`.
      z: ``(B, D, F)`` latent codes (as :func:`uc_encode` returns).
      spec: the :class:`UCSpec` (static).

    Returns:
      ``yhat`` as a tuple (per model) of tuples (per layer) of ``(B, d_sites[m][l+1])``
      arrays.
    """
    out = []
    for m, dm in enumerate(spec.depth_map):
        out.append(tuple(
            jnp.einsum("bsf,sfd->bd", z, params.W_dec[m][j]
                       * uc_source_mask(spec, m, j).astype(z.dtype)[:, None, None])
            + params.b_dec[m][j] for j in range(len(dm))))
    return tuple(out)


def uc_forward(params: UCParams, sites: Sites, spec: UCSpec, **kw) -> tuple[Array, tuple]:
    """``(z, yhat)``: :func:`uc_encode` then :func:`uc_decode`.

    Differentiable: yes, in params and sites (almost everywhere).

    Args:
      params: the :class:`UCParams`.
      sites: ``sites[m][t]`` ``(B, d_sites[m][t])``.
      spec: the :class:`UCSpec` (static).
      **kw: the keywords of :func:`uc_encode` (``activation``, ``k``, ``bandwidth``,
        ``read``, ``check``).

    Returns:
      ``(z, yhat)``: codes ``(B, D, F)`` and the per-model, per-layer predictions.
    """
    z = uc_encode(params, sites, spec, **kw)
    return z, uc_decode(params, z, spec)


def kl_logits(p_logits: Float[Array, "B C"], q_logits: Float[Array, "B C"]) -> Float[Array, ""]:
    """``mean_b KL(softmax(p) || softmax(q))``.

    Differentiable: yes, in p_logits and q_logits.

    Args:
      p_logits: ``(B, C)`` logits of ``p``.
      q_logits: ``(B, C)`` logits of ``q``.

    Returns:
      The scalar mean divergence in nats.
    """
    lp = jax.nn.log_softmax(p_logits, axis=-1)
    lq = jax.nn.log_softmax(q_logits, axis=-1)
    return jnp.mean(jnp.sum(jnp.exp(lp) * (lp - lq), axis=-1))


RestFn = Callable[[Any, int, Array], Array]  # rest(model_params, t, h_t) -> logits


def uc_loss(params: UCParams, sites: Sites, spec: UCSpec, *, rest_fns: Sequence[RestFn] = (),
            model_params: Sequence[Any] = (), activation: Activation = "topk",
            k: int | None = None, bandwidth: float = DEFAULT_BANDWIDTH,
            sparsity_coef: float = 0.0, sparsity: str = "l1", tanh_c: float = 1.0,
            fidelity_coef: float = 0.0, read: Float[Array, " M"] | None = None,
            write: Float[Array, " M"] | None = None, live: Float[Array, "D F"] | None = None
            ) -> tuple[Float[Array, ""], UCOut]:
    """``recon + sparsity_coef * sparsity + fidelity_coef * fidelity`` (module docstring).

    Differentiable: yes, in params (the fidelity term's reference logits are constants by design,
    stop_gradient).

    Args:
      params: the parameters.
      sites: the recorded sites (shapes are checked; values are not: a non-finite value
        shows as a non-finite loss, the training step's ``finite`` flag).
      spec: the shape.
      rest_fns: per model, ``rest(model_params[m], t, h) -> logits``: the model from site
        ``t`` on (needed when ``fidelity_coef > 0``).
      model_params: per model, the (frozen) parameters handed to ``rest_fns``.
      activation, k, bandwidth: see :func:`uc_encode`.
      sparsity_coef: weight of the sparsity penalty (>= 0).
      sparsity: ``"l1"`` or ``"tanh"`` (JumpReLU always uses the straight-through L0).
      tanh_c: the ``c`` of the tanh penalty.
      fidelity_coef: weight of the output-fidelity KL (>= 0).
      read: optional ``(M,)`` weights of each model's encoder contribution (see
        :func:`uc_encode`).
      write: optional ``(M,)`` weights of each model's target sites in the
        reconstruction and fidelity means (``recon = sum_(m, j) write_m FVU / sum write_m``
        over target sites, the KL likewise); ``UCOut.fvu`` stays per site, unweighted.
      live: optional ``(D, F)`` 0/1 mask multiplying the codes (0: the latent is off).
        ``read = write = e_m`` with ``live`` off on the depths model ``m`` has no layer
        at is a single-model CLT of model ``m`` in the shapes of the cross-model one
        (so both train in one compiled program).

    Returns:
      ``(loss, UCOut)``.
    """
    if sparsity not in ("l1", "tanh"):
        raise ValueError(f"`sparsity` must be 'l1' or 'tanh'; got {sparsity!r}")
    if not (sparsity_coef >= 0 and fidelity_coef >= 0):
        raise ValueError(f"`sparsity_coef` and `fidelity_coef` must be >= 0; got "
                         f"{sparsity_coef}, {fidelity_coef}")
    if fidelity_coef > 0 and (len(rest_fns) != spec.n_models
                              or len(model_params) != spec.n_models):
        raise ValueError(f"`rest_fns` and `model_params` must give each of the {spec.n_models} "
                         "models when `fidelity_coef` > 0")
    sites = check_sites(spec, sites, finite=False)
    _check_act(activation, k, spec.n_latents)
    pre = uc_pre(params, [s[:-1] for s in sites], spec, read)
    z = _sparsify(params, pre, activation, k, bandwidth)
    if live is not None:
        z = z * live
    yhat = uc_decode(params, z, spec)
    fvus = jnp.stack([fvu_unchecked(sites[m][j + 1], yhat[m][j]) for m, j, _ in spec.layers()])
    wl = (jnp.ones((len(fvus),), fvus.dtype) if write is None else
          jnp.stack([write[m] for m, _, _ in spec.layers()]).astype(fvus.dtype))
    recon = jnp.sum(wl * fvus) / jnp.maximum(jnp.sum(wl), 1e-12)
    sq = jnp.zeros((spec.n_depths, spec.n_latents), z.dtype)
    for m, j, _ in spec.layers():
        w = params.W_dec[m][j] * uc_source_mask(spec, m, j).astype(z.dtype)[:, None, None]
        sq = sq + jnp.sum(w ** 2, axis=-1)
    norms = jnp.sqrt(sq + 1e-12)
    if activation == "jumprelu":
        act = step_ste(pre, params.log_threshold, bandwidth)
    else:
        act = z if sparsity == "l1" else jnp.tanh(tanh_c * z)
    pen = jnp.mean(jnp.sum(act * norms, axis=(1, 2)))
    kl = jnp.zeros((), z.dtype)
    if fidelity_coef > 0:
        kls = []
        for m, dm in enumerate(spec.depth_map):
            L = len(dm)
            ref = jax.lax.stop_gradient(rest_fns[m](model_params[m], L, sites[m][L]))
            kls += [kl_logits(ref, rest_fns[m](model_params[m], j + 1, yhat[m][j]))
                    for j in range(L)]
        kl = jnp.sum(wl * jnp.stack(kls)) / jnp.maximum(jnp.sum(wl), 1e-12)
    l0 = jnp.mean(jnp.sum((z != 0).astype(z.dtype), axis=(1, 2)))
    loss = recon + sparsity_coef * pen + fidelity_coef * kl
    return loss, UCOut(recon, fvus, kl, pen, l0)
