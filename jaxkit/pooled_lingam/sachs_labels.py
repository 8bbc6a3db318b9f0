"""Sachs et al. (2005) with its environments: pooled ICA-LiNGAM (no labels) against
label-aware methods given the conditions and their targets, bootstrapped within the
conditions.

The shipped file (:mod:`jaxkit.data.sachs`) concatenates nine conditions without labels;
its row blocks (``SACHS_CHANGE_POINTS``) have 853, 902, 911, 723, 810, 799, 848, 913 and
707 rows, the row counts of Sachs et al.'s nine files of the main result in their
published order (1. cd3cd28, 2. cd3cd28icam2, 3. +aktinhib, 4. +g0076, 5. +psitect,
6. +u0126, 7. +ly, 8. pma, 9. b2camp; the same nine counts are asserted by other
readers of the original files, e.g. J. L. Gamella's 2020 Sachs loader). Two signatures
check the mapping in the tests:
the psitectorigenin block (a PIP2 inhibitor) has the lowest PIP2 median and the U0126
block (a MEK inhibitor) the lowest p44/42 (Erk) median. The targets are the reagents'
intended targets (Sachs et al. 2005, Table 1): Akt inhibitor -> pakts473, G06976 ->
PKC, psitectorigenin -> PIP2, U0126 -> pmek, LY294002 -> PIP3 (via PI3K), PMA -> PKC,
beta2cAMP -> PKA; cd3cd28 and cd3cd28 + ICAM-2 are general stimuli (no target:
observational environments).

Methods on each resample (rows drawn with replacement within each condition, so every
resample keeps the conditions' sizes and the fits' shapes):

* ``pooled-ica``: ICA-LiNGAM on the pooled rows, no labels (one FastICA start per
  resample, so the interval includes the initialisation's spread);
* ``gies``: GIES (``gies.fit_bic``) given the conditions and their targets, scored as
  it returns (an undirected edge counts both ways);
* ``jci-direct``: a JCI-style method (Mooij, Magliacane & Claassen 2020): one 0/1
  context column per non-reference condition appended to the proteins, DirectLiNGAM on
  the joint table with the prior knowledge that context variables have no parents (nor
  any path into them); the proteins' block of its graph is scored;
* ``chance``: the negative control, the mean F1 of ``chance_graphs`` random DAGs with
  as many edges as the consensus (a random order, then that many of its forward pairs).

Every graph is scored against the 18-edge consensus
(:func:`jaxkit.kernels.graph.edge_metrics`: F1 over directed edges, SHD counting a
reversal once).
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxkit import distributed as jd
from jaxkit.kernels import graph as gm
from jaxkit.kernels import lingam
from jaxkit.stats import Verdict, as_generator

from .methods import fit_ica, gies_fit
from .results import SachsComparison

__all__ = ["CONDITIONS", "LABEL_METHODS", "sachs_environments", "resample_within",
           "jci_direct", "chance_f1", "sachs_compare", "bootstrap_equivalence"]

#: (condition, intended targets) of the nine blocks, in file order (module docstring)
CONDITIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cd3cd28", ()), ("cd3cd28+icam2", ()), ("cd3cd28+aktinhib", ("pakts473",)),
    ("cd3cd28+g0076", ("PKC",)), ("cd3cd28+psitect", ("PIP2",)),
    ("cd3cd28+u0126", ("pmek",)), ("cd3cd28+ly", ("PIP3",)), ("pma", ("PKC",)),
    ("b2camp", ("PKA",)))
#: the label-aware methods, then the negative control
LABEL_METHODS = ("gies", "jci-direct")
TRANSFORMS = ("raw", "log")


def sachs_environments(names, change_points) -> tuple[np.ndarray, np.ndarray]:
    """The condition of each row and the targets of each condition.

    Args:
        names: the 11 column names of :func:`jaxkit.data.sachs.load_sachs`.
        change_points: the end row (exclusive) of each of the 9 blocks.

    Returns:
        ``(env (n,) int32, targets (9, d) bool)``.
    """
    cp = np.asarray(change_points)
    if cp.shape != (len(CONDITIONS),) or (np.diff(cp) <= 0).any():
        raise ValueError(f"`change_points` must be {len(CONDITIONS)} increasing row ends; "
                         f"got {tuple(change_points)}")
    idx = {n: j for j, n in enumerate(names)}
    missing = sorted({t for _, ts in CONDITIONS for t in ts} - set(idx))
    if missing:
        raise ValueError(f"`names` lacks the target column(s) {missing}")
    env = np.repeat(np.arange(len(CONDITIONS), dtype=np.int32),
                    np.diff(np.concatenate([[0], cp])))
    targets = np.zeros((len(CONDITIONS), len(names)), bool)
    for k, (_, ts) in enumerate(CONDITIONS):
        targets[k, [idx[t] for t in ts]] = True
    return env, targets


def resample_within(rng: np.random.Generator, env: np.ndarray) -> np.ndarray:
    """Row indices of a bootstrap resample drawn within each environment: position ``i``
    gets a row of ``env[i]``'s environment, so ``env[idx] == env``."""
    env = np.asarray(env)
    idx = np.empty(env.size, np.int64)
    for k in np.unique(env):
        rows = np.nonzero(env == k)[0]
        idx[rows] = rows[rng.integers(0, rows.size, rows.size)]
    return idx


