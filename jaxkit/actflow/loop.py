"""The ActFlow loop: verifier-guided expansion of a flow model's generable set.

A flow-matching model (linear path, :func:`jaxkit.kernels.flow.cfm_loss`) is pre-trained
on data that covers part of the valid set. Then, for ``rounds`` rounds and with the same
per-round compute for every method (``budget`` samples, ``adapt_steps`` Adam steps):

1. **explore** (``"actflow"`` only; the other methods draw ``z ~ N(0, I)``):
   * tempered noise ``z = tau * eps`` (``tau > 1`` reaches the low-density tails of the
     base distribution, i.e. the edge of the generable set; cf. temperature sampling in
     Glow, Kingma & Dhariwal 2018);
   * latent perturbation: earlier accepted samples and training points are mapped back
     to noise by integrating the flow from t=1 to t=0 (ODE inversion, exact for a flow
     map), then perturbed, ``z = F^{-1}(x) + sigma * eps`` (local exploration around
     known-valid points in the flow's latent space, as in latent-space optimisation of
     generative models; Gomez-Bombarelli et al. 2018);
   * steering: ``steer_steps`` normalised gradient steps on ``z`` that increase the
     soft-min distance of the generated sample ``F(z)`` to the training data and the
     accepted set (gradient through the ODE solve) -- a push toward novel regions.
2. **integrate** ``x = F(z)`` (fixed-step ODE solve), **verify** (validity mask).
3. **keep**: ``"retrain"`` keeps every sample (recursive retraining without filtering),
   ``"retrain+filter"`` the valid ones, ``"actflow"`` the valid *and novel* ones
   (farther than ``novelty`` from the training data and every earlier accepted sample,
   thinned by a greedy packing at the same distance), ``"pretrained"`` nothing.
4. **adapt** on a replay mixture: each minibatch draws a share ``replay`` from the kept
   set and the rest from the original data. A round that keeps nothing is a round with
   no update (parameters and optimiser state unchanged; ``RoundInfo.updated`` False).

State is a pytree :class:`LoopState`; :func:`run_method` checkpoints it (model,
optimiser, kept set, per-round evaluation samples and the metric history) with orbax
after every round, so a killed run resumes at its first unfinished round. With a
``mesh`` (``jaxkit.distributed``), minibatches and sample batches are sharded over its
``"data"`` axis (data-parallel training; XLA inserts the gradient all-reduce).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxkit.kernels import flow, nets
from jaxkit.kernels.checks import check_finite

from . import metrics as M
from .domains import Domain

__all__ = ["METHODS", "ActFlowConfig", "make_model", "LoopState", "RoundInfo",
           "pretrain", "init", "make_round", "make_sampler", "evaluate", "run_method"]

METHODS = ("pretrained", "retrain", "retrain+filter", "actflow")


@dataclass(frozen=True)
class ActFlowConfig:
    """Model, pre-training, loop and exploration settings (hashable: a jit static).

    Model: ``hidden`` x ``depth`` MLP, Adam ``lr``. Pre-training: ``n_data`` points,
    ``pretrain_steps`` steps of minibatch ``batch``. Loop: ``rounds`` rounds of
    ``budget`` samples and ``adapt_steps`` Adam steps on minibatches with a share
    ``replay`` of kept samples; ``sample_steps`` steps of the ``ode`` solver. ActFlow
    exploration: a share ``perturb`` of the budget from ODE-inverted anchors plus
    ``sigma`` noise, the rest from ``temperature`` x N(0, I); ``steer_steps`` gradient
    steps of length ``steer_lr`` toward novelty. Evaluation: ``n_eval`` samples."""

    hidden: int = 128
    depth: int = 3
    lr: float = 2e-3
    n_data: int = 1024
    pretrain_steps: int = 2000
    batch: int = 256
    rounds: int = 5
    budget: int = 512
    adapt_steps: int = 300
    replay: float = 0.5
    sample_steps: int = 16
    ode: str = "midpoint"
    temperature: float = 2.0
    perturb: float = 0.5
    sigma: float = 0.5
    steer_steps: int = 1
    steer_lr: float = 0.2
    n_eval: int = 1024

    def __post_init__(self):
        for f in ("hidden", "depth", "n_data", "batch", "rounds", "budget", "sample_steps",
                  "n_eval"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"`{f}` must be a positive integer; got {getattr(self, f)}")
        if not 0.0 <= self.replay <= 1.0:
            raise ValueError(f"`replay` must lie in [0, 1]; got {self.replay}")
        if not 0.0 <= self.perturb <= 1.0:
            raise ValueError(f"`perturb` must lie in [0, 1]; got {self.perturb}")
        if self.ode not in flow.METHODS:
            raise ValueError(f"`ode` must be one of {flow.METHODS}; got {self.ode!r}")


def make_model(dim: int, cfg: ActFlowConfig, key: PRNGKeyArray) -> nets.MLP:
    """The velocity net ``v(t, x)``: :class:`jaxkit.kernels.nets.MLP`."""
    return nets.MLP(dim, width=cfg.hidden, depth=cfg.depth, key=key)


class LoopState(NamedTuple):
    params: Any  # array leaves of the nets.MLP
    opt_state: Any
    bank: Float[Array, "C d"]  # kept samples (capacity rounds * budget)
    bank_mask: Bool[Array, " C"]
    round: Int[Array, ""]


class RoundInfo(NamedTuple):
    n_valid: Int[Array, ""]
    n_novel: Int[Array, ""]
    n_kept: Int[Array, ""]
    updated: Bool[Array, ""]
    loss: Float[Array, ""]


def _optimizer(cfg: ActFlowConfig):
    return optax.adam(cfg.lr)


def _batched(model):
    return lambda t, x: jax.vmap(model, in_axes=(None, 0))(t, x)


def _shard(x, mesh):
    if mesh is None:
        return x
    from jaxkit.distributed import data_sharding

    return jax.lax.with_sharding_constraint(x, data_sharding(mesh, x.ndim))


def _check_divisible(n: int, name: str, mesh):
    if mesh is not None and n % mesh.shape["data"]:
        raise ValueError(f"`{name}` ({n}) must be a multiple of the mesh's data axis size "
                         f"({mesh.shape['data']}) for sharded batches")


def _loss(params, static, x1, key):
    k0, kt = jax.random.split(key)
    x0 = jax.random.normal(k0, x1.shape, x1.dtype)

    def vel(p, t, x):
        return eqx.combine(p, static)(t, x)

    keys = jax.random.split(kt, x1.shape[0])
    return jnp.mean(jax.vmap(lambda k, a, b: flow.cfm_loss(vel, params, k, a, b))(keys, x1,
                                                                                  x0))


def _n_rep(cfg: ActFlowConfig) -> int:
    return int(round(cfg.batch * cfg.replay))


_JIT_CACHE: dict = {}


def _cached(key, build: Callable, *keep):
    """Jitted functions are cached per (kind, config, domain, mesh) so that every method
    and every test reuses one compilation; ``keep`` holds the objects whose ``id`` is in
    ``key`` alive."""
    if key not in _JIT_CACHE:
        _JIT_CACHE[key] = (*keep, build())
    return _JIT_CACHE[key][-1]


def _train_fn(cfg: ActFlowConfig, static, dim: int, mesh) -> Callable:
    """Jitted ``train(params, opt_state, data, bank, bank_mask, key) -> (params,
    opt_state, losses)``: ``adapt_steps`` Adam steps (one ``lax.scan``) on minibatches of
    ``batch - n_rep`` data rows and ``n_rep = replay * batch`` kept rows (uniform among
    the masked bank rows)."""

    def build():
        opt = _optimizer(cfg)
        n_rep = _n_rep(cfg)
        n_dat = cfg.batch - n_rep

        def train(params, opt_state, data, bank, bank_mask, key):
            def step(carry, k):
                params, opt_state = carry
                k1, k2, k3 = jax.random.split(k, 3)
                x = data[jax.random.randint(k1, (n_dat,), 0, data.shape[0])]
                if n_rep:
                    logits = jnp.where(bank_mask, 0.0, -jnp.inf)
                    x = jnp.concatenate(
                        [x, bank[jax.random.categorical(k2, logits, shape=(n_rep,))]])
                x = _shard(x, mesh)
                loss, g = jax.value_and_grad(_loss)(params, static, x, k3)
                upd, opt_state = opt.update(g, opt_state, params)
                return (optax.apply_updates(params, upd), opt_state), loss

            (params, opt_state), losses = jax.lax.scan(
                step, (params, opt_state), jax.random.split(key, cfg.adapt_steps))
            return params, opt_state, losses.astype(jnp.float32)

        return jax.jit(train)

    return _cached(("train", cfg, dim, id(mesh)), build, mesh)


def pretrain(domain: Domain, cfg: ActFlowConfig, key: PRNGKeyArray, *, mesh=None
             ) -> tuple[nets.MLP, Float[Array, ""], Float[Array, "n dim"]]:
    """Draw ``n_data`` pre-training points and fit the flow for ``pretrain_steps`` Adam
    steps (rounded up to a multiple of ``adapt_steps``: pre-training runs the same
    compiled chunk as the per-round adaptation). Returns (model, mean loss of the last
    chunk, data)."""
    _check_divisible(cfg.batch, "batch", mesh)
    kd, km, kt, kb = jax.random.split(key, 4)
    data = check_finite(domain.data(kd, cfg.n_data), "data")
    model = make_model(domain.dim, cfg, km)
    params, static = eqx.partition(model, eqx.is_array)
    opt_state = _optimizer(cfg).init(params)
    cap = cfg.rounds * cfg.budget
    bank = data[jax.random.randint(kb, (cap,), 0, data.shape[0])]  # data only
    train = _train_fn(cfg, static, domain.dim, mesh)
    for i in range(max(math.ceil(cfg.pretrain_steps / cfg.adapt_steps), 1)):
        params, opt_state, losses = train(params, opt_state, data, bank,
                                          jnp.ones(cap, bool), jax.random.fold_in(kt, i))
    return eqx.combine(params, static), jnp.mean(losses), data


def init(model: nets.MLP, cfg: ActFlowConfig, dim: int) -> LoopState:
    """The loop state after pre-training: fresh optimiser, empty kept set, round 0."""
    params = eqx.filter(model, eqx.is_array)
    cap = cfg.rounds * cfg.budget
    return LoopState(params, _optimizer(cfg).init(params), jnp.zeros((cap, dim), jnp.float32),
                     jnp.zeros((cap,), bool), jnp.zeros((), jnp.int32))


def make_sampler(static, cfg: ActFlowConfig, mesh=None) -> Callable:
    """``sample(params, z) -> x = F(z)``: the flow map from t=0 to t=1 on a batch."""

    def sample(params, z):
        z = _shard(z, mesh)
        return flow.integrate(_batched(eqx.combine(params, static)), z, method=cfg.ode,
                              steps=cfg.sample_steps)

    return sample


def make_round(domain: Domain, static, cfg: ActFlowConfig, method: str, *,
               mesh=None) -> Callable:
    """One round of ``method``: ``step(state, data, key) -> (state, RoundInfo)``.

    Explore / integrate / verify / keep is one jitted function (cached per domain,
    config, method and mesh); adaptation is the shared jitted training chunk, called
    only when the round kept something (a host-level branch on a concrete count)."""
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}")
    _check_divisible(cfg.budget, "budget", mesh)
    _check_divisible(cfg.batch, "batch", mesh)
    propose = _cached(("round", id(domain), cfg, method, id(mesh)),
                      lambda: _build_propose(domain, static, cfg, method, mesh), domain, mesh)
    train = _train_fn(cfg, static, domain.dim, mesh)

    def step(state: LoopState, data: Array, key: PRNGKeyArray) -> tuple[LoopState, RoundInfo]:
        data = jnp.asarray(data)
        kx, kt = jax.random.split(key)
        bank, bank_mask, n_valid, n_novel, n_kept = propose(state.params, state.bank,
                                                            state.bank_mask, data, kx)
        params, opt_state, loss = state.params, state.opt_state, jnp.float32(jnp.nan)
        updated = method != "pretrained" and int(n_kept) > 0
        if updated:
            params, opt_state, losses = train(params, opt_state, data, bank, bank_mask, kt)
            loss = jnp.mean(losses)
        new = LoopState(params, opt_state, bank, bank_mask, state.round + 1)
        return new, RoundInfo(n_valid, n_novel, n_kept, jnp.asarray(updated), loss)

    return step


def _build_propose(domain: Domain, static, cfg: ActFlowConfig, method: str, mesh):
    sample = make_sampler(static, cfg, mesh)
    thr = domain.novelty
    d = domain.dim

    def invert(params, x):
        return flow.integrate(_batched(eqx.combine(params, static)), x, method=cfg.ode,
                              steps=cfg.sample_steps, t0=1.0, t1=0.0, reverse=True)

    def pool_dmin(feats, pool, pool_mask):
        dist = M.pairwise_distances(feats, pool, domain.metric)
        return jnp.min(jnp.where(pool_mask[None], dist, jnp.inf), axis=1)

    def explore(params, bank, bank_mask, data, key):
        kz, ka, ke = jax.random.split(key, 3)
        n_p = int(round(cfg.budget * cfg.perturb))
        zs = [cfg.temperature * jax.random.normal(kz, (cfg.budget - n_p, d), jnp.float32)]
        pool = jnp.concatenate([data, bank])
        pool_mask = jnp.concatenate([jnp.ones(data.shape[0], bool), bank_mask])
        if n_p:
            # half of the anchors from the accepted set (the frontier) once it is non-empty
            n_bank = jnp.maximum(jnp.sum(bank_mask), 1)
            logits = jnp.concatenate([jnp.full(data.shape[0], -jnp.log(data.shape[0])),
                                      jnp.where(bank_mask, -jnp.log(n_bank), -jnp.inf)])
            idx = jax.random.categorical(ka, logits, shape=(n_p,))
            eps = jax.random.normal(ke, (n_p, d), jnp.float32)
            zs.append(invert(params, pool[idx]) + cfg.sigma * eps)
        z = jnp.concatenate(zs)
        pool_f = domain.embed(pool)

        def novelty_obj(z):  # soft-min squared distance of F(z) to the known set
            f = domain.embed(sample(params, z))
            sq = jnp.square(M.pairwise_distances(f, pool_f))
            h = thr ** 2
            logits = jnp.where(pool_mask[None], -sq / h, -jnp.inf)
            return jnp.sum(-h * jax.nn.logsumexp(logits, axis=1))

        for _ in range(cfg.steer_steps):
            g = jax.grad(novelty_obj)(z)
            z = z + cfg.steer_lr * g / (jnp.linalg.norm(g, axis=1, keepdims=True) + 1e-8)
        return z, pool, pool_mask

    def propose(params, bank, bank_mask, data, key):
        if method == "actflow":
            z, pool, pool_mask = explore(params, bank, bank_mask, data, key)
        else:
            z = jax.random.normal(key, (cfg.budget, d), jnp.float32)
        x = sample(params, z)
        valid = domain.verifier(x)
        n_novel = jnp.zeros((), jnp.int32)
        if method == "pretrained":
            keep = jnp.zeros_like(valid)
        elif method == "retrain":
            keep = jnp.ones_like(valid)
        elif method == "retrain+filter":
            keep = valid
        else:
            feats = domain.embed(x)
            novel = valid & (pool_dmin(feats, domain.embed(pool), pool_mask) > thr)
            n_novel = jnp.sum(novel).astype(jnp.int32)
            _, keep = M.circles(feats, thr, novel, domain.metric)
        n_bank = jnp.sum(bank_mask)
        slot = jnp.where(keep, n_bank + jnp.cumsum(keep) - 1, bank.shape[0])
        bank = bank.at[slot].set(x.astype(bank.dtype), mode="drop")
        bank_mask = bank_mask.at[slot].set(True, mode="drop")
        return bank, bank_mask, jnp.sum(valid), n_novel, jnp.sum(keep)

    return jax.jit(propose)


def evaluate(domain: Domain, model: nets.MLP, cfg: ActFlowConfig, data: Array,
             key: PRNGKeyArray, *, mesh=None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Sample ``n_eval`` points from ``N(0, I)`` through ``model`` (its generable set)
    and measure them. Returns (metrics, samples, valid mask)."""
    x, valid, vals = _eval_fn(domain, cfg, mesh)(model, jnp.asarray(data), key)
    return {k: float(v) for k, v in vals.items()}, np.asarray(x), np.asarray(valid)


