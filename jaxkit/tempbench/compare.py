"""Method comparison on the TempBench tasks at a matched active-latent budget.

Methods (``METHODS``), each a dictionary that reads a window of T tokens:

* ``sae`` -- per-token TopK SAE (window 1, ``k`` per token), applied to each token of the
  window: ``k T`` active latents per window.
* ``stacked`` -- T independent per-position TopK SAEs (SAE p trained on position p of
  the windows, ``k`` each, ``vmap``-ed over positions): ``k T`` per window.
* ``acausal`` -- acausal crosscoder over the T positions as views (Lindsey et al. 2024,
  "Sparse crosscoders"): ReLU latents with the L1 penalty weighted by the *sum of the
  per-position decoder norms* ``sum_f z_f sum_t ||W_dec[f, t]||``, which favours atoms on
  few positions. Same shapes as the temporal crosscoder (``W_dec (F, T, d)``); the
  difference is this objective. Its coefficient is steered during training towards the
  matched L0 ``k T`` (multiplicative controller ``log lam += eta (L0 - kT) / kT``), so
  its L0 is close to, not exactly, ``k T`` (reported).
* ``tc`` -- temporal crosscoder: one TopK dictionary over the window with ``k T`` latents
  per window, decoder atoms unit-norm jointly over ``(T, d)``.

All four get the same number of latents per dictionary (``n_latents``; ``stacked`` has
T of them), the same Adam steps, batch size and learning rate, and are trained on the
same data per seed. Training is :mod:`jaxkit.tempbench.train` (``jaxkit.crosscoder.fit``
for the TopK dictionaries, the one step and loop of :mod:`jaxkit.kernels.train` /
:mod:`jaxkit.training` for the acausal crosscoder), one seed at a time.

Metrics (same rule for every method; atoms of window-1 and per-position SAEs are placed
at the positions they write to in a T-window, zeros elsewhere: the per-token SAE's at
every position, SAE p's at position p):

* *token recovery*: each learned atom is cut into its T per-position slices ``(d,)``;
  slices with norm below 0.1 x the largest slice of their atom are dropped (numerical
  leftovers, not represented content); recovery AUC, MMCS and Hungarian MCC of the true
  per-token directions against these slices (``jaxkit.kernels.crosscoder``). The per-token
  SAE contributes its n atoms once (copies would let the matching reuse an atom).
* *temporal recovery*: MMCS / AUC of the window-level ground truth (persistent atoms,
  chain alignments) against the whole ``(T, d)`` atoms. A window-1 atom reaches at most
  ``1/sqrt(T)`` against a persistent atom by construction.
* *FVU* of the held-out windows (jointly over the window), *L0* per window.
* HMM: whether the *latents* track the hidden state: the held-out state accuracy of a
  linear probe (:func:`probe_accuracy`, ridge regression onto the one-hot state, one
  probe per window position) from the method's codes of the whole window (all latents
  active on it: the per-token SAE's T codes side by side) to the state at each position,
  fitted on the training sequences and scored on the test sequences (``probe_acc``);
  beside it the same probe on the raw window (``window_probe``, the baseline a latent
  readout must beat) and the Bayes filter / forward-backward references. Second column:
  the *state accuracy of the reconstruction readout* ``argmax_s <x_hat_t, mu_s>``
  (``state_acc``, unsupervised; it goes through x_hat, which keeps the noise). Also MMCS
  of the state directions against the slices.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxkit.kernels import crosscoder as cc
from jaxkit.stats import t_interval

from . import tasks
from .results import HMMReferences, Panel, Summary, WindowScores, summarise
from .train import METHODS, TrainConfig, Trainer, train_method, view_norm_penalty

__all__ = ["METHODS", "LABELS", "TrainConfig", "MarkovSetting", "HMMSetting", "ChainSetting",
           "Trainer", "train_method", "window_forward", "window_atoms", "window_slices",
           "token_slices", "view_norm_penalty", "recovery_metrics", "evaluate",
           "hmm_references", "probe_accuracy", "compare_markov", "compare_hmm",
           "compare_chains", "interval", "summarise"]

LABELS = {"sae": "per-token SAE", "stacked": "stacked per-position SAEs",
          "acausal": "acausal crosscoder (L1, per-position norms)",
          "tc": "temporal crosscoder (TopK)"}
SLICE_FLOOR = 0.1
PROBE_RIDGE = 1e-2  # ridge of the state probe, per fit row, on standardised features


def window_forward(method: str, params, x: Float[Array, "B T d"],
                   cfg: TrainConfig) -> tuple[Float[Array, "B M"], Float[Array, "B T d"]]:
    """Codes (all latents active on the window, ``M`` = total latents) and reconstruction
    of windows ``x`` by one trained dictionary (one seed)."""
    B, T, d = x.shape
    if method == "sae":
        z = cc.encode(params, x.reshape(B * T, 1, d), k=cfg.k)
        return z.reshape(B, -1), cc.decode(params, z).reshape(B, T, d)
    if method == "stacked":
        z = jax.vmap(lambda p, xp: cc.encode(p, xp[:, None], k=cfg.k), (0, 1))(params, x)
        xh = jax.vmap(cc.decode)(params, z)[:, :, 0]  # (T, B, d)
        return jnp.moveaxis(z, 0, 1).reshape(B, -1), jnp.moveaxis(xh, 0, 1)
    if method == "tc":
        z = cc.encode(params, x, k=cfg.k * T)
        return z, cc.decode(params, z)
    z = cc.encode(params, x, activation="relu")
    return z, cc.decode(params, z)


def window_atoms(method: str, params, window: int) -> Float[Array, "M T d"]:
    """Decoder atoms as T-window patterns, zeros outside the position an atom writes to:
    ``sae`` (applied at every position) contributes each atom at each of the T positions
    (``T n`` patterns), ``stacked`` SAE p its atoms at position p; crosscoders their
    ``W_dec``."""
    T = window
    eye = jnp.eye(T, dtype=params.W_dec.dtype)
    if method == "sae":
        w = params.W_dec[:, 0]  # (n, d)
        return jnp.einsum("nd,pq->pnqd", w, eye).reshape(-1, T, w.shape[-1])
    if method == "stacked":
        w = params.W_dec[:, :, 0]  # (T, n, d)
        return jnp.einsum("pnd,pq->pnqd", w, eye).reshape(-1, T, w.shape[-1])
    return params.W_dec


def window_slices(method: str, params, window: int) -> Float[Array, "M d"]:
    """Per-token atoms compared with the per-token truth: the SAE's ``n`` atoms once (not
    once per placement, so a Hungarian matching cannot use copies), the stacked SAEs'
    ``T n`` atoms, the crosscoders' :func:`token_slices`."""
    if method == "sae":
        return params.W_dec[:, 0]
    return token_slices(window_atoms(method, params, window))