@functools.lru_cache(maxsize=4)
def _jci_fit(n_ctx: int, d: int):
    pk = -np.ones((n_ctx + d, n_ctx + d))
    pk[:n_ctx, :] = 0.0  # nothing has a path into a context variable
    np.fill_diagonal(pk, -1.0)
    return jax.jit(lambda z: lingam.direct_lingam(z, prior_knowledge=pk).adjacency)


def jci_direct(x, env, n_envs: int) -> np.ndarray:
    """JCI-style DirectLiNGAM (module docstring): context columns ``env == k`` for
    ``k = 1 .. n_envs - 1`` (environment 0 is the reference), prior knowledge that they
    have no parents, DirectLiNGAM on ``[context, x]``.

    Args:
        x: rows ``(n, d)``.
        env: environment of each row ``(n,)`` in ``0 .. n_envs - 1``.
        n_envs: number of environments (>= 2).

    Returns:
        The proteins' block ``(d, d)`` of the estimated weighted adjacency
        (``[i, j] != 0``: ``j -> i``).
    """
    if n_envs < 2:
        raise ValueError(f"`n_envs` must be >= 2; got {n_envs}")
    x = np.asarray(x, np.float64)
    ctx = (np.asarray(env)[:, None] == np.arange(1, n_envs)[None, :]).astype(x.dtype)
    adj = np.asarray(_jci_fit(n_envs - 1, x.shape[1])(jnp.asarray(np.hstack([ctx, x]))))
    return adj[n_envs - 1:, n_envs - 1:]


def chance_f1(rng: np.random.Generator, truth, n_graphs: int) -> float:
    """Mean F1 (directed edges) against ``truth`` of ``n_graphs`` random DAGs with as many
    edges as ``truth`` (a uniform random order, then a uniform subset of its forward
    pairs)."""
    truth = np.asarray(truth) != 0
    d, k = truth.shape[0], int(truth.sum())
    iu = np.triu_indices(d, 1)
    f1 = []
    for _ in range(n_graphs):
        order = rng.permutation(d)
        pick = rng.choice(iu[0].size, k, replace=False)
        est = np.zeros((d, d), bool)
        # order[a] precedes order[b] (a < b): order[a] -> order[b], i.e. [b, a] entry
        est[order[iu[1][pick]], order[iu[0][pick]]] = True
        tp = int((est & truth).sum())
        f1.append(2.0 * tp / (est.sum() + k))
    return float(np.mean(f1))


def _metrics(truth, est) -> tuple[float, float]:
    m = jax.device_get(gm.edge_metrics(truth, (np.asarray(est) != 0).astype(np.float64)))
    return float(m["f1"]), float(m["shd"])


