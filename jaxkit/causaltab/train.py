"""Training CausalTab on tasks drawn on the device every step (the network and its
shipped weights live in :mod:`jaxkit.causal_model`, which the causal audit uses too).

One step (:func:`jaxkit.kernels.train.make_train_step`): the step key draws ``batch``
tasks from the prior (:func:`jaxkit.kernels.sem.sample_tasks`, padded to ``d_max`` x
``n_max``), the batch is split over the mesh's ``"data"`` axis (data parallel, the
parameters replicated), and the loss is the masked binary cross-entropy of the edge
logits against the true DAG plus ``acyc_weight`` times the mean acyclicity
``tr e^{P o P} - d`` of the predicted probabilities (a fixed weight instead of AVICI's
dual ascent). The "batch" the loop hands each chunk is the prior itself (a pytree of
arrays, interpolated by the curriculum :func:`jaxkit.kernels.sem.mix_priors` from
``start`` to ``end`` over the first half of training), so nothing is prepared on the
host and a new curriculum value never recompiles. :func:`jaxkit.training.fit` runs the
chunks with orbax checkpoints: a killed training resumes to the same parameters.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxkit import distributed, optim, training
from jaxkit.causal_model.model import ModelConfig, acyclicity, edge_logits, init_params
from jaxkit.causal_model.weights_io import (  # re-exported: their old home
    WEIGHTS_DIR,
    load_weights,
    save_weights,
    shipped_weights,
)
from jaxkit.kernels import sem
from jaxkit.kernels import train as ktrain

__all__ = ["TrainSettings", "chunk_fn", "train_prior", "narrow_prior", "train_model",
           "save_weights", "load_weights", "shipped_weights", "WEIGHTS_DIR"]


@dataclass(frozen=True)
class TrainSettings:
    """Static training settings (hashable)."""

    steps: int = 2000
    batch: int = 16
    lr: float = 1e-3
    d_max: int = 20
    n_max: int = 100
    chunk: int = 25  # steps per compiled call
    checkpoint_every: int = 4  # chunks between checkpoints
    acyc_weight: float = 0.01
    warmup: int = 100


def train_prior(d_max: int = 20, n_max: int = 100) -> sem.Prior:
    """The broad pretraining prior: ER, scale-free and Watts-Strogatz graphs; linear, MLP
    and sigmoid mechanisms; Gaussian, Laplace and uniform noise; every regime and
    intervention type. SBM and geometric graphs, RFF and heteroscedastic mechanisms,
    Student-t and Gumbel noise are held out for the out-of-distribution benchmark."""
    return sem.make_prior(graphs={"er": 1, "sf": 1, "ws": 1},
                          mechanisms={"linear": 2, "mlp": 1, "sigmoid": 1},
                          noises={"gaussian": 1, "laplace": 1, "uniform": 1},
                          d_range=(3, d_max), n_range=(max(2, n_max // 2), n_max),
                          k_range=(1.0, 2.5), obs_frac=(0.3, 1.0))


def narrow_prior(d_max: int = 20, n_max: int = 100) -> sem.Prior:
    """The curriculum's starting point: small linear ER tasks, mostly observational."""
    return sem.make_prior(graphs={"er": 1}, mechanisms={"linear": 1},
                          noises={"gaussian": 1, "laplace": 1, "uniform": 1},
                          regimes=(2, 1, 1), d_range=(3, max(3, d_max // 2)),
                          n_range=(max(2, n_max // 2), n_max), k_range=(1.0, 2.0))


class _Out(NamedTuple):
    bce: jax.Array
    acyc: jax.Array


def task_loss(params, cfg: ModelConfig, tasks: sem.Task, acyc_weight: float):
    """Masked BCE over the off-diagonal active pairs + ``acyc_weight`` x acyclicity."""
    logits = jax.vmap(lambda t: edge_logits(params, cfg, t.x, t.indicator, t.var_mask,
                                            t.sample_mask))(tasks)
    d = logits.shape[-1]
    ok = tasks.var_mask[:, :, None] & tasks.var_mask[:, None, :] & ~jnp.eye(d, dtype=bool)
    y = tasks.adj.astype(jnp.float32)
    bce = optax.sigmoid_binary_cross_entropy(logits, y)
    bce = jnp.sum(jnp.where(ok, bce, 0.0)) / jnp.maximum(jnp.sum(ok), 1)
    probs = jax.nn.sigmoid(logits) * ok
    acyc = jnp.mean(jax.vmap(acyclicity)(probs))
    return bce + acyc_weight * acyc, _Out(bce, acyc)


@functools.lru_cache(maxsize=8)
def chunk_fn(cfg: ModelConfig, st: TrainSettings, mesh):
    """The one training step of CausalTab, ``st.chunk`` steps compiled together: returns
    ``(chunk, optimizer)`` where ``chunk(key, state, priors)`` draws ``st.batch`` tasks a
    step from that step's prior (``priors`` stacked along a leading axis of ``st.chunk``,
    so a curriculum can change them) and takes AdamW steps (warm-up + cosine, clipping at
    norm 1) on the edge BCE plus the acyclicity penalty (cached per model config, settings
    and mesh)."""
    opt = optim.optimizer(st.lr, schedule_kind="warmup_cosine", warmup=st.warmup,
                          steps=st.steps, end_lr=st.lr * 0.05, weight_decay=1e-4,
                          clip_norm=1.0)

    def loss(params, key, prior, aux):
        tasks = sem.sample_tasks(key, prior, st.batch, d_max=st.d_max, n_max=st.n_max)
        if mesh is not None:
            tasks = jax.tree.map(lambda a: jax.lax.with_sharding_constraint(
                a, distributed.data_sharding(mesh, a.ndim)), tasks)
        return task_loss(params, cfg, tasks, st.acyc_weight)

    step = ktrain.make_train_step(loss, opt)
    scan = ktrain.scan_steps(step)

    def chunk(key, state, priors):
        state, info = scan(key, state, priors)
        return state, info._replace(out=jax.tree.map(jnp.mean, info.out),
                                    loss=jnp.mean(info.loss))

    return jax.jit(chunk, donate_argnums=1), opt


def train_model(key, cfg: ModelConfig, st: TrainSettings, *, start: sem.Prior | None = None,
                end: sem.Prior | None = None, params=None, mesh=None,
                checkpoint_dir: Path | None = None, resume: bool = True,
                on_log=None) -> tuple[dict, list[dict], dict]:
    """Train (or fine-tune ``params``) for ``st.steps`` steps (module docstring).

    Returns:
        ``(params, history, throughput)``: the parameters (host arrays), one record per
        chunk (step, loss, bce, acyc, seconds) and ``{"tasks_per_s", "samples_per_s",
        "seconds"}`` of the steps run here (compilation excluded: the first chunk is
        not timed).
    """
    if st.steps % st.chunk:
        raise ValueError(f"`steps` ({st.steps}) must be a multiple of `chunk` ({st.chunk})")
    mesh = distributed.data_mesh(mesh)
    if mesh is not None and st.batch % distributed.mesh_size(mesh):
        raise ValueError(f"`batch` ({st.batch}) must be divisible by the mesh 'data' size "
                         f"({distributed.mesh_size(mesh)})")
    end = end if end is not None else train_prior(st.d_max, st.n_max)
    start = start if start is not None else end
    k_init, k_run = jax.random.split(key)
    params = init_params(k_init, cfg) if params is None else jax.tree.map(jnp.asarray, params)
    chunk, opt = chunk_fn(cfg, st, mesh)
    state = ktrain.init(params, opt)
    if mesh is not None:
        state = jax.device_put(state, distributed.replicated(mesh))
    n_chunks = st.steps // st.chunk
    half = max(n_chunks // 2, 1)

    def batch_fn(i):
        p = sem.mix_priors(start, end, min(i / half, 1.0))
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (st.chunk, *a.shape)), p)

    times: list[float] = []
    last = [time.perf_counter()]

    def log(done, rec):
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now
        rec["seconds"] = times[-1]
        if on_log is not None:
            on_log(done, rec)

    res = training.fit(k_run, state, chunk, batch_fn, steps=n_chunks,
                       checkpoint_dir=checkpoint_dir, checkpoint_every=st.checkpoint_every,
                       resume=resume, log_every=1, on_log=log)
    timed = times[1:] if len(times) > 1 else times
    secs = float(sum(timed))
    n_tasks = len(timed) * st.chunk * st.batch
    thr = {"seconds": secs, "tasks_per_s": n_tasks / secs if secs > 0 else float("nan"),
           "samples_per_s": n_tasks * 0.75 * st.n_max / secs if secs > 0 else float("nan")}
    hist = [{"step": h["step"] * st.chunk, "loss": h.get("loss"), "bce": h.get("bce"),
             "acyc": h.get("acyc"), "seconds": h.get("seconds")} for h in res.full_history]
    return jax.device_get(res.state.params), hist, thr