def token_slices(atoms: Float[Array, "M T d"], floor: float = SLICE_FLOOR) -> Float[Array, "MT d"]:
    """Per-position slices of the atoms; slices with norm below ``floor`` times the largest
    slice of their atom are zeroed (they then match nothing)."""
    norms = jnp.linalg.norm(atoms, axis=-1)
    keep = norms >= floor * jnp.max(norms, axis=-1, keepdims=True)
    return (atoms * keep[..., None]).reshape(-1, atoms.shape[-1])


def recovery_metrics(atoms: Float[Array, "M T d"], slices: Float[Array, "K d"],
                     token_truth: Float[Array, "F d"],
                     window_truth: Float[Array, "G T d"]) -> dict[str, Array]:
    """Token recovery (per-token atoms of :func:`window_slices` vs the per-token
    directions: AUC, MMCS, Hungarian MCC) and temporal recovery (whole window atoms vs the
    window truth: AUC, MMCS). Zero rows (padding) match nothing."""
    sl = slices
    return dict(token_auc=cc.recovery_auc(sl, token_truth),
                token_mmcs=cc.mmcs(sl, token_truth),
                token_mcc=cc.mcc_hungarian(sl, token_truth),
                temporal_auc=cc.recovery_auc(atoms, window_truth),
                temporal_mmcs=cc.mmcs(atoms, window_truth))


@jax.jit
def _recovery_seeds(atoms, slices, token_truth, window_truth):
    return jax.vmap(recovery_metrics)(atoms, slices, token_truth, window_truth)


