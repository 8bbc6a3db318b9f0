"""``fit``: train a (temporal) crosscoder on an in-memory activation array.

Training examples are windows of ``window`` consecutive positions; the batch of step
``i`` is drawn with replacement on the device from that step's key (``fold_in(key, i)``),
so it is a function of ``i`` and a resumed run replays it. The loop is the crosscoder
trainer's (:func:`jaxkit.crosscoder.train.run`, on :func:`jaxkit.training.fit`): the
divergence guard, optional checkpoints and exact resume. With a ``mesh``, each batch is
sharded over its ``data`` axis and XLA inserts the collectives; the result matches the
single-device run to float tolerance.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, PRNGKeyArray

from jaxkit import optim
from jaxkit.kernels import crosscoder as cc

from .train import run

__all__ = ["FitResult", "FitInfo", "fit", "encode", "decode", "make_windows"]


class FitResult(NamedTuple):
    """What :func:`fit` returns.

    Attributes:
      params: the parameters (``W_dec (n_latents, window, d)``) in the units of ``data``.
      history: NumPy arrays per metric, one entry per logged point (every ``log_every``
        steps and the last): ``step``, ``loss``, ``fvu``, ``aux_loss``, ``l0`` (means
        over the steps since the previous point) and ``dead_fraction`` (at the point).
        A resumed run records every point, those before the checkpoint included.
      config: the resolved settings.
      threshold: the BatchTopK inference threshold in data units (0 for other
        activations).
      state: the final :class:`~jaxkit.kernels.crosscoder.TrainState` (training units).
    """

    params: cc.Params
    history: dict[str, np.ndarray]
    config: dict[str, Any]
    threshold: float
    state: cc.TrainState


class FitInfo(NamedTuple):
    """What a step of :func:`fit` reports: means since the last logged point of the
    loss terms, the dead fraction after the step, and the step's finiteness flag."""

    loss: Array
    fvu: Array
    aux_loss: Array
    l0: Array
    dead_fraction: Array
    finite: Array


def _as_sequences(data, window: int):
    """Validate ``data`` and return it as ``(n_seq, T, d)`` float32."""
    if not hasattr(data, "ndim"):
        data = np.asarray(data)
    if data.ndim not in (2, 3):
        raise ValueError(f"`data` must have shape (N, d) or (N, T, d); got shape "
                         f"{tuple(data.shape)}")
    if isinstance(window, bool) or not isinstance(window, int | np.integer) or window < 1:
        raise ValueError(f"`window` must be an int >= 1; got {window!r}")
    if not jnp.issubdtype(data.dtype, jnp.floating):
        raise ValueError(f"`data` must be floating point; got dtype {data.dtype}")
    if not bool(jnp.all(jnp.isfinite(data))):
        raise ValueError("`data` contains NaN or inf values")
    seqs = data[None] if data.ndim == 2 else data
    T = seqs.shape[1]
    if window > T:
        what = "rows N" if data.ndim == 2 else "positions T"
        raise ValueError(f"`window` ({window}) exceeds the number of {what} ({T})")
    if min(seqs.shape) < 1:
        raise ValueError(f"`data` is empty; got shape {tuple(data.shape)}")
    return jnp.asarray(seqs, jnp.float32)


def make_windows(
    seqs: Float[Array, "n T d"], idx: Array, window: int
) -> Float[Array, "B window d"]:
    """Gather windows: example ``i`` is ``seqs[i // P, i % P : i % P + window]`` with
    ``P = T - window + 1`` start positions per sequence.

    Args:
      seqs: ``(n, T, d)`` sequences.
      idx: example indices in ``[0, n P)``.
      window: positions per window.

    Returns:
      The ``(len(idx), window, d)`` windows.
    """
    P = seqs.shape[1] - window + 1
    row, start = idx // P, idx % P
    return seqs[row[:, None], start[:, None] + jnp.arange(window)]


