"""The PC algorithm (order-independent PC-stable) with Fisher-z tests, as one fixed-shape
kernel: skeleton, separating sets, v-structures and Meek's rules, returning the CPDAG.

**Skeleton** (Spirtes & Glymour 1991; the order-independent *stable* variant of Colombo
& Maathuis 2014). Start from the complete undirected graph. At level ``l = 0, 1, ...,
max_depth``, with the adjacencies ``a(.)`` frozen at the start of the level, an edge
``i - j`` is removed when some conditioning set ``S`` of size ``l`` with ``S subset
a(i) \\ {j}`` or ``S subset a(j) \\ {i}`` makes ``x_i`` and ``x_j`` conditionally
independent at level ``alpha`` by Fisher's z test:

.. math::
    z = \\tfrac12 \\log\\frac{1 + r}{1 - r}\\,\\sqrt{n - |S| - 3}, \\qquad
    \\text{independent} \\iff 2\\,(1 - \\Phi(|z|)) > \\alpha,

with ``r = rho_{ij.S}`` the sample partial correlation. Every subset of size ``l`` is
enumerated at trace time (a static index table, masked by the frozen adjacencies), and
``rho_{ij.S}`` for all pairs at once comes from the residual covariance of the
correlation matrix ``R`` given ``S``, ``C = R - R_{.S} R_{SS}^{-1} R_{S.}``, built by
``|S|`` sweeps ``C <- C - C_{.k} C_{k.} / C_{kk}`` (``k in S``): plain ``jnp`` ops, no
LAPACK call, so the kernel is safe to ``vmap`` on XLA:CPU (see
``kernels/_batching.py``). ``rho_{ij.S} = C_ij / sqrt(C_ii C_jj)``, clipped to
``+-(1 - eps)`` as in causal-learn.

**Separating sets.** For a removed pair ``(i, j)`` :attr:`PCResult.sepset` marks every
node that lies in *some* separating set found at the removal level, from either end
(the union, as causal-learn's stable skeleton records it; order-independent).

**Orientation.** An unshielded triple ``x - y - z`` (``x``, ``z`` not adjacent) is a
v-structure ``x -> y <- z`` when ``y`` is in no recorded separating set of ``(x, z)``.
Arrowheads of all v-structures are added at once, so conflicting v-structures leave a
bidirected edge (causal-learn's ``uc_priority=1``; the order-independent choice of
Colombo & Maathuis). Then Meek's rules (Meek 1995), applied to every edge at once and
repeated until nothing changes:

* R1: ``a -> b - c``, ``a``, ``c`` not adjacent: ``b -> c``;
* R2: ``a -> b -> c`` and ``a - c``: ``a -> c``;
* R3: ``a - b -> d``, ``a - c -> d``, ``b``, ``c`` not adjacent, ``a - d``: ``a -> d``.

(R4 only fires with background knowledge.) Without conflicts the result is the CPDAG of
the PC-stable skeleton; if two rules orient one edge both ways in the same sweep the
edge becomes bidirected.

**Encoding** (LiNGAM's, as the rest of :mod:`jaxkit.kernels.sem` and the causal-audit
grid): ``cpdag[i, j] = 1`` for ``j -> i``; an undirected (or bidirected) edge has both
entries.

References:
    P. Spirtes, C. Glymour, "An algorithm for fast recovery of sparse causal graphs",
    Social Science Computer Review 9 (1991).
    D. Colombo, M. H. Maathuis, "Order-independent constraint-based causal structure
    learning", JMLR 15 (2014).
    C. Meek, "Causal inference and causal explanation with background knowledge",
    UAI 1995.

Everything is fixed-shape (``d`` and ``max_depth`` static, the data's ``n`` static) and
runs eagerly, under ``jit`` and under ``vmap``; ``alpha`` may be traced.

**The CPDAG of a known DAG** (:func:`dag_to_cpdag`; Chickering 1995, Meek 1995): the
same orientation machinery on the true graph. Its skeleton, the arrowheads of its
unshielded colliders ``x -> y <- z`` (``x``, ``z`` not adjacent), then Meek's rules
R1-R3, which are complete without background knowledge: the result is the essential
graph (every compelled edge directed, every reversible edge undirected). With
intervention targets ``I`` (an observational environment plus the target sets), the
interventional essential graph of Hauser & Buhlmann (2012, JMLR 13): an edge ``a - b``
is also oriented as in the DAG when some target set contains exactly one of ``a``,
``b``, then Meek's rules close the pattern.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri
from jaxtyping import Array, Bool, Float

from ..checks import check_data_matrix, check_in_range, fail

__all__ = ["PCResult", "pc", "dag_to_cpdag"]


class PCResult(NamedTuple):
    """Result of :func:`pc` (``d`` variables)."""

    cpdag: Float[Array, "d d"]  # [i, j] = 1: j -> i, or i - j (both entries)
    skeleton: Bool[Array, "d d"]  # symmetric adjacency of the skeleton
    arrowheads: Bool[Array, "d d"]  # [i, j]: the edge i - j has an arrowhead at i
    sepset: Bool[Array, "d d d"]  # [i, j, k]: k in a separating set of the removed i, j


def _subsets(d: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """All subsets of ``range(d)`` of ``size`` as an index table ``(M, size)`` and a mask
    ``(M, d)`` (static NumPy; ``M = C(d, size)``)."""
    combos = list(itertools.combinations(range(d), size))
    idx = np.array(combos, np.int32).reshape(len(combos), size)
    mask = np.zeros((idx.shape[0], d), bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return idx, mask


def _residual_cov(r, idx):
    """``C = R - R_{.S} R_{SS}^{-1} R_{S.}`` for each subset ``S`` (rows of ``idx``) by
    sweeping ``R`` on the members of ``S`` one after another: ``(M, d, d)``."""
    c = jnp.broadcast_to(r, (idx.shape[0], *r.shape))
    rows = jnp.arange(idx.shape[0])
    for t in range(idx.shape[1]):
        k = jnp.asarray(idx[:, t])
        ck = c[rows, :, k]  # (M, d): column k of each C
        ckk = ck[rows, k]
        c = c - ck[:, :, None] * ck[:, None, :] / ckk[:, None, None]
    return c


def _skeleton(r, n: int, crit, max_depth: int):
    """The PC-stable skeleton and the union of separating sets (module docstring)."""
    d = r.shape[0]
    eps = jnp.finfo(r.dtype).eps
    adj = ~jnp.eye(d, dtype=bool)
    sep = jnp.zeros((d, d, d), bool)
    for level in range(max_depth + 1):
        idx, mask = _subsets(d, level)
        c = _residual_cov(r, idx) if level else r[None]
        diag = jnp.diagonal(c, axis1=1, axis2=2)
        rho = c / jnp.sqrt(jnp.abs(diag[:, :, None] * diag[:, None, :]))
        rho = jnp.clip(rho, -(1 - eps), 1 - eps)
        z = jnp.abs(jnp.arctanh(rho)) * np.sqrt(n - level - 3)
        indep = z < crit  # p = 2 (1 - Phi(|z|)) > alpha
        m = jnp.asarray(mask)
        # S subset a(i): no member of S outside a(i) (a(i) excludes i itself)
        inside = (m.astype(jnp.int32) @ (~adj).astype(jnp.int32).T) == 0  # (M, d)
        side_i = inside[:, :, None] & ~m[:, None, :]  # S subset a(i) \ {j}
        found = indep & adj[None] & (side_i | jnp.swapaxes(side_i, 1, 2))
        removed = jnp.any(found, axis=0)
        sep_l = jnp.einsum("mij,mk->ijk", found.astype(r.dtype), m.astype(r.dtype)) > 0
        sep = jnp.where(removed[:, :, None], sep_l, sep)
        adj = adj & ~removed
    return adj, sep


def _meek(skel, head):
    """Meek's rules R1-R3 applied to every edge at once until nothing changes."""
    d = skel.shape[0]
    nonadj = ~skel & ~jnp.eye(d, dtype=bool)
    f = jnp.float32

    def new_orientations(head):
        dirn = skel & head.T & ~head  # [a, b]: a -> b
        und = skel & ~head & ~head.T
        df, uf = dirn.astype(f), und.astype(f)
        r1 = (df.T @ nonadj.astype(f)) > 0  # [b, c]: some a -> b with a, c not adjacent
        r2 = (df @ df) > 0  # [a, c]: a -> b -> c
        r3 = jnp.einsum("ab,ac,bd,cd,bc->ad", uf, uf, df, df, nonadj.astype(f)) > 0
        return und & (r1 | r2 | r3)  # [a, b]: orient a -> b

    def cond(state):
        return state[1] & (state[2] < d * d)

    def body(state):
        head, _, it = state
        new = new_orientations(head)
        return head | new.T, jnp.any(new), it + 1

    head, _, _ = jax.lax.while_loop(cond, body, (head, jnp.asarray(True), 0))
    return head


