"""Inference on a user's own data: ``predict(x, interventions=None) -> edge probabilities``.

``x`` is an ``(n, d)`` array or the path of a CSV file with a header row of variable
names, or of a Parquet file (read by :func:`jaxkit.io.read_table`, which names the
line / row and column of a non-numeric cell). :func:`read_data` reads such a file with an
optional intervention column: a cell names the row's intervened variables
(``;``-separated; empty / ``none`` / ``obs`` for observational rows).
``interventions`` is an optional ``(n, d)`` 0/1 mask: ``[r, v]`` = row ``r`` was
measured under an intervention on ``v`` (known targets); without it every row counts
as observational (no indicator). The result ``p[i, j]`` is the probability of the edge
``j -> i`` (LiNGAM convention; transpose it for "row causes column").

Chunking (documented, so any ``n >= 2`` and any ``d >= 2`` work):

* Rows are processed in chunks of at most ``n_chunk`` (default: the training
  ``n_max``), drawn by a fixed random permutation, and the chunks' probabilities
  averaged.
* Variables: the weights were trained for at most ``max_vars`` variables, and attention
  trained on ``d <= max_vars`` does not transfer reliably to larger graphs, so with
  ``d > var_chunk`` (default ``var_chunk = max_vars``) every pair is scored inside
  subsets of exactly ``var_chunk`` variables (:func:`variable_subsets`): a random
  permutation splits the variables into groups of ``var_chunk // 2``, every pair of
  groups forms one subset (topped up with variables drawn at random from the rest), so
  every pair of variables shares at least one subset; ``var_rounds`` independent
  permutations repeat this. ``p[i, j]`` is the mean of the subsets' probabilities over
  the subsets (and row chunks) that contain both ``i`` and ``j``. Everything is
  deterministic given ``seed``, and every forward pass has the shape
  ``(rows per chunk, var_chunk)``, so it compiles once per shape. Edges are judged
  within a subset only: a pair's other parents outside it act as hidden confounders
  there. ``var_chunk > max_vars`` is an error naming the limit.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.io import read_table, targets_mask
from jaxkit.kernels.checks import check_data_matrix

from .model import ModelConfig, forward
from .weights_io import shipped_weights

__all__ = ["predict", "load_model", "read_data", "variable_subsets", "edge_probabilities",
           "dag_projection"]

MAX_BATCH = 64  # forward passes per compiled call (row chunks x variable subsets)


@functools.lru_cache(maxsize=1)
def _shipped():
    w = shipped_weights()
    if w is None:
        raise FileNotFoundError("no CausalTab weights in jaxkit/causal_model/weights/ (train "
                                "them: python -m jaxkit.causaltab.make_weights)")
    return w


def load_model(weights=None):
    """``(params, cfg, meta)``: the given triple, or the shipped weights."""
    return _shipped() if weights is None else weights


@functools.lru_cache(maxsize=16)
def _batched_forward(cfg: ModelConfig):
    return jax.jit(jax.vmap(lambda p, x, i, vm, sm: forward(p, cfg, x, i, vm, sm),
                            in_axes=(None, 0, 0, None, 0)))


def read_data(path: str | Path, intervention_column: str = ""
              ) -> tuple[np.ndarray, list[str], np.ndarray | None]:
    """``(x, names, mask)`` from a CSV / Parquet table; ``mask`` ``(n, d)`` 0/1 from the
    ``intervention_column`` (None without one; the column is not a variable).

    Raises:
        jaxkit.io.DataError: naming the file, line / row and column.
    """
    t = read_table(path, labels=(intervention_column,) if intervention_column else ())
    mask = targets_mask(t, intervention_column) if intervention_column else None
    return t.x, t.names, mask


def variable_subsets(d: int, size: int, *, seed: int = 0, rounds: int = 1) -> np.ndarray:
    """Subsets of ``size`` variables out of ``d`` that cover every pair (module
    docstring): ``(S, min(d, size))`` int array, each row distinct indices. ``d <= size``:
    one subset, all variables in order. Deterministic given ``seed``.

    Raises:
        ValueError: ``size < 2``, ``d < 2`` or ``rounds < 1``.
    """
    if size < 2 or d < 2 or rounds < 1:
        raise ValueError(f"need `size` >= 2, d >= 2 and `rounds` >= 1; got size={size}, "
                         f"d={d}, rounds={rounds}")
    if d <= size:
        return np.arange(d)[None]
    g = size // 2
    rng = np.random.default_rng([seed, 1])  # not the row permutation's stream
    out = []
    for _ in range(rounds):
        perm = rng.permutation(d)
        groups = [perm[i:i + g] for i in range(0, d, g)]  # >= 3 groups since d > 2 g
        for a, b in itertools.combinations(range(len(groups)), 2):
            s = np.concatenate([groups[a], groups[b]])
            rest = np.setdiff1d(np.arange(d), s)
            out.append(np.concatenate([s, rng.choice(rest, size - len(s), replace=False)]))
    return np.stack(out)


def edge_probabilities(params, cfg: ModelConfig, x: np.ndarray, ind: np.ndarray, *,
                       n_chunk: int, var_chunk: int, var_rounds: int = 1,
                       seed: int = 0) -> np.ndarray:
    """The chunked forward pass behind :func:`predict` (module docstring), without its
    input checks: ``(d, d)`` float64, ``[i, j]`` = P(``j -> i``), zero diagonal."""
    n, d = x.shape
    k = max(1, math.ceil(n / n_chunk))
    size = math.ceil(n / k)
    perm = np.random.default_rng(seed).permutation(n)
    subsets = variable_subsets(d, var_chunk, seed=seed, rounds=var_rounds)
    m = subsets.shape[1]
    jobs = [(c, s) for c in range(k) for s in range(len(subsets))]
    xs = np.zeros((len(jobs), size, m), np.float32)
    js = np.zeros((len(jobs), size, m), np.float32)
    ms = np.zeros((len(jobs), size), bool)
    for b, (c, s) in enumerate(jobs):
        rows = perm[c * size:(c + 1) * size]
        cols = subsets[s]
        xs[b, :len(rows)], js[b, :len(rows)] = x[np.ix_(rows, cols)], ind[np.ix_(rows, cols)]
        ms[b, :len(rows)] = True
    fwd = _batched_forward(cfg)
    step = min(len(jobs), MAX_BATCH)
    probs = []
    for lo in range(0, len(jobs), step):  # fixed batch: the last one padded by repeats
        idx = np.minimum(np.arange(lo, lo + step), len(jobs) - 1)
        out = np.asarray(fwd(params, xs[idx], js[idx], jnp.ones(m, bool), ms[idx]))
        probs.append(out[:min(step, len(jobs) - lo)])
    probs = np.concatenate(probs)
    if len(subsets) == 1:
        p = probs.mean(axis=0).astype(np.float64)
    else:
        tot = np.zeros((d, d))
        cnt = np.zeros((d, d))
        for b, (_, s) in enumerate(jobs):
            ix = np.ix_(subsets[s], subsets[s])
            tot[ix] += probs[b]
            cnt[ix] += 1.0
        p = tot / np.maximum(cnt, 1.0)
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("CausalTab produced non-finite probabilities")
    np.fill_diagonal(p, 0.0)
    return p


def predict(x, interventions=None, *, weights=None, n_chunk: int | None = None,
            var_chunk: int | None = None, var_rounds: int = 1, seed: int = 0) -> np.ndarray:
    """Edge probabilities ``(d, d)`` (module docstring) from the shipped weights (or
    ``weights = (params, cfg, meta)``).

    Args:
        x: ``(n, d)`` data or a CSV / Parquet path.
        interventions: optional ``(n, d)`` 0/1 intervention mask (known targets).
        weights: optional ``(params, cfg, meta)`` from
            :func:`jaxkit.causal_model.weights_io.load_weights` or training.
        n_chunk: rows per chunk (default: the training ``n_max``).
        var_chunk: variables per subset when ``d > var_chunk`` (default and maximum:
            the weights' ``max_vars``).
        var_rounds: independent covering rounds of variable subsets (more averaging).
        seed: seed of the row permutation and of the variable subsets.

    Returns:
        float64 ``p`` ``(d, d)``, ``p[i, j]`` = P(``j -> i``), zero diagonal.

    Raises:
        ValueError: non-numeric CSV columns, NaN/inf, a constant column, ``n < 2``,
            ``d < 2``, ``var_chunk`` above ``max_vars`` or below 2, or an intervention
            mask of the wrong shape or with values other than 0/1; each message names
            the argument.
    """
    if isinstance(x, str | Path):
        x = read_table(x).x
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"`x` must be a 2-D array (n_samples, n_variables); got shape "
                         f"{x.shape}")
    check_data_matrix(jnp.asarray(x), "x")
    n, d = x.shape
    params, cfg, meta = load_model(weights)
    if d < 2:
        raise ValueError(f"`x` needs at least 2 variables; got {d}")
    var_chunk = cfg.max_vars if var_chunk is None else int(var_chunk)
    if var_chunk > cfg.max_vars:
        raise ValueError(f"`var_chunk`={var_chunk}: these CausalTab weights were trained for "
                         f"at most max_vars={cfg.max_vars} variables (use subsets of at "
                         "most that many, or retrain with a larger --d-max)")
    if var_chunk < 2:
        raise ValueError(f"`var_chunk` must be >= 2; got {var_chunk}")
    if var_rounds < 1:
        raise ValueError(f"`var_rounds` must be >= 1; got {var_rounds}")
    if interventions is None:
        ind = np.zeros((n, d))
    else:
        ind = np.asarray(interventions, dtype=np.float64)
        if ind.shape != x.shape:
            raise ValueError(f"`interventions` must have the shape of x {x.shape}; got "
                             f"{ind.shape}")
        if not np.all((ind == 0) | (ind == 1)):
            raise ValueError("`interventions` must be a 0/1 mask")
    n_chunk = int(n_chunk or meta.get("settings", {}).get("n_max", 100))
    if n_chunk < 2:
        raise ValueError(f"`n_chunk` must be >= 2; got {n_chunk}")
    return edge_probabilities(params, cfg, x, ind, n_chunk=n_chunk, var_chunk=var_chunk,
                              var_rounds=var_rounds, seed=seed)


def dag_projection(p: np.ndarray, threshold: float | None = None) -> np.ndarray:
    """The greedy DAG of ``p > threshold`` (``[i, j]``: ``j -> i``): edges in order of
    decreasing ``p``, each kept unless it closes a cycle. ``threshold=None``: the
    expected-count rule, keep the ``round(sum p)`` most probable edges (the model's own
    expected number of edges; a fixed 0.5 keeps none when the model is unsure)."""
    d = p.shape[0]
    if threshold is None:
        off = p[~np.eye(d, dtype=bool)]
        k = int(round(float(off.sum())))
        if k <= 0:
            return np.zeros((d, d), bool)
        threshold = float(np.sort(off)[::-1][min(k, off.size) - 1]) - 1e-12
    reach = np.eye(d, dtype=bool)  # reach[a, b]: a path b -> ... -> a (or a == b)
    out = np.zeros((d, d), bool)
    cand = [(p[i, j], i, j) for i in range(d) for j in range(d) if i != j and p[i, j] > threshold]
    for _, i, j in sorted(cand, reverse=True):
        if reach[j, i]:  # i already reaches j: j -> i would close a cycle
            continue
        out[i, j] = True
        # b reaches a after j -> i when b reaches j and i reaches a
        reach |= np.outer(reach[:, i], reach[j, :])
    return out
