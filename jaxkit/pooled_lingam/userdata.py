"""Pooled ICA-LiNGAM on the user's own table: rows from several environments, pooled.

``jaxkit run pooled-lingam --set data=FILE --set env_column=NAME`` reads ``FILE`` (CSV
with a header row, or Parquet: :func:`jaxkit.io.read_table`): every column but
``env_column`` is a variable; ``env_column`` labels the environment (regime) of each row
(any text: ``obs``, ``knockdown-A``, ...). The labels are **not** given to the fit: the
rows of all environments are pooled and ICA-LiNGAM runs on the pooled, unlabeled rows,
as in the paper. ``env_column=""`` reads a table without one (a plain ICA-LiNGAM fit).

What is reported (no ground truth, so recovery itself is not tested):

- the pooled ICA-LiNGAM graph (BIC-pruned adaptive lasso) of the first FastICA start,
  and each edge's frequency over ``data_restarts`` starts (one compiled, vmapped fit);
- DirectLiNGAM on the same pooled rows, as a second opinion;
- the premise of the method: pooling environments that change the noise scales makes
  Gaussian-looking variables non-Gaussian. Per variable, the log ratio of
  ``|excess kurtosis|`` of the pooled rows to its mean within the environments (each
  with at least 8 rows), both plus ``sqrt(24 / m)`` (the sampling sd of a Gaussian's
  excess kurtosis over ``m`` rows, ``m`` the median environment size) so that a
  near-zero denominator does not blow up; the claim "pooling adds non-Gaussianity on
  these data" is a one-sample t test of these log ratios over variables.

Errors name the file and the line (CSV) or row (Parquet): a missing environment
column (with the columns there), a non-numeric cell, an empty label, a single
environment, NaN / inf or a constant column.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.claims import Claim
from jaxkit.io import DataError, labels_to_codes, read_table
from jaxkit.kernels import lingam
from jaxkit.report import markdown_table
from jaxkit.stats import superiority

from .results import KurtosisDiagnostic, UserFit

__all__ = ["PooledTable", "read_pooled", "kurtosis_diagnostic", "fit_pooled", "claims",
           "markdown"]

PAPER = "Pooled ICA-LiNGAM (user data)"
_MIN_ENV_ROWS = 8


class PooledTable(NamedTuple):
    """A user's pooled rows: ``x`` ``(n, d)``, the variable names, the environment code
    of each row (hidden from the fits) and the label of each code."""

    path: Path
    x: np.ndarray
    names: list[str]
    env: np.ndarray
    env_names: list[str]


def read_pooled(path: str | Path, env_column: str = "env") -> PooledTable:
    """Read the user's table (module docstring); ``env_column=""``: no environment column.

    Raises:
        DataError: naming the file (and line / row, column) for an unreadable table, a
            missing ``env_column``, an empty label, fewer than 2 variables or 3 rows,
            NaN / inf, or a constant column.
    """
    t = read_table(path, labels=(env_column,) if env_column else ())
    if env_column:
        env, env_names = labels_to_codes(t, env_column)
    else:
        env, env_names = np.zeros(t.x.shape[0], np.int32), ["all rows"]
    n, d = t.x.shape
    if n < 3:
        raise DataError(f"{t.path}: need at least 3 rows; got {n}")
    for i, j in zip(*np.nonzero(~np.isfinite(t.x)), strict=True):
        raise DataError(f"{t.where(i)}, column {t.names[j]!r}: empty or not finite "
                        f"({t.x[i, j]!r})")
    const = [c for c, s in zip(t.names, np.std(t.x, axis=0), strict=True) if s == 0]
    if const:
        raise DataError(f"{t.path}: constant column(s) {const}: LiNGAM needs variation in "
                        f"every variable")
    return PooledTable(t.path, t.x, t.names, env, env_names)


def _ica_restarts(keys, x):
    return jax.vmap(lambda k: lingam.ica_lingam(k, x))(keys)


def _abs_kurtosis(x: np.ndarray) -> np.ndarray:
    c = x - x.mean(axis=0)
    m2 = np.mean(c * c, axis=0)
    return np.abs(np.mean(c ** 4, axis=0) / (m2 * m2) - 3.0)


def kurtosis_diagnostic(data: PooledTable) -> KurtosisDiagnostic:
    """A :class:`~.results.KurtosisDiagnostic`: ``kurtosis_pooled`` ``(d,)``: |excess
    kurtosis| of the pooled rows;
    ``kurtosis_within`` ``(d,)``: its mean over the environments with at least 8 rows
    (NaN with fewer than 2 environments or none that large); ``env_rows``: rows per
    environment. The excess kurtosis is ``m4 / m2^2 - 3`` of the central moments, as
    :func:`jaxkit.kernels.sem.excess_kurtosis` (float64 NumPy here)."""
    counts = np.bincount(data.env, minlength=len(data.env_names))
    within = [_abs_kurtosis(data.x[data.env == e])
              for e in np.nonzero(counts >= _MIN_ENV_ROWS)[0]]
    k_within = (np.mean(within, axis=0) if len(data.env_names) > 1 and within
                else np.full(data.x.shape[1], np.nan))
    return KurtosisDiagnostic(kurtosis_pooled=_abs_kurtosis(data.x),
                              kurtosis_within=k_within, env_rows=counts.tolist())


def fit_pooled(key, data: PooledTable, *, restarts: int = 8) -> UserFit:
    """Pooled ICA-LiNGAM (``restarts`` FastICA starts from ``split(key, restarts)``, one
    compiled vmapped fit) and DirectLiNGAM on ``data.x`` (labels unused), and the
    kurtosis diagnostic (module docstring).

    Returns:
        A :class:`~.results.UserFit`: ``adjacency`` (first start), ``edge_frequency``
        ``(d, d)`` (share of starts with the edge ``j -> i`` at ``[i, j]``),
        ``causal_order``, ``converged`` (per start), ``direct_adjacency``,
        ``direct_order`` and the :func:`kurtosis_diagnostic` (``kurtosis_pooled``
        ``(d,)``, ``kurtosis_within`` ``(d,)``: mean |excess kurtosis| over the
        environments with at least 8 rows, NaN with none; ``env_rows``: rows per
        environment).
    """
    if restarts < 1:
        raise ValueError(f"`restarts` must be >= 1; got {restarts}")
    x = jnp.asarray(data.x, jnp.result_type(float))
    keys = jax.random.split(key, restarts)
    ica = jax.device_get(jax.jit(_ica_restarts)(keys, x))
    direct = jax.device_get(jax.jit(lingam.direct_lingam)(x))
    adj = np.asarray(ica.adjacency)
    return UserFit(adjacency=adj[0], edge_frequency=(adj != 0).mean(axis=0),
                   causal_order=np.asarray(ica.causal_order[0]),
                   converged=np.asarray(ica.converged),
                   direct_adjacency=np.asarray(direct.adjacency),
                   direct_order=np.asarray(direct.causal_order),
                   diagnostic=kurtosis_diagnostic(data))


def claims(data: PooledTable, diag: KurtosisDiagnostic) -> list[Claim]:
    """The premise of pooling, tested on the user's data (module docstring; ``diag``:
    :func:`kurtosis_diagnostic`, a fit's ``diagnostic``): a ``"setup"`` row (a
    precondition of the pooled fit on this table, not a paper claim)."""
    claim = ("Pooling the environments makes the variables more non-Gaussian than within "
             "an environment (log ratio of |excess kurtosis| pooled to within > 0, over "
             "variables).")
    if len(data.env_names) < 2 or not np.isfinite(diag.kurtosis_within).all():
        return [Claim(PAPER, claim, "n/a", "not tested at this size",
                      note=f"needs >= 2 environments with >= {_MIN_ENV_ROWS} rows each",
                      kind="setup")]
    floor = np.sqrt(24.0 / np.median([c for c in diag.env_rows if c >= _MIN_ENV_ROWS]))
    v = superiority(np.log((diag.kurtosis_pooled + floor) / (diag.kurtosis_within + floor)))
    return [Claim.from_verdict(
        PAPER, claim, v, note="No ground truth: the graph itself is not scored. A 'no' means "
        "pooling adds little non-Gaussianity here, so the pooled fit rests on the noise "
        "being non-Gaussian already.", kind="setup")]


def _edges(names, adj, freq=None) -> list[list]:
    d = len(names)
    rows = [[names[j], names[i], float(adj[i, j])] + ([float(freq[i, j])] if freq is not None
                                                      else [])
            for i in range(d) for j in range(d) if adj[i, j] != 0]
    return sorted(rows, key=lambda r: -abs(r[2]))


def markdown(data: PooledTable, fit: UserFit, restarts: int) -> str:
    """The report section of the user-data run."""
    n, d = data.x.shape
    diag = fit.diagnostic
    envs = ", ".join(f"{name} ({c})" for name, c in zip(data.env_names, diag.env_rows,
                                                           strict=True))
    conv = int(np.sum(fit.converged))
    lines = [f"Your data: `{data.path}`, {n} rows x {d} variables; environments (rows): "
             f"{envs}. The environment labels are not given to the fits.", "",
             f"### Pooled ICA-LiNGAM (first of {restarts} FastICA starts; {conv}/{restarts} "
             "converged)", "",
             markdown_table(["cause", "effect", "weight", f"frequency over {restarts} starts"],
                            _edges(data.names, fit.adjacency, fit.edge_frequency)),
             "", "causal order: " + " -> ".join(data.names[i] for i in fit.causal_order),
             "", "### DirectLiNGAM on the same pooled rows", "",
             markdown_table(["cause", "effect", "weight"],
                            _edges(data.names, fit.direct_adjacency)),
             "", "### |excess kurtosis|: pooled vs within environments", "",
             markdown_table(["variable", "pooled", "within (mean)"],
                            [[v, float(a), float(b)] for v, a, b in
                             zip(data.names, diag.kurtosis_pooled, diag.kurtosis_within,
                                 strict=True)])]
    return "\n".join(lines)