def pc(x: Float[Array, "n d"], *, alpha=0.05, max_depth: int | None = None) -> PCResult:
    """The PC-stable algorithm with Fisher-z tests; see the module docstring.

    Differentiable: no: a 0/1 graph from conditional-independence tests (piecewise constant).

    Args:
        x: data ``(n, d)``, rows i.i.d. draws (finite, no constant column).
        alpha: level of each conditional-independence test, in ``(0, 1)`` (may be
            traced).
        max_depth: the largest conditioning-set size (static int ``>= 0``; ``None``:
            ``d - 2``, the unrestricted PC). Values above ``d - 2`` act as ``d - 2``.

    Returns:
        :class:`PCResult`: the CPDAG (``cpdag[i, j] = 1`` for ``j -> i``, both entries
        for an undirected edge), the skeleton, the arrowhead marks and the separating
        sets.

    Raises:
        ValueError: ``x`` not ``(n, d)`` with ``d >= 2``, non-finite or with a constant
            column; ``n < max_depth + 4`` (the z statistic needs ``n - |S| - 3 > 0``);
            ``alpha`` outside ``(0, 1)``; ``max_depth`` not a non-negative int.
    """
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(
            max_depth, int | np.integer) or max_depth < 0):
        raise ValueError(f"`max_depth` must be a non-negative int or None; got {max_depth!r}")
    check_in_range(alpha, "alpha", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    if getattr(x, "ndim", None) == 2:  # shape checks first: they need no compilation
        n, d = x.shape
        if d < 2:
            raise ValueError(f"`x` needs at least 2 variables; got shape {x.shape}")
        depth = d - 2 if max_depth is None else min(int(max_depth), d - 2)
        if n < depth + 4:
            raise ValueError(f"`x` has {n} rows; Fisher's z with conditioning sets up to "
                             f"size {depth} needs at least {depth + 4}")
    x = check_data_matrix(x, "x")
    n, d = x.shape
    depth = d - 2 if max_depth is None else min(int(max_depth), d - 2)
    alpha = jnp.asarray(alpha, x.dtype)
    alpha = fail(alpha, ~((alpha > 0) & (alpha < 1)), "`alpha` must be in (0, 1)")
    crit = ndtri(1 - alpha / 2)

    xc = x - jnp.mean(x, axis=0)
    cov = xc.T @ xc
    sd = jnp.sqrt(jnp.diagonal(cov))
    r = cov / (sd[:, None] * sd[None, :])
    r = (r + r.T) / 2  # exactly symmetric, so every test is symmetric in (i, j)

    skel, sep = _skeleton(r, n, crit, depth)
    # v-structures x -> y <- z: y in no separating set of (x, z)
    head = _meek(skel, _collider_heads(_unshielded(skel) & ~jnp.swapaxes(sep, 1, 2)))
    return PCResult(_encode(skel, head, x.dtype), skel, head & skel, sep)


def dag_to_cpdag(b: Float[Array, "d d"], targets: Bool[Array, "k d"] | None = None
                 ) -> Float[Array, "d d"]:
    """The CPDAG (essential graph) of the DAG ``b``, or with ``targets`` its
    interventional essential graph; see the module docstring.

    The skeleton of ``b``, the arrowheads of its unshielded colliders ``x -> y <- z``
    (``x``, ``z`` not adjacent), with ``targets`` also the arrowhead of every edge
    ``a -> c`` that some target set cuts (``|I_k cap {a, c}| = 1``), then Meek's rules
    R1-R3 to closure (the same orientation code as :func:`pc`). Pure and fixed-shape
    (``jit``/``vmap``-safe).

    Differentiable: no: a 0/1 graph (piecewise constant).

    References:
        D. M. Chickering, "A transformational characterization of equivalent Bayesian
        network structures", UAI 1995. C. Meek, "Causal inference and causal
        explanation with background knowledge", UAI 1995. A. Hauser, P. Buhlmann,
        "Characterization and greedy learning of interventional Markov equivalence
        classes of directed acyclic graphs", JMLR 13 (2012).

    Args:
        b: the DAG, ``b[i, j] != 0`` for ``j -> i`` (assumed acyclic, zero diagonal).
        targets: optional ``(k, d)`` boolean intervention targets, one row per
            environment (an all-false row is observational; the characterisation
            assumes the family contains one, as the causal-audit simulator's does).
            ``None`` or all false: the observational CPDAG.

    Returns:
        ``(d, d)`` in ``b``'s floating dtype (float32 for integer/bool ``b``):
        ``[i, j] = 1`` for a compelled ``j -> i``, both entries for an undirected edge.
    """
    b = jnp.asarray(b)
    dtype = b.dtype if jnp.issubdtype(b.dtype, jnp.floating) else jnp.float32
    d = b.shape[0]
    par = (b != 0) & ~jnp.eye(d, dtype=bool)  # par[i, j]: j -> i (arrowhead at i)
    skel = par | par.T
    # unshielded colliders x -> y <- z: coll[x, y, z] = par[y, x] & par[y, z]
    head = _collider_heads(_unshielded(skel) & par.T[:, :, None] & par[None, :, :])
    if targets is not None:
        t = jnp.asarray(targets, bool).reshape(-1, d).astype(jnp.int32)
        # cut[a, c]: some target set holds exactly one of a, c
        cut = (t.T @ (1 - t) + (1 - t).T @ t) > 0
        head = head | (par & cut)
    return _encode(skel, _meek(skel, head), dtype)


def _unshielded(skel):
    """``[x, y, z]``: the unshielded triple ``x - y - z`` (``x``, ``z`` not adjacent,
    ``x != z``), ``(d, d, d)``."""
    nonadj = ~skel & ~jnp.eye(skel.shape[0], dtype=bool)
    return skel[:, :, None] & skel[None, :, :] & nonadj[:, None, :]


def _collider_heads(coll):
    """The arrowheads of the colliders ``coll[x, y, z]`` (``x -> y <- z``), all at once:
    ``head[y, x]``."""
    return jnp.any(coll, axis=2).T


def _encode(skel, head, dtype):
    """Skeleton and arrowheads as the CPDAG encoding: ``[i, j] = 1`` for ``j -> i``,
    both entries for an undirected (or bidirected) edge."""
    dirn = skel & head.T & ~head  # [a, b]: a -> b
    return (skel & ~dirn).astype(dtype)
