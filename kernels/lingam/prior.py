"""Prior knowledge for LiNGAM fits: validation and the constraints it implies.

Convention (lingam's ``prior_knowledge``, e.g. ``lingam.utils.make_prior_knowledge``):
an ``(d, d)`` matrix ``pk`` with ``pk[i, j] = 1`` when ``x_j`` has a directed path to
``x_i`` (known), ``0`` when it has none (forbidden) and ``-1`` (or NaN) when unknown;
row ``i`` is the effect, as in the adjacency matrices. The diagonal is ignored.

Strong use (lingam's default): the partial order of lingam's
``DirectLiNGAM._extract_partial_orders``: ``pk[i, j] = 1`` puts ``j`` before ``i``;
``pk[i, j] = 0`` puts ``i`` before ``j`` unless ``pk[j, i] = 0`` as well (no path either
way: no order implied). A variable may be the next in a causal order only when every
variable that must precede it is already ordered. Pruning never uses a forbidden parent
(``pk[i, j] = 0``), as lingam's ``_estimate_adjacency_matrix``.

Soft use (lingam's ``apply_prior_knowledge_softly=True``): see :func:`soft_candidates`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool

__all__ = ["check_prior_knowledge", "partial_order", "strong_candidates", "soft_candidates",
           "allowed_parents"]


def check_prior_knowledge(prior_knowledge, d: int, *, name: str = "prior_knowledge"
                          ) -> np.ndarray:
    """Validate a prior-knowledge matrix as lingam does, and a little more.

    Checks: the shape is ``(d, d)`` (lingam: "The shape of prior knowledge must be
    (n_features, n_features)"); every entry is ``-1``, ``0``, ``1`` or NaN (NaN and any
    negative value mean unknown, as lingam's ``np.where(pk < 0, nan, pk)``; other values
    are an error here, where lingam would silently treat them as neither); no pair is
    known in both directions (``pk[i, j] = pk[j, i] = 1``, lingam's "The prior knowledge
    contains inconsistencies at the following indices: ..."), nor ``1`` on the diagonal
    (lingam reports that pair too); and the partial order it implies is acyclic (lingam
    would fail later with an empty candidate set).

    Differentiable: no: NumPy on the host.

    Args:
        prior_knowledge: array-like ``(d, d)``, concrete (it shapes the computation).
        d: the number of variables.
        name: the argument's name, for the messages.

    Returns:
        The matrix as an int8 NumPy array with entries ``-1`` / ``0`` / ``1`` and ``-1``
        on the diagonal.

    Raises:
        ValueError: bad shape, values, or inconsistent knowledge.
    """
    try:
        pk = np.array(prior_knowledge, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{name}` must be a numeric (d, d) matrix: {e}") from None
    if pk.shape != (d, d):
        raise ValueError(f"The shape of `{name}` must be (n_features, n_features) = "
                         f"({d}, {d}); got {pk.shape}")
    pk = np.where(np.isnan(pk) | (pk < 0), -1.0, pk)
    bad = ~np.isin(pk, (-1.0, 0.0, 1.0))
    if bad.any():
        where = np.argwhere(bad)[:5].tolist()
        raise ValueError(f"`{name}` entries must be 1 (path), 0 (no path) or -1 / NaN "
                         f"(unknown); got {pk[bad][:5].tolist()} at {where}")
    known = pk == 1
    clash = (known & known.T) | np.diag(np.diag(known))
    if clash.any():
        raise ValueError(f"The `{name}` contains inconsistencies at the following indices: "
                         f"{np.argwhere(clash).tolist()} (a path in both directions)")
    out = pk.astype(np.int8)
    np.fill_diagonal(out, -1)
    before = partial_order(out)
    cyc = _cycle(before)
    if cyc:
        raise ValueError(f"The `{name}` is inconsistent: its implied causal order has a "
                         f"cycle through variables {cyc} (known paths and forbidden paths "
                         f"that contradict each other)")
    return out


def partial_order(pk) -> np.ndarray:
    """``before[a, b]``: ``a`` must precede ``b`` in any causal order (see the module
    docstring). ``pk`` as returned by :func:`check_prior_knowledge`.

    Differentiable: no: NumPy on the host.
    """
    pk = np.asarray(pk)
    path = pk == 1  # path[i, j]: j -> i, so j before i
    none = pk == 0  # none[i, j]: no path j -> i, so i before j ...
    none = none & ~none.T  # ... unless there is no path either way
    before = path.T | none
    np.fill_diagonal(before, False)
    return before


def _cycle(before: np.ndarray) -> list[int]:
    """The variables left on a cycle of ``before`` (empty when acyclic)."""
    left = np.ones(before.shape[0], bool)
    while left.any():
        free = left & ~np.any(before & left[:, None], axis=0)
        if not free.any():
            return np.flatnonzero(left).tolist()
        left &= ~free
    return []


def allowed_parents(pk) -> np.ndarray:
    """``allowed[i, j]``: ``x_j`` may be a parent of ``x_i`` in the pruned graph (not
    forbidden by ``pk[i, j] = 0``).

    Differentiable: no: NumPy on the host.
    """
    return np.asarray(pk) != 0


def strong_candidates(before: Bool[Array, "d d"], remaining: Bool[Array, " d"]
                      ) -> Bool[Array, " d"]:
    """Remaining variables with no remaining variable that must precede them (lingam's
    ``_search_candidate`` with ``apply_prior_knowledge_softly=False``).

    Differentiable: no: boolean output.

    Args:
        before: ``(d, d)`` bool, ``before[a, b]``: ``a`` must precede ``b``
            (:func:`partial_order`).
        remaining: ``(d,)`` bool mask of the variables not yet ordered.

    Returns:
        ``(d,)`` bool mask of the candidates.
    """
    return remaining & ~jnp.any(before & remaining[:, None], axis=0)


def soft_candidates(pk, remaining: Bool[Array, " d"]
                    ) -> tuple[Bool[Array, " d"], Bool[Array, " d"]]:
    """lingam's ``_search_candidate`` with ``apply_prior_knowledge_softly=True``.

    Over the remaining set ``U``: the candidates ``Uc`` are the variables known to have
    no parent in ``U`` (``pk[j, k] = 0`` for every other ``k`` in ``U``); if there is
    none, every variable of ``U`` except those with a known parent in ``U``
    (``pk[j, k] = 1``) and the sinks (``pk[k, i] = 0`` for every other ``k``). ``Vj``:
    the non-candidates known not to be caused by any candidate; in the pairwise measure
    their residual on a candidate is replaced by the variable itself. Where lingam's
    rule leaves no candidate (it would then fail), every remaining variable is one.

    Differentiable: no: boolean output.

    Args:
        pk: ``(d, d)`` int array as returned by :func:`check_prior_knowledge`.
        remaining: mask of the variables still to be ordered.

    Returns:
        ``(candidates, vj)`` masks ``(d,)``.
    """
    pk = jnp.asarray(pk)
    d = pk.shape[0]
    others = remaining[None, :] & ~jnp.eye(d, dtype=bool)  # [j, k]: k in U, k != j
    exo = remaining & jnp.all(jnp.where(others, pk == 0, True), axis=1)
    endo = jnp.any(others & (pk == 1), axis=1)
    sink = jnp.all(jnp.where(others, pk.T == 0, True), axis=1)  # [i]: pk[k, i] = 0 for all k
    uc = jnp.where(jnp.any(exo), exo, remaining & ~(endo | sink))
    uc = jnp.where(jnp.any(uc), uc, remaining)
    vj = remaining & ~uc & jnp.all(jnp.where(uc[None, :], pk == 0, True), axis=1)
    return uc, vj