def fit(
    key: PRNGKeyArray,
    data: Float[Array, "N *T d"],
    *,
    n_latents: int,
    k: int | None,
    window: int = 1,
    activation: cc.Activation = "topk",
    steps: int,
    batch_size: int,
    lr: float = 1e-3,
    optimizer: optax.GradientTransformation | None = None,
    k_aux: int | None = None,
    dead_steps: int | None = None,
    sparsity_coef: float = 0.0,
    sparsity: str | None = None,
    bandwidth: float = cc.DEFAULT_BANDWIDTH,
    clip_norm: float | None = None,
    init_threshold: float = 1e-3,
    normalize: bool = True,
    log_every: int = 100,
    mesh: Mesh | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    keep: int = 2,
    resume: bool = False,
) -> FitResult:
    """Train a crosscoder on windows of ``window`` consecutive positions of ``data``.

    With ``normalize`` the data are divided by their RMS during training and the scale is
    folded back into the returned parameters exactly (TopK, ReLU and JumpReLU are
    positively homogeneous), so the hyper-parameters do not depend on the data units.

    Args:
      key: PRNG key of the initialisation and the batches.
      data: ``(N, d)`` (rows form one sequence; windows slide over rows) or ``(N, T, d)``
        (windows slide within each sequence); finite floats.
      n_latents: dictionary size.
      k: kept latents for TopK / BatchTopK (``1 <= k <= n_latents``).
      window: positions per window.
      activation: see :func:`jaxkit.kernels.crosscoder.make_train_step`.
      steps: number of steps.
      batch_size: windows per step.
      lr: Adam learning rate (unless ``optimizer`` is given).
      optimizer: an optax optimizer instead of Adam at ``lr`` (:func:`jaxkit.optim.optimizer`).
      k_aux: AuxK latents (``<= n_latents``); default ``min(2k, n_latents)`` for
        TopK/BatchTopK, AuxK off otherwise.
      dead_steps: the dead-latent rule; default ``clip(steps // 10, 1, 1000)``.
      sparsity_coef: sparsity penalty weight.
      sparsity: default ``"l0"`` for JumpReLU and ``"l1"`` otherwise (it only acts with
        ``sparsity_coef > 0``).
      bandwidth: JumpReLU kernel width.
      clip_norm: global gradient-norm clip.
      init_threshold: initial JumpReLU threshold.
      normalize: train on ``data / RMS(data)``.
      log_every: steps between history points (and the divergence check).
      mesh: a mesh with a ``data`` axis (:func:`jaxkit.distributed.make_mesh`) over which
        each batch is sharded; ``batch_size`` must be divisible by its size (the
        parameters stay replicated; for latents sharded over ``model`` use
        :func:`jaxkit.crosscoder.train`).
      checkpoint_dir: checkpoint folder (``None``: no checkpoints).
      checkpoint_every: steps between checkpoints (and one at the end).
      keep: checkpoints kept.
      resume: continue from the newest checkpoint of ``checkpoint_dir`` (same settings
        and data; ``steps`` may grow).

    Returns:
      A :class:`FitResult`.

    Raises:
      ValueError: bad arguments or data, an incompatible checkpoint, or parameters that
        overflow the data's dtype once scaled back to its units (data near its largest
        value).
      jaxkit.training.TrainingDiverged: a step was not finite.
    """
    seqs = _as_sequences(data, window)
    n_seq, T, d = seqs.shape
    cc.check_activation(activation)
    for name, v in (("n_latents", n_latents), ("steps", steps), ("batch_size", batch_size),
                    ("log_every", log_every), ("checkpoint_every", checkpoint_every),
                    ("keep", keep)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {v!r}")
    if activation in ("topk", "batch_topk"):
        k = cc.check_k(k, int(n_latents))
    if optimizer is None and not lr > 0:
        raise ValueError(f"`lr` must be > 0; got {lr}")
    if mesh is not None:
        if "data" not in mesh.axis_names:
            raise ValueError(f"`mesh` needs a 'data' axis; got axes {mesh.axis_names}")
        n_data = mesh.shape["data"]
        if batch_size % n_data:
            raise ValueError(f"`batch_size` ({batch_size}) must be divisible by the mesh "
                             f"'data' axis size ({n_data})")
        seqs = jax.device_put(seqs, NamedSharding(mesh, PartitionSpec()))
    if k_aux is None and activation in ("topk", "batch_topk"):
        k_aux = min(2 * k, n_latents)
    elif k_aux is not None:
        k_aux = cc.check_k(k_aux, int(n_latents), "k_aux")
    if sparsity is None:
        sparsity = "l0" if activation == "jumprelu" else "l1"
    if dead_steps is None:
        dead_steps = int(min(max(steps // 10, 1), 1000))
    scale = 1.0
    if normalize:  # RMS = m sqrt(mean((x / m)^2)), m = max |x|: no overflow of x^2 (1e30)
        big = float(jnp.max(jnp.abs(seqs)))
        scale = big * float(jnp.sqrt(jnp.mean((seqs / big) ** 2))) if big > 0 else 1.0
        scale = scale if scale > 0 else 1.0
    P = T - window + 1
    n_examples = n_seq * P
    k_init, k_sample, k_run = jax.random.split(key, 3)
    spec = (("adam", float(lr)) if optimizer is None else optimizer, activation, k,
            float(sparsity_coef), sparsity, float(bandwidth), k_aux, int(dead_steps), clip_norm,
            int(batch_size), int(window), int(log_every), mesh)
    try:
        init_state, jstep = _runner(*spec)
    except TypeError:  # an unhashable optimizer: build without the cache
        init_state, jstep = _runner.__wrapped__(*spec)

    def make_state():
        sample_idx = jax.random.randint(k_sample, (min(n_examples, 2048),), 0, n_examples)
        sample = make_windows(seqs, sample_idx, window) / scale
        params = cc.init(k_init, d, n_latents, site=(window,), sample=sample,
                         activation=activation, init_threshold=init_threshold)
        state = (init_state(params), jnp.zeros((4,), jnp.float32))
        if mesh is not None:
            state = jax.device_put(state, NamedSharding(mesh, PartitionSpec()))
        return state

    config = dict(n_latents=n_latents, k=k, window=window, activation=activation,
                  steps=steps, batch_size=batch_size, lr=lr, k_aux=k_aux,
                  dead_steps=dead_steps, sparsity_coef=sparsity_coef, sparsity=sparsity,
                  bandwidth=bandwidth, clip_norm=clip_norm, init_threshold=init_threshold,
                  scale=scale, log_every=log_every,
                  mesh=None if mesh is None else dict(mesh.shape))
    saved = dict(config, optimizer="adam" if optimizer is None else "custom",
                 data_shape=list(seqs.shape), normalize=bool(normalize))
    batch = (seqs, jnp.float32(scale), jnp.int32(n_examples))
    out = run(k_run, make_state, jstep, lambda i: batch, steps=int(steps), config=saved,
              checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, keep=keep,
              resume=resume, log_every=int(log_every))
    state = out.state[0]
    p = state.params
    params = p._replace(b_enc=p.b_enc * scale, b_dec=p.b_dec * scale,
                        log_threshold=p.log_threshold + math.log(scale))
    threshold = float(state.aux.threshold) * scale if activation == "batch_topk" else 0.0
    if not all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree_util.tree_leaves(params)) \
            or not math.isfinite(threshold):
        raise ValueError(f"`data` at scale {scale:.3g} (its RMS): the trained parameters "
                         f"scaled back to the data's units overflow {seqs.dtype}; divide "
                         f"`data` by a constant first")
    names = ("step", "loss", "fvu", "aux_loss", "l0", "dead_fraction")
    history = {m: np.asarray([h[m] for h in out.full_history]) for m in names}
    history["step"] = history["step"].astype(np.int64)
    return FitResult(params=params, history=history, config=config, threshold=threshold,
                     state=state)


@functools.lru_cache(maxsize=16)
def _runner(optimizer, activation, k, sparsity_coef, sparsity, bandwidth, k_aux, dead_steps,
            clip_norm, batch_size, window, log_every, mesh):
    """``(init_state, step)``: ``step(key, (state, sums), (seqs, scale, n_examples))``
    draws the step's batch from its key and takes one crosscoder step, keeping the sums
    of the loss terms since the last logged point. Cached on the static settings so that
    repeated fits (seeds, sweeps over data of the same shape) reuse the compiled step."""
    if isinstance(optimizer, tuple) and optimizer and optimizer[0] == "adam":
        optimizer = optim.optimizer(optimizer[1])
    init_state, step = cc.make_train_step(
        activation=activation, k=k, optimizer=optimizer, sparsity_coef=sparsity_coef,
        sparsity=sparsity, bandwidth=bandwidth, k_aux=k_aux, dead_steps=dead_steps,
        clip_norm=clip_norm, check_params=True)
    data_spec = None if mesh is None else NamedSharding(mesh, PartitionSpec("data", None, None))

    def fit_step(key, carry, batch):
        state, sums = carry
        seqs, scale, n_examples = batch
        k_batch, k_step = jax.random.split(key)
        idx = jax.random.randint(k_batch, (batch_size,), 0, n_examples)
        x = make_windows(seqs, idx, window) / scale
        if data_spec is not None:
            x = jax.lax.with_sharding_constraint(x, data_spec)
        new, info = step(k_step, state, x)
        since = state.step % log_every  # steps already summed since the last point
        terms = jnp.stack([info.loss, info.fvu, info.aux_loss, info.l0]).astype(sums.dtype)
        sums = jnp.where(since == 0, 0.0, sums) + terms
        means = sums / (since + 1).astype(sums.dtype)
        out = FitInfo(loss=means[0], fvu=means[1], aux_loss=means[2], l0=means[3],
                      dead_fraction=info.dead_fraction, finite=info.finite)
        return (new, sums), out

    return init_state, jax.jit(fit_step, donate_argnums=(1,))


def _as_windowed(params: cc.Params, x):
    if not hasattr(x, "ndim"):
        x = jnp.asarray(x)
    if x.ndim == params.W_enc.ndim - 1 and params.W_enc.shape[0] == 1:
        x = x[:, None]  # (B, d) -> (B, 1, d) for window-1 parameters
    return x


def encode(
    params: cc.Params,
    x: Float[Array, "B *window d"],
    *,
    k: int | None = None,
    activation: cc.Activation = "topk",
    theta: float | None = None,
) -> Float[Array, "B F"]:
    """Latents of ``x``. For a BatchTopK fit use ``activation="threshold",
    theta=result.threshold``.

    Args:
      params: fitted parameters.
      x: ``(B, window, d)``, or ``(B, d)`` for window-1 parameters.
      k: kept latents (TopK / BatchTopK).
      activation: the activation.
      theta: the threshold of ``activation="threshold"``.

    Returns:
      The ``(B, F)`` codes.
    """
    return cc.encode(params, _as_windowed(params, x), activation=activation, k=k, theta=theta)


def decode(params: cc.Params, z: Float[Array, "B F"]) -> Float[Array, "B window d"]:
    """Reconstruction of the codes ``z``.

    Args:
      params: fitted parameters.
      z: ``(B, F)`` codes.

    Returns:
      The ``(B, window, d)`` reconstruction (window 1 keeps its axis: ``(B, 1, d)``).
    """
    return cc.decode(params, z)