def sachs_compare(key, *, n_boot: int, transform: str = "log", chunk: int = 4,
                  chance_graphs: int = 64, mesh=None) -> SachsComparison:
    """Every method of the module docstring on the Sachs rows (replicate 0) and on
    ``n_boot`` resamples within the conditions (replicates 1 .. n_boot).

    Args:
        key: PRNG key (the resamples and the chance graphs from ``fold_in(key, 0)``, the
            FastICA starts from ``fold_in(key, 1)``).
        n_boot: bootstrap resamples (>= 2).
        transform: ``"raw"`` or ``"log"`` (the same for every method).
        chunk: ICA fits per compiled batch (pass the Sachs stage's batch size, ``2 *
            sachs.restarts``, to reuse its compile).
        chance_graphs: random DAGs averaged per replicate for the chance control.
        mesh: a mesh whose ``"data"`` axis splits the ICA fits, or None.

    Returns:
        A :class:`~.results.SachsComparison`: ``f1[m]`` and ``shd[m]`` are
        ``(n_boot + 1,)`` arrays, index 0 the full data (``shd`` has no ``chance``
        entry).
    """
    from jaxkit.data.sachs import SACHS_CHANGE_POINTS, load_sachs

    if n_boot < 2:
        raise ValueError(f"`n_boot` must be >= 2; got {n_boot}")
    if transform not in TRANSFORMS:
        raise ValueError(f"`transform` must be one of {TRANSFORMS}; got {transform!r}")
    if chunk < 1 or chance_graphs < 1:
        raise ValueError(f"`chunk` and `chance_graphs` must be >= 1; got {chunk}, "
                         f"{chance_graphs}")
    x_raw, names, truth = load_sachs()
    x = np.log(x_raw) if transform == "log" else x_raw
    env, targets = sachs_environments(names, SACHS_CHANGE_POINTS)
    rng = as_generator(jax.random.fold_in(key, 0))
    reps = [np.arange(env.size)] + [resample_within(rng, env) for _ in range(n_boot)]
    f1 = {m: [] for m in ("pooled-ica", *LABEL_METHODS, "chance")}
    shd = {m: [] for m in ("pooled-ica", *LABEL_METHODS)}
    secs = dict.fromkeys(f1, 0.0)
    dtype = jnp.result_type(float)
    keys = jax.random.split(jax.random.fold_in(key, 1), len(reps))
    dmesh = jd.data_mesh(mesh)
    seq = jax.default_backend() == "cpu"
    for start in range(0, len(reps), chunk):
        t0 = time.perf_counter()
        batch = jnp.asarray(np.stack([x[i] for i in reps[start:start + chunk]]), dtype)
        placed, n = jd.shard_batch((keys[start:start + chunk], batch), dmesh, size=chunk)
        adj = np.asarray(jax.device_get(fit_ica(*placed, dmesh, sequential=seq).adjacency))
        for a in adj[:n]:
            for m, v in zip(("f1", "shd"), _metrics(truth, a), strict=True):
                (f1 if m == "f1" else shd)["pooled-ica"].append(v)
        secs["pooled-ica"] += time.perf_counter() - t0
    for idx in reps:
        xr = x[idx]
        for m in LABEL_METHODS:
            t0 = time.perf_counter()
            est = gies_fit(xr, env, targets) if m == "gies" else \
                jci_direct(xr, env, len(CONDITIONS))
            a, b = _metrics(truth, est)
            f1[m].append(a)
            shd[m].append(b)
            secs[m] += time.perf_counter() - t0
        t0 = time.perf_counter()
        f1["chance"].append(chance_f1(rng, truth, chance_graphs))
        secs["chance"] += time.perf_counter() - t0
    return SachsComparison(
        methods=list(f1), f1={m: np.asarray(v, np.float64) for m, v in f1.items()},
        shd={m: np.asarray(v, np.float64) for m, v in shd.items()}, seconds=secs,
        n_boot=n_boot, transform=transform, conditions=[c for c, _ in CONDITIONS],
        n_rows=[int((env == k).sum()) for k in range(len(CONDITIONS))])


def bootstrap_equivalence(diffs, *, margin: float, level: float = 0.90) -> Verdict:
    """Equivalence (TOST at alpha ``(1 - level) / 2``) of a paired difference from its
    bootstrap replicates: ``diffs[0]`` is the estimate on the data, ``diffs[1:]`` the
    resamples; "yes" if the ``level`` percentile interval of ``diffs[1:]`` lies inside
    ``(-margin, margin)``, "no" if it lies wholly outside, else "not shown" (Efron &
    Tibshirani 1993, ch. 13; Schuirmann 1987).

    Args:
        diffs: ``(1 + B,)`` differences, the data's first.
        margin: the equivalence margin (> 0).
        level: coverage of the interval (0.90: TOST at 0.05).

    Returns:
        A :class:`jaxkit.stats.Verdict` (``n`` = B).
    """
    if not margin > 0:
        raise ValueError(f"`margin` must be > 0; got {margin}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}")
    d = np.asarray(diffs, np.float64)
    boot = d[1:][np.isfinite(d[1:])]
    test = (f"equivalence (TOST: {level:.0%} percentile bootstrap interval, rows resampled "
            f"within each condition, within ±{margin:g}), B={boot.size}")
    if boot.size < 2:
        return Verdict("not shown", float(d[0]) if d.size else np.nan, np.nan, np.nan,
                       int(boot.size), test + ": fewer than 2 finite resamples")
    lo, hi = (float(v) for v in np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]))
    verdict = ("yes" if -margin < lo and hi < margin else
               "no" if hi <= -margin or lo >= margin else "not shown")
    return Verdict(verdict, float(d[0]), lo, hi, int(boot.size), test)
