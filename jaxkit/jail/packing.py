"""The measures of online bin packing that the jail scores itself (the task the jail's
candidates solve, :mod:`jaxkit.jail.sandbox`): the L1 lower bound on the number of bins
and the excess over it. NumPy only (no JAX). Ballad's reference evaluators
(:mod:`jaxkit.ballad.reference`) use the same two functions.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["l1_bound", "binpack_excess"]


def l1_bound(items: np.ndarray, capacity: float) -> int:
    """The L1 lower bound on the number of bins, ``ceil(sum(items) / capacity)`` (Martello
    and Toth 1990).

    Args:
        items: the item sizes of one instance.
        capacity: the bin capacity.

    Returns:
        The bound, an int.
    """
    return int(math.ceil(float(np.sum(np.asarray(items, dtype=np.float64))) / float(capacity)))


def binpack_excess(n_bins: int, items: np.ndarray, capacity: float) -> float:
    """Excess over L1 in percent, ``100 * (bins - L1) / L1`` (FunSearch's measure).

    Args:
        n_bins: the bins a packing used.
        items: the item sizes of the instance.
        capacity: the bin capacity.

    Returns:
        The excess in percent (0 for a packing at the bound).
    """
    lb = l1_bound(items, capacity)
    return 100.0 * (n_bins - lb) / lb
