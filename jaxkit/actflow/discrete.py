"""Discrete ActFlow: verifier-guided expansion of a discrete flow-matching model.

The model is a masking-source discrete flow (Gat et al. 2024; Campbell et al. 2024;
:mod:`jaxkit.kernels.flow_discrete`): a denoiser ``p_theta(x1^i | x_t, t)`` trained with
:func:`~jaxkit.kernels.flow_discrete.dfm_loss` on token sequences and sampled with the
CTMC Euler sampler from the all-mask state (:func:`~jaxkit.kernels.flow_discrete.
ctmc_euler_sample`, unmasking only). Every method gets the same per-round budget
(``budget`` samples, ``adapt_steps`` Adam steps) and keys; per round:

1. **explore** (``"actflow"``; the baselines sample the current model from all-mask at
   temperature 1). The learned flow's representation of a discrete sample is the path
   of partially unmasked states ``x_t``; ActFlow explores there:
   * *partial re-masking*: a share ``perturb`` of the budget starts from anchors (known
     valid points: pre-training data and, with probability ``frontier``, the accepted
     set, i.e. the verified frontier) with each position masked with probability
     ``1 - kappa(t_r)``, and the CTMC runs from ``t_r`` to 1 (the discrete analogue of
     perturbing an ODE-inverted latent: ``x_{t_r}`` is an intermediate state of the
     flow, and the denoiser fills the masked positions from the learned posterior);
   * *verifier feedback*: the restart time ``t_r`` adapts each round from the verifier's
     answer on the re-masked proposals: when more than ``target`` of them are valid and
     novel, ``t_r`` decreases by ``remask_step`` (re-mask more, go farther), else it
     increases (stay closer to the valid anchors), within ``[0.05, 0.95]``;
   * *tempered posterior*: the rest of the budget is sampled from all-mask with the
     posterior at ``temperature`` (> 1 reaches low-probability tokens).
2. **verify** on the host (any Python verifier: RDKit, rules).
3. **keep**: ``retrain`` everything, ``retrain+filter`` the valid samples, ``actflow``
   the valid *and novel* ones (farther than ``novelty`` from the training data and
   every earlier accepted sample, thinned by a greedy packing at that distance).
   Two more baselines isolate ActFlow's parts: ``tempered+filter`` samples from all-mask
   at ``temperature`` and keeps the valid samples (exploration by temperature only,
   no novelty rule); ``actflow-noexplore`` samples at temperature 1 like the other
   baselines but keeps with ActFlow's rule (ActFlow without exploration).
4. **adapt** on minibatches with a share ``replay`` of kept samples, the rest data; a
   round that keeps nothing does not update.

Evaluation (every method, the same keys and ``n_eval`` samples at temperature 1) adds
``vnu_yield``: distinct valid samples farther than ``novelty`` from the pre-training data,
per sample drawn (the same novelty filter for every method), and ``heldout_recall``: the
share of the held-out reference sequences within the novelty distance of a valid
sample (a fixed radius, where ``knn_coverage``'s radius grows with the sparsity of the
reference). Distances are in the
domain's metric: Hamming on tokens, or Tanimoto on host features
(molecular fingerprints). Pre-training and the rounds are :func:`jaxkit.training.fit`
runs through the one training step (:mod:`jaxkit.kernels.train`), checkpointed after
every round, so a killed run resumes to the same parameters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from jaxkit import optim
from jaxkit.checkpoint import uncommitted
from jaxkit.config import PipelineConfig, require, require_at_least
from jaxkit.kernels import flow_discrete as fd
from jaxkit.kernels import train as T
from jaxkit.kernels.nets import sinusoidal_embedding
from jaxkit.training import fit

from . import metrics as M
from .results import DiscreteRound, MethodRun

__all__ = ["DiscreteSettings", "TokenDomain", "Denoiser", "DKernels", "DPretrained",
           "pretrain", "run_method", "evaluate_draws", "EVAL_KEYS"]

METHODS = ("pretrained", "retrain", "retrain+filter", "tempered+filter", "actflow-noexplore",
           "actflow")
#: the baselines that keep only valid samples (the filter ActFlow's keep rule refines)
FILTERED = ("retrain+filter", "tempered+filter", "actflow-noexplore")
_INFOS = ("n_valid", "n_novel", "n_kept", "updated", "loss", "restart")
EVAL_KEYS = ("validity", "uniqueness", "novelty", "circles", "novel_circles",
             "outside", "outside_circles", "vendi", "knn_coverage", "vnu_yield",
             "heldout_recall")


@dataclass(frozen=True)
class DiscreteSettings(PipelineConfig):
    """Settings of one discrete domain's run (hashable).

    Model: ``hidden`` x ``depth`` MLP denoiser, Adam ``lr``; pre-training
    ``pretrain_steps`` steps (whole chunks of ``adapt_steps``) of minibatch ``batch``.
    Rounds: ``rounds`` of ``budget`` samples and ``adapt_steps`` steps with a share
    ``replay`` of kept samples; ``sample_steps`` CTMC Euler steps. ActFlow: share
    ``perturb`` of the budget from re-masked anchors (restart time ``restart``, adapted
    by ``remask_step`` toward an acceptance of ``target``; anchors from the accepted set
    with probability ``frontier``), the rest at posterior ``temperature``. Evaluation:
    ``n_eval`` samples at temperature 1. ``arch``: the denoiser, ``"mlp"``
    (:class:`Denoiser`) or ``"transformer"`` (``depth`` blocks of width ``hidden``,
    :class:`jaxkit.actflow.transformer.TransformerDenoiser`)."""

    hidden: int = 256
    depth: int = 2
    lr: float = 2e-3
    pretrain_steps: int = 1500
    batch: int = 128
    rounds: int = 5
    budget: int = 256
    adapt_steps: int = 100
    replay: float = 0.5
    sample_steps: int = 12
    temperature: float = 1.5
    perturb: float = 0.75
    restart: float = 0.6
    remask_step: float = 0.1
    target: float = 0.3
    frontier: float = 0.5
    n_eval: int = 256
    arch: str = "mlp"

    def validate(self) -> None:
        require_at_least(self, ("hidden", "depth", "batch", "rounds", "budget", "adapt_steps",
                                "sample_steps", "n_eval", "pretrain_steps"))
        require(self.lr > 0, "lr", f"must be > 0; got {self.lr}")
        require(self.temperature > 0, "temperature", f"must be > 0; got {self.temperature}")
        for f in ("replay", "perturb", "target", "frontier", "remask_step"):
            v = getattr(self, f)
            require(0.0 <= v <= 1.0, f, f"must lie in [0, 1]; got {v}")
        require(self.arch in ("mlp", "transformer"), "arch",
                f"must be 'mlp' or 'transformer'; got {self.arch!r}")
        require(0.05 <= self.restart <= 0.95, "restart",
                f"must lie in [0.05, 0.95]; got {self.restart}")


@dataclass(frozen=True, eq=False)
class TokenDomain:
    """A discrete generation task.

    ``data`` (n, L) int tokens in ``[0, vocab)`` (padding is a token): the pre-training
    set, a *part* of the valid set. ``verify(tokens) -> bool (n,)`` on the host.
    ``features(tokens) -> (n, F)`` float array in ``metric`` space (``"hamming"``: the
    tokens; ``"tanimoto"``: fingerprint bits). ``novelty``: distance beyond which a
    sample is novel (and the #Circles radius). ``reference``: valid sequences outside
    the pre-training region (k-NN coverage), or None. ``extra(tokens, valid) -> dict``:
    domain metrics (molecules: scaffolds, internal diversity). ``outside(tokens) ->
    bool (n,)``: the sample lies outside the pre-training region (the region the data
    were restricted to), so valid outside samples measure expansion. ``decode``:
    tokens -> strings."""

    name: str
    length: int
    vocab: int
    data: np.ndarray
    verify: Callable[[np.ndarray], np.ndarray]
    decode: Callable[[np.ndarray], list[str]]
    novelty: float
    features: Callable[[np.ndarray], np.ndarray] | None = None
    metric: str = "hamming"
    reference: np.ndarray | None = None
    extra: Callable[[np.ndarray, np.ndarray], dict] | None = None
    outside: Callable[[np.ndarray], np.ndarray] | None = None
    description: str = ""

    def feats(self, tokens) -> np.ndarray:
        tokens = np.asarray(tokens)
        if self.features is None:
            return tokens.astype(np.float32)
        return np.asarray(self.features(tokens), np.float32)

    def check(self, tokens) -> np.ndarray:
        v = np.asarray(self.verify(np.asarray(tokens)))
        if v.dtype != np.bool_ or v.shape != (len(tokens),):
            raise ValueError(f"verifier of domain {self.name!r} must return a boolean mask "
                             f"of shape ({len(tokens)},); got {v.dtype} {v.shape}")
        return v


class Denoiser(eqx.Module):
    """``logits(t, x)``: the one-hot of ``x`` ((L,) tokens in ``[0, V]``, ``V`` the mask)
    flattened with a sinusoidal embedding of ``t`` -> MLP -> (L, V) logits."""

    mlp: eqx.nn.MLP
    length: int = eqx.field(static=True)
    vocab: int = eqx.field(static=True)

    def __init__(self, length: int, vocab: int, hidden: int, depth: int, *, key):
        self.length, self.vocab = length, vocab
        self.mlp = eqx.nn.MLP(length * (vocab + 1) + 16, length * vocab, hidden, depth,
                              activation=jax.nn.gelu, key=key)

    def __call__(self, t, x):
        h = jax.nn.one_hot(x, self.vocab + 1).ravel()
        e = sinusoidal_embedding(jnp.asarray(t, jnp.float32), 16, max_period=100.0)
        return self.mlp(jnp.concatenate([h, e])).reshape(self.length, self.vocab)


class DState(NamedTuple):
    """Checkpointed between rounds: training state, kept set (tokens, features, mask),
    the adaptive restart time, the round, and per-round evaluation metrics and counts."""

    train: T.TrainState
    bank: Array
    bank_f: Array
    bank_mask: Array
    restart: Array
    round: Array
    evals: dict
    infos: dict


class RoundInfo(NamedTuple):
    loss: Array
    finite: Array


class DKernels:
    """The jitted functions of one discrete domain and settings (shared by pre-training
    and every method): ``chunk`` (``adapt_steps`` Adam steps), ``sample(params, key, x,
    t0, temperature)`` (CTMC unmasking from ``x`` at ``t0``), ``remask(key, x, t)``,
    ``draw`` / ``draw_data`` (minibatches), ``keep`` (novelty + packing)."""

    def __init__(self, dom: TokenDomain, cfg: DiscreteSettings, static):
        V = dom.vocab
        self.dom, self.cfg, self.static = dom, cfg, static
        self.optimizer = optim.optimizer(cfg.lr)

        def loss_fn(params, key, x1, aux):
            model = eqx.combine(params, static)
            return fd.dfm_loss(lambda p, t, x: jax.vmap(model)(t, x), params, key, x1,
                               vocab_size=V, source="mask"), ()

        self.chunk = jax.jit(T.scan_steps(T.make_train_step(loss_fn, self.optimizer)))

        def sample(params, key, x, t0, temperature):
            model = eqx.combine(params, static)
            f = lambda t, xx: jax.vmap(model, in_axes=(None, 0))(t, xx)  # noqa: E731
            return fd.ctmc_euler_sample(key, f, x, steps=cfg.sample_steps, t0=t0,
                                        temperature=temperature, mask_token=V)

        self.sample = jax.jit(sample)
        self.remask = jax.jit(lambda key, x, t: fd.mixture_path(
            key, fd.mask_source(x.shape, V), x, t)[0])
        n_rep = int(round(cfg.batch * cfg.replay))

        def draw(key, data, bank, bank_mask):
            k1, k2 = jax.random.split(key)
            x = data[jax.random.randint(k1, (cfg.adapt_steps, cfg.batch - n_rep), 0,
                                        data.shape[0])]
            if n_rep:  # the kept rows are a prefix of the bank (filled in order)
                idx = jax.random.randint(k2, (cfg.adapt_steps, n_rep), 0,
                                         jnp.maximum(jnp.sum(bank_mask), 1))
                x = jnp.concatenate([x, bank[idx]], axis=1)
            return x

        self.draw = jax.jit(draw)
        self.draw_data = jax.jit(lambda key, data: data[jax.random.randint(
            key, (cfg.adapt_steps, cfg.batch), 0, data.shape[0])])
        thr, met = dom.novelty, dom.metric

        def keep(f, valid, pool_f, pool_mask):
            d = M.pairwise_distances(f, pool_f, met)
            dmin = jnp.min(jnp.where(pool_mask[None], d, jnp.inf), axis=1)
            novel = valid & (dmin > thr)
            return novel, M.circles(f, thr, novel, met)[1]

        self.keep = jax.jit(keep)

        def metrics(f, valid, out_mask, data_f, ref_f):
            novel = valid & (jnp.min(M.pairwise_distances(f, data_f, met), axis=1) > thr)
            vo = valid & out_mask
            out = dict(outside=M.validity(vo),
                       outside_circles=M.circles(f, thr, vo, met)[0].astype(jnp.float32),
                       validity=M.validity(valid), uniqueness=M.uniqueness(f, valid, 0.0, met),
                       novelty=M.novelty(f, data_f, thr, valid, met),
                       circles=M.circles(f, thr, valid, met)[0].astype(jnp.float32),
                       novel_circles=M.circles(f, thr, novel, met)[0].astype(jnp.float32),
                       vnu_yield=M.circles(f, 0.0, novel, met)[0] / f.shape[0],
                       vendi=M.vendi_score(f, valid, 1.0, met),
                       knn_coverage=(jnp.float32(jnp.nan) if ref_f is None
                                     else M.knn_coverage(ref_f, f, 5, valid, met,
                                                         radii=self.ref_radii)),
                       heldout_recall=(jnp.float32(jnp.nan) if ref_f is None
                                       else M.knn_coverage(ref_f, f, 5, valid, met,
                                                           radii=self.ref_fixed)))
            return {k: v.astype(jnp.float32) for k, v in out.items()}

        self.metrics = jax.jit(metrics)
        self.data = jnp.asarray(dom.data, jnp.int32)
        self.data_f = jnp.asarray(dom.feats(dom.data))
        self.ref_f = None if dom.reference is None else jnp.asarray(dom.feats(dom.reference))
        self.ref_radii = None if self.ref_f is None else jax.jit(
            M.knn_radii, static_argnums=(1, 2))(self.ref_f, 5, met)
        self.ref_fixed = None if self.ref_f is None else jnp.full(
            (self.ref_f.shape[0],), thr, jnp.float32)  # heldout_recall's fixed radius
        self.start = None  # pretrain's jitted (model, train state) draw, set there

        def store(bank, bank_f, bank_mask, slot, x, f):  # kept rows into their slots
            return (bank.at[slot].set(x, mode="drop"), bank_f.at[slot].set(f, mode="drop"),
                    bank_mask.at[slot].set(True, mode="drop"))

        def record(evals, infos, r, ev, vals):
            return ({n: a.at[r].set(ev[n]) for n, a in evals.items()},
                    {n: a.at[r].set(jnp.asarray(vals[n], jnp.float32))
                     for n, a in infos.items()})

        self.store, self.record = jax.jit(store), jax.jit(record)
        n1, cap, nf = cfg.rounds + 1, cfg.rounds * cfg.budget, self.data_f.shape[1]

        def init_run(params, ev0):  # the state before round 1 (fresh optimiser)
            return DState(T.init(params, self.optimizer), jnp.zeros((cap, dom.length), jnp.int32),
                          jnp.zeros((cap, nf), jnp.float32), jnp.zeros((cap,), bool),
                          jnp.float32(cfg.restart), jnp.zeros((), jnp.int32),
                          {k: jnp.full((n1,), jnp.nan, jnp.float32).at[0].set(v)
                           for k, v in ev0.items()},
                          {k: jnp.full((n1,), jnp.nan, jnp.float32) for k in _INFOS})

        self.init_run = jax.jit(init_run)

    def all_mask(self, n: int):
        return fd.mask_source((n, self.dom.length), self.dom.vocab)

    def run_sampler(self, params, key, x, t0, temperature) -> np.ndarray:
        """:attr:`sample` on ``x`` in blocks of ``budget`` rows (the last one padded), so
        one compilation serves every batch size."""
        b, n = self.cfg.budget, x.shape[0]
        pad = -n % b
        xp = jnp.concatenate([x, self.all_mask(pad)]) if pad else x
        out = [np.asarray(self.sample(params, jax.random.fold_in(key, i), xp[i:i + b],
                                      jnp.float32(t0), jnp.float32(temperature)))
               for i in range(0, n + pad, b)]
        return np.concatenate(out)[:n]

    def draw_samples(self, params, key, n: int, temperature: float) -> np.ndarray:
        """``n`` samples from all-mask at ``temperature``."""
        return self.run_sampler(params, key, self.all_mask(n), 0.0, temperature)

    def evaluate(self, params, key) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """``n_eval`` samples of the model from all-mask at temperature 1, verified and
        measured: (tokens, valid, metrics)."""
        x = self.draw_samples(params, key, self.cfg.n_eval, 1.0)
        valid = self.dom.check(x)
        out = (np.zeros(len(x), bool) if self.dom.outside is None
               else np.asarray(self.dom.outside(x), bool))
        vals = {k: float(v) for k, v in self.metrics(
            jnp.asarray(self.dom.feats(x)), jnp.asarray(valid), jnp.asarray(out),
            self.data_f, self.ref_f).items()}
        if self.dom.extra is not None:
            vals.update({k: float(v) for k, v in self.dom.extra(x, valid).items()})
        return x, valid, vals


class DPretrained(NamedTuple):
    model: Denoiser
    loss: float
    kernels: DKernels
    resumed_from: int
    seconds: float


def _meta(cfg, dom, key, **extra):
    return dict(config=cfg.to_dict(), domain=dom.name,
                key=np.asarray(jax.random.key_data(key)).ravel().tolist(), **extra)


def _guard(ckpt, expected):
    def check(meta):
        if {k: meta.get(k) for k in expected} != expected:
            raise ValueError(f"`checkpoint_dir` ({ckpt}) holds checkpoints of another "
                             "configuration, method, domain or key; use a fresh directory")
    return check


def pretrain(dom: TokenDomain, cfg: DiscreteSettings, key: PRNGKeyArray, *,
             checkpoint_dir: str | Path | None = None, resume: bool = True,
             kernels: DKernels | None = None) -> DPretrained:
    """Fit the denoiser on ``dom.data`` for ``pretrain_steps`` steps (whole chunks of
    ``adapt_steps``) through :func:`jaxkit.training.fit`, checkpointed every 5 chunks.
    ``kernels``: the compiled functions of an earlier run on the same domain and
    settings (another seed), reused instead of compiling again."""
    km, kt, kb = jax.random.split(key, 3)
    start = kernels.start if kernels is not None and kernels.start is not None else \
        eqx.filter_jit(lambda km: _start(dom, cfg, km))
    model, train0 = start(km)  # one compilation (not one per eager random op)
    params, static = eqx.partition(model, eqx.is_array)
    kern = kernels if kernels is not None else DKernels(dom, cfg, static)
    kern.start = start
    n_chunks = max(math.ceil(cfg.pretrain_steps / cfg.adapt_steps), 1)
    last, prev, t0 = {"loss": math.nan}, {"seconds": 0.0}, time.perf_counter()
    expected = _meta(cfg, dom, key, stage="pretrain")

    def on_restore(meta):
        _guard(checkpoint_dir, expected)(meta)
        prev["seconds"], last["loss"] = meta.get("seconds", 0.0), meta.get("loss", math.nan)

    def chunk(k, st, batches):
        st, info = kern.chunk(k, uncommitted(st), batches)  # a restored state: no recompile
        return st, info._replace(loss=jnp.mean(info.loss))

    res = fit(kt, train0, chunk,
              lambda i: kern.draw_data(jax.random.fold_in(kb, i), kern.data), steps=n_chunks,
              checkpoint_dir=checkpoint_dir, checkpoint_every=5, resume=resume,
              on_log=lambda _, rec: last.update(loss=rec["loss"]), on_restore=on_restore,
              meta_fn=lambda done: dict(expected, loss=last["loss"], seconds=prev["seconds"]
                                        + time.perf_counter() - t0))
    return DPretrained(eqx.combine(res.state.params, static), float(last["loss"]), kern,
                       res.resumed_from, prev["seconds"] + time.perf_counter() - t0)


def _start(dom: TokenDomain, cfg: DiscreteSettings, km):
    """The fresh denoiser and its optimiser state (traced by :func:`pretrain`)."""
    if cfg.arch == "transformer":
        from .transformer import TransformerDenoiser

        model = TransformerDenoiser(dom.length, dom.vocab, cfg.hidden, cfg.depth, key=km)
    else:
        model = Denoiser(dom.length, dom.vocab, cfg.hidden, cfg.depth, key=km)
    return model, T.init(eqx.filter(model, eqx.is_array), optim.optimizer(cfg.lr))


def _explore(kern: DKernels, st: DState, key):
    """ActFlow's proposals: re-masked anchors restarted at ``st.restart`` and tempered
    samples from all-mask. Returns (tokens, from_anchor mask)."""
    cfg = kern.cfg
    n_p = int(round(cfg.budget * cfg.perturb))
    ka, kb, kc, km, ks, kt = jax.random.split(key, 6)
    parts, flags = [], []
    if n_p:
        n_bank = int(np.sum(np.asarray(st.bank_mask)))
        idx_d = jax.random.randint(ka, (n_p,), 0, kern.data.shape[0])
        anchors = kern.data[idx_d]
        if n_bank:
            idx_b = jax.random.categorical(kb, jnp.where(st.bank_mask, 0.0, -jnp.inf),
                                           shape=(n_p,))
            use_b = jax.random.uniform(kc, (n_p,)) < cfg.frontier
            anchors = jnp.where(use_b[:, None], st.bank[idx_b], anchors)
        xt = kern.remask(km, anchors, jnp.full((n_p,), st.restart, jnp.float32))
        parts.append(kern.run_sampler(st.train.params, ks, xt, st.restart, 1.0))
        flags.append(np.ones(n_p, bool))
    if cfg.budget - n_p:
        parts.append(kern.draw_samples(st.train.params, kt, cfg.budget - n_p,
                                       cfg.temperature))
        flags.append(np.zeros(cfg.budget - n_p, bool))
    return np.concatenate([np.asarray(p) for p in parts]), np.concatenate(flags)


def run_method(pre: DPretrained, method: str, key: PRNGKeyArray, *,
               checkpoint_dir: str | Path | None = None, resume: bool = True,
               track=None) -> tuple[MethodRun, object]:
    """Run ``cfg.rounds`` rounds of ``method`` from the pre-trained denoiser (round ``r``
    evaluated with ``fold_in(k_eval, r)``, the same keys for every method).

    Returns:
        The :class:`~jaxkit.actflow.results.MethodRun` (``history``: one
        :class:`~jaxkit.actflow.results.DiscreteRound` per round, round 0 = pre-trained;
        ``seconds``, ``resumed_from``; ``samples (n_eval, L)``: the final evaluation
        tokens, None without a round run here; ``valid (n_eval,)``) and the final
        denoiser's parameters.
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}")
    kern, cfg, dom = pre.kernels, pre.kernels.cfg, pre.kernels.dom
    params = uncommitted(eqx.filter(pre.model, eqx.is_array))  # restored: no recompile
    k_rounds, k_eval = jax.random.split(key)
    _, _, ev0 = kern.evaluate(params, jax.random.fold_in(k_eval, 0))
    cap = cfg.rounds * cfg.budget
    st0 = kern.init_run(params, {k: np.float32(v) for k, v in ev0.items()})
    last = {}

    def round_step(k, st: DState, _):
        st = uncommitted(st)  # a restored state: no second compilation
        kx, kt, kb = jax.random.split(k, 3)
        if method == "actflow":
            x, anchored = _explore(kern, st, kx)
        else:
            temp = cfg.temperature if method == "tempered+filter" else 1.0
            x = kern.draw_samples(st.train.params, kx, cfg.budget, temp)
            anchored = np.zeros(len(x), bool)
        valid = dom.check(x)
        f = dom.feats(x)
        pool_f = jnp.concatenate([kern.data_f, st.bank_f])
        pool_m = jnp.concatenate([jnp.ones(kern.data_f.shape[0], bool), st.bank_mask])
        novel, packed = (np.asarray(a) for a in kern.keep(jnp.asarray(f), jnp.asarray(valid),
                                                          pool_f, pool_m))
        keep = {"pretrained": np.zeros_like(valid), "retrain": np.ones_like(valid),
                "retrain+filter": valid, "tempered+filter": valid,
                "actflow-noexplore": packed, "actflow": packed}[method]
        restart = st.restart
        if method == "actflow" and anchored.any():  # verifier feedback on the restarts
            acc = float(np.mean(novel[anchored]))
            restart = jnp.clip(restart + (-cfg.remask_step if acc > cfg.target
                                          else cfg.remask_step), 0.05, 0.95)
        n_bank = int(np.sum(np.asarray(st.bank_mask)))
        slot = np.where(keep, n_bank + np.cumsum(keep) - 1, cap).astype(np.int32)
        bank, bank_f, bank_mask = kern.store(st.bank, st.bank_f, st.bank_mask, slot,
                                             np.asarray(x, np.int32), np.asarray(f, np.float32))
        train, loss = st.train, jnp.float32(jnp.nan)
        updated = method != "pretrained" and int(keep.sum()) > 0
        if updated:
            train, info = kern.chunk(kt, train, kern.draw(kb, kern.data, bank, bank_mask))
            loss = jnp.mean(info.loss)
        r = int(st.round) + 1
        xe, ve, ev = kern.evaluate(train.params, jax.random.fold_in(k_eval, r))
        last.update(samples=xe, valid=ve)
        vals = dict(n_valid=valid.sum(), n_novel=novel.sum(), n_kept=keep.sum(),
                    updated=float(updated), loss=loss, restart=restart)
        vals = {n: np.float32(v) for n, v in vals.items()}
        evals, infos = kern.record(st.evals, st.infos, np.int32(r),
                                   {n: np.float32(v) for n, v in ev.items()}, vals)
        new = DState(train, bank, bank_f, bank_mask, jnp.asarray(restart, jnp.float32),
                     jnp.asarray(r, jnp.int32), evals, infos)
        return new, RoundInfo(loss, jnp.asarray(bool(np.isfinite(float(loss))) or not updated))

    expected = _meta(cfg, dom, key, method=method)
    t0, prev = time.perf_counter(), {"seconds": 0.0}

    def on_restore(meta):
        _guard(checkpoint_dir, expected)(meta)
        prev["seconds"] = meta.get("seconds", 0.0)

    it = None if track is None else iter(track(range(cfg.rounds),
                                               f"actflow {dom.name} {method}"))

    def batch_fn(i):
        if it is not None:
            next(it, None)
        return None

    res = fit(k_rounds, st0, round_step, batch_fn, steps=cfg.rounds,
              checkpoint_dir=checkpoint_dir, checkpoint_every=1, resume=resume,
              on_restore=on_restore,
              meta_fn=lambda done: dict(expected, seconds=prev["seconds"]
                                        + time.perf_counter() - t0))
    st = res.state
    run = MethodRun(history=history(st, method),
                    seconds=prev["seconds"] + time.perf_counter() - t0,
                    resumed_from=res.resumed_from, samples=last.get("samples"),
                    valid=last.get("valid"))
    return run, st.train.params