@functools.partial(jax.jit, static_argnames=("method", "cfg"))
def _forward_seeds(method, params, x, cfg):
    """Per seed: codes, reconstructions, window atoms (padded to ``T n_latents`` rows)
    and per-token atoms (padded to ``T^2 n_latents`` rows), so one compiled metric
    function serves every method."""
    T, n = cfg.window, cfg.n_latents

    def one(p, xx):
        z, xh = window_forward(method, p, xx, cfg)
        a = window_atoms(method, p, T)
        a = jnp.pad(a, ((0, T * n - a.shape[0]), (0, 0), (0, 0)))
        sl = window_slices(method, p, T)
        sl = jnp.pad(sl, ((0, T * T * n - sl.shape[0]), (0, 0)))
        return z, xh, a, sl
    return jax.vmap(one)(params, x)


def evaluate(method: str, params, x_test: Float[Array, "S B T d"], cfg: TrainConfig,
             token_truth: Float[Array, "S F d"], window_truth: Float[Array, "S G T d"],
             *, states=None, probe_fit=None) -> dict[str, np.ndarray]:
    """Per-seed metrics of one method: :func:`recovery_metrics`, FVU over the held-out
    windows, L0 per window and (``states (S, B, T)`` given, HMM) the state accuracy of
    the reconstruction readout ``argmax_s <x_hat_t, u_s>`` with ``u = token_truth``
    (``state_acc``); with ``probe_fit = (x_fit (S, N, T, d), states_fit (S, N, T))`` also
    the held-out accuracy of the latent probe (``probe_acc``, :func:`probe_accuracy` on
    the window codes, fitted on ``probe_fit``)."""
    z, xh, atoms, slices = _forward_seeds(method, params, x_test, cfg)
    out = {k: np.asarray(v, np.float64) for k, v in
           _recovery_seeds(atoms, slices, token_truth, window_truth).items()}
    x64, xh64 = np.asarray(x_test, np.float64), np.asarray(xh, np.float64)
    S = x64.shape[0]
    out["fvu"] = np.array([float(cc.fvu(x64[i], xh64[i])) for i in range(S)])
    out["l0"] = (np.asarray(z) != 0).sum(-1).mean(-1).astype(np.float64)
    if states is not None:
        pred = np.argmax(np.einsum("sbtd,sgd->sbtg", xh64, np.asarray(token_truth)), -1)
        out["state_acc"] = (pred == np.asarray(states)).mean((1, 2))
    if probe_fit is not None:
        x_fit, s_fit = probe_fit
        z_fit = _codes_seeds(method, params, x_fit, cfg)
        out["probe_acc"] = _probe_seeds(z_fit, s_fit, z, states, token_truth.shape[1],
                                        _probe_width(cfg, x_test.shape[-1]))
    return out


@functools.partial(jax.jit, static_argnames=("method", "cfg"))
def _codes_seeds(method, params, x, cfg):
    """Per seed: the window codes of :func:`window_forward` (the decoder is not run)."""
    return jax.vmap(lambda p, xx: window_forward(method, p, xx, cfg)[0])(params, x)


def probe_accuracy(fit_x: Float[Array, "N p"], fit_y: Int[Array, "N P"],
                   test_x: Float[Array, "M p"], test_y: Int[Array, "M P"], n_classes: int,
                   ridge: float = PROBE_RIDGE) -> Float[Array, " P"]:
    """Held-out accuracy of a linear probe per target column (one probe per position).

    Ridge regression onto the one-hot classes, predicted class the argmax: features
    standardised on the fit rows (constant columns, e.g. dead latents or zero padding,
    stay zero), centred targets (an unpenalised intercept),
    ``W = (X'X + ridge N I)^{-1} X' (Y - mean Y)`` for all ``P`` targets in one solve.
    Deterministic, fixed shapes; ``jit`` with ``n_classes`` static.

    Args:
      fit_x, fit_y: fit rows and their classes in ``[0, n_classes)``, one column per target.
      test_x, test_y: held-out rows and classes.
      n_classes: the number of classes.
      ridge: the penalty per fit row on the standardised scale.

    Returns:
      The accuracy of each target column on the held-out rows.
    """
    N, P = fit_y.shape
    hi = jax.lax.Precision.HIGHEST
    mu, sd = fit_x.mean(0), fit_x.std(0)
    sd = jnp.where(sd > 1e-6 * jnp.max(sd), sd, 1.0)
    xf, xt = (fit_x - mu) / sd, (test_x - mu) / sd
    y = jax.nn.one_hot(fit_y, n_classes).reshape(N, P * n_classes)
    y_mean = y.mean(0)
    gram = jnp.matmul(xf.T, xf, precision=hi) + ridge * N * jnp.eye(xf.shape[1])
    w = jnp.linalg.solve(gram, jnp.matmul(xf.T, y - y_mean, precision=hi))
    scores = (jnp.matmul(xt, w, precision=hi) + y_mean).reshape(-1, P, n_classes)
    return jnp.mean(jnp.argmax(scores, -1) == test_y, 0)


