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

Training goes through the one training step (:func:`jaxkit.kernels.train.make_train_step`,
``adapt_steps`` steps per call through :func:`~jaxkit.kernels.train.scan_steps`) and
the one loop with checkpoints (:func:`jaxkit.training.fit`): pre-training is a ``fit``
over chunks of ``adapt_steps`` steps, and the rounds of a method are a ``fit`` whose
step is one round (explore, verify, keep, adapt, evaluate) on a :class:`RunState`
(training state, kept set, the per-round evaluation samples and metrics). A run killed
at any point and started again with the same checkpoint folder ends with the same
parameters as an uninterrupted one. The jitted functions of one (domain, config, mesh)
live in one :class:`Kernels` object that pre-training and every method share. With a
``mesh`` (``jaxkit.distributed``), minibatches and sample batches are sharded over its
``"data"`` axis (data-parallel training; XLA inserts the gradient all-reduce).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxkit import optim
from jaxkit.checkpoint import uncommitted
from jaxkit.kernels import flow, nets
from jaxkit.kernels import train as T
from jaxkit.kernels.checks import check_finite
from jaxkit.training import fit

from . import metrics as M
from .config import ActFlowConfig
from .domains import Domain
from .results import MethodRun, Round

__all__ = ["METHODS", "ActFlowConfig", "Kernels", "Pretrained", "make_model", "LoopState",
           "RoundInfo", "RunState", "pretrain", "init", "make_round", "make_sampler",
           "evaluate", "evaluate_draws", "run_method", "uncommitted"]

METHODS = ("pretrained", "retrain", "retrain+filter", "actflow")


def make_model(dim: int, cfg: ActFlowConfig, key: PRNGKeyArray) -> nets.MLP:
    """The velocity net ``v(t, x)``: :class:`jaxkit.kernels.nets.MLP`."""
    return nets.MLP(dim, width=cfg.hidden, depth=cfg.depth, key=key)


class LoopState(NamedTuple):
    """The state between rounds: the training state (parameters = the array leaves of
    the :class:`~jaxkit.kernels.nets.MLP`, Adam state, step count), the kept set
    (capacity ``rounds * budget``) and the number of rounds done."""

    train: T.TrainState
    bank: Float[Array, "C d"]
    bank_mask: Bool[Array, " C"]
    round: Int[Array, ""]

    @property
    def params(self):
        return self.train.params


class RoundInfo(NamedTuple):
    n_valid: Int[Array, ""]
    n_novel: Int[Array, ""]
    n_kept: Int[Array, ""]
    updated: Bool[Array, ""]
    loss: Float[Array, ""]
    finite: Bool[Array, ""]


class RunState(NamedTuple):
    """What :func:`run_method` checkpoints after every round: the loop state and, per
    round ``r = 0..R``, the evaluation samples ``xs[r]``, their validity ``vs[r]``, the
    evaluation metrics ``evals[name][r]`` and the round's counts ``infos[name][r]``."""

    loop: LoopState
    xs: Float[Array, "R1 n d"]
    vs: Bool[Array, "R1 n"]
    evals: dict
    infos: dict


class Pretrained(NamedTuple):
    """What :func:`pretrain` returns: the model, the mean loss of its last chunk, the
    pre-training data, the compiled :class:`Kernels` (pass them on to
    :func:`run_method`), the chunk a checkpoint restored (0: a fresh run) and the
    seconds spent training (summed over resumed runs)."""

    model: nets.MLP
    loss: float
    data: Float[Array, "n dim"]
    kernels: Kernels
    resumed_from: int
    seconds: float


def _optimizer(cfg: ActFlowConfig):
    return optim.optimizer(cfg.lr)


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


def _n_rep(cfg: ActFlowConfig) -> int:
    return int(round(cfg.batch * cfg.replay))


