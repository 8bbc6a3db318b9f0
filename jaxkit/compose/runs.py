"""Separate training runs, each with its own schedule: the fair baselines and the
scaling grid of ``jaxkit run aira-compose``.

A :class:`ModelSpec` is one model: a layer string (a :class:`~jaxkit.compose.model.ComposeLM`
of :class:`~jaxkit.compose.arch.Arch`) or the Llama-style baseline
(:mod:`jaxkit.compose.llama`, jaxkit.lm's layers). :func:`train_runs` trains one spec
for one token budget from ``seeds`` initialisations (independent runs, vmapped
together, on the same batches: paired comparisons), through the one training step
(:func:`jaxkit.kernels.train.make_train_step`) and the one loop
(:func:`jaxkit.training.fit`, checkpointed, resumable).

Each run's learning rate follows its own schedule over its own step count ``T``
(Hoffmann et al. 2022: a cosine cycle matched to the run's length, not a point read
off a longer run): ``eta(t) = lr * min(1, (t + 1) / W) * (f + (1 - f) (1 + cos(pi t / T)) / 2)``
with ``W = max(1, warmup_frac * T)`` and ``f = end_frac``. ``T`` is carried in the
optimiser state (:func:`horizon_cosine`), so the runs of one model at every budget share
one compiled step. The update is AdamW (:func:`jaxkit.optim.optimizer` at unit rate,
``b2 = 0.95``, global-norm clipping) scaled by ``eta(t)``.

Parameter matching (:func:`match_compose`, :func:`match_llama`): a baseline's size is
chosen so that its non-embedding parameter count is as close as possible to the found
architecture's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxkit import optim, training
from jaxkit.kernels import train as ktrain
from jaxkit.lm.model import LlamaConfig

from .arch import Arch, stack
from .data import validation_windows
from .llama import build_llama, llama_apply, llama_config, llama_n_params, match_d_ff
from .model import BITS, build, lm_loss
from .train import sample_chunk

__all__ = ["ModelSpec", "RunSettings", "horizon_cosine", "train_runs", "match_compose",
           "match_llama", "compose_spec"]


@dataclass(frozen=True)
class ModelSpec:
    """One model: ``arch`` (a layer string) or ``llama`` (the Llama-style baseline).

    Attributes:
      arch: the :class:`Arch` of a composed model, or None.
      llama: the :class:`jaxkit.lm.LlamaConfig` of the baseline, or None.
      context: the training context (tokens per window).
    """

    arch: Arch | None = None
    llama: LlamaConfig | None = None
    context: int = 32

    def __post_init__(self):
        if (self.arch is None) == (self.llama is None):
            raise ValueError("ModelSpec: give exactly one of `arch` and `llama`")

    @property
    def n_params(self) -> int:
        """Non-embedding parameters (blocks and final norm)."""
        return self.arch.n_params() if self.arch is not None else llama_n_params(self.llama)

    def describe(self) -> str:
        if self.arch is not None:
            r = "" if self.arch.mlp_ratio == 4 else f", MLP x{self.arch.mlp_ratio}"
            return f"{self.arch.layers} (width {self.arch.width}{r})"
        c = self.llama
        return (f"Llama x{c.n_layers} (width {c.d_model}, {c.n_heads} heads / {c.n_kv_heads} "
                f"kv, SwiGLU {c.d_ff})")

    def module(self, key):
        if self.arch is not None:
            return build(self.arch, key)
        return build_llama(self.llama, key)

    def logits(self, model, tokens):
        return model(tokens) if self.arch is not None else llama_apply(model, tokens)


def compose_spec(layers: str, width: int, cfg, context: int) -> ModelSpec:
    """The :class:`ModelSpec` of a layer string at ``width`` with ``cfg``'s heads,
    state size and Mamba-2 settings."""
    return ModelSpec(arch=Arch(layers, width=width, heads=cfg.heads, d_state=cfg.d_state,
                               context=context, ssd_head_dim=cfg.ssd_head_dim,
                               ssd_chunk=min(cfg.ssd_chunk, context)), context=context)


def match_compose(pattern: str, target: int, width: int, cfg, context: int, *,
                  depth: int, width_step: int = 8,
                  mlp_ratios: tuple[int, ...] = (2, 3, 4, 5, 6)) -> ModelSpec:
    """The stacked ``pattern`` whose non-embedding parameters are closest to ``target``:
    depths ``depth // 2 .. 2 depth`` and widths multiples of ``width_step`` (and of
    ``heads``) from ``width / 2`` to ``2 width``, MLP hidden ratios ``mlp_ratios``; among
    those within the same 2% of ``target``, the width nearest ``width``, then the depth
    nearest ``depth``, then the ratio nearest 4."""
    step = math.lcm(width_step, cfg.heads)
    best = None
    for d in range(max(1, depth // 2), 2 * depth + 1):
        for w in range(max(step, (width // 2) // step * step), 2 * width + 1, step):
            for r in mlp_ratios:
                s = compose_spec(stack(pattern, d), w, cfg, context)
                s = dataclasses.replace(s, arch=dataclasses.replace(s.arch, mlp_ratio=r))
                # within 2% of the target counts as matched; then the nearest width,
                # depth and MLP ratio
                key = (round(abs(s.n_params - target) / max(target, 1) / 0.02),
                       abs(w - width), abs(d - depth), abs(r - 4),
                       abs(s.n_params - target))
                if best is None or key < best[0]:
                    best = (key, s)
    return best[1]


def match_llama(target: int, width: int, n_blocks: int, heads: int, context: int
                ) -> ModelSpec:
    """The Llama-style baseline of ``n_blocks`` blocks at ``width`` whose SwiGLU width
    makes its non-embedding parameters closest to ``target``."""
    d_ff = match_d_ff(target, width, n_blocks, heads)
    return ModelSpec(llama=llama_config(width, n_blocks, heads, d_ff, context=context),
                     context=context)


@dataclass(frozen=True)
class RunSettings:
    """Hashable settings of :func:`train_runs` (the step count is per run).

    Attributes:
      batch: windows per step.
      lr: peak learning rate.
      warmup_frac: warm-up share of each run's steps.
      end_frac: the cosine's final rate as a share of ``lr``.
      weight_decay: AdamW decoupled decay.
      clip: global-norm clip per run.
      chunk: steps per compiled call.
      checkpoint_every: chunks between checkpoints.
      n_val: validation windows.
    """

    batch: int = 8
    lr: float = 3e-3
    warmup_frac: float = 0.05
    end_frac: float = 0.1
    weight_decay: float = 0.0
    clip: float = 1.0
    chunk: int = 20
    checkpoint_every: int = 5
    n_val: int = 64


class HorizonState(NamedTuple):
    """The step count of the run and its own length ``T`` (int32 arrays)."""

    count: jax.Array
    total: jax.Array


def horizon_cosine(lr: float, warmup_frac: float, end_frac: float
                   ) -> optax.GradientTransformation:
    """Scale updates by ``eta(t)`` (module docstring); ``T`` is read from the state
    (:func:`set_horizon`), so one compiled step serves runs of every length."""

    def init(params):
        del params
        return HorizonState(jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32))

    def update(updates, state, params=None):
        del params
        t = state.count.astype(jnp.float32)
        T = jnp.maximum(state.total, 1).astype(jnp.float32)
        w = jnp.maximum(1.0, jnp.floor(warmup_frac * T))
        cos = end_frac + (1 - end_frac) * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t, T) / T))
        eta = lr * jnp.minimum(1.0, (t + 1) / w) * cos
        return (jax.tree.map(lambda u: (eta * u).astype(u.dtype), updates),
                HorizonState(state.count + 1, state.total))

    return optax.GradientTransformation(init, update)


def set_horizon(opt_state, total: int):
    """``opt_state`` with every :class:`HorizonState`'s ``T`` set to ``total``."""
    return jax.tree.map(lambda s: s._replace(total=jnp.full_like(s.total, total))
                        if isinstance(s, HorizonState) else s, opt_state,
                        is_leaf=lambda s: isinstance(s, HorizonState))