_probe_jit = jax.jit(probe_accuracy, static_argnames=("n_classes",))


def _probe_width(cfg: TrainConfig, d: int) -> int:
    """One feature width for every method's codes and the raw window at window T (the
    widest: the per-token / stacked SAEs' ``T n`` codes or the raw ``T d``), so the probe
    compiles once per window."""
    return cfg.window * max(cfg.n_latents, d)


def _probe_seeds(z_fit, s_fit, z_test, s_test, n_classes: int, width: int) -> np.ndarray:
    """Mean held-out probe accuracy over window positions, per seed; features
    zero-padded to ``width``. One seed at a time: the solve is LAPACK, which is not
    ``vmap``-ed on CPU (``kernels/_batching.py``)."""
    def pad(a):
        a = jnp.asarray(a, jnp.float32).reshape(a.shape[0], -1)
        return jnp.pad(a, ((0, 0), (0, width - a.shape[1])))

    return np.array([float(jnp.mean(_probe_jit(pad(z_fit[i]), jnp.asarray(s_fit[i]),
                                               pad(z_test[i]), jnp.asarray(s_test[i]),
                                               n_classes=n_classes)))
                     for i in range(z_fit.shape[0])])


def hmm_references(task: tasks.HMMTask, window: int, *, amplitude, sigma) -> dict[str, float]:
    """State accuracy of references on the same windows: a single raw token
    (``argmax <x_t, mu_s>``), the window mean (the state of every position read from the
    mean of the window), the causal Bayes filter ``P(s_t | x_{1:t})`` and the
    Bayes-optimal forward-backward posterior of the whole sequence."""
    out = _hmm_refs(task, window, amplitude, sigma)
    return {k: float(v) for k, v in out.items()}


@functools.partial(jax.jit, static_argnums=1)
def _hmm_refs(task, window, amplitude, sigma):
    s = task.states
    single = jnp.mean(jnp.argmax(task.x @ task.directions.T, -1) == s)
    w = tasks.sliding_windows(task.x, window)  # (n, W, T, d)
    ws = tasks.sliding_windows(s[..., None], window)[..., 0]
    mean_pred = jnp.argmax(w.mean(2) @ task.directions.T, -1)
    win = jnp.mean(mean_pred[..., None] == ws)
    post = jax.vmap(lambda xx: tasks.hmm_posterior(xx, task.directions, task.transition,
                                                   task.initial, amplitude=amplitude,
                                                   sigma=sigma))(task.x)
    fb = jnp.mean(jnp.argmax(post, -1) == s)
    filt = jax.vmap(lambda xx: tasks.hmm_posterior(xx, task.directions, task.transition,
                                                   task.initial, amplitude=amplitude,
                                                   sigma=sigma, filtered=True))(task.x)
    bf = jnp.mean(jnp.argmax(filt, -1) == s)
    return dict(single_token=single, window_mean=win, forward_backward=fb, bayes_filter=bf)


interval = t_interval  # mean and 95% t-interval half-width over seeds
# summarise: {metric: per-seed values} -> {metric: Summary} (jaxkit.tempbench.results)


# ------------------------------------------------------------------ experiments


class MarkovSetting(NamedTuple):
    d: int = 16
    n_features: int = 32
    pi: float = 0.05
    noise: float = 0.01
    length: int = 64
    n_train: int = 64  # sequences per seed
    n_test: int = 16


class HMMSetting(NamedTuple):
    d: int = 16
    n_states: int = 8
    stay: float = 0.9
    amplitude: float = 1.0
    sigma: float = 0.8
    length: int = 64
    n_train: int = 64
    n_test: int = 16


class ChainSetting(NamedTuple):
    d: int = 16
    n_chains: int = 8
    chain_length: int = 3
    p_start: float = 0.05
    noise: float = 0.01
    length: int = 64
    n_train: int = 64
    n_test: int = 16