class Kernels:
    """The jitted functions of one domain, configuration and mesh, compiled on first
    use and shared by pre-training and every method (one object per run: no global
    cache).

    Attributes:
        chunk: ``chunk(key, TrainState, batches) -> (TrainState, StepInfo)``:
            ``adapt_steps`` flow-matching Adam steps, one ``lax.scan``
            (:func:`jaxkit.kernels.train.scan_steps` of
            :func:`~jaxkit.kernels.train.make_train_step`).
        draw: ``draw(key, data, bank, bank_mask) -> (adapt_steps, batch, dim)``
            minibatches of ``batch - n_rep`` data rows and ``n_rep = replay * batch``
            kept rows (uniform among the masked bank rows, which are a prefix).
        draw_data: ``draw_data(key, data)``: minibatches of data rows only.
        evaluate: ``evaluate(params, data, key) -> (x, valid, metrics)`` on ``n_eval``
            samples from N(0, I).
    """

    def __init__(self, domain: Domain, cfg: ActFlowConfig, static, mesh=None):
        _check_divisible(cfg.batch, "batch", mesh)
        _check_divisible(cfg.budget, "budget", mesh)
        self.domain, self.cfg, self.static, self.mesh = domain, cfg, static, mesh
        self._propose: dict[str, Callable] = {}
        self.sample = make_sampler(static, cfg, mesh)  # x = F(z), traceable

        def loss_fn(params, key, x1, aux):
            x1 = _shard(x1, mesh)
            k0, kt = jax.random.split(key)
            x0 = jax.random.normal(k0, x1.shape, x1.dtype)

            def vel(p, t, x):
                return eqx.combine(p, static)(t, x)

            keys = jax.random.split(kt, x1.shape[0])
            per = jax.vmap(lambda k, a, b: flow.cfm_loss(vel, params, k, a, b))(keys, x1, x0)
            return jnp.mean(per), ()

        self.optimizer = _optimizer(cfg)
        self.chunk = jax.jit(T.scan_steps(T.make_train_step(loss_fn, self.optimizer)))
        n_rep, n_dat = _n_rep(cfg), cfg.batch - _n_rep(cfg)

        def draw(key, data, bank, bank_mask):
            k1, k2 = jax.random.split(key)
            x = data[jax.random.randint(k1, (cfg.adapt_steps, n_dat), 0, data.shape[0])]
            if n_rep:  # the kept rows are a prefix of the bank (filled in order)
                idx = jax.random.randint(k2, (cfg.adapt_steps, n_rep), 0,
                                         jnp.maximum(jnp.sum(bank_mask), 1))
                x = jnp.concatenate([x, bank[idx]], axis=1)
            return x

        def draw_data(key, data):
            return data[jax.random.randint(key, (cfg.adapt_steps, cfg.batch), 0,
                                           data.shape[0])]

        self.draw = jax.jit(draw)
        self.draw_data = jax.jit(draw_data)
        self.evaluate = jax.jit(self._build_eval())
        self.start = None  # pretrain's jitted (data, model, train state) draw, set there
        n1, cap = cfg.rounds + 1, cfg.rounds * cfg.budget

        def init_run(params, x0, v0, ev0):
            loop0 = LoopState(T.init(params, self.optimizer),
                              jnp.zeros((cap, domain.dim), jnp.float32),
                              jnp.zeros((cap,), bool), jnp.zeros((), jnp.int32))
            return RunState(
                loop0, jnp.zeros((n1, *x0.shape), jnp.float32).at[0].set(x0),
                jnp.zeros((n1, x0.shape[0]), bool).at[0].set(v0),
                {k: jnp.full((n1,), jnp.nan, jnp.float32).at[0].set(v) for k, v in ev0.items()},
                {k: jnp.full((n1,), jnp.nan, jnp.float32) for k in _INFO})

        def record(st, lp, x, v, ev, vals):
            r = lp.round
            return RunState(lp, st.xs.at[r].set(x), st.vs.at[r].set(v),
                            {n: a.at[r].set(ev[n]) for n, a in st.evals.items()},
                            {n: a.at[r].set(jnp.asarray(vals[n], jnp.float32))
                             for n, a in st.infos.items()})

        self.init_run = jax.jit(init_run)  # one compilation for every method's start
        self.record = jax.jit(record)  # a round's samples and metrics into the RunState

    def propose(self, method: str) -> Callable:
        """The jitted explore / integrate / verify / keep of ``method``:
        ``propose(params, bank, bank_mask, data, key) -> (bank, bank_mask, n_valid,
        n_novel, n_kept)``. The three baselines share one compiled function (their keep
        rule is a traced argument), ActFlow has its own."""
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}; got {method!r}")
        kind = "actflow" if method == "actflow" else "baseline"
        if kind not in self._propose:
            self._propose[kind] = jax.jit(self._build_propose(kind))
        fn = self._propose[kind]
        if kind == "actflow":
            return fn
        mode = jnp.int32(METHODS.index(method))  # 0 keep nothing, 1 all, 2 the valid ones
        return lambda params, bank, bank_mask, data, key: fn(params, bank, bank_mask, data,
                                                             key, mode)

    def _build_propose(self, kind: str):
        domain, cfg, static, sample = self.domain, self.cfg, self.static, self.sample
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
                # half of the anchors from the accepted set (the frontier) once non-empty
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
                sq = M.squared_distances(f, pool_f)  # no sqrt: finite gradients at 0
                h = thr ** 2
                logits = jnp.where(pool_mask[None], -sq / h, -jnp.inf)
                return jnp.sum(-h * jax.nn.logsumexp(logits, axis=1))

            for _ in range(cfg.steer_steps):
                g = jax.grad(novelty_obj)(z)
                z = z + cfg.steer_lr * g / (jnp.linalg.norm(g, axis=1, keepdims=True) + 1e-8)
            return z, pool, pool_mask

        def propose(params, bank, bank_mask, data, key, mode=None):
            if kind == "actflow":
                z, pool, pool_mask = explore(params, bank, bank_mask, data, key)
            else:
                z = jax.random.normal(key, (cfg.budget, d), jnp.float32)
            x = sample(params, z)
            valid = domain.verifier(x)
            n_novel = jnp.zeros((), jnp.int32)
            if kind == "baseline":  # mode: index in METHODS (pretrained, retrain, +filter)
                keep = jnp.where(mode == 0, False, jnp.where(mode == 1, True, valid))
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

        return propose

    def _build_eval(self):
        domain, cfg = self.domain, self.cfg
        ref = None if domain.reference is None else jnp.asarray(domain.reference)
        w = None if domain.weights is None else jnp.asarray(domain.weights)
        met = domain.metric
        radii = None if ref is None else jax.jit(M.knn_radii, static_argnums=(1, 2))(
            ref, 5, met)  # once per Kernels, not per evaluation

        def fn(params, data, key):
            z = jax.random.normal(key, (cfg.n_eval, domain.dim), jnp.float32)
            x = self.sample(params, z)
            valid = domain.verifier(x)
            f = domain.embed(x)
            out = dict(validity=M.validity(valid),
                       uniqueness=M.uniqueness(f, valid, 0.0, met),
                       novelty=M.novelty(f, domain.embed(data), domain.novelty, valid, met),
                       circles=M.circles(f, domain.radius, valid, met)[0].astype(jnp.float32),
                       vendi=M.vendi_score(f, valid, domain.radius, met))
            if domain.outside is not None:
                out["outside"] = M.validity(valid & domain.outside(x))
            if ref is not None:
                out["coverage"] = M.exact_coverage(ref, f, domain.radius, valid, w, met)
                out["knn_coverage"] = M.knn_coverage(ref, f, 5, valid, met, radii=radii)
            return x, valid, {k: v.astype(jnp.float32) for k, v in out.items()}

        return fn


