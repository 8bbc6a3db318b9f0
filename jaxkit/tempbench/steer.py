"""Steering on the real-activation text tasks: write a dictionary latent's decoder atom
into the language model's residual stream and measure how far the model's next-byte
prediction moves towards the task's behaviour, against a random latent of the same
dictionary (the control).

For a task with labels ``y`` (:mod:`jaxkit.tempbench.text_tasks`) the *task score* of a
next byte ``b`` is the log-ratio of its frequency after positive and after negative
positions, ``s(b) = log P(b | y_t = 1) - log P(b | y_t = 0)`` (add-one smoothing over
the 256 bytes, counted on the documents' own text). At a negative position t the LM's
task score is ``E_{b ~ p(. | x_{<=t})} s(b)``. The intervention for the latent selected on
the probe-fit half (the best-AUROC latent of :func:`jaxkit.tempbench.real.probe_scores`)
adds its decoder atom, rescaled to Frobenius norm ``norm``, to the output of block
``layer`` at the positions of the window ending at t (a window atom ``(T, d)`` over all T
positions; a per-token code of window position p at position p), in the recorded
activations' units times their scale, and runs the rest of the model. Per dictionary and
task:

* ``steer_sel``: mean over the probe-test negatives of the task-score change of the
  selected latent's intervention;
* ``steer_rand``: the same for a latent drawn at random among the dictionary's latents
  active on the probe-fit half (the selected one excluded);
* ``steer``: ``steer_sel - steer_rand`` (> 0: the selected latent steers the model
  towards the feature more than an arbitrary direction of the same norm).

Reference: the steering experiment of "Crosscoding Through Time" (inducing a behaviour
by adding the temporal crosscoder's latent) and activation addition (Turner et al.
2023). The model itself is a host-side input; the forward is one jitted function per
shape.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.compose.model import ComposeLM

from .real import auroc_columns

__all__ = ["STEER_METHODS", "task_score", "atom_of", "steer_deltas", "steered_scores",
           "steer_method"]

STEER_METHODS = ("sae", "stacked", "acausal", "tc", "sae_kT", "matryoshka", "tsae", "tfa")


def task_score(tokens: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``s (256,)``: log P(next byte | positive) - log P(next byte | negative) over the
    valid positions that have a next byte (add-one smoothing)."""
    tok = np.asarray(tokens)
    yy, vv = np.asarray(y, bool)[:, :-1], np.asarray(valid, bool)[:, :-1]
    nxt = tok[:, 1:]
    pos = np.bincount(nxt[vv & yy].ravel(), minlength=256) + 1.0
    neg = np.bincount(nxt[vv & ~yy].ravel(), minlength=256) + 1.0
    return np.log(pos / pos.sum()) - np.log(neg / neg.sum())


def atom_of(method: str, params, column: int, window: int) -> np.ndarray:
    """The write direction ``(T, d)`` of representation column ``column`` of ``method``
    (:func:`jaxkit.tempbench.baselines.window_codes`), zeros at the positions it does
    not write to."""
    T = window
    if method in ("tc", "acausal"):
        return np.asarray(params.W_dec[column], np.float32)
    if method == "tfa":
        d = params.D.shape[-1]
        p, f = divmod(column, params.D.shape[0])
        out = np.zeros((T, d), np.float32)
        out[p] = np.asarray(params.D[f])
        return out
    W = np.asarray(params.W_dec, np.float32)
    out = np.zeros((T, W.shape[-1]), np.float32)
    if method == "sae_kT":
        out[-1] = W[column, 0]
    elif method == "stacked":  # W (T, F, 1, d)
        p, f = divmod(column, W.shape[1])
        out[p] = W[p, f, 0]
    elif method in ("sae", "matryoshka", "tsae"):
        p, f = divmod(column, W.shape[0])
        out[p] = W[f, 0]
    else:
        raise ValueError(f"`method` must be one of {STEER_METHODS}; got {method!r}")
    return out


def _positions(neg: np.ndarray, T: int, per_doc: int) -> list[tuple[int, int]]:
    """Up to ``per_doc`` evenly spaced negative window ends ``t >= T - 1`` per document."""
    out = []
    for i, row in enumerate(neg):
        ts = np.flatnonzero(row[T - 1:]) + T - 1
        if len(ts):
            pick = ts[np.unique(np.linspace(0, len(ts) - 1, per_doc).astype(int))]
            out += [(i, int(t)) for t in pick]
    return out


def steer_deltas(atom: np.ndarray, where: list[tuple[int, int]], L: int, norm: float
                 ) -> np.ndarray:
    """``(N, L, d)``: ``atom (T, d)`` rescaled to Frobenius norm ``norm`` and placed on
    the window ending at each ``t`` of ``where``."""
    T, d = atom.shape
    a = atom / max(float(np.linalg.norm(atom)), 1e-12) * norm
    out = np.zeros((len(where), L, d), np.float32)
    for n, (_, t) in enumerate(where):
        out[n, t - T + 1:t + 1] = a
    return out


