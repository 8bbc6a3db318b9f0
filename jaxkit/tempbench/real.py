"""TempBench on real activations: every dictionary trained on a language model's residual
stream, each probed on the text-derived tasks of :mod:`jaxkit.tempbench.text_tasks`.

Documents are split by index: every ``test_every``-th document is held out for probing
(the rest train the dictionaries); the held-out documents are split again by document
into a probe-fit half and a probe-test half, so overlapping windows never straddle the
two. For the window ending at each token t (``t >= T - 1``) every method's
representation (:func:`jaxkit.tempbench.baselines.window_codes`) is read and, per task:

* ``auroc_best``: the latent with the largest AUROC on the probe-fit half, scored on the
  probe-test half (selection and score on disjoint data);
* ``probe_k``: ``k_probe`` latents chosen by the largest class-mean difference on the
  probe-fit half, an L2 logistic regression on them (:func:`logistic_fit`, the
  objective of scikit-learn's ``LogisticRegression(C=1)``), AUROC on the probe-test half
  (SAEBench's k-sparse probing).

References on the same windows: the raw activations of the last token (``raw_token``,
d columns) and of the whole window (``raw_window``, T d columns). Also per method the
window FVU (where it reconstructs the window) and the L0 of the representation.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray
from scipy.stats import rankdata

from jaxkit.kernels import crosscoder as cc

from . import baselines as B
from .lm_acts import Documents
from .text_tasks import TASKS, task_labels
from .train import TrainConfig, Trainer

__all__ = ["auroc_columns", "logistic_fit", "probe_scores", "compare_real", "summarise_real",
           "held_out_windows", "REFERENCES", "PROBE_METRICS"]

REFERENCES = ("raw_token", "raw_window")
PROBE_METRICS = ("auroc_best", "probe_k")


def auroc_columns(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUROC of every column of ``scores (N, M)`` for binary labels ``y (N,)``
    (Mann-Whitney with average ranks for ties; 0.5 for a constant column; nan when one
    class is absent)."""
    y = np.asarray(y, bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return np.full(scores.shape[1], np.nan)
    r = rankdata(np.asarray(scores, np.float64), axis=0)
    return (r[y].sum(0) - n1 * (n1 + 1) / 2) / (n1 * n0)


def logistic_fit(x: np.ndarray, y: np.ndarray, C: float = 1.0, iters: int = 50
                 ) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method (float64): minimises
    ``||w||^2 / 2 + C sum_i logloss(y_i, x_i w + b)`` with the intercept ``b``
    unpenalised (scikit-learn's ``LogisticRegression(C=C)`` objective). Returns
    ``(w, b)``."""
    X = np.concatenate([np.asarray(x, np.float64), np.ones((len(x), 1))], 1)
    t = np.asarray(y, np.float64)
    reg = np.eye(X.shape[1]) / C
    reg[-1, -1] = 0.0
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ beta))
        g = X.T @ (p - t) + reg @ beta
        H = (X * (p * (1 - p))[:, None]).T @ X + reg + 1e-10 * np.eye(X.shape[1])
        step = np.linalg.solve(H, g)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta[:-1], float(beta[-1])


def probe_scores(fit_x: np.ndarray, fit_y: np.ndarray, test_x: np.ndarray,
                 test_y: np.ndarray, k_probe: int) -> dict[str, float]:
    """``auroc_best`` and ``probe_k`` (module docstring) of one representation."""
    fit_y, test_y = np.asarray(fit_y, bool), np.asarray(test_y, bool)
    if fit_y.all() or not fit_y.any() or test_y.all() or not test_y.any():
        return {"auroc_best": float("nan"), "probe_k": float("nan")}
    au = auroc_columns(fit_x, fit_y)
    best = int(np.nanargmax(au))
    out = {"auroc_best": float(auroc_columns(test_x[:, best:best + 1], test_y)[0])}
    diff = np.abs(fit_x[fit_y].mean(0) - fit_x[~fit_y].mean(0))
    cols = np.argsort(-diff, kind="stable")[:k_probe]
    mu, sd = fit_x[:, cols].mean(0), fit_x[:, cols].std(0) + 1e-6
    w, b = logistic_fit((fit_x[:, cols] - mu) / sd, fit_y)
    score = ((test_x[:, cols] - mu) / sd) @ w + b
    out["probe_k"] = float(auroc_columns(score[:, None], test_y)[0])
    return out


@functools.partial(jax.jit, static_argnames=("method", "cfg"))
def _codes(method, params, x, layers_last, cfg):
    z, xh = B.window_codes(method, params, x, cfg, layers_last=layers_last)
    if xh is None:
        return z, jnp.full((), jnp.nan)
    return z, cc.fvu(x, xh)


def _windows(a: np.ndarray, T: int) -> np.ndarray:
    """(n, L, ...) -> (n, L - T + 1, T, ...) windows of stride 1."""
    idx = np.arange(a.shape[1] - T + 1)[:, None] + np.arange(T)
    return a[:, idx]


def _split(n: int, test_every: int):
    ids = np.arange(n)
    test = ids[ids % test_every == test_every - 1]
    train = ids[ids % test_every != test_every - 1]
    half = len(test) // 2  # equal halves: one compiled encoder per method
    return train, test[:half], test[half:2 * half]


def compare_real(key: PRNGKeyArray, docs: Documents, cfg: TrainConfig, *, windows=(3,),
                 methods=B.ALL_METHODS, n_seeds: int = 2, trainer: Trainer = Trainer(),
                 name: str = "real", test_every: int = 4, k_probe: int = 5,
                 line_start: int = 8, ngram: int = 4, lm=None, steer_norm: float = 8.0,
                 steer_per_doc: int = 4) -> dict[str, Any]:
    """Train every method for every window and seed on the training documents and probe
    the held-out ones (module docstring). With ``lm = (model, layer, scale)`` (the LM
    whose block ``layer`` output, divided by ``scale``, are the activations) every
    method of :data:`jaxkit.tempbench.steer.STEER_METHODS` is also steered
    (:func:`jaxkit.tempbench.steer.steer_method`, atoms of norm ``steer_norm``,
    ``steer_per_doc`` negatives per probe-test document).

    Returns:
      ``{"T=..": {method or reference: {"<task>/<metric>": per-seed array, "fvu", "l0"}},
      "tasks": {task: {"positives", "valid"}}}``; references have one value (no seeds).
    """
    if "mlc" in methods and docs.layers is None:
        methods = tuple(m for m in methods if m != "mlc")  # user data without `layers`
    tr, fit_ids, te_ids = _split(docs.acts.shape[0], test_every)
    if len(fit_ids) < 1 or len(te_ids) < 1:
        raise ValueError(f"{docs.acts.shape[0]} documents leave no held-out probe documents "
                         f"(every {test_every}-th is held out, split in two)")
    labels = task_labels(docs.tokens, line_start=line_start, ngram=ngram)
    train_x = jnp.asarray(docs.acts[tr])
    train_layers = None if docs.layers is None else jnp.asarray(docs.layers[tr])
    if lm is not None:
        from . import steer

        scores = {t: steer.task_score(docs.tokens[tr], labels[t][0][tr], labels[t][1][tr])
                  for t in TASKS}
    out: dict[str, Any] = {"tasks": {t: {"positives": float(y[v].mean()) if v.any() else
                                         float("nan"), "valid": int(v.sum())}
                                     for t, (y, v) in labels.items()}}
    for T in windows:
        c = cfg._replace(window=T)
        parts = {}
        for part, ids in (("fit", fit_ids), ("test", te_ids)):
            x = _windows(docs.acts[ids], T)  # (n, W, T, d)
            lay = None if docs.layers is None else docs.layers[ids][:, T - 1:]
            parts[part] = dict(
                x=x.reshape(-1, T, x.shape[-1]),
                layers=None if lay is None else lay.reshape(-1, *lay.shape[2:]),
                y={t: labels[t][0][ids][:, T - 1:].ravel() for t in TASKS},
                v={t: labels[t][1][ids][:, T - 1:].ravel() for t in TASKS})
        res: dict[str, dict] = {}
        for ref in REFERENCES:
            rep = {p: (v["x"][:, -1] if ref == "raw_token" else v["x"].reshape(len(v["x"]), -1))
                   for p, v in parts.items()}
            res[ref] = _task_metrics(rep, parts, k_probe)
        for m in methods:
            per_seed = []
            for i in range(n_seeds):
                kk = jax.random.fold_in(key, i)
                params, _ = B.train_any(m, kk, train_x, c, trainer, layers=train_layers,
                                        name=f"{name}-{m}-T{T}-seed{i}")
                reps, fvus, l0 = {}, [], []
                for p, v in parts.items():
                    lay = None if v["layers"] is None else jnp.asarray(v["layers"])
                    z, f = _codes(m, params, jnp.asarray(v["x"]), lay, c)
                    reps[p] = np.asarray(z, np.float32)
                    fvus.append(float(f))
                    l0.append(float((reps[p] != 0).sum(1).mean()))
                met = _task_metrics(reps, parts, k_probe)
                if lm is not None and m in steer.STEER_METHODS:
                    met.update(steer.steer_method(
                        jax.random.fold_in(kk, 7), m, params, lm[0], layer=lm[1],
                        scale=lm[2], window=T, fit_codes=reps["fit"],
                        fit_y=parts["fit"]["y"], fit_v=parts["fit"]["v"],
                        test_tokens=docs.tokens[te_ids],
                        test_y={t: labels[t][0][te_ids] for t in TASKS},
                        test_v={t: labels[t][1][te_ids] for t in TASKS}, scores=scores,
                        norm=steer_norm, per_doc=steer_per_doc))
                met["fvu"], met["l0"] = fvus[1], l0[1]
                per_seed.append(met)
            res[m] = {key_: np.asarray([s[key_] for s in per_seed], np.float64)
                      for key_ in per_seed[0]}
        out[f"T={T}"] = res
    return out


def _task_metrics(reps: dict, parts: dict, k_probe: int) -> dict[str, float]:
    met = {}
    for t in TASKS:
        fv, tv = parts["fit"]["v"][t], parts["test"]["v"][t]
        s = probe_scores(reps["fit"][fv], parts["fit"]["y"][t][fv], reps["test"][tv],
                         parts["test"]["y"][t][tv], k_probe)
        met.update({f"{t}/{k}": v for k, v in s.items()})
    return met


def held_out_windows(docs: Documents, T: int, test_every: int = 4) -> np.ndarray:
    """The probe-test windows of :func:`compare_real` ``(N, T, d)``."""
    _, _, te = _split(docs.acts.shape[0], test_every)
    w = _windows(docs.acts[te], T)
    return w.reshape(-1, T, w.shape[-1])


def summarise_real(out: dict) -> dict:
    """Per-seed arrays -> ``{"mean", "ci95", "seeds"}`` summaries (references: one
    value, interval nan); ``"tasks"`` kept."""
    from .compare import summarise

    res: dict[str, Any] = {"tasks": out["tasks"]}
    for T, per in out.items():
        if T == "tasks":
            continue
        res[T] = {m: summarise({k: np.atleast_1d(v) for k, v in met.items()})
                  for m, met in per.items()}
    return res