def _test_windows(x, window):
    """(S, n, L, d) -> (S, n * W, T, d)."""
    w = jax.vmap(lambda xx: tasks.sliding_windows(xx, window))(x)
    return w.reshape(w.shape[0], -1, *w.shape[-2:])


def _data_key(seed_key):
    """The data key of one seed: an ``rbg`` key made of 128 bits drawn from
    ``fold_in(seed_key, 0)`` (deterministic in the run's key). The generators' draws
    under ``vmap`` compile several times faster with it than with threefry (6.8 s vs
    1.6 s of CPU for the Markov task at test size); the trainings keep the run's keys."""
    bits = jax.random.bits(jax.random.fold_in(seed_key, 0), (4,), jnp.uint32)
    return jax.random.wrap_key_data(bits, impl="rbg")


@functools.partial(jax.jit, static_argnames=("s",))
def _markov_data(seed_keys, rho, s: MarkovSetting) -> tasks.MarkovTask:
    return jax.vmap(lambda kk: tasks.markov_features(
        _data_key(kk), n_seq=s.n_train + s.n_test, length=s.length, d=s.d,
        n_features=s.n_features, pi=s.pi, rho=rho, noise=s.noise))(seed_keys)


@functools.partial(jax.jit, static_argnames=("s",))
def _chain_data(seed_keys, s: ChainSetting) -> tasks.ChainTask:
    return jax.vmap(lambda kk: tasks.ordered_features(
        _data_key(kk), n_seq=s.n_train + s.n_test, length=s.length, d=s.d,
        n_chains=s.n_chains, chain_length=s.chain_length, p_start=s.p_start,
        noise=s.noise))(seed_keys)


@functools.partial(jax.jit, static_argnames=("s",))
def _hmm_data(seed_keys, s: HMMSetting) -> tasks.HMMTask:
    return jax.vmap(lambda kk: tasks.hmm_denoising(
        _data_key(kk), n_seq=s.n_train + s.n_test, length=s.length, d=s.d,
        n_states=s.n_states, stay=s.stay, amplitude=s.amplitude, sigma=s.sigma))(seed_keys)


def _take(a, i):
    return a[i]


def _seed_keys(key, n_seeds):
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n_seeds))


def _run_methods(seed_keys, train_x, windows, k, cfg_base, methods, ev, trainer, name):
    """Train every method for every window and seed (the per-token SAE once per seed, for
    all windows) and evaluate; ``ev(method, params, cfg)`` -> per-seed metric dict, with
    ``params`` stacked over seeds. Seed i of every method trains from
    ``fold_in(seed_key_i, 1)`` on the same data."""
    out: dict[int, dict[str, dict]] = {T: {} for T in windows}
    n_seeds = seed_keys.shape[0]
    for m in methods:
        sae = None
        for T in windows:
            cfg = cfg_base._replace(window=1 if m == "sae" else T, k=k)
            if m != "sae" or sae is None:  # the per-token SAE is window-independent
                runs = [train_method(m, jax.random.fold_in(seed_keys[i], 1), train_x[i], cfg,
                                     trainer, name=f"{name}-{m}-T{cfg.window}-seed{i}")
                        for i in range(n_seeds)]
                res = (jax.tree.map(lambda *a: np.stack(a), *[p for p, _ in runs]),
                       np.stack([c for _, c in runs]))
                if m == "sae":
                    sae = res
            params, curve = res if m != "sae" else sae
            ev_cfg = cfg._replace(window=T)
            metrics = ev(m, params, ev_cfg)
            metrics["train_fvu_final"] = np.asarray(curve[:, -1], np.float64)
            out[T][m] = metrics
    return out


def _panel(out: dict[int, dict[str, dict]], refs: dict | None = None) -> Panel:
    """The :class:`~jaxkit.tempbench.results.Panel` of :func:`_run_methods`' per-seed
    metrics (``refs[T]``: the HMM references of window T)."""
    return Panel(windows={T: WindowScores(methods={m: summarise(v) for m, v in per.items()},
                                          references=None if refs is None else refs[T])
                          for T, per in out.items()})


