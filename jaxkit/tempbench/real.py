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
window FVU (where it reconstructs the window), the L0 of the representation, the language
model's loss with the dictionary spliced in (:mod:`jaxkit.tempbench.splice`) and the
backtracking measures (:mod:`jaxkit.tempbench.backtracking`). The probe scores live in
:mod:`jaxkit.tempbench.probes` (re-exported here).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxkit.kernels import crosscoder as cc

from . import baselines as B
from .lm_acts import Documents
from .probes import auroc_columns, logistic_fit, probe_scores
from .results import LMLoss, RealPanel, TaskLabels, TraceInfo, WindowScores, summarise
from .train import TrainConfig, Trainer

__all__ = ["auroc_columns", "logistic_fit", "probe_scores", "compare_real", "summarise_real",
           "held_out_windows", "REFERENCES", "PROBE_METRICS", "LMContext"]

REFERENCES = ("raw_token", "raw_window")
PROBE_METRICS = ("auroc_best", "probe_k")


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


def _split(n: int, test_every: int, probe_docs: int | None = None):
    ids = np.arange(n)
    test = ids[ids % test_every == test_every - 1]
    train = ids[ids % test_every != test_every - 1]
    half = len(test) // 2  # equal halves: one compiled encoder per method
    if probe_docs is not None:
        half = min(half, max(probe_docs // 2, 1))
    return train, test[:half], test[len(test) // 2:len(test) // 2 + half]


class LMContext(NamedTuple):
    """The recorded model, for splicing and the backtracking test: the
    :class:`jaxkit.lm.LanguageModel`, the recorded block and its scale (model units =
    recorded units x ``scale``)."""

    lm: Any
    layer: int
    scale: float


def compare_real(key: PRNGKeyArray, docs: Documents, cfg: TrainConfig, *, windows=(3,),
                 methods=B.ALL_METHODS, n_seeds: int = 2, trainer: Trainer = Trainer(),
                 name: str = "real", test_every: int = 4, k_probe: int = 5,
                 lmc: LMContext | None = None, splice_docs: int = 8,
                 traces: Any = None, fpr: float = 0.05, steer_norm: float = 8.0,
                 steer_sites: int = 64, probe_docs: int | None = None) -> RealPanel:
    """Train every method for every window and seed on the training documents and probe
    the held-out ones on every task of ``docs.labels`` (module docstring). With ``lmc``
    (the recorded model) each dictionary is also spliced into it
    (:mod:`jaxkit.tempbench.splice`, on ``splice_docs`` probe-test documents) and, with
    ``traces = (acts (n, L, d), Traces)`` (the traces of
    :func:`jaxkit.tempbench.backtracking.make_traces` and their recorded activations, in
    the corpus's units; the first half fits, the second tests), scored on backtracking
    (detection at ``fpr``; steering towards " Wait" with atoms of norm ``steer_norm`` for
    the TC and the per-token SAE). ``probe_docs``: at most this many held-out documents
    are probed (half fit, half test; None: all).

    Returns:
      A :class:`~jaxkit.tempbench.results.RealPanel` (:func:`summarise_real` of the
      per-seed values ``{"T=..": {method or reference: {"<task>/<metric>": per-seed
      array, "fvu", "l0", "ce_spliced", "kl", "loss_recovered", "bt/..."}}, "tasks":
      {task: {"positives", "valid"}}, "lm": {"T=..": LMLoss}}``; references have one
      value).
    """
    from . import backtracking as BT
    from . import splice as SP

    if "mlc" in methods and docs.layers is None:
        methods = tuple(m for m in methods if m != "mlc")  # one layer: no MLC
    tasks = tuple(docs.labels)
    tr, fit_ids, te_ids = _split(docs.acts.shape[0], test_every, probe_docs)
    if len(fit_ids) < 1 or len(te_ids) < 1:
        raise ValueError(f"{docs.acts.shape[0]} documents leave no held-out probe documents "
                         f"(every {test_every}-th is held out, split in two)")
    labels = docs.labels
    train_x = jnp.asarray(docs.acts[tr])

    def train_layers(m):  # float32 only while the MLC trains (the store keeps float16)
        if m != "mlc" or docs.layers is None:
            return None
        return jnp.asarray(docs.layers[tr], jnp.float32)

    out: dict[str, Any] = {"tasks": {t: {"positives": float(y[v].mean()) if v.any() else
                                         float("nan"), "valid": int(v.sum())}
                                     for t, (y, v) in labels.items()}, "lm": {}}
    start = max(windows) - 1
    splice_tok = None
    if lmc is not None and docs.first is not None:
        ids = te_ids[:splice_docs]
        splice_tok = np.concatenate([docs.first[ids, None], docs.tokens[ids]], 1)
    bt = None
    if traces is not None:
        t_acts, tr_obj = traces
        nb = len(t_acts)
        half = nb // 2
        bt = dict(acts={"fit": t_acts[:half], "test": t_acts[half:2 * half]},
                  y={"fit": tr_obj.backtrack[:half], "test": tr_obj.backtrack[half:2 * half]},
                  site={"fit": tr_obj.steer_site[:half],
                        "test": tr_obj.steer_site[half:2 * half]},
                  docs=tr_obj.docs[half:2 * half])
        out["backtracking"] = {"positives": int(tr_obj.backtrack.sum()),
                               "sites": int(tr_obj.steer_site.sum()), "docs": nb,
                               "example": tr_obj.text}
    for T in windows:
        c = cfg._replace(window=T)
        parts = {}
        for part, ids in (("fit", fit_ids), ("test", te_ids)):
            x = _windows(docs.acts[ids], T)  # (n, W, T, d)
            lay = None if docs.layers is None else docs.layers[ids][:, T - 1:]
            parts[part] = dict(
                x=x.reshape(-1, T, x.shape[-1]),
                layers=None if lay is None else lay.reshape(-1, *lay.shape[2:]),
                y={t: labels[t][0][ids][:, T - 1:].ravel() for t in tasks},
                v={t: labels[t][1][ids][:, T - 1:].ravel() for t in tasks})
        res: dict[str, dict] = {}
        for ref in REFERENCES:
            rep = {p: (v["x"][:, -1] if ref == "raw_token" else v["x"].reshape(len(v["x"]), -1))
                   for p, v in parts.items()}
            res[ref] = _task_metrics(rep, parts, k_probe, tasks)
        if splice_tok is not None:
            z = SP.splice_losses(lmc.lm, lmc.layer, lmc.scale, splice_tok, "zero", None, c,
                                 start=start)
            out["lm"][f"T={T}"] = LMLoss(ce_clean=float(z.ce_clean), ce_zero=float(z.ce_spliced))
        for m in methods:
            per_seed = []
            for i in range(n_seeds):
                kk = jax.random.fold_in(key, i)
                params, _ = B.train_any(m, kk, train_x, c, trainer, layers=train_layers(m),
                                        name=f"{name}-{m}-T{T}-seed{i}")
                reps, fvus, l0 = {}, [], []
                for p, v in parts.items():
                    lay = None if v["layers"] is None else jnp.asarray(v["layers"],
                                                                       jnp.float32)
                    zc, f = _codes(m, params, jnp.asarray(v["x"]), lay, c)
                    reps[p] = np.asarray(zc, np.float32)
                    fvus.append(float(f))
                    l0.append(float((reps[p] != 0).sum(1).mean()))
                met = _task_metrics(reps, parts, k_probe, tasks)
                met["fvu"], met["l0"] = fvus[1], l0[1]
                if splice_tok is not None and m in SP.SPLICE_METHODS:
                    s = SP.splice_losses(lmc.lm, lmc.layer, lmc.scale, splice_tok, m, params,
                                         c, start=start)
                    z = out["lm"][f"T={T}"]
                    met.update(ce_spliced=s.ce_spliced, kl=s.kl,
                               loss_recovered=SP.loss_recovered(z.ce_clean, s.ce_spliced,
                                                                z.ce_zero))
                if bt is not None and m != "mlc":
                    bcodes, blab = {}, {}
                    for p in ("fit", "test"):
                        xb = _windows(bt["acts"][p], T)
                        zc, _ = _codes(m, params, jnp.asarray(xb.reshape(-1, T, xb.shape[-1])),
                                       None, c)
                        bcodes[p] = np.asarray(zc, np.float32)
                        blab[p] = (bt["y"][p][:, T - 1:].ravel(), bt["site"][p][:, T - 1:].ravel())
                    steer = lmc is not None and m in ("tc", "sae") and steer_norm > 0
                    r = BT.detect_and_steer(
                        jax.random.fold_in(kk, 7), m, params, bcodes, blab, window=T, fpr=fpr,
                        lm=lmc.lm if steer else None, layer=lmc.layer if lmc else 0,
                        scale=lmc.scale if lmc else 1.0, docs=bt["docs"], norm=steer_norm,
                        max_sites=steer_sites)
                    met.update({f"bt/{k_}": v_ for k_, v_ in r.as_dict().items()})
                per_seed.append(met)
            res[m] = {key_: np.asarray([s[key_] for s in per_seed], np.float64)
                      for key_ in per_seed[0]}
        out[f"T={T}"] = res
    return summarise_real(out)


def _task_metrics(reps: dict, parts: dict, k_probe: int, tasks) -> dict[str, float]:
    met = {}
    for t in tasks:
        fv, tv = parts["fit"]["v"][t], parts["test"]["v"][t]
        s = probe_scores(reps["fit"][fv], parts["fit"]["y"][t][fv], reps["test"][tv],
                         parts["test"]["y"][t][tv], k_probe)
        met.update({f"{t}/{k}": v for k, v in s.as_dict().items()})
    return met


def held_out_windows(docs: Documents, T: int, test_every: int = 4,
                     probe_docs: int | None = None) -> np.ndarray:
    """The probe-test windows of :func:`compare_real` ``(N, T, d)``."""
    _, _, te = _split(docs.acts.shape[0], test_every, probe_docs)
    w = _windows(docs.acts[te], T)
    return w.reshape(-1, T, w.shape[-1])


def summarise_real(out: dict) -> RealPanel:
    """The :class:`~jaxkit.tempbench.results.RealPanel` of :func:`compare_real`'s
    per-seed values (the mapping its Returns names; ``"lm"`` and ``"backtracking"``
    optional): per window, method and metric a
    :class:`~jaxkit.tempbench.results.Summary` (references: one value, interval nan)."""
    bt = out.get("backtracking")
    return RealPanel(
        tasks={t: TaskLabels(**v) for t, v in out["tasks"].items()},
        lm={int(T.split("=")[1]): v for T, v in out.get("lm", {}).items()},
        backtracking=None if bt is None else TraceInfo(**bt),
        windows={int(T.split("=")[1]): WindowScores(methods={
            m: summarise({k: np.atleast_1d(v) for k, v in met.items()})
            for m, met in per.items()})
            for T, per in out.items() if T.startswith("T=")})