def _eval_fn(domain, cfg, mesh):
    return _cached(("eval", id(domain), cfg, id(mesh)),
                   lambda: _build_eval(domain, cfg, mesh), domain, mesh)


def _build_eval(domain, cfg, mesh):
    ref = None if domain.reference is None else jnp.asarray(domain.reference)
    w = None if domain.weights is None else jnp.asarray(domain.weights)
    met = domain.metric

    @eqx.filter_jit
    def fn(model, data, key):
        params, static = eqx.partition(model, eqx.is_array)
        z = jax.random.normal(key, (cfg.n_eval, domain.dim), jnp.float32)
        x = make_sampler(static, cfg, mesh)(params, z)
        valid = domain.verifier(x)
        f = domain.embed(x)
        out = dict(validity=M.validity(valid),
                   uniqueness=M.uniqueness(f, valid, 0.0, met),
                   novelty=M.novelty(f, domain.embed(data), domain.novelty, valid, met),
                   circles=M.circles(f, domain.radius, valid, met)[0].astype(jnp.float32),
                   vendi=M.vendi_score(f, valid, domain.radius, met))
        if ref is not None:
            out["coverage"] = M.exact_coverage(ref, f, domain.radius, valid, w, met)
            out["knn_coverage"] = M.knn_coverage(ref, f, 5, valid, met)
        return x, valid, out

    return fn