def _split(model):
    return eqx.partition(model, eqx.is_array)


def _config_meta(cfg: ActFlowConfig, domain: Domain, key, **extra) -> dict:
    return dict(config=cfg.to_dict(), domain=domain.name,
                key=np.asarray(jax.random.key_data(key)).ravel().tolist(), **extra)


def _guard(checkpoint_dir, expected: dict) -> Callable[[dict], None]:
    """``on_restore``: refuse a checkpoint of another configuration, method, domain or
    key."""

    def check(meta: dict) -> None:
        got = {k: meta.get(k) for k in expected}
        if got != expected:
            raise ValueError(f"`checkpoint_dir` ({checkpoint_dir}) holds checkpoints of "
                             "another configuration, method, domain or key; use a fresh "
                             "directory")

    return check


def pretrain(domain: Domain, cfg: ActFlowConfig, key: PRNGKeyArray, *, mesh=None,
             checkpoint_dir: str | Path | None = None, checkpoint_every: int = 5,
             resume: bool = True, kernels: Kernels | None = None) -> Pretrained:
    """Draw ``n_data`` pre-training points and fit the flow for ``pretrain_steps`` Adam
    steps, rounded up to whole chunks of ``adapt_steps`` (pre-training runs the same
    compiled chunk as the per-round adaptation), through :func:`jaxkit.training.fit`
    with a checkpoint every ``checkpoint_every`` chunks in ``checkpoint_dir``; a rerun
    with ``resume`` continues from the newest one (a finished one restores at once).

    Returns:
        A :class:`Pretrained`.
    """
    kd, km, kt, kb = jax.random.split(key, 4)
    start = kernels.start if kernels is not None and kernels.start is not None else \
        eqx.filter_jit(lambda kd, km: _start(domain, cfg, kd, km))
    data, model, train0 = start(kd, km)  # one compilation (not one per eager random op)
    params, static = _split(model)
    kern = kernels if kernels is not None else Kernels(domain, cfg, static, mesh)
    kern.start = start
    n_chunks = max(math.ceil(cfg.pretrain_steps / cfg.adapt_steps), 1)
    last = {"loss": math.nan}
    t0 = time.perf_counter()
    expected = _config_meta(cfg, domain, key, stage="pretrain")
    prev = {"seconds": 0.0}

    def on_restore(meta):
        _guard(checkpoint_dir, expected)(meta)
        prev["seconds"], last["loss"] = meta.get("seconds", 0.0), meta.get("loss", math.nan)

    def on_log(_, rec):
        last["loss"] = rec["loss"]

    def chunk(k, st, batches):
        st, info = kern.chunk(k, uncommitted(st), batches)  # a restored state: no recompile
        return st, info._replace(loss=jnp.mean(info.loss))

    res = fit(kt, train0, chunk,
              lambda i: kern.draw_data(jax.random.fold_in(kb, i), data), steps=n_chunks,
              checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
              resume=resume, on_log=on_log, on_restore=on_restore,
              meta_fn=lambda done: dict(expected, loss=last["loss"], seconds=prev["seconds"]
                                        + time.perf_counter() - t0))
    return Pretrained(eqx.combine(res.state.params, static), float(last["loss"]), data,
                      kern, res.resumed_from, prev["seconds"] + time.perf_counter() - t0)


