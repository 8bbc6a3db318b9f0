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

Limits: at most ``max_vars`` variables (the number the weights were trained for; more is
an error naming the limit, since attention weights trained on ``d <= max_vars`` do not
transfer reliably to larger graphs). Rows are processed in chunks of at most
``n_chunk`` (default: the training ``n_max``), drawn by a fixed random permutation, and
the chunks' probabilities averaged: a documented chunking, so any ``n >= 2`` works.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.io import read_table, targets_mask
from jaxkit.kernels.checks import check_data_matrix

from .model import ModelConfig, forward
from .train import shipped_weights

__all__ = ["predict", "load_model", "read_data"]


@functools.lru_cache(maxsize=1)
def _shipped():
    w = shipped_weights()
    if w is None:
        raise FileNotFoundError("no CausalTab weights in jaxkit/causaltab/weights/ (train "
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


def predict(x, interventions=None, *, weights=None, n_chunk: int | None = None,
            seed: int = 0) -> np.ndarray:
    """Edge probabilities ``(d, d)`` (module docstring) from the shipped weights (or
    ``weights = (params, cfg, meta)``).

    Args:
        x: ``(n, d)`` data or a CSV / Parquet path.
        interventions: optional ``(n, d)`` 0/1 intervention mask (known targets).
        weights: optional ``(params, cfg, meta)`` from
            :func:`jaxkit.causaltab.train.load_weights` or training.
        n_chunk: rows per chunk (default: the training ``n_max``).
        seed: seed of the row permutation that forms the chunks.

    Returns:
        float64 ``p`` ``(d, d)``, ``p[i, j]`` = P(``j -> i``), zero diagonal.

    Raises:
        ValueError: non-numeric CSV columns, NaN/inf, a constant column, ``n < 2``, more
            than ``max_vars`` variables, or an intervention mask of the wrong shape or
            with values other than 0/1; each message names the argument.
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
    if d > cfg.max_vars:
        raise ValueError(f"`x` has {d} variables; these CausalTab weights were trained for "
                         f"at most max_vars={cfg.max_vars} (retrain with a larger --d-max)")
    if d < 2:
        raise ValueError(f"`x` needs at least 2 variables; got {d}")
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
    k = max(1, math.ceil(n / n_chunk))
    size = math.ceil(n / k)
    perm = np.random.default_rng(seed).permutation(n)
    xs = np.zeros((k, size, d), np.float32)
    js = np.zeros((k, size, d), np.float32)
    ms = np.zeros((k, size), bool)
    for c in range(k):
        rows = perm[c * size:(c + 1) * size]
        xs[c, :len(rows)], js[c, :len(rows)], ms[c, :len(rows)] = x[rows], ind[rows], True
    probs = np.asarray(_batched_forward(cfg)(params, xs, js, jnp.ones(d, bool), ms))
    p = probs.mean(axis=0).astype(np.float64)
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("CausalTab produced non-finite probabilities")
    np.fill_diagonal(p, 0.0)
    return p
