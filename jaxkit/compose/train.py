"""Training many candidate architectures at once, through the one training step
(:func:`jaxkit.kernels.train.make_train_step`) and the one loop
(:func:`jaxkit.training.fit`).

Candidates of one depth share the :class:`~jaxkit.compose.model.SuperLM` parameter
shape (leaves ``(C, ...)`` and, per layer, ``(C, depth, ...)``) and train in one compiled
step on the *same* batches (common random numbers: the ranking is not blurred by batch
noise). Each layer *routes* its candidates (:func:`routes`): for every letter, the
candidates whose string has that letter there are gathered, run through that block
(``vmap`` over them) and their updates scattered back, so a candidate costs the blocks of
its own string (padding layers of shorter strings cost nothing). A ``vmap`` over
candidates of a ``lax.switch`` would run every letter's block for every candidate and
select, ``len(letters)`` x the work. The routing tables are the carried state
(``TrainState.aux``; their shapes, the largest count per letter over layers, are static,
so new strings with the same counts reuse the compiled step). The loss is the sum of the
candidates' losses (their parameters are disjoint, so each gradient is its own
candidate's) and AdamW with its gradient clipping runs per candidate (``vmap`` of the
optax transformation), so the candidates stay independent (tested against training
alone). ``chunk`` steps run in one ``lax.scan`` per call; a checkpoint every
``checkpoint_every`` chunks; the log records each step's mean loss over candidates and the
gradient norm over all candidates together. The
validation loss (bits per byte) is read at each step count of ``eval_at`` (one training
continued through the budgets, constant learning rate after warm-up, so the shorter
budgets are intermediate points of the longer run, not separately tuned runs).

With a mesh, the batch axis is split over its "data" axis (data parallel) and, when
the mesh has a "model" axis, the candidates over that one (each device trains its share
of the candidates, routed within that group: the model-parallel axis of the larger
stage, with no activation or gradient traffic between devices; tested on the compiled
step). A non-finite loss stops the training with
:class:`CandidateDiverged`, which names the checkpoint folder holding the last finite
state.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from jaxkit import distributed, optim, training
from jaxkit.kernels import train as ktrain

from .arch import LETTERS, Arch, letters_of
from .data import sample_windows, validation_windows
from .model import BITS, Embed, SuperLayer, SuperLM, identity_kinds, lm_loss

__all__ = ["sample_chunk", "TrainSettings", "CandidateResult", "CandidateDiverged",
           "train_candidates", "peak_flops", "to_supernet_params", "routes"]


@dataclass(frozen=True)
class TrainSettings:
    """Hashable training settings.

    Attributes:
      steps: AdamW steps (a multiple of ``chunk``).
      batch: sequences per step (each of ``context`` + 1 bytes).
      lr: peak learning rate (linear warm-up over ``warmup`` steps, then constant).
      warmup: warm-up steps.
      weight_decay: AdamW decoupled weight decay.
      clip: global gradient-norm clip per candidate.
      chunk: steps per compiled call (``lax.scan``).
      checkpoint_every: chunks between checkpoints.
      eval_at: step counts at which the validation loss is read (default: ``steps``).
      n_val: validation windows.
      dtype: activation dtype, "float32" or "bfloat16".
    """

    steps: int = 200
    batch: int = 8
    lr: float = 3e-3
    warmup: int = 20
    weight_decay: float = 0.0
    clip: float = 1.0
    chunk: int = 20
    checkpoint_every: int = 5
    eval_at: tuple[int, ...] = ()
    n_val: int = 64
    dtype: str = "float32"

    def budgets(self) -> tuple[int, ...]:
        b = tuple(sorted(set(self.eval_at or (self.steps,)) | {self.steps}))
        for s in b:
            if s % self.chunk or s < 1:
                raise ValueError(f"`eval_at` steps must be positive multiples of `chunk` "
                                 f"({self.chunk}); got {s}")
        return b


class CandidateResult(NamedTuple):
    """Validation bits per byte (n_budgets, C), the step and token count of each
    budget, the final parameters (a :class:`SuperLM` pure dict with a leading candidate
    axis, over the supernet letters ``letters``), the training log, the throughput and
    the compilation time of the training chunk (0 when an earlier call compiled it)."""

    val_bpb: np.ndarray
    steps: np.ndarray
    tokens: np.ndarray
    params: Any
    history: list
    tokens_per_s: float
    flops_per_s: float
    compile_s: float
    letters: str = LETTERS


class CandidateDiverged(RuntimeError):
    """A candidate's loss or parameters became non-finite during training."""


PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "TPU v5p": 459e12,
              "TPU v5 lite": 197e12, "TPU v4": 275e12}


