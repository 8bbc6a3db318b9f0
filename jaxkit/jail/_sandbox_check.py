"""What the sandbox's supervisor reports, checked by the parent: the instances it was
given and the packing it claims (:func:`_score_packing` replays the bins in item order)."""

from __future__ import annotations

import math

import numpy as np

from .packing import binpack_excess, l1_bound


class _Impossible(ValueError):
    """The reported packing cannot be right (message is the reason)."""


def _check_items(items: np.ndarray, capacity: float) -> np.ndarray:
    items = np.asarray(items, dtype=np.float64)
    if items.ndim == 1:
        items = items[None, :]
    if items.ndim != 2 or items.shape[1] == 0:
        raise ValueError(f"items must have shape (n_instances, n_items), got {items.shape}")
    if not (capacity > 0) or not np.isfinite(capacity):
        raise ValueError(f"capacity must be positive and finite, got {capacity}")
    if not np.all(np.isfinite(items)) or np.any(items <= 0) or np.any(items > capacity):
        raise ValueError("items must be finite, positive and no larger than capacity")
    return items


# ---------------------------------------------------------------------------------------
# Checking what the supervisor reports
# ---------------------------------------------------------------------------------------


def _score_packing(assignments, items: np.ndarray, capacity: float) -> tuple[tuple[int, ...],
                                                                            float]:
    """Bins used per instance and mean excess over L1 of the reported bin ``assignments``
    (one bin index per item, per instance), after checking them against ``items``.

    The bins are replayed in item order with the same float arithmetic as the packer, so
    the counts equal :func:`jaxkit.ballad.reference.online_binpack`'s. Raises
    :class:`_Impossible` when an index is out of range or not an integer, a bin ends over
    capacity, or fewer bins than the L1 bound are used.
    """
    if not isinstance(assignments, list) or len(assignments) != len(items):
        raise _Impossible(f"expected assignments for {len(items)} instances")
    used, excess = [], []
    for k, (chosen, row) in enumerate(zip(assignments, items, strict=True)):
        n = len(row)
        if (not isinstance(chosen, list) or len(chosen) != n
                or not all(type(b) is int for b in chosen)):
            raise _Impossible(f"instance {k}: expected {n} integer bin indices")
        idx = np.asarray(chosen, dtype=np.int64) if n else np.zeros(0, np.int64)
        if np.any(idx < 0) or np.any(idx >= n):
            raise _Impossible(f"instance {k}: bin index out of range")
        room = np.full(n, float(capacity))
        np.subtract.at(room, idx, row)  # in item order, as the packer subtracts
        if np.any(room < 0):
            raise _Impossible(f"instance {k}: a bin holds more than its capacity")
        bins = int(np.count_nonzero(room != capacity))
        if bins < l1_bound(row, capacity):
            raise _Impossible(f"instance {k}: {bins} bins, below the L1 bound")
        used.append(bins)
        excess.append(binpack_excess(bins, row, capacity))
    mean = float(np.mean(excess))
    if not (math.isfinite(mean) and mean >= 0.0):
        raise _Impossible(f"excess {mean} is not a finite non-negative number")
    return tuple(used), mean