def _optimizer(s: RunSettings) -> optax.GradientTransformation:
    inner = optim.optimizer(1.0, weight_decay=s.weight_decay, b2=0.95, clip_norm=s.clip)
    return optax.chain(inner, horizon_cosine(s.lr, s.warmup_frac, s.end_frac))


@functools.lru_cache(maxsize=64)
def _programs(spec: ModelSpec, s: RunSettings, n_seeds: int):
    """(init, chunk, evaluate) of ``n_seeds`` runs of ``spec`` (chunk and evaluate
    jitted once per spec, settings and seed count)."""
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: spec.module(jax.random.key(0))))
    opt = optax.GradientTransformation(jax.vmap(_optimizer(s).init),
                                       jax.vmap(_optimizer(s).update))

    def merge(pure):
        state = nnx.state(nnx.merge(graphdef, abstract))
        nnx.replace_by_pure_dict(state, pure)
        return nnx.merge(graphdef, state)

    def losses(params, tokens):
        return jax.vmap(lambda p: lm_loss(spec.logits(merge(p), tokens[:, :-1]),
                                          tokens[:, 1:]))(params)

    def loss_fn(params, key, batch, aux):
        del key, aux
        per = losses(params, batch)
        return jnp.sum(per), per

    scan = ktrain.scan_steps(ktrain.make_train_step(loss_fn, opt))

    def chunk(key, state, batches):
        state, info = scan(key, state, batches)
        return state, ktrain.StepInfo(loss=info.out.mean(-1), grad_norm=info.grad_norm,
                                      finite=jnp.all(info.finite), out=())

    init_one = jax.jit(lambda key: nnx.to_pure_dict(nnx.state(spec.module(key))))

    def init(keys, total):
        params = jax.tree.map(lambda *a: jnp.stack(a), *[init_one(k) for k in keys])
        st = ktrain.init(params, opt)
        return st._replace(opt_state=set_horizon(st.opt_state, total))

    def evaluate(params, val):
        return losses(params, val) * BITS

    return init, jax.jit(chunk, donate_argnums=1), jax.jit(evaluate)