def _save_json(path: Path, obj):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)


def run_method(domain: Domain, model: nets.MLP, data: Array, method: str,
               cfg: ActFlowConfig, key: PRNGKeyArray, *, mesh=None,
               checkpoint_dir: str | Path | None = None, track=None) -> dict:
    """Run ``cfg.rounds`` rounds of ``method`` from the pre-trained ``model``.

    Round keys are ``fold_in(key, r)``; every method gets the same evaluation keys. With
    ``checkpoint_dir`` the state, the evaluation samples and the history are saved with
    orbax after each round and a rerun resumes after the last saved round. Returns
    ``dict(history=[per-round metrics, round 0 = pre-trained], samples=(R+1, n_eval, d),
    valid=(R+1, n_eval), state=LoopState, resumed_from=int)``."""
    import orbax.checkpoint as ocp

    params, static = eqx.partition(model, eqx.is_array)
    state = init(model, cfg, domain.dim)
    step = make_round(domain, static, cfg, method, mesh=mesh)
    n_rounds = cfg.rounds
    xs = np.zeros((n_rounds + 1, cfg.n_eval, domain.dim), np.float32)
    vs = np.zeros((n_rounds + 1, cfg.n_eval), bool)
    history: list[dict] = []
    mgr = None
    start = 0
    if checkpoint_dir is not None:
        checkpoint_dir = Path(checkpoint_dir).absolute()
        mgr = ocp.CheckpointManager(checkpoint_dir, options=ocp.CheckpointManagerOptions(
            max_to_keep=1, enable_async_checkpointing=False))
        meta_path = checkpoint_dir / "config.json"
        meta = dict(config=asdict(cfg), method=method, domain=domain.name,
                    key=np.asarray(jax.random.key_data(key)).tolist())
        last = mgr.latest_step()
        if last is not None and (not meta_path.is_file()
                                 or json.loads(meta_path.read_text()) != meta):
            raise ValueError(f"`checkpoint_dir` ({checkpoint_dir}) holds checkpoints of "
                             "another configuration, method, domain or key; use a fresh "
                             "directory")
        if last is not None:
            abstract = dict(state=state, xs=xs, vs=vs)
            restored = mgr.restore(last, args=ocp.args.Composite(
                arrays=ocp.args.StandardRestore(jax.tree.map(
                    ocp.utils.to_shape_dtype_struct, abstract)),
                history=ocp.args.JsonRestore()))
            arr = restored["arrays"]
            state = LoopState(*arr["state"]) if not isinstance(arr["state"], LoopState) \
                else arr["state"]
            xs, vs = np.asarray(arr["xs"]), np.asarray(arr["vs"])
            history = list(restored["history"])
            start = last + 1
        else:
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
            _save_json(meta_path, meta)
    resumed_from = start
    eval_key = jax.random.fold_in(key, 10_000_019)
    rounds = range(start, n_rounds + 1)
    for r in (track(rounds, f"actflow {domain.name} {method}") if track else rounds):
        info = None
        if r > 0:
            state, info = step(state, data, jax.random.fold_in(key, r))
            info = {k: (bool(v) if k == "updated" else float(v))
                    for k, v in info._asdict().items()}
        ev, x, v = evaluate(domain, eqx.combine(state.params, static), cfg, data,
                            jax.random.fold_in(eval_key, r), mesh=mesh)
        xs[r], vs[r] = x, v
        row = dict(round=r, method=method, **ev)
        if info is not None:
            row.update(n_valid_round=info["n_valid"], n_novel_round=info["n_novel"],
                       n_kept_round=info["n_kept"], updated=info["updated"],
                       adapt_loss=None if math.isnan(info["loss"]) else info["loss"])
        else:
            row.update(n_valid_round=None, n_novel_round=None, n_kept_round=None,
                       updated=False, adapt_loss=None)
        row["n_kept_total"] = int(np.asarray(state.bank_mask).sum())
        history.append(row)
        if mgr is not None:
            mgr.save(r, args=ocp.args.Composite(
                arrays=ocp.args.StandardSave(dict(state=state, xs=xs, vs=vs)),
                history=ocp.args.JsonSave(history)))
            mgr.wait_until_finished()
    if mgr is not None:
        mgr.close()
    return dict(history=history, samples=xs, valid=vs, state=state,
                resumed_from=resumed_from)