def peak_flops(device=None) -> float | None:
    """Dense bfloat16 peak FLOP/s of the device (datasheet), None when unknown (CPUs)."""
    kind = (device or jax.devices()[0]).device_kind
    return next((v for k, v in PEAK_FLOPS.items() if k in kind), None)


def _optimizer(s: TrainSettings):
    return optim.optimizer(s.lr, schedule_kind="warmup", warmup=s.warmup, b2=0.95,
                           weight_decay=s.weight_decay, clip_norm=s.clip)


def _stack(trees):
    return jax.tree.map(lambda *a: jnp.stack(a), *trees)


def _merge(graphdef, abstract_state, pure):
    """A module of ``graphdef`` holding the pure-dict ``pure`` values."""
    state = nnx.state(nnx.merge(graphdef, abstract_state))
    nnx.replace_by_pure_dict(state, pure)
    return nnx.merge(graphdef, state)


def to_supernet_params(params, depth: int) -> dict:
    """Training parameters of candidates (``{"embed", "layers"}``: leaves (C, ...) and
    (C, depth, ...)) as the pure dict of a :class:`~jaxkit.compose.model.SuperLM` per
    candidate (leaves (C, ...))."""
    return {"embed": params["embed"],
            "layers": {i: jax.tree.map(lambda a, i=i: a[:, i], params["layers"])
                       for i in range(depth)}}