def compare_markov(key: PRNGKeyArray, rho: float, setting: MarkovSetting, cfg: TrainConfig,
                   *, windows=(2,), k: int = 2, n_seeds: int = 3, methods=METHODS,
                   trainer: Trainer = Trainer(), name: str = "markov") -> Panel:
    """Markov-features comparison at persistence ``rho``: a
    :class:`~jaxkit.tempbench.results.Panel` (``windows[T].methods[method][metric]``,
    a summary of the per-seed values). Seed i draws its own directions and data from
    ``fold_in(key, i)``; train and test sequences share the directions. ``trainer``:
    mesh, checkpoints and the cache of finished trainings (named after ``name``)."""
    s = setting
    seed_keys = _seed_keys(key, n_seeds)
    data = _markov_data(seed_keys, jnp.float32(rho), s)
    train_x, test_x = data.x[:, :s.n_train], data.x[:, s.n_train:]

    def ev(m, params, cfg):
        T = cfg.window
        truth_w = jax.vmap(lambda u: tasks.persistent_atoms(u, T))(data.directions)
        return evaluate(m, params, _test_windows(test_x, T), cfg, data.directions, truth_w)

    return _panel(_run_methods(seed_keys, train_x, windows, k, cfg, methods, ev, trainer, name))


def compare_chains(key: PRNGKeyArray, setting: ChainSetting, cfg: TrainConfig, *,
                   windows=(3,), k: int = 1, n_seeds: int = 3, methods=METHODS,
                   trainer: Trainer = Trainer(), name: str = "chains") -> Panel:
    """Ordered-features comparison: token truth = the C m chain-feature directions,
    window truth = :func:`tasks.chain_atoms`; a :class:`~jaxkit.tempbench.results.Panel`
    as :func:`compare_markov`'s."""
    s = setting
    seed_keys = _seed_keys(key, n_seeds)
    data = _chain_data(seed_keys, s)
    train_x, test_x = data.x[:, :s.n_train], data.x[:, s.n_train:]
    flat = data.directions.reshape(n_seeds, -1, s.d)

    def ev(m, params, cfg):
        T = cfg.window
        truth_w = jax.vmap(lambda u: tasks.chain_atoms(u, T))(data.directions)
        return evaluate(m, params, _test_windows(test_x, T), cfg, flat, truth_w)

    return _panel(_run_methods(seed_keys, train_x, windows, k, cfg, methods, ev, trainer, name))


def compare_hmm(key: PRNGKeyArray, setting: HMMSetting, cfg: TrainConfig, *, windows=(2,),
                k: int = 1, n_seeds: int = 3, methods=METHODS, trainer: Trainer = Trainer(),
                name: str = "hmm") -> Panel:
    """HMM denoising comparison: a :class:`~jaxkit.tempbench.results.Panel` as
    :func:`compare_markov`'s with, per window, the references of :func:`hmm_references`
    (:class:`~jaxkit.tempbench.results.HMMReferences`) and ``window_probe``: the latent
    probe of :func:`evaluate` on the raw window (same fit and test windows)."""
    s = setting
    seed_keys = _seed_keys(key, n_seeds)
    data = _hmm_data(seed_keys, s)
    train_x = data.x[:, :s.n_train]
    test = data._replace(x=data.x[:, s.n_train:], states=data.states[:, s.n_train:])

    def state_windows(states, T):
        st = jax.vmap(lambda ss: tasks.sliding_windows(ss[..., None], T)[..., 0])(states)
        return st.reshape(n_seeds, -1, T)

    def ev(m, params, cfg):
        T = cfg.window
        truth_w = jax.vmap(lambda u: tasks.persistent_atoms(u, T))(data.directions)
        fit = (_test_windows(train_x, T), state_windows(data.states[:, :s.n_train], T))
        return evaluate(m, params, _test_windows(test.x, T), cfg, data.directions, truth_w,
                        states=state_windows(test.states, T), probe_fit=fit)

    out = _run_methods(seed_keys, train_x, windows, k, cfg, methods, ev, trainer, name)
    references = {}
    for T in windows:
        refs = [hmm_references(jax.tree_util.tree_map(functools.partial(_take, i=i), test), T,
                               amplitude=s.amplitude, sigma=s.sigma) for i in range(n_seeds)]
        per = {r: np.array([ref[r] for ref in refs]) for r in refs[0]}
        per["window_probe"] = _probe_seeds(
            _test_windows(train_x, T), state_windows(data.states[:, :s.n_train], T),
            _test_windows(test.x, T), state_windows(test.states, T), s.n_states,
            _probe_width(cfg._replace(window=T), s.d))
        references[T] = HMMReferences(**{r: Summary.of(v) for r, v in per.items()})
    return _panel(out, references)
