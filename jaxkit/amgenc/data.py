"""The AMGenC data: training and held-out glass cells, their condition vectors and their
padded arrays.

The condition of a cell is ``(density z-score, element fractions)``, and with
``Config.condition_cn`` also the z-score of its network formers' mean O coordination
(:func:`jaxkit.amgenc.design.former_cn`; 0, the training mean, for a cell without
formers): the density and the coordination normalised by the training cells' mean and
standard deviation, the fractions of each element among the atoms as they are. Cells are
padded to one size (a bucket of :func:`jaxkit.amgenc.potential.padded_size`) with an atom
mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import glass
from .config import Config
from .model import Batch

__all__ = ["Data", "Norm", "make_data", "element_fractions", "raw_targets", "conditioning",
           "condition", "pad_cells", "n_pad"]


@dataclass(frozen=True, eq=False)
class Data:
    """Training and held-out cells (:class:`jaxkit.amgenc.glass.Cell` lists) and one
    *twin* per held-out cell: the same recipe (oxide counts, box) with another packing
    and melt-quench seed, the yardstick of :mod:`jaxkit.amgenc.plausibility`;
    ``twin_source`` says where each twin came from (``"user"``: another of your cells
    with the same element counts; ``"recipe"`` / ``"published"``: generated; ``"self"``:
    the cell itself, no yardstick; empty in data made before it existed)."""

    train: list
    test: list
    twins: list = field(default_factory=list)
    twin_source: list = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class Norm:
    """Normalisation of the condition vector: density mean and std of the training cells,
    and the training range (``lo``, ``hi``) of every raw target (density, fractions, and
    the former coordination when ``with_cn``, whose mean and std are ``cn_mean`` and
    ``cn_std``)."""

    mean: float
    std: float
    lo: np.ndarray
    hi: np.ndarray
    with_cn: bool = False
    cn_mean: float = 0.0
    cn_std: float = 1.0

    def outside(self, raw: np.ndarray) -> np.ndarray:
        """(n, d) bool: raw targets outside the training range."""
        return (raw < self.lo - 1e-9) | (raw > self.hi + 1e-9)


def make_data(cfg: Config, rng: np.random.Generator) -> Data:
    """``cfg.n_train + cfg.n_test`` relaxed glass cells drawn from ``rng`` (the held-out
    ones last), then a twin of every held-out cell (seeds from ``rng``).

    ``cfg.user_train`` / ``cfg.user_test`` (paths of extended XYZ or CIF files,
    :func:`jaxkit.amgenc.userdata.read_cells`) replace the generated training / held-out
    cells. The twin of a held-out user cell is another of your cells (training or
    held-out) with the same species counts and box when there is one; else, when its
    species make whole oxide units, a twin made by the generator; else the cell itself
    (its twin distances are 0, so its ratios are not defined and the report shows them
    empty).

    ``cfg.dataset == "published"`` makes the generated cells and the twins by molecular
    dynamics with published potentials (:mod:`jaxkit.amgenc.melt_quench`, ``cfg.md_steps``
    steps); a user cell with species outside those potentials is its own twin."""
    from . import melt_quench
    from .userdata import read_cells

    published = cfg.dataset == "published"
    protocol = melt_quench.Protocol(steps=cfg.md_steps)
    n_gen = (0 if cfg.user_train else cfg.n_train) + (0 if cfg.user_test else cfg.n_test)
    if not n_gen:
        cells = []
    elif published:
        cells = melt_quench.generate(cfg.kind, n_gen, rng=rng, n_atoms=cfg.n_atoms,
                                     protocol=protocol)
    else:
        cells = glass.generate(cfg.kind, n_gen, rng=rng, n_atoms=cfg.n_atoms,
                               steps=cfg.relax_steps, min_steps=cfg.min_steps)
    train = read_cells(cfg.user_train) if cfg.user_train else cells[:cfg.n_train]
    test = read_cells(cfg.user_test) if cfg.user_test else cells[len(cells) - cfg.n_test:]
    twins, source = [], []
    pool = (train if cfg.user_train else []) + (test if cfg.user_test else [])
    for c in test:
        seed = int(rng.integers(2**31))
        mate = _user_twin(c, pool) if cfg.user_test else None
        if mate is not None:  # the yardstick from your own cells
            twins.append(mate)
            source.append("user")
            continue
        if c.oxide_counts.sum() == 0 or (published
                                         and not melt_quench.supports(c.oxide_counts)):
            twins.append(c)
            source.append("self")
            continue
        source.append(cfg.dataset)
        if published:
            twins.append(melt_quench.cell_from_counts(c.oxide_counts, seed=seed,
                                                      protocol=protocol))
            continue
        twins.append(glass.cell_from_counts(c.oxide_counts, seed=seed, steps=cfg.relax_steps,
                                            min_steps=cfg.min_steps))
    return Data(train=train, test=test, twins=twins, twin_source=source)


def _user_twin(cell, pool):
    """Another cell of ``pool`` with the same species counts and box (to 1%) as ``cell``
    (the first one), or None."""
    k = int(max(cell.elements.max(), max((int(c.elements.max()) for c in pool), default=0)))
    counts = np.bincount(cell.elements, minlength=k + 1)
    for other in pool:
        if other is cell or other.n_atoms != cell.n_atoms:
            continue
        if (np.array_equal(np.bincount(other.elements, minlength=k + 1), counts)
                and np.all(np.abs(glass.box_edges(other.box) - glass.box_edges(cell.box))
                           <= 0.01 * glass.box_edges(cell.box))):
            return other
    return None


def element_fractions(species: np.ndarray, k: int) -> np.ndarray:
    """Fractions of each of ``k`` species among the real atoms (``species >= 0``)."""
    s = np.asarray(species)
    s = s[s >= 0]
    return np.bincount(s, minlength=k) / max(s.size, 1)


def raw_targets(cells, k: int, *, cn: bool = False) -> np.ndarray:
    """(n, 1 + k): density (g/cm^3) and element fractions of each cell; with ``cn`` a last
    column, the mean O coordination of its network formers (NaN without formers)."""
    from .design import former_cn

    return np.array([[c.density, *element_fractions(c.elements, k),
                      *([former_cn(c.positions, c.box, c.elements)] if cn else [])]
                     for c in cells], np.float64).reshape(len(cells), 1 + k + int(cn))


def conditioning(train_cells, k: int, *, cn: bool = False) -> Norm:
    """The :class:`Norm` of the training cells (density and coordination stds floored at
    1e-3); ``cn`` adds the former coordination to the condition."""
    raw = raw_targets(train_cells, k, cn=cn)
    extra = {}
    if cn:
        c = raw[:, -1]
        if not np.isfinite(c).any():
            raise ValueError("condition_cn: no training cell has network-former cations "
                             "(Si, B, Al, P), so there is no coordination to condition on")
        extra = dict(with_cn=True, cn_mean=float(np.nanmean(c)),
                     cn_std=float(max(np.nanstd(c), 1e-3)))
    return Norm(mean=float(raw[:, 0].mean()), std=float(max(raw[:, 0].std(), 1e-3)),
                lo=np.nanmin(raw, 0), hi=np.nanmax(raw, 0), **extra)


def condition(cells, norm: Norm, k: int) -> np.ndarray:
    """(n, 1 + k) float32 condition vectors ((n, 2 + k) when ``norm.with_cn``)."""
    raw = raw_targets(cells, k, cn=norm.with_cn)
    raw[:, 0] = (raw[:, 0] - norm.mean) / norm.std
    if norm.with_cn:
        raw[:, -1] = np.nan_to_num((raw[:, -1] - norm.cn_mean) / norm.cn_std, nan=0.0)
    return raw.astype(np.float32)


def n_pad(data: Data) -> int:
    """The padded atom count of every cell of ``data``."""
    return glass.padded_size(max(c.n_atoms for c in data.train + data.test))


def pad_cells(cells, size: int, k: int, norm: Norm) -> Batch:
    """Cells padded to ``size`` atoms: a :class:`jaxkit.amgenc.model.Batch` of NumPy
    arrays (fractional coordinates, one-hot species, mask, box, condition); the box is
    (B,) cubic edges, or (B, 3) edges when a cell is orthorhombic."""
    b = len(cells)
    x = np.zeros((b, size, 3), np.float32)
    h = np.zeros((b, size, k), np.float32)
    mask = np.zeros((b, size), bool)
    for i, c in enumerate(cells):
        n = c.n_atoms
        if n > size:
            raise ValueError(f"`size` {size} is smaller than a cell of {n} atoms")
        x[i, :n] = np.mod(c.positions / c.box, 1.0)
        h[i, np.arange(n), c.elements] = 1.0
        mask[i, :n] = True
    if all(np.ndim(c.box) == 0 for c in cells):
        box = np.array([c.box for c in cells], np.float32)
    else:  # an orthorhombic cell among them: (B, 3) edges for every cell
        box = np.stack([glass.box_edges(c.box) for c in cells]).astype(np.float32)
    return Batch(x, h, mask, box, condition(cells, norm, k))