def _start(domain: Domain, cfg: ActFlowConfig, kd, km):
    """Pre-training data, the fresh model and its optimiser state (traced by
    :func:`pretrain` into one compiled function)."""
    data = check_finite(domain.data(kd, cfg.n_data), "data")
    model = make_model(domain.dim, cfg, km)
    return data, model, T.init(eqx.filter(model, eqx.is_array), _optimizer(cfg))


def init(model: nets.MLP, cfg: ActFlowConfig, dim: int) -> LoopState:
    """The loop state after pre-training: fresh optimiser, empty kept set, round 0."""
    params = eqx.filter(model, eqx.is_array)
    cap = cfg.rounds * cfg.budget
    return LoopState(T.init(params, _optimizer(cfg)), jnp.zeros((cap, dim), jnp.float32),
                     jnp.zeros((cap,), bool), jnp.zeros((), jnp.int32))


def make_sampler(static, cfg: ActFlowConfig, mesh=None) -> Callable:
    """``sample(params, z) -> x = F(z)``: the flow map from t=0 to t=1 on a batch."""

    def sample(params, z):
        z = _shard(z, mesh)
        return flow.integrate(_batched(eqx.combine(params, static)), z, method=cfg.ode,
                              steps=cfg.sample_steps)

    return sample


def make_round(domain: Domain, static, cfg: ActFlowConfig, method: str, *, mesh=None,
               kernels: Kernels | None = None) -> Callable:
    """One round of ``method``: ``step(state, data, key) -> (state, RoundInfo)``.

    Explore / integrate / verify / keep is one jitted function; adaptation is the
    shared jitted training chunk (:attr:`Kernels.chunk`), called only when the round
    kept something (a host-level branch on a concrete count)."""
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}")
    kern = kernels if kernels is not None else Kernels(domain, cfg, static, mesh)
    propose = kern.propose(method)

    def step(state: LoopState, data: Array, key: PRNGKeyArray) -> tuple[LoopState, RoundInfo]:
        data = jnp.asarray(data)
        kx, kt, kb = jax.random.split(key, 3)
        bank, bank_mask, n_valid, n_novel, n_kept = propose(state.params, state.bank,
                                                            state.bank_mask, data, kx)
        train, loss, finite = state.train, jnp.float32(jnp.nan), jnp.ones((), bool)
        updated = method != "pretrained" and int(n_kept) > 0
        if updated:
            train, info = kern.chunk(kt, train, kern.draw(kb, data, bank, bank_mask))
            loss, finite = jnp.mean(info.loss), jnp.all(info.finite)
        new = LoopState(train, bank, bank_mask, state.round + 1)
        return new, RoundInfo(n_valid, n_novel, n_kept, jnp.asarray(updated), loss, finite)

    return step