def train_runs(key, spec: ModelSpec, corpus, steps: int, s: RunSettings, *,
               seeds: int = 1, checkpoint_dir: str | Path | None = None,
               resume: bool = True) -> dict:
    """Train ``seeds`` runs of ``spec`` for ``steps`` steps, each with its own cosine
    schedule to ``steps`` (module docstring), on ``corpus``'s training bytes; read each
    run's bits per byte on ``s.n_val`` windows of ``corpus.val``.

    Args:
      key: the key of the batches and step keys; run ``i`` is initialised from
        ``fold_in(key, i)`` (the same initialisations for every budget).
      spec: the model.
      corpus: a :class:`~jaxkit.compose.data.Corpus`.
      steps: the run's length (a positive multiple of ``s.chunk``).
      s: the :class:`RunSettings`.
      seeds: independent runs (one initialisation each).
      checkpoint_dir: checkpoint folder (a temporary one when None).
      resume: restore the newest checkpoint in ``checkpoint_dir``.

    Returns:
      ``dict(bpb=[per seed], steps, tokens, n_params, seconds, tokens_per_s)``.

    Raises:
      ValueError: a bad ``steps`` or ``seeds`` (named).
      jaxkit.training.TrainingDiverged: a non-finite loss.
    """
    if not isinstance(steps, int) or steps < s.chunk or steps % s.chunk:
        raise ValueError(f"`steps` must be a positive multiple of chunk ({s.chunk}); "
                         f"got {steps!r}")
    if not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"`seeds` must be an int >= 1; got {seeds!r}")
    init, chunk, evaluate = _programs(spec, s, seeds)
    k_init, k_data, k_run = jax.random.split(jax.random.fold_in(key, 0), 3)
    state = init([jax.random.fold_in(k_init, i) for i in range(seeds)], steps)
    data = jnp.asarray(corpus.train)
    val = jnp.asarray(validation_windows(corpus.val, s.n_val, spec.context))

    def batch_fn(i):
        return sample_chunk(jax.random.fold_in(k_data, i), data, s.chunk, s.batch,
                             spec.context)

    tmp = tempfile.TemporaryDirectory() if checkpoint_dir is None else None
    t0 = time.perf_counter()
    try:
        res = training.fit(k_run, state, chunk, batch_fn, steps=steps // s.chunk,
                           checkpoint_dir=Path(tmp.name if tmp else checkpoint_dir),
                           checkpoint_every=s.checkpoint_every, resume=resume, log_every=0)
        bpb = np.asarray(evaluate(res.state.params, val))
    finally:
        if tmp is not None:
            tmp.cleanup()
    dt = time.perf_counter() - t0
    tokens = steps * s.batch * spec.context
    return dict(bpb=bpb.tolist(), steps=steps, tokens=tokens, n_params=spec.n_params,
                seconds=dt, tokens_per_s=seeds * tokens / dt if dt > 0 else float("nan"))


def replace_context(spec: ModelSpec, context: int) -> ModelSpec:
    """``spec`` trained at another context."""
    if spec.arch is not None:
        return dataclasses.replace(spec, arch=dataclasses.replace(spec.arch, context=context),
                                   context=context)
    return dataclasses.replace(spec, context=context)
