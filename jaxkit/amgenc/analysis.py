"""Structure analysis of periodic cubic cells: minimum-image distances, radial
distribution functions, O coordination of cations, bond-angle distributions and their
L1 distance. NumPy, on the host.

Units: Angstrom, degrees.
"""

from __future__ import annotations

import numpy as np

from .tables import BOND_LENGTHS, ELEMENTS, box_edges, box_volume

__all__ = [
    "angle_distribution",
    "bond_angles",
    "coordination_numbers",
    "distribution_l1",
    "min_distance",
    "rdf",
]

_O = ELEMENTS.index("O")


def _distances(positions: np.ndarray, box: float) -> np.ndarray:
    p = np.asarray(positions, dtype=np.float64)
    d = p[:, None, :] - p[None, :, :]
    d -= box * np.rint(d / box)
    return np.sqrt(np.einsum("ijk,ijk->ij", d, d))


def min_distance(positions: np.ndarray, box: float) -> float:
    """Smallest minimum-image distance between two distinct atoms (A)."""
    r = _distances(positions, box)
    np.fill_diagonal(r, np.inf)
    return float(r.min())


def rdf(positions: np.ndarray, box: float, species_a_mask: np.ndarray | None = None,
        species_b_mask: np.ndarray | None = None, r_max: float | None = None,
        n_bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Partial radial distribution function g_ab(r) of a periodic cubic cell.

    ``g_ab(r) = V / n_pairs * (pairs i in a, j in b, i != j, at r) / (4 pi r^2 dr)`` with
    ``n_pairs = N_a N_b - |a & b|``, so g -> 1 for an uncorrelated system. ``None`` masks
    mean all atoms (the total g(r)); ``r_max`` defaults to and may not exceed ``box/2``.
    Returns (bin centres, g).
    """
    n = len(positions)
    a = np.ones(n, bool) if species_a_mask is None else np.asarray(species_a_mask, bool)
    b = np.ones(n, bool) if species_b_mask is None else np.asarray(species_b_mask, bool)
    if a.shape != (n,) or b.shape != (n,):
        raise ValueError("species masks must have one entry per atom")
    half = float(box_edges(box).min()) / 2  # the shortest edge's half
    r_max = half if r_max is None else float(r_max)
    if not 0 < r_max <= half + 1e-9:
        raise ValueError(f"r_max must lie in (0, box/2 = {half:.3f}]; got {r_max}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1; got {n_bins}")
    r = _distances(positions, box)[np.ix_(a, b)]
    same = np.flatnonzero(a)[:, None] == np.flatnonzero(b)[None, :]
    hist, edges = np.histogram(r[~same], bins=n_bins, range=(0.0, r_max))
    n_pairs = a.sum() * b.sum() - (a & b).sum()
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    g = hist * (box**3 if np.ndim(box) == 0 else box_volume(box)) / max(n_pairs, 1) / shell
    return 0.5 * (edges[1:] + edges[:-1]), g


def coordination_numbers(positions: np.ndarray, box: float, elements: np.ndarray,
                         scale: float = 1.3) -> np.ndarray:
    """O neighbours of each cation within ``scale`` x its bond length (0 for O atoms)."""
    elements = np.asarray(elements)
    r = _distances(positions, box)
    cut = np.array([BOND_LENGTHS.get(e, 0.0) for e in ELEMENTS])[elements] * scale
    is_o = elements == _O
    return ((r < cut[:, None]) & is_o[None, :] & ~is_o[:, None]).sum(axis=1)


def bond_angles(positions: np.ndarray, box: float, center_mask: np.ndarray,
                neighbor_mask: np.ndarray, cutoff: float) -> np.ndarray:
    """Angles (degrees) neighbour-centre-neighbour for all neighbour pairs within
    ``cutoff`` of each centre atom, e.g. O-Si-O with centre Si, neighbour O, 2.0 A."""
    p = np.asarray(positions, dtype=np.float64)
    center_mask = np.asarray(center_mask, bool)
    neighbor_mask = np.asarray(neighbor_mask, bool)
    out = []
    for c in np.flatnonzero(center_mask):
        d = p[neighbor_mask] - p[c]
        d -= box * np.rint(d / box)
        r = np.linalg.norm(d, axis=1)
        v = d[(r < cutoff) & (r > 0)]
        if len(v) < 2:
            continue
        u = v / np.linalg.norm(v, axis=1, keepdims=True)
        cos = np.clip(u @ u.T, -1.0, 1.0)
        iu = np.triu_indices(len(u), 1)
        out.append(np.degrees(np.arccos(cos[iu])))
    return np.concatenate(out) if out else np.zeros(0)


def angle_distribution(cells, center: tuple[str, ...], neighbour: tuple[str, ...], *,
                       cutoff: float = 2.0, bins: int = 36) -> tuple[np.ndarray, np.ndarray, int]:
    """Pooled bond-angle distribution neighbour-centre-neighbour over ``cells`` (each
    ``(positions, box, elements)``), e.g. O-T-O with centres the network formers and
    neighbours O within ``cutoff`` A. Returns (bin centres in degrees, probability density
    per degree over [0, 180], number of angles); the density is zero when no angle exists."""
    c_idx = [ELEMENTS.index(e) for e in center]
    n_idx = [ELEMENTS.index(e) for e in neighbour]
    angles = [bond_angles(pos, box, np.isin(el, c_idx), np.isin(el, n_idx), cutoff)
              for pos, box, el in cells]
    a = np.concatenate(angles) if angles else np.zeros(0)
    edges = np.linspace(0.0, 180.0, bins + 1)
    hist, _ = np.histogram(a, bins=edges)
    dens = hist / max(hist.sum(), 1) / (edges[1] - edges[0])
    return 0.5 * (edges[1:] + edges[:-1]), dens, int(a.size)


def distribution_l1(x: np.ndarray, p: np.ndarray, q: np.ndarray) -> float:
    """``integral |p - q|`` on the uniform grid ``x`` (0 for equal densities, 2 for
    disjoint ones)."""
    return float(np.sum(np.abs(p - q)) * (x[1] - x[0]))