def evaluate(domain: Domain, model: nets.MLP, cfg: ActFlowConfig, data: Array,
             key: PRNGKeyArray, *, mesh=None, kernels: Kernels | None = None
             ) -> tuple[dict, np.ndarray, np.ndarray]:
    """Sample ``n_eval`` points from ``N(0, I)`` through ``model`` (its generable set)
    and measure them. Returns (metrics, samples, valid mask)."""
    params, static = _split(model)
    kern = kernels if kernels is not None else Kernels(domain, cfg, static, mesh)
    x, valid, vals = kern.evaluate(params, jnp.asarray(data), key)
    return {k: float(v) for k, v in vals.items()}, np.asarray(x), np.asarray(valid)


def evaluate_draws(kernels: Kernels, params, data: Array, key: PRNGKeyArray, n: int
                   ) -> dict[str, np.ndarray]:
    """The metrics of ``n`` independent evaluation draws (keys ``fold_in(key, j)``) of
    the model ``params``: ``{metric: (n,) array}``, for paired tests between models
    evaluated with the same keys."""
    data = jnp.asarray(data)
    rows = [kernels.evaluate(params, data, jax.random.fold_in(key, j))[2] for j in range(n)]
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


_INFO = ("n_valid", "n_novel", "n_kept", "updated", "loss", "n_kept_total")


