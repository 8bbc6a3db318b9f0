"""Physical plausibility of generated cells against the data recipe's own noise floor.

For every generated cell conditioned on held-out target ``t``:

* **close pairs**: the smallest minimum-image distance and whether any pair is closer
  than :data:`MIN_DISTANCE` (1 A; the recipe's cells have none: Si-O is 1.61 A);
* **partial RDFs** ``g_ab(r)`` for the element groups T (network formers Si, B, Al, P),
  M (modifiers, Fe included) and O: T-O, O-O, T-T and M-O, on ``r <= r_max``; the distance of two
  cells is ``integral |g_a(r) - g_b(r)| dr`` (A);
* **bond angles**: the O-T-O (intra-polyhedron) and T-O-T (bridging) angle densities
  (neighbours within :data:`ANGLE_CUTOFF`), distance ``integral |p_a - p_b|`` (0 to 2).

The yardstick is the **twin** of every target: a second reference cell of the same
recipe (the same oxide counts and box, another packing and melt-quench seed;
:func:`jaxkit.amgenc.data.make_data`). The distance between a target and its twin is how
much two independent cells of one recipe differ at this size; a generated cell meets the
plausibility target on a quantity when its distance to the target is at most twice that
(averaged over the cells, :data:`TWIN_FACTOR`). A quantity absent from a cell (no
modifier in silica, no bond angle found) is NaN and left out of the means.
"""

from __future__ import annotations

import numpy as np

from .analysis import angle_distribution, distribution_l1, min_distance, rdf
from .results import Plausibility, _nanmean
from .tables import ELEMENTS

__all__ = ["MIN_DISTANCE", "ANGLE_CUTOFF", "TWIN_FACTOR", "PARTIALS", "ANGLES", "groups",
           "structure", "distances", "plausibility"]

MIN_DISTANCE = 1.0  # A
ANGLE_CUTOFF = 2.0  # A: T-O bonds (1.37-1.75 A in the recipe), no O-O or T-T pairs
TWIN_FACTOR = 2.0
FORMER_SYMBOLS = ("Si", "B", "Al", "P")
MODIFIER_SYMBOLS = ("Li", "Na", "K", "Ca", "Mg", "Zn", "Ba", "Fe2+", "Fe3+")
#: partial RDFs: name -> (group a, group b)
PARTIALS: dict[str, tuple[str, str]] = {"T-O": ("T", "O"), "O-O": ("O", "O"),
                                        "T-T": ("T", "T"), "M-O": ("M", "O")}
#: bond angles: name -> (centre symbols, neighbour symbols)
ANGLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "O-T-O": (FORMER_SYMBOLS, ("O",)), "T-O-T": (("O",), FORMER_SYMBOLS)}
_GROUPS = {"T": FORMER_SYMBOLS, "M": MODIFIER_SYMBOLS, "O": ("O",)}


def groups(elements: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks of the groups T, M, O for element indices into :data:`ELEMENTS`."""
    el = np.asarray(elements)
    return {g: np.isin(el, [ELEMENTS.index(s) for s in sym]) for g, sym in _GROUPS.items()}


def structure(pos: np.ndarray, box: float, elements: np.ndarray, r_max: float,
              n_bins: int = 50) -> dict:
    """One cell's structure: ``r`` (bin centres), every partial RDF of :data:`PARTIALS`
    (None when a group is empty, or a same-group partial has one atom), every angle
    density of :data:`ANGLES` (None without angles), ``degrees`` and ``min_distance``."""
    gm = groups(elements)
    out: dict = {"min_distance": min_distance(pos, box)}
    for name, (a, b) in PARTIALS.items():
        ma, mb = gm[a], gm[b]
        if ma.sum() == 0 or mb.sum() == 0 or (a == b and ma.sum() < 2):
            out[name] = None
            continue
        out["r"], out[name] = rdf(pos, box, ma, mb, r_max=r_max, n_bins=n_bins)
    for name, (centre, nbr) in ANGLES.items():
        x, dens, n = angle_distribution([(pos, box, elements)], centre, nbr,
                                        cutoff=ANGLE_CUTOFF)
        out[name] = dens if n else None
        out["degrees"] = x
    if "r" not in out:
        out["r"] = rdf(pos, box, r_max=r_max, n_bins=n_bins)[0]
    return out


def distances(a: dict, b: dict) -> dict[str, float]:
    """L1 distances of two :func:`structure` results per quantity (NaN where either
    lacks it)."""
    dr = a["r"][1] - a["r"][0]
    out = {}
    for name in PARTIALS:
        ok = a[name] is not None and b[name] is not None
        out[name] = float(np.sum(np.abs(a[name] - b[name])) * dr) if ok else float("nan")
    for name in ANGLES:
        ok = a[name] is not None and b[name] is not None
        out[name] = distribution_l1(a["degrees"], a[name], b[name]) if ok else float("nan")
    return out


def plausibility(gen: list[dict], target_index: np.ndarray, ref: list[dict],
                 twin: list[dict]) -> Plausibility:
    """Per-cell and mean plausibility of generated cells.

    Args:
        gen: :func:`structure` of every generated cell.
        target_index: (B,) the held-out target of each generated cell.
        ref: :func:`structure` of every held-out target.
        twin: :func:`structure` of every target's twin (same recipe, other seed).

    Returns:
        :class:`jaxkit.amgenc.results.Plausibility`: ``no_close_pair`` (share of cells
        with no pair under 1 A), ``per_cell`` (name -> (B,) distance to the own target;
        ``no_close_pair`` 0/1), ``gen`` and ``twin`` (name -> mean distance to the
        target, the twin's over the targets of the cells), ``ratio`` (gen / twin),
        ``meets`` (name -> gen <= TWIN_FACTOR x twin) and ``all_met`` (every quantity
        and >= 90 % of cells without a close pair).
    """
    t_idx = np.asarray(target_index)
    twin_d = [distances(twin[t], ref[t]) for t in range(len(ref))]
    per = {name: np.array([distances(g, ref[t])[name] for g, t in zip(gen, t_idx,
                                                                        strict=True)])
           for name in (*PARTIALS, *ANGLES)}
    per["no_close_pair"] = np.array([g["min_distance"] >= MIN_DISTANCE for g in gen], float)
    g_mean, t_mean, ratio, meets = {}, {}, {}, {}
    for name in (*PARTIALS, *ANGLES):
        tw = np.array([twin_d[t][name] for t in t_idx])
        ok = np.isfinite(per[name]) & np.isfinite(tw)
        g_mean[name] = _nanmean(np.where(ok, per[name], np.nan))
        t_mean[name] = _nanmean(np.where(ok, tw, np.nan))
        ratio[name] = g_mean[name] / t_mean[name] if t_mean[name] > 0 else float("nan")
        meets[name] = bool(ok.any() and g_mean[name] <= TWIN_FACTOR * t_mean[name])
    share = float(per["no_close_pair"].mean()) if len(gen) else float("nan")
    return Plausibility(no_close_pair=share, per_cell=per, gen=g_mean, twin=t_mean,
                        ratio=ratio, meets=meets,
                        all_met=bool(share >= 0.9 and all(meets[n] for n in meets
                                                          if np.isfinite(g_mean[n]))))