def history(st: DState, method: str) -> list[DiscreteRound]:
    """Per-round :class:`~jaxkit.actflow.results.DiscreteRound` records (round 0: the
    pre-trained model)."""
    evals = {k: np.asarray(v) for k, v in st.evals.items()}
    infos = {k: np.asarray(v) for k, v in st.infos.items()}
    rows = []
    for r in range(len(evals["validity"])):
        metrics = {k: float(v[r]) for k, v in evals.items()}
        if r == 0:
            rows.append(DiscreteRound(round=r, method=method, metrics=metrics,
                                      n_kept_round=None, updated=False, restart=None))
            continue
        rows.append(DiscreteRound(
            round=r, method=method, metrics=metrics,
            n_valid_round=float(infos["n_valid"][r]), n_novel_round=float(infos["n_novel"][r]),
            n_kept_round=float(infos["n_kept"][r]), updated=bool(infos["updated"][r]),
            restart=float(infos["restart"][r]) if method == "actflow" else None))
    return rows


def evaluate_draws(kern: DKernels, params, key: PRNGKeyArray, n: int) -> dict[str, np.ndarray]:
    """Metrics of ``n`` evaluation draws (keys ``fold_in(key, j)``): ``{metric: (n,)}``."""
    rows = [kern.evaluate(params, jax.random.fold_in(key, j))[2] for j in range(n)]
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}