@functools.lru_cache(maxsize=4)
def _score_fn(graphdef, layer: int):
    from flax import nnx

    @jax.jit
    def fn(state, tokens, delta, pos, score):
        m = nnx.merge(graphdef, state)
        x = m.embed.embed(tokens, m.dtype)
        for i, b in enumerate(m.blocks):
            x = b(x)
            if i == layer:
                x = x + delta.astype(x.dtype)
        logits = m.embed.logits(x)[jnp.arange(tokens.shape[0]), pos]  # (N, 256)
        return jnp.sum(jax.nn.softmax(logits, -1) * score, -1)
    return fn


def steered_scores(model: ComposeLM, layer: int, tokens: np.ndarray, delta: np.ndarray,
                   pos: np.ndarray, score: np.ndarray) -> np.ndarray:
    """The LM's task score ``E_{b ~ p(. | x_{<=pos})} s(b)`` per row with ``delta`` (model
    units) added to block ``layer``'s output: ``(N,)``."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    return np.asarray(_score_fn(graphdef, int(layer))(
        state, jnp.asarray(tokens, jnp.int32), jnp.asarray(delta), jnp.asarray(pos, jnp.int32),
        jnp.asarray(score, jnp.float32)), np.float64)


def steer_method(key, method: str, params, model: ComposeLM, *, layer: int, scale: float,
                 window: int, fit_codes: np.ndarray, fit_y: dict, fit_v: dict,
                 test_tokens: np.ndarray, test_y: dict, test_v: dict, scores: dict,
                 norm: float, per_doc: int = 4) -> dict[str, float]:
    """``{"<task>/steer_sel", "<task>/steer_rand", "<task>/steer"}`` of one trained
    dictionary (module docstring). ``fit_codes (N, M)`` with the flat labels ``fit_y`` /
    ``fit_v`` per task select the latent; ``test_tokens (n, L)`` with per-document labels
    ``test_y`` / ``test_v`` give the negatives; ``scores[task]`` is :func:`task_score`;
    ``scale`` converts recorded units to the model's."""
    out: dict[str, float] = {}
    T, L = window, test_tokens.shape[1]
    alive = np.flatnonzero((fit_codes != 0).any(0))
    rows, deltas, pos, sc, tags = [], [], [], [], []
    for j, t in enumerate(scores):
        fv = fit_v[t]
        nan = {f"{t}/steer_sel": np.nan, f"{t}/steer_rand": np.nan, f"{t}/steer": np.nan}
        yf = fit_y[t][fv]
        where = _positions(test_v[t] & ~test_y[t], T, per_doc)
        if yf.all() or not yf.any() or not where or len(alive) < 2:
            out.update(nan)
            continue
        au = auroc_columns(fit_codes[fv], yf)
        if not np.isfinite(au).any():
            out.update(nan)
            continue
        best = int(np.nanargmax(au))
        others = alive[alive != best]
        rand = int(others[int(jax.random.randint(jax.random.fold_in(key, j), (), 0,
                                                 len(others)))])
        for kind, col in (("sel", best), ("rand", rand)):
            deltas.append(steer_deltas(atom_of(method, params, col, T), where, L, norm)
                          * np.float32(scale))
            rows += [i for i, _ in where]
            pos += [tt for _, tt in where]
            sc += [scores[t]] * len(where)
            tags += [(t, kind)] * len(where)
    if not rows:
        return out
    n, pad = len(rows), 2 * len(scores) * len(test_tokens) * per_doc - len(rows)
    tok = test_tokens[np.asarray(rows + [0] * pad)]  # one fixed shape: one compilation
    delta = np.concatenate(deltas + [np.zeros((pad, L, deltas[0].shape[-1]), np.float32)])
    score = np.stack(sc + [sc[0]] * pad)
    pos_a = np.asarray(pos + [0] * pad)
    got = steered_scores(model, layer, tok, delta, pos_a, score)
    clean = steered_scores(model, layer, tok, np.zeros_like(delta), pos_a, score)
    change = (got - clean)[:n]
    tags_a = np.asarray([f"{t}/{k}" for t, k in tags])
    for t in scores:
        if f"{t}/steer" in out:
            continue
        sel = float(change[tags_a == f"{t}/sel"].mean())
        rnd = float(change[tags_a == f"{t}/rand"].mean())
        out.update({f"{t}/steer_sel": sel, f"{t}/steer_rand": rnd, f"{t}/steer": sel - rnd})
    return out
