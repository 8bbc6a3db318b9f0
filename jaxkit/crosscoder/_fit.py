"""``fit``: train a (temporal) crosscoder on an in-memory activation array.

Training examples are windows of ``window`` consecutive positions; batches are drawn
with replacement from explicit PRNG keys on the device, and the steps run inside
``jax.lax.scan`` chunks of ``log_every`` steps (one jitted call per chunk, one host sync
per logged point). With a ``mesh``, each batch is sharded over its ``data`` axis and
XLA inserts the collectives; the result matches the single-device run to float
tolerance.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, PRNGKeyArray

from jaxkit.kernels import crosscoder as cc

__all__ = ["FitResult", "fit", "encode", "decode", "make_windows"]


class FitResult(NamedTuple):
    """``params`` (with ``W_dec (n_latents, window, d)``, in the units of ``data``),
    ``history`` (NumPy arrays per metric, one entry per logged chunk: ``step``, ``loss``,
    ``fvu``, ``aux_loss``, ``l0`` (chunk means) and ``dead_fraction`` (at the chunk end)),
    ``config`` (the resolved settings), ``threshold`` (BatchTopK inference threshold,
    data units; 0 for other activations) and the final :class:`TrainState`."""

    params: cc.Params
    history: dict[str, np.ndarray]
    config: dict[str, Any]
    threshold: float
    state: cc.TrainState


def _as_sequences(data, window: int):
    """Validate ``data`` and return it as ``(n_seq, T, d)`` float32 plus ``T``."""
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
    ``P = T - window + 1`` start positions per sequence."""
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
) -> FitResult:
    """Train a crosscoder on windows of ``window`` consecutive positions of ``data``.

    ``data`` is ``(N, d)`` (rows form one sequence; windows slide over rows) or
    ``(N, T, d)`` (windows slide within each sequence). ``optimizer`` defaults to
    ``optax.adam(lr)``. With ``normalize`` the data are divided by their RMS during
    training and the scale is folded back into the returned parameters exactly (TopK,
    ReLU and JumpReLU are positively homogeneous), so the hyper-parameters do not depend
    on the data units. ``k_aux`` defaults to ``min(2k, n_latents)`` for TopK/BatchTopK
    (AuxK off otherwise); ``dead_steps`` to ``clip(steps // 10, 1, 1000)``.
    ``mesh``: a mesh with a ``data`` axis (``jaxkit.distributed.make_mesh``) over which
    each batch is sharded; ``batch_size`` must be divisible by its size (the parameters
    stay replicated; for latents sharded over a ``model`` axis use the step of
    :func:`jaxkit.kernels.crosscoder.make_train_step` under your own ``jit``).
    ``sparsity`` defaults to ``"l0"`` for JumpReLU and ``"l1"`` otherwise (it only acts
    with ``sparsity_coef > 0``).
    """
    seqs = _as_sequences(data, window)
    n_seq, T, d = seqs.shape
    cc._check_activation(activation)
    if activation in ("topk", "batch_topk"):
        k = cc._check_k(k, n_latents)
    if int(n_latents) < 1:
        raise ValueError(f"`n_latents` must be >= 1; got {n_latents}")
    for name, v in (("steps", steps), ("batch_size", batch_size), ("log_every", log_every)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {v!r}")
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
    if sparsity is None:
        sparsity = "l0" if activation == "jumprelu" else "l1"
    if dead_steps is None:
        dead_steps = int(min(max(steps // 10, 1), 1000))
    scale = float(jnp.sqrt(jnp.mean(seqs**2))) if normalize else 1.0
    scale = scale if scale > 0 else 1.0
    P = T - window + 1
    n_examples = n_seq * P
    k_init, k_sample, k_state, k_run = jax.random.split(key, 4)
    sample_idx = jax.random.randint(k_sample, (min(n_examples, 2048),), 0, n_examples)
    sample = make_windows(seqs, sample_idx, window) / scale
    params = cc.init(k_init, d, n_latents, site=(window,), sample=sample, activation=activation,
                     init_threshold=init_threshold)
    spec = (("adam", float(lr)) if optimizer is None else optimizer, activation, k,
            float(sparsity_coef), sparsity, float(bandwidth), k_aux, int(dead_steps), clip_norm,
            int(batch_size), int(window), mesh)
    try:
        init_state, run = _runner(*spec)
    except TypeError:  # an unhashable optimizer: build without the cache
        init_state, run = _runner.__wrapped__(*spec)
    state = init_state(k_state, params)
    if mesh is not None:
        state = jax.device_put(state, NamedSharding(mesh, PartitionSpec()))
    scale_arr, n_arr = jnp.float32(scale), jnp.int32(n_examples)
    names = ("loss", "fvu", "aux_loss", "l0")
    hist: dict[str, list] = {m: [] for m in ("step", *names, "dead_fraction")}
    done = 0
    for ck in jax.random.split(k_run, math.ceil(steps / log_every)):
        n = min(log_every, steps - done)
        state, info = run(state, seqs, scale_arr, n_arr, ck, n)
        done += n
        info = jax.device_get(info)
        hist["step"].append(done)
        for m in names:
            hist[m].append(float(np.mean(getattr(info, m))))
        hist["dead_fraction"].append(float(info.dead_fraction[-1]))

    p = state.params
    params = p._replace(b_enc=p.b_enc * scale, b_dec=p.b_dec * scale,
                        log_threshold=p.log_threshold + math.log(scale))
    threshold = float(state.threshold) * scale if activation == "batch_topk" else 0.0
    config = dict(n_latents=n_latents, k=k, window=window, activation=activation,
                  steps=steps, batch_size=batch_size, lr=lr, k_aux=k_aux,
                  dead_steps=dead_steps, sparsity_coef=sparsity_coef, sparsity=sparsity,
                  bandwidth=bandwidth, clip_norm=clip_norm, init_threshold=init_threshold,
                  scale=scale,
                  log_every=log_every, mesh=None if mesh is None else dict(mesh.shape))
    history = {m: np.asarray(v) for m, v in hist.items()}
    return FitResult(params=params, history=history, config=config, threshold=threshold,
                     state=state)


@functools.lru_cache(maxsize=16)
def _runner(optimizer, activation, k, sparsity_coef, sparsity, bandwidth, k_aux, dead_steps,
            clip_norm, batch_size, window, mesh):
    """``(init_state, run)``: ``run(state, seqs, scale, n_examples, key, n)`` does ``n``
    steps in one ``lax.scan``. Cached on the static settings so that repeated fits (seeds,
    sweeps over data of the same shape) reuse the compiled chunk."""
    if isinstance(optimizer, tuple) and optimizer and optimizer[0] == "adam":
        optimizer = optax.adam(optimizer[1])
    init_state, step = cc.make_train_step(
        activation=activation, k=k, optimizer=optimizer, sparsity_coef=sparsity_coef,
        sparsity=sparsity, bandwidth=bandwidth, k_aux=k_aux, dead_steps=dead_steps,
        clip_norm=clip_norm)
    data_spec = None if mesh is None else NamedSharding(mesh, PartitionSpec("data", None, None))

    def run_chunk(state, seqs, scale, n_examples, key, n):
        def body(state, key):
            idx = jax.random.randint(key, (batch_size,), 0, n_examples)
            x = make_windows(seqs, idx, window) / scale
            if data_spec is not None:
                x = jax.lax.with_sharding_constraint(x, data_spec)
            return step(state, x)

        return jax.lax.scan(body, state, jax.random.split(key, n))

    return init_state, jax.jit(run_chunk, static_argnums=5, donate_argnums=0)


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
    """Latents of ``x`` (``(B, window, d)``, or ``(B, d)`` for window-1 parameters).
    For a BatchTopK fit use ``activation="threshold", theta=result.threshold``."""
    return cc.encode(params, _as_windowed(params, x), activation=activation, k=k, theta=theta)


def decode(params: cc.Params, z: Float[Array, "B F"]) -> Float[Array, "B window d"]:
    """Reconstruction ``(B, window, d)`` (window 1 keeps its axis: ``(B, 1, d)``)."""
    return cc.decode(params, z)