def routes(strings: list[str], depth: int, letters: str, groups: int = 1) -> tuple:
    """The routing tables of ``strings`` (each at most ``depth`` letters of ``letters``;
    shorter ones padded with identity layers), within each of ``groups`` equal,
    contiguous groups of candidates (a mesh's "model" shards: routing never crosses
    them, so no activation leaves its device).

    Returns:
      One pair per letter ``letters[j]``: ``idx`` int32 (depth, groups, K_j), the
      candidates (numbered within their group) whose string has that letter at each
      layer, padded with 0, and ``valid`` bool (depth, groups, K_j), which entries are
      real; ``K_j`` is the largest count over layers and groups (at least 1).
    """
    if groups < 1 or len(strings) % groups:
        raise ValueError(f"`groups` ({groups}) must divide the number of candidates "
                         f"({len(strings)})")
    kinds = np.stack([identity_kinds(st, depth, letters) for st in strings])
    kinds = kinds.reshape(groups, len(strings) // groups, depth)
    out = []
    for j in range(len(letters)):
        rows = [[np.flatnonzero(kinds[g, :, i] == j) for g in range(groups)]
                for i in range(depth)]
        k = max(1, max(len(r) for rs in rows for r in rs))
        idx = np.zeros((depth, groups, k), np.int32)
        valid = np.zeros((depth, groups, k), bool)
        for i, rs in enumerate(rows):
            for g, r in enumerate(rs):
                idx[i, g, :len(r)] = r
                valid[i, g, :len(r)] = True
        out.append((idx, valid))
    return tuple(out)


def _per_candidate(opt: optax.GradientTransformation) -> optax.GradientTransformation:
    """``opt`` applied to each candidate on its own (leading axis of every leaf)."""
    return optax.GradientTransformation(jax.vmap(opt.init), jax.vmap(opt.update))


@functools.lru_cache(maxsize=16)
def _programs(arch: Arch, s: TrainSettings, dtype_name: str, letters: str = LETTERS):
    """(init, chunk, evaluate) for candidates on the supernet of ``arch`` over
    ``letters``, each layer routed (module docstring; chunk and evaluate jitted). The
    layers are one ``lax.scan`` over layer-stacked parameters (one layer body to
    compile)."""
    dtype = jnp.bfloat16 if dtype_name == "bfloat16" else jnp.float32
    sup = nnx.eval_shape(lambda: SuperLM(arch, rngs=nnx.Rngs(0), dtype=dtype,
                                         letters=letters))
    embed_gd, embed_abs = nnx.split(sup.embed)
    blocks = [nnx.split(b) for b in sup.layers[0].blocks]
    opt = _per_candidate(_optimizer(s))

    init_embed = jax.jit(lambda key: nnx.to_pure_dict(nnx.state(Embed(
        arch, nnx.Rngs(params=key)))))
    init_layer = jax.jit(lambda key: nnx.to_pure_dict(nnx.state(SuperLayer(
        arch, nnx.Rngs(params=key), arch.depth, "sequential", letters))))

    def init(keys, route):
        # One layer per call, each compiled once: XLA:CPU took longer to compile the
        # initialisation of all candidates under vmap (~7 s; threefry under vmap), or
        # of a whole candidate's unrolled layers, than it takes to train them a while;
        # eager ops cost seconds per stage.
        params = []
        for key in keys:
            k_embed, k_layers = jax.random.split(key)
            layers = [init_layer(k) for k in jax.random.split(k_layers, arch.depth)]
            params.append({"embed": init_embed(k_embed), "layers": _stack(layers)})
        return ktrain.init(_stack(params), opt,
                           jax.tree.map(lambda a: jnp.array(a, copy=True), route))

    def group_layer(x, pl, route):
        """One routed layer of one group: x (n, B, T, D); pl the layer's blocks (leaves
        (n, ...)); route per letter (idx, valid) of shape (K_j,)."""
        dx = jnp.zeros_like(x)
        for j, (gd, ab) in enumerate(blocks):
            idx, valid = route[j]
            pj = jax.tree.map(lambda a, idx=idx: a[idx], pl[j])
            fj = jax.vmap(lambda p, h, gd=gd, ab=ab: _merge(gd, ab, p).residual(h))(pj, x[idx])
            dx = dx.at[idx].add(jnp.where(valid[:, None, None, None], fj, 0).astype(dx.dtype))
        return x + dx

    def layer(x, pl, route):
        """One routed layer: x (C, B, T, D) in the route's groups (vmapped)."""
        g = route[0][0].shape[0]

        def split(a):
            return a.reshape(g, a.shape[0] // g, *a.shape[1:])

        y = jax.vmap(group_layer)(split(x), jax.tree.map(split, pl), route)
        return y.reshape(x.shape)

    def forward(params, tokens, route):
        """Logits (C, B, T, vocab) of every candidate on the shared ``tokens`` (B, T)."""
        def emb(pe):
            return _merge(embed_gd, embed_abs, pe)

        x = jax.vmap(lambda pe: emb(pe).embed(tokens, dtype))(params["embed"])
        stacked = jax.tree.map(lambda a: jnp.moveaxis(a, 1, 0), params["layers"]["blocks"])

        def body(x, lr):
            return layer(x, lr[0], lr[1]), None

        x, _ = jax.lax.scan(body, x, (stacked, route))
        return jax.vmap(lambda pe, h: emb(pe).logits(h))(params["embed"], x)

    def losses(params, tokens, route):
        logits = forward(params, tokens[:, :-1], route)
        return jax.vmap(lm_loss, in_axes=(0, None))(logits, tokens[:, 1:])

    def loss_fn(params, key, batch, route):
        del key
        per = losses(params, batch, route)
        return jnp.sum(per), per

    scan = ktrain.scan_steps(ktrain.make_train_step(loss_fn, opt))

    def chunk(key, state, batches):
        state, info = scan(key, state, batches)
        return state, ktrain.StepInfo(loss=info.out.mean(-1), grad_norm=info.grad_norm,
                                      finite=jnp.all(info.finite), out=())

    def evaluate(params, route, val):
        return losses(params, val, route) * BITS

    return init, jax.jit(chunk, donate_argnums=1), jax.jit(evaluate)


COMPILER_OPTIONS: dict = {}
COMPILE_CPU: list = []
_COMPILED: dict = {}  # compiled training chunks by (arch, settings, letters, C, mesh)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def sample_chunk(key, data, n, batch, context):
    """``n`` batches of ``batch`` random windows of ``context`` bytes of ``data``: shape
    ``(n, batch, context + 1)`` (:func:`sample_windows` per batch key)."""
    return jax.vmap(lambda k: sample_windows(k, data, batch, context))(jax.random.split(key, n))


def train_candidates(key, arch: Arch, strings: list[str], corpus, s: TrainSettings, *,
                     init_keys=None, mesh=None, checkpoint_dir: str | Path | None = None,
                     resume: bool = True) -> CandidateResult:
    """Train the candidates ``strings`` (each at most ``arch.depth`` letters; shorter
    ones padded with identity layers) together.

    Args:
      key: the run key (initialisation, batches and step keys derive from it).
      arch: width, heads, state size, context and the (maximum) depth.
      strings: the candidates' layer strings.
      corpus: a :class:`~jaxkit.compose.data.Corpus`.
      s: the :class:`TrainSettings`.
      init_keys: one initialisation key per candidate (default: split from ``key``).
      mesh: a mesh with a "data" axis (the batch is split over it), or None.
      checkpoint_dir: checkpoint folder (a temporary one when None).
      resume: restore the newest checkpoint in ``checkpoint_dir``.

    Returns:
      A :class:`CandidateResult`.

    Raises:
      CandidateDiverged: a non-finite loss (the message names the checkpoint folder).
    """
    if not strings:
        raise ValueError("`strings` must name at least one candidate")
    if s.steps % s.chunk:
        raise ValueError(f"`steps` ({s.steps}) must be a multiple of `chunk` ({s.chunk})")
    for st in strings:
        arch.with_layers(st)  # validates the letters
    budgets = s.budgets()
    letters = letters_of(strings)  # the supernet holds only the letters in use
    dmesh = distributed.data_mesh(mesh)
    n_data = n_model = 1
    if dmesh is not None:
        n_data = distributed.mesh_size(dmesh)
        n_model = dmesh.shape.get("model", 1)
        if n_data > 1 and s.batch % n_data:
            raise ValueError(f"`batch` ({s.batch}) must be divisible by the mesh 'data' "
                             f"size ({n_data})")
        if n_model > 1 and len(strings) % n_model:
            raise ValueError(f"the number of candidates ({len(strings)}) must be divisible "
                             f"by the mesh 'model' size ({n_model})")
    route = routes(strings, arch.depth, letters, groups=n_model)
    k_init, k_data, k_run = jax.random.split(key, 3)
    if init_keys is None:
        init_keys = jax.random.split(k_init, len(strings))
    s_key = dataclasses.replace(s, eval_at=())
    init, chunk, evaluate = _programs(arch, s_key, s.dtype, letters)
    state = init(init_keys, route)
    data = jnp.asarray(corpus.train)
    val = jnp.asarray(validation_windows(corpus.val, s.n_val, arch.context))
    shard = None
    if dmesh is not None:
        # candidates split over "model" (each device trains its own group of candidates,
        # routed within it: no activation or gradient traffic), each batch over "data"
        # (gradients all-reduced)
        model = "model" if n_model > 1 else None
        cand = NamedSharding(dmesh, PartitionSpec(model))
        state = ktrain.TrainState(jax.device_put(state.params, cand),
                                  jax.device_put(state.opt_state, cand),
                                  jax.device_put(state.step, NamedSharding(dmesh, PartitionSpec())),
                                  jax.device_put(state.aux, NamedSharding(
                                      dmesh, PartitionSpec(None, model))))
        shard = NamedSharding(dmesh, PartitionSpec(None, "data" if n_data > 1 else None))

    def batch_fn(i):
        b = sample_chunk(jax.random.fold_in(k_data, i), data, s.chunk, s.batch, arch.context)
        return b if shard is None else jax.device_put(b, shard)

    mesh_key = None if dmesh is None else (tuple(dmesh.shape.items()),
                                           tuple(d.id for d in dmesh.devices.flat))
    ckey = (arch, s_key, letters, len(strings), tuple(i.shape for i, _ in route), mesh_key)
    compiled, compile_s = _COMPILED.get(ckey, (None, 0.0))
    if compiled is None:  # one compilation per shape: a resumed or repeated run reuses it
        t0 = time.perf_counter()
        c0 = time.process_time()
        compiled = chunk.lower(k_run, state, batch_fn(0)).compile(COMPILER_OPTIONS or None)
        compile_s = time.perf_counter() - t0
        COMPILE_CPU.append(time.process_time() - c0)
        _COMPILED[ckey] = (compiled, 0.0)
    tmp = tempfile.TemporaryDirectory() if checkpoint_dir is None else None
    ckpt = Path(tmp.name if tmp else checkpoint_dir)
    losses, history = [], []
    trained = 0.0
    n_done = 0
    at = 0  # the step the state is at
    t_train = 0.0
    try:
        for b in budgets:
            t1 = time.perf_counter()
            try:
                # the state is at the previous budget: restore only a later checkpoint
                res = training.fit(k_run, state, compiled, batch_fn, steps=b // s.chunk,
                                   checkpoint_dir=ckpt, checkpoint_every=s.checkpoint_every,
                                   resume=resume or n_done > 0, log_every=1,
                                   initial_step=at)
            except training.TrainingDiverged as e:
                raise CandidateDiverged(
                    f"training diverged at step {e.step * s.chunk} (non-finite loss, "
                    f"gradient or parameters) of candidates {strings}; the last finite "
                    f"checkpoint is kept in {ckpt} (lower `lr`)") from e
            jax.block_until_ready(res.state)
            t_train += time.perf_counter() - t1
            trained += (b // s.chunk - res.resumed_from) * s.chunk
            state = res.state
            history += [h for h in res.full_history if h["step"] > at]
            at = b // s.chunk
            losses.append(np.asarray(evaluate(state.params, state.aux, val)))
            n_done += 1
    finally:
        if tmp is not None:
            tmp.cleanup()
    tok_step = len(strings) * s.batch * arch.context
    tps = trained * tok_step / t_train if t_train > 0 else float("nan")
    flops = float(np.mean([arch.with_layers(st).flops_per_token() for st in strings]))
    return CandidateResult(np.stack(losses), np.asarray(budgets),
                           np.asarray(budgets) * s.batch * arch.context,
                           to_supernet_params(jax.device_get(state.params), arch.depth),
                           history, tps, tps * flops, compile_s, letters)