def run_method(domain: Domain, model: nets.MLP, data: Array, method: str,
               cfg: ActFlowConfig, key: PRNGKeyArray, *, mesh=None,
               checkpoint_dir: str | Path | None = None, resume: bool = True,
               kernels: Kernels | None = None, track=None) -> tuple[MethodRun, LoopState]:
    """Run ``cfg.rounds`` rounds of ``method`` from the pre-trained ``model``.

    The rounds are one :func:`jaxkit.training.fit` whose step is a round: round ``r``
    (1-based) uses the key ``fold_in(k_rounds, r - 1)`` and is evaluated with
    ``fold_in(k_eval, r)``, ``(k_rounds, k_eval) = split(key)``, so every method gets
    the same keys. With ``checkpoint_dir`` the :class:`RunState` is saved after every
    round and a rerun resumes after the last saved one (a checkpoint of another
    configuration, method, domain or key is a ValueError). ``track(iterable, text)``
    wraps the rounds (a progress bar).

    Returns:
        The :class:`~jaxkit.actflow.results.MethodRun` (``history``: one
        :class:`~jaxkit.actflow.results.Round` per round, round 0 = pre-trained;
        ``samples (R+1, n_eval, d)``, ``valid (R+1, n_eval)``, ``resumed_from``,
        ``seconds``) and the final :class:`LoopState`.
    """
    params, static = _split(model)
    params = uncommitted(params)  # a restored pre-training: no second compilation
    kern = kernels if kernels is not None else Kernels(domain, cfg, static, mesh)
    step = make_round(domain, static, cfg, method, kernels=kern)
    k_rounds, k_eval = jax.random.split(key)
    data = jnp.asarray(data)
    x0, v0, ev0 = kern.evaluate(params, data, jax.random.fold_in(k_eval, 0))
    state = kern.init_run(params, x0, v0, ev0)

    def round_step(k, st: RunState, data):
        st = uncommitted(st)  # a restored state: no second compilation
        lp, info = step(st.loop, data, k)
        x, v, ev = kern.evaluate(lp.params, data, jax.random.fold_in(k_eval, lp.round))
        vals = dict(info._asdict(), n_kept_total=jnp.sum(lp.bank_mask))
        return kern.record(st, lp, x, v, ev, vals), info

    expected = _config_meta(cfg, domain, key, method=method)
    t0 = time.perf_counter()
    prev = {"seconds": 0.0}

    def on_restore(meta):
        _guard(checkpoint_dir, expected)(meta)
        prev["seconds"] = meta.get("seconds", 0.0)

    batches = (lambda i: data) if track is None else _tracked(
        track, cfg.rounds, f"actflow {domain.name} {method}", data)
    res = fit(k_rounds, state, round_step, batches, steps=cfg.rounds,
              checkpoint_dir=checkpoint_dir, checkpoint_every=1, resume=resume,
              on_restore=on_restore,
              meta_fn=lambda done: dict(expected, seconds=prev["seconds"]
                                        + time.perf_counter() - t0))
    st = res.state
    run = MethodRun(history=history(st, method), samples=np.asarray(st.xs),
                    valid=np.asarray(st.vs), resumed_from=res.resumed_from,
                    seconds=prev["seconds"] + time.perf_counter() - t0)
    return run, st.loop


def _tracked(track, n: int, text: str, data):
    """A ``batch_fn`` that advances a progress bar once per round."""
    it = iter(track(range(n), text))

    def batch_fn(i):
        next(it, None)
        return data

    return batch_fn


def history(st: RunState, method: str) -> list[Round]:
    """The per-round :class:`~jaxkit.actflow.results.Round` records of a
    :class:`RunState` (round 0: the pre-trained model, with no round counts)."""
    evals = {k: np.asarray(v) for k, v in st.evals.items()}
    infos = {k: np.asarray(v) for k, v in st.infos.items()}
    rows = []
    for r in range(len(next(iter(evals.values())))):
        metrics = {k: float(v[r]) for k, v in evals.items()}
        if r == 0:
            rows.append(Round(round=r, method=method, metrics=metrics, n_valid_round=None,
                              n_novel_round=None, n_kept_round=None, updated=False,
                              adapt_loss=None, n_kept_total=0))
            continue
        loss = float(infos["loss"][r])
        rows.append(Round(round=r, method=method, metrics=metrics,
                          n_valid_round=float(infos["n_valid"][r]),
                          n_novel_round=float(infos["n_novel"][r]),
                          n_kept_round=float(infos["n_kept"][r]),
                          updated=bool(infos["updated"][r]),
                          adapt_loss=None if math.isnan(loss) else loss,
                          n_kept_total=int(infos["n_kept_total"][r])))
    return rows
