"""The audit on the user's own table: does each method's graph hinge on the scale?

``jaxkit run causal-audit --set data=FILE [--set intervention_column=NAME]`` reads
``FILE`` (CSV with a header row, or Parquet: :func:`jaxkit.io.read_table`). Every
column but the intervention column is a variable. The optional intervention column
names, per row, the intervened variables (``;``-separated; empty, ``none`` or ``obs``:
observational); rows with the same target set form one environment, given to the
methods that take targets (GIES) and withheld from the others.

There is no ground truth, so nothing is scored against one. What the audit measures is
the Reisach et al. (2021) question asked of *your* data: a method whose graph changes
when the variables are merely rescaled is reading the measurement scale, not the
mechanism. ``user_resamples`` bootstrap resamples of the rows (one vmapped batch, one
compile per method) are fitted twice, on the raw and on the standardised columns
(unit variance); per method the per-resample SHD between the two graphs is tested for
equivalence to zero with the margin ``user_shd_margin`` edges (TOST): "yes" = the
method's graph does not depend on the scale here, "no" = it does. Reported too: each
method's edge frequencies over the raw resamples (its stability) and the graph on all
rows.

Errors name the file and the line (CSV) or row (Parquet): a non-numeric cell, an empty
or non-finite value, an intervention naming no column, a constant column.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.claims import Claim
from jaxkit.io import DataError, read_table, targets_mask
from jaxkit.kernels import graph as gm
from jaxkit.report import markdown_table
from jaxkit.stats import equivalence

from .methods import batch_fit, get_method
from .results import MethodAudit

__all__ = ["AuditTable", "read_audit_table", "audit_table", "claims", "markdown"]

PAPER = "Causal audit (your data)"


class AuditTable(NamedTuple):
    """The user's rows ``x`` ``(n, d)``, variable names, the environment of each row
    ``env`` ``(n,)`` (0 = observational) and the targets of each environment
    ``targets`` ``(k, d)`` (row 0: none)."""

    path: Path
    x: np.ndarray
    names: list[str]
    env: np.ndarray
    targets: np.ndarray


def read_audit_table(path: str | Path, intervention_column: str = "") -> AuditTable:
    """Read the user's table (module docstring).

    Raises:
        DataError: naming the file, line / row and column (see the module docstring).
    """
    cols = (intervention_column,) if intervention_column else ()
    t = read_table(path, labels=cols, min_columns=3)
    for i, j in zip(*np.nonzero(~np.isfinite(t.x)), strict=True):
        raise DataError(f"{t.where(i)}, column {t.names[j]!r}: empty or not finite")
    n, d = t.x.shape
    if n < d + 2:
        raise DataError(f"{t.path}: {n} rows for {d} variables; need at least {d + 2}")
    const = [c for c, s in zip(t.names, t.x.std(axis=0), strict=True) if s == 0]
    if const:
        raise DataError(f"{t.path}: constant column(s) {const}")
    mask = targets_mask(t, intervention_column) if intervention_column else np.zeros((n, d))
    sets = {(): 0}
    env = np.empty(n, np.int32)
    for i, row in enumerate(mask.astype(bool)):
        env[i] = sets.setdefault(tuple(np.nonzero(row)[0]), len(sets))
    targets = np.zeros((len(sets), d), bool)
    for s, k in sets.items():
        targets[k, list(s)] = True
    return AuditTable(t.path, t.x, t.names, env, targets)


def _shd(a, b):
    return gm.edge_metrics((a != 0).astype(b.dtype), b)["shd"]


def audit_table(key, data: AuditTable, methods, *, resamples: int = 32,
                host_resamples: int = 8) -> dict[str, MethodAudit]:
    """Every method on ``resamples`` bootstrap resamples of the rows, raw and
    standardised, and on all rows (module docstring).

    Args:
        key: PRNG key (resamples from ``fold_in(key, 0)``, the methods' keys from
            ``fold_in(key, 1)``).
        data: the table.
        methods: method names of :data:`.methods.METHODS`.
        resamples: bootstrap resamples (one batch).
        host_resamples: of which the host peers (GES, GIES) fit the first ones.

    Returns:
        ``{method: MethodAudit}`` (:class:`~.results.MethodAudit`: ``full`` the
        ``(d, d)`` graph on all rows, ``frequency`` the ``(d, d)`` edge share over the
        raw resamples, ``shd`` ``(r,)`` the raw-vs-standardised SHD per resample,
        ``failed`` str or None).
    """
    n, d = data.x.shape
    idx = jax.random.randint(jax.random.fold_in(key, 0), (resamples, n), 0, n)
    x = jnp.asarray(data.x, jnp.float32)[idx]
    env = jnp.asarray(data.env)[idx]
    tg = jnp.broadcast_to(jnp.asarray(data.targets), (resamples, *data.targets.shape))
    std = x / jnp.std(x, axis=1, keepdims=True)
    full = jnp.asarray(data.x, jnp.float32)
    keys = jax.random.split(jax.random.fold_in(key, 1), resamples)
    out: dict[str, MethodAudit] = {}
    for name in methods:
        m = get_method(name)
        e, t = (env, tg) if m.uses_targets else (jnp.zeros_like(env), jnp.zeros_like(tg))
        try:
            if m.kind == "jax":
                fit = jax.jit(jax.vmap(batch_fit(m)))
                # raw resamples, standardised resamples and all rows (a resample's
                # shape) in one batch: one compile
                xs = jnp.concatenate([x, std, full[None]])
                ks = jnp.concatenate([keys, keys, keys[:1]])
                adj, finite = fit(ks, xs, jnp.concatenate([e, e, e[:1]]),
                                  jnp.concatenate([t, t, t[:1]]))
                adj, finite = np.asarray(adj), np.asarray(finite)
                raw, sd, whole = adj[:resamples], adj[resamples:2 * resamples], adj[-1]
                ok = finite[:resamples] & finite[resamples:2 * resamples]
            else:
                r = min(host_resamples, resamples)
                xn, en, tn = np.asarray(x), np.asarray(e), np.asarray(t)
                sn = np.asarray(std)
                raw = np.stack([m.fit(xn[i], en[i], tn[i]) for i in range(r)])
                sd = np.stack([m.fit(sn[i], en[i], tn[i]) for i in range(r)])
                whole = np.asarray(m.fit(data.x, data.env if m.uses_targets else
                                         np.zeros(n, np.int32), np.asarray(t[0])))
                ok = np.isfinite(raw).all(axis=(1, 2)) & np.isfinite(sd).all(axis=(1, 2))
            shd = np.asarray(jax.vmap(_shd)(jnp.asarray(np.nan_to_num(raw)),
                                            jnp.asarray(np.nan_to_num(sd))), float)
            out[name] = MethodAudit(
                full=np.nan_to_num(whole), frequency=(raw != 0).mean(axis=0),
                shd=np.where(ok, shd, np.nan),
                failed=None if ok.all() else f"{int((~ok).sum())} non-finite")
        except Exception as exc:  # a method that raises is a reported failure
            out[name] = MethodAudit(full=np.zeros((d, d)), frequency=np.zeros((d, d)),
                                    shd=np.full(resamples, np.nan),
                                    failed=f"raised {type(exc).__name__}: {exc}")
    return out


def claims(res: dict[str, MethodAudit], margin: float) -> list[Claim]:
    """Per method: its graph does not depend on the scale (module docstring); kind
    ``"extension"`` (a scope check on the user's table, not a paper claim)."""
    out = []
    for name, r in res.items():
        v = equivalence(r.shd, margin=margin)
        out.append(Claim.from_verdict(
            PAPER, f"{name}: its graph on your data does not depend on the measurement "
            f"scale (raw vs standardised SHD within {margin:g} edges).", v,
            note="Bootstrap resamples of your rows; " + (r.failed or "no failures"),
            kind="extension"))
    return out


def markdown(data: AuditTable, res: dict[str, MethodAudit], resamples: int) -> str:
    """The report section of the user-data audit."""
    n, d = data.x.shape
    k = int(data.targets.any(axis=1).sum())
    lines = [f"Your data: `{data.path}`, {n} rows x {d} variables, {k} interventional "
             f"environment(s). {resamples} bootstrap resamples, each fitted raw and "
             "standardised; no ground truth, so no F1.", "",
             markdown_table(["method", "mean SHD raw vs standardised", "edges (all rows)",
                             "mean edge stability", "failures"],
                            [[m, float(np.nanmean(r.shd)) if np.isfinite(r.shd).any()
                              else float("nan"), int((r.full != 0).sum()),
                              float(r.frequency[r.full != 0].mean())
                              if (r.full != 0).any() else float("nan"),
                              r.failed or "-"] for m, r in res.items()])]
    for m, r in res.items():
        edges = [[data.names[j], data.names[i], float(r.frequency[i, j])]
                 for i in range(d) for j in range(d) if r.full[i, j] != 0]
        lines += ["", f"### {m}: graph on all rows (edge frequency over resamples)", "",
                  markdown_table(["cause", "effect", "frequency"], edges) if edges
                  else "(no edges)"]
    return "\n".join(lines)
